/*
 * bench_parse_jansson.c: jansson (2.14, Debian's libjansson-dev) as a `jansson-json` parser
 * cell (bench_json.h): json_loadb builds jansson's tree of the event, which is then written
 * into BSON and freed, jansson's one way to read a document. Built only when pkg-config finds
 * jansson.
 */
#include "bench_json.h"

#ifdef BENCH_HAVE_JANSSON

#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>

static bool jansson_bench_value(bson_t *parent, const char *key, int key_len, json_t *v, int depth);

static bool
jansson_bench_object(bson_t *parent, const char *key, int key_len, json_t *obj, int depth)
{
    bson_t child;
    if (depth > BENCH_JSON_MAX_DEPTH || !bson_append_document_begin(parent, key, key_len, &child))
        return false;
    bool ok = true;
    /* jansson iterates an object in insertion order, so keys keep the text's order */
    for (void *it = json_object_iter(obj); it && ok; it = json_object_iter_next(obj, it))
        ok =
            jansson_bench_value(&child, json_object_iter_key(it), (int)json_object_iter_key_len(it),
                                json_object_iter_value(it), depth + 1);
    return bson_append_document_end(parent, &child) && ok;
}

static bool
jansson_bench_array(bson_t *parent, const char *key, int key_len, json_t *arr, int depth)
{
    bson_t child;
    if (depth > BENCH_JSON_MAX_DEPTH || !bson_append_array_begin(parent, key, key_len, &child))
        return false;
    bool ok = true;
    for (size_t i = 0; i < json_array_size(arr) && ok; i++) {
        char buf[16];
        const char *index;
        size_t n = bson_uint32_to_string((uint32_t)i, &index, buf, sizeof buf);
        ok = jansson_bench_value(&child, index, (int)n, json_array_get(arr, i), depth + 1);
    }
    return bson_append_array_end(parent, &child) && ok;
}

static bool
jansson_bench_value(bson_t *parent, const char *key, int key_len, json_t *v, int depth)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return jansson_bench_object(parent, key, key_len, v, depth);
    case JSON_ARRAY:
        return jansson_bench_array(parent, key, key_len, v, depth);
    case JSON_STRING:
        return bson_append_utf8(parent, key, key_len, json_string_value(v),
                                (int)json_string_length(v));
    case JSON_INTEGER:
        bench_json_append_integer(parent, key, key_len, (int64_t)json_integer_value(v));
        return true;
    case JSON_REAL:
        return bson_append_double(parent, key, key_len, json_real_value(v));
    case JSON_TRUE:
    case JSON_FALSE:
        return bson_append_bool(parent, key, key_len, json_is_true(v));
    case JSON_NULL:
        return bson_append_null(parent, key, key_len);
    }
    return false;
}

static void *
jansson_bench_new(void)
{
    return malloc(1); /* jansson keeps no parser between documents */
}

static void
jansson_bench_free(void *parser)
{
    free(parser);
}

static int
jansson_bench_to_bson(void *parser, const char *json, size_t len, bson_t *out)
{
    (void)parser;
    bson_reinit(out);
    json_error_t error;
    json_t *root = json_loadb(json, len, 0, &error);
    if (!root)
        return -1;
    bool ok = json_is_object(root);
    for (void *it = json_object_iter(root); it && ok; it = json_object_iter_next(root, it))
        ok = jansson_bench_value(out, json_object_iter_key(it), (int)json_object_iter_key_len(it),
                                 json_object_iter_value(it), 2);
    json_decref(root);
    return ok ? 0 : -1;
}

const bench_json_def_t bench_json_jansson = {
    .system = "jansson-json",
    .library = "jansson's json_loadb and tree",
    .parser_new = jansson_bench_new,
    .to_bson = jansson_bench_to_bson,
    .parser_free = jansson_bench_free,
};

#else

const bench_json_def_t bench_json_jansson = {.system = "jansson-json", .library = "jansson"};

#endif
