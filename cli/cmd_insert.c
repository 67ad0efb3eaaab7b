/*
 * cmd_insert.c: `stele insert`: appends events given as arguments, or read as JSON Lines
 * from stdin (line_reader.h), and prints each event's seq once it reached the requested
 * wait level.
 *
 * Invariants:
 *  - A printed seq is a promise: it is printed only after the library confirmed that record
 *    (and so every earlier one) at the requested level. Seqs are printed in input order.
 *  - Whatever stops insert (the end of the input, a bad line, a halted engine, a full disk,
 *    a stop signal), every appended event that reached the level by then is printed before
 *    it exits, and stderr names the first input line that was not stored: re-running from
 *    that line never stores an event twice.
 *  - Group commit from one process: events are appended with STELE_WAIT_NONE, so the
 *    committer batches them, and their seqs queue in `pending` (a fixed ring, with each
 *    event's input line). The ring is settled (waited on and printed) when half full, before
 *    any read that would block (so a slow producer still sees its seqs at once), on a bad
 *    line, and at the end.
 *  - Memory is bounded whatever the input: the line reader's buffer and the ring.
 *  - On a bad line everything before it is settled and printed, nothing after it is
 *    appended (unless --skip-invalid), and the error names the line and the library's
 *    reason. An append that fails for another reason (a full quota) settles and prints what
 *    came before it too, then stops with exit 3.
 *  - Stop signals (SIGINT, SIGTERM, SIGHUP; stop_signal.h) are blocked and taken between
 *    lines and while waiting for input: insert then reads nothing more, settles what it
 *    appended (a second signal settles for what is already reached), closes the journal,
 *    and dies of the signal.
 *  - A close that succeeds with a warning (the next segment could not be prepared: a full
 *    disk) exits 0, the warning on stderr: every event was stored.
 *  - When `stele serve` owns the journal (its socket answers), events go through it with
 *    stele_client_send_json()/stele_client_recv(), up to INSERT_CLIENT_WINDOW unanswered.
 *    Each line is validated here first (stele_validate_json, with this command's knobs), so
 *    a bad line is never sent and nothing after it is: the replies in flight are settled and
 *    printed, then the line is reported. Only a refusal the server alone can make (its own
 *    stricter limits, a full quota, a halted engine) is known from a reply; then the events
 *    already sent after it may be appended: they are printed (each printed seq is still an
 *    acknowledged record) and nothing further is sent.
 */
#include "cmd.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "line_reader.h"
#include "stop_signal.h"

/* Seqs appended but not yet printed. Half of it is settled at a time, so the committer
 * always has the other half to batch while this thread waits. */
#define INSERT_PENDING_CAP 16384
/* Requests in flight to `stele serve`; bounds the replies it buffers for us. */
#define INSERT_CLIENT_WINDOW 1024
/* JSON text may be larger than its BSON (spaces, escapes): allow twice max_record_bytes. */
#define INSERT_LINE_FACTOR 2
/* A wait for pending seqs looks for a stop signal this often. */
#define INSERT_WAIT_SLICE_MS 200
/* Lines read between two looks for a stop signal while input keeps coming. */
#define INSERT_SIGNAL_CHECK_LINES 1024

typedef struct inserter {
    const char *command;
    const stele_options_t *opts; /* limits for validating lines sent to a server */
    stele_t *db;                 /* in-process writer, or NULL when going through a server */
    stele_client_t *client;      /* connection to `stele serve`, or NULL */
    uint64_t in_flight_line[INSERT_CLIENT_WINDOW]; /* input line of each unanswered request */
    size_t in_flight_head;
    int client_failed; /* a reply carried an error: send nothing more */
    int client_code;   /* exit code of the first failed reply */
    const char *where; /* "stdin line" or "argument", for messages */
    stele_wait_t level;
    int quiet;
    int flush_before_wait; /* sync=never: wait=durable would otherwise wait for close */
    uint64_t pending[INSERT_PENDING_CAP];      /* ring of appended, unprinted seqs */
    uint64_t pending_line[INSERT_PENDING_CAP]; /* the input line (or argument) of each */
    size_t head, count;
    uint64_t next_line; /* the input line (or argument) the next append comes from */
    int stdout_failed;
    int stdout_errno;   /* why, when fflush said so */
    stop_signal_t stop; /* fd -1 when the stop signals could not be blocked */
    int stop_signo;     /* the stop signal taken, 0 while none */
    int is_aborted;     /* a second stop signal: settle only for what is reached */
} inserter_t;

static const char insert_usage[] =
    "usage: stele insert [--wait none|written|durable|shipped] [--quiet] [--skip-invalid]\n"
    "                    [options] [JSON ...]\n"
    "\n"
    "Appends each JSON argument as one event; with no argument, reads JSON Lines (one object\n"
    "per line) from stdin. Prints each event's seq, in input order, once it reached the wait\n"
    "level: a printed seq is a promise. An empty line is invalid input. On an invalid event\n"
    "the events before it are committed and printed and nothing after it is appended.\n"
    "\n"
    "      --wait none|written|durable|shipped\n"
    "                         how far each event gets before its seq is printed\n"
    "                         (default: durable; shipped needs a sink)\n"
    "  -q, --quiet            do not print seqs\n"
    "      --skip-invalid     report each invalid line on stderr and go on (exit 2 at the\n"
    "                         end if any line was skipped)\n";

enum { OPT_WAIT = 1, OPT_SKIP_INVALID };

static const struct option insert_opts[] = {
    {"wait", required_argument, NULL, OPT_WAIT},
    {"quiet", no_argument, NULL, 'q'},
    {"skip-invalid", no_argument, NULL, OPT_SKIP_INVALID},
    {NULL, 0, NULL, 0},
};

/* ---- the ring of pending seqs -------------------------------------------------------- */

static uint64_t
pending_at(const inserter_t *ins, size_t i)
{
    return ins->pending[(ins->head + i) % INSERT_PENDING_CAP];
}

/* Takes a pending stop signal, if any: the first stops reading, a second stops waiting. */
static void
inserter_look_for_stop(inserter_t *ins)
{
    if (ins->stop.fd < 0)
        return;
    int signo = stop_signal_take(&ins->stop);
    if (signo && ins->stop_signo)
        ins->is_aborted = 1;
    else if (signo)
        ins->stop_signo = signo;
}

/* Prints the oldest `n` pending seqs and drops them from the ring. */
static int
inserter_print(inserter_t *ins, size_t n)
{
    for (size_t i = 0; i < n && !ins->quiet; i++)
        printf("%" PRIu64 "\n", pending_at(ins, i));
    ins->head = (ins->head + n) % INSERT_PENDING_CAP;
    ins->count -= n;
    errno = 0; /* a buffer that filled earlier left only the error flag, no errno */
    if (!ins->quiet && (fflush(stdout) != 0 || ferror(stdout))) {
        ins->stdout_failed = 1;
        ins->stdout_errno = errno;
        return -EPIPE;
    }
    return 0;
}

/* Prints the pending seqs that reached the level, whatever stopped the wait for the rest:
 * each of them is stored, and a re-run must start after them. */
static void
inserter_print_reached(inserter_t *ins)
{
    uint64_t reached = stele_reached_seq(ins->db, ins->level);
    size_t n = 0;
    while (n < ins->count && pending_at(ins, n) <= reached)
        n++;
    if (n)
        (void)inserter_print(ins, n);
}

/* Waits until seq reached the level, looking for stop signals meanwhile; after a second
 * one, gives up with STELE_ETIMEDOUT. */
static int
inserter_wait(inserter_t *ins, uint64_t seq, stele_error_t *err)
{
    if (ins->flush_before_wait) {
        int rc = stele_flush(ins->db, err);
        if (rc != 0)
            return rc;
    }
    for (;;) {
        int rc = stele_wait(ins->db, seq, ins->level, ins->stop.fd >= 0 ? INSERT_WAIT_SLICE_MS : -1,
                            err);
        if (rc != STELE_ETIMEDOUT)
            return rc;
        inserter_look_for_stop(ins);
        if (ins->is_aborted)
            return rc;
    }
}

/* Waits until the oldest `n` pending seqs reached the level, then prints them. When the
 * wait fails, prints those that did reach it. */
static int
inserter_settle(inserter_t *ins, size_t n, stele_error_t *err)
{
    if (n == 0)
        return 0;
    if (ins->level != STELE_WAIT_NONE) {
        int rc = inserter_wait(ins, pending_at(ins, n - 1), err);
        if (rc != 0) {
            inserter_print_reached(ins);
            return rc;
        }
    }
    return inserter_print(ins, n);
}

/* Says why settling stopped: stdout could not take the seqs, or the library's error. */
static void
report_settle_failure(const inserter_t *ins, int rc, const stele_error_t *err)
{
    if (!ins->stdout_failed) {
        cli_report(ins->command, rc, err);
        return;
    }
    fprintf(stderr, "stele insert: could not write to stdout%s%s\n", ins->stdout_errno ? ": " : "",
            ins->stdout_errno ? strerror(ins->stdout_errno) : "");
}

static int
inserter_settle_all(inserter_t *ins, stele_error_t *err)
{
    return inserter_settle(ins, ins->count, err);
}

/* Appends one event with STELE_WAIT_NONE and queues its seq; settles half the ring when full. */
static int
inserter_append(inserter_t *ins, const char *json, size_t len, stele_error_t *err)
{
    uint64_t seq = 0;
    int rc = stele_append_json(ins->db, json, len, STELE_WAIT_NONE, &seq, err);
    if (rc != 0)
        return rc;
    size_t slot = (ins->head + ins->count) % INSERT_PENDING_CAP;
    ins->pending[slot] = seq;
    ins->pending_line[slot] = ins->next_line;
    ins->count++;
    if (ins->count == INSERT_PENDING_CAP)
        return inserter_settle(ins, INSERT_PENDING_CAP / 2, err);
    return 0;
}

static int
is_blank(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
            return 0;
    }
    return 1;
}

/* Prints "stele insert: WHERE: message". */
static void
report_bad_event(const char *where, uint64_t number, int rc, const stele_error_t *err,
                 const char *own_message)
{
    const char *message = own_message;
    if (message == NULL)
        message = (err->code == rc && err->message[0]) ? err->message : stele_strerror(rc);
    fprintf(stderr, "stele insert: %s %" PRIu64 ": %s\n", where, number, message);
}

/* ---- through `stele serve` ---------------------------------------------------------- */

/* Receives the oldest reply; prints its seq, or reports its error once. */
static int
client_recv_one(inserter_t *ins, const char *where, int skip_invalid, uint64_t *n_skipped)
{
    uint64_t line_no = ins->in_flight_line[ins->in_flight_head];
    ins->in_flight_head = (ins->in_flight_head + 1) % INSERT_CLIENT_WINDOW;
    stele_error_t err = {0};
    uint64_t seq = 0;
    int rc = stele_client_recv(ins->client, &seq, &err);
    if (rc == 0) {
        if (!ins->quiet)
            printf("%" PRIu64 "\n", seq);
        return 0;
    }
    int code = cli_exit_for(rc);
    if (code == CLI_EXIT_INVALID && skip_invalid) {
        report_bad_event(where, line_no, rc, &err, NULL);
        (*n_skipped)++;
        return 0;
    }
    if (ins->client_failed)
        return 0; /* the first error is the one that stopped the input */
    if (code == CLI_EXIT_INVALID)
        report_bad_event(where, line_no, rc, &err, NULL);
    else
        cli_report(ins->command, rc, &err);
    ins->client_failed = 1;
    ins->client_code = code == CLI_EXIT_OK ? CLI_EXIT_ENGINE : code;
    /* a broken connection answers nothing more */
    return (rc == -EPIPE || rc == -ECONNRESET || rc == STELE_EPROTOCOL) ? -1 : 0;
}

/* Receives replies until at most `keep` requests are unanswered; flushes stdout. */
static int
client_settle(inserter_t *ins, size_t keep, const char *where, int skip_invalid,
              uint64_t *n_skipped)
{
    while (stele_client_pending(ins->client) > keep) {
        if (client_recv_one(ins, where, skip_invalid, n_skipped) != 0)
            return -1;
    }
    errno = 0; /* a buffer that filled earlier left only the error flag, no errno */
    if (!ins->quiet && (fflush(stdout) != 0 || ferror(stdout))) {
        ins->stdout_failed = 1;
        ins->stdout_errno = errno;
        return -1;
    }
    return 0;
}

/* Sends one event; returns 0 to go on or the exit code to stop with. */
static int
client_insert_one(inserter_t *ins, const char *where, uint64_t number, const char *json, size_t len,
                  int skip_invalid, uint64_t *n_skipped)
{
    if (is_blank(json, len)) {
        if (skip_invalid) {
            report_bad_event(where, number, STELE_EEMPTY, NULL,
                             "empty line (one JSON object per line)");
            (*n_skipped)++;
            return 0;
        }
        (void)client_settle(ins, 0, where, skip_invalid, n_skipped);
        if (!ins->client_failed)
            report_bad_event(where, number, STELE_EEMPTY, NULL,
                             "empty line (one JSON object per line)");
        return ins->client_failed ? ins->client_code : CLI_EXIT_INVALID;
    }
    stele_error_t err = {0};
    int rc = stele_validate_json(json, len, ins->opts, &err);
    if (rc != 0) {
        if (cli_exit_for(rc) == CLI_EXIT_INVALID && skip_invalid) {
            report_bad_event(where, number, rc, &err, NULL);
            (*n_skipped)++;
            return 0;
        }
        /* nothing after a bad line is sent: print what the server acknowledged, then say
         * what is wrong (unless an earlier reply already stopped the input) */
        (void)client_settle(ins, 0, where, skip_invalid, n_skipped);
        if (ins->client_failed)
            return ins->client_code;
        if (cli_exit_for(rc) != CLI_EXIT_INVALID) {
            cli_report(ins->command, rc, &err);
            return cli_exit_for(rc) == CLI_EXIT_OK ? CLI_EXIT_ENGINE : cli_exit_for(rc);
        }
        report_bad_event(where, number, rc, &err, NULL);
        return CLI_EXIT_INVALID;
    }
    if (stele_client_pending(ins->client) == INSERT_CLIENT_WINDOW &&
        client_settle(ins, INSERT_CLIENT_WINDOW - 1, where, skip_invalid, n_skipped) != 0)
        return ins->client_failed ? ins->client_code : CLI_EXIT_ENGINE;
    if (ins->client_failed) {
        (void)client_settle(ins, 0, where, skip_invalid, n_skipped);
        return ins->client_code;
    }
    rc = stele_client_send_json(ins->client, json, len, ins->level, &err);
    if (rc != 0) {
        cli_report(ins->command, rc, &err);
        return CLI_EXIT_ENGINE;
    }
    size_t slot =
        (ins->in_flight_head + stele_client_pending(ins->client) - 1) % INSERT_CLIENT_WINDOW;
    ins->in_flight_line[slot] = number;
    return 0;
}

/*
 * An append failed for a reason other than the event (a full quota with on_full=fail, a
 * halted engine, stdout gone): the events before it are in the journal, so print the seqs
 * of those that reach the level (a halted engine: those durable before it halted), then say
 * why insert stopped.
 */
static void
report_stop(inserter_t *ins, int rc, const stele_error_t *err)
{
    if (ins->stdout_failed) {
        report_settle_failure(ins, rc, err);
        return;
    }
    stele_error_t settle_err = {0};
    int settle_rc = inserter_settle_all(ins, &settle_err);
    cli_report(ins->command, rc, err);
    if (settle_rc != 0 && ins->stdout_failed)
        report_settle_failure(ins, settle_rc, &settle_err);
}

/*
 * Handles one input event. Returns 0 to go on, or the exit code to stop with; *n_skipped
 * counts invalid events skipped under --skip-invalid.
 */
static int
insert_one(inserter_t *ins, const char *where, uint64_t number, const char *json, size_t len,
           int skip_invalid, uint64_t *n_skipped)
{
    ins->next_line = number;
    if (ins->client != NULL)
        return client_insert_one(ins, where, number, json, len, skip_invalid, n_skipped);
    stele_error_t err = {0};
    int rc;
    const char *own_message = NULL;
    if (is_blank(json, len)) {
        rc = STELE_EEMPTY;
        own_message = "empty line (one JSON object per line)";
    } else {
        rc = inserter_append(ins, json, len, &err);
        if (rc == 0)
            return 0;
    }
    int code = cli_exit_for(rc);
    if (code != CLI_EXIT_INVALID) {
        report_stop(ins, rc, &err);
        return code == CLI_EXIT_OK ? CLI_EXIT_ENGINE : code;
    }
    if (skip_invalid) {
        report_bad_event(where, number, rc, &err, own_message);
        (*n_skipped)++;
        return 0;
    }
    stele_error_t settle_err = {0};
    int settle_rc = inserter_settle_all(ins, &settle_err);
    report_bad_event(where, number, rc, &err, own_message);
    if (settle_rc != 0) {
        report_settle_failure(ins, settle_rc, &settle_err);
        return CLI_EXIT_ENGINE;
    }
    return CLI_EXIT_INVALID;
}

/*
 * Settles everything in flight, in either mode. Returns 0 or the exit code to stop with
 * (the error is reported).
 */
static int
inserter_drain(inserter_t *ins, int skip_invalid, uint64_t *n_skipped)
{
    if (ins->client != NULL) {
        int rc = client_settle(ins, 0, ins->where, skip_invalid, n_skipped);
        if (ins->client_failed)
            return ins->client_code;
        if (rc != 0 && ins->stdout_failed)
            report_settle_failure(ins, rc, NULL);
        return rc != 0 ? CLI_EXIT_ENGINE : 0;
    }
    stele_error_t err = {0};
    int rc = inserter_settle_all(ins, &err);
    if (rc == 0 || (rc == STELE_ETIMEDOUT && ins->is_aborted))
        return 0; /* cut short by a second stop signal: the close settles the rest */
    report_settle_failure(ins, rc, &err);
    return CLI_EXIT_ENGINE;
}

static size_t
inserter_pending(const inserter_t *ins)
{
    return ins->client != NULL ? stele_client_pending(ins->client) : ins->count;
}

static int
insert_from_args(inserter_t *ins, int n_events, char **events, int skip_invalid,
                 uint64_t *n_skipped)
{
    ins->where = "argument";
    for (int i = 0; i < n_events; i++) {
        inserter_look_for_stop(ins);
        if (ins->stop_signo) {
            ins->next_line = (uint64_t)i + 1;
            return 0;
        }
        int code = insert_one(ins, "argument", (uint64_t)i + 1, events[i], strlen(events[i]),
                              skip_invalid, n_skipped);
        if (code != 0)
            return code;
    }
    ins->next_line = (uint64_t)n_events + 1;
    return 0;
}

/* An over-long line: reported and skipped, or the end of the input. Returns 0 to go on or
 * the exit code. */
static int
insert_too_long_line(inserter_t *ins, uint64_t line_no, size_t max_line_bytes, int skip_invalid,
                     uint64_t *n_skipped)
{
    char message[128];
    snprintf(message, sizeof message, "line longer than %zu bytes", max_line_bytes);
    if (skip_invalid) {
        report_bad_event("stdin line", line_no, STELE_ETOOBIG, NULL, message);
        (*n_skipped)++;
        return 0;
    }
    int code = inserter_drain(ins, skip_invalid, n_skipped);
    if (code == 0 || !ins->client_failed)
        report_bad_event("stdin line", line_no, STELE_ETOOBIG, NULL, message);
    return code == 0 ? CLI_EXIT_INVALID : code;
}

static int
insert_from_stdin(inserter_t *ins, size_t max_line_bytes, int skip_invalid, uint64_t *n_skipped)
{
    line_reader_t lr;
    if (line_reader_init(&lr, STDIN_FILENO, ins->stop.fd, max_line_bytes) != 0) {
        fprintf(stderr, "stele insert: out of memory for a %zu-byte line buffer\n", lr.cap);
        return CLI_EXIT_ENGINE;
    }
    int code = 0;
    ins->where = "stdin line";
    for (;;) {
        const char *line = NULL;
        size_t len = 0;
        ins->next_line = lr.line_no + 1;
        if (lr.line_no % INSERT_SIGNAL_CHECK_LINES == 0)
            inserter_look_for_stop(ins);
        if (ins->stop_signo)
            break;
        line_status_t st = line_reader_next(&lr, inserter_pending(ins) == 0, &line, &len);
        if (st == LINE_WOULD_BLOCK) {
            code = inserter_drain(ins, skip_invalid, n_skipped);
            if (code != 0)
                break;
            continue;
        }
        if (st == LINE_STOPPED) {
            inserter_look_for_stop(ins);
            continue;
        }
        if (st == LINE_EOF)
            break;
        if (st == LINE_READ_ERROR) {
            fprintf(stderr, "stele insert: could not read stdin: %s\n", strerror(lr.read_errno));
            code = CLI_EXIT_ENGINE;
            break;
        }
        if (st == LINE_TOO_LONG) {
            code = insert_too_long_line(ins, lr.line_no, max_line_bytes, skip_invalid, n_skipped);
            if (code != 0)
                break;
            continue;
        }
        code = insert_one(ins, "stdin line", lr.line_no, line, len, skip_invalid, n_skipped);
        if (code != 0)
            break;
    }
    line_reader_free(&lr);
    return code;
}

static int
insert_parse(cli_args_t *args, int argc, char **argv, stele_wait_t *level, int *quiet,
             int *skip_invalid, int *first_operand)
{
    const char *arg;
    int c;
    while ((c = cli_args_next(args, argc, argv, &arg, first_operand)) != -1) {
        switch (c) {
        case OPT_WAIT:
            if (stele_wait_parse(arg, level) != 0)
                return cli_usage_error("insert",
                                       "--wait '%s' is not one of none, written, durable, "
                                       "shipped",
                                       arg);
            break;
        case 'q':
            *quiet = 1;
            break;
        case OPT_SKIP_INVALID:
            *skip_invalid = 1;
            break;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    return 0;
}

/* A running `stele serve` owns the journal: go through its socket; else open it here. */
static int
insert_connect(inserter_t *ins, const char *dir)
{
    stele_error_t err = {0};
    int rc = stele_client_connect(dir, NULL, &ins->client, &err);
    if (rc == -ENOENT || rc == -ECONNREFUSED) {
        ins->client = NULL;
        rc = stele_open(dir, ins->opts, &ins->db, &err);
    }
    if (rc != 0) {
        cli_report("insert", rc, &err);
        return cli_exit_for(rc);
    }
    return 0;
}

/* After a close that succeeded, every appended event is durable (close commits and syncs
 * what is queued), even those whose wait a second stop signal cut short: their seqs are
 * printed now. With --wait shipped they are stored but not confirmed shipped: stderr says
 * which, so that nobody inserts them again. */
static void
insert_settle_after_close(inserter_t *ins)
{
    if (ins->count == 0)
        return;
    if (ins->level != STELE_WAIT_SHIPPED) {
        (void)inserter_print(ins, ins->count);
        return;
    }
    fprintf(stderr,
            "stele insert: seqs %" PRIu64 "-%" PRIu64 " (%s %" PRIu64 "-%" PRIu64
            ") are stored but were not confirmed shipped: do not insert them again\n",
            pending_at(ins, 0), pending_at(ins, ins->count - 1), ins->where,
            ins->pending_line[ins->head],
            ins->pending_line[(ins->head + ins->count - 1) % INSERT_PENDING_CAP]);
    ins->head = (ins->head + ins->count) % INSERT_PENDING_CAP;
    ins->count = 0;
}

/* Names the first input line that was not stored, when insert stopped before the end of
 * its input: a re-run starts there. (Through a server, a refusal may leave events sent
 * after it stored or not: the replies printed are what is known.) */
static void
insert_report_resume(const inserter_t *ins, int code)
{
    if (ins->client != NULL || (code != CLI_EXIT_ENGINE && !ins->stop_signo))
        return;
    uint64_t first = ins->count ? ins->pending_line[ins->head] : ins->next_line;
    if (ins->stop_signo)
        fprintf(stderr, "stele insert: stopped by %s\n", strsignal(ins->stop_signo));
    fprintf(stderr, "stele insert: nothing from %s %" PRIu64 " on was stored; re-run from there\n",
            ins->where, first);
}

/* Closes the journal (or the connection). Returns the exit code it turns code into: a
 * failure the run did not report already makes it 3; a warning (code 0, a message) is
 * printed and changes nothing. */
static int
insert_close(inserter_t *ins, int code)
{
    stele_error_t err = {0};
    stele_client_close(ins->client);
    int rc = stele_close(ins->db, &err);
    int had_db = ins->db != NULL;
    ins->db = NULL;
    if (rc == 0 && had_db)
        insert_settle_after_close(ins);
    if (rc == 0 && err.message[0]) {
        fprintf(stderr, "stele insert: warning: %s\n", err.message);
        if (err.hint[0])
            fprintf(stderr, "hint: %s\n", err.hint);
    }
    if (rc != 0 && !(code != 0 && rc == STELE_EHALTED)) /* a halt was reported as it came */
        cli_report("insert", rc, &err);
    return rc != 0 && code == 0 ? CLI_EXIT_ENGINE : code;
}

/* Appends the operands (or stdin's lines), waits for them all, closes. Returns the exit
 * code; a close error or a skipped line turns a success into a failure. */
static int
insert_run(inserter_t *ins, int n_operands, char **operands, int skip_invalid)
{
    uint64_t n_skipped = 0;
    int code;
    if (n_operands > 0)
        code = insert_from_args(ins, n_operands, operands, skip_invalid, &n_skipped);
    else
        code = insert_from_stdin(ins, (size_t)ins->opts->max_record_bytes * INSERT_LINE_FACTOR,
                                 skip_invalid, &n_skipped);
    if (code == 0)
        code = inserter_drain(ins, skip_invalid, &n_skipped);
    else if (ins->client != NULL)
        (void)inserter_drain(ins, skip_invalid, &n_skipped); /* print what was acknowledged */
    code = insert_close(ins, code);
    ins->client = NULL;
    insert_report_resume(ins, code);
    if (code == 0 && n_skipped > 0) {
        fprintf(stderr, "stele insert: %" PRIu64 " invalid line(s) skipped\n", n_skipped);
        code = CLI_EXIT_INVALID;
    }
    return code;
}

int
cmd_insert(int argc, char **argv)
{
    cli_args_t args;
    if (cli_args_begin(&args, "insert", insert_usage, insert_opts, "q") != 0)
        return CLI_EXIT_ENGINE;
    stele_options_t opts;
    stele_options_init(&opts);
    inserter_t *ins = NULL;
    stele_wait_t level = STELE_WAIT_DURABLE;
    int quiet = 0, skip_invalid = 0, first_operand = argc, stop_signo = 0;
    int code = insert_parse(&args, argc, argv, &level, &quiet, &skip_invalid, &first_operand);
    if (code != 0 || args.want_help) {
        if (args.want_help)
            code = cli_print_help(&args);
        goto done;
    }
    code = cli_options_build(&args, &opts);
    if (code != 0)
        goto done;
    if (level == STELE_WAIT_SHIPPED && opts.n_sinks == 0) {
        code = cli_usage_error("insert", "--wait shipped needs a sink: add a [sink NAME] "
                                         "section to the --config file");
        goto done;
    }
    ins = calloc(1, sizeof *ins);
    if (ins == NULL) {
        code = CLI_EXIT_ENGINE;
        goto done;
    }
    ins->command = "insert";
    ins->opts = &opts;
    ins->level = level;
    ins->quiet = quiet;
    ins->flush_before_wait = opts.sync == STELE_SYNC_NEVER && level >= STELE_WAIT_DURABLE;
    /* a closed stdout must not kill us between an append and its wait: report it instead */
    signal(SIGPIPE, SIG_IGN);
    /* Before the library starts its threads, which inherit the mask: a stop signal is then
     * taken by this thread only, between steps. Without a signalfd, signals act as usual. */
    if (stop_signal_begin(&ins->stop) != 0)
        ins->stop.fd = -1;
    code = insert_connect(ins, args.dir);
    if (code == 0)
        code = insert_run(ins, argc - first_operand, argv + first_operand, skip_invalid);
    stop_signal_end(&ins->stop);
    stop_signo = ins->stop_signo;
done:
    free(ins);
    stele_options_release(&opts);
    cli_args_end(&args);
    if (stop_signo)
        stop_signal_reraise(stop_signo);
    return code;
}
