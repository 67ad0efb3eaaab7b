/*
 * stele.c: the public write API (<stele.h>): open/close, append, wait, flush, stats. Owns
 * the handle and the index writer thread; the committer lives in commit.c, validation in
 * validate.c, shippers in ship.c. Threads and locks are described in engine/README.md.
 *
 * Open order: read the index's newest batch start as a recovery hint (read-only, so a
 * directory that turns out not to be a journal is left untouched), open the journal (lock,
 * recovery), open the index for writing and bring it in line (stele_index_catch_up), start
 * the committer, the index writer and one shipper per sink. Close runs it backwards after
 * draining the queue and syncing.
 *
 * Locks:
 *   ix_mu  protects the index writer's small queue of batch starts (ix_ring..ix_is_idle);
 *          ix_cv wakes the index writer. The index writer never holds it across LMDB. The
 *          index writer also applies retention (journal_delete_before, index_delete_before)
 *          with its own journal reader for segment listings; no lock is held then. It also
 *          publishes sink counters in the index for `stele status` (status_publish.h);
 *          it reads ix_n_shippers, the shippers it may look at, under ix_mu.
 *   ship_mu/ship_cv: waiters for wait=shipped sleep on ship_cv; shippers' progress
 *          callbacks broadcast it. Shipped positions themselves are atomics in ship.c.
 * n_callers counts threads inside a public call so close frees nothing under them.
 */
#include "stele.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "commit.h"
#include "config.h"
#include "error.h"
#include "index.h"
#include "journal.h"
#include "ship.h"
#include "status_publish.h"
#include "stele_internal.h"
#include "validate.h"

/* Largest batch the committer writes at once: big enough that a backlog is written with
 * few syscalls, small enough that one batch never holds up waiters for long. */
#define STELE_BATCH_BYTES_MAX ((size_t)4 << 20)
/* Batch starts the committer may hand the index writer before it drops some (the index is
 * sparse and rebuilt at open, so a dropped start only makes a seek scan a little longer). */
#define STELE_INDEX_QUEUE_CAP 4096
/* The index writer applies queued batch starts at least this often... */
#define STELE_INDEX_APPLY_MS 20
/* ...and flushes the LMDB environment (index_sync) when it was written and: this many
 * records were indexed since the last flush, or a sink's counters moved (its checkpoint is
 * in the index too), or STELE_INDEX_SYNC_MAX_MS passed; never more often than
 * STELE_INDEX_SYNC_MS, and at close. The index is a cache rebuilt at open, so a flush only
 * bounds that work; each is a flush of another file, which on a rotating disk costs a seek
 * and a turn that the journal's next flush waits behind (flushed every second, a lone writer
 * on the emulated HDD lost 2% and every 120th append waited three turns instead of one). */
#define STELE_INDEX_SYNC_MS 1000
#define STELE_INDEX_SYNC_MAX_MS 30000
#define STELE_INDEX_SYNC_RECORDS 100000
/* How often the index writer applies the retention policy. */
#define STELE_RETENTION_CHECK_MS 1000
/* Segments looked at per retention pass (a pass that hits the cap finishes next time). */
#define STELE_RETENTION_SEGMENTS 1024
/* How often the index writer looks for changed sink counters to publish for status. */
#define STELE_PUBLISH_MS 1000
/* How long close lets each shipper drain what is committed. */
#define STELE_SHIP_DRAIN_MS 5000

struct stele {
    char *dir;
    char source[64];
    stele_options_t opts; /* copy; sinks and strings are not kept (see sinks) */
    const journal_io_t *io;
    validate_limits_t limits;
    /* The sinks' time fields, which limits reserves in events (copies: opts are borrowed). */
    char time_fields[STELE_MAX_SINKS][CONFIG_TIME_FIELD_MAX + 1];
    journal_t *journal;
    index_t *index;
    commit_t *commit;
    char recovery_note[STELE_ERROR_MESSAGE_BYTES];

    _Atomic int is_closing;
    _Atomic int n_callers;

    /* -- index writer; protected by ix_mu -- */
    pthread_t ix_thread;
    bool ix_started;
    pthread_mutex_t ix_mu;
    pthread_cond_t ix_cv;
    index_batch_t ix_ring[STELE_INDEX_QUEUE_CAP];
    size_t ix_head;
    size_t ix_count;
    bool ix_stop;
    bool ix_is_idle; /* the index writer sleeps with an empty ring: wake it on the next entry */
    uint64_t ix_dropped;
    size_t ix_n_shippers; /* shippers started, so the index writer may publish their stats */
    /* -- written by the index writer only -- */
    stele_error_t ix_err;
    _Atomic uint64_t ix_syncs;                     /* index_sync calls, for stats */
    journal_reader_t *retention_reader;            /* opened on first use, for segment listings */
    stele_sink_stats_t published[STELE_MAX_SINKS]; /* sink counters as last published */

    /* -- shippers; the array is fixed after open -- */
    shipper_t *shippers[STELE_MAX_SINKS];
    size_t n_shippers;
    pthread_mutex_t ship_mu;
    pthread_cond_t ship_cv;
};

/* -- caller accounting ------------------------------------------------------------------ */

static int
stele_enter(stele_t *db, stele_error_t *err)
{
    atomic_fetch_add(&db->n_callers, 1);
    if (atomic_load(&db->is_closing)) {
        atomic_fetch_sub(&db->n_callers, 1);
        return error_set(err, STELE_ECLOSED, "journal %s is closing", db->dir);
    }
    return 0;
}

static void
stele_leave(stele_t *db)
{
    atomic_fetch_sub(&db->n_callers, 1);
}

/* -- index writer ----------------------------------------------------------------------- */

/* On the committer thread: copy the batch start and return at once. */
static void
stele_on_batch(void *ctx, const journal_batch_info_t *info)
{
    stele_t *db = ctx;
    pthread_mutex_lock(&db->ix_mu);
    if (db->ix_count < STELE_INDEX_QUEUE_CAP) {
        size_t slot = (db->ix_head + db->ix_count) % STELE_INDEX_QUEUE_CAP;
        db->ix_ring[slot] = (index_batch_t){.first_seq = info->first_seq,
                                            .segment_seq = info->segment_seq,
                                            .offset = info->offset,
                                            .first_ts_ns = info->first_ts_ns};
        db->ix_count++;
        if (db->ix_is_idle || db->ix_count == STELE_INDEX_QUEUE_CAP / 2)
            pthread_cond_signal(&db->ix_cv);
    } else {
        db->ix_dropped++;
    }
    pthread_mutex_unlock(&db->ix_mu);
}

static void
stele_index_apply(stele_t *db, index_batch_t *batch, size_t n)
{
    stele_error_t err;
    if (n && index_put_batches(db->index, batch, n, &err) != 0)
        db->ix_err = err; /* the index is a cache: catch-up at the next open repairs it */
}

static uint64_t stele_min_shipped_of(stele_t *db, size_t n_shippers);

/*
 * The first seq to keep under the retention policy, or 0 to keep everything. Only segments
 * every sink has shipped past are candidates (whole segments: segment i is shipped when the
 * next one starts at or below min shipped + 1). Among them, retention_seconds drops those
 * whose newest record is older than the limit (the next segment's first timestamp bounds
 * it), and retention_bytes keeps at most that many bytes of them, dropping the oldest.
 * n_shippers is the index writer's snapshot (ix_n_shippers): 0 until every sink's shipper
 * has started, so a sink still starting never has its segments cut under it.
 */
static uint64_t
stele_retention_cut(stele_t *db, size_t n_shippers)
{
    if (n_shippers == 0 || (db->opts.retention_bytes == 0 && db->opts.retention_seconds == 0))
        return 0;
    uint64_t shipped = stele_min_shipped_of(db, n_shippers);
    if (shipped == 0)
        return 0;
    stele_error_t err;
    if (!db->retention_reader &&
        journal_reader_open(db->dir, db->io, &db->retention_reader, &err) != 0)
        return 0;
    journal_segment_info_t *segs = calloc(STELE_RETENTION_SEGMENTS, sizeof *segs);
    if (!segs)
        return 0;
    int n = journal_reader_segments(db->retention_reader, segs, STELE_RETENTION_SEGMENTS, &err);
    if (n > STELE_RETENTION_SEGMENTS)
        n = STELE_RETENTION_SEGMENTS;
    size_t n_shipped = 0; /* segments [0, n_shipped) are wholly shipped */
    while (n > 0 && n_shipped + 1 < (size_t)n && segs[n_shipped + 1].first_seq <= shipped + 1)
        n_shipped++;
    size_t n_drop = 0;
    if (db->opts.retention_seconds) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t cutoff = (int64_t)now.tv_sec - (int64_t)db->opts.retention_seconds;
        while (n_drop < n_shipped && segs[n_drop + 1].first_ts_ns != 0 &&
               segs[n_drop + 1].first_ts_ns / 1000000000 < cutoff)
            n_drop++;
    }
    if (db->opts.retention_bytes) {
        uint64_t kept = 0;
        for (size_t i = 0; i < n_shipped; i++)
            kept += segs[i].disk_bytes;
        size_t by_size = 0;
        while (by_size < n_shipped && kept > db->opts.retention_bytes)
            kept -= segs[by_size++].disk_bytes;
        if (by_size > n_drop)
            n_drop = by_size;
    }
    uint64_t cut = n_drop ? segs[n_drop].first_seq : 0;
    free(segs);
    return cut;
}

/* On the index writer thread: deletes segments the policy lets go, then their index entries,
 * and wakes appenders blocked on the quota. */
static void
stele_apply_retention(stele_t *db, size_t n_shippers)
{
    uint64_t cut = stele_retention_cut(db, n_shippers);
    if (cut == 0)
        return;
    stele_error_t err;
    int deleted = journal_delete_before(db->journal, cut, &err);
    if (deleted < 0) {
        db->ix_err = err;
        return;
    }
    if (deleted > 0) {
        journal_stats_t js;
        journal_stats(db->journal, &js);
        if (index_delete_before(db->index, js.first_seq, &err) != 0)
            db->ix_err = err;
        commit_space_freed(db->commit);
    }
}

/* 1 when a sink's counters differ from what was last published. */
static bool
stele_sink_changed(const stele_sink_stats_t *a, const stele_sink_stats_t *b)
{
    return a->retries != b->retries || a->batches != b->batches || a->is_stopped != b->is_stopped ||
           a->last_error_unix_ms != b->last_error_unix_ms ||
           strcmp(a->last_error, b->last_error) != 0;
}

/* On the index writer thread: publishes changed sink counters for `stele status` in other
 * processes (status_publish.h). Off the append path; returns true when it wrote the index. */
static bool
stele_publish_sinks(stele_t *db, size_t n_shippers)
{
    bool wrote = false;
    stele_error_t err;
    for (size_t i = 0; i < n_shippers; i++) {
        stele_sink_stats_t now;
        shipper_stats(db->shippers[i], 0, &now);
        if (db->published[i].name[0] && !stele_sink_changed(&now, &db->published[i]))
            continue;
        if (status_publish_put_sink(db->index, &now, &err) != 0) {
            db->ix_err = err;
            continue;
        }
        db->published[i] = now;
        wrote = true;
    }
    return wrote;
}

/* Waits on ix_cv (ix_mu held) for at most `ms`. */
static void
stele_ix_wait(stele_t *db, long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&db->ix_cv, &db->ix_mu, &ts);
}

/* When the index writer last did its periodic work (index writer thread only). */
typedef struct stele_ix_clock {
    uint64_t last_sync_ms;
    uint64_t last_retention_ms;
    uint64_t last_publish_ms;
    bool is_dirty;        /* the index was written since the last index_sync */
    bool is_sink_moved;   /* sink counters were published since then */
    uint64_t indexed_seq; /* first seq of the newest batch start applied */
    uint64_t synced_seq;  /* indexed_seq at the last index_sync */
} stele_ix_clock_t;

/* Waits (ix_mu held) for batch starts to apply. Idle: sleeps until the first one arrives
 * (or the next sync/retention tick). Then gathers for STELE_INDEX_APPLY_MS so one LMDB
 * transaction takes many. */
static void
stele_ix_gather(stele_t *db)
{
    if (db->ix_count == 0 && !db->ix_stop) {
        db->ix_is_idle = true;
        stele_ix_wait(db, STELE_INDEX_SYNC_MS);
        db->ix_is_idle = false;
    }
    if (db->ix_count > 0 && db->ix_count < STELE_INDEX_QUEUE_CAP / 2 && !db->ix_stop)
        stele_ix_wait(db, STELE_INDEX_APPLY_MS);
}

/* Moves the queued batch starts into batch (ix_mu held); returns how many. */
static size_t
stele_ix_drain(stele_t *db, index_batch_t *batch)
{
    size_t n = 0;
    while (db->ix_count && batch) {
        batch[n++] = db->ix_ring[db->ix_head];
        db->ix_head = (db->ix_head + 1) % STELE_INDEX_QUEUE_CAP;
        db->ix_count--;
    }
    if (!batch)
        db->ix_count = 0; /* out of memory at start: drop, catch-up repairs */
    return n;
}

/* Whether the index is due a flush (see STELE_INDEX_SYNC_RECORDS). */
static bool
stele_ix_sync_due(const stele_ix_clock_t *clk, uint64_t now, bool stop)
{
    if (!clk->is_dirty)
        return false;
    if (stop)
        return true;
    uint64_t since_ms = now - clk->last_sync_ms;
    if (since_ms < STELE_INDEX_SYNC_MS)
        return false;
    return clk->is_sink_moved || clk->indexed_seq - clk->synced_seq >= STELE_INDEX_SYNC_RECORDS ||
           since_ms >= STELE_INDEX_SYNC_MAX_MS;
}

/* The index writer's work besides batch starts, each at its own pace (ix_mu not held):
 * sink counters for status, the lazy index_sync, retention. On stop, publishes and syncs
 * once more but applies no retention. */
static void
stele_ix_periodic(stele_t *db, stele_ix_clock_t *clk, size_t n_shippers, bool stop)
{
    uint64_t now = (uint64_t)clock_mono_ms();
    if (stop || now - clk->last_publish_ms >= STELE_PUBLISH_MS) {
        if (stele_publish_sinks(db, n_shippers))
            clk->is_dirty = clk->is_sink_moved = true;
        clk->last_publish_ms = now;
    }
    if (stele_ix_sync_due(clk, now, stop)) {
        stele_error_t err;
        if (index_sync(db->index, &err) != 0)
            db->ix_err = err;
        atomic_fetch_add_explicit(&db->ix_syncs, 1, memory_order_relaxed);
        clk->last_sync_ms = now;
        clk->is_dirty = clk->is_sink_moved = false;
        clk->synced_seq = clk->indexed_seq;
    }
    if (!stop && now - clk->last_retention_ms >= STELE_RETENTION_CHECK_MS) {
        stele_apply_retention(db, n_shippers);
        clk->last_retention_ms = now;
    }
}

static void *
stele_index_main(void *arg)
{
    stele_t *db = arg;
    pthread_setname_np(pthread_self(), "stele-index"); /* names it in top -H, perf, gdb */
    index_batch_t *batch = malloc(sizeof(index_batch_t) * STELE_INDEX_QUEUE_CAP);
    uint64_t start_ms = (uint64_t)clock_mono_ms();
    /* Sink counters are published on the first pass; the rest waits a period. */
    /* Catch-up at open left the index in line with the journal: count from its end. */
    uint64_t open_seq = commit_appended_seq(db->commit);
    stele_ix_clock_t clk = {.last_sync_ms = start_ms,
                            .last_retention_ms = start_ms,
                            .last_publish_ms = 0,
                            .indexed_seq = open_seq,
                            .synced_seq = open_seq};
    pthread_mutex_lock(&db->ix_mu);
    for (;;) {
        stele_ix_gather(db);
        size_t n = stele_ix_drain(db, batch);
        bool stop = db->ix_stop;
        size_t n_shippers = db->ix_n_shippers;
        pthread_mutex_unlock(&db->ix_mu);

        stele_index_apply(db, batch, n);
        if (n > 0) {
            clk.is_dirty = true;
            clk.indexed_seq = batch[n - 1].first_seq;
        }
        stele_ix_periodic(db, &clk, n_shippers, stop);
        pthread_mutex_lock(&db->ix_mu);
        if (stop && db->ix_count == 0)
            break;
    }
    pthread_mutex_unlock(&db->ix_mu);
    free(batch);
    journal_reader_close(db->retention_reader);
    db->retention_reader = NULL;
    return NULL;
}

static int
stele_start_index_writer(stele_t *db, stele_error_t *err)
{
    int rc = pthread_create(&db->ix_thread, NULL, stele_index_main, db);
    if (rc)
        return error_set(err, -rc, "could not start the index writer: %s", strerror(rc));
    db->ix_started = true;
    return 0;
}

static void
stele_index_stop(stele_t *db)
{
    if (!db->ix_started)
        return;
    pthread_mutex_lock(&db->ix_mu);
    db->ix_stop = true;
    pthread_cond_signal(&db->ix_cv);
    pthread_mutex_unlock(&db->ix_mu);
    pthread_join(db->ix_thread, NULL);
    db->ix_started = false;
}

/* -- shippers --------------------------------------------------------------------------- */

static void
stele_on_ship_progress(void *ctx, const char *sink_name, uint64_t shipped_seq)
{
    stele_t *db = ctx;
    (void)sink_name;
    (void)shipped_seq;
    pthread_mutex_lock(&db->ship_mu);
    pthread_cond_broadcast(&db->ship_cv);
    pthread_mutex_unlock(&db->ship_mu);
}

static uint64_t
stele_appended_for_ship(void *ctx)
{
    stele_t *db = ctx;
    return commit_appended_seq(db->commit);
}

/* The lowest seq every one of the first n_shippers shippers has shipped; 0 when none. */
static uint64_t
stele_min_shipped_of(stele_t *db, size_t n_shippers)
{
    uint64_t min = UINT64_MAX;
    for (size_t i = 0; i < n_shippers; i++) {
        uint64_t s = shipper_shipped_seq(db->shippers[i]);
        if (s < min)
            min = s;
    }
    return n_shippers ? min : 0;
}

/* For callers after stele_open returned, when n_shippers no longer changes. */
static uint64_t
stele_min_shipped(stele_t *db)
{
    return stele_min_shipped_of(db, db->n_shippers);
}

/* STELE_ESINKSTOPPED when a sink that has not shipped seq stopped for good: it will not
 * ship it before a restart, so waiting out the caller's timeout would only hide why. */
static int
stele_sink_stopped_before(stele_t *db, uint64_t seq, stele_error_t *err)
{
    for (size_t i = 0; i < db->n_shippers; i++)
        if (shipper_shipped_seq(db->shippers[i]) < seq && shipper_stopped(db->shippers[i], err))
            return STELE_ESINKSTOPPED;
    return 0;
}

static int
stele_wait_shipped(stele_t *db, uint64_t seq, int64_t timeout_ms, stele_error_t *err)
{
    if (db->n_shippers == 0) {
        error_set(err, STELE_ENOSINK, "wait=shipped needs a sink; none is configured");
        error_set_hint(err, "add a [sink NAME] section with a uri, or wait for durable");
        return STELE_ENOSINK;
    }
    uint64_t deadline = timeout_ms < 0 ? 0 : (uint64_t)clock_mono_ms() + (uint64_t)timeout_ms;
    int rc = 0;
    pthread_mutex_lock(&db->ship_mu);
    while (stele_min_shipped(db) < seq) {
        if ((rc = commit_halted(db->commit, err)) != 0)
            break;
        if ((rc = stele_sink_stopped_before(db, seq, err)) != 0)
            break;
        if (atomic_load(&db->is_closing)) {
            rc = error_set(err, STELE_ECLOSED, "journal closed before seq %llu was shipped",
                           (unsigned long long)seq);
            break;
        }
        /* Shippers report progress by callback; a bounded sleep also covers a shipper that
         * stopped for good (integrity alarm) without calling back. */
        uint64_t now = (uint64_t)clock_mono_ms();
        if (deadline && now >= deadline) {
            rc = error_set(err, STELE_ETIMEDOUT, "seq %llu not shipped within %lld ms",
                           (unsigned long long)seq, (long long)timeout_ms);
            break;
        }
        uint64_t wake = now + 100;
        if (deadline && deadline < wake)
            wake = deadline;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t delta_ms = wake - now;
        ts.tv_sec += (time_t)(delta_ms / 1000);
        ts.tv_nsec += (long)(delta_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&db->ship_cv, &db->ship_mu, &ts);
    }
    pthread_mutex_unlock(&db->ship_mu);
    return rc;
}

/* One shipper per sink. On failure the ones started are shippers[0, n_shippers), for the
 * caller to stop. */
static int
stele_start_shippers(stele_t *db, const stele_options_t *opts, stele_error_t *err)
{
    for (size_t i = 0; i < opts->n_sinks; i++) {
        shipper_config_t cfg = {.sink = &opts->sinks[i],
                                .journal_dir = db->dir,
                                .source = db->source,
                                .io = db->io,
                                .index = db->index,
                                .on_progress = stele_on_ship_progress,
                                .progress_ctx = db,
                                .appended_seq = stele_appended_for_ship,
                                .appended_ctx = db};
        int rc = shipper_start(&cfg, &db->shippers[i], err);
        if (rc)
            return rc;
        db->n_shippers = i + 1;
    }
    /* Only once all started: the index writer may then publish their counters. */
    pthread_mutex_lock(&db->ix_mu);
    db->ix_n_shippers = db->n_shippers;
    pthread_mutex_unlock(&db->ix_mu);
    return 0;
}

/* -- open ------------------------------------------------------------------------------- */

/* The host name, reduced to what a source may contain. */
static void
stele_default_source(char *out, size_t cap)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
        snprintf(host, sizeof host, "localhost");
    size_t n = 0;
    for (const char *p = host; *p && n + 1 < cap && n < CONFIG_SOURCE_MAX; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || strchr("._:-", ch);
        out[n++] = ok ? ch : '-';
    }
    out[n] = '\0';
}

/* The index's newest batch start, read without creating anything. */
static void
stele_recovery_hint(const char *dir, unsigned file_mode, journal_options_t *jo)
{
    index_t *ix = NULL;
    index_batch_t last;
    if (index_open(dir, 0, file_mode, &ix, NULL) != 0)
        return;
    if (index_last_batch(ix, &last, NULL) == 0) {
        jo->hint_seq = last.first_seq;
        jo->hint_segment_seq = last.segment_seq;
        jo->hint_offset = last.offset;
    }
    index_close(ix);
}

static size_t
stele_batch_bytes(const stele_options_t *o)
{
    size_t frame = journal_frame_bytes(o->max_record_bytes);
    size_t batch = STELE_BATCH_BYTES_MAX;
    if (batch > o->segment_bytes / 2)
        batch = (size_t)(o->segment_bytes / 2);
    return batch < frame ? frame : batch;
}

static void
stele_note_join(char *out, size_t cap, const char *a, const char *b)
{
    /* A note longer than the stats field is cut; the return value only says so. */
    int n =
        a[0] && b[0] ? snprintf(out, cap, "%s; %s", a, b) : snprintf(out, cap, "%s", a[0] ? a : b);
    if (n < 0)
        out[0] = '\0';
}

/* ix_cv's waits have monotonic deadlines (stele_ix_wait), ship_cv's realtime ones
 * (stele_wait_shipped). stele_free destroys them. */
static void
stele_init_locks(stele_t *db)
{
    pthread_mutex_init(&db->ix_mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&db->ix_cv, &attr);
    pthread_condattr_destroy(&attr);
    pthread_cond_init(&db->ship_cv, NULL);
    pthread_mutex_init(&db->ship_mu, NULL);
}

/* A handle with its locks, its source name and its own copy of the options (the sinks and
 * strings are not kept: the shippers copy what they need), nothing opened yet. NULL when
 * out of memory. */
static stele_t *
stele_alloc(const char *dir, const stele_options_t *opts, const journal_io_t *io)
{
    stele_t *db = calloc(1, sizeof *db);
    if (!db || !(db->dir = strdup(dir))) {
        free(db);
        return NULL;
    }
    db->opts = *opts;
    db->opts.source = NULL;
    db->opts.sinks = NULL;
    db->opts.n_sinks = 0;
    db->opts.owned = NULL;
    db->io = io;
    db->limits.max_record_bytes = opts->max_record_bytes;
    db->limits.max_depth = opts->max_depth;
    validate_limits_reserve_sinks(&db->limits, opts);
    for (size_t i = 0; i < db->limits.n_time_fields; i++) {
        snprintf(db->time_fields[i], sizeof db->time_fields[i], "%s", db->limits.time_fields[i]);
        db->limits.time_fields[i] = db->time_fields[i];
    }
    stele_init_locks(db);
    if (opts->source)
        snprintf(db->source, sizeof db->source, "%s", opts->source);
    else
        stele_default_source(db->source, sizeof db->source);
    return db;
}

/* The journal's options for this handle; db->source names a journal this open creates. */
static void
stele_journal_options(const stele_t *db, const stele_options_t *o, journal_options_t *jo)
{
    journal_options_init(jo);
    jo->io = db->io;
    jo->source = db->source;
    jo->segment_bytes = o->segment_bytes;
    jo->max_record_bytes = o->max_record_bytes;
    jo->file_mode = o->file_mode;
    jo->dir_mode = o->dir_mode;
    jo->create_if_missing = o->create_if_missing;
    /* With sync=always, zero-filled segments make every commit an overwrite of written
     * blocks, so each fdatasync has no extent metadata to flush. Zero-filling costs a full
     * extra write of every segment (in the preparer thread, but it competes for the disk
     * and a core), which pays off only while the synced batches are small: the journal
     * decides per segment (JOURNAL_ZERO_FILL_SMALL_SYNCS). With interval/never the few
     * syncs absorb the extent conversion of fallocate'd space instead. */
    jo->zero_fill =
        o->sync == STELE_SYNC_ALWAYS ? JOURNAL_ZERO_FILL_SMALL_SYNCS : JOURNAL_ZERO_FILL_NEVER;
    /* With sync=always every batch is flushed at once, so the page cache only adds work:
     * a copy, then fdatasync's writeback walk, on the committing thread (journal/direct.h). */
    jo->direct_writes = o->sync == STELE_SYNC_ALWAYS;
}

/* Opens the journal (lock, recovery) from the index's hint; *rec receives what recovery
 * found. An existing journal keeps the source name it was created with: db->source takes
 * it. */
static int
stele_open_journal(stele_t *db, const stele_options_t *o, journal_recovery_t *rec,
                   stele_error_t *err)
{
    journal_options_t jo;
    stele_journal_options(db, o, &jo);
    stele_recovery_hint(db->dir, o->file_mode, &jo);
    memset(rec, 0, sizeof *rec);
    int rc = journal_open(db->dir, &jo, &db->journal, rec, err);
    if (rc)
        return rc;
    snprintf(db->source, sizeof db->source, "%s", journal_source(db->journal));
    return 0;
}

/* Opens the index for writing and brings it in line with the recovered journal; what
 * recovery and catch-up did is kept for stats. */
static int
stele_open_index(stele_t *db, const stele_options_t *o, const journal_recovery_t *rec,
                 stele_error_t *err)
{
    int rc = index_open(db->dir, 1, o->file_mode, &db->index, err);
    if (rc)
        return rc;
    char catch_note[STELE_ERROR_MESSAGE_BYTES] = "";
    rc = stele_index_catch_up(db->index, db->dir, db->io, rec, catch_note, sizeof catch_note, err);
    if (rc)
        return rc;
    stele_note_join(db->recovery_note, sizeof db->recovery_note, rec->note, catch_note);
    /* For `stele status` in other processes; the index is a cache, so a failure to publish
     * only leaves status without the settings. */
    (void)status_publish_put_settings(db->index, o, NULL);
    return 0;
}

/* Starts the committer after the journal's last record, handing batch starts to the index
 * writer (stele_on_batch). */
static int
stele_start_committer(stele_t *db, const stele_options_t *o, const journal_recovery_t *rec,
                      stele_error_t *err)
{
    commit_config_t cc = {.journal = db->journal,
                          .last_seq = rec->last_seq,
                          .last_ts_ns = rec->last_ts_ns,
                          .sync = o->sync,
                          .sync_interval_ms = o->sync_interval_ms,
                          .commit_interval_us = o->commit_interval_us,
                          .commit_policy = o->commit_policy,
                          .max_queue_bytes = o->max_queue_bytes,
                          .queue_timeout_ms = o->queue_timeout_ms,
                          .batch_bytes = stele_batch_bytes(o),
                          .max_journal_bytes = o->max_journal_bytes,
                          .segment_bytes = journal_segment_bytes(db->journal),
                          .on_full = o->on_full,
                          .on_batch = stele_on_batch,
                          .batch_ctx = db};
    return commit_start(&cc, &db->commit, err);
}

static void stele_free(stele_t *db);

/* Undoes a failed open in close's order: stops whatever was started (shippers without a
 * drain: nothing was acknowledged to anyone), closes whatever was opened, frees the
 * handle. */
static void
stele_open_abandon(stele_t *db)
{
    atomic_store(&db->is_closing, 1);
    commit_stop(db->commit, NULL);
    stele_index_stop(db);
    for (size_t i = 0; i < db->n_shippers; i++)
        shipper_stop(db->shippers[i], 0);
    commit_free(db->commit);
    journal_close(db->journal, NULL);
    index_close(db->index);
    stele_free(db);
}

int
stele_open_with_io(const char *dir, const stele_options_t *opts_in, const journal_io_t *io,
                   stele_t **out, stele_error_t *err)
{
    stele_options_t defaults;
    if (out)
        *out = NULL;
    if (!out || !dir || !*dir)
        return error_set(err, STELE_EINVAL, "stele_open: dir and out are required");
    if (!opts_in) {
        stele_options_init(&defaults);
        opts_in = &defaults;
    }
    int rc = config_check(opts_in, err);
    if (rc)
        return rc;
    stele_t *db = stele_alloc(dir, opts_in, io);
    if (!db)
        return error_set(err, -ENOMEM, "out of memory opening %s", dir);

    journal_recovery_t rec;
    rc = stele_open_journal(db, opts_in, &rec, err);
    if (rc)
        goto fail;
    rc = stele_open_index(db, opts_in, &rec, err);
    if (rc)
        goto fail;
    rc = stele_start_committer(db, opts_in, &rec, err);
    if (rc)
        goto fail;
    rc = stele_start_index_writer(db, err);
    if (rc)
        goto fail;
    rc = stele_start_shippers(db, opts_in, err);
    if (rc)
        goto fail;
    *out = db;
    return 0;

fail:
    stele_open_abandon(db);
    return rc;
}

int
stele_open(const char *dir, const stele_options_t *opts, stele_t **out, stele_error_t *err)
{
    return stele_open_with_io(dir, opts, NULL, out, err);
}

static void
stele_free(stele_t *db)
{
    pthread_mutex_destroy(&db->ix_mu);
    pthread_cond_destroy(&db->ix_cv);
    pthread_mutex_destroy(&db->ship_mu);
    pthread_cond_destroy(&db->ship_cv);
    free(db->dir);
    free(db);
}

int
stele_close(stele_t *db, stele_error_t *err)
{
    if (!db)
        return 0;
    atomic_store(&db->is_closing, 1);
    stele_error_t first;
    error_clear(&first);
    int rc = commit_stop(db->commit, &first);

    pthread_mutex_lock(&db->ship_mu);
    pthread_cond_broadcast(&db->ship_cv);
    pthread_mutex_unlock(&db->ship_mu);
    /* Callers that entered before is_closing now return promptly (STELE_ECLOSED or their
     * level reached by the drain); nothing below may be freed under them. */
    while (atomic_load(&db->n_callers) > 0) {
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000};
        nanosleep(&pause, NULL);
    }
    /* The index writer reads shippers' positions for retention: stop it first. */
    stele_index_stop(db);
    for (size_t i = 0; i < db->n_shippers; i++)
        shipper_stop(db->shippers[i], STELE_SHIP_DRAIN_MS);
    commit_free(db->commit);

    stele_error_t jerr;
    int jrc = journal_close(db->journal, &jerr);
    if (jrc && rc == 0) {
        rc = jrc;
        first = jerr;
    }
    index_close(db->index);
    stele_free(db);
    if (rc)
        error_copy(err, &first);
    return rc;
}

/* -- the write path --------------------------------------------------------------------- */

static int
stele_wait_level(stele_t *db, uint64_t seq, stele_wait_t level, int64_t timeout_ms,
                 stele_error_t *err)
{
    switch (level) {
    case STELE_WAIT_NONE:
        if (seq == 0 || seq > commit_appended_seq(db->commit))
            return error_set(err, STELE_EINVAL, "seq %llu was never appended",
                             (unsigned long long)seq);
        return 0;
    case STELE_WAIT_WRITTEN:
    case STELE_WAIT_DURABLE:
        return commit_wait(db->commit, seq, level, timeout_ms, err);
    case STELE_WAIT_SHIPPED:
        return stele_wait_shipped(db, seq, timeout_ms, err);
    }
    return error_set(err, STELE_EINVAL, "unknown wait level %d", (int)level);
}

static int
stele_check_append(stele_t *db, const void *data, stele_wait_t wait, stele_error_t *err)
{
    if (!db)
        return error_set(err, STELE_EINVAL, "stele_append: no handle");
    if (!data)
        return error_set(err, STELE_EEMPTY, "event is empty (NULL)");
    if ((unsigned)wait > STELE_WAIT_SHIPPED)
        return error_set(err, STELE_EINVAL, "unknown wait level %d", (int)wait);
    if (wait == STELE_WAIT_SHIPPED && db->n_shippers == 0) {
        error_set(err, STELE_ENOSINK, "wait=shipped needs a sink; none is configured");
        error_set_hint(err, "add a [sink NAME] section with a uri, or wait for durable");
        return STELE_ENOSINK;
    }
    return 0;
}

/* Queues an encoded event and waits; the caller has entered and marked itself active. */
static int
stele_append_encoded(stele_t *db, const uint8_t *bson, uint32_t len, stele_wait_t wait,
                     uint64_t *seq_out, stele_error_t *err)
{
    uint64_t seq = 0;
    int rc = commit_enqueue(db->commit, bson, len, wait, &seq, err);
    if (rc)
        return rc;
    if (seq_out)
        *seq_out = seq;
    if (wait == STELE_WAIT_NONE)
        return 0;
    return stele_wait_level(db, seq, wait, -1, err);
}

int
stele_append_json(stele_t *db, const char *json, size_t len, stele_wait_t wait, uint64_t *seq_out,
                  stele_error_t *err)
{
    int rc = stele_check_append(db, json, wait, err);
    if (rc || (rc = stele_enter(db, err)) != 0)
        return rc;
    commit_writer_enter(db->commit);
    bson_t doc;
    rc = validate_json(json, len, &db->limits, &doc, err);
    if (rc == 0) {
        rc = stele_append_encoded(db, bson_get_data(&doc), doc.len, wait, seq_out, err);
        bson_destroy(&doc);
    }
    commit_writer_leave(db->commit);
    stele_leave(db);
    return rc;
}

int
stele_append_bson(stele_t *db, const uint8_t *bson, size_t len, stele_wait_t wait,
                  uint64_t *seq_out, stele_error_t *err)
{
    int rc = stele_check_append(db, bson, wait, err);
    if (rc || (rc = stele_enter(db, err)) != 0)
        return rc;
    commit_writer_enter(db->commit);
    rc = validate_bson(bson, len, &db->limits, err);
    if (rc == 0)
        rc = stele_append_encoded(db, bson, (uint32_t)len, wait, seq_out, err);
    commit_writer_leave(db->commit);
    stele_leave(db);
    return rc;
}

int
stele_wait(stele_t *db, uint64_t seq, stele_wait_t level, int64_t timeout_ms, stele_error_t *err)
{
    if (!db)
        return error_set(err, STELE_EINVAL, "stele_wait: no handle");
    if (timeout_ms < -1)
        return error_set(err, STELE_EINVAL, "stele_wait: timeout_ms %lld (-1 waits for ever)",
                         (long long)timeout_ms);
    int rc = stele_enter(db, err);
    if (rc)
        return rc;
    commit_writer_enter(db->commit);
    if (seq == 0 || seq > commit_appended_seq(db->commit))
        rc = error_set(err, STELE_EINVAL, "seq %llu was never appended", (unsigned long long)seq);
    else
        rc = stele_wait_level(db, seq, level, timeout_ms, err);
    commit_writer_leave(db->commit);
    stele_leave(db);
    return rc;
}

uint64_t
stele_reached_seq(stele_t *db, stele_wait_t level)
{
    if (!db || stele_enter(db, NULL) != 0)
        return 0;
    uint64_t seq = 0;
    switch (level) {
    case STELE_WAIT_NONE:
        seq = commit_appended_seq(db->commit);
        break;
    case STELE_WAIT_WRITTEN:
        seq = commit_written_seq(db->commit);
        break;
    case STELE_WAIT_DURABLE:
        seq = commit_durable_seq(db->commit);
        break;
    case STELE_WAIT_SHIPPED:
        seq = db->n_shippers ? stele_min_shipped(db) : 0;
        break;
    }
    stele_leave(db);
    return seq;
}

int
stele_flush(stele_t *db, stele_error_t *err)
{
    if (!db)
        return error_set(err, STELE_EINVAL, "stele_flush: no handle");
    int rc = stele_enter(db, err);
    if (rc)
        return rc;
    rc = commit_flush(db->commit, err);
    stele_leave(db);
    return rc;
}

int
stele_stats(stele_t *db, stele_stats_t *out)
{
    if (!db || !out)
        return STELE_EINVAL;
    if (stele_enter(db, NULL))
        return STELE_ECLOSED;
    memset(out, 0, sizeof *out);
    snprintf(out->source, sizeof out->source, "%s", db->source);
    commit_stats(db->commit, out);
    journal_stats_t js;
    journal_stats(db->journal, &js);
    out->first_seq = js.first_seq;
    out->segments = js.segments;
    out->disk_bytes = js.disk_bytes;
    out->index_syncs = atomic_load_explicit(&db->ix_syncs, memory_order_relaxed);
    snprintf(out->recovery_note, sizeof out->recovery_note, "%s", db->recovery_note);
    out->n_sinks = db->n_shippers;
    for (size_t i = 0; i < db->n_shippers; i++)
        shipper_stats(db->shippers[i], out->written_seq, &out->sinks[i]);
    stele_leave(db);
    return 0;
}
