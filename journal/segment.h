/*
 * segment.h: segment files (FORMAT.md, "Segment file"): names, the 4 KiB header, listing a
 * journal directory, and making a new segment durable (prepare ahead, install on roll).
 */
#ifndef STELE_JOURNAL_SEGMENT_H
#define STELE_JOURNAL_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "io.h"
#include "merkle.h"

typedef struct segment_header {
    uint32_t version; /* 1 or 2: the layout of the header and of the segment's frames */
    uint64_t first_seq;
    int64_t created_ns;
    int64_t prev_ts_ns; /* ts of record first_seq-1 (0 for the journal's first segment) */
    char source[SEG_SOURCE_BYTES];
    uint8_t genesis[HASH_BYTES];
    uint8_t prev_hash[HASH_BYTES]; /* chain hash of record first_seq-1 (genesis for seq 1) */
    /* -- version 2 only (zero in version 1) -- */
    uint32_t trust_flags; /* SEG_TRUST_KEYED: a signing key was in force at the start */
    uint64_t key_epoch;   /* the key epoch in force at the start (0 unless keyed) */
    merkle_range_t range; /* the Merkle tree of records 1 .. first_seq - 1 (its compact range) */
} segment_header_t;

/* "<first_seq as 20 digits>.seg" into out[SEG_NAME_BYTES]. */
void segment_name(char out[SEG_NAME_BYTES], uint64_t first_seq);
/* 1 and *first_seq when `name` is exactly a segment file name, else 0. */
int segment_parse_name(const char *name, uint64_t *first_seq);

/* Why a header was refused, for a "segment X offset Y: why" message. */
typedef struct segment_header_fault {
    const char *why; /* a short reason; static storage */
    /* The first non-zero reserved byte (rule H5); 0 for the other rules, which condemn the
     * header as a whole. */
    uint32_t offset;
} segment_header_fault_t;

void segment_header_encode(const segment_header_t *h, uint8_t buf[SEG_HEADER_BYTES]);
/*
 * Decodes and checks a header of either version (FORMAT.md rules H1-H6): the one check
 * recovery, readers and verify share. Returns 0, STELE_EVERSION (a newer format; its
 * reserved bytes are not looked at) or STELE_ECORRUPT, with *fault set when not 0.
 */
int segment_header_decode(const uint8_t *buf, size_t len, segment_header_t *h,
                          segment_header_fault_t *fault);
/* Reads and decodes the header of an open segment. As above, or -errno. */
int segment_header_read(const journal_io_t *io, int fd, segment_header_t *h,
                        segment_header_fault_t *fault);

/* What a journal directory holds. */
typedef struct segment_dir {
    uint64_t *seqs; /* first seqs of *.seg files, ascending; malloc'd */
    size_t n;
    int has_lock;
    int has_prepared;
    size_t n_other; /* entries that are not part of a journal */
} segment_dir_t;

/* Lists the directory open as dir_fd (from its start, whatever was read of it before).
 * Returns 0 or -errno. Free with segment_dir_free. */
int segment_dir_list(int dir_fd, segment_dir_t *out);
void segment_dir_free(segment_dir_t *d);

/*
 * Creates prepared.tmp in dir_fd (replacing a stale one, or a link of that name, which is
 * removed, never followed), reserves `size_bytes` (zero-filled or fallocated) and fsyncs it.
 * The name is not yet durable: segment_install makes it so. Returns 0 with *fd_out, or
 * -errno; after a failure *fd_out is still set (>= 0) when the file was opened, and the
 * caller closes it.
 */
int segment_prepare(const journal_io_t *io, int dir_fd, uint64_t size_bytes, int zero_fill,
                    unsigned file_mode, int *fd_out);

/* Removes prepared.tmp from the directory dir_fd (a preparation that failed gives its space
 * back). Returns 0 (also when there is none) or -errno. */
int segment_discard_prepared(const journal_io_t *io, int dir_fd);

/*
 * Turns the prepared file into segment h->first_seq: writes the header, fdatasyncs, renames
 * it to its final name and fsyncs the directory. Once this returns 0 the segment and its
 * name survive power loss, so records written into it may be acknowledged.
 */
int segment_install(const journal_io_t *io, int dir_fd, int fd, const segment_header_t *h);

#endif /* STELE_JOURNAL_SEGMENT_H */
