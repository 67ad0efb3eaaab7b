/*
 * merkle.c: RFC 6962 / RFC 9162 Merkle tree hashing, the writer's compact range, roots and
 * proofs from stored subtree hashes, and proof verification (merkle.h). Owns no storage:
 * stored hashes are read through the caller's callback. A merkle_hasher_t (one SHA-256
 * context, sha256.h) is used by one thread at a time; everything else is a pure function of
 * its arguments.
 *
 * Proofs follow the RFC's recursive definitions, unrolled: each step splits the range of
 * leaves [lo, hi) at k, the largest power of two below hi - lo, and records the sibling
 * range. Every range such a walk visits starts at a multiple of the smallest power of two
 * at least its length, so it is a run of full subtrees, one per set bit of its length, each
 * a stored hash (subtree_hash).
 */
#include "merkle.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "jerr.h"
#include "sha256.h"

_Static_assert(MERKLE_HASH_BYTES == SHA256_BYTES, "a Merkle hash is a SHA-256 digest");

/* Domain separation prefixes of RFC 6962 section 2.1: a leaf can never pass for a node. */
#define MERKLE_LEAF_PREFIX 0x00
#define MERKLE_NODE_PREFIX 0x01

/* SHA-256 of the empty string: the root of the empty tree. */
static const uint8_t empty_root[MERKLE_HASH_BYTES] = {
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55};

/* A run of leaves [lo, hi) whose tree hash a proof needs. */
typedef struct leaf_range {
    uint64_t lo, hi;
} leaf_range_t;

merkle_hasher_t *
merkle_hasher_new(void)
{
    merkle_hasher_t *h = malloc(sizeof *h);
    if (h && sha256_init(&h->sha) != 0) {
        free(h);
        return NULL;
    }
    return h;
}

void
merkle_hasher_init(merkle_hasher_t *h)
{
    (void)sha256_init(&h->sha); /* cannot fail: sha256.c allocates nothing */
}

void
merkle_hasher_free(merkle_hasher_t *h)
{
    if (!h)
        return;
    sha256_release(&h->sha);
    free(h);
}

int
merkle_hash_leaf(merkle_hasher_t *h, const struct iovec *parts, int n_parts,
                 uint8_t out[MERKLE_HASH_BYTES])
{
    const uint8_t prefix = MERKLE_LEAF_PREFIX;
    int rc = sha256_begin(&h->sha);
    rc = rc ? rc : sha256_update(&h->sha, &prefix, 1);
    for (int i = 0; i < n_parts && rc == 0; i++)
        rc = sha256_update(&h->sha, parts[i].iov_base, parts[i].iov_len);
    return rc ? rc : sha256_final(&h->sha, out);
}

int
merkle_hash_node(merkle_hasher_t *h, const uint8_t left[MERKLE_HASH_BYTES],
                 const uint8_t right[MERKLE_HASH_BYTES], uint8_t out[MERKLE_HASH_BYTES])
{
    uint8_t input[1 + 2 * MERKLE_HASH_BYTES]; /* copied first, so out may alias an input */
    input[0] = MERKLE_NODE_PREFIX;
    memcpy(input + 1, left, MERKLE_HASH_BYTES);
    memcpy(input + 1 + MERKLE_HASH_BYTES, right, MERKLE_HASH_BYTES);
    int rc = sha256_begin(&h->sha);
    rc = rc ? rc : sha256_update(&h->sha, input, sizeof input);
    return rc ? rc : sha256_final(&h->sha, out);
}

void
merkle_empty_root(uint8_t out[MERKLE_HASH_BYTES])
{
    memcpy(out, empty_root, MERKLE_HASH_BYTES);
}

/* ---- stored hashes ---- */

/* The largest power of two strictly below n (n >= 2). */
static uint64_t
split_point(uint64_t n)
{
    return UINT64_C(1) << (63 - __builtin_clzll(n - 1));
}

static unsigned
trailing_ones(uint64_t n)
{
    return (unsigned)__builtin_ctzll(~n);
}

uint64_t
merkle_stored_index(unsigned level, uint64_t index)
{
    /* (level, index) is completed by the append of the last leaf under it, right after
     * that leaf's own hash and the level - 1 subtrees below it. Before leaf n's hash come
     * one hash per earlier leaf plus one per subtree those leaves completed: n / 2 of level
     * 1, n / 4 of level 2, ... */
    uint64_t last_leaf = ((index + 1) << level) - 1;
    uint64_t before = 0;
    for (uint64_t n = last_leaf; n; n >>= 1)
        before += n;
    return before + level;
}

uint64_t
merkle_stored_count(uint64_t size)
{
    if (size == 0)
        return 0;
    return merkle_stored_index(0, size - 1) + 1 + trailing_ones(size - 1);
}

/* Reads the hash of the leaves [lo, hi) (a run of full subtrees, see the top comment). */
static int
subtree_hash(merkle_hasher_t *h, const merkle_store_t *store, leaf_range_t range,
             uint8_t out[MERKLE_HASH_BYTES], stele_error_t *err)
{
    uint8_t part[MERKLE_MAX_LEVELS][MERKLE_HASH_BYTES];
    unsigned n_parts = 0;
    for (uint64_t lo = range.lo; lo < range.hi; n_parts++) {
        unsigned level = 63 - (unsigned)__builtin_clzll(range.hi - lo);
        int rc = store->read(store->ctx, level, lo >> level, part[n_parts], err);
        if (rc)
            return rc;
        lo += UINT64_C(1) << level;
    }
    /* The larger subtrees are on the left: fold from the right. */
    memcpy(out, part[n_parts - 1], MERKLE_HASH_BYTES);
    for (unsigned i = n_parts - 1; i-- > 0;)
        if (merkle_hash_node(h, part[i], out, out))
            return -ENOMEM;
    return 0;
}

/* ---- compact range ---- */

void
merkle_range_init(merkle_range_t *r)
{
    memset(r, 0, sizeof *r);
}

int
merkle_range_append(merkle_hasher_t *h, merkle_range_t *r,
                    const uint8_t leaf_hash[MERKLE_HASH_BYTES], merkle_stored_t *stored,
                    stele_error_t *err)
{
    if (r->size >= MERKLE_MAX_LEAVES)
        return jerr_set(err, STELE_EINVAL, NULL, "merkle tree is full at %" PRIu64 " leaves",
                        r->size);
    /* Each one bit at the bottom of size is a peak the new leaf completes a subtree with. */
    uint64_t leaf = r->size;
    unsigned merges = trailing_ones(leaf);
    uint8_t carry[MERKLE_MAX_LEVELS][MERKLE_HASH_BYTES];
    memcpy(carry[0], leaf_hash, MERKLE_HASH_BYTES);
    for (unsigned level = 0; level < merges; level++)
        if (merkle_hash_node(h, r->peak[level], carry[level], carry[level + 1]))
            return -ENOMEM;
    memset(r->peak, 0, (size_t)merges * MERKLE_HASH_BYTES);
    memcpy(r->peak[merges], carry[merges], MERKLE_HASH_BYTES);
    r->size = leaf + 1;
    if (stored) {
        stored->leaf_index = leaf;
        stored->first_index = merkle_stored_index(0, leaf);
        stored->count = merges + 1;
        memcpy(stored->hash, carry, (size_t)(merges + 1) * MERKLE_HASH_BYTES);
    }
    return 0;
}

int
merkle_range_root(merkle_hasher_t *h, const merkle_range_t *r, uint8_t root[MERKLE_HASH_BYTES])
{
    if (r->size == 0) {
        merkle_empty_root(root);
        return 0;
    }
    /* The lowest peak covers the newest leaves: it is the innermost right child. */
    unsigned level = (unsigned)__builtin_ctzll(r->size);
    memcpy(root, r->peak[level], MERKLE_HASH_BYTES);
    for (level++; level < MERKLE_MAX_LEVELS; level++)
        if (((r->size >> level) & 1) && merkle_hash_node(h, r->peak[level], root, root))
            return -ENOMEM;
    return 0;
}

size_t
merkle_range_encode(const merkle_range_t *r, uint8_t *out, size_t cap)
{
    size_t len = 8 + (size_t)__builtin_popcountll(r->size) * MERKLE_HASH_BYTES;
    if (cap < len)
        return 0;
    format_store_u64(out, r->size);
    uint8_t *p = out + 8;
    for (unsigned level = MERKLE_MAX_LEVELS; level-- > 0;)
        if ((r->size >> level) & 1) {
            memcpy(p, r->peak[level], MERKLE_HASH_BYTES);
            p += MERKLE_HASH_BYTES;
        }
    return len;
}

int
merkle_range_decode(merkle_range_t *r, const uint8_t *in, size_t len, stele_error_t *err)
{
    if (len < 8)
        return jerr_set(err, STELE_ECORRUPT, NULL,
                        "merkle range is %zu bytes, shorter than its 8-byte size", len);
    uint64_t size = format_load_u64(in);
    if (size > MERKLE_MAX_LEAVES)
        return jerr_set(err, STELE_ECORRUPT, NULL,
                        "merkle range size %" PRIu64 " is above the limit %" PRIu64, size,
                        MERKLE_MAX_LEAVES);
    size_t want = 8 + (size_t)__builtin_popcountll(size) * MERKLE_HASH_BYTES;
    if (len != want)
        return jerr_set(err, STELE_ECORRUPT, NULL,
                        "merkle range of %" PRIu64 " leaves is %zu bytes, not %zu", size, len,
                        want);
    merkle_range_init(r);
    r->size = size;
    const uint8_t *p = in + 8;
    for (unsigned level = MERKLE_MAX_LEVELS; level-- > 0;)
        if ((size >> level) & 1) {
            memcpy(r->peak[level], p, MERKLE_HASH_BYTES);
            p += MERKLE_HASH_BYTES;
        }
    return 0;
}

static int
check_size(uint64_t size, stele_error_t *err)
{
    if (size > MERKLE_MAX_LEAVES)
        return jerr_set(err, STELE_EINVAL, NULL,
                        "merkle tree size %" PRIu64 " is above the limit %" PRIu64, size,
                        MERKLE_MAX_LEAVES);
    return 0;
}

int
merkle_range_load(merkle_range_t *r, const merkle_store_t *store, uint64_t size, stele_error_t *err)
{
    int rc = check_size(size, err);
    if (rc)
        return rc;
    merkle_range_t loaded;
    merkle_range_init(&loaded);
    loaded.size = size;
    uint64_t lo = 0;
    for (unsigned level = MERKLE_MAX_LEVELS; level-- > 0;) {
        if (!((size >> level) & 1))
            continue;
        rc = store->read(store->ctx, level, lo >> level, loaded.peak[level], err);
        if (rc)
            return rc;
        lo += UINT64_C(1) << level;
    }
    *r = loaded;
    return 0;
}

/* ---- roots and proofs from stored hashes ---- */

int
merkle_tree_hash(merkle_hasher_t *h, const merkle_store_t *store, uint64_t size,
                 uint8_t root[MERKLE_HASH_BYTES], stele_error_t *err)
{
    int rc = check_size(size, err);
    if (rc)
        return rc;
    if (size == 0) {
        merkle_empty_root(root);
        return 0;
    }
    return subtree_hash(h, store, (leaf_range_t){0, size}, root, err);
}

/*
 * The sibling ranges of leaf `index`'s path in a tree of `size` leaves, from the root down
 * (RFC 9162 2.1.3.1, PATH: the sibling of the half holding the leaf at each split).
 * Returns how many; plan has MERKLE_MAX_PROOF_HASHES room.
 */
static size_t
inclusion_plan(uint64_t index, uint64_t size, leaf_range_t *plan)
{
    size_t n = 0;
    uint64_t lo = 0, hi = size;
    while (hi - lo > 1) {
        uint64_t mid = lo + split_point(hi - lo);
        if (index < mid) {
            plan[n++] = (leaf_range_t){mid, hi};
            hi = mid;
        } else {
            plan[n++] = (leaf_range_t){lo, mid};
            lo = mid;
        }
    }
    return n;
}

/*
 * The ranges of the consistency proof from old_size to new_size (0 < old_size < new_size),
 * from the root down (RFC 9162 2.1.4.1, SUBPROOF): at each split the half the old tree does
 * not end in; at the bottom the old tree's own last subtree, unless it is a whole left
 * spine (a power of two the verifier already holds as the old root).
 */
static size_t
consistency_plan(uint64_t old_size, uint64_t new_size, leaf_range_t *plan)
{
    size_t n = 0;
    uint64_t lo = 0, hi = new_size, old_end = old_size;
    int on_left_spine = 1;
    while (old_end != hi) {
        uint64_t mid = lo + split_point(hi - lo);
        if (old_end <= mid) {
            plan[n++] = (leaf_range_t){mid, hi};
            hi = mid;
        } else {
            plan[n++] = (leaf_range_t){lo, mid};
            lo = mid;
            on_left_spine = 0;
        }
    }
    if (!on_left_spine)
        plan[n++] = (leaf_range_t){lo, hi};
    return n;
}

size_t
merkle_inclusion_proof_len(uint64_t index, uint64_t size)
{
    leaf_range_t plan[MERKLE_MAX_PROOF_HASHES];
    if (size > MERKLE_MAX_LEAVES || index >= size)
        return 0;
    return inclusion_plan(index, size, plan);
}

size_t
merkle_consistency_proof_len(uint64_t old_size, uint64_t new_size)
{
    leaf_range_t plan[MERKLE_MAX_PROOF_HASHES];
    if (new_size > MERKLE_MAX_LEAVES || old_size == 0 || old_size >= new_size)
        return 0;
    return consistency_plan(old_size, new_size, plan);
}

/* Reads the plan's ranges into proof, bottom up (the RFC's order). */
static int
proof_read(merkle_hasher_t *h, const merkle_store_t *store, const leaf_range_t *plan, size_t n,
           uint8_t *proof, size_t cap_hashes, size_t *n_hashes, stele_error_t *err)
{
    if (n > cap_hashes)
        return jerr_set(err, STELE_EINVAL, NULL,
                        "merkle proof needs %zu hashes; the buffer holds %zu", n, cap_hashes);
    for (size_t i = 0; i < n; i++) {
        int rc = subtree_hash(h, store, plan[n - 1 - i], proof + i * MERKLE_HASH_BYTES, err);
        if (rc)
            return rc;
    }
    *n_hashes = n;
    return 0;
}

int
merkle_prove_inclusion(merkle_hasher_t *h, const merkle_store_t *store, uint64_t index,
                       uint64_t size, uint8_t *proof, size_t cap_hashes, size_t *n_hashes,
                       stele_error_t *err)
{
    int rc = check_size(size, err);
    if (rc)
        return rc;
    if (index >= size)
        return jerr_set(err, STELE_EINVAL, NULL,
                        "leaf %" PRIu64 " is not in a merkle tree of %" PRIu64 " leaves", index,
                        size);
    leaf_range_t plan[MERKLE_MAX_PROOF_HASHES];
    size_t n = inclusion_plan(index, size, plan);
    return proof_read(h, store, plan, n, proof, cap_hashes, n_hashes, err);
}

int
merkle_prove_consistency(merkle_hasher_t *h, const merkle_store_t *store, uint64_t old_size,
                         uint64_t new_size, uint8_t *proof, size_t cap_hashes, size_t *n_hashes,
                         stele_error_t *err)
{
    int rc = check_size(new_size, err);
    if (rc)
        return rc;
    if (old_size > new_size)
        return jerr_set(err, STELE_EINVAL, NULL,
                        "merkle tree of %" PRIu64 " leaves cannot grow into one of %" PRIu64,
                        old_size, new_size);
    leaf_range_t plan[MERKLE_MAX_PROOF_HASHES];
    size_t n =
        old_size == 0 || old_size == new_size ? 0 : consistency_plan(old_size, new_size, plan);
    return proof_read(h, store, plan, n, proof, cap_hashes, n_hashes, err);
}

/* ---- verification ---- */

/* One step of RFC 9162's walk up the tree: is the proof hash at this position on the
 * left? fn is the position of the node being rebuilt, sn the last position at its level. */
static int
proof_hash_on_left(uint64_t fn, uint64_t sn)
{
    return (fn & 1) || fn == sn;
}

/* After a left-hand proof hash at an even fn (fn == sn: the node had no right sibling at
 * the levels below), skip the levels where it was promoted unchanged. */
static void
skip_promoted_levels(uint64_t *fn, uint64_t *sn)
{
    while (!(*fn & 1) && *fn != 0) {
        *fn >>= 1;
        *sn >>= 1;
    }
}

static int
verify_failed(stele_error_t *err, const char *what, const char *why)
{
    return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY, "%s does not verify: %s", what, why);
}

int
merkle_verify_inclusion(merkle_hasher_t *h, uint64_t index, uint64_t size,
                        const uint8_t leaf_hash[MERKLE_HASH_BYTES], const uint8_t *proof,
                        size_t n_hashes, const uint8_t root[MERKLE_HASH_BYTES], stele_error_t *err)
{
    char what[96];
    snprintf(what, sizeof what, "inclusion proof of leaf %" PRIu64 " in tree %" PRIu64, index,
             size);
    if (size > MERKLE_MAX_LEAVES)
        return verify_failed(err, what, "tree size above the limit");
    if (index >= size)
        return verify_failed(err, what, "the leaf is not below the tree size");
    if (n_hashes != merkle_inclusion_proof_len(index, size))
        return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                        "%s does not verify: %zu hashes where the tree shape needs %zu", what,
                        n_hashes, merkle_inclusion_proof_len(index, size));
    uint64_t fn = index, sn = size - 1;
    uint8_t r[MERKLE_HASH_BYTES];
    memcpy(r, leaf_hash, MERKLE_HASH_BYTES);
    for (size_t i = 0; i < n_hashes; i++) {
        const uint8_t *p = proof + i * MERKLE_HASH_BYTES;
        if (sn == 0)
            return verify_failed(err, what, "more hashes than the tree has levels");
        int on_left = proof_hash_on_left(fn, sn);
        if (on_left ? merkle_hash_node(h, p, r, r) : merkle_hash_node(h, r, p, r))
            return -ENOMEM;
        if (on_left)
            skip_promoted_levels(&fn, &sn);
        fn >>= 1;
        sn >>= 1;
    }
    if (sn != 0 || memcmp(r, root, MERKLE_HASH_BYTES) != 0)
        return verify_failed(err, what, "the root does not match");
    return 0;
}

/* Walks the consistency proof (after the length and size checks): rebuilds both roots. */
static int
consistency_walk(merkle_hasher_t *h, uint64_t old_size, uint64_t new_size,
                 const uint8_t old_root[MERKLE_HASH_BYTES], const uint8_t *proof, size_t n_hashes,
                 uint8_t fr[MERKLE_HASH_BYTES], uint8_t sr[MERKLE_HASH_BYTES], uint64_t *sn_out)
{
    /* A power-of-two old tree is a whole left subtree: its root is the path's start. */
    int old_is_subtree = (old_size & (old_size - 1)) == 0;
    const uint8_t *first = old_is_subtree ? old_root : proof;
    size_t next = old_is_subtree ? 0 : 1;
    uint64_t fn = old_size - 1, sn = new_size - 1;
    while (fn & 1) {
        fn >>= 1;
        sn >>= 1;
    }
    memcpy(fr, first, MERKLE_HASH_BYTES);
    memcpy(sr, first, MERKLE_HASH_BYTES);
    for (size_t i = next; i < n_hashes; i++) {
        const uint8_t *c = proof + i * MERKLE_HASH_BYTES;
        if (sn == 0)
            break; /* more hashes than levels: the caller's sn check fails it */
        if (proof_hash_on_left(fn, sn)) {
            if (merkle_hash_node(h, c, fr, fr) || merkle_hash_node(h, c, sr, sr))
                return -ENOMEM;
            skip_promoted_levels(&fn, &sn);
        } else if (merkle_hash_node(h, sr, c, sr)) {
            return -ENOMEM;
        }
        fn >>= 1;
        sn >>= 1;
    }
    *sn_out = sn;
    return 0;
}

int
merkle_verify_consistency(merkle_hasher_t *h, uint64_t old_size, uint64_t new_size,
                          const uint8_t old_root[MERKLE_HASH_BYTES],
                          const uint8_t new_root[MERKLE_HASH_BYTES], const uint8_t *proof,
                          size_t n_hashes, stele_error_t *err)
{
    char what[96];
    snprintf(what, sizeof what, "consistency proof from tree %" PRIu64 " to tree %" PRIu64,
             old_size, new_size);
    if (new_size > MERKLE_MAX_LEAVES)
        return verify_failed(err, what, "tree size above the limit");
    if (old_size > new_size)
        return verify_failed(err, what, "the old tree is larger than the new one");
    size_t want = merkle_consistency_proof_len(old_size, new_size);
    if (n_hashes != want)
        return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                        "%s does not verify: %zu hashes where the tree shapes need %zu", what,
                        n_hashes, want);
    if (old_size == 0)
        return memcmp(old_root, empty_root, MERKLE_HASH_BYTES) == 0
                   ? 0
                   : verify_failed(err, what, "the old root is not the empty tree's");
    if (old_size == new_size)
        return memcmp(old_root, new_root, MERKLE_HASH_BYTES) == 0
                   ? 0
                   : verify_failed(err, what, "trees of one size have different roots");
    uint8_t fr[MERKLE_HASH_BYTES], sr[MERKLE_HASH_BYTES];
    uint64_t sn = 0;
    if (consistency_walk(h, old_size, new_size, old_root, proof, n_hashes, fr, sr, &sn))
        return -ENOMEM;
    if (sn != 0)
        return verify_failed(err, what, "the proof does not reach the new root");
    if (memcmp(fr, old_root, MERKLE_HASH_BYTES) != 0)
        return verify_failed(err, what, "the old root does not match");
    if (memcmp(sr, new_root, MERKLE_HASH_BYTES) != 0)
        return verify_failed(err, what, "the new root does not match");
    return 0;
}
