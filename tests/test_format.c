/*
 * test_format.c: the format golden test. Reads journal/FORMAT.md itself, takes the worked
 * example's hex blocks, and decodes them with the journal's own code: every field must be
 * what the document says, the CRCs and the chain hash must check, and the bytes must be
 * exactly what the writer produces for the same record today. Also checks that zeros never
 * validate as a frame, and that each header rule (H1-H4) and frame rule (F2, F4, F5) refuses
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
    assert_int_equal(journal_frame_bytes(12), 88);
    record_view_t v;
    assert_int_equal(record_decode(bytes, 160, 1024, SEG_HEADER_BYTES, &v), RECORD_VALID);
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
    journal_frame_prepare(frame, 1, example_ts_ns, example_payload, 12);
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
    assert_int_equal(record_decode(zeros, sizeof zeros, sizeof zeros, SEG_HEADER_BYTES, &v),
                     RECORD_ZERO);
    /* Even with a correct-looking CRC of zeros in place, a zero magic is not a frame. */
    uint8_t frame[128] = {0};
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, 8);
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(frame, 8));
    assert_int_equal(record_decode(frame, sizeof frame, sizeof frame, SEG_HEADER_BYTES, &v),
                     RECORD_TORN);
    /* A zero-length payload is refused too. */
    format_store_u32(frame + FRAME_OFF_MAGIC, FRAME_MAGIC);
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, 0);
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(frame, 0));
    assert_int_equal(record_decode(frame, sizeof frame, sizeof frame, SEG_HEADER_BYTES, &v),
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
    format_store_u32(frame + FRAME_OFF_FLAGS, FRAME_FLAG_BATCH_END | 2u);
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(frame, 12));
    assert_int_equal(record_decode(frame, n, n, SEG_HEADER_BYTES, &v), RECORD_BAD_CRC);

    memcpy(frame, example, sizeof frame);
    frame[n - 1] = 1; /* the last padding byte */
    assert_int_equal(record_decode(frame, n, n, SEG_HEADER_BYTES, &v), RECORD_BAD_CRC);

    memcpy(frame, example, sizeof frame);
    assert_int_equal(record_decode(frame, n, n - FRAME_ALIGN, SEG_HEADER_BYTES, &v),
                     RECORD_BAD_LENGTH);
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, FRAME_MAX_PAYLOAD + 1);
    assert_int_equal(record_decode(frame, n, UINT64_MAX, SEG_HEADER_BYTES, &v), RECORD_BAD_LENGTH);
    /* The largest length the format allows is not refused for its size: more is needed. */
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, FRAME_MAX_PAYLOAD);
    assert_int_equal(record_decode(frame, n, UINT64_MAX, SEG_HEADER_BYTES, &v), RECORD_NEED_MORE);

    memcpy(frame, example, sizeof frame);
    assert_int_equal(record_decode(frame, n, n, SEG_HEADER_BYTES, &v), RECORD_VALID);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
