/*
 * record.c: frame decoding, sealing and the pure frame helpers of journal.h
 * (journal_frame_bytes, journal_frame_prepare). The byte layout is FORMAT.md's; this file
 * implements its validity rules 1-5 and nothing else: whether a valid frame *follows* its
 * predecessor (seq, ts, chain) is the scanner's business (recover.c, jreader.c).
 */
#include "record.h"

#include <errno.h>
#include <string.h>

#include "crc32c.h"
#include "journal.h"

/* Torn writes lose whole sectors; 512 bytes is the smallest sector a disk promises to
 * write atomically, so a frame missing one is torn rather than bit-rotten. */
enum { RECORD_SECTOR_BYTES = 512 };

const char *
record_status_name(record_status_t st)
{
    switch (st) {
    case RECORD_VALID:
        return "valid";
    case RECORD_ZERO:
        return "zero";
    case RECORD_NEED_MORE:
        return "need more";
    case RECORD_TORN:
        return "torn frame";
    case RECORD_BAD_LENGTH:
        return "bad length";
    case RECORD_BAD_CRC:
        return "bad crc";
    }
    return "unknown";
}

int
record_is_zero(const uint8_t *buf, size_t len)
{
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, buf + i, sizeof w);
        if (w)
            return 0;
    }
    for (; i < len; i++)
        if (buf[i])
            return 0;
    return 1;
}

uint32_t
record_crc(const uint8_t *frame, uint32_t payload_len)
{
    return crc32c(frame + FRAME_CRC_FROM, FRAME_HEADER_BYTES - FRAME_CRC_FROM + payload_len);
}

/* A CRC failure is "torn" when part of the frame reads as never written: a whole file
 * sector inside it is zero, or its last RECORD_TORN_TAIL_BYTES or more are zero (more than
 * a payload's final zero byte plus padding could explain). Else the bytes are there but
 * wrong: a bad CRC. The class only names the damage; both end the log the same way. */
enum { RECORD_TORN_TAIL_BYTES = 32 };

static int
record_looks_torn(const uint8_t *frame, uint64_t frame_bytes, uint64_t file_off)
{
    uint64_t end = file_off + frame_bytes;
    uint64_t s = file_off - file_off % RECORD_SECTOR_BYTES;
    if (s < file_off)
        s += RECORD_SECTOR_BYTES;
    for (; s + RECORD_SECTOR_BYTES <= end; s += RECORD_SECTOR_BYTES)
        if (record_is_zero(frame + (s - file_off), RECORD_SECTOR_BYTES))
            return 1;
    return frame_bytes >= RECORD_TORN_TAIL_BYTES &&
           record_is_zero(frame + frame_bytes - RECORD_TORN_TAIL_BYTES, RECORD_TORN_TAIL_BYTES);
}

record_status_t
record_decode(const uint8_t *buf, size_t avail, uint64_t room, uint64_t file_off,
              record_view_t *out)
{
    size_t head = avail < FRAME_HEADER_BYTES ? avail : FRAME_HEADER_BYTES;
    if (avail < FRAME_HEADER_BYTES) {
        if (room > avail)
            return RECORD_NEED_MORE;
        /* The segment ends inside a header: only a clean zero tail may be there. */
        return record_is_zero(buf, head) ? RECORD_ZERO : RECORD_TORN;
    }
    if (record_is_zero(buf, FRAME_HEADER_BYTES))
        return RECORD_ZERO;
    if (format_load_u32(buf + FRAME_OFF_MAGIC) != FRAME_MAGIC)
        return RECORD_TORN; /* rule 1 */
    uint32_t payload_len = format_load_u32(buf + FRAME_OFF_PAYLOAD_LEN);
    uint64_t frame_bytes = format_frame_bytes(payload_len);
    if (payload_len == 0 || payload_len > FRAME_MAX_PAYLOAD || frame_bytes > room)
        return RECORD_BAD_LENGTH; /* rule 2 */
    if (avail < frame_bytes)
        return RECORD_NEED_MORE;
    uint32_t flags = format_load_u32(buf + FRAME_OFF_FLAGS);
    if (format_load_u32(buf + FRAME_OFF_CRC) != record_crc(buf, payload_len)) /* rule 3 */
        return record_looks_torn(buf, frame_bytes, file_off) ? RECORD_TORN : RECORD_BAD_CRC;
    if (flags & ~(uint32_t)FRAME_FLAGS_KNOWN)
        return RECORD_BAD_CRC; /* rule 4: reserved flags; a newer writer would bump the version */
    if (!record_is_zero(buf + FRAME_HEADER_BYTES + payload_len,
                        (size_t)(frame_bytes - FRAME_HEADER_BYTES - payload_len)))
        return RECORD_BAD_CRC; /* rule 5: padding is zero */
    out->payload_len = payload_len;
    out->flags = flags;
    out->seq = format_load_u64(buf + FRAME_OFF_SEQ);
    out->ts_ns = format_load_i64(buf + FRAME_OFF_TS_NS);
    out->synced_seq = format_load_u64(buf + FRAME_OFF_SYNCED_SEQ);
    out->hash = buf + FRAME_OFF_HASH;
    out->payload = buf + FRAME_HEADER_BYTES;
    out->frame_bytes = frame_bytes;
    return RECORD_VALID;
}

int
record_seal(uint8_t *frame, const uint8_t prev_hash[HASH_BYTES], uint32_t flags,
            uint64_t synced_seq, chain_hasher_t *hasher, uint8_t hash_out[HASH_BYTES])
{
    uint32_t payload_len = format_load_u32(frame + FRAME_OFF_PAYLOAD_LEN);
    format_store_u32(frame + FRAME_OFF_FLAGS, flags);
    format_store_u64(frame + FRAME_OFF_SYNCED_SEQ, synced_seq);
    int rc = chain_hash(hasher, prev_hash, format_load_u64(frame + FRAME_OFF_SEQ),
                        format_load_i64(frame + FRAME_OFF_TS_NS), frame + FRAME_HEADER_BYTES,
                        payload_len, frame + FRAME_OFF_HASH);
    if (rc)
        return rc;
    memcpy(hash_out, frame + FRAME_OFF_HASH, HASH_BYTES);
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(frame, payload_len));
    return 0;
}

size_t
journal_frame_bytes(uint32_t payload_len)
{
    return (size_t)format_frame_bytes(payload_len);
}

void
journal_frame_prepare(uint8_t *frame, uint64_t seq, int64_t ts_ns, const uint8_t *payload,
                      uint32_t payload_len)
{
    size_t frame_bytes = journal_frame_bytes(payload_len);
    memset(frame, 0, FRAME_HEADER_BYTES);
    format_store_u32(frame + FRAME_OFF_MAGIC, FRAME_MAGIC);
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, payload_len);
    format_store_u64(frame + FRAME_OFF_SEQ, seq);
    format_store_i64(frame + FRAME_OFF_TS_NS, ts_ns);
    if (payload_len)
        memcpy(frame + FRAME_HEADER_BYTES, payload, payload_len);
    memset(frame + FRAME_HEADER_BYTES + payload_len, 0,
           frame_bytes - FRAME_HEADER_BYTES - payload_len);
}
