/*
 * commit.h: the group-commit queue and its committer thread.
 *
 * Appending threads call commit_enqueue, which assigns the next seq and timestamp (the
 * record clock, stamp.h) and lays
 * the record's frame into the open batch buffer under one short mutex. Whoever holds the
 * journal's I/O lock (commit.io_mu) takes whole batch buffers, writes each with one
 * journal_append_batch (one pwritev), syncs per the `sync` policy, publishes the positions
 * and has the waiters woken: the committer thread, or with sync=always and the adaptive
 * policy a waiter in commit_wait that commits its own record while the journal is free.
 * A write or sync failure halts the queue for good (sticky error).
 */
#ifndef STELE_ENGINE_COMMIT_H
#define STELE_ENGINE_COMMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "journal.h"
#include "stamp.h"
#include "stele.h"

typedef struct commit commit_t;

/* Called after each batch is written (before it is synced), on the thread that wrote it:
 * the holder of commit.io_mu, the committer or a leading waiter, so calls never overlap.
 * Must not block: the index writer only copies the position into its own queue. */
typedef void (*commit_batch_fn)(void *ctx, const journal_batch_info_t *info);

typedef struct commit_config {
    journal_t *journal; /* borrowed; written only by the holder of commit.io_mu */
    uint64_t last_seq;  /* last seq in the journal (0 when empty) */
    int64_t last_ts_ns; /* its timestamp: new ones never go below it */
    stele_sync_t sync;
    uint32_t sync_interval_ms;
    uint32_t commit_interval_us;
    stele_commit_policy_t commit_policy;
    uint64_t max_queue_bytes;   /* bound on queued frame bytes */
    uint32_t queue_timeout_ms;  /* 0 = block forever when full */
    size_t batch_bytes;         /* capacity of one batch buffer (>= largest frame) */
    uint64_t max_journal_bytes; /* 0 = no quota */
    uint64_t segment_bytes;     /* size of new segments, for the quota check */
    stele_on_full_t on_full;
    commit_batch_fn on_batch; /* may be NULL */
    void *batch_ctx;
    stamp_clock_fn clock; /* the record clock's readings (stamp.h); NULL: the machine's */
    void *clock_ctx;
} commit_config_t;

/* Starts the committer and waker threads. Returns 0, -ENOMEM, or -errno from pthread_create. */
int commit_start(const commit_config_t *cfg, commit_t **out, stele_error_t *err);

/*
 * Drains: commits everything queued, syncs it (whatever `sync` says), publishes and stops
 * the thread. Enqueues from then on get STELE_ECLOSED; waits still see the final positions.
 * Returns 0 or the sticky halt error (STELE_EHALTED). NULL is a no-op.
 */
int commit_stop(commit_t *c, stele_error_t *err);

/* Frees a stopped committer once no caller is inside commit_* any more. NULL is a no-op. */
void commit_free(commit_t *c);

/*
 * Queues one record (payload already validated) with its origin block (who appended it;
 * version 2 journals store it, version 1 ones drop it; NULL = unknown). Blocks while the queue is
 * full or the quota reached (on_full=block), up to queue_timeout_ms. *seq_out receives its seq.
 * `wait` is the level the caller will wait for: a waited record wakes the committer at once
 * (unwaited ones may sit up to about a millisecond so they are written in larger batches), except a
 * durable one in leading mode, whose caller commits it itself in commit_wait.
 * Returns 0, STELE_ETIMEDOUT, STELE_EFULL, STELE_EHALTED, STELE_ECLOSED; nothing is queued
 * on error.
 */
int commit_enqueue(commit_t *c, const uint8_t *payload, uint32_t payload_len,
                   const journal_origin_t *origin, stele_wait_t wait, uint64_t *seq_out,
                   stele_error_t *err);

/*
 * Blocks until `seq` is written (STELE_WAIT_WRITTEN) or durable (STELE_WAIT_DURABLE), or
 * timeout_ms passes (-1 = forever). With sync=always and the adaptive policy the calling
 * thread may write and sync queued batches itself (commit_wait.c). Returns 0,
 * STELE_ETIMEDOUT, STELE_EHALTED, STELE_ECLOSED, STELE_EINVAL (seq never appended or another
 * level).
 */
int commit_wait(commit_t *c, uint64_t seq, stele_wait_t level, int64_t timeout_ms,
                stele_error_t *err);

/* Makes every record queued before the call durable, whatever `sync` says. Blocks. */
int commit_flush(commit_t *c, stele_error_t *err);

/* Brackets a caller's append/wait so the adaptive policy knows how many writers are active
 * (PostgreSQL's commit_siblings): the committer waits to grow a batch only for them. */
void commit_writer_enter(commit_t *c);
void commit_writer_leave(commit_t *c);

/* The sticky error after a halt: returns 0 while running, else STELE_EHALTED with the cause
 * in *err (may be NULL). */
int commit_halted(commit_t *c, stele_error_t *err);

uint64_t commit_appended_seq(const commit_t *c);
uint64_t commit_written_seq(const commit_t *c);
uint64_t commit_durable_seq(const commit_t *c);

/*
 * Before retention deletes the segments below first_seq from a signed journal: writes and
 * syncs the retention checkpoint that says so (FORMAT.md section 11.2), under the I/O lock;
 * the journal deletes nothing it does not cover. A no-op without signing. Any thread (the
 * index writer). Returns 0, or the error that halted the queue.
 */
int commit_seal_retention(commit_t *c, uint64_t first_seq, stele_error_t *err);

/* Wakes appenders blocked on the quota (after retention freed space). */
void commit_space_freed(commit_t *c);

/* Fills the write-path part of *out (seqs, batches, syncs, bytes, queue, latency, halt).
 * Lock-free except for a short mutex hold to read the queue depth. */
void commit_stats(commit_t *c, stele_stats_t *out);

#endif /* STELE_ENGINE_COMMIT_H */
