/*
 * record.h: one frame (FORMAT.md, "Frame"): decoding and checking a frame read from disk,
 * and sealing a prepared frame (chain hash, flags, synced_seq, CRC) before it is written.
 * Pure functions over byte buffers: no I/O, no state.
 */
#ifndef STELE_JOURNAL_RECORD_H
#define STELE_JOURNAL_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "chain.h"
#include "format.h"

/* What record_decode found at a frame position (FORMAT.md validity rules 1-5). */
typedef enum record_status {
    RECORD_VALID = 0,  /* rules 1-5 hold */
    RECORD_ZERO,       /* the header is all zero: preallocated space */
    RECORD_NEED_MORE,  /* the buffer holds less than the frame and more exists: read more */
    RECORD_TORN,       /* cut short, partly zero, or not a frame at all */
    RECORD_BAD_LENGTH, /* a payload length the format or the segment cannot hold */
    RECORD_BAD_CRC,    /* complete, but the CRC (or the reserved flags) does not check */
} record_status_t;

const char *record_status_name(record_status_t st);

/* A decoded frame; pointers into the caller's buffer. */
typedef struct record_view {
    uint32_t payload_len;
    uint32_t flags;
    uint64_t seq;
    int64_t ts_ns;
    uint64_t synced_seq;
    const uint8_t *hash; /* HASH_BYTES */
    const uint8_t *payload;
    uint64_t frame_bytes; /* header + payload + padding */
} record_view_t;

/*
 * Decodes the frame at buf[0..avail). `room` is how many bytes the segment has from the
 * frame's start to its end (a frame may not cross it); `file_off` is the frame's offset in
 * its file (used only to tell a torn write, which leaves whole zero sectors, from a bad
 * CRC). RECORD_NEED_MORE when avail < room and the frame extends past avail.
 */
record_status_t record_decode(const uint8_t *buf, size_t avail, uint64_t room, uint64_t file_off,
                              record_view_t *out);

/*
 * Seals a prepared frame in place: sets flags and synced_seq, computes the chain hash from
 * `prev_hash` into the frame (and into `hash_out`), then the CRC. Returns 0 or -ENOMEM.
 */
int record_seal(uint8_t *frame, const uint8_t prev_hash[HASH_BYTES], uint32_t flags,
                uint64_t synced_seq, chain_hasher_t *hasher, uint8_t hash_out[HASH_BYTES]);

/* The CRC a frame must carry (over header bytes [8, 72) and the payload). */
uint32_t record_crc(const uint8_t *frame, uint32_t payload_len);

/* 1 when buf[0..len) is all zero. */
int record_is_zero(const uint8_t *buf, size_t len);

#endif /* STELE_JOURNAL_RECORD_H */
