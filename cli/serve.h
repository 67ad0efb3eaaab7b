/*
 * serve.h: the parts of `stele serve` (cli/cmd_serve.c, cli/serve_*.c). Internal to the
 * daemon; uses only <stele.h> and libbson. docs/protocol.md is the protocol's contract.
 *
 * Roles: one event-loop thread owns every connection, the listening socket and all
 * buffers (no locks on them); it appends with STELE_WAIT_NONE so it never waits for a
 * commit. One ack thread per wait level (written, durable, shipped) blocks in stele_wait()
 * for the highest seq the loop asked for at that level and wakes the loop through an
 * eventfd; the only state they share is serve_acks_t, protected by its mutex.
 */
#ifndef STELE_CLI_SERVE_H
#define STELE_CLI_SERVE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "stele.h"

/* ---- logging (serve_log.c): one line per event on stderr, `ts=... level=... msg="..."` */

typedef enum serve_log_level {
    SERVE_LOG_DEBUG = 0,
    SERVE_LOG_INFO = 1,
    SERVE_LOG_WARN = 2,
    SERVE_LOG_ERROR = 3,
} serve_log_level_t;

typedef struct serve_log {
    serve_log_level_t min_level;
} serve_log_t;

/* Parses "debug", "info", "warn", "error". Returns 0 or STELE_EINVAL. */
int serve_log_parse_level(const char *text, serve_log_level_t *out);

/* stele_log_write() when `level` is at or above the log's min_level. */
void serve_logf(const serve_log_t *log, serve_log_level_t level, const char *msg,
                const char *kv_fmt, ...) __attribute__((format(printf, 4, 5)));
/* serve_logf() without key=value pairs. */
void serve_log(const serve_log_t *log, serve_log_level_t level, const char *msg);

/* ---- requests and replies (serve_request.c): pure functions, fuzzed ---------------------- */

/* Longest request line accepted by default: an event of max_record_bytes (1 MiB) written as
 * JSON may grow (escapes, number text), so twice that. */
#define SERVE_DEFAULT_MAX_LINE_BYTES (2u * 1024u * 1024u)

/* One parsed request line. The event is always the client's JSON text, borrowed from the
 * line: the whole line for a bare event, the $event object's text for an envelope, so the
 * engine validates both alike (stele_append_json). */
typedef struct serve_request {
    stele_wait_t wait;
    const char *json; /* points into the line */
    size_t json_len;
} serve_request_t;

/*
 * Parses one request line (without its '\n'; a trailing '\r' is ignored). A line is either
 * a bare event (a JSON object, appended at default_wait) or an envelope
 * {"$event": {...}, "$wait": "none|written|durable|shipped"}. Only the envelope's top level
 * is read here; the event itself is validated by the engine when appended.
 * Returns 0 and fills *out, or STELE_EEMPTY (blank line), STELE_EJSON (an envelope that is
 * not one JSON object), STELE_ENOTOBJECT ($event not an object), STELE_EPROTOCOL (unknown or
 * repeated envelope key, unknown wait level, missing $event), with err filled. Nothing
 * is allocated: *out borrows from the line.
 */
int serve_request_parse(const char *line, size_t len, stele_wait_t default_wait,
                        serve_request_t *out, stele_error_t *err);

/* Parses a wait level name; returns 0 or STELE_EINVAL. */
int serve_wait_parse(const char *text, size_t len, stele_wait_t *out);
const char *serve_wait_name(stele_wait_t wait);

/* Largest reply line serve_reply_format() writes, '\n' included. */
#define SERVE_REPLY_MAX_BYTES (64 + 2 * 6 * (STELE_ERROR_MESSAGE_BYTES + STELE_ERROR_HINT_BYTES))

/* Formats a reply line ending in '\n' into buf (cap >= SERVE_REPLY_MAX_BYTES):
 * {"seq":N} when code == 0, else {"error":{"code":C,"name":"...","message":"...","hint":"..."}}
 * (message and hint from err when non-NULL, else stele_strerror()). Returns its length. */
size_t serve_reply_format(char *buf, size_t cap, int code, uint64_t seq, const stele_error_t *err);

/* ---- line framing (serve_frame.c): pure, fuzzed ----------------------------------------- */

/* Splits a byte stream into lines of at most max_line_bytes. A longer line is reported once
 * as oversize and its bytes are discarded up to the next '\n', never buffered whole. */
typedef struct serve_frame {
    size_t max_line_bytes;
    int is_discarding; /* inside an oversize line: drop bytes until '\n' */
} serve_frame_t;

typedef enum serve_frame_kind {
    SERVE_FRAME_LINE = 0,     /* line[0..len) is a complete request, '\n' excluded */
    SERVE_FRAME_OVERSIZE = 1, /* a line exceeded the limit (reported once per line) */
    SERVE_FRAME_NEED_MORE = 2 /* no complete line: keep data[consumed..n) and read more */
} serve_frame_kind_t;

/*
 * Looks at data[0..n) and returns what comes next; *consumed receives the bytes to drop
 * from the front (the line and its '\n', the discarded bytes, or 0). With is_eof set, a
 * final line without '\n' is returned as a line.
 */
serve_frame_kind_t serve_frame_next(serve_frame_t *fr, const char *data, size_t n, int is_eof,
                                    const char **line, size_t *line_len, size_t *consumed);

/* ---- ack threads (serve_ack.c) ----------------------------------------------------------- */

typedef struct serve_acks serve_acks_t;

/* What the ack threads reached, per wait level (index = stele_wait_t; [0] unused). */
typedef struct serve_ack_state {
    uint64_t reached_seq[4]; /* every seq <= this reached the level */
    uint64_t failed_upto[4]; /* seqs in (reached_seq, failed_upto] failed with fail_code */
    int fail_code[4];
    stele_error_t fail_err[4];
} serve_ack_state_t;

/* Starts the three ack threads; each writes 1 to wake_fd (an eventfd) when it progresses.
 * With flush_for_durable (the journal's sync=never) the durable thread flushes before it
 * waits. `db` must outlive serve_acks_stop(). Returns 0 or -errno. */
int serve_acks_start(stele_t *db, int wake_fd, int flush_for_durable, serve_acks_t **out);

/* Asks for `seq` to be waited for at `level` (WRITTEN..SHIPPED). Non-blocking. */
void serve_acks_want(serve_acks_t *a, stele_wait_t level, uint64_t seq);

/* Copies the current state. Non-blocking (short mutex). */
void serve_acks_snapshot(serve_acks_t *a, serve_ack_state_t *out);

/* Stops and joins the threads (each returns within one poll interval). NULL is a no-op. */
void serve_acks_stop(serve_acks_t *a);

/* ---- the server (serve_loop.c) ----------------------------------------------------------- */

typedef struct serve_config {
    stele_t *db;
    size_t n_sinks;            /* wait=shipped is refused when 0 */
    int listen_fd;             /* bound, listening, non-blocking */
    int signal_fd;             /* signalfd for SIGTERM/SIGINT */
    stele_wait_t default_wait; /* for bare events */
    int is_sync_never;         /* the journal's sync=never: durable waits flush first */
    size_t max_line_bytes;
    uint32_t drain_timeout_ms; /* at shutdown: how long replies may still wait */
    const serve_log_t *log;
} serve_config_t;

/* Bounds that keep one connection's memory finite whatever its client does. */
enum {
    SERVE_READ_CHUNK_BYTES = 64 * 1024, /* one read(2) per readiness: fairness */
    SERVE_OUT_HIGH_BYTES = 64 * 1024,   /* stop reading a client with this much unsent */
    SERVE_MAX_PENDING = 4096,           /* ... or this many unanswered requests */
};

/* Runs the event loop until SIGTERM/SIGINT, then drains (docs/protocol.md, "Shutdown").
 * Closes listen_fd. Returns 0, or the engine's error when the final flush failed. */
int serve_loop_run(const serve_config_t *cfg);

/* `stele serve`; exit code 0 ok, 1 usage, 3 engine or I/O error. */
int cmd_serve(int argc, char **argv);

#endif /* STELE_CLI_SERVE_H */
