/*
 * test_engine_space.c: the engine when the index cannot be written (a full disk): the index
 * is a cache, so the journal still opens and takes every append; the index falls behind
 * (stats.warning says so, readers seek by scanning), and the index writer catches it up
 * from the segments once writing works again (engine/index_writer.c, "Falling behind";
 * docs/journal.md, "When the disk fills").
 *
 * The index's failures come from its write-failure seam (index_fail_writes), armed on the
 * engine's own index handle through stele_open_with_hooks, so the tests need no root;
 * tests/cli/test_cli_space.c runs the same on a real full tmpfs and ext4 image.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine_fixture.h"
#include "format.h"
#include "index.h"
#include "io_fault.h"
#include "journal.h"
#include "stele.h"
#include "stele_internal.h"
#include "test_util.h"

/* A bound for a broken build, not a timing assertion: the index writer retries its
 * catch-up within a second or two of the disk taking writes again. */
enum { SPACE_WAIT_MS = 60000 };

/* Appends n records, each its own durable batch. */
static void
append_durable(stele_t *db, int n)
{
    stele_error_t err = {0};
    for (int i = 0; i < n; i++)
        assert_int_equal(stele_append_json(db, "{\"a\":1}", 7, STELE_WAIT_DURABLE, NULL, &err), 0);
}

/* Whether stats.warning contains `part` (want 1) or is empty (want 0) within the bound. */
static int
wait_warning(stele_t *db, const char *part, int want)
{
    for (int waited = 0; waited < SPACE_WAIT_MS; waited += 10) {
        stele_stats_t st;
        assert_int_equal(stele_stats(db, &st), 0);
        int has = part ? strstr(st.warning, part) != NULL : st.warning[0] != '\0';
        if (has == want)
            return 1;
        usleep(10 * 1000);
    }
    return 0;
}

/* The index's last batch start. */
static uint64_t
index_last_first_seq(stele_t *db)
{
    index_batch_t b = {0};
    assert_int_equal(index_last_batch(stele_index_for_tests(db), &b, NULL), 0);
    return b.first_seq;
}

/* The index's last batch start, 0 while it holds none. */
static uint64_t
index_last_first_seq_or_0(stele_t *db)
{
    index_batch_t b = {0};
    return index_last_batch(stele_index_for_tests(db), &b, NULL) == 0 ? b.first_seq : 0;
}

/* Every batch start in the segments up to last_seq is in the index: a catch-up left no gap. */
static void
assert_index_has_every_batch(stele_t *db, const char *dir, uint64_t last_seq)
{
    journal_reader_t *jr = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_reader_open(dir, NULL, &jr, &err), 0);
    int is_start = 1;
    journal_record_t rec;
    uint64_t n_starts = 0;
    while (journal_reader_next(jr, &rec, &err) == 0 && rec.seq <= last_seq) {
        if (is_start) {
            index_batch_t b = {0};
            assert_int_equal(index_find_seq(stele_index_for_tests(db), rec.seq, &b, NULL), 0);
            assert_int_equal(b.first_seq, rec.seq);
            n_starts++;
        }
        is_start = rec.is_batch_end;
    }
    journal_reader_close(jr);
    assert_true(n_starts > 0);
}

/* A journal of n one-record batches whose index knows only the batches up to seq keep. */
static void
make_lagging_journal(const char *dir, int n, uint64_t keep)
{
    stele_options_t o;
    fixture_options(&o);
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open(dir, &o, &db, &err), 0);
    append_durable(db, n);
    assert_int_equal(stele_close(db, &err), 0);
    index_t *ix = NULL;
    assert_int_equal(index_open(dir, 1, 0600, &ix, &err), 0);
    assert_int_equal(index_truncate_after(ix, keep, &err), 0);
    assert_int_equal(index_sync(ix, &err), 0);
    index_close(ix);
}

/* The index lags the journal and cannot be written at open: the open succeeds, appends are
 * durable, a seek finds its record by scanning; once writes work again the index catches up
 * to the end without a reopen, and the journal verifies. */
static void
test_open_succeeds_with_an_index_that_cannot_be_written(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("space-open");
    make_lagging_journal(dir, 300, 10);

    stele_options_t o;
    fixture_options(&o);
    stele_hooks_t hooks = {.index_failing_writes = INDEX_FAIL_FOREVER,
                           .index_failing_errno = ENOSPC};
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open_with_hooks(dir, &o, &hooks, &db, &err), 0);
    stele_stats_t st;
    assert_int_equal(stele_stats(db, &st), 0);
    assert_non_null(strstr(st.warning, "index behind the journal"));
    assert_non_null(strstr(st.warning, "No space left on device"));
    assert_non_null(strstr(st.recovery_note, "index left behind the journal"));
    append_durable(db, 20);
    assert_int_equal(stele_reached_seq(db, STELE_WAIT_DURABLE), 320);

    stele_reader_t *r = NULL;
    assert_int_equal(stele_reader_open(dir, &r, &err), 0);
    assert_int_equal(stele_reader_seek_seq(r, 250, &err), 0);
    stele_record_t rec;
    assert_int_equal(stele_reader_next(r, &rec, 0, &err), 0);
    assert_int_equal(rec.seq, 250);
    stele_reader_close(r);
    assert_true(index_last_first_seq(db) <= 10);

    index_fail_writes(stele_index_for_tests(db), 0, 0);
    assert_true(wait_warning(db, NULL, 0));
    assert_int_equal(index_last_first_seq(db), 320);
    assert_index_has_every_batch(db, dir, 320);
    memset(&err, 0, sizeof err);
    assert_int_equal(stele_close(db, &err), 0);
    assert_int_equal(err.message[0], '\0');

    stele_verify_report_t rep;
    assert_int_equal(stele_verify(dir, 0, 0, &rep, &err), 0);
    assert_int_equal(rep.last_seq, 320);
    test_tmpdir_remove(dir);
}

/* The index stops taking writes while the engine runs: appends go on, the index falls
 * behind (no later entry is written past the gap), and catches up once writes work. */
static void
test_index_that_fails_while_running_falls_behind_then_catches_up(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("space-run");
    stele_options_t o;
    fixture_options(&o);
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open(dir, &o, &db, &err), 0);
    append_durable(db, 50);
    assert_true(wait_warning(db, NULL, 0));
    /* The index writer applies batches behind the commits: let it reach the 50th before its
     * writes start failing, so the gap begins after it. */
    for (int waited = 0; index_last_first_seq_or_0(db) < 50 && waited < SPACE_WAIT_MS; waited += 10)
        usleep(10 * 1000);
    assert_int_equal(index_last_first_seq_or_0(db), 50);
    index_fail_writes(stele_index_for_tests(db), INDEX_FAIL_FOREVER, ENOSPC);
    append_durable(db, 50);
    assert_true(wait_warning(db, "index behind the journal", 1));
    uint64_t stuck = index_last_first_seq(db);
    append_durable(db, 50);
    assert_int_equal(index_last_first_seq(db), stuck); /* nothing written after the gap */
    assert_true(stuck < 150);

    /* Writes work again; records keep coming before the catch-up runs: their batch starts
     * must not land in the index ahead of the ones it missed. */
    index_fail_writes(stele_index_for_tests(db), 0, 0);
    append_durable(db, 10);
    assert_true(wait_warning(db, NULL, 0));
    append_durable(db, 1);
    for (int waited = 0; index_last_first_seq(db) < 161 && waited < SPACE_WAIT_MS; waited += 10)
        usleep(10 * 1000);
    assert_int_equal(index_last_first_seq(db), 161);
    assert_index_has_every_batch(db, dir, 161);
    assert_int_equal(stele_close(db, &err), 0);
    stele_verify_report_t rep;
    assert_int_equal(stele_verify(dir, 0, 0, &rep, &err), 0);
    assert_int_equal(rep.last_seq, 161);
    test_tmpdir_remove(dir);
}

/* Closing with the index behind loses nothing: close succeeds with a warning (code 0),
 * and the next open catches the index up. */
static void
test_close_with_the_index_behind_warns_and_reopen_catches_up(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("space-close");
    make_lagging_journal(dir, 100, 5);
    stele_options_t o;
    fixture_options(&o);
    stele_hooks_t hooks = {.index_failing_writes = INDEX_FAIL_FOREVER,
                           .index_failing_errno = ENOSPC};
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open_with_hooks(dir, &o, &hooks, &db, &err), 0);
    append_durable(db, 5);
    memset(&err, 0, sizeof err);
    assert_int_equal(stele_close(db, &err), 0);
    assert_int_equal(err.code, 0);
    assert_non_null(strstr(err.message, "index behind the journal"));

    assert_int_equal(stele_open(dir, &o, &db, &err), 0);
    assert_int_equal(index_last_first_seq(db), 105);
    assert_int_equal(stele_close(db, &err), 0);
    test_tmpdir_remove(dir);
}

/* A catch-up that fails reading the journal is the journal's problem, not the index's: an
 * open whose catch-up meets a damaged sealed segment still refuses, index writable or not. */
static void
test_open_still_refuses_a_catch_up_that_meets_damage(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("space-refuse");
    stele_options_t o;
    fixture_options(&o);
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open(dir, &o, &db, &err), 0);
    for (int i = 0; i < 20000; i++)
        assert_int_equal(stele_append_json(db, "{\"a\":1}", 7, STELE_WAIT_NONE, NULL, &err), 0);
    assert_int_equal(stele_flush(db, &err), 0);
    stele_stats_t st;
    assert_int_equal(stele_stats(db, &st), 0);
    assert_true(st.segments >= 2);
    assert_int_equal(stele_close(db, &err), 0);
    index_t *ix = NULL;
    assert_int_equal(index_open(dir, 1, 0600, &ix, &err), 0);
    assert_int_equal(index_truncate_after(ix, 1, &err), 0);
    assert_int_equal(index_sync(ix, &err), 0);
    index_close(ix);
    char *seg = test_path_join(dir, "00000000000000000001.seg");
    FILE *f = fopen(seg, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 8192 + 100, SEEK_SET), 0); /* inside an early record */
    int byte = fgetc(f);
    assert_int_equal(fseek(f, 8192 + 100, SEEK_SET), 0);
    assert_int_equal(fputc(byte ^ 0x55, f), byte ^ 0x55);
    fclose(f);
    free(seg);
    stele_hooks_t hooks = {.index_failing_writes = INDEX_FAIL_FOREVER,
                           .index_failing_errno = ENOSPC};
    assert_int_equal(stele_open_with_hooks(dir, &o, &hooks, &db, &err), STELE_ECORRUPT);
    test_tmpdir_remove(dir);
}

/* -- a batch larger than the room left ------------------------------------------------------- */

enum { FIT_PAD_BYTES = 1000, FIT_QUEUED = 400 };

/* An event of fixed size: every frame of the journal is as long as every other. */
static void
append_padded(stele_t *db, int i, stele_wait_t wait, uint64_t *seq)
{
    char json[FIT_PAD_BYTES + 64];
    int n = snprintf(json, sizeof json, "{\"i\":\"%08d\",\"pad\":\"%0*d\"}", i, FIT_PAD_BYTES, 0);
    stele_error_t err = {0};
    assert_int_equal(stele_append_json(db, json, (size_t)n, wait, seq, &err), 0);
}

/* The disk is full, so the roll cannot get its next segment, and the committer takes one
 * batch larger than the room the active segment has left (the gate held it in a write while
 * the batch queued). Every record that fits that room is stored and acknowledged durable;
 * only the records past it fail with the halt, and the journal reopens with exactly the
 * acknowledged ones. */
static void
test_a_batch_larger_than_the_room_left_fills_the_room_before_the_roll_fails(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("space-fit");
    fixture_gate_t *gate = fixture_gate_new();
    io_fault_t *fault = io_fault_new(fixture_gate_io(gate), 0);
    stele_options_t o;
    fixture_options(&o);
    o.sync = STELE_SYNC_ALWAYS;
    stele_hooks_t hooks = {.io = io_fault_io(fault)};
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open_with_hooks(dir, &o, &hooks, &db, &err), 0);
    io_fault_spec_t no_space = {
        .method = IO_METHOD_ALLOCATE, .nth = 1, .error = -ENOSPC, .is_persistent = 1};
    io_fault_arm(fault, &no_space);

    int i = 0;
    uint64_t seq = 0;
    while (i < 650) /* about 660 KiB of the 1 MiB segment: less room left than one batch */
        append_padded(db, i++, STELE_WAIT_DURABLE, &seq);
    fixture_gate_close(gate);
    append_padded(db, i++, STELE_WAIT_NONE, &seq);
    fixture_gate_wait_held(gate);
    uint64_t first_queued = seq + 1;
    for (int k = 0; k < FIT_QUEUED; k++)
        append_padded(db, i++, STELE_WAIT_NONE, &seq);
    fixture_gate_open(gate);

    uint64_t last_durable = first_queued - 1;
    int has_failed = 0;
    for (uint64_t s = first_queued; s <= seq; s++) {
        int rc = stele_wait(db, s, STELE_WAIT_DURABLE, -1, &err);
        if (rc == 0) {
            assert_false(has_failed); /* acknowledged records are a prefix */
            last_durable = s;
        } else {
            assert_int_equal(rc, STELE_EHALTED);
            has_failed = 1;
        }
    }
    assert_true(last_durable > first_queued);
    assert_true(has_failed);
    stele_close(db, NULL);

    fixture_record_t *recs = NULL;
    long n = fixture_read_all(dir, &recs);
    assert_int_equal(n, (long)last_durable);
    size_t frame = journal_frame_bytes(FORMAT_VERSION, recs[0].payload_len);
    assert_int_equal(recs[n - 1].payload_len, recs[0].payload_len);
    /* Not one more frame would have fitted the segment. */
    assert_true(SEG_HEADER_BYTES + (uint64_t)(n + 1) * frame > o.segment_bytes);
    fixture_records_free(recs, n);
    io_fault_free(fault);
    fixture_gate_free(gate);
    test_tmpdir_remove(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_succeeds_with_an_index_that_cannot_be_written),
        cmocka_unit_test(test_index_that_fails_while_running_falls_behind_then_catches_up),
        cmocka_unit_test(test_close_with_the_index_behind_warns_and_reopen_catches_up),
        cmocka_unit_test(test_open_still_refuses_a_catch_up_that_meets_damage),
        cmocka_unit_test(
            test_a_batch_larger_than_the_room_left_fills_the_room_before_the_roll_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
