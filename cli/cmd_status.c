/*
 * cmd_status.c: `stele status`: the journal's positions and each sink's checkpoint, read with
 * stele_status_read() (read-only, beside a running writer). Text for people, --json (one
 * object, built with libbson) for scripts, --prometheus for node_exporter's textfile
 * collector. stele_status_t holds no URI, so no credential can be printed: sinks appear by
 * name only.
 */
#include "cmd.h"

#include <bson/bson.h>
#include <inttypes.h>
#include <string.h>

typedef enum status_format {
    STATUS_TEXT,
    STATUS_JSON,
    STATUS_PROMETHEUS,
} status_format_t;

static const char status_usage[] =
    "usage: stele status [--json|--prometheus] [options]\n"
    "\n"
    "Shows the journal's source, writer, first/last/committed/durable seq, segments and\n"
    "bytes on disk, and each sink's shipped seq, lag and dead letters.\n"
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
    uint64_t shipped = st->sinks[i].shipped_seq;
    return st->committed_seq > shipped ? st->committed_seq - shipped : 0;
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
    printf("segments:  %" PRIu64 " (%.1f MiB on disk)\n", st->segments,
           (double)st->disk_bytes / (1024.0 * 1024.0));
    for (size_t i = 0; i < st->n_sinks && i < STELE_MAX_SINKS; i++) {
        printf("sink %s: shipped %" PRIu64 ", lag %" PRIu64 " records, %" PRIu64 " dead letters\n",
               st->sinks[i].name, st->sinks[i].shipped_seq, sink_lag(st, i),
               st->sinks[i].dead_letters);
    }
}

static int
print_json(const char *dir, const stele_status_t *st)
{
    bson_t doc = BSON_INITIALIZER, sinks, sink;
    BSON_APPEND_UTF8(&doc, "dir", dir);
    BSON_APPEND_UTF8(&doc, "source", st->source);
    BSON_APPEND_INT32(&doc, "format_version", (int32_t)st->format_version);
    BSON_APPEND_INT32(&doc, "writer_pid", st->writer_pid);
    BSON_APPEND_INT64(&doc, "first_seq", (int64_t)st->first_seq);
    BSON_APPEND_INT64(&doc, "last_seq", (int64_t)st->last_seq);
    BSON_APPEND_INT64(&doc, "committed_seq", (int64_t)st->committed_seq);
    BSON_APPEND_INT64(&doc, "durable_seq", (int64_t)st->durable_seq);
    BSON_APPEND_INT64(&doc, "segments", (int64_t)st->segments);
    BSON_APPEND_INT64(&doc, "disk_bytes", (int64_t)st->disk_bytes);
    BSON_APPEND_ARRAY_BEGIN(&doc, "sinks", &sinks);
    for (size_t i = 0; i < st->n_sinks && i < STELE_MAX_SINKS; i++) {
        char key[16];
        const char *key_ptr;
        bson_uint32_to_string((uint32_t)i, &key_ptr, key, sizeof key);
        bson_append_document_begin(&sinks, key_ptr, -1, &sink);
        BSON_APPEND_UTF8(&sink, "name", st->sinks[i].name);
        BSON_APPEND_INT64(&sink, "shipped_seq", (int64_t)st->sinks[i].shipped_seq);
        BSON_APPEND_INT64(&sink, "lag_records", (int64_t)sink_lag(st, i));
        BSON_APPEND_INT64(&sink, "dead_letters", (int64_t)st->sinks[i].dead_letters);
        bson_append_document_end(&sinks, &sink);
    }
    bson_append_array_end(&doc, &sinks);
    char *json = bson_as_relaxed_extended_json(&doc, NULL);
    bson_destroy(&doc);
    if (json == NULL)
        return -1;
    puts(json);
    bson_free(json);
    return 0;
}

/* Prometheus label values escape backslash, double quote and newline. */
static void
print_label_value(const char *value)
{
    for (const char *p = value; *p; p++) {
        if (*p == '\\' || *p == '"')
            printf("\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", stdout);
        else
            putchar(*p);
    }
}

static void
print_metric(const char *name, const char *help, const char *source, const char *sink,
             uint64_t value, int with_header)
{
    if (with_header)
        printf("# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    printf("%s{source=\"", name);
    print_label_value(source);
    if (sink != NULL) {
        fputs("\",sink=\"", stdout);
        print_label_value(sink);
    }
    printf("\"} %" PRIu64 "\n", value);
}

static void
print_prometheus(const stele_status_t *st)
{
    const char *src = st->source;
    print_metric("stele_writer_pid", "Pid of the process holding the journal, 0 if none.", src,
                 NULL, (uint64_t)(st->writer_pid > 0 ? st->writer_pid : 0), 1);
    print_metric("stele_first_seq", "Oldest record in the journal.", src, NULL, st->first_seq, 1);
    print_metric("stele_last_seq", "Last record on disk.", src, NULL, st->last_seq, 1);
    print_metric("stele_committed_seq", "Last record readers may see.", src, NULL,
                 st->committed_seq, 1);
    print_metric("stele_durable_seq", "Last record fdatasynced.", src, NULL, st->durable_seq, 1);
    print_metric("stele_segments", "Segment files.", src, NULL, st->segments, 1);
    print_metric("stele_disk_bytes", "Bytes allocated by segment files.", src, NULL, st->disk_bytes,
                 1);
    size_t n = st->n_sinks < STELE_MAX_SINKS ? st->n_sinks : STELE_MAX_SINKS;
    for (size_t i = 0; i < n; i++)
        print_metric("stele_sink_shipped_seq", "Last seq acknowledged by the sink.", src,
                     st->sinks[i].name, st->sinks[i].shipped_seq, i == 0);
    for (size_t i = 0; i < n; i++)
        print_metric("stele_sink_lag_records", "Committed records not yet shipped.", src,
                     st->sinks[i].name, sink_lag(st, i), i == 0);
    for (size_t i = 0; i < n; i++)
        print_metric("stele_sink_dead_letters", "Records the sink rejected for good.", src,
                     st->sinks[i].name, st->sinks[i].dead_letters, i == 0);
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
        cli_print_help(&args, stdout);
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
    stele_status_t st;
    stele_error_t err = {0};
    int rc = stele_status_read(args.dir, &st, &err);
    if (rc != 0) {
        cli_report("status", rc, &err);
        code = cli_exit_for(rc);
        goto done;
    }
    if (format == STATUS_JSON && print_json(args.dir, &st) != 0) {
        fprintf(stderr, "stele status: journal strings are not valid UTF-8\n");
        code = CLI_EXIT_INVALID;
    } else if (format == STATUS_PROMETHEUS) {
        print_prometheus(&st);
    } else if (format == STATUS_TEXT) {
        print_text(args.dir, &st);
    }
    if (fflush(stdout) != 0)
        code = CLI_EXIT_ENGINE;
done:
    cli_args_end(&args);
    return code;
}
