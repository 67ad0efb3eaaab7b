/*
 * test_merkle.c: journal/merkle.c against RFC 6962's definitions. A reference written
 * straight from the RFC's recursive formulas (MTH, PATH, SUBPROOF) checks every root and
 * proof of every tree up to 64 leaves; the fixed vectors are the classic RFC 6962 test
 * leaves, whose hashes and proofs Go's golang.org/x/mod/sumdb/tlog gives the same
 * (tests/interop checks that agreement on every run). Then every way a proof can be wrong:
 * any byte flipped in the proof, the root or the leaf, a hash missing or added, wrong sizes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "merkle.h"

#define HB MERKLE_HASH_BYTES
#define MAX_TEST_LEAVES 64
/* Stored hashes of MAX_TEST_LEAVES leaves: 2n - 1 for a power of two. */
#define MAX_TEST_STORED (2 * MAX_TEST_LEAVES)

/* ---- a tree in memory: the leaves' hashes and the stored hashes appends produce ---- */

typedef struct mem_tree {
    merkle_hasher_t *h;
    uint64_t n_leaves;
    uint8_t leaf[MAX_TEST_LEAVES][HB];
    uint64_t n_stored;
    uint8_t stored[MAX_TEST_STORED][HB];
    merkle_range_t range;
    unsigned n_reads; /* how many hashes the code under test read */
    int fail_reads;   /* when set, reads fail with -EIO */
} mem_tree_t;

static int
mem_read(void *ctx, unsigned level, uint64_t index, uint8_t out[HB], stele_error_t *err)
{
    mem_tree_t *t = ctx;
    t->n_reads++;
    uint64_t at = merkle_stored_index(level, index);
    if (t->fail_reads || at >= t->n_stored) {
        if (err)
            snprintf(err->message, sizeof err->message, "no stored hash (%u, %llu)", level,
                     (unsigned long long)index);
        return -EIO;
    }
    memcpy(out, t->stored[at], HB);
    return 0;
}

static merkle_store_t
mem_store(mem_tree_t *t)
{
    return (merkle_store_t){mem_read, t};
}

static void
hash_bytes(merkle_hasher_t *h, const void *data, size_t len, uint8_t out[HB])
{
    struct iovec part = {(void *)data, len};
    assert_int_equal(merkle_hash_leaf(h, &part, 1, out), 0);
}

/* Appends leaves whose data is their index as one byte, storing what each append reports. */
static void
mem_tree_grow(mem_tree_t *t, uint64_t n_leaves)
{
    while (t->n_leaves < n_leaves) {
        uint8_t data = (uint8_t)t->n_leaves;
        hash_bytes(t->h, &data, 1, t->leaf[t->n_leaves]);
        merkle_stored_t st;
        assert_int_equal(merkle_range_append(t->h, &t->range, t->leaf[t->n_leaves], &st, NULL), 0);
        assert_int_equal(st.leaf_index, t->n_leaves);
        assert_int_equal(st.first_index, t->n_stored);
        for (unsigned i = 0; i < st.count; i++)
            memcpy(t->stored[t->n_stored++], st.hash[i], HB);
        t->n_leaves++;
        assert_int_equal(t->n_stored, merkle_stored_count(t->n_leaves));
    }
}

static mem_tree_t *
mem_tree_new(uint64_t n_leaves)
{
    mem_tree_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->h = merkle_hasher_new();
    assert_non_null(t->h);
    merkle_range_init(&t->range);
    mem_tree_grow(t, n_leaves);
    return t;
}

static void
mem_tree_free(mem_tree_t *t)
{
    merkle_hasher_free(t->h);
    free(t);
}

/* ---- the reference: RFC 6962 section 2.1, recursion as written ---- */

static uint64_t
ref_split(uint64_t n)
{
    uint64_t k = 1;
    while (k * 2 < n)
        k *= 2;
    return k;
}

static void
ref_mth(mem_tree_t *t, uint64_t lo, uint64_t hi, uint8_t out[HB])
{
    if (hi - lo == 1) {
        memcpy(out, t->leaf[lo], HB);
        return;
    }
    uint64_t k = ref_split(hi - lo);
    uint8_t left[HB], right[HB];
    ref_mth(t, lo, lo + k, left);
    ref_mth(t, lo + k, hi, right);
    assert_int_equal(merkle_hash_node(t->h, left, right, out), 0);
}

/* PATH(m, D[lo:hi]) appended to proof. */
static void
ref_path(mem_tree_t *t, uint64_t m, uint64_t lo, uint64_t hi, uint8_t *proof, size_t *n)
{
    if (hi - lo <= 1)
        return;
    uint64_t k = ref_split(hi - lo);
    if (m < k) {
        ref_path(t, m, lo, lo + k, proof, n);
        ref_mth(t, lo + k, hi, proof + HB * (*n)++);
    } else {
        ref_path(t, m - k, lo + k, hi, proof, n);
        ref_mth(t, lo, lo + k, proof + HB * (*n)++);
    }
}

/* SUBPROOF(m, D[lo:hi], b) appended to proof. */
static void
ref_subproof(mem_tree_t *t, uint64_t m, uint64_t lo, uint64_t hi, int b, uint8_t *proof, size_t *n)
{
    if (m == hi - lo) {
        if (!b)
            ref_mth(t, lo, hi, proof + HB * (*n)++);
        return;
    }
    uint64_t k = ref_split(hi - lo);
    if (m <= k) {
        ref_subproof(t, m, lo, lo + k, b, proof, n);
        ref_mth(t, lo + k, hi, proof + HB * (*n)++);
    } else {
        ref_subproof(t, m - k, lo + k, hi, 0, proof, n);
        ref_mth(t, lo, lo + k, proof + HB * (*n)++);
    }
}

static void
hex_to(const char *hex, uint8_t out[HB])
{
    assert_int_equal(strlen(hex), 2 * HB);
    for (size_t i = 0; i < HB; i++) {
        unsigned byte;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &byte), 1);
        out[i] = (uint8_t)byte;
    }
}

/* ---- fixed vectors ---- */

/* The RFC 6962 test leaves (the Certificate Transparency test data). */
static const char *const ct_leaf_hex[8] = {"",
                                           "00",
                                           "10",
                                           "2021",
                                           "3031",
                                           "40414243",
                                           "5051525354555657",
                                           "606162636465666768696a6b6c6d6e6f"};

static const char *const ct_root_hex[9] = {
    NULL,
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"};

typedef struct proof_vector {
    uint64_t a, b; /* leaf and size, or old and new size */
    const char *hex[4];
} proof_vector_t;

static const proof_vector_t ct_inclusion[] = {
    {0,
     8,
     {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4", NULL}},
    {5,
     8,
     {"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7", NULL}},
    {2, 3, {"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125", NULL}},
    {1,
     5,
     {"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b", NULL}},
};

static const proof_vector_t ct_consistency[] = {
    {1,
     8,
     {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
      "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4", NULL}},
    {6,
     8,
     {"0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
      "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
      "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7", NULL}},
    {2,
     5,
     {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
      "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b", NULL}},
    {3,
     7,
     {"0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
      "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
      "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
      "837dbb152e9b079010717e84e865da4ebc0fa198a806d59d31bf15accef22d0e"}},
};

/* A tree of the 8 RFC 6962 test leaves. */
static mem_tree_t *
ct_tree(void)
{
    mem_tree_t *t = mem_tree_new(0);
    for (int i = 0; i < 8; i++) {
        uint8_t data[16];
        size_t len = strlen(ct_leaf_hex[i]) / 2;
        for (size_t j = 0; j < len; j++) {
            unsigned byte;
            assert_int_equal(sscanf(ct_leaf_hex[i] + 2 * j, "%2x", &byte), 1);
            data[j] = (uint8_t)byte;
        }
        hash_bytes(t->h, data, len, t->leaf[i]);
        merkle_stored_t st;
        assert_int_equal(merkle_range_append(t->h, &t->range, t->leaf[i], &st, NULL), 0);
        for (unsigned k = 0; k < st.count; k++)
            memcpy(t->stored[t->n_stored++], st.hash[k], HB);
        t->n_leaves++;
    }
    return t;
}

static size_t
vector_hashes(const proof_vector_t *v, uint8_t *out)
{
    size_t n = 0;
    while (n < 4 && v->hex[n]) {
        hex_to(v->hex[n], out + HB * n);
        n++;
    }
    return n;
}

static void
test_merkle_matches_rfc6962_test_vectors(void **state)
{
    (void)state;
    mem_tree_t *t = ct_tree();
    merkle_store_t store = mem_store(t);
    uint8_t want[HB], got[HB];
    /* The empty leaf's hash is SHA-256 of the single byte 0x00. */
    hex_to("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d", want);
    assert_memory_equal(t->leaf[0], want, HB);
    for (uint64_t n = 1; n <= 8; n++) {
        hex_to(ct_root_hex[n], want);
        assert_int_equal(merkle_tree_hash(t->h, &store, n, got, NULL), 0);
        assert_memory_equal(got, want, HB);
    }
    assert_int_equal(merkle_range_root(t->h, &t->range, got), 0);
    assert_memory_equal(got, want, HB);
    uint8_t vec[4 * HB], proof[MERKLE_MAX_PROOF_HASHES * HB], root[HB];
    size_t n = 0;
    for (size_t i = 0; i < sizeof ct_inclusion / sizeof ct_inclusion[0]; i++) {
        const proof_vector_t *v = &ct_inclusion[i];
        size_t want_n = vector_hashes(v, vec);
        assert_int_equal(merkle_prove_inclusion(t->h, &store, v->a, v->b, proof,
                                                MERKLE_MAX_PROOF_HASHES, &n, NULL),
                         0);
        assert_int_equal(n, want_n);
        assert_memory_equal(proof, vec, n * HB);
        hex_to(ct_root_hex[v->b], root);
        assert_int_equal(
            merkle_verify_inclusion(t->h, v->a, v->b, t->leaf[v->a], vec, n, root, NULL), 0);
    }
    for (size_t i = 0; i < sizeof ct_consistency / sizeof ct_consistency[0]; i++) {
        const proof_vector_t *v = &ct_consistency[i];
        size_t want_n = vector_hashes(v, vec);
        assert_int_equal(merkle_prove_consistency(t->h, &store, v->a, v->b, proof,
                                                  MERKLE_MAX_PROOF_HASHES, &n, NULL),
                         0);
        assert_int_equal(n, want_n);
        assert_memory_equal(proof, vec, n * HB);
        uint8_t old_root[HB];
        hex_to(ct_root_hex[v->a], old_root);
        hex_to(ct_root_hex[v->b], root);
        assert_int_equal(merkle_verify_consistency(t->h, v->a, v->b, old_root, root, vec, n, NULL),
                         0);
    }
    mem_tree_free(t);
}

static void
test_merkle_empty_tree_is_sha256_of_nothing(void **state)
{
    (void)state;
    mem_tree_t *t = mem_tree_new(0);
    merkle_store_t store = mem_store(t);
    uint8_t want[HB], got[HB];
    hex_to("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", want);
    merkle_empty_root(got);
    assert_memory_equal(got, want, HB);
    memset(got, 0, HB);
    assert_int_equal(merkle_range_root(t->h, &t->range, got), 0);
    assert_memory_equal(got, want, HB);
    memset(got, 0, HB);
    assert_int_equal(merkle_tree_hash(t->h, &store, 0, got, NULL), 0);
    assert_memory_equal(got, want, HB);
    assert_int_equal(t->n_reads, 0);
    mem_tree_free(t);
}

/* A leaf hash and a node hash of the same bytes differ: the prefixes separate them. */
static void
test_merkle_leaf_and_node_hashes_are_domain_separated(void **state)
{
    (void)state;
    merkle_hasher_t *h = merkle_hasher_new();
    uint8_t a[HB], b[HB], node[HB], leaf[HB];
    memset(a, 0xaa, HB);
    memset(b, 0xbb, HB);
    assert_int_equal(merkle_hash_node(h, a, b, node), 0);
    uint8_t both[2 * HB];
    memcpy(both, a, HB);
    memcpy(both + HB, b, HB);
    hash_bytes(h, both, sizeof both, leaf);
    assert_memory_not_equal(node, leaf, HB);
    /* Leaf data in pieces hashes like the same data in one piece. */
    struct iovec parts[3] = {{both, 5}, {both + 5, 0}, {both + 5, sizeof both - 5}};
    uint8_t pieces[HB];
    assert_int_equal(merkle_hash_leaf(h, parts, 3, pieces), 0);
    assert_memory_equal(pieces, leaf, HB);
    /* node() may write over its own inputs. */
    assert_int_equal(merkle_hash_node(h, a, b, a), 0);
    assert_memory_equal(a, node, HB);
    merkle_hasher_free(h);
    merkle_hasher_free(NULL);
}

/* Each stored hash sits where merkle_stored_index says, and is the subtree's MTH. */
static void
test_merkle_stored_hashes_are_subtree_roots_at_their_index(void **state)
{
    (void)state;
    mem_tree_t *t = mem_tree_new(MAX_TEST_LEAVES);
    for (unsigned level = 0; level < 7; level++) {
        uint64_t width = UINT64_C(1) << level;
        for (uint64_t k = 0; (k + 1) * width <= MAX_TEST_LEAVES; k++) {
            uint8_t want[HB];
            ref_mth(t, k * width, (k + 1) * width, want);
            uint64_t at = merkle_stored_index(level, k);
            assert_true(at < t->n_stored);
            assert_memory_equal(t->stored[at], want, HB);
        }
    }
    /* The numbering is dense: 2n - 1 hashes for a full tree of n leaves. */
    assert_int_equal(merkle_stored_count(MAX_TEST_LEAVES), 2 * MAX_TEST_LEAVES - 1);
    assert_int_equal(merkle_stored_count(0), 0);
    assert_int_equal(merkle_stored_count(1), 1);
    assert_int_equal(merkle_stored_count(3), 4);
    assert_int_equal(merkle_stored_count(MERKLE_MAX_LEAVES), 2 * MERKLE_MAX_LEAVES - 1);
    assert_int_equal(merkle_stored_index(62, 0), 2 * MERKLE_MAX_LEAVES - 2);
    /* A few fixed points of the numbering, as tlog.StoredHashIndex has them. */
    assert_int_equal(merkle_stored_index(0, 0), 0);
    assert_int_equal(merkle_stored_index(0, 1), 1);
    assert_int_equal(merkle_stored_index(1, 0), 2);
    assert_int_equal(merkle_stored_index(0, 2), 3);
    assert_int_equal(merkle_stored_index(0, 3), 4);
    assert_int_equal(merkle_stored_index(1, 1), 5);
    assert_int_equal(merkle_stored_index(2, 0), 6);
    mem_tree_free(t);
}

static void
test_merkle_every_root_matches_the_reference(void **state)
{
    (void)state;
    mem_tree_t *t = mem_tree_new(0);
    merkle_store_t store = mem_store(t);
    for (uint64_t n = 1; n <= MAX_TEST_LEAVES; n++) {
        mem_tree_grow(t, n);
        uint8_t want[HB], from_range[HB], from_store[HB];
        ref_mth(t, 0, n, want);
        assert_int_equal(merkle_range_root(t->h, &t->range, from_range), 0);
        assert_memory_equal(from_range, want, HB);
        t->n_reads = 0;
        assert_int_equal(merkle_tree_hash(t->h, &store, n, from_store, NULL), 0);
        assert_memory_equal(from_store, want, HB);
        /* One read per full subtree: popcount(n). */
        assert_int_equal(t->n_reads, (unsigned)__builtin_popcountll(n));
        /* Every earlier size from the same stored hashes. */
        for (uint64_t m = 1; m < n; m++) {
            ref_mth(t, 0, m, want);
            assert_int_equal(merkle_tree_hash(t->h, &store, m, from_store, NULL), 0);
            assert_memory_equal(from_store, want, HB);
        }
    }
    mem_tree_free(t);
}

static void
test_merkle_every_inclusion_proof_verifies(void **state)
{
    (void)state;
    mem_tree_t *t = mem_tree_new(MAX_TEST_LEAVES);
    merkle_store_t store = mem_store(t);
    uint8_t proof[MERKLE_MAX_PROOF_HASHES * HB], want[MERKLE_MAX_PROOF_HASHES * HB], root[HB];
    for (uint64_t size = 1; size <= MAX_TEST_LEAVES; size++) {
        ref_mth(t, 0, size, root);
        for (uint64_t i = 0; i < size; i++) {
            size_t n = 99, want_n = 0;
            ref_path(t, i, 0, size, want, &want_n);
            t->n_reads = 0;
            assert_int_equal(merkle_prove_inclusion(t->h, &store, i, size, proof,
                                                    MERKLE_MAX_PROOF_HASHES, &n, NULL),
                             0);
            assert_int_equal(n, want_n);
            assert_int_equal(merkle_inclusion_proof_len(i, size), want_n);
            assert_memory_equal(proof, want, n * HB);
            assert_true(t->n_reads <= 2 * 6 + 1); /* O(log n): 2 log2(64) + 1 */
            assert_int_equal(
                merkle_verify_inclusion(t->h, i, size, t->leaf[i], proof, n, root, NULL), 0);
        }
    }
    mem_tree_free(t);
}

static void
test_merkle_every_consistency_proof_verifies(void **state)
{
    (void)state;
    mem_tree_t *t = mem_tree_new(MAX_TEST_LEAVES);
    merkle_store_t store = mem_store(t);
    uint8_t proof[MERKLE_MAX_PROOF_HASHES * HB], want[MERKLE_MAX_PROOF_HASHES * HB];
    uint8_t old_root[HB], new_root[HB];
    for (uint64_t new_size = 1; new_size <= MAX_TEST_LEAVES; new_size++) {
        ref_mth(t, 0, new_size, new_root);
        for (uint64_t old_size = 0; old_size <= new_size; old_size++) {
            size_t n = 99, want_n = 0;
            if (old_size == 0) {
                merkle_empty_root(old_root);
            } else {
                ref_mth(t, 0, old_size, old_root);
                if (old_size < new_size)
                    ref_subproof(t, old_size, 0, new_size, 1, want, &want_n);
            }
            t->n_reads = 0;
            assert_int_equal(merkle_prove_consistency(t->h, &store, old_size, new_size, proof,
                                                      MERKLE_MAX_PROOF_HASHES, &n, NULL),
                             0);
            assert_int_equal(n, want_n);
            assert_int_equal(merkle_consistency_proof_len(old_size, new_size), want_n);
            assert_memory_equal(proof, want, n * HB);
            assert_true(t->n_reads <= 2 * 6 + 2);
            assert_int_equal(merkle_verify_consistency(t->h, old_size, new_size, old_root, new_root,
                                                       proof, n, NULL),
                             0);
        }
    }
    mem_tree_free(t);
}

static void
expect_inclusion_fails(mem_tree_t *t, uint64_t i, uint64_t size, const uint8_t *leaf,
                       const uint8_t *proof, size_t n, const uint8_t *root, const char *why)
{
    stele_error_t err = {0};
    int rc = merkle_verify_inclusion(t->h, i, size, leaf, proof, n, root, &err);
    if (rc != STELE_ECORRUPT)
        fail_msg("leaf %llu tree %llu (%s): rc %d, want STELE_ECORRUPT", (unsigned long long)i,
                 (unsigned long long)size, why, rc);
    assert_non_null(strstr(err.message, "does not verify"));
}

static void
test_merkle_inclusion_fails_on_any_change(void **state)
{
    (void)state;
    mem_tree_t *t = mem_tree_new(MAX_TEST_LEAVES);
    merkle_store_t store = mem_store(t);
    uint8_t proof[(MERKLE_MAX_PROOF_HASHES + 1) * HB], root[HB], leaf[HB];
    for (uint64_t size = 1; size <= MAX_TEST_LEAVES; size++) {
        ref_mth(t, 0, size, root);
        for (uint64_t i = 0; i < size; i++) {
            size_t n = 0;
            assert_int_equal(merkle_prove_inclusion(t->h, &store, i, size, proof,
                                                    MERKLE_MAX_PROOF_HASHES, &n, NULL),
                             0);
            memcpy(leaf, t->leaf[i], HB);
            for (size_t b = 0; b < n * HB; b++) {
                proof[b] ^= 0x01;
                expect_inclusion_fails(t, i, size, leaf, proof, n, root, "proof byte");
                proof[b] ^= 0x01;
            }
            for (size_t b = 0; b < HB; b++) {
                root[b] ^= 0x80;
                expect_inclusion_fails(t, i, size, leaf, proof, n, root, "root byte");
                root[b] ^= 0x80;
                leaf[b] ^= 0x80;
                expect_inclusion_fails(t, i, size, leaf, proof, n, root, "leaf byte");
                leaf[b] ^= 0x80;
            }
            if (n > 0)
                expect_inclusion_fails(t, i, size, leaf, proof, n - 1, root, "truncated");
            memcpy(proof + n * HB, root, HB);
            expect_inclusion_fails(t, i, size, leaf, proof, n + 1, root, "extended");
            /* The same proof for another leaf. (A size is not bound by the proof: the signed
             * checkpoint binds it to the root.) */
            if (size > 1)
                expect_inclusion_fails(t, (i + 1) % size, size, leaf, proof, n, root, "index");
            expect_inclusion_fails(t, i, i, leaf, proof, n, root, "index = size");
        }
    }
    /* Sizes above the limit, and the RFC's own guard on a path longer than the tree. */
    expect_inclusion_fails(t, 0, MERKLE_MAX_LEAVES + 1, t->leaf[0], proof, 0, root, "huge");
    mem_tree_free(t);
}

static void
expect_consistency_fails(mem_tree_t *t, uint64_t m, uint64_t n_size, const uint8_t *old_root,
                         const uint8_t *new_root, const uint8_t *proof, size_t n, const char *why)
{
    stele_error_t err = {0};
    int rc = merkle_verify_consistency(t->h, m, n_size, old_root, new_root, proof, n, &err);
    if (rc != STELE_ECORRUPT)
        fail_msg("%llu -> %llu (%s): rc %d, want STELE_ECORRUPT", (unsigned long long)m,
                 (unsigned long long)n_size, why, rc);
    assert_non_null(strstr(err.message, "does not verify"));
}

static void
test_merkle_consistency_fails_on_any_change(void **state)
{
    (void)state;
    mem_tree_t *t = mem_tree_new(MAX_TEST_LEAVES);
    merkle_store_t store = mem_store(t);
    uint8_t proof[(MERKLE_MAX_PROOF_HASHES + 1) * HB], old_root[HB], new_root[HB];
    for (uint64_t new_size = 1; new_size <= MAX_TEST_LEAVES; new_size++) {
        ref_mth(t, 0, new_size, new_root);
        for (uint64_t old_size = 0; old_size <= new_size; old_size++) {
            size_t n = 0;
            if (old_size)
                ref_mth(t, 0, old_size, old_root);
            else
                merkle_empty_root(old_root);
            assert_int_equal(merkle_prove_consistency(t->h, &store, old_size, new_size, proof,
                                                      MERKLE_MAX_PROOF_HASHES, &n, NULL),
                             0);
            for (size_t b = 0; b < n * HB; b++) {
                proof[b] ^= 0x01;
                expect_consistency_fails(t, old_size, new_size, old_root, new_root, proof, n,
                                         "proof byte");
                proof[b] ^= 0x01;
            }
            for (size_t b = 0; b < HB; b++) {
                old_root[b] ^= 0x80;
                expect_consistency_fails(t, old_size, new_size, old_root, new_root, proof, n,
                                         "old root byte");
                old_root[b] ^= 0x80;
                /* From the empty tree any new root is consistent: nothing to change. */
                if (old_size == 0)
                    continue;
                new_root[b] ^= 0x80;
                expect_consistency_fails(t, old_size, new_size, old_root, new_root, proof, n,
                                         "new root byte");
                new_root[b] ^= 0x80;
            }
            if (n > 0)
                expect_consistency_fails(t, old_size, new_size, old_root, new_root, proof, n - 1,
                                         "truncated");
            memcpy(proof + n * HB, new_root, HB);
            expect_consistency_fails(t, old_size, new_size, old_root, new_root, proof, n + 1,
                                     "extended");
            if (old_size > 0 && old_size < new_size)
                expect_consistency_fails(t, old_size - 1, new_size, old_root, new_root, proof, n,
                                         "old size - 1");
        }
    }
    /* A smaller tree is never consistent with a larger old one. */
    expect_consistency_fails(t, 5, 4, old_root, new_root, proof, 0, "shrunk");
    expect_consistency_fails(t, 1, MERKLE_MAX_LEAVES + 1, old_root, new_root, proof, 0, "huge");
    mem_tree_free(t);
}

/* A proof of one tree does not verify another tree with the same leaf count. */
static void
test_merkle_proof_of_another_tree_fails(void **state)
{
    (void)state;
    mem_tree_t *a = mem_tree_new(13);
    mem_tree_t *b = mem_tree_new(12);
    uint8_t data = 0xee; /* b's last leaf differs from a's */
    hash_bytes(b->h, &data, 1, b->leaf[12]);
    assert_int_equal(merkle_range_append(b->h, &b->range, b->leaf[12], NULL, NULL), 0);
    uint8_t root_b[HB], proof[MERKLE_MAX_PROOF_HASHES * HB];
    assert_int_equal(merkle_range_root(b->h, &b->range, root_b), 0);
    merkle_store_t store = mem_store(a);
    size_t n = 0;
    for (uint64_t i = 0; i < 12; i++) {
        assert_int_equal(
            merkle_prove_inclusion(a->h, &store, i, 13, proof, MERKLE_MAX_PROOF_HASHES, &n, NULL),
            0);
        expect_inclusion_fails(a, i, 13, a->leaf[i], proof, n, root_b, "other tree");
    }
    mem_tree_free(a);
    mem_tree_free(b);
}

static void
test_merkle_range_encodes_and_restores(void **state)
{
    (void)state;
    mem_tree_t *t = mem_tree_new(0);
    merkle_store_t store = mem_store(t);
    uint8_t bytes[MERKLE_RANGE_MAX_BYTES];
    for (uint64_t n = 0; n <= MAX_TEST_LEAVES; n++) {
        mem_tree_grow(t, n);
        size_t len = merkle_range_encode(&t->range, bytes, sizeof bytes);
        assert_int_equal(len, 8 + HB * (size_t)__builtin_popcountll(n));
        assert_int_equal(merkle_range_encode(&t->range, bytes, len - 1), 0);
        merkle_range_t back;
        assert_int_equal(merkle_range_decode(&back, bytes, len, NULL), 0);
        assert_memory_equal(&back, &t->range, sizeof back);
        merkle_range_t loaded;
        assert_int_equal(merkle_range_load(&loaded, &store, n, NULL), 0);
        assert_memory_equal(&loaded, &t->range, sizeof loaded);
        /* A restored range keeps growing into the same tree. */
        if (n == 37) {
            uint8_t root_a[HB], root_b[HB];
            for (int k = 0; k < 5; k++) {
                assert_int_equal(merkle_range_append(t->h, &back, t->leaf[k], NULL, NULL), 0);
                assert_int_equal(merkle_range_append(t->h, &loaded, t->leaf[k], NULL, NULL), 0);
            }
            assert_int_equal(merkle_range_root(t->h, &back, root_a), 0);
            assert_int_equal(merkle_range_root(t->h, &loaded, root_b), 0);
            assert_memory_equal(root_a, root_b, HB);
        }
    }
    /* The first 3 peaks of a 7-leaf range, then a known layout: size LE, highest first. */
    mem_tree_t *seven = mem_tree_new(7);
    size_t len = merkle_range_encode(&seven->range, bytes, sizeof bytes);
    assert_int_equal(len, 8 + 3 * HB);
    assert_int_equal(bytes[0], 7);
    uint8_t want[HB];
    ref_mth(seven, 0, 4, want);
    assert_memory_equal(bytes + 8, want, HB);
    ref_mth(seven, 4, 6, want);
    assert_memory_equal(bytes + 8 + HB, want, HB);
    assert_memory_equal(bytes + 8 + 2 * HB, seven->leaf[6], HB);
    mem_tree_free(seven);
    mem_tree_free(t);
}

static void
test_merkle_range_decode_rejects_bad_bytes(void **state)
{
    (void)state;
    mem_tree_t *t = mem_tree_new(5);
    uint8_t bytes[MERKLE_RANGE_MAX_BYTES + HB];
    size_t len = merkle_range_encode(&t->range, bytes, sizeof bytes);
    merkle_range_t r, untouched;
    memset(&r, 0x5a, sizeof r);
    untouched = r;
    stele_error_t err = {0};
    assert_int_equal(merkle_range_decode(&r, bytes, len - 1, &err), STELE_ECORRUPT);
    assert_non_null(strstr(err.message, "not 72"));
    assert_int_equal(merkle_range_decode(&r, bytes, len + HB, &err), STELE_ECORRUPT);
    assert_int_equal(merkle_range_decode(&r, bytes, 7, &err), STELE_ECORRUPT);
    assert_non_null(strstr(err.message, "shorter than its 8-byte size"));
    bytes[0] = 7; /* three peaks, where two follow */
    assert_int_equal(merkle_range_decode(&r, bytes, len, &err), STELE_ECORRUPT);
    memset(bytes, 0, 8);
    bytes[7] = 0x80; /* 2^63 leaves */
    assert_int_equal(merkle_range_decode(&r, bytes, 8 + HB, &err), STELE_ECORRUPT);
    assert_non_null(strstr(err.message, "above the limit"));
    assert_memory_equal(&r, &untouched, sizeof r);
    mem_tree_free(t);
}

static void
test_merkle_full_tree_refuses_append(void **state)
{
    (void)state;
    merkle_hasher_t *h = merkle_hasher_new();
    uint8_t bytes[8 + HB] = {0};
    bytes[7] = 0x40; /* 2^62 leaves: one peak at level 62 */
    merkle_range_t r;
    assert_int_equal(merkle_range_decode(&r, bytes, sizeof bytes, NULL), 0);
    merkle_range_t before = r;
    uint8_t leaf[HB] = {1};
    stele_error_t err = {0};
    assert_int_equal(merkle_range_append(h, &r, leaf, NULL, &err), STELE_EINVAL);
    assert_non_null(strstr(err.message, "full"));
    assert_memory_equal(&r, &before, sizeof r);
    /* One below the limit still appends, completing the tree's top. */
    bytes[7] = 0x3f;
    memset(bytes, 0xff, 7); /* 2^62 - 1: 62 peaks */
    uint8_t big[8 + 62 * HB] = {0};
    memcpy(big, bytes, 8);
    assert_int_equal(merkle_range_decode(&r, big, sizeof big, NULL), 0);
    merkle_stored_t st;
    assert_int_equal(merkle_range_append(h, &r, leaf, &st, NULL), 0);
    assert_int_equal(st.count, 63);
    assert_int_equal(st.first_index, merkle_stored_index(0, MERKLE_MAX_LEAVES - 1));
    assert_int_equal(st.first_index + st.count, merkle_stored_count(MERKLE_MAX_LEAVES));
    assert_int_equal(r.size, MERKLE_MAX_LEAVES);
    merkle_hasher_free(h);
}

/* The longest proofs of the largest trees fit MERKLE_MAX_PROOF_HASHES. */
static void
test_merkle_proof_lengths_stay_within_the_limit(void **state)
{
    (void)state;
    const uint64_t max = MERKLE_MAX_LEAVES;
    size_t longest = 0;
    const uint64_t sizes[] = {max, max - 1, max / 2 + 1, max / 2 + 3, (max / 3) * 2 + 1};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (uint64_t i = 0; i < 64; i++) {
            uint64_t pick[3] = {i, sizes[s] - 1 - i, (sizes[s] >> (i % 62)) | 1};
            for (int k = 0; k < 3; k++) {
                size_t a = merkle_inclusion_proof_len(pick[k] % sizes[s], sizes[s]);
                size_t b = merkle_consistency_proof_len(pick[k] % sizes[s], sizes[s]);
                longest = a > longest ? a : longest;
                longest = b > longest ? b : longest;
            }
        }
    }
    assert_true(longest <= MERKLE_MAX_PROOF_HASHES);
    assert_int_equal(merkle_inclusion_proof_len(0, max), 62);
    assert_int_equal(merkle_consistency_proof_len(max - 1, max), 63);
    assert_int_equal(merkle_inclusion_proof_len(5, 5), 0);
    assert_int_equal(merkle_inclusion_proof_len(0, max + 1), 0);
    assert_int_equal(merkle_consistency_proof_len(0, 9), 0);
    assert_int_equal(merkle_consistency_proof_len(9, 9), 0);
    assert_int_equal(merkle_consistency_proof_len(10, 9), 0);
}

static void
test_merkle_prove_rejects_bad_arguments(void **state)
{
    (void)state;
    mem_tree_t *t = mem_tree_new(9);
    merkle_store_t store = mem_store(t);
    uint8_t proof[MERKLE_MAX_PROOF_HASHES * HB], root[HB];
    size_t n = 77;
    stele_error_t err = {0};
    assert_int_equal(
        merkle_prove_inclusion(t->h, &store, 9, 9, proof, MERKLE_MAX_PROOF_HASHES, &n, &err),
        STELE_EINVAL);
    assert_non_null(strstr(err.message, "leaf 9 is not in a merkle tree of 9 leaves"));
    assert_int_equal(merkle_prove_inclusion(t->h, &store, 0, 9, proof, 3, &n, &err), STELE_EINVAL);
    assert_non_null(strstr(err.message, "needs 4 hashes; the buffer holds 3"));
    assert_int_equal(
        merkle_prove_consistency(t->h, &store, 10, 9, proof, MERKLE_MAX_PROOF_HASHES, &n, &err),
        STELE_EINVAL);
    assert_non_null(strstr(err.message, "cannot grow"));
    assert_int_equal(merkle_tree_hash(t->h, &store, MERKLE_MAX_LEAVES + 1, root, &err),
                     STELE_EINVAL);
    assert_int_equal(n, 77);
    /* The store's error comes back as it is. */
    t->fail_reads = 1;
    memset(&err, 0, sizeof err);
    assert_int_equal(merkle_tree_hash(t->h, &store, 9, root, &err), -EIO);
    assert_non_null(strstr(err.message, "no stored hash"));
    assert_int_equal(
        merkle_prove_inclusion(t->h, &store, 3, 9, proof, MERKLE_MAX_PROOF_HASHES, &n, &err), -EIO);
    assert_int_equal(
        merkle_prove_consistency(t->h, &store, 3, 9, proof, MERKLE_MAX_PROOF_HASHES, &n, &err),
        -EIO);
    merkle_range_t r = t->range;
    assert_int_equal(merkle_range_load(&r, &store, 9, &err), -EIO);
    assert_memory_equal(&r, &t->range, sizeof r);
    assert_int_equal(n, 77);
    mem_tree_free(t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merkle_matches_rfc6962_test_vectors),
        cmocka_unit_test(test_merkle_empty_tree_is_sha256_of_nothing),
        cmocka_unit_test(test_merkle_leaf_and_node_hashes_are_domain_separated),
        cmocka_unit_test(test_merkle_stored_hashes_are_subtree_roots_at_their_index),
        cmocka_unit_test(test_merkle_every_root_matches_the_reference),
        cmocka_unit_test(test_merkle_every_inclusion_proof_verifies),
        cmocka_unit_test(test_merkle_every_consistency_proof_verifies),
        cmocka_unit_test(test_merkle_inclusion_fails_on_any_change),
        cmocka_unit_test(test_merkle_consistency_fails_on_any_change),
        cmocka_unit_test(test_merkle_proof_of_another_tree_fails),
        cmocka_unit_test(test_merkle_range_encodes_and_restores),
        cmocka_unit_test(test_merkle_range_decode_rejects_bad_bytes),
        cmocka_unit_test(test_merkle_full_tree_refuses_append),
        cmocka_unit_test(test_merkle_proof_lengths_stay_within_the_limit),
        cmocka_unit_test(test_merkle_prove_rejects_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
