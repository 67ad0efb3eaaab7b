/*
 * config.c: the one knob table (name, type, default, range, help), the table of a sink's
 * numeric keys and their ranges, the defaults, and setting one knob from text
 * (stele_options_set; the loaders config_env.c and config_file.c set theirs through
 * config_set_one, so every way in checks the same). The same ranges are checked again on
 * a whole struct at open (config_check) and by the shipper (config_check_sink_numbers),
 * since a struct may be filled by hand. Text to numbers is config_parse.c's.
 *
 * Invariants:
 *   - a failed call leaves the caller's stele_options_t exactly as it was: every setter
 *     works on a copy of the struct and stores it back only when all of it succeeded;
 *   - strings and sink arrays that setters allocate are recorded in an append-only arena
 *     (opts->owned) and freed only by stele_options_release(), so a copy of the struct
 *     never points at freed memory. A failed load may leave unused strings in the arena
 *     until release; that is memory, not visible state.
 * No state outside the caller's struct: thread-safe on distinct structs.
 */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "journal.h" /* journal_frame_bytes */

/* Default segment: large enough that rolling is rare, small enough to delete in steps. */
#define CONFIG_DEFAULT_SEGMENT_BYTES (64 * MIB)
#define CONFIG_DEFAULT_MAX_QUEUE_BYTES (64 * MIB)
#define CONFIG_DEFAULT_MAX_RECORD_BYTES ((uint32_t)MIB)
/* An idle client costs the server little, but a user could hold the descriptors others
 * need: five minutes and 64 per user bound that without troubling a connection pool. */
#define CONFIG_DEFAULT_SERVE_IDLE_TIMEOUT_MS 300000u
#define CONFIG_DEFAULT_SERVE_MAX_CONNS_PER_UID 64u

typedef enum knob_type {
    KNOB_STRING, /* a name: letters, digits and . _ : - */
    KNOB_PATH,   /* a file path */
    KNOB_BOOL,
    KNOB_MODE,
    KNOB_SIZE32,
    KNOB_SIZE64,
    KNOB_U32,
    KNOB_DURATION32, /* value in the unit named by the knob (us, ms or seconds) */
    KNOB_DURATION64,
    KNOB_ENUM,
} knob_type_t;

/* X(name, type, unit_ns for durations (else 0), min, max, choices, default, help)
 * retention_seconds stops at INT64_MAX: the engine subtracts it from the clock's seconds. */
#define CONFIG_KNOBS(X)                                                                            \
    X(source, KNOB_STRING, 0, 1, CONFIG_SOURCE_MAX, NULL, "",                                      \
      "this journal's name in MongoDB _id.src (default: the host name); fixed when the journal "   \
      "is created")                                                                                \
    X(create_if_missing, KNOB_BOOL, 0, 0, 1, NULL, "true",                                         \
      "create the directory and journal when missing")                                             \
    X(file_mode, KNOB_MODE, 0, 0, 0777, NULL, "0",                                                 \
      "permissions of journal files (octal), set on existing ones too; 0: 0600 for a new "         \
      "journal, "                                                                                  \
      "an existing one keeps its own")                                                             \
    X(dir_mode, KNOB_MODE, 0, 0, 0777, NULL, "0",                                                  \
      "permissions of the journal directory, set on an existing one too; 0: 0700 for a new one, "  \
      "an existing one keeps its own")                                                             \
    X(allow_unsafe_dir, KNOB_BOOL, 0, 0, 1, NULL, "false",                                         \
      "open a journal that users other than its owner and root could change (links are never "     \
      "followed)")                                                                                 \
    X(segment_bytes, KNOB_SIZE64, 0, 64 * KIB, 16 * GIB, NULL, "64M",                              \
      "preallocated size of a segment file")                                                       \
    X(max_record_bytes, KNOB_SIZE32, 0, 16, CONFIG_MAX_RECORD_LIMIT, NULL, "1M",                   \
      "largest event in BSON bytes")                                                               \
    X(max_depth, KNOB_U32, 0, 1, 100, NULL, "100", "deepest nesting of an event")                  \
    X(commit_interval_us, KNOB_DURATION32, 1000, 0, 10000000, NULL, "0",                           \
      "longest wait to grow a batch, only while other writers are active (0: half a flush on a "   \
      "disk slower than 1 ms, else none)")                                                         \
    X(commit_policy, KNOB_ENUM, 0, 0, 1, "adaptive|fixed", "adaptive",                             \
      "adaptive: delay only for active writers; fixed: commit every commit_interval_us")           \
    X(sync, KNOB_ENUM, 0, 0, 2, "always|interval|never", "always",                                 \
      "fdatasync every batch, every sync_interval_ms, or leave it to the OS")                      \
    X(sync_interval_ms, KNOB_DURATION32, 1000000, 1, 3600000, NULL, "1000",                        \
      "fdatasync period for sync=interval")                                                        \
    X(max_queue_bytes, KNOB_SIZE64, 0, 64 * KIB, 64 * GIB, NULL, "64M",                            \
      "bound on queued, not yet written bytes; appends block beyond it")                           \
    X(queue_timeout_ms, KNOB_DURATION32, 1000000, 0, UINT32_MAX, NULL, "0",                        \
      "how long a full queue or quota blocks an append; 0 = forever")                              \
    X(max_journal_bytes, KNOB_SIZE64, 0, 0, UINT64_MAX, NULL, "0",                                 \
      "disk quota for segment files; 0 = none")                                                    \
    X(on_full, KNOB_ENUM, 0, 0, 1, "block|fail", "block",                                          \
      "what an append does when the quota is reached")                                             \
    X(retention_bytes, KNOB_SIZE64, 0, 0, UINT64_MAX, NULL, "0",                                   \
      "keep at most this much shipped data; 0 = keep all")                                         \
    X(retention_seconds, KNOB_DURATION64, 1000000000, 0, INT64_MAX, NULL, "0",                     \
      "delete shipped data older than this; 0 = keep all")                                         \
    X(signing_key, KNOB_PATH, 0, 1, CONFIG_PATH_MAX, NULL, "",                                     \
      "signer key file (stele keygen): sign checkpoints with it and evolve it in place "           \
      "(default: none, no signing)")                                                               \
    X(checkpoint_records, KNOB_U32, 0, 1, 100000000, NULL, "1000",                                 \
      "with a signing key: a signed checkpoint at least every this many records")                  \
    X(checkpoint_interval_ms, KNOB_DURATION32, 1000000, 1, 3600000, NULL, "10000",                 \
      "with a signing key: a signed checkpoint at least this often, also when idle")               \
    X(key_epoch_s, KNOB_DURATION32, 1000000000, 1, 31536000, NULL, "900",                          \
      "with a signing key: how long one key signs before the next replaces it")                    \
    X(serve_idle_timeout_ms, KNOB_DURATION32, 1000000, 0, UINT32_MAX, NULL, "300000",              \
      "stele serve closes a connection with nothing to answer that sent nothing for this long; "   \
      "0 = never")                                                                                 \
    X(serve_max_conns_per_uid, KNOB_U32, 0, 1, UINT32_MAX, NULL, "64",                             \
      "stele serve refuses a user's connections beyond this many")                                 \
    X(serve_max_conns, KNOB_U32, 0, 0, UINT32_MAX, NULL, "0",                                      \
      "stele serve refuses connections beyond this many; 0 = its descriptor limit less a reserve")

typedef struct knob_def {
    const char *name;
    knob_type_t type;
    uint64_t unit_ns;
    uint64_t min;
    uint64_t max;
    const char *choices;
    size_t offset;
} knob_def_t;

/* How a value of each type is written in usage lines (stele_knob_t.value_text). */
#define CONFIG_VALUE_TEXT_KNOB_STRING(choices) "NAME"
#define CONFIG_VALUE_TEXT_KNOB_PATH(choices) "FILE"
#define CONFIG_VALUE_TEXT_KNOB_BOOL(choices) "true|false"
#define CONFIG_VALUE_TEXT_KNOB_MODE(choices) "MODE"
#define CONFIG_VALUE_TEXT_KNOB_SIZE32(choices) "SIZE"
#define CONFIG_VALUE_TEXT_KNOB_SIZE64(choices) "SIZE"
#define CONFIG_VALUE_TEXT_KNOB_U32(choices) "N"
#define CONFIG_VALUE_TEXT_KNOB_DURATION32(choices) "DURATION"
#define CONFIG_VALUE_TEXT_KNOB_DURATION64(choices) "DURATION"
#define CONFIG_VALUE_TEXT_KNOB_ENUM(choices) choices

static const stele_knob_t config_public_knobs[] = {
#define CONFIG_X_PUBLIC(name, type, unit, lo, hi, choices, def, help)                              \
    {#name, def, help, CONFIG_VALUE_TEXT_##type(choices)},
    CONFIG_KNOBS(CONFIG_X_PUBLIC)
#undef CONFIG_X_PUBLIC
};

static const knob_def_t config_knob_defs[] = {
#define CONFIG_X_DEF(name, type, unit, lo, hi, choices, def, help)                                 \
    {#name, type, unit, lo, hi, choices, offsetof(stele_options_t, name)},
    CONFIG_KNOBS(CONFIG_X_DEF)
#undef CONFIG_X_DEF
};

#define CONFIG_N_KNOBS (sizeof config_knob_defs / sizeof config_knob_defs[0])

const stele_knob_t *
stele_knobs(size_t *n_out)
{
    if (n_out)
        *n_out = CONFIG_N_KNOBS;
    return config_public_knobs;
}

void
stele_options_init(stele_options_t *opts)
{
    if (!opts)
        return;
    memset(opts, 0, sizeof *opts);
    opts->source = NULL;
    opts->create_if_missing = 1;
    opts->file_mode = 0;
    opts->dir_mode = 0;
    opts->allow_unsafe_dir = 0;
    opts->segment_bytes = CONFIG_DEFAULT_SEGMENT_BYTES;
    opts->max_record_bytes = CONFIG_DEFAULT_MAX_RECORD_BYTES;
    opts->max_depth = 100;
    opts->commit_interval_us = 0;
    opts->commit_policy = STELE_COMMIT_ADAPTIVE;
    opts->sync = STELE_SYNC_ALWAYS;
    opts->sync_interval_ms = 1000;
    opts->max_queue_bytes = CONFIG_DEFAULT_MAX_QUEUE_BYTES;
    opts->queue_timeout_ms = 0;
    opts->max_journal_bytes = 0;
    opts->on_full = STELE_ON_FULL_BLOCK;
    opts->retention_bytes = 0;
    opts->retention_seconds = 0;
    opts->signing_key = NULL;
    opts->checkpoint_records = 1000;
    opts->checkpoint_interval_ms = 10000;
    opts->key_epoch_s = 900;
    opts->serve_idle_timeout_ms = CONFIG_DEFAULT_SERVE_IDLE_TIMEOUT_MS;
    opts->serve_max_conns_per_uid = CONFIG_DEFAULT_SERVE_MAX_CONNS_PER_UID;
    opts->serve_max_conns = 0;
    opts->sinks = NULL;
    opts->n_sinks = 0;
    opts->owned = NULL;
}

void
stele_sink_options_init(stele_sink_options_t *sink)
{
    if (!sink)
        return;
    memset(sink, 0, sizeof *sink);
    sink->name = "default";
    sink->uri = NULL;
    sink->database = NULL;
    sink->collection = "events";
    sink->w = -1;
    sink->journaled = 1;
    sink->wtimeout_ms = 10000;
    sink->batch_docs = 1000;
    sink->batch_bytes = (uint32_t)(8 * MIB);
    sink->linger_ms = 5;
    sink->backoff_min_ms = 50;
    sink->backoff_max_ms = 5000;
    sink->time_field = CONFIG_TIME_FIELD_DEFAULT;
    sink->indexes = NULL;
    sink->expire_after_s = 0;
    sink->timeseries = 0;
}

/* -- the arena behind opts->owned ------------------------------------------------------- */

typedef struct config_arena {
    void **ptrs;
    size_t n;
    size_t cap;
} config_arena_t;

static void
config_arena_free(config_arena_t *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++)
        free(a->ptrs[i]);
    free(a->ptrs);
    free(a);
}

void *
config_own(stele_options_t *opts, void *p)
{
    if (!p)
        return NULL;
    config_arena_t *a = opts->owned;
    if (!a) {
        a = calloc(1, sizeof *a);
        if (!a) {
            free(p);
            return NULL;
        }
        opts->owned = a;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        void **grown = realloc(a->ptrs, cap * sizeof *grown);
        if (!grown) {
            free(p);
            return NULL;
        }
        a->ptrs = grown;
        a->cap = cap;
    }
    a->ptrs[a->n++] = p;
    return p;
}

const char *
config_own_string(stele_options_t *opts, const char *s)
{
    return config_own(opts, strdup(s));
}

void
stele_options_release(stele_options_t *opts)
{
    if (!opts)
        return;
    config_arena_free(opts->owned);
    stele_options_init(opts);
}

/* -- one knob from text ----------------------------------------------------------------- */

static bool
config_source_ok(const char *text)
{
    size_t len = strlen(text);
    if (len == 0 || len > CONFIG_SOURCE_MAX)
        return false;
    for (const char *p = text; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._:-", *p))
            return false;
    return true;
}

/* What a knob accepts, for error messages. */
static void
config_accepts(const knob_def_t *k, char *buf, size_t cap)
{
    switch (k->type) {
    case KNOB_STRING:
        snprintf(buf, cap, "1 to %llu characters of letters, digits and . _ : -",
                 (unsigned long long)k->max);
        break;
    case KNOB_PATH:
        snprintf(buf, cap, "a file path of 1 to %llu bytes", (unsigned long long)k->max);
        break;
    case KNOB_BOOL:
        snprintf(buf, cap, "true or false (also yes/no, on/off, 1/0)");
        break;
    case KNOB_MODE:
        snprintf(buf, cap, "an octal file mode such as 0600");
        break;
    case KNOB_ENUM: {
        char choices[64];
        snprintf(choices, sizeof choices, "%s", k->choices);
        for (char *p = choices; *p; p++)
            if (*p == '|')
                *p = ',';
        snprintf(buf, cap, "one of %s", choices);
        break;
    }
    case KNOB_SIZE32:
    case KNOB_SIZE64:
        snprintf(buf, cap, "a size from %llu to %llu bytes (suffixes K, M, G, T)",
                 (unsigned long long)k->min, (unsigned long long)k->max);
        break;
    case KNOB_U32:
        snprintf(buf, cap, "an integer from %llu to %llu", (unsigned long long)k->min,
                 (unsigned long long)k->max);
        break;
    case KNOB_DURATION32:
    case KNOB_DURATION64:
        snprintf(buf, cap, "a whole number from %llu to %llu (or with a unit: us, ms, s, m, h)",
                 (unsigned long long)k->min, (unsigned long long)k->max);
        break;
    }
}

static const knob_def_t *
config_find(const char *name)
{
    for (size_t i = 0; i < CONFIG_N_KNOBS; i++)
        if (strcmp(config_knob_defs[i].name, name) == 0)
            return &config_knob_defs[i];
    return NULL;
}

static int
config_bad_value(const knob_def_t *k, const char *value, const char *where, stele_error_t *err)
{
    char accepts[160];
    config_accepts(k, accepts, sizeof accepts);
    error_set(err, STELE_ECONFIG, "%s%sinvalid value \"%.64s\" for %s: expected %s",
              where ? where : "", where ? ": " : "", value, k->name, accepts);
    return STELE_ECONFIG;
}

/* Parses `value` as knob k's type (not its range) into *out. */
static bool
config_parse_value(const knob_def_t *k, const char *value, uint64_t *out)
{
    const char *rest;
    switch (k->type) {
    case KNOB_BOOL:
        return config_parse_bool(value, out);
    case KNOB_MODE:
        return config_parse_mode(value, out);
    case KNOB_ENUM:
        return config_parse_enum(value, k->choices, out);
    case KNOB_SIZE32:
    case KNOB_SIZE64:
        return config_parse_size(value, out);
    case KNOB_U32:
        return config_parse_u64(value, &rest, out) && *rest == '\0';
    case KNOB_DURATION32:
    case KNOB_DURATION64:
        return config_parse_duration(value, k->unit_ns, out);
    case KNOB_STRING:
    case KNOB_PATH:
        break;
    }
    return false;
}

/* Stores an in-range value into the field at `field`, at the width of knob k's type. */
static void
config_store_value(const knob_def_t *k, char *field, uint64_t v)
{
    switch (k->type) {
    case KNOB_SIZE64:
    case KNOB_DURATION64: {
        uint64_t v64 = v;
        memcpy(field, &v64, sizeof v64);
        break;
    }
    case KNOB_MODE: {
        unsigned u = (unsigned)v;
        memcpy(field, &u, sizeof u);
        break;
    }
    case KNOB_BOOL:
    case KNOB_ENUM: {
        int i = (int)v; /* enums and create_if_missing are int-sized */
        memcpy(field, &i, sizeof i);
        break;
    }
    default: {
        uint32_t v32 = (uint32_t)v;
        memcpy(field, &v32, sizeof v32);
        break;
    }
    }
}

/* Parses `value` for knob k and stores it into *opts. Leaves opts unchanged on error. */
static int
config_apply(stele_options_t *opts, const knob_def_t *k, const char *value, const char *where,
             stele_error_t *err)
{
    char *field = (char *)opts + k->offset;
    if (k->type == KNOB_STRING || k->type == KNOB_PATH) {
        bool ok =
            k->type == KNOB_STRING ? config_source_ok(value) : value[0] && strlen(value) <= k->max;
        if (!ok)
            return config_bad_value(k, value, where, err);
        const char *copy = config_own_string(opts, value);
        if (!copy)
            return error_set(err, -ENOMEM, "out of memory setting %s", k->name);
        memcpy(field, &copy, sizeof copy);
        return 0;
    }
    uint64_t v = 0;
    if (!config_parse_value(k, value, &v) || v < k->min || v > k->max)
        return config_bad_value(k, value, where, err);
    config_store_value(k, field, v);
    return 0;
}

_Static_assert(sizeof(stele_sync_t) == sizeof(int), "enum knobs are stored as int");
_Static_assert(sizeof(stele_on_full_t) == sizeof(int), "enum knobs are stored as int");
_Static_assert(sizeof(stele_commit_policy_t) == sizeof(int), "enum knobs are stored as int");

/* -- sinks ------------------------------------------------------------------------------ */

/* Finds the sink called `name` in scratch, adding one with defaults if missing. The array
 * is copied on write (the old one stays valid for the caller's struct). */
static stele_sink_options_t *
config_sink_slot(stele_options_t *opts, const char *name, stele_error_t *err)
{
    for (size_t i = 0; i < opts->n_sinks; i++) {
        if (opts->sinks[i].name && strcmp(opts->sinks[i].name, name) == 0) {
            stele_sink_options_t *copy = config_own(opts, malloc(opts->n_sinks * sizeof *copy));
            if (!copy) {
                error_set(err, -ENOMEM, "out of memory changing sink %s", name);
                return NULL;
            }
            memcpy(copy, opts->sinks, opts->n_sinks * sizeof *copy);
            opts->sinks = copy;
            return &copy[i];
        }
    }
    if (opts->n_sinks >= STELE_MAX_SINKS) {
        error_set(err, STELE_ECONFIG, "too many sinks: at most %d", STELE_MAX_SINKS);
        return NULL;
    }
    size_t n = opts->n_sinks + 1;
    stele_sink_options_t *grown = config_own(opts, malloc(n * sizeof *grown));
    const char *owned_name = config_own_string(opts, name);
    if (!grown || !owned_name) {
        error_set(err, -ENOMEM, "out of memory adding sink %s", name);
        return NULL;
    }
    if (opts->n_sinks)
        memcpy(grown, opts->sinks, opts->n_sinks * sizeof *grown);
    stele_sink_options_init(&grown[n - 1]);
    grown[n - 1].name = owned_name;
    opts->sinks = grown;
    opts->n_sinks = n;
    return &grown[n - 1];
}

/* A sink's uint32 keys and their ranges: the one place both the setters and the check at
 * open read them. */
typedef struct config_sink_number {
    const char *key;
    size_t offset;
    uint32_t min, max;
    bool is_size; /* takes the K, M, G, T suffixes */
} config_sink_number_t;

static const config_sink_number_t config_sink_numbers[] = {
    {"wtimeout_ms", offsetof(stele_sink_options_t, wtimeout_ms), 0, INT32_MAX, false},
    {"batch_docs", offsetof(stele_sink_options_t, batch_docs), 1, CONFIG_SINK_MAX_BATCH_DOCS,
     false},
    {"batch_bytes", offsetof(stele_sink_options_t, batch_bytes), CONFIG_SINK_MIN_BATCH_BYTES,
     CONFIG_SINK_MAX_BATCH_BYTES, true},
    {"linger_ms", offsetof(stele_sink_options_t, linger_ms), 0, CONFIG_SINK_MAX_DELAY_MS, false},
    {"backoff_min_ms", offsetof(stele_sink_options_t, backoff_min_ms), 1, CONFIG_SINK_MAX_DELAY_MS,
     false},
    {"backoff_max_ms", offsetof(stele_sink_options_t, backoff_max_ms), 1, CONFIG_SINK_MAX_DELAY_MS,
     false},
    {"expire_after_s", offsetof(stele_sink_options_t, expire_after_s), 0, INT32_MAX, false},
};

#define CONFIG_N_SINK_NUMBERS (sizeof config_sink_numbers / sizeof config_sink_numbers[0])

/* What a sink number accepts, for error messages. */
static void
config_sink_accepts(const config_sink_number_t *n, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s from %" PRIu32 " to %" PRIu32 "%s", n->is_size ? "a size" : "an integer",
             n->min, n->max, n->is_size ? " bytes (suffixes K, M, G, T)" : "");
}

static int
config_sink_u32(const config_sink_number_t *n, const char *sink_name, const char *value,
                uint32_t *out, const char *where, stele_error_t *err)
{
    uint64_t v;
    const char *rest;
    bool ok =
        n->is_size ? config_parse_size(value, &v) : config_parse_u64(value, &rest, &v) && !*rest;
    if (!ok || v < n->min || v > n->max) {
        char accepts[96];
        config_sink_accepts(n, accepts, sizeof accepts);
        return error_set(err, STELE_ECONFIG,
                         "%sinvalid value \"%.64s\" for sink %s %s: expected %s", where, value,
                         sink_name, n->key, accepts);
    }
    *out = (uint32_t)v;
    return 0;
}

/* Sets a sink's uri, database or collection; returns 1 when `key` is none of them. */
static int
config_sink_set_string(stele_options_t *opts, stele_sink_options_t *s, const char *key,
                       const char *value, const char *where, stele_error_t *err)
{
    const char **str = NULL;
    if (strcmp(key, "uri") == 0)
        str = &s->uri;
    else if (strcmp(key, "database") == 0)
        str = &s->database;
    else if (strcmp(key, "collection") == 0)
        str = &s->collection;
    if (!str)
        return 1;
    if (!*value)
        return error_set(err, STELE_ECONFIG, "%sempty value for sink %s", where, key);
    const char *copy = config_own_string(opts, value);
    if (!copy)
        return error_set(err, -ENOMEM, "out of memory");
    *str = copy;
    return 0;
}

/* Sets a sink's w or journaled; returns 1 when `key` is neither. */
static int
config_sink_set_concern(stele_sink_options_t *s, const char *key, const char *value,
                        const char *where, stele_error_t *err)
{
    uint64_t v;
    const char *rest;
    if (strcmp(key, "w") == 0) {
        if (strcasecmp(value, "majority") == 0)
            return (s->w = -1), 0;
        if (!config_parse_u64(value, &rest, &v) || *rest || v > CONFIG_SINK_MAX_W)
            return error_set(err, STELE_ECONFIG,
                             "%sinvalid value \"%.64s\" for sink w: expected majority or 0..%d",
                             where, value, CONFIG_SINK_MAX_W);
        s->w = (int)v;
        return 0;
    }
    if (strcmp(key, "journaled") == 0) {
        if (!config_parse_bool(value, &v))
            return error_set(err, STELE_ECONFIG,
                             "%sinvalid value \"%.64s\" for sink journaled: expected true or false",
                             where, value);
        s->journaled = (int)v;
        return 0;
    }
    return 1;
}

/* Sets one of a sink's uint32 fields; returns 1 when `key` is none of them. */
static int
config_sink_set_number(stele_sink_options_t *s, const char *sink_name, const char *key,
                       const char *value, const char *where, stele_error_t *err)
{
    for (size_t i = 0; i < CONFIG_N_SINK_NUMBERS; i++) {
        const config_sink_number_t *n = &config_sink_numbers[i];
        if (strcmp(key, n->key) != 0)
            continue;
        uint32_t v = 0;
        int rc = config_sink_u32(n, sink_name, value, &v, where, err);
        if (rc == 0)
            memcpy((char *)s + n->offset, &v, sizeof v);
        return rc;
    }
    return 1;
}

int
config_sink_set(stele_options_t *opts, const char *sink_name, const char *key, const char *value,
                const char *where, stele_error_t *err)
{
    stele_sink_options_t *s = config_sink_slot(opts, sink_name, err);
    if (!s)
        return err ? err->code : STELE_ECONFIG;
    int rc = config_sink_set_string(opts, s, key, value, where, err);
    if (rc == 1)
        rc = config_collection_set(opts, s, key, value, where, err);
    if (rc == 1)
        rc = config_sink_set_concern(s, key, value, where, err);
    if (rc == 1)
        rc = config_sink_set_number(s, sink_name, key, value, where, err);
    if (rc != 1)
        return rc;
    error_set(err, STELE_ECONFIG, "%sunknown sink key \"%.64s\"", where, key);
    error_set_hint(err, "sink keys: uri, database, collection, w, journaled, wtimeout_ms, "
                        "batch_docs, batch_bytes, linger_ms, backoff_min_ms, backoff_max_ms, "
                        "time_field, index, expire_after_s, timeseries");
    return STELE_ECONFIG;
}

/* -- public setters --------------------------------------------------------------------- */

/* Sets knob `name` (or "sink.NAME.KEY") on scratch. `where` prefixes messages. */
int
config_set_one(stele_options_t *scratch, const char *name, const char *value, const char *where,
               stele_error_t *err)
{
    if (strncmp(name, "sink.", 5) == 0) {
        const char *dot = strrchr(name + 5, '.');
        char sink_name[64];
        size_t n = dot ? (size_t)(dot - (name + 5)) : 0;
        if (!dot || n == 0 || n >= sizeof sink_name)
            return error_set(err, STELE_ECONFIG,
                             "%sbad sink knob \"%.64s\": expected sink.NAME.KEY", where, name);
        memcpy(sink_name, name + 5, n);
        sink_name[n] = '\0';
        return config_sink_set(scratch, sink_name, dot + 1, value, where, err);
    }
    const knob_def_t *k = config_find(name);
    if (!k) {
        error_set(err, STELE_ECONFIG, "%sunknown knob \"%.64s\"", where, name);
        error_set_hint(err, "knob names are the stele_options_t field names, e.g. sync, "
                            "commit_interval_us");
        return STELE_ECONFIG;
    }
    return config_apply(scratch, k, value, where[0] ? where : NULL, err);
}

/* Stores scratch back into *opts after success; on failure drops an arena the scratch
 * created (one it shares with *opts stays). */
int
config_finish(stele_options_t *opts, stele_options_t *scratch, int rc)
{
    if (rc == 0) {
        *opts = *scratch;
    } else if (scratch->owned && scratch->owned != opts->owned) {
        config_arena_free(scratch->owned);
    }
    return rc;
}

int
stele_options_set(stele_options_t *opts, const char *name, const char *value, stele_error_t *err)
{
    if (!opts || !name || !value)
        return error_set(err, STELE_EINVAL, "stele_options_set: opts, name and value required");
    stele_options_t scratch = *opts;
    return config_finish(opts, &scratch, config_set_one(&scratch, name, value, "", err));
}

/* -- whole-struct checks at open -------------------------------------------------------- */

/* Every numeric knob within its table range (the struct may have been filled by hand). */
static int
config_check_ranges(const stele_options_t *opts, stele_error_t *err)
{
    for (size_t i = 0; i < CONFIG_N_KNOBS; i++) {
        const knob_def_t *k = &config_knob_defs[i];
        const char *field = (const char *)opts + k->offset;
        uint64_t v;
        if (k->type == KNOB_STRING || k->type == KNOB_PATH || k->type == KNOB_BOOL)
            continue;
        if (k->type == KNOB_SIZE64 || k->type == KNOB_DURATION64) {
            memcpy(&v, field, sizeof v);
        } else if (k->type == KNOB_ENUM) {
            int e;
            memcpy(&e, field, sizeof e);
            v = e < 0 ? UINT64_MAX : (uint64_t)e;
        } else if (k->type == KNOB_MODE) {
            unsigned u;
            memcpy(&u, field, sizeof u);
            v = u;
        } else {
            uint32_t u;
            memcpy(&u, field, sizeof u);
            v = u;
        }
        if (v < k->min || v > k->max) {
            char accepts[160];
            config_accepts(k, accepts, sizeof accepts);
            return error_set(err, STELE_ECONFIG, "invalid %s %llu: expected %s", k->name,
                             (unsigned long long)v, accepts);
        }
    }
    return 0;
}

int
config_check_sink_numbers(const stele_sink_options_t *sink, const char *name, stele_error_t *err)
{
    if (sink->w < -1 || sink->w > CONFIG_SINK_MAX_W)
        return error_set(err, STELE_ECONFIG,
                         "sink %s: invalid w %d: expected -1 (majority) or 0 to %d", name, sink->w,
                         CONFIG_SINK_MAX_W);
    if (sink->journaled != 0 && sink->journaled != 1)
        return error_set(err, STELE_ECONFIG, "sink %s: invalid journaled %d: expected 0 or 1", name,
                         sink->journaled);
    for (size_t i = 0; i < CONFIG_N_SINK_NUMBERS; i++) {
        const config_sink_number_t *n = &config_sink_numbers[i];
        uint32_t v;
        memcpy(&v, (const char *)sink + n->offset, sizeof v);
        if (v < n->min || v > n->max) {
            char accepts[96];
            config_sink_accepts(n, accepts, sizeof accepts);
            return error_set(err, STELE_ECONFIG, "sink %s: invalid %s %" PRIu32 ": expected %s",
                             name, n->key, v, accepts);
        }
    }
    if (sink->backoff_max_ms < sink->backoff_min_ms)
        return error_set(err, STELE_ECONFIG,
                         "sink %s: backoff_max_ms (%" PRIu32 ") is below backoff_min_ms (%" PRIu32
                         ")",
                         name, sink->backoff_max_ms, sink->backoff_min_ms);
    return config_check_collection(sink, name, err);
}

/* At most STELE_MAX_SINKS sinks, each named (uniquely), with a uri and numbers in range. */
static int
config_check_sinks(const stele_options_t *opts, stele_error_t *err)
{
    if (opts->n_sinks > STELE_MAX_SINKS)
        return error_set(err, STELE_ECONFIG, "at most %d sinks", STELE_MAX_SINKS);
    if (opts->n_sinks && !opts->sinks)
        return error_set(err, STELE_ECONFIG, "n_sinks is %zu but sinks is NULL", opts->n_sinks);
    for (size_t i = 0; i < opts->n_sinks; i++) {
        const char *name = opts->sinks[i].name;
        if (!name || !*name || strlen(name) >= 64)
            return error_set(err, STELE_ECONFIG, "sink %zu needs a name of 1 to 63 bytes", i);
        if (!opts->sinks[i].uri)
            return error_set(err, STELE_ECONFIG, "sink %s has no uri", name);
        for (size_t j = 0; j < i; j++)
            if (strcmp(opts->sinks[j].name, name) == 0)
                return error_set(err, STELE_ECONFIG, "two sinks are named %s", name);
        int rc = config_check_sink_numbers(&opts->sinks[i], name, err);
        if (rc)
            return rc;
    }
    return 0;
}

/* The largest record must fit a batch in a segment twice over, and the queue once. */
static int
config_check_sizes(const stele_options_t *o, stele_error_t *err)
{
    size_t frame = journal_frame_bytes(FORMAT_VERSION, o->max_record_bytes);
    if ((uint64_t)frame * 2 > o->segment_bytes)
        return error_set(err, STELE_ECONFIG,
                         "segment_bytes (%llu) must hold two records of max_record_bytes (%u): "
                         "raise segment_bytes or lower max_record_bytes",
                         (unsigned long long)o->segment_bytes, o->max_record_bytes);
    if (frame > o->max_queue_bytes)
        return error_set(err, STELE_ECONFIG,
                         "max_queue_bytes (%llu) must hold one record of max_record_bytes (%u)",
                         (unsigned long long)o->max_queue_bytes, o->max_record_bytes);
    return 0;
}

/* Modes that let a group or everyone change the journal need allow_unsafe_dir, like a
 * directory found that way (journal/jdir.h). */
static int
config_check_modes(const stele_options_t *o, stele_error_t *err)
{
    static const char hint[] = "drop the group and other write bits, or set allow_unsafe_dir";
    if (o->allow_unsafe_dir)
        return 0;
    if (o->file_mode & 022)
        return error_set_hinted(err, STELE_ECONFIG, hint,
                                "file_mode %04o lets %s change the journal's files", o->file_mode,
                                (o->file_mode & 02) ? "every user" : "the group");
    if (o->dir_mode & 022)
        return error_set_hinted(err, STELE_ECONFIG, hint,
                                "dir_mode %04o lets %s change the journal directory", o->dir_mode,
                                (o->dir_mode & 02) ? "every user" : "the group");
    return 0;
}

int
config_check(const stele_options_t *opts, stele_error_t *err)
{
    if (opts->source && !config_source_ok(opts->source))
        return error_set(err, STELE_ECONFIG,
                         "invalid source \"%.64s\": expected 1 to %d letters, digits or . _ : -",
                         opts->source, CONFIG_SOURCE_MAX);
    int rc = config_check_ranges(opts, err);
    if (rc)
        return rc;
    if (opts->signing_key && (!opts->signing_key[0] || strlen(opts->signing_key) > CONFIG_PATH_MAX))
        return error_set(err, STELE_ECONFIG, "signing_key must be a file path of 1 to %d bytes",
                         CONFIG_PATH_MAX);
    if (opts->max_journal_bytes && opts->max_journal_bytes < 2 * opts->segment_bytes)
        return error_set(err, STELE_ECONFIG,
                         "max_journal_bytes (%llu) must hold at least two segments of "
                         "segment_bytes (%llu)",
                         (unsigned long long)opts->max_journal_bytes,
                         (unsigned long long)opts->segment_bytes);
    rc = config_check_modes(opts, err);
    if (!rc)
        rc = config_check_sinks(opts, err);
    return rc ? rc : config_check_sizes(opts, err);
}
