/*
 * commit_internal.h: the group-commit state shared by the files that implement commit.h,
 * not used outside them. Each file owns one job:
 *   commit.c         the batch buffers, the append path, the committer thread, halting, stats
 *   commit_wait.c    commit_wait: a waiter leads its own commit, spins, or sleeps; the
 *                    committer's spin for the next waited record
 *   commit_waker.c   the waker thread, which makes finished batches' wake-up syscalls
 *   commit_quota.c   the disk quota (max_journal_bytes) checked as records are queued
 *   commit_seal.c    a signed journal's chores no batch carries: idle checkpoints, key
 *                    rotation, retention checkpoints
 * and latency_hist.c keeps the append-to-durable latencies.
 *
 * Locks: io_mu is held by whoever writes or syncs the journal (the committer, or a waiter
 * leading a commit); mu guards the queue. Lock order: io_mu before mu; mu is never held
 * across journal I/O. The fields of struct commit are grouped below by what protects them.
 */
#ifndef STELE_ENGINE_COMMIT_INTERNAL_H
#define STELE_ENGINE_COMMIT_INTERNAL_H

#include "commit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "latency_hist.h"
#include "seqwait.h"
#include "stamp.h"

#define NS_PER_US 1000ull
#define NS_PER_MS 1000000ull

/* Enqueue times sampled per batch for the latency histogram; later records in a large
 * batch are represented by these (weighted), which keeps the append path cheap. */
#define CHUNK_SAMPLES 32

/* A chunk is written as pieces of about this many bytes, each its own journal batch: one
 * piece is checked, hashed, CRC'd and copied to the kernel while it is still in the CPU's
 * cache, where a whole 4 MiB chunk would be read from memory three times. */
#define CHUNK_PIECE_BYTES ((size_t)256 << 10)
#define CHUNK_MAX_PIECES 32

/* A batch buffer ("chunk"): ready frames (journal_frame_prepare), written with one
 * journal_append_batch. */
typedef struct chunk {
    struct chunk *next;
    uint8_t *buf;
    size_t used_bytes;
    uint64_t first_seq;
    uint64_t last_seq;
    uint32_t n_records;
    uint32_t n_samples;
    uint64_t sample_ns[CHUNK_SAMPLES]; /* monotonic enqueue times */
    /* Where pieces after the first begin (byte offsets, ascending); the last piece holds
     * whatever follows the last break. */
    uint32_t n_breaks;
    size_t piece_start[CHUNK_MAX_PIECES];
} chunk_t;

struct commit {
    /* -- fixed after commit_start -- */
    commit_config_t cfg;
    uint32_t version; /* the journal's format version: the layout of the frames laid */
    pthread_t thread;
    uint64_t max_chunks;

    /* Held by whoever writes or syncs the journal: the committer thread, or a waiter leading
     * a commit (commit_wait.c). Taken before mu, never while holding it. */
    pthread_mutex_t io_mu;
    /* Waiters commit their own records when the journal is free (adaptive policy): durable
     * and written ones with sync=always (is_leading), written ones with any sync
     * (is_written_leading). A lone writer then pays no hand-off (commit_wait.c). Fixed after
     * start. */
    bool is_leading;
    bool is_written_leading;
    /* Without sync=always nothing follows a batch's write on the committer's path but the
     * next batch: whoever wrote a piece wakes its `written` sleepers itself, and the waker
     * thread only serves `durable`. A hand-off to the waker would add a thread hop (one more
     * wait for a CPU) to every batch's round trip. Fixed after start. */
    bool is_written_woken_inline;
    /* Chunks are written in pieces (CHUNK_PIECE_BYTES) only without sync=always: with it, a
     * chunk is synced as one, so pieces would only add batches. Either way a piece that does
     * not fit the active segment is cut at the roll (commit_write_piece). Fixed after start. */
    bool is_split_in_pieces;

    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* the committer waits here for records, flush or close */
    pthread_cond_t space_cv; /* appenders wait here for queue space or quota */
    /* Waiters for a seq sleep in its seqwait slot, one set per level, without mu: a batch
     * wakes only the waiters whose level it reached, and none of them queues on mu. */
    seqwait_t written_wait;
    seqwait_t durable_wait;

    /* -- protected by mu -- */
    chunk_t *open;      /* being filled; NULL or holding records */
    chunk_t *full_head; /* closed chunks, oldest first */
    chunk_t *full_tail;
    chunk_t *spare; /* free list */
    uint64_t n_spare;
    uint64_t n_chunks; /* allocated, including the one being written */
    uint64_t queue_bytes;
    uint64_t queue_records;
    uint64_t next_seq;
    int64_t last_ts_ns;
    stamp_t stamp;      /* the record clock: what it trusts, kept in the journal's LOCK page */
    uint64_t flush_seq; /* sync requested up to this seq */
    int n_space_waiters;

    /* -- the waker thread (commit_waker.c); the atomics are its futex handshake -- */
    pthread_t waker;
    _Atomic uint32_t waker_word; /* futex word: bumped by every kick */
    _Atomic bool is_waker_asleep;
    _Atomic bool is_waker_stopping;
    /* Slots were woken up to these positions: whoever wakes (the waker, a leader, the
     * committer without sync=always) claims the range it wakes with a compare-and-swap
     * (commit_wake_reached). */
    _Atomic uint64_t woken_written;
    _Atomic uint64_t woken_durable;

    /* -- protected by mu; the atomics are also read without it -- */
    _Atomic bool is_committer_idle; /* read by leaders handing on (commit_hand_on) */
    bool is_committer_napping;      /* idle, but wakes by itself within COMMIT_NAP_NS */
    bool is_committer_growing;      /* waiting for active writers to join the open batch */
    /* Idle, but wakes by itself before the next sync falls due (sync=interval): records a
     * leader writes meanwhile are synced in time without waking it (commit_hand_on). */
    bool is_committer_sync_armed;
    /* The newest record whose appender will commit it itself (leading mode), until a batch
     * takes it or the appender gives up (commit_hand_on); 0 = none. While it ends the open
     * batch, the committer leaves that batch alone instead of racing the leader for it.
     * Read without mu to skip the lock when it is 0. */
    _Atomic uint64_t lead_seq;
    bool is_closing;
    _Atomic bool is_stopped; /* the committer thread has exited */

    /* -- written once by the io_mu holder before `halted` is set (release) -- */
    stele_error_t halt_err;
    _Atomic int halted;

    /* -- positions: durable_seq <= written_seq <= appended_seq. appended_seq is stored under
     * mu; written_seq and durable_seq only by the io_mu holder. Atomics so that waiters and
     * stats read them without a lock. -- */
    _Atomic uint64_t appended_seq;
    _Atomic uint64_t written_seq;
    _Atomic uint64_t durable_seq;

    /* -- the quota (commit_quota.c): stored by the io_mu holder, read under mu -- */
    _Atomic uint64_t disk_bytes;   /* journal_stats as of the last roll or retention */
    _Atomic uint64_t sealed_bytes; /* allocated by the segments before the active one */
    _Atomic uint64_t active_bytes; /* the active segment's size */
    _Atomic uint64_t write_off;    /* where the next batch starts in it */
    uint64_t quota_active_seq;     /* the active segment they were read for (io_mu) */

    /* -- hints for batch forming and spinning, one writer each, read lock-free -- */
    _Atomic int n_active;           /* writers inside append/wait (commit_writer_enter) */
    _Atomic uint64_t inflight_seq;  /* last seq of the batch being written/synced, else 0 */
    _Atomic uint64_t waited_seq;    /* newest seq whose appender waits for it (mu holder) */
    _Atomic uint64_t flush_ewma_ns; /* recent fdatasync time (io_mu holder) */
    _Atomic int n_spinners;         /* waiters spinning (at most one) */

    /* -- counters, written by the io_mu holder only -- */
    _Atomic uint64_t n_batches;
    _Atomic uint64_t n_batch_records;
    _Atomic uint64_t n_syncs;
    _Atomic uint64_t bytes_written;
    _Atomic uint64_t commit_delays;
    latency_hist_t latency; /* enqueue to written (sync=interval/never) or durable */
};

/* -- commit.c ---------------------------------------------------------------------------- */

/* Whether a waiter for `level` leads its own commit (commit_wait.c). */
static inline bool
commit_level_leads(const commit_t *c, stele_wait_t level)
{
    if (level == STELE_WAIT_WRITTEN)
        return c->is_written_leading;
    return level == STELE_WAIT_DURABLE && c->is_leading;
}

/* Whether anything is queued (mu held). */
static inline bool
commit_has_work(const commit_t *c)
{
    return c->full_head || (c->open && c->open->n_records > 0);
}

/* Takes the oldest queued batch (mu held), or NULL when nothing is queued. */
chunk_t *commit_take_chunk(commit_t *c);

/* Whether the adaptive policy would hold the open batch back for active writers that have
 * not contributed yet (mu held). Never true for a lone writer. */
bool commit_batch_may_grow(const commit_t *c);

/* Writes one taken chunk (syncing it too with sync=always) and recycles it. io_mu held, mu
 * not held. The committer's batch (leader_wakes NULL) kicks the waker for its sleepers; a
 * leader's too after a slow sync, else *leader_wakes tells the leader to wake them itself
 * once it released io_mu (commit_wake_reached). Returns 0 or the error that halted the
 * queue. */
int commit_batch_io(commit_t *c, chunk_t *ch, bool *leader_wakes);

/* Whether the calling thread's newest append to c is seq or later: a waiter spins, and
 * leads for `written`, only for its own records (commit_wait.c). */
bool commit_is_own_append(const commit_t *c, uint64_t seq);

/* Tells readers in other processes the positions reached (io_mu held). */
void commit_publish(commit_t *c);

/* Halts the queue on `cause` (a failed journal write or sync; io_mu held, mu not held):
 * drops everything queued and wakes everyone. */
void commit_fail(commit_t *c, const stele_error_t *cause);

/* -- commit_seal.c ----------------------------------------------------------------------- */

/* The committer, in its loop (mu held on entry and on return, dropped for the work): a
 * signed journal's interval checkpoint when it has nothing to write, and key rotation. */
void commit_seal_chores(commit_t *c);

/* When the committer must wake for commit_seal_chores (monotonic ns); 0 without signing. */
uint64_t commit_seal_deadline_ns(const commit_t *c);

/* -- commit_wait.c ----------------------------------------------------------------------- */

/* The committer, after a batch (no lock held): spins briefly for a lone writer's next
 * waited append, which saves it a futex wake-up. taken_seq is the last seq written. */
void commit_spin_for_waited(commit_t *c, uint64_t taken_seq);

/* -- commit_waker.c ---------------------------------------------------------------------- */

/* Starts and stops the waker thread. Start returns 0 or pthread_create's error number;
 * stop wakes the positions reached so far once more before the thread exits. */
int commit_waker_start(commit_t *c);
void commit_waker_stop(commit_t *c);

/* Makes the waker run a pass: it wakes the slots of every seq reached since the last. */
void commit_waker_kick(commit_t *c);

/* Wakes every waiter of either level at once (halt, close): they re-check and leave. */
void commit_wake_all(commit_t *c);

/* Wakes the sleepers of every seq that reached its level since the last call, whoever made
 * it: the waker thread, a leader after releasing io_mu, or (without sync=always) the
 * committer after releasing io_mu. Each range is claimed once, so concurrent callers
 * neither skip nor repeat one; a batch's writer calls it after io_mu is released so the
 * next batch can be taken while the wake-ups are made. */
void commit_wake_reached(commit_t *c);

/* After storing a position: has the waker wake whoever sleeps for it. No sleeper at all
 * (a lone writer, spinning or leading) costs two atomic loads and no syscall. See
 * seqwait.c for why a sleeper is never missed; the waker re-reads the positions after
 * every kick. */
static inline void
commit_kick_waker(commit_t *c)
{
    bool is_written_waited = !c->is_written_woken_inline && seqwait_sleepers(&c->written_wait) != 0;
    if (!is_written_waited && seqwait_sleepers(&c->durable_wait) == 0)
        return;
    commit_waker_kick(c);
}

/* After storing written_seq alone, with the sync still to come: only its own sleepers
 * need the waker. Waking it for the durable ones too would cost a round trip of the waker
 * per batch for nothing (durable has not moved) and delay the sync by a futex call. */
static inline void
commit_kick_waker_for_written(commit_t *c)
{
    if (seqwait_sleepers(&c->written_wait) == 0)
        return;
    commit_waker_kick(c);
}

/* -- commit_quota.c ---------------------------------------------------------------------- */

/* Re-reads the journal's write position and, when the active segment changed or `all` asks
 * (retention deleted some), the segment sizes. io_mu held, or before the threads start.
 * No-op without a quota. */
void commit_quota_refresh(commit_t *c, bool all);

/* Whether queuing frame_bytes more could take the journal past max_journal_bytes (mu held;
 * only with a quota). */
bool commit_quota_would_exceed(const commit_t *c, size_t frame_bytes);

/* Fills *err with the on_full=fail refusal and returns STELE_EFULL (mu held). */
int commit_quota_error(commit_t *c, stele_error_t *err);

#endif /* STELE_ENGINE_COMMIT_INTERNAL_H */
