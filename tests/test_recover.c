/*
 * test_recover.c: the end-of-log table (FORMAT.md, "End of log"). One crafted case per way
 * a log can end, each asserting the exact code, the class recovery reports and what
 * survives. The journal under test has three batches in one segment: A (seqs 1-3) and B
 * (4-6) fdatasynced, C (7-9) written after B's sync (so C's frames say synced_seq = 6).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "format.h"
#include "jtest_util.h"
#include "record.h"

enum { TABLE_SEGMENT_BYTES = 64 * 1024 };

typedef struct fixture {
    char *dir;
    uint32_t version; /* the journal's format version */
    char seg[4200];
    uint64_t batch_off[4]; /* A, B, C, and the end of C */
} fixture_t;

static uint64_t
frame_off(const fixture_t *f, uint64_t seq)
{
    uint64_t batch = (seq - 1) / 3;
    uint64_t off = f->batch_off[batch];
    for (uint64_t s = batch * 3 + 1; s < seq; s++)
        off += journal_frame_bytes(f->version, jtest_payload_len(s));
    return off;
}

/* Batches A (1-3), B (4-6) and C (7-9) in a journal of format `version`; the first
 * `n_synced` of them each followed by a sync before the next is written (the close syncs
 * the rest). */
static void
fixture_make_synced_in(fixture_t *f, int n_synced, uint32_t version)
{
    memset(f, 0, sizeof *f);
    f->dir = jtest_tmpdir("eol");
    f->version = version;
    journal_options_t o;
    jtest_options(&o, TABLE_SEGMENT_BYTES);
    o.create_version = version;
    journal_t *j = NULL;
    stele_error_t err = {0};
    journal_batch_info_t info;
    assert_int_equal(journal_open(f->dir, &o, &j, NULL, &err), 0);
    for (int b = 0; b < 3; b++) {
        assert_int_equal(jtest_append(j, 3, &info, &err), 0);
        f->batch_off[b] = info.offset;
        if (b < n_synced)
            assert_int_equal(journal_sync(j, &err), 0);
    }
    f->batch_off[3] = info.offset;
    for (uint64_t s = 7; s <= 9; s++)
        f->batch_off[3] += journal_frame_bytes(version, jtest_payload_len(s));
    assert_int_equal(journal_close(j, &err), 0);
    jtest_seg_path(f->seg, sizeof f->seg, f->dir, 1);
}

static void
fixture_make_synced(fixture_t *f, int n_synced)
{
    fixture_make_synced_in(f, n_synced, JTEST_VERSION);
}

static void
fixture_make(fixture_t *f)
{
    fixture_make_synced(f, 2);
}

/* Reads the frame of `seq`, lets `edit` change it, and writes it back (CRC fixed if asked). */
static void
edit_frame(const fixture_t *f, uint64_t seq, void (*edit)(uint8_t *frame), int fix_crc)
{
    uint32_t len = jtest_payload_len(seq);
    size_t bytes = journal_frame_bytes(f->version, len);
    size_t file_len = 0;
    uint8_t *file = jtest_read_file(f->seg, &file_len);
    uint8_t *frame = file + frame_off(f, seq);
    edit(frame);
    if (fix_crc)
        format_store_u32(
            frame + FRAME_OFF_CRC,
            record_crc(f->version, frame, format_load_u32(frame + FRAME_OFF_PAYLOAD_LEN)));
    jtest_poke(f->seg, frame_off(f, seq), frame, bytes);
    free(file);
}

static void
zero_range(const fixture_t *f, uint64_t from, uint64_t to)
{
    uint8_t *zeros = calloc(1, to - from);
    assert_non_null(zeros);
    jtest_poke(f->seg, from, zeros, to - from);
    free(zeros);
}

static void
edit_flip_payload_byte(uint8_t *frame)
{
    frame[JTEST_HEADER_BYTES + 5] ^= 0x40;
}

static void
edit_bad_length(uint8_t *frame)
{
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, 0x7fffff00u);
}

static void
edit_wrong_seq(uint8_t *frame)
{
    format_store_u64(frame + FRAME_OFF_SEQ, 100);
}

static void
edit_clear_batch_end(uint8_t *frame)
{
    format_store_u32(frame + FRAME_OFF_FLAGS, 0);
}

/* Opens, expecting `code`; on success checks the class, the last seq and that a second
 * open finds a clean log with the same end. Returns the recovery for more checks. */
static journal_recovery_t
open_expect(const fixture_t *f, int code, journal_end_t end, uint64_t last_seq, stele_error_t *err)
{
    journal_options_t o;
    jtest_options(&o, TABLE_SEGMENT_BYTES);
    journal_t *j = NULL;
    journal_recovery_t rec;
    int rc = journal_open(f->dir, &o, &j, &rec, err);
    if (rc != code)
        fprintf(stderr, "open: %d (%s)\n", rc, err->message);
    assert_int_equal(rc, code);
    if (rc == 0) {
        assert_int_equal(rec.end, end);
        assert_int_equal(rec.last_seq, last_seq);
        assert_int_equal(journal_close(j, err), 0);
        journal_recovery_t again;
        assert_int_equal(journal_open(f->dir, &o, &j, &again, err), 0);
        assert_int_equal(again.end, JOURNAL_END_CLEAN);
        assert_int_equal(again.last_seq, last_seq);
        assert_string_equal(again.note, "");
        /* The log goes on from there. */
        assert_int_equal(jtest_append(j, 2, NULL, err), 0);
        assert_int_equal(journal_close(j, err), 0);
        assert_int_equal(jtest_read_all(f->dir, 1, err), (int64_t)last_seq + 2);
    } else {
        rec.end = JOURNAL_END_SEALED_DAMAGE;
    }
    return rec;
}

static void
test_recover_clean_zero_tail_keeps_everything(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make(&f);
    stele_error_t err = {0};
    journal_recovery_t rec = open_expect(&f, 0, JOURNAL_END_CLEAN, 9, &err);
    assert_string_equal(rec.note, "");
    assert_int_equal(rec.truncated_bytes, 0);
    jtest_rmtree(f.dir);
}

static void
test_recover_truncates_torn_frame_header(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make(&f);
    /* Seq 8's header lost everything after its first 16 bytes. */
    zero_range(&f, frame_off(&f, 8) + 16, frame_off(&f, 10));
    stele_error_t err = {0};
    journal_recovery_t rec = open_expect(&f, 0, JOURNAL_END_TORN_FRAME, 6, &err);
    assert_non_null(strstr(rec.note, "torn frame"));
    assert_non_null(strstr(rec.note, "dropped 1 unacknowledged record"));
    assert_true(rec.truncated_bytes > 0);
    jtest_rmtree(f.dir);
}

static void
test_recover_truncates_short_payload(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make(&f);
    /* Seq 9's header is there; its payload never reached the disk. */
    zero_range(&f, frame_off(&f, 9) + JTEST_HEADER_BYTES, frame_off(&f, 10));
    stele_error_t err = {0};
    journal_recovery_t rec = open_expect(&f, 0, JOURNAL_END_TORN_FRAME, 6, &err);
    assert_non_null(strstr(rec.note, "dropped 2 unacknowledged record"));
    jtest_rmtree(f.dir);
}

static void
test_recover_truncates_bad_crc_in_unsynced_tail(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make(&f);
    edit_frame(&f, 8, edit_flip_payload_byte, 0);
    stele_error_t err = {0};
    journal_recovery_t rec = open_expect(&f, 0, JOURNAL_END_BAD_CRC, 6, &err);
    assert_non_null(strstr(rec.note, "bad crc at offset"));
    jtest_rmtree(f.dir);
}

static void
test_recover_truncates_bad_length(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make(&f);
    edit_frame(&f, 7, edit_bad_length, 0);
    stele_error_t err = {0};
    journal_recovery_t rec = open_expect(&f, 0, JOURNAL_END_BAD_LENGTH, 6, &err);
    assert_non_null(strstr(rec.note, "bad length"));
    jtest_rmtree(f.dir);
}

static void
test_recover_truncates_wrong_seq(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make(&f);
    edit_frame(&f, 7, edit_wrong_seq, 1);
    stele_error_t err = {0};
    journal_recovery_t rec = open_expect(&f, 0, JOURNAL_END_BAD_SEQ, 6, &err);
    assert_non_null(strstr(rec.note, "wrong seq"));
    jtest_rmtree(f.dir);
}

static void
test_recover_drops_torn_batch(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make(&f);
    /* All of C's frames are valid but its end marker never made it. */
    edit_frame(&f, 9, edit_clear_batch_end, 1);
    stele_error_t err = {0};
    journal_recovery_t rec = open_expect(&f, 0, JOURNAL_END_TORN_BATCH, 6, &err);
    assert_non_null(strstr(rec.note, "dropped 3 unacknowledged record"));
    assert_int_equal(rec.truncated_bytes, frame_off(&f, 10) - frame_off(&f, 7));
    jtest_rmtree(f.dir);
}

static void
test_recover_zero_header_followed_by_data_is_torn(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make(&f);
    /* C's first sector-ish never arrived; its later frames did. */
    zero_range(&f, frame_off(&f, 7), frame_off(&f, 7) + JTEST_HEADER_BYTES);
    stele_error_t err = {0};
    journal_recovery_t rec = open_expect(&f, 0, JOURNAL_END_TORN_FRAME, 6, &err);
    assert_true(rec.truncated_bytes > 0);
    jtest_rmtree(f.dir);
}

static void
test_recover_reports_damage_before_synced_data(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make(&f);
    /* B was fdatasynced; C's frames say so. Damage in B is corruption, not a torn tail. */
    edit_frame(&f, 5, edit_flip_payload_byte, 0);
    size_t before_len = 0;
    uint8_t *before = jtest_read_file(f.seg, &before_len);
    stele_error_t err = {0};
    open_expect(&f, STELE_ECORRUPT, JOURNAL_END_SEALED_DAMAGE, 0, &err);
    char want[128];
    snprintf(want, sizeof want, "segment 00000000000000000001.seg offset %" PRIu64 ": bad crc",
             frame_off(&f, 5));
    print_message("%s\n", err.message);
    assert_non_null(strstr(err.message, want));
    assert_non_null(strstr(err.message, "before synced data"));
    assert_string_equal(err.hint, "run \"stele verify\" after backing up the journal directory");
    /* Nothing was truncated. */
    size_t after_len = 0;
    uint8_t *after = jtest_read_file(f.seg, &after_len);
    assert_int_equal(before_len, after_len);
    assert_memory_equal(before, after, before_len);
    free(before);
    free(after);
    jtest_rmtree(f.dir);
}

static void
test_recover_reports_tampered_record_with_valid_crc(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make(&f);
    edit_frame(&f, 8, edit_flip_payload_byte, 1);
    stele_error_t err = {0};
    open_expect(&f, STELE_ECORRUPT, JOURNAL_END_SEALED_DAMAGE, 0, &err);
    assert_non_null(strstr(err.message, "chain hash of seq 8 does not match"));
    jtest_rmtree(f.dir);
}

static void
test_recover_reports_damage_in_sealed_segment(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("sealed");
    journal_options_t o;
    jtest_options(&o, 16 * 1024);
    journal_t *j = NULL;
    stele_error_t err = {0};
    journal_batch_info_t info;
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    uint64_t second = 0;
    while (!second) {
        assert_int_equal(jtest_append(j, 4, &info, &err), 0);
        if (info.rolled)
            second = info.segment_seq;
    }
    assert_int_equal(jtest_append(j, 2, &info, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    char seg[4200];
    jtest_seg_path(seg, sizeof seg, dir, 1);

    /* A frame in the sealed segment: open never scans it, the reader reports it. */
    uint8_t byte = 0;
    size_t len = 0;
    uint8_t *file = jtest_read_file(seg, &len);
    uint64_t victim = SEG_HEADER_BYTES + journal_frame_bytes(JTEST_VERSION, jtest_payload_len(1)) +
                      JTEST_HEADER_BYTES + 3;
    byte = file[victim] ^ 0xff;
    jtest_poke(seg, victim, &byte, 1);
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(jtest_read_all(dir, 1, &err), STELE_ECORRUPT);
    print_message("%s\n", err.message);
    char want[128];
    snprintf(
        want, sizeof want, "segment 00000000000000000001.seg offset %u: bad crc",
        (unsigned)(SEG_HEADER_BYTES + journal_frame_bytes(JTEST_VERSION, jtest_payload_len(1))));
    assert_non_null(strstr(err.message, want));
    assert_non_null(strstr(err.hint, "stele verify"));
    byte ^= 0xff;
    jtest_poke(seg, victim, &byte, 1);

    /* Its header: open refuses. */
    byte = file[SEG_OFF_FIRST_SEQ] ^ 0x01;
    jtest_poke(seg, SEG_OFF_FIRST_SEQ, &byte, 1);
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), STELE_ECORRUPT);
    assert_non_null(
        strstr(err.message, "segment 00000000000000000001.seg offset 0: bad header crc"));
    assert_non_null(strstr(err.hint, "stele verify"));
    free(file);
    jtest_rmtree(dir);
}

/* Version 1 starts the scan at the index's hint when it checks out. */
static void
test_recover_uses_a_good_hint_and_ignores_a_bad_one(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make_synced_in(&f, 2, 1);
    journal_options_t o;
    jtest_options(&o, TABLE_SEGMENT_BYTES);
    journal_t *j = NULL;
    journal_recovery_t full, hinted, wrong;
    stele_error_t err = {0};
    assert_int_equal(journal_open(f.dir, &o, &j, &full, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    o.hint_seq = 7;
    o.hint_segment_seq = 1;
    o.hint_offset = f.batch_off[2];
    assert_int_equal(journal_open(f.dir, &o, &j, &hinted, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(hinted.last_seq, 9);
    assert_memory_equal(hinted.last_hash, full.last_hash, 32);
    assert_true(hinted.scanned_bytes < full.scanned_bytes);
    o.hint_offset = f.batch_off[2] + 8; /* not a frame */
    assert_int_equal(journal_open(f.dir, &o, &j, &wrong, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(wrong.last_seq, 9);
    assert_memory_equal(wrong.last_hash, full.last_hash, 32);
    jtest_rmtree(f.dir);
}

/* The index learns of a batch when it is written, not when it is synced, and is not synced
 * with the journal: after a power loss it can name batch C while B, written before it and
 * never synced, is torn. C's frames say only A was synced when they were written, so the
 * hint is not trusted: the log ends at A and B and C are zeroed, not C kept on top of a
 * torn B (which left every later read and verify failing on B). */
static void
test_recover_ignores_a_hint_written_before_its_predecessors_were_synced(void **state)
{
    (void)state;
    fixture_t f;
    fixture_make_synced_in(&f, 1, 1);
    edit_frame(&f, 5, edit_flip_payload_byte, 0);
    journal_options_t o;
    jtest_options(&o, TABLE_SEGMENT_BYTES);
    o.hint_seq = 7;
    o.hint_segment_seq = 1;
    o.hint_offset = f.batch_off[2];
    journal_t *j = NULL;
    journal_recovery_t rec;
    stele_error_t err = {0};
    assert_int_equal(journal_open(f.dir, &o, &j, &rec, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(rec.end, JOURNAL_END_BAD_CRC);
    assert_int_equal(rec.last_seq, 3);
    open_expect(&f, 0, JOURNAL_END_CLEAN, 3, &err);
    jtest_rmtree(f.dir);
}

/* Frames larger than what recovery reads at a time, each synced and the journal reopened
 * after each: the scan must read on into a frame that crosses the end of what it has read,
 * not take it for a frame too long for the segment. That verdict refused the open when
 * later frames said they were synced, and zeroed the frame when it was the last one,
 * although it was synced too. */
enum { BIG_PAYLOAD_BYTES = 100 * 1000, BIG_RECORDS = 16 };

static void
test_recover_reads_frames_across_its_read_chunks(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("chunks");
    journal_options_t o;
    jtest_options(&o, 4u << 20);
    stele_error_t err = {0};
    size_t frame_bytes = journal_frame_bytes(JTEST_VERSION, BIG_PAYLOAD_BYTES);
    uint8_t *frame = malloc(frame_bytes), *payload = malloc(BIG_PAYLOAD_BYTES);
    assert_non_null(frame);
    assert_non_null(payload);
    for (uint64_t seq = 1; seq <= BIG_RECORDS; seq++) {
        journal_t *j = NULL;
        journal_recovery_t rec;
        int rc = journal_open(dir, &o, &j, &rec, &err);
        if (rc)
            fprintf(stderr, "open before seq %llu: %d (%s)\n", (unsigned long long)seq, rc,
                    err.message);
        assert_int_equal(rc, 0);
        assert_int_equal(rec.end, JOURNAL_END_CLEAN);
        assert_int_equal(rec.last_seq, seq - 1);
        assert_int_equal(rec.truncated_bytes, 0);
        memset(payload, (int)seq, BIG_PAYLOAD_BYTES);
        journal_frame_prepare(JTEST_VERSION, frame, seq, (int64_t)seq * 1000, NULL, payload,
                              BIG_PAYLOAD_BYTES);
        assert_int_equal(journal_append_batch(j, frame, frame_bytes, NULL, &err), 0);
        assert_int_equal(journal_sync(j, &err), 0);
        assert_int_equal(journal_close(j, &err), 0);
    }
    free(payload);
    free(frame);
    jtest_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recover_clean_zero_tail_keeps_everything),
        cmocka_unit_test(test_recover_truncates_torn_frame_header),
        cmocka_unit_test(test_recover_truncates_short_payload),
        cmocka_unit_test(test_recover_truncates_bad_crc_in_unsynced_tail),
        cmocka_unit_test(test_recover_truncates_bad_length),
        cmocka_unit_test(test_recover_truncates_wrong_seq),
        cmocka_unit_test(test_recover_drops_torn_batch),
        cmocka_unit_test(test_recover_zero_header_followed_by_data_is_torn),
        cmocka_unit_test(test_recover_reports_damage_before_synced_data),
        cmocka_unit_test(test_recover_reports_tampered_record_with_valid_crc),
        cmocka_unit_test(test_recover_reports_damage_in_sealed_segment),
        cmocka_unit_test(test_recover_uses_a_good_hint_and_ignores_a_bad_one),
        cmocka_unit_test(test_recover_ignores_a_hint_written_before_its_predecessors_were_synced),
        cmocka_unit_test(test_recover_reads_frames_across_its_read_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
