/*
 * test_validate.c: event validation (engine/validate.c). A table of malformed events, each
 * with the code it must get and a fragment its message must contain (what and where), plus
 * the events that must pass. The engine-level check that a rejected event appends nothing
 * is in test_engine.c (test_engine_rejected_events_append_nothing), over the same kinds.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "validate.h"

static const validate_limits_t test_limits = {.max_record_bytes = 1024, .max_depth = 10};
static const validate_limits_t big_test_limits = {.max_record_bytes = 1 << 20, .max_depth = 10};

typedef struct json_case {
    const char *name;
    const char *json;
    int code;
    const char *fragment; /* must appear in the message */
} json_case_t;

static const json_case_t json_cases[] = {
    {"empty text", "", STELE_EEMPTY, "empty"},
    {"only whitespace", " \n\t ", STELE_EEMPTY, "whitespace"},
    {"object without fields", "{}", STELE_EEMPTY, "no fields"},
    {"array", "[1,2]", STELE_ENOTOBJECT, "an array"},
    {"number", "42", STELE_ENOTOBJECT, "a number"},
    {"string", "\"text\"", STELE_ENOTOBJECT, "a string"},
    {"boolean", "true", STELE_ENOTOBJECT, "a boolean"},
    {"null", "null", STELE_ENOTOBJECT, "null"},
    {"garbage", "hello", STELE_EJSON, "byte 0"},
    {"truncated after colon", "{\"a\":", STELE_EJSON, "ends inside"},
    {"truncated before brace", "{\"a\":1", STELE_EJSON, "ends inside"},
    {"truncated inside string", "{\"a\":\"abc", STELE_EJSON, "ends inside"},
    {"missing colon", "{\"a\" 1}", STELE_EJSON, "position"},
    {"array strings without a comma", "{\"a\":[\"x\" \"y\"]}", STELE_EJSON, "byte 10: ','"},
    {"array string then a number", "{\"a\":[\"x\" 1]}", STELE_EJSON, "byte 10: ','"},
    {"single quotes", "{'a':1}", STELE_EJSON, "position"},
    {"two objects", "{\"a\":1}{\"b\":2}", STELE_EJSON, "byte 7: data after the event"},
    {"trailing garbage", "{\"a\":1} x", STELE_EJSON, "byte 8"},
    {"NaN", "{\"n\":NaN}", STELE_EJSON, "NaN"},
    {"invalid utf-8 in a string", "{\"a\":\"\xff\"}", STELE_EUTF8, "string at byte 5"},
    {"invalid utf-8 in a key", "{\"\xc3\":1}", STELE_EUTF8, "key at byte 1"},
    {"lone surrogate escape", "{\"a\":\"\\ud800\"}", STELE_EUTF8, "unicode"},
    {"NUL in a key", "{\"a\\u0000b\":1}", STELE_EKEYNUL, "byte 1"},
    {"dollar key at top level", "{\"$set\":1}", STELE_EDOLLARKEY, "\"$set\""},
    {"dollar key at depth 3", "{\"a\":{\"b\":{\"$where\":1}}}", STELE_EDOLLARKEY, "\"a.b.$where\""},
    {"dollar key inside an array", "{\"a\":[{\"$x\":1}]}", STELE_EDOLLARKEY, "\"a.0.$x\""},
    {"extended json wrapper", "{\"t\":{\"$date\":1}}", STELE_EDOLLARKEY, "\"t.$date\" at byte 6"},
    {"escaped dollar key", "{\"\\u0024x\":1}", STELE_EDOLLARKEY, "u0024x"},
    {"reserved _id", "{\"_id\":1,\"a\":2}", STELE_ERESERVEDKEY, "\"_id\""},
    {"reserved _stele", "{\"a\":1,\"_stele\":{}}", STELE_ERESERVEDKEY, "\"_stele\""},
    {"reserved _ts", "{\"a\":1,\"_ts\":\"2026\"}", STELE_ERESERVEDKEY, "\"_ts\""},
    {"nested too deeply", "{\"a\":[[[[[[[[[[1]]]]]]]]]]}", STELE_EDEPTH, "deeper than 10"},
    {"exponent overflow", "{\"n\":1e400}", STELE_ENUMBER, "1e400"},
    {"negative exponent overflow", "{\"n\":-1e400}", STELE_ENUMBER, "-1e400"},
    {"exponent underflow", "{\"n\":1e-400}", STELE_ENUMBER, "double"},
    {"twenty-digit integer", "{\"n\":99999999999999999999}", STELE_ENUMBER, "int64"},
    {"int64 max plus one", "{\"n\":9223372036854775808}", STELE_ENUMBER, "int64"},
    {"int64 min minus one", "{\"n\":-9223372036854775809}", STELE_ENUMBER, "int64"},
};

/* Each case refused with its code and a message holding its fragment. */
static void
expect_json_cases(const json_case_t *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const json_case_t *c = &cases[i];
        stele_error_t err = {0};
        bson_t doc;
        int rc = validate_json(c->json, strlen(c->json), &test_limits, &doc, &err);
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
    int rc = validate_json(json, sizeof json, &test_limits, &doc, &err);
    assert_int_equal(rc, STELE_ETOOBIG);
    assert_non_null(strstr(err.message, "max_record_bytes (1024)"));
}

static void
test_validate_accepts_ordinary_json_events(void **state)
{
    (void)state;
    static const char *const good[] = {
        "{\"actor\":\"alice\",\"action\":\"login\",\"ok\":true}",
        "  {\"a\":1}  \n",
        "{\"n\":9223372036854775807,\"m\":-9223372036854775808,\"d\":1.5e300}",
        "{\"nested\":{\"_id\":1,\"_stele\":2}}",
        "{\"a.b\":1,\"\":2,\"price$\":3}",
        "{\"s\":\"x\\u0000y\",\"u\":\"caf\xc3\xa9 \\u00e9\"}",
        "{\"a\":[[[[[[[[1]]]]]]]]}",
        "{\"z\":0.000001,\"e\":1E5,\"neg\":-0}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        stele_error_t err = {0};
        bson_t doc;
        int rc = validate_json(good[i], strlen(good[i]), &test_limits, &doc, &err);
        if (rc != 0) {
            print_error("\"%s\" refused: %s\n", good[i], err.message);
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

/* Each thread parses with one reused libbson reader (validate.c, json_parser_t): many
 * events in a row, refusals between them, leading whitespace, events longer than the
 * reader's 16 KiB buffer and longer than the reuse limit must each give exactly the BSON a
 * fresh parse gives, and a refusal the same code and message every time. */
static void
test_validate_reused_reader_matches_a_fresh_parse(void **state)
{
    (void)state;
    static const validate_limits_t big_limits = {.max_record_bytes = 1 << 20, .max_depth = 10};
    char *big16 = test_big_json(40000), *big64 = test_big_json(100000);
    const char *good[] = {
        "{\"actor\":\"alice\",\"ok\":true}",
        "  \n{\"a\":{\"b\":[1,2,{\"c\":null}]}}  ",
        "{\"u\":\"caf\xc3\xa9 \\u00e9\",\"k\\\"q\":\"{\"}",
        big16,
        "{\"n\":-1.5e300}",
        big64,
    };
    const size_t n_good = sizeof good / sizeof good[0];
    enum { N_BAD = sizeof json_cases / sizeof json_cases[0] };
    static char first_message[N_BAD][sizeof(((stele_error_t *)0)->message)];
    for (int round = 0; round < 3; round++) {
        for (size_t b = 0; b < N_BAD; b++) {
            /* an accepted event, then a refused one */
            const char *json = good[(b + (size_t)round) % n_good];
            stele_error_t err = {0};
            bson_t doc;
            int rc = validate_json(json, strlen(json), &big_limits, &doc, &err);
            if (rc != 0)
                fail_msg("\"%.40s\" refused: %s", json, err.message);
            bson_error_t berr;
            bson_t *fresh = bson_new_from_json((const uint8_t *)json, -1, &berr);
            assert_non_null(fresh);
            assert_int_equal(doc.len, fresh->len);
            assert_memory_equal(bson_get_data(&doc), bson_get_data(fresh), doc.len);
            bson_destroy(fresh);
            bson_destroy(&doc);

            json = json_cases[b].json;
            assert_int_not_equal(validate_json(json, strlen(json), &big_limits, &doc, &err), 0);
            if (round == 0)
                snprintf(first_message[b], sizeof first_message[b], "%s", err.message);
            else
                assert_string_equal(err.message, first_message[b]);
        }
    }
    free(big16);
    free(big64);
}

static void *
test_parse_and_exit(void *arg)
{
    (void)arg;
    static const char json[] = "{\"a\":1}";
    bson_t doc;
    for (int i = 0; i < 3; i++) {
        if (validate_json(json, sizeof json - 1, &test_limits, &doc, NULL) != 0)
            return (void *)1;
        bson_destroy(&doc);
    }
    return NULL;
}

/* A thread's reader is freed when the thread exits (the ASan build's leak check sees it). */
static void
test_validate_threads_that_parse_and_exit(void **state)
{
    (void)state;
    for (int i = 0; i < 8; i++) {
        pthread_t t;
        void *res = (void *)1;
        assert_int_equal(pthread_create(&t, NULL, test_parse_and_exit, NULL), 0);
        assert_int_equal(pthread_join(t, &res), 0);
        assert_null(res);
    }
}

/* The reused reader against a fresh parse, on 20,000 mutations of the table's events (bytes
 * flipped, structural characters inserted, the text cut): an accepted event must be exactly
 * what bson_new_from_json makes of it, and each verdict must not depend on what the thread
 * parsed before (the same text again gets the same code). Seeded, so a failure repeats. */
static void
test_validate_reused_reader_survives_mutated_events(void **state)
{
    (void)state;
    static const char structural[] = "{}[]\":,\\ 0e-.tn\x80\xc3";
    uint64_t rng = 0x5eed5eedULL;
    const size_t n_cases = sizeof json_cases / sizeof json_cases[0];
    size_t n_accepted = 0;
    for (int i = 0; i < 20000; i++) {
        char text[256];
        const char *base = json_cases[(size_t)i % n_cases].json;
        if (i % 3 == 0)
            base = "{\"actor\":\"alice\",\"n\":[1,2,{\"x\":null}],\"s\":\"caf\xc3\xa9\"}";
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
        stele_error_t err = {0};
        bson_t doc;
        int rc = validate_json(text, len, &big_test_limits, &doc, &err);
        if (rc == 0) {
            n_accepted++;
            bson_error_t berr;
            bson_t *fresh = bson_new_from_json((const uint8_t *)text, (ssize_t)len, &berr);
            if (!fresh)
                fail_msg("accepted \"%.*s\", which a fresh parse refuses: %s", (int)len, text,
                         berr.message);
            assert_int_equal(doc.len, fresh->len);
            assert_memory_equal(bson_get_data(&doc), bson_get_data(fresh), doc.len);
            bson_destroy(fresh);
            bson_destroy(&doc);
        }
        stele_error_t again = {0};
        int rc_again = validate_json(text, len, &big_test_limits, &doc, &again);
        assert_int_equal(rc_again, rc);
        if (rc_again == 0)
            bson_destroy(&doc);
    }
    assert_true(n_accepted > 100); /* the mutations leave many events valid, too */
}

static void
test_validate_json_keeps_int64_precision(void **state)
{
    (void)state;
    const char *json = "{\"n\":9223372036854775807}";
    bson_t doc;
    assert_int_equal(validate_json(json, strlen(json), &test_limits, &doc, NULL), 0);
    bson_iter_t it;
    assert_true(bson_iter_init_find(&it, &doc, "n"));
    assert_int_equal(bson_iter_type(&it), BSON_TYPE_INT64);
    assert_true(bson_iter_int64(&it) == INT64_MAX);
    bson_destroy(&doc);
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
        if (validate_json(good[i], strlen(good[i]), &test_limits, &doc, &err) != 0)
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
    int rc = validate_json(json, strlen(json), &test_limits, &doc, &err);
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
    if (validate_json(good, strlen(good), &test_limits, &doc, &err) != 0)
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
    if (validate_json(json, strlen(json), &limits, &doc, &err) != 0)
        fail_msg("98 levels refused: %s", err.message);
    bson_destroy(&doc);
    free(json);
    for (int depth = 99; depth <= 100; depth++) {
        json = test_nested_json(depth);
        int rc = validate_json(json, strlen(json), &limits, &doc, &err);
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
        cmocka_unit_test(test_validate_reused_reader_matches_a_fresh_parse),
        cmocka_unit_test(test_validate_reused_reader_survives_mutated_events),
        cmocka_unit_test(test_validate_threads_that_parse_and_exit),
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
