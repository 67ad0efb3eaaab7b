/*
 * cmd_ship.c: `stele ship`: runs one MongoDB sink in the foreground. It opens the journal as
 * its writer with one sink (so it cannot run beside `stele insert` or `stele serve`: those
 * ship with the sinks of their own configuration), then either waits until every committed
 * record is shipped (--once) or ships until SIGINT/SIGTERM, printing the shipped seq as it
 * advances. --from/--to re-ship a range with stele_reship() instead, without the writer lock
 * (beside a running writer and its shippers). --dead-letters lists the sink's dead letters as
 * JSON Lines, --reship-dead-letters sends them again and --discard-dead-letter drops one
 * (all three also beside a running writer). SIGINT/SIGTERM are blocked and taken with
 * sigtimedwait(), so there is no handler and no global flag; the engine's threads inherit the mask.
 */
#include "cmd.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* How often progress is checked while shipping continuously. */
#define SHIP_PROGRESS_MS 1000

static const char ship_usage[] =
    "usage: stele ship --mongo URI [--db NAME] [--collection NAME] [--sink NAME] [--once]\n"
    "                  [options]\n"
    "       stele ship --mongo URI [--db NAME] [--collection NAME] --from SEQ [--to SEQ]\n"
    "       stele ship --mongo URI [--sink NAME] --dead-letters | --reship-dead-letters[=SEQ]\n"
    "                  | --discard-dead-letter SEQ\n"
    "\n"
    "Ships the journal to MongoDB in the foreground, until SIGINT/SIGTERM or, with --once,\n"
    "until every committed record is acknowledged. Prints the shipped seq as it advances.\n"
    "\n"
    "      --mongo URI        mongodb:// URI (required)\n" CLI_MONGO_NAMES_USAGE
    "      --sink NAME        checkpoint name (default: default)\n"
    "      --once             stop when caught up\n"
    "      --from SEQ         re-ship from this seq (with --to: a range; then the journal\n"
    "      --to SEQ           is not opened for writing and a writer may be running)\n"
    "      --dead-letters     list the sink's dead letters (JSON Lines: seq, time, reason)\n"
    "      --reship-dead-letters[=SEQ]\n"
    "                         ship the dead letters (or the one at SEQ) again; those\n"
    "                         accepted leave the list\n"
    "      --discard-dead-letter SEQ\n"
    "                         drop a dead letter without shipping it (logged)\n";

enum { OPT_ONCE = 1, OPT_FROM, OPT_TO, OPT_DEAD_LIST, OPT_DEAD_RESHIP, OPT_DEAD_DISCARD };

static const struct option ship_opts[] = {
    CLI_MONGO_OPTIONS,
    CLI_SINK_OPTION,
    {"once", no_argument, NULL, OPT_ONCE},
    {"from", required_argument, NULL, OPT_FROM},
    {"to", required_argument, NULL, OPT_TO},
    {"dead-letters", no_argument, NULL, OPT_DEAD_LIST},
    {"reship-dead-letters", optional_argument, NULL, OPT_DEAD_RESHIP},
    {"discard-dead-letter", required_argument, NULL, OPT_DEAD_DISCARD},
    {NULL, 0, NULL, 0},
};

typedef struct ship_query {
    cli_mongo_t mongo;
    int once;
    int has_range;
    uint64_t from_seq, to_seq; /* 0: oldest / last committed */
    int dead_action;           /* 0, or the OPT_DEAD_* flag given */
    uint64_t dead_seq;         /* --reship-dead-letters=SEQ (0 = all), --discard-dead-letter */
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
        case OPT_DEAD_LIST:
        case OPT_DEAD_RESHIP:
        case OPT_DEAD_DISCARD:
            if (q->dead_action && q->dead_action != c)
                return cli_usage_error("ship", "--dead-letters, --reship-dead-letters and "
                                               "--discard-dead-letter exclude each other");
            q->dead_action = c;
            if (arg && (cli_parse_u64(arg, &q->dead_seq) != 0 || q->dead_seq == 0))
                return cli_usage_error("ship", "'%s' is not a seq (1 or more)", arg);
            break;
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
    if (q->dead_action && (q->has_range || q->once))
        return cli_usage_error("ship", "the dead-letter flags exclude --once and --from/--to");
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
    stele_sink_stats_t sink;
    if (stele_stats(db, &st) != 0 || stele_sink_stats(db, 0, &sink) != 0)
        return 0;
    *committed_out = st.written_seq;
    return sink.shipped_seq;
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

/* Dead letters listed per call while printing them. */
#define SHIP_DEAD_PAGE 256

/* --dead-letters: one JSON object per line, {"seq", "time", "unix_ms", "reason"}. */
static int
ship_dead_list(const char *dir, const ship_query_t *q)
{
    stele_dead_letter_t *page = calloc(SHIP_DEAD_PAGE, sizeof *page);
    if (page == NULL)
        return CLI_EXIT_ENGINE;
    stele_error_t err = {0};
    int code = CLI_EXIT_OK;
    uint64_t from_seq = 0;
    int n;
    do {
        n = stele_dead_letters_list(dir, q->mongo.sink.name, from_seq, page, SHIP_DEAD_PAGE, &err);
        for (int i = 0; i < n; i++) {
            char *json = NULL;
            int rc = stele_dead_letter_to_json(&page[i], &json, NULL, &err);
            if (rc != 0) {
                n = rc;
                break;
            }
            puts(json);
            stele_json_free(json);
        }
        if (n > 0)
            from_seq = page[n - 1].seq + 1;
    } while (n == SHIP_DEAD_PAGE);
    if (n < 0) {
        cli_report("ship", n, &err);
        code = cli_exit_for(n);
    }
    free(page);
    return code;
}

/* --reship-dead-letters / --discard-dead-letter; the re-ship prints its counts as JSON. */
/* The dead-letter calls answer "no dead letters" for a journal without an index, and so also
 * for a mistyped -d: make sure DIR is a journal first (a missing or non-journal directory
 * is exit 3 for every command), and one nobody else could change (allow_unsafe_dir aside).
 * Returns 0 or the exit code, reported. */
static int
ship_check_journal(const char *dir, const stele_options_t *opts)
{
    stele_status_t st;
    stele_error_t err = {0};
    int rc = stele_status_read_opts(dir, opts, &st, &err);
    if (rc == 0)
        return CLI_EXIT_OK;
    cli_report("ship", rc, &err);
    return cli_exit_for(rc) == CLI_EXIT_OK ? CLI_EXIT_ENGINE : cli_exit_for(rc);
}

static int
ship_dead_act(const char *dir, const stele_options_t *opts, const ship_query_t *q)
{
    int code = ship_check_journal(dir, opts);
    if (code != 0)
        return code;
    if (q->dead_action == OPT_DEAD_LIST)
        return ship_dead_list(dir, q);
    stele_error_t err = {0};
    int rc;
    if (q->dead_action == OPT_DEAD_DISCARD) {
        rc = stele_dead_letter_discard(dir, q->mongo.sink.name, q->dead_seq, &err);
    } else {
        stele_dead_letter_report_t rep;
        rc = stele_dead_letters_reship(dir, &q->mongo.sink, q->dead_seq, &rep, &err);
        printf("{\"tried\": %" PRIu64 ", \"shipped\": %" PRIu64 ", \"rejected\": %" PRIu64
               ", \"missing\": %" PRIu64 "}\n",
               rep.n_tried, rep.n_shipped, rep.n_rejected, rep.n_missing);
    }
    if (rc != 0) {
        cli_report("ship", rc, &err);
        return cli_exit_for(rc);
    }
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
            code = cli_print_help(&args);
        goto done;
    }
    code = cli_options_build(&args, &opts);
    if (code != 0)
        goto done;
    if (q.dead_action) {
        code = ship_dead_act(args.dir, &opts, &q);
        goto done;
    }
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
    if (code == 0) /* --once, a range, the dead-letter flags: what they printed must arrive */
        code = cli_stdout_done("ship");
    stele_options_release(&opts);
    cli_args_end(&args);
    return code;
}
