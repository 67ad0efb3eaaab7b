/*
 * serve.h: the parts of the server behind stele_serve_run() (serve.c: start-up and
 * shutdown; serve_files.c: its socket and pid file; serve_loop.c: the event loop;
 * serve_conn.c: one connection; serve_ack.c: the ack threads; serve_log.c: its log). The wire
 * format is protocol.h's; docs/protocol.md is the protocol's contract. The server drives the engine
 * through <stele.h>, like any program would, except for one call: it appends with
 * stele_append_json_from() (stele_internal.h), which records each connection's peer as the
 * record's origin, something no public call lets a program claim.
 *
 * Roles: one event-loop thread owns every connection, the listening socket and all
 * buffers (no locks on them); it appends with STELE_WAIT_NONE so it never waits for a
 * commit. One ack thread per wait level (written, durable, shipped) blocks in stele_wait()
 * for the oldest seq the loop waits for at that level and wakes the loop through an
 * eventfd; the only state they share is serve_acks_t, protected by its mutex.
 */
#ifndef STELE_ENGINE_SERVE_H
#define STELE_ENGINE_SERVE_H

#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol.h"
#include "stele.h"

/* ---- logging (serve_log.c): one line per lifecycle event of the server (never an audit
 * event) on stderr, `ts=... level=... msg="..."` */

typedef struct serve_log {
    stele_log_level_t min_level;
} serve_log_t;

/* stele_log_write() when `level` is at or above the log's min_level. */
void serve_logf(const serve_log_t *log, stele_log_level_t level, const char *msg,
                const char *kv_fmt, ...) __attribute__((format(printf, 4, 5)));
/* serve_logf() without key=value pairs. */
void serve_log(const serve_log_t *log, stele_log_level_t level, const char *msg);
/* An error line: msg, code=<name>, error=<err's message or the code's text>, hint= when
 * err has one. err may be NULL. */
void serve_log_error(const serve_log_t *log, const char *msg, int rc, const stele_error_t *err);

/* ---- the metrics endpoint (serve_metrics.c): HTTP GET /metrics and /health ------------ */

typedef struct serve_metrics serve_metrics_t;

typedef struct serve_metrics_config {
    const char *addr; /* "IPV4:PORT", or "PORT" for 127.0.0.1 */
    const char *dir;  /* the journal, read for /metrics */
    stele_t *db;      /* the open journal, for /health */
    const stele_options_t *opts;
    const serve_log_t *log;
} serve_metrics_config_t;

/* 0 when text is "IPV4:PORT" or "PORT" (port 1..65535; a bare port means 127.0.0.1), the
 * address in *out; -1 otherwise. */
struct sockaddr_in;
int serve_metrics_parse_addr(const char *text, struct sockaddr_in *out);
/* Binds cfg->addr and starts the endpoint's thread (which inherits the caller's signal
 * mask). cfg is borrowed for the endpoint's life. 0, STELE_EINVAL (a bad address), or
 * -errno (bind: -EADDRINUSE, ...) with err filled. */
int serve_metrics_start(const serve_metrics_config_t *cfg, serve_metrics_t **out,
                        stele_error_t *err);
/* Stops the thread (after the connection it is answering), closes, frees. NULL: no-op. */
void serve_metrics_stop(serve_metrics_t *m);

/* ---- the server's files (serve_files.c): the socket and the pid file --------------------- */

/* A file the server makes, reached by name relative to its directory (opened once). */
typedef struct serve_file {
    char path[PATH_MAX];     /* as given, for messages */
    int dir_fd;              /* its directory; -1 when not open */
    char name[NAME_MAX + 1]; /* its name there */
    int is_made;             /* made by this server: removed by serve_file_release */
} serve_file_t;

/* Splits `path` and opens its directory. Returns 0, STELE_EINVAL (no file name),
 * -ENAMETOOLONG or -errno (err set). */
int serve_file_init(serve_file_t *f, const char *path, stele_error_t *err);
/* Removes the file if this server made it, and closes the directory. */
void serve_file_release(serve_file_t *f);
/* Binds the listening socket (mode 0660) and listens. A socket file left by a crashed server
 * is replaced; one a live server answers on is not, nor any other kind of file or a link.
 * Returns 0 with *out_fd (non-blocking), or the error (logged). */
int serve_socket_listen(serve_file_t *f, const serve_log_t *log, int *out_fd, stele_error_t *err);
/* socket(2) itself failed (out of descriptors or memory): logs it, fills err, returns rc. */
int serve_socket_failed(const serve_log_t *log, int rc, stele_error_t *err);
/* Writes the pid file with exactly `mode`, replacing what had its name. Returns 0 or
 * -errno. */
int serve_pid_write(serve_file_t *f, mode_t mode);

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

/* The loop's own try at `seq` (WRITTEN or DURABLE), when `level`'s thread has nothing
 * pending: a stele_wait() with a zero timeout, which commits the loop's queued records in
 * its own thread when the journal is free and never sleeps (at most it waits for a batch
 * being written). Returns 1 when seq reached the level (recorded as the thread would), 0
 * when the thread must wait for it instead (serve_acks_want). */
int serve_acks_reach_now(serve_acks_t *a, stele_wait_t level, uint64_t seq);

/* Stops and joins the threads (each returns within one poll interval). NULL is a no-op. */
void serve_acks_stop(serve_acks_t *a);

/* ---- the event loop (serve_loop.c) ------------------------------------------------------- */

typedef struct serve_config {
    stele_t *db;
    size_t n_sinks;            /* wait=shipped is refused when 0 */
    int listen_fd;             /* bound, listening, non-blocking */
    int signal_fd;             /* signalfd for SIGTERM/SIGINT */
    stele_wait_t default_wait; /* for bare events */
    int is_sync_never;         /* the journal's sync=never: durable waits flush first */
    int is_sync_always;        /* the journal's sync=always: the loop may commit a lone request */
    size_t max_line_bytes;
    uint32_t drain_timeout_ms; /* at shutdown: how long replies may still wait */
    uint32_t idle_timeout_ms; /* close a connection idle this long (serve_conn_is_idle); 0: never */
    uint32_t max_conns_per_uid; /* refuse a user's connections beyond this many */
    size_t max_conns;           /* refuse every connection beyond this many */
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

/* One unanswered request. */
typedef struct serve_pending {
    uint64_t seq;
    stele_wait_t level;
    char *error_reply; /* owned: an error reply already formatted, or NULL */
} serve_pending_t;

/* One client connection; owned by the loop thread. */
typedef struct serve_conn {
    int fd;
    uint64_t id;
    uint32_t events; /* current epoll interest */
    protocol_frame_t frame;
    protocol_buf_t in;     /* unconsumed input: a partial line, or lines left while throttled */
    protocol_buf_t out;    /* formatted replies not yet sent */
    serve_pending_t *fifo; /* ring buffer of unanswered requests */
    size_t fifo_head, fifo_count, fifo_cap;
    uint64_t n_requests;
    int is_read_closed; /* EOF seen, or the server is draining */
    int is_peer_gone;   /* peer hung up or a write failed: replies are dropped */
    struct serve_conn *all_prev, *all_next;   /* every connection */
    struct serve_conn *wait_prev, *wait_next; /* connections with a non-empty FIFO */
    int is_waiting;
    int is_closed; /* retired: fd closed, struct freed after the epoll batch */
    struct serve_conn *dead_next;
    uid_t uid;              /* the peer's user (SO_PEERCRED), counted in the loop's uid table */
    stele_origin_t origin;  /* the peer's SO_PEERCRED: every record appended for it says so */
    int64_t last_active_ms; /* clock_mono_ms() of the last byte read or sent */
    struct serve_conn *lru_prev, *lru_next; /* every connection, least recently active first */
} serve_conn_t;

/* How many connections one user holds (the loop's uid table). */
typedef struct serve_uid_count {
    uid_t uid;
    uint32_t n_conns;
} serve_uid_count_t;

/* The loop's state; owned by the loop thread. */
typedef struct serve_loop {
    const serve_config_t *cfg;
    int epoll_fd;
    int wake_fd;
    serve_acks_t *acks;
    serve_ack_state_t acked;
    serve_conn_t *all;
    serve_conn_t *waiting;
    serve_conn_t *dead; /* closed during this epoll batch; freed when it is done */
    size_t n_conns;
    uint64_t next_conn_id;
    int is_accept_paused;       /* listening socket out of the epoll interest */
    uint32_t accept_retry_ms;   /* backoff while short of descriptors; 0 when not */
    int64_t accept_retry_at_ms; /* clock_mono_ms() when a paused accept is tried again */
    int is_draining;
    int has_logged_halt;
    uint64_t want_seq[4];      /* per wait level: the newest seq a request waits for */
    uint64_t told_seq[4];      /* per wait level: the newest seq the ack threads were told */
    uint32_t n_round_wants[4]; /* per wait level: requests taken in since serve_flush_wants */
    int64_t drain_deadline_ms; /* clock_mono_ms() */
    char *scratch;             /* SERVE_READ_CHUNK_BYTES, one read at a time */
    serve_conn_t *lru_head, *lru_tail; /* by last activity: the idle sweep looks at the head */
    serve_uid_count_t *uids;           /* users with connections; few, searched in order */
    size_t n_uids, cap_uids;
    uint64_t n_refused;           /* connections refused at a cap since the last log line */
    int64_t refused_logged_at_ms; /* clock_mono_ms() of that line */
    /* epoll tags for the non-connection fds: their addresses identify them */
    char tag_listen, tag_signal, tag_wake;
} serve_loop_t;

/* A descriptor came free (a connection closed): accepting resumes if it was paused. */
void serve_loop_accept_resume(serve_loop_t *loop);

/* ---- one connection (serve_conn.c) ------------------------------------------------------- */

/* Takes an accepted, non-blocking socket into the loop, or refuses it when its user holds
 * max_conns_per_uid connections or the loop max_conns: then one STELE_EBUSY reply is sent and
 * the socket closed, so no user can hold the descriptors the others need. Returns 0, or
 * -errno (then fd is closed; STELE_EBUSY when refused). */
int serve_conn_open(serve_loop_t *loop, int fd);

/* A connection with nothing in flight: no request waits for its reply, no reply or input is
 * held. Only such a one is closed by the idle sweep. */
int serve_conn_is_idle(const serve_conn_t *c);

/* Marks the connection active now (it moves to the tail of the loop's LRU list). */
void serve_conn_touch(serve_loop_t *loop, serve_conn_t *c);

/* Handles epoll events for the connection: hang-up, writable, readable. */
void serve_conn_on_event(serve_loop_t *loop, serve_conn_t *c, uint32_t events);

/* The ack threads moved (loop->acked is fresh): sends the replies that became answerable
 * and reads on if the connection was throttled. */
void serve_conn_on_acks(serve_loop_t *loop, serve_conn_t *c);

/* Shutdown: takes in what the client already sent, within the usual bounds, then stops
 * reading. */
void serve_conn_drain_input(serve_loop_t *loop, serve_conn_t *c);

/* The drain deadline passed: replies what can be replied, STELE_ECLOSED to the rest, then
 * closes. Returns the number of requests failed. */
size_t serve_conn_fail_unanswered(serve_loop_t *loop, serve_conn_t *c);

/* Closes the fd and unlinks the connection now; the struct is freed after the current
 * epoll batch (loop->dead), since a later event of the batch may still name it. */
void serve_conn_close(serve_loop_t *loop, serve_conn_t *c);

#endif /* STELE_ENGINE_SERVE_H */
