/*
 * stele.h: the one public header of stele, an append-only, durable audit-log engine.
 *
 * This header is the manual. Conventions that hold for every function below:
 *  - Return codes: 0 is success, a negative value is an error: -errno for system errors
 *    (e.g. -EIO, -ENOSPC), or one of the STELE_E* codes below. stele_strerror() and
 *    stele_errname() turn any code into text.
 *  - Errors: every function that can fail takes an optional `stele_error_t *err` (may be
 *    NULL). On failure it is filled with the code and a one-line message naming the object
 *    ("could not sync segment 000000000042.seg: Input/output error") and, where one exists,
 *    a hint for the operator. On success it is left untouched.
 *  - Ownership: inputs are borrowed for the duration of the call and copied if kept.
 *    Outputs are either borrowed until a named event, or owned by the caller and freed by
 *    a named function. Every *_close(NULL) and *_free(NULL) is a no-op.
 *  - Threads: a stele_t may be used from any number of threads at once unless a function
 *    says otherwise. A stele_reader_t belongs to one thread at a time.
 */
#ifndef STELE_H
#define STELE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------
 * Version (engine/version.c)
 *
 * The macros are the version of this header, the calls that of the library a program runs
 * with: a program linked to libstele.so may meet a later library than it was compiled
 * against. STELE_VERSION_NUMBER is MAJOR * 1000000 + MINOR * 1000 + PATCH, so versions
 * compare as integers. Within one soname (libstele.so.0) the ABI only grows.
 * ------------------------------------------------------------------------------------------ */
#define STELE_VERSION_MAJOR 0
#define STELE_VERSION_MINOR 1
#define STELE_VERSION_PATCH 0
#define STELE_VERSION_STRING "0.1.0"
#define STELE_VERSION_NUMBER                                                                       \
    (STELE_VERSION_MAJOR * 1000000 + STELE_VERSION_MINOR * 1000 + STELE_VERSION_PATCH)

/* The library's version as "MAJOR.MINOR.PATCH" ("0.1.0"): static text, never NULL, never to
 * be freed. Thread-safe, no I/O. */
const char *stele_version(void);

/* The library's version as STELE_VERSION_NUMBER computes it (1000 for 0.1.0); compare it
 * with the macro to learn whether the library is older than the header a program was built
 * with. Thread-safe, no I/O. */
int stele_version_number(void);

/* ------------------------------------------------------------------------------------------
 * Error codes. One X-macro generates the enum, stele_errname() and stele_strerror().
 * X(name, value, text). Values are stable: they are part of the ABI and of the socket
 * protocol. -1 .. -999 are reserved for -errno.
 * ------------------------------------------------------------------------------------------ */
#define STELE_ERROR_LIST(X)                                                                        \
    X(STELE_OK, 0, "success")                                                                      \
    X(STELE_EINVAL, -1000, "invalid argument")                                                     \
    X(STELE_ENOTJOURNAL, -1001, "not a stele journal directory")                                   \
    X(STELE_EVERSION, -1002, "journal format version not supported")                               \
    X(STELE_ELOCKED, -1003, "journal is held by another writer")                                   \
    X(STELE_ECORRUPT, -1004, "journal corruption detected")                                        \
    X(STELE_EHALTED, -1005, "engine halted after an earlier write or sync failure")                \
    X(STELE_ECLOSED, -1006, "handle is closing or closed")                                         \
    X(STELE_ETIMEDOUT, -1007, "timed out")                                                         \
    X(STELE_EFULL, -1008, "journal quota reached")                                                 \
    X(STELE_EAGAIN, -1009, "no record available yet")                                              \
    X(STELE_ENOTFOUND, -1010, "sequence number not in the journal")                                \
    X(STELE_ETOOBIG, -1011, "record too large")                                                    \
    X(STELE_EUNSAFE, -1012, "journal directory is open to change by other users")                  \
    X(STELE_ERETAINED, -1013, "records were deleted by retention before they were read")           \
    X(STELE_EJSON, -1020, "malformed JSON")                                                        \
    X(STELE_ENOTOBJECT, -1021, "event is not a JSON object or BSON document")                      \
    X(STELE_EUTF8, -1022, "invalid UTF-8")                                                         \
    X(STELE_EKEYNUL, -1023, "key contains a NUL byte")                                             \
    X(STELE_EDOLLARKEY, -1024, "key starts with '$'")                                              \
    X(STELE_ERESERVEDKEY, -1025, "top-level key is reserved")                                      \
    X(STELE_EDEPTH, -1026, "event nested too deeply")                                              \
    X(STELE_ENUMBER, -1027, "number fits neither int64 nor double")                                \
    X(STELE_EBSON, -1028, "malformed BSON")                                                        \
    X(STELE_EEMPTY, -1029, "empty event")                                                          \
    X(STELE_EAMBIGUOUS, -1030, "key is ambiguous: repeated, or containing '.'")                    \
    X(STELE_ECONFIG, -1040, "invalid configuration")                                               \
    X(STELE_ENOSINK, -1041, "no sink configured")                                                  \
    X(STELE_EREMOTE, -1050, "remote store error")                                                  \
    X(STELE_EINTEGRITY, -1051, "remote copy does not match the journal")                           \
    X(STELE_EAUTH, -1052, "remote store refused authentication or authorization")                  \
    X(STELE_ESINKSTOPPED, -1053, "a sink stopped shipping for good")                               \
    X(STELE_EPROTOCOL, -1060, "malformed request")                                                 \
    X(STELE_EBUSY, -1061, "server refused the connection: too many open")

typedef enum stele_code {
#define STELE_X_ENUM(name, value, text) name = value,
    STELE_ERROR_LIST(STELE_X_ENUM)
#undef STELE_X_ENUM
} stele_code_t;

#define STELE_ERROR_MESSAGE_BYTES 256
#define STELE_ERROR_HINT_BYTES 160

/* Filled by a failing call. `code` repeats the return value. */
typedef struct stele_error {
    int code;
    char message[STELE_ERROR_MESSAGE_BYTES];
    char hint[STELE_ERROR_HINT_BYTES]; /* empty string when there is no hint */
} stele_error_t;

/* Static text for any return code (stele or -errno). Never NULL; never to be freed. */
const char *stele_strerror(int code);
/* Symbolic name ("STELE_ECORRUPT", "EIO") for any return code. Never NULL. */
const char *stele_errname(int code);

/* ------------------------------------------------------------------------------------------
 * Knobs
 * ------------------------------------------------------------------------------------------ */

/* How the committer makes batches durable. */
typedef enum stele_sync {
    STELE_SYNC_ALWAYS = 0,   /* fdatasync every batch: an acknowledged durable record survives
                                power loss */
    STELE_SYNC_INTERVAL = 1, /* fdatasync every sync_interval_ms: up to that much is lost on
                                power loss; wait=durable waits for the next sync */
    STELE_SYNC_NEVER = 2,    /* leave it to the OS; wait=durable waits for close/flush */
} stele_sync_t;

/* What an append waits for before returning. Each level implies the ones above it. */
typedef enum stele_wait {
    STELE_WAIT_NONE = 0,    /* queued in memory: lost if the process dies */
    STELE_WAIT_WRITTEN = 1, /* handed to the OS: survives a process crash */
    STELE_WAIT_DURABLE = 2, /* fdatasynced: survives power loss */
    STELE_WAIT_SHIPPED = 3, /* acknowledged by every sink with its write concern */
} stele_wait_t;

/* The name of a wait level, "none", "written", "durable" or "shipped" (as in the config
 * file, the CLI's --wait and the socket protocol); "?" for another value. Static storage. */
const char *stele_wait_name(stele_wait_t wait);

/* Parses a wait level's name (NUL-terminated). Returns 0, or STELE_EINVAL with *out
 * unchanged (also when an argument is NULL). */
int stele_wait_parse(const char *name, stele_wait_t *out);

/* Levels of a program's log, least severe first; their names are those of stele_log_write's
 * convention. */
typedef enum stele_log_level {
    STELE_LOG_DEBUG = 0,
    STELE_LOG_INFO = 1,
    STELE_LOG_WARN = 2,
    STELE_LOG_ERROR = 3,
} stele_log_level_t;

/* What an append does when the journal quota (max_journal_bytes) is reached. */
typedef enum stele_on_full {
    STELE_ON_FULL_BLOCK = 0, /* wait (up to queue_timeout_ms) for retention to free space */
    STELE_ON_FULL_FAIL = 1,  /* return STELE_EFULL at once */
} stele_on_full_t;

/* How the committer forms batches. */
typedef enum stele_commit_policy {
    STELE_COMMIT_ADAPTIVE = 0, /* commit as soon as the previous commit ends; wait up to
                                  commit_interval_us only while other writers are active */
    STELE_COMMIT_FIXED = 1,    /* commit every commit_interval_us whatever the load, like
                                  MongoDB 2.4's journal; for the benchmark's comparison */
} stele_commit_policy_t;

/* What a sink does when its checkpoint belongs to another destination than the one it is
 * configured with now (another cluster, database or collection: docs/mongodb.md, "A
 * checkpoint belongs to its destination"). */
typedef enum stele_on_destination_change {
    STELE_DESTINATION_REFUSE = 0,  /* stele_open fails with STELE_ECONFIG naming both */
    STELE_DESTINATION_RESTART = 1, /* start the sink over at the new destination, as a new sink
                                      (after the newest document stored there for this source,
                                      else from the oldest record); its dead letters go */
} stele_on_destination_change_t;

/* One MongoDB destination. Fill with stele_sink_options_init() first. */
typedef struct stele_sink_options {
    const char *name;        /* unique per journal; keys the checkpoint, which is tied to the
                                destination (on_destination_change). Default "default" */
    const char *uri;         /* mongodb:// URI; required */
    const char *database;    /* default: the URI's path, else "audit" */
    const char *collection;  /* default "events" */
    int w;                   /* write concern w: -1 = majority (default), 0..50 nodes */
    int journaled;           /* write concern j: 1 (default) or 0 */
    uint32_t wtimeout_ms;    /* write concern timeout; default 10000; 0..INT32_MAX */
    uint32_t batch_docs;     /* max documents per insert; default 1000; 1..100000 */
    uint32_t batch_bytes;    /* max bytes per insert; default 8 MiB; 1024..48000000 */
    uint32_t linger_ms;      /* most a batch waits for records on their way (appended, not yet
                                durable); never when none is; default 5; 0..3600000 */
    uint32_t backoff_min_ms; /* first retry delay; default 50; 1..3600000 */
    uint32_t backoff_max_ms; /* retry delay cap (jitter); default 5000; min..3600000 */
    /* The collection's shape for audit queries (docs/mongodb.md, "Collections for audit
     * queries"): */
    const char *time_field;  /* top-level BSON date holding the record's time, and the field of
                                the time index; default "_ts" (reserved in events, as is any
                                sink's time_field); 1 to 63 bytes, no '.', not '$'-led */
    const char *indexes;     /* indexes created besides the time index, ';'-separated, each
                                "field:1|-1[,field:1|-1...]", e.g. "actor:1,_ts:-1"; NULL */
    uint32_t expire_after_s; /* TTL: MongoDB deletes documents whose time_field is older;
                                0 (default) = never; 0..2147483647 */
    int timeseries;          /* 1: create the collection as a time-series collection on
                                time_field (MongoDB 5.0+); default 0 */
    stele_on_destination_change_t on_destination_change; /* default STELE_DESTINATION_REFUSE */
} stele_sink_options_t;

void stele_sink_options_init(stele_sink_options_t *sink);

/* Options for stele_open(). Always fill with stele_options_init() first, then change the
 * fields you care about: new fields get their defaults that way. */
typedef struct stele_options {
    const char *source;          /* this journal's name in MongoDB `_id.src`; fixed when the
                                    journal is created. Default: the host name */
    int create_if_missing;       /* 1 (default): create the directory and journal */
    unsigned file_mode;          /* journal and index files, exactly (the umask does not
                                    narrow it), existing ones included; 0 (default): 0600
                                    for a new journal, an existing one keeps its own */
    unsigned dir_mode;           /* the journal directory, exactly, an existing one included;
                                    0 (default): 0700 for a new one, else kept */
    int allow_unsafe_dir;        /* 1: open a journal that users other than its owner and
                                    root could change, or modes that let them (STELE_EUNSAFE
                                    and STELE_ECONFIG otherwise); links are never followed.
                                    Default 0 */
    uint64_t segment_bytes;      /* preallocated segment size; default 64 MiB */
    uint32_t max_record_bytes;   /* largest event (BSON bytes); default 1 MiB, max 16 MiB
                                    less the shipped document's envelope */
    uint32_t max_depth;          /* deepest nesting of an event; default 100 (JSON events:
                                    at most 98 whatever the setting) */
    uint32_t commit_interval_us; /* longest wait to grow a batch, only while other writers are
                                    active; 0 (default) = adaptive: no wait on a disk that
                                    flushes in under 1 ms, up to half a flush on a slower one
                                    (with sync=always); a lone writer never waits */
    stele_commit_policy_t commit_policy; /* default STELE_COMMIT_ADAPTIVE */
    stele_sync_t sync;                   /* default STELE_SYNC_ALWAYS */
    uint32_t sync_interval_ms;           /* for STELE_SYNC_INTERVAL; default 1000 */
    uint64_t max_queue_bytes;            /* bound on queued, uncommitted bytes; default 64 MiB */
    uint32_t queue_timeout_ms;   /* how long a full queue/quota blocks an append; 0 = forever */
    uint64_t max_journal_bytes;  /* disk quota of the segment files; 0 = none. Queued records
                                    count; only the segment prepared ahead may pass it
                                    (engine/README.md) */
    stele_on_full_t on_full;     /* default STELE_ON_FULL_BLOCK */
    uint64_t retention_bytes;    /* keep at most this much shipped data; 0 = keep all */
    uint64_t retention_seconds;  /* keep shipped data at least/at most this old; 0 = keep all */
    uint32_t sink_drain_ms;      /* at close, how long the sinks may still ship what is
                                    committed; a sink that is failing, or inside a call that
                                    does not return, is not waited for past it (+0.5 s).
                                    Default 5000; 0..3600000 */
    stele_log_level_t log_level; /* least severe line the engine logs on stderr (the sinks'
                                    state: unreachable, retrying, recovered, dead letters,
                                    stopped; docs/mongodb.md); default STELE_LOG_INFO */
    /* Signing (FORMAT.md section 11; docs/guarantees.md "Trust"). */
    const char *signing_key;         /* signer key file (stele_keygen()): the writer signs
                                        checkpoints with it and evolves it in place, so it
                                        must stay writable by the writer. NULL (default) =
                                        no signing; a journal already signed then refuses to
                                        open (STELE_ECONFIG). Version 1 journals refuse a key */
    uint32_t checkpoint_records;     /* with a key: a checkpoint at least every this many
                                        records; default 1000 */
    uint32_t checkpoint_interval_ms; /* with a key: a checkpoint at least this often, also when
                                        idle; default 10000 */
    uint32_t key_epoch_s;            /* with a key: each key signs this long, then the next
                                        replaces it (forward security); default 900 */
    /* stele_serve_run() only: */
    uint32_t serve_idle_timeout_ms;    /* a connection with nothing to answer that sent nothing
                                          for this long is closed; default 300000; 0 = never */
    uint32_t serve_max_conns_per_uid;  /* a user's connections beyond this are refused with
                                          STELE_EBUSY; default 64 */
    uint32_t serve_max_conns;          /* all connections beyond this are refused; 0 (default)
                                          = the descriptor limit less a reserve for the engine */
    const stele_sink_options_t *sinks; /* borrowed for the call; copied */
    size_t n_sinks;
    void *owned; /* private: storage of stele_options_set; NULL after stele_options_init */
} stele_options_t;

void stele_options_init(stele_options_t *opts);

/*
 * Knobs by name: the one table (engine/config.c) that the CLI flags, the STELE_* environment
 * variables and the INI config file all go through, so the names are the same everywhere.
 * Names are the field names above ("commit_interval_us", "sync", ...); sizes accept K/M/G/T
 * suffixes; durations a plain number in the unit of the name, or a number with a unit
 * (us, ms, s, m, h) that makes a whole number of it ("5ms" for commit_interval_us).
 */
typedef struct stele_knob {
    const char *name;
    const char *default_text; /* as it would be written in a config file; "" when the
                                 default is worked out at open (help says how) */
    const char *help;         /* one line */
    const char *value_text;   /* how a value is written in a usage line: the choices
                                 ("always|interval|never", "true|false"), else what it is:
                                 NAME, MODE (octal), SIZE (K/M/G/T suffixes), N, DURATION
                                 (in the unit of the name, or with one: "5ms") */
} stele_knob_t;

/* The knob table; *n_out receives its length. Static storage. */
const stele_knob_t *stele_knobs(size_t *n_out);

/*
 * Sets one knob from text. String values are copied into storage owned by `opts` and freed
 * by stele_options_release(). Returns 0, or STELE_ECONFIG naming the knob, the value and
 * what it accepts; `opts` is unchanged on error.
 */
int stele_options_set(stele_options_t *opts, const char *name, const char *value,
                      stele_error_t *err);

/*
 * Loads an INI file: knobs at top level or under [journal]; one [sink NAME] section per sink
 * with keys uri, database, collection, w, journaled, wtimeout_ms, batch_docs, batch_bytes,
 * linger_ms, backoff_min_ms, backoff_max_ms, time_field, index (one line per index, each
 * adding to `indexes`), expire_after_s, timeseries, on_destination_change. Returns 0,
 * STELE_ECONFIG with file:line, or -errno when the file cannot be opened or read (-ENOENT,
 * -EISDIR, ...); `opts` is unchanged on error.
 */
int stele_options_load_file(stele_options_t *opts, const char *path, stele_error_t *err);

/* Applies STELE_<KNOB> environment variables (upper-case knob names). Same errors. */
int stele_options_load_env(stele_options_t *opts, stele_error_t *err);

/* Frees strings and sinks that stele_options_set/load_* allocated. Leaves defaults. */
void stele_options_release(stele_options_t *opts);

/* ------------------------------------------------------------------------------------------
 * Lifecycle and the write path
 * ------------------------------------------------------------------------------------------ */
typedef struct stele stele_t;

/*
 * Opens (or creates) the journal in `dir` for writing, runs recovery, starts the committer
 * and one shipper per sink. Blocks for recovery.
 *   dir:  journal directory (borrowed).
 *   opts: NULL for defaults (borrowed).
 *   out:  receives the handle; free with stele_close(). NULL on any failure.
 * Returns 0, STELE_ELOCKED (the message names the holder's pid; the holder may be
 * `stele serve`, and the hint says to append through its socket: stele_client_connect),
 * STELE_ENOTJOURNAL, STELE_EVERSION, STELE_ECORRUPT (with segment and offset),
 * STELE_ECONFIG, or -errno.
 * Recovery that truncated a torn tail or rebuilt the index succeeds and says so in
 * stele_stats_t.recovery_note. The index is a cache: failing to write it (a full disk)
 * never fails the open nor any append; the index is then behind the journal (reads scan
 * from its last entry) until the engine catches it up, and stele_stats_t.warning says so.
 */
int stele_open(const char *dir, const stele_options_t *opts, stele_t **out, stele_error_t *err);

/*
 * Drains the queue, commits and syncs everything appended, stops the threads, syncs the
 * index and frees the handle. Appends racing with close get STELE_ECLOSED. Returns 0 or the
 * engine's sticky error (the handle is freed either way). Not thread-safe with itself.
 * A success may carry a warning: err->code 0 with err->message set, when something ran
 * degraded without putting any record at risk (the next segment could not be prepared, the
 * index is behind the journal: a full disk). Callers that print warnings print it.
 */
int stele_close(stele_t *db, stele_error_t *err);

/*
 * Appends one event given as JSON text (a JSON object, UTF-8, `len` bytes, no NUL needed).
 * Validation and encoding run in the caller's thread; nothing is appended when it fails.
 * An event must read the same to every reader: a key repeated in one object, at any depth,
 * and a key containing '.' are refused (STELE_EAMBIGUOUS, naming the key path), for JSON and
 * BSON alike. JSON readers disagree on which of two values a repeated key has; FerretDB and
 * MongoDB before 5.0 refuse a dotted key (so the record could never ship) and later
 * MongoDB's queries, like `tail --where`, read it as a path.
 *   wait:    the level to reach before returning (see stele_wait_t).
 *   seq_out: may be NULL; receives the record's sequence number (assigned even for
 *            STELE_WAIT_NONE).
 * Returns 0; a validation code (STELE_EJSON with the parse position, STELE_ENOTOBJECT,
 * STELE_EUTF8, STELE_EKEYNUL, STELE_EDOLLARKEY / STELE_ERESERVEDKEY / STELE_EAMBIGUOUS with
 * the key path, STELE_EDEPTH, STELE_ENUMBER, STELE_ETOOBIG, STELE_EEMPTY); STELE_EFULL;
 * STELE_ETIMEDOUT
 * (queue or quota stayed full for queue_timeout_ms: nothing appended); STELE_EHALTED;
 * STELE_ECLOSED; STELE_ENOSINK for STELE_WAIT_SHIPPED without sinks, STELE_ESINKSTOPPED
 * when a sink stopped for good before shipping it (naming the sink and why).
 * If the record was appended but the wait failed, *seq_out is still set.
 * The record's origin (stele_origin_t, outside the event) is this process: kind
 * STELE_ORIGIN_PROCESS with its getuid(), getgid() and getpid() at stele_open(). Whatever the
 * event says about its author ("uid", "origin", ...) is data and changes none of it.
 * Thread-safe; blocks up to the wait level. With STELE_WAIT_DURABLE (and the default
 * sync=always, adaptive policy) the calling thread may itself write and fdatasync the
 * queued batch when no other thread is (so a lone writer pays no thread hand-off): give
 * callers a stack of at least 64 KiB, and never pthread_cancel a thread inside any stele_
 * call (the engine would be left holding its journal lock).
 */
int stele_append_json(stele_t *db, const char *json, size_t len, stele_wait_t wait,
                      uint64_t *seq_out, stele_error_t *err);

/* As stele_append_json, for a BSON document of `len` bytes (validated, then copied). */
int stele_append_bson(stele_t *db, const uint8_t *bson, size_t len, stele_wait_t wait,
                      uint64_t *seq_out, stele_error_t *err);

/*
 * Validates one event given as JSON text exactly as stele_append_json() would, without a
 * journal: same checks, same codes and messages, nothing appended anywhere. For a client
 * that must not send an event an appender would refuse (`stele insert` through `stele
 * serve` checks each line before sending it, so nothing after a bad line is ever sent).
 *   opts: the writer's options: its max_record_bytes and max_depth apply, and the struct is
 *         checked as stele_open() checks it; NULL = the defaults of stele_options_init().
 *         Borrowed for the call.
 * Returns 0; the validation codes of stele_append_json() (STELE_EJSON with the parse
 * position, STELE_ENOTOBJECT, STELE_EUTF8, STELE_EKEYNUL, STELE_EDOLLARKEY /
 * STELE_ERESERVEDKEY / STELE_EAMBIGUOUS with the key path, STELE_EDEPTH, STELE_ENUMBER,
 * STELE_ETOOBIG, STELE_EEMPTY); STELE_ECONFIG (naming the knob and what it accepts) when
 * stele_open() would refuse opts. A writer opened with other limits than `opts` may still refuse an
 * event this accepts. Pure: thread-safe, no I/O.
 */
int stele_validate_json(const char *json, size_t len, const stele_options_t *opts,
                        stele_error_t *err);

/*
 * Blocks until record `seq` has reached `level`, or timeout_ms passes (-1 = forever).
 * Returns 0, STELE_ETIMEDOUT, STELE_EHALTED, STELE_ECLOSED, STELE_EINVAL (seq never
 * appended, or timeout_ms below -1), STELE_ENOSINK, STELE_ESINKSTOPPED (level shipped: a
 * sink that has not shipped seq stopped for good; returned at once, not at the timeout).
 * A timeout_ms of 0 never sleeps: for written or durable it commits the queued records in the
 * caller's thread when the journal is free and the adaptive policy lets a waiter lead (as an
 * append's own wait does), waits at most for a batch being written, and otherwise returns
 * STELE_ETIMEDOUT at once. Thread-safe.
 */
int stele_wait(stele_t *db, uint64_t seq, stele_wait_t level, int64_t timeout_ms,
               stele_error_t *err);

/* Makes every record appended before the call durable (whatever `sync` says). Blocks. */
int stele_flush(stele_t *db, stele_error_t *err);

/* At most this many sinks per journal (stele_options_t.n_sinks, stele_status_t.sinks). */
#define STELE_MAX_SINKS 16

/* A snapshot of the engine's counters. The sinks' own are fetched one at a time with
 * stele_sink_stats(). */
typedef struct stele_stats {
    char source[64];
    uint64_t first_seq;    /* oldest record still in the journal (0 when empty) */
    uint64_t appended_seq; /* last seq handed out */
    uint64_t written_seq;  /* last seq handed to the OS */
    uint64_t durable_seq;  /* last seq fdatasynced */
    uint64_t batches;
    uint64_t syncs;       /* fdatasyncs of the journal */
    uint64_t index_syncs; /* flushes of the LMDB index (a cache, flushed lazily) */
    uint64_t bytes_written;
    uint64_t queue_bytes; /* queued, not yet written */
    uint64_t queue_records;
    double mean_batch_records;
    uint64_t commit_delays; /* batches the committer held back (up to commit_interval_us) so
                               other active writers could join; never for a lone writer */
    uint64_t segments;
    uint64_t disk_bytes;     /* segment files as allocated on disk */
    uint64_t latency_p50_us; /* append -> durable (or written with sync=never) */
    uint64_t latency_p99_us;
    uint64_t latency_p999_us;
    int halted_code; /* the sticky error, 0 when running */
    char halted_message[STELE_ERROR_MESSAGE_BYTES];
    char recovery_note[STELE_ERROR_MESSAGE_BYTES]; /* what open's recovery did, if anything */
    /* What runs degraded now without putting any record at risk, "" when nothing: the index
     * behind the journal, the next segment not prepared (a full disk; both are retried, and
     * only a roll that cannot get its segment halts the engine). */
    char warning[STELE_ERROR_MESSAGE_BYTES];
    size_t n_sinks; /* sinks of the handle: stele_sink_stats() takes 0 .. n_sinks - 1 */
} stele_stats_t;

/* Fills *out. Never blocks on I/O. Thread-safe. Returns 0, STELE_EINVAL (db or out NULL) or
 * STELE_ECLOSED (the handle is closing: *out untouched). */
int stele_stats(stele_t *db, stele_stats_t *out);

/* One sink's counters, from stele_sink_stats(). */
typedef struct stele_sink_stats {
    char name[64];
    char target[256];     /* host/db.collection, credentials removed */
    uint64_t shipped_seq; /* last seq acknowledged by the sink */
    uint64_t lag_records; /* written_seq - shipped_seq */
    double lag_seconds;   /* age of the oldest unshipped record, 0 when caught up */
    uint64_t batches;
    uint64_t retries;
    uint64_t dead_letters;      /* records the remote rejected permanently */
    int64_t last_error_unix_ms; /* 0 when none */
    char last_error[STELE_ERROR_MESSAGE_BYTES];
    int is_stopped; /* stopped for good (integrity, authentication, a dead letter the index
                       could not list, ...): last_error says why; restart to resume */
} stele_sink_stats_t;

/*
 * Fills *out with the counters of sink `index`: the sinks are those of stele_options_t, in
 * that order, fixed for the handle's life, and stele_stats_t.n_sinks counts them, so
 *     for (size_t i = 0; i < st.n_sinks; i++) stele_sink_stats(db, i, &sink);
 * visits each. A snapshot of its own: its lag is against the written_seq of the moment.
 * Never blocks on I/O. Thread-safe. Returns 0, STELE_EINVAL (db or out NULL, or index not
 * below n_sinks: *out untouched) or STELE_ECLOSED (the handle is closing: *out untouched).
 */
int stele_sink_stats(stele_t *db, size_t index, stele_sink_stats_t *out);

/* The highest seq that has reached `level` (every lower seq has too): appended for
 * STELE_WAIT_NONE, written, durable, or shipped (the lowest over all sinks; 0 without
 * sinks). A few atomic loads: cheap enough to call after every stele_wait(), which is how
 * a caller waiting for the oldest of many seqs learns how many more it may acknowledge.
 * Never blocks. Thread-safe. Returns 0 for a NULL handle or an unknown level. */
uint64_t stele_reached_seq(stele_t *db, stele_wait_t level);

/* ------------------------------------------------------------------------------------------
 * Readers: cross-process, read-only, never see an uncommitted record.
 * ------------------------------------------------------------------------------------------ */
typedef struct stele_reader stele_reader_t;

/* Who appended a record, as the engine saw it: never taken from the event, so a client
 * cannot set it. Journal format version 2 keeps it in every record, covered by the CRC, the
 * hash chain and the Merkle tree (journal/FORMAT.md, "Frame"). */
typedef enum stele_origin_kind {
    STELE_ORIGIN_UNKNOWN = 0, /* not recorded (a version 1 journal): uid, gid, pid are 0 */
    STELE_ORIGIN_PROCESS = 1, /* the writing process itself: its getuid, getgid, getpid */
    STELE_ORIGIN_PEER = 2,    /* a client of `stele serve`: its SO_PEERCRED, from the kernel */
} stele_origin_kind_t;

typedef struct stele_origin {
    uint32_t uid, gid, pid;
    stele_origin_kind_t kind;
} stele_origin_t;

/* The kind's name as `stele tail` and MongoDB documents show it: "unknown", "process",
 * "peer"; NULL for a value outside the enum. */
const char *stele_origin_kind_name(stele_origin_kind_t kind);

/*
 * A record as read back. Pointers are borrowed until the next call on the same reader.
 *
 * Timestamps: ts_ns is the wall-clock time of the append, never less than the record
 * before it. A step of the wall clock (somebody sets it) does not reach records: within a
 * boot the engine keeps time on the boot-time clock from the wall-clock time it trusts,
 * follows the wall clock while it only slews, and believes a step once the clock has kept
 * it for 10 minutes. So a clock set ahead (or back) and set right again stamps every record
 * on the true timeline, and time ranges find them. A new boot trusts its wall clock from
 * its first append; a clock already wrong then cannot be told from a right one, and later
 * records stay at least as late as the records it stamped (docs/journal.md, "Timestamps").
 */
typedef struct stele_record {
    uint64_t seq;
    int64_t ts_ns;       /* nanoseconds since the Unix epoch, never decreasing (below) */
    const uint8_t *bson; /* the event as a BSON document */
    uint32_t bson_len;
    uint8_t hash[32];      /* SHA-256 chain hash of this record */
    uint8_t prev_hash[32]; /* chain hash of the record before (genesis for the first) */
    stele_origin_t origin; /* who appended it (all zero when the journal does not say) */
} stele_record_t;

/*
 * Opens a reader on the journal in `dir`, positioned at the oldest record. Works while a
 * writer (in this or another process) appends. A reader returns only committed records;
 * with sync=always only durable ones. Like the writer it never follows a link in the journal
 * (the directory given as a link: STELE_EUNSAFE; a linked segment or LOCK: -ELOOP), and it
 * refuses a directory that users other than the journal's owner and root could change
 * (STELE_EUNSAFE; stele_reader_open_opts() with allow_unsafe_dir reads it anyway). The index
 * is used only when it belongs to the caller or root: another user's is skipped (LMDB writes
 * its lock file even to read), and seeks scan instead. Returns 0, STELE_ENOTJOURNAL,
 * STELE_EVERSION, STELE_EUNSAFE, -errno.
 */
int stele_reader_open(const char *dir, stele_reader_t **out, stele_error_t *err);
/* As stele_reader_open(), with opts (NULL for defaults; borrowed): only allow_unsafe_dir is
 * used. */
int stele_reader_open_opts(const char *dir, const stele_options_t *opts, stele_reader_t **out,
                           stele_error_t *err);

/* Positions the reader so the next record returned is `seq` (or the first after it if it
 * was deleted by retention: then STELE_ENOTFOUND is returned and the position is the oldest
 * record). Seeking past the end waits there for that record. */
int stele_reader_seek_seq(stele_reader_t *r, uint64_t seq, stele_error_t *err);

/* Positions the reader at the first record with ts_ns >= ts_ns. */
int stele_reader_seek_time(stele_reader_t *r, int64_t ts_ns, stele_error_t *err);

/*
 * Returns the next record in *rec. If none is committed yet, waits up to timeout_ms
 * (0 = do not wait, -1 = forever; the same unit and type as stele_wait's) without busy
 * polling. Returns 0, STELE_EAGAIN (nothing new within the timeout), STELE_ERETAINED (the
 * reader fell behind retention: the segment holding the next record was deleted; err names
 * the records lost and the seq the journal now starts at; stele_reader_seek_seq(r, 0) goes
 * on from there), STELE_ECORRUPT (segment and offset in err), STELE_EINVAL (r or rec NULL,
 * timeout_ms below -1), -errno. A missing segment above the oldest one is corruption, never
 * STELE_ERETAINED.
 */
int stele_reader_next(stele_reader_t *r, stele_record_t *rec, int64_t timeout_ms,
                      stele_error_t *err);

/* The journal's source name; borrowed until stele_reader_close(). */
const char *stele_reader_source(const stele_reader_t *r);

void stele_reader_close(stele_reader_t *r);

/* ------------------------------------------------------------------------------------------
 * Times as people write them (engine/time_parse.c): what `stele tail --since/--until` and the
 * ts conditions of a filter take
 * ------------------------------------------------------------------------------------------ */

/*
 * Reads `text` as a time, in nanoseconds since the Unix epoch, into *ts_ns_out. The forms
 * are journalctl's:
 *   - "now"; "today", "yesterday", "tomorrow": that day's midnight, local time;
 *   - a date, "2026-12-01": its midnight, local time;
 *   - a date and time, the T or a space between, seconds and fraction optional:
 *     "2026-12-01 21:00", "2026-12-01T21:00:05.25": local time; with a zone "Z", " UTC",
 *     "+01:00" or "+0100" it is that zone's (so RFC 3339 is read as it is). A leap second,
 *     ":60", is the instant after ":59";
 *   - a time of day, "21:00" or "21:00:05": today, local time;
 *   - a span from now: "-1h", "+30min", "30min ago", "1h30m ago", "1h 30min" (no sign and
 *     no "ago": before now, "90s"). Units: us, ms, s/sec/secs/second(s), m/min/mins/
 *     minute(s), h/hr/hrs/hour(s), d/day(s), w/week(s);
 *   - "@1795985090" or "@1795985090.25": seconds since the epoch.
 * Local time is the process's time zone (TZ, as localtime_r reads it). Spans, "today" and
 * its kin count from now_ns (the caller's clock, so that one command line sees one
 * instant). A date that does not exist (2026-02-30) is refused. A time beyond what int64
 * nanoseconds hold (before 1677, after 2262) saturates to INT64_MIN or INT64_MAX, so it
 * still compares right with every record's time.
 * Returns 0, or STELE_EINVAL (err quotes the text; its hint lists the forms). Thread-safe
 * as long as no thread changes TZ meanwhile.
 */
int stele_time_parse(const char *text, int64_t now_ns, int64_t *ts_ns_out, stele_error_t *err);

/* ------------------------------------------------------------------------------------------
 * Record filters (engine/filter*.c): what `stele tail --where` keeps
 * ------------------------------------------------------------------------------------------ */
typedef struct stele_filter stele_filter_t;

/* An empty filter, which matches every record. Relative times in its ts conditions
 * ("ts>-1h") count from now_ns. Returns 0 or -ENOMEM (err filled). Free it with
 * stele_filter_free(). */
int stele_filter_new(int64_t now_ns, stele_filter_t **out, stele_error_t *err);

/*
 * Adds the condition "PATH OP VALUE" (spaces around OP are ignored); a record matches when
 * every condition holds.
 *   PATH  "seq", "ts" or "src": the record's seq, commit time and journal source; else a
 *         dotted path into the event ("actor.name"; array items by index, "tags.0"), which
 *         may start with "event." (the way to name event fields called seq, ts or src).
 *   OP    =  (also ==)   equal              !=  not equal
 *         <  <=  >  >=   ordered: numbers numerically, ts by time, seq as integers
 *         ~              matches the POSIX extended regular expression VALUE, anywhere in
 *                        the text (anchor it with ^ and $)    !~  does not match it
 *         :              matches the glob VALUE (fnmatch: * ? [...], the whole text)
 *                                                             !:  does not match it
 *         A negated operator holds exactly when its positive form does not, so for a
 *         missing field too.
 *   VALUE for an event field with = and !=: compared by the field's type: a string exactly;
 *         an int32, int64 or double numerically ("200" matches 200, 200.0 and 2e2); a
 *         boolean as "true" or "false"; null as "null"; other types never equal. With
 *         < <= > >=: a number, and only numbers compare (int and double alike). With ~ and
 *         :, the text of a string, or the JSON text of a number, boolean or null as `stele
 *         tail` prints it; other types have no text (only !~ and !: hold). For seq: a whole
 *         number; for ts: any form stele_time_parse() takes (with ~ and :, the text
 *         "2026-11-30T20:44:50.123456Z"); for src: text, with = != ~ !~ : !: only.
 *         A VALUE in double quotes is a JSON string: it is unescaped and equals strings only
 *         (""200""); it is how to write a VALUE starting with = ! < > ~ or a space.
 * A key of PATH cannot contain '.', '=', '!', '<', '>', '~' or ':'.
 * Everything is checked here: STELE_EINVAL (err quotes the condition) for no operator, an
 * unknown one ("=<"), an empty PATH or key ("a..b"), "event" alone, a VALUE that is not the
 * number, seq or time the operator needs, a regular expression regcomp refuses, an
 * unfinished quoted VALUE; also when f or condition is NULL. -ENOMEM. A refused condition
 * leaves f as it was. `condition` is borrowed (copied). Not to be called while another
 * thread matches with f.
 */
int stele_filter_add(stele_filter_t *f, const char *condition, stele_error_t *err);

/*
 * Returns 1 when rec meets every condition of f, 0 when it does not, STELE_EBSON when the
 * event is not a BSON document, STELE_EINVAL when f or rec is NULL, or when source is NULL
 * and f has a src condition. `source` is the journal's source name (stele_reader_source()),
 * borrowed. Only reads f: threads may share a filter once it is built.
 */
int stele_filter_match(const stele_filter_t *f, const stele_record_t *rec, const char *source);

/* Frees the filter and its conditions. NULL is a no-op. */
void stele_filter_free(stele_filter_t *f);

/* ------------------------------------------------------------------------------------------
 * Inspection and verification (read-only, from any process)
 * ------------------------------------------------------------------------------------------ */

/* What `stele status` shows, read without opening the journal for writing. When a writer
 * holds the journal, its live positions are used (writer_pid != 0). */
typedef struct stele_status {
    char source[64];
    int writer_pid; /* 0 when no writer holds the journal */
    uint64_t first_seq;
    uint64_t last_seq;      /* last record on disk */
    uint64_t committed_seq; /* last record readers may see */
    uint64_t durable_seq;
    uint64_t segments;
    uint64_t disk_bytes;
    uint32_t format_version;
    size_t n_sinks; /* the sinks below: which ones, see stele_status_read */
    struct {
        char name[64];
        uint64_t shipped_seq;
        uint64_t dead_letters;
        /* Lag from the journal itself (any time); the counters below as the writer last
         * published them (checked about once a second, written when they change;
         * stats_unix_ms is that time, 0 when never published). Counters restart with each
         * writer; with writer_pid == 0 they are the last writer's. */
        uint64_t lag_records; /* committed_seq - shipped_seq, 0 when caught up */
        double lag_seconds;   /* now - ts of record shipped_seq + 1; 0 when caught up */
        int64_t stats_unix_ms;
        uint64_t retries;
        uint64_t batches;
        int is_stopped;             /* stopped by an integrity or authentication error */
        int64_t last_error_unix_ms; /* 0 when none */
        char last_error[STELE_ERROR_MESSAGE_BYTES]; /* credentials removed */
        /* The destination its checkpoint belongs to: "HOSTS/db.coll" (hosts sorted),
         * "replicaSet=NAME/db.coll" or "srv=HOST/db.coll"; no credentials. "" when the
         * checkpoint was stored without one. */
        char destination[256];
    } sinks[STELE_MAX_SINKS];
    /* The settings of the writer that opened the journal last, published in the index at
     * its open. They are the live writer's when writer_pid != 0, else the last writer's (a
     * future writer may choose others). settings_unix_ms: when a writer first published
     * these settings (a reopen with the same ones keeps it); 0 when none was ever published
     * (then the fields below are 0). */
    int64_t settings_unix_ms;
    stele_sync_t sync;
    uint32_t sync_interval_ms;
    uint32_t commit_interval_us;
    stele_commit_policy_t commit_policy;
    uint64_t max_journal_bytes; /* 0 = no quota */
    stele_on_full_t on_full;
    /* Bytes the records take in the segment files (segment headers included), as opposed
     * to disk_bytes, which counts the room preallocated for them too. */
    uint64_t used_bytes;
    int64_t newest_ts_ns; /* timestamp of the newest record on disk, 0 when empty */
} stele_status_t;

/*
 * Fills *out with the state of the journal in `dir`, as `stele status` shows it, from any
 * process and with or without a writer. Read-only: it opens the segments and the shared
 * positions like a reader, and the index read-only; it writes nothing and takes no lock a
 * writer waits for.
 *  - source, format_version: the journal's.
 *  - first_seq: the oldest record on disk; last_seq: the newest, found by scanning to the
 *    end from the index's newest batch start, or from the newest segment's first record when
 *    that is later or there is no index. Both 0 when the journal has no record.
 *  - committed_seq, durable_seq: a live writer's positions (writer_pid != 0; last_seq is
 *    then at least committed_seq). With no writer both equal last_seq: the next writer's
 *    recovery keeps every complete batch on disk.
 *  - segments, disk_bytes: the segment files and their allocated size.
 *  - sinks (n_sinks of them): those with a checkpoint in the index, in name order, then the
 *    last writer's sinks that have none yet (shipped_seq 0). Beyond STELE_MAX_SINKS, sinks
 *    the last writer did not name (retired, their checkpoints kept) are left out first.
 *    dead_letters is 0 when they cannot be counted; lag and counters: see stele_status_t.
 *  - settings_unix_ms and the settings after it: see stele_status_t; 0 when none were
 *    published.
 * Sinks and settings live in the index: without a usable one (none yet, unreadable, or
 * called in the process that holds the journal for writing, which must not open its index
 * a second time: use stele_stats() there) n_sinks and settings_unix_ms are 0.
 * Returns 0; STELE_EINVAL (dir or out NULL); STELE_ENOTJOURNAL, STELE_EVERSION,
 * STELE_ECORRUPT (a segment it read is damaged), -ENOMEM or another -errno. On failure
 * *out holds nothing meaningful. It reads at most the newest segment (the scan above) and
 * one record per lagging sink, and never waits for the writer.
 * Thread-safe: each call uses handles of its own.
 */
int stele_status_read(const char *dir, stele_status_t *out, stele_error_t *err);
/* As stele_status_read(), with opts (NULL for defaults; borrowed): only allow_unsafe_dir is
 * used. Both refuse a journal others could change, as stele_reader_open() does. */
int stele_status_read_opts(const char *dir, const stele_options_t *opts, stele_status_t *out,
                           stele_error_t *err);

/* Outcome of stele_verify() and stele_verify_trusted(). */
typedef struct stele_verify_report {
    uint64_t records_checked;
    uint64_t first_seq, last_seq;
    uint64_t bad_seq;     /* first failing seq, 0 when all holds */
    char bad_segment[64]; /* segment file of the failure ("" when none is to blame, or KEYS) */
    uint64_t bad_offset;
    char what[STELE_ERROR_MESSAGE_BYTES]; /* why it failed */
    /* -- stele_verify_trusted() only (0 otherwise) -- */
    uint64_t statements_checked; /* signed checkpoints and key statements that verified */
    uint64_t key_epoch;          /* the key epoch in force at the end of the journal */
    uint64_t sealed_seq;         /* records 1 .. sealed_seq are under the newest checkpoint */
    int64_t sealed_time_ns;      /* that checkpoint's time (wall clock of the writer) */
    int is_closed;               /* that checkpoint is a clean close's */
    uint64_t unsealed_first_seq; /* records past it, the unsealed tail (0 when none) */
    uint64_t unsealed_last_seq;
    int64_t unsealed_since_ns;    /* ts of the oldest unsealed record */
    uint64_t retention_first_seq; /* the newest signed retention point (0: none) */
} stele_verify_report_t;

/*
 * Checks every frame's CRC, the hash chain, seq contiguity and the index against the
 * segments, for seqs in [from_seq, to_seq] (0 = from the oldest / to the newest).
 * Returns 0 when all holds, STELE_ECORRUPT when anything fails (details in *report), or
 * another code when it could not check (-errno, STELE_ENOTJOURNAL, ...).
 */
int stele_verify(const char *dir, uint64_t from_seq, uint64_t to_seq, stele_verify_report_t *report,
                 stele_error_t *err);
/* As stele_verify(), with opts (NULL for defaults; borrowed): only allow_unsafe_dir is used.
 * Both refuse a journal others could change (STELE_EUNSAFE), as stele_reader_open() does. */
int stele_verify_opts(const char *dir, const stele_options_t *opts, uint64_t from_seq,
                      uint64_t to_seq, stele_verify_report_t *report, stele_error_t *err);

/* ------------------------------------------------------------------------------------------
 * Trust: signed checkpoints, forward-secure keys and proofs (FORMAT.md section 11;
 * docs/guarantees.md, "Trust")
 *
 * With a signing key (stele_options_t.signing_key) a writer of a version 2 journal keeps the
 * records in a Merkle tree and writes signed checkpoints of it into the journal: every
 * checkpoint_records records, every checkpoint_interval_ms even when idle, at each segment
 * roll, at close and before retention deletes segments. Every key_epoch_s it signs the next
 * key with the current one and destroys the current one, so whoever takes the host later
 * cannot sign anything of an earlier epoch. A verifier needs only the first public key.
 * ------------------------------------------------------------------------------------------ */

/*
 * Makes a new key pair: the signer key file `key_path` (the writer's signing_key: epoch 0,
 * mode 0600, created exclusively; never overwritten) and the verifier key file `pub_path`,
 * the trust anchor that verify, verify-proof and other checkers take (mode 0644 less the
 * umask), both in the text forms of Go's golang.org/x/mod/sumdb/note. `name` names the key
 * in signatures (1 to 255 bytes of UTF-8 without spaces or '+'); NULL = "stele". Both paths
 * are borrowed. Returns 0; -EEXIST (a file exists: nothing written); STELE_EINVAL (a path is
 * missing or both are the same, a bad name); -errno (err names the file and the call;
 * nothing is left behind). Thread-safe.
 */
int stele_keygen(const char *key_path, const char *pub_path, const char *name, stele_error_t *err);

/* stele_verify_trusted() flags. */
#define STELE_VERIFY_REQUIRE_SEALED 1 /* an unsealed tail fails the check (at its first seq) */

/*
 * Checks the journal in `dir` against the trust anchor in `pub_path` (the verifier key file
 * stele_keygen() wrote for epoch 0), FORMAT.md section 11.5: everything stele_verify()
 * checks, plus the key chain in KEYS from the anchor, the signature and epoch of every
 * checkpoint and key statement, the Merkle root at each one's tree size (computed from the
 * records, so successive checkpoints are consistent), that deleted oldest segments are
 * covered by a signed retention checkpoint, and that no statement names records the journal
 * lacks. A forged, missing, reordered or truncated record at or below the newest checkpoint
 * fails, naming the first bad seq (the record whose leaf the signed root contradicts, when
 * the index's cached hashes can tell; the first missing record; or a statement's tree
 * size). Records past the newest checkpoint are the unsealed tail, reported in
 * unsealed_first_seq .. unsealed_last_seq (with STELE_VERIFY_REQUIRE_SEALED: a failure).
 * Read-only, beside a live writer (its newest records may then be unsealed).
 *   dir, pub_path: borrowed.   flags: 0 or STELE_VERIFY_REQUIRE_SEALED.
 *   opts: NULL for defaults (borrowed): only allow_unsafe_dir is used, as stele_verify_opts().
 * Returns 0 when all holds, STELE_ECORRUPT when anything fails (details in *report), or
 * another code when it could not check: STELE_EINVAL (pub_path is not a verifier key file:
 * a private key, a malformed one; err says which), STELE_ENOTJOURNAL, -errno.
 */
int stele_verify_trusted(const char *dir, const stele_options_t *opts, const char *pub_path,
                         int flags, stele_verify_report_t *report, stele_error_t *err);

/*
 * Proves that record `seq` is in the signed journal in `dir`: *json_out receives a JSON
 * object (FORMAT.md section 11.6; no newline) holding the record (its leaf data in base64,
 * and as seq, ts, origin_block and event), its inclusion proof in the tree of the first
 * checkpoint after it, that checkpoint's signed note, and the key statements from the trust
 * anchor to the checkpoint's epoch: all stele_verify_proof() or another implementation of
 * RFC 9162 and C2SP signed notes needs, offline. The proof reads O(log n) hashes from the
 * index's cache and is checked against the checkpoint's root before it is returned.
 * Free *json_out with stele_json_free(); *len_out may be NULL. opts: NULL for defaults
 * (borrowed): only allow_unsafe_dir is used, as stele_verify_opts().
 * Returns 0; STELE_ENOTFOUND (seq is not in the journal, is not sealed by a checkpoint yet,
 * or the index has no cache of the tree: the message says which and what to do);
 * STELE_EINVAL (seq 0, a version 1 journal); STELE_ECORRUPT (the journal or its cache does
 * not prove it); STELE_ENOTJOURNAL, -errno. Read-only, beside a live writer (a checkpoint
 * it just wrote may take its index writer a moment: the call waits up to 2 s). Thread-safe.
 */
int stele_prove(const char *dir, const stele_options_t *opts, uint64_t seq, char **json_out,
                size_t *len_out, stele_error_t *err);

/* What a proof that holds proves. */
typedef struct stele_proof_info {
    uint64_t seq;          /* the record's */
    uint64_t tree_size;    /* of the checkpoint that seals it */
    uint64_t key_epoch;    /* whose key signed that checkpoint */
    int64_t checkpoint_ns; /* the checkpoint's time */
} stele_proof_info_t;

/*
 * Checks a proof bundle (stele_prove()'s JSON, `len` bytes) against the trust anchor in
 * `pub_path` (the verifier key file of epoch 0), offline: every key statement opens with the
 * key before it (the first with the anchor), the checkpoint with the last one's key, all
 * name the bundle's origin, the leaf data is what seq, ts, origin_block and event say, and
 * its inclusion proof reaches the checkpoint's root. The bundle is parsed strictly (the
 * members of FORMAT.md 11.6, in order, nothing else). info may be NULL.
 * Returns 0 when the proof holds; STELE_ECORRUPT when it does not or the bundle is not one
 * (truncated, altered, malformed: the message says what); STELE_EINVAL (pub_path is not a
 * verifier key file, or NULL arguments); -errno reading the key file. Pure but for reading
 * the key file; thread-safe.
 */
int stele_verify_proof(const char *bundle, size_t len, const char *pub_path,
                       stele_proof_info_t *info, stele_error_t *err);

/* ------------------------------------------------------------------------------------------
 * The remote copy: consistency check and re-ship against one sink (engine/ship_check.c)
 * ------------------------------------------------------------------------------------------ */

/* A closed range of sequence numbers. */
typedef struct stele_seq_range {
    uint64_t first_seq;
    uint64_t last_seq;
} stele_seq_range_t;

#define STELE_REMOTE_MAX_RANGES 64

/* Outcome of stele_remote_check(). Each list holds the first STELE_REMOTE_MAX_RANGES
 * ranges in seq order; the n_*_ranges counts may be larger (then the list is truncated). */
typedef struct stele_remote_report {
    uint64_t from_seq;        /* first seq compared (clamped to the oldest journal record) */
    uint64_t to_seq;          /* last journal seq compared */
    uint64_t records_checked; /* journal records in [from_seq, to_seq] */
    uint64_t docs_checked;    /* remote documents of this source with seq >= from_seq */
    uint64_t n_missing;       /* in the journal, not in the sink */
    uint64_t n_extra;         /* in the sink, not in the journal */
    uint64_t n_mismatched;    /* in both, with a different chain hash */
    size_t n_missing_ranges, n_extra_ranges, n_mismatched_ranges;
    stele_seq_range_t missing[STELE_REMOTE_MAX_RANGES];
    stele_seq_range_t extra[STELE_REMOTE_MAX_RANGES];
    stele_seq_range_t mismatched[STELE_REMOTE_MAX_RANGES];
} stele_remote_report_t;

/*
 * Compares the journal in `dir` with the sink's collection for this journal's source, seq
 * by seq: the remote documents' _id.seq and _stele.hash against the journal's records in
 * [from_seq, to_seq] (from_seq 0 = the oldest record; to_seq 0 = the last committed record,
 * and then remote documents past it are reported as extra too). Read-only on both sides;
 * runs beside a live writer and shipper (a record not shipped yet shows as missing: pass
 * the sink's shipped_seq as to_seq to check only what was acknowledged).
 *   sink:   the sink's options (borrowed); only its connection and names are used.
 *   report: filled (zeroed first).
 * Returns 0 when the ranges agree, STELE_EINTEGRITY when anything is missing, extra or
 * mismatched (details in *report), or STELE_EREMOTE / STELE_EAUTH / STELE_ECONFIG /
 * STELE_ENOTJOURNAL / STELE_ECORRUPT / -errno when it could not compare. Blocks on the
 * network; one connection for the call. Thread-safe.
 */
int stele_remote_check(const char *dir, const stele_sink_options_t *sink, uint64_t from_seq,
                       uint64_t to_seq, stele_remote_report_t *report, stele_error_t *err);

/*
 * Re-ships the journal's records in [from_seq, to_seq] (0 = oldest / last committed) to the
 * sink: inserts those the collection lacks with the sink's write concern, in seq order.
 * Documents already stored with the same chain hash are left alone; one stored with another
 * hash stops the call with STELE_EINTEGRITY (nothing is overwritten). Transient errors are
 * retried a few times with the sink's backoff; a document the server rejects for good
 * stops the call with STELE_EREMOTE naming its seq. Checkpoints and dead-letter lists are
 * not changed. Safe beside a live writer and shipper (both insert the same _id: the loser
 * sees a duplicate with the same hash).
 *   n_inserted: may be NULL; receives how many documents were inserted.
 * Returns 0, STELE_EINTEGRITY, STELE_EREMOTE, STELE_EAUTH, STELE_ECONFIG, STELE_ENOTJOURNAL,
 * STELE_ECORRUPT, -errno. Blocks on the network. Thread-safe.
 */
int stele_reship(const char *dir, const stele_sink_options_t *sink, uint64_t from_seq,
                 uint64_t to_seq, uint64_t *n_inserted, stele_error_t *err);

/* Outcome of stele_remote_verify_trusted(). */
typedef struct stele_remote_trust_report {
    char source[64];              /* the journal verified (_id.src) */
    uint64_t from_seq;            /* first seq verified: 1, or a signed retention point */
    uint64_t sealed_seq;          /* the newest shipped statement's tree size that verified:
                                     documents from_seq .. sealed_seq are under signatures */
    int64_t sealed_time_ns;       /* that checkpoint's time (the writer's wall clock) */
    uint64_t statements_checked;  /* shipped key statements and checkpoints that verified */
    uint64_t key_epoch;           /* the newest key epoch shipped */
    uint64_t retention_first_seq; /* the signed retention point the walk started at (0: none) */
    uint64_t docs_checked;        /* documents read in from_seq .. sealed_seq */
    uint64_t unsealed_first_seq;  /* documents past sealed_seq, under no signature yet */
    uint64_t unsealed_last_seq;   /* (0 when none) */
    uint64_t bad_seq;             /* the first divergence by seq; 0 when all holds */
    char what[STELE_ERROR_MESSAGE_BYTES]; /* what it is */
    /* Seqs in from_seq .. sealed_seq with no document (missing), stored more than once
     * (extra), or whose document is not what was signed (mismatched); from_seq, to_seq,
     * records_checked and docs_checked are unused here. */
    stele_remote_report_t ranges;
} stele_remote_trust_report_t;

/*
 * Verifies a sink's copy of a signed journal on its own, with no journal at hand, against
 * the trust anchor in `pub_path` (the verifier key file of epoch 0) and the statements the
 * shippers store in the sink's companion collection, `<collection>_checkpoints`
 * (docs/mongodb.md): the key statements from the anchor on, every shipped checkpoint's
 * signature by the key of an epoch in force at its tree size, and the Merkle root at each
 * statement's tree size recomputed from the documents (each leaf from _id.seq,
 * _stele.ts_ns, _stele.origin and the event's fields in stored order), from seq 1 (or the
 * newest signed retention point, when the documents before it are gone and its tree was
 * shipped) to the newest checkpoint. Missing, extra and mismatched documents are reported
 * as ranges in report->ranges; bad_seq names the first divergence: a document whose fields
 * contradict its chain hash exactly, one altered together with the chain hashes after it
 * as the first seq after the last root that held. A forged, unsigned or re-signed statement
 * fails at its tree size. Documents past the newest checkpoint are reported as unsealed.
 *   sink:   the sink's connection and names (borrowed); its time_field matters.
 *   source: the journal's source (_id.src); NULL = the only one the companion collection
 *           holds statements of.
 * Returns 0 when all holds; STELE_EINTEGRITY when anything diverges (details in *report;
 * also when the companion collection holds no key statement of the source);
 * STELE_EINVAL (bad arguments, pub_path not a verifier key file, several sources and none
 * named); STELE_ENOTFOUND (no source named and no statement at all); STELE_EREMOTE,
 * STELE_EAUTH, STELE_ECONFIG, -errno when it could not check. Read-only; blocks on the
 * network, one connection for the call. Thread-safe.
 */
int stele_remote_verify_trusted(const stele_sink_options_t *sink, const char *source,
                                const char *pub_path, stele_remote_trust_report_t *report,
                                stele_error_t *err);

/* -- remote reader -- */
/* ------------------------------------------------------------------------------------------
 * Reading the records back from a sink's collection (engine/remote_reader.c): what
 * `stele tail --mongo` prints. The documents are those of docs/mongodb.md; each is turned back
 * into the record it was shipped from (the event without _id and the metadata field; seq,
 * ts_ns and the hashes from _id and the metadata).
 * ------------------------------------------------------------------------------------------ */
typedef struct stele_remote_reader stele_remote_reader_t;

/* Which documents a remote reader returns. Fill with zeros first. */
typedef struct stele_remote_query {
    const char *source; /* required: the journal's source name (_id.src); borrowed, copied */
    uint64_t from_seq;  /* first seq returned; 0 = from the oldest */
    int has_since;      /* only records with ts_ns >= since_ns (filtered by the server) */
    int64_t since_ns;
    int has_until; /* only records with ts_ns <= until_ns (filtered by the server) */
    int64_t until_ns;
    /* Only records that match this filter; NULL: all. Borrowed: it must outlive the reader
     * and not change meanwhile. The server is asked for the seq and time ranges its seq and
     * ts conditions allow and for its string equalities on event fields; each record that
     * comes back is then checked with stele_filter_match(), so the records returned are
     * those a local reader would keep with the same filter. */
    const stele_filter_t *where;
} stele_remote_query_t;

/* Delay between polls of an exhausted remote reader: doubles from the first to the cap while
 * nothing new arrives, back to the first once documents arrive. */
#define STELE_REMOTE_POLL_MIN_MS 10
#define STELE_REMOTE_POLL_MAX_MS 1000

/*
 * Connects to the sink's server (one mongoc_client_t for the reader's life) and checks that
 * it answers. Only the sink's uri, database and collection are used, with the same defaults
 * as shipping (database: the URI's path, else "audit"; collection "events").
 *   sink:  borrowed for the call.
 *   query: borrowed for the call; source is required.
 *   out:   receives the reader; free with stele_remote_reader_close().
 * Returns 0; STELE_EINVAL (no source, source longer than 63 bytes); STELE_ECONFIG (invalid
 * URI, database or collection name: the URI is not quoted); STELE_EREMOTE (the server did
 * not answer, naming host:port/db.collection); STELE_EAUTH. Credentials never appear in a
 * message. Blocks on the network (up to the URI's serverSelectionTimeoutMS, default 5 s).
 */
int stele_remote_reader_open(const stele_sink_options_t *sink, const stele_remote_query_t *query,
                             stele_remote_reader_t **out, stele_error_t *err);

/* The newest seq of the source in the collection, ignoring since/until (0 when it holds no
 * document of the source). Returns 0, STELE_EREMOTE, STELE_EAUTH. */
int stele_remote_reader_last_seq(stele_remote_reader_t *r, uint64_t *seq_out, stele_error_t *err);

/* Positions the reader so that the next record returned is the first matching one with a
 * seq >= `seq` (it may be later: the remote copy may lack documents). Never fails on the
 * network: the next call to stele_remote_reader_next() queries. Returns 0 or STELE_EINVAL. */
int stele_remote_reader_seek_seq(stele_remote_reader_t *r, uint64_t seq, stele_error_t *err);

/*
 * Returns the next matching record, in seq order, in *rec (pointers borrowed until the next
 * call on the reader or its close). Documents are fetched in chunks sorted by _id.seq; once
 * a query comes back short, the reader polls for new documents no more often than every
 * STELE_REMOTE_POLL_MIN_MS, backing off to STELE_REMOTE_POLL_MAX_MS while none arrive.
 *   timeout_ms: how long to wait for a new document (0 = do not sleep: return one the
 *               current query holds, or run a query if a poll is due; -1 = forever).
 * Returns 0; STELE_EAGAIN (nothing new within the timeout); STELE_EINTEGRITY (a document of
 * the source is not in stele's shape: no _id.seq, no metadata field, a bad timestamp or
 * hash; the message names its seq when it has one); STELE_EREMOTE; STELE_EAUTH;
 * STELE_EINVAL (r or rec NULL, timeout_ms below -1).
 * After an error the reader may be called again: it re-queries from the same position, after
 * the poll delay (which an error doubles, as an empty poll does).
 */
int stele_remote_reader_next(stele_remote_reader_t *r, stele_record_t *rec, int64_t timeout_ms,
                             stele_error_t *err);

/* Frees the reader and its connection. NULL is a no-op. */
void stele_remote_reader_close(stele_remote_reader_t *r);

/* -- dead letters -- */
/*
 * A dead letter is a record a sink's MongoDB rejected for good (a collection validator, a
 * unique index other than _id, a document too large, ...). The sink records its seq in the
 * journal's index and goes on with the next record; the letter stays listed until it is
 * re-shipped successfully or discarded by an operator. These calls run beside a live writer
 * and its shippers, in another process (`stele ship --dead-letters` and friends) or in the
 * one that holds the journal with stele_open(): within a process they use the index
 * environment already open there (LMDB allows one per process).
 */
typedef struct stele_dead_letter {
    uint64_t seq;
    int64_t unix_ms; /* when it was last rejected; 0 when recorded without a time */
    char reason[STELE_ERROR_MESSAGE_BYTES]; /* the server's message, credentials removed */
} stele_dead_letter_t;

/*
 * Lists the dead letters of sink `sink_name` (NULL = "default") with seq >= from_seq, in seq
 * order, up to max of them into out. Returns how many were filled (0 when the journal has no
 * index yet), or a negative code. Page with from_seq = last seq + 1. Read-only.
 */
int stele_dead_letters_list(const char *dir, const char *sink_name, uint64_t from_seq,
                            stele_dead_letter_t *out, size_t max, stele_error_t *err);

/* Outcome of stele_dead_letters_reship(). */
typedef struct stele_dead_letter_report {
    uint64_t n_tried;    /* dead letters sent again */
    uint64_t n_shipped;  /* accepted, or found stored with the same hash: off the list */
    uint64_t n_rejected; /* rejected again: still listed, with the new reason and time */
    uint64_t n_missing;  /* no longer in the journal (retention): still listed; discard them */
} stele_dead_letter_report_t;

/*
 * Re-ships the dead letters of the sink (`sink` borrowed; its name selects the list): the
 * one at `seq`, or every one when seq is 0, in seq order, each with the sink's write
 * concern. A letter MongoDB now accepts, or finds stored with the same chain hash, leaves
 * the list; one rejected again stays with the new reason. Transient errors are retried a
 * few times with the sink's backoff, then the call stops (the rest stays listed).
 *   report: may be NULL; filled (zeroed first).
 * Returns 0 when every letter tried was shipped; STELE_EREMOTE when some were rejected again
 * or are missing from the journal (counts in *report), or the server stayed unreachable;
 * STELE_ENOTFOUND when seq is not a dead letter of the sink; STELE_EINTEGRITY (stored with
 * another hash: nothing overwritten), STELE_EAUTH, STELE_ECONFIG, -errno. Blocks on the
 * network. Thread-safe.
 */
int stele_dead_letters_reship(const char *dir, const stele_sink_options_t *sink, uint64_t seq,
                              stele_dead_letter_report_t *report, stele_error_t *err);

/*
 * Removes the dead letter `seq` of sink `sink_name` (NULL = "default") without shipping it:
 * an operator's decision that the record will never be in the sink. Logs one line on
 * stderr (sink, seq, last reason). Returns 0, STELE_ENOTFOUND (no such dead letter), or
 * another negative code.
 */
int stele_dead_letter_discard(const char *dir, const char *sink_name, uint64_t seq,
                              stele_error_t *err);

/* ------------------------------------------------------------------------------------------
 * JSON output (engine/render*.c)
 *
 * The JSON that `stele tail`, `stele status --json` and `stele ship --dead-letters` print,
 * for programs that want the same text. Each call returns one compact JSON object (no
 * spaces, no newline at the end), UTF-8, NUL-terminated, owned by the caller: free it with
 * stele_json_free(). Values are written so that any JSON reader gets them back:
 *  - strings: '"', '\' and the control bytes escaped (\n, \t, ... or \u00XX; a NUL
 *    inside a BSON string is \u0000); everything else, UTF-8 included, as it is;
 *  - int32 and int64: decimal integers, exact (readers with 53-bit numbers, such as
 *    JavaScript and jq, round those beyond 2^53 themselves);
 *  - doubles: the shortest decimal that reads back as the same double ("0.1", "1e+300",
 *    "5e-324"), with ".0" added when it would read as an integer ("2.0", "-0.0"), so a
 *    reader keeps a double a double; NaN, Infinity and -Infinity, which JSON cannot hold,
 *    as {"$numberDouble":"NaN"}, {"$numberDouble":"Infinity"}, {"$numberDouble":"-Infinity"};
 *  - events: relaxed Extended JSON v2 (what MongoDB's tools read): the types above as plain
 *    JSON, the others as {"$oid":"<24 hex>"}, {"$date":"2026-11-30T20:44:50.123Z"} (years
 *    1970 to 9999, else {"$date":{"$numberLong":"<ms>"}}), {"$binary":{"base64":"...",
 *    "subType":"<2 hex>"}}, {"$numberDecimal":"..."}, {"$timestamp":{"t":T,"i":I}},
 *    {"$regularExpression":{"pattern":"...","options":"..."}}, {"$code":"..."} (and
 *    "$scope":{...}), {"$symbol":"..."}, {"$dbPointer":{"$ref":"...","$id":{"$oid":"..."}}},
 *    {"$undefined":true}, {"$minKey":1}, {"$maxKey":1}.
 * Thread-safe, no I/O. On failure *json_out is left alone and err says what could not be
 * written.
 * ------------------------------------------------------------------------------------------ */

/*
 * A record as the line `stele tail` prints (without the newline):
 *   {"seq":42,"ts":"2026-11-30T20:44:50.123456Z","src":"web-1",
 *    "origin":{"kind":"peer","uid":1001,"gid":1001,"pid":4242},"event":{"user":"alice"}}
 * ts is rec->ts_ns as RFC 3339 UTC with microseconds; src is `source`, the journal's name
 * (stele_reader_source(); borrowed); origin is rec->origin (absent when its kind is
 * STELE_ORIGIN_UNKNOWN; kind as stele_origin_kind_name()); event is rec->bson.
 *   json_out: set to the text; free it with stele_json_free().
 *   len_out:  may be NULL; set to the text's length in bytes.
 * Returns 0; STELE_EINVAL (a NULL argument); STELE_EBSON (the event is not a well-formed
 * BSON document, or a key or string in it is not UTF-8); STELE_EDEPTH (it nests deeper
 * than 128 levels); STELE_EUTF8 (source is not UTF-8); -ENOMEM.
 */
int stele_record_to_json(const stele_record_t *rec, const char *source, char **json_out,
                         size_t *len_out, stele_error_t *err);

/* A BSON event alone (`bson_len` bytes), as `stele tail --output cat` prints it:
 * {"user":"alice","n":7}. Same arguments and results as stele_record_to_json(). */
int stele_event_to_json(const uint8_t *bson, size_t bson_len, char **json_out, size_t *len_out,
                        stele_error_t *err);

/*
 * A record as the line `stele tail --output short` prints for people at a terminal (not
 * JSON, without the newline):
 *   2026-12-01T21:00:05.123456+01:00 web-1 42 uid=1001 alice login target=host-1 outcome=ok
 * the commit time in local time (TZ) with microseconds and the zone's offset; the source;
 * the seq; uid= and the uid of the record's origin (left out when its kind is
 * STELE_ORIGIN_UNKNOWN); the values of the event's top-level "actor" and "action" ("-" for a
 * missing one); then every other top-level field as KEY=VALUE, in the event's order. A string (key
 * or value) is bare when it is not empty and holds no space, '"', '\' or '=' and no
 * control character; else it is a JSON string. Numbers, booleans, null, documents, arrays
 * and the other types are their compact JSON, as in stele_record_to_json(). No character a
 * terminal could act on is written as it is: the C0 and C1 controls, DEL, U+2028, U+2029
 * and the bidirectional controls (U+202A..U+202E, U+2066..U+2069) are \u escapes inside
 * the JSON strings. Same arguments and results as stele_record_to_json(); free the text
 * with stele_json_free().
 */
int stele_record_to_short(const stele_record_t *rec, const char *source, char **text_out,
                          size_t *len_out, stele_error_t *err);

/*
 * The object `stele status --json` prints for `st` (filled by stele_status_read()), with
 * `dir` as its first field (NULL: left out):
 *   {"dir":"/var/lib/audit","source":"web-1","format_version":1,"writer_pid":0,
 *    "first_seq":1,"last_seq":3,"committed_seq":3,"durable_seq":3,"segments":1,
 *    "disk_bytes":67108864,"settings":{"live":false,"sync":"always","sync_interval_ms":1000,
 *    "commit_interval_us":0,"commit_policy":"adaptive","max_journal_bytes":0,
 *    "on_full":"block"},"sinks":[{"name":"default","destination":"127.0.0.1:27017/audit.events",
 *    "shipped_seq":3,"lag_records":0,
 *    "lag_seconds":0.0,"dead_letters":0,"retries":0,"batches":1,"stopped":false}]}
 * "settings" only when a writer published them (settings_unix_ms != 0); a sink that had an
 * error also has "last_error" and "last_error_time" (RFC 3339 UTC with milliseconds).
 * Returns 0, STELE_EINVAL (st or json_out NULL), STELE_EUTF8 (dir or a name is not UTF-8),
 * -ENOMEM.
 */
int stele_status_to_json(const char *dir, const stele_status_t *st, char **json_out,
                         size_t *len_out, stele_error_t *err);

/*
 * One dead letter as `stele ship --dead-letters` lists it:
 *   {"seq":3,"time":"2026-11-30T20:44:50.123000Z","unix_ms":1795985090123,"reason":"..."}
 * "time" is unix_ms as RFC 3339 UTC with microseconds, "" when unix_ms is 0.
 * Returns 0, STELE_EINVAL (dl or json_out NULL), STELE_EUTF8 (the reason is not UTF-8),
 * -ENOMEM.
 */
int stele_dead_letter_to_json(const stele_dead_letter_t *dl, char **json_out, size_t *len_out,
                              stele_error_t *err);

/*
 * The Prometheus text exposition format of a status, as `stele status --prometheus` prints
 * it and the `/metrics` endpoint of `stele serve --metrics-listen` serves it: gauges but for
 * the `_total` counters, a `source` label on every sample, a `sink` label on the sinks'
 * (docs/cli.md lists the metrics). Ends with a newline.
 *   text_out: set to the NUL-terminated text; free it with stele_json_free().
 *   len_out:  may be NULL; the text's length.
 * Returns 0, STELE_EINVAL (st or text_out NULL), -ENOMEM.
 */
int stele_status_to_prometheus(const stele_status_t *st, char **text_out, size_t *len_out,
                               stele_error_t *err);

/* Frees text returned by the stele_*_to_json calls and stele_status_to_prometheus. NULL is
 * a no-op. */
void stele_json_free(char *json);

/* ------------------------------------------------------------------------------------------
 * Log lines (engine/log.c)
 *
 * The one shape of every log line a stele process writes (the shippers, libmongoc's
 * messages, `stele serve`), for programs that embed stele and want theirs alike:
 *   ts=2026-11-30T20:33:00.123456Z level=warn msg="sink unreachable" sink="audit" retry_ms=800
 * One line on stderr per call, written with one write(2), so lines of concurrent threads
 * never interleave; a line longer than 1 KiB is cut. Thread-safe; never fails (a line the
 * write could not take is dropped).
 * ------------------------------------------------------------------------------------------ */

/*
 * Writes `ts=<RFC 3339 UTC> level=<level> msg="<msg>"`, then, when kv_fmt is neither NULL
 * nor "", a space and kv_fmt formatted with the arguments: space-separated key=value pairs.
 * A value that may hold spaces, quotes or control bytes must go through stele_log_quote().
 * `level` is written as given ("debug", "info", "warn", "error" by convention).
 */
void stele_log_write(const char *level, const char *msg, const char *kv_fmt, ...)
    __attribute__((format(printf, 3, 4)));
void stele_log_vwrite(const char *level, const char *msg, const char *kv_fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/*
 * Copies `text` (NULL as "") into buf as a double-quoted logfmt value: '"' and '\'
 * backslash-escaped, control bytes as \xNN; cut to fit `cap` (at least 3 bytes to hold
 * anything). Returns buf, so it can be an argument of stele_log_write().
 */
const char *stele_log_quote(char *buf, size_t cap, const char *text);

/* Parses "debug", "info", "warn" or "error". Returns 0, or STELE_EINVAL with *out unchanged
 * (also when an argument is NULL). */
int stele_log_level_parse(const char *name, stele_log_level_t *out);

/* ------------------------------------------------------------------------------------------
 * The server: `stele serve` (engine/serve*.c; protocol in docs/protocol.md)
 *
 * One process owns the journal and appends the events other processes send over a Unix
 * socket, one JSON object per line, replying to each in request order once it reached its
 * wait level. `stele serve` is stele_serve_run() behind its flags; a program may run the
 * same server itself. Clients use stele_client_* (below).
 * ------------------------------------------------------------------------------------------ */

/* Bounds of stele_serve_options_t, for callers that check their input before running. */
#define STELE_SERVE_MAX_LINE_BYTES (1u << 30)
#define STELE_SERVE_MAX_DRAIN_TIMEOUT_MS 3600000u

/* Options for stele_serve_run(). Always fill with stele_serve_options_init() first. */
typedef struct stele_serve_options {
    const char *socket_path;     /* where to listen, mode 0660; NULL (default) = DIR/stele.sock */
    const char *pid_path;        /* written once listening, removed at exit; NULL (default) =
                                    DIR/stele.pid */
    stele_wait_t default_wait;   /* of a request that names none; default STELE_WAIT_DURABLE */
    size_t max_line_bytes;       /* longest request line; longer ones get STELE_ETOOBIG.
                                    Default 2 MiB; 2 .. STELE_SERVE_MAX_LINE_BYTES */
    uint32_t drain_timeout_ms;   /* at shutdown, how long unanswered requests may still wait
                                    for their level; default 5000; 0 .. the max above */
    stele_log_level_t log_level; /* least severe line logged; default STELE_LOG_INFO
                                    (STELE_LOG_DEBUG adds a line per connection) */
    const char *metrics_listen;  /* "IPV4:PORT" (or "PORT": 127.0.0.1) for an HTTP endpoint
                                    serving GET /metrics (stele_status_to_prometheus) and
                                    GET /health (200 "ok"; 503 naming a halted journal or a
                                    stopped sink); NULL (default): none. Bound exactly as
                                    given: only a loopback address keeps it on this host */
} stele_serve_options_t;

void stele_serve_options_init(stele_serve_options_t *serve);

/*
 * Runs the server of the journal in `dir` in the calling thread until SIGTERM or SIGINT,
 * then drains and returns. In order:
 *  1. blocks SIGTERM and SIGINT in the calling thread (the engine's threads, started next,
 *     inherit the mask; the server reads the signals from a signalfd) and ignores SIGPIPE
 *     for the process (a client that hangs up is an EPIPE, not a death);
 *  2. stele_open(dir, opts): a second server on the journal fails here with STELE_ELOCKED,
 *     before touching the first one's socket;
 *  3. replaces a socket file left by a crashed server (only a socket that refuses
 *     connections: a file of another kind, or a socket something answers on, is left alone
 *     and the call fails), listens, writes the pid file;
 *  4. serves (docs/protocol.md). A signal starts the drain: stop accepting, take in what
 *     clients already sent, stele_flush, answer; requests still short of their level after
 *     drain_timeout_ms (a second signal: at once) get STELE_ECLOSED;
 *  5. removes the socket, stele_close (the sinks' bounded drain), removes the pid file.
 * Logs one logfmt line per event on stderr (stele_log_write), at or above
 * serve->log_level: "listening", "shutting down", "stopped", and every failure.
 *   dir, opts:  as for stele_open() (opts->sync and opts->n_sinks also shape the server:
 *               with sync=never durable requests are flushed, without sinks wait=shipped is
 *               refused). Borrowed for the call.
 *   serve:      NULL for the defaults. Borrowed for the call.
 * Returns 0 after a clean stop; STELE_EINVAL (dir NULL or an option out of range: nothing
 * done, nothing logged); the error of stele_open(); STELE_ELOCKED (another server answers
 * on the socket), -EEXIST (the socket path is another kind of file), -ENAMETOOLONG (socket
 * or pid file path too long), or another -errno from setting up signals, the socket, the
 * pid file or the event loop; the engine's error when the final flush or stele_close
 * failed. err is filled as the log line says. Blocks until stopped.
 * SIGTERM and SIGINT stay blocked in the calling thread when it returns, so one that comes
 * late does not kill a process that stopped cleanly. Other threads of the process must block
 * them too, or the kernel may deliver them there. One server per process at a time.
 */
int stele_serve_run(const char *dir, const stele_options_t *opts,
                    const stele_serve_options_t *serve, stele_error_t *err);

/* ------------------------------------------------------------------------------------------
 * Client of `stele serve` (engine/serve_client.c; protocol in docs/protocol.md)
 *
 * A journal has one writer. When `stele serve` holds it, other processes append through
 * its Unix socket with these calls instead of stele_open(); readers (stele_reader_*,
 * stele_status_read, stele_verify) keep reading the journal directly. The usual pattern
 * (what `stele insert` does):
 *
 *     rc = stele_client_connect(dir, NULL, &c, &err);
 *     if (rc == 0)              -> append with stele_client_*  (a server owns the journal)
 *     else if (rc == -ENOENT || rc == -ECONNREFUSED)
 *                               -> no server: stele_open(dir, ...) and append in-process
 *     else                      -> report err
 *
 * A reply is a promise with the same meaning as stele_append_json() returning 0 at that
 * wait level. When the connection breaks, requests without a reply may or may not have
 * been appended: never treat them as acknowledged.
 * A stele_client_t belongs to one thread at a time. Calls block (no timeout).
 * ------------------------------------------------------------------------------------------ */
typedef struct stele_client stele_client_t;

/* The socket's file name inside the journal directory when --socket is not given. */
#define STELE_SOCKET_NAME "stele.sock"

/*
 * Connects to the server of the journal in `dir` (socket dir/stele.sock), or to
 * `socket_path` when it is not NULL (then `dir` may be NULL). Both borrowed.
 * Returns 0; -ENOENT (no socket: no server), -ECONNREFUSED (a socket file but no server),
 * -EACCES, STELE_EINVAL (path too long), or another -errno.
 */
int stele_client_connect(const char *dir, const char *socket_path, stele_client_t **out,
                         stele_error_t *err);

/*
 * Sends one event (JSON object text, `len` bytes) and waits for its reply, at `wait`.
 * Same results as stele_append_json(), plus -EPIPE / -ECONNRESET when the server went away
 * (the event may or may not have been appended) and STELE_EPROTOCOL for a reply that is
 * not understood. STELE_EINVAL when requests sent with stele_client_send_json() are still
 * unanswered.
 */
int stele_client_append_json(stele_client_t *c, const char *json, size_t len, stele_wait_t wait,
                             uint64_t *seq_out, stele_error_t *err);

/*
 * Pipelining: queues one request without waiting for its reply (it is written out when the
 * buffer fills, and by stele_client_recv()). Replies come back in the order of the sends.
 * Keep the number of unanswered requests bounded (a few thousand): their replies are
 * buffered in memory until received. Returns 0 or a -errno of the connection.
 */
int stele_client_send_json(stele_client_t *c, const char *json, size_t len, stele_wait_t wait,
                           stele_error_t *err);

/*
 * Sends what is queued and returns the reply to the oldest unanswered request: 0 with
 * *seq_out set, or that request's error (code, message and hint as the server gave them).
 * STELE_EINVAL when nothing is unanswered; -EPIPE / -ECONNRESET when the connection broke.
 */
int stele_client_recv(stele_client_t *c, uint64_t *seq_out, stele_error_t *err);

/* Requests sent and not yet answered through stele_client_recv(). */
size_t stele_client_pending(const stele_client_t *c);

/* Closes the connection; unanswered requests are abandoned. NULL is a no-op. */
void stele_client_close(stele_client_t *c);

/*
 * Process housekeeping. libmongoc (which stele links for its sinks) keeps per-process
 * counters in a shared-memory file, /dev/shm/mongoc-PID, for its mongoc-stat tool; a
 * process that dies by a signal (SIGKILL, or SIGPIPE in `... | head`) leaves that file
 * behind, and a later process that gets the same PID prints "Falling back to malloc for
 * counters" on stderr. This removes the calling process's file now: the counters keep
 * working in memory, only mongoc-stat can no longer read them. Meant for short-lived
 * programs, early in main(); setting MONGOC_DISABLE_SHM=1 in the environment before the
 * program starts avoids the file altogether. Thread-safe, never fails (nothing to remove is
 * not an error).
 */
void stele_forget_driver_counters(void);

#ifdef __cplusplus
}
#endif

#endif /* STELE_H */
