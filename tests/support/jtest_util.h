/*
 * jtest_util.h: helpers for the journal's own unit tests: temporary directories, a seeded
 * PRNG, and appending/reading numbered records through journal.h.
 */
#ifndef STELE_TEST_JTEST_UTIL_H
#define STELE_TEST_JTEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "journal.h"

/* The format version of the journals these tests create (the newest, unless a test asks
 * journal_options_t.create_version for another). */
#define JTEST_VERSION FORMAT_VERSION
#define JTEST_HEADER_BYTES FRAME_HEADER_BYTES_V2 /* a frame header in that version */

/* A fresh directory under $TMPDIR (default /tmp); malloc'd path. Aborts the test on failure. */
char *jtest_tmpdir(const char *tag);
/* Removes the tree and frees the path. NULL is a no-op. */
void jtest_rmtree(char *path);

/* The test's seed: STELE_TEST_SEED or a fresh one; printed with the test's name. */
uint64_t jtest_seed(const char *name);
uint64_t jtest_rand(uint64_t *state);

/* Options for a test journal in `dir` with segment_bytes (0 = default). */
void jtest_options(journal_options_t *o, uint64_t segment_bytes);

/* The payload of record `seq`: deterministic bytes of length jtest_payload_len(seq). */
uint32_t jtest_payload_len(uint64_t seq);
void jtest_payload(uint64_t seq, uint8_t *out);

/* Appends `n` records (seqs last+1..) as one batch, ts = seq * 1000. Returns the append's
 * code; info may be NULL. */
int jtest_append(journal_t *j, uint64_t n, journal_batch_info_t *info, stele_error_t *err);

/* Reads records from `from` with a fresh reader; checks payloads, seqs and the chain;
 * returns how many were read until EAGAIN (or a negative code on any other error). */
int64_t jtest_read_all(const char *dir, uint64_t from, stele_error_t *err);

/* Reads the whole file into a malloc'd buffer; *len set. */
uint8_t *jtest_read_file(const char *path, size_t *len);
/* Writes len bytes at off into an existing file. */
void jtest_poke(const char *path, uint64_t off, const void *bytes, size_t len);
/* Path of segment first_seq in dir (static buffer per call site is not thread-safe: use out). */
void jtest_seg_path(char *out, size_t cap, const char *dir, uint64_t first_seq);

#endif /* STELE_TEST_JTEST_UTIL_H */
