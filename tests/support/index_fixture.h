/*
 * index_fixture.h: helpers for the reader, verify and catch-up tests: temp directories,
 * a journal written directly through journal.h (with the index kept the way the engine
 * keeps it), and byte-level tampering with segment files.
 */
#ifndef STELE_TESTS_INDEX_FIXTURE_H
#define STELE_TESTS_INDEX_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "index.h"
#include "journal.h"

/* Small segments so a few hundred records span several of them. */
#define FX_SEGMENT_BYTES (64 * 1024)

/* Where each record landed, as read back from the journal. */
typedef struct fx_record {
    uint64_t seq;
    int64_t ts_ns;
    uint64_t segment_seq;
    uint64_t offset;
    uint32_t frame_bytes;
    int is_batch_end;
} fx_record_t;

/* Makes a fresh temp directory into buf (cap bytes); aborts the test on failure. */
void fx_tmpdir(char *buf, size_t cap, const char *tag);
void fx_rmtree(const char *dir);

/* A journal writer that keeps the index in step, as the engine does. */
typedef struct fx_writer {
    char dir[256];
    journal_t *j;
    index_t *ix; /* may be NULL: write no index */
    uint64_t last_seq;
    int64_t last_ts_ns;
    journal_recovery_t rec;
} fx_writer_t;

/* Opens (creating) the journal in dir for writing; with_index opens the index too. */
void fx_writer_open(fx_writer_t *w, const char *dir, int with_index);
/*
 * Appends one batch of n records; record i gets ts = ts_ns[i] (or last ts + 1000 when
 * ts_ns is NULL) and the payload {"seq": seq, "pad": "<seq % 7 bytes>"}. Writes (without
 * fdatasync), indexes, then publishes unless publish is 0 (fx_writer_publish does it later).
 */
void fx_writer_batch(fx_writer_t *w, size_t n, const int64_t *ts_ns, int publish);
void fx_writer_publish(fx_writer_t *w);
void fx_writer_close(fx_writer_t *w);

/* Writes n_batches batches of per_batch records, ts 1000 ns apart. */
void fx_write_journal(const char *dir, size_t n_batches, size_t per_batch, int with_index);

/* Reads every record's position back (out has room for max); returns the count. */
size_t fx_read_positions(const char *dir, fx_record_t *out, size_t max);

/* Segment file path for a segment_seq, in the journal's naming. */
void fx_segment_path(char *buf, size_t cap, const char *dir, uint64_t segment_seq);
/* XORs one byte of a file with mask. */
void fx_flip_byte(const char *path, uint64_t off, uint8_t mask);
/* Copies len bytes within a file (memmove semantics); zero_from..zero_to is then zeroed. */
void fx_move_bytes(const char *path, uint64_t to, uint64_t from, uint64_t len);
void fx_zero_bytes(const char *path, uint64_t off, uint64_t len);
void fx_read_bytes(const char *path, uint64_t off, void *buf, size_t len);
void fx_write_bytes(const char *path, uint64_t off, const void *buf, size_t len);

#endif
