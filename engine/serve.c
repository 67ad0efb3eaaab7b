/*
 * serve.c: stele_serve_run(), the server's start-up and shutdown around the event loop
 * (serve_loop.c; protocol: docs/protocol.md). Owns the order of the steps and the limits the
 * loop runs with (connection caps, idle timeout); how the socket and the pid file are made
 * is serve_files.c's. Holds no state between calls (no globals).
 *
 * Start-up order matters:
 *  1. SIGTERM/SIGINT are blocked before stele_open() starts the engine's threads, so they
 *     inherit the mask and the signals reach only the loop's signalfd;
 *  2. the journal is opened (its lock makes a second server fail with STELE_ELOCKED,
 *     naming the holder's pid) before the socket is touched, so a second server never
 *     unlinks the first one's socket;
 *  3. only then is the pid file written with the journal's file mode, and a leftover
 *     socket file (from a crash) removed, after checking that it is a socket and that no
 *     server answers on it, before the socket listens: a client that connects finds the
 *     pid file naming the server.
 * Shutdown runs the other way: socket, then stele_close() (drains the sinks), then pid file.
 */
#include "serve.h"

#include "error.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#define SERVE_DEFAULT_DRAIN_TIMEOUT_MS 5000u
#define SERVE_PID_FILE_NAME "stele.pid"
/* A quoted path in a log line. */
#define SERVE_QUOTED_PATH_BYTES (PATH_MAX + 8)
/* Descriptors kept back from the connection cap for the engine: the journal's and the
 * index's files, the sinks' connections, the loop's own. */
#define SERVE_FD_RESERVE 64
/* The pid file's mode when the journal's cannot be read. */
#define SERVE_PID_FILE_DEFAULT_MODE 0600

void
stele_serve_options_init(stele_serve_options_t *serve)
{
    if (!serve)
        return;
    memset(serve, 0, sizeof *serve);
    serve->default_wait = STELE_WAIT_DURABLE;
    serve->max_line_bytes = PROTOCOL_DEFAULT_MAX_LINE_BYTES;
    serve->drain_timeout_ms = SERVE_DEFAULT_DRAIN_TIMEOUT_MS;
    serve->log_level = STELE_LOG_INFO;
}

/* What a running server holds, so that shutdown can undo exactly what start-up did. */
typedef struct serve_run {
    serve_log_t log;
    stele_t *db;
    int signal_fd, listen_fd;
    serve_file_t socket, pid; /* their dir_fd is -1 until opened */
    char socket_path[PATH_MAX], pid_path[PATH_MAX];
} serve_run_t;

static int
serve_check_options(const stele_serve_options_t *serve, stele_error_t *err)
{
    if ((unsigned)serve->default_wait > STELE_WAIT_SHIPPED)
        return error_set(err, STELE_EINVAL, "stele_serve_run: default_wait %d is no wait level",
                         (int)serve->default_wait);
    if (serve->max_line_bytes < 2 || serve->max_line_bytes > STELE_SERVE_MAX_LINE_BYTES)
        return error_set(err, STELE_EINVAL, "stele_serve_run: max_line_bytes %zu is not in 2 .. %u",
                         serve->max_line_bytes, STELE_SERVE_MAX_LINE_BYTES);
    if (serve->drain_timeout_ms > STELE_SERVE_MAX_DRAIN_TIMEOUT_MS)
        return error_set(err, STELE_EINVAL,
                         "stele_serve_run: drain_timeout_ms %u is not in 0 .. %u",
                         (unsigned)serve->drain_timeout_ms, STELE_SERVE_MAX_DRAIN_TIMEOUT_MS);
    struct sockaddr_in addr;
    if (serve->metrics_listen && serve_metrics_parse_addr(serve->metrics_listen, &addr) != 0)
        return error_set(err, STELE_EINVAL,
                         "stele_serve_run: metrics_listen '%s' is not IPV4:PORT or PORT",
                         serve->metrics_listen);
    if ((unsigned)serve->log_level > STELE_LOG_ERROR)
        return error_set(err, STELE_EINVAL, "stele_serve_run: log_level %d is no log level",
                         (int)serve->log_level);
    return 0;
}

static int
serve_run_init(serve_run_t *run, const char *dir, const stele_serve_options_t *serve,
               stele_error_t *err)
{
    memset(run, 0, sizeof *run);
    run->log.min_level = serve->log_level;
    run->signal_fd = run->listen_fd = -1;
    run->socket.dir_fd = run->pid.dir_fd = -1;
    int n_socket =
        serve->socket_path
            ? snprintf(run->socket_path, sizeof run->socket_path, "%s", serve->socket_path)
            : snprintf(run->socket_path, sizeof run->socket_path, "%s/%s", dir, STELE_SOCKET_NAME);
    int n_pid =
        serve->pid_path
            ? snprintf(run->pid_path, sizeof run->pid_path, "%s", serve->pid_path)
            : snprintf(run->pid_path, sizeof run->pid_path, "%s/%s", dir, SERVE_PID_FILE_NAME);
    if (n_socket < 0 || (size_t)n_socket >= sizeof run->socket_path || n_pid < 0 ||
        (size_t)n_pid >= sizeof run->pid_path) {
        serve_logf(&run->log, STELE_LOG_ERROR, "socket or pid file path too long", "max_bytes=%zu",
                   sizeof run->socket_path - 1);
        return error_set(err, -ENAMETOOLONG,
                         "socket or pid file path too long (at most %zu "
                         "bytes)",
                         sizeof run->socket_path - 1);
    }
    return 0;
}

/* The mode of the pid file: the journal's file_mode when the options set one, else the mode
 * the journal's files have (its LOCK's), like every file a writer adds to the journal. */
static mode_t
serve_pid_file_mode(const char *dir, const stele_options_t *opts)
{
    if (opts && opts->file_mode)
        return (mode_t)opts->file_mode;
    char lock[PATH_MAX];
    struct stat st;
    int n = snprintf(lock, sizeof lock, "%s/LOCK", dir);
    if (n > 0 && (size_t)n < sizeof lock && lstat(lock, &st) == 0 && S_ISREG(st.st_mode))
        return st.st_mode & 0777;
    return SERVE_PID_FILE_DEFAULT_MODE;
}

/* Writes the pid file, then listens on the socket (step 3): a client that can connect finds
 * the pid file naming the server. Returns 0 or the error (logged); serve_stop removes what
 * was made. */
static int
serve_make_files(serve_run_t *run, const char *dir, const stele_options_t *opts, stele_error_t *err)
{
    char quoted[SERVE_QUOTED_PATH_BYTES];
    int rc = serve_file_init(&run->pid, run->pid_path, err);
    if (rc == 0)
        rc = serve_pid_write(&run->pid, serve_pid_file_mode(dir, opts));
    if (rc != 0) {
        serve_logf(&run->log, STELE_LOG_ERROR, "could not write pid file", "pid_file=%s errno=%s",
                   stele_log_quote(quoted, sizeof quoted, run->pid_path), stele_errname(rc));
        return error_set(err, rc, "could not write pid file %s: %s", run->pid_path,
                         stele_strerror(rc));
    }
    rc = serve_file_init(&run->socket, run->socket_path, err);
    if (rc != 0) {
        serve_log_error(&run->log, "could not open the socket's directory", rc, err);
        return rc;
    }
    return serve_socket_listen(&run->socket, &run->log, &run->listen_fd, err);
}

/* Blocks SIGTERM/SIGINT in this thread (and every thread created later) and returns a
 * signalfd for them; SIGPIPE is ignored (a client that hangs up is an EPIPE, not a death). */
static int
serve_signals(int *out_fd)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
        return -EINVAL;
    signal(SIGPIPE, SIG_IGN);
    int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    *out_fd = fd;
    return 0;
}

/* Steps 1-3 of the start-up order (top of the file). Returns 0 or the error (logged). */
static int
serve_start(serve_run_t *run, const char *dir, const stele_options_t *opts, stele_error_t *err)
{
    int rc = serve_signals(&run->signal_fd);
    if (rc != 0) {
        serve_log_error(&run->log, "could not set up signal handling", rc, NULL);
        return error_set(err, rc, "could not set up signal handling: %s", stele_strerror(rc));
    }
    rc = stele_open(dir, opts, &run->db, err);
    if (rc != 0) {
        serve_log_error(&run->log, "could not open journal", rc, err);
        return rc;
    }
    return serve_make_files(run, dir, opts, err);
}

/* Shutdown, the other way round; returns rc, or the journal's error when it closes with
 * one. */
static int
serve_stop(serve_run_t *run, int rc, stele_error_t *err)
{
    if (run->listen_fd >= 0)
        close(run->listen_fd);
    serve_file_release(&run->socket);
    if (run->db) {
        stele_error_t close_err = {0};
        int close_rc = stele_close(run->db, &close_err);
        if (close_rc != 0) {
            serve_log_error(&run->log, "journal closed with an error", close_rc, &close_err);
            if (rc == 0)
                rc = error_copy(err, &close_err);
        }
    }
    serve_file_release(&run->pid);
    if (run->signal_fd >= 0)
        close(run->signal_fd);
    if (rc == 0)
        serve_log(&run->log, STELE_LOG_INFO, "stopped");
    return rc;
}

/* The cap on all connections: serve_max_conns when set, else what the descriptor limit
 * leaves after SERVE_FD_RESERVE (half the limit when that is small), so that connections
 * never take the descriptors the server needs for itself or to refuse one more. (Set above
 * the limit, accept pauses when descriptors run out: serve_loop.c.) */
static size_t
serve_max_conns(const stele_options_t *opts)
{
    struct rlimit rl;
    if (opts->serve_max_conns)
        return opts->serve_max_conns;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return SIZE_MAX;
    return rl.rlim_cur > 2 * SERVE_FD_RESERVE ? (size_t)(rl.rlim_cur - SERVE_FD_RESERVE)
                                              : (size_t)(rl.rlim_cur / 2);
}

/* Step 4: serves until a signal, then drains. Returns 0 or the loop's error. */
static int
serve_serve(serve_run_t *run, const char *dir, const stele_options_t *opts,
            const stele_serve_options_t *serve, stele_error_t *err)
{
    char quoted[SERVE_QUOTED_PATH_BYTES];
    serve_config_t cfg = {
        .db = run->db,
        .n_sinks = opts->n_sinks,
        .listen_fd = run->listen_fd,
        .signal_fd = run->signal_fd,
        .default_wait = serve->default_wait,
        .is_sync_never = opts->sync == STELE_SYNC_NEVER,
        .is_sync_always = opts->sync == STELE_SYNC_ALWAYS,
        .max_line_bytes = serve->max_line_bytes,
        .drain_timeout_ms = serve->drain_timeout_ms,
        .idle_timeout_ms = opts->serve_idle_timeout_ms,
        .max_conns_per_uid = opts->serve_max_conns_per_uid,
        .max_conns = serve_max_conns(opts),
        .log = &run->log,
    };
    serve_logf(&run->log, STELE_LOG_INFO, "listening",
               "socket=%s pid=%ld wait=%s sinks=%zu max_conns=%zu max_conns_per_uid=%" PRIu32
               " idle_timeout_ms=%" PRIu32,
               stele_log_quote(quoted, sizeof quoted, run->socket_path), (long)getpid(),
               stele_wait_name(serve->default_wait), cfg.n_sinks, cfg.max_conns,
               cfg.max_conns_per_uid, cfg.idle_timeout_ms);
    serve_metrics_t *metrics = NULL;
    if (serve->metrics_listen) {
        serve_metrics_config_t mcfg = {.addr = serve->metrics_listen,
                                       .dir = dir,
                                       .db = run->db,
                                       .opts = opts,
                                       .log = &run->log};
        int mrc = serve_metrics_start(&mcfg, &metrics, err);
        if (mrc != 0) {
            serve_log_error(&run->log, "could not start the metrics endpoint", mrc, err);
            close(run->listen_fd);
            run->listen_fd = -1;
            return mrc;
        }
    }
    int rc = serve_loop_run(&cfg);
    serve_metrics_stop(metrics);
    run->listen_fd = -1; /* closed by the loop */
    if (rc != 0)
        return error_set(err, rc, "the server stopped with an error: %s", stele_strerror(rc));
    return 0;
}

int
stele_serve_run(const char *dir, const stele_options_t *opts, const stele_serve_options_t *serve,
                stele_error_t *err)
{
    stele_serve_options_t defaults;
    stele_options_t default_opts;
    stele_error_t run_err = {0}; /* the log lines quote it even when the caller passed NULL */
    serve_run_t run;
    if (!serve) {
        stele_serve_options_init(&defaults);
        serve = &defaults;
    }
    if (!opts) {
        stele_options_init(&default_opts);
        opts = &default_opts;
    }
    if (!dir)
        return error_set(err, STELE_EINVAL, "stele_serve_run needs a journal directory");
    int rc = serve_check_options(serve, err);
    if (rc != 0)
        return rc;
    rc = serve_run_init(&run, dir, serve, &run_err);
    if (rc == 0) {
        rc = serve_start(&run, dir, opts, &run_err);
        if (rc == 0)
            rc = serve_serve(&run, dir, opts, serve, &run_err);
        rc = serve_stop(&run, rc, &run_err);
    }
    if (rc != 0)
        error_copy(err, &run_err);
    return rc;
}
