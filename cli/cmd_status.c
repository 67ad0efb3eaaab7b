/*
 * cmd_status.c: `stele status`: the journal's positions and each sink's checkpoint, read with
 * stele_status_read() (read-only, beside a running writer). Text for people, --json (one
 * object, stele_status_to_json()) for scripts, --prometheus for node_exporter's textfile
 * collector. stele_status_t holds no URI, so no credential can be printed: sinks appear by
 * name only, and their last error was scrubbed by the writer before it was published.
 * The quota and sync settings are the live writer's, or the last writer's when none runs.
 */
#include "cmd.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

typedef enum status_format {
    STATUS_TEXT,
    STATUS_JSON,
    STATUS_PROMETHEUS,
} status_format_t;

static const char status_usage[] =
    "usage: stele status [--json|--prometheus] [options]\n"
    "\n"
    "Shows the journal's source, writer, first/last/committed/durable seq, segments and\n"
    "bytes on disk, quota and sync settings (the live writer's, else the last writer's), and\n"
    "each sink's shipped seq, lag (records and seconds), retries, last error and dead letters.\n"
    "\n"
    "      --json             one JSON object\n"
    "      --prometheus       Prometheus text exposition format\n";

enum { OPT_JSON = 1, OPT_PROMETHEUS };

static const struct option status_opts[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"prometheus", no_argument, NULL, OPT_PROMETHEUS},
    {NULL, 0, NULL, 0},
};

static uint64_t
sink_lag(const stele_status_t *st, size_t i)
{
    return st->sinks[i].lag_records;
}

static const char *
sync_name(stele_sync_t sync)
{
    return sync == STELE_SYNC_INTERVAL ? "interval" : sync == STELE_SYNC_NEVER ? "never" : "always";
}

static const char *
policy_name(stele_commit_policy_t policy)
{
    return policy == STELE_COMMIT_FIXED ? "fixed" : "adaptive";
}

static const char *
on_full_name(stele_on_full_t on_full)
{
    return on_full == STELE_ON_FULL_FAIL ? "fail" : "block";
}

/* RFC 3339 UTC with milliseconds into buf. */
static void
format_unix_ms(int64_t unix_ms, char *buf, size_t cap)
{
    time_t secs = (time_t)(unix_ms / 1000);
    struct tm tm;
    char day[32] = "?";
    if (gmtime_r(&secs, &tm) != NULL)
        strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%03dZ", day, (int)(unix_ms % 1000));
}

static void
print_text_settings(const stele_status_t *st)
{
    if (st->settings_unix_ms == 0) {
        printf("settings:  unknown (no writer has published them)\n");
        return;
    }
    const char *whose = st->writer_pid != 0 ? "writer's" : "last writer's";
    if (st->max_journal_bytes == 0)
        printf("quota:     none (%s)\n", whose);
    else
        printf("quota:     %.1f MiB, on full: %s (%s)\n",
               (double)st->max_journal_bytes / (1024.0 * 1024.0), on_full_name(st->on_full), whose);
    printf("sync:      %s", sync_name(st->sync));
    if (st->sync == STELE_SYNC_INTERVAL)
        printf(" every %" PRIu32 " ms", st->sync_interval_ms);
    printf(", commit %s, interval %" PRIu32 " us (%s)\n", policy_name(st->commit_policy),
           st->commit_interval_us, whose);
}

static void
print_text(const char *dir, const stele_status_t *st)
{
    printf("journal:   %s\n", dir);
    printf("source:    %s\n", st->source);
    printf("format:    %" PRIu32 "\n", st->format_version);
    if (st->writer_pid != 0)
        printf("writer:    pid %d\n", st->writer_pid);
    else
        printf("writer:    none\n");
    printf("first seq: %" PRIu64 "\n", st->first_seq);
    printf("last seq:  %" PRIu64 "\n", st->last_seq);
    printf("committed: %" PRIu64 "\n", st->committed_seq);
    printf("durable:   %" PRIu64 "\n", st->durable_seq);
    printf("segments:  %" PRIu64 " (%.1f MiB on disk, %" PRIu64 " bytes used)\n", st->segments,
           (double)st->disk_bytes / (1024.0 * 1024.0), st->used_bytes);
    if (st->newest_ts_ns != 0) {
        char when[48];
        format_unix_ms(st->newest_ts_ns / 1000000, when, sizeof when);
        printf("newest:    %s\n", when);
    }
    print_text_settings(st);
    for (size_t i = 0; i < st->n_sinks && i < STELE_MAX_SINKS; i++) {
        printf("sink %s: shipped %" PRIu64 ", lag %" PRIu64 " records (%.3f s), %" PRIu64
               " retries, %" PRIu64 " dead letters%s\n",
               st->sinks[i].name, st->sinks[i].shipped_seq, sink_lag(st, i),
               st->sinks[i].lag_seconds, st->sinks[i].retries, st->sinks[i].dead_letters,
               st->sinks[i].is_stopped ? ", stopped" : "");
        if (st->sinks[i].destination[0])
            printf("  destination %s\n", st->sinks[i].destination);
        if (st->sinks[i].last_error_unix_ms != 0) {
            char when[48];
            format_unix_ms(st->sinks[i].last_error_unix_ms, when, sizeof when);
            printf("  last error %s: %s\n", when, st->sinks[i].last_error);
        }
    }
}

/* Returns 0, or the code of stele_status_to_json() with *err filled. */
static int
print_json(const char *dir, const stele_status_t *st, stele_error_t *err)
{
    char *json = NULL;
    int rc = stele_status_to_json(dir, st, &json, NULL, err);
    if (rc == 0)
        puts(json);
    stele_json_free(json);
    return rc;
}

/* Returns 0, or the code of stele_status_to_prometheus() with *err filled. */
static int
print_prometheus(const stele_status_t *st, stele_error_t *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc = stele_status_to_prometheus(st, &text, &len, err);
    if (rc == 0)
        fwrite(text, 1, len, stdout);
    stele_json_free(text);
    return rc;
}

int
cmd_status(int argc, char **argv)
{
    cli_args_t args;
    if (cli_args_begin(&args, "status", status_usage, status_opts, "") != 0)
        return CLI_EXIT_ENGINE;
    status_format_t format = STATUS_TEXT;
    unsigned formats_seen = 0;
    int code = 0, first_operand = argc;
    stele_options_t opts; /* for allow_unsafe_dir */
    stele_options_init(&opts);
    const char *arg;
    int c;
    while (code == 0 && (c = cli_args_next(&args, argc, argv, &arg, &first_operand)) != -1) {
        if (c == OPT_JSON || c == OPT_PROMETHEUS) {
            format = (c == OPT_JSON) ? STATUS_JSON : STATUS_PROMETHEUS;
            formats_seen |= 1u << (c == OPT_JSON);
        } else {
            code = CLI_EXIT_USAGE;
        }
    }
    if (code != 0)
        goto done;
    if (args.want_help) {
        code = cli_print_help(&args);
        goto done;
    }
    if (formats_seen == 3u) {
        code = cli_usage_error("status", "--json and --prometheus exclude each other");
        goto done;
    }
    if (first_operand < argc) {
        code = cli_usage_error("status", "unexpected argument '%s'", argv[first_operand]);
        goto done;
    }
    code = cli_options_build(&args, &opts);
    if (code != 0)
        goto done;
    stele_status_t st;
    stele_error_t err = {0};
    int rc = stele_status_read_opts(args.dir, &opts, &st, &err);
    if (rc != 0) {
        cli_report("status", rc, &err);
        code = cli_exit_for(rc);
        goto done;
    }
    if (format == STATUS_JSON && (rc = print_json(args.dir, &st, &err)) != 0) {
        cli_report("status", rc, &err);
        code = cli_exit_for(rc);
    } else if (format == STATUS_PROMETHEUS && (rc = print_prometheus(&st, &err)) != 0) {
        cli_report("status", rc, &err);
        code = cli_exit_for(rc);
    } else if (format == STATUS_TEXT) {
        print_text(args.dir, &st);
    }
    if (code == CLI_EXIT_OK)
        code = cli_stdout_done("status");
done:
    stele_options_release(&opts);
    cli_args_end(&args);
    return code;
}
