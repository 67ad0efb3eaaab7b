/*
 * status_publish.c: encodes and decodes what a writer publishes for `stele status` in the
 * index's meta table (status_publish.h). Each value is one line of "key=value" words, at
 * most INDEX_META_VALUE_MAX (256) bytes; an error text is cut to fit its own key. Decoding
 * is lenient: a missing or malformed value reads as "never published" (all zeros), because
 * status must work on any journal, including one last opened by an older writer.
 * No state, no locks: the index serialises its own transactions.
 */
#include "status_publish.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"

#define STATUS_PUBLISH_SETTINGS_KEY "writer.settings"
#define STATUS_PUBLISH_SINKS_KEY "writer.sinks"
/* The meta table's value bound (index.c's INDEX_META_VALUE_MAX). */
#define STATUS_PUBLISH_VALUE_MAX 256

/* Reads a meta value as a NUL-terminated string; 0 when found. */
static int
status_publish_get_text(index_t *ix, const char *key, char *buf, size_t cap)
{
    size_t len = 0;
    if (!ix || index_get_meta(ix, key, buf, cap - 1, &len, NULL) != 0)
        return -1;
    buf[len < cap - 1 ? len : cap - 1] = '\0';
    return 0;
}

/* 1 when the stored settings equal `v` past their "published_ms=..." word: a writer that
 * reopens with the same settings then leaves the index (and its time) as it was. */
static int
status_publish_settings_unchanged(index_t *ix, const char *v)
{
    char old[STATUS_PUBLISH_VALUE_MAX + 1];
    if (status_publish_get_text(ix, STATUS_PUBLISH_SETTINGS_KEY, old, sizeof old) != 0)
        return 0;
    const char *a = strchr(old, ' ');
    const char *b = strchr(v, ' ');
    return a && b && strcmp(a, b) == 0;
}

int
status_publish_put_settings(index_t *ix, const stele_options_t *o, stele_error_t *err)
{
    char v[STATUS_PUBLISH_VALUE_MAX];
    int n = snprintf(v, sizeof v,
                     "published_ms=%" PRId64 " sync=%d sync_interval_ms=%" PRIu32
                     " commit_interval_us=%" PRIu32 " commit_policy=%d max_journal_bytes=%" PRIu64
                     " on_full=%d",
                     clock_wall_ms(), (int)o->sync, o->sync_interval_ms, o->commit_interval_us,
                     (int)o->commit_policy, o->max_journal_bytes, (int)o->on_full);
    if (n < 0 || (size_t)n >= sizeof v)
        n = (int)sizeof v - 1;
    v[n] = '\0';
    int rc = status_publish_settings_unchanged(ix, v)
                 ? 0
                 : index_put_meta(ix, STATUS_PUBLISH_SETTINGS_KEY, v, (size_t)n, err);
    if (rc)
        return rc;
    size_t len = 0;
    for (size_t i = 0; i < o->n_sinks; i++) {
        const char *name = o->sinks[i].name && o->sinks[i].name[0] ? o->sinks[i].name : "default";
        size_t name_len = strlen(name);
        if (len + name_len + 1 > sizeof v)
            break;
        memcpy(v + len, name, name_len);
        len += name_len;
        v[len++] = '\n';
    }
    return index_put_meta(ix, STATUS_PUBLISH_SINKS_KEY, v, len, err);
}

void
status_publish_get_settings(index_t *ix, stele_status_t *st)
{
    char v[STATUS_PUBLISH_VALUE_MAX + 1];
    int64_t ms = 0;
    int sync = 0, policy = 0, on_full = 0;
    uint32_t interval_ms = 0, commit_us = 0;
    uint64_t quota = 0;
    if (status_publish_get_text(ix, STATUS_PUBLISH_SETTINGS_KEY, v, sizeof v) != 0 ||
        sscanf(v,
               "published_ms=%" SCNd64 " sync=%d sync_interval_ms=%" SCNu32
               " commit_interval_us=%" SCNu32 " commit_policy=%d max_journal_bytes=%" SCNu64
               " on_full=%d",
               &ms, &sync, &interval_ms, &commit_us, &policy, &quota, &on_full) != 7)
        return;
    st->settings_unix_ms = ms;
    st->sync = (stele_sync_t)sync;
    st->sync_interval_ms = interval_ms;
    st->commit_interval_us = commit_us;
    st->commit_policy = (stele_commit_policy_t)policy;
    st->max_journal_bytes = quota;
    st->on_full = (stele_on_full_t)on_full;
}

size_t
status_publish_get_sink_names(index_t *ix, char (*names)[64], size_t max)
{
    char v[STATUS_PUBLISH_VALUE_MAX + 1];
    if (status_publish_get_text(ix, STATUS_PUBLISH_SINKS_KEY, v, sizeof v) != 0)
        return 0;
    size_t n = 0;
    for (char *p = v; *p && n < max;) {
        char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0 && len < 64) {
            memcpy(names[n], p, len);
            names[n++][len] = '\0';
        }
        p += len + (end ? 1 : 0);
    }
    return n;
}

static void
status_publish_sink_key(char *key, size_t cap, const char *name, const char *what)
{
    snprintf(key, cap, "sink.%s.%s", name, what);
}

int
status_publish_put_sink(index_t *ix, const stele_sink_stats_t *s, stele_error_t *err)
{
    char key[96];
    char v[STATUS_PUBLISH_VALUE_MAX];
    int n = snprintf(v, sizeof v,
                     "published_ms=%" PRId64 " retries=%" PRIu64 " batches=%" PRIu64
                     " stopped=%d last_error_ms=%" PRId64,
                     clock_wall_ms(), s->retries, s->batches, s->is_stopped, s->last_error_unix_ms);
    if (n < 0 || (size_t)n >= sizeof v)
        n = (int)sizeof v - 1;
    status_publish_sink_key(key, sizeof key, s->name, "stats");
    int rc = index_put_meta(ix, key, v, (size_t)n, err);
    if (rc)
        return rc;
    size_t len = strnlen(s->last_error, STATUS_PUBLISH_VALUE_MAX);
    status_publish_sink_key(key, sizeof key, s->name, "error");
    return index_put_meta(ix, key, s->last_error, len, err);
}

void
status_publish_get_sink(index_t *ix, stele_status_t *st, size_t i)
{
    char key[96];
    char v[STATUS_PUBLISH_VALUE_MAX + 1];
    int64_t ms = 0, error_ms = 0;
    uint64_t retries = 0, batches = 0;
    int stopped = 0;
    status_publish_sink_key(key, sizeof key, st->sinks[i].name, "stats");
    if (status_publish_get_text(ix, key, v, sizeof v) != 0 ||
        sscanf(v,
               "published_ms=%" SCNd64 " retries=%" SCNu64 " batches=%" SCNu64
               " stopped=%d last_error_ms=%" SCNd64,
               &ms, &retries, &batches, &stopped, &error_ms) != 5)
        return;
    st->sinks[i].stats_unix_ms = ms;
    st->sinks[i].retries = retries;
    st->sinks[i].batches = batches;
    st->sinks[i].is_stopped = stopped;
    st->sinks[i].last_error_unix_ms = error_ms;
    status_publish_sink_key(key, sizeof key, st->sinks[i].name, "error");
    if (status_publish_get_text(ix, key, st->sinks[i].last_error, sizeof st->sinks[i].last_error) !=
        0)
        st->sinks[i].last_error[0] = '\0';
}
