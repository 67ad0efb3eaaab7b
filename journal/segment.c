/*
 * segment.c: segment names, headers and lifecycle (segment.h). A segment is born as
 * prepared.tmp (preallocated and fsynced by the preparer thread, off the commit path) and
 * becomes <first_seq>.seg in segment_install: header written and synced *before* the
 * rename, and the directory synced after it, so a file carrying a segment name always has
 * a durable, valid header. Names are relative to the journal's directory descriptor (io.h),
 * so a link planted under prepared.tmp or a future segment's name is removed or replaced,
 * never followed. No state of its own; callers serialise use of prepared.tmp.
 */
#include "segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "record.h"
#include "stele.h"

void
segment_name(char out[SEG_NAME_BYTES], uint64_t first_seq)
{
    snprintf(out, SEG_NAME_BYTES, "%020" PRIu64 "%s", first_seq, SEG_NAME_SUFFIX);
}

int
segment_parse_name(const char *name, uint64_t *first_seq)
{
    uint64_t v = 0;
    for (int i = 0; i < SEG_NAME_DIGITS; i++) {
        if (name[i] < '0' || name[i] > '9')
            return 0;
        uint64_t digit = (uint64_t)(name[i] - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return 0;
        v = v * 10 + digit;
    }
    if (strcmp(name + SEG_NAME_DIGITS, SEG_NAME_SUFFIX) != 0)
        return 0;
    *first_seq = v;
    return 1;
}

/* Version 2's part of the header: flags, key epoch and the compact range, under their CRC. */
static void
segment_header_encode_v2(const segment_header_t *h, uint8_t buf[SEG_HEADER_BYTES])
{
    size_t range_bytes = merkle_range_encode(&h->range, buf + SEG_OFF_RANGE, SEG_RANGE_AREA_BYTES);
    format_store_u32(buf + SEG_OFF_TRUST_FLAGS, h->trust_flags);
    format_store_u32(buf + SEG_OFF_RANGE_BYTES, (uint32_t)range_bytes);
    format_store_u64(buf + SEG_OFF_KEY_EPOCH, h->key_epoch);
    format_store_u32(buf + SEG_OFF_EXT_CRC,
                     crc32c(buf + SEG_EXT_CRC_FROM, SEG_V2_USED_BYTES - SEG_EXT_CRC_FROM));
}

void
segment_header_encode(const segment_header_t *h, uint8_t buf[SEG_HEADER_BYTES])
{
    memset(buf, 0, SEG_HEADER_BYTES);
    memcpy(buf + SEG_OFF_MAGIC, SEG_MAGIC, SEG_MAGIC_BYTES);
    format_store_u32(buf + SEG_OFF_VERSION, h->version);
    format_store_u32(buf + SEG_OFF_HEADER_BYTES, SEG_HEADER_BYTES);
    format_store_u64(buf + SEG_OFF_FIRST_SEQ, h->first_seq);
    format_store_i64(buf + SEG_OFF_CREATED_NS, h->created_ns);
    format_store_i64(buf + SEG_OFF_PREV_TS_NS, h->prev_ts_ns);
    size_t src_len = strnlen(h->source, SEG_SOURCE_BYTES - 1);
    memcpy(buf + SEG_OFF_SOURCE, h->source, src_len);
    memcpy(buf + SEG_OFF_GENESIS, h->genesis, HASH_BYTES);
    memcpy(buf + SEG_OFF_PREV_HASH, h->prev_hash, HASH_BYTES);
    format_store_u32(buf + SEG_OFF_CRC, crc32c(buf, SEG_CRC_COVERED_BYTES));
    if (h->version >= 2)
        segment_header_encode_v2(h, buf);
}

/* Sets *fault and returns STELE_ECORRUPT. */
static int
segment_header_refuse(segment_header_fault_t *fault, const char *why, uint32_t offset)
{
    fault->why = why;
    fault->offset = offset;
    return STELE_ECORRUPT;
}

/* Rule H5: the offset of the first non-zero reserved byte at or after `from`, or 0 when
 * they are all zero. */
static uint32_t
segment_first_nonzero_reserved(const uint8_t *buf, uint32_t from)
{
    for (uint32_t off = from; off < SEG_HEADER_BYTES; off++)
        if (buf[off] != 0)
            return off;
    return 0;
}

/* Rule H6, version 2's part: its CRC, known flags, a key epoch only when keyed, and a compact
 * range of exactly the records before first_seq, canonically encoded. */
static int
segment_header_decode_v2(const uint8_t *buf, segment_header_t *h, segment_header_fault_t *fault)
{
    if (format_load_u32(buf + SEG_OFF_EXT_CRC) !=
        crc32c(buf + SEG_EXT_CRC_FROM, SEG_V2_USED_BYTES - SEG_EXT_CRC_FROM))
        return segment_header_refuse(fault, "bad header crc (version 2 part)", 0);
    h->trust_flags = format_load_u32(buf + SEG_OFF_TRUST_FLAGS);
    h->key_epoch = format_load_u64(buf + SEG_OFF_KEY_EPOCH);
    uint32_t range_bytes = format_load_u32(buf + SEG_OFF_RANGE_BYTES);
    if (h->trust_flags & ~SEG_TRUST_FLAGS_KNOWN)
        return segment_header_refuse(fault, "unknown trust flags", 0);
    if (!(h->trust_flags & SEG_TRUST_KEYED) && h->key_epoch != 0)
        return segment_header_refuse(fault, "key epoch without a key", 0);
    if (range_bytes > SEG_RANGE_AREA_BYTES ||
        merkle_range_decode(&h->range, buf + SEG_OFF_RANGE, range_bytes, NULL) != 0 ||
        h->range.size != h->first_seq - 1)
        return segment_header_refuse(fault, "bad merkle range", 0);
    if (!record_is_zero(buf + SEG_OFF_RANGE + range_bytes, SEG_RANGE_AREA_BYTES - range_bytes))
        return segment_header_refuse(fault, "merkle range not zero-padded", 0);
    return 0;
}

int
segment_header_decode(const uint8_t *buf, size_t len, segment_header_t *h,
                      segment_header_fault_t *fault)
{
    if (len < SEG_HEADER_BYTES)
        return segment_header_refuse(fault, "header cut short", 0);
    if (memcmp(buf + SEG_OFF_MAGIC, SEG_MAGIC, SEG_MAGIC_BYTES) != 0) /* rule H1 */
        return segment_header_refuse(fault, "bad segment magic", 0);
    if (format_load_u32(buf + SEG_OFF_CRC) != crc32c(buf, SEG_CRC_COVERED_BYTES)) /* H2 */
        return segment_header_refuse(fault, "bad header crc", 0);
    memset(h, 0, sizeof *h);
    h->version = format_load_u32(buf + SEG_OFF_VERSION);
    if (h->version > FORMAT_VERSION) { /* H3, before H5: a newer format may use those bytes */
        fault->why = "written by a newer format version";
        fault->offset = 0;
        return STELE_EVERSION;
    }
    if (h->version == 0 || format_load_u32(buf + SEG_OFF_HEADER_BYTES) != SEG_HEADER_BYTES ||
        buf[SEG_OFF_SOURCE + SEG_SOURCE_BYTES - 1] != 0) /* H4 */
        return segment_header_refuse(fault, "bad header fields", 0);
    h->first_seq = format_load_u64(buf + SEG_OFF_FIRST_SEQ);
    h->created_ns = format_load_i64(buf + SEG_OFF_CREATED_NS);
    h->prev_ts_ns = format_load_i64(buf + SEG_OFF_PREV_TS_NS);
    memcpy(h->source, buf + SEG_OFF_SOURCE, SEG_SOURCE_BYTES);
    memcpy(h->genesis, buf + SEG_OFF_GENESIS, HASH_BYTES);
    memcpy(h->prev_hash, buf + SEG_OFF_PREV_HASH, HASH_BYTES);
    if (h->first_seq == 0)
        return segment_header_refuse(fault, "first seq is 0", 0);
    if (h->version >= 2) {
        int rc = segment_header_decode_v2(buf, h, fault);
        if (rc)
            return rc;
    }
    /* The CRCs do not cover the reserved bytes, so this is all that guards them. */
    uint32_t reserved_off =
        segment_first_nonzero_reserved(buf, h->version >= 2 ? SEG_V2_USED_BYTES : SEG_USED_BYTES);
    if (reserved_off)
        return segment_header_refuse(fault, "reserved header byte is not zero", reserved_off);
    return 0;
}

int
segment_header_read(const journal_io_t *io, int fd, segment_header_t *h,
                    segment_header_fault_t *fault)
{
    uint8_t buf[SEG_HEADER_BYTES];
    ssize_t n = io->pread(io->ctx, fd, buf, sizeof buf, 0);
    if (n < 0) {
        fault->why = "could not read header";
        fault->offset = 0;
        return (int)n;
    }
    return segment_header_decode(buf, (size_t)n, h, fault);
}

static int
segment_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Appends seq to out->seqs (capacity *cap). Returns 0 or -ENOMEM. */
static int
segment_dir_push(segment_dir_t *out, size_t *cap, uint64_t seq)
{
    if (out->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        uint64_t *grown = realloc(out->seqs, ncap * sizeof *grown);
        if (!grown)
            return -ENOMEM;
        out->seqs = grown;
        *cap = ncap;
    }
    out->seqs[out->n++] = seq;
    return 0;
}

/* Counts one directory entry into out. Returns 0 or -ENOMEM. */
static int
segment_dir_note(segment_dir_t *out, size_t *cap, const char *name)
{
    uint64_t seq;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return 0;
    if (segment_parse_name(name, &seq))
        return segment_dir_push(out, cap, seq);
    if (strcmp(name, LOCK_NAME) == 0)
        out->has_lock = 1;
    else if (strcmp(name, SEG_PREPARED_NAME) == 0)
        out->has_prepared = 1;
    else if (strcmp(name, "index") != 0)
        out->n_other++; /* index/ is the engine's LMDB environment, which may be made first */
    return 0;
}

/* The next entry of d into *e (NULL at the end). Returns 0 or -errno. Like opendir, readdir
 * is retried on EINTR (on FUSE and network file systems a signal can interrupt it), which
 * leaves the stream where it was. */
static int
segment_dir_read(DIR *d, struct dirent **e)
{
    for (;;) {
        errno = 0;
        *e = readdir(d);
        if (*e || !errno)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

/* A stream over dir_fd's entries from the start: a descriptor of its own (not a dup, which
 * would share dir_fd's read position). Returns NULL with errno set. */
static DIR *
segment_dir_stream(int dir_fd)
{
    int fd;
    do {
        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (!d) {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    return d;
}

int
segment_dir_list(int dir_fd, segment_dir_t *out)
{
    memset(out, 0, sizeof *out);
    DIR *d = segment_dir_stream(dir_fd);
    if (!d)
        return -errno;
    size_t cap = 0;
    struct dirent *e;
    int rc;
    while (!(rc = segment_dir_read(d, &e)) && e) {
        rc = segment_dir_note(out, &cap, e->d_name);
        if (rc)
            break;
    }
    closedir(d);
    if (rc) {
        segment_dir_free(out);
        return rc;
    }
    if (out->n > 1)
        qsort(out->seqs, out->n, sizeof *out->seqs, segment_cmp_u64);
    return 0;
}

void
segment_dir_free(segment_dir_t *d)
{
    free(d->seqs);
    memset(d, 0, sizeof *d);
}

/* The largest size a file can be given: off_t is signed. */
#define SEGMENT_MAX_FILE_BYTES ((uint64_t)INT64_MAX)
_Static_assert(sizeof(off_t) == sizeof(int64_t), "64-bit file offsets");

int
segment_prepare(const journal_io_t *io, int dir_fd, uint64_t size_bytes, int zero_fill,
                unsigned file_mode, int *fd_out)
{
    /* As an off_t the size would be negative: no file can have it (and the caller gets
     * -EFBIG before any I/O). */
    if (size_bytes > SEGMENT_MAX_FILE_BYTES)
        return -EFBIG;
    /* A stale one from a crash is never trusted; a link of that name goes too (unlink
     * removes the link itself), and the exclusive create below never follows one. */
    int rc = io->unlink(io->ctx, dir_fd, SEG_PREPARED_NAME);
    if (rc && rc != -ENOENT)
        return rc;
    int fd = io->open_file(io->ctx, dir_fd, SEG_PREPARED_NAME,
                           JOURNAL_IO_WRITE | JOURNAL_IO_CREATE | JOURNAL_IO_EXCLUSIVE,
                           (mode_t)file_mode);
    if (fd < 0)
        return fd;
    rc = io->allocate(io->ctx, fd, 0, (off_t)size_bytes, zero_fill);
    if (!rc)
        rc = io->fsync(io->ctx, fd); /* size and extents, so later fdatasyncs flush data only */
    /* On failure too the caller gets the descriptor to close; the half-made file is left
     * for the next segment_prepare to replace (it is never trusted). */
    *fd_out = fd;
    return rc;
}

int
segment_discard_prepared(const journal_io_t *io, int dir_fd)
{
    int rc = io->unlink(io->ctx, dir_fd, SEG_PREPARED_NAME);
    return rc == -ENOENT ? 0 : rc;
}

int
segment_install(const journal_io_t *io, int dir_fd, int fd, const segment_header_t *h)
{
    char to[SEG_NAME_BYTES];
    segment_name(to, h->first_seq);
    uint8_t buf[SEG_HEADER_BYTES];
    segment_header_encode(h, buf);
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
    int rc = io->pwritev(io->ctx, fd, &iov, 1, 0);
    if (!rc)
        rc = io->fdatasync(io->ctx, fd);
    /* The rename replaces whatever has the segment's name, a link included, without
     * following it. */
    if (!rc)
        rc = io->rename(io->ctx, dir_fd, SEG_PREPARED_NAME, to);
    if (!rc)
        rc = io->sync_dir(io->ctx, dir_fd);
    return rc;
}
