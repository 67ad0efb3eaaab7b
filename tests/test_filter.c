/*
 * test_filter.c: record filters (stele.h, "Record filters"; engine/filter.c), what
 * `stele tail --where` keeps. A table of conditions against one event, each with whether it
 * matches: dotted paths into documents and arrays, values compared by the field's type
 * (strings exactly, numbers numerically across int32/int64/double, booleans and null by
 * name), several conditions ANDed. Malformed conditions are refused with the condition
 * quoted, and a filter without conditions matches everything.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <bson/bson.h>
#include <cmocka.h>

#include "stele.h"

/* {"actor":{"name":"alice","admin":true},"code":200,"big":5000000000,"ratio":0.5,
 *  "tags":["a","b"],"x":null,"s":"200","n":{"$numberDecimal":"1"}} */
static bson_t *
sample_event(void)
{
    bson_error_t error;
    bson_t *doc = bson_new_from_json(
        (const uint8_t *)"{\"actor\":{\"name\":\"alice\",\"admin\":true},\"code\":200,"
                         "\"big\":{\"$numberLong\":\"5000000000\"},\"ratio\":0.5,"
                         "\"tags\":[\"a\",\"b\"],\"x\":null,\"s\":\"200\","
                         "\"n\":{\"$numberDecimal\":\"1\"}}",
        -1, &error);
    assert_non_null(doc);
    return doc;
}

typedef struct filter_row {
    const char *conditions[3];
    int want; /* 1 match, 0 not */
} filter_row_t;

static const filter_row_t rows[] = {
    {{"actor.name=alice"}, 1},
    {{"actor.name=bob"}, 0},
    {{"actor.name=Alice"}, 0}, /* strings compare exactly */
    {{"actor.admin=true"}, 1},
    {{"actor.admin=false"}, 0},
    {{"actor.admin=1"}, 0}, /* a boolean is not a number */
    {{"code=200"}, 1},      /* int32 */
    {{"code=200.0"}, 1},    /* numerically */
    {{"code=2e2"}, 1},
    {{"code=201"}, 0},
    {{"code=two hundred"}, 0},
    {{"big=5000000000"}, 1}, /* int64 */
    {{"ratio=0.5"}, 1},      /* double */
    {{"ratio=.5"}, 1},
    {{"ratio=1"}, 0},
    {{"s=200"}, 1}, /* a string "200" matches its text */
    {{"s=200.0"}, 0},
    {{"x=null"}, 1},
    {{"x="}, 0},
    {{"tags.1=b"}, 1}, /* array items by index */
    {{"tags.2=b"}, 0},
    {{"n=1"}, 0},       /* other types never match */
    {{"missing=1"}, 0}, /* nor does a missing field */
    {{"actor.name.first=alice"}, 0},
    {{"actor.name=alice", "code=200"}, 1}, /* every condition must hold */
    {{"actor.name=alice", "code=404"}, 0},
    {{"code=404", "actor.name=alice"}, 0},
    {{"s==200"}, 0}, /* VALUE is everything after the first '=' */
};

static void
test_filter_table_matches_by_path_and_type(void **state)
{
    (void)state;
    bson_t *event = sample_event();
    stele_record_t rec = {.seq = 1, .bson = bson_get_data(event), .bson_len = event->len};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        stele_filter_t *f = NULL;
        stele_error_t err = {0};
        assert_int_equal(stele_filter_new(&f, &err), 0);
        for (int c = 0; c < 3 && rows[i].conditions[c] != NULL; c++)
            assert_int_equal(stele_filter_add(f, rows[i].conditions[c], &err), 0);
        int got = stele_filter_match(f, &rec);
        if (got != rows[i].want)
            fail_msg("%s%s%s: got %d, want %d", rows[i].conditions[0],
                     rows[i].conditions[1] ? " AND " : "",
                     rows[i].conditions[1] ? rows[i].conditions[1] : "", got, rows[i].want);
        stele_filter_free(f);
    }
    bson_destroy(event);
}

static void
test_filter_refuses_malformed_conditions_and_quotes_them(void **state)
{
    (void)state;
    static const char *const bad[] = {"actor", "=x", "", "no equals sign"};
    stele_filter_t *f = NULL;
    assert_int_equal(stele_filter_new(&f, NULL), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        stele_error_t err = {0};
        assert_int_equal(stele_filter_add(f, bad[i], &err), STELE_EINVAL);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s' is not PATH=VALUE", bad[i]);
        assert_string_equal(err.message, quoted);
    }
    /* nothing was added: the filter still matches everything */
    bson_t *event = sample_event();
    stele_record_t rec = {.seq = 1, .bson = bson_get_data(event), .bson_len = event->len};
    assert_int_equal(stele_filter_match(f, &rec), 1);
    assert_int_equal(stele_filter_add(NULL, "a=b", NULL), STELE_EINVAL);
    assert_int_equal(stele_filter_add(f, NULL, NULL), STELE_EINVAL);
    assert_int_equal(stele_filter_new(NULL, NULL), STELE_EINVAL);
    stele_filter_free(f);
    stele_filter_free(NULL);
    bson_destroy(event);
}

/* Many conditions (no fixed limit), and a condition is copied: the caller's text may go. */
static void
test_filter_copies_conditions_and_takes_many(void **state)
{
    (void)state;
    bson_t *event = sample_event();
    stele_record_t rec = {.seq = 1, .bson = bson_get_data(event), .bson_len = event->len};
    stele_filter_t *f = NULL;
    assert_int_equal(stele_filter_new(&f, NULL), 0);
    for (int i = 0; i < 100; i++) {
        char condition[32];
        snprintf(condition, sizeof condition, "code=%d", 200);
        assert_int_equal(stele_filter_add(f, condition, NULL), 0);
        memset(condition, 'x', sizeof condition - 1);
    }
    assert_int_equal(stele_filter_match(f, &rec), 1);
    assert_int_equal(stele_filter_add(f, "actor.name=carol", NULL), 0);
    assert_int_equal(stele_filter_match(f, &rec), 0);
    stele_filter_free(f);
    bson_destroy(event);
}

static void
test_filter_match_refuses_a_record_that_is_not_bson(void **state)
{
    (void)state;
    static const uint8_t not_bson[] = {0x09, 0x00, 0x00, 0x00, 0x00};
    stele_record_t rec = {.seq = 1, .bson = not_bson, .bson_len = sizeof not_bson};
    stele_filter_t *f = NULL;
    assert_int_equal(stele_filter_new(&f, NULL), 0);
    assert_int_equal(stele_filter_add(f, "a=1", NULL), 0);
    assert_int_equal(stele_filter_match(f, &rec), STELE_EBSON);
    assert_int_equal(stele_filter_match(NULL, &rec), STELE_EINVAL);
    assert_int_equal(stele_filter_match(f, NULL), STELE_EINVAL);
    stele_filter_free(f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filter_table_matches_by_path_and_type),
        cmocka_unit_test(test_filter_refuses_malformed_conditions_and_quotes_them),
        cmocka_unit_test(test_filter_copies_conditions_and_takes_many),
        cmocka_unit_test(test_filter_match_refuses_a_record_that_is_not_bson),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
