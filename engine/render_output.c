/*
 * render_output.c: the public JSON output calls (stele.h, "JSON output"): a record as the
 * line `stele tail` prints (its origin included), an event alone, the `stele status --json`
 * object and a `stele ship --dead-letters` line. Owns the field names and order of those objects,
 * which scripts read, so they change only here; the writing itself is render.c's and
 * render_bson.c's. Pure functions of their arguments; no state, no locks.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "render.h"

#define NS_PER_US INT64_C(1000)
#define MS_PER_SEC INT64_C(1000)
#define US_PER_MS INT64_C(1000)

void
render_time_ns(render_buf_t *b, int64_t ts_ns)
{
    int64_t rem_ns;
    int64_t sec = clock_floor_s(ts_ns, &rem_ns);
    render_time(b, sec, rem_ns / NS_PER_US, 6);
}

/* A time in milliseconds as RFC 3339 UTC with `frac_digits` (3: ms, 6: us) of fraction. */
static void
render_time_ms(render_buf_t *b, int64_t unix_ms, int frac_digits)
{
    int64_t sec = unix_ms / MS_PER_SEC;
    int64_t rem_ms = unix_ms % MS_PER_SEC;
    if (rem_ms < 0) {
        rem_ms += MS_PER_SEC;
        sec--;
    }
    render_time(b, sec, frac_digits == 6 ? rem_ms * US_PER_MS : rem_ms, frac_digits);
}

/* The length of `text` (at most `cap` bytes) without an unfinished UTF-8 sequence at its
 * end: a fixed-size field holding a server's message cut to its size (a dead letter's
 * reason, a sink's last error) may end inside a character. Anything else that is not UTF-8
 * is left for render_string to refuse. */
static size_t
render_whole_utf8_len(const char *text, size_t cap)
{
    size_t len = strnlen(text, cap);
    size_t lead = len;
    while (lead > 0 && len - lead < 3 && ((unsigned char)text[lead - 1] & 0xc0) == 0x80)
        lead--;
    if (lead == 0)
        return len;
    unsigned char c = (unsigned char)text[lead - 1];
    size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    return c >= 0xc0 && len - (lead - 1) < need ? lead - 1 : len;
}

/* A NUL-terminated string of a fixed-size field (never read past `cap`). */
static void
render_field_text(render_buf_t *b, const char *key, const char *text, size_t cap)
{
    render_key(b, key);
    render_string(b, text, render_whole_utf8_len(text, cap));
}

/* The record's origin object, {"kind":…,"uid":…,"gid":…,"pid":…}; nothing when it is
 * unknown (a version 1 journal, a document shipped without one). */
static void
render_origin(render_buf_t *b, const stele_origin_t *o)
{
    const char *kind = stele_origin_kind_name(o->kind);
    if (o->kind == STELE_ORIGIN_UNKNOWN || kind == NULL)
        return;
    render_key(b, "origin");
    render_object_begin(b);
    render_key(b, "kind");
    render_string(b, kind, strlen(kind));
    render_key(b, "uid");
    render_uint64(b, o->uid);
    render_key(b, "gid");
    render_uint64(b, o->gid);
    render_key(b, "pid");
    render_uint64(b, o->pid);
    render_object_end(b);
}

int
stele_record_to_json(const stele_record_t *rec, const char *source, char **json_out,
                     size_t *len_out, stele_error_t *err)
{
    if (rec == NULL || source == NULL || json_out == NULL)
        return error_set(err, STELE_EINVAL, "stele_record_to_json: NULL argument");
    render_buf_t b;
    render_init(&b);
    render_object_begin(&b);
    render_key(&b, "seq");
    render_uint64(&b, rec->seq);
    render_key(&b, "ts");
    render_time_ns(&b, rec->ts_ns);
    render_key(&b, "src");
    render_string(&b, source, strlen(source));
    render_origin(&b, &rec->origin);
    render_key(&b, "event");
    render_bson(&b, rec->bson, rec->bson_len);
    render_object_end(&b);
    return render_finish(&b, "record", json_out, len_out, err);
}

int
stele_event_to_json(const uint8_t *bson, size_t bson_len, char **json_out, size_t *len_out,
                    stele_error_t *err)
{
    if (bson == NULL || json_out == NULL)
        return error_set(err, STELE_EINVAL, "stele_event_to_json: NULL argument");
    render_buf_t b;
    render_init(&b);
    render_bson(&b, bson, bson_len);
    return render_finish(&b, "event", json_out, len_out, err);
}

static const char *
render_sync_name(stele_sync_t sync)
{
    return sync == STELE_SYNC_INTERVAL ? "interval" : sync == STELE_SYNC_NEVER ? "never" : "always";
}

static void
render_status_settings(render_buf_t *b, const stele_status_t *st)
{
    render_key(b, "settings");
    render_object_begin(b);
    render_key(b, "live");
    render_bool(b, st->writer_pid != 0);
    render_key(b, "sync");
    render_string(b, render_sync_name(st->sync), strlen(render_sync_name(st->sync)));
    render_key(b, "sync_interval_ms");
    render_uint64(b, st->sync_interval_ms);
    render_key(b, "commit_interval_us");
    render_uint64(b, st->commit_interval_us);
    const char *policy = st->commit_policy == STELE_COMMIT_FIXED ? "fixed" : "adaptive";
    render_key(b, "commit_policy");
    render_string(b, policy, strlen(policy));
    render_key(b, "max_journal_bytes");
    render_uint64(b, st->max_journal_bytes);
    const char *on_full = st->on_full == STELE_ON_FULL_FAIL ? "fail" : "block";
    render_key(b, "on_full");
    render_string(b, on_full, strlen(on_full));
    render_object_end(b);
}

static void
render_status_sink(render_buf_t *b, const stele_status_t *st, size_t i)
{
    render_object_begin(b);
    render_field_text(b, "name", st->sinks[i].name, sizeof st->sinks[i].name);
    render_field_text(b, "destination", st->sinks[i].destination, sizeof st->sinks[i].destination);
    render_key(b, "shipped_seq");
    render_uint64(b, st->sinks[i].shipped_seq);
    render_key(b, "lag_records");
    render_uint64(b, st->sinks[i].lag_records);
    render_key(b, "lag_seconds");
    render_double(b, st->sinks[i].lag_seconds);
    render_key(b, "dead_letters");
    render_uint64(b, st->sinks[i].dead_letters);
    render_key(b, "retries");
    render_uint64(b, st->sinks[i].retries);
    render_key(b, "batches");
    render_uint64(b, st->sinks[i].batches);
    render_key(b, "stopped");
    render_bool(b, st->sinks[i].is_stopped != 0);
    if (st->sinks[i].last_error_unix_ms != 0) {
        render_field_text(b, "last_error", st->sinks[i].last_error, sizeof st->sinks[i].last_error);
        render_key(b, "last_error_time");
        render_time_ms(b, st->sinks[i].last_error_unix_ms, 3);
    }
    render_object_end(b);
}

static void
render_status_positions(render_buf_t *b, const stele_status_t *st)
{
    render_key(b, "writer_pid");
    render_int64(b, st->writer_pid);
    render_key(b, "first_seq");
    render_uint64(b, st->first_seq);
    render_key(b, "last_seq");
    render_uint64(b, st->last_seq);
    render_key(b, "committed_seq");
    render_uint64(b, st->committed_seq);
    render_key(b, "durable_seq");
    render_uint64(b, st->durable_seq);
    render_key(b, "segments");
    render_uint64(b, st->segments);
    render_key(b, "disk_bytes");
    render_uint64(b, st->disk_bytes);
    render_key(b, "used_bytes");
    render_uint64(b, st->used_bytes);
    if (st->newest_ts_ns != 0) {
        render_key(b, "newest_record_time");
        render_time_ns(b, st->newest_ts_ns);
    }
}

int
stele_status_to_json(const char *dir, const stele_status_t *st, char **json_out, size_t *len_out,
                     stele_error_t *err)
{
    if (st == NULL || json_out == NULL)
        return error_set(err, STELE_EINVAL, "stele_status_to_json: NULL argument");
    render_buf_t b;
    render_init(&b);
    render_object_begin(&b);
    if (dir != NULL) {
        render_key(&b, "dir");
        render_string(&b, dir, strlen(dir));
    }
    render_field_text(&b, "source", st->source, sizeof st->source);
    render_key(&b, "format_version");
    render_uint64(&b, st->format_version);
    render_status_positions(&b, st);
    if (st->settings_unix_ms != 0)
        render_status_settings(&b, st);
    render_key(&b, "sinks");
    render_array_begin(&b);
    for (size_t i = 0; i < st->n_sinks && i < STELE_MAX_SINKS; i++)
        render_status_sink(&b, st, i);
    render_array_end(&b);
    render_object_end(&b);
    return render_finish(&b, "status", json_out, len_out, err);
}

int
stele_dead_letter_to_json(const stele_dead_letter_t *dl, char **json_out, size_t *len_out,
                          stele_error_t *err)
{
    if (dl == NULL || json_out == NULL)
        return error_set(err, STELE_EINVAL, "stele_dead_letter_to_json: NULL argument");
    render_buf_t b;
    render_init(&b);
    render_object_begin(&b);
    render_key(&b, "seq");
    render_uint64(&b, dl->seq);
    render_key(&b, "time");
    if (dl->unix_ms != 0)
        render_time_ms(&b, dl->unix_ms, 6);
    else
        render_string(&b, "", 0);
    render_key(&b, "unix_ms");
    render_int64(&b, dl->unix_ms);
    render_field_text(&b, "reason", dl->reason, sizeof dl->reason);
    render_object_end(&b);
    return render_finish(&b, "dead letter", json_out, len_out, err);
}

void
stele_json_free(char *json)
{
    free(json);
}
