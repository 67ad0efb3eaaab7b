/*
 * commit.c: group commit. Owns the batch buffers, the append path, the committer thread and
 * the write-path positions; does not own the journal (stele.c opens and closes it) or the
 * index (the on_batch callback hands positions to the index writer, index_writer.c). The
 * shared state and which lock protects what are in commit_internal.h; how waiters lead,
 * spin and sleep is commit_wait.c, their wake-ups commit_waker.c, the quota commit_quota.c.
 *
 * Buffers: records are laid out as ready frames (journal_frame_prepare) in fixed-size batch
 * buffers ("chunks"). Appenders fill the open chunk; a chunk that cannot take the next frame
 * is closed onto the full list. Whoever holds io_mu (the committer, or a leading waiter)
 * takes the oldest full chunk, or else the open one, writes it with one
 * journal_append_batch per piece (CHUNK_PIECE_BYTES, marked by the appenders as they lay
 * frames) and puts it back on the free list. No per-record allocation; memory
 * is bounded by max_queue_bytes (queued frame bytes) and by a cap on the number of chunks.
 *
 * Positions: durable_seq <= written_seq <= appended_seq. appended_seq is written by
 * appenders under mu; written_seq and durable_seq only by the holder of io_mu. All three
 * are atomics so waiters and stats read them without the lock. Lock order: io_mu before
 * mu; mu is never held across journal I/O.
 *
 * Halting: a failed write or sync stores the cause once (halt_err, before `halted` is set
 * with release order), drops everything queued and wakes everyone; from then on every
 * enqueue, wait and flush returns STELE_EHALTED. A failed fdatasync is never retried: the
 * kernel may have dropped the dirty pages, so a later success would be a lie.
 *
 * Batch forming (commit_policy):
 *   adaptive: commit as soon as the previous commit ends. With commit_interval_us > 0, wait
 *     up to that long, but only while more writers are inside append/wait (n_active) than
 *     records in the open batch, i.e. while some active writer has not yet contributed
 *     (PostgreSQL's commit_delay with commit_siblings). A lone writer therefore never
 *     waits; every such wait is counted in commit_delays.
 *   fixed: commit at most once per commit_interval_us, whatever the load, like MongoDB
 *     2.4's journalCommitInterval. A lone durable writer appending right after its previous
 *     acknowledgement waits about the whole interval (less the commit's own time): the
 *     worst case of MongoDB's behaviour (it shortened the wait to a third of the interval
 *     when a j:true write was waiting), which is the case the benchmark wants to show.
 *
 * Wake-ups: unwaited appends (wait=none) let a committer that just finished a batch nap up
 * to COMMIT_NAP_NS so a stream of them is written in large batches; waited appends wake it
 * at once (written and durable ones in leading mode do not: their caller commits).
 */
#include "commit_internal.h"

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
#include "seqwait.h"

/* Spare chunks kept after a burst; the rest are freed. */
#define COMMIT_SPARE_CHUNKS 2

/* After a batch, an idle committer naps this long before sleeping for good, and appends
 * that do not wait (wait=none) do not wake it from the nap: a steady stream of unwaited
 * appends is then written in large batches instead of one pwritev (and one futex wake) per
 * record. Appends that wait always wake it at once. */
#define COMMIT_NAP_NS 1000000ull
#define COMMIT_NAP_WINDOW_NS 100000000ull

/* An unwaited append still wakes a napping committer once this much is queued. */
#define COMMIT_EAGER_BYTES ((size_t)256 << 10)

/* An appender hashes its record's leaf itself (journal_frame_hash_leaf, half of a record's
 * SHA-256 work) only while the committer is behind: a full chunk waits for it, or the open one
 * holds more than a nap gathers before COMMIT_EAGER_BYTES wakes it. The work a committer
 * cannot keep up with then moves to the appending threads, and batches settle where both keep
 * pace (with one appender ~3x this size); a committer that keeps up leaves the appenders
 * (and the time they hold mu) as short as they were. */
#define COMMIT_HELP_BYTES (2 * COMMIT_EAGER_BYTES)

/* A disk whose fdatasync takes this long or more is slow: with commit_interval_us=0 the
 * adaptive policy then waits up to half a flush for active writers (commit_grow_interval_ns).
 * Flash and write-back caches flush in well under it; a rotating disk takes 4-20 ms. */
#define COMMIT_SLOW_FLUSH_NS 1000000ull

/* A sync that takes this long or more is worth waking the batch's `written` waiters before
 * it (through the waker); a quicker one (a RAM disk, a write-back cache) costs them less
 * than the waker's round trip, and they are woken with the durable ones after it. */
#define COMMIT_WAKE_BEFORE_SYNC_NS 20000ull

/* -- time and latency ------------------------------------------------------------------ */

/* Waits on cv until deadline_ns (monotonic; 0 = forever). Returns ETIMEDOUT or 0. */
static int
commit_cond_wait(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ns)
{
    if (deadline_ns == 0)
        return pthread_cond_wait(cv, mu);
    struct timespec ts = clock_timespec(deadline_ns);
    return pthread_cond_timedwait(cv, mu, &ts);
}

/* Adds a written batch's sampled enqueue times to the latency histogram (io_mu held). */
static void
commit_record_latency(commit_t *c, const chunk_t *ch, uint64_t now_ns)
{
    if (ch->n_samples == 0)
        return;
    uint64_t weight = ch->n_records / ch->n_samples;
    uint64_t extra = ch->n_records % ch->n_samples;
    for (uint32_t i = 0; i < ch->n_samples; i++) {
        uint64_t lat = now_ns > ch->sample_ns[i] ? now_ns - ch->sample_ns[i] : 0;
        latency_hist_add(&c->latency, lat, weight + (i < extra ? 1 : 0));
    }
}

/* -- chunks (all under mu) -------------------------------------------------------------- */

static chunk_t *
chunk_get(commit_t *c)
{
    chunk_t *ch = c->spare;
    if (ch) {
        c->spare = ch->next;
        c->n_spare--;
    } else {
        if (c->n_chunks >= c->max_chunks)
            return NULL;
        ch = malloc(sizeof *ch);
        if (!ch)
            return NULL;
        ch->buf = malloc(c->cfg.batch_bytes);
        if (!ch->buf) {
            free(ch);
            return NULL;
        }
        c->n_chunks++;
    }
    ch->next = NULL;
    ch->used_bytes = 0;
    ch->n_records = 0;
    ch->n_samples = 0;
    ch->n_breaks = 0;
    ch->first_seq = ch->last_seq = 0;
    return ch;
}

/* Returns a chunk to the free list, or hands it back to be freed outside the lock. */
static chunk_t *
chunk_put(commit_t *c, chunk_t *ch)
{
    if (c->n_spare < COMMIT_SPARE_CHUNKS) {
        ch->next = c->spare;
        c->spare = ch;
        c->n_spare++;
        return NULL;
    }
    c->n_chunks--;
    return ch;
}

static void
chunk_free(chunk_t *ch)
{
    if (ch) {
        free(ch->buf);
        free(ch);
    }
}

static void
commit_close_open_chunk(commit_t *c)
{
    chunk_t *ch = c->open;
    if (!ch || ch->n_records == 0)
        return;
    c->open = NULL;
    if (c->full_tail)
        c->full_tail->next = ch;
    else
        c->full_head = ch;
    c->full_tail = ch;
}

chunk_t *
commit_take_chunk(commit_t *c)
{
    chunk_t *ch = c->full_head;
    if (ch) {
        c->full_head = ch->next;
        if (!c->full_head)
            c->full_tail = NULL;
        ch->next = NULL;
    } else if (c->open && c->open->n_records > 0) {
        ch = c->open;
        c->open = NULL;
    } else {
        return NULL;
    }
    uint64_t lead = atomic_load(&c->lead_seq);
    if (lead && lead <= ch->last_seq)
        atomic_store(&c->lead_seq, 0);
    return ch;
}

/* Work the committer should do itself (mu held): all of it, except an open batch whose last
 * record's appender is about to commit it (lead_seq), unless closing or flushing. */
static bool
commit_committer_has_work(const commit_t *c)
{
    if (!commit_has_work(c))
        return false;
    bool leader_takes_it = !c->full_head && c->open->last_seq == atomic_load(&c->lead_seq) &&
                           !c->is_closing && c->flush_seq <= atomic_load(&c->durable_seq);
    return !leader_takes_it;
}

/* -- halting ---------------------------------------------------------------------------- */

int
commit_halted(commit_t *c, stele_error_t *err)
{
    if (!atomic_load_explicit(&c->halted, memory_order_acquire))
        return 0;
    const char *hint = c->halt_err.hint[0] ? c->halt_err.hint
                                           : "reopen the journal to run recovery; check the disk";
    return error_set_hinted(err, STELE_EHALTED, hint, "engine halted: %s", c->halt_err.message);
}

/* Called by the io_mu holder with mu held. Drops everything queued and wakes everyone. */
static chunk_t *
commit_halt_locked(commit_t *c, const stele_error_t *cause)
{
    if (!atomic_load_explicit(&c->halted, memory_order_relaxed)) {
        c->halt_err = *cause;
        atomic_store_explicit(&c->halted, 1, memory_order_release);
    }
    chunk_t *to_free = NULL;
    chunk_t *ch;
    while ((ch = commit_take_chunk(c)) != NULL) {
        ch->next = to_free;
        to_free = ch;
        c->n_chunks--;
    }
    c->queue_bytes = 0;
    c->queue_records = 0;
    pthread_cond_broadcast(&c->space_cv);
    commit_wake_all(c);
    return to_free;
}

/* -- the committer ---------------------------------------------------------------------- */

static bool
commit_sync_due(commit_t *c, uint64_t written, uint64_t durable, uint64_t last_sync_ns,
                uint64_t now_ns, bool draining)
{
    if (written <= durable)
        return false;
    if (draining || c->flush_seq > durable)
        return true;
    switch (c->cfg.sync) {
    case STELE_SYNC_ALWAYS:
        return true;
    case STELE_SYNC_INTERVAL:
        return now_ns - last_sync_ns >= c->cfg.sync_interval_ms * NS_PER_MS;
    case STELE_SYNC_NEVER:
        break;
    }
    return false;
}

/* How long the adaptive policy may hold a batch open: commit_interval_us when set; with 0,
 * and sync=always, half the recent flush time on a disk whose flush takes
 * COMMIT_SLOW_FLUSH_NS or more, else nothing. Why: taking a batch the moment the previous flush
 * ends splits N writers into two halves that alternate (one half's records flush while the other
 * half's queue), so a slow disk commits N/2 per flush; waiting a fraction of a flush for the
 * writers just acknowledged doubles that. On a fast disk the CPUs are the limit and the wait costs
 * more than it gains (docs/benchmarks.md). */
static uint64_t
commit_grow_interval_ns(const commit_t *c)
{
    if (c->cfg.commit_interval_us)
        return (uint64_t)c->cfg.commit_interval_us * NS_PER_US;
    if (c->cfg.sync != STELE_SYNC_ALWAYS)
        return 0; /* batches wait for no flush: nothing to gain */
    uint64_t flush_ns = atomic_load_explicit(&c->flush_ewma_ns, memory_order_relaxed);
    return flush_ns >= COMMIT_SLOW_FLUSH_NS ? flush_ns / 2 : 0;
}

/* The adaptive policy holds the open batch back when it may wait (see
 * commit_grow_interval_ns), nothing older is waiting, and more writers are active than
 * records in the open batch, i.e. some active writer has not contributed yet. */
bool
commit_batch_may_grow(const commit_t *c)
{
    return !c->full_head && !c->is_closing && c->open &&
           (uint64_t)atomic_load(&c->n_active) > c->open->n_records &&
           commit_grow_interval_ns(c) > 0;
}

/* After a flush that took flush_ns (io_mu held): a moving average, 1/8 weight per flush. */
static void
commit_note_flush(commit_t *c, uint64_t flush_ns)
{
    uint64_t avg = atomic_load_explicit(&c->flush_ewma_ns, memory_order_relaxed);
    avg = avg ? (avg * 7 + flush_ns) / 8 : flush_ns;
    atomic_store_explicit(&c->flush_ewma_ns, avg, memory_order_relaxed);
}

/* Waits (mu held) to let other active writers join the open batch; see the top comment. */
static void
commit_grow_batch(commit_t *c, uint64_t last_commit_ns)
{
    uint64_t interval_ns = (uint64_t)c->cfg.commit_interval_us * NS_PER_US;
    if (c->full_head || c->is_closing)
        return;
    if (c->cfg.commit_policy == STELE_COMMIT_FIXED) {
        if (interval_ns == 0)
            return;
        uint64_t deadline = last_commit_ns + interval_ns;
        while (!c->is_closing && c->flush_seq <= atomic_load(&c->durable_seq) &&
               clock_mono_ns() < deadline) {
            c->is_committer_idle = true;
            commit_cond_wait(&c->work_cv, &c->mu, deadline);
            c->is_committer_idle = false;
        }
        return;
    }
    if (!commit_batch_may_grow(c))
        return;
    atomic_fetch_add_explicit(&c->commit_delays, 1, memory_order_relaxed);
    uint64_t deadline = clock_mono_ns() + commit_grow_interval_ns(c);
    c->is_committer_growing = true;
    while (commit_batch_may_grow(c) && clock_mono_ns() < deadline) {
        c->is_committer_idle = true;
        commit_cond_wait(&c->work_cv, &c->mu, deadline);
        c->is_committer_idle = false;
    }
    c->is_committer_growing = false;
}

/* Writes bytes [start, end) of a chunk as one journal batch (mu not held). The waiters of a
 * piece other than the chunk's last are woken here; the last piece's once io_mu is released
 * (commit_wake_reached). */
static int
commit_write_batch(commit_t *c, chunk_t *ch, size_t start, size_t end, bool is_last,
                   stele_error_t *err)
{
    journal_batch_info_t info;
    int rc = journal_append_batch(c->cfg.journal, ch->buf + start, end - start, &info, err);
    if (rc)
        return rc;
    atomic_store_explicit(&c->written_seq, info.last_seq, memory_order_release);
    if (!is_last && c->is_written_woken_inline)
        commit_wake_reached(c);
    atomic_fetch_add_explicit(&c->n_batches, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->n_batch_records, info.last_seq - info.first_seq + 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&c->bytes_written, end - start, memory_order_relaxed);
    if (c->cfg.on_batch)
        c->cfg.on_batch(c->cfg.batch_ctx, &info);
    return 0;
}

/* Writes bytes [start, end) of a chunk (mu not held): the records the active segment still
 * holds first, then the rest after the roll. Why: a roll needs the next segment, which a full
 * disk may refuse; the records that fit the room already there are then stored, not refused
 * with the rest (docs/guarantees.md, the full disk). */
static int
commit_write_piece(commit_t *c, chunk_t *ch, size_t start, size_t end, bool is_last,
                   stele_error_t *err)
{
    size_t fit = journal_batch_fit_bytes(c->cfg.journal, ch->buf + start, end - start);
    if (fit > 0 && fit < end - start) {
        int rc = commit_write_batch(c, ch, start, start + fit, false, err);
        if (rc)
            return rc;
        start += fit;
    }
    return commit_write_batch(c, ch, start, end, is_last, err);
}

/* Writes one chunk, piece by piece (mu not held). Returns 0 or the journal's error in *err;
 * the pieces before a failed one are written. */
static int
commit_write_chunk(commit_t *c, chunk_t *ch, stele_error_t *err)
{
    size_t start = 0;
    for (uint32_t i = 0; i <= ch->n_breaks; i++) {
        size_t end = i < ch->n_breaks ? ch->piece_start[i] : ch->used_bytes;
        int rc = commit_write_piece(c, ch, start, end, i == ch->n_breaks, err);
        if (rc)
            return rc;
        start = end;
    }
    return 0;
}

void
commit_publish(commit_t *c)
{
    uint64_t written = atomic_load(&c->written_seq);
    uint64_t durable = atomic_load(&c->durable_seq);
    uint64_t visible = c->cfg.sync == STELE_SYNC_ALWAYS ? durable : written;
    journal_publish(c->cfg.journal, visible, durable);
}

static void
commit_free_chunks(chunk_t *list)
{
    while (list) {
        chunk_t *next = list->next;
        chunk_free(list);
        list = next;
    }
}

void
commit_fail(commit_t *c, const stele_error_t *cause)
{
    pthread_mutex_lock(&c->mu);
    chunk_t *dropped = commit_halt_locked(c, cause);
    pthread_mutex_unlock(&c->mu);
    commit_kick_waker(c);
    commit_free_chunks(dropped);
}

/* Syncs what is written but not yet durable (io_mu held, mu not held). A leading waiter
 * may have synced it while the caller waited for io_mu: then there is nothing to do.
 * Returns the chunks a failure dropped, for the caller to free outside the locks. */
static chunk_t *
commit_sync_written(commit_t *c)
{
    uint64_t written = atomic_load(&c->written_seq);
    if (written <= atomic_load(&c->durable_seq))
        return NULL;
    stele_error_t serr;
    uint64_t start_ns = clock_mono_ns();
    int rc = journal_sync(c->cfg.journal, &serr);
    if (rc == 0) {
        commit_note_flush(c, clock_mono_ns() - start_ns);
        atomic_fetch_add_explicit(&c->n_syncs, 1, memory_order_relaxed);
        atomic_store_explicit(&c->durable_seq, written, memory_order_release);
        commit_publish(c);
    }
    pthread_mutex_lock(&c->mu);
    chunk_t *dropped = rc ? commit_halt_locked(c, &serr) : NULL;
    pthread_mutex_unlock(&c->mu);
    commit_kick_waker(c);
    return dropped;
}

/* After a failed write: a roll syncs the segment it leaves before it asks for the next one,
 * so the records written before a roll that failed are durable. Publishing that lets their
 * waiters succeed rather than be told the journal halted (the records are in it), so a
 * caller that re-sends what failed stores nothing twice. */
static void
commit_keep_what_the_journal_synced(commit_t *c)
{
    uint64_t synced = journal_durable_seq(c->cfg.journal);
    if (synced <= atomic_load(&c->durable_seq) || synced > atomic_load(&c->written_seq))
        return;
    atomic_store_explicit(&c->durable_seq, synced, memory_order_release);
    commit_publish(c);
}

/* Whether a leader wakes its batch's sleepers itself once it released io_mu: without
 * sync=always, or when the sync is quick (a RAM disk); after a slow sync the batch holds many
 * sleepers, and the waker wakes them while the leader returns to its caller. */
static bool
commit_leader_wakes(const commit_t *c)
{
    return c->is_written_woken_inline ||
           atomic_load_explicit(&c->flush_ewma_ns, memory_order_relaxed) <
               COMMIT_WAKE_BEFORE_SYNC_NS;
}

/* Called by the committer (leader_wakes NULL) or by a leading waiter. A leader told
 * *leader_wakes wakes the batch's sleepers itself once it released io_mu
 * (commit_wake_reached); else the waker is kicked for them. */
int
commit_batch_io(commit_t *c, chunk_t *ch, bool *leader_wakes)
{
    stele_error_t werr;
    int rc = commit_write_chunk(c, ch, &werr);
    uint64_t done_ns = clock_mono_ns();
    if (rc == 0) {
        if (c->cfg.sync != STELE_SYNC_ALWAYS)
            commit_record_latency(c, ch, done_ns);
        commit_quota_refresh(c, false);
        if (c->cfg.sync != STELE_SYNC_ALWAYS)
            commit_publish(c);
    }
    if (rc == 0 && c->cfg.sync == STELE_SYNC_ALWAYS) {
        /* wait=written is reached now: do not make those waiters sit through a sync that
         * takes longer than the waker's round trip. */
        if (atomic_load_explicit(&c->flush_ewma_ns, memory_order_relaxed) >=
            COMMIT_WAKE_BEFORE_SYNC_NS)
            commit_kick_waker_for_written(c);
        /* Sync right here rather than through the loop: the batch's own latency. */
        stele_error_t serr;
        uint64_t start_ns = clock_mono_ns();
        rc = journal_sync(c->cfg.journal, &serr);
        if (rc == 0) {
            commit_note_flush(c, clock_mono_ns() - start_ns);
            atomic_fetch_add_explicit(&c->n_syncs, 1, memory_order_relaxed);
            atomic_store_explicit(&c->durable_seq, ch->last_seq, memory_order_release);
            commit_record_latency(c, ch, clock_mono_ns());
            commit_publish(c);
        } else {
            werr = serr;
        }
    }
    if (rc)
        commit_keep_what_the_journal_synced(c);
    atomic_store_explicit(&c->inflight_seq, 0, memory_order_relaxed);
    pthread_mutex_lock(&c->mu);
    c->queue_bytes -= ch->used_bytes;
    c->queue_records -= ch->n_records;
    chunk_t *to_free = chunk_put(c, ch);
    chunk_t *dropped = rc ? commit_halt_locked(c, &werr) : NULL;
    if (c->n_space_waiters)
        pthread_cond_broadcast(&c->space_cv);
    pthread_mutex_unlock(&c->mu);
    bool is_woken_by_leader = leader_wakes && commit_leader_wakes(c);
    if (leader_wakes)
        *leader_wakes = is_woken_by_leader;
    if (!is_woken_by_leader)
        commit_kick_waker(c);
    chunk_free(to_free);
    commit_free_chunks(dropped);
    return rc;
}

/* When the committer last synced and last took a batch (committer thread only). */
typedef struct commit_clock {
    uint64_t last_sync_ns;
    uint64_t last_commit_ns; /* 0 until the first batch: no nap before it */
} commit_clock_t;

/* Syncs what is written (mu held on entry and on return; dropped for io_mu and the sync, per
 * the lock order). Returns when the sync ended. */
static uint64_t
commit_sync_pending(commit_t *c)
{
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_lock(&c->io_mu);
    chunk_t *dropped = commit_sync_written(c);
    pthread_mutex_unlock(&c->io_mu);
    uint64_t synced_ns = clock_mono_ns();
    commit_free_chunks(dropped);
    pthread_mutex_lock(&c->mu);
    return synced_ns;
}

/* Sleeps on work_cv (mu held) until woken, or until the next sync is due (sync=interval with
 * records written but not synced), or for at most a nap when a batch was taken recently
 * (COMMIT_NAP_NS: unwaited appends then do not wake it). */
static void
commit_idle_wait(commit_t *c, const commit_clock_t *clk, bool halted, bool is_unsynced,
                 uint64_t now)
{
    uint64_t deadline = 0;
    if (!halted && c->cfg.sync == STELE_SYNC_INTERVAL && is_unsynced)
        deadline = clk->last_sync_ns + c->cfg.sync_interval_ms * NS_PER_MS;
    bool nap = !halted && now - clk->last_commit_ns < COMMIT_NAP_WINDOW_NS;
    if (nap && (deadline == 0 || deadline > now + COMMIT_NAP_NS))
        deadline = now + COMMIT_NAP_NS;
    /* A signed journal takes a checkpoint when the interval passes, even with nothing to
     * write (commit_seal_chores). */
    uint64_t seal_due = halted ? 0 : commit_seal_deadline_ns(c);
    if (seal_due && seal_due <= now)
        seal_due = now + COMMIT_NAP_NS; /* due, but a leading waiter holds the queue */
    if (seal_due && (deadline == 0 || seal_due < deadline))
        deadline = seal_due;
    c->is_committer_idle = true;
    c->is_committer_napping = nap;
    c->is_committer_sync_armed =
        c->cfg.sync != STELE_SYNC_INTERVAL ||
        (deadline != 0 && deadline <= clk->last_sync_ns + c->cfg.sync_interval_ms * NS_PER_MS);
    commit_cond_wait(&c->work_cv, &c->mu, deadline);
    c->is_committer_idle = false;
    c->is_committer_napping = false;
}

/* Takes the oldest batch and writes it (mu held on entry and on return; dropped to take
 * io_mu first, per the lock order, and for the I/O). Then, outside leading mode, spins
 * briefly for a lone writer's next waited record (commit_spin_for_waited). */
static void
commit_write_next(commit_t *c, commit_clock_t *clk)
{
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_lock(&c->io_mu);
    pthread_mutex_lock(&c->mu);
    chunk_t *ch = commit_take_chunk(c); /* NULL when a leading waiter took it first */
    if (ch) {
        clk->last_commit_ns = clock_mono_ns();
        atomic_store_explicit(&c->inflight_seq, ch->last_seq, memory_order_relaxed);
    }
    pthread_mutex_unlock(&c->mu);
    int rc = ch ? commit_batch_io(c, ch, NULL) : -1;
    if (rc == 0 && c->cfg.sync == STELE_SYNC_ALWAYS)
        clk->last_sync_ns = clock_mono_ns();
    uint64_t taken_seq = atomic_load(&c->written_seq);
    pthread_mutex_unlock(&c->io_mu);
    if (c->is_written_woken_inline)
        commit_wake_reached(c);
    if (rc == 0 && !c->is_leading && !c->is_written_leading)
        commit_spin_for_waited(c, taken_seq);
    pthread_mutex_lock(&c->mu);
}

/* The committer thread: under mu, looks at the positions, then syncs, sleeps or writes the
 * next batch, until closing leaves nothing queued and nothing unsynced. */
static void *
commit_main(void *arg)
{
    commit_t *c = arg;
    pthread_setname_np(pthread_self(), "stele-commit"); /* names it in top -H, perf, gdb */
    commit_clock_t clk = {.last_sync_ns = clock_mono_ns(), .last_commit_ns = 0};
    pthread_mutex_lock(&c->mu);
    for (;;) {
        bool halted = atomic_load_explicit(&c->halted, memory_order_relaxed);
        uint64_t written = atomic_load(&c->written_seq);
        uint64_t durable = atomic_load(&c->durable_seq);
        uint64_t now = clock_mono_ns();
        bool draining = c->is_closing && !commit_has_work(c);

        if (!halted && commit_sync_due(c, written, durable, clk.last_sync_ns, now, draining)) {
            clk.last_sync_ns = commit_sync_pending(c);
            continue;
        }
        if (halted || !commit_committer_has_work(c)) {
            if (c->is_closing && !commit_has_work(c))
                break;
            commit_seal_chores(c);
            commit_idle_wait(c, &clk, halted, written > durable, clock_mono_ns());
            continue;
        }
        commit_seal_chores(c); /* a rotation falls due while busy too */
        commit_grow_batch(c, clk.last_commit_ns);
        if (commit_committer_has_work(c))
            commit_write_next(c, &clk);
    }
    atomic_store(&c->is_stopped, true);
    commit_wake_all(c);
    pthread_cond_broadcast(&c->space_cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* -- lifecycle -------------------------------------------------------------------------- */

/* The locks and sleeping places of a new committer; commit_destroy_locks undoes them. */
static void
commit_init_locks(commit_t *c)
{
    pthread_mutex_init(&c->io_mu, NULL);
    /* Adaptive: writers woken together enqueue within microseconds of each other, and a
     * mutex that sleeps at once made a convoy of them (engine/README.md). */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&c->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    clock_cond_init(&c->work_cv);
    clock_cond_init(&c->space_cv);
    seqwait_init(&c->written_wait);
    seqwait_init(&c->durable_wait);
}

static void
commit_destroy_locks(commit_t *c)
{
    pthread_mutex_destroy(&c->io_mu);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->work_cv);
    pthread_cond_destroy(&c->space_cv);
}

int
commit_start(const commit_config_t *cfg, commit_t **out, stele_error_t *err)
{
    *out = NULL;
    commit_t *c = calloc(1, sizeof *c);
    if (!c)
        return error_set(err, -ENOMEM, "out of memory starting the committer");
    c->cfg = *cfg;
    c->version = journal_version(cfg->journal);
    c->max_chunks = cfg->max_queue_bytes / cfg->batch_bytes + 2;
    c->next_seq = cfg->last_seq + 1;
    c->last_ts_ns = cfg->last_ts_ns;
    stamp_init(&c->stamp, cfg->journal, cfg->clock, cfg->clock_ctx);
    atomic_init(&c->appended_seq, cfg->last_seq);
    atomic_init(&c->written_seq, cfg->last_seq);
    atomic_init(&c->durable_seq, cfg->last_seq);
    atomic_init(&c->woken_written, cfg->last_seq);
    atomic_init(&c->woken_durable, cfg->last_seq);
    c->is_leading = cfg->sync == STELE_SYNC_ALWAYS && cfg->commit_policy == STELE_COMMIT_ADAPTIVE;
    c->is_written_leading = cfg->commit_policy == STELE_COMMIT_ADAPTIVE;
    c->is_written_woken_inline = cfg->sync != STELE_SYNC_ALWAYS;
    c->is_split_in_pieces = cfg->sync != STELE_SYNC_ALWAYS;
    commit_init_locks(c);
    commit_quota_refresh(c, true);
    int rc = commit_waker_start(c);
    if (rc == 0) {
        rc = pthread_create(&c->thread, NULL, commit_main, c);
        if (rc)
            commit_waker_stop(c);
    }
    if (rc) {
        commit_destroy_locks(c);
        free(c);
        return error_set(err, -rc, "could not start the committer thread: %s", stele_strerror(-rc));
    }
    *out = c;
    return 0;
}

int
commit_stop(commit_t *c, stele_error_t *err)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    bool was_closing = c->is_closing;
    c->is_closing = true;
    pthread_cond_broadcast(&c->work_cv);
    pthread_cond_broadcast(&c->space_cv);
    pthread_mutex_unlock(&c->mu);
    if (!was_closing) {
        pthread_join(c->thread, NULL);
        commit_waker_stop(c); /* after the committer: its last batch's waiters are woken */
        pthread_mutex_lock(&c->mu);
        stamp_keep(&c->stamp); /* for the next writer of this boot */
        pthread_mutex_unlock(&c->mu);
    }
    return commit_halted(c, err);
}

void
commit_free(commit_t *c)
{
    if (!c)
        return;
    chunk_t *ch;
    while ((ch = commit_take_chunk(c)) != NULL)
        chunk_free(ch);
    while ((ch = c->spare) != NULL) {
        c->spare = ch->next;
        chunk_free(ch);
    }
    commit_destroy_locks(c);
    free(c);
}

/* -- the append path -------------------------------------------------------------------- */

/* Why an append cannot go in now (mu held): 0 = it can, else the code to wait on or return. */
static int
commit_blocked(commit_t *c, size_t frame_bytes)
{
    if (c->cfg.max_journal_bytes && commit_quota_would_exceed(c, frame_bytes))
        return STELE_EFULL;
    if (c->queue_bytes > 0 && c->queue_bytes + frame_bytes > c->cfg.max_queue_bytes)
        return STELE_ETIMEDOUT;
    if (c->open && c->open->used_bytes + frame_bytes <= c->cfg.batch_bytes)
        return 0;
    commit_close_open_chunk(c);
    if (!c->open)
        c->open = chunk_get(c);
    return c->open ? 0 : STELE_ETIMEDOUT;
}

/* The queue_timeout_ms refusal (mu held); `why` is what still blocks the append. */
static int
commit_room_timeout_error(commit_t *c, int why, stele_error_t *err)
{
    if (why == STELE_EFULL)
        return error_set(err, STELE_ETIMEDOUT,
                         "journal quota stayed full for queue_timeout_ms (%u ms); "
                         "nothing appended",
                         c->cfg.queue_timeout_ms);
    return error_set(err, STELE_ETIMEDOUT,
                     "queue stayed full (%llu bytes) for queue_timeout_ms (%u ms); "
                     "nothing appended",
                     (unsigned long long)c->queue_bytes, c->cfg.queue_timeout_ms);
}

/* Waits (mu held throughout) until the open chunk has room for frame_bytes. Returns 0, or
 * the error the append fails with: the halt, closing, the quota with on_full=fail, or
 * queue_timeout_ms passed while the queue or the quota stayed full. */
static int
commit_wait_for_room(commit_t *c, size_t frame_bytes, stele_error_t *err)
{
    uint64_t deadline = 0;
    for (;;) {
        int rc = commit_halted(c, err);
        if (rc == 0 && c->is_closing)
            rc = error_set(err, STELE_ECLOSED, "journal is closing");
        if (rc)
            return rc;
        int why = commit_blocked(c, frame_bytes);
        if (why == 0)
            return 0;
        if (why == STELE_EFULL && c->cfg.on_full == STELE_ON_FULL_FAIL)
            return commit_quota_error(c, err);
        if (c->cfg.queue_timeout_ms && deadline == 0)
            deadline = clock_mono_ns() + c->cfg.queue_timeout_ms * NS_PER_MS;
        c->n_space_waiters++;
        int wrc = commit_cond_wait(&c->space_cv, &c->mu, deadline);
        c->n_space_waiters--;
        /* At the deadline, the refusal names what blocks the append now, which may not be
         * what it first waited for; a quota with on_full=fail is refused as such. */
        if (wrc == ETIMEDOUT && (why = commit_blocked(c, frame_bytes)) != 0)
            return why == STELE_EFULL && c->cfg.on_full == STELE_ON_FULL_FAIL
                       ? commit_quota_error(c, err)
                       : commit_room_timeout_error(c, why, err);
    }
}

/* The last record this thread appended, per engine: a waiter spins only for its own record,
 * and only then leads for `written` or waits for the journal (commit_wait.c). Thread-local,
 * so no thread sees another's; commit_enqueue sets it inline. */
static _Thread_local struct {
    const commit_t *commit;
    uint64_t seq;
} commit_own_append;

/* Tested cheaply: this thread's newest append is seq or later (true for a thread that
 * appends, then waits, as stele_append_* does). A thread waiting for records others
 * appended (a server's ack thread) leaves the CPU and the journal to them. */
bool
commit_is_own_append(const commit_t *c, uint64_t seq)
{
    return commit_own_append.commit == c && commit_own_append.seq >= seq;
}

/* Lays the next record's frame into the open chunk (mu held, room made) and publishes
 * appended_seq. Returns the record's seq. */
static uint64_t
commit_lay_frame(commit_t *c, const uint8_t *payload, uint32_t payload_len,
                 const journal_origin_t *origin, size_t frame_bytes)
{
    chunk_t *ch = c->open;
    uint64_t seq = c->next_seq++;
    int64_t ts = stamp_next(&c->stamp, c->last_ts_ns);
    c->last_ts_ns = ts;
    size_t piece_start = ch->n_breaks ? ch->piece_start[ch->n_breaks - 1] : 0;
    if (c->is_split_in_pieces && ch->used_bytes - piece_start >= CHUNK_PIECE_BYTES &&
        ch->n_breaks < CHUNK_MAX_PIECES)
        ch->piece_start[ch->n_breaks++] = ch->used_bytes;
    journal_frame_prepare(c->version, ch->buf + ch->used_bytes, seq, ts, origin, payload,
                          payload_len);
    if (c->full_head || ch->used_bytes >= COMMIT_HELP_BYTES)
        journal_frame_hash_leaf(c->version, ch->buf + ch->used_bytes);
    ch->used_bytes += frame_bytes;
    if (ch->n_records == 0)
        ch->first_seq = seq;
    ch->last_seq = seq;
    if (ch->n_samples < CHUNK_SAMPLES)
        ch->sample_ns[ch->n_samples++] = clock_mono_ns();
    ch->n_records++;
    c->queue_bytes += frame_bytes;
    c->queue_records++;
    atomic_store_explicit(&c->appended_seq, seq, memory_order_release);
    return seq;
}

/* Decides who commits the record just laid (mu held): its own appender (leading), or the
 * committer, woken now or left to its nap (see the top of the file). */
static void
commit_route_append(commit_t *c, uint64_t seq, stele_wait_t wait)
{
    bool is_waited = wait != STELE_WAIT_NONE;
    if (is_waited)
        atomic_store_explicit(&c->waited_seq, seq, memory_order_relaxed);
    /* A waiter whose level leads commits the record itself (commit_lead), unless the
     * committer is holding the batch open for writers like this one. Handed to the committer,
     * a lone writer's record would cost two thread hand-offs (and with sync=always the wait
     * for the previous batch's sync) where leading costs one write (and one sync). */
    bool will_lead = commit_level_leads(c, wait) && !c->is_committer_growing;
    if (will_lead)
        atomic_store(&c->lead_seq, seq);
    if (c->is_committer_idle && !will_lead &&
        (is_waited || !c->is_committer_napping || c->queue_bytes >= COMMIT_EAGER_BYTES))
        pthread_cond_signal(&c->work_cv);
}

int
commit_enqueue(commit_t *c, const uint8_t *payload, uint32_t payload_len,
               const journal_origin_t *origin, stele_wait_t wait, uint64_t *seq_out,
               stele_error_t *err)
{
    size_t frame_bytes = journal_frame_bytes(c->version, payload_len);
    if (frame_bytes > c->cfg.batch_bytes)
        return error_set(err, STELE_ETOOBIG, "record frame of %zu bytes exceeds a batch (%zu)",
                         frame_bytes, c->cfg.batch_bytes);
    pthread_mutex_lock(&c->mu);
    int rc = commit_wait_for_room(c, frame_bytes, err);
    if (rc) {
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    uint64_t seq = commit_lay_frame(c, payload, payload_len, origin, frame_bytes);
    commit_route_append(c, seq, wait);
    pthread_mutex_unlock(&c->mu);
    commit_own_append.commit = c;
    commit_own_append.seq = seq;
    if (seq_out)
        *seq_out = seq;
    return 0;
}

int
commit_flush(commit_t *c, stele_error_t *err)
{
    uint64_t target = atomic_load_explicit(&c->appended_seq, memory_order_acquire);
    int rc = commit_halted(c, err);
    if (rc || target == 0 || atomic_load(&c->durable_seq) >= target)
        return rc;
    pthread_mutex_lock(&c->mu);
    if (c->flush_seq < target)
        c->flush_seq = target;
    pthread_cond_signal(&c->work_cv);
    pthread_mutex_unlock(&c->mu);
    return commit_wait(c, target, STELE_WAIT_DURABLE, -1, err);
}

void
commit_writer_enter(commit_t *c)
{
    atomic_fetch_add_explicit(&c->n_active, 1, memory_order_relaxed);
}

void
commit_writer_leave(commit_t *c)
{
    atomic_fetch_sub_explicit(&c->n_active, 1, memory_order_relaxed);
}

uint64_t
commit_appended_seq(const commit_t *c)
{
    return atomic_load_explicit(&c->appended_seq, memory_order_acquire);
}

uint64_t
commit_written_seq(const commit_t *c)
{
    return atomic_load_explicit(&c->written_seq, memory_order_acquire);
}

uint64_t
commit_durable_seq(const commit_t *c)
{
    return atomic_load_explicit(&c->durable_seq, memory_order_acquire);
}

void
commit_stats(commit_t *c, stele_stats_t *out)
{
    out->appended_seq = commit_appended_seq(c);
    out->written_seq = commit_written_seq(c);
    out->durable_seq = commit_durable_seq(c);
    out->batches = atomic_load_explicit(&c->n_batches, memory_order_relaxed);
    out->syncs = atomic_load_explicit(&c->n_syncs, memory_order_relaxed);
    out->bytes_written = atomic_load_explicit(&c->bytes_written, memory_order_relaxed);
    out->commit_delays = atomic_load_explicit(&c->commit_delays, memory_order_relaxed);
    uint64_t records = atomic_load_explicit(&c->n_batch_records, memory_order_relaxed);
    out->mean_batch_records = out->batches ? (double)records / (double)out->batches : 0.0;
    pthread_mutex_lock(&c->mu);
    out->queue_bytes = c->queue_bytes;
    out->queue_records = c->queue_records;
    pthread_mutex_unlock(&c->mu);

    static const double fractions[] = {0.50, 0.99, 0.999};
    uint64_t percentiles_us[3];
    latency_hist_percentiles_us(&c->latency, fractions, percentiles_us, 3);
    out->latency_p50_us = percentiles_us[0];
    out->latency_p99_us = percentiles_us[1];
    out->latency_p999_us = percentiles_us[2];

    if (atomic_load_explicit(&c->halted, memory_order_acquire)) {
        out->halted_code = c->halt_err.code;
        snprintf(out->halted_message, sizeof out->halted_message, "%s", c->halt_err.message);
    }
}
