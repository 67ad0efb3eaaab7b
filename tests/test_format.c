/*
 * test_format.c: the format golden test. Reads journal/FORMAT.md itself, takes the worked
 * examples' blocks (section 9, version 1; section 12, version 2), and decodes them with the
 * journal's own code: every field must be what the document says, the CRCs, chain hash,
 * leaf hash and the checkpoint's signature and root must check, and the bytes must be
 * exactly what the writer produces for the same record today. Also checks that zeros never
 * validate as a frame, and that each header rule (H1-H6) and frame rule (F2, F4, F5) refuses
 * its case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "crc32c.h"
#include "format.h"
#include "journal.h"
#include "merkle.h"
#include "meta.h"
#include "note.h"
#include "record.h"
#include "segment.h"

#ifndef STELE_FORMAT_MD
#error "STELE_FORMAT_MD must name journal/FORMAT.md (set by tests/journal.cmake)"
#endif

static const uint8_t example_payload[12] = {0x0c, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 0};
static const int64_t example_ts_ns = 1700000000000000000LL;

/* Parses the ```hex <tag> block of FORMAT.md into out; returns the byte count. */
static size_t
read_hex_block(const char *tag, uint8_t *out, size_t cap)
{
    FILE *f = fopen(STELE_FORMAT_MD, "r");
    assert_non_null(f);
    char line[512], want[64];
    snprintf(want, sizeof want, "```hex %s", tag);
    int inside = 0;
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        if (!inside) {
            inside = strncmp(line, want, strlen(want)) == 0;
            continue;
        }
        if (strncmp(line, "```", 3) == 0)
            break;
        char *p = strchr(line, ':');
        assert_non_null(p);
        p++;
        unsigned byte;
        int used;
        while (sscanf(p, " %2x%n", &byte, &used) == 1) {
            assert_true(n < cap);
            out[n++] = (uint8_t)byte;
            p += used;
        }
    }
    fclose(f);
    assert_true(inside);
    return n;
}

/* The lines of the ```text <tag> block of FORMAT.md, each with its newline, into out
 * (NUL-terminated). Returns the length. */
static size_t
read_text_block(const char *tag, char *out, size_t cap)
{
    FILE *f = fopen(STELE_FORMAT_MD, "r");
    assert_non_null(f);
    char line[512], want[64];
    snprintf(want, sizeof want, "```text %s\n", tag);
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
    assert_true(inside);
    out[n] = '\0';
    return n;
}

static void
test_format_decodes_worked_example_header(void **state)
{
    (void)state;
    uint8_t page[SEG_HEADER_BYTES] = {0};
    size_t n = read_hex_block("header", page, sizeof page);
    assert_int_equal(n, SEG_USED_BYTES);
    segment_header_t h;
    segment_header_fault_t fault = {0};
    assert_int_equal(segment_header_decode(page, sizeof page, &h, &fault), 0);
    assert_int_equal(h.version, 1);
    assert_int_equal(h.first_seq, 1);
    assert_int_equal(h.created_ns, example_ts_ns);
    assert_int_equal(h.prev_ts_ns, 0);
    assert_string_equal(h.source, "host-a");
    uint8_t genesis[HASH_BYTES];
    memset(genesis, 0x11, sizeof genesis);
    assert_memory_equal(h.genesis, genesis, HASH_BYTES);
    assert_memory_equal(h.prev_hash, genesis, HASH_BYTES);
    assert_int_equal(format_load_u32(page + SEG_OFF_CRC), 0x54a5c091u);
    /* The writer produces exactly these bytes today. */
    uint8_t again[SEG_HEADER_BYTES];
    segment_header_encode(&h, again);
    assert_memory_equal(again, page, sizeof page);
}

static void
test_format_decodes_worked_example_frame(void **state)
{
    (void)state;
    uint8_t bytes[256] = {0};
    size_t n = read_hex_block("frame", bytes, sizeof bytes);
    assert_int_equal(n, 88);
    assert_int_equal(journal_frame_bytes(1, 12), 88);
    record_view_t v;
    assert_int_equal(record_decode(1, bytes, 160, 1024, SEG_HEADER_BYTES, &v), RECORD_VALID);
    assert_int_equal(v.payload_len, 12);
    assert_int_equal(v.flags, FRAME_FLAG_BATCH_END);
    assert_int_equal(v.seq, 1);
    assert_int_equal(v.ts_ns, example_ts_ns);
    assert_int_equal(v.synced_seq, 0);
    assert_int_equal(v.frame_bytes, 88);
    assert_memory_equal(v.payload, example_payload, sizeof example_payload);
    assert_int_equal(format_load_u32(bytes + FRAME_OFF_CRC), 0xf7a9483cu);
    /* The chain hash from the genesis value. */
    uint8_t genesis[HASH_BYTES], hash[HASH_BYTES];
    memset(genesis, 0x11, sizeof genesis);
    chain_hasher_t *hasher = chain_hasher_new();
    assert_non_null(hasher);
    assert_int_equal(chain_hash(hasher, genesis, 1, example_ts_ns, example_payload, 12, hash), 0);
    assert_memory_equal(hash, v.hash, HASH_BYTES);
    /* Preparing and sealing the same record gives the same bytes. */
    uint8_t frame[88];
    journal_frame_prepare(1, frame, 1, example_ts_ns, NULL, example_payload, 12);
    assert_int_equal(record_seal(frame, genesis, FRAME_FLAG_BATCH_END, 0, hasher, hash), 0);
    assert_memory_equal(frame, bytes, sizeof frame);
    chain_hasher_free(hasher);
}

static void
test_format_zero_frame_never_validates(void **state)
{
    (void)state;
    uint8_t zeros[512] = {0};
    record_view_t v;
    assert_int_equal(record_decode(1, zeros, sizeof zeros, sizeof zeros, SEG_HEADER_BYTES, &v),
                     RECORD_ZERO);
    /* Even with a correct-looking CRC of zeros in place, a zero magic is not a frame. */
    uint8_t frame[128] = {0};
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, 8);
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(1, frame, 8));
    assert_int_equal(record_decode(1, frame, sizeof frame, sizeof frame, SEG_HEADER_BYTES, &v),
                     RECORD_TORN);
    /* A zero-length payload is refused too. */
    format_store_u32(frame + FRAME_OFF_MAGIC, FRAME_MAGIC);
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, 0);
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(1, frame, 0));
    assert_int_equal(record_decode(1, frame, sizeof frame, sizeof frame, SEG_HEADER_BYTES, &v),
                     RECORD_BAD_LENGTH);
}

/* One row per way a segment header breaks FORMAT.md's rules H1-H5 (the example header with
 * one field changed, its CRC recomputed unless the row is about the CRC): the code and the
 * reason segment_header_decode gives. */
typedef struct header_case {
    const char *what;
    size_t field_off; /* where `value` is stored (u32 or u64, per field_bytes) */
    unsigned field_bytes;
    uint64_t value;
    int keep_crc; /* leave the old CRC: the change must be caught by H2 */
    int expect_rc;
    const char *expect_why;
    uint32_t expect_off; /* the offset the refusal names */
} header_case_t;

static void
test_format_header_rules_each_refuse_their_case(void **state)
{
    (void)state;
    static const header_case_t cases[] = {
        {"H1 magic", SEG_OFF_MAGIC, 4, 0x58585858, 0, STELE_ECORRUPT, "bad segment magic", 0},
        {"H2 crc", SEG_OFF_CREATED_NS, 8, 1, 1, STELE_ECORRUPT, "bad header crc", 0},
        {"H3 newer version", SEG_OFF_VERSION, 4, FORMAT_VERSION + 1, 0, STELE_EVERSION,
         "written by a newer format version", 0},
        {"H4 version 0", SEG_OFF_VERSION, 4, 0, 0, STELE_ECORRUPT, "bad header fields", 0},
        {"H4 header_bytes", SEG_OFF_HEADER_BYTES, 4, 2 * SEG_HEADER_BYTES, 0, STELE_ECORRUPT,
         "bad header fields", 0},
        {"H4 source not NUL-terminated", SEG_OFF_SOURCE + SEG_SOURCE_BYTES - 4, 4, 0x41414141, 0,
         STELE_ECORRUPT, "bad header fields", 0},
        {"H4 first_seq 0", SEG_OFF_FIRST_SEQ, 8, 0, 0, STELE_ECORRUPT, "first seq is 0", 0},
        {"H5 first reserved byte", SEG_USED_BYTES, 4, 0x80, 0, STELE_ECORRUPT,
         "reserved header byte is not zero", SEG_USED_BYTES},
        {"H5 last reserved byte", SEG_HEADER_BYTES - 4, 4, 0x01000000, 0, STELE_ECORRUPT,
         "reserved header byte is not zero", SEG_HEADER_BYTES - 1},
    };
    uint8_t example[SEG_HEADER_BYTES] = {0};
    read_hex_block("header", example, sizeof example);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const header_case_t *c = &cases[i];
        uint8_t page[SEG_HEADER_BYTES];
        memcpy(page, example, sizeof page);
        if (c->field_bytes == 4)
            format_store_u32(page + c->field_off, (uint32_t)c->value);
        else
            format_store_u64(page + c->field_off, c->value);
        if (!c->keep_crc)
            format_store_u32(page + SEG_OFF_CRC, crc32c(page, SEG_CRC_COVERED_BYTES));
        segment_header_t h;
        segment_header_fault_t fault = {.why = ""};
        int rc = segment_header_decode(page, sizeof page, &h, &fault);
        if (rc != c->expect_rc || strcmp(fault.why, c->expect_why) != 0 ||
            fault.offset != c->expect_off)
            fail_msg("%s: got %d \"%s\" at %u, want %d \"%s\" at %u", c->what, rc, fault.why,
                     fault.offset, c->expect_rc, c->expect_why, c->expect_off);
    }
    segment_header_t h;
    segment_header_fault_t fault = {0};
    assert_int_equal(segment_header_decode(example, SEG_HEADER_BYTES - 1, &h, &fault),
                     STELE_ECORRUPT);
    assert_string_equal(fault.why, "header cut short");
    /* A newer version may give the reserved bytes a meaning: H3 answers before H5. */
    uint8_t page[SEG_HEADER_BYTES];
    memcpy(page, example, sizeof page);
    format_store_u32(page + SEG_OFF_VERSION, FORMAT_VERSION + 1);
    format_store_u32(page + SEG_OFF_CRC, crc32c(page, SEG_CRC_COVERED_BYTES));
    page[SEG_USED_BYTES + 100] = 0x01;
    assert_int_equal(segment_header_decode(page, sizeof page, &h, &fault), STELE_EVERSION);
}

/* Rules F4 and F5, which only a frame with a correct CRC reaches: a reserved flag bit (the
 * CRC covers the flags, so it is recomputed) and a non-zero padding byte (the CRC does not
 * cover padding) each make the frame BAD_CRC; F2 refuses a length past the segment or
 * above the format's maximum before any CRC is checked. */
static void
test_format_frame_rules_refuse_flags_padding_and_length(void **state)
{
    (void)state;
    uint8_t example[256] = {0};
    size_t n = read_hex_block("frame", example, sizeof example);
    uint8_t frame[256];
    record_view_t v;

    memcpy(frame, example, sizeof frame);
    format_store_u32(frame + FRAME_OFF_FLAGS, FRAME_FLAG_BATCH_END | FRAME_FLAG_META);
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(1, frame, 12));
    assert_int_equal(record_decode(1, frame, n, n, SEG_HEADER_BYTES, &v), RECORD_BAD_CRC);

    memcpy(frame, example, sizeof frame);
    frame[n - 1] = 1; /* the last padding byte */
    assert_int_equal(record_decode(1, frame, n, n, SEG_HEADER_BYTES, &v), RECORD_BAD_CRC);

    memcpy(frame, example, sizeof frame);
    assert_int_equal(record_decode(1, frame, n, n - FRAME_ALIGN, SEG_HEADER_BYTES, &v),
                     RECORD_BAD_LENGTH);
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, FRAME_MAX_PAYLOAD + 1);
    assert_int_equal(record_decode(1, frame, n, UINT64_MAX, SEG_HEADER_BYTES, &v),
                     RECORD_BAD_LENGTH);
    /* The largest length the format allows is not refused for its size: more is needed. */
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, FRAME_MAX_PAYLOAD);
    assert_int_equal(record_decode(1, frame, n, UINT64_MAX, SEG_HEADER_BYTES, &v),
                     RECORD_NEED_MORE);

    memcpy(frame, example, sizeof frame);
    assert_int_equal(record_decode(1, frame, n, n, SEG_HEADER_BYTES, &v), RECORD_VALID);
}

static void
test_format_segment_names_are_twenty_digits(void **state)
{
    (void)state;
    char name[SEG_NAME_BYTES];
    segment_name(name, 42);
    assert_string_equal(name, "00000000000000000042.seg");
    segment_name(name, UINT64_MAX);
    assert_string_equal(name, "18446744073709551615.seg");
    uint64_t seq = 0;
    assert_int_equal(segment_parse_name("18446744073709551615.seg", &seq), 1);
    assert_true(seq == UINT64_MAX);
    assert_int_equal(segment_parse_name("18446744073709551616.seg", &seq), 0);
    assert_int_equal(segment_parse_name("0000000000000000042.seg", &seq), 0);
    assert_int_equal(segment_parse_name("00000000000000000042.seg.tmp", &seq), 0);
    assert_int_equal(segment_parse_name("prepared.tmp", &seq), 0);
}

/* ---- version 2 (FORMAT.md section 12) ---- */

static const journal_origin_t example_origin = {1000, 1000, 4242, FRAME_ORIGIN_PROCESS};
static const uint8_t example_leaf[HASH_BYTES] = {
    0x05, 0x24, 0x2d, 0x03, 0xc3, 0xfc, 0xec, 0xd6, 0x0f, 0xea, 0x95, 0x91, 0xac, 0xcb, 0xa9, 0xb1,
    0xeb, 0x12, 0x5e, 0xa1, 0xae, 0x2d, 0x53, 0x58, 0x86, 0xd7, 0x7f, 0xec, 0xe3, 0x1b, 0xdf, 0xf5};

static void
test_format_decodes_worked_example_v2_header(void **state)
{
    (void)state;
    uint8_t page[SEG_HEADER_BYTES] = {0};
    assert_int_equal(read_hex_block("header-v2", page, sizeof page), 200);
    segment_header_t h;
    segment_header_fault_t fault = {0};
    assert_int_equal(segment_header_decode(page, sizeof page, &h, &fault), 0);
    assert_int_equal(h.version, 2);
    assert_int_equal(h.first_seq, 1);
    assert_string_equal(h.source, "host-a");
    assert_int_equal(h.trust_flags, SEG_TRUST_KEYED);
    assert_int_equal(h.key_epoch, 0);
    assert_int_equal(h.range.size, 0);
    assert_int_equal(format_load_u32(page + SEG_OFF_CRC), 0x79e351eau);
    assert_int_equal(format_load_u32(page + SEG_OFF_EXT_CRC), 0x8b1e01e5u);
    assert_int_equal(format_load_u32(page + SEG_OFF_RANGE_BYTES), 8);
    uint8_t again[SEG_HEADER_BYTES];
    segment_header_encode(&h, again);
    assert_memory_equal(again, page, sizeof page);
}

static void
test_format_decodes_worked_example_v2_frame(void **state)
{
    (void)state;
    uint8_t bytes[256] = {0};
    assert_int_equal(read_hex_block("frame-v2", bytes, sizeof bytes), 104);
    assert_int_equal(journal_frame_bytes(2, 12), 104);
    record_view_t v;
    assert_int_equal(record_decode(2, bytes, 104, 1024, SEG_HEADER_BYTES, &v), RECORD_VALID);
    assert_int_equal(v.flags, FRAME_FLAG_BATCH_END);
    assert_int_equal(v.seq, 1);
    assert_int_equal(v.ts_ns, example_ts_ns);
    assert_false(v.is_meta);
    assert_int_equal(v.origin_uid, 1000);
    assert_int_equal(v.origin_gid, 1000);
    assert_int_equal(v.origin_pid, 4242);
    assert_int_equal(v.origin_kind, FRAME_ORIGIN_PROCESS);
    assert_memory_equal(v.payload, example_payload, sizeof example_payload);
    assert_int_equal(format_load_u32(bytes + FRAME_OFF_CRC), 0x7b12cd58u);
    uint8_t genesis[HASH_BYTES], leaf[HASH_BYTES], hash[HASH_BYTES];
    memset(genesis, 0x11, sizeof genesis);
    merkle_hasher_t *mh = merkle_hasher_new();
    chain_hasher_t *ch = chain_hasher_new();
    assert_int_equal(record_leaf_hash(mh, bytes, 12, leaf), 0);
    assert_memory_equal(leaf, example_leaf, HASH_BYTES);
    assert_int_equal(chain_link(ch, genesis, leaf, hash), 0);
    assert_memory_equal(hash, v.hash, HASH_BYTES);
    uint8_t frame[104];
    journal_frame_prepare(2, frame, 1, example_ts_ns, &example_origin, example_payload, 12);
    assert_int_equal(record_seal_v2(frame, genesis, leaf, FRAME_FLAG_BATCH_END, 0, ch, hash), 0);
    assert_memory_equal(frame, bytes, sizeof frame);
    merkle_hasher_free(mh);
    chain_hasher_free(ch);
}

/* The example key of section 10.7. */
static void
example_verifier(note_verifier_t *v)
{
    char text[256];
    size_t len = read_text_block("verifier-key", text, sizeof text);
    assert_int_equal(note_verifier_parse(text, len - 1, v, NULL), 0);
}

static void
test_format_decodes_worked_example_v2_checkpoint(void **state)
{
    (void)state;
    uint8_t bytes[512] = {0};
    size_t n = read_hex_block("meta-frame-v2", bytes, sizeof bytes);
    assert_int_equal(n, 376);
    record_view_t v;
    assert_int_equal(record_decode(2, bytes, n, n, SEG_HEADER_BYTES + 104, &v), RECORD_VALID);
    assert_true(v.is_meta);
    assert_int_equal(v.flags, FRAME_FLAG_BATCH_END | FRAME_FLAG_META);
    assert_int_equal(v.seq, 1);
    assert_int_equal(v.payload_len, 283);
    assert_int_equal(v.payload[0], META_TYPE_CHECKPOINT);
    char note[1024];
    size_t note_len = read_text_block("checkpoint-v2", note, sizeof note);
    assert_int_equal(note_len, v.payload_len - 1);
    assert_memory_equal(v.payload + 1, note, note_len);
    note_verifier_t key;
    example_verifier(&key);
    meta_statement_t m;
    assert_int_equal(meta_open(v.payload, v.payload_len, &key, &m, NULL), 0);
    char origin[CHECKPOINT_ORIGIN_MAX_BYTES + 1];
    uint8_t genesis[HASH_BYTES];
    memset(genesis, 0x11, sizeof genesis);
    meta_origin(origin, "host-a", genesis);
    assert_string_equal(m.origin, origin);
    assert_int_equal(m.size, 1);
    assert_memory_equal(m.root, example_leaf, HASH_BYTES); /* a tree of one leaf */
    assert_int_equal(m.epoch, 0);
    assert_int_equal(m.time_ns, example_ts_ns);
    assert_int_equal(m.reason, META_REASON_CLOSE);
    /* Signing the same statement with the example key gives the same frame. */
    uint8_t seed[NOTE_KEY_BYTES];
    memset(seed, 0x22, sizeof seed);
    note_signer_t s;
    assert_int_equal(note_signer_from_seed("stele/host-a", seed, &s, NULL), 0);
    char *signed_note = NULL;
    size_t signed_len = 0;
    assert_int_equal(meta_sign(&s, &m, &signed_note, &signed_len, NULL), 0);
    uint8_t again[512];
    assert_int_equal(record_meta_bytes(signed_len), n);
    record_meta_build(again, META_TYPE_CHECKPOINT, signed_note, signed_len, 1, example_ts_ns,
                      FRAME_FLAG_BATCH_END, 0);
    assert_memory_equal(again, bytes, n);
    free(signed_note);
    note_signer_wipe(&s);
}

static void
test_format_decodes_worked_example_v2_key_start(void **state)
{
    (void)state;
    char note[1024];
    size_t len = read_text_block("key-start", note, sizeof note);
    uint8_t payload[1024];
    payload[0] = META_TYPE_KEY;
    memcpy(payload + 1, note, len);
    note_verifier_t key;
    example_verifier(&key);
    meta_statement_t m;
    assert_int_equal(meta_open(payload, len + 1, &key, &m, NULL), 0);
    assert_int_equal(m.reason, META_REASON_START);
    assert_int_equal(m.size, 0);
    uint8_t empty[HASH_BYTES];
    merkle_empty_root(empty);
    assert_memory_equal(m.root, empty, HASH_BYTES);
    assert_int_equal(m.epoch, 0);
    assert_int_equal(m.key_epoch, 0);
    assert_memory_equal(&m.key, &key, sizeof key);
    /* As a checkpoint (type 1) it is refused: a key statement's type is 2. */
    payload[0] = META_TYPE_CHECKPOINT;
    assert_int_equal(meta_open(payload, len + 1, &key, &m, NULL), STELE_ECORRUPT);
}

/* Rule H6, one row per way version 2's part of the header breaks it (the example with one
 * field changed and both CRCs recomputed, unless the row is about ext_crc). */
static void
test_format_v2_header_rule_refuses_each_case(void **state)
{
    (void)state;
    static const header_case_t cases[] = {
        {"H6 ext_crc", SEG_OFF_KEY_EPOCH, 8, 1, 1, STELE_ECORRUPT,
         "bad header crc (version 2 part)", 0},
        {"H6 unknown trust flag", SEG_OFF_TRUST_FLAGS, 4, 3, 0, STELE_ECORRUPT,
         "unknown trust flags", 0},
        {"H6 epoch without a key", SEG_OFF_TRUST_FLAGS, 4, 0, 0, STELE_ECORRUPT, "", 0},
        {"H6 range size", SEG_OFF_RANGE, 8, 1, 0, STELE_ECORRUPT, "bad merkle range", 0},
        {"H6 range bytes", SEG_OFF_RANGE_BYTES, 4, 40, 0, STELE_ECORRUPT, "bad merkle range", 0},
        {"H6 range padding", SEG_OFF_RANGE + 8, 4, 1, 0, STELE_ECORRUPT,
         "merkle range not zero-padded", 0},
        {"H5 first reserved byte", SEG_V2_USED_BYTES, 4, 0x80, 0, STELE_ECORRUPT,
         "reserved header byte is not zero", SEG_V2_USED_BYTES},
    };
    uint8_t example[SEG_HEADER_BYTES] = {0};
    read_hex_block("header-v2", example, sizeof example);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const header_case_t *c = &cases[i];
        uint8_t page[SEG_HEADER_BYTES];
        memcpy(page, example, sizeof page);
        if (strcmp(c->what, "H6 epoch without a key") == 0)
            format_store_u64(page + SEG_OFF_KEY_EPOCH, 5); /* with trust_flags 0 below */
        if (c->field_bytes == 4)
            format_store_u32(page + c->field_off, (uint32_t)c->value);
        else
            format_store_u64(page + c->field_off, c->value);
        if (!c->keep_crc)
            format_store_u32(page + SEG_OFF_EXT_CRC,
                             crc32c(page + SEG_EXT_CRC_FROM, SEG_V2_USED_BYTES - SEG_EXT_CRC_FROM));
        const char *want = c->expect_why[0] ? c->expect_why : "key epoch without a key";
        segment_header_t h;
        segment_header_fault_t fault = {.why = ""};
        int rc = segment_header_decode(page, sizeof page, &h, &fault);
        if (rc != c->expect_rc || strcmp(fault.why, want) != 0 || fault.offset != c->expect_off)
            fail_msg("%s: got %d \"%s\" at %u, want %d \"%s\" at %u", c->what, rc, fault.why,
                     fault.offset, c->expect_rc, want, c->expect_off);
    }
}

/* F4 for meta frames: a meta frame must carry a type byte and text, and no hash or origin. */
static void
test_format_meta_frame_rules_refuse_hash_origin_and_short_payload(void **state)
{
    (void)state;
    uint8_t example[512] = {0};
    size_t n = read_hex_block("meta-frame-v2", example, sizeof example);
    const size_t offsets[] = {FRAME_OFF_HASH + 5, FRAME_OFF_ORIGIN_PID};
    for (size_t i = 0; i < 2; i++) {
        uint8_t frame[512];
        memcpy(frame, example, sizeof frame);
        frame[offsets[i]] = 1;
        format_store_u32(frame + FRAME_OFF_CRC, record_crc(2, frame, 283));
        record_view_t v;
        assert_int_equal(record_decode(2, frame, n, n, SEG_HEADER_BYTES, &v), RECORD_BAD_CRC);
    }
    uint8_t frame[96] = {0};
    record_meta_build(frame, META_TYPE_CHECKPOINT, "x", 0, 1, 0, FRAME_FLAG_BATCH_END, 0);
    record_view_t v;
    assert_int_equal(record_decode(2, frame, 96, 96, SEG_HEADER_BYTES, &v), RECORD_BAD_CRC);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_decodes_worked_example_header),
        cmocka_unit_test(test_format_decodes_worked_example_frame),
        cmocka_unit_test(test_format_zero_frame_never_validates),
        cmocka_unit_test(test_format_header_rules_each_refuse_their_case),
        cmocka_unit_test(test_format_frame_rules_refuse_flags_padding_and_length),
        cmocka_unit_test(test_format_segment_names_are_twenty_digits),
        cmocka_unit_test(test_format_decodes_worked_example_v2_header),
        cmocka_unit_test(test_format_decodes_worked_example_v2_frame),
        cmocka_unit_test(test_format_decodes_worked_example_v2_checkpoint),
        cmocka_unit_test(test_format_decodes_worked_example_v2_key_start),
        cmocka_unit_test(test_format_v2_header_rule_refuses_each_case),
        cmocka_unit_test(test_format_meta_frame_rules_refuse_hash_origin_and_short_payload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
