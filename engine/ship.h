/*
 * ship.h: one shipper per sink, each with its own thread and its own libmongoc client pool
 * kept for the process life. The shipping files (ship*.c) and remote_reader.c (reading a
 * sink back) are the only files that call libmongoc; this header keeps its types out of
 * the rest of the engine (what the shipping files share in those types is ship_mongo.h).
 *
 * A shipper reads committed records back from the journal with its own journal reader
 * (waking on the journal's shared state, not on an in-memory queue, so memory stays
 * bounded whatever the backlog), inserts them in batches, and advances its checkpoint in
 * the index only after MongoDB acknowledged the batch with the configured write concern.
 */
#ifndef STELE_ENGINE_SHIP_H
#define STELE_ENGINE_SHIP_H

#include <stdint.h>

#include "index.h"
#include "journal.h"
#include "stele.h"

typedef struct shipper shipper_t;

/* Called from the shipper's thread each time its checkpoint advances (for wait=shipped). */
typedef void (*shipper_progress_fn)(void *ctx, const char *sink_name, uint64_t shipped_seq);

/* The highest seq the journal's writer has appended, durable or not yet (commit's
 * appended_seq). Called from the shipper's thread; must not block. */
typedef uint64_t (*shipper_appended_fn)(void *ctx);

/* Failures a test makes a shipper's thread meet, as journal_io_t fails the journal's I/O
 * (tests/test_ship_faults.c); NULL in production. */
typedef struct shipper_faults {
    /* Called before each allocation the thread makes; nonzero fails it as out of memory. */
    int (*fail_alloc)(void *ctx);
    void *ctx;
} shipper_faults_t;

typedef struct shipper_config {
    const stele_sink_options_t *sink; /* copied */
    const char *journal_dir;          /* copied */
    const char *source;               /* copied: the journal's source name (_id.src) */
    const journal_io_t *io;           /* for the shipper's journal reader; NULL = POSIX */
    index_t *index;                   /* shared, thread-safe; outlives the shipper */
    shipper_progress_fn on_progress;  /* may be NULL */
    void *progress_ctx;
    /* Records appended past a batch's last one are on their way: the batch lingers for them
     * (up to linger_ms), and only then. NULL = none known: a batch goes as soon as the
     * journal has nothing more to read. */
    shipper_appended_fn appended_seq;
    void *appended_ctx;
    const shipper_faults_t *faults; /* tests only; NULL = none. Borrowed: outlives the shipper */
    stele_log_level_t log_level;    /* least severe of the sink's log lines written (ship_log.c);
                                       0 = STELE_LOG_DEBUG */
} shipper_config_t;

/* Validates the sink (STELE_ECONFIG naming the field), ties its checkpoint to its destination
 * (STELE_ECONFIG when the checkpoint belongs to another destination and the sink does not
 * restart: see stele_on_destination_change_t), creates the pool, starts the thread.
 * Never blocks on the network: an unreachable server is retried by the thread. */
int shipper_start(const shipper_config_t *cfg, shipper_t **out, stele_error_t *err);

/* Asks the thread to stop; gives it up to drain_timeout_ms to ship what is committed first
 * (a sink that is failing stops at its next retry instead). The first request sets the
 * deadline. Does not wait. NULL is a no-op. */
void shipper_request_stop(shipper_t *s, int drain_timeout_ms);

/* shipper_request_stop, then joins the thread and frees. NULL is a no-op. */
void shipper_stop(shipper_t *s, int drain_timeout_ms);

/* Last seq acknowledged by the sink (atomic read; any thread). */
uint64_t shipper_shipped_seq(const shipper_t *s);
/* Last seq whose checkpoint is in the index (atomic read; any thread): at most
 * shipped_seq, where a restart resumes; what retention may delete up to. */
uint64_t shipper_saved_seq(const shipper_t *s);
/* 1 when the sink stopped for good (integrity, authentication, a dead letter it could not
 * list, ...): then *err (may be NULL) gets STELE_ESINKSTOPPED naming the sink and its last
 * error. 0 while it ships or retries. Thread-safe. */
int shipper_stopped(shipper_t *s, stele_error_t *err);

/* Snapshot of the sink's statistics; `committed_seq` is the engine's, for the lag. */
void shipper_stats(shipper_t *s, uint64_t committed_seq, stele_sink_stats_t *out);

/* stele_dead_letters_reship() and stele_dead_letter_discard() on an index the caller holds
 * open (the engine's own, when it offers them on a stele_t): the public calls open the
 * journal's index themselves, which a process must not do twice at once (LMDB). */
int shipper_reship_dead_letters(index_t *ix, const char *dir, const stele_sink_options_t *sink,
                                uint64_t seq, stele_dead_letter_report_t *report,
                                stele_error_t *err);
int shipper_discard_dead_letter(index_t *ix, const char *sink_name, uint64_t seq,
                                stele_error_t *err);

#endif /* STELE_ENGINE_SHIP_H */
