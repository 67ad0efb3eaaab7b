/*
 * journal_roll.c: the next segment. The preparer thread creates prepared.tmp ahead of need
 * (segment_prepare: create, preallocate, fsync), so that a roll only writes a 4 KiB header,
 * renames and syncs the directory; the roll seals the active segment and installs the
 * prepared one in its place. Not here: the segment format (segment.c), the list of segments
 * (journal_retention.c), writing batches (journal.c).
 *
 * The preparer starts on a segment once the active one is a quarter full
 * (JOURNAL_PREPARE_AT_DIVISOR), not at once: preparing is a write of the whole segment plus
 * an fsync, which right after an open would compete with the first commits for the disk,
 * and by then the size of the synced batches (journal_zero_fill_now) says how to
 * preallocate; nor before the first batch after an open (journal_open.c), so the caller's
 * work right after it has the disk's free space first. With prepare_inline the roll
 * prepares the segment itself, in the writer.
 *
 * A full disk: a preparation that fails removes its half-made file (the space goes back)
 * and keeps the error (prep_rc, in stats); it is tried again when retention frees space
 * (journal_retry_prepare) and, in the writer, by the roll that needs the segment. Only that
 * last failure halts the journal.
 *
 * Threads: the roll and the hand-off calls run in the writer (one thread at a time, under
 * the caller's lock; journal_internal.h). The preparer and the writer meet only under mu:
 * prep_fd passes a prepared file from one to the other, prep_installing keeps the preparer
 * off prepared.tmp's name until the writer has renamed it, prep_wanted lets it start.
 */
#include "journal_internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

/* The preparer starts on the next segment once the active one is this fraction full. */
#define JOURNAL_PREPARE_AT_DIVISOR 4

/* Whether the next segment is zero-filled (journal_zero_fill_t). Before any sync has been
 * seen, yes: the first batches of a journal opened for durable writes are small. */
static int
journal_zero_fill_now(const journal_t *j)
{
    if (j->opts.zero_fill != JOURNAL_ZERO_FILL_SMALL_SYNCS)
        return j->opts.zero_fill == JOURNAL_ZERO_FILL_ALWAYS;
    uint64_t avg = atomic_load_explicit(&j->sync_bytes_avg, memory_order_relaxed);
    return avg < JOURNAL_ZERO_FILL_MAX_SYNC_BYTES;
}

/* Makes prepared.tmp. On failure the half-made file is closed and removed: a preparation
 * that ran out of space gives back what it took, so the index and the active segment's
 * records keep the room (docs/journal.md, "When the disk fills"). */
int
journal_prepare_one(journal_t *j, int *fd_out)
{
    int fd = -1;
    int rc = segment_prepare(j->io, j->dir_fd, j->opts.segment_bytes, journal_zero_fill_now(j),
                             j->file_mode, &fd);
    if (rc && fd >= 0)
        journal_close_fd(j, fd, SEG_PREPARED_NAME);
    if (rc) /* best effort: a file left behind is replaced by the next preparation */
        (void)segment_discard_prepared(j->io, j->dir_fd);
    *fd_out = rc ? -1 : fd;
    return rc;
}

static void *
journal_preparer_main(void *arg)
{
    journal_t *j = arg;
    pthread_setname_np(pthread_self(), "stele-prepare"); /* names it in top -H, perf, gdb */
    pthread_mutex_lock(&j->mu);
    while (!j->prep_stop) {
        if (j->prep_fd >= 0 || j->prep_rc || j->prep_installing || !j->prep_wanted) {
            pthread_cond_wait(&j->prep_cv, &j->mu);
            continue;
        }
        pthread_mutex_unlock(&j->mu);
        int fd = -1;
        int rc = journal_prepare_one(j, &fd);
        pthread_mutex_lock(&j->mu);
        if (rc)
            j->prep_rc = rc;
        else
            j->prep_fd = fd;
        pthread_cond_broadcast(&j->prep_cv);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

int
journal_preparer_start(journal_t *j)
{
    if (j->opts.prepare_inline)
        return 0;
    int rc = pthread_create(&j->prep_thread, NULL, journal_preparer_main, j);
    if (rc)
        return -rc;
    j->prep_started = 1;
    return 0;
}

void
journal_preparer_stop(journal_t *j)
{
    if (!j->prep_started)
        return;
    pthread_mutex_lock(&j->mu);
    j->prep_stop = 1;
    pthread_cond_broadcast(&j->prep_cv);
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->prep_thread, NULL);
    j->prep_started = 0;
    if (j->prep_fd >= 0) {
        /* prepared.tmp stays: the next open replaces it (a prepared file is never trusted,
         * since a crash may have cut its preallocation short). */
        journal_close_fd(j, j->prep_fd, SEG_PREPARED_NAME);
        j->prep_fd = -1;
    }
}

/* Takes the prepared segment, waiting for the preparer if it is still at work. A
 * preparation that failed earlier (the disk was full then) is tried once more here, in the
 * writer, now that a roll needs it: only this failure is fatal. */
static int
journal_take_prepared(journal_t *j, int *fd_out)
{
    pthread_mutex_lock(&j->mu);
    if (!j->opts.prepare_inline) {
        j->prep_wanted = 1; /* a roll before the quarter mark (one large batch): needed now */
        pthread_cond_broadcast(&j->prep_cv);
        while (j->prep_fd < 0 && !j->prep_rc)
            pthread_cond_wait(&j->prep_cv, &j->mu);
    }
    int has_fd = j->prep_fd >= 0;
    *fd_out = j->prep_fd;
    j->prep_fd = -1;
    j->prep_rc = 0;
    j->prep_installing = 1; /* keeps the preparer off prepared.tmp until it is renamed */
    pthread_mutex_unlock(&j->mu);
    if (has_fd)
        return 0;
    int rc = journal_prepare_one(j, fd_out);
    if (rc) {
        pthread_mutex_lock(&j->mu);
        j->prep_rc = rc;
        j->prep_installing = 0;
        pthread_mutex_unlock(&j->mu);
    }
    return rc;
}

/* Space was freed (retention deleted segments): a preparation that failed may succeed now.
 * Any thread. */
void
journal_retry_prepare(journal_t *j)
{
    pthread_mutex_lock(&j->mu);
    if (j->prep_rc) {
        j->prep_rc = 0;
        pthread_cond_broadcast(&j->prep_cv);
    }
    pthread_mutex_unlock(&j->mu);
}

/* Lets the preparer start on the next segment (writer; once per segment). */
static void
journal_want_prepared(journal_t *j)
{
    j->has_asked_prepare = 1;
    pthread_mutex_lock(&j->mu);
    j->prep_wanted = 1;
    pthread_cond_broadcast(&j->prep_cv);
    pthread_mutex_unlock(&j->mu);
}

/* Asks for the next segment once the active one is a quarter full (writer). */
void
journal_maybe_want_prepared(journal_t *j)
{
    if (!j->has_asked_prepare && j->write_off >= j->active_bytes / JOURNAL_PREPARE_AT_DIVISOR)
        journal_want_prepared(j);
}

/* The prepared file has its final name now and is the active segment: the preparer waits
 * until that one is a quarter full. */
static void
journal_release_prepared(journal_t *j)
{
    j->has_asked_prepare = 0;
    pthread_mutex_lock(&j->mu);
    j->prep_wanted = 0;
    j->prep_installing = 0;
    pthread_cond_broadcast(&j->prep_cv);
    pthread_mutex_unlock(&j->mu);
}

/* Points direct writes at the active segment (journal_options_t.direct_writes), or leaves
 * writes buffered: where the file system has no O_DIRECT (EINVAL) from now on, silently;
 * after any other failure for this segment, reported by journal_close like every failed
 * call that did not put the log at risk. */
void
journal_direct_attach(journal_t *j)
{
    char name[SEG_NAME_BYTES];
    int rc = direct_close(&j->direct, j->io);
    if (rc)
        journal_defer_error(j, rc, "close", "a sealed segment");
    if (!j->opts.direct_writes || j->active_bytes % DIRECT_ALIGN)
        return;
    rc = direct_open(&j->direct, j->io, j->dir_fd, journal_seg_name(name, j->active_first_seq));
    if (rc == -EINVAL)
        j->opts.direct_writes = 0;
    else if (rc)
        journal_defer_error(j, rc, "open for direct writes", name);
}

void
journal_next_header(const journal_t *j, uint64_t first_seq, segment_header_t *h)
{
    memset(h, 0, sizeof *h);
    h->version = j->version;
    h->first_seq = first_seq;
    h->created_ns = journal_now_ns();
    h->prev_ts_ns = j->last_ts_ns;
    memcpy(h->source, j->source, SEG_SOURCE_BYTES);
    memcpy(h->genesis, j->genesis, HASH_BYTES);
    memcpy(h->prev_hash, j->last_hash, HASH_BYTES);
    if (j->version >= 2) {
        h->range = j->range; /* the tree of records 1 .. first_seq - 1 */
        /* The epoch in force at its start: at open, before the key statement the journal
         * lacks, not yet the epoch of the key in hand (journal_seal.c). */
        h->trust_flags = j->seal.has_key_end ? SEG_TRUST_KEYED : 0;
        h->key_epoch = j->seal.has_key_end ? j->seal.key_epoch_end : 0;
    }
}

void
journal_activate(journal_t *j, int fd, uint64_t first_seq)
{
    j->active_fd = fd;
    j->active_first_seq = first_seq;
    j->active_bytes = j->opts.segment_bytes;
    j->write_off = SEG_HEADER_BYTES;
}

/* Installs the prepared segment as segment `first_seq` and makes it the active one. */
static int
journal_install_next(journal_t *j, stele_error_t *err)
{
    uint64_t first_seq = atomic_load(&j->last_seq) + 1;
    int fd = -1;
    int rc = journal_take_prepared(j, &fd);
    if (rc)
        return journal_halt_errno(j, err, rc, NULL, "prepare", first_seq);
    segment_header_t h;
    journal_next_header(j, first_seq, &h);
    /* An active segment with no record yet (the power failed right after a roll, and the
     * journal was reopened with a larger segment_bytes than that file has) starts at the
     * same seq: the install replaces that file, and the list must not name it twice. */
    int replaces_active = j->active_fd >= 0 && j->active_first_seq == first_seq;
    rc = segment_install(j->io, j->dir_fd, fd, &h);
    if (!rc && !replaces_active)
        rc = journal_segs_push(j, first_seq);
    journal_release_prepared(j);
    if (rc) {
        journal_close_fd(j, fd, SEG_PREPARED_NAME);
        return journal_halt_errno(j, err, rc, NULL, "install", first_seq);
    }
    if (j->active_fd >= 0)
        journal_close_fd(j, j->active_fd, "a sealed segment");
    journal_activate(j, fd, first_seq);
    journal_direct_attach(j);
    return 0;
}

/* Seals the active segment (a signed journal's with the checkpoint of its last record; its
 * records durable before the next segment's header vouches for them through prev_hash) and
 * moves on to the prepared one. */
int
journal_roll(journal_t *j, stele_error_t *err)
{
    int rc = journal_seal_roll(j, err);
    if (!rc)
        rc = journal_sync(j, err);
    if (rc)
        return rc;
    return journal_install_next(j, err);
}
