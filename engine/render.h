/*
 * render.h: the one JSON writer behind every JSON text stele prints (stele.h, "JSON output"):
 * compact (no spaces), strings escaped, doubles in their shortest round-trip form, BSON
 * documents as relaxed Extended JSON (render_bson.c). A render_buf_t is written front to back like
 * a stream: the writers never fail on their own; the first error (no memory, invalid UTF-8, a
 * malformed document) sticks in the buffer, later writes do nothing, and render_finish()
 * reports it. Commas are placed by the buffer: after a begin or a key none, else one.
 * A buffer belongs to one thread; the functions keep no other state.
 */
#ifndef STELE_ENGINE_RENDER_H
#define STELE_ENGINE_RENDER_H

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>

#include "stele.h"

/* Deepest nesting of documents and arrays rendered; MongoDB stores at most 100 levels and
 * events at most max_depth (<= 100): a deeper document comes from a corrupt copy, and this
 * bound keeps the recursion off the end of the stack. */
#define RENDER_MAX_DEPTH 128

typedef struct render_buf {
    char *text; /* NUL-terminated once anything was written; owned (malloc) */
    size_t len, cap;
    int rc;            /* the first error (-ENOMEM, STELE_EBSON, STELE_EUTF8, STELE_EDEPTH) */
    const char *what;  /* static text naming it, for the message */
    int is_after_item; /* the next item of the open object or array needs a comma */
} render_buf_t;

/* An empty buffer; nothing allocated until the first write. */
void render_init(render_buf_t *b);

/* Records the first error (`what`: static text for the message); later writes do nothing. */
void render_fail(render_buf_t *b, int rc, const char *what);

void render_object_begin(render_buf_t *b);
void render_object_end(render_buf_t *b);
void render_array_begin(render_buf_t *b);
void render_array_end(render_buf_t *b);

/* A member name, then its ':'; the value follows with the next write. Keys are UTF-8 (else
 * STELE_EUTF8), NUL-terminated. */
void render_key(render_buf_t *b, const char *key);

/* A JSON string of `len` bytes of UTF-8 (NUL bytes allowed: written \u0000). */
void render_string(render_buf_t *b, const char *s, size_t len);
void render_int64(render_buf_t *b, int64_t v);
void render_uint64(render_buf_t *b, uint64_t v);
/* The shortest text that reads back as `v`, with ".0" when it would read as an integer;
 * NaN and the infinities as {"$numberDouble":"NaN"|"Infinity"|"-Infinity"}. */
void render_double(render_buf_t *b, double v);
void render_bool(render_buf_t *b, int v);
void render_null(render_buf_t *b);

/* A time as an RFC 3339 UTC string with `frac_digits` (3 or 6) digits of fraction:
 * "2026-11-30T20:44:50.123456Z". `frac` is in units of that many digits (ms or us). */
void render_time(render_buf_t *b, int64_t unix_s, int64_t frac, int frac_digits);

/* A time in nanoseconds as RFC 3339 UTC with microseconds, floored (also before 1970):
 * what `stele tail` prints as a record's "ts". */
void render_time_ns(render_buf_t *b, int64_t ts_ns);
/* `len` bytes as they are: no quoting, no comma (for the lines that are not JSON,
 * render_short.c). */
void render_text(render_buf_t *b, const char *s, size_t len);

/* The value at `it` (any BSON type) as relaxed Extended JSON, as render_bson writes it
 * inside a document; STELE_EBSON when it is malformed or not UTF-8. */
void render_bson_value(render_buf_t *b, const bson_iter_t *it);

/* A BSON document of `len` bytes as relaxed Extended JSON; STELE_EBSON when it is not a
 * well-formed document (or holds invalid UTF-8), STELE_EDEPTH beyond RENDER_MAX_DEPTH. */
void render_bson(render_buf_t *b, const uint8_t *doc, size_t len);

/*
 * Ends the text: on success hands it to the caller (*text_out, freed with free(); *len_out
 * may be NULL) and returns 0. On failure frees it, fills *err naming `subject` ("event",
 * "status") and returns the first error. The buffer is empty afterwards either way.
 */
int render_finish(render_buf_t *b, const char *subject, char **text_out, size_t *len_out,
                  stele_error_t *err);

#endif /* STELE_ENGINE_RENDER_H */
