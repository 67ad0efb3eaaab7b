/*
 * test_status.c: what `stele status` learns from a writer in another process: its quota and
 * sync settings, and its sinks' retries and last error as it publishes them in the index
 * (without credentials); and sink lag (records and seconds) computed from the journal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "index_fixture.h"
#include "stele.h"
#include "test_child.h"

/* How long the parent waits for the writer child to publish what it checks. */
#define STATUS_WAIT_MS 15000

typedef struct fixture {
    char dir[256];
} fixture_t;

static int
setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    fx_tmpdir(f->dir, sizeof f->dir, "status");
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

static int64_t
wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The writer child: opens the journal with non-default settings and a sink at a closed
 * port (with credentials in its URI), appends, says so on ready_fd, then lives until the
 * parent closes hold_fd (or dies), and leaves at once. */
static int
writer_child(const char *dir, int ready_fd, int hold_fd)
{
    stele_sink_options_t sink;
    stele_sink_options_init(&sink);
    sink.name = "primary";
    sink.uri = "mongodb://alice:s3cret@127.0.0.1:1/?serverSelectionTimeoutMS=100";
    sink.backoff_min_ms = 10;
    sink.backoff_max_ms = 100;
    stele_options_t opts;
    stele_options_init(&opts);
    opts.source = "status-test";
    opts.segment_bytes = 4 << 20;
    opts.max_record_bytes = 64 << 10;
    opts.sync = STELE_SYNC_INTERVAL;
    opts.sync_interval_ms = 250;
    opts.commit_interval_us = 200;
    opts.commit_policy = STELE_COMMIT_FIXED;
    opts.max_journal_bytes = 64 << 20;
    opts.on_full = STELE_ON_FULL_FAIL;
    opts.sinks = &sink;
    opts.n_sinks = 1;
    stele_t *db = NULL;
    stele_error_t err;
    if (stele_open(dir, &opts, &db, &err) != 0) {
        fprintf(stderr, "writer child: %s\n", err.message);
        return 10;
    }
    for (int i = 0; i < 3; i++)
        if (stele_append_json(db, "{\"a\":1}", 7, STELE_WAIT_WRITTEN, NULL, &err) != 0)
            return 11;
    if (write(ready_fd, "r", 1) != 1)
        return 12;
    char byte;
    while (read(hold_fd, &byte, 1) > 0) {
    }
    return 0; /* _exit without close: the sink would drain for seconds */
}

static void
test_status_shows_a_live_writers_settings_and_its_sinks_retries_and_last_error(void **state)
{
    fixture_t *f = *state;
    int ready[2], hold[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(hold), 0);
    pid_t pid = test_fork_bound();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        close(hold[1]);
        _exit(writer_child(f->dir, ready[1], hold[0]));
    }
    close(ready[1]);
    close(hold[0]);
    struct pollfd pfd = {.fd = ready[0], .events = POLLIN};
    char byte = 0;
    int is_ready = poll(&pfd, 1, STATUS_WAIT_MS) == 1 && read(ready[0], &byte, 1) == 1;

    stele_status_t st;
    memset(&st, 0, sizeof st);
    int rc = -1;
    for (int waited_ms = 0; is_ready && waited_ms < STATUS_WAIT_MS; waited_ms += 50) {
        rc = stele_status_read(f->dir, &st, NULL);
        if (rc == 0 && st.n_sinks == 1 && st.sinks[0].retries > 0 &&
            st.sinks[0].last_error_unix_ms != 0)
            break;
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    /* Release the child before any assertion can end the test. */
    close(hold[1]);
    close(ready[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(is_ready);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    assert_int_equal(rc, 0);
    assert_int_equal(st.writer_pid, pid);
    assert_true(st.settings_unix_ms > 0);
    assert_int_equal(st.sync, STELE_SYNC_INTERVAL);
    assert_int_equal(st.sync_interval_ms, 250);
    assert_int_equal(st.commit_interval_us, 200);
    assert_int_equal(st.commit_policy, STELE_COMMIT_FIXED);
    assert_int_equal(st.max_journal_bytes, 64 << 20);
    assert_int_equal(st.on_full, STELE_ON_FULL_FAIL);

    assert_int_equal(st.n_sinks, 1);
    assert_string_equal(st.sinks[0].name, "primary");
    assert_int_equal(st.sinks[0].shipped_seq, 0);
    assert_int_equal(st.sinks[0].lag_records, 3);
    assert_true(st.sinks[0].lag_seconds > 0.0);
    assert_true(st.sinks[0].retries > 0);
    assert_true(st.sinks[0].stats_unix_ms > 0);
    assert_true(st.sinks[0].last_error_unix_ms > 0);
    assert_true(st.sinks[0].last_error[0] != '\0');
    assert_null(strstr(st.sinks[0].last_error, "s3cret"));

    /* With the writer gone, the settings stay, now as the last writer's. */
    assert_int_equal(stele_status_read(f->dir, &st, NULL), 0);
    assert_int_equal(st.writer_pid, 0);
    assert_int_equal(st.sync_interval_ms, 250);
}

static void
test_status_after_the_writer_closed_keeps_its_last_published_sink_counters(void **state)
{
    fixture_t *f = *state;
    stele_sink_options_t sink;
    stele_sink_options_init(&sink);
    sink.name = "closed-port";
    sink.uri = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100";
    sink.backoff_min_ms = 10;
    sink.backoff_max_ms = 100;
    stele_options_t opts;
    stele_options_init(&opts);
    opts.source = "status-test";
    opts.sinks = &sink;
    opts.n_sinks = 1;
    stele_t *db = NULL;
    stele_error_t err;
    assert_int_equal(stele_open(f->dir, &opts, &db, &err), 0);
    /* Nothing appended, so close has nothing to drain; wait for a few failed attempts. */
    stele_sink_stats_t live;
    for (int waited_ms = 0; waited_ms < STATUS_WAIT_MS; waited_ms += 20) {
        assert_int_equal(stele_sink_stats(db, 0, &live), 0);
        if (live.retries > 0)
            break;
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    assert_int_equal(stele_close(db, &err), 0);

    stele_status_t st;
    assert_int_equal(stele_status_read(f->dir, &st, NULL), 0);
    assert_int_equal(st.writer_pid, 0);
    assert_int_equal(st.sync, STELE_SYNC_ALWAYS);
    assert_true(st.settings_unix_ms > 0);
    assert_int_equal(st.n_sinks, 1);
    assert_string_equal(st.sinks[0].name, "closed-port");
    assert_true(st.sinks[0].retries >= live.retries);
    assert_true(st.sinks[0].retries > 0);
    assert_true(st.sinks[0].last_error_unix_ms > 0);
    assert_int_equal(st.sinks[0].lag_records, 0);
}

static void
test_status_counts_lag_of_a_checkpoint_behind_in_records_and_seconds(void **state)
{
    fixture_t *f = *state;
    fx_writer_t w;
    fx_writer_open(&w, f->dir, 1);
    /* 40 records, 100 s old, 1 ms apart. */
    int64_t base_ns = wall_ns() - (int64_t)100 * 1000000000;
    for (int b = 0; b < 10; b++) {
        int64_t ts[4];
        for (int i = 0; i < 4; i++)
            ts[i] = base_ns + (int64_t)(b * 4 + i) * 1000000;
        fx_writer_batch(&w, 4, ts, 1);
    }
    assert_int_equal(index_put_checkpoint(w.ix, "behind", 20, NULL), 0);
    assert_int_equal(index_put_checkpoint(w.ix, "caught-up", 40, NULL), 0);
    fx_writer_close(&w);

    stele_status_t st;
    assert_int_equal(stele_status_read(f->dir, &st, NULL), 0);
    int64_t now_ns = wall_ns();
    assert_int_equal(st.committed_seq, 40);
    assert_int_equal(st.n_sinks, 2);
    assert_string_equal(st.sinks[0].name, "behind");
    assert_int_equal(st.sinks[0].lag_records, 20);
    /* The oldest unshipped record is seq 21, 20 ms after base_ns. */
    double expected_s = (double)(now_ns - (base_ns + 20 * 1000000)) / 1e9;
    assert_true(st.sinks[0].lag_seconds > expected_s - 1.0);
    assert_true(st.sinks[0].lag_seconds <= expected_s + 0.001);
    assert_string_equal(st.sinks[1].name, "caught-up");
    assert_int_equal(st.sinks[1].lag_records, 0);
    assert_true(st.sinks[1].lag_seconds == 0.0);
    /* Nothing published by this writer (journal-level only): no settings, no counters. */
    assert_int_equal(st.settings_unix_ms, 0);
    assert_int_equal(st.sinks[0].stats_unix_ms, 0);
    assert_int_equal(st.sinks[0].retries, 0);
    assert_string_equal(st.sinks[0].last_error, "");
}

/* Checkpoints outlive the sinks that wrote them: a journal whose sinks were renamed over the
 * years holds more of them than status has room for. The writer's own sinks always get a
 * place; retired ones fill what room is left. */
static void
test_status_always_shows_the_writers_sinks_past_its_capacity(void **state)
{
    fixture_t *f = *state;
    stele_options_t opts;
    stele_options_init(&opts);
    opts.source = "status-test";
    stele_t *db = NULL;
    stele_error_t err;
    assert_int_equal(stele_open(f->dir, &opts, &db, &err), 0);
    assert_int_equal(stele_close(db, &err), 0);
    index_t *ix = NULL;
    assert_int_equal(index_open(f->dir, 1, 0600, &ix, NULL), 0);
    for (int i = 0; i < STELE_MAX_SINKS; i++) {
        char name[16];
        snprintf(name, sizeof name, "retired-%02d", i);
        assert_int_equal(index_put_checkpoint(ix, name, 0, NULL), 0);
    }
    index_close(ix);

    stele_sink_options_t sink;
    stele_sink_options_init(&sink);
    sink.name = "zeta";
    sink.uri = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100";
    opts.sinks = &sink;
    opts.n_sinks = 1;
    assert_int_equal(stele_open(f->dir, &opts, &db, &err), 0);
    assert_int_equal(stele_close(db, &err), 0);

    stele_status_t st;
    assert_int_equal(stele_status_read(f->dir, &st, NULL), 0);
    assert_int_equal(st.n_sinks, STELE_MAX_SINKS);
    assert_string_equal(st.sinks[0].name, "retired-00");
    assert_string_equal(st.sinks[STELE_MAX_SINKS - 1].name, "zeta");
    assert_true(st.sinks[STELE_MAX_SINKS - 1].stats_unix_ms > 0);
}

/* Where each segment's records end, from the records' own positions: the expected
 * used_bytes. */
static uint64_t
expected_used_bytes(const fx_record_t *recs, size_t n)
{
    uint64_t used = 0;
    for (size_t i = 0; i < n; i++)
        if (i + 1 == n || recs[i + 1].segment_seq != recs[i].segment_seq)
            used += recs[i].offset + recs[i].frame_bytes;
    return used;
}

/* Bytes used counts what the records take in each segment, not the room preallocated for
 * them, and the newest record's time is its own: with the index, and from a journal whose
 * index is gone (scanning). */
static void
test_status_shows_bytes_used_and_the_newest_records_time(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, 300, 5, 1); /* 1500 records over several 64 KiB segments */
    fx_record_t *recs = calloc(2000, sizeof *recs);
    assert_non_null(recs);
    size_t n = fx_read_positions(f->dir, recs, 2000);
    assert_int_equal(n, 1500);
    assert_true(recs[n - 1].segment_seq > recs[0].segment_seq);
    uint64_t want = expected_used_bytes(recs, n);
    for (int pass = 0; pass < 2; pass++) {
        stele_status_t st;
        assert_int_equal(stele_status_read(f->dir, &st, NULL), 0);
        assert_true(st.segments >= 2);
        assert_int_equal(st.used_bytes, want);
        assert_true(st.used_bytes < st.disk_bytes);
        assert_int_equal(st.newest_ts_ns, recs[n - 1].ts_ns);
        char *json = NULL;
        assert_int_equal(stele_status_to_json(f->dir, &st, &json, NULL, NULL), 0);
        char field[64];
        snprintf(field, sizeof field, "\"used_bytes\":%llu", (unsigned long long)want);
        assert_non_null(strstr(json, field));
        assert_non_null(strstr(json, "\"newest_record_time\":\""));
        stele_json_free(json);
        char index_dir[300];
        snprintf(index_dir, sizeof index_dir, "%s/index", f->dir);
        fx_rmtree(index_dir); /* the second pass scans */
    }
    free(recs);
}

/* A signed journal's first segment opens with its key statement (a meta frame with ts 0):
 * status still finds the records after it. */
static void
test_status_of_a_signed_journal_counts_its_records(void **state)
{
    fixture_t *f = *state;
    char key[400], pub[400];
    snprintf(key, sizeof key, "%s.key", f->dir);
    snprintf(pub, sizeof pub, "%s.pub", f->dir);
    stele_error_t err = {0};
    assert_int_equal(stele_keygen(key, pub, "status-test", &err), 0);
    stele_options_t o;
    stele_options_init(&o);
    o.signing_key = key;
    stele_t *db = NULL;
    assert_int_equal(stele_open(f->dir, &o, &db, &err), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(stele_append_json(db, "{\"a\":1}", 7, STELE_WAIT_DURABLE, NULL, &err), 0);
    assert_int_equal(stele_close(db, &err), 0);
    stele_status_t st;
    assert_int_equal(stele_status_read(f->dir, &st, NULL), 0);
    assert_int_equal(st.first_seq, 1);
    assert_int_equal(st.last_seq, 3);
    assert_true(st.used_bytes > 0);
    unlink(key);
    unlink(pub);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_status_shows_a_live_writers_settings_and_its_sinks_retries_and_last_error, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_status_after_the_writer_closed_keeps_its_last_published_sink_counters, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_status_counts_lag_of_a_checkpoint_behind_in_records_and_seconds, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_status_always_shows_the_writers_sinks_past_its_capacity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_shows_bytes_used_and_the_newest_records_time,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_of_a_signed_journal_counts_its_records, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
