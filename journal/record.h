/*
 * record.h: one frame (FORMAT.md, "Frame"): decoding and checking a frame read from disk,
 * and sealing a prepared frame (hashes, flags, synced_seq, CRC) before it is written, in
 * either format version (the header is 72 bytes in version 1, 88 in version 2). Pure
 * functions over byte buffers: no I/O, no state.
 */
#ifndef STELE_JOURNAL_RECORD_H
#define STELE_JOURNAL_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "chain.h"
#include "format.h"
#include "merkle.h"

/* What record_decode found at a frame position (FORMAT.md validity rules F1-F5). */
typedef enum record_status {
    RECORD_VALID = 0,  /* rules F1-F5 hold */
    RECORD_ZERO,       /* the header is all zero: preallocated space */
    RECORD_NEED_MORE,  /* the buffer holds less than the frame and more exists: read more */
    RECORD_TORN,       /* cut short, partly zero, or not a frame at all */
    RECORD_BAD_LENGTH, /* a payload length the format or the segment cannot hold */
    RECORD_BAD_CRC,    /* complete, but the CRC (or the reserved flags) does not check */
} record_status_t;

const char *record_status_name(record_status_t st);

/* A decoded frame; pointers into the caller's buffer. */
typedef struct record_view {
    uint32_t version; /* of the segment it was decoded for */
    uint32_t payload_len;
    uint32_t flags;
    uint64_t seq; /* a record's seq; for a meta frame the tree size (the last record's seq) */
    int64_t ts_ns;
    uint64_t synced_seq;
    const uint8_t *hash; /* HASH_BYTES: the chain hash (zero in a meta frame) */
    /* Version 2's origin block (all zero in version 1). */
    uint32_t origin_uid, origin_gid, origin_pid, origin_kind;
    int is_meta; /* FRAME_FLAG_META: a checkpoint or key statement, not a record */
    const uint8_t *payload;
    uint64_t frame_bytes; /* header + payload + padding */
    const uint8_t *frame; /* the frame's first byte */
} record_view_t;

/*
 * Decodes the frame at buf[0..avail) of a segment of format `version`. `room` is how many
 * bytes the segment has from the frame's start to its end (a frame may not cross it);
 * `file_off` is the frame's offset in its file (used only to tell a torn write, which leaves
 * whole zero sectors, from a bad CRC). RECORD_NEED_MORE when avail < room and the frame
 * extends past avail. A version 2 meta frame must hold at least a type byte and one byte of
 * text; its hash and origin block must be zero (else RECORD_BAD_CRC: it was written that way).
 */
record_status_t record_decode(uint32_t version, const uint8_t *buf, size_t avail, uint64_t room,
                              uint64_t file_off, record_view_t *out);

/* The CRC a frame of `version` must carry (over header bytes [8, header end) and the
 * payload). */
uint32_t record_crc(uint32_t version, const uint8_t *frame, uint32_t payload_len);

/*
 * Version 1: seals a prepared frame in place: sets flags and synced_seq, computes the chain
 * hash from `prev_hash` into the frame (and into `hash_out`), then the CRC. Returns 0 or
 * -ENOMEM.
 */
int record_seal(uint8_t *frame, const uint8_t prev_hash[HASH_BYTES], uint32_t flags,
                uint64_t synced_seq, chain_hasher_t *hasher, uint8_t hash_out[HASH_BYTES]);

/* Version 2: the leaf hash of a prepared or decoded record frame, SHA-256(0x00 || seq ||
 * ts_ns || origin block || payload) (FORMAT.md, "Leaf data"). Returns 0 or -ENOMEM. */
int record_leaf_hash(merkle_hasher_t *h, const uint8_t *frame, uint32_t payload_len,
                     uint8_t out[MERKLE_HASH_BYTES]);

/* Version 2: the leaf hash of a frame from journal_frame_prepare, not yet sealed: the one
 * journal_frame_hash_leaf left in its hash field, or (a zero field) computed now. Returns 0
 * or -ENOMEM. */
int record_prepared_leaf(merkle_hasher_t *h, const uint8_t *frame, uint32_t payload_len,
                         uint8_t out[MERKLE_HASH_BYTES]);

/*
 * Version 2: seals a prepared record frame whose leaf hash is `leaf_hash`: flags, synced_seq,
 * the chain hash SHA-256(prev_hash || leaf_hash) into the frame and hash_out, then the CRC.
 * Returns 0 or -ENOMEM.
 */
int record_seal_v2(uint8_t *frame, const uint8_t prev_hash[HASH_BYTES],
                   const uint8_t leaf_hash[MERKLE_HASH_BYTES], uint32_t flags, uint64_t synced_seq,
                   chain_hasher_t *hasher, uint8_t hash_out[HASH_BYTES]);

/* Version 2: bytes of a meta frame carrying a text of text_len bytes (type byte included). */
size_t record_meta_bytes(size_t text_len);

/*
 * Version 2: lays out and seals a whole meta frame at `frame` (record_meta_bytes(text_len)
 * bytes): seq = tree size, ts_ns, payload = `type` then the text, flags (FRAME_FLAG_META is
 * added), synced_seq, CRC; hash and origin block zero.
 */
void record_meta_build(uint8_t *frame, uint8_t type, const char *text, size_t text_len,
                       uint64_t tree_size, int64_t ts_ns, uint32_t flags, uint64_t synced_seq);

/* 1 when buf[0..len) is all zero. */
int record_is_zero(const uint8_t *buf, size_t len);

#endif /* STELE_JOURNAL_RECORD_H */
