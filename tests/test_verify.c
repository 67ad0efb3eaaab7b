/*
 * test_verify.c: stele_verify() passes a good journal and catches each kind of tampering
 * (a payload byte, a header byte, records reordered, duplicated or deleted, an index entry
 * pointing at the wrong place or past the end) with the right seq, segment and offset; and
 * a sweep flipping every byte of a small journal's committed region, one at a time.
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
#include <sys/stat.h>

#include "format.h"
#include "index_fixture.h"
#include "record.h"
#include "stele.h"
#include "test_util.h"

#define N_BATCHES 60
#define PER_BATCH 5
#define N_RECORDS (N_BATCHES * PER_BATCH)

typedef struct fixture {
    char dir[256];
    fx_record_t pos[N_RECORDS + 2]; /* pos[seq]; pos[0] unused */
    size_t n;
} fixture_t;

static int
setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    fx_tmpdir(f->dir, sizeof f->dir, "verify");
    fx_write_journal(f->dir, N_BATCHES, PER_BATCH, 1);
    f->n = fx_read_positions(f->dir, f->pos + 1, N_RECORDS + 1);
    assert_int_equal(f->n, N_RECORDS);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture_t *f = *state;
    fx_rmtree(f->dir);
    free(f);
    return 0;
}

static const fx_record_t *
at(const fixture_t *f, uint64_t seq)
{
    assert_true(seq >= 1 && seq <= f->n);
    return &f->pos[seq <= N_RECORDS ? seq : 0];
}

/* Asserts verify fails at seq, in seq's segment at `offset`, with `why` in the reason. */
static void
expect_failure_at(const fixture_t *f, uint64_t seq, uint64_t segment_seq, uint64_t offset,
                  const char *why)
{
    stele_verify_report_t rep;
    stele_error_t err;
    int rc = stele_verify(f->dir, 0, 0, &rep, &err);
    if (rc != STELE_ECORRUPT)
        fail_msg("verify returned %d, expected a failure at seq %" PRIu64, rc, seq);
    print_message("verify: %s\n", err.message);
    assert_int_equal(rep.bad_seq, seq);
    assert_int_equal(rep.bad_offset, offset);
    char name[64];
    snprintf(name, sizeof name, "%" PRIu64 ".seg", segment_seq);
    assert_non_null(strstr(rep.bad_segment, name));
    if (why)
        assert_non_null(strstr(rep.what, why));
    assert_non_null(strstr(err.message, rep.bad_segment));
}

static void
segment_of(const fixture_t *f, uint64_t seq, char *path, size_t cap)
{
    fx_segment_path(path, cap, f->dir, at(f, seq)->segment_seq);
}

/* A seq in the middle of a segment, with k+7 in the same segment (same payload size). */
static uint64_t
middle_seq(const fixture_t *f)
{
    for (uint64_t seq = N_RECORDS / 3; seq + 8 <= f->n; seq++)
        if (at(f, seq)->segment_seq == at(f, seq + 8)->segment_seq &&
            at(f, seq)->frame_bytes == at(f, seq + 7)->frame_bytes && at(f, seq - 1)->is_batch_end)
            return seq;
    fail_msg("no suitable record");
    return 0;
}

static void
test_verify_passes_a_good_journal(void **state)
{
    fixture_t *f = *state;
    stele_verify_report_t rep;
    stele_error_t err;
    assert_int_equal(stele_verify(f->dir, 0, 0, &rep, &err), 0);
    assert_int_equal(rep.records_checked, N_RECORDS);
    assert_int_equal(rep.first_seq, 1);
    assert_int_equal(rep.last_seq, N_RECORDS);
    assert_int_equal(rep.bad_seq, 0);
}

static void
test_verify_checks_only_the_requested_range(void **state)
{
    fixture_t *f = *state;
    stele_verify_report_t rep;
    assert_int_equal(stele_verify(f->dir, 100, 150, &rep, NULL), 0);
    assert_int_equal(rep.first_seq, 100);
    assert_int_equal(rep.last_seq, 150);
    assert_int_equal(rep.records_checked, 51);
    /* Damage outside the range is not looked at. */
    char path[400];
    segment_of(f, 200, path, sizeof path);
    fx_flip_byte(path, at(f, 200)->offset + at(f, 200)->frame_bytes / 2, 0x10);
    assert_int_equal(stele_verify(f->dir, 100, 150, &rep, NULL), 0);
    assert_int_equal(stele_verify(f->dir, 190, 0, &rep, NULL), STELE_ECORRUPT);
    assert_int_equal(rep.bad_seq, 200);
}

static void
test_verify_rejects_an_empty_or_absent_range(void **state)
{
    fixture_t *f = *state;
    stele_verify_report_t rep;
    stele_error_t err;
    assert_int_equal(stele_verify(f->dir, 20, 10, &rep, &err), STELE_EINVAL);
    assert_non_null(strstr(err.message, "20"));
    assert_int_equal(stele_verify(f->dir, N_RECORDS + 5, 0, &rep, &err), STELE_ENOTFOUND);
    /* The message names the journal's real end, not the last seq the empty walk checked. */
    char want[64];
    snprintf(want, sizeof want, "(last %d)", N_RECORDS);
    if (!strstr(err.message, want))
        fail_msg("\"%s\" does not say %s", err.message, want);
    assert_int_equal(stele_verify(NULL, 0, 0, &rep, &err), STELE_EINVAL);
}

static void
test_verify_passes_an_empty_journal(void **state)
{
    fixture_t *f = *state;
    char dir[256];
    fx_tmpdir(dir, sizeof dir, "verify-empty");
    fx_writer_t w;
    fx_writer_open(&w, dir, 1);
    fx_writer_close(&w);
    stele_verify_report_t rep;
    assert_int_equal(stele_verify(dir, 0, 0, &rep, NULL), 0);
    assert_int_equal(rep.records_checked, 0);
    assert_int_equal(rep.last_seq, 0);
    fx_rmtree(dir);
    (void)f;
}

static void
test_verify_refuses_a_directory_that_is_not_a_journal(void **state)
{
    fixture_t *f = *state;
    char dir[256];
    fx_tmpdir(dir, sizeof dir, "verify-none");
    stele_verify_report_t rep;
    stele_error_t err;
    int rc = stele_verify(dir, 0, 0, &rep, &err);
    assert_true(rc != 0 && rc != STELE_ECORRUPT);
    assert_non_null(strstr(err.message, "verify-none"));
    fx_rmtree(dir);
    (void)f;
}

static void
test_verify_detects_a_flipped_payload_byte(void **state)
{
    fixture_t *f = *state;
    uint64_t seq = middle_seq(f) + 2;
    char path[400];
    segment_of(f, seq, path, sizeof path);
    /* The payload ends the frame, before at most 7 bytes of padding. */
    fx_flip_byte(path, at(f, seq)->offset + at(f, seq)->frame_bytes - 12, 0x01);
    expect_failure_at(f, seq, at(f, seq)->segment_seq, at(f, seq)->offset, NULL);
}

/* A tamperer who also recomputes the frame's CRC: only the chain hash can tell. */
static void
test_verify_detects_a_tampered_payload_with_a_valid_crc(void **state)
{
    fixture_t *f = *state;
    uint64_t seq = middle_seq(f) + 3;
    char path[400];
    segment_of(f, seq, path, sizeof path);
    uint8_t frame[4096];
    size_t frame_bytes = at(f, seq)->frame_bytes;
    assert_true(frame_bytes <= sizeof frame);
    fx_read_bytes(path, at(f, seq)->offset, frame, frame_bytes);
    uint32_t payload_len = format_load_u32(frame + FRAME_OFF_PAYLOAD_LEN);
    assert_true(payload_len > 8);
    frame[FRAME_HEADER_BYTES_V2 + payload_len - 2] ^= 0x01; /* inside the last BSON value */
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(2, frame, payload_len));
    fx_write_bytes(path, at(f, seq)->offset, frame, frame_bytes);
    expect_failure_at(f, seq, at(f, seq)->segment_seq, at(f, seq)->offset,
                      "chain hash does not match");
}

static void
test_verify_detects_a_flipped_header_byte(void **state)
{
    fixture_t *f = *state;
    uint64_t seq = middle_seq(f) + 1;
    char path[400];
    segment_of(f, seq, path, sizeof path);
    fx_flip_byte(path, at(f, seq)->offset + 9, 0x80);
    expect_failure_at(f, seq, at(f, seq)->segment_seq, at(f, seq)->offset, NULL);
}

/* A non-zero reserved segment-header byte (rule H5, checked where every header is decoded)
 * is reported at its segment and offset: in the oldest segment, which opening a reader
 * decodes, and in a later one, which the walk enters. */
static void
test_verify_reports_a_reserved_header_byte_at_its_offset(void **state)
{
    fixture_t *f = *state;
    enum { MORE_BATCHES = 150, MAX_RECORDS = N_RECORDS + MORE_BATCHES * PER_BATCH };
    fx_writer_t w;
    fx_writer_open(&w, f->dir, 1);
    for (int b = 0; b < MORE_BATCHES; b++)
        fx_writer_batch(&w, PER_BATCH, NULL, 1);
    fx_writer_close(&w);
    fx_record_t *pos = calloc(MAX_RECORDS + 1, sizeof *pos);
    assert_non_null(pos);
    size_t n = fx_read_positions(f->dir, pos, MAX_RECORDS + 1);
    assert_int_equal(n, MAX_RECORDS);
    const uint64_t off = 3000;
    uint64_t segs[2] = {1, pos[n - 1].segment_seq};
    free(pos);
    assert_true(segs[1] > 1);
    for (int i = 0; i < 2; i++) {
        char path[400];
        fx_segment_path(path, sizeof path, f->dir, segs[i]);
        fx_flip_byte(path, off, 0x10);
        expect_failure_at(f, segs[i], segs[i], off, "reserved header byte is not zero");
        fx_flip_byte(path, off, 0x10);
    }
}

static void
remove_index(const fixture_t *f)
{
    char index_dir[300];
    snprintf(index_dir, sizeof index_dir, "%s/index", f->dir);
    fx_rmtree(index_dir);
}

static void
test_verify_without_the_index_finds_damage_that_intact_records_follow(void **state)
{
    fixture_t *f = *state;
    remove_index(f);
    uint64_t seq = middle_seq(f) + 2;
    char path[400];
    segment_of(f, seq, path, sizeof path);
    fx_flip_byte(path, at(f, seq)->offset + at(f, seq)->frame_bytes - 12, 0x01);
    expect_failure_at(f, seq, at(f, seq)->segment_seq, at(f, seq)->offset, "bad crc");
}

/* Damage to the newest batch with nothing after it could pass for a write torn by a crash,
 * but these records were made durable (the journal was closed), so it is corruption even
 * with no index to say records are missing. */
static void
test_verify_without_the_index_finds_damage_in_the_last_durable_batch(void **state)
{
    fixture_t *f = *state;
    remove_index(f);
    const fx_record_t *last = at(f, N_RECORDS);
    char path[400];
    segment_of(f, N_RECORDS, path, sizeof path);
    fx_flip_byte(path, last->offset + last->frame_bytes - 12, 0x01);
    expect_failure_at(f, N_RECORDS, last->segment_seq, last->offset, "bad crc");
}

static void
test_verify_detects_reordered_records(void **state)
{
    fixture_t *f = *state;
    uint64_t a = middle_seq(f), b = a + 7;
    char path[400];
    segment_of(f, a, path, sizeof path);
    uint32_t len = at(f, a)->frame_bytes;
    uint8_t fa[4096], fb[4096];
    assert_true(len <= sizeof fa);
    fx_read_bytes(path, at(f, a)->offset, fa, len);
    fx_read_bytes(path, at(f, b)->offset, fb, len);
    fx_write_bytes(path, at(f, a)->offset, fb, len);
    fx_write_bytes(path, at(f, b)->offset, fa, len);
    expect_failure_at(f, a, at(f, a)->segment_seq, at(f, a)->offset, NULL);
}

static void
test_verify_detects_a_duplicated_record(void **state)
{
    fixture_t *f = *state;
    uint64_t a = middle_seq(f), b = a + 7;
    char path[400];
    segment_of(f, a, path, sizeof path);
    fx_move_bytes(path, at(f, b)->offset, at(f, a)->offset, at(f, a)->frame_bytes);
    expect_failure_at(f, b, at(f, b)->segment_seq, at(f, b)->offset, NULL);
}

static void
test_verify_detects_a_deleted_record(void **state)
{
    fixture_t *f = *state;
    uint64_t seq = middle_seq(f) + 3;
    char path[400];
    segment_of(f, seq, path, sizeof path);
    /* Cut the frame out and close the gap, as an editor deleting a line would. */
    uint64_t last = seq;
    while (last < f->n && at(f, last + 1)->segment_seq == at(f, seq)->segment_seq)
        last++;
    uint64_t from = at(f, seq + 1)->offset;
    uint64_t end = at(f, last)->offset + at(f, last)->frame_bytes;
    uint32_t gap = at(f, seq)->frame_bytes;
    fx_move_bytes(path, at(f, seq)->offset, from, end - from);
    fx_zero_bytes(path, end - gap, gap);
    expect_failure_at(f, seq, at(f, seq)->segment_seq, at(f, seq)->offset, NULL);
}

static void
test_verify_detects_an_index_entry_pointing_at_the_wrong_offset(void **state)
{
    fixture_t *f = *state;
    uint64_t seq = middle_seq(f);
    index_t *ix = NULL;
    assert_int_equal(index_open(f->dir, 1, 0600, &ix, NULL), 0);
    index_batch_t b;
    assert_int_equal(index_find_seq(ix, seq, &b, NULL), 0);
    assert_int_equal(b.first_seq, seq);
    b.offset += at(f, seq)->frame_bytes;
    assert_int_equal(index_put_batches(ix, &b, 1, NULL), 0);
    index_close(ix);
    expect_failure_at(f, seq, at(f, seq)->segment_seq, b.offset, "index puts");
}

static void
test_verify_detects_an_index_entry_inside_a_batch(void **state)
{
    fixture_t *f = *state;
    uint64_t seq = middle_seq(f) + 2; /* third record of a batch */
    assert_false(at(f, seq - 1)->is_batch_end);
    index_t *ix = NULL;
    assert_int_equal(index_open(f->dir, 1, 0600, &ix, NULL), 0);
    index_batch_t b = {.first_seq = seq,
                       .segment_seq = at(f, seq)->segment_seq,
                       .offset = at(f, seq)->offset,
                       .first_ts_ns = at(f, seq)->ts_ns};
    assert_int_equal(index_put_batches(ix, &b, 1, NULL), 0);
    index_close(ix);
    expect_failure_at(f, seq, at(f, seq)->segment_seq, at(f, seq)->offset, "does not end a batch");
}

static void
test_verify_detects_index_entries_past_the_end_as_missing_records(void **state)
{
    fixture_t *f = *state;
    const fx_record_t *last = at(f, N_RECORDS);
    index_t *ix = NULL;
    assert_int_equal(index_open(f->dir, 1, 0600, &ix, NULL), 0);
    index_batch_t b = {.first_seq = N_RECORDS + 1,
                       .segment_seq = last->segment_seq,
                       .offset = last->offset + last->frame_bytes,
                       .first_ts_ns = last->ts_ns};
    assert_int_equal(index_put_batches(ix, &b, 1, NULL), 0);
    index_close(ix);
    expect_failure_at(f, N_RECORDS + 1, last->segment_seq, b.offset, "missing");
}

/* Flips each byte of a three-batch journal (segment header and every frame), one at a
 * time, and runs verify on each: every flip must be caught. */
static void
test_verify_fails_for_every_single_byte_flip_of_the_committed_region(void **state)
{
    fixture_t *f = *state;
    char dir[256];
    fx_tmpdir(dir, sizeof dir, "sweep");
    fx_writer_t w;
    fx_writer_open(&w, dir, 1);
    fx_writer_batch(&w, 2, NULL, 1);
    fx_writer_batch(&w, 3, NULL, 1);
    fx_writer_batch(&w, 2, NULL, 1);
    fx_writer_close(&w);
    fx_record_t pos[8];
    assert_int_equal(fx_read_positions(dir, pos, 8), 7);
    assert_int_equal(pos[6].segment_seq, pos[0].segment_seq);
    char path[400];
    fx_segment_path(path, sizeof path, dir, pos[0].segment_seq);
    uint64_t end = pos[6].offset + pos[6].frame_bytes;
    size_t n_missed = 0;
    for (uint64_t off = 0; off < end; off++) {
        fx_flip_byte(path, off, 0x04);
        stele_verify_report_t rep;
        int rc = stele_verify(dir, 0, 0, &rep, NULL);
        if (rc == 0) {
            n_missed++;
            print_error("flip at offset %" PRIu64 " not detected\n", off);
        }
        fx_flip_byte(path, off, 0x04);
    }
    print_message("flipped %" PRIu64 " bytes one at a time; %zu undetected\n", end, n_missed);
    stele_verify_report_t rep;
    assert_int_equal(stele_verify(dir, 0, 0, &rep, NULL), 0);
    fx_rmtree(dir);
    (void)f;
    assert_int_equal(n_missed, 0);
}

/* The same over the large journal, for a random sample of bytes in committed frames. */
static void
test_verify_fails_for_a_random_sample_of_byte_flips(void **state)
{
    fixture_t *f = *state;
    unsigned seed = (unsigned)test_seed("test_verify_fails_for_a_random_sample_of_byte_flips");
    srand(seed);
    size_t n_missed = 0;
    for (int i = 0; i < 200; i++) {
        uint64_t seq = 1 + (uint64_t)rand() % f->n;
        const fx_record_t *r = at(f, seq);
        uint64_t off = r->offset + (uint64_t)rand() % r->frame_bytes;
        uint8_t mask = (uint8_t)(1u << (rand() % 8));
        char path[400];
        segment_of(f, seq, path, sizeof path);
        fx_flip_byte(path, off, mask);
        stele_verify_report_t rep;
        int rc = stele_verify(f->dir, 0, 0, &rep, NULL);
        if (rc == 0) {
            n_missed++;
            print_error("seed %u: flip of seq %" PRIu64 " at offset %" PRIu64 " missed\n", seed,
                        seq, off);
        } else {
            assert_int_equal(rc, STELE_ECORRUPT);
            assert_true(rep.bad_seq <= seq);
        }
        fx_flip_byte(path, off, mask);
    }
    assert_int_equal(n_missed, 0);
}

/* A journal written by the engine (its committer, group commit and index writer) verifies,
 * and damage to one of its records is found at that record. */
static void
test_verify_passes_an_engine_journal_and_finds_damage_in_it(void **state)
{
    fixture_t *f = *state;
    char dir[256];
    fx_tmpdir(dir, sizeof dir, "verify-engine");
    stele_options_t opts;
    stele_options_init(&opts);
    opts.segment_bytes = 1024 * 1024;
    opts.max_record_bytes = 64 * 1024;
    stele_t *db = NULL;
    stele_error_t err;
    assert_int_equal(stele_open(dir, &opts, &db, &err), 0);
    for (int i = 1; i <= 100; i++) {
        char json[64];
        int len = snprintf(json, sizeof json, "{\"actor\": \"u%d\", \"action\": \"login\"}", i);
        assert_int_equal(stele_append_json(db, json, (size_t)len,
                                           i % 10 ? STELE_WAIT_NONE : STELE_WAIT_DURABLE, NULL,
                                           &err),
                         0);
    }
    assert_int_equal(stele_close(db, &err), 0);
    stele_verify_report_t rep;
    assert_int_equal(stele_verify(dir, 0, 0, &rep, &err), 0);
    assert_int_equal(rep.records_checked, 100);

    fx_record_t pos[101];
    assert_int_equal(fx_read_positions(dir, pos, 101), 100);
    char path[400];
    fx_segment_path(path, sizeof path, dir, pos[49].segment_seq);
    fx_flip_byte(path, pos[49].offset + FRAME_HEADER_BYTES_V2 + 10, 0x20);
    assert_int_equal(stele_verify(dir, 0, 0, &rep, &err), STELE_ECORRUPT);
    assert_int_equal(rep.bad_seq, 50);
    assert_int_equal(rep.bad_offset, pos[49].offset);
    fx_rmtree(dir);
    (void)f;
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_verify_passes_a_good_journal),
        T(test_verify_checks_only_the_requested_range),
        T(test_verify_rejects_an_empty_or_absent_range),
        T(test_verify_passes_an_empty_journal),
        T(test_verify_refuses_a_directory_that_is_not_a_journal),
        T(test_verify_detects_a_flipped_payload_byte),
        T(test_verify_detects_a_tampered_payload_with_a_valid_crc),
        T(test_verify_detects_a_flipped_header_byte),
        T(test_verify_reports_a_reserved_header_byte_at_its_offset),
        T(test_verify_without_the_index_finds_damage_that_intact_records_follow),
        T(test_verify_without_the_index_finds_damage_in_the_last_durable_batch),
        T(test_verify_detects_reordered_records),
        T(test_verify_detects_a_duplicated_record),
        T(test_verify_detects_a_deleted_record),
        T(test_verify_detects_an_index_entry_pointing_at_the_wrong_offset),
        T(test_verify_detects_an_index_entry_inside_a_batch),
        T(test_verify_detects_index_entries_past_the_end_as_missing_records),
        T(test_verify_fails_for_every_single_byte_flip_of_the_committed_region),
        T(test_verify_fails_for_a_random_sample_of_byte_flips),
        T(test_verify_passes_an_engine_journal_and_finds_damage_in_it),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
