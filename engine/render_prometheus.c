/*
 * render_prometheus.c: stele_status_to_prometheus(), the Prometheus text exposition of a
 * status, shared by `stele status --prometheus` and the `/metrics` endpoint of `stele serve`
 * (serve_metrics.c). Gauges but for the `_total` counters, a `source` label on every
 * sample and a `sink` label on the sinks'. No state, no locks.
 */
#include "stele.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* Prometheus label values escape backslash, double quote and newline. */
static void
prom_label_value(FILE *out, const char *value)
{
    for (const char *p = value; *p; p++) {
        if (*p == '\\' || *p == '"')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else
            fputc(*p, out);
    }
}

/* A metric's header; a name ending in _total is a counter (Prometheus' naming rule). */
static void
prom_header(FILE *out, const char *name, const char *help)
{
    size_t len = strlen(name);
    int is_counter = len > 6 && strcmp(name + len - 6, "_total") == 0;
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
            is_counter ? "counter" : "gauge");
}

static void
prom_metric(FILE *out, const char *name, const char *help, const char *source, const char *sink,
            uint64_t value, int with_header)
{
    if (with_header)
        prom_header(out, name, help);
    fprintf(out, "%s{source=\"", name);
    prom_label_value(out, source);
    if (sink != NULL) {
        fputs("\",sink=\"", out);
        prom_label_value(out, sink);
    }
    fprintf(out, "\"} %" PRIu64 "\n", value);
}

/* Like prom_metric, for a value with a fraction (seconds). */
static void
prom_metric_f(FILE *out, const char *name, const char *help, const char *source, const char *sink,
              double value, int with_header)
{
    if (with_header)
        prom_header(out, name, help);
    fprintf(out, "%s{source=\"", name);
    prom_label_value(out, source);
    fputs("\",sink=\"", out);
    prom_label_value(out, sink);
    fprintf(out, "\"} %.6f\n", value);
}

static void
prom_settings(FILE *out, const stele_status_t *st)
{
    if (st->settings_unix_ms == 0)
        return;
    const char *src = st->source;
    prom_metric(out, "stele_max_journal_bytes", "Journal disk quota in bytes, 0 if none.", src,
                NULL, st->max_journal_bytes, 1);
    prom_metric(out, "stele_on_full_fail", "1 if a full journal fails appends, 0 if it blocks.",
                src, NULL, st->on_full == STELE_ON_FULL_FAIL, 1);
    prom_metric(out, "stele_sync_mode", "Sync mode: 0 always, 1 interval, 2 never.", src, NULL,
                (uint64_t)st->sync, 1);
    prom_metric(out, "stele_sync_interval_milliseconds", "Sync interval for sync=interval.", src,
                NULL, st->sync_interval_ms, 1);
    prom_metric(out, "stele_commit_interval_microseconds", "Longest wait to grow a batch.", src,
                NULL, st->commit_interval_us, 1);
    prom_metric(out, "stele_commit_policy_fixed", "1 for the fixed commit policy, 0 for adaptive.",
                src, NULL, st->commit_policy == STELE_COMMIT_FIXED, 1);
}

static void
prom_status(FILE *out, const stele_status_t *st)
{
    const char *src = st->source;
    prom_metric(out, "stele_writer_pid", "Pid of the process holding the journal, 0 if none.", src,
                NULL, (uint64_t)(st->writer_pid > 0 ? st->writer_pid : 0), 1);
    prom_metric(out, "stele_first_seq", "Oldest record in the journal.", src, NULL, st->first_seq,
                1);
    prom_metric(out, "stele_last_seq", "Last record on disk.", src, NULL, st->last_seq, 1);
    prom_metric(out, "stele_committed_seq", "Last record readers may see.", src, NULL,
                st->committed_seq, 1);
    prom_metric(out, "stele_durable_seq", "Last record fdatasynced.", src, NULL, st->durable_seq,
                1);
    prom_metric(out, "stele_segments", "Segment files.", src, NULL, st->segments, 1);
    prom_metric(out, "stele_disk_bytes", "Bytes allocated by segment files.", src, NULL,
                st->disk_bytes, 1);
    prom_metric(out, "stele_journal_bytes_used", "Bytes the records take in the segment files.",
                src, NULL, st->used_bytes, 1);
    if (st->newest_ts_ns != 0) {
        prom_header(out, "stele_newest_record_timestamp_seconds",
                    "Unix time of the newest record on disk.");
        fputs("stele_newest_record_timestamp_seconds{source=\"", out);
        prom_label_value(out, src);
        fprintf(out, "\"} %.6f\n", (double)st->newest_ts_ns / 1e9);
    }
    prom_settings(out, st);
    size_t n = st->n_sinks < STELE_MAX_SINKS ? st->n_sinks : STELE_MAX_SINKS;
    for (size_t i = 0; i < n; i++)
        prom_metric(out, "stele_sink_shipped_seq", "Last seq acknowledged by the sink.", src,
                    st->sinks[i].name, st->sinks[i].shipped_seq, i == 0);
    for (size_t i = 0; i < n; i++)
        prom_metric(out, "stele_sink_lag_records", "Committed records not yet shipped.", src,
                    st->sinks[i].name, st->sinks[i].lag_records, i == 0);
    for (size_t i = 0; i < n; i++)
        prom_metric(out, "stele_sink_dead_letters", "Records the sink rejected for good.", src,
                    st->sinks[i].name, st->sinks[i].dead_letters, i == 0);
    for (size_t i = 0; i < n; i++)
        prom_metric_f(out, "stele_sink_lag_seconds", "Age of the oldest unshipped record.", src,
                      st->sinks[i].name, st->sinks[i].lag_seconds, i == 0);
    for (size_t i = 0; i < n; i++)
        prom_metric(out, "stele_sink_retries_total",
                    "Retried sink writes since the writer started, as last published.", src,
                    st->sinks[i].name, st->sinks[i].retries, i == 0);
    for (size_t i = 0; i < n; i++)
        prom_metric(out, "stele_sink_batches_total",
                    "Batches the sink acknowledged since the writer started, as last published.",
                    src, st->sinks[i].name, st->sinks[i].batches, i == 0);
    for (size_t i = 0; i < n; i++)
        prom_metric(out, "stele_sink_stopped",
                    "1 if the sink stopped for good (integrity or authentication), else 0.", src,
                    st->sinks[i].name, (uint64_t)(st->sinks[i].is_stopped != 0), i == 0);
    for (size_t i = 0; i < n; i++)
        prom_metric_f(out, "stele_sink_last_error_timestamp_seconds",
                      "Unix time of the sink's last error, 0 if none.", src, st->sinks[i].name,
                      (double)st->sinks[i].last_error_unix_ms / 1000.0, i == 0);
}

int
stele_status_to_prometheus(const stele_status_t *st, char **text_out, size_t *len_out,
                           stele_error_t *err)
{
    if (st == NULL || text_out == NULL)
        return error_set(err, STELE_EINVAL, "stele_status_to_prometheus: NULL argument");
    *text_out = NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (out == NULL)
        return error_set(err, -ENOMEM, "out of memory rendering the metrics");
    prom_status(out, st);
    if (fclose(out) != 0 || text == NULL) {
        free(text);
        return error_set(err, -ENOMEM, "out of memory rendering the metrics");
    }
    *text_out = text;
    if (len_out)
        *len_out = len;
    return 0;
}
