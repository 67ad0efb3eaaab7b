/*
 * cmd_verify.c: `stele verify`: runs stele_verify() (CRCs, hash chain, seq contiguity, index
 * against segments) over [--from, --to], read-only, beside a running writer; with --trust
 * PUB, stele_verify_trusted() over the whole journal instead (the key chain from the anchor,
 * every signed checkpoint and its Merkle root, retention points, the unsealed tail).
 * With --mongo it then compares the sink's collection with the journal through
 * stele_remote_check() (missing, extra and mismatching seqs, reported as ranges).
 * Exit 0 when everything holds, 2 with the first bad seq and why on stderr, 1 for usage
 * errors (a public key file that is not one included), 3 when the check could not run.
 */
#include "cmd.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char verify_usage[] =
    "usage: stele verify [--from SEQ] [--to SEQ] [--trust PUB [--require-sealed]]\n"
    "                    [--mongo URI [--db NAME] [--collection NAME]] [options]\n"
    "\n"
    "Checks every frame's CRC, the hash chain, seq contiguity and the index against the\n"
    "segments. Exit 0 when all holds, 2 when anything fails (first bad seq on stderr).\n"
    "\n"
    "      --from SEQ         first seq to check (default: the oldest)\n"
    "      --to SEQ           last seq to check (default: the newest)\n"
    "      --trust PUB        also check the signatures against the public key file PUB\n"
    "                         (stele keygen --pub): key chain, checkpoints, Merkle roots,\n"
    "                         retention; the whole journal\n"
    "      --require-sealed   with --trust: records past the newest checkpoint fail too\n"
    "      --mongo URI        also compare the MongoDB copy with the "
    "journal\n" CLI_MONGO_NAMES_USAGE;

enum { OPT_FROM = 1, OPT_TO, OPT_TRUST, OPT_REQUIRE_SEALED };

static const struct option verify_opts[] = {
    {"from", required_argument, NULL, OPT_FROM},
    {"to", required_argument, NULL, OPT_TO},
    {"trust", required_argument, NULL, OPT_TRUST},
    {"require-sealed", no_argument, NULL, OPT_REQUIRE_SEALED},
    CLI_MONGO_OPTIONS,
    {NULL, 0, NULL, 0},
};

typedef struct verify_query {
    uint64_t from_seq, to_seq; /* 0: open end */
    const char *trust_path;    /* --trust: the anchor's public key file */
    int require_sealed;
    cli_mongo_t mongo; /* sink.uri NULL: no remote check */
} verify_query_t;

static int
verify_parse(cli_args_t *args, int argc, char **argv, verify_query_t *q)
{
    const char *arg;
    int c, first_operand = argc;
    while ((c = cli_args_next(args, argc, argv, &arg, &first_operand)) != -1) {
        int taken = cli_mongo_take(&q->mongo, "verify", c, arg);
        if (taken != CLI_MONGO_NOT_MINE) {
            if (taken != 0)
                return taken;
            continue;
        }
        switch (c) {
        case OPT_FROM:
        case OPT_TO: {
            uint64_t *seq = (c == OPT_FROM) ? &q->from_seq : &q->to_seq;
            if (cli_parse_u64(arg, seq) != 0 || *seq == 0)
                return cli_usage_error("verify", "%s '%s' is not a seq (1 or more)",
                                       c == OPT_FROM ? "--from" : "--to", arg);
            break;
        }
        case OPT_TRUST:
            q->trust_path = arg;
            break;
        case OPT_REQUIRE_SEALED:
            q->require_sealed = 1;
            break;
        default:
            return CLI_EXIT_USAGE;
        }
    }
    if (args->want_help)
        return 0;
    if (q->trust_path && (q->from_seq || q->to_seq))
        return cli_usage_error("verify", "--trust checks the whole journal: drop --from/--to");
    if (q->require_sealed && !q->trust_path)
        return cli_usage_error("verify", "--require-sealed needs --trust PUB");
    if (first_operand < argc)
        return cli_usage_error("verify", "unexpected argument '%s'", argv[first_operand]);
    if (q->from_seq != 0 && q->to_seq != 0 && q->to_seq < q->from_seq)
        return cli_usage_error("verify", "--to %" PRIu64 " is before --from %" PRIu64, q->to_seq,
                               q->from_seq);
    return cli_mongo_check(&q->mongo, "verify", 0);
}

static void
print_ranges(const char *what, uint64_t n, const stele_seq_range_t *ranges, size_t n_ranges)
{
    if (n == 0)
        return;
    fprintf(stderr, "stele verify: %" PRIu64 " %s:", n, what);
    size_t shown = n_ranges < STELE_REMOTE_MAX_RANGES ? n_ranges : STELE_REMOTE_MAX_RANGES;
    for (size_t i = 0; i < shown; i++) {
        if (ranges[i].first_seq == ranges[i].last_seq)
            fprintf(stderr, " %" PRIu64, ranges[i].first_seq);
        else
            fprintf(stderr, " %" PRIu64 "-%" PRIu64, ranges[i].first_seq, ranges[i].last_seq);
    }
    fprintf(stderr, "%s\n", n_ranges > shown ? " ..." : "");
}

/* The --mongo part: the remote copy against the journal. */
static int
verify_remote(const cli_args_t *args, const verify_query_t *q)
{
    stele_remote_report_t *report = calloc(1, sizeof *report);
    if (report == NULL)
        return CLI_EXIT_ENGINE;
    stele_error_t err = {0};
    int code = CLI_EXIT_OK;
    int rc = stele_remote_check(args->dir, &q->mongo.sink, q->from_seq, q->to_seq, report, &err);
    if (rc == 0) {
        printf("ok: remote copy matches, %" PRIu64 " records and %" PRIu64
               " documents compared (seq %" PRIu64 "..%" PRIu64 ")\n",
               report->records_checked, report->docs_checked, report->from_seq, report->to_seq);
    } else if (rc == STELE_EINTEGRITY) {
        print_ranges("missing from the remote copy", report->n_missing, report->missing,
                     report->n_missing_ranges);
        print_ranges("extra in the remote copy", report->n_extra, report->extra,
                     report->n_extra_ranges);
        print_ranges("mismatching the journal", report->n_mismatched, report->mismatched,
                     report->n_mismatched_ranges);
        fputs("hint: \"stele ship --from SEQ --to SEQ\" re-ships missing records\n", stderr);
        code = CLI_EXIT_INVALID;
    } else {
        cli_report("verify", rc, &err);
        code = cli_exit_for(rc);
    }
    free(report);
    return code;
}

/* What --trust adds to "ok": how far the signatures reach. */
static void
print_trust(const stele_verify_report_t *r)
{
    printf("sealed: seq 1..%" PRIu64 " under %" PRIu64 " signed statements (key epoch %" PRIu64
           ")%s\n",
           r->sealed_seq, r->statements_checked, r->key_epoch,
           r->is_closed ? ", closed cleanly" : "");
    if (r->retention_first_seq)
        printf("retention: records before seq %" PRIu64 " deleted under a signed checkpoint\n",
               r->retention_first_seq);
    if (r->unsealed_first_seq) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t age_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec - r->unsealed_since_ns;
        printf("unsealed tail: seq %" PRIu64 "..%" PRIu64 " (oldest %.1f s old)\n",
               r->unsealed_first_seq, r->unsealed_last_seq, (double)age_ns / 1e9);
    }
}

/* Runs the local check the flags ask for; *report filled. */
static int
verify_local(const cli_args_t *args, const stele_options_t *opts, const verify_query_t *q,
             stele_verify_report_t *report, stele_error_t *err)
{
    if (q->trust_path)
        return stele_verify_trusted(args->dir, opts, q->trust_path,
                                    q->require_sealed ? STELE_VERIFY_REQUIRE_SEALED : 0, report,
                                    err);
    return stele_verify_opts(args->dir, opts, q->from_seq, q->to_seq, report, err);
}

int
cmd_verify(int argc, char **argv)
{
    cli_args_t args;
    if (cli_args_begin(&args, "verify", verify_usage, verify_opts, "") != 0)
        return CLI_EXIT_ENGINE;
    verify_query_t q = {0};
    cli_mongo_init(&q.mongo);
    stele_options_t opts; /* for allow_unsafe_dir */
    stele_options_init(&opts);
    int code = verify_parse(&args, argc, argv, &q);
    if (code != 0 || args.want_help) {
        if (code == 0)
            code = cli_print_help(&args);
        goto done;
    }
    code = cli_options_build(&args, &opts);
    if (code != 0)
        goto done;
    stele_verify_report_t report;
    memset(&report, 0, sizeof report);
    stele_error_t err = {0};
    int rc = verify_local(&args, &opts, &q, &report, &err);
    if (rc == 0) {
        printf("ok: %" PRIu64 " records checked (seq %" PRIu64 "..%" PRIu64 ")\n",
               report.records_checked, report.first_seq, report.last_seq);
        if (q.trust_path)
            print_trust(&report);
    } else if (rc == STELE_ECORRUPT && report.bad_seq != 0 && !report.bad_segment[0]) {
        fprintf(stderr,
                "stele verify: failed at seq %" PRIu64 ": %s\n"
                "hint: back up the journal directory before any repair\n",
                report.bad_seq, report.what);
        code = CLI_EXIT_INVALID;
    } else if (rc == STELE_ECORRUPT && report.bad_seq != 0) {
        fprintf(stderr,
                "stele verify: failed at seq %" PRIu64 " (segment %s, offset %" PRIu64 "): %s\n"
                "hint: back up the journal directory before any repair\n",
                report.bad_seq, report.bad_segment, report.bad_offset, report.what);
        code = CLI_EXIT_INVALID;
    } else if (rc == STELE_ECORRUPT) {
        fprintf(stderr, "stele verify: failed (segment %s, offset %" PRIu64 "): %s\n",
                report.bad_segment, report.bad_offset, report.what[0] ? report.what : err.message);
        code = CLI_EXIT_INVALID;
    } else {
        cli_report("verify", rc, &err);
        code = cli_exit_for(rc) == CLI_EXIT_OK ? CLI_EXIT_ENGINE : cli_exit_for(rc);
    }
    if (code == 0 && q.mongo.sink.uri != NULL)
        code = verify_remote(&args, &q);
    if (code == 0)
        code = cli_stdout_done("verify");
done:
    stele_options_release(&opts);
    cli_args_end(&args);
    return code;
}
