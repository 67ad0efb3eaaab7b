/*
 * cmd_tail.c: `stele tail`: prints records as JSON Lines
 *   {"seq":N,"ts":"<RFC 3339 UTC, µs>","src":"...","origin":{...},"event":{...}}
 * (stele_record_to_json: compact, the event as relaxed Extended JSON), in seq order; -f
 * follows new records. --where conditions are a stele_filter_t.
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
 *  - --mongo reads the sink's collection through stele_remote_reader_* instead of the
 *    journal; everything after the read (filters, ring, output) is the same code, so the
 *    lines are the same. --since/--until go to the server as a filter; -n N asks it for the
 *    newest seq; -f polls with the library's backoff (10 ms doubling to 1 s).
 */
#include "cmd.h"

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
#define TAIL_ALL (-1)
/* Slots of the first allocation of the line ring; it doubles from there up to -n N. */
#define TAIL_RING_FIRST_SLOTS 64

typedef struct tail_query {
    cli_mongo_t mongo;  /* mongo.sink.uri set: read the remote copy */
    const char *source; /* --source, for --mongo; NULL: the journal's */
    int64_t n_last;     /* TAIL_ALL or a count */
    int is_n_given;
    int follow;
    int pretty;
    uint64_t from_seq; /* 0: not given */
    int has_since, has_until;
    int64_t since_ns, until_ns;
    stele_filter_t *where; /* the --where conditions; NULL when none was given */
} tail_query_t;

/* The last `cap` formatted lines, oldest at head. `lines` grows with the matches up to `cap`
 * (a count like -n 99999999999 means "all", not that much memory); it wraps only once full,
 * so until then head is 0 and the lines are contiguous. */
typedef struct line_ring {
    char **lines;
    size_t cap, n_alloc, head, count;
} line_ring_t;

typedef struct tailer {
    stele_reader_t *reader;        /* the local journal, or NULL with --mongo */
    stele_remote_reader_t *remote; /* the sink's collection, or NULL */
    const char *src;
    const tail_query_t *q;
    const stele_options_t *opts; /* allow_unsafe_dir for the local reader */
    line_ring_t ring;            /* used while catching up when the range must be scanned */
    int use_ring;
    uint64_t history_last_seq; /* with the ring: the newest seq when the tail started */
    sigset_t stop_signals;
    int stopped;        /* a stop signal arrived or stdout failed */
    int is_remote_down; /* following --mongo: the last poll failed, retrying */
    int write_errno;    /* stdout failed with something other than EPIPE */
} tailer_t;

static const char tail_usage[] =
    "usage: stele tail [-n N|all] [-f] [--from SEQ] [--since TIME] [--until TIME]\n"
    "                  [--where FIELD=VALUE ...] [--output json|pretty]\n"
    "                  [--mongo URI [--db NAME] [--collection NAME] [--source NAME]]\n"
    "                  [options]\n"
    "\n"
    "Prints records as JSON Lines in seq order:\n"
    "  {\"seq\":N,\"ts\":\"2026-11-30T20:44:50.123456Z\",\"src\":\"host\",\"event\":{...}}\n"
    "\n"
    "  -n, --lines N|all      the last N records of the range (default 10; all when\n"
    "                         --from or --since is given)\n"
    "  -f, --follow           keep printing records as they are committed (until SIGINT)\n"
    "      --from SEQ         start at this seq\n"
    "      --since TIME       start at this time: RFC 3339 or relative (90s, 10m, 2h, 3d)\n"
    "      --until TIME       stop after this time\n"
    "      --where PATH=VALUE only events whose dotted PATH equals VALUE (a string, number,\n"
    "                         true, false or null); repeat to require all\n"
    "  -o, --output FORMAT    json (default) or pretty\n"
    "      --mongo URI        read the records back from MongoDB instead of the journal\n"
    "                         (same lines; -f polls, backing off from 10 ms to 1 s,\n"
    "                         and retries a server that stops answering)\n" CLI_MONGO_NAMES_USAGE
    "      --source NAME      with --mongo: the journal source to read (default: the\n"
    "                         source of the journal in DIR; required when DIR is none)\n";

enum { OPT_FROM = 1, OPT_SINCE, OPT_UNTIL, OPT_WHERE, OPT_SOURCE };

static const struct option tail_opts[] = {
    {"lines", required_argument, NULL, 'n'},         {"follow", no_argument, NULL, 'f'},
    {"from", required_argument, NULL, OPT_FROM},     {"since", required_argument, NULL, OPT_SINCE},
    {"until", required_argument, NULL, OPT_UNTIL},   {"where", required_argument, NULL, OPT_WHERE},
    {"output", required_argument, NULL, 'o'},        CLI_MONGO_OPTIONS,
    {"source", required_argument, NULL, OPT_SOURCE}, {NULL, 0, NULL, 0},
};

/* ---- output -------------------------------------------------------------------------- */

/* Formats one record as its output line with the newline, into *line_out (free with
 * free()). Returns 0, or the code of stele_record_to_json() (STELE_EBSON: a bad event). */
static int
format_record(const tailer_t *t, const stele_record_t *rec, char **line_out, stele_error_t *err)
{
    char *json = NULL;
    int rc = t->q->pretty ? stele_event_to_json(rec->bson, rec->bson_len, &json, NULL, err)
                          : stele_record_to_json(rec, t->src, &json, NULL, err);
    if (rc != 0)
        return rc;
    char *line = NULL;
    int n;
    if (t->q->pretty) {
        char ts[64], who[32] = "";
        cli_format_time(rec->ts_ns, ts, sizeof ts);
        if (rec->origin.kind != STELE_ORIGIN_UNKNOWN)
            snprintf(who, sizeof who, " uid=%" PRIu32, rec->origin.uid);
        n = asprintf(&line, "%s %s%s #%" PRIu64 " %s\n", ts, t->src, who, rec->seq, json);
    } else {
        n = asprintf(&line, "%s\n", json);
    }
    if (n < 0)
        line = NULL;
    stele_json_free(json);
    *line_out = line;
    return line == NULL ? -ENOMEM : 0;
}

/* A failed write stops the tailer; EPIPE (the reader went away) is a normal end. */
static void
note_write_failure(tailer_t *t)
{
    t->stopped = 1;
    if (errno != EPIPE)
        t->write_errno = errno;
}

/* Always 0: a write failure is recorded in the tailer, not returned. */
static int
write_line(tailer_t *t, const char *line)
{
    if (!t->stopped && fputs(line, stdout) == EOF)
        note_write_failure(t);
    return 0;
}

static int
flush_stdout(tailer_t *t)
{
    if (!t->stopped && fflush(stdout) != 0)
        note_write_failure(t);
    return 0;
}

/* Room for one more line in a ring that is not full yet. Returns 0 or -ENOMEM. */
static int
ring_grow(line_ring_t *ring)
{
    size_t n_alloc = ring->n_alloc == 0 ? TAIL_RING_FIRST_SLOTS : ring->n_alloc * 2;
    if (n_alloc > ring->cap || n_alloc < ring->n_alloc)
        n_alloc = ring->cap;
    char **lines = realloc(ring->lines, n_alloc * sizeof *lines);
    if (lines == NULL)
        return -ENOMEM;
    ring->lines = lines;
    ring->n_alloc = n_alloc;
    return 0;
}

/* Takes ownership of `line`. Returns 0 or -ENOMEM (the line is freed either way). */
static int
ring_push(line_ring_t *ring, char *line)
{
    if (ring->cap == 0) {
        free(line);
        return 0;
    }
    if (ring->count == ring->cap) {
        free(ring->lines[ring->head]);
        ring->lines[ring->head] = line;
        ring->head = (ring->head + 1) % ring->cap;
        return 0;
    }
    if (ring->count == ring->n_alloc && ring_grow(ring) != 0) {
        free(line);
        return -ENOMEM;
    }
    ring->lines[ring->count] = line; /* not full: head is 0 */
    ring->count++;
    return 0;
}

static int
ring_drain(tailer_t *t)
{
    int rc = 0;
    line_ring_t *ring = &t->ring;
    for (; ring->count > 0; ring->count--) {
        char *line = ring->lines[ring->head];
        if (rc == 0 && !t->stopped)
            rc = write_line(t, line);
        free(line);
        ring->head = (ring->head + 1) % ring->cap;
    }
    ring->head = 0;
    return rc;
}

static int
stop_requested(tailer_t *t)
{
    struct timespec zero = {0, 0};
    if (sigtimedwait(&t->stop_signals, NULL, &zero) > 0)
        t->stopped = 1;
    return t->stopped;
}

/* ---- the read loop ------------------------------------------------------------------- */

/* The next record from the journal or, with --mongo, from the remote copy: same contract. */
static int
tailer_next(tailer_t *t, stele_record_t *rec, int timeout_ms, stele_error_t *err)
{
    if (t->remote != NULL)
        return stele_remote_reader_next(t->remote, rec, timeout_ms, err);
    return stele_reader_next(t->reader, rec, timeout_ms, err);
}

/* Handles one record: 1 when past --until (stop), 0 to go on, or a negative code. */
static int
tailer_take(tailer_t *t, const stele_record_t *rec, int is_catching_up, stele_error_t *err)
{
    if (t->q->has_until && rec->ts_ns > t->q->until_ns)
        return 1;
    int rc = t->q->where != NULL ? stele_filter_match(t->q->where, rec) : 1;
    if (rc <= 0)
        return rc;
    char *line = NULL;
    rc = format_record(t, rec, &line, err);
    if (rc != 0)
        return rc;
    if (is_catching_up && t->use_ring)
        return ring_push(&t->ring, line);
    rc = write_line(t, line);
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
    int rc = ring_drain(t);
    if (rc == 0 && !t->q->follow)
        rc = flush_stdout(t);
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
        if (t->stopped || (++n_since_check % TAIL_SIGNAL_CHECK_RECORDS == 0 && stop_requested(t)))
            return 0;
        stele_record_t rec;
        int rc = tailer_next(t, &rec, timeout_ms, err);
        if (rc == STELE_EAGAIN) {
            if (is_catching_up) {
                is_catching_up = 0;
                rc = ring_drain(t);
                if (rc == 0)
                    rc = flush_stdout(t);
                if (rc != 0 || !t->q->follow)
                    return rc;
            } else if (timeout_ms == 0) {
                rc = flush_stdout(t);
                if (rc != 0)
                    return rc;
            }
            if (stop_requested(t))
                return 0;
            if (t->q->has_until && cli_now_ns() > t->q->until_ns)
                return 0;
            timeout_ms = TAIL_FOLLOW_WAIT_MS;
            continue;
        }
        if (rc == STELE_EREMOTE && t->remote != NULL && !is_catching_up) {
            tailer_note_outage(t, err);
            if (stop_requested(t))
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
                rc = ring_drain(t);
            else
                rc = 0;
            return rc != 0 ? rc : flush_stdout(t);
        }
        if (rc != 0) {
            *last_bad = rec;
            return rc;
        }
    }
}

/* The newest seq the reader can return now: committed locally, or stored remotely. */
static int
tailer_last_seq(tailer_t *t, const char *dir, uint64_t *seq_out, stele_error_t *err)
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
        rc = tailer_last_seq(t, dir, &last_seq, err);
        if (rc != 0)
            return rc;
        uint64_t n = (uint64_t)q->n_last;
        uint64_t last_start = last_seq >= n ? last_seq - n + 1 : 1;
        if (last_start > start_seq)
            start_seq = last_start;
    } else if (q->n_last != TAIL_ALL) {
        t->use_ring = 1;
        t->ring.cap = (size_t)q->n_last;
        rc = tailer_last_seq(t, dir, &t->history_last_seq, err);
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
parse_where(tail_query_t *q, const char *arg)
{
    stele_error_t err = {0};
    int rc = q->where == NULL ? stele_filter_new(&q->where, &err) : 0;
    if (rc == 0)
        rc = stele_filter_add(q->where, arg, &err);
    if (rc == STELE_EINVAL)
        return cli_usage_error("tail", "--where %s", err.message);
    if (rc != 0) {
        cli_report("tail", rc, &err);
        return cli_exit_for(rc);
    }
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
        if (cli_parse_time(arg, now_ns, ts) != 0)
            return cli_usage_error("tail",
                                   "%s '%s' is not a time: use RFC 3339 "
                                   "(2026-11-30T20:44:50Z) or 90s, 10m, 2h, 3d",
                                   c == OPT_SINCE ? "--since" : "--until", arg);
        *(c == OPT_SINCE ? &q->has_since : &q->has_until) = 1;
        return 0;
    }
    case OPT_WHERE:
        return parse_where(q, arg);
    case 'o':
        if (strcmp(arg, "json") == 0)
            q->pretty = 0;
        else if (strcmp(arg, "pretty") == 0)
            q->pretty = 1;
        else
            return cli_usage_error("tail", "--output '%s' is not json or pretty", arg);
        return 0;
    case OPT_SOURCE:
        if (arg[0] == '\0')
            return cli_usage_error("tail", "--source needs a name");
        q->source = arg;
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
    if (q->has_since && q->has_until && q->until_ns < q->since_ns)
        return cli_usage_error("tail", "--until is before --since");
    if (!q->is_n_given)
        q->n_last = (q->from_seq != 0 || q->has_since) ? TAIL_ALL : TAIL_DEFAULT_LINES;
    return 0;
}

static void
tailer_free(tailer_t *t)
{
    if (t->ring.lines != NULL) {
        while (t->ring.count > 0) {
            free(t->ring.lines[t->ring.head]);
            t->ring.head = (t->ring.head + 1) % t->ring.cap;
            t->ring.count--;
        }
    }
    free(t->ring.lines);
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
    };
    t->src = source;
    return stele_remote_reader_open(&q->mongo.sink, &rq, &t->remote, err);
}

int
cmd_tail(int argc, char **argv)
{
    cli_args_t args;
    if (cli_args_begin(&args, "tail", tail_usage, tail_opts, "n:fo:") != 0)
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
    if (rc == 0)
        rc = tailer_position(&t, args.dir, &err);
    stele_record_t bad = {0};
    if (rc == 0)
        rc = tailer_run(&t, &bad, &err);
    if (rc == STELE_EBSON) {
        fprintf(stderr,
                "stele tail: record %" PRIu64 " is not valid BSON\n"
                "hint: run \"stele verify\"\n",
                bad.seq);
        code = CLI_EXIT_INVALID;
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
