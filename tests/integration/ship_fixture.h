/*
 * ship_fixture.h: what the shipping tests share: a journal written through journal.h with
 * its index beside it (as the engine would), sink options pointing at the test server, and
 * the exactly-once check of a collection against a journal.
 */
#ifndef STELE_TEST_SHIP_FIXTURE_H
#define STELE_TEST_SHIP_FIXTURE_H

#include <limits.h>
#include <stdint.h>

#include "index.h"
#include "journal.h"
#include "stele.h"

typedef struct ship_journal {
    char dir[PATH_MAX];
    char source[64];
    journal_t *journal;
    index_t *index;
    uint64_t last_seq;
    int64_t last_ts_ns;
} ship_journal_t;

/* Creates a journal in a new mkdtemp directory under $TMPDIR with this source name, and
 * opens its index for writing. Returns 0 or a stele code (message on stderr). */
int ship_journal_create(ship_journal_t *sj, const char *source);

/* Appends n events in batches of batch_records: one vectored write, one fdatasync and one
 * index entry per batch, then publishes them to readers. Event i is
 * {"who": "user-<i % 97>", "what": "login", "i": <seq>, "ok": true, "pad": <pad_bytes x>}. */
int ship_journal_append(ship_journal_t *sj, uint64_t n, uint32_t batch_records, uint32_t pad_bytes);

/* Appends one event given as a BSON document. */
int ship_journal_append_bson(ship_journal_t *sj, const uint8_t *bson, uint32_t len);

/* Closes the journal and index; removes the directory unless keep (or STELE_TEST_KEEP). */
void ship_journal_destroy(ship_journal_t *sj, int keep);

/* Sink options for uri (copied into static-lifetime storage of the caller: `uri_buf`),
 * collection `coll` in database "stele_test", small backoff for tests. */
void ship_sink_options(stele_sink_options_t *so, const char *name, const char *uri,
                       const char *coll);

/* Exactly-once check: the sink's collection holds exactly n documents for the journal's
 * source, _id.seq 1..n, none missing, none extra, every hash equal to the journal's.
 * Returns 0 or -1 with the reason on stderr. */
int ship_check_exactly_once(const ship_journal_t *sj, const stele_sink_options_t *so, uint64_t n);

/* The same check for n_sources journals sharing one collection, in one pass over it (a
 * server that scans for every query, as FerretDB does, would otherwise read the collection
 * twice per source): exactly n documents per source, seqs 1..n each once, every hash equal to
 * its journal's, and no document of another source. Returns 0 or -1 with the reason. */
int ship_check_exactly_once_many(const ship_journal_t *sjs, size_t n_sources,
                                 const stele_sink_options_t *so, uint64_t n);

/* Documents in the sink's collection for a source (NULL: all of them). -1 on error. */
int64_t ship_count_docs(const stele_sink_options_t *so, const char *source);

/* Deletes the sink's documents of `source` with first <= seq <= last. Returns count or -1. */
int64_t ship_delete_range(const stele_sink_options_t *so, const char *source, uint64_t first,
                          uint64_t last);

/* Drops the sink's collection. */
void ship_drop_collection(const stele_sink_options_t *so);

/* Waits until the shipped seq read by get(ctx) reaches want, up to timeout_ms. 0 / -1. */
int ship_wait_for(uint64_t (*get)(void *ctx), void *ctx, uint64_t want, int timeout_ms);

/* Milliseconds on the monotonic clock. */
int64_t ship_fixture_now_ms(void);

/* Resident set size of this process in KiB (from /proc/self/status). */
long ship_rss_kib(void);

/* Prints and returns the test's random seed (STELE_TEST_SEED or the clock). */
unsigned ship_test_seed(void);

#endif /* STELE_TEST_SHIP_FIXTURE_H */
