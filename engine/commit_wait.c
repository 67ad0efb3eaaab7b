/*
 * commit_wait.c: commit_wait, the waiting side of group commit. Owns no thread and no
 * state: the queue, the locks and the positions are commit.c's (commit_internal.h).
 *
 * A waiter whose level is not reached yet, in this order (spinning, and leading for
 * `written`, only for a record its own thread appended: commit_is_own_append):
 *   leads: with the adaptive policy, a waiter whose level leads (commit_level_leads:
 *     written and durable with sync=always, written with any sync) and whose record is
 *     still queued takes io_mu when nobody else writes, and writes (and with sync=always
 *     syncs) the queued batches itself, exactly as the committer would (commit_batch_io),
 *     unless the adaptive policy would hold the batch open for other active writers. A lone
 *     writer so commits its own records with no thread hand-off (on a loaded machine each
 *     hand-off waits for a CPU: through a committer thread one durable writer would run 5x
 *     slower than a plain write+sync loop, and one written writer with sync=never 20-40x
 *     slower than parse-wakeup). A waiter that finds io_mu busy wakes the committer,
 *     which takes the next batch the moment the journal is free; a lone writer instead
 *     waits for a committer that is only finishing its previous batch (commit_lead_lock).
 *     A zero timeout (a poll) leads too, but neither spins nor sleeps.
 *   spins: one waiter at a time, with few writers active, for its own record while that
 *     record is in the batch being written or the next one (COMMIT_WAITER_SPIN_NS).
 *   sleeps: in the seqwait slot of its seq, woken by whoever wrote the batch, once it
 *     released io_mu, or by the waker (commit_waker.c).
 * The committer's side of the spinning (commit_spin_for_waited) is here too: after a batch
 * it spins briefly for a lone writer's next waited append (commit_policy=fixed, the only
 * mode without leaders). Both spins save a lone writer outside leading mode two futex
 * wake-ups per commit; see engine/README.md.
 *
 * Locks: leading takes io_mu, then mu briefly to take a batch, per commit.c's order.
 * Spinning and sleeping take no lock.
 */
#include "commit_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "clock.h"
#include "error.h"
#include "seqwait.h"

/* A waiter whose record is in the batch being written spins up to this long before
 * sleeping (an fdatasync's p99 on a VM disk is near 1 ms), and the committer spins this long
 * for the next record before napping: for a lone durable writer that saves two futex
 * wake-ups per commit, each as long as a fast fdatasync on a virtual machine. Only one
 * waiter spins at a time, and only with few writers active (COMMIT_SPIN_MAX_WRITERS). */
#define COMMIT_WAITER_SPIN_NS 1000000ull
#define COMMIT_COMMITTER_SPIN_NS 50000ull
/* Waiters spin only while at most this many writers are active (see commit_spin_worth). */
#define COMMIT_SPIN_MAX_WRITERS 2
/* A gap this long between two looks at the clock means the spinner was descheduled. */
#define COMMIT_SPIN_PREEMPTED_NS 50000ull

static void
commit_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* A lone durable writer appends its next record within a few microseconds of its
 * acknowledgement; catching it here saves a futex wake-up. Stops at once for unwaited
 * records, which the committer's nap batches better, and does not start with more writers
 * active than COMMIT_SPIN_MAX_WRITERS: their next appends come only after they are woken,
 * and a spin would hold the CPU they need. */
void
commit_spin_for_waited(commit_t *c, uint64_t taken_seq)
{
    if (atomic_load_explicit(&c->n_active, memory_order_relaxed) > COMMIT_SPIN_MAX_WRITERS)
        return;
    uint64_t start = clock_mono_ns();
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(&c->waited_seq, memory_order_relaxed) > taken_seq)
            return;
        if (atomic_load_explicit(&c->appended_seq, memory_order_relaxed) > taken_seq &&
            atomic_load_explicit(&c->waited_seq, memory_order_relaxed) <= taken_seq)
            return;
        if (i % 64 == 0 && clock_mono_ns() - start >= COMMIT_COMMITTER_SPIN_NS)
            return;
        commit_cpu_relax();
    }
}

/* Whether a waiter for `seq` should spin rather than sleep: only when few writers are
 * active (with many, the spinning core is what the others need to form the next batch) and
 * the record is in the batch being written or the next one. A record queued behind another
 * batch waits a whole commit: sleeping is cheaper. */
static bool
commit_spin_worth(commit_t *c, uint64_t seq)
{
    if (atomic_load_explicit(&c->n_active, memory_order_relaxed) > COMMIT_SPIN_MAX_WRITERS)
        return false;
    /* Between batches (inflight 0) the next batch taken holds seq, even if the committer is
     * still waking up from the signal the append sent: spinning here keeps the waiter from
     * needing a wake-up of its own, and a lone writer from falling into a rhythm where both
     * threads sleep and each commit pays two wake-up latencies. */
    uint64_t inflight = atomic_load_explicit(&c->inflight_seq, memory_order_relaxed);
    return inflight == 0 || inflight >= seq;
}

/* Spins (one waiter at a time) while the committer is about to reach `seq`. Returns true
 * when the position reached seq. */
static bool
commit_spin_for_seq(commit_t *c, _Atomic uint64_t *pos, uint64_t seq)
{
    /* A thread waiting for records others appended (a server's ack thread) would spin on the
     * CPU those appenders need, to save one wake-up per batch; a thread waiting for its own
     * record has nothing else to do, and its wake-up is the one spinning saves. */
    if (!commit_is_own_append(c, seq) || !commit_spin_worth(c, seq))
        return false;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&c->n_spinners, &expected, 1))
        return false;
    uint64_t start = clock_mono_ns(), last = start;
    uint64_t appended = atomic_load_explicit(&c->appended_seq, memory_order_relaxed);
    bool reached = false;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(pos, memory_order_acquire) >= seq) {
            reached = true;
            break;
        }
        if (atomic_load_explicit(&c->halted, memory_order_relaxed))
            break;
        if (i % 64 == 0) {
            uint64_t now = clock_mono_ns();
            /* Stop when the time is up, when seq fell behind another batch, when other
             * threads append meanwhile (a server's loop, writers outside append: they want
             * this CPU), or when this thread was descheduled (the CPUs are contended, and the
             * committer needs one to finish the commit). */
            if (now - start >= COMMIT_WAITER_SPIN_NS || now - last >= COMMIT_SPIN_PREEMPTED_NS ||
                !commit_spin_worth(c, seq) ||
                atomic_load_explicit(&c->appended_seq, memory_order_relaxed) != appended)
                break;
            last = now;
        }
        commit_cpu_relax();
    }
    atomic_store(&c->n_spinners, 0);
    return reached;
}

/* Wakes an idle committer if records are queued, or if a leader wrote records that
 * sync=interval must sync while the committer sleeps without a deadline for it. Called by a
 * thread that just released io_mu or will not lead: records queued by leading waiters did
 * not wake the committer (their appender meant to lead), so whoever leaves them behind
 * hands them on. */
static void
commit_hand_on(commit_t *c)
{
    /* An awake committer checks for work and for a due sync under mu before it sleeps, and
     * the records in question were queued under mu before this call, or written before the
     * writer took mu to recycle their batch (commit_batch_io): it will find them. */
    if (!atomic_load(&c->is_committer_idle) && atomic_load(&c->lead_seq) == 0)
        return;
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->lead_seq, 0); /* whoever meant to lead has given up or is done */
    bool is_sync_unarmed =
        !c->is_committer_sync_armed && atomic_load(&c->written_seq) > atomic_load(&c->durable_seq);
    if (c->is_committer_idle && (commit_has_work(c) || is_sync_unarmed))
        pthread_cond_signal(&c->work_cv);
    pthread_mutex_unlock(&c->mu);
}

/* Takes io_mu for a leader of seq. When another thread holds it, only a waiter for its own
 * record waits, and only in two cases. A lone writer, when no batch is in flight: the holder
 * is then the committer finishing its previous batch (or about to take this record), and a
 * lone writer that handed its record over would find it finishing again on its next append,
 * a rhythm in which the committer commits every batch (seen with a slowed-down, sanitized
 * build); with more writers active the holder is busy for longer and the waiter hands on
 * instead of queueing on the mutex. And a poll (is_poll: a zero timeout, which neither spins
 * nor sleeps) whose record is in the batch in flight: that batch's end is its answer. */
static bool
commit_lead_lock(commit_t *c, uint64_t seq, bool is_poll)
{
    if (pthread_mutex_trylock(&c->io_mu) == 0)
        return true;
    if (!commit_is_own_append(c, seq))
        return false;
    uint64_t inflight = atomic_load(&c->inflight_seq);
    bool must_queue = inflight == 0 ? atomic_load(&c->n_active) <= 1 : is_poll && inflight >= seq;
    if (!must_queue)
        return false;
    pthread_mutex_lock(&c->io_mu);
    return true;
}

/* Leading mode, a written or durable waiter: while no other thread holds the journal, take
 * the oldest queued batch and write and sync it in this thread, until `pos` reaches seq. A
 * lone writer so makes its records durable with no thread hand-off, like a plain
 * write+sync loop. Returns true once pos reached seq; false when another thread holds the journal
 * (it finishes, then finds this record queued or hands it on) or the queue halted. */
static bool
commit_lead(commit_t *c, _Atomic uint64_t *pos, uint64_t seq, bool is_poll)
{
    while (atomic_load(pos) < seq) {
        if (atomic_load(&c->halted) || !commit_lead_lock(c, seq, is_poll))
            return false;
        pthread_mutex_lock(&c->mu);
        bool must_lead = atomic_load(pos) < seq;
        if (must_lead && commit_batch_may_grow(c)) {
            /* Other active writers have not contributed yet: the committer's delay
             * (commit_grow_batch) is what commit_interval_us asks for. */
            pthread_mutex_unlock(&c->mu);
            pthread_mutex_unlock(&c->io_mu);
            return false;
        }
        chunk_t *ch = must_lead ? commit_take_chunk(c) : NULL;
        if (ch)
            atomic_store_explicit(&c->inflight_seq, ch->last_seq, memory_order_relaxed);
        pthread_mutex_unlock(&c->mu);
        bool must_wake = false;
        int rc = ch ? commit_batch_io(c, ch, &must_wake) : 0;
        pthread_mutex_unlock(&c->io_mu);
        if (must_wake) /* the batch's sleepers, while the next writer takes io_mu */
            commit_wake_reached(c);
        commit_hand_on(c);
        if (!ch || rc)
            break;
    }
    return atomic_load(pos) >= seq;
}

static int
commit_wait_error(commit_t *c, uint64_t seq, stele_wait_t level, int64_t timeout_ms, bool timed_out,
                  stele_error_t *err)
{
    int rc = commit_halted(c, err);
    if (rc)
        return rc;
    if (timed_out)
        return error_set(
            err, STELE_ETIMEDOUT, "seq %llu not %s within %lld ms", (unsigned long long)seq,
            level == STELE_WAIT_WRITTEN ? "written" : "durable", (long long)timeout_ms);
    return error_set(err, STELE_ECLOSED, "journal closed before seq %llu was reached",
                     (unsigned long long)seq);
}

/* The monotonic deadline of a wait of timeout_ms, or 0 (none) for a negative timeout or
 * one too long to express in nanoseconds (over 500 years): multiplied out, such a timeout
 * would wrap into the past and time the wait out at once. */
static uint64_t
commit_wait_deadline(int64_t timeout_ms)
{
    if (timeout_ms < 0)
        return 0;
    uint64_t now = clock_mono_ns();
    if ((uint64_t)timeout_ms > (UINT64_MAX - now - 1) / NS_PER_MS)
        return 0;
    return now + (uint64_t)timeout_ms * NS_PER_MS + 1;
}

int
commit_wait(commit_t *c, uint64_t seq, stele_wait_t level, int64_t timeout_ms, stele_error_t *err)
{
    _Atomic uint64_t *pos;
    seqwait_t *slots;
    if (level == STELE_WAIT_NONE)
        return 0;
    if (level == STELE_WAIT_WRITTEN) {
        pos = &c->written_seq;
        slots = &c->written_wait;
    } else if (level == STELE_WAIT_DURABLE) {
        pos = &c->durable_seq;
        slots = &c->durable_wait;
    } else {
        return error_set(err, STELE_EINVAL, "wait level %d is not a commit level", (int)level);
    }
    if (seq == 0 || seq > atomic_load_explicit(&c->appended_seq, memory_order_acquire))
        return error_set(err, STELE_EINVAL, "seq %llu was never appended", (unsigned long long)seq);
    if (atomic_load_explicit(pos, memory_order_acquire) >= seq)
        return 0;
    /* A `written` waiter leads only for its own record: one waiting for others' records (a
     * server's ack thread) is told at the write, before the sync a leader would sit through. */
    bool may_lead = level == STELE_WAIT_DURABLE || commit_is_own_append(c, seq);
    if (commit_level_leads(c, level)) {
        if (may_lead && commit_lead(c, pos, seq, timeout_ms == 0))
            return 0;
        /* Not led: the journal is busy (the committer is woken now, ready to take the next
         * batch the moment it is free) or this waiter leaves `written` to the committer. */
        commit_hand_on(c);
    }
    /* A zero timeout is a poll (a server's loop trying its lone request itself): it may lead,
     * but it neither spins nor sleeps. */
    if (timeout_ms != 0 && commit_spin_for_seq(c, pos, seq))
        return 0;
    uint64_t deadline = commit_wait_deadline(timeout_ms);
    for (;;) {
        if (atomic_load(pos) >= seq)
            return 0;
        if (atomic_load(&c->halted) || atomic_load(&c->is_stopped))
            return commit_wait_error(c, seq, level, timeout_ms, false, err);
        uint32_t word = seqwait_prepare(slots, seq);
        bool must_sleep =
            atomic_load(pos) < seq && !atomic_load(&c->halted) && !atomic_load(&c->is_stopped);
        int wrc = must_sleep ? seqwait_sleep(slots, seq, word, deadline) : 0;
        seqwait_finish(slots, seq);
        if (wrc == ETIMEDOUT && atomic_load(pos) < seq)
            return commit_wait_error(c, seq, level, timeout_ms, true, err);
    }
}
