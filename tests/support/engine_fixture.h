/*
 * engine_fixture.h: helpers shared by the engine's tests (test_engine, test_commit,
 * test_stress): small options for fast tests, reading a journal back, and a "gate" I/O
 * table that holds the committer inside pwritev so a test can fill the queue.
 */
#ifndef STELE_TEST_ENGINE_FIXTURE_H
#define STELE_TEST_ENGINE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"
#include "stele.h"

/* Options for tests: small segments and records so quotas and rolls are cheap. */
void fixture_options(stele_options_t *opts);

/* A record read back from the journal. */
typedef struct fixture_record {
    uint64_t seq;
    int64_t ts_ns;
    uint8_t *payload; /* malloc'd */
    uint32_t payload_len;
    uint8_t hash[32];
    uint8_t prev_hash[32];
} fixture_record_t;

/*
 * Reads every committed record of the journal in `dir` (POSIX I/O). *out receives a malloc'd
 * array (free with fixture_records_free). Returns the count, or a negative code.
 * Checks nothing by itself.
 */
long fixture_read_all(const char *dir, fixture_record_t **out);
void fixture_records_free(fixture_record_t *recs, long n);

/* Checks seqs run 1..n without gaps, timestamps never decrease and every prev_hash is the
 * previous record's hash. Returns NULL or a static description of the first violation. */
const char *fixture_check_chain(const fixture_record_t *recs, long n);

/* A pass-through I/O table whose pwritev blocks while the gate is closed. */
typedef struct fixture_gate fixture_gate_t;
fixture_gate_t *fixture_gate_new(void);
void fixture_gate_free(fixture_gate_t *g);
const journal_io_t *fixture_gate_io(fixture_gate_t *g);
void fixture_gate_close(fixture_gate_t *g);
void fixture_gate_open(fixture_gate_t *g);
/* Blocks until some pwritev is held at the closed gate. */
void fixture_gate_wait_held(fixture_gate_t *g);

#endif /* STELE_TEST_ENGINE_FIXTURE_H */
