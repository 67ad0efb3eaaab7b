/*
 * validate.h: event validation and JSON -> BSON encoding, run in the appending thread before
 * anything is queued, so a rejected event changes nothing.
 *
 * Rules (each with its own code; messages name the byte position for JSON text and the key
 * path for documents):
 *   - an event is a JSON object / BSON document with at least one field (STELE_EEMPTY,
 *     STELE_ENOTOBJECT); JSON must be exactly one object, nothing after it (STELE_EJSON);
 *   - keys and strings are valid UTF-8, without overlong forms (C0 80 too), surrogates or
 *     code points above U+10FFFF (STELE_EUTF8); no NUL inside a key (STELE_EKEYNUL);
 *   - no key at any depth starts with '$' (STELE_EDOLLARKEY): MongoDB reserves them, and
 *     extended-JSON wrappers ({"$date": ...}) are therefore not accepted either;
 *   - the top-level keys "_id", STELE_META_FIELD and STELE_TIME_FIELD_DEFAULT, and the time
 *     field of each of the journal's sinks (limits.time_fields), are reserved for the shipped
 *     document's envelope (STELE_ERESERVEDKEY);
 *   - nesting (objects and arrays, the event itself is level 1) is at most max_depth, and at
 *     most 98 for JSON input, the most libbson's parser takes (STELE_EDEPTH);
 *   - a JSON number is an int64 or a finite double: integers beyond int64 and exponents that
 *     overflow (or underflow to zero) are refused (STELE_ENUMBER) rather than wrapped or
 *     rounded the way libbson would; NaN and Infinity are not JSON (STELE_EJSON);
 *   - the encoded BSON is at most max_record_bytes (STELE_ETOOBIG);
 *   - BSON input must be structurally sound (STELE_EBSON).
 * Pure functions of their inputs: thread-safe.
 */
#ifndef STELE_ENGINE_VALIDATE_H
#define STELE_ENGINE_VALIDATE_H

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>

#include "stele.h"

/* Top-level field the shipper adds to every MongoDB document (seq, ts, chain hash); events
 * may not use it, so the remote copy is unambiguous. */
#define STELE_META_FIELD "_stele"
/* Top-level field holding the shipped document's deterministic (source, seq) key. */
#define STELE_ID_FIELD "_id"
/* Top-level BSON date of a shipped document's time when its sink names none
 * (CONFIG_TIME_FIELD_DEFAULT); reserved in every journal, with or without sinks. */
#define STELE_TIME_FIELD_DEFAULT "_ts"

/* MongoDB refuses documents nested deeper than 100 levels. */
#define VALIDATE_MAX_DEPTH_LIMIT 100

typedef struct validate_limits {
    uint32_t max_record_bytes; /* largest encoded event */
    uint32_t max_depth;        /* deepest nesting, 1..VALIDATE_MAX_DEPTH_LIMIT */
    /* Other reserved top-level keys: the time fields of the journal's sinks (borrowed). */
    const char *time_fields[STELE_MAX_SINKS];
    size_t n_time_fields;
} validate_limits_t;

/* Fills lim->time_fields from the sinks of opts (borrowing their strings). */
void validate_limits_reserve_sinks(validate_limits_t *lim, const stele_options_t *opts);

/*
 * Validates a BSON document of `len` bytes in place (nothing is copied). Returns 0 or one of
 * STELE_EEMPTY, STELE_EBSON, STELE_ETOOBIG, STELE_EUTF8, STELE_EDOLLARKEY,
 * STELE_ERESERVEDKEY, STELE_EDEPTH with a message naming the key path or byte offset.
 */
int validate_bson(const uint8_t *doc, size_t len, const validate_limits_t *lim, stele_error_t *err);

/*
 * Parses `len` bytes of JSON text into *out (initialised by the call) and validates it.
 * On success the caller frees *out with bson_destroy(); *out may be a read-only view of a
 * buffer of the calling thread, valid until that thread's next validate_json. On failure
 * *out holds nothing to free. Returns 0, STELE_EEMPTY, STELE_EJSON (with the byte position),
 * STELE_ENOTOBJECT, STELE_EUTF8, STELE_EKEYNUL, STELE_ENUMBER, STELE_EDEPTH, STELE_ETOOBIG,
 * STELE_EDOLLARKEY, STELE_ERESERVEDKEY.
 */
int validate_json(const char *json, size_t len, const validate_limits_t *lim, bson_t *out,
                  stele_error_t *err);

#endif /* STELE_ENGINE_VALIDATE_H */
