/*
 * test_engine_crash.c: the whole engine survives kill -9 and power loss.
 *
 * Kill: a child process opens the journal with stele_open and appends JSON events from
 * several threads with wait=durable, reporting every acknowledged (seq, counter) over a
 * pipe; the parent SIGKILLs it at a random moment (during recovery, mid-batch, mid-roll),
 * reopens with stele_open, and checks every acknowledged record is present with the event
 * it carried, and that stele_verify finds the chain and the index intact. 200 kills by
 * default (several per journal, so recovery of recovered journals is exercised), 10,000 in
 * long mode. A check reopens and so recovers the journal, so the next child's open would
 * only ever recover a recovered journal: 30% of the kills are not checked but followed by a
 * child killed within 5 ms, mostly inside stele_open (recovery, and index catch-up or, with
 * the index deleted half of those times, its rebuild).
 *
 * Power loss: the engine runs over the crash I/O table (stele_open_with_io); the power fails
 * at a random I/O call, a random subset of the unsynced writes survives, and stele_open with
 * the real I/O must recover with every acknowledged-durable record intact. The LMDB index is
 * not behind the I/O table, so it may claim batches the crash took back: the engine must
 * notice and repair it, and must not start recovery from such a batch (the index's hint)
 * when a batch before it was torn (with sync=interval). 30% of the crashes are not checked
 * but followed by one in the recovery of the journal they left.
 *
 * Signed variants (a signing key, a checkpoint every few records and milliseconds, a new key
 * epoch every second) run both loops too: after each checked crash the reopened journal must
 * also pass stele_verify_trusted against the epoch 0 anchor, and the only private key left
 * is the key file of the epoch in force at the journal's end (no `.next` or `.new` copy of
 * another epoch): an epoch's key is gone once its successor is durable and the writer
 * reopened.
 *
 * Seeds are printed; STELE_TEST_SEED replays them (the kill timing stays nondeterministic).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <bson/bson.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io_crash.h"
#include "stele.h"
#include "stele_internal.h"
#include "test_util.h"

enum { CRASH_SEGMENT_BYTES = 256 * 1024 }; /* small: the kills land on rolls too */
enum { CRASH_MAX_RECORD_BYTES = 4096 };    /* events here are under 300 bytes */
enum { CRASH_WRITERS = 4 };                /* group commit shares syncs between them */
enum { CRASH_KILLS_PER_DIR = 10 };
enum { CRASH_MAX_KILL_DELAY_MS = 60 };
enum { CRASH_MAX_PAD_BYTES = 160 };

/* How a kill loop treats its journals. */
typedef struct crash_plan {
    const char *name;
    uint64_t segment_bytes;
    uint64_t kills_per_dir;
    uint64_t max_kill_delay_ms;
    unsigned index_loss_percent; /* chance the index is deleted before a reopen */
    int is_signed;               /* the writers sign (crash_signing_options) */
} crash_plan_t;

static const crash_plan_t crash_small_segments = {
    "small segments", CRASH_SEGMENT_BYTES, CRASH_KILLS_PER_DIR, CRASH_MAX_KILL_DELAY_MS, 0, 0};
/* The default segment size, megabytes of records in it, and now and then a lost index: the
 * recovery scan then reads the newest segment from its start across many read chunks (a
 * frame straddling two chunks once ended the log there: 256 KiB segments never had one). */
static const crash_plan_t crash_large_segments = {"large segments", 64u << 20, 40, 250, 25, 0};
/* Signed: kills up to 400 ms in, twenty to a journal, so journals live for several key
 * epochs of a second and kills land in rotations, rolls and checkpoints. */
static const crash_plan_t crash_signed = {"signed", CRASH_SEGMENT_BYTES, 20, 400, 25, 1};

/* A journal's key pair: "<dir>.key" (the writer's, evolving) and "<dir>.pub" (the anchor). */
typedef struct crash_keys {
    char key[512];
    char pub[512];
} crash_keys_t;

static void
crash_keys_new(const char *dir, crash_keys_t *k)
{
    snprintf(k->key, sizeof k->key, "%s.key", dir);
    snprintf(k->pub, sizeof k->pub, "%s.pub", dir);
    stele_error_t err = {0};
    if (stele_keygen(k->key, k->pub, "crash-test", &err) != 0)
        fail_msg("keygen: %s", err.message);
}

static void
crash_keys_remove(const crash_keys_t *k)
{
    const char *suffixes[] = {"", ".next", ".new"};
    char path[600];
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(path, sizeof path, "%s%s", k->key, suffixes[i]);
        unlink(path);
    }
    unlink(k->pub);
}

/* One acknowledgement as the child writes it to the pipe (16 bytes: atomic in a pipe). Seq
 * 0 says where the child is instead: counter CHILD_OPENING or CHILD_OPEN. */
enum { CHILD_OPENING = 1, CHILD_OPEN = 2 };

typedef struct ack {
    uint64_t seq;
    uint64_t counter;
} ack_t;

/* The acknowledged records of one journal, by seq. */
typedef struct ack_book {
    uint64_t *counter_by_seq; /* 0 = not acknowledged */
    uint64_t cap;
    uint64_t n_acked;
    uint64_t max_seq;
} ack_book_t;

static void
book_add(ack_book_t *b, const ack_t *a)
{
    if (a->seq >= b->cap) {
        uint64_t cap = b->cap ? b->cap : 4096;
        while (cap <= a->seq)
            cap *= 2;
        uint64_t *grown = realloc(b->counter_by_seq, cap * sizeof(*grown));
        assert_non_null(grown);
        memset(grown + b->cap, 0, (cap - b->cap) * sizeof(*grown));
        b->counter_by_seq = grown;
        b->cap = cap;
    }
    assert_int_equal(b->counter_by_seq[a->seq], 0); /* each seq acknowledged once */
    b->counter_by_seq[a->seq] = a->counter;
    b->n_acked++;
    if (a->seq > b->max_seq)
        b->max_seq = a->seq;
}

static void
book_free(ack_book_t *b)
{
    free(b->counter_by_seq);
    memset(b, 0, sizeof(*b));
}

/* The event for `counter`: its padding is a function of the counter, so it can be checked. */
static int
event_json(uint64_t counter, char *buf, size_t cap)
{
    test_rng_t rng;
    test_rng_init(&rng, counter);
    char pad[CRASH_MAX_PAD_BYTES + 1];
    size_t pad_len = (size_t)test_rng_below(&rng, CRASH_MAX_PAD_BYTES + 1);
    for (size_t i = 0; i < pad_len; i++)
        pad[i] = (char)('a' + test_rng_below(&rng, 26));
    pad[pad_len] = '\0';
    return snprintf(buf, cap,
                    "{\"actor\":\"crash-test\",\"action\":\"append\",\"counter\":%" PRIu64
                    ",\"pad\":\"%s\"}",
                    counter, pad);
}

/* key: the signer key file, or NULL for an unsigned journal. */
static void
fill_options(stele_options_t *opts, uint64_t segment_bytes, const char *key)
{
    stele_options_init(opts);
    opts->source = "crash-test";
    opts->segment_bytes = segment_bytes;
    opts->max_record_bytes = CRASH_MAX_RECORD_BYTES; /* a segment must hold two of them */
    opts->sync = STELE_SYNC_ALWAYS;
    if (key) {
        /* Often enough that crashes land in checkpoints and key rotations. */
        opts->signing_key = key;
        opts->checkpoint_records = 16;
        opts->checkpoint_interval_ms = 20;
        opts->key_epoch_s = 1;
    }
}

/* ---------------------------------------------------------------------------------------
 * The child: writers that report each durable acknowledgement
 * --------------------------------------------------------------------------------------- */
typedef struct child_writer {
    stele_t *db;
    int pipe_fd;
    uint64_t first_counter;
} child_writer_t;

static void *
child_writer_main(void *arg)
{
    child_writer_t *w = arg;
    char json[512];
    for (uint64_t counter = w->first_counter;; counter++) {
        int len = event_json(counter, json, sizeof(json));
        ack_t a = {.counter = counter};
        if (stele_append_json(w->db, json, (size_t)len, STELE_WAIT_DURABLE, &a.seq, NULL) != 0)
            break;
        if (write(w->pipe_fd, &a, sizeof(a)) != (ssize_t)sizeof(a))
            break;
    }
    return NULL;
}

static void
child_main(const char *dir, int pipe_fd, uint64_t counter_base, uint64_t segment_bytes,
           const char *key)
{
    stele_options_t opts;
    stele_t *db = NULL;
    fill_options(&opts, segment_bytes, key);
    stele_error_t err = {0};
    ack_t where = {0, CHILD_OPENING};
    if (write(pipe_fd, &where, sizeof(where)) != (ssize_t)sizeof(where))
        _exit(6);
    if (stele_open(dir, &opts, &db, &err) != 0) {
        fprintf(stderr, "child: stele_open: %s\n", err.message);
        _exit(3);
    }
    where.counter = CHILD_OPEN;
    if (write(pipe_fd, &where, sizeof(where)) != (ssize_t)sizeof(where))
        _exit(6);
    pthread_t threads[CRASH_WRITERS];
    child_writer_t writers[CRASH_WRITERS];
    for (int i = 0; i < CRASH_WRITERS; i++) {
        /* counters never collide: each writer owns a range of 2^32 */
        writers[i] = (child_writer_t){db, pipe_fd, counter_base + ((uint64_t)i << 32)};
        if (pthread_create(&threads[i], NULL, child_writer_main, &writers[i]) != 0)
            _exit(4);
    }
    for (int i = 0; i < CRASH_WRITERS; i++)
        pthread_join(threads[i], NULL);
    _exit(5); /* the writers only stop on an error: the parent kills us before */
}

/* ---------------------------------------------------------------------------------------
 * The parent: kill, reopen, check
 * --------------------------------------------------------------------------------------- */

static void
sleep_us(uint64_t us)
{
    struct timespec ts = {.tv_sec = (time_t)(us / 1000000),
                          .tv_nsec = (long)(us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Checks the event stored for `seq` is the one acknowledged for it. */
static void
check_event(const stele_record_t *rec, uint64_t counter, const char *label)
{
    bson_t doc;
    bson_iter_t it;
    char want_json[512];
    event_json(counter, want_json, sizeof(want_json));

    if (!bson_init_static(&doc, rec->bson, rec->bson_len))
        fail_msg("%s: seq %" PRIu64 " is not BSON", label, rec->seq);
    if (!bson_iter_init_find(&it, &doc, "counter") || (uint64_t)bson_iter_as_int64(&it) != counter)
        fail_msg("%s: seq %" PRIu64 " does not carry counter %" PRIu64, label, rec->seq, counter);
    bson_error_t berr;
    bson_t *want = bson_new_from_json((const uint8_t *)want_json, -1, &berr);
    assert_non_null(want);
    bson_iter_t want_it;
    assert_true(bson_iter_init_find(&want_it, want, "pad"));
    if (!bson_iter_init_find(&it, &doc, "pad") || !BSON_ITER_HOLDS_UTF8(&it) ||
        strcmp(bson_iter_utf8(&it, NULL), bson_iter_utf8(&want_it, NULL)) != 0)
        fail_msg("%s: seq %" PRIu64 " has a damaged event", label, rec->seq);
    bson_destroy(want);
}

/* The epoch of the signer key file `key` ("epoch <E>" on its second line; none: 0). */
static uint64_t
key_file_epoch(const char *key)
{
    FILE *f = fopen(key, "r");
    assert_non_null(f);
    char line[1100];
    unsigned long long epoch = 0;
    assert_non_null(fgets(line, sizeof line, f));
    if (fgets(line, sizeof line, f) && sscanf(line, "epoch %llu", &epoch) != 1)
        fail_msg("key file %s: bad second line %s", key, line);
    fclose(f);
    return epoch;
}

/* A signed journal after its reopen: every signature checks from the anchor, and the only
 * private key on disk is the key file, of the epoch in force at the journal's end. */
static void
check_signed(const char *dir, const crash_keys_t *keys, const char *label)
{
    stele_verify_report_t report;
    stele_error_t err = {0};
    int rc = stele_verify_trusted(dir, NULL, keys->pub, 0, &report, &err);
    if (rc)
        fail_msg("%s: verify --trust: %s at seq %" PRIu64 " (%s) [%s]", label, report.what,
                 report.bad_seq, report.bad_segment, err.message);
    if (report.unsealed_first_seq)
        fail_msg("%s: seqs %" PRIu64 "..%" PRIu64 " unsealed after a clean close", label,
                 report.unsealed_first_seq, report.unsealed_last_seq);
    uint64_t epoch = key_file_epoch(keys->key);
    if (epoch != report.key_epoch)
        fail_msg("%s: the key file is epoch %" PRIu64 ", the journal ends in epoch %" PRIu64, label,
                 epoch, report.key_epoch);
    char path[600];
    snprintf(path, sizeof path, "%s.next", keys->key);
    if (access(path, F_OK) == 0)
        fail_msg("%s: %s is left after the reopen", label, path);
    snprintf(path, sizeof path, "%s.new", keys->key);
    if (access(path, F_OK) == 0)
        fail_msg("%s: %s is left after the reopen", label, path);
}

/* Reopens (running recovery), reads every record back, and verifies the chain (and, with
 * keys, the signatures). */
static void
check_journal(const char *dir, const ack_book_t *book, const char *label, uint64_t segment_bytes,
              const crash_keys_t *keys)
{
    stele_options_t opts;
    stele_t *db = NULL;
    stele_error_t err = {0};
    fill_options(&opts, segment_bytes, keys ? keys->key : NULL);

    int rc = stele_open(dir, &opts, &db, &err);
    if (rc)
        fail_msg("%s: stele_open after the crash: %s (%s)", label, err.message, stele_errname(rc));
    stele_stats_t stats;
    assert_int_equal(stele_stats(db, &stats), 0);
    if (stats.appended_seq < book->max_seq)
        fail_msg("%s: journal ends at %" PRIu64 " but %" PRIu64 " was acknowledged", label,
                 stats.appended_seq, book->max_seq);
    rc = stele_close(db, &err);
    if (rc)
        fail_msg("%s: stele_close: %s", label, err.message);

    stele_reader_t *r = NULL;
    assert_int_equal(stele_reader_open(dir, &r, &err), 0);
    stele_record_t rec;
    uint64_t expect_seq = 1, n_checked = 0;
    while ((rc = stele_reader_next(r, &rec, 0, &err)) == 0) {
        if (rec.seq != expect_seq)
            fail_msg("%s: seq %" PRIu64 " where %" PRIu64 " was expected", label, rec.seq,
                     expect_seq);
        if (rec.seq < book->cap && book->counter_by_seq[rec.seq]) {
            check_event(&rec, book->counter_by_seq[rec.seq], label);
            n_checked++;
        }
        expect_seq++;
    }
    if (rc != STELE_EAGAIN)
        fail_msg("%s: reading back: %s (%s)", label, err.message, stele_errname(rc));
    stele_reader_close(r);
    if (n_checked != book->n_acked)
        fail_msg("%s: %" PRIu64 " of %" PRIu64 " acknowledged records read back", label, n_checked,
                 book->n_acked);

    stele_verify_report_t report;
    rc = stele_verify(dir, 0, 0, &report, &err);
    if (rc)
        fail_msg("%s: verify: %s at seq %" PRIu64 " (%s offset %" PRIu64 ")", label, report.what,
                 report.bad_seq, report.bad_segment, report.bad_offset);
    if (keys)
        check_signed(dir, keys, label);
}

/* Runs a child for delay_us, kills it, and books what it acknowledged. Returns whether it
 * was killed inside stele_open. */
static int
kill_one(const char *dir, uint64_t delay_us, uint64_t counter_base, ack_book_t *book,
         const crash_plan_t *plan, const crash_keys_t *keys)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        child_main(dir, fds[1], counter_base, plan->segment_bytes, keys ? keys->key : NULL);
    }
    close(fds[1]);
    sleep_us(delay_us);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status))
        fail_msg("child exited by itself with status %d", WEXITSTATUS(status));

    /* Everything in the pipe was acknowledged before the kill. */
    ack_t a;
    ssize_t n;
    uint64_t where = 0;
    while ((n = read(fds[0], &a, sizeof(a))) == (ssize_t)sizeof(a)) {
        if (a.seq == 0)
            where = a.counter;
        else
            book_add(book, &a);
    }
    assert_int_equal(n, 0);
    close(fds[0]);
    return where == CHILD_OPENING;
}

/* The engine must rebuild a lost index from the journal (stele_index_catch_up). */
static void
lose_index(const char *dir)
{
    char *index_dir = test_path_join(dir, "index");
    assert_non_null(index_dir);
    assert_int_equal(test_tmpdir_remove(index_dir), 0);
}

/* Kills not followed by a check, but by a child killed within this long, often inside its
 * stele_open: its recovery of the journal the kill left, and its index catch-up (a rebuild
 * when the index was lost). */
enum { KILL_IN_OPEN_PERCENT = 30, KILL_IN_OPEN_MAX_US = 5000 };

static void
kill_loop(const crash_plan_t *plan, const char *seed_name, uint64_t n_default, uint64_t n_long)
{
    uint64_t seed = test_seed(seed_name);
    test_rng_t rng;
    test_rng_init(&rng, seed);
    uint64_t n_kills = test_iterations(n_default, n_long);
    uint64_t total_acked = 0, n_index_lost = 0, n_early = 0, n_killed_in_open = 0;
    char *dir = NULL;
    ack_book_t book = {0};
    int is_early = 0;
    crash_keys_t keys_store, *keys = plan->is_signed ? &keys_store : NULL;

    for (uint64_t i = 0; i < n_kills; i++) {
        if (i % plan->kills_per_dir == 0) {
            if (dir) {
                if (keys)
                    crash_keys_remove(keys);
                assert_int_equal(test_tmpdir_remove(dir), 0);
            }
            dir = test_tmpdir_new("kill9");
            assert_non_null(dir);
            if (keys)
                crash_keys_new(dir, keys);
            total_acked += book.n_acked;
            book_free(&book);
        }
        char label[128];
        snprintf(label, sizeof(label), "%s: seed %" PRIu64 " kill %" PRIu64, plan->name, seed, i);
        uint64_t delay_us = is_early ? test_rng_range(&rng, 0, KILL_IN_OPEN_MAX_US)
                                     : test_rng_range(&rng, 1, plan->max_kill_delay_ms) * 1000;
        n_killed_in_open += kill_one(dir, delay_us, (i + 1) << 40, &book, plan, keys);
        n_early += is_early;
        int is_last_in_dir = (i + 1) % plan->kills_per_dir == 0 || i + 1 == n_kills;
        is_early = !is_last_in_dir && test_rng_chance(&rng, KILL_IN_OPEN_PERCENT);
        unsigned index_loss_percent = is_early ? 50 : plan->index_loss_percent;
        if (test_rng_chance(&rng, index_loss_percent)) {
            lose_index(dir);
            n_index_lost++;
        }
        if (!is_early)
            check_journal(dir, &book, label, plan->segment_bytes, keys);
    }
    total_acked += book.n_acked;
    fprintf(stderr,
            "kill -9, %s: %" PRIu64 " kills (%" PRIu64 " with the index lost; %" PRIu64
            " unchecked, then a kill within %d us; %" PRIu64 " kills inside stele_open), %" PRIu64
            " acknowledged records, 0 lost\n",
            plan->name, n_kills, n_index_lost, n_early, KILL_IN_OPEN_MAX_US, n_killed_in_open,
            total_acked);
    assert_true(total_acked > 0);
    book_free(&book);
    if (keys)
        crash_keys_remove(keys);
    assert_int_equal(test_tmpdir_remove(dir), 0);
}

static void
test_kill9_never_loses_acknowledged_record(void **state)
{
    (void)state;
    kill_loop(&crash_small_segments, "test_kill9_never_loses_acknowledged_record", 200, 10000);
}

static void
test_kill9_with_large_segments_never_loses_acknowledged_record(void **state)
{
    (void)state;
    kill_loop(&crash_large_segments,
              "test_kill9_with_large_segments_never_loses_acknowledged_record", 40, 2000);
}

static void
test_kill9_signed_never_loses_a_record_and_always_verifies_trusted(void **state)
{
    (void)state;
    kill_loop(&crash_signed, "test_kill9_signed_never_loses_a_record_and_always_verifies_trusted",
              60, 3000);
}

/* ---------------------------------------------------------------------------------------
 * Power loss through the crash I/O table
 * --------------------------------------------------------------------------------------- */

/* How an engine power-loss loop commits. */
typedef struct powerloss_plan {
    const char *name;
    stele_sync_t sync;
    unsigned durable_percent; /* appends that wait for durable; the rest wait for written */
    uint64_t n_crashes, n_crashes_long;
    int is_signed;
} powerloss_plan_t;

/* Crashes followed by one during the recovery of what they left, not by a check. */
enum { POWERLOSS_RECOVERY_CRASH_PERCENT = 30 };
/* With sync=interval: often, so that durable acknowledgements come quickly. */
enum { POWERLOSS_SYNC_INTERVAL_MS = 1 };

/* Where the power fails: after a check, anywhere in the cycle; in the recovery of a crash
 * left unchecked, mostly at its first fdatasync (the one after a torn tail's zeroing). */
static void
powerloss_arm(io_crash_t *crash, test_rng_t *rng, int is_recovering, uint64_t calls_estimate)
{
    if (is_recovering && test_rng_chance(rng, 75))
        io_crash_arm_method(crash, IO_CRASH_AT_FDATASYNC, 1);
    else
        io_crash_arm(crash, test_rng_range(rng, 1, calls_estimate));
}

/* Appends until the power fails or n_appends are done, booking the durable ones. */
static void
powerloss_appends(stele_t *db, io_crash_t *crash, test_rng_t *rng, const powerloss_plan_t *plan,
                  uint64_t *counter, ack_book_t *book, const char *label)
{
    uint64_t n_appends = test_rng_range(rng, 1, 60);
    char json[512];
    for (uint64_t k = 0; k < n_appends; k++, (*counter)++) {
        int len = event_json(*counter, json, sizeof(json));
        ack_t a = {.counter = *counter};
        stele_error_t err = {0};
        int is_durable = test_rng_chance(rng, plan->durable_percent);
        int rc =
            stele_append_json(db, json, (size_t)len,
                              is_durable ? STELE_WAIT_DURABLE : STELE_WAIT_WRITTEN, &a.seq, &err);
        if (rc) {
            if (!io_crash_has_crashed(crash))
                fail_msg("%s: append failed without a crash: %s", label, err.message);
            return;
        }
        if (is_durable)
            book_add(book, &a);
    }
}

/*
 * The engine over the crash table. The LMDB index is not behind it, so it keeps every batch
 * it was told of, the ones the crash took back included: the next open gets the newest as
 * its recovery hint. A third of the crashes are not checked but followed by another during
 * the recovery of the journal they left.
 */
static void
powerloss_loop(const powerloss_plan_t *plan, const char *seed_name)
{
    uint64_t seed = test_seed(seed_name);
    test_rng_t rng;
    test_rng_init(&rng, seed);
    uint64_t n_crashes = test_iterations(plan->n_crashes, plan->n_crashes_long);
    io_crash_t *crash = io_crash_new(journal_io_posix(), test_rng_next(&rng), 0);
    assert_non_null(crash);
    char *dir = NULL;
    ack_book_t book = {0};
    uint64_t calls_estimate = 200, total_acked = 0, counter = 1, n_recovery_crashes = 0;
    int is_recovering = 0;
    crash_keys_t keys_store, *keys = plan->is_signed ? &keys_store : NULL;

    for (uint64_t i = 0; i < n_crashes; i++) {
        if (i % CRASH_KILLS_PER_DIR == 0) {
            if (dir) {
                if (keys)
                    crash_keys_remove(keys);
                assert_int_equal(test_tmpdir_remove(dir), 0);
            }
            dir = test_tmpdir_new("enginepl");
            assert_non_null(dir);
            if (keys)
                crash_keys_new(dir, keys);
            total_acked += book.n_acked;
            book_free(&book);
        }
        char label[128];
        snprintf(label, sizeof(label), "%s: seed %" PRIu64 " power loss %" PRIu64, plan->name, seed,
                 i);

        stele_options_t opts;
        stele_t *db = NULL;
        fill_options(&opts, CRASH_SEGMENT_BYTES, keys ? keys->key : NULL);
        opts.sync = plan->sync;
        opts.sync_interval_ms = POWERLOSS_SYNC_INTERVAL_MS;
        uint64_t calls_before = io_crash_calls(crash);
        powerloss_arm(crash, &rng, is_recovering, calls_estimate);
        stele_error_t open_err = {0};
        if (stele_open_with_io(dir, &opts, io_crash_io(crash), &db, &open_err) == 0)
            powerloss_appends(db, crash, &rng, plan, &counter, &book, label);
        else if (!io_crash_has_crashed(crash))
            fail_msg("%s: open failed without a crash: %s", label, open_err.message);
        else
            n_recovery_crashes += is_recovering;
        if (!io_crash_has_crashed(crash)) {
            uint64_t used = io_crash_calls(crash) - calls_before;
            if (used > calls_estimate)
                calls_estimate = used;
            io_crash_trigger(crash);
        }
        (void)stele_close(db, NULL); /* fails: the power is gone */
        assert_int_equal(io_crash_apply(crash, NULL), 0);
        int is_last_in_dir = (i + 1) % CRASH_KILLS_PER_DIR == 0 || i + 1 == n_crashes;
        is_recovering = !is_last_in_dir && test_rng_chance(&rng, POWERLOSS_RECOVERY_CRASH_PERCENT);
        if (!is_recovering)
            check_journal(dir, &book, label, CRASH_SEGMENT_BYTES, keys);
    }
    total_acked += book.n_acked;
    fprintf(stderr,
            "engine power loss, %s: %" PRIu64 " crashes (%" PRIu64
            " in the recovery of the one before), %" PRIu64 " durable records, 0 lost\n",
            plan->name, n_crashes, n_recovery_crashes, total_acked);
    book_free(&book);
    if (keys)
        crash_keys_remove(keys);
    assert_int_equal(test_tmpdir_remove(dir), 0);
    io_crash_free(crash);
}

static void
test_engine_powerloss_never_loses_durable_record(void **state)
{
    (void)state;
    static const powerloss_plan_t plan = {"sync=always", STELE_SYNC_ALWAYS, 100, 200, 10000, 0};
    powerloss_loop(&plan, "test_engine_powerloss_never_loses_durable_record");
}

/* Signed: the power also fails inside checkpoints, key rotations (the key file, its .next
 * copy, KEYS) and their recovery at open. */
static void
test_engine_powerloss_signed_never_loses_durable_record(void **state)
{
    (void)state;
    static const powerloss_plan_t plan = {"signed", STELE_SYNC_ALWAYS, 100, 150, 10000, 1};
    powerloss_loop(&plan, "test_engine_powerloss_signed_never_loses_durable_record");
}

/* With sync=interval batches are written before the ones ahead of them are synced, and the
 * index, told of each when it is written, names one the crash kept beside a torn one before
 * it: recovery must not take that hint (it kept the torn batch inside the log, and every
 * later read failed on it). */
static void
test_engine_powerloss_with_interval_sync_leaves_a_readable_log(void **state)
{
    (void)state;
    static const powerloss_plan_t plan = {"sync=interval", STELE_SYNC_INTERVAL, 10, 100, 5000, 0};
    powerloss_loop(&plan, "test_engine_powerloss_with_interval_sync_leaves_a_readable_log");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill9_never_loses_acknowledged_record),
        cmocka_unit_test(test_kill9_with_large_segments_never_loses_acknowledged_record),
        cmocka_unit_test(test_kill9_signed_never_loses_a_record_and_always_verifies_trusted),
        cmocka_unit_test(test_engine_powerloss_never_loses_durable_record),
        cmocka_unit_test(test_engine_powerloss_signed_never_loses_durable_record),
        cmocka_unit_test(test_engine_powerloss_with_interval_sync_leaves_a_readable_log),
    };
    if (getenv("STELE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("STELE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
