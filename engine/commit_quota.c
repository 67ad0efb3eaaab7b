/*
 * commit_quota.c: the disk quota (max_journal_bytes, the allocated size of the segment
 * files). Checked as a record is queued, so a record is refused or blocks (on_full) before
 * anything is written past the quota; only the segment the journal prepares ahead may pass
 * it (stele.h). Owns no thread and no lock: the sizes are stored by the holder of
 * commit.io_mu (after each batch, and when retention frees space) and read by appenders
 * under commit.mu; they are atomics because those are different locks.
 */
#include "commit_internal.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "format.h" /* SEG_HEADER_BYTES */

/* The segment sizes (a stat of every segment) are read again only when the active segment
 * changed or `all` asks, not after every batch: between rolls only the write position moves. */
void
commit_quota_refresh(commit_t *c, bool all)
{
    if (c->cfg.max_journal_bytes == 0)
        return;
    journal_active_t active;
    journal_active_position(c->cfg.journal, &active);
    atomic_store(&c->write_off, active.write_off);
    if (!all && active.first_seq == c->quota_active_seq)
        return;
    c->quota_active_seq = active.first_seq;
    journal_stats_t js;
    journal_stats(c->cfg.journal, &js);
    atomic_store(&c->disk_bytes, js.disk_bytes);
    atomic_store(&c->sealed_bytes, js.sealed_bytes);
    atomic_store(&c->active_bytes, active.size);
}

/* The quota holds every segment but the one prepared ahead (stele.h), so what is queued
 * must fit the active segment and the new segments the quota leaves room for: queued bytes
 * count too, not only what is on disk, or a burst of wait=none appends queued below the
 * quota would be written whole, past it by up to max_queue_bytes. Conservative: a batch
 * that does not fit a segment's rest starts the next one, so each segment may lose up to a
 * batch. */
bool
commit_quota_would_exceed(const commit_t *c, size_t frame_bytes)
{
    uint64_t sealed = atomic_load_explicit(&c->sealed_bytes, memory_order_relaxed);
    uint64_t active = atomic_load_explicit(&c->active_bytes, memory_order_relaxed);
    uint64_t write_off = atomic_load_explicit(&c->write_off, memory_order_relaxed);
    uint64_t pending = c->queue_bytes + frame_bytes;
    uint64_t room =
        active > write_off + c->cfg.batch_bytes ? active - write_off - c->cfg.batch_bytes : 0;
    uint64_t rolls = 0;
    if (pending > room) {
        uint64_t seg = c->cfg.segment_bytes;
        uint64_t usable = seg > SEG_HEADER_BYTES + c->cfg.batch_bytes
                              ? seg - SEG_HEADER_BYTES - c->cfg.batch_bytes
                              : 1;
        rolls = (pending - room + usable - 1) / usable;
    }
    return sealed + active + rolls * c->cfg.segment_bytes > c->cfg.max_journal_bytes;
}

int
commit_quota_error(commit_t *c, stele_error_t *err)
{
    return error_set_hinted(err, STELE_EFULL,
                            "raise max_journal_bytes or let sinks ship so retention frees segments",
                            "journal quota reached: %llu of max_journal_bytes %llu",
                            (unsigned long long)atomic_load(&c->disk_bytes),
                            (unsigned long long)c->cfg.max_journal_bytes);
}

/* After retention deleted segments: the sizes are read again, and appenders blocked on the
 * quota look again. */
void
commit_space_freed(commit_t *c)
{
    pthread_mutex_lock(&c->io_mu);
    commit_quota_refresh(c, true);
    pthread_mutex_unlock(&c->io_mu);
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->space_cv);
    pthread_mutex_unlock(&c->mu);
}
