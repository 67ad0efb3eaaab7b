/*
 * test_render.c: the JSON output calls (stele.h, "JSON output"; engine/render*.c).
 *
 * The table writes one event per row, built from canonical Extended JSON by libbson's
 * parser (so each BSON type is written down exactly), and compares the whole text: compact,
 * escapes, int32/int64 at their bounds, doubles in their shortest round-trip form (NaN and
 * the infinities as {"$numberDouble":...}), and every other BSON type as relaxed Extended
 * JSON. Rows without doubles must also equal libbson's own relaxed output with its spaces
 * taken out: the Extended JSON forms are MongoDB's, not ours. Malformed documents are errors
 * that hand nothing out. The record line, the status object and the dead-letter line are
 * compared whole, field order included, since scripts read them. Python's json module reads
 * a few thousand random events back to the same values (render_roundtrip.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>
#include <cmocka.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <sys/wait.h>

#include "stele.h"
#include "test_util.h"

typedef struct render_row {
    const char *name;
    const char *input;    /* canonical Extended JSON, parsed by libbson into the event */
    const char *want;     /* what stele_event_to_json must write */
    int is_libbson_alike; /* libbson's relaxed output, spaces removed, is the same text */
} render_row_t;

static const render_row_t rows[] = {
    /* strings and keys */
    {"plain string", "{\"s\":\"plain\"}", "{\"s\":\"plain\"}", 1},
    {"quote, backslash, slash", "{\"s\":\"q\\\"b\\\\s/\"}", "{\"s\":\"q\\\"b\\\\s/\"}", 1},
    {"short escapes", "{\"s\":\"\\b\\f\\n\\r\\t\"}", "{\"s\":\"\\b\\f\\n\\r\\t\"}", 1},
    {"other control bytes as \\u00XX, DEL as it is", "{\"s\":\"\\u0001\\u001f\\u007f\"}",
     "{\"s\":\"\\u0001\\u001f\x7f\"}", 1},
    {"NUL inside a string", "{\"s\":\"a\\u0000b\"}", "{\"s\":\"a\\u0000b\"}", 1},
    {"UTF-8 copied as it is", "{\"s\":\"\xc3\xa9\xf0\x9f\x98\x80\xe2\x80\xa8\"}",
     "{\"s\":\"\xc3\xa9\xf0\x9f\x98\x80\xe2\x80\xa8\"}", 1},
    {"escaped key", "{\"k\\\"\\n\xc3\xa9\":1}", "{\"k\\\"\\n\xc3\xa9\":1}", 1},
    {"empty key and string", "{\"\":\"\"}", "{\"\":\"\"}", 1},
    /* integers at their bounds */
    {"int32 bounds",
     "{\"a\":{\"$numberInt\":\"-2147483648\"},\"b\":{\"$numberInt\":\"2147483647\"}}",
     "{\"a\":-2147483648,\"b\":2147483647}", 1},
    {"int64 bounds",
     "{\"a\":{\"$numberLong\":\"-9223372036854775808\"},"
     "\"b\":{\"$numberLong\":\"9223372036854775807\"}}",
     "{\"a\":-9223372036854775808,\"b\":9223372036854775807}", 1},
    {"int64 just past int32", "{\"a\":{\"$numberLong\":\"2147483648\"}}", "{\"a\":2147483648}", 1},
    /* doubles: the shortest text that reads back the same; whole values keep ".0" */
    {"double 0.1", "{\"d\":{\"$numberDouble\":\"0.1\"}}", "{\"d\":0.1}", 0},
    {"double 1e300", "{\"d\":{\"$numberDouble\":\"1e300\"}}", "{\"d\":1e+300}", 0},
    {"double -0.0", "{\"d\":{\"$numberDouble\":\"-0.0\"}}", "{\"d\":-0.0}", 0},
    {"double 0.0", "{\"d\":{\"$numberDouble\":\"0\"}}", "{\"d\":0.0}", 0},
    {"double 1.0", "{\"d\":{\"$numberDouble\":\"1\"}}", "{\"d\":1.0}", 0},
    {"double 100.0", "{\"d\":{\"$numberDouble\":\"100\"}}", "{\"d\":100.0}", 0},
    {"double 2^53", "{\"d\":{\"$numberDouble\":\"9007199254740992\"}}",
     "{\"d\":9007199254740992.0}", 0},
    {"double 0.1 + 0.2", "{\"d\":{\"$numberDouble\":\"0.30000000000000004\"}}",
     "{\"d\":0.30000000000000004}", 0},
    {"double smallest subnormal", "{\"d\":{\"$numberDouble\":\"5e-324\"}}", "{\"d\":5e-324}", 0},
    {"double subnormal", "{\"d\":{\"$numberDouble\":\"-2.5e-320\"}}", "{\"d\":-2.5e-320}", 0},
    {"double largest subnormal", "{\"d\":{\"$numberDouble\":\"2.225073858507201e-308\"}}",
     "{\"d\":2.225073858507201e-308}", 0},
    {"double largest", "{\"d\":{\"$numberDouble\":\"1.7976931348623157e308\"}}",
     "{\"d\":1.7976931348623157e+308}", 0},
    {"double negative small", "{\"d\":{\"$numberDouble\":\"-2.5e-8\"}}", "{\"d\":-2.5e-08}", 0},
    {"double 123.456", "{\"d\":{\"$numberDouble\":\"123.456\"}}", "{\"d\":123.456}", 0},
    {"double 1e15, fixed", "{\"d\":{\"$numberDouble\":\"1e15\"}}", "{\"d\":1000000000000000.0}", 0},
    {"double 1e16, exponent", "{\"d\":{\"$numberDouble\":\"1e16\"}}", "{\"d\":1e+16}", 0},
    {"double 0.0001, fixed", "{\"d\":{\"$numberDouble\":\"0.0001\"}}", "{\"d\":0.0001}", 0},
    {"double 1e-5, exponent", "{\"d\":{\"$numberDouble\":\"1e-5\"}}", "{\"d\":1e-05}", 0},
    {"double 1.5e10", "{\"d\":{\"$numberDouble\":\"1.5e10\"}}", "{\"d\":15000000000.0}", 0},
    {"double NaN", "{\"d\":{\"$numberDouble\":\"NaN\"}}", "{\"d\":{\"$numberDouble\":\"NaN\"}}", 1},
    {"double Infinity", "{\"d\":{\"$numberDouble\":\"Infinity\"}}",
     "{\"d\":{\"$numberDouble\":\"Infinity\"}}", 1},
    {"double -Infinity", "{\"d\":{\"$numberDouble\":\"-Infinity\"}}",
     "{\"d\":{\"$numberDouble\":\"-Infinity\"}}", 1},
    /* JSON's other words and nesting */
    {"bool and null", "{\"t\":true,\"f\":false,\"n\":null}", "{\"t\":true,\"f\":false,\"n\":null}",
     1},
    {"empty event", "{}", "{}", 0}, /* libbson writes "{ }" */
    {"nested documents and arrays", "{\"a\":{\"b\":[1,{\"c\":[]},[[]]],\"d\":{}}}",
     "{\"a\":{\"b\":[1,{\"c\":[]},[[]]],\"d\":{}}}", 0}, /* libbson writes "[ ]" */
    {"doubles inside arrays",
     "{\"a\":[{\"$numberDouble\":\"0.1\"},{\"$numberDouble\":\"2\"},"
     "{\"$numberDouble\":\"NaN\"}]}",
     "{\"a\":[0.1,2.0,{\"$numberDouble\":\"NaN\"}]}", 0},
    /* the types JSON has no word for: relaxed Extended JSON v2 */
    {"ObjectId", "{\"v\":{\"$oid\":\"5f1d7f8e9a0b1c2d3e4f5a6b\"}}",
     "{\"v\":{\"$oid\":\"5f1d7f8e9a0b1c2d3e4f5a6b\"}}", 1},
    {"binary", "{\"v\":{\"$binary\":{\"base64\":\"AAECAw==\",\"subType\":\"00\"}}}",
     "{\"v\":{\"$binary\":{\"base64\":\"AAECAw==\",\"subType\":\"00\"}}}", 1},
    {"binary, user subtype", "{\"v\":{\"$binary\":{\"base64\":\"/w==\",\"subType\":\"80\"}}}",
     "{\"v\":{\"$binary\":{\"base64\":\"/w==\",\"subType\":\"80\"}}}", 1},
    {"binary, empty", "{\"v\":{\"$binary\":{\"base64\":\"\",\"subType\":\"04\"}}}",
     "{\"v\":{\"$binary\":{\"base64\":\"\",\"subType\":\"04\"}}}", 1},
    {"date at the epoch", "{\"v\":{\"$date\":{\"$numberLong\":\"0\"}}}",
     "{\"v\":{\"$date\":\"1970-01-01T00:00:00Z\"}}", 1},
    {"date with milliseconds", "{\"v\":{\"$date\":{\"$numberLong\":\"1700000000123\"}}}",
     "{\"v\":{\"$date\":\"2023-11-14T22:13:20.123Z\"}}", 1},
    {"date before 1970", "{\"v\":{\"$date\":{\"$numberLong\":\"-1\"}}}",
     "{\"v\":{\"$date\":{\"$numberLong\":\"-1\"}}}", 1},
    /* libbson writes "10000-01-01T00:00:00Z", a year the spec's date text cannot hold */
    {"date after 9999", "{\"v\":{\"$date\":{\"$numberLong\":\"253402300800000\"}}}",
     "{\"v\":{\"$date\":{\"$numberLong\":\"253402300800000\"}}}", 0},
    {"timestamp", "{\"v\":{\"$timestamp\":{\"t\":4294967295,\"i\":2}}}",
     "{\"v\":{\"$timestamp\":{\"t\":4294967295,\"i\":2}}}", 1},
    {"regular expression",
     "{\"v\":{\"$regularExpression\":{\"pattern\":\"^a\\\"b\",\"options\":\"im\"}}}",
     "{\"v\":{\"$regularExpression\":{\"pattern\":\"^a\\\"b\",\"options\":\"im\"}}}", 1},
    {"decimal128", "{\"v\":{\"$numberDecimal\":\"1.5\"}}", "{\"v\":{\"$numberDecimal\":\"1.5\"}}",
     1},
    {"code", "{\"v\":{\"$code\":\"f()\"}}", "{\"v\":{\"$code\":\"f()\"}}", 1},
    {"code with scope",
     "{\"v\":{\"$code\":\"f()\",\"$scope\":{\"x\":{\"$numberDouble\":\"0.1\"}}}}",
     "{\"v\":{\"$code\":\"f()\",\"$scope\":{\"x\":0.1}}}", 0},
    {"symbol", "{\"v\":{\"$symbol\":\"sym\"}}", "{\"v\":{\"$symbol\":\"sym\"}}", 1},
    {"DBPointer",
     "{\"v\":{\"$dbPointer\":{\"$ref\":\"c\",\"$id\":{\"$oid\":\"5f1d7f8e9a0b1c2d3e4f5a6b\"}}}}",
     "{\"v\":{\"$dbPointer\":{\"$ref\":\"c\",\"$id\":{\"$oid\":\"5f1d7f8e9a0b1c2d3e4f5a6b\"}}}}",
     1},
    {"undefined, minKey, maxKey",
     "{\"u\":{\"$undefined\":true},\"a\":{\"$minKey\":1},"
     "\"z\":{\"$maxKey\":1}}",
     "{\"u\":{\"$undefined\":true},\"a\":{\"$minKey\":1},\"z\":{\"$maxKey\":1}}", 1},
};

static bson_t *
row_event(const render_row_t *row)
{
    bson_error_t error;
    bson_t *doc = bson_new_from_json((const uint8_t *)row->input, -1, &error);
    if (doc == NULL)
        fail_msg("%s: libbson cannot parse the row's input: %s", row->name, error.message);
    return doc;
}

static void
test_render_table_writes_each_type_compactly(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        bson_t *doc = row_event(&rows[i]);
        char *json = NULL;
        size_t len = 0;
        stele_error_t err = {0};
        int rc = stele_event_to_json(bson_get_data(doc), doc->len, &json, &len, &err);
        if (rc != 0)
            fail_msg("%s: %s %s", rows[i].name, stele_errname(rc), err.message);
        if (strcmp(json, rows[i].want) != 0)
            fail_msg("%s:\n got  %s\n want %s", rows[i].name, json, rows[i].want);
        assert_int_equal(len, strlen(json));
        stele_json_free(json);
        bson_destroy(doc);
    }
}

/* libbson's text without the spaces it puts around ':' and ',' and inside brackets. */
static char *
without_spaces_outside_strings(const char *text)
{
    char *out = malloc(strlen(text) + 1);
    size_t n = 0;
    int in_string = 0;
    for (const char *p = text; *p != '\0'; p++) {
        if (in_string && *p == '\\' && p[1] != '\0') {
            out[n++] = *p++;
        } else if (*p == '"') {
            in_string = !in_string;
        } else if (!in_string && *p == ' ') {
            continue;
        }
        out[n++] = *p;
    }
    out[n] = '\0';
    return out;
}

static void
test_render_matches_libbson_extended_json_apart_from_spaces(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!rows[i].is_libbson_alike)
            continue;
        bson_t *doc = row_event(&rows[i]);
        char *theirs = bson_as_relaxed_extended_json(doc, NULL);
        char *compact = without_spaces_outside_strings(theirs);
        char *ours = NULL;
        assert_int_equal(stele_event_to_json(bson_get_data(doc), doc->len, &ours, NULL, NULL), 0);
        if (strcmp(ours, compact) != 0)
            fail_msg("%s:\n stele   %s\n libbson %s", rows[i].name, ours, compact);
        stele_json_free(ours);
        free(compact);
        bson_free(theirs);
        bson_destroy(doc);
    }
}

/* ---- malformed events ------------------------------------------------------------------ */

/* {"s":"ab"}: 15 bytes; the offsets below name its parts. */
static const uint8_t good_doc[] = {0x0f, 0x00, 0x00, 0x00, 0x02, 's',  0x00, 0x03,
                                   0x00, 0x00, 0x00, 'a',  'b',  0x00, 0x00};
#define OFF_TYPE 4
#define OFF_KEY 5
#define OFF_STRLEN 7
#define OFF_STR 11

typedef struct bad_row {
    const char *name;
    size_t off; /* byte to change in good_doc */
    uint8_t value;
    size_t len; /* bytes handed over (sizeof good_doc unless cut) */
    int want_rc;
} bad_row_t;

static void
test_render_refuses_malformed_events_and_hands_nothing_out(void **state)
{
    (void)state;
    static const bad_row_t bad[] = {
        {"unchanged (control row)", 0, 0x0f, sizeof good_doc, 0},
        {"length header too large", 0, 0x10, sizeof good_doc, STELE_EBSON},
        {"cut short", 0, 0x0f, sizeof good_doc - 1, STELE_EBSON},
        {"shorter than a document", 0, 0x0f, 4, STELE_EBSON},
        {"last byte not 0", sizeof good_doc - 1, 0x01, sizeof good_doc, STELE_EBSON},
        {"string length past the end", OFF_STRLEN, 0x09, sizeof good_doc, STELE_EBSON},
        {"string without its NUL", OFF_STR + 2, 'c', sizeof good_doc, STELE_EBSON},
        {"unknown type byte", OFF_TYPE, 0x20, sizeof good_doc, STELE_EBSON},
        {"string not UTF-8", OFF_STR, 0xff, sizeof good_doc, STELE_EBSON},
        {"key not UTF-8", OFF_KEY, 0xff, sizeof good_doc, STELE_EBSON},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t doc[sizeof good_doc];
        memcpy(doc, good_doc, sizeof doc);
        doc[bad[i].off] = bad[i].value;
        char sentinel = 0;
        char *json = &sentinel;
        stele_error_t err = {0};
        int rc = stele_event_to_json(doc, bad[i].len, &json, NULL, &err);
        if (rc != bad[i].want_rc)
            fail_msg("%s: got %s, want %s", bad[i].name, stele_errname(rc),
                     stele_errname(bad[i].want_rc));
        if (rc == 0) {
            stele_json_free(json);
            continue;
        }
        assert_ptr_equal(json, &sentinel);
        assert_int_equal(err.code, rc);
        assert_non_null(strstr(err.message, "could not write the event as JSON"));
    }
}

/* A nested document whose length field is wrong: the outer document is sound. */
static void
test_render_refuses_a_malformed_nested_document(void **state)
{
    (void)state;
    bson_t *doc = BCON_NEW("d", "{", "x", BCON_INT32(1), "}");
    uint8_t *bytes = malloc(doc->len);
    memcpy(bytes, bson_get_data(doc), doc->len);
    bytes[7] += 1; /* the inner length: 4 (outer length) + 1 (type) + 2 ("d\0") */
    char *json = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_event_to_json(bytes, doc->len, &json, NULL, &err), STELE_EBSON);
    assert_null(json);
    free(bytes);
    bson_destroy(doc);
}

/* `levels` documents, each the only member of the one around it (the event is level 1). */
static bson_t *
nested_event(int levels)
{
    bson_t *docs = calloc((size_t)levels, sizeof *docs);
    bson_init(&docs[0]);
    for (int i = 1; i < levels; i++)
        bson_append_document_begin(&docs[i - 1], "n", 1, &docs[i]);
    for (int i = levels - 1; i >= 1; i--)
        bson_append_document_end(&docs[i - 1], &docs[i]);
    bson_t *event = bson_copy(&docs[0]);
    bson_destroy(&docs[0]);
    free(docs);
    return event;
}

static void
test_render_bounds_nesting_at_128_levels(void **state)
{
    (void)state;
    bson_t *ok = nested_event(128), *deep = nested_event(129);
    char *json = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_event_to_json(bson_get_data(ok), ok->len, &json, NULL, &err), 0);
    stele_json_free(json);
    json = NULL;
    assert_int_equal(stele_event_to_json(bson_get_data(deep), deep->len, &json, NULL, &err),
                     STELE_EDEPTH);
    assert_null(json);
    bson_destroy(ok);
    bson_destroy(deep);
}

static void
test_render_refuses_null_arguments(void **state)
{
    (void)state;
    char *json = NULL;
    stele_record_t rec = {0};
    assert_int_equal(stele_event_to_json(NULL, 5, &json, NULL, NULL), STELE_EINVAL);
    assert_int_equal(stele_record_to_json(&rec, NULL, &json, NULL, NULL), STELE_EINVAL);
    assert_int_equal(stele_record_to_json(NULL, "src", &json, NULL, NULL), STELE_EINVAL);
    assert_int_equal(stele_status_to_json("d", NULL, &json, NULL, NULL), STELE_EINVAL);
    assert_int_equal(stele_dead_letter_to_json(NULL, &json, NULL, NULL), STELE_EINVAL);
    assert_null(json);
    stele_json_free(NULL);
}

/* ---- the lines the commands print ------------------------------------------------------ */

static void
test_record_line_has_tails_fields_in_order(void **state)
{
    (void)state;
    bson_t *event = BCON_NEW("user", BCON_UTF8("alice"), "ratio", BCON_DOUBLE(0.1));
    stele_record_t rec = {.seq = 42,
                          .ts_ns = INT64_C(1764627890123456789),
                          .bson = bson_get_data(event),
                          .bson_len = event->len};
    char *json = NULL;
    assert_int_equal(stele_record_to_json(&rec, "web \"1\"", &json, NULL, NULL), 0);
    assert_string_equal(json, "{\"seq\":42,\"ts\":\"2025-12-01T22:24:50.123456Z\","
                              "\"src\":\"web \\\"1\\\"\",\"event\":{\"user\":\"alice\","
                              "\"ratio\":0.1}}");
    stele_json_free(json);
    rec.ts_ns = -1; /* floored: the microsecond before the epoch */
    assert_int_equal(stele_record_to_json(&rec, "s", &json, NULL, NULL), 0);
    assert_non_null(strstr(json, "\"ts\":\"1969-12-31T23:59:59.999999Z\""));
    stele_json_free(json);
    char sentinel = 0;
    json = &sentinel;
    stele_error_t err = {0};
    assert_int_equal(stele_record_to_json(&rec, "bad \xff", &json, NULL, &err), STELE_EUTF8);
    assert_ptr_equal(json, &sentinel);
    bson_destroy(event);
}

typedef struct short_row {
    const char *event_json;
    const char *want; /* after "TIME SRC SEQ" */
} short_row_t;

/* stele_record_to_short: the lead fields, KEY=VALUE for the others, bare strings only when
 * nothing in them can be misread, and no terminal control left as it is. */
static void
test_short_line_is_for_people_and_safe_for_terminals(void **state)
{
    (void)state;
    static const short_row_t short_rows[] = {
        {"{\"actor\":\"alice\",\"action\":\"login\",\"target\":\"h1\",\"n\":7}",
         " alice login target=h1 n=7"},
        {"{\"action\":\"login\",\"x\":1,\"actor\":\"bob\"}", " bob login x=1"},
        {"{\"who\":\"carol\"}", " - - who=carol"},
        {"{\"actor\":{\"name\":\"a\"},\"action\":[1,2]}", " {\"name\":\"a\"} [1,2]"},
        {"{\"s\":\"two words\",\"e\":\"\",\"q\":\"a\\\"b\",\"eq\":\"a=b\",\"bs\":\"a\\\\b\"}",
         " - - s=\"two words\" e=\"\" q=\"a\\\"b\" eq=\"a=b\" bs=\"a\\\\b\""},
        {"{\"d\":0.1,\"w\":2.0,\"t\":true,\"z\":null,\"big\":9007199254740993}",
         " - - d=0.1 w=2.0 t=true z=null big=9007199254740993"},
        {"{\"u\":\"\xc3\xa9\xf0\x9f\x98\x80\"}", " - - u=\xc3\xa9\xf0\x9f\x98\x80"},
        /* C0, DEL, C1 (CSI), line separator, bidi override: escaped, in nested values too */
        {"{\"c0\":\"\\u001b[2J\",\"del\":\"\\u007f\",\"c1\":\"\\u009b31m\"}",
         " - - c0=\"\\u001b[2J\" del=\"\\u007f\" c1=\"\\u009b31m\""},
        {"{\"ls\":\"a\\u2028b\",\"bidi\":\"\\u202egnp.exe\",\"iso\":\"\\u2066x\\u2069\"}",
         " - - ls=\"a\\u2028b\" bidi=\"\\u202egnp.exe\" iso=\"\\u2066x\\u2069\""},
        {"{\"n\":{\"k\":\"\\u009b\\u202e\"},\"a\":[\"\\u007f\"]}",
         " - - n={\"k\":\"\\u009b\\u202e\"} a=[\"\\u007f\"]"},
        {"{\"key with space\":1,\"k=v\":2,\"\\u001bk\":3}",
         " - - \"key with space\"=1 \"k=v\"=2 \"\\u001bk\"=3"},
        {"{\"when\":{\"$date\":\"2026-12-01T20:00:00Z\"}}",
         " - - when={\"$date\":\"2026-12-01T20:00:00Z\"}"},
    };
    setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1);
    tzset();
    for (size_t i = 0; i < sizeof short_rows / sizeof short_rows[0]; i++) {
        bson_error_t error;
        bson_t *event = bson_new_from_json((const uint8_t *)short_rows[i].event_json, -1, &error);
        if (event == NULL)
            fail_msg("row %zu: %s", i, error.message);
        /* 2026-12-01T20:00:00.000001Z: 21:00 in CET */
        stele_record_t rec = {.seq = 42,
                              .ts_ns = INT64_C(1796155200000001000),
                              .bson = bson_get_data(event),
                              .bson_len = event->len};
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(stele_record_to_short(&rec, "web-1", &text, &len, NULL), 0);
        char want[512];
        snprintf(want, sizeof want, "2026-12-01T21:00:00.000001+01:00 web-1 42%s",
                 short_rows[i].want);
        assert_string_equal(text, want);
        assert_int_equal(len, strlen(want));
        stele_json_free(text);
        bson_destroy(event);
    }
    /* summer time, a source that needs quotes, a malformed event, NULL arguments */
    bson_t *event = BCON_NEW("a", BCON_INT32(1));
    stele_record_t rec = {.seq = 1,
                          .ts_ns = INT64_C(1782856800000000000),
                          .bson = bson_get_data(event),
                          .bson_len = event->len};
    char *text = NULL;
    assert_int_equal(stele_record_to_short(&rec, "web 1", &text, NULL, NULL), 0);
    assert_string_equal(text, "2026-07-01T00:00:00.000000+02:00 \"web 1\" 1 - - a=1");
    stele_json_free(text);
    char sentinel = 0;
    text = &sentinel;
    stele_error_t err = {0};
    assert_int_equal(stele_record_to_short(&rec, "bad \xff", &text, NULL, &err), STELE_EUTF8);
    uint8_t bad[64];
    memcpy(bad, bson_get_data(event), event->len);
    bad[4] = 0x20; /* an unknown type byte */
    rec.bson = bad;
    assert_int_equal(stele_record_to_short(&rec, "s", &text, NULL, &err), STELE_EBSON);
    assert_ptr_equal(text, &sentinel);
    assert_int_equal(stele_record_to_short(NULL, "s", &text, NULL, NULL), STELE_EINVAL);
    assert_int_equal(stele_record_to_short(&rec, NULL, &text, NULL, NULL), STELE_EINVAL);
    bson_destroy(event);
    setenv("TZ", "UTC0", 1);
    tzset();
}

static void
test_status_object_has_every_field_in_order(void **state)
{
    (void)state;
    stele_status_t st = {.writer_pid = 0,
                         .first_seq = 1,
                         .last_seq = 3,
                         .committed_seq = 3,
                         .durable_seq = 3,
                         .segments = 1,
                         .disk_bytes = 67108864,
                         .format_version = 1,
                         .n_sinks = 1,
                         .settings_unix_ms = 1,
                         .sync = STELE_SYNC_INTERVAL,
                         .sync_interval_ms = 1000,
                         .commit_interval_us = 0,
                         .commit_policy = STELE_COMMIT_ADAPTIVE,
                         .max_journal_bytes = 0,
                         .on_full = STELE_ON_FULL_FAIL,
                         .used_bytes = 4360,
                         .newest_ts_ns = INT64_C(1700000000123456789)};
    snprintf(st.source, sizeof st.source, "web-1");
    snprintf(st.sinks[0].name, sizeof st.sinks[0].name, "default");
    snprintf(st.sinks[0].destination, sizeof st.sinks[0].destination, "h1:27017/audit.events");
    st.sinks[0].shipped_seq = 2;
    st.sinks[0].lag_records = 1;
    st.sinks[0].lag_seconds = 0.1;
    st.sinks[0].batches = 7;
    st.sinks[0].last_error_unix_ms = INT64_C(1700000000123);
    snprintf(st.sinks[0].last_error, sizeof st.sinks[0].last_error, "no \"server\"");
    char *json = NULL;
    assert_int_equal(stele_status_to_json("/var/lib/audit", &st, &json, NULL, NULL), 0);
    assert_string_equal(
        json, "{\"dir\":\"/var/lib/audit\",\"source\":\"web-1\",\"format_version\":1,"
              "\"writer_pid\":0,\"first_seq\":1,\"last_seq\":3,\"committed_seq\":3,"
              "\"durable_seq\":3,\"segments\":1,\"disk_bytes\":67108864,\"used_bytes\":4360,"
              "\"newest_record_time\":\"2023-11-14T22:13:20.123456Z\",\"settings\":{"
              "\"live\":false,\"sync\":\"interval\",\"sync_interval_ms\":1000,"
              "\"commit_interval_us\":0,\"commit_policy\":\"adaptive\",\"max_journal_bytes\":0,"
              "\"on_full\":\"fail\"},\"sinks\":[{\"name\":\"default\",\"destination\":\"h1:27017/"
              "audit.events\",\"shipped_seq\":2,"
              "\"lag_records\":1,\"lag_seconds\":0.1,\"dead_letters\":0,\"retries\":0,"
              "\"batches\":7,\"stopped\":false,\"last_error\":\"no \\\"server\\\"\","
              "\"last_error_time\":\"2023-11-14T22:13:20.123Z\"}]}");
    stele_json_free(json);
    st.settings_unix_ms = 0; /* never published: no "settings" */
    st.n_sinks = 0;
    st.newest_ts_ns = 0; /* an empty journal: no "newest_record_time" */
    assert_int_equal(stele_status_to_json(NULL, &st, &json, NULL, NULL), 0);
    assert_string_equal(json, "{\"source\":\"web-1\",\"format_version\":1,\"writer_pid\":0,"
                              "\"first_seq\":1,\"last_seq\":3,\"committed_seq\":3,"
                              "\"durable_seq\":3,\"segments\":1,\"disk_bytes\":67108864,"
                              "\"used_bytes\":4360,\"sinks\":[]}");
    stele_json_free(json);
}

static void
test_dead_letter_line_has_its_fields_in_order(void **state)
{
    (void)state;
    stele_dead_letter_t dl = {.seq = 3, .unix_ms = INT64_C(1700000000123)};
    snprintf(dl.reason, sizeof dl.reason, "Document failed validation");
    char *json = NULL;
    assert_int_equal(stele_dead_letter_to_json(&dl, &json, NULL, NULL), 0);
    assert_string_equal(json, "{\"seq\":3,\"time\":\"2023-11-14T22:13:20.123000Z\","
                              "\"unix_ms\":1700000000123,\"reason\":\"Document failed "
                              "validation\"}");
    stele_json_free(json);
    dl.unix_ms = 0; /* recorded without a time */
    assert_int_equal(stele_dead_letter_to_json(&dl, &json, NULL, NULL), 0);
    assert_non_null(strstr(json, "\"time\":\"\",\"unix_ms\":0,"));
    stele_json_free(json);
}

/* A reason cut to its field's size inside a character (a server's message quoting a long
 * non-ASCII key) loses the cut character, not the line; other bytes that are not UTF-8
 * still refuse it. */
static void
test_dead_letter_reason_cut_inside_a_character_still_renders(void **state)
{
    (void)state;
    stele_dead_letter_t dl = {.seq = 3, .unix_ms = 0};
    size_t cap = sizeof dl.reason;
    memset(dl.reason, 'a', cap - 1);
    dl.reason[cap - 1] = '\0';
    memcpy(dl.reason + cap - 3, "\xf0\x9f", 2); /* the first 2 bytes of U+1F600 */
    char *json = NULL;
    assert_int_equal(stele_dead_letter_to_json(&dl, &json, NULL, NULL), 0);
    assert_non_null(strstr(json, "aaa\"}"));
    stele_json_free(json);
    memcpy(dl.reason + cap - 5, "\xf0\x9f\x98\x80", 4); /* whole: kept */
    assert_int_equal(stele_dead_letter_to_json(&dl, &json, NULL, NULL), 0);
    assert_non_null(strstr(json, "a\xf0\x9f\x98\x80\"}"));
    stele_json_free(json);
    memcpy(dl.reason + 10, "\xff", 1); /* not UTF-8 inside: refused */
    json = NULL;
    assert_int_equal(stele_dead_letter_to_json(&dl, &json, NULL, NULL), STELE_EUTF8);
    assert_null(json);
}

/* A program that set LC_NUMERIC to a locale with a decimal comma still gets JSON numbers. */
static void
test_render_doubles_ignore_the_numeric_locale(void **state)
{
    (void)state;
    static const char *const comma_locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8",
                                                "fr_FR.utf8"};
    const char *set = NULL;
    for (size_t i = 0; set == NULL && i < sizeof comma_locales / sizeof comma_locales[0]; i++)
        set = setlocale(LC_NUMERIC, comma_locales[i]);
    if (set == NULL)
        skip(); /* no locale with a decimal comma installed */
    bson_t *event = BCON_NEW("d", BCON_DOUBLE(0.5), "e", BCON_DOUBLE(1.25e-7));
    char *json = NULL;
    int rc = stele_event_to_json(bson_get_data(event), event->len, &json, NULL, NULL);
    setlocale(LC_NUMERIC, "C");
    assert_int_equal(rc, 0);
    assert_string_equal(json, "{\"d\":0.5,\"e\":1.25e-07}");
    stele_json_free(json);
    bson_destroy(event);
}

/* ---- Python reads it back -------------------------------------------------------------- */

/* A random double: mostly arbitrary bit patterns (every exponent), some tricky values. */
static double
random_double(test_rng_t *rng)
{
    static const double tricky[] = {0.1,
                                    0.2,
                                    0.30000000000000004,
                                    -0.0,
                                    0.0,
                                    1e300,
                                    5e-324,
                                    1e-310,
                                    -2.5e-320,
                                    2.225073858507201e-308,
                                    2.2250738585072014e-308,
                                    1.7976931348623157e308,
                                    1.0,
                                    9007199254740993.0,
                                    123456789.125,
                                    1e21,
                                    1e-7,
                                    NAN,
                                    INFINITY,
                                    -INFINITY};
    if (test_rng_chance(rng, 30))
        return tricky[test_rng_below(rng, sizeof tricky / sizeof tricky[0])];
    uint64_t bits = test_rng_next(rng);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* Random valid UTF-8 into s (control bytes, quotes, backslashes, 2- to 4-byte sequences,
 * and NUL when allow_nul); returns its length. */
static size_t
random_string(test_rng_t *rng, char *s, size_t cap, int allow_nul)
{
    static const char *const pieces[] = {"a",
                                         "\"",
                                         "\\",
                                         "\n",
                                         "\t",
                                         "\x01",
                                         "\x1f",
                                         "\x7f",
                                         "/",
                                         "\xc3\xa9",
                                         "\xe2\x80\xa8",
                                         "\xe6\x97\xa5",
                                         "\xf0\x9f\x98\x80",
                                         "\xf4\x8f\xbf\xbf",
                                         " ",
                                         "\0"};
    size_t n_pieces = sizeof pieces / sizeof pieces[0] - (allow_nul ? 0 : 1);
    size_t len = 0;
    unsigned count = (unsigned)test_rng_below(rng, 12);
    for (unsigned i = 0; i < count; i++) {
        const char *p = pieces[test_rng_below(rng, n_pieces)];
        size_t plen = p[0] == '\0' ? 1 : strlen(p);
        if (len + plen >= cap)
            break;
        memcpy(s + len, p, plen);
        len += plen;
    }
    s[len] = '\0';
    return len;
}

static void
py_string(FILE *py, const char *s, size_t len)
{
    fputs("bytes.fromhex('", py);
    for (size_t i = 0; i < len; i++)
        fprintf(py, "%02x", (unsigned char)s[i]);
    fputs("').decode('utf-8')", py);
}

static void
py_double(FILE *py, double d)
{
    if (isnan(d))
        fputs("{'$numberDouble': 'NaN'}", py);
    else if (isinf(d))
        fprintf(py, "{'$numberDouble': '%s'}", d > 0 ? "Infinity" : "-Infinity");
    else
        fprintf(py, "float.fromhex('%a')", d);
}

static void random_members(test_rng_t *rng, bson_t *doc, FILE *py, int is_array, int depth);

/* Appends one random value to doc under `key` and writes its Python form. */
static void
random_value(test_rng_t *rng, bson_t *doc, const char *key, FILE *py, int depth)
{
    static const int64_t ints[] = {
        INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX, 0, -1, INT64_C(9007199254740993)};
    char s[64];
    bson_t child;
    switch (test_rng_below(rng, depth < 3 ? 7 : 5)) {
    case 0: {
        double d = random_double(rng);
        bson_append_double(doc, key, -1, d);
        py_double(py, d);
        break;
    }
    case 1: {
        int64_t v =
            test_rng_chance(rng, 50) ? ints[test_rng_below(rng, 7)] : (int64_t)test_rng_next(rng);
        bson_append_int64(doc, key, -1, v);
        fprintf(py, "%" PRId64, v);
        break;
    }
    case 2: {
        int32_t v = (int32_t)test_rng_next(rng);
        bson_append_int32(doc, key, -1, v);
        fprintf(py, "%" PRId32, v);
        break;
    }
    case 3: {
        size_t len = random_string(rng, s, sizeof s, 1);
        bson_append_utf8(doc, key, -1, s, (int)len);
        py_string(py, s, len);
        break;
    }
    case 4:
        if (test_rng_chance(rng, 50)) {
            int b = test_rng_chance(rng, 50);
            bson_append_bool(doc, key, -1, b);
            fputs(b ? "True" : "False", py);
        } else {
            bson_append_null(doc, key, -1);
            fputs("None", py);
        }
        break;
    default: {
        int is_array = test_rng_chance(rng, 50);
        if (is_array)
            bson_append_array_begin(doc, key, -1, &child);
        else
            bson_append_document_begin(doc, key, -1, &child);
        random_members(rng, &child, py, is_array, depth + 1);
        if (is_array)
            bson_append_array_end(doc, &child);
        else
            bson_append_document_end(doc, &child);
    }
    }
}

static void
random_members(test_rng_t *rng, bson_t *doc, FILE *py, int is_array, int depth)
{
    unsigned n = (unsigned)test_rng_below(rng, 6);
    fputs(is_array ? "[" : "{", py);
    for (unsigned i = 0; i < n; i++) {
        char key[64];
        size_t key_len;
        if (is_array) {
            snprintf(key, sizeof key, "%u", i);
            key_len = strlen(key);
        } else { /* distinct keys: a prefix Python sees as a plain string */
            key_len = (size_t)snprintf(key, sizeof key, "k%u", i);
            key_len += random_string(rng, key + key_len, sizeof key - key_len, 0);
        }
        if (!is_array) {
            py_string(py, key, key_len);
            fputs(": ", py);
        }
        random_value(rng, doc, key, py, depth);
        fputs(", ", py);
    }
    fputs(is_array ? "]" : "}", py);
}

/* Runs the checker over `n_events` random records: each as its tail line, then the Python
 * expression of the event it must read back as. Returns the checker's exit status: 0 when
 * every value read back equal, 127 when python3 is not there. */
static int
run_python_checker(uint64_t seed, unsigned n_events)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 '%s/tests/render_roundtrip.py'", STELE_SOURCE_DIR);
    signal(SIGPIPE, SIG_IGN); /* a checker that stopped early fails the test, not the process */
    FILE *py = popen(cmd, "w");
    if (py == NULL)
        return 127;
    test_rng_t rng;
    test_rng_init(&rng, seed);
    for (unsigned i = 0; i < n_events; i++) {
        bson_t event = BSON_INITIALIZER;
        char *spec = NULL;
        size_t spec_len = 0;
        FILE *spec_out = open_memstream(&spec, &spec_len);
        random_members(&rng, &event, spec_out, 0, 1);
        fclose(spec_out);
        stele_record_t rec = {.seq = i + 1,
                              .ts_ns = (int64_t)test_rng_next(&rng),
                              .bson = bson_get_data(&event),
                              .bson_len = event.len};
        char *line = NULL;
        int rc = stele_record_to_json(&rec, "src \"\xc3\xa9\"", &line, NULL, NULL);
        if (rc != 0)
            fail_msg("event %u: %s", i, stele_errname(rc));
        fprintf(py, "%s\n%s\n", line, spec);
        stele_json_free(line);
        free(spec);
        bson_destroy(&event);
    }
    int status = pclose(py);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static void
test_render_python_json_reads_back_equal_values(void **state)
{
    (void)state;
    uint64_t seed = test_seed("render_python_roundtrip");
    int status = run_python_checker(seed, 3000);
    if (status == 127) {
        print_message("python3 not found: the round trip through Python is not checked\n");
        skip();
    }
    if (status != 0)
        fail_msg("python's json read values other than those written (seed %" PRIu64 ")", seed);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_table_writes_each_type_compactly),
        cmocka_unit_test(test_render_matches_libbson_extended_json_apart_from_spaces),
        cmocka_unit_test(test_render_refuses_malformed_events_and_hands_nothing_out),
        cmocka_unit_test(test_render_refuses_a_malformed_nested_document),
        cmocka_unit_test(test_render_bounds_nesting_at_128_levels),
        cmocka_unit_test(test_render_refuses_null_arguments),
        cmocka_unit_test(test_record_line_has_tails_fields_in_order),
        cmocka_unit_test(test_short_line_is_for_people_and_safe_for_terminals),
        cmocka_unit_test(test_status_object_has_every_field_in_order),
        cmocka_unit_test(test_dead_letter_line_has_its_fields_in_order),
        cmocka_unit_test(test_dead_letter_reason_cut_inside_a_character_still_renders),
        cmocka_unit_test(test_render_doubles_ignore_the_numeric_locale),
        cmocka_unit_test(test_render_python_json_reads_back_equal_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
