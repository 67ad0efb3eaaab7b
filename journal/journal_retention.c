/*
 * journal_retention.c: the list of segment files the writer keeps (seg_seqs): the open and
 * each roll add to it, journal_delete_before removes the oldest segments once every record
 * in them is below the retention cut, and journal_stats reports what the files hold on disk
 * (what quota and retention decisions are made from). Not here: which records may go (the
 * engine's retention policy), making segments (journal_roll.c).
 *
 * A signed journal deletes only below its newest durable retention checkpoint.
 *
 * Threads: any thread may delete or ask for stats while the writer appends. The list is
 * protected by mu, held only to read or change it, never across an unlink, a stat or a
 * sync; retention_mu serialises deletions, so two callers never pick the same victim. The
 * active segment is never deleted: a victim needs a newer segment after it.
 */
#include "journal_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "jerr.h"

int
journal_segs_push(journal_t *j, uint64_t first_seq)
{
    pthread_mutex_lock(&j->mu);
    int rc = 0;
    if (j->n_segs == j->cap_segs) {
        size_t ncap = j->cap_segs ? j->cap_segs * 2 : 16;
        uint64_t *grown = realloc(j->seg_seqs, ncap * sizeof *grown);
        if (!grown)
            rc = -ENOMEM;
        else {
            j->seg_seqs = grown;
            j->cap_segs = ncap;
        }
    }
    if (!rc)
        j->seg_seqs[j->n_segs++] = first_seq;
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int
journal_delete_before(journal_t *j, uint64_t seq, stele_error_t *err)
{
    char name[SEG_NAME_BYTES];
    if (!j)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_delete_before needs a journal");
    int rc = journal_check_halted(j, err);
    if (rc)
        return rc;
    /* A signed journal deletes only what a durable retention checkpoint covers (FORMAT.md
     * section 11.2), so a verifier tells retention from deletion. */
    uint64_t covered = atomic_load(&j->seal.retention_durable);
    if (j->seal.is_signing && seq > covered)
        seq = covered;
    pthread_mutex_lock(&j->retention_mu);
    int deleted = 0;
    for (;;) {
        /* The oldest segment may go when a newer one exists (so it is sealed) and starts at
         * or below seq: then every record in it is < seq. */
        pthread_mutex_lock(&j->mu);
        uint64_t victim = 0;
        int ok = j->n_segs >= 2 && j->seg_seqs[1] <= seq;
        if (ok)
            victim = j->seg_seqs[0];
        pthread_mutex_unlock(&j->mu);
        if (!ok)
            break;
        rc = j->io->unlink(j->io->ctx, j->dir_fd, journal_seg_name(name, victim));
        if (rc && rc != -ENOENT)
            break;
        rc = 0;
        pthread_mutex_lock(&j->mu);
        memmove(j->seg_seqs, j->seg_seqs + 1, (j->n_segs - 1) * sizeof *j->seg_seqs);
        j->n_segs--;
        pthread_mutex_unlock(&j->mu);
        deleted++;
    }
    /* Partial progress is progress: what was unlinked is gone from readers' view, so the
     * count says so and the failure is reported by journal_close; retention retries the
     * rest. Only a call that deleted nothing returns the error. */
    if (rc && !deleted)
        journal_fail_errno(err, rc, "delete segment", name);
    else if (rc)
        journal_defer_error(j, rc, "delete segment", name);
    if (deleted) {
        /* Not syncing would only let a deleted segment reappear after a crash: harmless,
         * retention deletes it again. A failure is reported at close, not here. */
        int sync_rc = j->io->sync_dir(j->io->ctx, j->dir_fd);
        if (sync_rc)
            journal_defer_error(j, sync_rc, "sync journal directory", j->dir);
        journal_retry_prepare(j); /* the space it lacked may be there now */
    }
    pthread_mutex_unlock(&j->retention_mu);
    return deleted ? deleted : rc;
}

/* Blocks allocated to `name` in the journal directory (0 when it is gone), as du counts. */
static uint64_t
journal_file_disk_bytes(const journal_t *j, const char *name)
{
    struct stat st;
    if (fstatat(j->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return 0;
    return (uint64_t)st.st_blocks * 512u;
}

void
journal_stats(journal_t *j, journal_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!j)
        return;
    char name[SEG_NAME_BYTES];
    out->last_seq = atomic_load(&j->last_seq);
    out->syncs = atomic_load(&j->syncs);
    out->is_signing = j->seal.is_signing;
    out->checkpoints = atomic_load(&j->seal.checkpoints);
    out->sealed_seq = atomic_load(&j->seal.sealed_seq);
    out->key_epoch = atomic_load(&j->seal.epoch_now);
    pthread_mutex_lock(&j->mu);
    size_t n = j->n_segs;
    uint64_t *seqs = malloc((n ? n : 1) * sizeof *seqs);
    if (seqs)
        memcpy(seqs, j->seg_seqs, n * sizeof *seqs);
    int prepared = j->prep_fd >= 0;
    out->prepare_rc = j->prep_rc;
    pthread_mutex_unlock(&j->mu);
    if (!seqs)
        return;
    out->segments = n + (prepared ? 1 : 0);
    out->first_seq = n && out->last_seq >= seqs[0] ? seqs[0] : 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = journal_file_disk_bytes(j, journal_seg_name(name, seqs[i]));
        out->disk_bytes += bytes;
        if (i + 1 < n)
            out->sealed_bytes += bytes;
    }
    if (prepared)
        out->disk_bytes += journal_file_disk_bytes(j, SEG_PREPARED_NAME);
    free(seqs);
}
