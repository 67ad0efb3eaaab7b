/*
 * verify.c: stele_verify(), which checks a journal's records (each frame's CRC, the hash
 * chain, seq contiguity, timestamps) and the index against the segments, and names the first
 * failure by seq, segment and offset. Read-only, from any process, with or without a writer.
 *
 * The walk reads records through journal_reader_* like any reader. The journal reader
 * names a damaged batch as a whole, so to pinpoint the failing frame verify alone among the
 * engine's files reads segment files itself (read-only, through the POSIX I/O table) with
 * the journal's own decoders: record_decode (record.h) for frames, segment_header_read
 * (segment.h) for headers, chain_hash (chain.h) for the chain, format.h for the layout.
 * The journal reader takes damage in the newest segment for a torn tail (the end of the
 * log); verify reports it only with evidence that records are missing there: a durable seq
 * past the end or, with no writer, an index entry past the end or an intact frame after it.
 *
 * Retention may delete segments while verify reads (oldest first, their index entries
 * after them). What it deleted is no damage: index entries below the first record the walk
 * reads are skipped, and a walk the journal reader stops with STELE_ERETAINED (the next
 * segment is gone and every segment left starts past it) starts again from the new oldest
 * record, up to VERIFY_RETENTION_RESTARTS times. A segment missing above the oldest one is
 * still damage.
 *
 * Threads: each call uses only its own short-lived reader, index handle and SHA-256
 * context; no lock.
 */
#include "stele.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "error.h"
#include "format.h"
#include "index.h"
#include "journal.h"
#include "merkle.h"
#include "read_side.h"
#include "record.h"
#include "segment.h"
#include "stele_internal.h"

/* Walks retention may cut short before verify gives up: each starts again from the oldest
 * record, which retention only moves forward, so a journal whose retention outpaces reading
 * it whole this many times is being emptied faster than it can be checked. */
#define VERIFY_RETENTION_RESTARTS 1000

typedef struct verify_state {
    journal_reader_t *jr;
    index_t *ix;
    chain_hasher_t *hasher;
    merkle_hasher_t *mhasher;
    stele_verify_report_t *report;
    stele_verify_hook_fn hook; /* tests: called after each record checked (stele_internal.h) */
    void *hook_ctx;
    int have_prev;
    journal_record_t prev; /* payload pointer not kept */
    int prev_is_batch_end;
    int have_index_next;
    index_batch_t index_next; /* the next index entry the walk must meet */
    uint64_t start_seq;       /* where the walk began (0 = the oldest record) */
} verify_state_t;

static void
verify_segment_name(char *buf, size_t cap, uint64_t segment_seq)
{
    char name[SEG_NAME_BYTES];
    segment_name(name, segment_seq);
    snprintf(buf, cap, "%s", name);
}

static int verify_bad(verify_state_t *v, uint64_t seq, uint64_t segment_seq, uint64_t offset,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int
verify_bad(verify_state_t *v, uint64_t seq, uint64_t segment_seq, uint64_t offset, const char *fmt,
           ...)
{
    stele_verify_report_t *rep = v->report;
    rep->bad_seq = seq;
    verify_segment_name(rep->bad_segment, sizeof rep->bad_segment, segment_seq);
    rep->bad_offset = offset;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->what, sizeof rep->what, fmt, ap);
    va_end(ap);
    return STELE_ECORRUPT;
}

/* The record's chain hash recomputed from its contents (journal/chain.h, FORMAT.md): in
 * version 2 from its leaf hash, which the reader computed from the frame. */
static int
verify_hash(chain_hasher_t *hasher, const journal_record_t *rec, uint8_t out[HASH_BYTES])
{
    if (rec->version >= 2)
        return chain_link(hasher, rec->prev_hash, rec->leaf_hash, out);
    return chain_hash(hasher, rec->prev_hash, rec->seq, rec->ts_ns, rec->payload, rec->payload_len,
                      out);
}

/* Checks a record against the one the walk read before it: the next seq, no earlier time,
 * and the chain link. */
static int
verify_follows_prev(verify_state_t *v, const journal_record_t *rec)
{
    const journal_record_t *p = &v->prev;
    if (!v->have_prev)
        return 0;
    if (rec->seq != p->seq + 1)
        return verify_bad(v, p->seq + 1, rec->segment_seq, rec->offset,
                          "expected seq %" PRIu64 " after seq %" PRIu64 ", found %" PRIu64,
                          p->seq + 1, p->seq, rec->seq);
    if (rec->ts_ns < p->ts_ns)
        return verify_bad(v, rec->seq, rec->segment_seq, rec->offset,
                          "timestamp %" PRId64 " is before the previous record's %" PRId64,
                          rec->ts_ns, p->ts_ns);
    if (memcmp(rec->prev_hash, p->hash, HASH_BYTES) != 0)
        return verify_bad(v, rec->seq, rec->segment_seq, rec->offset,
                          "chain broken: previous hash does not match seq %" PRIu64 "'s hash",
                          p->seq);
    return 0;
}

/* Checks a record's chain hash against its contents. */
static int
verify_own_hash(verify_state_t *v, const journal_record_t *rec, stele_error_t *err)
{
    /* The journal gives an all-zero prev_hash when it could not read the record before
     * (a hinted seek); the chain is then checked from the next record on. */
    static const uint8_t unknown[HASH_BYTES];
    int is_anchored = v->have_prev || memcmp(rec->prev_hash, unknown, HASH_BYTES) != 0;
    uint8_t hash[HASH_BYTES];
    if (!is_anchored)
        memcpy(hash, rec->hash, HASH_BYTES);
    else if (verify_hash(v->hasher, rec, hash) != 0)
        return error_set_hinted(err, -EIO, NULL, "could not compute SHA-256 (OpenSSL)");
    if (memcmp(hash, rec->hash, HASH_BYTES) != 0)
        return verify_bad(v, rec->seq, rec->segment_seq, rec->offset,
                          "chain hash does not match the record's contents");
    return 0;
}

/* Checks a record against the index entry the walk must meet next, once it is reached, and
 * moves on to the entry after. */
static int
verify_index_entry(verify_state_t *v, const journal_record_t *rec)
{
    const index_batch_t *b = &v->index_next;
    if (!v->have_index_next || b->first_seq > rec->seq)
        return 0;
    /* Entries below the first record the walk reads name segments retention deleted (it
     * deletes their index entries after them): the walk started past them. */
    if (!v->have_prev && b->first_seq < rec->seq) {
        v->have_index_next = index_find_next(v->ix, rec->seq, &v->index_next, NULL) == 0;
        if (!v->have_index_next || b->first_seq > rec->seq)
            return 0;
    }
    /* The walk meets every seq in order, so an entry below this one names a seq the
     * segments do not hold. */
    if (b->first_seq < rec->seq)
        return verify_bad(v, b->first_seq, b->segment_seq, b->offset,
                          "index names seq %" PRIu64 " which the segments do not hold",
                          b->first_seq);
    if (b->segment_seq != rec->segment_seq || b->offset != rec->offset)
        return verify_bad(v, rec->seq, b->segment_seq, b->offset,
                          "index puts seq %" PRIu64 " at offset %" PRIu64 " of segment %" PRIu64
                          " but it is at offset %" PRIu64 " of segment %" PRIu64,
                          rec->seq, b->offset, b->segment_seq, rec->offset, rec->segment_seq);
    if (b->first_ts_ns != rec->ts_ns)
        return verify_bad(v, rec->seq, rec->segment_seq, rec->offset,
                          "index gives seq %" PRIu64 " timestamp %" PRId64
                          " but the record has %" PRId64,
                          rec->seq, b->first_ts_ns, rec->ts_ns);
    if (v->have_prev && !v->prev_is_batch_end)
        return verify_bad(v, rec->seq, rec->segment_seq, rec->offset,
                          "index says a batch starts at seq %" PRIu64
                          " but the record before it does not end a batch",
                          rec->seq);
    v->have_index_next = index_find_next(v->ix, rec->seq + 1, &v->index_next, NULL) == 0;
    return 0;
}

/* Checks one record against the one before it, its own hash and the index; a good one
 * becomes the anchor for the next and joins the report's range. */
static int
verify_record(verify_state_t *v, const journal_record_t *rec, stele_error_t *err)
{
    int rc = verify_follows_prev(v, rec);
    if (rc == 0)
        rc = verify_own_hash(v, rec, err);
    if (rc == 0)
        rc = verify_index_entry(v, rec);
    if (rc)
        return rc;
    v->prev = *rec;
    v->prev.payload = NULL;
    v->prev_is_batch_end = rec->is_batch_end;
    v->have_prev = 1;
    v->report->records_checked++;
    if (!v->report->first_seq)
        v->report->first_seq = rec->seq;
    v->report->last_seq = rec->seq;
    if (v->hook)
        v->hook(v->hook_ctx, rec->seq);
    return 0;
}

/* One frame read straight from a segment file, for pinpointing. */
typedef struct verify_frame {
    uint8_t *buf;
    size_t cap;
    record_status_t status;
    record_view_t view;
} verify_frame_t;

static int
verify_read_frame(const journal_io_t *io, int fd, uint32_t version, uint64_t off,
                  uint64_t file_bytes, verify_frame_t *f)
{
    uint64_t room = off < file_bytes ? file_bytes - off : 0;
    uint64_t want = format_frame_header_bytes(version);
    for (int pass = 0; pass < 2; pass++) {
        if (want > room)
            want = room;
        if (want > f->cap) {
            uint8_t *grown = realloc(f->buf, want);
            if (!grown)
                return -ENOMEM;
            f->buf = grown;
            f->cap = want;
        }
        ssize_t got = want ? io->pread(io->ctx, fd, f->buf, want, (off_t)off) : 0;
        if (got < 0)
            return (int)got;
        f->status = record_decode(version, f->buf, (size_t)got, room, off, &f->view);
        if (f->status != RECORD_NEED_MORE)
            return 0;
        uint64_t len = format_load_u32(f->buf + FRAME_OFF_PAYLOAD_LEN);
        want = format_frame_bytes(version, len);
    }
    f->status = RECORD_TORN;
    return 0;
}

/* Bytes past a bad frame searched for a later valid frame (bounded: the search reads them
 * into memory). A torn tail is at most one batch, and a batch is at most a few records. */
#define VERIFY_LATER_WINDOW_BYTES (4u << 20)

/*
 * Is there a valid frame with a seq after `seq` somewhere past `off`? A torn tail is the
 * end of the log; a damaged frame with intact records after it is not a tail, it is damage
 * (or a deletion) in the middle.
 */
static int
verify_later_frame(const journal_io_t *io, int fd, uint32_t version, uint64_t off,
                   uint64_t file_bytes, uint64_t seq)
{
    uint64_t len = file_bytes > off ? file_bytes - off : 0;
    if (len > VERIFY_LATER_WINDOW_BYTES)
        len = VERIFY_LATER_WINDOW_BYTES;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return 0;
    ssize_t got = io->pread(io->ctx, fd, buf, len, (off_t)off);
    int is_found = 0;
    uint32_t header = format_frame_header_bytes(version);
    for (uint64_t at = FRAME_ALIGN; got > 0 && at + header <= (uint64_t)got && !is_found;
         at += FRAME_ALIGN) {
        if (format_load_u32(buf + at) != FRAME_MAGIC)
            continue;
        record_view_t view;
        record_status_t st = record_decode(version, buf + at, (size_t)((uint64_t)got - at),
                                           file_bytes - off - at, off + at, &view);
        is_found = st == RECORD_VALID && !view.is_meta && view.seq > seq;
    }
    free(buf);
    return is_found;
}

/* Where the frame after the last good record starts (0, 0 before any). */
static void
verify_after_prev(const verify_state_t *v, uint64_t *segment_seq, uint64_t *offset)
{
    *segment_seq = v->have_prev ? v->prev.segment_seq : 0;
    *offset = v->have_prev ? v->prev.offset + v->prev.frame_bytes : 0;
}

/* Pinpointing's walk over the frames of at most two segment files. */
typedef struct verify_cursor {
    const journal_io_t *io;
    int dir_fd;                  /* the journal directory (the reader's, or one of verify's own) */
    int need_later_frame;        /* a bad frame counts only if a valid one follows it */
    stele_verify_report_t saved; /* the report to restore when a bad frame does not count */
    uint64_t seq;                /* the seq the next record must have */
    uint32_t version;            /* of the open segment (its header says) */
    uint64_t segment_seq;
    uint64_t offset; /* of the next frame; at most SEG_HEADER_BYTES: read the header first */
    uint8_t prev_hash[HASH_BYTES];
    int have_hash;
    int fd; /* the open segment file */
    uint64_t file_bytes;
    verify_frame_t frame; /* the last frame read; kept across segments */
} verify_cursor_t;

/* Starts just past the last good record or, when the walk read none, at the start of the
 * segment holding the walk's first seq. Returns 0 when there is no segment to walk. */
static int
verify_cursor_init(verify_state_t *v, const char *dir, int need_later_frame, verify_cursor_t *c)
{
    memset(c, 0, sizeof *c);
    (void)dir;
    c->io = journal_io_posix();
    c->dir_fd = journal_reader_dir_fd(v->jr);
    c->need_later_frame = need_later_frame;
    c->saved = *v->report;
    c->fd = -1;
    if (v->have_prev) {
        c->seq = v->prev.seq + 1;
        c->version = v->prev.version;
        verify_after_prev(v, &c->segment_seq, &c->offset);
        memcpy(c->prev_hash, v->prev.hash, HASH_BYTES);
        c->have_hash = 1;
        return 1;
    }
    journal_segment_info_t *segs = NULL;
    int n = read_side_list_segments(v->jr, &segs, NULL);
    for (int i = 0; i < n; i++)
        if (segs[i].first_seq <= (v->start_seq ? v->start_seq : 1) || i == 0)
            c->segment_seq = segs[i].first_seq;
    free(segs);
    if (n <= 0)
        return 0;
    c->seq = c->segment_seq;
    c->offset = SEG_HEADER_BYTES;
    return 1;
}

/* Checks the header of the segment the cursor enters, whose previous hash then anchors the
 * chain. Returns 1 when it is bad (recorded in the report). */
static int
verify_pinpoint_header(verify_state_t *v, verify_cursor_t *c)
{
    segment_header_t h;
    segment_header_fault_t fault = {.why = "unreadable"};
    if (segment_header_read(c->io, c->fd, &h, &fault) != 0) {
        verify_bad(v, c->segment_seq, c->segment_seq, fault.offset, "segment header: %s",
                   fault.why);
        return 1;
    }
    if (c->have_hash && memcmp(h.prev_hash, c->prev_hash, HASH_BYTES) != 0) {
        verify_bad(v, c->segment_seq, c->segment_seq, 0,
                   "segment header's previous hash breaks the chain");
        return 1;
    }
    memcpy(c->prev_hash, h.prev_hash, HASH_BYTES);
    c->have_hash = 1;
    c->version = h.version;
    c->offset = SEG_HEADER_BYTES;
    return 0;
}

/* Does the valid frame just read fail to hash, from the chain so far, to the hash it holds?
 * A hash that cannot be computed proves nothing, so it is no break. */
static int
verify_frame_breaks_chain(verify_state_t *v, const verify_cursor_t *c)
{
    const record_view_t *fv = &c->frame.view;
    uint8_t calc[HASH_BYTES];
    journal_record_t jr = {.seq = fv->seq,
                           .ts_ns = fv->ts_ns,
                           .payload = fv->payload,
                           .payload_len = fv->payload_len,
                           .version = fv->version};
    memcpy(jr.prev_hash, c->prev_hash, HASH_BYTES);
    if (fv->version >= 2 &&
        record_leaf_hash(v->mhasher, fv->frame, fv->payload_len, jr.leaf_hash) != 0)
        return 0;
    return verify_hash(v->hasher, &jr, calc) == 0 && memcmp(calc, fv->hash, HASH_BYTES) != 0;
}

/* Checks the frame just read: decodable, the seq due, and chained to the one before.
 * Returns 1 when it is bad (recorded in the report). */
static int
verify_pinpoint_frame(verify_state_t *v, const verify_cursor_t *c)
{
    const verify_frame_t *f = &c->frame;
    uint64_t due = f->status == RECORD_VALID && f->view.is_meta ? c->seq - 1 : c->seq;
    if (f->status != RECORD_VALID)
        verify_bad(v, c->seq, c->segment_seq, c->offset, "frame: %s",
                   record_status_name(f->status));
    else if (f->view.seq != due)
        verify_bad(v, c->seq, c->segment_seq, c->offset,
                   "seq %" PRIu64 " where %" PRIu64 " was due", f->view.seq, due);
    else if (!f->view.is_meta && c->have_hash && verify_frame_breaks_chain(v, c))
        verify_bad(v, c->seq, c->segment_seq, c->offset, "chain hash does not match the record");
    else
        return 0;
    return 1;
}

/* Walks the open segment's frames from the cursor to the end of the batch or of the
 * segment's frames. Returns 1 when one is bad (recorded in the report). */
static int
verify_pinpoint_frames(verify_state_t *v, verify_cursor_t *c)
{
    const verify_frame_t *f = &c->frame;
    for (;;) {
        if (verify_read_frame(c->io, c->fd, c->version, c->offset, c->file_bytes, &c->frame) != 0)
            return 0;
        if (f->status == RECORD_ZERO)
            return 0; /* end of this segment's frames: the batch may be in the next */
        int is_bad = verify_pinpoint_frame(v, c);
        if (is_bad && c->need_later_frame &&
            !verify_later_frame(c->io, c->fd, c->version, c->offset, c->file_bytes, c->seq)) {
            /* Nothing intact follows: a torn tail, which the next writer truncates. */
            *v->report = c->saved;
            return 0;
        }
        if (is_bad || (f->status == RECORD_VALID && (f->view.flags & FRAME_FLAG_BATCH_END)))
            return is_bad;
        c->offset += f->view.frame_bytes;
        if (f->view.is_meta)
            continue; /* no record: the seq and the chain stay */
        memcpy(c->prev_hash, f->view.hash, HASH_BYTES);
        c->seq++;
    }
}

/* How pinpointing in one segment ended. */
typedef enum verify_scan_end {
    VERIFY_SCAN_FOUND, /* a bad frame, recorded in the report */
    VERIFY_SCAN_STOP,  /* nothing more precise to find */
    VERIFY_SCAN_NEXT,  /* the segment's frames ended mid-batch: go on in the next segment */
} verify_scan_end_t;

/* Pinpoints within the segment the cursor names. */
static verify_scan_end_t
verify_pinpoint_segment(verify_state_t *v, verify_cursor_t *c)
{
    const journal_io_t *io = c->io;
    char name[SEG_NAME_BYTES];
    off_t size = 0;
    segment_name(name, c->segment_seq);
    c->fd = io->open_file(io->ctx, c->dir_fd, name, JOURNAL_IO_READ, 0);
    if (c->fd < 0)
        return VERIFY_SCAN_STOP;
    verify_scan_end_t end = VERIFY_SCAN_STOP;
    if (io->file_size(io->ctx, c->fd, &size) == 0) {
        c->file_bytes = (uint64_t)size;
        if ((c->offset <= SEG_HEADER_BYTES && verify_pinpoint_header(v, c)) ||
            verify_pinpoint_frames(v, c))
            end = VERIFY_SCAN_FOUND;
        else if (c->frame.status == RECORD_ZERO && c->offset > SEG_HEADER_BYTES)
            end = VERIFY_SCAN_NEXT;
    }
    io->close(io->ctx, c->fd);
    c->fd = -1;
    return end;
}

/*
 * The journal reads a batch as a unit and names the batch when any frame of it is bad.
 * This walks the frames themselves from the last good record (or the walk's start) to find
 * the first one that fails: its seq, segment and offset are what an operator needs.
 * The bad frame follows the last good record in its segment, or starts the next segment
 * when that record ended its own: two segments at most.
 * Returns 1 with the failure recorded in the report, 0 when nothing more precise was found.
 */
static int
verify_pinpoint(verify_state_t *v, const char *dir, int need_later_frame)
{
    verify_cursor_t c;
    if (!verify_cursor_init(v, dir, need_later_frame, &c))
        return 0;
    verify_scan_end_t end = verify_pinpoint_segment(v, &c);
    if (end == VERIFY_SCAN_NEXT) {
        c.segment_seq = c.seq; /* the next segment is named by the seq it should start with */
        c.offset = 0;
        end = verify_pinpoint_segment(v, &c);
    }
    free(c.frame.buf);
    return end == VERIFY_SCAN_FOUND;
}

/* A read error from the journal: corruption is a verification failure, pinpointed to the
 * frame when possible; anything else means verify could not check. */
static int
verify_read_failed(verify_state_t *v, const char *dir, int rc, stele_error_t *jerr,
                   stele_error_t *err)
{
    if (rc != STELE_ECORRUPT) {
        if (err)
            *err = *jerr;
        return rc;
    }
    if (verify_pinpoint(v, dir, 0))
        return STELE_ECORRUPT;
    uint64_t seq = v->have_prev ? v->prev.seq + 1 : v->start_seq + 1;
    uint64_t segment_seq, offset;
    verify_after_prev(v, &segment_seq, &offset);
    return verify_bad(v, seq, segment_seq, offset, "%s", jerr->message);
}

/* Reads from the record before from_seq (it anchors the chain) to to_seq or the end of the
 * journal, checking each record; *is_at_to says the walk reached to_seq. */
static int
verify_read_range(verify_state_t *v, const char *dir, uint64_t from_seq, uint64_t to_seq,
                  int *is_at_to, stele_error_t *err)
{
    stele_error_t jerr = {0};
    *is_at_to = 0;
    uint64_t start = from_seq > 1 ? from_seq - 1 : 0;
    v->start_seq = start;
    int rc = journal_reader_seek(v->jr, start, 0, 0, &jerr);
    if (rc && rc != STELE_ENOTFOUND)
        return verify_read_failed(v, dir, rc, &jerr, err);
    if (v->ix)
        v->have_index_next = index_find_next(v->ix, start, &v->index_next, NULL) == 0;
    journal_record_t rec;
    while ((rc = journal_reader_next(v->jr, &rec, &jerr)) == 0) {
        rc = verify_record(v, &rec, err);
        if (rc)
            return rc;
        if (to_seq && rec.seq >= to_seq) {
            *is_at_to = 1;
            return 0;
        }
    }
    if (rc != STELE_EAGAIN)
        return verify_read_failed(v, dir, rc, &jerr, err);
    return 0;
}

/* A walk that starts past the end checked nothing, so the last seq it checked is no end to
 * name: the message gives the journal's own, as `stele status` finds it. */
static int
verify_past_the_end(const char *dir, uint64_t from_seq, uint64_t last, stele_error_t *err)
{
    stele_status_t *st = calloc(1, sizeof *st);
    if (st && stele_status_read(dir, st, NULL) == 0 && st->last_seq > last)
        last = st->last_seq;
    free(st);
    return error_set_hinted(err, STELE_ENOTFOUND, NULL,
                            "seq %" PRIu64 " is past the end of the journal (last %" PRIu64 ")",
                            from_seq, last);
}

/*
 * Judges where a walk that did not reach to_seq ended. The index is updated after a batch
 * is written, so with a live writer it may name a batch the walk stopped short of; with
 * none, an entry past the end means records are missing from the segments. A durable seq
 * read before the walk (durable_before) is evidence with or without a writer: durable
 * records are never taken back.
 */
static int
verify_walk_end(verify_state_t *v, const char *dir, uint64_t from_seq, uint64_t to_seq,
                uint64_t durable_before, stele_error_t *err)
{
    journal_live_t live;
    journal_reader_live(v->jr, &live);
    uint64_t last = v->report->last_seq;
    int is_durable_ahead = durable_before > last && (!to_seq || durable_before <= to_seq);
    int is_index_ahead =
        v->have_index_next && !live.writer_pid && (!to_seq || v->index_next.first_seq <= to_seq);
    /* The reader treats damage in the newest segment as a torn tail (the end of the log).
     * With evidence that records are missing, any bad frame there is the culprit; without,
     * only one that intact records follow. */
    if (!live.writer_pid || is_durable_ahead || is_index_ahead) {
        if (verify_pinpoint(v, dir, !(is_durable_ahead || is_index_ahead)))
            return STELE_ECORRUPT;
    }
    uint64_t segment_seq, offset;
    verify_after_prev(v, &segment_seq, &offset);
    if (is_durable_ahead)
        return verify_bad(v, last + 1, segment_seq, offset,
                          "the journal's state records seq %" PRIu64
                          " as durable but the segments end at seq %" PRIu64
                          ": records are missing",
                          durable_before, last);
    /* The index records batch starts, so the first record missing is the one after the
     * end, whichever seq the index names beyond it. */
    if (is_index_ahead)
        return verify_bad(v, last + 1, segment_seq, offset,
                          "index names seq %" PRIu64 " past the end of the journal (last %" PRIu64
                          "): records are missing",
                          v->index_next.first_seq, last);
    if (from_seq && last < from_seq)
        return verify_past_the_end(dir, from_seq, last, err);
    return 0;
}

/* Forgets what a walk that retention cut short found, for a walk from the new oldest. */
static void
verify_restart(verify_state_t *v)
{
    memset(v->report, 0, sizeof *v->report);
    memset(&v->prev, 0, sizeof v->prev);
    v->have_prev = 0;
    v->prev_is_batch_end = 0;
    v->have_index_next = 0;
}

/* Walks [from, to]; the record before `from` is checked too, to anchor the chain. A walk
 * retention cut short starts again (see the top of the file). */
static int
verify_walk(verify_state_t *v, const char *dir, uint64_t from_seq, uint64_t to_seq,
            stele_error_t *err)
{
    /* Read before the walk: a live writer only moves it forward, so a walk that ends short
     * of it has lost records, whatever the writer does meanwhile. */
    journal_live_t live_before;
    journal_reader_live(v->jr, &live_before);
    int is_at_to = 0;
    int rc = STELE_ERETAINED;
    for (int walk = 0; rc == STELE_ERETAINED && walk <= VERIFY_RETENTION_RESTARTS; walk++) {
        if (walk)
            verify_restart(v);
        rc = verify_read_range(v, dir, from_seq, to_seq, &is_at_to, err);
    }
    if (rc == STELE_ERETAINED)
        error_set_hint(err,
                       "retention deleted segments faster than verify could read them %d "
                       "times; run it again, or with --from past the retention cut",
                       VERIFY_RETENTION_RESTARTS);
    if (rc || is_at_to)
        return rc;
    return verify_walk_end(v, dir, from_seq, to_seq, live_before.durable_seq, err);
}

/* journal_reader_open refused the journal. Opening decodes the oldest segment's header (to
 * learn the journal's genesis); when that header is what failed, the report says where. */
static void
verify_oldest_header(verify_state_t *v, const char *dir)
{
    verify_cursor_t c = {.io = journal_io_posix(), .dir_fd = -1, .fd = -1};
    if (journal_dir_open(dir, &c.dir_fd, NULL) != 0)
        return;
    segment_dir_t d;
    if (segment_dir_list(c.dir_fd, &d) == 0) {
        char name[SEG_NAME_BYTES];
        if (d.n > 0) {
            c.segment_seq = d.seqs[0];
            segment_name(name, d.seqs[0]);
            c.fd = c.io->open_file(c.io->ctx, c.dir_fd, name, JOURNAL_IO_READ, 0);
        }
        segment_dir_free(&d);
    }
    if (c.fd >= 0) {
        verify_pinpoint_header(v, &c);
        c.io->close(c.io->ctx, c.fd);
    }
    c.io->close(c.io->ctx, c.dir_fd);
}

int
stele_verify(const char *dir, uint64_t from_seq, uint64_t to_seq, stele_verify_report_t *report,
             stele_error_t *err)
{
    return stele_verify_opts(dir, NULL, from_seq, to_seq, report, err);
}

int
stele_verify_opts(const char *dir, const stele_options_t *opts, uint64_t from_seq, uint64_t to_seq,
                  stele_verify_report_t *report, stele_error_t *err)
{
    return stele_verify_hooked(dir, opts, from_seq, to_seq, report, NULL, NULL, err);
}

int
stele_verify_hooked(const char *dir, const stele_options_t *opts, uint64_t from_seq,
                    uint64_t to_seq, stele_verify_report_t *report, stele_verify_hook_fn hook,
                    void *hook_ctx, stele_error_t *err)
{
    if (!dir || !report)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_verify: dir and report required");
    if (to_seq && from_seq > to_seq)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "verify range is empty: from %" PRIu64 " is after to %" PRIu64,
                                from_seq, to_seq);
    memset(report, 0, sizeof *report);
    verify_state_t v = {.report = report, .hook = hook, .hook_ctx = hook_ctx};
    int rc = read_side_open_journal(dir, opts, &v.jr, err);
    if (rc == STELE_ECORRUPT)
        verify_oldest_header(&v, dir);
    if (rc)
        goto done;
    v.ix = read_side_open_index(dir, v.jr);
    v.hasher = chain_hasher_new();
    v.mhasher = merkle_hasher_new();
    if (!v.hasher || !v.mhasher) {
        rc = error_set_hinted(err, -ENOMEM, NULL, "could not allocate a SHA-256 context");
        goto done;
    }
    rc = verify_walk(&v, dir, from_seq, to_seq, err);
done:
    if (rc == STELE_ECORRUPT && report->bad_seq)
        error_set_hinted(err, rc, "back up the journal directory before repairing anything",
                         "verification failed at seq %" PRIu64 " (%s, offset %" PRIu64 "): %s",
                         report->bad_seq, report->bad_segment, report->bad_offset, report->what);
    /* The anchor record before from_seq is checked but not reported as in range. */
    if (from_seq > 1 && report->first_seq == from_seq - 1 && report->records_checked) {
        report->records_checked--;
        report->first_seq = from_seq;
    }
    chain_hasher_free(v.hasher);
    merkle_hasher_free(v.mhasher);
    index_close(v.ix);
    journal_reader_close(v.jr);
    return rc;
}
