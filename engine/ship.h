/*
 * ship.h: one shipper per sink, each with its own thread and its own mongoc_client_pool_t
 * kept for the process life. ship.c and remote_reader.c (reading a sink back) are the only
 * files that call libmongoc.
 *
 * A shipper reads committed records back from the journal with its own journal reader
 * (waking on the journal's shared state, not on an in-memory queue, so memory stays
 * bounded whatever the backlog), inserts them in batches, and advances its checkpoint in
 * the index only after MongoDB acknowledged the batch with the configured write concern.
 */
#ifndef STELE_ENGINE_SHIP_H
#define STELE_ENGINE_SHIP_H

#include <stdint.h>

#include <bson/bson.h>
#include <mongoc/mongoc.h>

#include "index.h"
#include "journal.h"
#include "stele.h"

typedef struct shipper shipper_t;

/* Called from the shipper's thread each time its checkpoint advances (for wait=shipped). */
typedef void (*shipper_progress_fn)(void *ctx, const char *sink_name, uint64_t shipped_seq);

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
    const shipper_faults_t *faults; /* tests only; NULL = none. Borrowed: outlives the shipper */
} shipper_config_t;

/* Validates the sink (STELE_ECONFIG naming the field), creates the pool, starts the thread.
 * Never blocks on the network: an unreachable server is retried by the thread. */
int shipper_start(const shipper_config_t *cfg, shipper_t **out, stele_error_t *err);

/* The database and collection of a sink: its own names, else the URI's database (uri_db,
 * may be NULL), else "audit"; the collection "events". Returns 0, or -1 when a name breaks
 * MongoDB's rules (database 1-63 bytes without / \ . space " $; collection 1-200 bytes
 * without $); the names are set either way. Shared by shippers and remote readers. */
int ship_sink_names(const stele_sink_options_t *sink, const char *uri_db, const char **db_out,
                    const char **coll_out);

/* "host:port/db.coll" of a MongoDB URI, for messages: no credentials, cut to fit cap. Shared
 * by shippers and remote readers. */
void ship_where(char *buf, size_t cap, const mongoc_uri_t *uri, const char *db, const char *coll);

/* Replaces every occurrence of password (NULL or "" = none) in the NUL-terminated msg of
 * capacity cap by "***", cutting the text at cap. Scans forward past each mask, so a password
 * the mask contains ("*") ends too. Shared by shippers and remote readers. */
void ship_scrub_password(const char *password, char *msg, size_t cap);

/* Initialises libmongoc for the process, once, with stele's log handler (libmongoc's own
 * lines go to stderr as stele log lines, URI passwords redacted, never to stdout). Every
 * file that uses libmongoc calls it first. Thread-safe. */
void ship_mongoc_init_once(void);

/* Asks the thread to stop; gives it up to drain_timeout_ms to ship what is committed first.
 * Joins and frees. NULL is a no-op. */
void shipper_stop(shipper_t *s, int drain_timeout_ms);

/* Last seq acknowledged by the sink (atomic read; any thread). */
uint64_t shipper_shipped_seq(const shipper_t *s);
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

/* What a MongoDB failure means to a shipper (shipper_classify). */
typedef enum shipper_verdict {
    SHIPPER_RETRY = 0,   /* transient: retry the unacknowledged documents after a backoff */
    SHIPPER_DUPLICATE,   /* document *index_out is stored already: compare chain hashes */
    SHIPPER_DEAD_LETTER, /* document *index_out is rejected for good: dead-letter it, go on */
    SHIPPER_SPLIT,       /* the batch was refused client-side as a whole: send one by one */
    SHIPPER_STOP_AUTH,   /* credentials or privileges refused: stop the sink */
} shipper_verdict_t;

/*
 * The one classifier of MongoDB errors, from libmongoc's error (error API version 2) and the
 * command's reply (may be NULL). *index_out receives the batch index of the offending
 * document for SHIPPER_DUPLICATE and SHIPPER_DEAD_LETTER. Anything not known to be
 * permanent is SHIPPER_RETRY. Pure; any thread. Exposed for its table test.
 */
shipper_verdict_t shipper_classify(const bson_error_t *error, const bson_t *reply,
                                   size_t *index_out);

#endif /* STELE_ENGINE_SHIP_H */
