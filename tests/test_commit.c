/*
 * test_commit.c: the committer (engine/commit*.c) driven directly over a real journal:
 * seq assignment, batch splitting at the batch cap, the positions handed to the index
 * writer, the adaptive delay counted only when other writers are active, unwaited records
 * still written promptly, a drain on stop that syncs whatever `sync` says, who writes the
 * batches of a lone writer (itself, in leading mode) and of a thread waiting for records
 * others appended (the committer), a zero-timeout wait (a poll) that commits its own record
 * or returns at once, a backlog written in cache-sized pieces, and a wait whose
 * timeout is too long for nanoseconds waiting without a deadline.
 */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bson/bson.h>
#include <cmocka.h>

#include "commit.h"
#include "commit_internal.h"
#include "journal.h"
#include "test_util.h"

typedef struct batches_seen {
    pthread_mutex_t mu;
    uint64_t n;
    uint64_t max_records;      /* the most records one batch held */
    pthread_t expected_thread; /* when is_thread_checked: who must write every batch */
    int is_thread_checked;
    uint64_t n_other_thread; /* batches written by another thread */
    uint64_t next_first_seq; /* the first seq the next batch must start with */
    int is_broken;
} batches_seen_t;

/* Runs on the thread that wrote the batch: the committer, or a leading waiter. */
static void
record_batch(void *ctx, const journal_batch_info_t *info)
{
    batches_seen_t *b = ctx;
    pthread_mutex_lock(&b->mu);
    if (info->first_seq != b->next_first_seq || info->last_seq < info->first_seq)
        b->is_broken = 1;
    b->next_first_seq = info->last_seq + 1;
    b->n++;
    if (info->last_seq - info->first_seq + 1 > b->max_records)
        b->max_records = info->last_seq - info->first_seq + 1;
    if (b->is_thread_checked && !pthread_equal(pthread_self(), b->expected_thread))
        b->n_other_thread++;
    pthread_mutex_unlock(&b->mu);
}

typedef struct fixture {
    char *dir;
    journal_t *journal;
    journal_recovery_t rec;
    batches_seen_t seen;
    bson_t *event;
} fixture_t;

static int
setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    f->dir = test_tmpdir_new("commit");
    journal_options_t jo;
    journal_options_init(&jo);
    jo.source = "test-host";
    jo.segment_bytes = 1u << 20;
    jo.max_record_bytes = 64u << 10;
    jo.create_if_missing = 1;
    jo.file_mode = 0600;
    jo.dir_mode = 0700;
    stele_error_t err;
    if (journal_open(f->dir, &jo, &f->journal, &f->rec, &err) != 0) {
        fprintf(stderr, "journal_open: %s\n", err.message);
        return -1;
    }
    pthread_mutex_init(&f->seen.mu, NULL);
    f->seen.next_first_seq = 1;
    f->event = BCON_NEW("actor", BCON_UTF8("alice"), "action", BCON_UTF8("read"));
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture_t *f = *state;
    journal_close(f->journal, NULL);
    pthread_mutex_destroy(&f->seen.mu);
    bson_destroy(f->event);
    test_tmpdir_remove(f->dir);
    free(f);
    return 0;
}

/* From now on a batch written by a thread other than `thread` counts in n_other_thread. */
static void
seen_expect_thread(fixture_t *f, pthread_t thread)
{
    pthread_mutex_lock(&f->seen.mu);
    f->seen.expected_thread = thread;
    f->seen.is_thread_checked = 1;
    pthread_mutex_unlock(&f->seen.mu);
}

static commit_config_t
config_for(fixture_t *f)
{
    commit_config_t cc = {.journal = f->journal,
                          .last_seq = f->rec.last_seq,
                          .last_ts_ns = f->rec.last_ts_ns,
                          .sync = STELE_SYNC_ALWAYS,
                          .sync_interval_ms = 1000,
                          .commit_policy = STELE_COMMIT_ADAPTIVE,
                          .max_queue_bytes = 1u << 20,
                          .batch_bytes = 64u << 10,
                          .on_batch = record_batch,
                          .batch_ctx = &f->seen};
    return cc;
}

static uint64_t
enqueue_or_fail(commit_t *c, fixture_t *f, stele_wait_t wait)
{
    uint64_t seq = 0;
    stele_error_t err = {0};
    int rc = commit_enqueue(c, bson_get_data(f->event), f->event->len, NULL, wait, &seq, &err);
    if (rc)
        fail_msg("enqueue: %s", err.message);
    return seq;
}

static void
test_commit_assigns_contiguous_seqs_and_splits_at_the_batch_cap(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    cc.sync = STELE_SYNC_NEVER;
    cc.batch_bytes = 4096; /* a few dozen records per batch */
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    for (uint64_t i = 1; i <= 3000; i++)
        assert_int_equal(enqueue_or_fail(c, f, STELE_WAIT_NONE), i);
    assert_int_equal(commit_stop(c, NULL), 0);
    assert_int_equal(commit_durable_seq(c), 3000); /* stop syncs even with sync=never */
    stele_stats_t st = {0};
    commit_stats(c, &st);
    commit_free(c);
    assert_int_equal(f->seen.is_broken, 0);
    assert_int_equal(f->seen.next_first_seq, 3001);
    assert_true(f->seen.n >= 3000 * journal_frame_bytes(FORMAT_VERSION, f->event->len) / 4096);
    assert_int_equal(st.batches, f->seen.n);
    assert_int_equal(journal_last_seq(f->journal), 3000);
}

static void
test_commit_writes_a_backlog_in_cache_sized_pieces(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    cc.sync = STELE_SYNC_NEVER;
    cc.batch_bytes = 3 * CHUNK_PIECE_BYTES;
    cc.max_queue_bytes = 4 * cc.batch_bytes;
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    /* Holding the journal's I/O lock keeps the committer off: the records pile up into full
     * chunks, a backlog of several pieces each. */
    pthread_mutex_lock(&c->io_mu);
    size_t frame = journal_frame_bytes(FORMAT_VERSION, f->event->len);
    uint64_t n = 2 * cc.batch_bytes / frame;
    for (uint64_t i = 1; i <= n; i++)
        assert_int_equal(enqueue_or_fail(c, f, STELE_WAIT_NONE), i);
    pthread_mutex_unlock(&c->io_mu);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
    assert_int_equal(f->seen.is_broken, 0);
    assert_int_equal(f->seen.next_first_seq, n + 1);
    /* No piece goes past CHUNK_PIECE_BYTES by more than its last frame. */
    assert_true(f->seen.max_records * frame <= CHUNK_PIECE_BYTES + frame);
    assert_true(f->seen.n >= n * frame / (CHUNK_PIECE_BYTES + frame));
    assert_int_equal(journal_last_seq(f->journal), n);
}

static void
test_commit_lone_writer_is_never_delayed(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    cc.commit_interval_us = 200000;
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    for (int i = 0; i < 20; i++) {
        commit_writer_enter(c);
        uint64_t seq = enqueue_or_fail(c, f, STELE_WAIT_DURABLE);
        assert_int_equal(commit_wait(c, seq, STELE_WAIT_DURABLE, -1, NULL), 0);
        commit_writer_leave(c);
    }
    stele_stats_t st = {0};
    commit_stats(c, &st);
    assert_int_equal(st.commit_delays, 0);
    assert_int_equal(st.batches, 20);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
}

/* Leading mode (adaptive policy, no interval): a lone writer writes (and with sync=always
 * syncs) its own batches, so (almost) no batch is handed to the committer thread. Checked by
 * the thread on_batch runs in. */
static void
lone_writer_batches_by_thread(fixture_t *f, stele_sync_t sync, stele_wait_t wait,
                              uint64_t *n_batches, uint64_t *n_other_thread)
{
    commit_config_t cc = config_for(f);
    cc.sync = sync;
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    pthread_mutex_lock(&f->seen.mu);
    f->seen.expected_thread = pthread_self();
    f->seen.is_thread_checked = 1;
    f->seen.n = f->seen.n_other_thread = 0;
    pthread_mutex_unlock(&f->seen.mu);
    for (int i = 0; i < 50; i++) {
        commit_writer_enter(c);
        uint64_t seq = enqueue_or_fail(c, f, wait);
        assert_int_equal(commit_wait(c, seq, wait, -1, NULL), 0);
        commit_writer_leave(c);
    }
    pthread_mutex_lock(&f->seen.mu);
    *n_batches = f->seen.n;
    *n_other_thread = f->seen.n_other_thread;
    f->seen.is_thread_checked = 0;
    pthread_mutex_unlock(&f->seen.mu);
    assert_int_equal(commit_stop(c, NULL), 0);
    assert_int_equal(commit_durable_seq(c), 50);
    commit_free(c);
}

/* A lone writer in leading mode writes its own batches. The committer may still catch one
 * between an append and its waiter's lead (it polls for a while after a batch of its own,
 * e.g. one taken at start-up). */
static void
check_lone_writer_leads(fixture_t *f, stele_sync_t sync, stele_wait_t wait)
{
    uint64_t n = 0, other = 0;
    lone_writer_batches_by_thread(f, sync, wait, &n, &other);
    assert_int_equal(n, 50);
    if (other > n / 10)
        fail_msg("%" PRIu64 " of %" PRIu64 " batches were written by the committer thread", other,
                 n);
}

static void
test_commit_lone_durable_writer_commits_in_its_own_thread(void **state)
{
    check_lone_writer_leads(*state, STELE_SYNC_ALWAYS, STELE_WAIT_DURABLE);
}

/* With sync=always the committer's cycle is write then sync, so a lone `written` waiter
 * leads too: handed to the committer it would wait for the previous batch's sync. */
static void
test_commit_lone_written_writer_with_sync_always_commits_in_its_own_thread(void **state)
{
    check_lone_writer_leads(*state, STELE_SYNC_ALWAYS, STELE_WAIT_WRITTEN);
}

/* Without a sync after each batch, a lone `written` writer still writes its own records:
 * a hand-off to the committer and back costs two wake-ups per record. */
static void
test_commit_lone_written_writer_with_sync_never_commits_in_its_own_thread(void **state)
{
    check_lone_writer_leads(*state, STELE_SYNC_NEVER, STELE_WAIT_WRITTEN);
}

/* With sync=interval the writer leads too, and the committer, asleep while the writer
 * writes, still syncs within the interval: nobody waits for durable here, nobody flushes. */
static void
test_commit_lone_written_writer_with_sync_interval_leads_and_is_synced(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    cc.sync = STELE_SYNC_INTERVAL;
    cc.sync_interval_ms = 10;
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    seen_expect_thread(f, pthread_self());
    uint64_t seq = 0;
    for (int i = 0; i < 20; i++) {
        seq = enqueue_or_fail(c, f, STELE_WAIT_WRITTEN);
        assert_int_equal(commit_wait(c, seq, STELE_WAIT_WRITTEN, -1, NULL), 0);
    }
    pthread_mutex_lock(&f->seen.mu);
    uint64_t n = f->seen.n, other = f->seen.n_other_thread;
    f->seen.is_thread_checked = 0;
    pthread_mutex_unlock(&f->seen.mu);
    if (other > n / 10)
        fail_msg("%" PRIu64 " of %" PRIu64 " batches were written by the committer thread", other,
                 n);
    /* Polled, not timed: a committer that never syncs fails after a minute, however slow the
     * machine is. */
    for (int i = 0; i < 60000 && commit_durable_seq(c) < seq; i++)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    assert_int_equal(commit_durable_seq(c), seq);
    stele_stats_t st = {0};
    commit_stats(c, &st);
    assert_true(st.syncs >= 1);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
}

typedef struct other_waiter {
    commit_t *c;
    uint64_t seq;
    stele_wait_t level;
    int rc;
} other_waiter_t;

static void *
other_waiter_main(void *arg)
{
    other_waiter_t *w = arg;
    w->rc = commit_wait(w->c, w->seq, w->level, -1, NULL);
    return NULL;
}

/* A thread waiting for `written` on records another thread appended (a server's ack thread)
 * leaves their batches to the committer: it is told at the write, and leaves the CPU to the
 * appenders. Checked by the thread on_batch runs in: never the waiter's. */
static void
check_written_waiter_for_others_leaves_the_batch(fixture_t *f, stele_sync_t sync)
{
    commit_config_t cc = config_for(f);
    cc.sync = sync;
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    for (int i = 0; i < 20; i++) {
        other_waiter_t w = {.c = c, .level = STELE_WAIT_WRITTEN};
        pthread_t waiter;
        /* Holding the I/O lock keeps the record queued until the waiter waits for it. */
        pthread_mutex_lock(&c->io_mu);
        w.seq = enqueue_or_fail(c, f, STELE_WAIT_NONE);
        assert_int_equal(pthread_create(&waiter, NULL, other_waiter_main, &w), 0);
        seen_expect_thread(f, waiter);
        pthread_mutex_unlock(&c->io_mu);
        pthread_join(waiter, NULL);
        assert_int_equal(w.rc, 0);
    }
    pthread_mutex_lock(&f->seen.mu);
    uint64_t n = f->seen.n, other = f->seen.n_other_thread;
    f->seen.is_thread_checked = 0;
    pthread_mutex_unlock(&f->seen.mu);
    assert_true(n >= 1);
    assert_int_equal(other, n);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
}

static void
test_commit_written_waiter_for_others_records_leaves_the_batch_with_sync_never(void **state)
{
    check_written_waiter_for_others_leaves_the_batch(*state, STELE_SYNC_NEVER);
}

static void
test_commit_written_waiter_for_others_records_leaves_the_batch_with_sync_always(void **state)
{
    check_written_waiter_for_others_leaves_the_batch(*state, STELE_SYNC_ALWAYS);
}

/* With commit_policy=fixed the committer alone decides when a batch goes: a written waiter
 * leaves every batch to it. */
static void
test_commit_written_waiter_with_fixed_policy_leaves_the_batch_to_the_committer(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    cc.sync = STELE_SYNC_NEVER;
    cc.commit_policy = STELE_COMMIT_FIXED;
    cc.commit_interval_us = 1000;
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    seen_expect_thread(f, pthread_self());
    for (int i = 0; i < 10; i++) {
        uint64_t seq = enqueue_or_fail(c, f, STELE_WAIT_WRITTEN);
        assert_int_equal(commit_wait(c, seq, STELE_WAIT_WRITTEN, -1, NULL), 0);
    }
    pthread_mutex_lock(&f->seen.mu);
    uint64_t n = f->seen.n, other = f->seen.n_other_thread;
    f->seen.is_thread_checked = 0;
    pthread_mutex_unlock(&f->seen.mu);
    assert_true(n >= 1);
    assert_int_equal(other, n);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
}

/* A zero timeout is a poll: from the appending thread, with the journal free, it commits the
 * record itself (as a server's loop does for a lone request). */
static void
test_commit_poll_commits_its_own_record_when_the_journal_is_free(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    seen_expect_thread(f, pthread_self());
    for (int i = 0; i < 20; i++) {
        uint64_t seq = enqueue_or_fail(c, f, STELE_WAIT_NONE);
        assert_int_equal(commit_wait(c, seq, STELE_WAIT_DURABLE, 0, NULL), 0);
    }
    pthread_mutex_lock(&f->seen.mu);
    uint64_t n = f->seen.n, other = f->seen.n_other_thread;
    f->seen.is_thread_checked = 0;
    pthread_mutex_unlock(&f->seen.mu);
    /* The committer, woken by the unwaited appends, may win a race for a batch; the poll
     * then waits for that batch instead of failing. */
    if (other > n / 2)
        fail_msg("%" PRIu64 " of %" PRIu64 " batches were written by the committer thread", other,
                 n);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
}

typedef struct poller {
    other_waiter_t w;
    _Atomic int is_done;
} poller_t;

static void *
poller_main(void *arg)
{
    poller_t *p = arg;
    stele_error_t err = {0};
    p->w.rc = commit_wait(p->w.c, p->w.seq, p->w.level, 0, &err);
    atomic_store(&p->is_done, 1);
    return NULL;
}

/* A poll for a record the journal cannot take now (another thread holds it) returns
 * STELE_ETIMEDOUT while the journal is still held: it neither sleeps nor waits its turn. */
static void
test_commit_poll_returns_while_another_thread_holds_the_journal(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    pthread_mutex_lock(&c->io_mu);
    poller_t p = {.w = {.c = c, .level = STELE_WAIT_DURABLE}};
    p.w.seq = enqueue_or_fail(c, f, STELE_WAIT_NONE);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, poller_main, &p), 0);
    /* Polled, not timed: a poll that blocks behind the journal fails after a minute. */
    for (int i = 0; i < 60000 && !atomic_load(&p.is_done); i++)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    int is_done = atomic_load(&p.is_done);
    pthread_mutex_unlock(&c->io_mu);
    pthread_join(t, NULL);
    assert_true(is_done);
    assert_int_equal(p.w.rc, STELE_ETIMEDOUT);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
}

/* -- a slow disk: the adaptive policy waits for the writers just acknowledged ---------- */

#define SLOW_FLUSH_MS 5
#define SLOW_WRITERS 8
#define SLOW_RECORDS_EACH 25

/* POSIX I/O whose fdatasync takes SLOW_FLUSH_MS longer, like a rotating disk's. */
static int
slow_fdatasync(void *ctx, int fd)
{
    struct timespec pause = {.tv_sec = 0, .tv_nsec = SLOW_FLUSH_MS * 1000000L};
    nanosleep(&pause, NULL);
    return journal_io_posix()->fdatasync(ctx, fd);
}

typedef struct slow_writer {
    commit_t *c;
    fixture_t *f;
    int failed;
} slow_writer_t;

static void *
slow_writer_main(void *arg)
{
    slow_writer_t *w = arg;
    for (int i = 0; i < SLOW_RECORDS_EACH && !w->failed; i++) {
        commit_writer_enter(w->c);
        uint64_t seq = 0;
        if (commit_enqueue(w->c, bson_get_data(w->f->event), w->f->event->len, NULL,
                           STELE_WAIT_DURABLE, &seq, NULL) != 0 ||
            commit_wait(w->c, seq, STELE_WAIT_DURABLE, -1, NULL) != 0)
            w->failed = 1;
        commit_writer_leave(w->c);
    }
    return NULL;
}

/* With commit_interval_us=0 a batch taken the moment the previous flush ends splits the
 * writers into two alternating halves (mean batch SLOW_WRITERS / 2). On a disk whose flush
 * takes milliseconds the policy waits for the writers just acknowledged, so batches hold
 * most of them. Counts (batches, delays), not timings. */
static void
test_commit_slow_disk_batches_hold_most_writers(void **state)
{
    fixture_t *f = *state;
    journal_close(f->journal, NULL);
    static journal_io_t slow_io;
    slow_io = *journal_io_posix();
    slow_io.fdatasync = slow_fdatasync;
    journal_options_t jo;
    journal_options_init(&jo);
    jo.io = &slow_io;
    jo.source = "test-host";
    jo.segment_bytes = 1u << 20;
    jo.max_record_bytes = 64u << 10;
    jo.file_mode = 0600;
    jo.dir_mode = 0700;
    assert_int_equal(journal_open(f->dir, &jo, &f->journal, &f->rec, NULL), 0);
    commit_config_t cc = config_for(f);
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    /* One flush first, so the committer knows how slow the disk is. */
    uint64_t seq = enqueue_or_fail(c, f, STELE_WAIT_DURABLE);
    assert_int_equal(commit_wait(c, seq, STELE_WAIT_DURABLE, -1, NULL), 0);
    stele_stats_t before = {0};
    commit_stats(c, &before);
    pthread_t threads[SLOW_WRITERS];
    slow_writer_t writers[SLOW_WRITERS];
    for (int i = 0; i < SLOW_WRITERS; i++) {
        writers[i] = (slow_writer_t){.c = c, .f = f};
        assert_int_equal(pthread_create(&threads[i], NULL, slow_writer_main, &writers[i]), 0);
    }
    for (int i = 0; i < SLOW_WRITERS; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(writers[i].failed, 0);
    }
    stele_stats_t after = {0};
    commit_stats(c, &after);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
    uint64_t batches = after.batches - before.batches;
    double mean = (double)(SLOW_WRITERS * SLOW_RECORDS_EACH) / (double)batches;
    print_message("slow disk: %d writers, %llu batches, mean batch %.1f, %llu delays\n",
                  SLOW_WRITERS, (unsigned long long)batches, mean,
                  (unsigned long long)(after.commit_delays - before.commit_delays));
    assert_true(after.commit_delays > before.commit_delays);
    assert_true(mean > 0.6 * SLOW_WRITERS); /* the alternating halves give 0.5 */
}

static void
test_commit_delays_while_another_writer_has_not_contributed(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    cc.commit_interval_us = 20000;
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    commit_writer_enter(c); /* a second writer, busy validating, say */
    commit_writer_enter(c);
    uint64_t seq = enqueue_or_fail(c, f, STELE_WAIT_DURABLE);
    assert_int_equal(commit_wait(c, seq, STELE_WAIT_DURABLE, -1, NULL), 0);
    stele_stats_t st = {0};
    commit_stats(c, &st);
    assert_int_equal(st.commit_delays, 1);
    commit_writer_leave(c);
    commit_writer_leave(c);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
}

static void
test_commit_writes_unwaited_records_without_being_asked(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    cc.sync = STELE_SYNC_NEVER;
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    uint64_t seq = 0;
    for (int i = 0; i < 100; i++)
        seq = enqueue_or_fail(c, f, STELE_WAIT_NONE);
    /* Nobody waits, yet the committer's nap ends and the records are written. */
    assert_int_equal(commit_wait(c, seq, STELE_WAIT_WRITTEN, 5000, NULL), 0);
    assert_int_equal(commit_durable_seq(c), 0);
    assert_int_equal(commit_flush(c, NULL), 0);
    assert_int_equal(commit_durable_seq(c), seq);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
}

static void
test_commit_rejects_waits_for_seqs_never_appended(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    stele_error_t err = {0};
    assert_int_equal(commit_wait(c, 1, STELE_WAIT_DURABLE, 0, &err), STELE_EINVAL);
    assert_int_equal(commit_wait(c, 0, STELE_WAIT_WRITTEN, 0, &err), STELE_EINVAL);
    uint64_t seq = enqueue_or_fail(c, f, STELE_WAIT_DURABLE);
    assert_int_equal(commit_wait(c, seq, STELE_WAIT_SHIPPED, 0, &err), STELE_EINVAL);
    assert_int_equal(commit_wait(c, seq, STELE_WAIT_NONE, 0, &err), 0);
    assert_int_equal(commit_stop(c, NULL), 0);
    stele_error_t closed = {0};
    assert_int_equal(commit_enqueue(c, bson_get_data(f->event), f->event->len, NULL,
                                    STELE_WAIT_DURABLE, &seq, &closed),
                     STELE_ECLOSED);
    commit_free(c);
}

/* A timeout too long to express in nanoseconds (INT64_MAX ms: "practically forever") is
 * a wait without a deadline, not one that wrapped into the past and times out at once.
 * With sync=interval the record is durable only at the next sync, after the waiter's spin,
 * so the waiter really sleeps. */
static void
test_commit_wait_with_a_centuries_long_timeout_waits_for_the_sync(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    cc.sync = STELE_SYNC_INTERVAL;
    cc.sync_interval_ms = 100;
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    uint64_t seq = enqueue_or_fail(c, f, STELE_WAIT_NONE);
    stele_error_t err = {0};
    int rc = commit_wait(c, seq, STELE_WAIT_DURABLE, INT64_MAX, &err);
    if (rc)
        fail_msg("commit_wait: %d %s", rc, err.message);
    assert_true(commit_durable_seq(c) >= seq);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
}

static void
test_commit_latency_percentiles_are_ordered(void **state)
{
    fixture_t *f = *state;
    commit_config_t cc = config_for(f);
    commit_t *c;
    assert_int_equal(commit_start(&cc, &c, NULL), 0);
    for (int i = 0; i < 50; i++) {
        uint64_t seq = enqueue_or_fail(c, f, STELE_WAIT_DURABLE);
        assert_int_equal(commit_wait(c, seq, STELE_WAIT_DURABLE, -1, NULL), 0);
    }
    stele_stats_t st = {0};
    commit_stats(c, &st);
    assert_true(st.latency_p50_us > 0);
    assert_true(st.latency_p50_us <= st.latency_p99_us);
    assert_true(st.latency_p99_us <= st.latency_p999_us);
    assert_true(st.syncs >= 50);
    assert_int_equal(commit_stop(c, NULL), 0);
    commit_free(c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
        T(test_commit_assigns_contiguous_seqs_and_splits_at_the_batch_cap),
        T(test_commit_writes_a_backlog_in_cache_sized_pieces),
        T(test_commit_lone_writer_is_never_delayed),
        T(test_commit_lone_durable_writer_commits_in_its_own_thread),
        T(test_commit_lone_written_writer_with_sync_always_commits_in_its_own_thread),
        T(test_commit_lone_written_writer_with_sync_never_commits_in_its_own_thread),
        T(test_commit_lone_written_writer_with_sync_interval_leads_and_is_synced),
        T(test_commit_written_waiter_for_others_records_leaves_the_batch_with_sync_never),
        T(test_commit_written_waiter_for_others_records_leaves_the_batch_with_sync_always),
        T(test_commit_written_waiter_with_fixed_policy_leaves_the_batch_to_the_committer),
        T(test_commit_poll_commits_its_own_record_when_the_journal_is_free),
        T(test_commit_poll_returns_while_another_thread_holds_the_journal),
        T(test_commit_slow_disk_batches_hold_most_writers),
        T(test_commit_delays_while_another_writer_has_not_contributed),
        T(test_commit_writes_unwaited_records_without_being_asked),
        T(test_commit_rejects_waits_for_seqs_never_appended),
        T(test_commit_latency_percentiles_are_ordered),
        T(test_commit_wait_with_a_centuries_long_timeout_waits_for_the_sync),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
