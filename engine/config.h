/*
 * config.h: the knob table behind stele_options_set / load_file / load_env (<stele.h>) and
 * the checks stele_open runs on a whole options struct.
 */
#ifndef STELE_ENGINE_CONFIG_H
#define STELE_ENGINE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "stele.h"

/* Largest event: MongoDB's 16 MiB document limit less room for the shipped envelope
 * (_id with source and seq, the STELE_META_FIELD sub-document with ts and hashes). */
#define CONFIG_MAX_RECORD_LIMIT ((uint32_t)(16u << 20) - (16u << 10))
/* Source names appear in MongoDB _id values and file names: keep them short and plain. */
#define CONFIG_SOURCE_MAX 63
/* The longest file path a knob takes (PATH_MAX less its NUL). */
#define CONFIG_PATH_MAX 4095

/* Sink limits. w counts members, and a replica set has at most 50. */
#define CONFIG_SINK_MAX_W 50
/* MongoDB's maxWriteBatchSize: the most documents one insert command may carry. */
#define CONFIG_SINK_MAX_BATCH_DOCS 100000u
/* MongoDB's maxMessageSizeBytes; a batch is held in memory whole, so this also bounds what
 * one shipper holds. */
#define CONFIG_SINK_MAX_BATCH_BYTES 48000000u
#define CONFIG_SINK_MIN_BATCH_BYTES 1024u
/* Batch linger and retry delays: an hour is already far past any use, and keeps every
 * conversion of these delays to an int of milliseconds safe. */
#define CONFIG_SINK_MAX_DELAY_MS 3600000u

/* A sink's time field when none is set: in the store's '_' namespace beside _id, since
 * events often carry their own ts or time; events may not use it (validate.c). */
#define CONFIG_TIME_FIELD_DEFAULT "_ts"
#define CONFIG_TIME_FIELD_MAX 63
/* MongoDB's limit of keys in one compound index. */
#define CONFIG_INDEX_MAX_KEYS 32

typedef struct config_index_key {
    char field[128]; /* a dotted path, as MongoDB's index key names it */
    int direction;   /* 1 or -1 */
} config_index_key_t;

typedef struct config_index {
    config_index_key_t keys[CONFIG_INDEX_MAX_KEYS];
    size_t n_keys;
} config_index_t;

/*
 * Parses the next index spec of a sink's `indexes` ("field:1|-1[,field:1|-1...]", specs
 * separated by ';') at *cursor into *out and moves *cursor past it. Returns 1 with an index,
 * 0 when no spec is left (also for a NULL *cursor), -1 with STELE_ECONFIG in *err naming the
 * malformed key.
 */
int config_index_next(const char **cursor, config_index_t *out, stele_error_t *err);

/* 1 when name may be a sink's time_field: 1 to CONFIG_TIME_FIELD_MAX bytes, no '.', not
 * starting with '$', neither _id nor _stele. */
int config_time_field_ok(const char *name);

/* Checks a sink's time_field, timeseries and index specs (config_check_sink_numbers runs it).
 * Returns 0 or STELE_ECONFIG naming the sink. */
int config_check_collection(const stele_sink_options_t *sink, const char *name, stele_error_t *err);

/*
 * Checks a sink's numbers: w, journaled, each uint32 key within its range (wtimeout_ms fits
 * libmongoc's int32, batch_docs 1 to CONFIG_SINK_MAX_BATCH_DOCS, ...), backoff_min_ms <=
 * backoff_max_ms. `name` is the sink's name for the message. Returns 0 or STELE_ECONFIG
 * naming the sink, the key, the value and the range.
 */
int config_check_sink_numbers(const stele_sink_options_t *sink, const char *name,
                              stele_error_t *err);

/*
 * Checks the relations between knobs that no single knob can check (segment large enough for
 * the largest record, quota large enough for two segments, sink names unique, ...).
 * Returns 0 or STELE_ECONFIG naming the knobs.
 */
int config_check(const stele_options_t *opts, stele_error_t *err);

#endif /* STELE_ENGINE_CONFIG_H */
