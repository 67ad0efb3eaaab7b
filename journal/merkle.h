/*
 * merkle.h: the Merkle tree over a journal's records, with RFC 6962 / RFC 9162 hashing
 * (FORMAT.md, "Merkle tree and signed checkpoints"):
 *
 *     leaf hash  = SHA-256(0x00 || leaf data)
 *     node hash  = SHA-256(0x01 || left || right)
 *     MTH({})    = SHA-256() (the empty string)
 *     MTH(D[n])  = node(MTH(D[0:k]), MTH(D[k:n])), k the largest power of two below n
 *
 * Three parts:
 * - a compact range (merkle_range_t): the roots of the full subtrees that make up the tree
 *   so far, at most one per level. The writer keeps one, appends each record's leaf hash,
 *   and can take the root of the current size at any time; it is a fixed-size struct, and
 *   it encodes to bytes to be persisted and restored.
 * - stored hashes: every hash of a full subtree has a place (level, index): level 0 holds
 *   the leaf hashes, level L index K the root of leaves [K * 2^L, (K + 1) * 2^L). Appending
 *   leaf n completes the leaf itself and one subtree per trailing one bit of n (two hashes
 *   per record on average); merkle_range_append reports them, so a cache can keep them.
 *   merkle_stored_index numbers them densely in the order they are completed (the order of
 *   Go's golang.org/x/mod/sumdb/tlog StoredHashIndex), for caches that want one key.
 *   merkle_tree_hash and the two merkle_prove_* functions compute a root or a proof for any
 *   earlier size from stored hashes, read through a caller's callback: O(log n) reads.
 * - proof verification (RFC 9162 sections 2.1.3.2 and 2.1.4.2), which needs no storage.
 *
 * Tree sizes are at most MERKLE_MAX_LEAVES (2^62), so every stored index fits a u64.
 * Hashes are 32-byte arrays; a proof is its hashes back to back (32 bytes each), in RFC
 * order (from the leaf, or the old tree, upwards).
 *
 * Return codes: 0; STELE_EINVAL for arguments out of range (the message says which);
 * STELE_ECORRUPT when a proof or a range encoding does not check (the message says how);
 * -ENOMEM when OpenSSL fails; or whatever the read callback returned.
 */
#ifndef STELE_JOURNAL_MERKLE_H
#define STELE_JOURNAL_MERKLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "sha256.h"
#include "stele.h"

#define MERKLE_HASH_BYTES 32
/* The largest tree: keeps the stored index of every hash within a u64 (it is < 2n + 62). */
#define MERKLE_MAX_LEAVES (UINT64_C(1) << 62)
/* Levels 0 .. 62: a tree of MERKLE_MAX_LEAVES leaves has its root at level 62. */
#define MERKLE_MAX_LEVELS 63
/* The longest proof: an inclusion proof has at most 62 hashes (one per level below the
 * root), a consistency proof at most 63 (the same, plus the old tree's own subtree). */
#define MERKLE_MAX_PROOF_HASHES 64
/* merkle_range_encode's largest output: the size and one hash per level. */
#define MERKLE_RANGE_MAX_BYTES (8 + MERKLE_MAX_LEVELS * MERKLE_HASH_BYTES)

/* A reusable SHA-256 context for leaf and node hashes, used by one thread at a time. It
 * allocates nothing, so one may also live on the stack: merkle_hasher_init prepares it and
 * it needs no free. */
typedef struct merkle_hasher {
    sha256_t sha;
} merkle_hasher_t;

/* NULL when out of memory. merkle_hasher_free(NULL) is a no-op. */
merkle_hasher_t *merkle_hasher_new(void);
void merkle_hasher_free(merkle_hasher_t *h);
/* Prepares a hasher the caller holds (on the stack, in a struct). */
void merkle_hasher_init(merkle_hasher_t *h);

/* out = SHA-256(0x00 || the n_parts pieces of leaf data, concatenated). Returns 0 or
 * -ENOMEM. The pieces let a caller hash a record's fields without copying them together. */
int merkle_hash_leaf(merkle_hasher_t *h, const struct iovec *parts, int n_parts,
                     uint8_t out[MERKLE_HASH_BYTES]);

/* out = SHA-256(0x01 || left || right); out may alias left or right. Returns 0 or -ENOMEM. */
int merkle_hash_node(merkle_hasher_t *h, const uint8_t left[MERKLE_HASH_BYTES],
                     const uint8_t right[MERKLE_HASH_BYTES], uint8_t out[MERKLE_HASH_BYTES]);

/* MTH({}) = SHA-256 of nothing, the root of the empty tree. */
void merkle_empty_root(uint8_t out[MERKLE_HASH_BYTES]);

/* ---- stored hashes ---- */

/* Dense number of the stored hash (level, index): hashes are numbered in the order appends
 * complete them, so leaf n's hash is followed by the subtrees it completes, lowest first.
 * Equals tlog.StoredHashIndex(level, index). level < MERKLE_MAX_LEVELS, and the subtree
 * must lie within MERKLE_MAX_LEAVES leaves. */
uint64_t merkle_stored_index(unsigned level, uint64_t index);

/* How many stored hashes a tree of `size` leaves has: those of merkle_stored_index 0 ..
 * count - 1 (tlog.StoredHashCount). size <= MERKLE_MAX_LEAVES. */
uint64_t merkle_stored_count(uint64_t size);

/* What one append completes: the leaf's hash (level 0, index = the leaf's index) and then
 * hash[L] at (level L, index leaf >> L) for L = 1 .. count - 1. Their stored indexes are
 * first_index, first_index + 1, ... */
typedef struct merkle_stored {
    uint64_t leaf_index;
    uint64_t first_index; /* merkle_stored_index(0, leaf_index) */
    unsigned count;       /* 1 + the number of trailing one bits of leaf_index */
    uint8_t hash[MERKLE_MAX_LEVELS][MERKLE_HASH_BYTES];
} merkle_stored_t;

/*
 * Reads the stored hash (level, index) into out. The callee returns 0, or a negative code
 * and fills err (it may be NULL) with what went wrong; the merkle function returns that
 * code as it is. The hash must be one an append of the tree's leaves produced: a proof
 * built from a wrong hash simply fails to verify later.
 */
typedef int (*merkle_read_fn)(void *ctx, unsigned level, uint64_t index,
                              uint8_t out[MERKLE_HASH_BYTES], stele_error_t *err);

typedef struct merkle_store {
    merkle_read_fn read;
    void *ctx;
} merkle_store_t;

/* ---- compact range: the writer's running tree ---- */

/*
 * The tree of `size` leaves as the roots of its full subtrees: peak[L] is the root of a
 * subtree of 2^L leaves exactly when bit L of size is set (otherwise it is zero and
 * unused). The peaks are disjoint and ordered: the highest level covers the oldest leaves.
 * A plain value: copy it, keep it in a struct, compare it with memcmp after
 * merkle_range_init.
 */
typedef struct merkle_range {
    uint64_t size;
    uint8_t peak[MERKLE_MAX_LEVELS][MERKLE_HASH_BYTES];
} merkle_range_t;

/* The empty tree. */
void merkle_range_init(merkle_range_t *r);

/*
 * Appends one leaf (its leaf hash, from merkle_hash_leaf) as leaf r->size, and fills
 * *stored (may be NULL) with the hashes this completes, for a cache. Returns 0,
 * STELE_EINVAL when the tree already holds MERKLE_MAX_LEAVES leaves, or -ENOMEM; on error
 * r is unchanged.
 */
int merkle_range_append(merkle_hasher_t *h, merkle_range_t *r,
                        const uint8_t leaf_hash[MERKLE_HASH_BYTES], merkle_stored_t *stored,
                        stele_error_t *err);

/* The tree hash of r's size (MTH of the empty tree when size is 0). Returns 0 or -ENOMEM. */
int merkle_range_root(merkle_hasher_t *h, const merkle_range_t *r, uint8_t root[MERKLE_HASH_BYTES]);

/*
 * The range as bytes: size as u64 little-endian, then the peaks from the highest level to
 * the lowest (the order of their leaves), 32 bytes each: 8 + 32 * popcount(size) bytes, at
 * most MERKLE_RANGE_MAX_BYTES. Returns the byte count written into out (cap must be at
 * least that), or 0 when cap is too small.
 */
size_t merkle_range_encode(const merkle_range_t *r, uint8_t *out, size_t cap);

/* Restores a range from merkle_range_encode's bytes. Returns 0, or STELE_ECORRUPT (length
 * does not match the size, size above MERKLE_MAX_LEAVES) with r unchanged. */
int merkle_range_decode(merkle_range_t *r, const uint8_t *in, size_t len, stele_error_t *err);

/* Rebuilds the range of `size` leaves from stored hashes (popcount(size) reads, one per
 * peak). Returns 0, STELE_EINVAL (size too large) or the callback's code; r is unchanged on
 * error. */
int merkle_range_load(merkle_range_t *r, const merkle_store_t *store, uint64_t size,
                      stele_error_t *err);

/* ---- roots and proofs from stored hashes ---- */

/* MTH of the first `size` leaves, from at most 62 stored hashes. Returns 0, STELE_EINVAL
 * (size too large), -ENOMEM, or the callback's code. */
int merkle_tree_hash(merkle_hasher_t *h, const merkle_store_t *store, uint64_t size,
                     uint8_t root[MERKLE_HASH_BYTES], stele_error_t *err);

/* The number of hashes in the inclusion proof of leaf `index` in a tree of `size` leaves
 * (index < size <= MERKLE_MAX_LEAVES; 0 otherwise). */
size_t merkle_inclusion_proof_len(uint64_t index, uint64_t size);

/* The number of hashes in the consistency proof from old_size to new_size (0 when
 * old_size is 0 or equal to new_size, or the sizes are out of range). */
size_t merkle_consistency_proof_len(uint64_t old_size, uint64_t new_size);

/*
 * The inclusion proof (RFC 9162 2.1.3.1, the audit path) of leaf `index` in the tree of
 * `size` leaves, into proof (cap_hashes hashes of room), its length in *n_hashes. Reads at
 * most 2 log2(size) stored hashes. Returns 0, STELE_EINVAL (index >= size, size too large,
 * cap too small), -ENOMEM, or the callback's code.
 */
int merkle_prove_inclusion(merkle_hasher_t *h, const merkle_store_t *store, uint64_t index,
                           uint64_t size, uint8_t *proof, size_t cap_hashes, size_t *n_hashes,
                           stele_error_t *err);

/*
 * The consistency proof (RFC 9162 2.1.4.1) from the tree of old_size leaves to the tree of
 * new_size leaves, into proof; empty when old_size is 0 or equals new_size. Returns 0,
 * STELE_EINVAL (old_size > new_size, size too large, cap too small), -ENOMEM, or the
 * callback's code.
 */
int merkle_prove_consistency(merkle_hasher_t *h, const merkle_store_t *store, uint64_t old_size,
                             uint64_t new_size, uint8_t *proof, size_t cap_hashes, size_t *n_hashes,
                             stele_error_t *err);

/* ---- verification: nothing but the proof and the hashes ---- */

/*
 * Checks that leaf_hash is leaf `index` of the tree of `size` leaves whose root is `root`
 * (RFC 9162 2.1.3.2). Returns 0 when it is; STELE_ECORRUPT with the reason (index not below
 * size, size too large, a proof of the wrong length, a root that does not match);
 * -ENOMEM.
 */
int merkle_verify_inclusion(merkle_hasher_t *h, uint64_t index, uint64_t size,
                            const uint8_t leaf_hash[MERKLE_HASH_BYTES], const uint8_t *proof,
                            size_t n_hashes, const uint8_t root[MERKLE_HASH_BYTES],
                            stele_error_t *err);

/*
 * Checks that the tree of old_size leaves with root old_root is a prefix of the tree of
 * new_size leaves with root new_root (RFC 9162 2.1.4.2). Equal sizes need an empty proof
 * and equal roots; old_size 0 needs an empty proof and old_root the empty tree's hash.
 * Returns 0 when consistent; STELE_ECORRUPT with the reason (old_size > new_size, sizes
 * too large, a proof of the wrong length, a root that does not match); -ENOMEM.
 */
int merkle_verify_consistency(merkle_hasher_t *h, uint64_t old_size, uint64_t new_size,
                              const uint8_t old_root[MERKLE_HASH_BYTES],
                              const uint8_t new_root[MERKLE_HASH_BYTES], const uint8_t *proof,
                              size_t n_hashes, stele_error_t *err);

#endif /* STELE_JOURNAL_MERKLE_H */
