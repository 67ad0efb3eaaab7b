/*
 * recover.c: the tail scan of the newest segment (recover.h), FORMAT.md's end-of-log rules.
 *
 * Pass 1 walks frames from a batch start, checking validity rules F1-F5, that seqs follow,
 * that timestamps do not go back, and the chain hash; the log ends at the first frame that
 * fails, and is cut back to the end of the last complete batch (BATCH_END). In version 2 it
 * also grows the Merkle tree's compact range by each record's leaf (meta frames are no
 * leaves), so the writer continues the tree from the end. Pass 2 reads
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

#include "meta.h"
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
    uint32_t header = format_frame_header_bytes(s->version);
    uint64_t need = header;
    for (int attempt = 0; attempt < 3; attempt++) {
        uint64_t asked = need < room ? need : room;
        ssize_t avail = scan_buf_fill(s, b, off, asked);
        if (avail < 0)
            return (int)avail;
        const uint8_t *p = b->data + (off - b->off);
        /* Only a short read (the file ends early) bounds the frame at what was read; a frame
         * that merely runs past the buffered chunk needs more, not a bad-length verdict. */
        uint64_t frame_room = (uint64_t)avail < asked ? (uint64_t)avail : room;
        *st = record_decode(s->version, p, (size_t)avail, frame_room, off, v);
        if (*st != RECORD_NEED_MORE)
            return 0;
        if ((uint64_t)avail >= header)
            need = format_frame_bytes(s->version, format_load_u32(p + FRAME_OFF_PAYLOAD_LEN));
        else
            need = header;
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
    merkle_range_t range;            /* version 2: the tree so far */
    uint8_t leaf[MERKLE_HASH_BYTES]; /* version 2: the leaf hash of the frame at off */
    int has_key;                     /* version 2: the key epoch in force so far */
    uint64_t key_epoch;
    uint64_t statement_size; /* tree size of the last statement walked */
} walk_pos_t;

/* Until a complete batch is found the log ends where the walk starts. */
static void
recover_walk_begin(recover_scan_t *s, walk_pos_t *w)
{
    w->off = s->start_off;
    w->expect_seq = s->expect_seq;
    w->prev_ts_ns = s->prev_ts_ns;
    memcpy(w->prev_hash, s->prev_hash, HASH_BYTES);
    w->range = s->range;
    w->has_key = s->has_key;
    w->key_epoch = s->key_epoch;
    w->statement_size = s->range.size;
    s->has_key_end = w->has_key;
    s->key_epoch_end = w->key_epoch;
    s->statement_size_end = w->statement_size;
    s->end_off = w->off;
    s->last_seq = w->expect_seq - 1;
    s->last_ts_ns = w->prev_ts_ns;
    memcpy(s->last_hash, w->prev_hash, HASH_BYTES);
    s->last_range = w->range;
}

/* S1 and S2 (a meta frame carries the seq of the record before it). A valid frame out of
 * sequence still counts for E2: its synced_seq is real. */
static int
recover_follows(recover_scan_t *s, const walk_pos_t *w, const record_view_t *v)
{
    uint64_t due = v->is_meta ? w->expect_seq - 1 : w->expect_seq;
    if (v->seq == due && v->ts_ns >= w->prev_ts_ns)
        return 1;
    s->end = JOURNAL_END_BAD_SEQ;
    snprintf(s->why, sizeof s->why,
             v->seq != due ? "seq %llu where %llu was due" : "timestamp of seq %llu goes back",
             (unsigned long long)v->seq, (unsigned long long)due);
    if (v->synced_seq > s->max_later_synced)
        s->max_later_synced = v->synced_seq;
    return 0;
}

/* S3, except for a hinted first frame, whose predecessor's hash is not known here. A CRC-valid
 * frame with the wrong hash was written that way (E3). Returns 1 (holds), 0 (broken) or
 * -errno. */
static int
recover_chain_holds(recover_scan_t *s, walk_pos_t *w, const record_view_t *v)
{
    if (v->is_meta)
        return 1; /* not in the chain (its hash field is zero: checked by record_decode) */
    int rc = 0;
    if (s->version >= 2)
        rc = record_leaf_hash(s->mhasher, v->frame, v->payload_len, w->leaf);
    if (rc)
        return rc;
    if (s->trust_first && w->off == s->start_off)
        return 1;
    uint8_t calc[HASH_BYTES];
    rc = s->version >= 2 ? chain_link(s->hasher, w->prev_hash, w->leaf, calc)
                         : chain_hash(s->hasher, w->prev_hash, v->seq, v->ts_ns, v->payload,
                                      v->payload_len, calc);
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

/* A statement in the walk: its tree size, and for a key statement the epoch it brings into
 * force. Its signature is not checked here (verify does that); a statement that does not
 * parse changes nothing. */
static void
recover_note_statement(walk_pos_t *w, const record_view_t *v)
{
    meta_statement_t st;
    w->statement_size = v->seq;
    if (v->payload[0] != META_TYPE_KEY || meta_read_unsigned(v->payload, v->payload_len, &st, NULL))
        return;
    w->has_key = 1;
    w->key_epoch = st.key_epoch;
}

/* Past a frame that follows (a record joins the chain and, in version 2, the tree); a
 * BATCH_END moves the log's end to after it. Returns 0 or -ENOMEM. */
static int
recover_advance(recover_scan_t *s, walk_pos_t *w, const record_view_t *v)
{
    if (v->is_meta)
        recover_note_statement(w, v);
    else {
        if (s->version >= 2 && merkle_range_append(s->mhasher, &w->range, w->leaf, NULL, NULL))
            return -ENOMEM;
        memcpy(w->prev_hash, v->hash, HASH_BYTES);
        w->expect_seq++;
    }
    w->prev_ts_ns = v->ts_ns;
    w->off += v->frame_bytes;
    if (v->flags & FRAME_FLAG_BATCH_END) {
        s->end_off = w->off;
        s->last_seq = w->expect_seq - 1;
        s->last_ts_ns = v->ts_ns;
        memcpy(s->last_hash, w->prev_hash, HASH_BYTES);
        if (s->version >= 2) {
            s->last_range = w->range;
            s->has_key_end = w->has_key;
            s->key_epoch_end = w->key_epoch;
            s->statement_size_end = w->statement_size;
        }
        s->n_batches++;
    }
    return 0;
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
    rc = recover_advance(s, w, &v);
    return rc ? rc : 1;
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
