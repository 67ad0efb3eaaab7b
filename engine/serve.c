/*
 * serve.c: stele_serve_run(), the server's start-up and shutdown around the event loop
 * (serve_loop.c; protocol: docs/protocol.md). Owns the order of the steps, the socket file
 * and the pid file; holds no state between calls (no globals).
 *
 * Start-up order matters:
 *  1. SIGTERM/SIGINT are blocked before stele_open() starts the engine's threads, so they
 *     inherit the mask and the signals reach only the loop's signalfd;
 *  2. the journal is opened (its lock makes a second server fail with STELE_ELOCKED,
 *     naming the holder's pid) before the socket is touched, so a second server never
 *     unlinks the first one's socket;
 *  3. only then is a leftover socket file (from a crash) removed, after checking that it
 *     is a socket and that no server answers on it, and the pid file written.
 * Shutdown runs the other way: socket, then stele_close() (drains the sinks), then pid file.
 */
#include "serve.h"

#include "error.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Connections the kernel queues before accept(); Linux caps it at net.core.somaxconn. */
#define SERVE_LISTEN_BACKLOG 4096
/* The socket's group may connect (docs/protocol.md, "Ownership"). */
#define SERVE_SOCKET_MODE 0660
#define SERVE_DEFAULT_DRAIN_TIMEOUT_MS 5000u
#define SERVE_PID_FILE_NAME "stele.pid"
/* A quoted path in a log line. */
#define SERVE_QUOTED_PATH_BYTES (PATH_MAX + 8)

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
    int is_socket_bound, is_pid_written;
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

/* socket(2) itself failed (out of descriptors or memory). */
static int
serve_socket_failed(const serve_log_t *log, int rc, stele_error_t *err)
{
    serve_logf(log, STELE_LOG_ERROR, "could not create a socket", "errno=%s", stele_errname(rc));
    return error_set(err, rc, "could not create a socket: %s", stele_strerror(rc));
}

/* Removes a socket file that nothing listens on (left by a crashed server). Only a refused
 * connect() proves that: a live server answers, and a live socket of another kind (a
 * datagram socket such as /dev/log given by mistake) says EPROTOTYPE; neither is touched.
 * Never unlinks what is not a socket: the path may be a typo for a real file. Returns 0
 * when the path is free, else an error (logged). */
static int
serve_remove_stale_socket(const char *path, const struct sockaddr_un *addr, const serve_log_t *log,
                          stele_error_t *err)
{
    char quoted[SERVE_QUOTED_PATH_BYTES];
    struct stat st;
    stele_log_quote(quoted, sizeof quoted, path);
    if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
        serve_logf(log, STELE_LOG_ERROR, "socket path exists and is not a socket", "socket=%s",
                   quoted);
        return error_set(err, -EEXIST, "socket path %s exists and is not a socket", path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return serve_socket_failed(log, -errno, err);
    int rc = connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0 ? 0 : -errno;
    close(fd);
    if (rc == 0) {
        serve_logf(log, STELE_LOG_ERROR, "another server answers on the socket", "socket=%s",
                   quoted);
        return error_set(err, STELE_ELOCKED, "another server answers on the socket %s", path);
    }
    if (rc != -ECONNREFUSED && rc != -ENOENT) {
        serve_logf(log, STELE_LOG_ERROR, "socket path is in use", "socket=%s errno=%s", quoted,
                   stele_errname(rc));
        return error_set(err, rc, "socket path %s is in use: %s", path, stele_strerror(rc));
    }
    if (unlink(path) == 0)
        serve_logf(log, STELE_LOG_WARN, "removed stale socket", "socket=%s", quoted);
    return 0;
}

/* Binds the listening socket. A socket file left by a crashed server is replaced; one a
 * live server answers on is not. */
static int
serve_listen(const char *path, const serve_log_t *log, int *out_fd, stele_error_t *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char quoted[SERVE_QUOTED_PATH_BYTES];
    stele_log_quote(quoted, sizeof quoted, path);
    if (strlen(path) >= sizeof addr.sun_path) {
        serve_logf(log, STELE_LOG_ERROR, "socket path too long", "socket=%s max_bytes=%zu", quoted,
                   sizeof addr.sun_path - 1);
        return error_set(err, -ENAMETOOLONG, "socket path too long (at most %zu bytes): %s",
                         sizeof addr.sun_path - 1, path);
    }
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int rc = serve_remove_stale_socket(path, &addr, log, err);
    if (rc != 0)
        return rc;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return serve_socket_failed(log, -errno, err);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        chmod(path, SERVE_SOCKET_MODE) != 0 || listen(fd, SERVE_LISTEN_BACKLOG) != 0) {
        rc = -errno;
        serve_logf(log, STELE_LOG_ERROR, "could not listen on socket", "socket=%s errno=%s", quoted,
                   stele_errname(rc));
        close(fd);
        return error_set(err, rc, "could not listen on socket %s: %s", path, stele_strerror(rc));
    }
    *out_fd = fd;
    return 0;
}

static int
serve_write_pid_file(const char *path)
{
    FILE *f = fopen(path, "we");
    if (!f)
        return -errno;
    int ok = fprintf(f, "%ld\n", (long)getpid()) > 0;
    if (fclose(f) != 0 || !ok)
        return -EIO;
    return 0;
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
    char quoted[SERVE_QUOTED_PATH_BYTES];
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
    rc = serve_listen(run->socket_path, &run->log, &run->listen_fd, err);
    if (rc != 0)
        return rc;
    run->is_socket_bound = 1;
    rc = serve_write_pid_file(run->pid_path);
    if (rc != 0) {
        serve_logf(&run->log, STELE_LOG_ERROR, "could not write pid file", "pid_file=%s errno=%s",
                   stele_log_quote(quoted, sizeof quoted, run->pid_path), stele_errname(rc));
        return error_set(err, rc, "could not write pid file %s: %s", run->pid_path,
                         stele_strerror(rc));
    }
    run->is_pid_written = 1;
    return 0;
}

/* Shutdown, the other way round; returns rc, or the journal's error when it closes with
 * one. */
static int
serve_stop(serve_run_t *run, int rc, stele_error_t *err)
{
    if (run->listen_fd >= 0)
        close(run->listen_fd);
    if (run->is_socket_bound)
        unlink(run->socket_path);
    if (run->db) {
        stele_error_t close_err = {0};
        int close_rc = stele_close(run->db, &close_err);
        if (close_rc != 0) {
            serve_log_error(&run->log, "journal closed with an error", close_rc, &close_err);
            if (rc == 0)
                rc = error_copy(err, &close_err);
        }
    }
    if (run->is_pid_written)
        unlink(run->pid_path);
    if (run->signal_fd >= 0)
        close(run->signal_fd);
    if (rc == 0)
        serve_log(&run->log, STELE_LOG_INFO, "stopped");
    return rc;
}

/* Step 4: serves until a signal, then drains. Returns 0 or the loop's error. */
static int
serve_serve(serve_run_t *run, const stele_options_t *opts, const stele_serve_options_t *serve,
            stele_error_t *err)
{
    size_t n_sinks = opts ? opts->n_sinks : 0;
    char quoted[SERVE_QUOTED_PATH_BYTES];
    serve_logf(&run->log, STELE_LOG_INFO, "listening", "socket=%s pid=%ld wait=%s sinks=%zu",
               stele_log_quote(quoted, sizeof quoted, run->socket_path), (long)getpid(),
               stele_wait_name(serve->default_wait), n_sinks);
    serve_config_t cfg = {
        .db = run->db,
        .n_sinks = n_sinks,
        .listen_fd = run->listen_fd,
        .signal_fd = run->signal_fd,
        .default_wait = serve->default_wait,
        .is_sync_never = opts && opts->sync == STELE_SYNC_NEVER,
        .max_line_bytes = serve->max_line_bytes,
        .drain_timeout_ms = serve->drain_timeout_ms,
        .log = &run->log,
    };
    int rc = serve_loop_run(&cfg);
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
    stele_error_t run_err = {0}; /* the log lines quote it even when the caller passed NULL */
    serve_run_t run;
    if (!serve) {
        stele_serve_options_init(&defaults);
        serve = &defaults;
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
            rc = serve_serve(&run, opts, serve, &run_err);
        rc = serve_stop(&run, rc, &run_err);
    }
    if (rc != 0)
        error_copy(err, &run_err);
    return rc;
}
