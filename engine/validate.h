/*
 * validate.h: event validation and JSON -> BSON encoding, run in the appending thread before
 * anything is queued, so a rejected event changes nothing.
 *
 * Rules (each with its own code; messages name the byte position for JSON text and the key
 * path for documents):
 *   - an event is a JSON object / BSON document with at least one field (STELE_EEMPTY,
 *     STELE_ENOTOBJECT); JSON must be exactly one object, nothing after it, in RFC 8259's
 *     syntax (STELE_EJSON);
 *   - keys and strings are valid UTF-8, without overlong forms (C0 80 too), surrogates or
 *     code points above U+10FFFF, written raw or as \u escapes (a surrogate escape only as
 *     half of a pair) (STELE_EUTF8); no NUL inside a key (STELE_EKEYNUL);
 *   - no key at any depth starts with '$' (STELE_EDOLLARKEY): MongoDB reserves them, and
 *     extended-JSON wrappers ({"$date": ...}) are therefore not accepted either;
 *   - the top-level keys "_id", STELE_META_FIELD and STELE_TIME_FIELD_DEFAULT, and the time
 *     field of each of the journal's sinks (limits.time_fields), are reserved for the shipped
 *     document's envelope (STELE_ERESERVEDKEY);
 *   - no event reads differently to different readers (STELE_EAMBIGUOUS): no object at any
 *     depth holds the same key twice (most JSON readers keep the last value, libbson's
 *     lookups and `tail --where` the first; FerretDB refuses the document, MongoDB leaves
 *     it undefined), and no key holds a '.' (FerretDB and MongoDB before 5.0 refuse it; later
 *     MongoDB stores it, but its queries, like `tail --where`, read "a.b" as a path);
 *   - nesting (objects and arrays, the event itself is level 1) is at most max_depth, and at
 *     most JSON_MAX_DEPTH (98) for JSON input, the most libbson's reader takes (STELE_EDEPTH);
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

/* Whether a top-level key (key_len bytes, not NUL-terminated) belongs to the shipped
 * document's envelope: "_id", STELE_META_FIELD, STELE_TIME_FIELD_DEFAULT or a sink's time
 * field. One rule for the BSON walk and the JSON reader. */
bool validate_key_is_reserved(const validate_limits_t *lim, const char *key, size_t key_len);

/*
 * The messages of the two STELE_EAMBIGUOUS rules, for every input: a key repeated in one
 * object (`path` names it, key included) and a key holding a '.' (`parent_path` names the
 * object it is in, NULL at the top level). `byte` is its offset in JSON text, -1 for BSON.
 * Fill err (may be NULL) with the code, message and hint; return STELE_EAMBIGUOUS.
 */
int validate_key_repeated(stele_error_t *err, const char *key, size_t key_len, const char *path,
                          long byte);
int validate_key_dotted(stele_error_t *err, const char *key, size_t key_len,
                        const char *parent_path, long byte);

/*
 * Validates a BSON document of `len` bytes in place (nothing is copied). Returns 0 or one of
 * STELE_EEMPTY, STELE_EBSON, STELE_ETOOBIG, STELE_EUTF8, STELE_EDOLLARKEY,
 * STELE_ERESERVEDKEY, STELE_EAMBIGUOUS, STELE_EDEPTH with a message naming the key path or
 * byte offset.
 */
int validate_bson(const uint8_t *doc, size_t len, const validate_limits_t *lim, stele_error_t *err);

/* BSON bytes a validate_buf_t holds before it allocates: most events. */
#define VALIDATE_BUF_LOCAL_BYTES 1024

/* Where validate_json writes an event's BSON: in place for most events (a caller's stack
 * variable), on the heap for larger ones. Not movable while data points at local. */
typedef struct validate_buf {
    uint8_t *data; /* the document, len bytes: local, or heap memory */
    size_t len;
    size_t cap;
    uint8_t local[VALIDATE_BUF_LOCAL_BYTES];
} validate_buf_t;

/* Makes b empty, holding nothing to free (does not touch b->local). */
void validate_buf_init(validate_buf_t *b);
/* Frees what b allocated and makes it empty again. */
void validate_buf_free(validate_buf_t *b);

/*
 * Reads `len` bytes of JSON text into out (see json_bson.h), validating as it goes. On
 * success out->data[0 .. out->len) is the event's BSON, exactly the bytes libbson's JSON
 * reader writes for the same text; the caller frees with validate_buf_free whatever the
 * result. Returns 0, STELE_EEMPTY, STELE_EJSON (with the byte position), STELE_ENOTOBJECT,
 * STELE_EUTF8, STELE_EKEYNUL, STELE_ENUMBER, STELE_EDEPTH, STELE_ETOOBIG, STELE_EDOLLARKEY,
 * STELE_ERESERVEDKEY, STELE_EAMBIGUOUS, or -ENOMEM. When the text breaks several rules, the
 * code is that of the first text rule of json_scan.h it breaks, else its first syntax fault,
 * else too big, else empty, else its first key that breaks a key rule.
 */
int validate_json(const char *json, size_t len, const validate_limits_t *lim, validate_buf_t *out,
                  stele_error_t *err);

#endif /* STELE_ENGINE_VALIDATE_H */
