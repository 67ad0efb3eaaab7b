/*
 * test_reader.c: the public reader (seek by seq and by time, across segments, with and
 * without the index, from a read-only directory, following a writer in another process),
 * stele_status_read, and stele_index_catch_up (missing, corrupt, stale index).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <bson/bson.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "index_fixture.h"
#include "stele.h"
#include "stele_internal.h"

/* Enough records to fill several FX_SEGMENT_BYTES segments. */
#define N_BATCHES 600
#define PER_BATCH 4
#define N_RECORDS (N_BATCHES * PER_BATCH)

typedef struct fixture {
    char dir[256];
    char index_dir[300];
} fixture_t;

static int
setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    fx_tmpdir(f->dir, sizeof f->dir, "reader");
    snprintf(f->index_dir, sizeof f->index_dir, "%s/index", f->dir);
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
payload_seq(const stele_record_t *rec)
{
    bson_t doc;
    bson_iter_t it;
    assert_true(bson_init_static(&doc, rec->bson, rec->bson_len));
    assert_true(bson_iter_init_find(&it, &doc, "seq"));
    return bson_iter_int64(&it);
}

static stele_reader_t *
open_reader(const char *dir)
{
    stele_reader_t *r = NULL;
    stele_error_t err;
    int rc = stele_reader_open(dir, &r, &err);
    if (rc)
        fail_msg("stele_reader_open: %s", err.message);
    return r;
}

static void
expect_next(stele_reader_t *r, uint64_t seq)
{
    stele_record_t rec;
    stele_error_t err;
    int rc = stele_reader_next(r, &rec, 0, &err);
    if (rc)
        fail_msg("next (expecting seq %llu): %s", (unsigned long long)seq, err.message);
    assert_int_equal(rec.seq, seq);
    assert_int_equal(payload_seq(&rec), (int64_t)seq);
}

static size_t
count_segments(const char *dir)
{
    stele_status_t st;
    assert_int_equal(stele_status_read(dir, &st, NULL), 0);
    return (size_t)st.segments;
}

static void
test_reader_returns_every_record_in_order_with_chained_hashes(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, N_BATCHES, PER_BATCH, 1);
    assert_true(count_segments(f->dir) >= 3);
    stele_reader_t *r = open_reader(f->dir);
    assert_string_equal(stele_reader_source(r), "test-host");
    stele_record_t rec;
    uint8_t prev_hash[32];
    int64_t prev_ts = INT64_MIN;
    for (uint64_t seq = 1; seq <= N_RECORDS; seq++) {
        assert_int_equal(stele_reader_next(r, &rec, 0, NULL), 0);
        assert_int_equal(rec.seq, seq);
        assert_int_equal(payload_seq(&rec), (int64_t)seq);
        assert_true(rec.ts_ns >= prev_ts);
        if (seq > 1)
            assert_memory_equal(rec.prev_hash, prev_hash, 32);
        memcpy(prev_hash, rec.hash, 32);
        prev_ts = rec.ts_ns;
    }
    stele_error_t err;
    assert_int_equal(stele_reader_next(r, &rec, 0, &err), STELE_EAGAIN);
    stele_reader_close(r);
}

static void
seek_every_tenth_seq(const char *dir)
{
    stele_reader_t *r = open_reader(dir);
    /* Backwards too, so a seek never relies on the reader's current place. */
    for (uint64_t seq = N_RECORDS; seq >= 1; seq = seq > 10 ? seq - 9 : 0) {
        stele_error_t err;
        int rc = stele_reader_seek_seq(r, seq, &err);
        if (rc)
            fail_msg("seek %llu: %s", (unsigned long long)seq, err.message);
        expect_next(r, seq);
        if (seq < N_RECORDS)
            expect_next(r, seq + 1);
    }
    stele_reader_close(r);
}

static void
test_reader_seek_seq_lands_on_each_seq_across_segments_with_index(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, N_BATCHES, PER_BATCH, 1);
    seek_every_tenth_seq(f->dir);
}

static void
test_reader_seek_seq_lands_on_each_seq_without_index(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, N_BATCHES, PER_BATCH, 0);
    struct stat st;
    assert_int_not_equal(stat(f->index_dir, &st), 0);
    seek_every_tenth_seq(f->dir);
}

static void
test_reader_ignores_an_index_that_points_at_the_wrong_place(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, N_BATCHES, PER_BATCH, 1);
    /* Every entry now claims its batch sits at offset 0 of the first segment. */
    index_t *ix = NULL;
    assert_int_equal(index_open(f->dir, 1, 0600, &ix, NULL), 0);
    index_batch_t b;
    uint64_t seq = 0;
    while (index_find_next(ix, seq, &b, NULL) == 0) {
        b.offset = 0;
        b.segment_seq = 1;
        assert_int_equal(index_put_batches(ix, &b, 1, NULL), 0);
        seq = b.first_seq + 1;
    }
    index_close(ix);
    seek_every_tenth_seq(f->dir);
}

/* Batches of 4 records at ts 10*k: 10k, 10k, 10k+5, 10k+5, so batch boundaries repeat
 * timestamps and the time index needs its strictly-before rule. */
static void
write_timed_journal(const char *dir, int with_index)
{
    fx_writer_t w;
    fx_writer_open(&w, dir, with_index);
    for (int64_t k = 1; k <= N_BATCHES; k++) {
        int64_t ts[PER_BATCH] = {10 * k, 10 * k, 10 * k + 5, 10 * (k + 1)};
        fx_writer_batch(&w, PER_BATCH, ts, 1);
    }
    fx_writer_close(&w);
}

/* The first seq with ts >= t in the journal above. */
static uint64_t
first_seq_at_or_after(int64_t t)
{
    for (int64_t k = 1; k <= N_BATCHES; k++) {
        int64_t ts[PER_BATCH] = {10 * k, 10 * k, 10 * k + 5, 10 * (k + 1)};
        for (int i = 0; i < PER_BATCH; i++)
            if (ts[i] >= t)
                return (uint64_t)((k - 1) * PER_BATCH + i + 1);
    }
    return 0;
}

static void
seek_times(const char *dir)
{
    stele_reader_t *r = open_reader(dir);
    int64_t targets[] = {INT64_MIN, 0,    10,   11,   15,   16,   20,
                         25,        1234, 1235, 1240, 1500, 2995, 10 * N_BATCHES + 5};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        stele_error_t err;
        int rc = stele_reader_seek_time(r, targets[i], &err);
        if (rc)
            fail_msg("seek_time %lld: %s", (long long)targets[i], err.message);
        uint64_t want = first_seq_at_or_after(targets[i]);
        expect_next(r, want);
    }
    /* After the last record: nothing yet. */
    assert_int_equal(stele_reader_seek_time(r, 10 * (N_BATCHES + 1) + 1, NULL), 0);
    stele_record_t rec;
    assert_int_equal(stele_reader_next(r, &rec, 0, NULL), STELE_EAGAIN);
    stele_reader_close(r);
}

static void
test_reader_seek_time_finds_first_record_at_or_after_with_index(void **state)
{
    fixture_t *f = *state;
    write_timed_journal(f->dir, 1);
    seek_times(f->dir);
}

static void
test_reader_seek_time_finds_first_record_at_or_after_without_index(void **state)
{
    fixture_t *f = *state;
    write_timed_journal(f->dir, 0);
    seek_times(f->dir);
}

static void
test_reader_seek_before_oldest_after_retention_starts_at_oldest(void **state)
{
    fixture_t *f = *state;
    fx_writer_t w;
    fx_writer_open(&w, f->dir, 1);
    for (size_t i = 0; i < N_BATCHES; i++)
        fx_writer_batch(&w, PER_BATCH, NULL, 1);
    stele_error_t err;
    int n = journal_delete_before(w.j, N_RECORDS / 2, &err);
    assert_true(n >= 1);
    fx_writer_close(&w);
    fx_record_t first;
    assert_true(fx_read_positions(f->dir, &first, 1) > 0);
    assert_true(first.seq > 1);

    stele_reader_t *r = open_reader(f->dir);
    assert_int_equal(stele_reader_seek_seq(r, 1, &err), STELE_ENOTFOUND);
    expect_next(r, first.seq);
    assert_int_equal(stele_reader_seek_seq(r, first.seq + 3, &err), 0);
    expect_next(r, first.seq + 3);
    stele_reader_close(r);
}

static int64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
test_reader_next_returns_eagain_after_the_timeout_when_nothing_is_new(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, 2, 2, 1);
    stele_reader_t *r = open_reader(f->dir);
    assert_int_equal(stele_reader_seek_seq(r, 5, NULL), 0);
    stele_record_t rec;
    stele_error_t err;
    int64_t t0 = now_ms();
    assert_int_equal(stele_reader_next(r, &rec, 0, &err), STELE_EAGAIN);
    assert_true(now_ms() - t0 < 50);
    t0 = now_ms();
    assert_int_equal(stele_reader_next(r, &rec, 80, &err), STELE_EAGAIN);
    int64_t waited = now_ms() - t0;
    assert_true(waited >= 70);
    assert_true(waited < 2000);
    stele_reader_close(r);
}

/* A batch written from another thread once the reader is waiting for it. */
static void *
late_batch_main(void *arg)
{
    fx_writer_t *w = arg;
    usleep(50 * 1000);
    fx_writer_batch(w, 1, NULL, 1);
    return NULL;
}

/*
 * stele_reader_next takes its timeout as stele_wait does, an int64_t of milliseconds: a
 * timeout beyond INT_MAX (2^32 + 1 ms: 1 ms if it were cut to 32 bits) is a long wait that
 * a new record ends, and a timeout below -1 is refused.
 */
static void
test_reader_next_takes_an_int64_timeout_and_refuses_below_minus_one(void **state)
{
    fixture_t *f = *state;
    fx_writer_t w;
    fx_writer_open(&w, f->dir, 1);
    fx_writer_batch(&w, 1, NULL, 1);
    stele_reader_t *r = open_reader(f->dir);
    expect_next(r, 1);
    stele_record_t rec;
    stele_error_t err;
    assert_int_equal(stele_reader_next(r, &rec, -2, &err), STELE_EINVAL);
    assert_non_null(strstr(err.message, "below -1"));
    pthread_t writer;
    assert_int_equal(pthread_create(&writer, NULL, late_batch_main, &w), 0);
    int rc = stele_reader_next(r, &rec, (INT64_C(1) << 32) + 1, &err);
    assert_int_equal(pthread_join(writer, NULL), 0);
    assert_int_equal(rc, 0);
    assert_int_equal(rec.seq, 2);
    stele_reader_close(r);
    fx_writer_close(&w);
}

static void
test_reader_seek_past_the_end_waits_there_for_that_record(void **state)
{
    fixture_t *f = *state;
    fx_writer_t w;
    fx_writer_open(&w, f->dir, 1);
    fx_writer_batch(&w, 3, NULL, 1);
    stele_reader_t *r = open_reader(f->dir);
    assert_int_equal(stele_reader_seek_seq(r, 6, NULL), 0);
    stele_record_t rec;
    assert_int_equal(stele_reader_next(r, &rec, 0, NULL), STELE_EAGAIN);
    fx_writer_batch(&w, 5, NULL, 1);
    assert_int_equal(stele_reader_next(r, &rec, 1000, NULL), 0);
    assert_int_equal(rec.seq, 6);
    expect_next(r, 7);
    stele_reader_close(r);
    fx_writer_close(&w);
}

static void
make_world_readable(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "chmod -R a+rX '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Runs in a child: drops write access to the journal (another user when root, else a
 * read-only mode), then seeks and reads. Exits 0 when every check held. */
static int
read_only_child(const char *dir)
{
    if (getuid() == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            return 10;
    } else {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "chmod -R a-w '%s'", dir);
        if (system(cmd) != 0)
            return 11;
    }
    if (access(dir, W_OK) == 0)
        return 12;
    stele_reader_t *r = NULL;
    stele_error_t err;
    if (stele_reader_open(dir, &r, &err) != 0) {
        fprintf(stderr, "read-only open: %s\n", err.message);
        return 13;
    }
    stele_record_t rec;
    for (uint64_t seq = 1; seq <= N_RECORDS; seq += 97) {
        if (stele_reader_seek_seq(r, seq, &err) != 0 || stele_reader_next(r, &rec, 0, &err) ||
            rec.seq != seq) {
            fprintf(stderr, "read-only seek %llu: %s\n", (unsigned long long)seq, err.message);
            return 14;
        }
    }
    if (stele_reader_seek_time(r, 5000, &err) != 0 || stele_reader_next(r, &rec, 0, &err) ||
        rec.ts_ns < 5000)
        return 15;
    stele_reader_close(r);
    stele_status_t st;
    if (stele_status_read(dir, &st, &err) != 0 || st.last_seq != N_RECORDS)
        return 16;
    stele_verify_report_t rep;
    if (stele_verify(dir, 0, 0, &rep, &err) != 0 || rep.records_checked != N_RECORDS)
        return 17;
    return 0;
}

static void
test_reader_works_from_a_read_only_directory_without_the_index(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, N_BATCHES, PER_BATCH, 1);
    make_world_readable(f->dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(read_only_child(f->dir));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    if (getuid() != 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'", f->dir);
        assert_int_equal(system(cmd), 0);
    }
}

/* Child of the follow test: reads n records as they come, checking each against the
 * positions the writer has published (a record past them would be uncommitted). */
static int
follower_child(const char *dir, uint64_t n, int ready_fd)
{
    stele_reader_t *r = NULL;
    journal_reader_t *live_reader = NULL;
    if (stele_reader_open(dir, &r, NULL) != 0 ||
        journal_reader_open(dir, NULL, &live_reader, NULL) != 0)
        return 20;
    if (write(ready_fd, "r", 1) != 1)
        return 21;
    stele_record_t rec;
    for (uint64_t seq = 1; seq <= n; seq++) {
        stele_error_t err;
        int rc = stele_reader_next(r, &rec, 5000, &err);
        if (rc) {
            fprintf(stderr, "follower at %llu: %s\n", (unsigned long long)seq, err.message);
            return 22;
        }
        journal_live_t live;
        journal_reader_live(live_reader, &live);
        if (rec.seq != seq || payload_seq(&rec) != (int64_t)seq)
            return 23;
        if (live.visible_seq < rec.seq) {
            fprintf(stderr, "follower read seq %llu but only %llu is committed\n",
                    (unsigned long long)rec.seq, (unsigned long long)live.visible_seq);
            return 24;
        }
    }
    journal_reader_close(live_reader);
    stele_reader_close(r);
    return 0;
}

static void
test_reader_in_another_process_follows_a_writer_and_sees_only_committed_records(void **state)
{
    fixture_t *f = *state;
    fx_writer_t w;
    fx_writer_open(&w, f->dir, 1);
    fx_writer_batch(&w, 1, NULL, 1);
    const uint64_t n = 1 + 60 * 3;
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pipe_fds[0]);
        _exit(follower_child(f->dir, n, pipe_fds[1]));
    }
    close(pipe_fds[1]);
    char ready;
    assert_int_equal(read(pipe_fds[0], &ready, 1), 1);
    close(pipe_fds[0]);
    /* Each batch is written and synced, left unpublished for a moment, then published:
     * a reader that returned it early would see it before the published position. */
    for (int i = 0; i < 60; i++) {
        fx_writer_batch(&w, 3, NULL, 0);
        struct timespec pause = {0, 2 * 1000 * 1000};
        nanosleep(&pause, NULL);
        fx_writer_publish(&w);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    fx_writer_close(&w);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void
test_reader_open_rejects_a_directory_that_is_not_a_journal(void **state)
{
    fixture_t *f = *state;
    char other[300];
    snprintf(other, sizeof other, "%s/not-a-journal", f->dir);
    assert_int_equal(mkdir(other, 0700), 0);
    char notes[400];
    snprintf(notes, sizeof notes, "%s/notes.txt", other);
    FILE *junk = fopen(notes, "w");
    assert_non_null(junk);
    fputs("hello\n", junk);
    fclose(junk);
    stele_reader_t *r = NULL;
    stele_error_t err;
    int rc = stele_reader_open(other, &r, &err);
    assert_true(rc != 0);
    assert_null(r);
    assert_non_null(strstr(err.message, "not-a-journal"));
    assert_int_equal(stele_reader_open(NULL, &r, &err), STELE_EINVAL);
    stele_reader_close(NULL);
}

/* ---------------------------------------------------------------------------------------
 * Status
 * --------------------------------------------------------------------------------------- */

static void
test_status_reports_positions_segments_and_sinks(void **state)
{
    fixture_t *f = *state;
    fx_writer_t w;
    fx_writer_open(&w, f->dir, 1);
    for (size_t i = 0; i < N_BATCHES; i++)
        fx_writer_batch(&w, PER_BATCH, NULL, 1);
    assert_int_equal(index_put_checkpoint(w.ix, "primary", 700, NULL), 0);
    assert_int_equal(index_put_checkpoint(w.ix, "backup", 650, NULL), 0);
    assert_int_equal(index_put_dead_letter(w.ix, "primary", 12, "rejected", NULL), 0);
    assert_int_equal(index_put_dead_letter(w.ix, "primary", 13, "rejected", NULL), 0);

    stele_status_t st;
    stele_error_t err;
    /* The writer is this process: status still works, without the index (so without the
     * sinks and settings that live in it). */
    assert_int_equal(stele_status_read(f->dir, &st, &err), 0);
    assert_int_equal(st.writer_pid, (int)getpid());
    assert_int_equal(st.committed_seq, N_RECORDS);
    assert_int_equal(st.last_seq, N_RECORDS);
    assert_int_equal(st.n_sinks, 0);
    fx_writer_close(&w);

    assert_int_equal(stele_status_read(f->dir, &st, &err), 0);
    assert_string_equal(st.source, "test-host");
    assert_int_equal(st.writer_pid, 0);
    assert_int_equal(st.first_seq, 1);
    assert_int_equal(st.last_seq, N_RECORDS);
    assert_int_equal(st.committed_seq, N_RECORDS);
    assert_int_equal(st.durable_seq, N_RECORDS);
    assert_true(st.segments >= 3);
    assert_true(st.disk_bytes >= (st.segments - 1) * FX_SEGMENT_BYTES);
    assert_true(st.format_version >= 1);
    assert_int_equal(st.n_sinks, 2);
    assert_string_equal(st.sinks[0].name, "backup");
    assert_int_equal(st.sinks[0].shipped_seq, 650);
    assert_int_equal(st.sinks[0].dead_letters, 0);
    assert_string_equal(st.sinks[1].name, "primary");
    assert_int_equal(st.sinks[1].shipped_seq, 700);
    assert_int_equal(st.sinks[1].dead_letters, 2);
}

static void
test_status_of_an_empty_journal_is_all_zero_positions(void **state)
{
    fixture_t *f = *state;
    fx_writer_t w;
    fx_writer_open(&w, f->dir, 1);
    fx_writer_close(&w);
    stele_status_t st;
    assert_int_equal(stele_status_read(f->dir, &st, NULL), 0);
    assert_int_equal(st.first_seq, 0);
    assert_int_equal(st.last_seq, 0);
    assert_int_equal(st.committed_seq, 0);
    assert_int_equal(st.n_sinks, 0);
    assert_true(st.segments >= 1);
}

/* ---------------------------------------------------------------------------------------
 * Index catch-up
 * --------------------------------------------------------------------------------------- */

/* Asserts the index holds exactly the journal's batch starts. */
static void
expect_index_matches_journal(const char *dir)
{
    fx_record_t *pos = calloc(N_RECORDS + 16, sizeof *pos);
    assert_non_null(pos);
    size_t n = fx_read_positions(dir, pos, N_RECORDS + 16);
    index_t *ix = NULL;
    assert_int_equal(index_open(dir, 0, 0, &ix, NULL), 0);
    index_batch_t b;
    uint64_t next = 0;
    for (size_t i = 0; i < n; i++) {
        int is_start = i == 0 || pos[i - 1].is_batch_end;
        if (!is_start)
            continue;
        assert_int_equal(index_find_next(ix, next, &b, NULL), 0);
        assert_int_equal(b.first_seq, pos[i].seq);
        assert_int_equal(b.segment_seq, pos[i].segment_seq);
        assert_int_equal(b.offset, pos[i].offset);
        assert_int_equal(b.first_ts_ns, pos[i].ts_ns);
        next = b.first_seq + 1;
    }
    assert_int_equal(index_find_next(ix, next, &b, NULL), STELE_ENOTFOUND);
    index_close(ix);
    free(pos);
}

/* Opens the journal for writing the way the engine does and runs the catch-up. */
static void
catch_up(const char *dir, char *note, size_t cap)
{
    fx_writer_t w;
    fx_writer_open(&w, dir, 1);
    stele_error_t err;
    int rc = stele_index_catch_up(w.ix, dir, NULL, &w.rec, note, cap, &err);
    if (rc)
        fail_msg("catch up: %s", err.message);
    fx_writer_close(&w);
}

static void
test_catch_up_leaves_a_current_index_alone_and_says_nothing(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, N_BATCHES, PER_BATCH, 1);
    char note[STELE_ERROR_MESSAGE_BYTES];
    catch_up(f->dir, note, sizeof note);
    assert_string_equal(note, "");
    expect_index_matches_journal(f->dir);
}

static void
test_catch_up_rebuilds_a_missing_index_and_says_so(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, N_BATCHES, PER_BATCH, 0);
    char note[STELE_ERROR_MESSAGE_BYTES];
    catch_up(f->dir, note, sizeof note);
    assert_non_null(strstr(note, "rebuilt"));
    expect_index_matches_journal(f->dir);
}

/* Overwrites the index's two meta pages with junk: LMDB then refuses it as unreadable. */
static void
garble_index(const fixture_t *f)
{
    char data[400];
    snprintf(data, sizeof data, "%s/data.mdb", f->index_dir);
    uint8_t junk[4096];
    memset(junk, 0xA5, sizeof junk);
    fx_write_bytes(data, 0, junk, sizeof junk);
    fx_write_bytes(data, 4096, junk, sizeof junk);
}

static void
test_catch_up_rebuilds_a_corrupt_index_and_says_so(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, N_BATCHES, PER_BATCH, 1);
    garble_index(f);

    char note[STELE_ERROR_MESSAGE_BYTES];
    catch_up(f->dir, note, sizeof note);
    assert_non_null(strstr(note, "unreadable"));
    assert_non_null(strstr(note, "rebuilt"));
    expect_index_matches_journal(f->dir);
    /* The next open finds nothing to say. */
    catch_up(f->dir, note, sizeof note);
    assert_string_equal(note, "");
}

static void
test_catch_up_of_an_empty_journal_reports_a_corrupt_index_once(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, 0, PER_BATCH, 1);
    garble_index(f);

    char note[STELE_ERROR_MESSAGE_BYTES];
    catch_up(f->dir, note, sizeof note);
    assert_non_null(strstr(note, "unreadable"));
    /* Nothing to rebuild, so nothing left to report: the marker must not outlive the open. */
    catch_up(f->dir, note, sizeof note);
    assert_string_equal(note, "");
}

static void
test_catch_up_indexes_the_batches_a_lagging_index_missed(void **state)
{
    fixture_t *f = *state;
    fx_writer_t w;
    fx_writer_open(&w, f->dir, 1);
    for (size_t i = 0; i < N_BATCHES / 2; i++)
        fx_writer_batch(&w, PER_BATCH, NULL, 1);
    /* The rest reach the segments but not the index (as after a crash with the index's
     * lazy sync behind). */
    index_t *ix = w.ix;
    w.ix = NULL;
    for (size_t i = N_BATCHES / 2; i < N_BATCHES; i++)
        fx_writer_batch(&w, PER_BATCH, NULL, 1);
    index_close(ix);
    fx_writer_close(&w);

    char note[STELE_ERROR_MESSAGE_BYTES];
    catch_up(f->dir, note, sizeof note);
    assert_non_null(strstr(note, "caught up"));
    assert_non_null(strstr(note, "300 batches"));
    expect_index_matches_journal(f->dir);
}

static void
test_catch_up_drops_entries_past_the_end_of_the_journal(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, N_BATCHES, PER_BATCH, 1);
    index_t *ix = NULL;
    assert_int_equal(index_open(f->dir, 1, 0600, &ix, NULL), 0);
    index_batch_t ghosts[] = {{N_RECORDS + 1, 1, 64, 1}, {N_RECORDS + 9, 1, 128, 2}};
    assert_int_equal(index_put_batches(ix, ghosts, 2, NULL), 0);
    index_close(ix);

    char note[STELE_ERROR_MESSAGE_BYTES];
    catch_up(f->dir, note, sizeof note);
    assert_non_null(strstr(note, "dropped"));
    expect_index_matches_journal(f->dir);
}

static void
test_catch_up_drops_entries_for_segments_retention_deleted(void **state)
{
    fixture_t *f = *state;
    fx_writer_t w;
    fx_writer_open(&w, f->dir, 1);
    for (size_t i = 0; i < N_BATCHES; i++)
        fx_writer_batch(&w, PER_BATCH, NULL, 1);
    /* Segments go, but the index is not told (as if the process died right after). */
    assert_true(journal_delete_before(w.j, N_RECORDS / 2, NULL) >= 1);
    fx_writer_close(&w);
    index_t *ix = NULL;
    index_batch_t first;
    assert_int_equal(index_open(f->dir, 0, 0, &ix, NULL), 0);
    assert_int_equal(index_first_batch(ix, &first, NULL), 0);
    assert_int_equal(first.first_seq, 1);
    index_close(ix);

    char note[STELE_ERROR_MESSAGE_BYTES];
    catch_up(f->dir, note, sizeof note);
    expect_index_matches_journal(f->dir);
}

static void
test_catch_up_rebuilds_a_wrong_index_but_keeps_checkpoints_and_dead_letters(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, N_BATCHES, PER_BATCH, 1);
    index_t *ix = NULL;
    assert_int_equal(index_open(f->dir, 1, 0600, &ix, NULL), 0);
    index_batch_t last;
    assert_int_equal(index_last_batch(ix, &last, NULL), 0);
    last.offset += 8;
    assert_int_equal(index_put_batches(ix, &last, 1, NULL), 0);
    assert_int_equal(index_put_checkpoint(ix, "primary", 77, NULL), 0);
    assert_int_equal(index_put_dead_letter(ix, "primary", 5, "rejected", NULL), 0);
    index_close(ix);

    char note[STELE_ERROR_MESSAGE_BYTES];
    catch_up(f->dir, note, sizeof note);
    assert_non_null(strstr(note, "disagreed"));
    assert_non_null(strstr(note, "rebuilt"));
    expect_index_matches_journal(f->dir);
    stele_status_t st;
    assert_int_equal(stele_status_read(f->dir, &st, NULL), 0);
    assert_int_equal(st.n_sinks, 1);
    assert_int_equal(st.sinks[0].shipped_seq, 77);
    assert_int_equal(st.sinks[0].dead_letters, 1);
}

/* The catch-up at open writes every batch start the index lacks: into an index whose map
 * they overflow, it grows the map instead of failing (the engine's open would fail with
 * it, over a cache). */
static void
test_catch_up_grows_an_index_map_the_batches_overflow(void **state)
{
    fixture_t *f = *state;
    fx_write_journal(f->dir, N_RECORDS, 1, 0); /* 2,400 batch starts: about 170 KB of index */
    fx_writer_t w;
    fx_writer_open(&w, f->dir, 0);
    stele_error_t err;
    assert_int_equal(index_open_mapped(f->dir, 1, 0600, (size_t)64 << 10, &w.ix, &err), 0);
    char note[STELE_ERROR_MESSAGE_BYTES];
    int rc = stele_index_catch_up(w.ix, f->dir, NULL, &w.rec, note, sizeof note, &err);
    if (rc)
        fail_msg("catch up: %s", err.message);
    assert_non_null(strstr(note, "2400 batches"));
    fx_writer_close(&w);
    expect_index_matches_journal(f->dir);
}

/* ---------------------------------------------------------------------------------------
 * End to end, through the engine (stele_open / stele_append_json)
 * --------------------------------------------------------------------------------------- */

static stele_t *
engine_open(const char *dir, stele_stats_t *stats)
{
    stele_options_t opts;
    stele_options_init(&opts);
    opts.source = "e2e";
    opts.segment_bytes = 1024 * 1024;
    opts.max_record_bytes = 64 * 1024;
    stele_t *db = NULL;
    stele_error_t err;
    int rc = stele_open(dir, &opts, &db, &err);
    if (rc)
        fail_msg("stele_open: %s", err.message);
    if (stats)
        assert_int_equal(stele_stats(db, stats), 0);
    return db;
}

static void
engine_append(stele_t *db, uint64_t seq)
{
    char json[64];
    int len = snprintf(json, sizeof json, "{\"seq\": %llu}", (unsigned long long)seq);
    uint64_t got = 0;
    stele_error_t err;
    int rc = stele_append_json(db, json, (size_t)len, STELE_WAIT_DURABLE, &got, &err);
    if (rc)
        fail_msg("append: %s", err.message);
    assert_int_equal(got, seq);
}

static void
engine_close(stele_t *db)
{
    stele_error_t err;
    int rc = stele_close(db, &err);
    if (rc)
        fail_msg("stele_close: %s", err.message);
}

/* Child: waits for the journal to exist, then follows n records. */
static int
engine_follower_child(const char *dir, uint64_t n, int go_fd)
{
    char byte;
    struct pollfd pfd = {.fd = go_fd, .events = POLLIN};
    if (poll(&pfd, 1, 10000) != 1 || read(go_fd, &byte, 1) != 1)
        return 30; /* the parent failed before starting the engine */
    stele_reader_t *r = NULL;
    if (stele_reader_open(dir, &r, NULL) != 0)
        return 31;
    stele_record_t rec;
    for (uint64_t seq = 1; seq <= n; seq++) {
        stele_error_t err;
        if (stele_reader_next(r, &rec, 5000, &err) != 0) {
            fprintf(stderr, "engine follower at %llu: %s\n", (unsigned long long)seq, err.message);
            return 32;
        }
        bson_t doc;
        bson_iter_t it;
        if (rec.seq != seq || !bson_init_static(&doc, rec.bson, rec.bson_len) ||
            !bson_iter_init_find(&it, &doc, "seq") || (uint64_t)bson_iter_as_int64(&it) != seq)
            return 33;
    }
    if (strcmp(stele_reader_source(r), "e2e") != 0)
        return 34;
    stele_reader_close(r);
    return 0;
}

static void
test_engine_appends_are_followed_by_a_reader_in_another_process(void **state)
{
    fixture_t *f = *state;
    int go[2];
    assert_int_equal(pipe(go), 0);
    /* Forked before the engine starts its threads. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(go[1]);
        _exit(engine_follower_child(f->dir, 200, go[0]));
    }
    close(go[0]);
    stele_t *db = engine_open(f->dir, NULL);
    engine_append(db, 1);
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    for (uint64_t seq = 2; seq <= 200; seq++)
        engine_append(db, seq);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    engine_close(db);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void
test_engine_open_rebuilds_a_deleted_index_and_says_so(void **state)
{
    fixture_t *f = *state;
    stele_stats_t st;
    stele_t *db = engine_open(f->dir, &st);
    assert_string_equal(st.recovery_note, "");
    for (uint64_t seq = 1; seq <= 50; seq++)
        engine_append(db, seq);
    engine_close(db);
    expect_index_matches_journal(f->dir);

    fx_rmtree(f->index_dir);
    db = engine_open(f->dir, &st);
    assert_non_null(strstr(st.recovery_note, "rebuilt"));
    engine_append(db, 51);
    engine_close(db);
    expect_index_matches_journal(f->dir);
    stele_verify_report_t rep;
    assert_int_equal(stele_verify(f->dir, 0, 0, &rep, NULL), 0);
    assert_int_equal(rep.records_checked, 51);
}

static void
test_engine_open_replaces_a_corrupt_index_and_says_so(void **state)
{
    fixture_t *f = *state;
    stele_t *db = engine_open(f->dir, NULL);
    for (uint64_t seq = 1; seq <= 30; seq++)
        engine_append(db, seq);
    engine_close(db);
    char data[400];
    snprintf(data, sizeof data, "%s/data.mdb", f->index_dir);
    uint8_t junk[8192];
    memset(junk, 0x3C, sizeof junk);
    fx_write_bytes(data, 0, junk, sizeof junk);

    stele_stats_t st;
    db = engine_open(f->dir, &st);
    assert_non_null(strstr(st.recovery_note, "unreadable"));
    assert_non_null(strstr(st.recovery_note, "rebuilt"));
    engine_close(db);
    expect_index_matches_journal(f->dir);
    db = engine_open(f->dir, &st);
    assert_string_equal(st.recovery_note, "");
    engine_close(db);
}

/* Damage LMDB finds only when it opens the tables (the meta pages are sound, the pages
 * past them are zeros) is corruption too: the engine moves the index aside and rebuilds
 * it, rather than refusing to open the journal over a cache. */
static void
test_engine_open_replaces_an_index_with_corrupt_tables_and_says_so(void **state)
{
    fixture_t *f = *state;
    stele_t *db = engine_open(f->dir, NULL);
    for (uint64_t seq = 1; seq <= 30; seq++)
        engine_append(db, seq);
    engine_close(db);
    char data[400];
    snprintf(data, sizeof data, "%s/data.mdb", f->index_dir);
    struct stat st;
    assert_int_equal(stat(data, &st), 0);
    uint64_t metas_bytes = 2 * (uint64_t)sysconf(_SC_PAGESIZE); /* LMDB's two meta pages */
    assert_true((uint64_t)st.st_size > metas_bytes);
    fx_zero_bytes(data, metas_bytes, (uint64_t)st.st_size - metas_bytes);

    stele_stats_t stats;
    db = engine_open(f->dir, &stats);
    assert_non_null(strstr(stats.recovery_note, "unreadable"));
    assert_non_null(strstr(stats.recovery_note, "rebuilt"));
    engine_append(db, 31);
    engine_close(db);
    expect_index_matches_journal(f->dir);
}

/* A signed journal closed before its first record: its segment holds a key statement and a
 * checkpoint (meta frames) and no record. A reader passes them and says there is nothing
 * yet, each time it is asked, rather than walk them again for ever. */
static void
test_reader_of_a_segment_with_only_meta_frames_says_nothing_yet(void **state)
{
    fixture_t *f = *state;
    char key[300], pub[300];
    snprintf(key, sizeof key, "%s.key", f->dir);
    snprintf(pub, sizeof pub, "%s.pub", f->dir);
    stele_error_t err = {0};
    assert_int_equal(stele_keygen(key, pub, NULL, &err), 0);
    stele_options_t o;
    stele_options_init(&o);
    o.signing_key = key;
    stele_t *db = NULL;
    assert_int_equal(stele_open(f->dir, &o, &db, &err), 0);
    assert_int_equal(stele_close(db, &err), 0);
    stele_reader_t *r = open_reader(f->dir);
    stele_record_t rec;
    for (int i = 0; i < 3; i++)
        assert_int_equal(stele_reader_next(r, &rec, 0, &err), STELE_EAGAIN);
    stele_reader_close(r);
    unlink(key);
    unlink(pub);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_reader_returns_every_record_in_order_with_chained_hashes),
        T(test_reader_seek_seq_lands_on_each_seq_across_segments_with_index),
        T(test_reader_seek_seq_lands_on_each_seq_without_index),
        T(test_reader_ignores_an_index_that_points_at_the_wrong_place),
        T(test_reader_seek_time_finds_first_record_at_or_after_with_index),
        T(test_reader_seek_time_finds_first_record_at_or_after_without_index),
        T(test_reader_seek_before_oldest_after_retention_starts_at_oldest),
        T(test_reader_next_returns_eagain_after_the_timeout_when_nothing_is_new),
        T(test_reader_of_a_segment_with_only_meta_frames_says_nothing_yet),
        T(test_reader_seek_past_the_end_waits_there_for_that_record),
        T(test_reader_next_takes_an_int64_timeout_and_refuses_below_minus_one),
        T(test_reader_works_from_a_read_only_directory_without_the_index),
        T(test_reader_in_another_process_follows_a_writer_and_sees_only_committed_records),
        T(test_reader_open_rejects_a_directory_that_is_not_a_journal),
        T(test_status_reports_positions_segments_and_sinks),
        T(test_status_of_an_empty_journal_is_all_zero_positions),
        T(test_catch_up_leaves_a_current_index_alone_and_says_nothing),
        T(test_catch_up_rebuilds_a_missing_index_and_says_so),
        T(test_catch_up_rebuilds_a_corrupt_index_and_says_so),
        T(test_catch_up_of_an_empty_journal_reports_a_corrupt_index_once),
        T(test_catch_up_indexes_the_batches_a_lagging_index_missed),
        T(test_catch_up_drops_entries_past_the_end_of_the_journal),
        T(test_catch_up_drops_entries_for_segments_retention_deleted),
        T(test_catch_up_rebuilds_a_wrong_index_but_keeps_checkpoints_and_dead_letters),
        T(test_catch_up_grows_an_index_map_the_batches_overflow),
        T(test_engine_appends_are_followed_by_a_reader_in_another_process),
        T(test_engine_open_rebuilds_a_deleted_index_and_says_so),
        T(test_engine_open_replaces_a_corrupt_index_and_says_so),
        T(test_engine_open_replaces_an_index_with_corrupt_tables_and_says_so),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
