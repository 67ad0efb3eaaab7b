/*
 * render_bson.c: a BSON document as relaxed Extended JSON (MongoDB's Extended JSON v2),
 * through the writer of render.c, so events come out compact and with the same doubles as
 * everything else stele prints. JSON's own types (string, int32, int64, double, bool, null,
 * document, array) are plain JSON; every other type is the one-member object Extended JSON
 * names it with ({"$oid":...}, {"$date":...}, {"$binary":{...}}, ...).
 *
 * libbson does the BSON side: iterating, checking every length, ObjectId and Decimal128
 * text; base64 is the journal's (base64.h, the one encoder of the tree). A document is
 * checked while it is written: bson_iter's err_off after each level tells a corrupt
 * document from its end, a string or key that is not UTF-8 makes the document malformed,
 * and nesting is bounded (RENDER_MAX_DEPTH) so a corrupt copy cannot run the recursion off
 * the stack. Pure functions; no state, no locks.
 */
#include "render.h"

#include <bson/bson.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64.h"

/* Extended JSON writes dates of the years 1970..9999 as text, the rest as a number. */
#define RENDER_DATE_TEXT_MAX_MS INT64_C(253402300799999)

static void render_members(render_buf_t *b, bson_iter_t *it, int is_array, int depth);

/* {"NAME": then the caller writes the value and closes with render_object_end. */
static void
render_wrapper_begin(render_buf_t *b, const char *name)
{
    render_object_begin(b);
    render_key(b, name);
}

static void
render_oid(render_buf_t *b, const bson_oid_t *oid)
{
    char hex[25];
    bson_oid_to_string(oid, hex);
    render_wrapper_begin(b, "$oid");
    render_string(b, hex, 24);
    render_object_end(b);
}

/* {"$date":"2026-11-30T20:44:50.123Z"} (no fraction when it is zero) for the years
 * 1970..9999, else {"$date":{"$numberLong":"N"}}. */
static void
render_date(render_buf_t *b, int64_t unix_ms)
{
    render_wrapper_begin(b, "$date");
    char text[64];
    if (unix_ms >= 0 && unix_ms <= RENDER_DATE_TEXT_MAX_MS) {
        time_t t = (time_t)(unix_ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        size_t n = strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
        if (unix_ms % 1000 != 0)
            n += (size_t)snprintf(text + n, sizeof text - n, ".%03d", (int)(unix_ms % 1000));
        snprintf(text + n, sizeof text - n, "Z");
        render_string(b, text, strlen(text));
    } else {
        snprintf(text, sizeof text, "%" PRId64, unix_ms);
        render_wrapper_begin(b, "$numberLong");
        render_string(b, text, strlen(text));
        render_object_end(b);
    }
    render_object_end(b);
}

/* {"$binary":{"base64":"...","subType":"xx"}} */
static void
render_binary(render_buf_t *b, const bson_iter_t *it)
{
    bson_subtype_t subtype;
    uint32_t len;
    const uint8_t *data;
    bson_iter_binary(it, &subtype, &len, &data);
    char *b64 = malloc(BASE64_ENCODED_LEN((size_t)len) + 1);
    if (b64 == NULL) {
        render_fail(b, -ENOMEM, "out of memory");
        return;
    }
    size_t n = base64_encode(data, len, b64);
    char subtype_hex[3];
    snprintf(subtype_hex, sizeof subtype_hex, "%02x", (unsigned)subtype & 0xffu);
    render_wrapper_begin(b, "$binary");
    render_object_begin(b);
    render_key(b, "base64");
    render_string(b, b64, n);
    render_key(b, "subType");
    render_string(b, subtype_hex, 2);
    render_object_end(b);
    render_object_end(b);
    free(b64);
}

/* {"$regularExpression":{"pattern":"...","options":"..."}} */
static void
render_regex(render_buf_t *b, const bson_iter_t *it)
{
    const char *options = NULL;
    const char *pattern = bson_iter_regex(it, &options);
    render_wrapper_begin(b, "$regularExpression");
    render_object_begin(b);
    render_key(b, "pattern");
    render_string(b, pattern, strlen(pattern));
    render_key(b, "options");
    render_string(b, options, strlen(options));
    render_object_end(b);
    render_object_end(b);
}

/* {"$code":"...","$scope":{...}} */
static void
render_code_with_scope(render_buf_t *b, const bson_iter_t *it, int depth)
{
    uint32_t code_len, scope_len;
    const uint8_t *scope_data;
    const char *code = bson_iter_codewscope(it, &code_len, &scope_len, &scope_data);
    bson_t scope;
    bson_iter_t scope_it;
    render_wrapper_begin(b, "$code");
    render_string(b, code, code_len);
    render_key(b, "$scope");
    if (!bson_init_static(&scope, scope_data, scope_len) || !bson_iter_init(&scope_it, &scope))
        render_fail(b, STELE_EBSON, "a code scope is malformed");
    else
        render_members(b, &scope_it, 0, depth + 1);
    render_object_end(b);
}

/* {"$dbPointer":{"$ref":"...","$id":{"$oid":"..."}}} */
static void
render_dbpointer(render_buf_t *b, const bson_iter_t *it)
{
    uint32_t coll_len;
    const char *coll;
    const bson_oid_t *oid;
    bson_iter_dbpointer(it, &coll_len, &coll, &oid);
    render_wrapper_begin(b, "$dbPointer");
    render_object_begin(b);
    render_key(b, "$ref");
    render_string(b, coll, coll_len);
    render_key(b, "$id");
    render_oid(b, oid);
    render_object_end(b);
    render_object_end(b);
}

/* {"$timestamp":{"t":T,"i":I}} */
static void
render_timestamp(render_buf_t *b, const bson_iter_t *it)
{
    uint32_t t, i;
    bson_iter_timestamp(it, &t, &i);
    render_wrapper_begin(b, "$timestamp");
    render_object_begin(b);
    render_key(b, "t");
    render_uint64(b, t);
    render_key(b, "i");
    render_uint64(b, i);
    render_object_end(b);
    render_object_end(b);
}

/* A one-member wrapper around a string: {"$numberDecimal":"1.5"}, {"$symbol":"s"}, ... */
static void
render_wrapped_string(render_buf_t *b, const char *name, const char *s, size_t len)
{
    render_wrapper_begin(b, name);
    render_string(b, s, len);
    render_object_end(b);
}

/* {"$undefined":true}, {"$minKey":1}, {"$maxKey":1} */
static void
render_marker(render_buf_t *b, const char *name, int is_bool)
{
    render_wrapper_begin(b, name);
    if (is_bool)
        render_bool(b, 1);
    else
        render_int64(b, 1);
    render_object_end(b);
}

/* The types JSON has no word for, each as Extended JSON v2 writes it. */
static void
render_extended(render_buf_t *b, const bson_iter_t *it, int depth)
{
    uint32_t len;
    const char *s;
    bson_decimal128_t dec;
    char dec_text[BSON_DECIMAL128_STRING];
    switch (bson_iter_type(it)) {
    case BSON_TYPE_OID:
        render_oid(b, bson_iter_oid(it));
        break;
    case BSON_TYPE_DATE_TIME:
        render_date(b, bson_iter_date_time(it));
        break;
    case BSON_TYPE_BINARY:
        render_binary(b, it);
        break;
    case BSON_TYPE_REGEX:
        render_regex(b, it);
        break;
    case BSON_TYPE_TIMESTAMP:
        render_timestamp(b, it);
        break;
    case BSON_TYPE_DBPOINTER:
        render_dbpointer(b, it);
        break;
    case BSON_TYPE_CODEWSCOPE:
        render_code_with_scope(b, it, depth);
        break;
    case BSON_TYPE_DECIMAL128:
        bson_iter_decimal128(it, &dec);
        bson_decimal128_to_string(&dec, dec_text);
        render_wrapped_string(b, "$numberDecimal", dec_text, strlen(dec_text));
        break;
    case BSON_TYPE_CODE:
        s = bson_iter_code(it, &len);
        render_wrapped_string(b, "$code", s, len);
        break;
    case BSON_TYPE_SYMBOL:
        s = bson_iter_symbol(it, &len);
        render_wrapped_string(b, "$symbol", s, len);
        break;
    case BSON_TYPE_UNDEFINED:
        render_marker(b, "$undefined", 1);
        break;
    case BSON_TYPE_MINKEY:
        render_marker(b, "$minKey", 0);
        break;
    case BSON_TYPE_MAXKEY:
        render_marker(b, "$maxKey", 0);
        break;
    default:
        render_fail(b, STELE_EBSON, "a value has an unknown BSON type");
    }
}

static void
render_value(render_buf_t *b, const bson_iter_t *it, int depth)
{
    uint32_t len;
    const char *s;
    bson_iter_t child;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8:
        s = bson_iter_utf8(it, &len);
        render_string(b, s, len);
        break;
    case BSON_TYPE_INT32:
        render_int64(b, bson_iter_int32(it));
        break;
    case BSON_TYPE_INT64:
        render_int64(b, bson_iter_int64(it));
        break;
    case BSON_TYPE_DOUBLE:
        render_double(b, bson_iter_double(it));
        break;
    case BSON_TYPE_BOOL:
        render_bool(b, bson_iter_bool(it));
        break;
    case BSON_TYPE_NULL:
        render_null(b);
        break;
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        if (bson_iter_recurse(it, &child))
            render_members(b, &child, bson_iter_type(it) == BSON_TYPE_ARRAY, depth + 1);
        else
            render_fail(b, STELE_EBSON, "a nested document is malformed");
        break;
    default:
        render_extended(b, it, depth);
        break;
    }
}

/* The members of a document (keys and values) or the values of an array, bracketed.
 * Stops at the first error; err_off tells a corrupt document from its end. */
static void
render_members(render_buf_t *b, bson_iter_t *it, int is_array, int depth)
{
    if (depth > RENDER_MAX_DEPTH) {
        render_fail(b, STELE_EDEPTH, "documents nest deeper than 128 levels");
        return;
    }
    if (is_array)
        render_array_begin(b);
    else
        render_object_begin(b);
    while (b->rc == 0 && bson_iter_next(it)) {
        if (!is_array)
            render_key(b, bson_iter_key(it));
        render_value(b, it, depth);
    }
    if (it->err_off != 0)
        render_fail(b, STELE_EBSON, "the document is malformed");
    if (is_array)
        render_array_end(b);
    else
        render_object_end(b);
}

void
render_bson_value(render_buf_t *b, const bson_iter_t *it)
{
    if (b->rc != 0)
        return;
    render_value(b, it, 1);
    if (b->rc == STELE_EUTF8)
        b->rc = STELE_EBSON;
}

void
render_bson(render_buf_t *b, const uint8_t *doc, size_t len)
{
    bson_t view;
    bson_iter_t it;
    if (b->rc != 0)
        return;
    if (doc == NULL || len > UINT32_MAX || !bson_init_static(&view, doc, len) ||
        !bson_iter_init(&it, &view)) {
        render_fail(b, STELE_EBSON, "the document's length or end is wrong");
        return;
    }
    render_members(b, &it, 0, 1);
    /* BSON strings are UTF-8 by definition: one that is not makes the document malformed */
    if (b->rc == STELE_EUTF8)
        b->rc = STELE_EBSON;
}
