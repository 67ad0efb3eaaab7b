/*
 * cmd_tail.c: `stele tail`: prints records in seq order, by default as JSON Lines
 *   {"seq":N,"ts":"<RFC 3339 UTC, µs>","src":"...","event":{...}}
 * (tail_lines.c writes them in the --output form); -f follows new records, -r prints newest
 * first (tail_reverse.c). --where conditions are a stele_filter_t, --since/--until times
 * are read by stele_time_parse. This file reads the command line, opens the reader and runs
 * the forward read.
 *
 * How it reads:
 *  - -n N without --since/--until/--where seeks straight to committed_seq - N + 1; with any
 *    of them it scans the range up to the seq committed at the start and keeps the last N
 *    matching lines in a ring (memory: at most N lines, growing with the matches); records
 *    committed after the start end the scan (and are printed whole with -f).
 *  - Following waits inside stele_reader_next() (the library wakes it when a batch commits:
 *    no busy polling). Output is flushed whenever no record is ready, so a line appears as
 *    soon as its record is committed.
 *  - SIGINT, SIGTERM and SIGPIPE are blocked and checked with sigtimedwait() between records
 *    and at each wait timeout, so no handler and no global flag is needed; a closed stdout
 *    (EPIPE, e.g. `| head`) ends the command with status 0, like SIGINT.
 *  - A reader that falls behind retention (the segment holding its next record was deleted
 *    meanwhile: STELE_ERETAINED) ends the command with its own message and exit 4; with
 *    --skip-retained it says on stderr which records it skipped and goes on from the oldest
 *    record left.
 *  - --mongo reads the sink's collection through stele_remote_reader_* instead of the
 *    journal; everything after the read (ring, output) is the same code, so the lines are
 *    the same. --since/--until and --where go to the remote reader (which narrows the
 *    server's query with them); -n N asks it for the newest seq; -f polls with the
 *    library's backoff (10 ms doubling to 1 s).
 */
#include "cmd.h"

#include "tail.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* How long one wait for a new record lasts when following: bounds how late a signal or
 * the --until deadline is noticed, not how late a record is printed. */
#define TAIL_FOLLOW_WAIT_MS 200
/* Check for signals every this many records while catching up on a long history. */
#define TAIL_SIGNAL_CHECK_RECORDS 1024
#define TAIL_DEFAULT_LINES 10
static const char tail_usage[] =
    "usage: stele tail [-n N|all] [-f|-r] [--from SEQ] [--since TIME] [--until TIME]\n"
    "                  [--where 'PATH OP VALUE' ...] [-o json|short|cat]\n"
    "                  [--mongo URI [--db NAME] [--collection NAME] [--source NAME]]\n"
    "                  [options]\n"
    "\n"
    "Prints records in seq order, by default as JSON Lines:\n"
    "  {\"seq\":N,\"ts\":\"2026-11-30T20:44:50.123456Z\",\"src\":\"host\",\"event\":{...}}\n"
    "\n"
    "  -n, --lines N|all      the last N records of the range (default 10; all when\n"
    "                         --from or --since is given)\n"
    "  -f, --follow           keep printing records as they are committed (until SIGINT)\n"
    "  -r, --reverse          newest first (with -n N: the newest N); not with -f\n"
    "      --from SEQ         start at this seq\n"
    "      --since TIME       start at this time: 2026-12-01, '2026-12-01 21:00' (local\n"
    "                         time), 2026-12-01T21:00:00Z, 21:00, today, yesterday, now,\n"
    "                         -1h, +30min, '30min ago', '1h30m ago', @UNIX_SECONDS\n"
    "      --until TIME       stop after this time (the same forms)\n"
    "      --where 'PATH OP VALUE'\n"
    "                         only records where the condition holds; repeat to require\n"
    "                         all. PATH: seq, ts, src, or a dotted path into the event\n"
    "                         (actor.name, tags.0). OP: = != < <= > >= (numbers, times),\n"
    "                         ~ !~ (POSIX extended regex), : !: (glob). VALUE: text, a\n"
    "                         number, true, false, null, a time for ts, or a \"JSON string\"\n"
    "  -o, --output json|short|cat\n"
    "                         json: the line above (default); short: one line for people,\n"
    "                         TIME SRC SEQ actor action KEY=VALUE ... in local time; cat:\n"
    "                         the event alone, as JSON (for jq); pretty is short\n"
    "      --skip-retained    when retention deleted records before they were read, say so\n"
    "                         on stderr and go on from the oldest record left (without it:\n"
    "                         exit 4)\n"
    "      --mongo URI        read the records back from MongoDB instead of the journal\n"
    "                         (same lines; -f polls, backing off from 10 ms to 1 s,\n"
    "                         and retries a server that stops answering)\n" CLI_MONGO_NAMES_USAGE
    "      --source NAME      with --mongo: the journal source to read (default: the\n"
    "                         source of the journal in DIR; required when DIR is none)\n";

enum { OPT_FROM = 1, OPT_SINCE, OPT_UNTIL, OPT_WHERE, OPT_SOURCE, OPT_SKIP_RETAINED };

static const struct option tail_opts[] = {
    {"lines", required_argument, NULL, 'n'},
    {"follow", no_argument, NULL, 'f'},
    {"reverse", no_argument, NULL, 'r'},
    {"from", required_argument, NULL, OPT_FROM},
    {"since", required_argument, NULL, OPT_SINCE},
    {"until", required_argument, NULL, OPT_UNTIL},
    {"where", required_argument, NULL, OPT_WHERE},
    {"output", required_argument, NULL, 'o'},
    CLI_MONGO_OPTIONS,
    {"source", required_argument, NULL, OPT_SOURCE},
    {"skip-retained", no_argument, NULL, OPT_SKIP_RETAINED},
    {NULL, 0, NULL, 0},
};

/* ---- the read loop ------------------------------------------------------------------- */

/* The next record from the journal or, with --mongo, from the remote copy: same contract.
 * With --skip-retained, records retention deleted before they were read are skipped, with a
 * line on stderr naming them. */
int
tail_next(tailer_t *t, stele_record_t *rec, int timeout_ms, stele_error_t *err)
{
    if (t->remote != NULL)
        return stele_remote_reader_next(t->remote, rec, timeout_ms, err);
    for (;;) {
        int rc = stele_reader_next(t->reader, rec, timeout_ms, err);
        if (rc != STELE_ERETAINED || !t->q->skip_retained)
            return rc;
        fprintf(stderr, "stele tail: skipped: %s\n", err->message);
        rc = stele_reader_seek_seq(t->reader, 0, err);
        if (rc != 0)
            return rc;
    }
}

int
tail_keeps(const tailer_t *t, const stele_record_t *rec)
{
    if (t->q->has_until && rec->ts_ns > t->q->until_ns)
        return 0;
    /* the remote reader applies --where itself, partly on the server */
    if (t->q->where == NULL || t->remote != NULL)
        return 1;
    return stele_filter_match(t->q->where, rec, t->src);
}

/* Handles one record: 1 when past --until (stop), 0 to go on, or a negative code. */
static int
tailer_take(tailer_t *t, const stele_record_t *rec, int is_catching_up, stele_error_t *err)
{
    if (t->q->has_until && rec->ts_ns > t->q->until_ns)
        return 1;
    int rc = tail_keeps(t, rec);
    if (rc <= 0)
        return rc;
    char *line = NULL;
    rc = tail_format_record(t, rec, &line, err);
    if (rc != 0)
        return rc;
    if (is_catching_up && t->use_ring)
        return tail_ring_push(&t->ring, line);
    rc = tail_write_line(t, line);
    free(line);
    return rc;
}

/* Following --mongo, a failed poll is retried with the reader's backoff rather than fatal
 * (a fail-over or restart of the server must not end a long-running follow): says so once
 * when the server stops answering (err set), and once records come again (err NULL). */
static void
tailer_note_outage(tailer_t *t, const stele_error_t *err)
{
    if (err != NULL && !t->is_remote_down) {
        fprintf(stderr, "stele tail: %s\nstele tail: still following: retrying\n",
                err->message[0] ? err->message : stele_strerror(STELE_EREMOTE));
        t->is_remote_down = 1;
    } else if (err == NULL && t->is_remote_down) {
        fprintf(stderr, "stele tail: reading from the server again\n");
        t->is_remote_down = 0;
    }
}

/* A record committed after the tail started ends the scanned history: the last N lines of
 * the history are printed, then, with -f, that record and every later one (kept in the ring
 * they would have pushed out all but the last N of the records a busy writer committed
 * during the scan). Returns 1 to stop (no -f), 0 to go on following, or a negative code. */
static int
tailer_end_history(tailer_t *t)
{
    int rc = tail_ring_drain(t);
    if (rc == 0 && !t->q->follow)
        rc = tail_flush(t);
    return rc != 0 ? rc : !t->q->follow;
}

/*
 * Reads records until the reader has nothing committed (catching up), then, with -f, goes
 * on waiting for new ones. Returns 0 or a negative code (details in *err).
 */
static int
tailer_run(tailer_t *t, stele_record_t *last_bad, stele_error_t *err)
{
    int is_catching_up = 1;
    int timeout_ms = 0;
    uint64_t n_since_check = 0;
    for (;;) {
        if (t->stopped ||
            (++n_since_check % TAIL_SIGNAL_CHECK_RECORDS == 0 && tail_stop_requested(t)))
            return 0;
        stele_record_t rec;
        int rc = tail_next(t, &rec, timeout_ms, err);
        if (rc == STELE_EAGAIN) {
            if (is_catching_up) {
                is_catching_up = 0;
                rc = tail_ring_drain(t);
                if (rc == 0)
                    rc = tail_flush(t);
                if (rc != 0 || !t->q->follow)
                    return rc;
            } else if (timeout_ms == 0) {
                rc = tail_flush(t);
                if (rc != 0)
                    return rc;
            }
            if (tail_stop_requested(t))
                return 0;
            if (t->q->has_until && cli_now_ns() > t->q->until_ns)
                return 0;
            timeout_ms = TAIL_FOLLOW_WAIT_MS;
            continue;
        }
        if (rc == STELE_EREMOTE && t->remote != NULL && !is_catching_up) {
            tailer_note_outage(t, err);
            if (tail_stop_requested(t))
                return 0;
            timeout_ms = TAIL_FOLLOW_WAIT_MS;
            continue;
        }
        if (rc != 0)
            return rc;
        tailer_note_outage(t, NULL);
        timeout_ms = 0;
        if (is_catching_up && t->use_ring && rec.seq > t->history_last_seq) {
            is_catching_up = 0;
            if ((rc = tailer_end_history(t)) != 0)
                return rc < 0 ? rc : 0;
        }
        rc = tailer_take(t, &rec, is_catching_up, err);
        if (rc == 1) {
            if (is_catching_up)
                rc = tail_ring_drain(t);
            else
                rc = 0;
            return rc != 0 ? rc : tail_flush(t);
        }
        if (rc != 0) {
            *last_bad = rec;
            return rc;
        }
    }
}

int
tail_last_seq(tailer_t *t, const char *dir, uint64_t *seq_out, stele_error_t *err)
{
    if (t->remote != NULL)
        return stele_remote_reader_last_seq(t->remote, seq_out, err);
    stele_status_t st;
    int rc = stele_status_read_opts(dir, t->opts, &st, err);
    *seq_out = st.committed_seq;
    return rc;
}

/* Positions the reader for the query (--since and --from are in the remote reader's query
 * already). */
static int
tailer_position(tailer_t *t, const char *dir, stele_error_t *err)
{
    const tail_query_t *q = t->q;
    int rc = 0;
    int can_seek_last = q->n_last != TAIL_ALL && !q->has_since && !q->has_until && q->where == NULL;
    uint64_t start_seq = q->from_seq;
    if (can_seek_last) {
        uint64_t last_seq = 0;
        rc = tail_last_seq(t, dir, &last_seq, err);
        if (rc != 0)
            return rc;
        uint64_t n = (uint64_t)q->n_last;
        uint64_t last_start = last_seq >= n ? last_seq - n + 1 : 1;
        if (last_start > start_seq)
            start_seq = last_start;
    } else if (q->n_last != TAIL_ALL) {
        t->use_ring = 1;
        t->ring.cap = (size_t)q->n_last;
        rc = tail_last_seq(t, dir, &t->history_last_seq, err);
        if (rc != 0)
            return rc;
    }
    if (t->remote != NULL)
        return start_seq > q->from_seq ? stele_remote_reader_seek_seq(t->remote, start_seq, err)
                                       : 0;
    if (q->has_since) {
        rc = stele_reader_seek_time(t->reader, q->since_ns, err);
    } else if (start_seq > 0) {
        rc = stele_reader_seek_seq(t->reader, start_seq, err);
        if (rc == STELE_ENOTFOUND) /* retention removed it: start at the oldest record */
            rc = 0;
    }
    return rc;
}

/* ---- command line -------------------------------------------------------------------- */

static int
parse_where(tail_query_t *q, const char *arg, int64_t now_ns)
{
    stele_error_t err = {0};
    int rc = q->where == NULL ? stele_filter_new(now_ns, &q->where, &err) : 0;
    if (rc == 0)
        rc = stele_filter_add(q->where, arg, &err);
    if (rc == STELE_EINVAL)
        return cli_usage_error_hinted("tail", err.hint, "--where %s", err.message);
    if (rc != 0) {
        cli_report("tail", rc, &err);
        return cli_exit_for(rc);
    }
    return 0;
}

static int
parse_output(tail_query_t *q, const char *arg)
{
    if (strcmp(arg, "json") == 0)
        q->output = TAIL_OUTPUT_JSON;
    else if (strcmp(arg, "short") == 0 || strcmp(arg, "pretty") == 0)
        q->output = TAIL_OUTPUT_SHORT;
    else if (strcmp(arg, "cat") == 0)
        q->output = TAIL_OUTPUT_CAT;
    else
        return cli_usage_error("tail", "--output '%s' is not one of json, short, cat", arg);
    return 0;
}

static int
tail_parse_one(tail_query_t *q, int c, const char *arg, int64_t now_ns)
{
    switch (c) {
    case 'n':
        if (strcmp(arg, "all") == 0) {
            q->n_last = TAIL_ALL;
        } else {
            uint64_t n;
            if (cli_parse_u64(arg, &n) != 0 || n > INT64_MAX / 2)
                return cli_usage_error("tail", "-n '%s' is not a count or 'all'", arg);
            q->n_last = (int64_t)n;
        }
        q->is_n_given = 1;
        return 0;
    case 'f':
        q->follow = 1;
        return 0;
    case OPT_FROM:
        if (cli_parse_u64(arg, &q->from_seq) != 0 || q->from_seq == 0)
            return cli_usage_error("tail", "--from '%s' is not a seq (1 or more)", arg);
        return 0;
    case OPT_SINCE:
    case OPT_UNTIL: {
        int64_t *ts = (c == OPT_SINCE) ? &q->since_ns : &q->until_ns;
        int code =
            cli_parse_time_flag("tail", c == OPT_SINCE ? "--since" : "--until", arg, now_ns, ts);
        if (code != 0)
            return code;
        *(c == OPT_SINCE ? &q->has_since : &q->has_until) = 1;
        return 0;
    }
    case OPT_WHERE:
        return parse_where(q, arg, now_ns);
    case 'r':
        q->reverse = 1;
        return 0;
    case 'o':
        return parse_output(q, arg);
    case OPT_SOURCE:
        if (arg[0] == '\0')
            return cli_usage_error("tail", "--source needs a name");
        q->source = arg;
        return 0;
    case OPT_SKIP_RETAINED:
        q->skip_retained = 1;
        return 0;
    default:
        return CLI_EXIT_USAGE;
    }
}

static int
tail_parse(cli_args_t *args, int argc, char **argv, tail_query_t *q)
{
    const char *arg;
    int c, first_operand;
    int64_t now_ns = cli_now_ns();
    while ((c = cli_args_next(args, argc, argv, &arg, &first_operand)) != -1) {
        int code = cli_mongo_take(&q->mongo, "tail", c, arg);
        if (code == CLI_MONGO_NOT_MINE)
            code = tail_parse_one(q, c, arg, now_ns);
        if (code != 0)
            return code;
    }
    if (args->want_help)
        return 0;
    if (first_operand < argc)
        return cli_usage_error("tail", "unexpected argument '%s'", argv[first_operand]);
    int code = cli_mongo_check(&q->mongo, "tail", 0);
    if (code != 0)
        return code;
    if (q->source != NULL && q->mongo.sink.uri == NULL)
        return cli_usage_error("tail", "--source needs --mongo URI (the journal names its own)");
    if (q->has_since && q->from_seq != 0)
        return cli_usage_error("tail", "--from and --since both set the start: give one");
    if (q->reverse && q->follow)
        return cli_usage_error("tail", "-r and -f exclude each other: following prints records "
                                       "oldest first, as they are committed");
    if (q->has_since && q->has_until && q->until_ns < q->since_ns)
        return cli_usage_error("tail", "--until is before --since");
    if (!q->is_n_given)
        q->n_last = (q->from_seq != 0 || q->has_since) ? TAIL_ALL : TAIL_DEFAULT_LINES;
    return 0;
}

static void
tailer_free(tailer_t *t)
{
    tail_ring_free(&t->ring);
    stele_reader_close(t->reader);
    stele_remote_reader_close(t->remote);
}

/* The source --mongo reads: --source, else the name of the journal in DIR (copied into
 * `buf`). Returns 0, or CLI_EXIT_USAGE after saying that --source is needed. */
static int
tail_remote_source(const tail_query_t *q, const stele_options_t *opts, const char *dir, char *buf,
                   size_t cap)
{
    if (q->source != NULL) {
        snprintf(buf, cap, "%s", q->source);
        return 0;
    }
    stele_reader_t *reader = NULL;
    stele_error_t err = {0};
    int rc = stele_reader_open_opts(dir, opts, &reader, &err);
    if (rc != 0)
        return cli_usage_error("tail",
                               "--mongo needs --source NAME: '%s' is not a journal to take the "
                               "source name from (%s)",
                               dir, err.message[0] ? err.message : stele_strerror(rc));
    snprintf(buf, cap, "%s", stele_reader_source(reader));
    stele_reader_close(reader);
    return 0;
}

/* Opens the reader the query asks for: the journal in DIR, or the sink's collection. */
static int
tailer_open(tailer_t *t, const char *dir, const char *source, stele_error_t *err)
{
    const tail_query_t *q = t->q;
    if (q->mongo.sink.uri == NULL) {
        int rc = stele_reader_open_opts(dir, t->opts, &t->reader, err);
        if (rc == 0)
            t->src = stele_reader_source(t->reader);
        return rc;
    }
    stele_remote_query_t rq = {
        .source = source,
        .from_seq = q->from_seq,
        .has_since = q->has_since,
        .since_ns = q->since_ns,
        .has_until = q->has_until,
        .until_ns = q->until_ns,
        .where = q->where,
    };
    t->src = source;
    return stele_remote_reader_open(&q->mongo.sink, &rq, &t->remote, err);
}

/* The reader fell behind retention: says so plainly (it is no damage). Returns the exit
 * code. */
static int
report_behind_retention(const stele_error_t *err)
{
    fprintf(stderr,
            "stele tail: fell behind retention: %s\n"
            "hint: --skip-retained goes on from the oldest record left; or keep segments "
            "longer (retention_bytes, retention_seconds)\n",
            err->message);
    return CLI_EXIT_RETAINED;
}

int
cmd_tail(int argc, char **argv)
{
    cli_args_t args;
    if (cli_args_begin(&args, "tail", tail_usage, tail_opts, "n:fro:") != 0)
        return CLI_EXIT_ENGINE;
    tail_query_t *q = calloc(1, sizeof *q);
    tailer_t t = {0};
    char source[256] = "";
    stele_options_t opts; /* for allow_unsafe_dir */
    stele_options_init(&opts);
    t.opts = &opts;
    if (q != NULL)
        cli_mongo_init(&q->mongo);
    int code = q == NULL ? CLI_EXIT_ENGINE : tail_parse(&args, argc, argv, q);
    if (code != 0 || args.want_help) {
        if (code == 0)
            code = cli_print_help(&args);
        goto done;
    }
    code = cli_options_build(&args, &opts);
    if (code != 0)
        goto done;
    if (q->mongo.sink.uri != NULL) {
        code = tail_remote_source(q, &opts, args.dir, source, sizeof source);
        if (code != 0)
            goto done;
    }
    t.q = q;
    sigemptyset(&t.stop_signals);
    sigaddset(&t.stop_signals, SIGINT);
    sigaddset(&t.stop_signals, SIGTERM);
    sigaddset(&t.stop_signals, SIGPIPE);
    sigprocmask(SIG_BLOCK, &t.stop_signals, NULL);

    stele_error_t err = {0};
    int rc = tailer_open(&t, args.dir, source, &err);
    stele_record_t bad = {0};
    if (rc == 0 && q->reverse) {
        rc = tail_run_reverse(&t, args.dir, &bad, &err);
    } else if (rc == 0) {
        rc = tailer_position(&t, args.dir, &err);
        if (rc == 0)
            rc = tailer_run(&t, &bad, &err);
    }
    if (rc == STELE_EBSON) {
        fprintf(stderr,
                "stele tail: record %" PRIu64 " is not valid BSON\n"
                "hint: run \"stele verify\"\n",
                bad.seq);
        code = CLI_EXIT_INVALID;
    } else if (rc == STELE_ERETAINED) {
        code = report_behind_retention(&err);
    } else if (rc != 0) {
        cli_report("tail", rc, &err);
        code = cli_exit_for(rc);
    } else if (t.write_errno != 0) {
        fprintf(stderr, "stele tail: could not write to stdout: %s\n", strerror(t.write_errno));
        code = CLI_EXIT_ENGINE;
    }
done:
    tailer_free(&t);
    stele_options_release(&opts);
    if (q != NULL)
        stele_filter_free(q->where);
    free(q);
    cli_args_end(&args);
    return code;
}
