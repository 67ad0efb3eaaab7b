/*
 * test_validate.c: event validation (engine/validate.c). A table of malformed events, each
 * with the code it must get and a fragment its message must contain (what and where), plus
 * the events that must pass. The engine-level check that a rejected event appends nothing
 * is in test_engine.c (test_engine_rejected_events_append_nothing), over the same kinds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json_reference.h"
#include "validate.h"
#include "validate_cases.h"

static const validate_limits_t test_limits = {.max_record_bytes = 1024, .max_depth = 10};
static const validate_limits_t big_test_limits = {.max_record_bytes = 1 << 20, .max_depth = 10};

/* validate_json, with the event copied into *doc (freed with bson_destroy) on success. */
static int
test_read_json(const char *json, size_t len, const validate_limits_t *lim, bson_t *doc,
               stele_error_t *err)
{
    validate_buf_t buf;
    validate_buf_init(&buf);
    int rc = validate_json(json, len, lim, &buf, err);
    if (rc == 0) {
        bson_t view;
        assert_true(bson_init_static(&view, buf.data, buf.len));
        bson_copy_to(&view, doc);
    } else {
        assert_int_equal(buf.len, 0);
    }
    validate_buf_free(&buf);
    return rc;
}

/* Each case refused with its code and a message holding its fragment. */
static void
expect_json_cases(const json_case_t *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const json_case_t *c = &cases[i];
        stele_error_t err = {0};
        bson_t doc;
        int rc = test_read_json(c->json, strlen(c->json), &test_limits, &doc, &err);
        if (rc == 0)
            bson_destroy(&doc);
        if (rc != c->code || !strstr(err.message, c->fragment))
            fail_msg("case \"%s\": got %s \"%s\", want %s with \"%s\"", c->name, stele_errname(rc),
                     err.message, stele_errname(c->code), c->fragment);
        assert_int_equal(err.code, rc);
    }
}

static void
test_validate_rejects_each_malformed_json_event(void **state)
{
    (void)state;
    expect_json_cases(json_cases, sizeof json_cases / sizeof json_cases[0]);
}

static void
test_validate_rejects_json_over_max_record_bytes(void **state)
{
    (void)state;
    char json[2048];
    memset(json, 'x', sizeof json);
    memcpy(json, "{\"s\":\"", 6);
    memcpy(json + sizeof json - 2, "\"}", 2);
    stele_error_t err = {0};
    bson_t doc;
    int rc = test_read_json(json, sizeof json, &test_limits, &doc, &err);
    assert_int_equal(rc, STELE_ETOOBIG);
    assert_non_null(strstr(err.message, "max_record_bytes (1024)"));
}

static void
test_validate_accepts_ordinary_json_events(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof json_good / sizeof json_good[0]; i++) {
        const char *good = json_good[i];
        stele_error_t err = {0};
        bson_t doc;
        int rc = test_read_json(good, strlen(good), &test_limits, &doc, &err);
        if (rc != 0) {
            print_error("\"%s\" refused: %s\n", good, err.message);
            fail();
        }
        bson_destroy(&doc);
    }
}

/* An event of `bytes` bytes of JSON: one long string field. Caller frees. */
static char *
test_big_json(size_t bytes)
{
    char *json = malloc(bytes + 1);
    assert_non_null(json);
    memcpy(json, "{\"blob\":\"", 9);
    memset(json + 9, 'x', bytes - 11);
    memcpy(json + bytes - 2, "\"}", 3);
    return json;
}

/* Accepted events are exactly the bytes libbson's reader writes for them: every JSON type,
 * int32/int64/double choices at their edges, escapes, surrogate pairs, whitespace anywhere,
 * events longer than the in-place buffer (validate_buf_t) and than libbson's 16 KiB parse
 * buffer. */
static void
test_validate_json_writes_what_libbson_writes(void **state)
{
    (void)state;
    char *big16 = test_big_json(40000), *big64 = test_big_json(100000);
    const char *good[] = {
        "{\"actor\":\"alice\",\"ok\":true,\"no\":false,\"nothing\":null}",
        "  \n{\"a\":{\"b\":[1,2,{\"c\":null}]} , \"e\" : [ ] ,\"o\":{ }}  \r\n",
        "{\"u\":\"caf\xc3\xa9 \\u00e9 \\u20AC \\ud83d\\ude00 \xf0\x9f\x98\x80\",\"k\\\"q\":\"{\"}",
        "{\"esc\":\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0000 \\u001f \\u007f\"}",
        "{\"i\":[0,-0,1,-1,2147483647,-2147483648,2147483648,-2147483649,"
        "9223372036854775807,-9223372036854775808,007e0]}",
        "{\"d\":[0.5,-0.0,1e5,1E+2,1e-2,-1.5e300,4e-320,123456789012345678.5,"
        "0.1000000000000000055511151231257827,1.7976931348623157e308]}",
        "{\"nest\":[[[{\"a\":[{}]}]]],\"idx\":[0,1,2,3,4,5,6,7,8,9,10,11,12]}",
        big16,
        big64,
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const char *json = good[i];
        stele_error_t err = {0};
        bson_t doc;
        int rc = test_read_json(json, strlen(json), &big_test_limits, &doc, &err);
        bson_error_t berr;
        bson_t *fresh = bson_new_from_json((const uint8_t *)json, -1, &berr);
        if (!fresh && rc != 0)
            continue; /* both refuse: the "007e0" row, a leading zero */
        if (rc != 0 || !fresh)
            fail_msg("event %zu: stele %s \"%s\", libbson %s", i, stele_errname(rc), err.message,
                     fresh ? "accepts" : berr.message);
        assert_int_equal(doc.len, fresh->len);
        assert_memory_equal(bson_get_data(&doc), bson_get_data(fresh), doc.len);
        bson_destroy(fresh);
        bson_destroy(&doc);
    }
    free(big16);
    free(big64);
}

/* stele's reader against the reference (libbson's reader with the rules around it, as stele
 * read events before it had its own), on 40,000 mutations of the table's events and of two
 * rich ones (bytes flipped, structural characters inserted, the text cut): both accept with
 * the same bytes, or both refuse with the same code. Seeded, so a failure repeats. The
 * libFuzzer target fuzz_json_bson does the same without the seed's bounds. */
static void
test_validate_json_agrees_with_the_reference_on_mutated_events(void **state)
{
    (void)state;
    static const char structural[] = "{}[]\":,\\ 0e-.tnu\x80\xc3\xed\xc0$_";
    static const char *const rich[] = {
        "{\"actor\":\"alice\",\"n\":[1,2,{\"x\":null}],\"s\":\"caf\xc3\xa9\"}",
        "{\"a\":{\"b\":-12.5e3,\"c\":\"\\ud83d\\ude00\\u0041\",\"d\":[true,false]},\"e\":9e9}",
    };
    uint64_t rng = 0x5eed5eedULL;
    const size_t n_cases = sizeof json_cases / sizeof json_cases[0];
    size_t n_accepted = 0;
    for (int i = 0; i < 40000; i++) {
        char text[256];
        const char *base = i % 3 ? json_cases[(size_t)i % n_cases].json : rich[(i / 3) % 2];
        size_t len = strlen(base);
        memcpy(text, base, len);
        int n_mutations =
            1 + (int)((rng = rng * 6364136223846793005ULL + 1442695040888963407ULL) >> 61);
        for (int m = 0; m < n_mutations && len > 0; m++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t at = (size_t)(rng >> 33) % len;
            char c = structural[(rng >> 20) % (sizeof structural - 1)];
            switch ((rng >> 10) % 4) {
            case 0:
                text[at] = c;
                break; /* replace */
            case 1:    /* insert */
                if (len + 1 < sizeof text) {
                    memmove(text + at + 1, text + at, len - at);
                    text[at] = c;
                    len++;
                }
                break;
            case 2:
                len = at;
                break; /* cut */
            default:
                break; /* unchanged */
            }
        }
        stele_error_t err = {0}, ref_err = {0};
        bson_t doc, ref;
        int rc = test_read_json(text, len, &test_limits, &doc, &err);
        int ref_rc = json_reference_read(text, len, &test_limits, &ref, &ref_err);
        if (rc != ref_rc)
            fail_msg("\"%.*s\": stele %s \"%s\", reference %s \"%s\"", (int)len, text,
                     stele_errname(rc), err.message, stele_errname(ref_rc), ref_err.message);
        if (rc == 0) {
            n_accepted++;
            assert_int_equal(doc.len, ref.len);
            assert_memory_equal(bson_get_data(&doc), bson_get_data(&ref), doc.len);
            bson_destroy(&ref);
            bson_destroy(&doc);
        }
    }
    assert_true(n_accepted > 100); /* the mutations leave many events valid, too */
}

static void
test_validate_json_keeps_int64_precision(void **state)
{
    (void)state;
    const char *json = "{\"n\":9223372036854775807}";
    bson_t doc;
    assert_int_equal(test_read_json(json, strlen(json), &test_limits, &doc, NULL), 0);
    bson_iter_t it;
    assert_true(bson_iter_init_find(&it, &doc, "n"));
    assert_int_equal(bson_iter_type(&it), BSON_TYPE_INT64);
    assert_true(bson_iter_int64(&it) == INT64_MAX);
    bson_destroy(&doc);
}

/* An object of n keys "k0".."k<n-1>" (then `extra` as written, if not NULL), in `siblings`
 * sibling objects under "s0", "s1", ...; the result is freed by the caller. */
static char *
test_many_keys_json(int siblings, int n, const char *extra)
{
    size_t cap = (size_t)siblings * ((size_t)n * 16 + 64) + 64;
    char *json = malloc(cap);
    assert_non_null(json);
    size_t len = 0;
    json[len++] = '{';
    for (int s = 0; s < siblings; s++) {
        len += (size_t)snprintf(json + len, cap - len, "%s\"s%d\":{", s ? "," : "", s);
        for (int k = 0; k < n; k++)
            len += (size_t)snprintf(json + len, cap - len, "%s\"k%d\":%d", k ? "," : "", k, k);
        if (extra && s == siblings - 1)
            len += (size_t)snprintf(json + len, cap - len, ",%s", extra);
        json[len++] = '}';
    }
    json[len++] = '}';
    json[len] = '\0';
    return json;
}

/* Large objects are searched through a hash table (engine/keyset.c): a repeat is still found
 * wherever it is, and keys of sibling objects (hashed one after the other) never collide. */
static void
test_validate_finds_a_repeated_key_among_many(void **state)
{
    (void)state;
    static const struct {
        int siblings, n;
        const char *extra;
        int code;
        const char *fragment;
    } cases[] = {
        {1, 2000, NULL, 0, NULL},
        {1, 2000, "\"k1234\":0", STELE_EAMBIGUOUS, "duplicate key \"k1234\" at s0.k1234"},
        {1, 2000, "\"k0\":0", STELE_EAMBIGUOUS, "duplicate key \"k0\""},
        {1, 15, "\"k3\":0", STELE_EAMBIGUOUS, "duplicate key \"k3\""}, /* 16th key, linear */
        {1, 16, "\"k3\":0", STELE_EAMBIGUOUS, "duplicate key \"k3\""}, /* 17th key, hashed */
        {300, 40, NULL, 0, NULL},
        {300, 40, "\"k39\":0", STELE_EAMBIGUOUS, "duplicate key \"k39\" at s299.k39"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *json = test_many_keys_json(cases[i].siblings, cases[i].n, cases[i].extra);
        stele_error_t err = {0};
        bson_t doc;
        int rc = test_read_json(json, strlen(json), &big_test_limits, &doc, &err);
        if (rc == 0)
            bson_destroy(&doc);
        if (rc != cases[i].code || (cases[i].fragment && !strstr(err.message, cases[i].fragment)))
            fail_msg("case %zu: got %s \"%s\"", i, stele_errname(rc), err.message);
        /* the same event as BSON */
        bson_error_t berr;
        bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &berr);
        assert_non_null(b);
        rc = validate_bson(bson_get_data(b), b->len, &big_test_limits, &err);
        if (rc != cases[i].code || (cases[i].fragment && !strstr(err.message, cases[i].fragment)))
            fail_msg("case %zu as bson: got %s \"%s\"", i, stele_errname(rc), err.message);
        bson_destroy(b);
        free(json);
    }
}

/* -- BSON ---------------------------------------------------------------------------------- */

typedef struct bson_case {
    const char *name;
    uint8_t bytes[64];
    size_t len;
    int code;
    const char *fragment;
} bson_case_t;

/* Builds a document with libbson, which does not validate what it appends. */
static bson_t *
test_doc_with_key(const char *key)
{
    bson_t *b = bson_new();
    bson_append_int32(b, "ok", -1, 1);
    bson_append_int32(b, key, -1, 2);
    return b;
}

static void
test_expect_bson(const char *name, const uint8_t *data, size_t len, int code, const char *fragment)
{
    stele_error_t err = {0};
    int rc = validate_bson(data, len, &test_limits, &err);
    if (rc != code || (fragment && !strstr(err.message, fragment))) {
        print_error("case \"%s\": got %s \"%s\", want %s with \"%s\"\n", name, stele_errname(rc),
                    err.message, stele_errname(code), fragment ? fragment : "");
        fail();
    }
}

static void
test_validate_rejects_each_malformed_bson_event(void **state)
{
    (void)state;
    static const bson_case_t raw[] = {
        {"zero bytes", {0}, 0, STELE_EEMPTY, "empty"},
        {"three bytes", {5, 0, 0}, 3, STELE_EBSON, "shorter than"},
        {"length field too large", {9, 0, 0, 0, 0}, 5, STELE_EBSON, "says 9 bytes"},
        {"length field too small",
         {5, 0, 0, 0, 0x10, 'a', 0, 1, 0, 0, 0, 0},
         12,
         STELE_EBSON,
         "says 5 bytes"},
        {"empty document", {5, 0, 0, 0, 0}, 5, STELE_EEMPTY, "no fields"},
        {"missing final NUL", {6, 0, 0, 0, 0x0A, 'a'}, 6, STELE_EBSON, "NUL"},
        /* string element whose length runs past the document */
        {"string length past the end",
         {16, 0, 0, 0, 0x02, 'a', 0, 100, 0, 0, 0, 'x', 'y', 'z', 0, 0},
         16,
         STELE_EBSON,
         "byte"},
        /* unknown element type 0x7E */
        {"unknown element type",
         {12, 0, 0, 0, 0x7E, 'a', 0, 1, 0, 0, 0, 0},
         12,
         STELE_EBSON,
         "malformed"},
        /* embedded document whose length says 40 */
        {"embedded length past the end",
         {17, 0, 0, 0, 0x03, 'd', 0, 40, 0, 0, 0, 0x0A, 'x', 0, 0, 0, 0},
         17,
         STELE_EBSON,
         "d"},
    };
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++)
        test_expect_bson(raw[i].name, raw[i].bytes, raw[i].len, raw[i].code, raw[i].fragment);

    bson_t *b = test_doc_with_key("$inc");
    test_expect_bson("dollar key", bson_get_data(b), b->len, STELE_EDOLLARKEY, "\"$inc\"");
    bson_destroy(b);

    b = test_doc_with_key("_id");
    test_expect_bson("reserved _id", bson_get_data(b), b->len, STELE_ERESERVEDKEY, "\"_id\"");
    bson_destroy(b);

    b = test_doc_with_key(STELE_META_FIELD);
    test_expect_bson("reserved meta field", bson_get_data(b), b->len, STELE_ERESERVEDKEY,
                     STELE_META_FIELD);
    bson_destroy(b);

    b = test_doc_with_key("caf\xc3");
    test_expect_bson("invalid utf-8 key", bson_get_data(b), b->len, STELE_EUTF8, "key");
    bson_destroy(b);

    b = bson_new();
    bson_append_utf8(b, "who", -1, "\xed\xa0\x80", 3); /* encoded surrogate */
    test_expect_bson("invalid utf-8 string", bson_get_data(b), b->len, STELE_EUTF8, "\"who\"");
    bson_destroy(b);

    b = bson_new();
    bson_t child, grandchild;
    bson_append_document_begin(b, "outer", -1, &child);
    bson_append_array_begin(&child, "list", -1, &grandchild);
    bson_append_int32(&grandchild, "$0", -1, 1);
    bson_append_array_end(&child, &grandchild);
    bson_append_document_end(b, &child);
    test_expect_bson("dollar key in an array", bson_get_data(b), b->len, STELE_EDOLLARKEY,
                     "\"outer.list.$0\"");
    bson_destroy(b);

    b = test_doc_with_key("ok");
    test_expect_bson("repeated key", bson_get_data(b), b->len, STELE_EAMBIGUOUS,
                     "duplicate key \"ok\" at ok");
    bson_destroy(b);

    b = test_doc_with_key("a.b");
    test_expect_bson("dotted key", bson_get_data(b), b->len, STELE_EAMBIGUOUS,
                     "key \"a.b\" contains '.'");
    bson_destroy(b);

    b = bson_new();
    bson_append_document_begin(b, "outer", -1, &child);
    bson_append_array_begin(&child, "list", -1, &grandchild);
    bson_append_utf8(&grandchild, "0", -1, "x", 1);
    bson_append_utf8(&grandchild, "0", -1, "y", 1);
    bson_append_array_end(&child, &grandchild);
    bson_append_document_end(b, &child);
    test_expect_bson("array index repeated", bson_get_data(b), b->len, STELE_EAMBIGUOUS,
                     "duplicate key \"0\" at outer.list.0");
    bson_destroy(b);

    b = bson_new();
    bson_append_document_begin(b, "outer", -1, &child);
    bson_append_int32(&child, "ip.v4", -1, 1);
    bson_append_document_end(b, &child);
    test_expect_bson("dotted key nested", bson_get_data(b), b->len, STELE_EAMBIGUOUS,
                     "key \"ip.v4\" under outer contains '.'");
    bson_destroy(b);
}

static void
test_validate_rejects_bson_nested_too_deeply(void **state)
{
    (void)state;
    bson_t levels[12];
    bson_init(&levels[0]);
    for (int i = 1; i < 12; i++)
        bson_append_document_begin(&levels[i - 1], "d", -1, &levels[i]);
    bson_append_int32(&levels[11], "x", -1, 1);
    for (int i = 11; i >= 1; i--)
        bson_append_document_end(&levels[i - 1], &levels[i]);
    test_expect_bson("12 levels", bson_get_data(&levels[0]), levels[0].len, STELE_EDEPTH,
                     "deeper than 10");
    bson_destroy(&levels[0]);
}

static void
test_validate_rejects_bson_over_max_record_bytes(void **state)
{
    (void)state;
    char big[2000];
    memset(big, 'x', sizeof big);
    bson_t *b = bson_new();
    bson_append_utf8(b, "s", -1, big, sizeof big);
    test_expect_bson("oversize", bson_get_data(b), b->len, STELE_ETOOBIG, "max_record_bytes");
    bson_destroy(b);
}

static void
test_validate_accepts_ordinary_bson_events(void **state)
{
    (void)state;
    bson_t *b = BCON_NEW("actor", BCON_UTF8("alice"), "when", BCON_DATE_TIME(1700000000000), "n",
                         BCON_INT64(7), "nested", "{", "_id", BCON_INT32(1), "}", "bin",
                         BCON_BIN(BSON_SUBTYPE_BINARY, (const uint8_t *)"\0\1", 2));
    bson_append_utf8(b, "nul", -1, "a\0b", 3);
    test_expect_bson("ordinary", bson_get_data(b), b->len, 0, NULL);
    bson_destroy(b);
}

/* JSON allows no leading zero in a number. libbson's parser refuses "01" but reads "-01",
 * "-012" and "-07" as 0 and "-00.5" as -0.5: an event that is not JSON, stored with another
 * value than the one written. */
static void
test_validate_refuses_numbers_with_a_leading_zero(void **state)
{
    (void)state;
    static const json_case_t cases[] = {
        {"negative integer", "{\"n\":-01}", STELE_EJSON, "byte 5: a number has a leading zero"},
        {"negative integer in an array", "{\"n\":[1,-012]}", STELE_EJSON,
         "byte 8: a number has a leading zero"},
        {"negative decimal", "{\"n\":-00.5}", STELE_EJSON, "byte 5: a number has a leading zero"},
        {"positive integer", "{\"n\":07}", STELE_EJSON, "byte 5: a number has a leading zero"},
    };
    expect_json_cases(cases, sizeof cases / sizeof cases[0]);
    static const char *const good[] = {"{\"n\":0}",     "{\"n\":-0}", "{\"n\":-0.5}", "{\"n\":0e5}",
                                       "{\"n\":-0E-2}", "{\"n\":10}", "{\"n\":-100}"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        bson_t doc;
        stele_error_t err = {0};
        if (test_read_json(good[i], strlen(good[i]), &test_limits, &doc, &err) != 0)
            fail_msg("\"%s\" refused: %s", good[i], err.message);
        bson_destroy(&doc);
    }
}

/* 0xC0 0x80 is an overlong encoding of U+0000 ("modified UTF-8"), not UTF-8. libbson's
 * validator lets it through whenever it allows NUL, which it does for string values (a BSON
 * string is length-prefixed), so both inputs took it in a value. */
static void
test_validate_refuses_an_overlong_nul_in_a_string(void **state)
{
    (void)state;
    const char *json = "{\"ok\":\"caf\xc3\xa9\",\"a\":\"x\xc0\x80y\"}";
    stele_error_t err = {0};
    bson_t doc;
    int rc = test_read_json(json, strlen(json), &test_limits, &doc, &err);
    if (rc == 0)
        bson_destroy(&doc);
    if (rc != STELE_EUTF8 || !strstr(err.message, "string at byte 18"))
        fail_msg("json: got %s \"%s\"", stele_errname(rc), err.message);

    bson_t *b = bson_new();
    bson_append_utf8(b, "ok", -1, "caf\xc3\xa9", 5);
    bson_append_utf8(b, "who", -1, "x\xc0\x80y", 4);
    test_expect_bson("overlong NUL in a value", bson_get_data(b), b->len, STELE_EUTF8, "\"who\"");
    bson_destroy(b);
    b = bson_new();
    bson_append_regex(b, "re", -1, "a\xc0\x80", "i");
    test_expect_bson("overlong NUL in a regex", bson_get_data(b), b->len, STELE_EUTF8, "\"re\"");
    bson_destroy(b);
}

/* An object or array element of an array followed by neither ',' nor ']': libbson calls
 * [{} {}] "Incomplete JSON", which the message turned into "the text ends inside the event"
 * for a text that goes on; the message must name the byte where the ',' is missing. */
static void
test_validate_names_the_missing_comma_after_an_array_element(void **state)
{
    (void)state;
    static const json_case_t cases[] = {
        {"objects", "{\"a\":[{} {}]}", STELE_EJSON, "byte 9: ',' or ']' expected"},
        {"object then object", "{\"a\":[{\"b\":1}{\"c\":2}]}", STELE_EJSON,
         "byte 13: ',' or ']' expected"},
        {"arrays", "{\"a\":[[1] [2]]}", STELE_EJSON, "byte 10: ',' or ']' expected"},
        {"object then number", "{\"a\":[{} 1]}", STELE_EJSON, "byte 9: ',' or ']' expected"},
    };
    expect_json_cases(cases, sizeof cases / sizeof cases[0]);
    const char *good = "{\"a\":[{} , [ ] ,{\"b\":[1]}\n],\"c\":{\"d\":[]} }";
    bson_t doc;
    stele_error_t err = {0};
    if (test_read_json(good, strlen(good), &test_limits, &doc, &err) != 0)
        fail_msg("\"%s\" refused: %s", good, err.message);
    bson_destroy(&doc);
}

/* An event of `depth` levels of objects, innermost {"x":1}. Caller frees. */
static char *
test_nested_json(int depth)
{
    char *json = malloc((size_t)depth * 6 + 8);
    assert_non_null(json);
    size_t n = 0;
    json[n++] = '{';
    for (int d = 2; d <= depth; d++) {
        memcpy(json + n, "\"a\":{", 5);
        n += 5;
    }
    memcpy(json + n, "\"x\":1", 5);
    n += 5;
    for (int d = 1; d <= depth; d++)
        json[n++] = '}';
    json[n] = '\0';
    return json;
}

/* libbson's JSON parser stops at 98 levels ("LEVELS_EXCEEDED"), below the default and largest
 * max_depth (100): an event of 99 or 100 levels, well-formed and within max_depth, was
 * refused as malformed json (STELE_EJSON). It is an event nested too deeply for JSON input,
 * and the message must say at which byte and what the limit is. */
static void
test_validate_json_nested_past_the_parser_limit_is_a_depth_error(void **state)
{
    (void)state;
    static const validate_limits_t limits = {.max_record_bytes = 1 << 20, .max_depth = 100};
    char *json = test_nested_json(98);
    bson_t doc;
    stele_error_t err = {0};
    if (test_read_json(json, strlen(json), &limits, &doc, &err) != 0)
        fail_msg("98 levels refused: %s", err.message);
    bson_destroy(&doc);
    free(json);
    for (int depth = 99; depth <= 100; depth++) {
        json = test_nested_json(depth);
        int rc = test_read_json(json, strlen(json), &limits, &doc, &err);
        if (rc == 0)
            bson_destroy(&doc);
        /* the 99th '{' opens at byte 1 + 98 * 5 - 1 */
        if (rc != STELE_EDEPTH || !strstr(err.message, "deeper than 98 levels at byte 490"))
            fail_msg("%d levels: got %s \"%s\"", depth, stele_errname(rc), err.message);
        free(json);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate_rejects_each_malformed_json_event),
        cmocka_unit_test(test_validate_rejects_json_over_max_record_bytes),
        cmocka_unit_test(test_validate_accepts_ordinary_json_events),
        cmocka_unit_test(test_validate_json_keeps_int64_precision),
        cmocka_unit_test(test_validate_finds_a_repeated_key_among_many),
        cmocka_unit_test(test_validate_json_writes_what_libbson_writes),
        cmocka_unit_test(test_validate_json_agrees_with_the_reference_on_mutated_events),
        cmocka_unit_test(test_validate_rejects_each_malformed_bson_event),
        cmocka_unit_test(test_validate_rejects_bson_nested_too_deeply),
        cmocka_unit_test(test_validate_rejects_bson_over_max_record_bytes),
        cmocka_unit_test(test_validate_accepts_ordinary_bson_events),
        cmocka_unit_test(test_validate_refuses_numbers_with_a_leading_zero),
        cmocka_unit_test(test_validate_refuses_an_overlong_nul_in_a_string),
        cmocka_unit_test(test_validate_names_the_missing_comma_after_an_array_element),
        cmocka_unit_test(test_validate_json_nested_past_the_parser_limit_is_a_depth_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
