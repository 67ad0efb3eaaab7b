/*
 * test_journal_powerloss.c: simulated power losses through the crash I/O table
 * (tests/support/io_crash.c). Each cycle runs a random workload (appends that roll across
 * small segments, syncs after most batches, delete_before, close and reopen) with the power
 * failing at a random I/O call; the crash keeps a random subset of the unsynced writes (in
 * sectors, sometimes one torn or zeroed) and may lose unsynced creates, renames and
 * unlinks. The journal is then reopened with the real POSIX table: recovery must succeed
 * every time and every record acknowledged durable (its batch followed by a sync that
 * returned 0, or a clean close) must be present, intact and chained. Records that survived
 * recovery count as durable from then on: a later crash must not take them back.
 *
 * A quarter of the crashes are followed by up to three more while the journal they left
 * recovers through the crash table (the zeroing of a torn tail and its sync cut short):
 * without them every recovery the crash table saw was of a journal the check had already
 * recovered with real I/O, so no power loss ever hit a recovery with work to do. Half of the
 * opens get the newest batch written as their hint, as stele_open gives the index's.
 *
 * 1,400 power losses by default; 140,000 with STELE_TEST_LONG=1 (or the CMake option);
 * STELE_TEST_ITERATIONS overrides. The seed is printed; STELE_TEST_SEED replays it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_crash.h"
#include "test_util.h"

enum { PL_SEGMENT_BYTES = 16 * 1024 }; /* small: most cycles roll at least once */
enum { PL_MAX_PAD_BYTES = 500 };
enum { PL_CYCLES_PER_DIR = 25 };         /* crashes on one journal before starting a fresh one */
enum { PL_MAX_BATCHES = 40 };            /* batches in one cycle when the power does not fail */
enum { PL_FIRST_ESTIMATE = 100 };        /* calls per cycle, before one has been measured */
enum { PL_CRASH_IN_OPEN_PERCENT = 20 };  /* the rest fail while appending */
enum { PL_RECOVERY_CRASH_PERCENT = 25 }; /* crashes followed by crashes during their recovery */
enum { PL_MAX_RECOVERY_CRASHES = 3 };

typedef struct pl_stats {
    uint64_t crashes;
    uint64_t crashed_in_open;   /* the power failed while the journal was opening */
    uint64_t acked_records;     /* records acknowledged durable, summed over cycles */
    uint64_t unacked_survivors; /* records never acknowledged that recovery kept */
    uint64_t torn_ends;         /* recoveries that found something other than a clean end */
    uint64_t sectors_dropped;
    uint64_t damaged;
    uint64_t dir_ops_lost;
    uint64_t recovery_crashes;     /* power losses while recovering the previous one's journal */
    uint64_t recovery_writes_lost; /* ... that cut off writes the recovery had not synced */
} pl_stats_t;

typedef struct pl_state {
    test_rng_t rng;
    io_crash_t *crash;
    char *dir;
    int zero_fill;
    int direct_writes;
    test_ledger_t lg;
    unsigned cycles_in_dir;
    uint64_t calls_estimate;          /* calls of a whole cycle after open, measured */
    uint64_t open_calls_estimate;     /* calls of one journal_open, measured */
    uint64_t recovery_calls_estimate; /* calls of a journal_open right after a crash */
    unsigned sync_percent;            /* this cycle's chance of a sync after a batch */
    /* The newest batch written, as the engine's index learns it: when written, not when
     * synced (and the index is not synced with the journal, so it may survive a crash that
     * took the batch). Recovery is handed it as its hint half of the time. */
    journal_batch_info_t last_batch;
    pl_stats_t stats;
    char label[128];
} pl_state_t;

static void
fill_options(journal_options_t *opts, const journal_io_t *io, int zero_fill, int direct_writes)
{
    journal_options_init(opts);
    opts->io = io;
    opts->source = "powerloss";
    opts->segment_bytes = PL_SEGMENT_BYTES;
    opts->create_if_missing = 1;
    opts->zero_fill = zero_fill;
    opts->direct_writes = direct_writes;
}

/* Half of the opens get the newest batch written as the recovery hint, as stele_open
 * gives the index's newest entry. */
static void
maybe_hint(pl_state_t *st, journal_options_t *opts)
{
    if (!st->last_batch.first_seq || !test_rng_chance(&st->rng, 50))
        return;
    opts->hint_seq = st->last_batch.first_seq;
    opts->hint_segment_seq = st->last_batch.segment_seq;
    opts->hint_offset = st->last_batch.offset;
}

/* Any journal error is fine once the power has failed; before that it is a bug. */
static void
expect_crashed(pl_state_t *st, int rc, const char *what, const stele_error_t *err)
{
    if (!io_crash_has_crashed(st->crash))
        fail_msg("%s: %s failed without a crash: %s (%s)", st->label, what, err->message,
                 test_code_name(rc));
}

/* Appends and syncs until the power fails or the cycle's batches are done. */
static void
run_cycle_batches(pl_state_t *st, journal_t **jp, const journal_options_t *opts)
{
    stele_error_t err = {0};
    journal_batch_info_t info;
    uint64_t n_batches = test_rng_range(&st->rng, 1, PL_MAX_BATCHES);

    for (uint64_t b = 0; b < n_batches; b++) {
        unsigned n_records = (unsigned)test_rng_range(&st->rng, 1, 8);
        int rc = test_ledger_append(&st->lg, *jp, &st->rng, n_records, &info, &err);
        if (rc) {
            expect_crashed(st, rc, "append", &err);
            return;
        }
        st->last_batch = info;
        if (test_rng_chance(&st->rng, st->sync_percent)) {
            uint64_t before = st->lg.durable_seq;
            rc = test_ledger_sync(&st->lg, *jp, &err);
            if (rc) {
                expect_crashed(st, rc, "sync", &err);
                return;
            }
            st->stats.acked_records += st->lg.durable_seq - before;
        }
        if (test_rng_chance(&st->rng, 3) && st->lg.durable_seq > 16) {
            /* Even a failed delete may have removed some of the segments it was asked to. */
            uint64_t below = st->lg.durable_seq / 2;
            if (below > st->lg.deleted_below)
                st->lg.deleted_below = below;
            rc = journal_delete_before(*jp, below, &err);
            if (rc < 0) {
                expect_crashed(st, rc, "delete_before", &err);
                return;
            }
        }
        if (test_rng_chance(&st->rng, 3)) {
            uint64_t last_seq = journal_last_seq(*jp);
            rc = journal_close(*jp, &err);
            *jp = NULL;
            if (rc) {
                expect_crashed(st, rc, "close", &err);
                return;
            }
            if (last_seq > st->lg.durable_seq) {
                st->stats.acked_records += last_seq - st->lg.durable_seq;
                st->lg.durable_seq = last_seq;
            }
            journal_recovery_t rec;
            journal_options_t reopen_opts = *opts;
            maybe_hint(st, &reopen_opts);
            rc = journal_open(st->dir, &reopen_opts, jp, &rec, &err);
            if (rc) {
                expect_crashed(st, rc, "reopen", &err);
                return;
            }
        }
    }
}

/* One power loss: open through the crash table, work, lose power, apply the crash. */
static void
run_cycle(pl_state_t *st)
{
    journal_options_t opts;
    journal_t *j = NULL;
    journal_recovery_t rec;
    stele_error_t err = {0};
    fill_options(&opts, io_crash_io(st->crash), st->zero_fill, st->direct_writes);

    /* Some power failures hit recovery itself; most hit the appends. */
    int crash_in_open = test_rng_chance(&st->rng, PL_CRASH_IN_OPEN_PERCENT);
    st->sync_percent = (unsigned)test_rng_range(&st->rng, 20, 95);
    uint64_t calls_before = io_crash_calls(st->crash);
    if (crash_in_open)
        io_crash_arm(st->crash, test_rng_range(&st->rng, 1, st->open_calls_estimate));
    journal_options_t open_opts = opts;
    maybe_hint(st, &open_opts);
    int rc = journal_open(st->dir, &open_opts, &j, &rec, &err);
    if (rc) {
        expect_crashed(st, rc, "open", &err);
        st->stats.crashed_in_open++;
    } else {
        uint64_t open_calls = io_crash_calls(st->crash) - calls_before;
        if (!crash_in_open && open_calls > st->open_calls_estimate)
            st->open_calls_estimate = open_calls;
        calls_before = io_crash_calls(st->crash);
        if (!crash_in_open)
            io_crash_arm(st->crash,
                         test_rng_range(&st->rng, 1, st->calls_estimate + st->calls_estimate / 4));
        run_cycle_batches(st, &j, &opts);
        if (!io_crash_has_crashed(st->crash)) {
            /* The workload ended first: measure it; the power fails with writes in flight. */
            uint64_t used = io_crash_calls(st->crash) - calls_before;
            if (used > st->calls_estimate)
                st->calls_estimate = used;
        }
    }
    io_crash_trigger(st->crash);
    if (j) {
        rc = journal_close(j, &err); /* fails: the power is gone; frees and unlocks */
        (void)rc;
    }
    io_crash_report_t rep;
    rc = io_crash_apply(st->crash, &rep);
    if (rc)
        fail_msg("%s: applying the crash failed: %s", st->label, test_code_name(rc));
    st->stats.crashes++;
    st->stats.sectors_dropped += rep.sectors_dropped;
    st->stats.damaged += rep.damage != 0;
    st->stats.dir_ops_lost += rep.dir_ops_lost;
}

/* The power fails again, at a random call of the recovery of the journal a crash left (its
 * torn tail zeroed and synced, the next segment prepared). Nothing is acknowledged here, so
 * the ledger stands: the recovery that finally completes must still keep every durable
 * record, and must accept what the interrupted ones left. */
static void
crash_during_recovery(pl_state_t *st)
{
    journal_options_t opts;
    journal_t *j = NULL;
    journal_recovery_t rec;
    stele_error_t err = {0};
    fill_options(&opts, io_crash_io(st->crash), st->zero_fill, st->direct_writes);
    opts.create_if_missing = st->lg.durable_seq == 0;
    maybe_hint(st, &opts);

    uint64_t calls_before = io_crash_calls(st->crash);
    /* Mostly at the first sync, which a torn tail's zeroing precedes (a call count rarely
     * lands there: every segment's header is read first); else at a random call. */
    if (test_rng_chance(&st->rng, 25))
        io_crash_arm(st->crash, test_rng_range(&st->rng, 1, st->recovery_calls_estimate));
    else
        io_crash_arm_method(st->crash, IO_CRASH_AT_FDATASYNC, 1);
    int rc = journal_open(st->dir, &opts, &j, &rec, &err);
    if (rc)
        expect_crashed(st, rc, "recovery", &err);
    else if (!io_crash_has_crashed(st->crash)) {
        uint64_t used = io_crash_calls(st->crash) - calls_before;
        if (used > st->recovery_calls_estimate)
            st->recovery_calls_estimate = used;
    }
    io_crash_trigger(st->crash);
    if (j)
        (void)journal_close(j, &err); /* fails: the power is gone */
    io_crash_report_t rep;
    rc = io_crash_apply(st->crash, &rep);
    if (rc)
        fail_msg("%s: applying the crash in recovery failed: %s", st->label, test_code_name(rc));
    st->stats.recovery_crashes++;
    st->stats.recovery_writes_lost += rep.sectors_dropped > 0;
}

/* After the crash: recovery with the real POSIX table must succeed and keep all durable. */
static void
verify_after_crash(pl_state_t *st)
{
    journal_options_t opts;
    journal_t *j = NULL;
    journal_recovery_t rec;
    stele_error_t err = {0};
    fill_options(&opts, NULL, st->zero_fill, st->direct_writes);
    /* Before anything was acknowledged the journal itself may not have been durable yet. */
    opts.create_if_missing = st->lg.durable_seq == 0;
    maybe_hint(st, &opts);

    int rc = journal_open(st->dir, &opts, &j, &rec, &err);
    if (rc)
        fail_msg("%s: recovery failed: %s (%s) hint: %s", st->label, err.message,
                 test_code_name(rc), err.hint);
    if (rec.last_seq < st->lg.durable_seq)
        fail_msg("%s: recovered to seq %" PRIu64 " but %" PRIu64 " was durable (end %s: %s)",
                 st->label, rec.last_seq, st->lg.durable_seq, journal_end_name(rec.end), rec.note);
    rc = journal_close(j, &err);
    if (rc)
        fail_msg("%s: close after recovery failed: %s", st->label, err.message);

    test_check_t check;
    if (test_ledger_check(&st->lg, st->dir, NULL, &check) != 0)
        fail_msg("%s: %s", st->label, check.what);
    if (rec.end != JOURNAL_END_CLEAN)
        st->stats.torn_ends++;
    st->stats.unacked_survivors += rec.last_seq - st->lg.durable_seq;
    test_ledger_truncate(&st->lg, rec.last_seq, rec.last_ts_ns);
    /* stele_open drops index entries past the recovered end before it writes new ones. */
    if (st->last_batch.first_seq > rec.last_seq)
        st->last_batch.first_seq = 0;
}

static void
fresh_dir(pl_state_t *st)
{
    if (st->dir)
        assert_int_equal(test_tmpdir_remove(st->dir), 0);
    st->dir = test_tmpdir_new("powerloss");
    assert_non_null(st->dir);
    test_ledger_free(&st->lg);
    test_ledger_init(&st->lg, PL_MAX_PAD_BYTES);
    st->cycles_in_dir = 0;
    st->last_batch.first_seq = 0;
}

static void
powerloss_loop(const char *name, int zero_fill, int direct_writes, uint64_t n_crashes)
{
    pl_state_t st = {0};
    uint64_t seed = test_seed(name);
    test_rng_init(&st.rng, seed);
    st.crash = io_crash_new(journal_io_posix(), test_rng_next(&st.rng), 0);
    assert_non_null(st.crash);
    st.zero_fill = zero_fill;
    st.direct_writes = direct_writes;
    st.calls_estimate = PL_FIRST_ESTIMATE;
    st.open_calls_estimate = PL_FIRST_ESTIMATE / 4;
    st.recovery_calls_estimate = PL_FIRST_ESTIMATE / 4;
    test_ledger_init(&st.lg, PL_MAX_PAD_BYTES);

    for (uint64_t i = 0; i < n_crashes; i++) {
        if (!st.dir || st.cycles_in_dir == PL_CYCLES_PER_DIR)
            fresh_dir(&st);
        snprintf(st.label, sizeof(st.label), "%s seed %" PRIu64 " crash %" PRIu64, name, seed, i);
        run_cycle(&st);
        if (test_rng_chance(&st.rng, PL_RECOVERY_CRASH_PERCENT)) {
            uint64_t n = test_rng_range(&st.rng, 1, PL_MAX_RECOVERY_CRASHES);
            for (uint64_t k = 0; k < n; k++)
                crash_during_recovery(&st);
        }
        verify_after_crash(&st);
        st.cycles_in_dir++;
    }

    fprintf(stderr,
            "%s: %" PRIu64 " power losses (%" PRIu64 " during open), %" PRIu64
            " records acknowledged durable, 0 lost; %" PRIu64 " unacknowledged survived; %" PRIu64
            " torn ends recovered; %" PRIu64 " sectors dropped, %" PRIu64 " torn sectors, %" PRIu64
            " directory ops lost; %" PRIu64 " power losses during recovery (%" PRIu64
            " losing its unsynced writes)\n",
            name, st.stats.crashes, st.stats.crashed_in_open, st.stats.acked_records,
            st.stats.unacked_survivors, st.stats.torn_ends, st.stats.sectors_dropped,
            st.stats.damaged, st.stats.dir_ops_lost, st.stats.recovery_crashes,
            st.stats.recovery_writes_lost);
    assert_int_equal(st.stats.crashes, n_crashes);
    /* The loop must have exercised what it claims to: real loss and real tears. */
    if (n_crashes >= 100) {
        assert_true(st.stats.sectors_dropped > 0);
        assert_true(st.stats.damaged > 0);
        assert_true(st.stats.torn_ends > 0);
        assert_true(st.stats.acked_records > 0);
    }
    if (n_crashes >= 400)
        assert_true(st.stats.recovery_writes_lost > 0);

    assert_int_equal(test_tmpdir_remove(st.dir), 0);
    test_ledger_free(&st.lg);
    io_crash_free(st.crash);
}

static void
test_powerloss_never_loses_durable_record(void **state)
{
    (void)state;
    powerloss_loop("test_powerloss_never_loses_durable_record", 1, 0, test_iterations(800, 80000));
}

static void
test_powerloss_with_fallocate_segments_never_loses_durable_record(void **state)
{
    (void)state;
    powerloss_loop("test_powerloss_with_fallocate_segments_never_loses_durable_record", 0, 0,
                   test_iterations(200, 20000));
}

/* Direct writes rewrite the head of their first block (bytes already durable) with every
 * batch: the crash table must find them intact whatever it does to the unsynced write. */
static void
test_powerloss_with_direct_writes_never_loses_durable_record(void **state)
{
    (void)state;
    powerloss_loop("test_powerloss_with_direct_writes_never_loses_durable_record", 1, 1,
                   test_iterations(400, 40000));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_powerloss_never_loses_durable_record),
        cmocka_unit_test(test_powerloss_with_fallocate_segments_never_loses_durable_record),
        cmocka_unit_test(test_powerloss_with_direct_writes_never_loses_durable_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
