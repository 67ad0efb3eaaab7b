/*
 * index_writer.c: the index writer thread (index_writer.h). Owns the ring of batch starts,
 * the index's flush policy, the retention trigger and the sink counters published for
 * `stele status`; does not own the index, the journal, the committer or the shippers
 * (stele.c opens and closes them, in an order that lets this thread stop first).
 *
 * Locks:
 *   ix_mu  protects the ring (ring..is_idle, with each batch's Merkle stored hashes in
 *          merkle_fill), the stop flag and the shippers this thread
 *          may look at (shippers, n_shippers); ix_cv wakes the thread. Taken by
 *          index_writer_on_batch on the thread that wrote a batch (after it dropped
 *          commit.mu) and held only to copy; never held across LMDB, retention or
 *          publishing: the thread takes a snapshot of the ring and the shippers under it,
 *          then works without it.
 *   Everything below "written by the index writer only" is touched by this thread alone,
 *   apart from syncs (an atomic read by stats).
 * Retention deletes segments (journal_delete_before) and their index entries, with a
 * journal reader of its own for the segment listings, then wakes appenders blocked on the
 * quota (commit_space_freed); it holds no lock of this file meanwhile.
 *
 * Falling behind: when writing batch starts fails (a full disk), or the catch-up at open
 * could, the thread stops writing them (a later entry after a gap would become the next
 * catch-up's starting point and leave the gap for good), keeps dropping what arrives, and
 * retries a live catch-up from the index's last entry (index_catchup_live) after
 * INDEX_WRITER_RETRY_FIRST_MS, doubling to INDEX_WRITER_RETRY_MAX_MS, and at once after
 * retention freed space. Readers meanwhile seek from the last entry and scan the rest.
 */
#include "index_writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "error.h"
#include "index_catchup.h"
#include "status_publish.h"
#include "ship.h"

/* Batch starts a batch's writer may hand the index writer before it drops some (the index
 * is sparse and rebuilt at open, so a dropped start only makes a seek scan a little longer). */
#define INDEX_WRITER_RING_CAP 4096
/* Bytes of Merkle stored hashes (journal/merkle.h, 2 per record on average) queued for the
 * index at most: about 32,000 records' worth. A batch whose hashes do not fit is dropped,
 * and so is every later one: the cache stays whole up to where it stops, and the catch-up
 * at the next open fills in the rest from the segments. */
#define INDEX_WRITER_MERKLE_BYTES ((size_t)2 << 20)
#define INDEX_WRITER_HASH_BYTES 32
/* The index writer applies queued batch starts at least this often... */
#define INDEX_WRITER_APPLY_MS 20
/* ...and flushes the LMDB environment (index_sync) when it was written and: this many
 * records were indexed since the last flush, or a sink's counters moved (its checkpoint is
 * in the index too), or INDEX_WRITER_SYNC_MAX_MS passed; never more often than
 * INDEX_WRITER_SYNC_MS, and at close. The index is a cache rebuilt at open, so a flush only
 * bounds that work; each is a flush of another file, which on a rotating disk costs a seek
 * and a turn that the journal's next flush waits behind (flushed every second, a lone writer
 * on the emulated HDD lost 2% and every 120th append waited three turns instead of one). */
#define INDEX_WRITER_SYNC_MS 1000
#define INDEX_WRITER_SYNC_MAX_MS 30000
#define INDEX_WRITER_SYNC_RECORDS 100000
/* How often the index writer applies the retention policy. */
#define INDEX_WRITER_RETENTION_CHECK_MS 1000
/* Segments looked at per retention pass (a pass that hits the cap finishes next time). */
#define INDEX_WRITER_RETENTION_SEGMENTS 1024
/* How often the index writer looks for changed sink counters to publish for status. */
#define INDEX_WRITER_PUBLISH_MS 1000
/* An index that fell behind is caught up after this long, then after twice as long each
 * time the catch-up fails, up to the maximum: often enough to catch up soon after space
 * returns, rarely enough that a disk that stays full costs little rereading. */
#define INDEX_WRITER_RETRY_FIRST_MS 1000
#define INDEX_WRITER_RETRY_MAX_MS 60000
/* A catch-up that must wait for its last entry to be committed tries again this soon. */
#define INDEX_WRITER_RETRY_COMMIT_MS 20

#define NS_PER_MS 1000000ull

struct index_writer {
    index_writer_config_t cfg;
    commit_t *commit; /* set by index_writer_start */
    pthread_t thread;
    bool is_started;

    pthread_mutex_t ix_mu;
    pthread_cond_t ix_cv; /* monotonic clock (index_writer_wait) */
    /* -- protected by ix_mu -- */
    index_batch_t ring[INDEX_WRITER_RING_CAP];
    uint64_t ring_first_stored[INDEX_WRITER_RING_CAP]; /* each batch's Merkle stored hashes: */
    uint32_t ring_n_stored[INDEX_WRITER_RING_CAP];     /* their first index and count, */
    uint8_t *merkle_fill;                              /* and the hashes, back to back */
    size_t merkle_fill_len;
    bool is_merkle_dropped; /* hashes were dropped: none are queued from then on */
    size_t head;
    size_t count;
    bool is_stopping;
    bool is_idle; /* sleeps with an empty ring: wake it on the next entry */
    uint64_t n_dropped;
    shipper_t *const *shippers; /* whose stats it may publish (index_writer_set_shippers) */
    size_t n_shippers;
    char behind_msg[STELE_ERROR_MESSAGE_BYTES]; /* why the index is behind; "" when it is not */

    /* -- written by the index writer only -- */
    uint8_t *merkle_spare;  /* swapped with merkle_fill at each drain */
    stele_error_t last_err; /* last failure, for a debugger: the index is a cache, none is fatal */
    _Atomic uint64_t syncs; /* index_sync calls, for stats */
    journal_reader_t *retention_reader;            /* opened on first use, for segment listings */
    stele_sink_stats_t published[STELE_MAX_SINKS]; /* sink counters as last published */
    bool is_behind;          /* batch starts are dropped until a catch-up succeeds */
    uint64_t retry_at_ms;    /* monotonic: when to try the next catch-up */
    uint64_t retry_pause_ms; /* the pause after the next failure */
};

/* When the index writer last did its periodic work (index writer thread only). */
typedef struct index_writer_clock {
    uint64_t last_sync_ms;
    uint64_t last_retention_ms;
    uint64_t last_publish_ms;
    bool is_dirty;        /* the index was written since the last index_sync */
    bool is_sink_moved;   /* sink counters were published since then */
    uint64_t indexed_seq; /* first seq of the newest batch start applied */
    uint64_t synced_seq;  /* indexed_seq at the last index_sync */
    bool is_snapshot_due; /* the monitor snapshot lags the index (index_snapshot_write) */
} index_writer_clock_t;

/* -- the ring --------------------------------------------------------------------------- */

/* Queues the batch's stored hashes (ix_mu held); their count goes into the slot. */
static void
index_writer_queue_merkle(index_writer_t *w, size_t slot, const journal_batch_info_t *info)
{
    size_t bytes = info->n_stored * INDEX_WRITER_HASH_BYTES;
    w->ring_n_stored[slot] = 0;
    if (info->n_stored == 0 || w->is_merkle_dropped)
        return;
    if (!w->merkle_fill || w->merkle_fill_len + bytes > INDEX_WRITER_MERKLE_BYTES) {
        w->is_merkle_dropped = true;
        return;
    }
    memcpy(w->merkle_fill + w->merkle_fill_len, info->stored, bytes);
    w->merkle_fill_len += bytes;
    w->ring_first_stored[slot] = info->first_stored;
    w->ring_n_stored[slot] = (uint32_t)info->n_stored;
}

void
index_writer_on_batch(void *ctx, const journal_batch_info_t *info)
{
    index_writer_t *w = ctx;
    pthread_mutex_lock(&w->ix_mu);
    if (w->count < INDEX_WRITER_RING_CAP) {
        size_t slot = (w->head + w->count) % INDEX_WRITER_RING_CAP;
        w->ring[slot] = (index_batch_t){.first_seq = info->first_seq,
                                        .segment_seq = info->segment_seq,
                                        .offset = info->offset,
                                        .first_ts_ns = info->first_ts_ns};
        index_writer_queue_merkle(w, slot, info);
        w->count++;
        if (w->is_idle || w->count == INDEX_WRITER_RING_CAP / 2)
            pthread_cond_signal(&w->ix_cv);
    } else {
        w->n_dropped++;
        w->is_merkle_dropped = w->is_merkle_dropped || info->n_stored > 0;
    }
    pthread_mutex_unlock(&w->ix_mu);
}

/* Waits on ix_cv (ix_mu held) for at most `ms`. */
static void
index_writer_wait(index_writer_t *w, long ms)
{
    struct timespec ts = clock_timespec(clock_mono_ns() + (uint64_t)ms * NS_PER_MS);
    pthread_cond_timedwait(&w->ix_cv, &w->ix_mu, &ts);
}

/* Waits (ix_mu held) for batch starts to apply. Idle: sleeps until the first one arrives
 * (or the next sync/retention tick). Then gathers for INDEX_WRITER_APPLY_MS so one LMDB
 * transaction takes many. */
static void
index_writer_gather(index_writer_t *w)
{
    if (w->count == 0 && !w->is_stopping) {
        w->is_idle = true;
        index_writer_wait(w, INDEX_WRITER_SYNC_MS);
        w->is_idle = false;
    }
    if (w->count > 0 && w->count < INDEX_WRITER_RING_CAP / 2 && !w->is_stopping)
        index_writer_wait(w, INDEX_WRITER_APPLY_MS);
}

/* What one drain takes from the queue. */
typedef struct index_writer_drained {
    index_batch_t *batch; /* INDEX_WRITER_RING_CAP entries */
    index_merkle_run_t *runs;
    size_t n, n_runs;
} index_writer_drained_t;

/* Moves the queued batch starts and stored hashes into d (ix_mu held). The hashes change
 * buffers rather than being copied: the thread's spare becomes the one appenders fill. */
static void
index_writer_drain(index_writer_t *w, index_writer_drained_t *d)
{
    d->n = d->n_runs = 0;
    uint8_t *hashes = w->merkle_fill;
    size_t at = 0;
    while (w->count && d->batch) {
        size_t slot = w->head;
        d->batch[d->n++] = w->ring[slot];
        if (w->ring_n_stored[slot] && d->runs) {
            d->runs[d->n_runs++] = (index_merkle_run_t){w->ring_first_stored[slot], hashes + at,
                                                        w->ring_n_stored[slot]};
            at += (size_t)w->ring_n_stored[slot] * INDEX_WRITER_HASH_BYTES;
        }
        w->head = (w->head + 1) % INDEX_WRITER_RING_CAP;
        w->count--;
    }
    if (!d->batch || !d->runs) {
        w->count = 0; /* out of memory at start: drop, catch-up repairs */
        w->is_merkle_dropped = true;
    }
    w->merkle_fill = w->merkle_spare;
    w->merkle_spare = hashes;
    w->merkle_fill_len = 0;
}

/* -- falling behind and catching up -------------------------------------------------- */

/* Says why the index is behind, for stats (msg "" when it is not). */
static void
index_writer_set_behind_msg(index_writer_t *w, const stele_error_t *why)
{
    pthread_mutex_lock(&w->ix_mu);
    /* A long cause is cut; the return value only says so. */
    int n = why ? snprintf(w->behind_msg, sizeof w->behind_msg,
                           "index behind the journal (reads scan from its last entry; "
                           "catch-up retried): %s",
                           why->message)
                : 0;
    if (n <= 0)
        w->behind_msg[0] = '\0';
    pthread_mutex_unlock(&w->ix_mu);
}

/* Writing the index failed: stop writing batch starts until a catch-up succeeds. */
static void
index_writer_fall_behind(index_writer_t *w, const stele_error_t *why)
{
    w->last_err = *why;
    if (!w->is_behind) {
        w->is_behind = true;
        w->retry_pause_ms = INDEX_WRITER_RETRY_FIRST_MS;
        w->retry_at_ms = (uint64_t)clock_mono_ms() + w->retry_pause_ms;
    }
    index_writer_set_behind_msg(w, why);
}

/* Catches a behind index up when its retry is due (index writer thread). */
static void
index_writer_retry_catch_up(index_writer_t *w, uint64_t now_ms)
{
    if (!w->is_behind || now_ms < w->retry_at_ms)
        return;
    journal_stats_t js;
    journal_stats(w->cfg.journal, &js);
    char note[STELE_ERROR_MESSAGE_BYTES];
    stele_error_t err;
    error_clear(&err);
    int rc = index_catchup_live(w->cfg.index, w->cfg.dir, w->cfg.io, js.first_seq, note,
                                sizeof note, NULL, &err);
    if (rc == 0) {
        w->is_behind = false;
        index_writer_set_behind_msg(w, NULL);
        return;
    }
    if (rc == STELE_EAGAIN) {
        w->retry_at_ms = now_ms + INDEX_WRITER_RETRY_COMMIT_MS;
        return;
    }
    w->last_err = err;
    index_writer_set_behind_msg(w, &err);
    w->retry_at_ms = now_ms + w->retry_pause_ms;
    w->retry_pause_ms *= 2;
    if (w->retry_pause_ms > INDEX_WRITER_RETRY_MAX_MS)
        w->retry_pause_ms = INDEX_WRITER_RETRY_MAX_MS;
}

bool
index_writer_behind(index_writer_t *w, char *msg, size_t cap)
{
    pthread_mutex_lock(&w->ix_mu);
    bool is_behind = w->behind_msg[0] != '\0';
    if (cap)
        snprintf(msg, cap, "%s", w->behind_msg);
    pthread_mutex_unlock(&w->ix_mu);
    return is_behind;
}

/* Writes the drained batch starts and stored hashes, unless the index is behind (then they
 * are dropped: the catch-up indexes the batches from the segments, the next open's the
 * hashes). Returns whether it wrote batch starts. */
static bool
index_writer_apply(index_writer_t *w, const index_writer_drained_t *d)
{
    stele_error_t err;
    if (w->is_behind)
        return false;
    if (d->n && index_put_batches(w->cfg.index, d->batch, d->n, &err) != 0) {
        index_writer_fall_behind(w, &err);
        return false;
    }
    /* A cache as well: a failure leaves the stored hashes to the next open's catch-up. */
    if (d->n_runs && index_put_merkle_runs(w->cfg.index, d->runs, d->n_runs, &err) != 0)
        w->last_err = err;
    return d->n > 0;
}

/* -- retention -------------------------------------------------------------------------- */

/* The lowest seq every one of the shippers has shipped and saved in its checkpoint (where a
 * restart resumes); 0 when there are none. */
static uint64_t
index_writer_min_saved(shipper_t *const *shippers, size_t n_shippers)
{
    if (n_shippers == 0)
        return 0;
    uint64_t min = shipper_saved_seq(shippers[0]);
    for (size_t i = 1; i < n_shippers; i++) {
        uint64_t saved = shipper_saved_seq(shippers[i]);
        min = saved < min ? saved : min;
    }
    return min;
}

/* How many of the wholly shipped segments segs[0, n_shipped) the policy drops, oldest
 * first: retention_seconds those whose newest record is older than the limit (the next
 * segment's first timestamp bounds it), retention_bytes the oldest until the rest fit. */
static size_t
index_writer_segments_to_drop(const index_writer_t *w, const journal_segment_info_t *segs,
                              size_t n_shipped)
{
    size_t n_drop = 0;
    if (w->cfg.retention_seconds) {
        int64_t cutoff_s = clock_wall_ms() / 1000 - (int64_t)w->cfg.retention_seconds;
        while (n_drop < n_shipped && segs[n_drop + 1].first_ts_ns != 0 &&
               segs[n_drop + 1].first_ts_ns / 1000000000 < cutoff_s)
            n_drop++;
    }
    if (w->cfg.retention_bytes) {
        uint64_t kept = 0;
        for (size_t i = 0; i < n_shipped; i++)
            kept += segs[i].disk_bytes;
        size_t by_size = 0;
        while (by_size < n_shipped && kept > w->cfg.retention_bytes)
            kept -= segs[by_size++].disk_bytes;
        if (by_size > n_drop)
            n_drop = by_size;
    }
    return n_drop;
}

/*
 * The first seq to keep under the retention policy, or 0 to keep everything. Only segments
 * every sink has shipped past are candidates (whole segments: segment i is shipped when the
 * next one starts at or below min shipped + 1). shippers[0, n_shippers) is the snapshot
 * taken under ix_mu: none until every sink's shipper has started, so a sink still starting
 * never has its segments cut under it.
 */
static uint64_t
index_writer_retention_cut(index_writer_t *w, shipper_t *const *shippers, size_t n_shippers)
{
    if (n_shippers == 0 || (w->cfg.retention_bytes == 0 && w->cfg.retention_seconds == 0))
        return 0;
    uint64_t shipped = index_writer_min_saved(shippers, n_shippers);
    if (shipped == 0)
        return 0;
    stele_error_t err;
    if (!w->retention_reader &&
        journal_reader_open(w->cfg.dir, w->cfg.io, &w->retention_reader, &err) != 0)
        return 0;
    journal_segment_info_t *segs = calloc(INDEX_WRITER_RETENTION_SEGMENTS, sizeof *segs);
    if (!segs)
        return 0;
    int n =
        journal_reader_segments(w->retention_reader, segs, INDEX_WRITER_RETENTION_SEGMENTS, &err);
    if (n > INDEX_WRITER_RETENTION_SEGMENTS)
        n = INDEX_WRITER_RETENTION_SEGMENTS;
    size_t n_shipped = 0; /* segments [0, n_shipped) are wholly shipped */
    while (n > 0 && n_shipped + 1 < (size_t)n && segs[n_shipped + 1].first_seq <= shipped + 1)
        n_shipped++;
    size_t n_drop = index_writer_segments_to_drop(w, segs, n_shipped);
    uint64_t cut = n_drop ? segs[n_drop].first_seq : 0;
    free(segs);
    return cut;
}

/* Deletes segments the policy lets go, then their index entries, and wakes appenders
 * blocked on the quota. */
static void
index_writer_apply_retention(index_writer_t *w, shipper_t *const *shippers, size_t n_shippers)
{
    uint64_t cut = index_writer_retention_cut(w, shippers, n_shippers);
    if (cut == 0)
        return;
    stele_error_t err;
    /* A signed journal says what it deletes first, durably (the journal deletes no more). */
    if (commit_seal_retention(w->commit, cut, &err) != 0) {
        w->last_err = err;
        return;
    }
    int deleted = journal_delete_before(w->cfg.journal, cut, &err);
    if (deleted < 0) {
        w->last_err = err;
        return;
    }
    if (deleted > 0) {
        journal_stats_t js;
        journal_stats(w->cfg.journal, &js);
        if (index_delete_before(w->cfg.index, js.first_seq, &err) != 0)
            w->last_err = err;
        commit_space_freed(w->commit);
        w->retry_at_ms = 0; /* a catch-up that lacked space may find it now */
    }
}

/* -- published sink counters ------------------------------------------------------------ */

/* Whether a sink's counters differ from what was last published. */
static bool
index_writer_sink_changed(const stele_sink_stats_t *a, const stele_sink_stats_t *b)
{
    return a->retries != b->retries || a->batches != b->batches || a->is_stopped != b->is_stopped ||
           a->last_error_unix_ms != b->last_error_unix_ms ||
           strcmp(a->last_error, b->last_error) != 0;
}

/* Publishes changed sink counters for `stele status` in other processes (status_publish.h).
 * Returns true when it wrote the index. */
static bool
index_writer_publish_sinks(index_writer_t *w, shipper_t *const *shippers, size_t n_shippers)
{
    bool wrote = false;
    stele_error_t err;
    for (size_t i = 0; i < n_shippers; i++) {
        stele_sink_stats_t now;
        shipper_stats(shippers[i], 0, &now);
        if (w->published[i].name[0] && !index_writer_sink_changed(&now, &w->published[i]))
            continue;
        if (status_publish_put_sink(w->cfg.index, &now, &err) != 0) {
            w->last_err = err;
            continue;
        }
        w->published[i] = now;
        wrote = true;
    }
    return wrote;
}

/* -- the thread ------------------------------------------------------------------------- */

/* Whether the index is due a flush (see INDEX_WRITER_SYNC_RECORDS). */
static bool
index_writer_sync_due(const index_writer_clock_t *clk, uint64_t now, bool stop)
{
    if (!clk->is_dirty)
        return false;
    if (stop)
        return true;
    uint64_t since_ms = now - clk->last_sync_ms;
    if (since_ms < INDEX_WRITER_SYNC_MS)
        return false;
    return clk->is_sink_moved || clk->indexed_seq - clk->synced_seq >= INDEX_WRITER_SYNC_RECORDS ||
           since_ms >= INDEX_WRITER_SYNC_MAX_MS;
}

/* The work besides batch starts, each at its own pace (ix_mu not held): sink counters for
 * status, the lazy index_sync, retention. On stop, publishes and syncs once more but
 * applies no retention. */
static void
index_writer_periodic(index_writer_t *w, index_writer_clock_t *clk, shipper_t *const *shippers,
                      size_t n_shippers, bool stop)
{
    uint64_t now = (uint64_t)clock_mono_ms();
    if (stop || now - clk->last_publish_ms >= INDEX_WRITER_PUBLISH_MS) {
        if (index_writer_publish_sinks(w, shippers, n_shippers))
            clk->is_dirty = clk->is_sink_moved = true;
        clk->last_publish_ms = now;
    }
    if (index_writer_sync_due(clk, now, stop)) {
        stele_error_t err;
        if (index_sync(w->cfg.index, &err) != 0)
            w->last_err = err;
        atomic_fetch_add_explicit(&w->syncs, 1, memory_order_relaxed);
        clk->last_sync_ms = now;
        clk->is_dirty = clk->is_sink_moved = false;
        clk->synced_seq = clk->indexed_seq;
        clk->is_snapshot_due = true;
    }
    /* After each flush, a copy of what status shows for readers that cannot open the index
     * (index_snapshot.c; stele_open makes the first). */
    if (clk->is_snapshot_due) {
        stele_error_t err;
        if (index_snapshot_write(w->cfg.index, &err) != 0)
            w->last_err = err;
        clk->is_snapshot_due = false;
    }
    if (!stop && now - clk->last_retention_ms >= INDEX_WRITER_RETENTION_CHECK_MS) {
        index_writer_apply_retention(w, shippers, n_shippers);
        clk->last_retention_ms = now;
    }
    if (!stop)
        index_writer_retry_catch_up(w, now);
}

static void *
index_writer_main(void *arg)
{
    index_writer_t *w = arg;
    pthread_setname_np(pthread_self(), "stele-index"); /* names it in top -H, perf, gdb */
    index_writer_drained_t d = {.batch = malloc(sizeof(index_batch_t) * INDEX_WRITER_RING_CAP),
                                .runs = malloc(sizeof(index_merkle_run_t) * INDEX_WRITER_RING_CAP)};
    uint64_t start_ms = (uint64_t)clock_mono_ms();
    /* Sink counters are published on the first pass; the rest waits a period. */
    /* Catch-up at open left the index in line with the journal: count from its end. */
    uint64_t open_seq = commit_appended_seq(w->commit);
    index_writer_clock_t clk = {.last_sync_ms = start_ms,
                                .last_retention_ms = start_ms,
                                .last_publish_ms = 0,
                                .indexed_seq = open_seq,
                                .synced_seq = open_seq};
    pthread_mutex_lock(&w->ix_mu);
    for (;;) {
        index_writer_gather(w);
        index_writer_drain(w, &d);
        bool stop = w->is_stopping;
        shipper_t *const *shippers = w->shippers;
        size_t n_shippers = w->n_shippers;
        pthread_mutex_unlock(&w->ix_mu);

        if (index_writer_apply(w, &d)) {
            clk.is_dirty = true;
            clk.indexed_seq = d.batch[d.n - 1].first_seq;
        }
        index_writer_periodic(w, &clk, shippers, n_shippers, stop);
        pthread_mutex_lock(&w->ix_mu);
        if (stop && w->count == 0)
            break;
    }
    pthread_mutex_unlock(&w->ix_mu);
    free(d.batch);
    free(d.runs);
    journal_reader_close(w->retention_reader);
    w->retention_reader = NULL;
    return NULL;
}

/* -- lifecycle -------------------------------------------------------------------------- */

int
index_writer_create(const index_writer_config_t *cfg, index_writer_t **out, stele_error_t *err)
{
    *out = NULL;
    index_writer_t *w = calloc(1, sizeof *w);
    if (!w)
        return error_set(err, -ENOMEM, "out of memory starting the index writer");
    w->cfg = *cfg;
    /* Without them no stored hash is queued: the catch-up at the next open makes them. */
    w->merkle_fill = malloc(INDEX_WRITER_MERKLE_BYTES);
    w->merkle_spare = malloc(INDEX_WRITER_MERKLE_BYTES);
    w->is_merkle_dropped = !w->merkle_fill || !w->merkle_spare;
    w->cfg.behind = NULL;
    pthread_mutex_init(&w->ix_mu, NULL);
    clock_cond_init(&w->ix_cv);
    if (cfg->behind)
        index_writer_fall_behind(w, cfg->behind);
    *out = w;
    return 0;
}

int
index_writer_start(index_writer_t *w, commit_t *commit, stele_error_t *err)
{
    w->commit = commit;
    int rc = pthread_create(&w->thread, NULL, index_writer_main, w);
    if (rc)
        return error_set(err, -rc, "could not start the index writer: %s", stele_strerror(-rc));
    w->is_started = true;
    return 0;
}

void
index_writer_set_shippers(index_writer_t *w, shipper_t *const *shippers, size_t n)
{
    pthread_mutex_lock(&w->ix_mu);
    w->shippers = shippers;
    w->n_shippers = n;
    pthread_mutex_unlock(&w->ix_mu);
}

void
index_writer_stop(index_writer_t *w)
{
    if (!w || !w->is_started)
        return;
    pthread_mutex_lock(&w->ix_mu);
    w->is_stopping = true;
    pthread_cond_signal(&w->ix_cv);
    pthread_mutex_unlock(&w->ix_mu);
    pthread_join(w->thread, NULL);
    w->is_started = false;
}

uint64_t
index_writer_syncs(const index_writer_t *w)
{
    return atomic_load_explicit(&w->syncs, memory_order_relaxed);
}

void
index_writer_free(index_writer_t *w)
{
    if (!w)
        return;
    pthread_mutex_destroy(&w->ix_mu);
    pthread_cond_destroy(&w->ix_cv);
    free(w->merkle_fill);
    free(w->merkle_spare);
    free(w);
}
