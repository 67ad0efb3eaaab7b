/*
 * bench_output.c: how a result is printed: one JSON object per line (--json, and the sweep's
 * .jsonl file), CSV rows (the sweep's .csv, which the plots read), and the readable table.
 * The JSON keys and CSV columns are the interface scripts rely on: add, never rename.
 */
#include "bench.h"

#include <string.h>

#include <bson/bson.h>

const char *
bench_sync_name(stele_sync_t s)
{
    switch (s) {
    case STELE_SYNC_ALWAYS:
        return "always";
    case STELE_SYNC_INTERVAL:
        return "interval";
    case STELE_SYNC_NEVER:
        return "never";
    }
    return "?";
}

const char *
bench_wait_name(stele_wait_t w)
{
    switch (w) {
    case STELE_WAIT_NONE:
        return "none";
    case STELE_WAIT_WRITTEN:
        return "written";
    case STELE_WAIT_DURABLE:
        return "durable";
    case STELE_WAIT_SHIPPED:
        return "shipped";
    }
    return "?";
}

const char *
bench_policy_name(stele_commit_policy_t p)
{
    return p == STELE_COMMIT_FIXED ? "fixed" : "adaptive";
}

const char *
bench_input_name(bench_input_t in)
{
    return in == BENCH_INPUT_BSON ? "bson" : "json";
}

static const char *
output_status_name(bench_status_t s)
{
    return s == BENCH_OK ? "ok" : s == BENCH_SKIPPED ? "skipped" : "failed";
}

/* Bytes in the UTF-8 sequence that starts with c (1 for a byte no sequence starts with). */
static size_t
output_utf8_length(unsigned char c)
{
    return c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
}

/* Writes s as a JSON string (quotes and control characters escaped). JSON is UTF-8: a byte
 * that does not start a valid sequence (a note cut in the middle of a character, a peer's
 * message in another encoding) becomes U+FFFD, as libbson judges the sequence. */
static void
output_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    while (*s) {
        unsigned char c = (unsigned char)*s;
        size_t n = c < 0x80 ? 1 : output_utf8_length(c);
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else if (c < 0x80)
            fputc(c, out);
        else if (n > 1 && strnlen(s, n) == n && bson_utf8_validate(s, n, false))
            fwrite(s, 1, n, out);
        else {
            fputs("\\ufffd", out);
            n = 1;
        }
        s += n;
    }
    fputc('"', out);
}

void
bench_print_json(FILE *out, const bench_result_t *r)
{
    const bench_cell_t *c = &r->cell;
    fprintf(out, "{\"system\":");
    output_json_string(out, c->system);
    fprintf(out, ",\"device\":");
    output_json_string(out, c->device);
    fprintf(out,
            ",\"status\":\"%s\",\"durable\":%s,\"writers\":%d,\"seconds\":%.3f,"
            "\"sync\":\"%s\",\"wait\":\"%s\",\"commit_policy\":\"%s\","
            "\"commit_interval_us\":%u,\"record_bytes\":%u,\"input\":\"%s\","
            "\"appends\":%llu,\"errors\":%llu,\"elapsed_s\":%.3f,\"appends_per_s\":%.1f,"
            "\"mb_per_s\":%.3f,\"syncs\":%llu,\"syncs_per_s\":%.1f,\"mean_batch\":%.2f,"
            "\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,"
            "\"counted_back\":%lld,\"ref_appends_per_s\":%.1f,\"ref_p99_us\":%.1f,"
            "\"warmup_s\":%.3f,\"warmup_appends\":%llu,"
            "\"data_path\":",
            output_status_name(r->status), r->is_durable ? "true" : "false", c->writers, c->seconds,
            bench_sync_name(c->sync), bench_wait_name(c->wait), bench_policy_name(c->policy),
            c->commit_interval_us, c->record_bytes, bench_input_name(c->input),
            (unsigned long long)r->appends, (unsigned long long)r->errors, r->elapsed_s,
            r->appends_per_s, r->mb_per_s, (unsigned long long)r->syncs, r->syncs_per_s,
            r->mean_batch, r->p50_us, r->p99_us, r->p999_us, r->max_us, (long long)r->counted_back,
            r->ref_appends_per_s, r->ref_p99_us, c->warmup_seconds,
            (unsigned long long)r->warmup_appends);
    output_json_string(out, r->data_path);
    fprintf(out, ",\"note\":");
    output_json_string(out, r->note);
    fprintf(out, "}\n");
    fflush(out);
}

void
bench_print_csv_header(FILE *out)
{
    fprintf(out, "system,device,status,durable,writers,seconds,sync,wait,commit_policy,"
                 "commit_interval_us,record_bytes,input,appends,errors,elapsed_s,appends_per_s,"
                 "mb_per_s,syncs,syncs_per_s,mean_batch,p50_us,p99_us,p999_us,max_us,"
                 "counted_back,note\n");
}

void
bench_print_csv(FILE *out, const bench_result_t *r)
{
    const bench_cell_t *c = &r->cell;
    fprintf(out,
            "%s,%s,%s,%d,%d,%.3f,%s,%s,%s,%u,%u,%s,%llu,%llu,%.3f,%.1f,%.3f,%llu,%.1f,%.2f,"
            "%.1f,%.1f,%.1f,%.1f,%lld,\"",
            c->system, c->device, output_status_name(r->status), r->is_durable, c->writers,
            c->seconds, bench_sync_name(c->sync), bench_wait_name(c->wait),
            bench_policy_name(c->policy), c->commit_interval_us, c->record_bytes,
            bench_input_name(c->input), (unsigned long long)r->appends,
            (unsigned long long)r->errors, r->elapsed_s, r->appends_per_s, r->mb_per_s,
            (unsigned long long)r->syncs, r->syncs_per_s, r->mean_batch, r->p50_us, r->p99_us,
            r->p999_us, r->max_us, (long long)r->counted_back);
    for (const char *s = r->note; *s; s++)
        fputc(*s == '"' ? '\'' : *s, out);
    fprintf(out, "\"\n");
    fflush(out);
}

void
bench_print_table_header(FILE *out)
{
    fprintf(out, "%-20s %-13s %5s %7s %-8s %-7s %-4s %6s %12s %8s %9s %8s %9s %9s %9s  %s\n",
            "system", "device", "wr", "ci_us", "sync", "wait", "in", "bytes", "appends/s", "MB/s",
            "syncs/s", "batch", "p50_us", "p99_us", "p99.9_us", "note");
    fflush(out);
}

void
bench_print_table_row(FILE *out, const bench_result_t *r)
{
    const bench_cell_t *c = &r->cell;
    char note[BENCH_NOTE_BYTES + 96];
    char ratio[64] = "";
    if (r->ref_appends_per_s > 0 && r->ref_p99_us > 0 && r->is_durable)
        snprintf(ratio, sizeof ratio, "%.2fx loop rate, p99 %.2fx loop; ",
                 r->appends_per_s / r->ref_appends_per_s, r->p99_us / r->ref_p99_us);
    if (r->status != BENCH_OK)
        snprintf(note, sizeof note, "%s: %s", output_status_name(r->status), r->note);
    else
        snprintf(note, sizeof note, "%s%s%s", r->is_durable ? "" : "NOT DURABLE; ", ratio, r->note);
    char system[BENCH_NAME_BYTES + 8];
    snprintf(system, sizeof system, "%s%s", c->system,
             c->policy == STELE_COMMIT_FIXED && bench_system_is_stele(c->system) ? "(fixed)" : "");
    if (r->status != BENCH_OK) {
        fprintf(out, "%-20s %-13s %5d %7u %-8s %-7s %-4s %6u %12s %8s %9s %8s %9s %9s %9s  %s\n",
                system, c->device, c->writers, c->commit_interval_us, bench_sync_name(c->sync),
                bench_wait_name(c->wait), bench_input_name(c->input), c->record_bytes, "-", "-",
                "-", "-", "-", "-", "-", note);
        return;
    }
    char batch[16] = "-";
    if (r->mean_batch > 0)
        snprintf(batch, sizeof batch, "%.1f", r->mean_batch);
    /* Peers have no stele knobs, and some cannot tell their syncs: show "-" there. */
    int is_stele = bench_system_is_stele(c->system);
    char ci[16] = "-", syncs[24] = "-";
    if (is_stele)
        snprintf(ci, sizeof ci, "%u", c->commit_interval_us);
    if (is_stele || r->syncs > 0)
        snprintf(syncs, sizeof syncs, "%.0f", r->syncs_per_s);
    char lat[3][16];
    const double lat_us[3] = {r->p50_us, r->p99_us, r->p999_us};
    for (int k = 0; k < 3; k++) /* sub-10 us latencies (wait=none) keep a decimal */
        snprintf(lat[k], sizeof lat[k], lat_us[k] < 10 ? "%.1f" : "%.0f", lat_us[k]);
    fprintf(out, "%-20s %-13s %5d %7s %-8s %-7s %-4s %6u %12.0f %8.2f %9s %8s %9s %9s %9s  %s\n",
            system, c->device, c->writers, ci, is_stele ? bench_sync_name(c->sync) : "-",
            is_stele ? bench_wait_name(c->wait) : "-",
            is_stele ? bench_input_name(c->input) : "json", c->record_bytes, r->appends_per_s,
            r->mb_per_s, syncs, batch, lat[0], lat[1], lat[2], note);
    fflush(out);
}

int
bench_system_is_stele(const char *system)
{
    return strcmp(system, "stele") == 0 || strcmp(system, "stele-signed") == 0;
}
