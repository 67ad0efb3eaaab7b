/*
 * format.h: the journal's on-disk layout as constants, mirroring journal/FORMAT.md (the only
 * specification). Every size and offset below has a _Static_assert; the two change together,
 * with FORMAT_VERSION.
 *
 * Everything on disk is little-endian. The load/store helpers below are the only code that
 * turns bytes into integers, so the layout never depends on the host's byte order or on
 * struct padding.
 */
#ifndef STELE_JOURNAL_FORMAT_H
#define STELE_JOURNAL_FORMAT_H

#include <stdint.h>
#include <string.h>

/* The version a new journal is created in; a reader refuses a larger one. A journal keeps
 * the version it was created in (FORMAT.md, "Versions and upgrades"): version 1 journals are
 * still read, appended to and verified. */
#define FORMAT_VERSION 2u
#define FORMAT_VERSION_MIN 1u

/* ---- segment header: one 4 KiB page at offset 0, so frames never share its page ---- */
#define SEG_MAGIC "STELESEG"
#define SEG_MAGIC_BYTES 8
#define SEG_HEADER_BYTES 4096u
#define SEG_SOURCE_BYTES 64u /* NUL-padded; at most 63 bytes of name */
#define SEG_OFF_MAGIC 0
#define SEG_OFF_VERSION 8
#define SEG_OFF_HEADER_BYTES 12
#define SEG_OFF_FIRST_SEQ 16
#define SEG_OFF_CREATED_NS 24
#define SEG_OFF_PREV_TS_NS 32
#define SEG_OFF_SOURCE 40
#define SEG_OFF_GENESIS 104
#define SEG_OFF_PREV_HASH 136
#define SEG_OFF_CRC 168
#define SEG_CRC_COVERED_BYTES 168 /* the CRC covers bytes [0, 168) */
#define SEG_USED_BYTES 172        /* version 1: bytes [172, 4096) are zero */

/* Version 2 adds, after the version 1 fields, a second CRC'd part: the Merkle tree's compact
 * range at first_seq - 1 and the signing key epoch in force at the segment's start. */
#define SEG_OFF_EXT_CRC 172     /* CRC32C of bytes [176, 2216) */
#define SEG_OFF_TRUST_FLAGS 176 /* bit 0 SEG_TRUST_KEYED */
#define SEG_OFF_RANGE_BYTES 180 /* bytes of the compact range used */
#define SEG_OFF_KEY_EPOCH 184
#define SEG_OFF_RANGE 192
#define SEG_RANGE_AREA_BYTES 2024 /* 8 + 63 * 32: the largest compact range */
#define SEG_EXT_CRC_FROM 176
#define SEG_V2_USED_BYTES 2216 /* version 2: bytes [2216, 4096) are zero */
#define SEG_TRUST_KEYED 1u     /* a signing key was in force when the segment began */
#define SEG_TRUST_FLAGS_KNOWN SEG_TRUST_KEYED

/* Segment file names: the first seq as 20 decimal digits (UINT64_MAX has 20) + ".seg". */
#define SEG_NAME_DIGITS 20
#define SEG_NAME_SUFFIX ".seg"
#define SEG_NAME_BYTES (SEG_NAME_DIGITS + 4 + 1)
/* The segment the preparer keeps ready, under a name no reader or recovery treats as a log. */
#define SEG_PREPARED_NAME "prepared.tmp"

/* ---- frame: a header (72 bytes in version 1, 88 in version 2), the payload, zero padding
 * to a multiple of 8 ---- */
#define FRAME_MAGIC 0x524c5453u /* "STLR" as LE bytes; non-zero so zeros never validate */
#define FRAME_HEADER_BYTES_V1 72u
#define FRAME_HEADER_BYTES_V2 88u
#define FRAME_ALIGN 8u
#define FRAME_OFF_MAGIC 0
#define FRAME_OFF_CRC 4
#define FRAME_OFF_PAYLOAD_LEN 8
#define FRAME_OFF_FLAGS 12
#define FRAME_OFF_SEQ 16
#define FRAME_OFF_TS_NS 24
#define FRAME_OFF_SYNCED_SEQ 32
#define FRAME_OFF_HASH 40
/* Version 2: the origin block (who appended the record), covered by the CRC and the hashes. */
#define FRAME_OFF_ORIGIN 72
#define FRAME_OFF_ORIGIN_UID 72
#define FRAME_OFF_ORIGIN_GID 76
#define FRAME_OFF_ORIGIN_PID 80
#define FRAME_OFF_ORIGIN_KIND 84
#define FRAME_ORIGIN_BYTES 16u
#define FRAME_CRC_FROM 8 /* the CRC covers header bytes [8, header end) and then the payload */
#define FRAME_FLAG_BATCH_END 1u
#define FRAME_FLAG_META 2u /* version 2: not a record but a checkpoint or key statement */
#define FRAME_FLAGS_KNOWN_V1 FRAME_FLAG_BATCH_END
#define FRAME_FLAGS_KNOWN_V2 (FRAME_FLAG_BATCH_END | FRAME_FLAG_META)
/* Origin kinds (version 2). */
#define FRAME_ORIGIN_UNKNOWN 0u
#define FRAME_ORIGIN_PROCESS 1u /* the writing process itself (a library writer) */
#define FRAME_ORIGIN_PEER 2u    /* a peer of `stele serve`, vouched for by SO_PEERCRED */
#define FRAME_ORIGIN_KIND_MAX FRAME_ORIGIN_PEER
/* Meta frame payloads: one type byte, then the UTF-8 text of a signed note. */
#define META_TYPE_CHECKPOINT 1u
#define META_TYPE_KEY 2u
#define META_MIN_PAYLOAD 2u
/* The largest payload the format can describe: well above any max_record_bytes (16 MiB at
 * most), small enough that a garbage length is caught before any allocation. */
#define FRAME_MAX_PAYLOAD (64u * 1024u * 1024u)
#define HASH_BYTES 32u

/* ---- LOCK: the writer lock and the state shared with readers (one page, mmap'ed) ---- */
#define LOCK_NAME "LOCK"
#define LOCK_MAGIC "STELELCK"
#define LOCK_FILE_BYTES 4096u
#define LOCK_VERSION 1u

/* ---- KEYS: the key statements of a signed journal, one meta frame each (version 2) ---- */
#define KEYS_NAME "KEYS"

_Static_assert(SEG_OFF_VERSION == SEG_OFF_MAGIC + SEG_MAGIC_BYTES, "segment header layout");
_Static_assert(SEG_OFF_HEADER_BYTES == SEG_OFF_VERSION + 4, "segment header layout");
_Static_assert(SEG_OFF_FIRST_SEQ == SEG_OFF_HEADER_BYTES + 4, "segment header layout");
_Static_assert(SEG_OFF_CREATED_NS == SEG_OFF_FIRST_SEQ + 8, "segment header layout");
_Static_assert(SEG_OFF_PREV_TS_NS == SEG_OFF_CREATED_NS + 8, "segment header layout");
_Static_assert(SEG_OFF_SOURCE == SEG_OFF_PREV_TS_NS + 8, "segment header layout");
_Static_assert(SEG_OFF_GENESIS == SEG_OFF_SOURCE + SEG_SOURCE_BYTES, "segment header layout");
_Static_assert(SEG_OFF_PREV_HASH == SEG_OFF_GENESIS + HASH_BYTES, "segment header layout");
_Static_assert(SEG_OFF_CRC == SEG_OFF_PREV_HASH + HASH_BYTES, "segment header layout");
_Static_assert(SEG_CRC_COVERED_BYTES == SEG_OFF_CRC, "the header CRC covers what precedes it");
_Static_assert(SEG_USED_BYTES == SEG_OFF_CRC + 4, "segment header layout");
_Static_assert(SEG_USED_BYTES <= SEG_HEADER_BYTES, "segment header fits its page");
_Static_assert(SEG_HEADER_BYTES % FRAME_ALIGN == 0, "first frame is aligned");
_Static_assert(SEG_OFF_EXT_CRC == SEG_USED_BYTES, "version 2 extends version 1's header");
_Static_assert(SEG_OFF_TRUST_FLAGS == SEG_OFF_EXT_CRC + 4, "segment header layout");
_Static_assert(SEG_OFF_RANGE_BYTES == SEG_OFF_TRUST_FLAGS + 4, "segment header layout");
_Static_assert(SEG_OFF_KEY_EPOCH == SEG_OFF_RANGE_BYTES + 4, "segment header layout");
_Static_assert(SEG_OFF_RANGE == SEG_OFF_KEY_EPOCH + 8, "segment header layout");
_Static_assert(SEG_EXT_CRC_FROM == SEG_OFF_TRUST_FLAGS, "the second CRC covers what follows it");
_Static_assert(SEG_V2_USED_BYTES == SEG_OFF_RANGE + SEG_RANGE_AREA_BYTES, "segment header layout");
_Static_assert(SEG_RANGE_AREA_BYTES == 8 + 63 * 32, "room for the largest compact range");
_Static_assert(SEG_V2_USED_BYTES <= SEG_HEADER_BYTES, "version 2 header fits its page");
_Static_assert(sizeof(SEG_MAGIC) - 1 == SEG_MAGIC_BYTES, "segment magic size");
_Static_assert(sizeof(SEG_NAME_SUFFIX) - 1 == 4, "segment name size");

_Static_assert(FRAME_OFF_CRC == FRAME_OFF_MAGIC + 4, "frame layout");
_Static_assert(FRAME_OFF_PAYLOAD_LEN == FRAME_OFF_CRC + 4, "frame layout");
_Static_assert(FRAME_OFF_FLAGS == FRAME_OFF_PAYLOAD_LEN + 4, "frame layout");
_Static_assert(FRAME_OFF_SEQ == FRAME_OFF_FLAGS + 4, "frame layout");
_Static_assert(FRAME_OFF_TS_NS == FRAME_OFF_SEQ + 8, "frame layout");
_Static_assert(FRAME_OFF_SYNCED_SEQ == FRAME_OFF_TS_NS + 8, "frame layout");
_Static_assert(FRAME_OFF_HASH == FRAME_OFF_SYNCED_SEQ + 8, "frame layout");
_Static_assert(FRAME_HEADER_BYTES_V1 == FRAME_OFF_HASH + HASH_BYTES, "frame layout");
_Static_assert(FRAME_HEADER_BYTES_V1 % FRAME_ALIGN == 0, "payload starts aligned");
_Static_assert(FRAME_OFF_ORIGIN == FRAME_HEADER_BYTES_V1, "version 2 extends version 1's frame");
_Static_assert(FRAME_OFF_ORIGIN_UID == FRAME_OFF_ORIGIN, "frame layout");
_Static_assert(FRAME_OFF_ORIGIN_GID == FRAME_OFF_ORIGIN_UID + 4, "frame layout");
_Static_assert(FRAME_OFF_ORIGIN_PID == FRAME_OFF_ORIGIN_GID + 4, "frame layout");
_Static_assert(FRAME_OFF_ORIGIN_KIND == FRAME_OFF_ORIGIN_PID + 4, "frame layout");
_Static_assert(FRAME_HEADER_BYTES_V2 == FRAME_OFF_ORIGIN + FRAME_ORIGIN_BYTES, "frame layout");
_Static_assert(FRAME_HEADER_BYTES_V2 % FRAME_ALIGN == 0, "payload starts aligned");
_Static_assert(FRAME_CRC_FROM == FRAME_OFF_PAYLOAD_LEN, "crc covers the header after itself");
_Static_assert(FRAME_MAGIC != 0, "an all-zero frame must never validate");

/* The frame header's size in a segment of `version` (1 or 2). */
static inline uint32_t
format_frame_header_bytes(uint32_t version)
{
    return version >= 2 ? FRAME_HEADER_BYTES_V2 : FRAME_HEADER_BYTES_V1;
}

/* Bytes a frame with `payload_len` payload bytes occupies on disk in a segment of `version`. */
static inline uint64_t
format_frame_bytes(uint32_t version, uint64_t payload_len)
{
    return (format_frame_header_bytes(version) + payload_len + FRAME_ALIGN - 1) &
           ~(uint64_t)(FRAME_ALIGN - 1);
}

/* The flag bits a frame of `version` may carry. */
static inline uint32_t
format_frame_flags_known(uint32_t version)
{
    return version >= 2 ? FRAME_FLAGS_KNOWN_V2 : FRAME_FLAGS_KNOWN_V1;
}

static inline uint32_t
format_load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t
format_load_u64(const uint8_t *p)
{
    return (uint64_t)format_load_u32(p) | (uint64_t)format_load_u32(p + 4) << 32;
}

static inline int64_t
format_load_i64(const uint8_t *p)
{
    uint64_t u = format_load_u64(p);
    int64_t v;
    memcpy(&v, &u, sizeof v); /* two's complement on every supported target */
    return v;
}

static inline void
format_store_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline void
format_store_u64(uint8_t *p, uint64_t v)
{
    format_store_u32(p, (uint32_t)v);
    format_store_u32(p + 4, (uint32_t)(v >> 32));
}

static inline void
format_store_i64(uint8_t *p, int64_t v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    format_store_u64(p, u);
}

#endif /* STELE_JOURNAL_FORMAT_H */
