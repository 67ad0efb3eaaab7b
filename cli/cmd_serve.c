/*
 * cmd_serve.c: `stele serve`, the daemon that owns a journal and takes events from other
 * processes over a Unix socket (protocol: docs/protocol.md; loop: serve_loop.c).
 *
 * Start-up order matters:
 *  1. SIGTERM/SIGINT are blocked before stele_open() starts the engine's threads, so they
 *     inherit the mask and the signals reach only the loop's signalfd;
 *  2. the journal is opened (its lock makes a second server fail with STELE_ELOCKED,
 *     naming the holder's pid) before the socket is touched, so a second server never
 *     unlinks the first one's socket;
 *  3. only then is a leftover socket file (from a crash) removed, after checking that no
 *     server answers on it, and the pid file written.
 * Shutdown runs the other way: socket, then stele_close() (drains the sinks), then pid file.
 */
#include "serve.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Exit codes (documented in docs/protocol.md and the man page). */
enum {
    SERVE_EXIT_OK = 0,
    SERVE_EXIT_USAGE = 1,
    SERVE_EXIT_ENGINE = 3,
};

/* Connections the kernel queues before accept(); Linux caps it at net.core.somaxconn. */
#define SERVE_LISTEN_BACKLOG 4096
#define SERVE_SOCKET_MODE 0660
#define SERVE_DEFAULT_DRAIN_TIMEOUT_MS 5000u
#define SERVE_MAX_KNOB_FLAGS 64

typedef struct serve_args {
    const char *dir;
    const char *socket_path; /* NULL: DIR/stele.sock */
    const char *pid_path;    /* NULL: DIR/stele.pid */
    const char *config_path;
    const char *mongo_uri;
    const char *mongo_db;
    const char *mongo_collection;
    stele_wait_t default_wait;
    size_t max_line_bytes;
    uint32_t drain_timeout_ms;
    serve_log_level_t log_level;
    const char *knob_names[SERVE_MAX_KNOB_FLAGS]; /* "--sync always": applied last */
    const char *knob_values[SERVE_MAX_KNOB_FLAGS];
    char knob_storage[SERVE_MAX_KNOB_FLAGS][64];
    size_t n_knobs;
} serve_args_t;

static void
serve_usage(FILE *out)
{
    fputs("usage: stele serve [-d DIR] [--socket PATH] [--pid-file PATH] [--wait LEVEL]\n"
          "                   [--max-line-bytes N] [--drain-timeout-ms N] [--log-level LEVEL]\n"
          "                   [--config FILE] [--mongo URI [--db NAME] [--collection NAME]]\n"
          "                   [--KNOB VALUE ...]\n"
          "\n"
          "Owns the journal in DIR and appends events that other processes send over a Unix\n"
          "socket, one JSON object per line (docs/protocol.md). Stops cleanly on SIGTERM or\n"
          "SIGINT: answers what it received, syncs, drains the sinks for a bounded time.\n"
          "\n"
          "  -d, --dir DIR          journal directory (default: $STELE_DIR)\n"
          "  --socket PATH          Unix socket, mode 0660 (default: DIR/stele.sock)\n"
          "  --pid-file PATH        default: DIR/stele.pid\n"
          "  --wait LEVEL           wait level of requests without one: none, written,\n"
          "                         durable (default), shipped\n"
          "  --max-line-bytes N     longest request line (default 2097152)\n"
          "  --drain-timeout-ms N   at shutdown, how long replies may wait (default 5000)\n"
          "  --log-level LEVEL      debug, info (default), warn, error\n"
          "  --config FILE          INI file of knobs and [sink NAME] sections\n"
          "  --mongo URI            one MongoDB sink (with --db, --collection)\n"
          "  --KNOB VALUE           any journal knob, e.g. --sync always, --commit-interval-us 0\n"
          "\n"
          "exit status: 0 stopped cleanly, 1 usage error, 3 journal or I/O error\n",
          out);
}

/* Parses a decimal size or count with an optional K/M/G suffix. */
static int
serve_parse_u64(const char *text, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || text[0] == '-')
        return STELE_EINVAL;
    uint64_t mult = 1;
    if (*end == 'K' || *end == 'k')
        mult = 1024;
    else if (*end == 'M' || *end == 'm')
        mult = 1024 * 1024;
    else if (*end == 'G' || *end == 'g')
        mult = 1024ull * 1024 * 1024;
    if (mult != 1)
        end++;
    if (*end != '\0' || v > UINT64_MAX / mult)
        return STELE_EINVAL;
    *out = v * mult;
    return 0;
}

static int
serve_is_knob(const char *name)
{
    size_t n = 0;
    const stele_knob_t *knobs = stele_knobs(&n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(knobs[i].name, name) == 0)
            return 1;
    }
    return 0;
}

static int
serve_bad_usage(const char *what, const char *arg)
{
    fprintf(stderr, "stele serve: %s: %s\nhint: run \"stele serve --help\"\n", what, arg);
    return SERVE_EXIT_USAGE;
}

/* Fills *a from argv. Returns -1 to proceed, else the exit code (help or usage error). */
static int
serve_parse_args(int argc, char **argv, serve_args_t *a)
{
    memset(a, 0, sizeof *a);
    a->dir = getenv("STELE_DIR");
    a->default_wait = STELE_WAIT_DURABLE;
    a->max_line_bytes = SERVE_DEFAULT_MAX_LINE_BYTES;
    a->drain_timeout_ms = SERVE_DEFAULT_DRAIN_TIMEOUT_MS;
    a->log_level = SERVE_LOG_INFO;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            serve_usage(stdout);
            return SERVE_EXIT_OK;
        }
        if (strncmp(arg, "--", 2) != 0 && strcmp(arg, "-d") != 0)
            return serve_bad_usage("unexpected argument", arg);
        /* --name=value or --name value */
        char name[64];
        const char *value = NULL;
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (name_len >= sizeof name)
            return serve_bad_usage("unknown option", arg);
        memcpy(name, arg, name_len);
        name[name_len] = '\0';
        if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            return serve_bad_usage("option needs a value", arg);
        }
        uint64_t number = 0;
        if (strcmp(name, "-d") == 0 || strcmp(name, "--dir") == 0) {
            a->dir = value;
        } else if (strcmp(name, "--socket") == 0) {
            a->socket_path = value;
        } else if (strcmp(name, "--pid-file") == 0) {
            a->pid_path = value;
        } else if (strcmp(name, "--config") == 0) {
            a->config_path = value;
        } else if (strcmp(name, "--mongo") == 0) {
            a->mongo_uri = value;
        } else if (strcmp(name, "--db") == 0) {
            a->mongo_db = value;
        } else if (strcmp(name, "--collection") == 0) {
            a->mongo_collection = value;
        } else if (strcmp(name, "--wait") == 0) {
            if (serve_wait_parse(value, strlen(value), &a->default_wait) != 0)
                return serve_bad_usage("--wait takes none, written, durable or shipped", value);
        } else if (strcmp(name, "--log-level") == 0) {
            if (serve_log_parse_level(value, &a->log_level) != 0)
                return serve_bad_usage("--log-level takes debug, info, warn or error", value);
        } else if (strcmp(name, "--max-line-bytes") == 0) {
            if (serve_parse_u64(value, &number) != 0 || number < 2 || number > (1u << 30))
                return serve_bad_usage("--max-line-bytes takes 2 .. 1G", value);
            a->max_line_bytes = (size_t)number;
        } else if (strcmp(name, "--drain-timeout-ms") == 0) {
            if (serve_parse_u64(value, &number) != 0 || number > 3600000)
                return serve_bad_usage("--drain-timeout-ms takes 0 .. 3600000", value);
            a->drain_timeout_ms = (uint32_t)number;
        } else {
            /* --commit-interval-us 100 -> knob commit_interval_us */
            if (a->n_knobs == SERVE_MAX_KNOB_FLAGS)
                return serve_bad_usage("too many knob flags", arg);
            char *knob = a->knob_storage[a->n_knobs];
            snprintf(knob, sizeof a->knob_storage[0], "%s", name + 2);
            for (char *p = knob; *p; p++)
                *p = *p == '-' ? '_' : *p;
            if (!serve_is_knob(knob))
                return serve_bad_usage("unknown option", arg);
            a->knob_names[a->n_knobs] = knob;
            a->knob_values[a->n_knobs++] = value;
        }
    }
    if (!a->dir || !a->dir[0])
        return serve_bad_usage("no journal directory", "use -d DIR or set STELE_DIR");
    return -1;
}

/* Options from the config file, then STELE_* variables, then flags: later ones win. */
static int
serve_build_options(const serve_args_t *a, stele_options_t *opts, stele_sink_options_t *sink,
                    stele_error_t *err)
{
    int rc = 0;
    stele_options_init(opts);
    if (a->config_path)
        rc = stele_options_load_file(opts, a->config_path, err);
    if (rc == 0)
        rc = stele_options_load_env(opts, err);
    for (size_t i = 0; rc == 0 && i < a->n_knobs; i++)
        rc = stele_options_set(opts, a->knob_names[i], a->knob_values[i], err);
    if (rc == 0 && a->mongo_uri) {
        stele_sink_options_init(sink);
        sink->uri = a->mongo_uri;
        if (a->mongo_db)
            sink->database = a->mongo_db;
        if (a->mongo_collection)
            sink->collection = a->mongo_collection;
        opts->sinks = sink;
        opts->n_sinks = 1;
    }
    return rc;
}

/* Binds the listening socket. A socket file left by a crashed server is replaced; one a
 * live server answers on is not. */
static int
serve_listen(const char *path, const serve_log_t *log, int *out_fd)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char quoted[PATH_MAX + 8];
    if (strlen(path) >= sizeof addr.sun_path) {
        serve_logf(log, SERVE_LOG_ERROR, "socket path too long", "socket=%s max_bytes=%zu",
                   serve_log_quote(quoted, sizeof quoted, path), sizeof addr.sun_path - 1);
        return STELE_EINVAL;
    }
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) == 0) {
        serve_logf(log, SERVE_LOG_ERROR, "another server answers on the socket", "socket=%s",
                   serve_log_quote(quoted, sizeof quoted, path));
        close(fd);
        return STELE_ELOCKED;
    }
    close(fd);
    if (unlink(path) == 0)
        serve_logf(log, SERVE_LOG_WARN, "removed stale socket", "socket=%s",
                   serve_log_quote(quoted, sizeof quoted, path));
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = 0;
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        chmod(path, SERVE_SOCKET_MODE) != 0 || listen(fd, SERVE_LISTEN_BACKLOG) != 0) {
        rc = -errno;
        serve_logf(log, SERVE_LOG_ERROR, "could not listen on socket", "socket=%s errno=%s",
                   serve_log_quote(quoted, sizeof quoted, path), stele_errname(rc));
        close(fd);
        return rc;
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

static void
serve_log_error(const serve_log_t *log, const char *msg, int rc, const stele_error_t *err)
{
    char quoted_msg[STELE_ERROR_MESSAGE_BYTES + 16];
    char quoted_hint[STELE_ERROR_HINT_BYTES + 16];
    if (err && err->message[0] && err->hint[0]) {
        serve_logf(log, SERVE_LOG_ERROR, msg, "code=%s error=%s hint=%s", stele_errname(rc),
                   serve_log_quote(quoted_msg, sizeof quoted_msg, err->message),
                   serve_log_quote(quoted_hint, sizeof quoted_hint, err->hint));
    } else {
        serve_logf(log, SERVE_LOG_ERROR, msg, "code=%s error=%s", stele_errname(rc),
                   serve_log_quote(quoted_msg, sizeof quoted_msg,
                                   err && err->message[0] ? err->message : stele_strerror(rc)));
    }
}

int
cmd_serve(int argc, char **argv)
{
    serve_args_t args;
    int exit_code = serve_parse_args(argc, argv, &args);
    if (exit_code >= 0)
        return exit_code;
    serve_log_t log = {.min_level = args.log_level};
    stele_options_t opts;
    stele_sink_options_t sink;
    stele_error_t err = {0};
    stele_t *db = NULL;
    int signal_fd = -1, listen_fd = -1, is_pid_written = 0, is_socket_bound = 0;
    char socket_path[PATH_MAX], pid_path[PATH_MAX], quoted[PATH_MAX + 8];
    snprintf(socket_path, sizeof socket_path, "%s", args.socket_path ? args.socket_path : "");
    snprintf(pid_path, sizeof pid_path, "%s", args.pid_path ? args.pid_path : "");
    if (!args.socket_path)
        snprintf(socket_path, sizeof socket_path, "%s/stele.sock", args.dir);
    if (!args.pid_path)
        snprintf(pid_path, sizeof pid_path, "%s/stele.pid", args.dir);

    int rc = serve_build_options(&args, &opts, &sink, &err);
    if (rc != 0) {
        serve_log_error(&log, "invalid configuration", rc, &err);
        stele_options_release(&opts);
        return SERVE_EXIT_USAGE;
    }
    exit_code = SERVE_EXIT_ENGINE;
    rc = serve_signals(&signal_fd);
    if (rc != 0) {
        serve_log_error(&log, "could not set up signal handling", rc, NULL);
        goto done;
    }
    rc = stele_open(args.dir, &opts, &db, &err);
    if (rc != 0) {
        serve_log_error(&log, "could not open journal", rc, &err);
        goto done;
    }
    rc = serve_listen(socket_path, &log, &listen_fd);
    if (rc != 0)
        goto done;
    is_socket_bound = 1;
    rc = serve_write_pid_file(pid_path);
    if (rc != 0) {
        serve_logf(&log, SERVE_LOG_ERROR, "could not write pid file", "pid_file=%s errno=%s",
                   serve_log_quote(quoted, sizeof quoted, pid_path), stele_errname(rc));
        goto done;
    }
    is_pid_written = 1;
    serve_logf(&log, SERVE_LOG_INFO, "listening", "socket=%s pid=%ld wait=%s sinks=%zu",
               serve_log_quote(quoted, sizeof quoted, socket_path), (long)getpid(),
               serve_wait_name(args.default_wait), opts.n_sinks);

    serve_config_t cfg = {
        .db = db,
        .n_sinks = opts.n_sinks,
        .listen_fd = listen_fd,
        .signal_fd = signal_fd,
        .default_wait = args.default_wait,
        .max_line_bytes = args.max_line_bytes,
        .drain_timeout_ms = args.drain_timeout_ms,
        .log = &log,
    };
    rc = serve_loop_run(&cfg);
    listen_fd = -1; /* closed by the loop */
    exit_code = rc == 0 ? SERVE_EXIT_OK : SERVE_EXIT_ENGINE;

done:
    if (listen_fd >= 0)
        close(listen_fd);
    if (is_socket_bound)
        unlink(socket_path);
    if (db) {
        memset(&err, 0, sizeof err);
        rc = stele_close(db, &err);
        if (rc != 0) {
            serve_log_error(&log, "journal closed with an error", rc, &err);
            exit_code = SERVE_EXIT_ENGINE;
        }
    }
    if (is_pid_written)
        unlink(pid_path);
    if (signal_fd >= 0)
        close(signal_fd);
    stele_options_release(&opts);
    if (exit_code == SERVE_EXIT_OK)
        serve_log(&log, SERVE_LOG_INFO, "stopped");
    return exit_code;
}
