/*
 * recover.c: the tail scan of the newest segment (recover.h), FORMAT.md's end-of-log rules.
 *
 * Pass 1 walks frames from a batch start, checking validity rules 1-5, that seqs follow,
 * that timestamps do not go back, and the chain hash; the log ends at the first frame that
 * fails, and is cut back to the end of the last complete batch (BATCH_END). Pass 2 reads
 * everything from that cut to the end of the segment: it finds where non-zero bytes stop
 * (what truncation must zero) and every valid frame there, whose synced_seq tells whether
 * the damage hit data that had already been fdatasynced (then it is corruption, never a
 * torn tail). Both passes read in large chunks through the I/O table; no state is kept.
 */
#include "recover.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

/* Reads are done in chunks this large: few syscalls, bounded memory. */
enum { RECOVER_CHUNK_BYTES = 1024 * 1024 };

typedef struct scan_buf {
    uint8_t *data;
    size_t cap;
    uint64_t off; /* file offset of data[0] */
    size_t len;
} scan_buf_t;

/* Makes [off, off+need) available (less at end of file). Returns bytes available at off, or
 * -errno. */
static ssize_t
scan_buf_fill(const recover_scan_t *s, scan_buf_t *b, uint64_t off, uint64_t need)
{
    if (off >= b->off && off + need <= b->off + b->len)
        return (ssize_t)(b->off + b->len - off);
    uint64_t want = need > RECOVER_CHUNK_BYTES ? need : RECOVER_CHUNK_BYTES;
    if (want > s->seg_bytes - off)
        want = s->seg_bytes - off;
    if (want > b->cap) {
        uint8_t *grown = realloc(b->data, want);
        if (!grown)
            return -ENOMEM;
        b->data = grown;
        b->cap = want;
    }
    ssize_t n = s->io->pread(s->io->ctx, s->fd, b->data, want, (off_t)off);
    if (n < 0)
        return n;
    b->off = off;
    b->len = (size_t)n;
    return n;
}

static journal_end_t
recover_end_of(record_status_t st)
{
    switch (st) {
    case RECORD_BAD_CRC:
        return JOURNAL_END_BAD_CRC;
    case RECORD_BAD_LENGTH:
        return JOURNAL_END_BAD_LENGTH;
    case RECORD_ZERO:
        return JOURNAL_END_CLEAN;
    default:
        return JOURNAL_END_TORN_FRAME;
    }
}

/* Decodes the frame at off, reading more as needed. Returns 0 with *st set, or -errno. */
static int
recover_decode_at(const recover_scan_t *s, scan_buf_t *b, uint64_t off, record_status_t *st,
                  record_view_t *v)
{
    uint64_t room = s->seg_bytes - off;
    uint64_t need = FRAME_HEADER_BYTES;
    for (int attempt = 0; attempt < 3; attempt++) {
        uint64_t asked = need < room ? need : room;
        ssize_t avail = scan_buf_fill(s, b, off, asked);
        if (avail < 0)
            return (int)avail;
        const uint8_t *p = b->data + (off - b->off);
        /* Only a short read (the file ends early) bounds the frame at what was read; a frame
         * that merely runs past the buffered chunk needs more, not a bad-length verdict. */
        uint64_t frame_room = (uint64_t)avail < asked ? (uint64_t)avail : room;
        *st = record_decode(p, (size_t)avail, frame_room, off, v);
        if (*st != RECORD_NEED_MORE)
            return 0;
        if ((uint64_t)avail >= FRAME_HEADER_BYTES)
            need = format_frame_bytes(format_load_u32(p + FRAME_OFF_PAYLOAD_LEN));
        else
            need = FRAME_HEADER_BYTES;
    }
    *st = RECORD_TORN; /* the file ends inside the frame */
    return 0;
}

/* Pass 1's cursor: the next frame and what it must follow (S1-S3). */
typedef struct walk_pos {
    uint64_t off;
    uint64_t expect_seq;
    int64_t prev_ts_ns;
    uint8_t prev_hash[HASH_BYTES];
} walk_pos_t;

/* Until a complete batch is found the log ends where the walk starts. */
static void
recover_walk_begin(recover_scan_t *s, walk_pos_t *w)
{
    w->off = s->start_off;
    w->expect_seq = s->expect_seq;
    w->prev_ts_ns = s->prev_ts_ns;
    memcpy(w->prev_hash, s->prev_hash, HASH_BYTES);
    s->end_off = w->off;
    s->last_seq = w->expect_seq - 1;
    s->last_ts_ns = w->prev_ts_ns;
    memcpy(s->last_hash, w->prev_hash, HASH_BYTES);
}

/* S1 and S2. A valid frame out of sequence still counts for E2: its synced_seq is real. */
static int
recover_follows(recover_scan_t *s, const walk_pos_t *w, const record_view_t *v)
{
    if (v->seq == w->expect_seq && v->ts_ns >= w->prev_ts_ns)
        return 1;
    s->end = JOURNAL_END_BAD_SEQ;
    snprintf(s->why, sizeof s->why,
             v->seq != w->expect_seq ? "seq %llu where %llu was due"
                                     : "timestamp of seq %llu goes back",
             (unsigned long long)v->seq, (unsigned long long)w->expect_seq);
    if (v->synced_seq > s->max_later_synced)
        s->max_later_synced = v->synced_seq;
    return 0;
}

/* S3, except for a hinted first frame, whose predecessor's hash is not known here. A CRC-valid
 * frame with the wrong hash was written that way (E3). Returns 1 (holds), 0 (broken) or
 * -errno. */
static int
recover_chain_holds(recover_scan_t *s, const walk_pos_t *w, const record_view_t *v)
{
    if (s->trust_first && w->off == s->start_off)
        return 1;
    uint8_t calc[HASH_BYTES];
    int rc =
        chain_hash(s->hasher, w->prev_hash, v->seq, v->ts_ns, v->payload, v->payload_len, calc);
    if (rc)
        return rc;
    if (memcmp(calc, v->hash, HASH_BYTES) == 0)
        return 1;
    s->chain_broken = 1;
    s->chain_broken_seq = v->seq;
    s->end = JOURNAL_END_SEALED_DAMAGE;
    snprintf(s->why, sizeof s->why, "chain hash of seq %llu does not match",
             (unsigned long long)v->seq);
    return 0;
}

/* Past a frame that follows; a BATCH_END moves the log's end to after it. */
static void
recover_advance(recover_scan_t *s, walk_pos_t *w, const record_view_t *v)
{
    memcpy(w->prev_hash, v->hash, HASH_BYTES);
    w->prev_ts_ns = v->ts_ns;
    w->off += v->frame_bytes;
    w->expect_seq++;
    if (v->flags & FRAME_FLAG_BATCH_END) {
        s->end_off = w->off;
        s->last_seq = v->seq;
        s->last_ts_ns = v->ts_ns;
        memcpy(s->last_hash, w->prev_hash, HASH_BYTES);
        s->n_batches++;
    }
}

/* One frame of pass 1. Returns 1 to go on, 0 where the walk stops (s->end says why), or
 * -errno. */
static int
recover_walk_frame(recover_scan_t *s, scan_buf_t *b, walk_pos_t *w)
{
    if (w->off >= s->seg_bytes) {
        s->end = JOURNAL_END_CLEAN;
        return 0;
    }
    record_status_t st;
    record_view_t v;
    int rc = recover_decode_at(s, b, w->off, &st, &v);
    if (rc)
        return rc;
    if (st != RECORD_VALID) {
        s->end = recover_end_of(st);
        snprintf(s->why, sizeof s->why, "%s", record_status_name(st));
        return 0;
    }
    if (!recover_follows(s, w, &v))
        return 0;
    rc = recover_chain_holds(s, w, &v);
    if (rc <= 0)
        return rc;
    recover_advance(s, w, &v);
    return 1;
}

/* Pass 1: frames that follow each other, up to the first that does not. */
static int
recover_walk(recover_scan_t *s, scan_buf_t *b)
{
    walk_pos_t w;
    recover_walk_begin(s, &w);
    int rc;
    do {
        rc = recover_walk_frame(s, b, &w);
    } while (rc > 0);
    if (rc)
        return rc;
    /* Frames walked after the last BATCH_END belong to a batch never acknowledged (E4). */
    s->damage_off = w.off;
    s->dropped_frames = w.expect_seq - 1 - s->last_seq;
    if (s->dropped_frames && s->end == JOURNAL_END_CLEAN) {
        s->end = JOURNAL_END_TORN_BATCH;
        snprintf(s->why, sizeof s->why, "batch without its end");
    }
    s->scanned_bytes = w.off - s->start_off;
    return 0;
}

/* Pass 2: from the cut to the end of the segment, where the non-zero bytes stop and what
 * the valid frames there say about syncs. */
static int
recover_sweep(recover_scan_t *s, scan_buf_t *b)
{
    uint64_t off = s->end_off;
    while (off < s->seg_bytes) {
        ssize_t avail = scan_buf_fill(s, b, off, FRAME_ALIGN);
        if (avail < 0)
            return (int)avail;
        if (avail < (ssize_t)FRAME_ALIGN) {
            if (avail > 0 && !record_is_zero(b->data + (off - b->off), (size_t)avail))
                s->dirty_end = off + (uint64_t)avail;
            break;
        }
        const uint8_t *p = b->data + (off - b->off);
        uint64_t word;
        memcpy(&word, p, sizeof word);
        if (word == 0) {
            /* Skip zero words fast within what is buffered. */
            size_t i = FRAME_ALIGN;
            while (i + FRAME_ALIGN <= (size_t)avail) {
                memcpy(&word, p + i, sizeof word);
                if (word)
                    break;
                i += FRAME_ALIGN;
            }
            off += i;
            continue;
        }
        if (format_load_u32(p + FRAME_OFF_MAGIC) == FRAME_MAGIC) {
            record_status_t st;
            record_view_t v;
            int rc = recover_decode_at(s, b, off, &st, &v);
            if (rc)
                return rc;
            if (st == RECORD_VALID) {
                if (v.synced_seq > s->max_later_synced)
                    s->max_later_synced = v.synced_seq;
                off += v.frame_bytes;
                s->dirty_end = off;
                continue;
            }
        }
        off += FRAME_ALIGN;
        s->dirty_end = off;
    }
    s->scanned_bytes = (s->seg_bytes > s->start_off ? s->seg_bytes - s->start_off : 0);
    return 0;
}

int
recover_scan_tail(recover_scan_t *s)
{
    scan_buf_t b = {0};
    s->why[0] = '\0';
    s->dirty_end = 0;
    s->dropped_frames = 0;
    s->max_later_synced = 0;
    s->chain_broken = 0;
    s->n_batches = 0;
    int rc = recover_walk(s, &b);
    if (!rc && !s->chain_broken)
        rc = recover_sweep(s, &b);
    if (!rc && s->end == JOURNAL_END_CLEAN && s->dirty_end) {
        /* Zeros where a frame should start, then bytes: a write that lost its first sector. */
        s->end = JOURNAL_END_TORN_FRAME;
        snprintf(s->why, sizeof s->why, "zero frame header followed by data");
    }
    free(b.data);
    return rc;
}

int
recover_is_synced_damage(const recover_scan_t *s)
{
    return s->chain_broken || s->max_later_synced > s->last_seq;
}

int
recover_zero_tail(const journal_io_t *io, int fd, uint64_t from, uint64_t to)
{
    enum { ZERO_CHUNK_BYTES = 256 * 1024 };
    if (to <= from)
        return 0;
    uint8_t *zeros = calloc(1, ZERO_CHUNK_BYTES);
    if (!zeros)
        return -ENOMEM;
    int rc = 0;
    while (from < to && !rc) {
        size_t n = to - from < ZERO_CHUNK_BYTES ? (size_t)(to - from) : ZERO_CHUNK_BYTES;
        struct iovec iov = {.iov_base = zeros, .iov_len = n};
        rc = io->pwritev(io->ctx, fd, &iov, 1, (off_t)from);
        from += n;
    }
    free(zeros);
    if (!rc)
        rc = io->fdatasync(io->ctx, fd);
    return rc;
}
