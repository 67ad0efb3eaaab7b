/*
 * test_filter.c: record filters (stele.h, "Record filters"; engine/filter*.c), what
 * `stele tail --where` keeps. A table of conditions against one record, each with whether
 * it matches: every operator (= == != < <= > >= ~ !~ : !:) on event fields of each type, on
 * the record's seq, ts and src, dotted paths into documents and arrays, quoted values,
 * several conditions ANDed. A table of malformed conditions, each refused with the
 * condition quoted and the filter left as it was. Relative times count from the filter's
 * fixed "now".
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

#include "stele.h"

#define NS(seconds) ((int64_t)(seconds)*INT64_C(1000000000))
/* The record's commit time: 2026-12-01T20:00:00.250000Z. */
#define REC_TS (NS(1796155200) + 250000000)
/* The filter's now: one hour after the record. */
#define NOW (REC_TS + NS(3600))
#define REC_SEQ 42
#define REC_SRC "web-1"

/* {"actor":{"name":"alice","admin":true},"action":"login","code":200,"big":5000000000,
 *  "max":9223372036854775807,"ratio":0.5,"neg":-0.0,"tags":["a","b"],"x":null,"s":"200",
 *  "n":{"$numberDecimal":"1"},"seq":7,"ip":"::1","msg":"!urgent","nan":NaN,
 *  "when":{"$date":"2026-12-01T20:00:00Z"}} */
static bson_t *
sample_event(void)
{
    bson_error_t error;
    bson_t *doc = bson_new_from_json(
        (const uint8_t *)"{\"actor\":{\"name\":\"alice\",\"admin\":true},\"action\":\"login\","
                         "\"code\":200,\"big\":{\"$numberLong\":\"5000000000\"},"
                         "\"max\":{\"$numberLong\":\"9223372036854775807\"},\"ratio\":0.5,"
                         "\"neg\":-0.0,\"tags\":[\"a\",\"b\"],\"x\":null,\"s\":\"200\","
                         "\"n\":{\"$numberDecimal\":\"1\"},\"seq\":7,\"ip\":\"::1\","
                         "\"msg\":\"!urgent\",\"nan\":{\"$numberDouble\":\"NaN\"},"
                         "\"when\":{\"$date\":\"2026-12-01T20:00:00Z\"}}",
        -1, &error);
    assert_non_null(doc);
    return doc;
}

typedef struct filter_row {
    const char *conditions[3];
    int want; /* 1 match, 0 not */
} filter_row_t;

static const filter_row_t rows[] = {
    /* = on each type */
    {{"actor.name=alice"}, 1},
    {{"actor.name==alice"}, 1},
    {{"actor.name = alice"}, 1}, /* spaces around OP are ignored */
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
    {{"max=9223372036854775807"}, 1},
    {{"max=9223372036854775806"}, 0},     /* exactly, not as doubles */
    {{"max=9.223372036854775807e18"}, 0}, /* 2^63 as a double is above INT64_MAX */
    {{"ratio=0.5"}, 1},                   /* double */
    {{"ratio=.5"}, 1},
    {{"ratio=1"}, 0},
    {{"neg=0"}, 1}, /* -0.0 == 0 */
    {{"s=200"}, 1}, /* a string "200" matches its text */
    {{"s=200.0"}, 0},
    {{"s=\"200\""}, 1}, /* a quoted VALUE equals strings only */
    {{"code=\"200\""}, 0},
    {{"x=null"}, 1},
    {{"x=\"null\""}, 0},
    {{"x="}, 0},
    {{"tags.1=b"}, 1}, /* array items by index */
    {{"tags.2=b"}, 0},
    {{"tags=a"}, 0}, /* an array is not its items */
    {{"n=1"}, 0},    /* other types never equal */
    {{"when=2026-12-01T20:00:00Z"}, 0},
    {{"missing=1"}, 0}, /* nor does a missing field */
    {{"actor.name.first=alice"}, 0},
    {{"ip=::1"}, 1},                 /* ':' after the operator is VALUE */
    {{"msg=\"!urgent\""}, 1},        /* a VALUE starting with an operator character, quoted */
    {{"action=\"log\\u0069n\""}, 1}, /* JSON escapes in a quoted VALUE */
    /* != : the negation, a missing field included */
    {{"actor.name!=alice"}, 0},
    {{"actor.name!=bob"}, 1},
    {{"code!=200"}, 0},
    {{"code!=201"}, 1},
    {{"missing!=x"}, 1},
    {{"nan!=1"}, 1},
    {{"nan=1"}, 0},
    /* ordering: numbers only, int and double alike */
    {{"code>199"}, 1},
    {{"code>200"}, 0},
    {{"code>=200"}, 1},
    {{"code<200.5"}, 1},
    {{"code<=199.999"}, 0},
    {{"code<=200"}, 1},
    {{"code>199.5"}, 1},
    {{"ratio<1"}, 1},
    {{"ratio>0.25"}, 1},
    {{"ratio>=0.5"}, 1},
    {{"ratio<0.5"}, 0},
    {{"big>4294967296"}, 1},
    {{"max>9223372036854775806"}, 1},
    {{"max<9.3e18"}, 1},
    {{"max>=9.3e18"}, 0},
    {{"code>-1e300"}, 1},
    {{"nan>0"}, 0}, /* NaN is unordered */
    {{"nan<0"}, 0},
    {{"s>100"}, 0},         /* a string is not a number */
    {{"actor.admin>0"}, 0}, /* nor a boolean */
    {{"missing<1"}, 0},
    /* regular expressions (POSIX ERE, anywhere in the text) */
    {{"actor.name~^al"}, 1},
    {{"actor.name~lic"}, 1},
    {{"actor.name~^lic"}, 0},
    {{"actor.name~^(alice|bob)$"}, 1},
    {{"actor.name!~^b"}, 1},
    {{"actor.name!~^a"}, 0},
    {{"code~^2[0-9]{2}$"}, 1}, /* a number's text */
    {{"ratio~^0\\.5$"}, 1},
    {{"actor.admin~^true$"}, 1},
    {{"x~null"}, 1},
    {{"tags~a"}, 0}, /* an array has no text */
    {{"tags!~a"}, 1},
    {{"missing~."}, 0},
    {{"missing!~."}, 1},
    /* globs (fnmatch, the whole text) */
    {{"actor.name:al*"}, 1},
    {{"actor.name:ali?e"}, 1},
    {{"actor.name:[ab]*"}, 1},
    {{"actor.name:lic"}, 0},
    {{"actor.name!:b*"}, 1},
    {{"actor.name!:a*"}, 0},
    {{"code:2*"}, 1},
    {{"missing:*"}, 0},
    {{"missing!:*"}, 1},
    /* the record's seq, ts and src */
    {{"seq=42"}, 1},
    {{"seq==42"}, 1},
    {{"seq=7"}, 0}, /* the record's, not the event's */
    {{"event.seq=7"}, 1},
    {{"event.actor.name=alice"}, 1},
    {{"seq!=42"}, 0},
    {{"seq>41"}, 1},
    {{"seq>=43"}, 0},
    {{"seq<43"}, 1},
    {{"seq<=41"}, 0},
    {{"seq<=42"}, 1},
    {{"seq~^4"}, 1},
    {{"seq:4?"}, 1},
    {{"seq!:4?"}, 0},
    {{"ts>=2026-12-01T20:00:00Z"}, 1},
    {{"ts>2026-12-01T20:00:00.25Z"}, 0},
    {{"ts=2026-12-01T20:00:00.25Z"}, 1},
    {{"ts!=2026-12-01T20:00:00.25Z"}, 0},
    {{"ts<2026-12-01 21:00:01"}, 1}, /* local time: 20:00:01Z in the test's zone */
    {{"ts>=2026-12-01"}, 1},
    {{"ts<2026-12-02"}, 1},
    {{"ts>=today"}, 1},
    {{"ts<yesterday"}, 0},
    {{"ts>-2h"}, 1},
    {{"ts>-30min"}, 0},
    {{"ts<30min ago"}, 1},
    {{"ts>@1796155200"}, 1},
    {{"ts:2026-12-01T20:*"}, 1},
    {{"ts~\\.250000Z$"}, 1},
    {{"src=web-1"}, 1},
    {{"src!=web-1"}, 0},
    {{"src=web-2"}, 0},
    {{"src~^web-[0-9]+$"}, 1},
    {{"src:web-*"}, 1},
    {{"src!:db-*"}, 1},
    /* every condition must hold */
    {{"actor.name=alice", "code=200"}, 1},
    {{"actor.name=alice", "code=404"}, 0},
    {{"code=404", "actor.name=alice"}, 0},
    {{"seq>40", "seq<50", "actor.name:a*"}, 1},
    {{"seq>40", "seq<42", "actor.name:a*"}, 0},
};

static void
test_filter_table_matches_by_operator_path_and_type(void **state)
{
    (void)state;
    bson_t *event = sample_event();
    stele_record_t rec = {
        .seq = REC_SEQ, .ts_ns = REC_TS, .bson = bson_get_data(event), .bson_len = event->len};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        stele_filter_t *f = NULL;
        stele_error_t err = {0};
        assert_int_equal(stele_filter_new(NOW, &f, &err), 0);
        for (int c = 0; c < 3 && rows[i].conditions[c] != NULL; c++) {
            if (stele_filter_add(f, rows[i].conditions[c], &err) != 0)
                fail_msg("'%s' refused: %s", rows[i].conditions[c], err.message);
        }
        int got = stele_filter_match(f, &rec, REC_SRC);
        if (got != rows[i].want)
            fail_msg("%s%s%s: got %d, want %d", rows[i].conditions[0],
                     rows[i].conditions[1] ? " AND " : "",
                     rows[i].conditions[1] ? rows[i].conditions[1] : "", got, rows[i].want);
        stele_filter_free(f);
    }
    bson_destroy(event);
}

typedef struct bad_row {
    const char *condition;
    const char *want_message; /* exactly */
} bad_row_t;

static const bad_row_t bad_rows[] = {
    {"actor", "'actor' has no operator: write PATH OP VALUE, OP one of = != < <= > >= ~ !~ : !:"},
    {"", "'' has no operator: write PATH OP VALUE, OP one of = != < <= > >= ~ !~ : !:"},
    {"=x", "'=x' has no PATH before its operator"},
    {" =x", "' =x' has no PATH before its operator"},
    {"a=<5", "'a=<5' has the unknown operator '=<' (use = != < <= > >= ~ !~ : !:)"},
    {"a=>5", "'a=>5' has the unknown operator '=>' (use = != < <= > >= ~ !~ : !:)"},
    {"a<>5", "'a<>5' has the unknown operator '<>' (use = != < <= > >= ~ !~ : !:)"},
    {"a!5", "'a!5' has the unknown operator '!' (use = != < <= > >= ~ !~ : !:)"},
    {"a=~x", "'a=~x' has the unknown operator '=~' (use = != < <= > >= ~ !~ : !:)"},
    {"a~=x", "'a~=x' has the unknown operator '~=' (use = != < <= > >= ~ !~ : !:)"},
    {"a===x", "'a===x' has the unknown operator '===' (use = != < <= > >= ~ !~ : !:)"},
    {"msg=!x", "'msg=!x' has the unknown operator '=!' (use = != < <= > >= ~ !~ : !:)"},
    {"a..b=1", "'a..b=1' has an empty key in its PATH"},
    {".a=1", "'.a=1' has an empty key in its PATH"},
    {"a.=1", "'a.=1' has an empty key in its PATH"},
    {"event.=1", "'event.=1' has an empty key in its PATH"},
    {"event=1", "'event=1' compares the whole event: name a field in it (event.actor)"},
    {"code>abc", "'code>abc': < <= > >= compare numbers, and 'abc' is not one"},
    {"code<", "'code<': < <= > >= compare numbers, and '' is not one"},
    {"code>=0x10", "'code>=0x10': < <= > >= compare numbers, and '0x10' is not one"},
    {"code<=nan", "'code<=nan': < <= > >= compare numbers, and 'nan' is not one"},
    {"code>\"5\"", "'code>\"5\"': < <= > >= compare numbers, and '5' is not one"},
    {"seq=abc", "'seq=abc': seq compares with a whole number, not 'abc'"},
    {"seq>1.5", "'seq>1.5': seq compares with a whole number, not '1.5'"},
    {"seq=-1", "'seq=-1': seq compares with a whole number, not '-1'"},
    {"ts>someday", "'ts>someday': 'someday' is not a time"},
    {"ts=2026-02-30", "'ts=2026-02-30': '2026-02-30' is not a time"},
    {"src<web", "'src<web': src is text: compare it with = != ~ !~ : or !:"},
    {"a~(", "'a~(': '(' is not a regular expression: Unmatched ( or \\("},
    {"a!~[z-a]", "'a!~[z-a]': '[z-a]' is not a regular expression: Invalid range end"},
    {"a=\"x", "'a=\"x': VALUE starts with '\"' but is not a JSON string"},
    {"a=\"x\",\"v\":\"y\"",
     "'a=\"x\",\"v\":\"y\"': VALUE starts with '\"' but is not a JSON string"},
    {"a=\"x\"y", "'a=\"x\"y': VALUE starts with '\"' but is not a JSON string"},
};

static void
test_filter_refuses_malformed_conditions_and_quotes_them(void **state)
{
    (void)state;
    stele_filter_t *f = NULL;
    assert_int_equal(stele_filter_new(NOW, &f, NULL), 0);
    for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++) {
        stele_error_t err = {0};
        int rc = stele_filter_add(f, bad_rows[i].condition, &err);
        if (rc != STELE_EINVAL)
            fail_msg("'%s': got %d, want STELE_EINVAL", bad_rows[i].condition, rc);
        assert_string_equal(err.message, bad_rows[i].want_message);
    }
    /* nothing was added: the filter still matches everything */
    bson_t *event = sample_event();
    stele_record_t rec = {.seq = 1, .bson = bson_get_data(event), .bson_len = event->len};
    assert_int_equal(stele_filter_match(f, &rec, REC_SRC), 1);
    assert_int_equal(stele_filter_add(NULL, "a=b", NULL), STELE_EINVAL);
    assert_int_equal(stele_filter_add(f, NULL, NULL), STELE_EINVAL);
    assert_int_equal(stele_filter_new(NOW, NULL, NULL), STELE_EINVAL);
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
    assert_int_equal(stele_filter_new(NOW, &f, NULL), 0);
    for (int i = 0; i < 100; i++) {
        char condition[32];
        snprintf(condition, sizeof condition, i % 2 ? "code=%d" : "actor.name~^a", 200);
        assert_int_equal(stele_filter_add(f, condition, NULL), 0);
        memset(condition, 'x', sizeof condition - 1);
    }
    assert_int_equal(stele_filter_match(f, &rec, REC_SRC), 1);
    assert_int_equal(stele_filter_add(f, "actor.name=carol", NULL), 0);
    assert_int_equal(stele_filter_match(f, &rec, REC_SRC), 0);
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
    assert_int_equal(stele_filter_new(NOW, &f, NULL), 0);
    assert_int_equal(stele_filter_add(f, "a=1", NULL), 0);
    assert_int_equal(stele_filter_match(f, &rec, REC_SRC), STELE_EBSON);
    assert_int_equal(stele_filter_match(NULL, &rec, REC_SRC), STELE_EINVAL);
    assert_int_equal(stele_filter_match(f, NULL, REC_SRC), STELE_EINVAL);
    stele_filter_free(f);
}

/* A src condition needs the source; a filter without one does not. */
static void
test_filter_match_needs_the_source_only_for_src(void **state)
{
    (void)state;
    bson_t *event = sample_event();
    stele_record_t rec = {.seq = 1, .bson = bson_get_data(event), .bson_len = event->len};
    stele_filter_t *f = NULL;
    assert_int_equal(stele_filter_new(NOW, &f, NULL), 0);
    assert_int_equal(stele_filter_add(f, "code=200", NULL), 0);
    assert_int_equal(stele_filter_match(f, &rec, NULL), 1);
    assert_int_equal(stele_filter_add(f, "src=web-1", NULL), 0);
    assert_int_equal(stele_filter_match(f, &rec, NULL), STELE_EINVAL);
    assert_int_equal(stele_filter_match(f, &rec, "web-1"), 1);
    stele_filter_free(f);
    bson_destroy(event);
}

static int
set_zone(void **state)
{
    (void)state;
    setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1);
    tzset();
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filter_table_matches_by_operator_path_and_type),
        cmocka_unit_test(test_filter_refuses_malformed_conditions_and_quotes_them),
        cmocka_unit_test(test_filter_copies_conditions_and_takes_many),
        cmocka_unit_test(test_filter_match_refuses_a_record_that_is_not_bson),
        cmocka_unit_test(test_filter_match_needs_the_source_only_for_src),
    };
    return cmocka_run_group_tests(tests, set_zone, NULL);
}
