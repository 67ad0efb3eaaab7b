/*
 * cmd_serve.c: `stele serve`, the daemon that owns a journal and takes events from other
 * processes over a Unix socket. Reads the flags into stele_serve_options_t and runs
 * stele_serve_run(), which does the rest and logs it (start-up order, protocol, drain:
 * include/stele.h and docs/protocol.md).
 */
#include "cmd.h"

#include <string.h>

/* Exit codes as for every command (cli/report.h): 0 ok, 1 usage, 3 engine or I/O. */

static const char serve_usage[] =
    "usage: stele serve [--socket PATH] [--pid-file PATH] [--wait none|written|durable|shipped]\n"
    "                   [--max-line-bytes N] [--drain-timeout-ms N]\n"
    "                   [--log-level debug|info|warn|error] [--metrics-listen ADDR]\n"
    "                   [--mongo URI [--db NAME] [--collection NAME] [--sink NAME]] [options]\n"
    "\n"
    "Owns the journal and appends the events other processes send over a Unix socket, one\n"
    "JSON object per line (docs/protocol.md); `stele insert` and stele_client_connect() use\n"
    "it when it runs. Logs its own lifecycle on stderr, one logfmt line each (listening,\n"
    "shutting down, stopped, paused accepts, errors; each connection opened and closed with\n"
    "--log-level debug), never the audit events it appends: those are in the journal\n"
    "(stele tail). Stops cleanly on SIGTERM or SIGINT: answers what it received, syncs,\n"
    "gives the sinks a bounded time, exits 0.\n"
    "\n"
    "      --socket PATH          Unix socket, mode 0660 (default: DIR/stele.sock)\n"
    "      --pid-file PATH        default: DIR/stele.pid\n"
    "      --wait none|written|durable|shipped\n"
    "                             wait level of requests that do not name one\n"
    "                             (default: durable)\n"
    "      --max-line-bytes N     longest request line (default 2097152)\n"
    "      --drain-timeout-ms N   at shutdown, how long replies may still wait (default 5000)\n"
    "      --log-level debug|info|warn|error\n"
    "                             the least severe line logged, serve's and the sinks'\n"
    "                             (default: the log_level knob, info)\n"
    "      --metrics-listen ADDR  serve HTTP GET /metrics (as status --prometheus) and\n"
    "                             /health (200 ok, 503 when the journal halted or a sink\n"
    "                             stopped) on ADDR, IPV4:PORT or PORT (127.0.0.1); bound\n"
    "                             exactly as given (default: none)\n"
    "      --mongo URI            ship to this MongoDB (replaces the config file's sinks)\n"
    "      --db NAME              with --mongo: database (default: the URI's path, else audit)\n"
    "      --collection NAME      with --mongo: collection (default: events)\n"
    "      --sink NAME            with --mongo: checkpoint name (default: default)\n"
    "\n"
    "For the socket's group, give --dir-mode 0750 --file-mode 0640 (set on an existing\n"
    "journal too). Connection limits are knobs: --serve-max-conns-per-uid (64),\n"
    "--serve-max-conns (0: the descriptor limit less a reserve), --serve-idle-timeout-ms\n"
    "(300000; 0: never).\n";

enum {
    OPT_SOCKET = 1,
    OPT_PID_FILE,
    OPT_WAIT,
    OPT_MAX_LINE,
    OPT_DRAIN_TIMEOUT,
    OPT_LOG_LEVEL,
    OPT_METRICS_LISTEN,
};

static const struct option serve_opts[] = {
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"pid-file", required_argument, NULL, OPT_PID_FILE},
    {"wait", required_argument, NULL, OPT_WAIT},
    {"max-line-bytes", required_argument, NULL, OPT_MAX_LINE},
    {"drain-timeout-ms", required_argument, NULL, OPT_DRAIN_TIMEOUT},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
    CLI_MONGO_OPTIONS,
    CLI_SINK_OPTION,
    {NULL, 0, NULL, 0},
};

typedef struct serve_args {
    cli_mongo_t mongo; /* its sink is used when sink.uri is set (--mongo) */
    stele_serve_options_t serve;
    int has_log_level; /* --log-level given: it also sets the log_level knob (the sinks' lines) */
} serve_args_t;

/* One of serve's own flags. Returns 0 or an exit code after printing the usage error. */
static int
serve_take_flag(serve_args_t *a, int c, const char *arg)
{
    uint64_t number = 0;
    switch (c) {
    case OPT_SOCKET:
        a->serve.socket_path = arg;
        return 0;
    case OPT_PID_FILE:
        a->serve.pid_path = arg;
        return 0;
    case OPT_WAIT:
        if (stele_wait_parse(arg, &a->serve.default_wait) != 0)
            return cli_usage_error("serve",
                                   "--wait '%s' is not one of none, written, "
                                   "durable, shipped",
                                   arg);
        return 0;
    case OPT_MAX_LINE:
        if (cli_parse_u64(arg, &number) != 0 || number < 2 || number > STELE_SERVE_MAX_LINE_BYTES)
            return cli_usage_error("serve", "--max-line-bytes '%s' is not in 2 .. %u", arg,
                                   STELE_SERVE_MAX_LINE_BYTES);
        a->serve.max_line_bytes = (size_t)number;
        return 0;
    case OPT_DRAIN_TIMEOUT:
        if (cli_parse_u64(arg, &number) != 0 || number > STELE_SERVE_MAX_DRAIN_TIMEOUT_MS)
            return cli_usage_error("serve", "--drain-timeout-ms '%s' is not in 0 .. %u", arg,
                                   STELE_SERVE_MAX_DRAIN_TIMEOUT_MS);
        a->serve.drain_timeout_ms = (uint32_t)number;
        return 0;
    case OPT_LOG_LEVEL:
        if (stele_log_level_parse(arg, &a->serve.log_level) != 0)
            return cli_usage_error("serve",
                                   "--log-level '%s' is not one of debug, info, "
                                   "warn, error",
                                   arg);
        a->has_log_level = 1;
        return 0;
    case OPT_METRICS_LISTEN:
        a->serve.metrics_listen = arg; /* checked by stele_serve_run, which names it */
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
    stele_serve_options_init(&a->serve);
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
        /* One level for serve's lines and the sinks': --log-level, else the log_level knob */
        if (args.has_log_level)
            opts.log_level = args.serve.log_level;
        else
            args.serve.log_level = opts.log_level;
        if (args.mongo.sink.uri) {
            opts.sinks = &args.mongo.sink;
            opts.n_sinks = 1;
        }
        /* stele_serve_run logs every failure itself, so its error is not printed again;
         * but for an option it refuses (STELE_EINVAL: nothing done, nothing logged). */
        stele_error_t err = {0};
        int rc = stele_serve_run(cli.dir, &opts, &args.serve, &err);
        if (rc == STELE_EINVAL)
            cli_report("serve", rc, &err);
        exit_code = cli_exit_for(rc);
    }
    stele_options_release(&opts);
    cli_args_end(&cli);
    return exit_code;
}
