/*
 * cmd_ship.c: `stele ship`: runs one MongoDB sink in the foreground. It opens the journal as
 * its writer with one sink (so it cannot run beside `stele insert` or `stele serve`: those
 * ship with the sinks of their own configuration), then either waits until every committed
 * record is shipped (--once) or ships until SIGINT/SIGTERM, printing the shipped seq as it
 * advances. --from/--to re-ship a range with stele_reship() instead, without the writer lock
 * (beside a running writer and its shippers). SIGINT/SIGTERM are blocked and taken with
 * sigtimedwait(), so there is no handler and no global flag; the engine's threads inherit the mask.
 */
#include "cmd.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>

/* How often progress is checked while shipping continuously. */
#define SHIP_PROGRESS_MS 1000

static const char ship_usage[] =
    "usage: stele ship --mongo URI [--db NAME] [--collection NAME] [--sink NAME] [--once]\n"
    "                  [options]\n"
    "\n"
    "Ships the journal to MongoDB in the foreground, until SIGINT/SIGTERM or, with --once,\n"
    "until every committed record is acknowledged. Prints the shipped seq as it advances.\n"
    "\n"
    "      --mongo URI        mongodb:// URI (required)\n" CLI_MONGO_NAMES_USAGE
    "      --sink NAME        checkpoint name (default: default)\n"
    "      --once             stop when caught up\n"
    "      --from SEQ         re-ship from this seq (with --to: a range; then the journal\n"
    "      --to SEQ           is not opened for writing and a writer may be running)\n";

enum { OPT_ONCE = 1, OPT_FROM, OPT_TO };

static const struct option ship_opts[] = {
    CLI_MONGO_OPTIONS,
    CLI_SINK_OPTION,
    {"once", no_argument, NULL, OPT_ONCE},
    {"from", required_argument, NULL, OPT_FROM},
    {"to", required_argument, NULL, OPT_TO},
    {NULL, 0, NULL, 0},
};

typedef struct ship_query {
    cli_mongo_t mongo;
    int once;
    int has_range;
    uint64_t from_seq, to_seq; /* 0: oldest / last committed */
} ship_query_t;

static int
ship_parse(cli_args_t *args, int argc, char **argv, ship_query_t *q)
{
    const char *arg;
    int c, first_operand = argc;
    while ((c = cli_args_next(args, argc, argv, &arg, &first_operand)) != -1) {
        int taken = cli_mongo_take(&q->mongo, "ship", c, arg);
        if (taken != CLI_MONGO_NOT_MINE) {
            if (taken != 0)
                return taken;
            continue;
        }
        switch (c) {
        case OPT_ONCE:
            q->once = 1;
            break;
        case OPT_FROM:
        case OPT_TO: {
            uint64_t *seq = (c == OPT_FROM) ? &q->from_seq : &q->to_seq;
            if (cli_parse_u64(arg, seq) != 0 || *seq == 0)
                return cli_usage_error("ship", "%s '%s' is not a seq (1 or more)",
                                       c == OPT_FROM ? "--from" : "--to", arg);
            q->has_range = 1;
            break;
        }
        default:
            return CLI_EXIT_USAGE;
        }
    }
    if (args->want_help)
        return 0;
    if (first_operand < argc)
        return cli_usage_error("ship", "unexpected argument '%s'", argv[first_operand]);
    int code = cli_mongo_check(&q->mongo, "ship", 1);
    if (code != 0)
        return code;
    if (q->from_seq != 0 && q->to_seq != 0 && q->to_seq < q->from_seq)
        return cli_usage_error("ship", "--to %" PRIu64 " is before --from %" PRIu64, q->to_seq,
                               q->from_seq);
    if (q->has_range && q->once)
        return cli_usage_error("ship", "--once and --from/--to exclude each other: a range is "
                                       "shipped once");
    return 0;
}

/* Lowest shipped seq over the sinks (ship runs one). */
static uint64_t
shipped_seq(stele_t *db, uint64_t *committed_out)
{
    stele_stats_t st;
    if (stele_stats(db, &st) != 0 || st.n_sinks == 0)
        return 0;
    *committed_out = st.written_seq;
    return st.sinks[0].shipped_seq;
}

static int
ship_run(stele_t *db, const ship_query_t *q, const sigset_t *stop_signals, stele_error_t *err)
{
    uint64_t committed = 0, printed = 0;
    (void)shipped_seq(db, &committed);
    if (q->once) {
        int rc = committed == 0 ? 0 : stele_wait(db, committed, STELE_WAIT_SHIPPED, -1, err);
        if (rc == 0)
            printf("%" PRIu64 "\n", committed);
        return rc;
    }
    struct timespec tick = {SHIP_PROGRESS_MS / 1000, (SHIP_PROGRESS_MS % 1000) * 1000000L};
    for (;;) {
        uint64_t shipped = shipped_seq(db, &committed);
        if (shipped > printed) {
            printf("%" PRIu64 "\n", shipped);
            fflush(stdout);
            printed = shipped;
        }
        int sig = sigtimedwait(stop_signals, NULL, &tick);
        if (sig > 0)
            return 0;
        if (sig < 0 && errno != EAGAIN && errno != EINTR)
            return -errno;
    }
}

/* --from/--to: one pass of stele_reship(), printing how many documents were inserted. */
static int
ship_range(const char *dir, const ship_query_t *q)
{
    stele_error_t err = {0};
    uint64_t n_inserted = 0;
    int rc = stele_reship(dir, &q->mongo.sink, q->from_seq, q->to_seq, &n_inserted, &err);
    if (rc != 0) {
        cli_report("ship", rc, &err);
        return cli_exit_for(rc);
    }
    printf("%" PRIu64 " documents inserted\n", n_inserted);
    return CLI_EXIT_OK;
}

int
cmd_ship(int argc, char **argv)
{
    cli_args_t args;
    if (cli_args_begin(&args, "ship", ship_usage, ship_opts, "") != 0)
        return CLI_EXIT_ENGINE;
    ship_query_t q = {0};
    cli_mongo_init(&q.mongo);
    stele_options_t opts;
    stele_options_init(&opts);
    int code = ship_parse(&args, argc, argv, &q);
    if (code != 0 || args.want_help) {
        if (code == 0)
            cli_print_help(&args, stdout);
        goto done;
    }
    code = cli_options_build(&args, &opts);
    if (code != 0)
        goto done;
    if (q.has_range) {
        code = ship_range(args.dir, &q);
        goto done;
    }
    /* the command line's sink replaces any of the config file: one sink, in the foreground */
    opts.sinks = &q.mongo.sink;
    opts.n_sinks = 1;
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop_signals, NULL);

    stele_t *db = NULL;
    stele_error_t err = {0};
    int rc = stele_open(args.dir, &opts, &db, &err);
    if (rc == 0)
        rc = ship_run(db, &q, &stop_signals, &err);
    if (rc != 0) {
        cli_report("ship", rc, &err);
        code = cli_exit_for(rc);
    }
    if (db != NULL) {
        stele_error_t close_err = {0};
        rc = stele_close(db, &close_err);
        if (rc != 0 && code == 0) {
            cli_report("ship", rc, &close_err);
            code = cli_exit_for(rc);
        }
    }
done:
    stele_options_release(&opts);
    cli_args_end(&args);
    return code;
}
