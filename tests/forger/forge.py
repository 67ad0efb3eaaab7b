#!/usr/bin/env python3
"""forge.py: rewrites a stele journal the way an attacker with root would, from the journal's
format specification (journal/FORMAT.md) alone.

Each command leaves a journal that passes every check a forger can satisfy: CRCs, the hash
chain, sequence numbers, segment headers and their compact ranges, the LOCK page. What it
cannot produce is a signature by a key it does not hold; `stele verify --trust` must notice.
The program knows nothing of stele's code: only sections 2-5 and 10-11 of FORMAT.md.

    forge.py alter DIR SEQ FIND REPL [--sign fresh|KEYFILE]
        replace the bytes FIND by REPL (same length) in record SEQ's event and re-chain every
        later record; with --sign, also recompute the root of every checkpoint at or after
        SEQ and sign it again, with a fresh key of the same name or with the signer key file
        KEYFILE (its own epoch written in the statement's epoch line)
    forge.py delete DIR SEQ       remove record SEQ and renumber the later ones
    forge.py trim DIR LAST        remove every frame after record LAST; fix the LOCK page
    forge.py drop-oldest DIR K    delete the K oldest segments and the index
    forge.py mangle-signature DIR SIZE
        replace the signature line of the checkpoint of tree size SIZE by one that is not
        base64
    forge.py list DIR             print each statement: tree size, epoch, reason
    forge.py resign DIR SIZE KEYFILE
        sign the checkpoint of tree size SIZE again with KEYFILE (its epoch line changed to
        the key file's epoch), as the holder of a later epoch's key would

Needs python3 and the `cryptography` package (Debian: python3-cryptography) for Ed25519.
Exits 0 when the journal was rewritten, 1 when it could not do what was asked.
"""
import base64
import hashlib
import os
import shutil
import struct
import sys

try:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
except ImportError:  # the driver skips the test; a direct run says why
    Ed25519PrivateKey = None

# Section 2: the segment header page.
HEADER_BYTES = 4096
SEG_MAGIC = b"STELESEG"
HEADER_CRC_AT = 168
EXT_CRC_AT = 172
EXT_CRC_FROM, EXT_CRC_TO = 176, 2216
RANGE_AT, RANGE_MAX = 192, 2024
# Section 3: frames.
FRAME_MAGIC = 0x524C5453
FRAME_HEADER_V2 = 88
FLAG_BATCH_END, FLAG_META = 1, 2
# Section 11.2: meta frame types.
META_CHECKPOINT, META_KEY = 1, 2
SIG_DASH = "\u2014 "


def fail(msg):
    print("forge: " + msg, file=sys.stderr)
    sys.exit(1)


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def sha256(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.digest()


class Tree:
    """The compact range of section 10.1: the size and one peak per set bit, highest first."""

    def __init__(self, size=0, peaks=None):
        self.size = size
        self.peaks = list(peaks or [])

    @classmethod
    def decode(cls, raw):
        size = struct.unpack_from("<Q", raw, 0)[0]
        n = bin(size).count("1")
        return cls(size, [raw[8 + 32 * i:40 + 32 * i] for i in range(n)])

    def encode(self):
        return struct.pack("<Q", self.size) + b"".join(self.peaks)

    def append(self, leaf_hash):
        node, size = leaf_hash, self.size
        while size & 1:
            node = sha256(b"\x01", self.peaks.pop(), node)
            size >>= 1
        self.peaks.append(node)
        self.size += 1

    def root(self):
        if not self.peaks:
            return sha256()
        node = self.peaks[-1]
        for peak in reversed(self.peaks[:-1]):
            node = sha256(b"\x01", peak, node)
        return node

    def copy(self):
        return Tree(self.size, self.peaks)


class Frame:
    def __init__(self, raw, off):
        (magic, _crc, plen, self.flags, self.seq, self.ts, self.synced) = struct.unpack_from(
            "<IIIIQqQ", raw, off)
        if magic != FRAME_MAGIC:
            raise ValueError("no frame")
        self.hash = raw[off + 40:off + 72]
        self.origin = raw[off + 72:off + 88]
        self.payload = raw[off + 88:off + 88 + plen]

    @property
    def is_meta(self):
        return bool(self.flags & FLAG_META)

    def leaf_data(self):
        return struct.pack("<Qq", self.seq, self.ts) + self.origin + self.payload

    def encode(self):
        body = struct.pack("<IQqQ", self.flags, self.seq, self.ts, self.synced)
        body = struct.pack("<I", len(self.payload)) + body + self.hash + self.origin
        crc = crc32c(self.payload, crc32c(body))
        raw = struct.pack("<II", FRAME_MAGIC, crc) + body + self.payload
        return raw + b"\0" * (-len(raw) % 8)


class Segment:
    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            raw = f.read()
        self.file_bytes = len(raw)
        self.header = bytearray(raw[:HEADER_BYTES])
        if self.header[:8] != SEG_MAGIC or self.version != 2:
            fail("%s: not a version 2 segment" % path)
        self.frames = []
        off = HEADER_BYTES
        while off + FRAME_HEADER_V2 <= len(raw):
            try:
                fr = Frame(raw, off)
            except ValueError:
                break
            self.frames.append(fr)
            off += FRAME_HEADER_V2 + len(fr.payload) + (-len(fr.payload) % 8)

    version = property(lambda s: struct.unpack_from("<I", s.header, 8)[0])
    first_seq = property(lambda s: struct.unpack_from("<Q", s.header, 16)[0])
    genesis = property(lambda s: bytes(s.header[104:136]))
    prev_hash = property(lambda s: bytes(s.header[136:168]))
    prev_ts = property(lambda s: struct.unpack_from("<q", s.header, 32)[0])

    def range(self):
        n = struct.unpack_from("<I", self.header, 180)[0]
        return Tree.decode(bytes(self.header[RANGE_AT:RANGE_AT + n]))

    def set_start(self, first_seq, prev_ts, prev_hash, tree):
        struct.pack_into("<Q", self.header, 16, first_seq)
        struct.pack_into("<q", self.header, 32, prev_ts)
        self.header[136:168] = prev_hash
        rng = tree.encode()
        struct.pack_into("<I", self.header, 180, len(rng))
        self.header[RANGE_AT:RANGE_AT + RANGE_MAX] = rng + b"\0" * (RANGE_MAX - len(rng))
        struct.pack_into("<I", self.header, HEADER_CRC_AT, crc32c(self.header[:HEADER_CRC_AT]))
        struct.pack_into("<I", self.header, EXT_CRC_AT,
                         crc32c(self.header[EXT_CRC_FROM:EXT_CRC_TO]))

    def name(self):
        return "%020d.seg" % self.first_seq

    def encode(self):
        body = b"".join(fr.encode() for fr in self.frames)
        size = max(self.file_bytes, HEADER_BYTES + len(body))
        return bytes(self.header) + body + b"\0" * (size - HEADER_BYTES - len(body))


class Journal:
    def __init__(self, path):
        self.path = path
        names = sorted(n for n in os.listdir(path) if n.endswith(".seg"))
        if not names:
            fail("%s holds no segment" % path)
        self.segments = [Segment(os.path.join(path, n)) for n in names]

    def records(self):
        return [fr for seg in self.segments for fr in seg.frames if not fr.is_meta]

    def record(self, seq):
        for seg in self.segments:
            for i, fr in enumerate(seg.frames):
                if not fr.is_meta and fr.seq == seq:
                    return seg, i
        fail("no record %d" % seq)

    def rechain(self):
        """Renumbers the records from the oldest segment's first_seq, recomputes every leaf,
        chain hash, header (prev_ts, prev_hash, range) and, at write, every CRC."""
        first = self.segments[0]
        seq, ts, prev, tree = first.first_seq - 1, first.prev_ts, first.prev_hash, first.range()
        self.roots = {tree.size: tree.root()}
        for seg in self.segments:
            seg.set_start(seq + 1, ts, prev, tree)
            for fr in seg.frames:
                if fr.is_meta:
                    fr.seq = seq
                    fr.synced = 0
                    continue
                seq += 1
                fr.seq = seq
                fr.synced = min(fr.synced, seq - 1)
                leaf = sha256(b"\x00", fr.leaf_data())
                fr.hash = sha256(prev, leaf)
                prev, ts = fr.hash, fr.ts
                tree.append(leaf)
                self.roots[tree.size] = tree.root()
        return seq

    def write(self):
        """Writes every segment under the name its first_seq gives, then removes the files of
        names no longer used."""
        keep = set()
        for seg in self.segments:
            name = seg.name()
            keep.add(name)
            tmp = os.path.join(self.path, name + ".forge")
            with open(tmp, "wb") as f:
                f.write(seg.encode())
            os.chmod(tmp, 0o600)
            os.replace(tmp, os.path.join(self.path, name))
        for n in os.listdir(self.path):
            if n.endswith(".seg") and n not in keep:
                os.unlink(os.path.join(self.path, n))

    def fix_lock(self, last_seq):
        """LOCK (section 5): visible_seq and durable_seq at the new last record, no writer."""
        path = os.path.join(self.path, "LOCK")
        with open(path, "r+b") as f:
            page = bytearray(f.read(4096))
            struct.pack_into("<IQQ", page, 12, 0, last_seq, last_seq)
            f.seek(0)
            f.write(page)


# Section 10.3 / 10.4: keys and signed notes.
def key_id(name, public):
    return sha256(name.encode(), b"\n\x01", public)[:4]


class Signer:
    def __init__(self, name, seed, epoch):
        if Ed25519PrivateKey is None:
            fail("the cryptography package is missing (Debian: python3-cryptography)")
        self.name, self.epoch = name, epoch
        self.key = Ed25519PrivateKey.from_private_bytes(seed)
        from cryptography.hazmat.primitives import serialization
        raw = serialization.Encoding.Raw
        self.public = self.key.public_key().public_bytes(raw, serialization.PublicFormat.Raw)

    @classmethod
    def from_file(cls, path):
        with open(path) as f:
            lines = f.read().split("\n")
        parts = lines[0].split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            fail("%s is not a signer key file" % path)
        epoch = int(lines[1].split(" ")[1]) if len(lines) > 1 and lines[1] else 0
        return cls(parts[2], base64.b64decode(parts[4])[1:], epoch)

    def sign(self, text):
        sig = key_id(self.name, self.public) + self.key.sign(text.encode())
        return "%s\n%s%s %s\n" % (text, SIG_DASH, self.name, base64.b64encode(sig).decode())


def note_split(payload):
    note = payload[1:].decode()
    cut = note.rindex("\n\n")
    return note[:cut + 1], note[cut + 2:]


def signer_name(sig_lines):
    return sig_lines[len(SIG_DASH):].split(" ")[0]


def statement_resigned(frame, signer, root=None):
    """The frame's statement with its root (if given) and epoch line replaced, signed."""
    text, sigs = note_split(frame.payload)
    lines = text.split("\n")
    if root is not None:
        lines[2] = base64.b64encode(root).decode()
    lines = ["epoch %d" % signer.epoch if ln.startswith("epoch ") else ln for ln in lines]
    return frame.payload[:1] + signer.sign("\n".join(lines)).encode()


def checkpoints(journal):
    return [fr for seg in journal.segments for fr in seg.frames
            if fr.is_meta and fr.payload[0] == META_CHECKPOINT]


def cmd_alter(journal, seq, find, repl, sign):
    if len(find) != len(repl):
        fail("FIND and REPL must have the same length (the event stays valid BSON)")
    seg, i = journal.record(int(seq))
    fr = seg.frames[i]
    if find.encode() not in fr.payload:
        fail("record %s does not hold %r" % (seq, find))
    fr.payload = fr.payload.replace(find.encode(), repl.encode(), 1)
    journal.rechain()
    if sign:
        any_cp = checkpoints(journal)
        if not any_cp:
            fail("no checkpoint to sign again")
        if sign == "fresh":
            name = signer_name(note_split(any_cp[0].payload)[1])
            signer = Signer(name, os.urandom(32), 0)
        else:
            signer = Signer.from_file(sign)
        for cp in any_cp:
            if cp.seq >= int(seq):
                if sign == "fresh":
                    signer.epoch = int(note_split(cp.payload)[0].split("\nepoch ")[1].split("\n")[0])
                cp.payload = statement_resigned(cp, signer, journal.roots[cp.seq])
    journal.write()


def cmd_delete(journal, seq):
    seg, i = journal.record(int(seq))
    gone = seg.frames.pop(i)
    if gone.flags & FLAG_BATCH_END and i > 0:
        seg.frames[i - 1].flags |= FLAG_BATCH_END
    journal.rechain()
    journal.write()


def cmd_trim(journal, last):
    last = int(last)
    for seg in journal.segments:
        seg.frames = [fr for fr in seg.frames if fr.seq <= last]
        if seg.frames and not seg.frames[-1].is_meta:
            seg.frames[-1].flags |= FLAG_BATCH_END
    while len(journal.segments) > 1 and journal.segments[-1].first_seq > last:
        os.unlink(journal.segments.pop().path)
    journal.write()
    journal.fix_lock(last)


def cmd_drop_oldest(journal, count):
    count = int(count)
    if count >= len(journal.segments):
        fail("the journal has only %d segments" % len(journal.segments))
    for seg in journal.segments[:count]:
        os.unlink(seg.path)
    shutil.rmtree(os.path.join(journal.path, "index"), ignore_errors=True)


def cmd_resign(journal, size, keyfile):
    signer = Signer.from_file(keyfile)
    for cp in checkpoints(journal):
        if cp.seq == int(size):
            cp.payload = statement_resigned(cp, signer)
            journal.write()
            return
    fail("no checkpoint of tree size %s" % size)


def cmd_mangle_signature(journal, size):
    for cp in checkpoints(journal):
        if cp.seq == int(size):
            text, sigs = note_split(cp.payload)
            bad = "%s%s %s\n" % (SIG_DASH, signer_name(sigs), "!" * 20)
            cp.payload = cp.payload[:1] + (text + "\n" + bad).encode()
            journal.write()
            return
    fail("no checkpoint of tree size %s" % size)


def cmd_list(journal):
    for seg in journal.segments:
        for fr in seg.frames:
            if fr.is_meta:
                lines = note_split(fr.payload)[0].split("\n")
                epoch = [ln.split(" ")[1] for ln in lines if ln.startswith("epoch ")][0]
                reason = [ln.split(" ")[1] for ln in lines if ln.startswith("reason ")][0]
                print(fr.seq, epoch, reason)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 1
    cmd, journal = argv[1], Journal(argv[2])
    args = argv[3:]
    if cmd == "alter":
        sign = None
        if len(args) == 5 and args[3] == "--sign":
            sign = args[4]
        elif len(args) != 3:
            fail("usage: alter DIR SEQ FIND REPL [--sign fresh|KEYFILE]")
        cmd_alter(journal, args[0], args[1], args[2], sign)
    elif cmd == "delete" and len(args) == 1:
        cmd_delete(journal, args[0])
    elif cmd == "trim" and len(args) == 1:
        cmd_trim(journal, args[0])
    elif cmd == "drop-oldest" and len(args) == 1:
        cmd_drop_oldest(journal, args[0])
    elif cmd == "mangle-signature" and len(args) == 1:
        cmd_mangle_signature(journal, args[0])
    elif cmd == "list" and not args:
        cmd_list(journal)
    elif cmd == "resign" and len(args) == 2:
        cmd_resign(journal, args[0], args[1])
    else:
        fail("unknown command or arguments: " + " ".join(argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
