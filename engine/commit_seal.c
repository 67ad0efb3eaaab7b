/*
 * commit_seal.c: the signing chores of a signed journal that no batch carries (FORMAT.md
 * section 11.2): the interval checkpoint an idle journal still takes, key rotation, and the
 * retention checkpoint written before segments are deleted. Checkpoints that end a batch
 * (records, interval while busy, roll, close) are the journal's own (journal_seal.c).
 *
 * Who runs what: the committer thread runs the interval checkpoint and the rotation from its
 * loop (commit_seal_chores, with mu held on entry and exit, like commit_sync_pending); the
 * index writer asks for the retention checkpoint (commit_seal_retention). Each takes io_mu,
 * like any batch, for the journal writes and syncs; a rotation's slow file work (the next
 * key, the key file's replacement) runs without it, so leading waiters keep committing.
 * A failed write or sync halts the queue, as for a batch.
 */
#include "commit_internal.h"

#include <stdatomic.h>
#include <stdbool.h>

#include "clock.h"
#include "error.h"

/* After a statement's sync (io_mu held): every record written is durable too. Published
 * even when no record was waiting: readers that want statements look past the published end
 * only after a publish (jreader.c, reader_meta_is_next). */
static void
commit_seal_synced(commit_t *c)
{
    uint64_t written = atomic_load(&c->written_seq);
    int has_records = written > atomic_load(&c->durable_seq);
    if (has_records) {
        atomic_fetch_add_explicit(&c->n_syncs, 1, memory_order_relaxed);
        atomic_store_explicit(&c->durable_seq, written, memory_order_release);
    }
    commit_publish(c);
    if (has_records)
        commit_kick_waker(c);
}

/* Writes and syncs a checkpoint outside the batch path (io_mu held). */
static int
commit_seal_checkpoint(commit_t *c, journal_checkpoint_kind_t kind, uint64_t first_seq,
                       stele_error_t *err)
{
    int rc = journal_checkpoint(c->cfg.journal, kind, first_seq, err);
    if (!rc)
        rc = journal_sync(c->cfg.journal, err);
    if (rc)
        commit_fail(c, err);
    else
        commit_seal_synced(c);
    return rc;
}

int
commit_seal_retention(commit_t *c, uint64_t first_seq, stele_error_t *err)
{
    if (!journal_is_signing(c->cfg.journal))
        return 0;
    pthread_mutex_lock(&c->io_mu);
    int rc = commit_halted(c, err);
    if (!rc)
        rc = commit_seal_checkpoint(c, JOURNAL_CHECKPOINT_RETENTION, first_seq, err);
    pthread_mutex_unlock(&c->io_mu);
    return rc;
}

/* A key rotation (journal.h's three steps): prepare and finish without io_mu. */
static void
commit_seal_rotate(commit_t *c)
{
    journal_rotation_t rot;
    stele_error_t err;
    if (journal_rotate_prepare(c->cfg.journal, &rot, &err) != 0)
        return; /* nothing changed; the journal tries again later (and reports at close) */
    pthread_mutex_lock(&c->io_mu);
    int rc = commit_halted(c, &err);
    if (!rc) {
        rc = journal_rotate_commit(c->cfg.journal, &rot, &err);
        if (rc)
            commit_fail(c, &err);
        else
            commit_seal_synced(c);
    }
    pthread_mutex_unlock(&c->io_mu);
    if (rc)
        journal_rotate_abandon(c->cfg.journal, &rot);
    else
        journal_rotate_finish(c->cfg.journal, &rot, &err); /* a failure is kept for close */
}

uint64_t
commit_seal_deadline_ns(const commit_t *c)
{
    return journal_checkpoint_due_ns(c->cfg.journal);
}

void
commit_seal_chores(commit_t *c)
{
    journal_t *j = c->cfg.journal;
    if (!journal_is_signing(j) || atomic_load(&c->halted))
        return;
    bool is_idle_due = !commit_has_work(c) && clock_mono_ns() >= journal_checkpoint_due_ns(j);
    bool is_rotation_due = journal_rotation_due(j);
    if (!is_idle_due && !is_rotation_due)
        return;
    pthread_mutex_unlock(&c->mu);
    if (is_rotation_due)
        commit_seal_rotate(c);
    if (is_idle_due) {
        stele_error_t err;
        pthread_mutex_lock(&c->io_mu);
        /* A leading waiter may have written a batch (and its checkpoint) meanwhile. */
        if (!commit_halted(c, NULL) && clock_mono_ns() >= journal_checkpoint_due_ns(j))
            commit_seal_checkpoint(c, JOURNAL_CHECKPOINT_INTERVAL, 0, &err);
        pthread_mutex_unlock(&c->io_mu);
    }
    pthread_mutex_lock(&c->mu);
}
