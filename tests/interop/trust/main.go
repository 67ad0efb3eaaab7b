// Command trust checks stele's signed checkpoints, Merkle tree hashes and proofs with
// implementations no one at stele wrote: Go's golang.org/x/mod/sumdb/note and
// golang.org/x/mod/sumdb/tlog. tests/test_trust_interop.c runs it both ways.
//
//	trust check DIR       verifies what the C side wrote into DIR (exit 0, or 1 naming the
//	                      first thing that did not verify)
//	trust sign DIR NAME N writes a key pair Go generated, a checkpoint of N leaves Go signed,
//	                      the leaves, Go's stored hashes and Go's proofs, for the C side
//	trust bundle FILE PUB checks a proof bundle of `stele prove` (FORMAT.md section 11.6)
//	                      from the verifier key file PUB alone: the key statements with
//	                      note.Open, one after the other from PUB, the checkpoint with the
//	                      last key, the record's inclusion with tlog.CheckRecord
//
// The files of DIR, in both directions:
//
//	verifier.key     the verifier key string and a newline
//	signer.key       (sign only) the signer key string and a newline, mode 0600
//	checkpoint.note  a signed note whose text is a C2SP tlog checkpoint
//	leaves           one leaf per line, its data in hex
//	hashes           the tree's stored hashes, 32 bytes each, in stored-index order
//	inclusion        lines "INDEX SIZE ROOT HASH...": leaf INDEX in the tree of SIZE leaves
//	consistency      lines "OLD NEW OLDROOT NEWROOT HASH...": the tree of OLD leaves in NEW
//
// Hashes in text files are base64, as in checkpoints.
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 3 && os.Args[1] == "check":
		err = check(os.Args[2])
	case len(os.Args) == 5 && os.Args[1] == "sign":
		err = sign(os.Args[2], os.Args[3], os.Args[4])
	case len(os.Args) == 4 && os.Args[1] == "bundle":
		err = bundle(os.Args[2], os.Args[3])
	default:
		err = errors.New("usage: trust check DIR | trust sign DIR NAME SIZE | trust bundle FILE PUB")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trust:", err)
		os.Exit(1)
	}
}

// hashFile serves the stored hashes of a file to tlog as a HashReader.
type hashFile []byte

func (f hashFile) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || (x+1)*tlog.HashSize > int64(len(f)) {
			return nil, fmt.Errorf("stored hash %d is past the end of the hashes file", x)
		}
		copy(out[i][:], f[x*tlog.HashSize:])
	}
	return out, nil
}

type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

// parseCheckpoint reads the three lines of a C2SP tlog checkpoint (extensions are ignored).
func parseCheckpoint(text string) (checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 {
		return checkpoint{}, fmt.Errorf("checkpoint %q has fewer than three lines", text)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return checkpoint{}, fmt.Errorf("checkpoint size %q", lines[1])
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		return checkpoint{}, fmt.Errorf("checkpoint root %q: %v", lines[2], err)
	}
	return checkpoint{lines[0], size, root}, nil
}

func readLeaves(dir string) ([][]byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, "leaves"))
	if err != nil {
		return nil, err
	}
	var leaves [][]byte
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if line == "" {
			break
		}
		leaf, err := hex.DecodeString(strings.TrimSuffix(line, "\n"))
		if err != nil {
			return nil, fmt.Errorf("leaf %d: %v", len(leaves), err)
		}
		leaves = append(leaves, leaf)
	}
	return leaves, nil
}

// proofLines reads "N1 N2 HASH..." lines: the numbers, then the hashes.
func proofLines(path string, numbers int, each func(n []int64, h []tlog.Hash) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	scan := bufio.NewScanner(f)
	scan.Buffer(make([]byte, 64*1024), 1024*1024)
	for line := 1; scan.Scan(); line++ {
		fields := strings.Fields(scan.Text())
		if len(fields) < numbers {
			return fmt.Errorf("%s:%d: too few fields", path, line)
		}
		n := make([]int64, numbers)
		for i := range n {
			if n[i], err = strconv.ParseInt(fields[i], 10, 64); err != nil {
				return fmt.Errorf("%s:%d: %v", path, line, err)
			}
		}
		var hashes []tlog.Hash
		for _, s := range fields[numbers:] {
			h, err := tlog.ParseHash(s)
			if err != nil {
				return fmt.Errorf("%s:%d: %v", path, line, err)
			}
			hashes = append(hashes, h)
		}
		if err := each(n, hashes); err != nil {
			return fmt.Errorf("%s:%d: %v", path, line, err)
		}
	}
	return scan.Err()
}

func sameProof(a, b []tlog.Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// openCheckpoint verifies the signed checkpoint of dir with its verifier key.
func openCheckpoint(dir string) (checkpoint, error) {
	vkey, err := os.ReadFile(filepath.Join(dir, "verifier.key"))
	if err != nil {
		return checkpoint{}, err
	}
	verifier, err := note.NewVerifier(strings.TrimSuffix(string(vkey), "\n"))
	if err != nil {
		return checkpoint{}, fmt.Errorf("verifier key: %v", err)
	}
	msg, err := os.ReadFile(filepath.Join(dir, "checkpoint.note"))
	if err != nil {
		return checkpoint{}, err
	}
	n, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		return checkpoint{}, fmt.Errorf("signed checkpoint: %v", err)
	}
	return parseCheckpoint(n.Text)
}

// checkStoredHashes recomputes the stored hashes from the leaves with tlog and compares
// them with the file: same hashes at the same indexes.
func checkStoredHashes(leaves [][]byte, stored hashFile) error {
	var mine []byte
	for i, leaf := range leaves {
		hashes, err := tlog.StoredHashes(int64(i), leaf, hashFile(mine))
		if err != nil {
			return err
		}
		for _, h := range hashes {
			mine = append(mine, h[:]...)
		}
	}
	if int64(len(mine)) != tlog.StoredHashCount(int64(len(leaves)))*tlog.HashSize {
		return errors.New("tlog's own stored hash count disagrees")
	}
	if !bytes.Equal(mine, stored) {
		for i := 0; i < len(mine) && i < len(stored); i += tlog.HashSize {
			if !bytes.Equal(mine[i:i+tlog.HashSize], stored[i:i+tlog.HashSize]) {
				level, n := tlog.SplitStoredHashIndex(int64(i / tlog.HashSize))
				return fmt.Errorf("stored hash %d (level %d, index %d) differs", i/tlog.HashSize,
					level, n)
			}
		}
		return fmt.Errorf("hashes file is %d bytes; tlog stores %d", len(stored), len(mine))
	}
	return nil
}

func check(dir string) error {
	cp, err := openCheckpoint(dir)
	if err != nil {
		return err
	}
	leaves, err := readLeaves(dir)
	if err != nil {
		return err
	}
	if int64(len(leaves)) != cp.size {
		return fmt.Errorf("%d leaves for a checkpoint of %d", len(leaves), cp.size)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "hashes"))
	if err != nil {
		return err
	}
	stored := hashFile(raw)
	if err := checkStoredHashes(leaves, stored); err != nil {
		return err
	}
	root, err := tlog.TreeHash(cp.size, stored)
	if err != nil {
		return err
	}
	if cp.size > 0 && root != cp.root {
		return fmt.Errorf("tree hash of %d leaves is %v; the checkpoint says %v", cp.size, root,
			cp.root)
	}
	nIncl, nCons := 0, 0
	err = proofLines(filepath.Join(dir, "inclusion"), 2, func(n []int64, p []tlog.Hash) error {
		index, size := n[0], n[1]
		if index < 0 || index >= int64(len(leaves)) || size > int64(len(leaves)) {
			return fmt.Errorf("leaf %d of %d is out of range", index, size)
		}
		if len(p) < 1 {
			return errors.New("no root")
		}
		root, proof := p[0], tlog.RecordProof(p[1:])
		if err := tlog.CheckRecord(proof, size, root, index, tlog.RecordHash(leaves[index])); err != nil {
			return fmt.Errorf("CheckRecord(leaf %d, tree %d): %v", index, size, err)
		}
		mine, err := tlog.ProveRecord(size, index, stored)
		if err != nil || !sameProof(mine, proof) {
			return fmt.Errorf("ProveRecord(leaf %d, tree %d) gives another proof (%v)", index, size, err)
		}
		nIncl++
		return nil
	})
	if err != nil {
		return err
	}
	err = proofLines(filepath.Join(dir, "consistency"), 2, func(n []int64, p []tlog.Hash) error {
		oldSize, newSize := n[0], n[1]
		if len(p) < 2 {
			return errors.New("no roots")
		}
		oldRoot, newRoot, proof := p[0], p[1], tlog.TreeProof(p[2:])
		for _, tree := range []struct {
			size int64
			root tlog.Hash
		}{{oldSize, oldRoot}, {newSize, newRoot}} {
			h, err := tlog.TreeHash(tree.size, stored)
			if err != nil || (tree.size > 0 && h != tree.root) {
				return fmt.Errorf("TreeHash(%d) is not the root given (%v)", tree.size, err)
			}
		}
		if oldSize == 0 { // tlog proves only from non-empty trees
			nCons++
			return nil
		}
		if err := tlog.CheckTree(proof, newSize, newRoot, oldSize, oldRoot); err != nil {
			return fmt.Errorf("CheckTree(%d -> %d): %v", oldSize, newSize, err)
		}
		mine, err := tlog.ProveTree(newSize, oldSize, stored)
		if err != nil || !sameProof(mine, proof) {
			return fmt.Errorf("ProveTree(%d -> %d) gives another proof (%v)", oldSize, newSize, err)
		}
		nCons++
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("ok: %s: checkpoint of %d leaves, %d inclusion and %d consistency proofs\n",
		cp.origin, cp.size, nIncl, nCons)
	return nil
}

func sign(dir, name, sizeText string) error {
	size, err := strconv.ParseInt(sizeText, 10, 64)
	if err != nil || size < 1 {
		return fmt.Errorf("size %q", sizeText)
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return err
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		return err
	}
	var leaves, hashes, inclusion, consistency bytes.Buffer
	var stored hashFile
	for i := int64(0); i < size; i++ {
		leaf := []byte(fmt.Sprintf("go leaf %d", i))
		fmt.Fprintf(&leaves, "%x\n", leaf)
		hs, err := tlog.StoredHashes(i, leaf, stored)
		if err != nil {
			return err
		}
		for _, h := range hs {
			stored = append(stored, h[:]...)
		}
	}
	hashes.Write(stored)
	roots := make([]tlog.Hash, size+1)
	for n := int64(1); n <= size; n++ {
		if roots[n], err = tlog.TreeHash(n, stored); err != nil {
			return err
		}
	}
	for i := int64(0); i < size; i++ {
		p, err := tlog.ProveRecord(size, i, stored)
		if err != nil {
			return err
		}
		fmt.Fprintf(&inclusion, "%d %d %v%s\n", i, size, roots[size], joinHashes(p))
	}
	for m := int64(1); m <= size; m++ {
		p, err := tlog.ProveTree(size, m, stored)
		if err != nil {
			return err
		}
		fmt.Fprintf(&consistency, "%d %d %v %v%s\n", m, size, roots[m], roots[size], joinHashes(p))
	}
	text := fmt.Sprintf("%s\n%d\n%v\n", name, size, roots[size])
	msg, err := note.Sign(&note.Note{Text: text}, signer)
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"signer.key", []byte(skey + "\n"), 0o600},
		{"verifier.key", []byte(vkey + "\n"), 0o644},
		{"checkpoint.note", msg, 0o644},
		{"leaves", leaves.Bytes(), 0o644},
		{"hashes", hashes.Bytes(), 0o644},
		{"inclusion", inclusion.Bytes(), 0o644},
		{"consistency", consistency.Bytes(), 0o644},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}

func joinHashes(p []tlog.Hash) string {
	var b strings.Builder
	for _, h := range p {
		b.WriteString(" ")
		b.WriteString(h.String())
	}
	return b.String()
}

// proofBundle is the JSON of `stele prove` (FORMAT.md section 11.6); the event is not
// needed here: the leaf data is what the proof is about.
type proofBundle struct {
	Version    int      `json:"stele_proof"`
	Origin     string   `json:"origin"`
	Seq        int64    `json:"seq"`
	LeafData   string   `json:"leaf_data"`
	TreeSize   int64    `json:"tree_size"`
	Inclusion  []string `json:"inclusion"`
	Checkpoint string   `json:"checkpoint"`
	Keys       []string `json:"keys"`
}

// nextKey opens a key statement with v and returns the verifier its "key E VKEY" line names
// for epoch `epoch`.
func nextKey(statement string, v note.Verifier, epoch int, origin string) (note.Verifier, error) {
	n, err := note.Open([]byte(statement), note.VerifierList(v))
	if err != nil {
		return nil, fmt.Errorf("key statement %d: %v", epoch, err)
	}
	lines := strings.Split(strings.TrimSuffix(n.Text, "\n"), "\n")
	if len(lines) < 7 || lines[0] != origin {
		return nil, fmt.Errorf("key statement %d is not one of %s", epoch, origin)
	}
	fields := strings.Fields(lines[len(lines)-1])
	if len(fields) != 3 || fields[0] != "key" || fields[1] != strconv.Itoa(epoch) {
		return nil, fmt.Errorf("key statement %d names no key of epoch %d", epoch, epoch)
	}
	return note.NewVerifier(fields[2])
}

func bundle(file, pubFile string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var b proofBundle
	if err := json.Unmarshal(raw, &b); err != nil {
		return fmt.Errorf("bundle: %v", err)
	}
	if b.Version != 1 || b.Seq < 1 || len(b.Keys) == 0 {
		return errors.New("bundle: not a version 1 proof of a record with its keys")
	}
	pub, err := os.ReadFile(pubFile)
	if err != nil {
		return err
	}
	v, err := note.NewVerifier(strings.TrimSuffix(string(pub), "\n"))
	if err != nil {
		return fmt.Errorf("public key: %v", err)
	}
	for i, statement := range b.Keys {
		if v, err = nextKey(statement, v, i, b.Origin); err != nil {
			return err
		}
	}
	n, err := note.Open([]byte(b.Checkpoint), note.VerifierList(v))
	if err != nil {
		return fmt.Errorf("checkpoint: %v", err)
	}
	cp, err := parseCheckpoint(n.Text)
	if err != nil {
		return err
	}
	if cp.origin != b.Origin || cp.size != b.TreeSize {
		return fmt.Errorf("checkpoint of %s, %d leaves; the bundle says %s, %d", cp.origin,
			cp.size, b.Origin, b.TreeSize)
	}
	leaf, err := base64.StdEncoding.DecodeString(b.LeafData)
	if err != nil || len(leaf) < 32 || int64(binary.LittleEndian.Uint64(leaf)) != b.Seq {
		return errors.New("leaf_data is not the record of the bundle's seq")
	}
	var proof tlog.RecordProof
	for _, s := range b.Inclusion {
		h, err := tlog.ParseHash(s)
		if err != nil {
			return fmt.Errorf("inclusion: %v", err)
		}
		proof = append(proof, h)
	}
	if err := tlog.CheckRecord(proof, cp.size, cp.root, b.Seq-1, tlog.RecordHash(leaf)); err != nil {
		return fmt.Errorf("CheckRecord(seq %d, tree %d): %v", b.Seq, cp.size, err)
	}
	fmt.Printf("ok: %s: seq %d in the checkpoint of %d leaves, %d key statements\n", b.Origin,
		b.Seq, cp.size, len(b.Keys))
	return nil
}
