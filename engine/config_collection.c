/*
 * config_collection.c: a sink's collection shape in the options: the time field, the indexes
 * to create (`index` lines), the TTL and the time-series choice. Sets them from text
 * (config_sink_set calls config_collection_set), checks them in a whole struct
 * (config_check_collection, also run by the shipper on a struct filled by hand), and parses
 * an index spec for the shipper that creates it (config_index_next).
 *
 * Owns: the grammar of an index spec ("field:1|-1[,field:1|-1...]", specs separated by ';')
 * and the rules of a time field's name. Does not own the numbers' table (config.c:
 * expire_after_s is one of its rows), nor the commands that create the indexes
 * (ship_collection.c).
 *
 * Invariants: a spec config_check_collection accepted parses the same way in the shipper;
 * strings are copied into the options' arena (config_own_string), as config.c's are.
 * Pure functions of the caller's struct: thread-safe on distinct structs.
 */
#include "config_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* Reads one "field:1" or "field:-1" of the spec that ends at end into *key. */
static int
config_index_key(const char *p, const char *end, config_index_key_t *key, stele_error_t *err)
{
    const char *colon = memchr(p, ':', (size_t)(end - p));
    size_t len = colon ? (size_t)(colon - p) : 0;
    if (!colon || len == 0 || len >= sizeof key->field || p[0] == '$' || p[0] == '.' ||
        colon[-1] == '.' || memmem(p, len, "..", 2))
        return error_set_hinted(err, STELE_ECONFIG, "e.g. actor:1,_ts:-1",
                                "invalid index key \"%.*s\": expected field:1 or field:-1",
                                (int)(end - p), p);
    size_t dir_len = (size_t)(end - colon - 1);
    int direction = dir_len == 1 && colon[1] == '1'                      ? 1
                    : dir_len == 2 && colon[1] == '-' && colon[2] == '1' ? -1
                                                                         : 0;
    if (direction == 0)
        return error_set(err, STELE_ECONFIG,
                         "invalid direction \"%.*s\" of index key %.*s: expected 1 or -1",
                         (int)dir_len, colon + 1, (int)len, p);
    memcpy(key->field, p, len);
    key->field[len] = '\0';
    key->direction = direction;
    return 0;
}

int
config_index_next(const char **cursor, config_index_t *out, stele_error_t *err)
{
    const char *p = *cursor;
    while (p && (*p == ';' || *p == ' '))
        p++;
    if (!p || !*p)
        return 0;
    const char *spec_end = p + strcspn(p, ";");
    *cursor = spec_end;
    memset(out, 0, sizeof *out);
    while (p < spec_end) {
        while (p < spec_end && *p == ' ')
            p++;
        const char *key_end = p + strcspn(p, ",;");
        const char *trim = key_end;
        while (trim > p && trim[-1] == ' ')
            trim--;
        if (out->n_keys == CONFIG_INDEX_MAX_KEYS) {
            error_set(err, STELE_ECONFIG, "an index has at most %d keys", CONFIG_INDEX_MAX_KEYS);
            return -1;
        }
        if (config_index_key(p, trim, &out->keys[out->n_keys++], err) != 0)
            return -1;
        p = key_end < spec_end ? key_end + 1 : spec_end;
    }
    return 1;
}

int
config_time_field_ok(const char *name)
{
    size_t len = name ? strlen(name) : 0;
    return len >= 1 && len <= CONFIG_TIME_FIELD_MAX && name[0] != '$' && !strchr(name, '.') &&
           strcmp(name, "_id") != 0 && strcmp(name, "_stele") != 0;
}

/* Appends one index spec to the sink's list (the `index` key may be given many times). */
static int
config_collection_add_index(stele_options_t *opts, stele_sink_options_t *s, const char *value,
                            const char *where, stele_error_t *err)
{
    const char *cursor = value;
    config_index_t ix;
    int rc = config_index_next(&cursor, &ix, err);
    if (rc == 0)
        return error_set(err, STELE_ECONFIG, "%sempty value for sink index", where);
    if (rc > 0 && *cursor)
        return error_set(err, STELE_ECONFIG, "%sone index per index line (no ';')", where);
    if (rc < 0) {
        char msg[STELE_ERROR_MESSAGE_BYTES];
        snprintf(msg, sizeof msg, "%s", err ? err->message : "");
        return error_set(err, STELE_ECONFIG, "%ssink index: %s", where, msg);
    }
    size_t old_len = s->indexes ? strlen(s->indexes) : 0;
    size_t cap = old_len + strlen(value) + 2;
    char *joined = config_own(opts, malloc(cap));
    if (!joined)
        return error_set(err, -ENOMEM, "out of memory");
    snprintf(joined, cap, "%s%s%s", old_len ? s->indexes : "", old_len ? ";" : "", value);
    s->indexes = joined;
    return 0;
}

int
config_collection_set(stele_options_t *opts, stele_sink_options_t *s, const char *key,
                      const char *value, const char *where, stele_error_t *err)
{
    if (strcmp(key, "index") == 0)
        return config_collection_add_index(opts, s, value, where, err);
    if (strcmp(key, "timeseries") == 0) {
        uint64_t v;
        if (!config_parse_bool(value, &v))
            return error_set(err, STELE_ECONFIG,
                             "%sinvalid value \"%.64s\" for sink timeseries: expected true or "
                             "false",
                             where, value);
        s->timeseries = (int)v;
        return 0;
    }
    if (strcmp(key, "time_field") != 0)
        return 1;
    if (!config_time_field_ok(value))
        return error_set_hinted(err, STELE_ECONFIG, "e.g. _ts, ts or time",
                                "%sinvalid sink time_field \"%.64s\": expected 1 to %d bytes, "
                                "no '.', not starting with '$', not _id or _stele",
                                where, value, CONFIG_TIME_FIELD_MAX);
    const char *copy = config_own_string(opts, value);
    if (!copy)
        return error_set(err, -ENOMEM, "out of memory");
    s->time_field = copy;
    return 0;
}

int
config_check_collection(const stele_sink_options_t *sink, const char *name, stele_error_t *err)
{
    if (sink->time_field && !config_time_field_ok(sink->time_field))
        return error_set(err, STELE_ECONFIG, "sink %s: invalid time_field \"%.64s\"", name,
                         sink->time_field);
    if (sink->timeseries != 0 && sink->timeseries != 1)
        return error_set(err, STELE_ECONFIG, "sink %s: invalid timeseries %d: expected 0 or 1",
                         name, sink->timeseries);
    const char *cursor = sink->indexes;
    config_index_t ix;
    int rc;
    while ((rc = config_index_next(&cursor, &ix, err)) > 0)
        ;
    if (rc < 0) {
        char msg[STELE_ERROR_MESSAGE_BYTES];
        snprintf(msg, sizeof msg, "%s", err ? err->message : "");
        return error_set(err, STELE_ECONFIG, "sink %s: %s", name, msg);
    }
    return 0;
}
