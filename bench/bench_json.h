/*
 * bench_json.h: the JSON parsers stele-bench measures beside libbson's reader (the `-json`
 * cells of bench_parsers.c). Each turns an event's JSON text into exactly the BSON
 * libbson's reader writes for it (int32 when an integer fits, else int64; other numbers as
 * doubles), built with libbson's appenders from what the parser hands back, so every cell
 * ends with the same document and only the parsing differs. Each library is optional: a
 * stele-bench built without it reports the cell skipped.
 */
#ifndef STELE_BENCH_JSON_H
#define STELE_BENCH_JSON_H

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bench_json_def {
    const char *system;  /* the cell's name: "yajl-json", ... */
    const char *library; /* what is measured, for the cell's note */
    /* A parser of its own for one writer thread; NULL when out of memory. NULL hooks: the
     * library was not found when stele-bench was built. */
    void *(*parser_new)(void);
    /* Reads `len` bytes of JSON into out (emptied first). Returns 0, or -1 when the parser
     * refuses the text or cannot express it as libbson would (an integer past int64). */
    int (*to_bson)(void *parser, const char *json, size_t len, bson_t *out);
    void (*parser_free)(void *parser);
} bench_json_def_t;

extern const bench_json_def_t bench_json_yajl;
extern const bench_json_def_t bench_json_jansson;
extern const bench_json_def_t bench_json_simdjson;

/* Deepest nesting the parsers' BSON builders take (libbson's reader takes 98). */
#define BENCH_JSON_MAX_DEPTH 100

/* Appends an integer as libbson's reader types it: int32 when it fits, else int64. */
void bench_json_append_integer(bson_t *b, const char *key, int key_len, int64_t v);

#ifdef __cplusplus
}
#endif

#endif /* STELE_BENCH_JSON_H */
