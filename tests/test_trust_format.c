/*
 * test_trust_format.c: the golden test of journal/FORMAT.md section 10 ("Merkle tree and
 * signed checkpoints"). Reads the worked example's blocks from the document itself and
 * checks each against what the trust code produces from the example's inputs (a key seed of
 * 32 x 0x22 named stele/host-a, leaves "a" "b" "c"): public key, key id and key strings,
 * stored hashes at their indexes, the compact range, both proofs, the checkpoint text and the
 * signed note, byte for byte; then opens and verifies what the document shows.
 * (tests/test_trust_interop.c has Go check the same example.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "checkpoint.h"
#include "merkle.h"
#include "note.h"

#ifndef STELE_FORMAT_MD
#error "STELE_FORMAT_MD must name journal/FORMAT.md (set by tests/trust.cmake)"
#endif

#define HB MERKLE_HASH_BYTES
#define BLOCK_MAX_BYTES 1024

/* The lines of the ```<kind> <tag> block of FORMAT.md, each with its newline, into out.
 * Returns the length. */
static size_t
read_block(const char *kind, const char *tag, char *out, size_t cap)
{
    FILE *f = fopen(STELE_FORMAT_MD, "r");
    assert_non_null(f);
    char line[512], want[64];
    snprintf(want, sizeof want, "```%s %s\n", kind, tag);
    int inside = 0;
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        if (!inside) {
            inside = strcmp(line, want) == 0;
            continue;
        }
        if (strncmp(line, "```", 3) == 0)
            break;
        assert_true(n + strlen(line) < cap);
        memcpy(out + n, line, strlen(line));
        n += strlen(line);
    }
    fclose(f);
    if (!inside)
        fail_msg("FORMAT.md has no ```%s %s block", kind, tag);
    out[n] = '\0';
    return n;
}

/* A ```hex block ("OFFSET: bytes..." lines) as bytes. */
static size_t
read_hex_block(const char *tag, uint8_t *out, size_t cap)
{
    char text[4 * BLOCK_MAX_BYTES];
    read_block("hex", tag, text, sizeof text);
    size_t n = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *p = strchr(line, ':');
        assert_non_null(p);
        assert_int_equal(strtoul(line, NULL, 16), n); /* offsets count the bytes */
        unsigned byte;
        int used;
        for (p++; sscanf(p, " %2x%n", &byte, &used) == 1; p += used) {
            assert_true(n < cap);
            out[n++] = (uint8_t)byte;
        }
    }
    return n;
}

/* A ```text block holding one line: that line, without its newline. */
static void
read_line_block(const char *tag, char *out, size_t cap)
{
    size_t len = read_block("text", tag, out, cap);
    assert_true(len > 0 && out[len - 1] == '\n');
    out[len - 1] = '\0';
    assert_null(strchr(out, '\n'));
}

static void
example_signer(note_signer_t *s)
{
    uint8_t seed[NOTE_KEY_BYTES];
    memset(seed, 0x22, sizeof seed);
    assert_int_equal(note_signer_from_seed("stele/host-a", seed, s, NULL), 0);
}

typedef struct example_tree {
    merkle_hasher_t *h;
    merkle_range_t range;
    uint8_t stored[4][HB];
    unsigned n_stored;
} example_tree_t;

static int
example_read(void *ctx, unsigned level, uint64_t index, uint8_t out[HB], stele_error_t *err)
{
    (void)err;
    const example_tree_t *t = ctx;
    uint64_t at = merkle_stored_index(level, index);
    assert_true(at < t->n_stored);
    memcpy(out, t->stored[at], HB);
    return 0;
}

static void
example_tree(example_tree_t *t)
{
    memset(t, 0, sizeof *t);
    t->h = merkle_hasher_new();
    assert_non_null(t->h);
    merkle_range_init(&t->range);
    for (const char *leaf = "abc"; *leaf; leaf++) {
        uint8_t hash[HB];
        struct iovec part = {(void *)leaf, 1};
        assert_int_equal(merkle_hash_leaf(t->h, &part, 1, hash), 0);
        merkle_stored_t st;
        assert_int_equal(merkle_range_append(t->h, &t->range, hash, &st, NULL), 0);
        memcpy(t->stored[t->n_stored], st.hash, (size_t)st.count * HB);
        t->n_stored += st.count;
    }
    assert_int_equal(t->n_stored, 4);
}

static void
test_trust_format_decodes_the_example_keys(void **state)
{
    (void)state;
    note_signer_t s;
    example_signer(&s);
    uint8_t public_key[64];
    assert_int_equal(read_hex_block("public-key", public_key, sizeof public_key), 32);
    assert_memory_equal(s.verifier.public_key, public_key, 32);
    assert_int_equal(s.verifier.key_id, 0x62cb0fba);

    char doc[BLOCK_MAX_BYTES], mine[NOTE_SIGNER_KEY_MAX_BYTES + 1];
    read_line_block("signer-key", doc, sizeof doc);
    assert_int_equal(note_signer_format(&s, mine, sizeof mine), strlen(doc));
    assert_string_equal(mine, doc);
    note_signer_t parsed;
    assert_int_equal(note_signer_parse(doc, strlen(doc), &parsed, NULL), 0);
    assert_memory_equal(&parsed, &s, sizeof s);

    read_line_block("verifier-key", doc, sizeof doc);
    assert_int_equal(note_verifier_format(&s.verifier, mine, sizeof mine), strlen(doc));
    assert_string_equal(mine, doc);
    note_verifier_t v;
    assert_int_equal(note_verifier_parse(doc, strlen(doc), &v, NULL), 0);
    assert_memory_equal(&v, &s.verifier, sizeof v);
    note_signer_wipe(&s);
    note_signer_wipe(&parsed);
}

static void
test_trust_format_decodes_the_example_tree(void **state)
{
    (void)state;
    example_tree_t t;
    example_tree(&t);
    uint8_t doc[BLOCK_MAX_BYTES];
    assert_int_equal(read_hex_block("stored-hashes", doc, sizeof doc), 4 * HB);
    assert_memory_equal(t.stored, doc, 4 * HB);
    /* The addresses the document gives them. */
    assert_int_equal(merkle_stored_index(0, 0), 0);
    assert_int_equal(merkle_stored_index(0, 1), 1);
    assert_int_equal(merkle_stored_index(1, 0), 2);
    assert_int_equal(merkle_stored_index(0, 2), 3);

    uint8_t range[MERKLE_RANGE_MAX_BYTES];
    size_t len = merkle_range_encode(&t.range, range, sizeof range);
    assert_int_equal(read_hex_block("range", doc, sizeof doc), len);
    assert_memory_equal(range, doc, len);
    merkle_range_t back;
    assert_int_equal(merkle_range_decode(&back, doc, len, NULL), 0);
    uint8_t root[HB],
        want_root[HB] = {0x36, 0x64, 0x2e, 0x73, 0xc2, 0x54, 0x0a, 0xb1, 0x21, 0xe3, 0xa6,
                         0xbf, 0x95, 0x45, 0xb0, 0xa2, 0x49, 0x82, 0xcd, 0x83, 0x0e, 0xb1,
                         0x3d, 0x3c, 0xd1, 0x9d, 0xe3, 0xce, 0x6c, 0x02, 0x1e, 0xc1};
    assert_int_equal(merkle_range_root(t.h, &back, root), 0);
    assert_memory_equal(root, want_root, HB);

    merkle_store_t store = {example_read, &t};
    uint8_t proof[MERKLE_MAX_PROOF_HASHES * HB];
    size_t n = 0;
    assert_int_equal(
        merkle_prove_inclusion(t.h, &store, 1, 3, proof, MERKLE_MAX_PROOF_HASHES, &n, NULL), 0);
    assert_int_equal(read_hex_block("inclusion-proof", doc, sizeof doc), n * HB);
    assert_memory_equal(proof, doc, n * HB);
    assert_int_equal(merkle_verify_inclusion(t.h, 1, 3, t.stored[1], doc, n, root, NULL), 0);
    assert_int_equal(
        merkle_prove_consistency(t.h, &store, 2, 3, proof, MERKLE_MAX_PROOF_HASHES, &n, NULL), 0);
    assert_int_equal(read_hex_block("consistency-proof", doc, sizeof doc), n * HB);
    assert_memory_equal(proof, doc, n * HB);
    assert_int_equal(merkle_verify_consistency(t.h, 2, 3, t.stored[2], root, doc, n, NULL), 0);
    merkle_hasher_free(t.h);
}

static void
test_trust_format_decodes_the_example_checkpoint(void **state)
{
    (void)state;
    example_tree_t t;
    example_tree(&t);
    checkpoint_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.origin, sizeof c.origin, "stele/host-a");
    c.size = 3;
    assert_int_equal(merkle_range_root(t.h, &t.range, c.root), 0);
    char text[CHECKPOINT_BASE_MAX_BYTES + 1], doc[BLOCK_MAX_BYTES];
    size_t len = 0;
    assert_int_equal(checkpoint_format(&c, text, sizeof text, &len, NULL), 0);
    assert_int_equal(read_block("text", "checkpoint", doc, sizeof doc), len);
    assert_string_equal(text, doc);

    note_signer_t s;
    example_signer(&s);
    char *note = NULL;
    size_t note_len = 0;
    assert_int_equal(note_sign(&s, text, len, &note, &note_len, NULL), 0);
    size_t doc_len = read_block("text", "signed-note", doc, sizeof doc);
    assert_int_equal(note_len, doc_len);
    assert_string_equal(note, doc);

    /* The document's note opens with the document's verifier key and says the same. */
    char vkey[BLOCK_MAX_BYTES];
    read_line_block("verifier-key", vkey, sizeof vkey);
    note_verifier_t v;
    assert_int_equal(note_verifier_parse(vkey, strlen(vkey), &v, NULL), 0);
    note_opened_t o;
    assert_int_equal(note_open(doc, doc_len, &v, 1, &o, NULL), 0);
    checkpoint_t back;
    assert_int_equal(checkpoint_parse(doc, o.text_len, &back, NULL), 0);
    assert_int_equal(back.size, 3);
    assert_memory_equal(back.root, c.root, HB);
    /* Its signature bytes are the ones shown. */
    uint8_t sig[128];
    assert_int_equal(read_hex_block("signature", sig, sizeof sig), 68);
    char *b64 = strrchr(doc, ' ') + 1;
    uint8_t decoded[68];
    assert_int_equal(base64_decode(b64, strcspn(b64, "\n"), decoded, sizeof decoded), 68);
    assert_memory_equal(decoded, sig, 68);
    free(note);
    note_signer_wipe(&s);
    merkle_hasher_free(t.h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trust_format_decodes_the_example_keys),
        cmocka_unit_test(test_trust_format_decodes_the_example_tree),
        cmocka_unit_test(test_trust_format_decodes_the_example_checkpoint),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
