/*
 * test_engine_crash.c: the whole engine survives kill -9 and power loss.
 *
 * Kill: a child process opens the journal with stele_open and appends JSON events from
 * several threads with wait=durable, reporting where it is (opening, open) and every
 * acknowledged (seq, counter) over a pipe; the parent SIGKILLs it, reopens with stele_open,
 * and checks every acknowledged record is present with the event it carried, and that
 * stele_verify finds the chain and the index intact. 200 kills by default (several per
 * journal, so recovery of recovered journals is exercised), 10,000 in long mode. Each kill
 * is aimed at a window, and the loop counts what it hit and requires a minimum of each:
 *  - inside stele_open: 30% of the kills are not checked but followed by a child killed
 *    within the time the last open took (its recovery of the journal the kill left, and its
 *    index catch-up or, with the index deleted half of those times, its rebuild);
 *  - mid-batch: most kills come 1 to 60 ms after stele_open returned; a check that finds
 *    records the child wrote but had not acknowledged counts one;
 *  - at a roll: 15% of the checked kills (small segments) come as the parent sees a new
 *    segment's name appear in the directory (inotify), while the roll finishes.
 *
 * Power loss: the engine runs over the crash I/O table (stele_open_with_io); the power fails
 * at a random I/O call, a random subset of the unsynced writes survives, and stele_open with
 * the real I/O must recover with every acknowledged-durable record intact. The LMDB index is
 * not behind the I/O table, so it may claim batches the crash took back: the engine must
 * notice and repair it, and must not start recovery from such a batch (the index's hint)
 * when a batch before it was torn (with sync=interval). 30% of the crashes are not checked
 * but followed by one in the recovery of the journal they left. The loop counts crashes in
 * open, in such recoveries and during appends, the unsynced data lost, and (sync=interval)
 * the indexes left ahead of the journal, and requires a minimum of each.
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
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io_crash.h"
#include "stele.h"
#include "stele_internal.h"
#include "test_child.h"
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
    unsigned roll_kill_percent;  /* chance a checked kill is aimed at a roll */
    int is_signed;               /* the writers sign (fill_options) */
} crash_plan_t;

static const crash_plan_t crash_small_segments = {
    "small segments", CRASH_SEGMENT_BYTES, CRASH_KILLS_PER_DIR, CRASH_MAX_KILL_DELAY_MS, 0, 15, 0};
/* The default segment size, megabytes of records in it, and now and then a lost index: the
 * recovery scan then reads the newest segment from its start across many read chunks (a
 * frame straddling two chunks once ended the log there: 256 KiB segments never had one). */
static const crash_plan_t crash_large_segments = {"large segments", 64u << 20, 40, 250, 25, 0, 0};
/* Signed: kills up to 400 ms in, twenty to a journal, so journals live for several key
 * epochs of a second and kills land in rotations, rolls and checkpoints. */
static const crash_plan_t crash_signed = {"signed", CRASH_SEGMENT_BYTES, 20, 400, 25, 0, 1};

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

/* A new journal directory for a loop, with a key pair beside it when keys is not NULL. */
static char *
crash_dir_new(const char *prefix, crash_keys_t *keys)
{
    char *dir = test_tmpdir_new(prefix);
    assert_non_null(dir);
    if (keys)
        crash_keys_new(dir, keys);
    return dir;
}

static void
crash_dir_remove(char *dir, const crash_keys_t *keys)
{
    if (keys)
        crash_keys_remove(keys);
    assert_int_equal(test_tmpdir_remove(dir), 0);
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

/* What the reopen after a crash found. */
typedef struct check_result {
    uint64_t end_seq;          /* the last seq recovery kept */
    int truncated_torn_tail;   /* recovery zeroed a torn tail */
    int dropped_index_entries; /* the index named batches the crash took back */
} check_result_t;

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
    uint64_t epoch = 0;
    assert_int_equal(test_key_file_epoch(keys->key, &epoch), 0);
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
static check_result_t
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
    check_result_t res = {
        .end_seq = stats.appended_seq,
        .truncated_torn_tail = strstr(stats.recovery_note, "recovered segment") != NULL,
        .dropped_index_entries = strstr(stats.recovery_note, "index entries after seq") != NULL};
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
    return res;
}

/* Where a kill is aimed (kill_one). */
typedef enum kill_window {
    KILL_IN_OPEN,   /* after the child starts stele_open, within the time the last open took */
    KILL_APPENDING, /* 1 to max_kill_delay_ms after stele_open returned */
    KILL_AT_ROLL,   /* as a new segment's name appears (inotify): during a roll */
} kill_window_t;

/* What one kill hit. */
typedef struct kill_result {
    int was_in_open;  /* the child had not returned from stele_open */
    int was_at_roll;  /* KILL_AT_ROLL saw the rename it waited for */
    uint64_t open_us; /* how long the child's stele_open took, as the parent saw it */
} kill_result_t;

/* Bounds against a child that hangs, not timings: far longer than any open or roll. */
enum { KILL_WAIT_MS = 60000 };

/* Reads the child's next message; fails the test when none comes. 0 on EOF (the child
 * exited: its status says why). */
static int
read_ack(int fd, ack_t *a, const char *what)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, KILL_WAIT_MS) != 1)
        fail_msg("the child sent no %s in %d ms", what, KILL_WAIT_MS);
    ssize_t n = read(fd, a, sizeof *a);
    if (n == 0)
        return 0;
    assert_int_equal(n, sizeof *a);
    return 1;
}

/* Waits for the child to say where it is (CHILD_OPENING, CHILD_OPEN). */
static void
wait_for_child_at(int fd, uint64_t where, pid_t pid)
{
    ack_t a;
    if (!read_ack(fd, &a, where == CHILD_OPEN ? "CHILD_OPEN" : "CHILD_OPENING")) {
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        fail_msg("the child exited with status %d before %s", WEXITSTATUS(status),
                 where == CHILD_OPEN ? "its stele_open returned" : "its stele_open");
    }
    assert_int_equal(a.seq, 0);
    assert_int_equal(a.counter, where);
}

static uint64_t
mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Whether the inotify descriptor reports a *.seg name moved into the directory (a roll's
 * rename of prepared.tmp) within timeout_ms. */
static int
wait_for_segment_rename(int inotify_fd, int timeout_ms)
{
    uint64_t deadline_us = mono_us() + (uint64_t)timeout_ms * 1000u;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        uint64_t now_us = mono_us();
        struct pollfd pfd = {.fd = inotify_fd, .events = POLLIN};
        if (now_us >= deadline_us || poll(&pfd, 1, (int)((deadline_us - now_us) / 1000u)) != 1)
            return 0;
        ssize_t n = read(inotify_fd, buf, sizeof buf);
        for (ssize_t off = 0; n > 0 && off < n;) {
            const struct inotify_event *ev = (const struct inotify_event *)(buf + off);
            size_t len = ev->len ? strlen(ev->name) : 0;
            if (len > 4 && strcmp(ev->name + len - 4, ".seg") == 0)
                return 1;
            off += (ssize_t)(sizeof *ev + ev->len);
        }
    }
}

/* Drops the events already queued: renames from before the child's stele_open returned. */
static void
drain_inotify(int inotify_fd)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (read(inotify_fd, buf, sizeof buf) > 0) {
    }
}

/* Runs a child, kills it in `window` (delay_us: the kill's delay inside that window), and
 * books what it acknowledged. */
static kill_result_t
kill_one(const char *dir, kill_window_t window, uint64_t delay_us, uint64_t counter_base,
         ack_book_t *book, const crash_plan_t *plan, const crash_keys_t *keys)
{
    kill_result_t res = {0};
    int inotify_fd = -1;
    if (window == KILL_AT_ROLL) {
        inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        assert_true(inotify_fd >= 0);
        assert_true(inotify_add_watch(inotify_fd, dir, IN_MOVED_TO) >= 0);
    }
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = test_fork_bound();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        child_main(dir, fds[1], counter_base, plan->segment_bytes, keys ? keys->key : NULL);
    }
    close(fds[1]);
    wait_for_child_at(fds[0], CHILD_OPENING, pid);
    uint64_t opening_us = mono_us();
    if (window == KILL_IN_OPEN) {
        sleep_us(delay_us);
    } else {
        wait_for_child_at(fds[0], CHILD_OPEN, pid);
        res.open_us = mono_us() - opening_us;
        if (window == KILL_APPENDING) {
            sleep_us(delay_us);
        } else {
            drain_inotify(inotify_fd);
            res.was_at_roll = wait_for_segment_rename(inotify_fd, KILL_WAIT_MS);
        }
    }
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status))
        fail_msg("child exited by itself with status %d", WEXITSTATUS(status));
    if (inotify_fd >= 0)
        close(inotify_fd);

    /* Everything in the pipe was acknowledged before the kill. */
    ack_t a;
    res.was_in_open = window == KILL_IN_OPEN;
    while (read_ack(fds[0], &a, "end of file")) {
        if (a.seq == 0)
            res.was_in_open = a.counter == CHILD_OPENING;
        else
            book_add(book, &a);
    }
    close(fds[0]);
    return res;
}

/* The engine must rebuild a lost index from the journal (stele_index_catch_up). */
static void
lose_index(const char *dir)
{
    char *index_dir = test_path_join(dir, "index");
    assert_non_null(index_dir);
    assert_int_equal(test_tmpdir_remove(index_dir), 0);
}

/* Kills not followed by a check, but by a child killed inside its stele_open: its recovery
 * of the journal the kill left, and its index catch-up (a rebuild when the index was lost).
 * The kill comes within the time the last open took, which the first kills measure. */
enum { KILL_IN_OPEN_PERCENT = 30, KILL_IN_OPEN_FIRST_US = 5000 };

/* What a kill loop's kills hit, counted so the loop can require each window it claims. */
typedef struct kill_counts {
    uint64_t kills;
    uint64_t in_open;      /* inside stele_open */
    uint64_t mid_batch;    /* checked kills that left records written but not acknowledged */
    uint64_t at_roll;      /* kills sent as a roll's rename appeared */
    uint64_t empty_newest; /* checked kills that left a newest segment with no record */
    uint64_t index_lost;   /* reopens with the index deleted */
    uint64_t unchecked;    /* kills followed by a kill in open, not by a check */
    uint64_t acked;
} kill_counts_t;

/* The window of kill i (after a kill left unchecked: in the next child's open). */
static kill_window_t
pick_window(test_rng_t *rng, const crash_plan_t *plan, int is_early)
{
    if (is_early)
        return KILL_IN_OPEN;
    if (test_rng_chance(rng, plan->roll_kill_percent))
        return KILL_AT_ROLL;
    return KILL_APPENDING;
}

/* The loop must have hit each window it claims, so a change that moved every kill out of
 * one (or made the child stop appending) fails here rather than passing untested. */
static void
check_kill_windows(const kill_counts_t *n, const crash_plan_t *plan)
{
    if (n->kills < 40)
        return; /* a run shortened with STELE_TEST_ITERATIONS */
    if (n->in_open < n->kills / 20)
        fail_msg("%s: %" PRIu64 " of %" PRIu64 " kills inside stele_open (want %" PRIu64 ")",
                 plan->name, n->in_open, n->kills, n->kills / 20);
    if (n->mid_batch < n->kills / 10)
        fail_msg("%s: %" PRIu64 " of %" PRIu64 " kills mid-batch (want %" PRIu64 ")", plan->name,
                 n->mid_batch, n->kills, n->kills / 10);
    if (plan->roll_kill_percent && n->at_roll < n->kills / 40)
        fail_msg("%s: %" PRIu64 " of %" PRIu64 " kills at a roll (want %" PRIu64 ")", plan->name,
                 n->at_roll, n->kills, n->kills / 40);
    if (n->index_lost < n->kills * plan->index_loss_percent / 200)
        fail_msg("%s: the index was lost before %" PRIu64 " of %" PRIu64 " reopens", plan->name,
                 n->index_lost, n->kills);
    assert_true(n->acked > 0);
}

/* Checks the journal after a kill, counting what the kill left. */
static void
check_after_kill(const char *dir, const ack_book_t *book, const char *label,
                 const crash_plan_t *plan, const crash_keys_t *keys, kill_counts_t *n)
{
    uint64_t newest_first_seq = test_newest_segment_first_seq(dir);
    uint64_t end_seq = check_journal(dir, book, label, plan->segment_bytes, keys).end_seq;
    n->mid_batch += end_seq > book->max_seq;
    n->empty_newest += newest_first_seq > end_seq;
}

static void
kill_loop(const crash_plan_t *plan, const char *seed_name, uint64_t n_default, uint64_t n_long)
{
    uint64_t seed = test_seed(seed_name);
    test_rng_t rng;
    test_rng_init(&rng, seed);
    kill_counts_t n = {.kills = test_iterations(n_default, n_long)};
    uint64_t open_us = KILL_IN_OPEN_FIRST_US;
    char *dir = NULL;
    ack_book_t book = {0};
    int is_early = 0;
    crash_keys_t keys_store, *keys = plan->is_signed ? &keys_store : NULL;

    for (uint64_t i = 0; i < n.kills; i++) {
        if (i % plan->kills_per_dir == 0) {
            if (dir)
                crash_dir_remove(dir, keys);
            dir = crash_dir_new("kill9", keys);
            n.acked += book.n_acked;
            book_free(&book);
        }
        char label[128];
        snprintf(label, sizeof(label), "%s: seed %" PRIu64 " kill %" PRIu64, plan->name, seed, i);
        kill_window_t window = pick_window(&rng, plan, is_early);
        uint64_t delay_us = window == KILL_IN_OPEN
                                ? test_rng_range(&rng, 0, open_us)
                                : test_rng_range(&rng, 1, plan->max_kill_delay_ms) * 1000;
        kill_result_t res = kill_one(dir, window, delay_us, (i + 1) << 40, &book, plan, keys);
        if (res.open_us)
            open_us = res.open_us;
        n.in_open += res.was_in_open;
        n.at_roll += res.was_at_roll;
        n.unchecked += is_early;
        int is_last_in_dir = (i + 1) % plan->kills_per_dir == 0 || i + 1 == n.kills;
        is_early = !is_last_in_dir && test_rng_chance(&rng, KILL_IN_OPEN_PERCENT);
        unsigned index_loss_percent = is_early ? 50 : plan->index_loss_percent;
        if (test_rng_chance(&rng, index_loss_percent)) {
            lose_index(dir);
            n.index_lost++;
        }
        if (!is_early)
            check_after_kill(dir, &book, label, plan, keys, &n);
    }
    n.acked += book.n_acked;
    fprintf(stderr,
            "kill -9, %s: %" PRIu64 " kills: %" PRIu64 " inside stele_open, %" PRIu64
            " mid-batch (records written, not acknowledged), %" PRIu64 " at a roll (%" PRIu64
            " checks found the newest segment empty); %" PRIu64 " with the index lost, %" PRIu64
            " left unchecked for a kill in the next open; %" PRIu64
            " acknowledged records, 0 lost\n",
            plan->name, n.kills, n.in_open, n.mid_batch, n.at_roll, n.empty_newest, n.index_lost,
            n.unchecked, n.acked);
    check_kill_windows(&n, plan);
    book_free(&book);
    crash_dir_remove(dir, keys);
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

/* What an engine power-loss loop's crashes hit and left, counted so the loop can require
 * what it claims. */
typedef struct powerloss_counts {
    uint64_t crashes;
    uint64_t in_open;         /* the power failed inside stele_open */
    uint64_t in_recovery;     /* ... while it recovered an unchecked crash's journal */
    uint64_t in_appends;      /* during the appends */
    uint64_t sectors_dropped; /* unsynced sector pieces the crashes lost */
    uint64_t dir_ops_lost;    /* creates, renames, unlinks the crashes undid */
    uint64_t torn_tails;      /* checks whose recovery zeroed a torn tail */
    uint64_t index_ahead;     /* checks whose index named batches the crash took back */
    uint64_t acked;
} powerloss_counts_t;

/* One cycle: open (recovering what the last crash left) and append, the power failing at
 * the armed call or, if the cycle never reached it, at its end. Returns whether it reached
 * the armed call. */
static int
powerloss_cycle(io_crash_t *crash, const char *dir, test_rng_t *rng, const powerloss_plan_t *plan,
                uint64_t *counter, ack_book_t *book, const char *label, const crash_keys_t *keys,
                powerloss_counts_t *n)
{
    stele_options_t opts;
    stele_t *db = NULL;
    fill_options(&opts, CRASH_SEGMENT_BYTES, keys ? keys->key : NULL);
    opts.sync = plan->sync;
    opts.sync_interval_ms = POWERLOSS_SYNC_INTERVAL_MS;
    stele_error_t open_err = {0};
    if (stele_open_with_io(dir, &opts, io_crash_io(crash), &db, &open_err) == 0) {
        powerloss_appends(db, crash, rng, plan, counter, book, label);
        n->in_appends += io_crash_has_crashed(crash);
    } else if (!io_crash_has_crashed(crash)) {
        fail_msg("%s: open failed without a crash: %s", label, open_err.message);
    } else {
        n->in_open++;
    }
    int reached_armed_call = io_crash_has_crashed(crash);
    if (!reached_armed_call)
        io_crash_trigger(crash);
    (void)stele_close(db, NULL); /* fails: the power is gone */
    io_crash_report_t report;
    assert_int_equal(io_crash_apply(crash, &report), 0);
    n->sectors_dropped += report.sectors_dropped;
    n->dir_ops_lost += report.dir_ops_lost;
    return reached_armed_call;
}

/* The loop must have hit what it claims: crashes in open, in the recovery of a crash, and
 * during appends, losses of unsynced data, and (with sync=interval) an index ahead of the
 * journal. The minimums are a small fraction of what a run hits (the printed counts show
 * the margin), so only a loop that stopped reaching one fails them. */
static void
check_powerloss_counts(const powerloss_counts_t *n, const powerloss_plan_t *plan)
{
    if (n->crashes < 100)
        return; /* a run shortened with STELE_TEST_ITERATIONS */
    if (n->in_open < n->crashes / 40 || n->in_recovery < n->crashes / 100 ||
        n->in_appends < n->crashes / 40)
        fail_msg("%s: %" PRIu64 " crashes: %" PRIu64 " in open (want %" PRIu64 "), %" PRIu64
                 " in the recovery of a crash (want %" PRIu64 "), %" PRIu64
                 " during appends (want %" PRIu64 ")",
                 plan->name, n->crashes, n->in_open, n->crashes / 40, n->in_recovery,
                 n->crashes / 100, n->in_appends, n->crashes / 40);
    assert_true(n->sectors_dropped > 0);
    assert_true(n->acked > 0);
    if (plan->sync != STELE_SYNC_ALWAYS)
        assert_true(n->index_ahead > 0);
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
    powerloss_counts_t n = {.crashes = test_iterations(plan->n_crashes, plan->n_crashes_long)};
    io_crash_t *crash = io_crash_new(journal_io_posix(), test_rng_next(&rng), 0);
    assert_non_null(crash);
    char *dir = NULL;
    ack_book_t book = {0};
    uint64_t calls_estimate = 200, counter = 1;
    int is_recovering = 0;
    crash_keys_t keys_store, *keys = plan->is_signed ? &keys_store : NULL;

    for (uint64_t i = 0; i < n.crashes; i++) {
        if (i % CRASH_KILLS_PER_DIR == 0) {
            if (dir)
                crash_dir_remove(dir, keys);
            dir = crash_dir_new("enginepl", keys);
            n.acked += book.n_acked;
            book_free(&book);
        }
        char label[128];
        snprintf(label, sizeof(label), "%s: seed %" PRIu64 " power loss %" PRIu64, plan->name, seed,
                 i);
        uint64_t calls_before = io_crash_calls(crash), in_open_before = n.in_open;
        powerloss_arm(crash, &rng, is_recovering, calls_estimate);
        if (!powerloss_cycle(crash, dir, &rng, plan, &counter, &book, label, keys, &n)) {
            uint64_t used = io_crash_calls(crash) - calls_before;
            if (used > calls_estimate)
                calls_estimate = used; /* the next crashes aim at the whole cycle */
        }
        n.in_recovery += is_recovering && n.in_open > in_open_before;
        int is_last_in_dir = (i + 1) % CRASH_KILLS_PER_DIR == 0 || i + 1 == n.crashes;
        is_recovering = !is_last_in_dir && test_rng_chance(&rng, POWERLOSS_RECOVERY_CRASH_PERCENT);
        if (!is_recovering) {
            check_result_t res = check_journal(dir, &book, label, CRASH_SEGMENT_BYTES, keys);
            n.torn_tails += res.truncated_torn_tail;
            n.index_ahead += res.dropped_index_entries;
        }
    }
    n.acked += book.n_acked;
    fprintf(stderr,
            "engine power loss, %s: %" PRIu64 " crashes: %" PRIu64 " in open (%" PRIu64
            " of them in the recovery of the crash before), %" PRIu64 " during appends; %" PRIu64
            " sector pieces and %" PRIu64 " directory operations lost; %" PRIu64
            " torn tails recovered, %" PRIu64 " indexes ahead of the journal; %" PRIu64
            " durable records, 0 lost\n",
            plan->name, n.crashes, n.in_open, n.in_recovery, n.in_appends, n.sectors_dropped,
            n.dir_ops_lost, n.torn_tails, n.index_ahead, n.acked);
    check_powerloss_counts(&n, plan);
    book_free(&book);
    crash_dir_remove(dir, keys);
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
    return cmocka_run_group_tests(tests, NULL, NULL);
}
