/*
 * record.c: frame decoding, sealing and the pure frame helpers of journal.h
 * (journal_frame_bytes, journal_frame_prepare), in both format versions, and the layout of
 * version 2's meta frames. The byte layout is FORMAT.md's; this file implements its frame
 * validity rules F1-F5 and nothing else: whether a valid frame *follows* its predecessor
 * (seq, ts, chain) is the scanner's business (recover.c, jreader.c). No state.
 */
#include "record.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>

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
record_crc(uint32_t version, const uint8_t *frame, uint32_t payload_len)
{
    return crc32c(frame + FRAME_CRC_FROM,
                  format_frame_header_bytes(version) - FRAME_CRC_FROM + payload_len);
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

/* Version 2's rules for a meta frame (F4): a type byte and some text; no chain hash and no
 * origin, since it is not a record. */
static int
record_meta_ok(const uint8_t *buf, uint32_t payload_len)
{
    return payload_len >= META_MIN_PAYLOAD && record_is_zero(buf + FRAME_OFF_HASH, HASH_BYTES) &&
           record_is_zero(buf + FRAME_OFF_ORIGIN, FRAME_ORIGIN_BYTES);
}

static void
record_fill_view(uint32_t version, const uint8_t *buf, uint32_t payload_len, uint64_t frame_bytes,
                 record_view_t *out)
{
    uint32_t header = format_frame_header_bytes(version);
    out->version = version;
    out->payload_len = payload_len;
    out->flags = format_load_u32(buf + FRAME_OFF_FLAGS);
    out->seq = format_load_u64(buf + FRAME_OFF_SEQ);
    out->ts_ns = format_load_i64(buf + FRAME_OFF_TS_NS);
    out->synced_seq = format_load_u64(buf + FRAME_OFF_SYNCED_SEQ);
    out->hash = buf + FRAME_OFF_HASH;
    out->is_meta = (out->flags & FRAME_FLAG_META) != 0;
    out->origin_uid = version >= 2 ? format_load_u32(buf + FRAME_OFF_ORIGIN_UID) : 0;
    out->origin_gid = version >= 2 ? format_load_u32(buf + FRAME_OFF_ORIGIN_GID) : 0;
    out->origin_pid = version >= 2 ? format_load_u32(buf + FRAME_OFF_ORIGIN_PID) : 0;
    out->origin_kind = version >= 2 ? format_load_u32(buf + FRAME_OFF_ORIGIN_KIND) : 0;
    out->payload = buf + header;
    out->frame_bytes = frame_bytes;
    out->frame = buf;
}

record_status_t
record_decode(uint32_t version, const uint8_t *buf, size_t avail, uint64_t room, uint64_t file_off,
              record_view_t *out)
{
    uint32_t header = format_frame_header_bytes(version);
    size_t head = avail < header ? avail : header;
    if (avail < header) {
        if (room > avail)
            return RECORD_NEED_MORE;
        /* The segment ends inside a header: only a clean zero tail may be there. */
        return record_is_zero(buf, head) ? RECORD_ZERO : RECORD_TORN;
    }
    if (record_is_zero(buf, header))
        return RECORD_ZERO;
    if (format_load_u32(buf + FRAME_OFF_MAGIC) != FRAME_MAGIC)
        return RECORD_TORN; /* rule F1 */
    uint32_t payload_len = format_load_u32(buf + FRAME_OFF_PAYLOAD_LEN);
    uint64_t frame_bytes = format_frame_bytes(version, payload_len);
    if (payload_len == 0 || payload_len > FRAME_MAX_PAYLOAD || frame_bytes > room)
        return RECORD_BAD_LENGTH; /* rule F2 */
    if (avail < frame_bytes)
        return RECORD_NEED_MORE;
    uint32_t flags = format_load_u32(buf + FRAME_OFF_FLAGS);
    if (format_load_u32(buf + FRAME_OFF_CRC) != record_crc(version, buf, payload_len)) /* F3 */
        return record_looks_torn(buf, frame_bytes, file_off) ? RECORD_TORN : RECORD_BAD_CRC;
    /* F4: reserved flags (a newer writer would bump the version), a meta frame's shape */
    if (flags & ~format_frame_flags_known(version))
        return RECORD_BAD_CRC;
    if ((flags & FRAME_FLAG_META) && !record_meta_ok(buf, payload_len))
        return RECORD_BAD_CRC;
    if (!record_is_zero(buf + header + payload_len, (size_t)(frame_bytes - header - payload_len)))
        return RECORD_BAD_CRC; /* rule F5: padding is zero */
    record_fill_view(version, buf, payload_len, frame_bytes, out);
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
                        format_load_i64(frame + FRAME_OFF_TS_NS), frame + FRAME_HEADER_BYTES_V1,
                        payload_len, frame + FRAME_OFF_HASH);
    if (rc)
        return rc;
    memcpy(hash_out, frame + FRAME_OFF_HASH, HASH_BYTES);
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(1, frame, payload_len));
    return 0;
}

int
record_leaf_hash(merkle_hasher_t *h, const uint8_t *frame, uint32_t payload_len,
                 uint8_t out[MERKLE_HASH_BYTES])
{
    /* Leaf data: seq and ts_ns (header bytes [16, 32)), then the origin block and the
     * payload, which follow each other from byte 72. */
    const struct iovec parts[2] = {
        {.iov_base = (void *)(frame + FRAME_OFF_SEQ), .iov_len = 16},
        {.iov_base = (void *)(frame + FRAME_OFF_ORIGIN),
         .iov_len = FRAME_ORIGIN_BYTES + (size_t)payload_len},
    };
    return merkle_hash_leaf(h, parts, 2, out);
}

int
record_seal_v2(uint8_t *frame, const uint8_t prev_hash[HASH_BYTES],
               const uint8_t leaf_hash[MERKLE_HASH_BYTES], uint32_t flags, uint64_t synced_seq,
               chain_hasher_t *hasher, uint8_t hash_out[HASH_BYTES])
{
    uint32_t payload_len = format_load_u32(frame + FRAME_OFF_PAYLOAD_LEN);
    format_store_u32(frame + FRAME_OFF_FLAGS, flags);
    format_store_u64(frame + FRAME_OFF_SYNCED_SEQ, synced_seq);
    int rc = chain_link(hasher, prev_hash, leaf_hash, frame + FRAME_OFF_HASH);
    if (rc)
        return rc;
    memcpy(hash_out, frame + FRAME_OFF_HASH, HASH_BYTES);
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(2, frame, payload_len));
    return 0;
}

size_t
record_meta_bytes(size_t text_len)
{
    return (size_t)format_frame_bytes(2, 1 + (uint64_t)text_len);
}

void
record_meta_build(uint8_t *frame, uint8_t type, const char *text, size_t text_len,
                  uint64_t tree_size, int64_t ts_ns, uint32_t flags, uint64_t synced_seq)
{
    uint32_t payload_len = (uint32_t)(1 + text_len);
    size_t frame_bytes = record_meta_bytes(text_len);
    memset(frame, 0, frame_bytes);
    format_store_u32(frame + FRAME_OFF_MAGIC, FRAME_MAGIC);
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, payload_len);
    format_store_u32(frame + FRAME_OFF_FLAGS, flags | FRAME_FLAG_META);
    format_store_u64(frame + FRAME_OFF_SEQ, tree_size);
    format_store_i64(frame + FRAME_OFF_TS_NS, ts_ns);
    format_store_u64(frame + FRAME_OFF_SYNCED_SEQ, synced_seq);
    frame[FRAME_HEADER_BYTES_V2] = type;
    memcpy(frame + FRAME_HEADER_BYTES_V2 + 1, text, text_len);
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(2, frame, payload_len));
}

int
record_prepared_leaf(merkle_hasher_t *h, const uint8_t *frame, uint32_t payload_len,
                     uint8_t out[MERKLE_HASH_BYTES])
{
    if (!record_is_zero(frame + FRAME_OFF_HASH, HASH_BYTES)) {
        memcpy(out, frame + FRAME_OFF_HASH, MERKLE_HASH_BYTES);
        return 0;
    }
    return record_leaf_hash(h, frame, payload_len, out);
}

size_t
journal_frame_bytes(uint32_t version, uint32_t payload_len)
{
    return (size_t)format_frame_bytes(version, payload_len);
}

void
journal_frame_prepare(uint32_t version, uint8_t *frame, uint64_t seq, int64_t ts_ns,
                      const journal_origin_t *origin, const uint8_t *payload, uint32_t payload_len)
{
    uint32_t header = format_frame_header_bytes(version);
    size_t frame_bytes = journal_frame_bytes(version, payload_len);
    memset(frame, 0, header);
    format_store_u32(frame + FRAME_OFF_MAGIC, FRAME_MAGIC);
    format_store_u32(frame + FRAME_OFF_PAYLOAD_LEN, payload_len);
    format_store_u64(frame + FRAME_OFF_SEQ, seq);
    format_store_i64(frame + FRAME_OFF_TS_NS, ts_ns);
    if (version >= 2 && origin) {
        format_store_u32(frame + FRAME_OFF_ORIGIN_UID, origin->uid);
        format_store_u32(frame + FRAME_OFF_ORIGIN_GID, origin->gid);
        format_store_u32(frame + FRAME_OFF_ORIGIN_PID, origin->pid);
        format_store_u32(frame + FRAME_OFF_ORIGIN_KIND, origin->kind);
    }
    if (payload_len)
        memcpy(frame + header, payload, payload_len);
    memset(frame + header + payload_len, 0, frame_bytes - header - payload_len);
}

void
journal_frame_hash_leaf(uint32_t version, uint8_t *frame)
{
    if (version < 2)
        return;
    uint32_t payload_len = format_load_u32(frame + FRAME_OFF_PAYLOAD_LEN);
    merkle_hasher_t h;
    merkle_hasher_init(&h);
    if (record_leaf_hash(&h, frame, payload_len, frame + FRAME_OFF_HASH) != 0)
        memset(frame + FRAME_OFF_HASH, 0, HASH_BYTES);
}
