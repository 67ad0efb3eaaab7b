/*
 * bench_parse_yajl.c: yajl (2.1, Debian's libyajl-dev) as a `yajl-json` parser cell
 * (bench_json.h): its callback parser appending straight into BSON, with no tree between,
 * the fastest way yajl offers. One handle per writer, allowed to read many values in a row,
 * so each event is one yajl_parse call on a handle that is never rebuilt (the way stele's
 * validation once fed libbson's reader). Built only when pkg-config finds yajl.
 */
#include "bench_json.h"

#ifdef BENCH_HAVE_YAJL

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

/* A key longer than this is kept on the heap until its value is appended. */
#define YAJL_KEY_LOCAL_BYTES 256

typedef struct yajl_bench {
    yajl_handle handle;
    bson_t *root;        /* the event being written */
    bool is_root_open;   /* its '{' was read */
    bool is_root_closed; /* its '}' was read */
    int depth;           /* open containers below root */
    bool is_array[BENCH_JSON_MAX_DEPTH + 1];
    uint32_t index[BENCH_JSON_MAX_DEPTH + 1];
    bson_t frames[BENCH_JSON_MAX_DEPTH + 1]; /* [d] is the container at depth d; [0] unused */
    const char *key;                         /* the next value's key (in key_buf or key_heap) */
    int key_len;
    char index_key[16];
    char *key_heap;
    char key_buf[YAJL_KEY_LOCAL_BYTES];
} yajl_bench_t;

static bson_t *
yajl_bench_parent(yajl_bench_t *y)
{
    return y->depth == 0 ? y->root : &y->frames[y->depth];
}

/* The container holding the one at the innermost depth. */
static bson_t *
yajl_bench_parent_of(yajl_bench_t *y)
{
    return y->depth == 1 ? y->root : &y->frames[y->depth - 1];
}

/* The key of the value about to be appended: the map key, or the array index. */
static void
yajl_bench_key(yajl_bench_t *y)
{
    if (y->depth > 0 && y->is_array[y->depth]) {
        const char *key;
        y->key_len = (int)bson_uint32_to_string(y->index[y->depth]++, &key, y->index_key,
                                                sizeof y->index_key);
        y->key = key;
    }
}

static int
yajl_on_null(void *ctx)
{
    yajl_bench_t *y = ctx;
    yajl_bench_key(y);
    return bson_append_null(yajl_bench_parent(y), y->key, y->key_len);
}

static int
yajl_on_boolean(void *ctx, int v)
{
    yajl_bench_t *y = ctx;
    yajl_bench_key(y);
    return bson_append_bool(yajl_bench_parent(y), y->key, y->key_len, v != 0);
}

static int
yajl_on_integer(void *ctx, long long v)
{
    yajl_bench_t *y = ctx;
    yajl_bench_key(y);
    bench_json_append_integer(yajl_bench_parent(y), y->key, y->key_len, (int64_t)v);
    return 1;
}

static int
yajl_on_double(void *ctx, double v)
{
    yajl_bench_t *y = ctx;
    yajl_bench_key(y);
    return bson_append_double(yajl_bench_parent(y), y->key, y->key_len, v);
}

static int
yajl_on_string(void *ctx, const unsigned char *s, size_t len)
{
    yajl_bench_t *y = ctx;
    yajl_bench_key(y);
    return bson_append_utf8(yajl_bench_parent(y), y->key, y->key_len, (const char *)s, (int)len);
}

static int
yajl_on_map_key(void *ctx, const unsigned char *key, size_t len)
{
    yajl_bench_t *y = ctx;
    char *to = y->key_buf;
    if (len >= sizeof y->key_buf) {
        free(y->key_heap);
        if (!(y->key_heap = malloc(len + 1)))
            return 0;
        to = y->key_heap;
    }
    memcpy(to, key, len); /* yajl's key lives only for this call */
    to[len] = '\0';
    y->key = to;
    y->key_len = (int)len;
    return 1;
}

static int
yajl_on_open(yajl_bench_t *y, bool is_array)
{
    if (y->depth >= BENCH_JSON_MAX_DEPTH)
        return 0;
    bson_t *parent = yajl_bench_parent(y);
    bson_t *child = &y->frames[y->depth + 1];
    bool ok = is_array ? bson_append_array_begin(parent, y->key, y->key_len, child)
                       : bson_append_document_begin(parent, y->key, y->key_len, child);
    y->depth++;
    y->is_array[y->depth] = is_array;
    y->index[y->depth] = 0;
    return ok;
}

static int
yajl_on_start_map(void *ctx)
{
    yajl_bench_t *y = ctx;
    if (y->depth == 0 && !y->is_root_open) { /* the event itself */
        y->is_root_open = true;
        return 1;
    }
    if (y->is_root_closed)
        return 0; /* a second value after the event */
    yajl_bench_key(y);
    return yajl_on_open(y, false);
}

static int
yajl_on_start_array(void *ctx)
{
    yajl_bench_t *y = ctx;
    if (y->depth == 0 && (!y->is_root_open || y->is_root_closed))
        return 0; /* an event is one object */
    yajl_bench_key(y);
    return yajl_on_open(y, true);
}

static int
yajl_on_end(void *ctx)
{
    yajl_bench_t *y = ctx;
    if (y->depth == 0) { /* the event's closing brace */
        y->is_root_closed = true;
        return 1;
    }
    bson_t *child = &y->frames[y->depth];
    y->depth--;
    bson_t *parent = yajl_bench_parent(y);
    return y->is_array[y->depth + 1] ? bson_append_array_end(parent, child)
                                     : bson_append_document_end(parent, child);
}

static const yajl_callbacks yajl_bench_callbacks = {
    .yajl_null = yajl_on_null,
    .yajl_boolean = yajl_on_boolean,
    .yajl_integer = yajl_on_integer,
    .yajl_double = yajl_on_double,
    .yajl_string = yajl_on_string,
    .yajl_start_map = yajl_on_start_map,
    .yajl_map_key = yajl_on_map_key,
    .yajl_end_map = yajl_on_end,
    .yajl_start_array = yajl_on_start_array,
    .yajl_end_array = yajl_on_end,
};

static void
yajl_bench_free(void *parser)
{
    yajl_bench_t *y = parser;
    if (y) {
        if (y->handle)
            yajl_free(y->handle);
        free(y->key_heap);
    }
    free(y);
}

static void *
yajl_bench_new(void)
{
    void *mem = NULL;
    /* bson_t wants 128-byte alignment, more than malloc gives */
    if (posix_memalign(&mem, 128, sizeof(yajl_bench_t)) != 0)
        return NULL;
    yajl_bench_t *y = memset(mem, 0, sizeof(yajl_bench_t));
    y->handle = yajl_alloc(&yajl_bench_callbacks, NULL, y);
    if (!y->handle || !yajl_config(y->handle, yajl_allow_multiple_values, 1)) {
        yajl_bench_free(y);
        return NULL;
    }
    return y;
}

static int
yajl_bench_to_bson(void *parser, const char *json, size_t len, bson_t *out)
{
    yajl_bench_t *y = parser;
    bson_reinit(out);
    y->root = out;
    y->depth = 0;
    y->is_root_open = y->is_root_closed = false;
    yajl_status st = yajl_parse(y->handle, (const unsigned char *)json, len);
    int ok = st == yajl_status_ok && y->is_root_closed;
    for (; y->depth > 0; y->depth--) /* close what a failure left open: out is reused */
        bson_append_document_end(yajl_bench_parent_of(y), &y->frames[y->depth]);
    y->root = NULL;
    if (!ok) { /* a handle that failed cannot go on: start a new one */
        yajl_free(y->handle);
        y->handle = yajl_alloc(&yajl_bench_callbacks, NULL, y);
        if (y->handle)
            yajl_config(y->handle, yajl_allow_multiple_values, 1);
    }
    return ok ? 0 : -1;
}

const bench_json_def_t bench_json_yajl = {
    .system = "yajl-json",
    .library = "yajl's callback parser",
    .parser_new = yajl_bench_new,
    .to_bson = yajl_bench_to_bson,
    .parser_free = yajl_bench_free,
};

#else

const bench_json_def_t bench_json_yajl = {.system = "yajl-json", .library = "yajl"};

#endif
