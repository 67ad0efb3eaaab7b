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
 *  3. only then is a leftover socket file (from a crash) removed, after checking that it
 *     is a socket and that no server answers on it, and the pid file written.
 * Shutdown runs the other way: socket, then stele_close() (drains the sinks), then pid file.
 */
#include "serve.h"

#include "cmd.h"

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

/* Exit codes as for every command (cli/report.h): 0 ok, 1 usage, 3 engine or I/O. */

/* Connections the kernel queues before accept(); Linux caps it at net.core.somaxconn. */
#define SERVE_LISTEN_BACKLOG 4096
#define SERVE_SOCKET_MODE 0660
#define SERVE_DEFAULT_DRAIN_TIMEOUT_MS 5000u
#define SERVE_MAX_DRAIN_TIMEOUT_MS 3600000u
#define SERVE_MAX_LINE_LIMIT (1u << 30)

static const char serve_usage[] =
    "usage: stele serve [--socket PATH] [--pid-file PATH] [--wait LEVEL]\n"
    "                   [--max-line-bytes N] [--drain-timeout-ms N] [--log-level LEVEL]\n"
    "                   [--mongo URI [--db NAME] [--collection NAME] [--sink NAME]] [options]\n"
    "\n"
    "Owns the journal and appends the events other processes send over a Unix socket, one\n"
    "JSON object per line (docs/protocol.md); `stele insert` and stele_client_connect() use\n"
    "it when it runs. Logs one line per event on stderr. Stops cleanly on SIGTERM or SIGINT:\n"
    "answers what it received, syncs, gives the sinks a bounded time, exits 0.\n"
    "\n"
    "      --socket PATH          Unix socket, mode 0660 (default: DIR/stele.sock)\n"
    "      --pid-file PATH        default: DIR/stele.pid\n"
    "      --wait LEVEL           wait level of requests that do not name one: none, written,\n"
    "                             durable (default) or shipped\n"
    "      --max-line-bytes N     longest request line (default 2097152)\n"
    "      --drain-timeout-ms N   at shutdown, how long replies may still wait (default 5000)\n"
    "      --log-level LEVEL      debug, info (default), warn or error\n"
    "      --mongo URI            ship to this MongoDB (replaces the config file's sinks)\n"
    "      --db NAME, --collection NAME, --sink NAME   for --mongo\n";

enum {
    OPT_SOCKET = 1,
    OPT_PID_FILE,
    OPT_WAIT,
    OPT_MAX_LINE,
    OPT_DRAIN_TIMEOUT,
    OPT_LOG_LEVEL,
};

static const struct option serve_opts[] = {
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"pid-file", required_argument, NULL, OPT_PID_FILE},
    {"wait", required_argument, NULL, OPT_WAIT},
    {"max-line-bytes", required_argument, NULL, OPT_MAX_LINE},
    {"drain-timeout-ms", required_argument, NULL, OPT_DRAIN_TIMEOUT},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    CLI_MONGO_OPTIONS,
    CLI_SINK_OPTION,
    {NULL, 0, NULL, 0},
};

typedef struct serve_args {
    const char *socket_path; /* NULL: DIR/stele.sock */
    const char *pid_path;    /* NULL: DIR/stele.pid */
    cli_mongo_t mongo;       /* its sink is used when sink.uri is set (--mongo) */
    stele_wait_t default_wait;
    size_t max_line_bytes;
    uint32_t drain_timeout_ms;
    serve_log_level_t log_level;
} serve_args_t;

/* One of serve's own flags. Returns 0 or an exit code after printing the usage error. */
static int
serve_take_flag(serve_args_t *a, int c, const char *arg)
{
    uint64_t number = 0;
    switch (c) {
    case OPT_SOCKET:
        a->socket_path = arg;
        return 0;
    case OPT_PID_FILE:
        a->pid_path = arg;
        return 0;
    case OPT_WAIT:
        if (serve_wait_parse(arg, strlen(arg), &a->default_wait) != 0)
            return cli_usage_error("serve",
                                   "--wait '%s' is not one of none, written, "
                                   "durable, shipped",
                                   arg);
        return 0;
    case OPT_MAX_LINE:
        if (cli_parse_u64(arg, &number) != 0 || number < 2 || number > SERVE_MAX_LINE_LIMIT)
            return cli_usage_error("serve", "--max-line-bytes '%s' is not in 2 .. %u", arg,
                                   SERVE_MAX_LINE_LIMIT);
        a->max_line_bytes = (size_t)number;
        return 0;
    case OPT_DRAIN_TIMEOUT:
        if (cli_parse_u64(arg, &number) != 0 || number > SERVE_MAX_DRAIN_TIMEOUT_MS)
            return cli_usage_error("serve", "--drain-timeout-ms '%s' is not in 0 .. %u", arg,
                                   SERVE_MAX_DRAIN_TIMEOUT_MS);
        a->drain_timeout_ms = (uint32_t)number;
        return 0;
    case OPT_LOG_LEVEL:
        if (serve_log_parse_level(arg, &a->log_level) != 0)
            return cli_usage_error("serve",
                                   "--log-level '%s' is not one of debug, info, "
                                   "warn, error",
                                   arg);
        return 0;
    default:
        return CLI_EXIT_USAGE;
    }
}

/* Reads serve's own flags (cli_args_next() takes the common ones). Returns 0 or an exit
 * code after printing the usage error. */
static int
serve_parse_args(cli_args_t *args, int argc, char **argv, serve_args_t *a)
{
    const char *arg;
    int c, first_operand = argc;
    memset(a, 0, sizeof *a);
    cli_mongo_init(&a->mongo);
    a->default_wait = STELE_WAIT_DURABLE;
    a->max_line_bytes = SERVE_DEFAULT_MAX_LINE_BYTES;
    a->drain_timeout_ms = SERVE_DEFAULT_DRAIN_TIMEOUT_MS;
    a->log_level = SERVE_LOG_INFO;
    while ((c = cli_args_next(args, argc, argv, &arg, &first_operand)) != -1) {
        int taken = cli_mongo_take(&a->mongo, "serve", c, arg);
        if (taken == CLI_MONGO_NOT_MINE)
            taken = serve_take_flag(a, c, arg);
        if (taken != 0)
            return taken;
    }
    if (args->want_help)
        return 0;
    if (first_operand < argc)
        return cli_usage_error("serve", "unexpected argument '%s'", argv[first_operand]);
    return cli_mongo_check(&a->mongo, "serve", 0);
}

/* Removes a socket file that nothing listens on (left by a crashed server). Only a refused
 * connect() proves that: a live server answers, and a live socket of another kind (a
 * datagram socket such as /dev/log given by mistake) says EPROTOTYPE; neither is touched.
 * Never unlinks what is not a socket: --socket may be a typo for a real file. Returns 0
 * when the path is free, else an error (logged). */
static int
serve_remove_stale_socket(const char *path, const struct sockaddr_un *addr, const serve_log_t *log)
{
    char quoted[PATH_MAX + 8];
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
        serve_logf(log, SERVE_LOG_ERROR, "socket path exists and is not a socket", "socket=%s",
                   stele_log_quote(quoted, sizeof quoted, path));
        return -EEXIST;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0 ? 0 : -errno;
    close(fd);
    if (rc == 0) {
        serve_logf(log, SERVE_LOG_ERROR, "another server answers on the socket", "socket=%s",
                   stele_log_quote(quoted, sizeof quoted, path));
        return STELE_ELOCKED;
    }
    if (rc != -ECONNREFUSED && rc != -ENOENT) {
        serve_logf(log, SERVE_LOG_ERROR, "socket path is in use", "socket=%s errno=%s",
                   stele_log_quote(quoted, sizeof quoted, path), stele_errname(rc));
        return rc;
    }
    if (unlink(path) == 0)
        serve_logf(log, SERVE_LOG_WARN, "removed stale socket", "socket=%s",
                   stele_log_quote(quoted, sizeof quoted, path));
    return 0;
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
                   stele_log_quote(quoted, sizeof quoted, path), sizeof addr.sun_path - 1);
        return STELE_EINVAL;
    }
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int rc = serve_remove_stale_socket(path, &addr, log);
    if (rc != 0)
        return rc;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        chmod(path, SERVE_SOCKET_MODE) != 0 || listen(fd, SERVE_LISTEN_BACKLOG) != 0) {
        rc = -errno;
        serve_logf(log, SERVE_LOG_ERROR, "could not listen on socket", "socket=%s errno=%s",
                   stele_log_quote(quoted, sizeof quoted, path), stele_errname(rc));
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
                   stele_log_quote(quoted_msg, sizeof quoted_msg, err->message),
                   stele_log_quote(quoted_hint, sizeof quoted_hint, err->hint));
    } else {
        serve_logf(log, SERVE_LOG_ERROR, msg, "code=%s error=%s", stele_errname(rc),
                   stele_log_quote(quoted_msg, sizeof quoted_msg,
                                   err && err->message[0] ? err->message : stele_strerror(rc)));
    }
}

/* What a running server holds, so that shutdown can undo exactly what start-up did. */
typedef struct serve_run {
    serve_log_t log;
    stele_t *db;
    int signal_fd, listen_fd;
    int is_socket_bound, is_pid_written;
    char socket_path[PATH_MAX], pid_path[PATH_MAX];
} serve_run_t;

static void
serve_run_init(serve_run_t *run, const serve_args_t *args, const char *dir)
{
    memset(run, 0, sizeof *run);
    run->log.min_level = args->log_level;
    run->signal_fd = run->listen_fd = -1;
    if (args->socket_path)
        snprintf(run->socket_path, sizeof run->socket_path, "%s", args->socket_path);
    else
        snprintf(run->socket_path, sizeof run->socket_path, "%s/%s", dir, STELE_SOCKET_NAME);
    if (args->pid_path)
        snprintf(run->pid_path, sizeof run->pid_path, "%s", args->pid_path);
    else
        snprintf(run->pid_path, sizeof run->pid_path, "%s/stele.pid", dir);
}

/* Steps 1-3 of the start-up order (top of the file). Returns an exit code. */
static int
serve_start(serve_run_t *run, const char *dir, const stele_options_t *opts)
{
    char quoted[PATH_MAX + 8];
    stele_error_t err = {0};
    int rc = serve_signals(&run->signal_fd);
    if (rc != 0) {
        serve_log_error(&run->log, "could not set up signal handling", rc, NULL);
        return CLI_EXIT_ENGINE;
    }
    rc = stele_open(dir, opts, &run->db, &err);
    if (rc != 0) {
        serve_log_error(&run->log, "could not open journal", rc, &err);
        return cli_exit_for(rc);
    }
    if (serve_listen(run->socket_path, &run->log, &run->listen_fd) != 0)
        return CLI_EXIT_ENGINE;
    run->is_socket_bound = 1;
    rc = serve_write_pid_file(run->pid_path);
    if (rc != 0) {
        serve_logf(&run->log, SERVE_LOG_ERROR, "could not write pid file", "pid_file=%s errno=%s",
                   stele_log_quote(quoted, sizeof quoted, run->pid_path), stele_errname(rc));
        return CLI_EXIT_ENGINE;
    }
    run->is_pid_written = 1;
    return CLI_EXIT_OK;
}

/* Shutdown, the other way round; returns exit_code, or CLI_EXIT_ENGINE when the journal
 * closes with an error. */
static int
serve_stop(serve_run_t *run, int exit_code)
{
    if (run->listen_fd >= 0)
        close(run->listen_fd);
    if (run->is_socket_bound)
        unlink(run->socket_path);
    if (run->db) {
        stele_error_t err = {0};
        int rc = stele_close(run->db, &err);
        if (rc != 0) {
            serve_log_error(&run->log, "journal closed with an error", rc, &err);
            exit_code = CLI_EXIT_ENGINE;
        }
    }
    if (run->is_pid_written)
        unlink(run->pid_path);
    if (run->signal_fd >= 0)
        close(run->signal_fd);
    if (exit_code == CLI_EXIT_OK)
        serve_log(&run->log, SERVE_LOG_INFO, "stopped");
    return exit_code;
}

static int
serve_run(serve_run_t *run, const serve_args_t *args, const stele_options_t *opts)
{
    size_t n_sinks = opts->n_sinks;
    char quoted[PATH_MAX + 8];
    serve_logf(&run->log, SERVE_LOG_INFO, "listening", "socket=%s pid=%ld wait=%s sinks=%zu",
               stele_log_quote(quoted, sizeof quoted, run->socket_path), (long)getpid(),
               serve_wait_name(args->default_wait), n_sinks);
    serve_config_t cfg = {
        .db = run->db,
        .n_sinks = n_sinks,
        .listen_fd = run->listen_fd,
        .signal_fd = run->signal_fd,
        .default_wait = args->default_wait,
        .is_sync_never = opts->sync == STELE_SYNC_NEVER,
        .max_line_bytes = args->max_line_bytes,
        .drain_timeout_ms = args->drain_timeout_ms,
        .log = &run->log,
    };
    int rc = serve_loop_run(&cfg);
    run->listen_fd = -1; /* closed by the loop */
    return rc == 0 ? CLI_EXIT_OK : CLI_EXIT_ENGINE;
}

int
cmd_serve(int argc, char **argv)
{
    cli_args_t cli;
    serve_args_t args;
    stele_options_t opts;
    if (cli_args_begin(&cli, "serve", serve_usage, serve_opts, "") != 0)
        return CLI_EXIT_ENGINE;
    stele_options_init(&opts);
    int exit_code = serve_parse_args(&cli, argc, argv, &args);
    if (exit_code == 0 && cli.want_help)
        exit_code = cli_print_help(&cli);
    else if (exit_code == 0)
        exit_code = cli_options_build(&cli, &opts);
    if (exit_code == 0 && !cli.want_help) {
        if (args.mongo.sink.uri) {
            opts.sinks = &args.mongo.sink;
            opts.n_sinks = 1;
        }
        serve_run_t run;
        serve_run_init(&run, &args, cli.dir);
        exit_code = serve_start(&run, cli.dir, &opts);
        if (exit_code == CLI_EXIT_OK)
            exit_code = serve_run(&run, &args, &opts);
        exit_code = serve_stop(&run, exit_code);
    }
    stele_options_release(&opts);
    cli_args_end(&cli);
    return exit_code;
}
