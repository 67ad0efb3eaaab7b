/*
 * test_util.h: shared helpers for stele's durability tests: temporary journal directories,
 * a seeded PRNG, and a ledger that appends records through journal.h and checks them back
 * with the reader after a fault or a crash.
 */
#ifndef STELE_TEST_UTIL_H
#define STELE_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "journal.h"

/* ---------------------------------------------------------------------------------------
 * Environment
 * --------------------------------------------------------------------------------------- */

/*
 * The seed for a randomised test: STELE_TEST_SEED when set, else a fresh one from the clock
 * and pid. Printed to stderr with `test_name` so a failure can be replayed.
 */
uint64_t test_seed(const char *test_name);

/* 1 when STELE_TEST_LONG is set to a non-empty value other than "0" (or the build set
 * STELE_TEST_LONG_DEFAULT), for the long crash and power-loss loops. */
int test_long_mode(void);

/* `normal` iterations, or `long_n` in long mode; STELE_TEST_ITERATIONS overrides both. */
uint64_t test_iterations(uint64_t normal, uint64_t long_n);

/* Name of a return code for test messages ("STELE_ECORRUPT", "Input/output error"), without
 * needing the engine's stele_errname (journal-level tests link only the journal). */
const char *test_code_name(int code);

/* ---------------------------------------------------------------------------------------
 * Temporary directories
 * --------------------------------------------------------------------------------------- */

/* A fresh directory "stele-<tag>-XXXXXX" under $TMPDIR (default /tmp), made with mkdtemp.
 * Returns a malloc'd path or NULL (errno set). */
char *test_tmpdir_new(const char *tag);

/* Removes the directory tree (files and subdirectories) and frees `path`. NULL is a no-op.
 * Returns 0 or -errno of the first failure (the rest is still attempted). */
int test_tmpdir_remove(char *path);

/* Path `dir`/`name` in a malloc'd string (NULL when out of memory). */
char *test_path_join(const char *dir, const char *name);

/* The fields of a /proc .../stat file after the command name (which may hold spaces and
 * parentheses), starting with the state letter, into out (NUL-terminated). Returns 0, or -1
 * when the file cannot be read. */
int test_proc_stat_fields(const char *stat_path, char *out, size_t cap);

/* ---------------------------------------------------------------------------------------
 * PRNG: splitmix64, small and good enough to drive workloads and crash choices.
 * --------------------------------------------------------------------------------------- */
typedef struct test_rng {
    uint64_t state;
} test_rng_t;

void test_rng_init(test_rng_t *rng, uint64_t seed);
uint64_t test_rng_next(test_rng_t *rng);
/* Uniform in [0, n); 0 when n is 0. */
uint64_t test_rng_below(test_rng_t *rng, uint64_t n);
/* Uniform in [lo, hi] (inclusive). */
uint64_t test_rng_range(test_rng_t *rng, uint64_t lo, uint64_t hi);
/* 1 with probability percent/100. */
int test_rng_chance(test_rng_t *rng, unsigned percent);
void test_rng_fill(test_rng_t *rng, uint8_t *buf, size_t len);

/* ---------------------------------------------------------------------------------------
 * Ledger: what a workload appended, and what the journal acknowledged as durable.
 *
 * Payloads are BSON documents {seq: int64, nonce: int64, pad: string} so a record found on
 * disk can be matched to the append that wrote it. The ledger remembers the digest of every
 * appended payload by seq (the latest append of that seq: after a crash a seq is reused) and
 * `durable_seq`, the last seq whose batch was followed by a journal_sync that returned 0.
 * --------------------------------------------------------------------------------------- */
typedef struct test_ledger {
    uint64_t *digests; /* digests[seq]: FNV-1a of the latest payload appended with that seq */
    uint64_t cap_seqs;
    uint64_t durable_seq;   /* every seq <= this was acknowledged durable */
    uint64_t deleted_below; /* journal_delete_before was asked for seqs below this */
    int64_t last_ts_ns;
    uint32_t max_pad_bytes; /* payload padding drawn from [0, max_pad_bytes] */
} test_ledger_t;

void test_ledger_init(test_ledger_t *lg, uint32_t max_pad_bytes);
void test_ledger_free(test_ledger_t *lg);

/* Builds the payload for `seq` into buf (cap bytes). Returns its length, or 0 if it did not
 * fit. */
uint32_t test_payload_build(test_rng_t *rng, uint64_t seq, uint32_t max_pad_bytes, uint8_t *buf,
                            size_t cap);

/* The seq a payload claims (its "seq" field), or 0 when it is not a well-formed payload. */
uint64_t test_payload_seq(const uint8_t *payload, uint32_t len);

uint64_t test_digest(const uint8_t *bytes, size_t len);

/* rec's chain hash as the format defines it, from rec->prev_hash: version 1, SHA-256 over
 * the previous hash, the seq and the timestamp (little-endian 64-bit) and the payload;
 * version 2, SHA-256 over the previous hash and the leaf hash, which must be rec->leaf_hash.
 * Returns 0, or -1 when the leaf hash differs or OpenSSL failed. */
int test_chain_hash(const journal_record_t *rec, uint8_t out[32]);

/*
 * Appends one batch of `n_records` fresh records (seqs journal_last_seq(j)+1 ...) with
 * journal_append_batch and records their payloads in the ledger. Returns what
 * journal_append_batch returned (err filled on failure).
 */
int test_ledger_append(test_ledger_t *lg, journal_t *j, test_rng_t *rng, unsigned n_records,
                       journal_batch_info_t *info, stele_error_t *err);

/* journal_sync; on success marks everything appended so far durable. */
int test_ledger_sync(test_ledger_t *lg, journal_t *j, stele_error_t *err);

/* What test_ledger_check saw. */
typedef struct test_check {
    uint64_t first_seq;
    uint64_t last_seq;
    uint64_t n_records;
    char what[512]; /* why the check failed; empty when it passed */
} test_check_t;

/*
 * Reads the whole journal in `dir` back with a reader over `io` (NULL = POSIX) and checks:
 * seqs contiguous, each record's prev_hash is the previous record's hash and its hash is
 * test_chain_hash of its fields, every payload
 * well-formed for its seq, every seq in (deleted_below, durable_seq] present and identical
 * to what was appended, and the log reaching at least durable_seq.
 * Returns 0, or -1 with out->what saying what broke (or the reader's error code).
 */
int test_ledger_check(const test_ledger_t *lg, const char *dir, const journal_io_t *io,
                      test_check_t *out);

/* Continues the ledger after recovery: seqs past `last_seq` are forgotten (lost or never
 * acknowledged), so the next append reuses them. */
void test_ledger_truncate(test_ledger_t *lg, uint64_t last_seq, int64_t last_ts_ns);

/* The epoch of the signer key file `key` ("epoch <E>" on its second line; none: 0) in
 * *epoch. Returns 0, or -1 when the file cannot be read or its second line is not that. */
int test_key_file_epoch(const char *key, uint64_t *epoch);

/* The first seq of the newest segment file in `dir` (the active one once appends end; 0
 * when there is none). Aborts, failing the test, when `dir` cannot be read. */
uint64_t test_newest_segment_first_seq(const char *dir);

#endif /* STELE_TEST_UTIL_H */
