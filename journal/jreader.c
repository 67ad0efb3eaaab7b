/*
 * jreader.c: the read side of journal.h, usable from any process, read-only (a read-only
 * directory works). A reader walks segments in seq order through the I/O table, checks
 * every frame (rules F1-F5), that seqs follow and the chain hash (each segment by its own
 * format version), and returns only committed records (version 2's meta frames, checkpoints
 * and key statements, only when asked: journal_reader_set_meta):
 *  - with a live writer (it holds the LOCK's OFD lock): records <= the published
 *    visible_seq (the engine publishes durable_seq there with sync=always);
 *  - with no writer: records up to the last complete batch (BATCH_END) on disk; a torn
 *    tail is left for the next writer's recovery.
 * Corruption (a bad frame that must be valid, a seq gap, a broken chain, damage in a sealed
 * segment) is reported with segment and offset. A segment the reader needs next that
 * retention deleted meanwhile (every segment left starts past it) is no corruption:
 * STELE_ERETAINED names the records it lost, and a seek goes on from the oldest. A current
 * segment with no record read from it is opened again by name when it shows no frame: a roll
 * may have replaced that empty newest file (FORMAT.md, "Writing"). A reader belongs to one
 * thread; it has no locks. The LOCK page is mapped read-only and never written. Like the
 * writer, a reader opens the directory once and every file relative to it, never through a
 * link (jdir.h); whether others could change the directory is journal_reader_check_dir's
 * question, asked by the engine's public readers.
 */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "chain.h"
#include "format.h"
#include "jdir.h"
#include "jerr.h"
#include "merkle.h"
#include "record.h"
#include "segment.h"
#include "lockfile.h"

/* Reads are buffered in chunks this large; at the writer's end (the buffer held the next
 * frame's place before the writer wrote it) this small: a reader that follows a lone writer
 * reads again for every record, and a whole chunk each time is a 256 KiB copy, or with the
 * writer's direct writes (which leave nothing in the page cache) a 256 KiB device read. */
enum { READER_CHUNK_BYTES = 256 * 1024, READER_TAIL_BYTES = 16 * 1024 };
/* With no live writer there is nothing to sleep on; re-check the files this often. */
enum { READER_POLL_MS = 10 };
/* A futex wait is cut into slices this long so a writer that dies is noticed. */
enum { READER_WAIT_SLICE_MS = 100 };

struct journal_reader {
    char *dir;  /* for messages: files are reached through dir_fd */
    int dir_fd; /* the journal directory, opened once (jdir.h) */
    const journal_io_t *io;
    int lock_fd;
    lockfile_page_t *lock_page; /* NULL until a writer has made LOCK */
    chain_hasher_t *hasher;
    merkle_hasher_t *mhasher; /* version 2's leaf hashes */
    int want_meta;            /* return meta frames too (journal_reader_set_meta) */
    /* The LOCK page's futex word when a look past the published end last found no meta
     * frame (reader_meta_is_next); valid when has_looked. */
    uint32_t looked_word;
    int has_looked;
    char source[SEG_SOURCE_BYTES];
    uint8_t genesis[HASH_BYTES];
    uint32_t version;
    int have_genesis;

    /* -- cursor -- */
    int seg_fd;
    uint32_t seg_version; /* the current segment's format version */
    uint64_t seg_first_seq;
    int64_t seg_created_ns; /* its header's: tells a file replaced under the same name */
    uint64_t seg_bytes;
    uint64_t off;      /* the next frame */
    uint64_t next_seq; /* its seq */
    uint64_t min_seq;  /* records below this are skipped (set by seek) */
    uint8_t prev_hash[HASH_BYTES];
    int have_prev; /* 0 after a hinted seek until the first frame is read */
    int64_t prev_ts_ns;
    uint64_t batch_end_off; /* with no writer: frames before this end a complete batch */

    /* -- read buffer over the current segment -- */
    uint8_t *buf;
    size_t buf_cap;
    uint64_t buf_off;
    size_t buf_len;
};

static const char *
reader_seg_name(char buf[SEG_NAME_BYTES], uint64_t first_seq)
{
    segment_name(buf, first_seq);
    return buf;
}

static int
reader_fail_errno(stele_error_t *err, int rc, const char *what, const char *obj)
{
    char ebuf[64];
    return jerr_set(err, rc, rc == -ELOOP ? JERR_HINT_LINK : NULL, "could not %s %s: %s", what, obj,
                    jerr_errno_text(rc, ebuf, sizeof ebuf));
}

static void
reader_close_segment(journal_reader_t *r)
{
    if (r->seg_fd >= 0)
        r->io->close(r->io->ctx, r->seg_fd);
    r->seg_fd = -1;
    r->buf_len = 0;
    r->batch_end_off = 0;
}

/* Opens segment first_seq and checks its header; the cursor is not touched. Returns 0 with
 * *fd_out and *bytes_out, -ENOENT (no such segment), STELE_ECORRUPT, STELE_EVERSION or
 * -errno. */
static int
reader_open_segment(journal_reader_t *r, uint64_t first_seq, segment_header_t *h, int *fd_out,
                    uint64_t *bytes_out, stele_error_t *err)
{
    char name[SEG_NAME_BYTES];
    segment_header_fault_t fault = {0};
    reader_seg_name(name, first_seq);
    int fd = r->io->open_file(r->io->ctx, r->dir_fd, name, JOURNAL_IO_READ, 0);
    if (fd == -ENOENT)
        return fd;
    if (fd < 0)
        return reader_fail_errno(err, fd, "open segment", name);
    off_t size = 0;
    int rc = segment_header_read(r->io, fd, h, &fault);
    if (!rc)
        rc = r->io->file_size(r->io->ctx, fd, &size);
    if (rc == STELE_EVERSION) {
        jerr_set(err, rc, "upgrade stele to read this journal",
                 "segment %s has format version %u; this stele reads up to %u", name, h->version,
                 FORMAT_VERSION);
    } else if (rc == STELE_ECORRUPT) {
        jerr_set(err, rc, JERR_HINT_VERIFY, "segment %s offset %" PRIu32 ": %s", name, fault.offset,
                 fault.why);
    } else if (!rc && h->first_seq != first_seq) {
        rc = jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                      "segment %s offset 0: header says first seq %" PRIu64, name, h->first_seq);
    } else if (!rc && r->have_genesis && memcmp(h->genesis, r->genesis, HASH_BYTES) != 0) {
        rc = jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                      "segment %s offset 0: genesis differs: not from this journal", name);
    } else if (rc) {
        reader_fail_errno(err, rc, "read segment", name);
    }
    if (rc) {
        r->io->close(r->io->ctx, fd);
        return rc;
    }
    if (!r->have_genesis) {
        memcpy(r->genesis, h->genesis, HASH_BYTES);
        memcpy(r->source, h->source, SEG_SOURCE_BYTES);
        r->version = h->version;
        r->have_genesis = 1;
    }
    *fd_out = fd;
    *bytes_out = (uint64_t)size;
    return 0;
}

/* Moves the cursor to the first frame of segment first_seq. A segment that does not
 * continue the chain is refused like any other bad header: the cursor stays where it was,
 * so asking again reports the same damage. */
static int
reader_enter_segment(journal_reader_t *r, uint64_t first_seq, stele_error_t *err)
{
    segment_header_t h;
    int fd = -1;
    uint64_t seg_bytes = 0;
    int rc = reader_open_segment(r, first_seq, &h, &fd, &seg_bytes, err);
    if (rc)
        return rc;
    if (r->have_prev && r->next_seq == first_seq &&
        memcmp(h.prev_hash, r->prev_hash, HASH_BYTES) != 0) {
        char name[SEG_NAME_BYTES];
        r->io->close(r->io->ctx, fd);
        return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                        "segment %s offset 0: prev_hash does not match the previous segment's "
                        "last record",
                        reader_seg_name(name, first_seq));
    }
    reader_close_segment(r);
    r->seg_fd = fd;
    r->seg_version = h.version;
    r->seg_first_seq = first_seq;
    r->seg_created_ns = h.created_ns;
    r->seg_bytes = seg_bytes;
    r->off = SEG_HEADER_BYTES;
    r->next_seq = first_seq;
    memcpy(r->prev_hash, h.prev_hash, HASH_BYTES);
    r->prev_ts_ns = h.prev_ts_ns;
    r->have_prev = 1;
    return 0;
}

static void
reader_try_map_lock_page(journal_reader_t *r)
{
    if (!r->lock_page)
        lockfile_open_reader(r->dir_fd, &r->lock_fd, &r->lock_page);
}

/* A reader of `dir` with nothing open yet; NULL when out of memory. */
static journal_reader_t *
reader_alloc(const char *dir, const journal_io_t *io)
{
    journal_reader_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->io = io ? io : journal_io_posix();
    r->dir_fd = -1;
    r->lock_fd = -1;
    r->seg_fd = -1;
    r->dir = strdup(dir);
    r->hasher = chain_hasher_new();
    r->mhasher = merkle_hasher_new();
    r->next_seq = 1;
    r->min_seq = 1;
    if (r->dir && r->hasher && r->mhasher)
        return r;
    journal_reader_close(r);
    return NULL;
}

/* Opens the journal directory and checks that it holds a journal: segments or a LOCK. */
static int
reader_open_dir(journal_reader_t *r, segment_dir_t *d, stele_error_t *err)
{
    int rc = jdir_open(r->io, r->dir, &r->dir_fd, err);
    if (rc == STELE_EUNSAFE || rc == STELE_ENOTJOURNAL)
        return rc;
    if (rc)
        return reader_fail_errno(err, rc, "open journal directory", r->dir);
    rc = segment_dir_list(r->dir_fd, d);
    if (rc)
        return reader_fail_errno(err, rc, "list journal directory", r->dir);
    if (d->n == 0 && !d->has_lock) {
        segment_dir_free(d);
        return jerr_set(err, STELE_ENOTJOURNAL, NULL, "%s is not a stele journal", r->dir);
    }
    return 0;
}

int
journal_reader_open(const char *dir, const journal_io_t *io, journal_reader_t **out,
                    stele_error_t *err)
{
    if (!dir || !out)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_reader_open needs a directory");
    *out = NULL;
    journal_reader_t *r = reader_alloc(dir, io);
    if (!r)
        return jerr_set(err, -ENOMEM, NULL, "out of memory");
    segment_dir_t d;
    int rc = reader_open_dir(r, &d, err);
    if (rc) {
        journal_reader_close(r);
        return rc;
    }
    rc = lockfile_open_reader(r->dir_fd, &r->lock_fd, &r->lock_page);
    if (rc) {
        reader_fail_errno(err, rc, "map the lock file of", dir);
        goto fail;
    }
    if (d.n > 0) {
        rc = reader_enter_segment(r, d.seqs[0], err);
        if (rc == -ENOENT) /* deleted by retention meanwhile: seek finds the new oldest */
            rc = 0;
        if (rc)
            goto fail;
    }
    segment_dir_free(&d);
    *out = r;
    return 0;
fail:
    segment_dir_free(&d);
    journal_reader_close(r);
    return rc;
}

int
journal_reader_check_dir(const journal_reader_t *r, stele_error_t *err)
{
    if (!r)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_reader_check_dir needs a reader");
    return jdir_check(r->dir_fd, r->dir, JDIR_READER, err);
}

int
journal_reader_dir_fd(const journal_reader_t *r)
{
    return r ? r->dir_fd : -1;
}

void
journal_reader_close(journal_reader_t *r)
{
    if (!r)
        return;
    reader_close_segment(r);
    lockfile_close_reader(r->lock_fd, r->lock_page);
    if (r->dir_fd >= 0)
        r->io->close(r->io->ctx, r->dir_fd);
    chain_hasher_free(r->hasher);
    merkle_hasher_free(r->mhasher);
    free(r->buf);
    free(r->dir);
    free(r);
}

/* Decodes the frame at r->off; fresh from disk when the buffer cannot settle it (frames past
 * the writer's end change, so a buffered non-valid answer is never trusted). */
static int
reader_decode(journal_reader_t *r, record_status_t *st, record_view_t *v)
{
    uint64_t room = r->seg_bytes > r->off ? r->seg_bytes - r->off : 0;
    if (room == 0) {
        *st = RECORD_ZERO;
        return 0;
    }
    uint64_t need = READER_CHUNK_BYTES;
    if (r->off >= r->buf_off && r->off < r->buf_off + r->buf_len) {
        size_t avail = (size_t)(r->buf_off + r->buf_len - r->off);
        *st = record_decode(r->seg_version, r->buf + (r->off - r->buf_off), avail, room, r->off, v);
        if (*st == RECORD_VALID)
            return 0;
        if (*st != RECORD_NEED_MORE)
            need = READER_TAIL_BYTES;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        if (need > room)
            need = room;
        if (need > r->buf_cap) {
            uint8_t *grown = realloc(r->buf, (size_t)need);
            if (!grown)
                return -ENOMEM;
            r->buf = grown;
            r->buf_cap = (size_t)need;
        }
        ssize_t n = r->io->pread(r->io->ctx, r->seg_fd, r->buf, (size_t)need, (off_t)r->off);
        if (n < 0)
            return (int)n;
        r->buf_off = r->off;
        r->buf_len = (size_t)n;
        /* Only a short read (the file ends early) bounds the frame at what was read; a frame
         * larger than the chunk needs a second, larger read, not a bad-length verdict. */
        *st = record_decode(r->seg_version, r->buf, (size_t)n,
                            (uint64_t)n < need ? (uint64_t)n : room, r->off, v);
        if (*st != RECORD_NEED_MORE)
            return 0;
        if ((uint64_t)n < need) {
            *st = RECORD_TORN; /* the file ends inside the frame */
            return 0;
        }
        need = format_frame_bytes(r->seg_version, format_load_u32(r->buf + FRAME_OFF_PAYLOAD_LEN));
    }
    *st = RECORD_TORN;
    return 0;
}

/* 1 when some segment newer than the current one exists (so the current one is sealed). */
static int
reader_segment_is_sealed(const journal_reader_t *r)
{
    segment_dir_t d;
    if (segment_dir_list(r->dir_fd, &d))
        return 0;
    int sealed = d.n > 0 && d.seqs[d.n - 1] > r->seg_first_seq;
    segment_dir_free(&d);
    return sealed;
}

/* Is the frame at r->off part of a batch whose end is on disk? Walks forward without
 * hashing and remembers the batch end; when not, *bad_off and *bad say where and why. */
static int
reader_batch_complete(journal_reader_t *r, int *complete, uint64_t *bad_off, record_status_t *bad)
{
    *complete = 0;
    uint64_t saved_off = r->off;
    int rc = 0;
    for (;;) {
        record_status_t st;
        record_view_t v;
        rc = reader_decode(r, &st, &v);
        if (rc)
            break;
        if (st != RECORD_VALID) {
            *bad_off = r->off;
            *bad = st;
            break;
        }
        r->off += v.frame_bytes;
        if (v.flags & FRAME_FLAG_BATCH_END) {
            r->batch_end_off = r->off;
            *complete = 1;
            break;
        }
    }
    r->off = saved_off;
    return rc;
}

static int
reader_corrupt_at(const journal_reader_t *r, uint64_t off, stele_error_t *err, const char *what)
{
    char name[SEG_NAME_BYTES];
    return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY, "segment %s offset %" PRIu64 ": %s",
                    reader_seg_name(name, r->seg_first_seq), off, what);
}

static int
reader_corrupt(const journal_reader_t *r, stele_error_t *err, const char *what)
{
    return reader_corrupt_at(r, r->off, err, what);
}

/*
 * The current segment has no record yet, so it is the newest, and a roll can replace it with
 * a new file of the same name (journal_install_next: the power failed right after a roll,
 * and the next writer's first batch does not fit that file); the descriptor would go on
 * reading the replaced file, empty for ever. No record has been read from it, so entering it
 * again by name loses nothing. *has_frame says the file now under the name is another one
 * and does not start with zeros (a frame, or damage the caller judges). The same file (its
 * header's creation time unchanged) may hold meta frames the cursor has already passed
 * (a signed journal's checkpoint or key statement before its first record): the cursor goes
 * back to where it was, or it would walk them again and again.
 */
static int
reader_reenter_empty_segment(journal_reader_t *r, int *has_frame, stele_error_t *err)
{
    *has_frame = 0;
    int64_t created_ns = r->seg_created_ns, prev_ts_ns = r->prev_ts_ns;
    uint64_t off = r->off;
    int rc = reader_enter_segment(r, r->seg_first_seq, err);
    if (rc == -ENOENT) /* gone meanwhile: the caller's verdict on the old file stands */
        return 0;
    if (rc)
        return rc;
    if (r->seg_created_ns == created_ns) {
        r->off = off;
        r->prev_ts_ns = prev_ts_ns;
        return 0;
    }
    record_status_t st;
    record_view_t v;
    rc = reader_decode(r, &st, &v);
    if (rc)
        return reader_fail_errno(err, rc, "read journal", r->dir);
    *has_frame = st != RECORD_ZERO;
    return 0;
}

/* The segment holding next_seq is gone. Retention deletes whole segments, oldest first: when
 * the oldest segment left starts past next_seq, the records in between were deleted by
 * retention while this reader was behind (STELE_ERETAINED, naming them). A hole above the
 * oldest segment is no retention: 0 then, for the caller to judge. */
static int
reader_behind_retention(journal_reader_t *r, stele_error_t *err)
{
    segment_dir_t d;
    if (segment_dir_list(r->dir_fd, &d) != 0)
        return 0;
    uint64_t oldest = d.n ? d.seqs[0] : 0;
    segment_dir_free(&d);
    if (oldest <= r->next_seq)
        return 0;
    return jerr_set(err, STELE_ERETAINED,
                    "seek to the oldest record to go on from there, or keep segments longer "
                    "(retention_bytes, retention_seconds)",
                    "records %" PRIu64 "-%" PRIu64 " were deleted by retention before they "
                    "were read; the journal now starts at seq %" PRIu64,
                    r->next_seq, oldest - 1, oldest);
}

/* The end of the current segment was reached: go on to the segment starting at next_seq
 * (or to the file that replaced an empty current one). Returns 0 (moved), STELE_EAGAIN
 * (not there yet), STELE_ERETAINED (retention deleted it) or an error. */
static int
reader_next_segment(journal_reader_t *r, int must_exist, stele_error_t *err)
{
    if (r->seg_fd >= 0 && r->next_seq == r->seg_first_seq) {
        int has_frame = 0;
        int rc = reader_reenter_empty_segment(r, &has_frame, err);
        if (rc || has_frame)
            return rc;
        if (must_exist)
            return reader_corrupt(r, err, "committed record missing");
        return STELE_EAGAIN;
    }
    int rc = reader_enter_segment(r, r->next_seq, err);
    if (rc != -ENOENT)
        return rc;
    if ((rc = reader_behind_retention(r, err)) != 0)
        return rc;
    if (must_exist) {
        char what[96];
        snprintf(what, sizeof what, "record %" PRIu64 " is committed but its segment is missing",
                 r->next_seq);
        return reader_corrupt(r, err, what);
    }
    return STELE_EAGAIN;
}

/* What the LOCK page says about the record at the cursor. */
typedef struct reader_vis {
    int committed; /* published: must be there if a writer lives */
    /* fdatasynced, as the last writer said (even one that is gone: the page is only ever
     * behind the disk): damage here is corruption, never a torn tail. */
    int durable;
    int live; /* a writer holds the lock; -1 until needed: it costs a syscall */
} reader_vis_t;

/* Returns 1 when a live writer has not published the record yet: nothing to read. */
static int
reader_load_vis(journal_reader_t *r, reader_vis_t *vis)
{
    reader_try_map_lock_page(r);
    uint64_t visible =
        r->lock_page ? atomic_load_explicit(&r->lock_page->visible_seq, memory_order_acquire) : 0;
    vis->committed = r->next_seq <= visible;
    vis->durable = r->lock_page && r->next_seq <= atomic_load_explicit(&r->lock_page->durable_seq,
                                                                       memory_order_acquire);
    vis->live = -1;
    if (!vis->committed) {
        vis->live = lockfile_writer_pid(r->lock_fd, r->lock_page) != 0;
        return vis->live;
    }
    return 0;
}

/* 1 when damage at the cursor is corruption: the record was published by a writer that
 * still lives, or is durable. */
static int
reader_must_exist(const journal_reader_t *r, reader_vis_t *vis)
{
    if (vis->live < 0)
        vis->live = lockfile_writer_pid(r->lock_fd, r->lock_page) != 0;
    return (vis->committed && vis->live) || vis->durable;
}

/* The cursor is not at a valid frame. Zeros end the segment; anything else is a torn tail
 * the next writer's recovery settles, unless the record must exist or the segment is
 * sealed. Returns 0 (moved to the next segment), STELE_EAGAIN or an error. */
static int
reader_at_invalid(journal_reader_t *r, record_status_t st, reader_vis_t *vis, stele_error_t *err)
{
    int must = reader_must_exist(r, vis);
    if (st == RECORD_ZERO) {
        int rc = reader_next_segment(r, must, err);
        if (rc != STELE_EAGAIN || !reader_segment_is_sealed(r))
            return rc;
        return reader_corrupt(r, err, "records missing at the end of a sealed segment");
    }
    if (must || reader_segment_is_sealed(r))
        return reader_corrupt(r, err, record_status_name(st));
    return STELE_EAGAIN;
}

/* S1 and S2 against the frame before the cursor (a meta frame carries the seq of the
 * record before it). */
static int
reader_check_follows(const journal_reader_t *r, const record_view_t *v, stele_error_t *err)
{
    uint64_t due = v->is_meta ? r->next_seq - 1 : r->next_seq;
    if (v->seq != due) {
        char what[96];
        snprintf(what, sizeof what, "seq %" PRIu64 " where %" PRIu64 " was due", v->seq, due);
        return reader_corrupt(r, err, what);
    }
    if (v->ts_ns < r->prev_ts_ns && r->have_prev)
        return reader_corrupt(r, err, "timestamp goes back");
    return 0;
}

/* Only whole batches are returned, even when published: a position a dead writer left
 * behind may name a batch that power loss tore. Returns 0 when the frame at the cursor is
 * to be decoded again (the walk moved the buffer), STELE_EAGAIN or an error. */
static int
reader_settle_batch(journal_reader_t *r, reader_vis_t *vis, stele_error_t *err)
{
    int complete = 0;
    uint64_t bad_off = r->off;
    record_status_t bad = RECORD_TORN;
    int rc = reader_batch_complete(r, &complete, &bad_off, &bad);
    if (rc)
        return reader_fail_errno(err, rc, "read journal", r->dir);
    if (complete)
        return 0;
    if (!reader_must_exist(r, vis) && !reader_segment_is_sealed(r))
        return STELE_EAGAIN; /* a batch being written, or a torn tail */
    /* Corruption: the intact records before it are still returned, and the error comes
     * when the cursor reaches the damaged frame, naming its seq. */
    r->batch_end_off = bad_off;
    return 0;
}

/* S3, checkable once the previous record's hash is known (not right after a hinted seek).
 * A version 2 record's leaf hash is computed into leaf either way. */
static int
reader_check_chain(const journal_reader_t *r, const record_view_t *v,
                   uint8_t leaf[MERKLE_HASH_BYTES], stele_error_t *err)
{
    memset(leaf, 0, MERKLE_HASH_BYTES);
    if (v->is_meta)
        return 0; /* not in the chain */
    int rc = r->seg_version >= 2 ? record_leaf_hash(r->mhasher, v->frame, v->payload_len, leaf) : 0;
    if (rc || !r->have_prev)
        return rc ? jerr_set(err, rc, NULL, "could not hash record: out of memory") : 0;
    uint8_t calc[HASH_BYTES];
    rc = r->seg_version >= 2 ? chain_link(r->hasher, r->prev_hash, leaf, calc)
                             : chain_hash(r->hasher, r->prev_hash, v->seq, v->ts_ns, v->payload,
                                          v->payload_len, calc);
    if (rc)
        return jerr_set(err, rc, NULL, "could not hash record: out of memory");
    if (memcmp(calc, v->hash, HASH_BYTES) != 0) {
        char what[96];
        snprintf(what, sizeof what, "chain hash of seq %" PRIu64 " does not match", v->seq);
        return reader_corrupt(r, err, what);
    }
    return 0;
}

static void
reader_fill_record(const journal_reader_t *r, const record_view_t *v,
                   const uint8_t leaf[MERKLE_HASH_BYTES], journal_record_t *rec)
{
    rec->seq = v->seq;
    rec->ts_ns = v->ts_ns;
    rec->payload = v->payload;
    rec->payload_len = v->payload_len;
    memcpy(rec->hash, v->hash, HASH_BYTES);
    if (r->have_prev && !v->is_meta)
        memcpy(rec->prev_hash, r->prev_hash, HASH_BYTES);
    else
        memset(rec->prev_hash, 0, HASH_BYTES);
    memcpy(rec->leaf_hash, leaf, MERKLE_HASH_BYTES);
    rec->origin = (journal_origin_t){v->origin_uid, v->origin_gid, v->origin_pid, v->origin_kind};
    rec->version = r->seg_version;
    rec->segment_seq = r->seg_first_seq;
    rec->offset = r->off;
    rec->frame_bytes = v->frame_bytes;
    rec->is_batch_end = (v->flags & FRAME_FLAG_BATCH_END) != 0;
    rec->is_meta = v->is_meta;
}

/* Past the frame at the cursor: a record joins the chain; a meta frame only takes room. */
static void
reader_consume(journal_reader_t *r, const record_view_t *v)
{
    r->prev_ts_ns = v->ts_ns;
    r->off += v->frame_bytes;
    if (v->is_meta)
        return;
    memcpy(r->prev_hash, v->hash, HASH_BYTES);
    r->have_prev = 1;
    r->next_seq++;
}

/* Whether the reader returns the frame just checked: a record at or past min_seq, or, when
 * meta frames are wanted, one that follows the record before min_seq or a later one. */
static int
reader_wants(const journal_reader_t *r, const record_view_t *v)
{
    if (v->is_meta)
        return r->want_meta && v->seq + 1 >= r->min_seq;
    return v->seq >= r->min_seq;
}

/* 1 when the frame at the cursor is a complete meta frame that follows the last record read.
 * A live writer publishes record seqs only: without this, a checkpoint written after the
 * last record (an idle journal's, a close's) would reach a reader that wants statements,
 * such as a shipper, only with the next record. */
static int
reader_meta_at_cursor(journal_reader_t *r)
{
    uint8_t head[FRAME_OFF_FLAGS + 4];
    if (r->io->pread(r->io->ctx, r->seg_fd, head, sizeof head, (off_t)r->off) !=
            (ssize_t)sizeof head ||
        format_load_u32(head) != FRAME_MAGIC ||
        !(format_load_u32(head + FRAME_OFF_FLAGS) & FRAME_FLAG_META))
        return 0; /* the common case, an idle end: one small read, not a chunk */
    record_status_t st;
    record_view_t v;
    return reader_decode(r, &st, &v) == 0 && st == RECORD_VALID && v.is_meta &&
           v.seq + 1 == r->next_seq && (v.flags & FRAME_FLAG_BATCH_END);
}

/* reader_meta_at_cursor, only when the writer may have written a statement since the last
 * look found none: it bumps the LOCK page's futex word after each batch and each statement
 * (the word is read before the look, so a publish during it is not missed). A look reads the
 * page the writer writes next: looking at every call would make a shipper read that page
 * while the writer writes it again (a lone writer's direct write then takes 190 us, not 75).
 * Without a LOCK page there is no word to go by: always. */
static int
reader_meta_is_next(journal_reader_t *r)
{
    if (!r->want_meta || r->seg_fd < 0 || r->seg_version < 2)
        return 0;
    uint32_t word = 0;
    if (r->lock_page) {
        word = atomic_load_explicit(&r->lock_page->futex_word, memory_order_acquire);
        if (r->has_looked && word == r->looked_word)
            return 0;
    }
    int is_next = reader_meta_at_cursor(r);
    r->has_looked = !is_next && r->lock_page;
    r->looked_word = word;
    return is_next;
}

/* The core of next/wait: finds the next returnable record. With consume 0 the cursor stays
 * on it (skipped records below min_seq are still consumed). */
static int
reader_step(journal_reader_t *r, journal_record_t *rec, int consume, stele_error_t *err)
{
    for (;;) {
        if (r->seg_fd < 0) {
            int rc = reader_next_segment(r, 0, err);
            if (rc)
                return rc;
        }
        reader_vis_t vis;
        if (reader_load_vis(r, &vis) && !reader_meta_is_next(r))
            return STELE_EAGAIN;
        record_status_t st;
        record_view_t v;
        int rc = reader_decode(r, &st, &v);
        if (rc)
            return reader_fail_errno(err, rc, "read journal", r->dir);
        if (st != RECORD_VALID) {
            rc = reader_at_invalid(r, st, &vis, err);
            if (rc)
                return rc;
            continue; /* in the next segment */
        }
        rc = reader_check_follows(r, &v, err);
        if (rc)
            return rc;
        if (r->off >= r->batch_end_off) {
            rc = reader_settle_batch(r, &vis, err);
            if (rc)
                return rc;
            continue; /* the walk moved the buffer: decode this frame again */
        }
        int wanted = reader_wants(r, &v);
        if (wanted) {
            uint8_t leaf[MERKLE_HASH_BYTES];
            rc = reader_check_chain(r, &v, leaf, err);
            if (rc)
                return rc;
            reader_fill_record(r, &v, leaf, rec);
            if (!consume)
                return 0;
        }
        reader_consume(r, &v);
        if (wanted)
            return 0;
    }
}

int
journal_reader_next(journal_reader_t *r, journal_record_t *rec, stele_error_t *err)
{
    if (!r || !rec)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_reader_next needs a reader and a record");
    return reader_step(r, rec, 1, err);
}

/* Moves the cursor from segment seg's first frame to the hinted one. A hint is used only
 * when its frame checks out and precedes seq (the target's prev_hash is then read on the
 * way); a wrong hint just costs the scan. */
static void
reader_try_hint(journal_reader_t *r, uint64_t seq, uint64_t seg, uint64_t hint_segment_seq,
                uint64_t hint_offset)
{
    if (hint_segment_seq != seg || hint_offset <= SEG_HEADER_BYTES ||
        hint_offset % FRAME_ALIGN != 0 || hint_offset >= r->seg_bytes)
        return;
    uint64_t saved = r->off;
    record_status_t st;
    record_view_t v;
    r->off = hint_offset;
    int rc = reader_decode(r, &st, &v);
    if (!rc && st == RECORD_VALID && !v.is_meta && v.seq < seq && v.seq >= seg) {
        r->next_seq = v.seq;
        r->have_prev = 0;
    } else {
        r->off = saved;
    }
}

int
journal_reader_seek(journal_reader_t *r, uint64_t seq, uint64_t hint_segment_seq,
                    uint64_t hint_offset, stele_error_t *err)
{
    if (!r)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_reader_seek needs a reader");
    if (seq == 0)
        seq = 1;
    r->has_looked = 0; /* another place: a statement may wait there */
    segment_dir_t d;
    int rc = segment_dir_list(r->dir_fd, &d);
    if (rc)
        return reader_fail_errno(err, rc, "list journal directory", r->dir);
    if (d.n == 0) {
        segment_dir_free(&d);
        reader_close_segment(r);
        r->next_seq = 1;
        r->have_prev = 0;
        r->min_seq = seq;
        return 0;
    }
    size_t i = d.n;
    while (i > 0 && d.seqs[i - 1] > seq)
        i--;
    int too_old = i == 0;
    uint64_t seg = d.seqs[too_old ? 0 : i - 1];
    segment_dir_free(&d);
    r->have_prev = 0;
    rc = reader_enter_segment(r, seg, err);
    if (rc == -ENOENT) /* deleted meanwhile by retention: try again from the new oldest */
        return journal_reader_seek(r, seq, 0, 0, err);
    if (rc)
        return rc;
    r->min_seq = too_old ? seg : seq;
    reader_try_hint(r, seq, seg, hint_segment_seq, hint_offset);
    r->batch_end_off = 0;
    if (too_old) {
        char name[SEG_NAME_BYTES];
        return jerr_set(err, STELE_ENOTFOUND, NULL,
                        "seq %" PRIu64 " is older than the oldest segment %s", seq,
                        reader_seg_name(name, seg));
    }
    return 0;
}

static int64_t
reader_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
journal_reader_wait(journal_reader_t *r, uint64_t after_seq, int timeout_ms)
{
    if (!r)
        return STELE_EINVAL;
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : reader_now_ms() + timeout_ms;
    for (;;) {
        reader_try_map_lock_page(r);
        uint32_t seen = r->lock_page
                            ? atomic_load_explicit(&r->lock_page->futex_word, memory_order_acquire)
                            : 0;
        int live = lockfile_writer_pid(r->lock_fd, r->lock_page) != 0;
        if (live) {
            uint64_t visible =
                atomic_load_explicit(&r->lock_page->visible_seq, memory_order_acquire);
            if (visible > after_seq)
                return 0;
        } else {
            journal_record_t rec;
            int rc = reader_step(r, &rec, 0, NULL);
            if (rc != STELE_EAGAIN && (rc != 0 || rec.is_meta || rec.seq > after_seq))
                return 0; /* a frame to return, or an error next() will report */
        }
        int64_t left = deadline - reader_now_ms();
        if (left <= 0)
            return STELE_ETIMEDOUT;
        if (live) {
            lockfile_wait(r->lock_page, seen,
                          (int)(left < READER_WAIT_SLICE_MS ? left : READER_WAIT_SLICE_MS));
        } else {
            int64_t ms = left < READER_POLL_MS ? left : READER_POLL_MS;
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)ms * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
}

void
journal_reader_live(journal_reader_t *r, journal_live_t *out)
{
    memset(out, 0, sizeof *out);
    if (!r)
        return;
    reader_try_map_lock_page(r);
    int pid = lockfile_writer_pid(r->lock_fd, r->lock_page);
    out->writer_pid = pid > 0 ? pid : 0;
    if (r->lock_page && pid) {
        out->visible_seq = atomic_load_explicit(&r->lock_page->visible_seq, memory_order_acquire);
        out->durable_seq = atomic_load_explicit(&r->lock_page->durable_seq, memory_order_acquire);
    }
}

int
journal_reader_segment_trust(journal_reader_t *r, uint64_t first_seq, journal_segment_trust_t *out,
                             stele_error_t *err)
{
    if (!r || !out)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_reader_segment_trust needs a reader");
    segment_header_t h;
    int fd = -1;
    uint64_t bytes = 0;
    int rc = reader_open_segment(r, first_seq, &h, &fd, &bytes, err);
    if (rc)
        return rc;
    r->io->close(r->io->ctx, fd);
    if (h.version < 2) {
        char name[SEG_NAME_BYTES];
        return jerr_set(err, STELE_EINVAL, NULL, "segment %s is format version %u: no merkle tree",
                        reader_seg_name(name, first_seq), h.version);
    }
    out->range = h.range;
    out->is_keyed = (h.trust_flags & SEG_TRUST_KEYED) != 0;
    out->key_epoch = h.key_epoch;
    return 0;
}

int
journal_reader_genesis(const journal_reader_t *r, uint8_t out[32])
{
    if (!r || !r->have_genesis)
        return -ENOENT;
    memcpy(out, r->genesis, HASH_BYTES);
    return 0;
}

void
journal_reader_set_meta(journal_reader_t *r, int want_meta)
{
    if (r)
        r->want_meta = want_meta != 0;
}

const char *
journal_reader_source(const journal_reader_t *r)
{
    return r ? r->source : "";
}

uint32_t
journal_reader_format_version(const journal_reader_t *r)
{
    return r ? r->version : 0;
}

/* Meta frames a segment may open with before its first record (a new signed journal's
 * key statement, a checkpoint): more means no record is near the start. */
#define READER_LEADING_META_MAX 8

/* The ts of the first record of the open segment fd, 0 when it has none near its start.
 * Meta frames (version 2 only) are stepped over: their ts is the newest record's before
 * them, 0 in a new journal. */
static int64_t
reader_first_record_ts(journal_reader_t *r, int fd)
{
    uint64_t off = SEG_HEADER_BYTES;
    for (int i = 0; i < READER_LEADING_META_MAX; i++) {
        uint8_t head[FRAME_HEADER_BYTES_V1]; /* the fields both versions share */
        if (r->io->pread(r->io->ctx, fd, head, sizeof head, off) != (ssize_t)sizeof head ||
            format_load_u32(head) != FRAME_MAGIC)
            return 0;
        if (!(format_load_u32(head + FRAME_OFF_FLAGS) & FRAME_FLAG_META))
            return format_load_i64(head + FRAME_OFF_TS_NS);
        off += journal_frame_bytes(2, format_load_u32(head + FRAME_OFF_PAYLOAD_LEN));
    }
    return 0;
}

int
journal_reader_segments(journal_reader_t *r, journal_segment_info_t *out, size_t max,
                        stele_error_t *err)
{
    char name[SEG_NAME_BYTES];
    if (!r)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_reader_segments needs a reader");
    segment_dir_t d;
    int rc = segment_dir_list(r->dir_fd, &d);
    if (rc)
        return reader_fail_errno(err, rc, "list journal directory", r->dir);
    for (size_t i = 0; i < d.n && i < max; i++) {
        journal_segment_info_t *s = &out[i];
        memset(s, 0, sizeof *s);
        s->first_seq = d.seqs[i];
        reader_seg_name(name, d.seqs[i]);
        struct stat st;
        if (fstatat(r->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            s->disk_bytes = (uint64_t)st.st_blocks * 512u;
        int fd = r->io->open_file(r->io->ctx, r->dir_fd, name, JOURNAL_IO_READ, 0);
        if (fd < 0)
            continue;
        s->first_ts_ns = reader_first_record_ts(r, fd);
        r->io->close(r->io->ctx, fd);
    }
    int n = (int)d.n;
    segment_dir_free(&d);
    return n;
}
