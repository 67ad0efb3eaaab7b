/*
 * recover.h: scanning the tail of the newest segment and classifying how the log ends
 * (FORMAT.md, "End of log"). The scanner reads and decides nothing irreversible; the caller
 * (journal_open) turns its findings into an error or a truncation with recover_zero_tail.
 */
#ifndef STELE_JOURNAL_RECOVER_H
#define STELE_JOURNAL_RECOVER_H

#include <stdint.h>

#include "chain.h"
#include "format.h"
#include "io.h"
#include "journal.h"
#include "merkle.h"

typedef struct recover_scan {
    /* -- in -- */
    const journal_io_t *io;
    int fd;
    uint32_t version;    /* of the segment: its frames' layout and chain rule */
    uint64_t seg_bytes;  /* file size: frames may not cross it */
    uint64_t start_off;  /* a batch start (the segment's first frame, or a checked hint) */
    uint64_t expect_seq; /* seq of the frame at start_off */
    uint8_t prev_hash[HASH_BYTES];
    int64_t prev_ts_ns;
    int trust_first; /* 1: start_off came from a hint; its frame's hash is taken as given */
    chain_hasher_t *hasher;
    merkle_hasher_t *mhasher; /* version 2 */
    merkle_range_t range;     /* version 2: the tree before start_off (the header's range) */
    int has_key;              /* version 2: a key was in force before start_off ... */
    uint64_t key_epoch;       /* ... of this epoch (the header's) */

    /* -- out: the log's end (after the last complete batch) -- */
    journal_end_t end;
    uint64_t end_off;
    uint64_t last_seq; /* expect_seq - 1 when no complete batch was found */
    int64_t last_ts_ns;
    uint8_t last_hash[HASH_BYTES];
    merkle_range_t last_range;   /* version 2: the tree of records 1 .. last_seq */
    int has_key_end;             /* version 2: a key is in force at the end ... */
    uint64_t key_epoch_end;      /* ... of this epoch (the header's, or a key statement's) */
    uint64_t statement_size_end; /* tree size of the last statement before the end, or the
                                  * header's first_seq - 1 when there is none */
    uint64_t n_batches;          /* complete batches scanned */

    /* -- out: what lies past the end -- */
    uint64_t damage_off;       /* first invalid frame (== end_off unless a batch was torn) */
    uint64_t dirty_end;        /* end of the last non-zero byte past end_off; 0 = all zero */
    uint64_t dropped_frames;   /* valid frames of the torn batch */
    uint64_t max_later_synced; /* largest synced_seq of any valid frame past end_off */
    int chain_broken;          /* a CRC-valid frame whose chain hash does not match */
    uint64_t chain_broken_seq;
    uint64_t scanned_bytes;
    char why[96]; /* what was wrong with the frame at damage_off */
} recover_scan_t;

/* Scans from s->start_off to the end of the segment. Returns 0 (findings in *s) or -errno. */
int recover_scan_tail(recover_scan_t *s);

/* 1 when the findings mean damage before durable data: some valid frame past the end says
 * a record the end drops was already fdatasynced. */
int recover_is_synced_damage(const recover_scan_t *s);

/* Zero-fills [from, to) and fdatasyncs, so the torn tail reads as clean preallocated space.
 * Returns 0 or -errno. */
int recover_zero_tail(const journal_io_t *io, int fd, uint64_t from, uint64_t to);

#endif /* STELE_JOURNAL_RECOVER_H */
