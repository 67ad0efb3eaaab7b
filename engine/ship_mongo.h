/*
 * ship_mongo.h: what the shipping files share in libmongoc's and libbson's types. Included
 * only by ship*.c, remote_reader.c and their tests: ship.h, which the rest of the engine
 * includes, names no libmongoc type. Each section says which file defines it.
 */
#ifndef STELE_ENGINE_SHIP_MONGO_H
#define STELE_ENGINE_SHIP_MONGO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>
#include <mongoc/mongoc.h>

#include "merkle.h"
#include "meta.h"
#include "ship.h"

/* ---- libmongoc for the process (ship_mongoc.c) ----------------------------------------------- */

/* Initialises libmongoc for the process, once, with stele's log handler (libmongoc's own
 * lines go to stderr as stele log lines, URI passwords redacted, never to stdout). Every
 * file that uses libmongoc calls it first. Thread-safe. */
void ship_mongoc_init_once(void);

/* Replaces every occurrence of password (NULL or "" = none) in the NUL-terminated msg of
 * capacity cap by "***", cutting the text at cap. Scans forward past each mask, so a password
 * the mask contains ("*") ends too. Shared by shippers and remote readers. */
void ship_scrub_password(const char *password, char *msg, size_t cap);

/* ---- the classifier (ship_classify.c) -------------------------------------------------------- */

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

/* 1 when a command other than an insert (creating an index or a collection) failed with a
 * server error that is neither transient nor about credentials: sending it again would fail
 * the same way (unsupported option, conflicting index, ...). Pure; any thread. */
int shipper_command_is_refused(const bson_error_t *error, const bson_t *reply);

/* ---- a sink's target (ship_target.c) --------------------------------------------------------- */

/* Room for a destination's identity (ship_destination), the index's bound plus a NUL. */
#define SHIP_DESTINATION_BYTES (INDEX_DESTINATION_MAX + 1)

/* A sink's resolved configuration, shared by the shipper and the one-shot calls. */
typedef struct ship_target {
    stele_sink_options_t opts; /* numbers only; string fields point into the copies below */
    char *name;
    char *database;
    char *collection;
    char *time_field; /* the sink's, else CONFIG_TIME_FIELD_DEFAULT */
    char *indexes;    /* NULL when the sink declares none */
    char *password;   /* only to scrub it from messages; NULL when the URI has none */
    char where[256];  /* host:port/db.collection, no credentials */
    char destination[SHIP_DESTINATION_BYTES]; /* the identity its checkpoint is tied to */
    mongoc_uri_t *uri;
    mongoc_write_concern_t *write_concern;
    mongoc_read_concern_t *read_concern;
    int is_socket_timeout_set; /* by the user's URI */
} ship_target_t;

/* Resolves sink into *t (zeroed first): checks the name, URI, database and collection names
 * and numbers (STELE_ECONFIG naming the field; -ENOMEM), sets the concerns and the timeouts
 * the URI leaves unset, and initialises libmongoc for the process. Free with
 * ship_target_free, also after a failure. */
int ship_target_init(ship_target_t *t, const stele_sink_options_t *sink, stele_error_t *err);

/* Frees what ship_target_init made and wipes the password. */
void ship_target_free(ship_target_t *t);

/* Replaces every occurrence of the sink's password in msg by "***". */
void ship_target_scrub(const ship_target_t *t, char *msg, size_t cap);

/* A client pool for the target's URI, with error API version 2; NULL with *err set
 * (STELE_ECONFIG). */
mongoc_client_pool_t *ship_target_pool_new(const ship_target_t *t, stele_error_t *err);

/* Appends the sink's read concern to the options of a find (nothing when it has none). */
void ship_target_append_read_concern(const ship_target_t *t, bson_t *opts);

/* The database and collection of a sink: its own names, else the URI's database (uri_db,
 * may be NULL), else "audit"; the collection "events". Returns 0, or -1 when a name breaks
 * MongoDB's rules (database 1-63 bytes without / \ . space " $; collection 1-200 bytes
 * without $); the names are set either way. Shared by shippers and remote readers. */
int ship_sink_names(const stele_sink_options_t *sink, const char *uri_db, const char **db_out,
                    const char **coll_out);

/* The identity of a destination, what a sink's checkpoint belongs to: "replicaSet=NAME",
 * "srv=HOST" or the URI's hosts (lower-cased, sorted, ','-joined), then "/db.coll"; never
 * credentials or options. Two URIs that reach the same collection of the same cluster the
 * same way have the same identity. Cut to fit cap. */
void ship_destination(char *buf, size_t cap, const mongoc_uri_t *uri, const char *db,
                      const char *coll);

/* "host:port/db.coll" of a MongoDB URI, for messages: no credentials, cut to fit cap. Shared
 * by shippers and remote readers. */
void ship_where(char *buf, size_t cap, const mongoc_uri_t *uri, const char *db, const char *coll);

/* ---- documents and batches (ship_doc.c) ------------------------------------------------------ */

#define SHIP_HASH_BYTES 32

typedef struct ship_doc {
    uint64_t seq;
    int64_t ts_ns;
    uint8_t hash[SHIP_HASH_BYTES];
    bson_t *doc;        /* heap: bson_t wants 128-byte alignment the docs array lacks */
    int is_done;        /* acknowledged, found stored with the same hash, or dead-lettered */
    int is_unbuildable; /* the record cannot become a document: a dead letter before sending */
} ship_doc_t;

/* Documents read for one delivery. docs has room for batch_docs of them (1 for a dead
 * letter's re-ship), allocated once: the fills stop at batch_docs and never allocate. */
typedef struct ship_batch {
    ship_doc_t *docs;
    size_t n;
    size_t bytes;
} ship_batch_t;

/* Destroys the batch's documents and empties it; keeps its docs array. */
void ship_batch_clear(ship_batch_t *b);

/* ship_batch_clear, then frees the docs array and zeroes the batch. */
void ship_batch_free(ship_batch_t *b);

/* What a sink's documents carry besides the event, fixed for a shipper's life. A field the
 * envelope gains joins here, and ship_doc.c's builder appends it. */
typedef struct ship_doc_shape {
    const char *source;     /* _id.src */
    const char *time_field; /* top-level BSON date of the record's time */
} ship_doc_shape_t;

/* Makes the document of a record read from the journal into d (its seq, ts and hash copied,
 * not done); a record that cannot become a document (a payload that is not a document, or
 * that uses a reserved key or the time field at its top level) is marked is_unbuildable, for
 * the shipper to dead-letter. Returns the document's size in bytes. */
size_t ship_doc_fill(ship_doc_t *d, const ship_doc_shape_t *shape, const journal_record_t *rec);

/* Why ship_doc_fill found a record unbuildable under shape, for its dead letter. */
void ship_doc_unbuildable_reason(const ship_doc_shape_t *shape, char *buf, size_t cap);

/* Reads _id.seq and STELE_META_FIELD.hash from a stored document: *hash_out is NULL when the
 * hash is missing or not SHIP_HASH_BYTES long. Returns 0, or STELE_EINTEGRITY when the
 * document has no numeric _id.seq. */
int ship_doc_identity(const bson_t *doc, uint64_t *seq_out, const uint8_t **hash_out);

/* Reads STELE_META_FIELD.origin from a stored document into *out: {kind: "process"|"peer"|
 * "unknown", uid, gid, pid as integers in [0, 2^32)}. Returns 0 (*out zero, kind unknown,
 * when the document has none), or -1 when it is there but malformed (*out zero). */
int ship_doc_origin(const bson_t *doc, stele_origin_t *out);

/* ---- preparing a sink's collection (ship_setup.c) -------------------------------------------- */

/* Name of the {_id.src: 1, _id.seq: 1} index every sink creates, and of its time index. */
#define SHIP_INDEX_SRC_SEQ "stele_src_seq"
#define SHIP_INDEX_TIME "stele_time"
/* Room for an index's name in messages (a longer default name is cut). */
#define SHIP_INDEX_NAME_BYTES 1024

/* Creates the sink's collection as a time-series collection on its time field (with its TTL
 * as the collection's expireAfterSeconds); one that exists already is left as it is.
 * Returns 0 or STELE_EREMOTE with *berr and *reply set. */
int ship_setup_timeseries(const ship_target_t *t, mongoc_client_t *client, bson_error_t *berr,
                          bson_t *reply);

/* The number of indexes a sink creates: stele_src_seq, the time index, then one per spec of
 * its `indexes`. */
size_t ship_setup_index_count(const ship_target_t *t);

/* Creates index i (< ship_setup_index_count) of the sink, a no-op when it exists as asked:
 * 0, stele_src_seq, which the resume query and the remote check use; 1, stele_time on
 * {time_field: -1}, with expireAfterSeconds when the sink has a TTL (not on a time-series
 * collection, whose TTL is the collection's); then the declared ones, named as MongoDB names
 * them ("actor_1__ts_-1"). Returns 0 or STELE_EREMOTE with *berr and *reply set. */
int ship_setup_index(const ship_target_t *t, mongoc_client_t *client, size_t i, bson_error_t *berr,
                     bson_t *reply);

/* The name of index i, for messages ("?" past the last). Returns 0 or -1. */
int ship_setup_index_name(const ship_target_t *t, size_t i, char *buf, size_t cap);

/* ---- commands on a sink's collection (ship_collection.c) ------------------------------------- */

/* The newest document stored for a source: where a sink without a checkpoint resumes. */
typedef struct ship_remote_last {
    uint64_t seq; /* 0 when the source has no document */
    uint8_t hash[SHIP_HASH_BYTES];
    int has_hash;
} ship_remote_last_t;

/* The newest document stored for source into *out (zeroed: seq 0 when none). Returns 0, or
 * STELE_EREMOTE with *berr and *reply (initialised by the caller) describing the failure. */
int ship_collection_newest(const ship_target_t *t, mongoc_client_t *client, const char *source,
                           ship_remote_last_t *out, bson_error_t *berr, bson_t *reply);

/*
 * Looks up which documents of b->docs[from..n) are stored already. A stored document with
 * the same chain hash is marked done; one with a different hash is an integrity failure:
 * another journal writes with the same source name, or the remote copy was altered.
 * Returns 0, STELE_EINTEGRITY with *bad_seq (the sink must stop), or STELE_EREMOTE with
 * *berr and *reply set.
 */
int ship_collection_resolve_duplicates(const ship_target_t *t, mongoc_client_t *client,
                                       const char *source, ship_batch_t *b, size_t from,
                                       uint64_t *bad_seq, bson_error_t *berr, bson_t *reply);

/* Outcome of one insert attempt over the not-done documents of a batch. */
typedef struct ship_attempt {
    shipper_verdict_t verdict;
    size_t bad_index; /* batch index of the offending document */
    bson_error_t error;
    int is_ok;
    size_t n_inserted; /* documents this attempt stored */
    /* After a duplicate-key refusal, the lookup of what is stored already: */
    int lookup_rc;    /* 0, STELE_EINTEGRITY or STELE_EREMOTE */
    uint64_t bad_seq; /* STELE_EINTEGRITY: stored with another hash */
} ship_attempt_t;

/*
 * Sends the not-done documents of b (at most max_docs of them) with one ordered insert_many;
 * ptrs and map are the caller's scratch, max_docs long. On success marks them done. On
 * failure classifies into *out, and marks done the documents the server inserted before a
 * per-document error.
 */
void ship_collection_insert_pending(const ship_target_t *t, mongoc_client_t *client,
                                    ship_batch_t *b, size_t max_docs, const bson_t **ptrs,
                                    size_t *map, ship_attempt_t *out);

/* ---- a signed journal's statements (ship_trust.c) ------------------------------------------ */

/* The companion collection of a sink is its collection's name with this suffix. */
#define SHIP_TRUST_SUFFIX "_checkpoints"
/* Room for a companion collection's name (a collection name is at most 200 bytes). */
#define SHIP_TRUST_NAME_BYTES 256

/* Bytes of SHA-256(note) in a checkpoint's _id, as hex: tells apart the checkpoints one tree
 * size may have (an idle journal's interval checkpoints, a roll, a close). */
#define SHIP_TRUST_ID_HASH_BYTES 8

/* A checkpoint or key statement read from the journal, waiting to be shipped. */
typedef struct ship_statement {
    uint64_t size; /* tree size: the meta frame's seq */
    int is_parsed; /* m holds the statement's text (unsigned: the verifier checks it) */
    int is_key;    /* a key statement: _id {src, key_epoch}; else {src, size, sha} */
    meta_statement_t m;
    char note[META_NOTE_MAX_BYTES + 1]; /* the signed note, as in the journal */
    size_t note_len;
    uint8_t range[MERKLE_RANGE_MAX_BYTES]; /* retention: the tree at first - 1, encoded */
    size_t range_len;                      /* 0 when not known */
} ship_statement_t;

/* A shipper's statement in flight. */
typedef struct ship_trust {
    ship_statement_t pending;
    int has_pending;
} ship_trust_t;

/* The hex of the first SHIP_TRUST_ID_HASH_BYTES of SHA-256(note[0, len)) into out. Returns
 * 0 or -1 (OpenSSL failed). */
int ship_trust_note_id(const char *note, size_t len, char out[2 * SHIP_TRUST_ID_HASH_BYTES + 1]);

/* "<collection>_checkpoints" into out (cut to cap). */
void ship_trust_companion_name(const char *collection, char *out, size_t cap);

/* Takes the meta frame rec, just returned by r, as t's pending statement (t must have
 * none). Never fails: a statement whose text does not parse is shipped as a checkpoint, for
 * the verifier to refuse. */
void ship_trust_take(ship_trust_t *t, journal_reader_t *r, const journal_record_t *rec);

/* The companion document of st for source into out (initialised, empty). */
void ship_trust_doc(const ship_statement_t *st, const char *source, bson_t *out);

/*
 * Stores t's pending statement in the sink's companion collection, with the sink's write
 * concern, retrying transient failures with the shipper's backoff. Returns 0 (stored now or
 * before, with the same note: no longer pending), STELE_EINTEGRITY (another note is stored
 * under its _id: the sink is stopped), STELE_EAUTH (stopped), STELE_EREMOTE (a one-shot
 * shipper out of attempts) or STELE_ECLOSED (the stop's deadline passed).
 */
int ship_trust_deliver(shipper_t *s, ship_trust_t *t);

/* ---- the shipper (ship.c), for the files that drive it ------------------------------------ */

/* A shipper's state. ship_send.c delivers its batches; ship_check.c and ship_dead.c run one
 * without a thread (shipper_oneshot_*). */
struct shipper {
    /* -- set before its thread starts (or by shipper_oneshot_*), read-only after -- */
    ship_target_t target;
    char *journal_dir;
    char *source;
    const journal_io_t *io;
    index_t *index;
    shipper_progress_fn on_progress;
    void *progress_ctx;
    shipper_appended_fn appended_seq; /* NULL = no writer to linger for */
    void *appended_ctx;
    const shipper_faults_t *faults; /* tests only; NULL = none */
    stele_log_level_t log_level;    /* least severe line ship_log.c writes */
    int is_logging;                 /* 0 for one-shot shippers: their callers report */

    mongoc_client_pool_t *pool;
    pthread_t thread;
    int is_thread_started; /* by shipper_start, read by shipper_stop */

    /* -- the shipper's thread (or the one-shot caller) only -- */
    unsigned jitter_seed; /* rand_r state */
    /* One-shot use (stele_reship): give up after this many attempts (0 = retry forever),
     * and fail instead of dead-lettering (index is NULL then). */
    unsigned max_attempts;
    uint64_t n_inserted;
    uint64_t rejected_seq;
    /* The outage the log lines describe (ship_log.c). */
    int is_failing;
    int64_t failing_since_ms;    /* monotonic */
    int64_t last_failure_log_ms; /* monotonic */
    uint64_t failures;           /* attempts failed since is_failing was set */
    /* Documents of the next batch may be stored already (a start, or a failed attempt): on a
     * time-series collection, which has no unique _id, they are looked up before it goes. */
    int is_stored_unknown;
    /* The acknowledged seq whose checkpoint is not written yet (0: none), and when the next
     * one is due (monotonic ms): see shipper_save_checkpoint. */
    uint64_t checkpoint_pending;
    int64_t checkpoint_due_ms;

    /* -- atomics: written by the shipper's thread only, read by any thread -- */
    _Atomic uint64_t shipped_seq;  /* also set by shipper_start before the thread runs */
    _Atomic uint64_t saved_seq;    /* the checkpoint in the index; set with shipped_seq too */
    _Atomic int64_t pending_ts_ns; /* ts of the oldest record read but not acknowledged */

    /* -- protected by lend_lock: the thread uses what the engine lends it (index,
     *    on_progress, appended_seq) only while holding it shared (shipper_borrow);
     *    shipper_abandon takes it exclusively. Never held across network I/O. -- */
    pthread_rwlock_t lend_lock;
    int is_abandoned; /* the stop left the thread behind: it frees the shipper at its end */
    int is_finished;  /* the thread is about to return */

    /* -- protected by mu; cv fires when stop is requested -- */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop_requested;
    int64_t stop_deadline_ms; /* monotonic; meaningful once stop_requested */
    uint64_t batches;
    uint64_t retries;
    uint64_t dead_letters;
    int64_t last_error_unix_ms;
    char last_error[STELE_ERROR_MESSAGE_BYTES];
    int is_stopped;
};

/* Before the thread uses what the engine lent it (the index, the progress callback): 0, or
 * STELE_ECLOSED when its stop left it behind (then it must not, and should end). Pair a 0
 * with shipper_give_back. A one-shot shipper's loans are its caller's: always 0. */
int shipper_borrow(shipper_t *s);
void shipper_give_back(shipper_t *s);

/* The shape of the shipper's documents (its source and its target's time field). */
ship_doc_shape_t shipper_doc_shape(const shipper_t *s);

/* Records the last error (scrubbed of credentials) and, if is_stop, stops the sink. */
void shipper_note_error(shipper_t *s, int is_stop, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Counts one retry in the sink's statistics. */
void shipper_count_retry(shipper_t *s);

/*
 * One remote step of a shipper: runs once on `client` (popped from the shipper's pool for it).
 * Returns 0 (done), STELE_EREMOTE with *berr and *reply (initialised) describing a failure
 * for shipper_classify to judge, or any other code: the step's own verdict (it noted why, and
 * stopped the sink if it must), which ends the retries at once.
 */
typedef int (*ship_step_fn)(shipper_t *s, mongoc_client_t *client, bson_error_t *berr,
                            bson_t *reply, void *ctx);

/* How shipper_retry_step_ex treats a failure the server will repeat
 * (shipper_command_is_refused). */
typedef enum ship_refusal {
    SHIP_REFUSAL_RETRY,  /* retry it like any failure not known to be permanent */
    SHIP_REFUSAL_RETURN, /* return STELE_EREMOTE at once, the error noted */
} ship_refusal_t;

/*
 * Runs `step` until it succeeds, retrying transient failures with the shipper's backoff
 * (each noted in last_error as "<what> on <target> failed" and counted); a success after
 * failures logs "sink recovered". Returns 0; STELE_EAUTH (credentials or privileges refused:
 * the sink is stopped); STELE_EREMOTE (a refusal with SHIP_REFUSAL_RETURN, or a one-shot
 * shipper out of attempts); STELE_ECLOSED (a stop was requested during a backoff); or the
 * step's own verdict.
 */
int shipper_retry_step_ex(shipper_t *s, const char *what, ship_step_fn step, void *ctx,
                          ship_refusal_t on_refusal);

/* Sleeps the backoff for retry number `attempt` (0-based): min * 2^attempt capped at max,
 * with "equal jitter" (half fixed, half random) so that many shippers do not retry in step.
 * First logs the failure that last_error holds (ship_log_failure; is_unreachable: a network
 * or server-selection error). Returns at once, with 1, when a stop was requested: a sink that
 * is failing does not hold up its journal's close with a drain it cannot do. */
int shipper_backoff(shipper_t *s, unsigned attempt, int is_unreachable);

/* ---- what a shipper tells the operator (ship_log.c) -------------------------------------------
 */

/* A retryable failure (its text in last_error), retried after retry_ms: the first of an
 * outage is a warning, the rest a line every 10 s at most. Shipper's thread only. */
void ship_log_failure(shipper_t *s, int is_unreachable, uint64_t retry_ms);
/* A success: ends an outage with "sink recovered". Shipper's thread only. */
void ship_log_success(shipper_t *s);
/* A record listed as a dead letter. */
void ship_log_dead_letter(shipper_t *s, uint64_t seq, const char *reason);
/* The sink stopped for good. */
void ship_log_stopped(const shipper_t *s, const char *why);
/* The stop did not wait for the thread, still inside a network call. */
void ship_log_left_behind(const shipper_t *s);
/* The sink's checkpoint belonged to old_destination (at old_seq) and was reset. */
void ship_log_new_destination(const shipper_t *s, const char *old_destination, uint64_t old_seq,
                              uint64_t n_dropped);

/* 1 when a failure is the network's or server selection's (nothing answered), not a
 * server's refusal. Pure; any thread. */
int shipper_error_is_unreachable(const bson_error_t *error);

/* A batch of batch_docs documents and the scratch of its sends, allocated once before any
 * record is read: an allocation that fails later could only end the thread in the middle of
 * a batch. */
typedef struct ship_scratch {
    ship_batch_t batch;
    const bson_t **ptrs; /* for ship_collection_insert_pending */
    size_t *map;
    ship_trust_t trust; /* a signed journal's statement waiting for its records */
} ship_scratch_t;

/* Returns 0 or -ENOMEM (free what was allocated with shipper_scratch_free either way). */
int shipper_scratch_init(shipper_t *s, ship_scratch_t *sc);
void shipper_scratch_free(ship_scratch_t *sc);

/* A shipper without a thread, for one call (stele_reship, re-shipping dead letters): it tries
 * each remote step SHIP_ONESHOT_MAX_ATTEMPTS times instead of forever. ix (may be NULL)
 * lists the documents the sink refuses; without it a refused document fails the call. */
int shipper_oneshot_open(const stele_sink_options_t *sink, index_t *ix, shipper_t **out,
                         stele_error_t *err);
/* Gives a one-shot shipper the journal's source name (from r) and a pool of its own. */
int shipper_oneshot_attach(shipper_t *s, journal_reader_t *r, stele_error_t *err);
/* Delivers b as the thread would; a failure fills *err with the shipper's last (scrubbed)
 * error. Returns shipper_send_batch's code. */
int shipper_oneshot_send(shipper_t *s, ship_batch_t *b, const bson_t **ptrs, size_t *map,
                         stele_error_t *err);

/* Frees a shipper whose thread does not run (a one-shot one). NULL is a no-op. */
void shipper_free(shipper_t *s);

/* ---- delivering a batch (ship_send.c) ------------------------------------------------------- */

/*
 * Delivers a whole batch: every document ends acknowledged, found stored with its hash, or
 * dead-lettered. ptrs and map are scratch of b's capacity (ship_scratch_t). Returns 0,
 * STELE_EINTEGRITY / STELE_EAUTH / the index's code when a dead letter could not be listed
 * (sink stopped), STELE_EREMOTE when a one-shot run is out of attempts or refused a
 * document, or STELE_ECLOSED (stop deadline passed); the batch stays unacknowledged on any
 * failure.
 */
int shipper_send_batch(shipper_t *s, ship_batch_t *b, const bson_t **ptrs, size_t *map);

#endif /* STELE_ENGINE_SHIP_MONGO_H */
