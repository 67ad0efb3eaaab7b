/*
 * journal.c: the writer side of journal.h: open (create or recover), append, sync, roll,
 * publish, retention, stats, close. The format is FORMAT.md's; frames are sealed by
 * record.c, segments made by segment.c, the tail classified by recover.c.
 *
 * Threads and what protects what:
 *  - The writing thread (the engine's committer) alone calls append_batch, sync, publish
 *    and close; the fields under "writer thread only" are touched by nobody else.
 *  - last_seq, durable_seq, syncs and sticky_rc are atomics with exactly one writer (the
 *    writing thread) so stats and other threads read them without a lock.
 *  - mu protects the segment list (seg_seqs) and the preparer's hand-off fields; it is never
 *    held across I/O. retention_mu serialises journal_delete_before calls.
 *  - The preparer thread creates prepared.tmp ahead of need (segment_prepare) so a roll
 *    only writes a 4 KiB header, renames and syncs the directory. It starts once the active
 *    segment is a quarter full (JOURNAL_PREPARE_AT_DIVISOR), not at once: preparing is a
 *    write of the whole segment plus an fsync, which right after an open would compete
 *    with the first commits for the disk, and by then the size of the synced batches
 *    (journal_zero_fill_now) says how to preallocate.
 * Invariants: write_off is the end of the last complete batch in the active segment and
 * everything past it is zero; a segment file with a final name has a durable header; once
 * sticky_rc is set no more data is written.
 */
#include "journal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"
#include "direct.h"
#include "format.h"
#include "jerr.h"
#include "record.h"
#include "recover.h"
#include "segment.h"
#include "shared.h"

/* Defaults: a 64 MiB segment holds ~200k typical audit events and preallocates in well
 * under a second; 1 MiB records match stele_options_t's default. */
#define JOURNAL_DEFAULT_SEGMENT_BYTES (64ull * 1024 * 1024)
#define JOURNAL_DEFAULT_MAX_RECORD (1024u * 1024u)
/* The smallest segment still holding its header and one largest frame of a small record;
 * tests use 16 KiB segments to roll often. */
#define JOURNAL_MIN_SEGMENT_BYTES (2ull * SEG_HEADER_BYTES)

struct journal {
    char *dir;
    const journal_io_t *io;
    journal_options_t opts; /* opts.source is not kept: see source[] */
    char source[SEG_SOURCE_BYTES];
    uint8_t genesis[HASH_BYTES];
    int lock_fd;
    journal_shared_t *shared;

    /* -- writer thread only -- */
    chain_hasher_t *hasher;
    int active_fd;
    direct_writer_t direct; /* the active segment's direct writes, when on (fd >= 0) */
    uint64_t active_first_seq;
    uint64_t active_bytes; /* size of the active segment file */
    uint64_t write_off;
    uint8_t last_hash[HASH_BYTES];
    int64_t last_ts_ns;

    /* -- atomics, one writer each (the writer thread) -- */
    _Atomic uint64_t last_seq;
    _Atomic uint64_t durable_seq;
    _Atomic uint64_t syncs;
    _Atomic uint64_t sync_bytes_avg; /* bytes per fdatasync, moving average; preparer reads */
    uint64_t bytes_since_sync;       /* writer only */
    int has_asked_prepare;           /* writer only: prep_wanted set for the active segment */
    _Atomic int sticky_rc;           /* 0, or the error that halted the journal */
    char sticky_msg[STELE_ERROR_MESSAGE_BYTES]; /* written before sticky_rc is stored */

    /* -- protected by mu; prep_cv fires when prep_fd/prep_rc change or on stop -- */
    pthread_mutex_t mu;
    pthread_cond_t prep_cv;
    uint64_t *seg_seqs; /* first seqs, ascending; the last is the active segment */
    size_t n_segs, cap_segs;
    int prep_fd; /* a prepared segment ready to install, or -1 */
    int prep_rc; /* the preparer's failure, reported at the next roll */
    int prep_stop;
    int prep_installing; /* the writer holds prepared.tmp's name until installed */
    int prep_wanted;     /* the active segment is far enough along to prepare its successor */
    int prep_started;
    pthread_t prep_thread;

    /* -- serialises journal_delete_before -- */
    pthread_mutex_t retention_mu;
    int is_open; /* open succeeded: close syncs and publishes */

    /* -- protected by mu: the first failure that did not endanger the log (a close that
     * failed after its data was synced), reported by journal_close -- */
    int deferred_rc;
    char deferred_msg[STELE_ERROR_MESSAGE_BYTES];
};

const char *
journal_end_name(journal_end_t end)
{
    switch (end) {
    case JOURNAL_END_CLEAN:
        return "clean";
    case JOURNAL_END_TORN_FRAME:
        return "torn frame";
    case JOURNAL_END_BAD_CRC:
        return "bad crc";
    case JOURNAL_END_BAD_LENGTH:
        return "bad length";
    case JOURNAL_END_BAD_SEQ:
        return "wrong seq";
    case JOURNAL_END_TORN_BATCH:
        return "torn batch";
    case JOURNAL_END_SEALED_DAMAGE:
        return "damage before the durable tail";
    }
    return "unknown";
}

void
journal_options_init(journal_options_t *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->segment_bytes = JOURNAL_DEFAULT_SEGMENT_BYTES;
    opts->max_record_bytes = JOURNAL_DEFAULT_MAX_RECORD;
    opts->file_mode = 0600;
    opts->dir_mode = 0700;
    opts->create_if_missing = 1;
    /* fallocate-only: as fast as zero-filling for append+fdatasync on the measured disk, and
     * it does not write every segment twice (docs/journal.md). */
    opts->zero_fill = JOURNAL_ZERO_FILL_NEVER;
}

static int64_t
journal_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *
journal_seg_name(char buf[SEG_NAME_BYTES], uint64_t first_seq)
{
    segment_name(buf, first_seq);
    return buf;
}

/* Records the first failure; later calls report STELE_EHALTED naming it. */
static int journal_halt(journal_t *j, stele_error_t *err, int rc, const char *hint, const char *fmt,
                        ...) __attribute__((format(printf, 5, 6)));

static int
journal_halt(journal_t *j, stele_error_t *err, int rc, const char *hint, const char *fmt, ...)
{
    char msg[STELE_ERROR_MESSAGE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (atomic_load_explicit(&j->sticky_rc, memory_order_acquire) == 0) {
        snprintf(j->sticky_msg, sizeof j->sticky_msg, "%s", msg);
        atomic_store_explicit(&j->sticky_rc, rc, memory_order_release);
    }
    return jerr_set(err, rc, hint, "%s", msg);
}

static int
journal_check_halted(journal_t *j, stele_error_t *err)
{
    int rc = atomic_load_explicit(&j->sticky_rc, memory_order_acquire);
    if (!rc)
        return 0;
    return jerr_set(err, STELE_EHALTED, "reopen the journal to run recovery",
                    "journal %s halted: %s", j->dir, j->sticky_msg);
}

/* Closes fd; a failure is remembered and reported by journal_close (the data it held was
 * synced already, so the log is not at risk, but no failed call goes unreported). */
static void journal_defer_error(journal_t *j, int rc, const char *what, const char *obj);

static void
journal_close_fd(journal_t *j, int fd, const char *what)
{
    int rc = j->io->close(j->io->ctx, fd);
    if (rc)
        journal_defer_error(j, rc, "close", what);
}

/* ---------------------------------------------------------------------------------------
 * The preparer thread
 * --------------------------------------------------------------------------------------- */

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

/* Makes prepared.tmp; on failure the half-made file's descriptor is closed here. */
static int
journal_prepare_one(journal_t *j, int *fd_out)
{
    int fd = -1;
    int rc = segment_prepare(j->io, j->dir, j->opts.segment_bytes, journal_zero_fill_now(j),
                             j->opts.file_mode, &fd);
    if (rc && fd >= 0)
        journal_close_fd(j, fd, SEG_PREPARED_NAME);
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

static int
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

static void
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

/* Takes the prepared segment, waiting for the preparer if it is still at work. */
static int
journal_take_prepared(journal_t *j, int *fd_out)
{
    if (j->opts.prepare_inline) {
        int rc = journal_prepare_one(j, fd_out);
        if (!rc) {
            pthread_mutex_lock(&j->mu);
            j->prep_installing = 1;
            pthread_mutex_unlock(&j->mu);
        }
        return rc;
    }
    pthread_mutex_lock(&j->mu);
    j->prep_wanted = 1; /* a roll before the quarter mark (one large batch): needed now */
    pthread_cond_broadcast(&j->prep_cv);
    while (j->prep_fd < 0 && !j->prep_rc)
        pthread_cond_wait(&j->prep_cv, &j->mu);
    int rc = j->prep_rc;
    if (!rc) {
        *fd_out = j->prep_fd;
        j->prep_fd = -1;
        j->prep_installing = 1;
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

/* Lets the preparer start on the next segment (writer thread; once per segment). */
static void
journal_want_prepared(journal_t *j)
{
    j->has_asked_prepare = 1;
    pthread_mutex_lock(&j->mu);
    j->prep_wanted = 1;
    pthread_cond_broadcast(&j->prep_cv);
    pthread_mutex_unlock(&j->mu);
}

/* Asks for the next segment once the active one is a quarter full (writer thread). */
static void
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

static int
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

/* A file system that opens files with O_DIRECT but refuses the writes (EINVAL, before any
 * byte is written; a FUSE file system may do so): writes go buffered from now on, this one
 * included. */
static int
journal_direct_refused(journal_t *j, uint8_t *buf, size_t len)
{
    int rc = direct_close(&j->direct, j->io);
    if (rc)
        journal_defer_error(j, rc, "close", "the active segment");
    j->opts.direct_writes = 0;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    return j->io->pwritev(j->io->ctx, j->active_fd, &iov, 1, (off_t)j->write_off);
}

/* Points direct writes at the active segment (journal_options_t.direct_writes), or leaves
 * writes buffered: where the file system has no O_DIRECT (EINVAL) from now on, silently;
 * after any other failure for this segment, reported by journal_close like every failed
 * call that did not put the log at risk. */
static void
journal_direct_attach(journal_t *j)
{
    char path[PATH_MAX], name[SEG_NAME_BYTES];
    int rc = direct_close(&j->direct, j->io);
    if (rc)
        journal_defer_error(j, rc, "close", "a sealed segment");
    if (!j->opts.direct_writes || j->active_bytes % DIRECT_ALIGN ||
        segment_path(path, sizeof path, j->dir, j->active_first_seq))
        return;
    rc = direct_open(&j->direct, j->io, path);
    if (rc == -EINVAL)
        j->opts.direct_writes = 0;
    else if (rc)
        journal_defer_error(j, rc, "open for direct writes",
                            journal_seg_name(name, j->active_first_seq));
}

/* Installs the prepared segment as segment `first_seq` and makes it the active one. */
static int
journal_install_next(journal_t *j, stele_error_t *err)
{
    char name[SEG_NAME_BYTES], ebuf[64];
    uint64_t first_seq = atomic_load(&j->last_seq) + 1;
    int fd = -1;
    int rc = journal_take_prepared(j, &fd);
    if (rc)
        return journal_halt(j, err, rc, NULL, "could not prepare segment %s: %s",
                            journal_seg_name(name, first_seq),
                            jerr_errno_text(rc, ebuf, sizeof ebuf));
    segment_header_t h = {.version = FORMAT_VERSION,
                          .first_seq = first_seq,
                          .created_ns = journal_now_ns(),
                          .prev_ts_ns = j->last_ts_ns};
    memcpy(h.source, j->source, SEG_SOURCE_BYTES);
    memcpy(h.genesis, j->genesis, HASH_BYTES);
    memcpy(h.prev_hash, j->last_hash, HASH_BYTES);
    /* An active segment with no record yet (the power failed right after a roll, and the
     * journal was reopened with a larger segment_bytes than that file has) starts at the
     * same seq: the install replaces that file, and the list must not name it twice. */
    int replaces_active = j->active_fd >= 0 && j->active_first_seq == first_seq;
    rc = segment_install(j->io, j->dir, fd, &h);
    if (!rc && !replaces_active)
        rc = journal_segs_push(j, first_seq);
    journal_release_prepared(j);
    if (rc) {
        journal_close_fd(j, fd, SEG_PREPARED_NAME);
        return journal_halt(j, err, rc, NULL, "could not install segment %s: %s",
                            journal_seg_name(name, first_seq),
                            jerr_errno_text(rc, ebuf, sizeof ebuf));
    }
    if (j->active_fd >= 0)
        journal_close_fd(j, j->active_fd, "a sealed segment");
    j->active_fd = fd;
    j->active_first_seq = first_seq;
    j->active_bytes = j->opts.segment_bytes;
    j->write_off = SEG_HEADER_BYTES;
    journal_direct_attach(j);
    return 0;
}

/* Seals the active segment (its records durable before the next segment's header vouches
 * for them through prev_hash) and moves on to the prepared one. */
static int
journal_roll(journal_t *j, stele_error_t *err)
{
    int rc = journal_sync(j, err);
    if (rc)
        return rc;
    return journal_install_next(j, err);
}

/* ---------------------------------------------------------------------------------------
 * Open
 * --------------------------------------------------------------------------------------- */

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
    if (o->source && strlen(o->source) >= SEG_SOURCE_BYTES)
        return jerr_set(err, STELE_EINVAL, NULL, "source name longer than %u bytes",
                        SEG_SOURCE_BYTES - 1);
    return 0;
}

static int
journal_fail_errno(stele_error_t *err, int rc, const char *what, const char *obj)
{
    char ebuf[64];
    const char *hint = NULL;
    if (rc == -EACCES || rc == -EROFS || rc == -EPERM)
        hint = "the journal directory must be writable to write; readers need only read access";
    return jerr_set(err, rc, hint, "could not %s %s: %s", what, obj,
                    jerr_errno_text(rc, ebuf, sizeof ebuf));
}

/* mkdir with the exact mode asked for (not the umask's), and the parent synced so the new
 * directory survives power loss. */
/* The directory that holds `dir`'s entry: "a/b" and "a/b/" give "a", "/b" gives "/", "b"
 * gives ".". */
static void
journal_parent_dir(const char *dir, char *out, size_t cap)
{
    snprintf(out, cap, "%s", dir);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash)
        snprintf(out, cap, ".");
    else if (slash == out)
        slash[1] = '\0';
    else
        *slash = '\0';
}

static int
journal_make_dir(const journal_t *j, stele_error_t *err)
{
    if (mkdir(j->dir, (mode_t)j->opts.dir_mode) < 0)
        return journal_fail_errno(err, -errno, "create journal directory", j->dir);
    if (chmod(j->dir, (mode_t)j->opts.dir_mode) < 0)
        return journal_fail_errno(err, -errno, "set the mode of", j->dir);
    char parent[PATH_MAX];
    journal_parent_dir(j->dir, parent, sizeof parent);
    int rc = j->io->sync_dir(j->io->ctx, parent);
    if (rc)
        return journal_fail_errno(err, rc, "sync the parent directory of", j->dir);
    return 0;
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
    segment_header_t h = {
        .version = FORMAT_VERSION, .first_seq = 1, .created_ns = journal_now_ns()};
    memcpy(h.source, j->source, SEG_SOURCE_BYTES);
    memcpy(h.genesis, j->genesis, HASH_BYTES);
    memcpy(h.prev_hash, j->genesis, HASH_BYTES);
    rc = segment_install(j->io, j->dir, fd, &h);
    if (!rc)
        rc = journal_segs_push(j, 1);
    if (rc) {
        journal_close_fd(j, fd, SEG_PREPARED_NAME);
        return journal_fail_errno(err, rc, "create segment", journal_seg_name(name, 1));
    }
    j->active_fd = fd;
    j->active_first_seq = 1;
    j->active_bytes = j->opts.segment_bytes;
    j->write_off = SEG_HEADER_BYTES;
    memcpy(j->last_hash, j->genesis, HASH_BYTES);
    return 0;
}

/* Header check of every segment (sealed ones get nothing more: never a full scan). */
static int
journal_check_headers(journal_t *j, const segment_dir_t *d, segment_header_t *newest,
                      stele_error_t *err)
{
    char name[SEG_NAME_BYTES], path[PATH_MAX];
    for (size_t i = 0; i < d->n; i++) {
        segment_header_t h;
        segment_header_fault_t fault = {0};
        journal_seg_name(name, d->seqs[i]);
        int rc = segment_path(path, sizeof path, j->dir, d->seqs[i]);
        if (rc)
            return journal_fail_errno(err, rc, "open segment", name);
        /* The newest is opened for writing once and kept: recovery and appends use it. */
        int is_newest = i + 1 == d->n;
        int fd =
            j->io->open_file(j->io->ctx, path, is_newest ? JOURNAL_IO_WRITE : JOURNAL_IO_READ, 0);
        if (fd < 0)
            return journal_fail_errno(err, fd, "open segment", name);
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
    if (!o->hint_seq || o->hint_segment_seq != h->first_seq || o->hint_offset < SEG_HEADER_BYTES ||
        o->hint_offset % FRAME_ALIGN || o->hint_offset >= s->seg_bytes ||
        o->hint_seq < h->first_seq || o->hint_offset == SEG_HEADER_BYTES)
        return;
    uint8_t head[FRAME_HEADER_BYTES];
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
                          .seg_bytes = j->active_bytes,
                          .prev_ts_ns = h->prev_ts_ns,
                          .hasher = j->hasher};
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
    char name[SEG_NAME_BYTES], ebuf[64];
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
        return jerr_set(err, rc, NULL, "could not sync segment %s: %s", name,
                        jerr_errno_text(rc, ebuf, sizeof ebuf));
    j->write_off = s.end_off;
    atomic_store(&j->last_seq, s.last_seq);
    j->last_ts_ns = s.last_ts_ns;
    memcpy(j->last_hash, s.last_hash, HASH_BYTES);
    return 0;
}

static int
journal_open_existing_or_new(journal_t *j, journal_recovery_t *rec, stele_error_t *err)
{
    segment_dir_t d;
    int rc = segment_dir_list(j->dir, &d);
    if (rc == -ENOENT && j->opts.create_if_missing) {
        rc = journal_make_dir(j, err);
        if (rc)
            return rc;
        rc = segment_dir_list(j->dir, &d);
    }
    if (rc == -ENOTDIR)
        return jerr_set(err, STELE_ENOTJOURNAL, NULL, "%s is not a directory", j->dir);
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
    int holder = 0;
    rc = shared_open_writer(j->io, j->dir, j->opts.file_mode, &j->lock_fd, &j->shared, &holder);
    if (rc == STELE_ELOCKED) {
        segment_dir_free(&d);
        if (holder > 0)
            return jerr_set(err, rc, "stop the other writer, or read with a reader",
                            "journal %s is locked by another writer (pid %d)", j->dir, holder);
        return jerr_set(err, rc, NULL, "journal %s is locked by another writer", j->dir);
    }
    if (rc) {
        segment_dir_free(&d);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", j->dir, LOCK_NAME);
        return journal_fail_errno(err, rc, "open lock file", path);
    }
    if (d.n == 0) {
        segment_dir_free(&d);
        return journal_create(j, err);
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
    j->lock_fd = -1;
    j->active_fd = -1;
    direct_init(&j->direct);
    j->prep_fd = -1;
    j->dir = strdup(dir);
    j->hasher = chain_hasher_new();
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
    shared_publish(j->shared, last, last);
    journal_maybe_want_prepared(j); /* an existing journal may be past the mark already */
    int rc = journal_preparer_start(j);
    if (rc)
        jerr_set(err, rc, NULL, "could not start the segment preparer of %s", j->dir);
    return rc;
}

static void
journal_fill_recovery(const journal_t *j, journal_recovery_t *rec)
{
    uint64_t last = atomic_load(&j->last_seq);
    rec->first_seq = last ? j->seg_seqs[0] : 0;
    rec->last_seq = last;
    rec->last_ts_ns = j->last_ts_ns;
    memcpy(rec->last_hash, j->last_hash, HASH_BYTES);
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
    if (!j->dir || !j->hasher) {
        rc = jerr_set(err, -ENOMEM, NULL, "out of memory opening journal %s", dir);
        goto fail;
    }
    rc = journal_open_existing_or_new(j, rec, err);
    if (!rc)
        rc = journal_go_live(j, err);
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

/* ---------------------------------------------------------------------------------------
 * Writing
 * --------------------------------------------------------------------------------------- */

/* Checks a batch laid out by journal_frame_prepare before anything is changed. */
static int
journal_check_batch(const journal_t *j, const uint8_t *buf, size_t len, stele_error_t *err)
{
    uint64_t expect = atomic_load(&j->last_seq) + 1;
    int64_t prev_ts = j->last_ts_ns;
    size_t off = 0;
    if (len == 0)
        return jerr_set(err, STELE_EINVAL, NULL, "empty batch");
    while (off < len) {
        if (len - off < FRAME_HEADER_BYTES ||
            format_load_u32(buf + off + FRAME_OFF_MAGIC) != FRAME_MAGIC)
            return jerr_set(err, STELE_EINVAL, NULL,
                            "batch byte %zu is not a frame from journal_frame_prepare", off);
        uint32_t payload_len = format_load_u32(buf + off + FRAME_OFF_PAYLOAD_LEN);
        uint64_t seq = format_load_u64(buf + off + FRAME_OFF_SEQ);
        int64_t ts_ns = format_load_i64(buf + off + FRAME_OFF_TS_NS);
        if (payload_len > j->opts.max_record_bytes)
            return jerr_set(err, STELE_ETOOBIG, NULL,
                            "record seq %" PRIu64 " has %u bytes; the limit is %u", seq,
                            payload_len, j->opts.max_record_bytes);
        if (payload_len == 0)
            return jerr_set(err, STELE_EINVAL, NULL, "record seq %" PRIu64 " is empty", seq);
        if (format_frame_bytes(payload_len) > len - off)
            return jerr_set(err, STELE_EINVAL, NULL, "record seq %" PRIu64 " overruns the batch",
                            seq);
        if (seq != expect)
            return jerr_set(err, STELE_EINVAL, NULL,
                            "batch seq %" PRIu64 " does not follow %" PRIu64, seq, expect - 1);
        if (ts_ns < prev_ts)
            return jerr_set(err, STELE_EINVAL, NULL,
                            "record seq %" PRIu64 " timestamp %" PRId64 " is before %" PRId64, seq,
                            ts_ns, prev_ts);
        prev_ts = ts_ns;
        expect++;
        off += format_frame_bytes(payload_len);
    }
    if (len > j->opts.segment_bytes - SEG_HEADER_BYTES)
        return jerr_set(err, STELE_ETOOBIG, "raise segment_bytes or commit smaller batches",
                        "batch of %zu bytes does not fit in a %" PRIu64 "-byte segment", len,
                        j->opts.segment_bytes);
    return 0;
}

/* A sealed batch's effect on the journal, applied only once the batch is written. */
typedef struct sealed_batch {
    uint64_t first_seq;
    uint64_t last_seq;
    int64_t last_ts_ns;
    uint8_t last_hash[HASH_BYTES];
} sealed_batch_t;

/* Seals every frame in place: chain hash, BATCH_END on the last, synced_seq, CRC. */
static int
journal_seal_batch(journal_t *j, uint8_t *buf, size_t len, sealed_batch_t *out, stele_error_t *err)
{
    memcpy(out->last_hash, j->last_hash, HASH_BYTES);
    uint64_t synced = atomic_load(&j->durable_seq);
    out->first_seq = format_load_u64(buf + FRAME_OFF_SEQ);
    out->last_seq = out->first_seq;
    out->last_ts_ns = j->last_ts_ns;
    for (size_t off = 0; off < len;) {
        uint32_t payload_len = format_load_u32(buf + off + FRAME_OFF_PAYLOAD_LEN);
        size_t frame_bytes = (size_t)format_frame_bytes(payload_len);
        uint32_t flags = off + frame_bytes == len ? FRAME_FLAG_BATCH_END : 0;
        int rc = record_seal(buf + off, out->last_hash, flags, synced, j->hasher, out->last_hash);
        if (rc)
            return jerr_set(err, rc, NULL, "could not hash record: out of memory");
        out->last_seq = format_load_u64(buf + off + FRAME_OFF_SEQ);
        out->last_ts_ns = format_load_i64(buf + off + FRAME_OFF_TS_NS);
        off += frame_bytes;
    }
    return 0;
}

/* The batch in one write at write_off: one pwritev, or with direct writes the whole blocks
 * it touches. */
static int
journal_write_batch(journal_t *j, uint8_t *buf, size_t len)
{
    if (j->direct.fd >= 0) {
        int rc = direct_write(&j->direct, j->io, j->active_fd, buf, len, j->write_off);
        if (rc == -EINVAL)
            rc = journal_direct_refused(j, buf, len);
        return rc;
    }
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    return j->io->pwritev(j->io->ctx, j->active_fd, &iov, 1, (off_t)j->write_off);
}

static void
journal_fill_batch_info(const journal_t *j, const uint8_t *buf, const sealed_batch_t *b, int rolled,
                        journal_batch_info_t *info)
{
    info->first_seq = b->first_seq;
    info->last_seq = b->last_seq;
    info->first_ts_ns = format_load_i64(buf + FRAME_OFF_TS_NS);
    info->segment_seq = j->active_first_seq;
    info->offset = j->write_off;
    info->rolled = rolled;
}

/* The batch is written: the journal continues after it. */
static void
journal_advance(journal_t *j, size_t len, const sealed_batch_t *b)
{
    j->write_off += len;
    j->bytes_since_sync += len;
    journal_maybe_want_prepared(j);
    j->last_ts_ns = b->last_ts_ns;
    memcpy(j->last_hash, b->last_hash, HASH_BYTES);
    atomic_store_explicit(&j->last_seq, b->last_seq, memory_order_release);
}

int
journal_append_batch(journal_t *j, uint8_t *buf, size_t len, journal_batch_info_t *info,
                     stele_error_t *err)
{
    char name[SEG_NAME_BYTES], ebuf[64];
    if (!j || !buf)
        return jerr_set(err, STELE_EINVAL, NULL,
                        "journal_append_batch needs a journal and a batch");
    int rc = journal_check_halted(j, err);
    if (!rc)
        rc = journal_check_batch(j, buf, len, err);
    if (rc)
        return rc;
    int rolled = j->write_off + len > j->active_bytes;
    if (rolled) {
        rc = journal_roll(j, err);
        if (rc)
            return rc;
    }
    sealed_batch_t sealed;
    rc = journal_seal_batch(j, buf, len, &sealed, err);
    if (rc)
        return rc;
    rc = journal_write_batch(j, buf, len);
    if (rc)
        return journal_halt(j, err, rc, NULL,
                            "could not write segment %s at offset %" PRIu64 ": %s",
                            journal_seg_name(name, j->active_first_seq), j->write_off,
                            jerr_errno_text(rc, ebuf, sizeof ebuf));
    if (info)
        journal_fill_batch_info(j, buf, &sealed, rolled, info);
    journal_advance(j, len, &sealed);
    return 0;
}

/* After a sync: the bytes it carried, into a moving average (1/8 weight) the preparer
 * reads (journal_zero_fill_now). */
static void
journal_note_sync_bytes(journal_t *j)
{
    uint64_t avg = atomic_load_explicit(&j->sync_bytes_avg, memory_order_relaxed);
    avg = avg ? (avg * 7 + j->bytes_since_sync) / 8 : j->bytes_since_sync;
    atomic_store_explicit(&j->sync_bytes_avg, avg, memory_order_relaxed);
    j->bytes_since_sync = 0;
}

int
journal_sync(journal_t *j, stele_error_t *err)
{
    char name[SEG_NAME_BYTES], ebuf[64];
    if (!j)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_sync needs a journal");
    int rc = journal_check_halted(j, err);
    if (rc)
        return rc;
    uint64_t written = atomic_load(&j->last_seq);
    rc = j->io->fdatasync(j->io->ctx, j->active_fd);
    /* Never retried: after a failed fdatasync the kernel may have dropped the dirty pages
     * and a second call could report success for data that is gone. */
    if (rc)
        return journal_halt(j, err, rc, JERR_HINT_VERIFY, "could not sync segment %s: %s",
                            journal_seg_name(name, j->active_first_seq),
                            jerr_errno_text(rc, ebuf, sizeof ebuf));
    atomic_fetch_add_explicit(&j->syncs, 1, memory_order_relaxed);
    atomic_store_explicit(&j->durable_seq, written, memory_order_release);
    journal_note_sync_bytes(j);
    return 0;
}

void
journal_publish(journal_t *j, uint64_t visible_seq, uint64_t durable_seq)
{
    if (j && j->shared)
        shared_publish(j->shared, visible_seq, durable_seq);
}

uint64_t
journal_last_seq(const journal_t *j)
{
    return j ? atomic_load_explicit(&((journal_t *)j)->last_seq, memory_order_acquire) : 0;
}

void
journal_active_position(const journal_t *j, journal_active_t *out)
{
    *out = j ? (journal_active_t){j->active_first_seq, j->write_off, j->active_bytes}
             : (journal_active_t){0, 0, 0};
}

uint64_t
journal_segment_bytes(const journal_t *j)
{
    return j ? j->opts.segment_bytes : 0;
}

const char *
journal_source(const journal_t *j)
{
    return j ? j->source : "";
}

/* ---------------------------------------------------------------------------------------
 * Retention and stats
 * --------------------------------------------------------------------------------------- */

/* Remembers a failure that did not endanger the log, for journal_close to report. */
static void
journal_defer_error(journal_t *j, int rc, const char *what, const char *obj)
{
    char ebuf[64];
    pthread_mutex_lock(&j->mu);
    if (!j->deferred_rc) {
        j->deferred_rc = rc;
        snprintf(j->deferred_msg, sizeof j->deferred_msg, "could not %s %s: %s", what, obj,
                 jerr_errno_text(rc, ebuf, sizeof ebuf));
    }
    pthread_mutex_unlock(&j->mu);
}

int
journal_delete_before(journal_t *j, uint64_t seq, stele_error_t *err)
{
    char path[PATH_MAX], name[SEG_NAME_BYTES];
    if (!j)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_delete_before needs a journal");
    int rc = journal_check_halted(j, err);
    if (rc)
        return rc;
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
        journal_seg_name(name, victim);
        rc = segment_path(path, sizeof path, j->dir, victim);
        if (!rc)
            rc = j->io->unlink(j->io->ctx, path);
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
        int sync_rc = j->io->sync_dir(j->io->ctx, j->dir);
        if (sync_rc)
            journal_defer_error(j, sync_rc, "sync journal directory", j->dir);
    }
    pthread_mutex_unlock(&j->retention_mu);
    return deleted ? deleted : rc;
}

void
journal_stats(journal_t *j, journal_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!j)
        return;
    char path[PATH_MAX];
    out->last_seq = atomic_load(&j->last_seq);
    out->syncs = atomic_load(&j->syncs);
    pthread_mutex_lock(&j->mu);
    size_t n = j->n_segs;
    uint64_t *seqs = malloc((n ? n : 1) * sizeof *seqs);
    if (seqs)
        memcpy(seqs, j->seg_seqs, n * sizeof *seqs);
    int prepared = j->prep_fd >= 0;
    pthread_mutex_unlock(&j->mu);
    if (!seqs)
        return;
    out->segments = n + (prepared ? 1 : 0);
    out->first_seq = n && out->last_seq >= seqs[0] ? seqs[0] : 0;
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (segment_path(path, sizeof path, j->dir, seqs[i]) != 0 || stat(path, &st) != 0)
            continue;
        out->disk_bytes += (uint64_t)st.st_blocks * 512u;
        if (i + 1 < n)
            out->sealed_bytes += (uint64_t)st.st_blocks * 512u;
    }
    if (prepared &&
        snprintf(path, sizeof path, "%s/%s", j->dir, SEG_PREPARED_NAME) < (int)sizeof path) {
        struct stat st;
        if (stat(path, &st) == 0)
            out->disk_bytes += (uint64_t)st.st_blocks * 512u;
    }
    free(seqs);
}

/* ---------------------------------------------------------------------------------------
 * Close
 * --------------------------------------------------------------------------------------- */

int
journal_close(journal_t *j, stele_error_t *err)
{
    if (!j)
        return 0;
    journal_preparer_stop(j);
    int rc = atomic_load(&j->sticky_rc);
    if (rc) {
        jerr_set(err, rc, NULL, "journal %s halted: %s", j->dir ? j->dir : "", j->sticky_msg);
    } else if (j->is_open) {
        rc = journal_sync(j, err);
        if (!rc) {
            uint64_t last = atomic_load(&j->last_seq);
            shared_publish(j->shared, last, last);
        }
        if (!rc && j->prep_rc) {
            /* The log is fine, but the next segment could not be made: say so, or a full
             * disk would go unnoticed until the next roll. */
            char ebuf[64];
            rc = jerr_set(err, j->prep_rc, NULL, "could not prepare the next segment of %s: %s",
                          j->dir, jerr_errno_text(j->prep_rc, ebuf, sizeof ebuf));
        }
    }
    int direct_rc = direct_close(&j->direct, j->io);
    if (direct_rc)
        journal_defer_error(j, direct_rc, "close", "the active segment");
    direct_free(&j->direct);
    if (j->active_fd >= 0)
        journal_close_fd(j, j->active_fd, "the active segment");
    if (!rc && j->is_open && j->deferred_rc)
        rc = jerr_set(err, j->deferred_rc, NULL, "%s", j->deferred_msg);
    shared_close_writer(j->lock_fd, j->shared);
    chain_hasher_free(j->hasher);
    pthread_cond_destroy(&j->prep_cv);
    pthread_mutex_destroy(&j->retention_mu);
    pthread_mutex_destroy(&j->mu);
    free(j->seg_seqs);
    free(j->dir);
    free(j);
    return rc;
}
