/*
 * test_validate_api.c: stele_validate_json(), the validate-only call `stele insert` uses
 * before sending a line to `stele serve`. It must refuse exactly what stele_append_json()
 * refuses, with the same code and message, honour the limits it is given, and never touch a
 * journal. The rules themselves are tested in test_validate.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stele.h"
#include "test_util.h"

/* Good and bad events; every one goes through both calls. */
static const char *const events[] = {
    "{\"a\":1}",
    "{\"who\":\"alice\",\"n\":{\"x\":[1,2.5,null,true]}}",
    "",
    "   ",
    "{\"a\":",
    "[1,2]",
    "42",
    "{\"a\":1} {\"b\":2}",
    "{\"$set\":1}",
    "{\"n\":{\"$date\":1}}",
    "{\"_id\":1}",
    "{\"_stele\":{}}",
    "{}",
    "{\"big\":123456789012345678901234567890}",
    "{\"e\":1e999}",
    "{\"a\":NaN}",
    "{\"bad\":\"\xff\xfe\"}",
    "{\"k\\u0000\":1}",
    "{\"actor\":\"alice\",\"actor\":\"mallory\"}",
    "{\"x\":[{\"a.b\":1}]}",
};

static void
test_validate_json_refuses_what_append_refuses_with_the_same_code_and_message(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("validate-api");
    assert_non_null(dir);
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open(dir, NULL, &db, &err), 0);
    uint64_t n_appended = 0;
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
        stele_error_t v_err = {0}, a_err = {0};
        int v_rc = stele_validate_json(events[i], strlen(events[i]), NULL, &v_err);
        uint64_t seq = 0;
        int a_rc =
            stele_append_json(db, events[i], strlen(events[i]), STELE_WAIT_NONE, &seq, &a_err);
        if (v_rc != a_rc)
            fail_msg("event %zu '%s': validate %s, append %s", i, events[i], stele_errname(v_rc),
                     stele_errname(a_rc));
        if (v_rc != 0) {
            assert_int_equal(v_err.code, v_rc);
            assert_string_equal(v_err.message, a_err.message);
        } else {
            n_appended++;
        }
    }
    assert_int_equal(n_appended, 2);
    assert_int_equal(stele_close(db, &err), 0);
    test_tmpdir_remove(dir);
}

/* The time field of every sink the journal is opened with is reserved at the top level
 * (the default _ts always is); the same name deeper down, or a ts while no sink names it,
 * is the event's own. */
static void
test_validate_json_reserves_the_time_field_of_each_sink(void **state)
{
    (void)state;
    stele_sink_options_t sinks[2];
    stele_sink_options_init(&sinks[0]);
    stele_sink_options_init(&sinks[1]);
    sinks[0].name = "a";
    sinks[0].uri = "mongodb://127.0.0.1/";
    sinks[1].name = "b";
    sinks[1].uri = "mongodb://127.0.0.1/";
    sinks[1].time_field = "when";
    stele_options_t o;
    stele_options_init(&o);
    assert_int_equal(stele_validate_json("{\"ts\":1,\"when\":2}", 17, &o, NULL), 0);
    o.sinks = sinks;
    o.n_sinks = 2;
    stele_error_t err = {0};
    assert_int_equal(stele_validate_json("{\"ts\":1,\"when\":2}", 17, &o, &err),
                     STELE_ERESERVEDKEY);
    assert_non_null(strstr(err.message, "\"when\""));
    assert_int_equal(stele_validate_json("{\"_ts\":1}", 9, &o, &err), STELE_ERESERVEDKEY);
    assert_int_equal(stele_validate_json("{\"a\":{\"when\":1,\"_ts\":2}}", 24, &o, NULL), 0);

    char *dir = test_tmpdir_new("validate-time-field");
    assert_non_null(dir);
    stele_t *db = NULL;
    sinks[0].uri = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100";
    sinks[1].uri = sinks[0].uri;
    assert_int_equal(stele_open(dir, &o, &db, &err), 0);
    uint64_t seq = 0;
    assert_int_equal(stele_append_json(db, "{\"when\":1}", 10, STELE_WAIT_NONE, &seq, &err),
                     STELE_ERESERVEDKEY);
    assert_int_equal(stele_append_json(db, "{\"ts\":1}", 8, STELE_WAIT_NONE, &seq, &err), 0);
    assert_int_equal(stele_close(db, NULL), 0);
    test_tmpdir_remove(dir);
}

static void
test_validate_json_honours_the_limits_it_is_given(void **state)
{
    (void)state;
    stele_options_t opts;
    stele_options_init(&opts);
    opts.max_depth = 2;
    stele_error_t err = {0};
    const char *deep = "{\"a\":{\"b\":{\"c\":1}}}";
    assert_int_equal(stele_validate_json(deep, strlen(deep), NULL, &err), 0);
    assert_int_equal(stele_validate_json(deep, strlen(deep), &opts, &err), STELE_EDEPTH);

    stele_options_init(&opts);
    opts.max_record_bytes = 64;
    char big[200];
    snprintf(big, sizeof big, "{\"pad\":\"%0100d\"}", 0);
    assert_int_equal(stele_validate_json(big, strlen(big), NULL, &err), 0);
    assert_int_equal(stele_validate_json(big, strlen(big), &opts, &err), STELE_ETOOBIG);
    assert_non_null(strstr(err.message, "max_record_bytes"));
}

static void
test_validate_json_refuses_limits_that_open_would_refuse(void **state)
{
    (void)state;
    stele_options_t opts;
    stele_options_init(&opts);
    opts.max_depth = 0;
    stele_error_t err = {0};
    assert_int_equal(stele_validate_json("{\"a\":1}", 7, &opts, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "max_depth"));
    stele_options_init(&opts);
    opts.max_record_bytes = 8;
    assert_int_equal(stele_validate_json("{\"a\":1}", 7, &opts, &err), STELE_ECONFIG);
    /* The same refusal as stele_open's (config_check): the knob, and what it accepts. */
    assert_non_null(strstr(err.message, "max_record_bytes"));
    assert_non_null(strstr(err.message, "expected"));
}

static void
test_validate_json_accepts_a_null_error_and_a_null_text(void **state)
{
    (void)state;
    assert_int_equal(stele_validate_json("{\"a\":1}", 7, NULL, NULL), 0);
    assert_int_equal(stele_validate_json("{\"$a\":1}", 8, NULL, NULL), STELE_EDOLLARKEY);
    assert_int_equal(stele_validate_json(NULL, 0, NULL, NULL), STELE_EEMPTY);
}

/* stele_open also refuses sizes that do not fit together (a segment must hold two of the
 * largest records, the queue one): the same options must get the same refusal here. */
static void
test_validate_json_refuses_sizes_that_open_would_refuse(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("validate-sizes");
    assert_non_null(dir);
    char *never = test_path_join(dir, "never-created");
    assert_non_null(never);
    stele_options_t opts;
    for (int i = 0; i < 2; i++) {
        stele_options_init(&opts);
        if (i == 0)
            opts.segment_bytes = 64u << 10; /* max_record_bytes stays 1 MiB */
        else
            opts.max_queue_bytes = 64u << 10;
        stele_error_t open_err = {0}, v_err = {0};
        stele_t *db = NULL;
        int open_rc = stele_open(never, &opts, &db, &open_err);
        assert_int_equal(open_rc, STELE_ECONFIG);
        int v_rc = stele_validate_json("{\"a\":1}", 7, &opts, &v_err);
        if (v_rc != open_rc)
            fail_msg("case %d: stele_open refuses (%s) but stele_validate_json returns %s", i,
                     open_err.message, stele_errname(v_rc));
        assert_string_equal(v_err.message, open_err.message);
    }
    free(never);
    test_tmpdir_remove(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_validate_json_refuses_what_append_refuses_with_the_same_code_and_message),
        cmocka_unit_test(test_validate_json_reserves_the_time_field_of_each_sink),
        cmocka_unit_test(test_validate_json_honours_the_limits_it_is_given),
        cmocka_unit_test(test_validate_json_refuses_limits_that_open_would_refuse),
        cmocka_unit_test(test_validate_json_accepts_a_null_error_and_a_null_text),
        cmocka_unit_test(test_validate_json_refuses_sizes_that_open_would_refuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
