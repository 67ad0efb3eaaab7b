/*
 * journal_open.c: journal_open: checks the options, opens the journal directory once (jdir.h:
 * never through a link, refused when others could change it, given the configured modes),
 * takes the writer lock, and either
 * creates a new journal (directory, genesis value, segment 1) or recovers an existing one:
 * every segment's header is checked (rules H1-H5, one genesis), then only the newest
 * segment's tail is scanned (recover.c), from the index's hint when it checks out, and
 * classified (FORMAT.md, "End of log"). Damage before synced data refuses the open and
 * changes nothing; a torn tail in never-synced data is zeroed. Then the journal goes live:
 * positions published, the preparer started. Not here: the scan itself (recover.c), the
 * write path (journal.c).
 *
 * Threads: the opening thread alone; the preparer starts last, in journal_go_live.
 */
#include "journal_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jerr.h"
#include "recover.h"

/* The smallest segment still holding its header and one largest frame of a small record;
 * tests use 16 KiB segments to roll often. */
#define JOURNAL_MIN_SEGMENT_BYTES (2ull * SEG_HEADER_BYTES)
/* The hint of STELE_ELOCKED. The holder is often `stele serve`, which takes other processes'
 * appends through its socket; readers (tail, status, verify) never need the lock. */
#define JOURNAL_LOCKED_HINT                                                                        \
    "if it is `stele serve`, append through its socket (stele_client_connect, `stele insert`); "   \
    "else stop it. Readers need no lock"
_Static_assert(sizeof JOURNAL_LOCKED_HINT <= STELE_ERROR_HINT_BYTES, "the hint must fit");

static int
journal_validate_options(const journal_options_t *o, stele_error_t *err)
{
    if (o->segment_bytes < JOURNAL_MIN_SEGMENT_BYTES || o->segment_bytes % FRAME_ALIGN)
        return jerr_set(err, STELE_EINVAL, NULL,
                        "segment size %" PRIu64 " must be a multiple of 8 and at least %llu",
                        o->segment_bytes, (unsigned long long)JOURNAL_MIN_SEGMENT_BYTES);
    if (o->max_record_bytes == 0 || o->max_record_bytes > FRAME_MAX_PAYLOAD)
        return jerr_set(err, STELE_EINVAL, NULL, "max record size %u out of range 1..%u",
                        o->max_record_bytes, FRAME_MAX_PAYLOAD);
    if (o->create_version > FORMAT_VERSION ||
        (o->create_version && o->create_version < FORMAT_VERSION_MIN))
        return jerr_set(err, STELE_EINVAL, NULL, "format version %u: this stele writes %u to %u",
                        o->create_version, FORMAT_VERSION_MIN, FORMAT_VERSION);
    if (o->source && strlen(o->source) >= SEG_SOURCE_BYTES)
        return jerr_set(err, STELE_EINVAL, NULL, "source name longer than %u bytes",
                        SEG_SOURCE_BYTES - 1);
    return 0;
}

/* Creates the journal directory with exactly dir_mode (not the umask's), opens it, and syncs
 * its parent so the new directory survives power loss. A directory that appeared meanwhile
 * is opened as it is. */
static int
journal_make_dir(journal_t *j, stele_error_t *err)
{
    mode_t mode = (mode_t)(j->opts.dir_mode ? j->opts.dir_mode : JOURNAL_NEW_DIR_MODE);
    /* Nothing is made where it would be refused. */
    int rc = j->opts.allow_unsafe_dir ? 0 : jdir_check_new(j->dir, err);
    if (rc)
        return rc;
    rc = j->io->make_dir(j->io->ctx, AT_FDCWD, j->dir, mode);
    if (rc && rc != -EEXIST)
        return journal_fail_errno(err, rc, "create journal directory", j->dir);
    int is_new = rc == 0;
    rc = jdir_open(j->io, j->dir, &j->dir_fd, err);
    if (rc == STELE_EUNSAFE || rc == STELE_ENOTJOURNAL)
        return rc;
    if (rc)
        return journal_fail_errno(err, rc, "open journal directory", j->dir);
    if (!is_new)
        return 0;
    rc = j->io->set_mode(j->io->ctx, j->dir_fd, mode);
    if (rc)
        return journal_fail_errno(err, rc, "set the mode of", j->dir);
    /* ".." of the directory just made is the directory that holds its entry. */
    int parent = j->io->open_dir(j->io->ctx, j->dir_fd, "..");
    if (parent < 0)
        return journal_fail_errno(err, parent, "open the parent directory of", j->dir);
    rc = j->io->sync_dir(j->io->ctx, parent);
    journal_close_fd(j, parent, "the parent directory");
    if (rc)
        return journal_fail_errno(err, rc, "sync the parent directory of", j->dir);
    return 0;
}

/* Opens the journal directory (creating it when allowed), refuses one that others could
 * change, and gives it the configured mode when that differs. */
static int
journal_open_dir(journal_t *j, stele_error_t *err)
{
    int rc = jdir_open(j->io, j->dir, &j->dir_fd, err);
    if (rc == -ENOENT && j->opts.create_if_missing) {
        rc = journal_seal_load_key(j, 1, err); /* a bad key creates nothing */
        if (!rc)
            rc = journal_make_dir(j, err);
    } else if (rc && rc != STELE_EUNSAFE && rc != STELE_ENOTJOURNAL)
        journal_fail_errno(err, rc, "open journal directory", j->dir);
    if (rc)
        return rc;
    if (!j->opts.allow_unsafe_dir) {
        rc = jdir_check(j->dir_fd, j->dir, JDIR_WRITER, err);
        if (rc)
            return rc;
    }
    struct stat st;
    if (!j->opts.dir_mode ||
        (fstat(j->dir_fd, &st) == 0 && (st.st_mode & 07777) == j->opts.dir_mode))
        return 0;
    rc = j->io->set_mode(j->io->ctx, j->dir_fd, (mode_t)j->opts.dir_mode);
    return rc ? journal_fail_errno(err, rc, "set the mode of", j->dir) : 0;
}

/* The mode new files get: the configured one, else the newest segment's (or LOCK's), so a
 * writer started without file_mode keeps a group's access to the files it adds; write
 * access for the group or others is not passed on unless allow_unsafe_dir. */
static void
journal_pick_file_mode(journal_t *j, const segment_dir_t *d)
{
    char name[SEG_NAME_BYTES];
    struct stat st;
    j->file_mode = j->opts.file_mode ? j->opts.file_mode : JOURNAL_NEW_FILE_MODE;
    if (j->opts.file_mode)
        return;
    const char *model = d->n          ? journal_seg_name(name, d->seqs[d->n - 1])
                        : d->has_lock ? LOCK_NAME
                                      : NULL;
    if (model && fstatat(j->dir_fd, model, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
        j->file_mode = st.st_mode & (j->opts.allow_unsafe_dir ? 0777 : 0755);
}

/* An open journal file (fd, named `name`) gets the configured file_mode when it has
 * another one. */
static int
journal_apply_file_mode(journal_t *j, int fd, const char *name, stele_error_t *err)
{
    struct stat st;
    if (!j->opts.file_mode || (fstat(fd, &st) == 0 && (st.st_mode & 07777) == j->opts.file_mode))
        return 0;
    int rc = j->io->set_mode(j->io->ctx, fd, (mode_t)j->opts.file_mode);
    return rc ? journal_fail_errno(err, rc, "set the mode of", name) : 0;
}

/* A new journal: a genesis value and segment 1, durable before open returns. */
static int
journal_create(journal_t *j, stele_error_t *err)
{
    char name[SEG_NAME_BYTES];
    if (getrandom(j->genesis, HASH_BYTES, 0) != (ssize_t)HASH_BYTES)
        return journal_fail_errno(err, -errno, "draw the genesis value for", j->dir);
    int fd = -1;
    int rc = journal_prepare_one(j, &fd);
    if (rc)
        return journal_fail_errno(err, rc, "create segment", journal_seg_name(name, 1));
    memcpy(j->last_hash, j->genesis, HASH_BYTES); /* seq 1's prev_hash */
    merkle_range_init(&j->range);
    segment_header_t h;
    journal_next_header(j, 1, &h);
    rc = segment_install(j->io, j->dir_fd, fd, &h);
    if (!rc)
        rc = journal_segs_push(j, 1);
    if (rc) {
        journal_close_fd(j, fd, SEG_PREPARED_NAME);
        return journal_fail_errno(err, rc, "create segment", journal_seg_name(name, 1));
    }
    journal_activate(j, fd, 1);
    return 0;
}

/* Header check of every segment (sealed ones get nothing more: never a full scan). */
static int
journal_check_headers(journal_t *j, const segment_dir_t *d, segment_header_t *newest,
                      stele_error_t *err)
{
    char name[SEG_NAME_BYTES];
    for (size_t i = 0; i < d->n; i++) {
        segment_header_t h;
        segment_header_fault_t fault = {0};
        journal_seg_name(name, d->seqs[i]);
        /* The newest is opened for writing once and kept: recovery and appends use it. */
        int is_newest = i + 1 == d->n;
        int fd = j->io->open_file(j->io->ctx, j->dir_fd, name,
                                  is_newest ? JOURNAL_IO_WRITE : JOURNAL_IO_READ, 0);
        if (fd < 0)
            return journal_fail_errno(err, fd, "open segment", name);
        int rc = journal_apply_file_mode(j, fd, name, err);
        if (rc) {
            journal_close_fd(j, fd, name);
            return rc;
        }
        rc = segment_header_read(j->io, fd, &h, &fault);
        if (is_newest)
            j->active_fd = fd;
        else
            journal_close_fd(j, fd, name);
        if (rc == STELE_EVERSION)
            return jerr_set(err, rc, "upgrade stele to read this journal",
                            "segment %s has format version %u; this stele reads up to %u", name,
                            h.version, FORMAT_VERSION);
        if (rc == STELE_ECORRUPT)
            return jerr_set(err, rc, JERR_HINT_VERIFY, "segment %s offset %" PRIu32 ": %s", name,
                            fault.offset, fault.why);
        if (rc)
            return journal_fail_errno(err, rc, "read the header of segment", name);
        if (h.first_seq != d->seqs[i])
            return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                            "segment %s offset 0: header says first seq %" PRIu64, name,
                            h.first_seq);
        if (i == 0) {
            memcpy(j->genesis, h.genesis, HASH_BYTES);
            memcpy(j->source, h.source, SEG_SOURCE_BYTES);
        } else if (h.version != newest->version) {
            return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                            "segment %s offset 0: format version %u differs from the segment "
                            "before it (%u): a journal keeps one version",
                            name, h.version, newest->version);
        } else if (memcmp(j->genesis, h.genesis, HASH_BYTES) != 0) {
            return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                            "segment %s offset 0: genesis differs from segment %020" PRIu64
                            ".seg's: not from this journal",
                            name, d->seqs[0]);
        }
        rc = journal_segs_push(j, d->seqs[i]);
        if (rc)
            return journal_fail_errno(err, rc, "list segment", name);
        *newest = h;
    }
    j->version = newest->version;
    return 0;
}

/* Where the tail scan may start: the hint if it names a valid frame of the newest segment
 * with the seq it claims, written when every record before it was durable (its synced_seq),
 * else the segment's first frame. The index learns of a batch when it is written, not when
 * it is synced, and keeps it across a power loss that may take unsynced batches before it
 * in part: a scan from such a hint would keep the hinted batch on top of a torn one. What
 * was durable when the hinted frame was written is intact now. (The scan checks that frame's
 * CRC, and a frame that fails it leaves no batch: then the scan starts again from the
 * segment's first frame, so its synced_seq is trusted only once it is known good.) */
static void
journal_pick_scan_start(journal_t *j, recover_scan_t *s, const segment_header_t *h)
{
    const journal_options_t *o = &j->opts;
    s->start_off = SEG_HEADER_BYTES;
    s->expect_seq = h->first_seq;
    s->trust_first = 0;
    /* Version 2 rebuilds the Merkle tree's compact range from the header's and every leaf
     * of the segment: the scan starts at the first frame. */
    if (h->version >= 2)
        return;
    if (!o->hint_seq || o->hint_segment_seq != h->first_seq || o->hint_offset < SEG_HEADER_BYTES ||
        o->hint_offset % FRAME_ALIGN || o->hint_offset >= s->seg_bytes ||
        o->hint_seq < h->first_seq || o->hint_offset == SEG_HEADER_BYTES)
        return;
    uint8_t head[FRAME_HEADER_BYTES_V1];
    ssize_t n = j->io->pread(j->io->ctx, s->fd, head, sizeof head, (off_t)o->hint_offset);
    if (n != (ssize_t)sizeof head || format_load_u32(head) != FRAME_MAGIC ||
        format_load_u64(head + FRAME_OFF_SEQ) != o->hint_seq ||
        format_load_u64(head + FRAME_OFF_SYNCED_SEQ) + 1 < o->hint_seq)
        return;
    s->start_off = o->hint_offset;
    s->expect_seq = o->hint_seq;
    s->prev_ts_ns = format_load_i64(head + FRAME_OFF_TS_NS);
    s->trust_first = 1;
}

/* Scans the newest segment's tail, from the hint when it checks out. A hinted batch that is
 * not complete leaves its predecessor's hash unknown here: then again from the first frame. */
static int
journal_scan_tail(journal_t *j, const segment_header_t *h, recover_scan_t *s)
{
    *s = (recover_scan_t){.io = j->io,
                          .fd = j->active_fd,
                          .version = h->version,
                          .seg_bytes = j->active_bytes,
                          .prev_ts_ns = h->prev_ts_ns,
                          .hasher = j->hasher,
                          .mhasher = j->mhasher,
                          .range = h->range,
                          .has_key = (h->trust_flags & SEG_TRUST_KEYED) != 0,
                          .key_epoch = h->key_epoch};
    memcpy(s->prev_hash, h->prev_hash, HASH_BYTES);
    journal_pick_scan_start(j, s, h);
    int rc = recover_scan_tail(s);
    if (!rc && s->trust_first && s->n_batches == 0) {
        s->start_off = SEG_HEADER_BYTES;
        s->expect_seq = h->first_seq;
        s->prev_ts_ns = h->prev_ts_ns;
        s->trust_first = 0;
        rc = recover_scan_tail(s);
    }
    return rc;
}

/* Damage before data that was synced (E2, E3) refuses the open; nothing is changed. */
static int
journal_refuse_synced_damage(const recover_scan_t *s, const char *name, journal_recovery_t *rec,
                             stele_error_t *err)
{
    rec->end = JOURNAL_END_SEALED_DAMAGE;
    if (s->chain_broken)
        return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY, "segment %s offset %" PRIu64 ": %s",
                        name, s->damage_off, s->why);
    return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                    "segment %s offset %" PRIu64 ": %s before synced data (a later frame "
                    "says seq %" PRIu64 " was synced; the log ends at %" PRIu64 ")",
                    name, s->damage_off, s->why, s->max_later_synced, s->last_seq);
}

/* A torn tail in never-synced data (E4) is zeroed back to the last complete batch, so it
 * reads as clean preallocated space, and the note says what was dropped. */
static int
journal_zero_torn_tail(journal_t *j, const recover_scan_t *s, const char *name,
                       journal_recovery_t *rec, stele_error_t *err)
{
    if (s->dirty_end <= s->end_off)
        return 0;
    int rc = recover_zero_tail(j->io, j->active_fd, s->end_off, s->dirty_end);
    if (rc)
        return journal_fail_errno(err, rc, "truncate the torn tail of segment", name);
    rec->truncated_bytes = s->dirty_end - s->end_off;
    snprintf(rec->note, sizeof rec->note,
             "recovered segment %s: %s at offset %" PRIu64 "; dropped %" PRIu64
             " unacknowledged record(s) after seq %" PRIu64 ", zeroed %" PRIu64 " bytes",
             name, journal_end_name(s->end), s->damage_off, s->dropped_frames, s->last_seq,
             rec->truncated_bytes);
    return 0;
}

/* Recovery of the newest segment, already open for writing as active_fd (FORMAT.md,
 * "End of log"): the writer continues from the end of its last complete batch. */
static int
journal_recover(journal_t *j, const segment_header_t *h, journal_recovery_t *rec,
                stele_error_t *err)
{
    char name[SEG_NAME_BYTES];
    journal_seg_name(name, h->first_seq);
    j->active_first_seq = h->first_seq;
    off_t size = 0;
    int rc = j->io->file_size(j->io->ctx, j->active_fd, &size);
    if (rc)
        return journal_fail_errno(err, rc, "size segment", name);
    j->active_bytes = (uint64_t)size;
    recover_scan_t s;
    rc = journal_scan_tail(j, h, &s);
    if (rc)
        return journal_fail_errno(err, rc, "scan segment", name);
    rec->end = s.end;
    rec->scanned_bytes = s.scanned_bytes;
    if (recover_is_synced_damage(&s))
        return journal_refuse_synced_damage(&s, name, rec, err);
    rc = journal_zero_torn_tail(j, &s, name, rec, err);
    if (rc)
        return rc;
    /* Whatever survived may sit in the page cache only (the previous writer died): make it
     * durable now, so durable_seq can start at last_seq. */
    rc = j->io->fdatasync(j->io->ctx, j->active_fd);
    if (rc)
        return journal_fail_errno(err, rc, "sync segment", name);
    j->write_off = s.end_off;
    atomic_store(&j->last_seq, s.last_seq);
    j->last_ts_ns = s.last_ts_ns;
    memcpy(j->last_hash, s.last_hash, HASH_BYTES);
    j->range = s.last_range;
    j->seal.has_key_end = s.has_key_end;
    j->seal.key_epoch_end = s.key_epoch_end;
    j->seal.records_since_statement = s.last_seq - s.statement_size_end;
    return 0;
}

/* Takes the writer lock; a LOCK that exists gets the configured file_mode. */
static int
journal_take_lock(journal_t *j, stele_error_t *err)
{
    int holder = 0;
    int rc =
        lockfile_open_writer(j->io, j->dir_fd, j->file_mode, &j->lock_fd, &j->lock_page, &holder);
    if (rc == STELE_ELOCKED && holder > 0)
        return jerr_set(err, rc, JOURNAL_LOCKED_HINT,
                        "journal %s is locked by another writer (pid %d)", j->dir, holder);
    if (rc == STELE_ELOCKED)
        return jerr_set(err, rc, JOURNAL_LOCKED_HINT, "journal %s is locked by another writer",
                        j->dir);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", j->dir, LOCK_NAME);
    if (rc)
        return journal_fail_errno(err, rc, "open lock file", path);
    /* LOCK is outside the I/O table (lockfile.c says why), and so is its mode. */
    struct stat st;
    if (j->opts.file_mode && fstat(j->lock_fd, &st) == 0 &&
        (st.st_mode & 07777) != j->opts.file_mode && fchmod(j->lock_fd, j->opts.file_mode) != 0)
        return journal_fail_errno(err, -errno, "set the mode of", path);
    return 0;
}

static int
journal_open_existing_or_new(journal_t *j, journal_recovery_t *rec, stele_error_t *err)
{
    int rc = journal_open_dir(j, err);
    if (rc)
        return rc;
    segment_dir_t d;
    rc = segment_dir_list(j->dir_fd, &d);
    if (rc)
        return journal_fail_errno(err, rc, "list journal directory", j->dir);
    if (d.n == 0 && !d.has_lock && d.n_other > 0) {
        size_t n_other = d.n_other; /* segment_dir_free clears d */
        segment_dir_free(&d);
        return jerr_set(err, STELE_ENOTJOURNAL, "give an empty or new directory for a new journal",
                        "%s is not a stele journal (no segments, no LOCK, %zu other entries)",
                        j->dir, n_other);
    }
    if (d.n == 0 && !j->opts.create_if_missing) {
        segment_dir_free(&d);
        return jerr_set(err, STELE_ENOTJOURNAL, NULL, "%s holds no journal segments", j->dir);
    }
    if (!j->seal.key_file_epoch && !j->seal.signer.verifier.name[0])
        rc = journal_seal_load_key(j, d.n == 0, err);
    if (rc) {
        segment_dir_free(&d);
        return rc;
    }
    journal_pick_file_mode(j, &d);
    rc = journal_take_lock(j, err);
    if (rc || d.n == 0) {
        segment_dir_free(&d);
        j->version = j->opts.create_version ? j->opts.create_version : FORMAT_VERSION;
        return rc ? rc : journal_create(j, err);
    }
    segment_header_t newest = {0};
    rc = journal_check_headers(j, &d, &newest, err);
    segment_dir_free(&d);
    if (!rc)
        rc = journal_recover(j, &newest, rec, err);
    return rc;
}

/* A journal_t every field of which journal_close can release, NULL when out of memory.
 * dir and hasher may still be NULL: the caller checks, and closes. */
static journal_t *
journal_alloc(const char *dir, const journal_options_t *opts_in)
{
    journal_t *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->opts = *opts_in;
    j->opts.source = NULL; /* borrowed: copied into source[] (a new journal's name) */
    j->opts.io = NULL;
    if (opts_in->source)
        snprintf(j->source, sizeof j->source, "%s", opts_in->source);
    j->io = opts_in->io ? opts_in->io : journal_io_posix();
    j->dir_fd = -1;
    j->lock_fd = -1;
    j->active_fd = -1;
    direct_init(&j->direct);
    j->prep_fd = -1;
    j->dir = strdup(dir);
    j->hasher = chain_hasher_new();
    j->mhasher = merkle_hasher_new();
    pthread_mutex_init(&j->mu, NULL);
    pthread_mutex_init(&j->retention_mu, NULL);
    pthread_cond_init(&j->prep_cv, NULL);
    return j;
}

/* Recovery is done and everything left is durable (E6): readers may return it, and the
 * preparer may start on the next segment. */
static int
journal_go_live(journal_t *j, stele_error_t *err)
{
    journal_direct_attach(j);
    uint64_t last = atomic_load(&j->last_seq);
    atomic_store(&j->durable_seq, last);
    lockfile_publish(j->lock_page, last, last);
    /* Not yet asked for the next segment, even past the quarter mark: that waits for the
     * first batch (journal_advance), so what the caller does first after the open (the
     * engine's index catch-up) gets the disk's free space before the preparer takes a
     * segment's worth of it. */
    int rc = journal_preparer_start(j);
    if (rc)
        jerr_set(err, rc, NULL, "could not start the segment preparer of %s", j->dir);
    return rc;
}

static void
journal_fill_recovery(const journal_t *j, journal_recovery_t *rec)
{
    uint64_t last = atomic_load(&j->last_seq);
    rec->version = j->version;
    rec->first_seq = last ? j->seg_seqs[0] : 0;
    rec->last_seq = last;
    rec->last_ts_ns = j->last_ts_ns;
    memcpy(rec->last_hash, j->last_hash, HASH_BYTES);
    if (j->version >= 2)
        merkle_range_root(j->mhasher, &j->range, rec->merkle_root);
}

int
journal_open(const char *dir, const journal_options_t *opts_in, journal_t **out,
             journal_recovery_t *rec_out, stele_error_t *err)
{
    journal_options_t defaults;
    journal_recovery_t rec_local;
    journal_recovery_t *rec = rec_out ? rec_out : &rec_local;
    if (!dir || !out)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_open needs a directory and an out");
    *out = NULL;
    memset(rec, 0, sizeof *rec);
    if (!opts_in) {
        journal_options_init(&defaults);
        opts_in = &defaults;
    }
    int rc = journal_validate_options(opts_in, err);
    if (rc)
        return rc;
    journal_t *j = journal_alloc(dir, opts_in);
    if (!j)
        return jerr_set(err, -ENOMEM, NULL, "out of memory opening journal %s", dir);
    if (!j->dir || !j->hasher || !j->mhasher) {
        rc = jerr_set(err, -ENOMEM, NULL, "out of memory opening journal %s", dir);
        goto fail;
    }
    rc = journal_open_existing_or_new(j, rec, err);
    if (!rc)
        rc = journal_go_live(j, err);
    /* Signing last: it may write (a key chain's start, the end of a rotation) and roll. */
    if (!rc)
        rc = journal_seal_open(j, err);
    if (rc)
        goto fail;
    journal_fill_recovery(j, rec);
    j->is_open = 1;
    *out = j;
    return 0;
fail:
    journal_close(j, NULL);
    return rc;
}
