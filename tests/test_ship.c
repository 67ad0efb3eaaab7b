/*
 * test_ship.c: the shipper without a server: the error classifier's table (every class of
 * MongoDB failure maps to the documented verdict) and sink validation at start.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <mongoc/mongoc.h>

#include "ship_mongo.h" /* shipper_classify, ship_scrub_password */

typedef struct classify_case {
    const char *what;
    uint32_t domain;
    uint32_t code;
    const char *message;
    const char *reply_json; /* NULL = no reply */
    shipper_verdict_t verdict;
    size_t index;
} classify_case_t;

static const classify_case_t classify_cases[] = {
    {"socket error", MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_SOCKET, "socket error", NULL,
     SHIPPER_RETRY, 0},
    {"socket timeout", MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_SOCKET,
     "Failed to read 4 bytes: socket error or timeout", NULL, SHIPPER_RETRY, 0},
    {"no server selectable", MONGOC_ERROR_SERVER_SELECTION, MONGOC_ERROR_SERVER_SELECTION_FAILURE,
     "No suitable servers found", NULL, SHIPPER_RETRY, 0},
    {"not writable primary", MONGOC_ERROR_SERVER, 10107, "not master", "{}", SHIPPER_RETRY, 0},
    {"legacy not master text", MONGOC_ERROR_SERVER, 10058, "not master", "{}", SHIPPER_RETRY, 0},
    {"node is recovering", MONGOC_ERROR_SERVER, 13436, "node is recovering", "{}", SHIPPER_RETRY,
     0},
    {"shutdown in progress", MONGOC_ERROR_SERVER, 91, "shutdown in progress", "{}", SHIPPER_RETRY,
     0},
    {"primary stepped down", MONGOC_ERROR_SERVER, 189, "stepped down", "{}", SHIPPER_RETRY, 0},
    {"retryable label on an unknown code", MONGOC_ERROR_SERVER, 4242, "odd",
     "{\"errorLabels\": [\"RetryableWriteError\"]}", SHIPPER_RETRY, 0},
    {"write concern timeout", MONGOC_ERROR_WRITE_CONCERN, 64, "waiting for replication timed out",
     "{\"writeConcernErrors\": [{\"code\": 64, \"errmsg\": \"timed out\"}]}", SHIPPER_RETRY, 0},
    {"write concern error beside a duplicate", MONGOC_ERROR_SERVER, 11000, "dup",
     "{\"writeErrors\": [{\"index\": 3, \"code\": 11000, \"errmsg\": \"dup\"}],"
     " \"writeConcernErrors\": [{\"code\": 64, \"errmsg\": \"timed out\"}]}",
     SHIPPER_RETRY, 0},
    {"duplicate key in a batch", MONGOC_ERROR_SERVER, 11000, "E11000",
     "{\"writeErrors\": [{\"index\": 7, \"code\": 11000, \"errmsg\": \"E11000\"}]}",
     SHIPPER_DUPLICATE, 7},
    {"validator rejects a document", MONGOC_ERROR_SERVER, 121, "Document failed validation",
     "{\"writeErrors\": [{\"index\": 2, \"code\": 121, \"errmsg\": \"failed validation\"}]}",
     SHIPPER_DEAD_LETTER, 2},
    {"per-document not-primary is retried", MONGOC_ERROR_SERVER, 10107, "not master",
     "{\"writeErrors\": [{\"index\": 0, \"code\": 10107, \"errmsg\": \"not master\"}]}",
     SHIPPER_RETRY, 0},
    {"authentication failed", MONGOC_ERROR_CLIENT, MONGOC_ERROR_CLIENT_AUTHENTICATE,
     "Authentication failed", NULL, SHIPPER_STOP_AUTH, 0},
    {"unauthorized", MONGOC_ERROR_SERVER, 13, "not authorized on audit to execute command", "{}",
     SHIPPER_STOP_AUTH, 0},
    {"unknown server error is retried, never dropped", MONGOC_ERROR_SERVER, 9999, "weird", "{}",
     SHIPPER_RETRY, 0},
    {"client-side invalid document", MONGOC_ERROR_COMMAND, MONGOC_ERROR_COMMAND_INVALID_ARG,
     "invalid document for insert", NULL, SHIPPER_SPLIT, 0},
};

static void
test_classify_maps_every_failure_class_to_its_verdict(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof classify_cases / sizeof classify_cases[0]; i++) {
        const classify_case_t *c = &classify_cases[i];
        bson_error_t error;
        bson_set_error(&error, c->domain, c->code, "%s", c->message);
        bson_t *reply = NULL;
        if (c->reply_json) {
            bson_error_t jerr;
            reply = bson_new_from_json((const uint8_t *)c->reply_json, -1, &jerr);
            assert_non_null(reply);
        }
        size_t index = 99;
        shipper_verdict_t got = shipper_classify(&error, reply, &index);
        if (got != c->verdict)
            fprintf(stderr, "case \"%s\": verdict %d, expected %d\n", c->what, (int)got,
                    (int)c->verdict);
        assert_int_equal(got, c->verdict);
        if (c->verdict == SHIPPER_DUPLICATE || c->verdict == SHIPPER_DEAD_LETTER)
            assert_int_equal(index, c->index);
        bson_destroy(reply);
    }
}

static int
start_with(const stele_sink_options_t *so, stele_error_t *err)
{
    index_t *fake_index = (index_t *)(uintptr_t)1; /* never dereferenced: validation fails */
    shipper_config_t cfg = {
        .sink = so, .journal_dir = "unused", .source = "src", .index = fake_index};
    shipper_t *s = NULL;
    int rc = shipper_start(&cfg, &s, err);
    assert_null(s);
    return rc;
}

static void
base_sink(stele_sink_options_t *so)
{
    memset(so, 0, sizeof *so);
    so->name = "main";
    so->uri = "mongodb://127.0.0.1:1/";
    so->w = -1;
    so->journaled = 1;
    so->wtimeout_ms = 1000;
    so->batch_docs = 100;
    so->batch_bytes = 1 << 20;
    so->linger_ms = 5;
    so->backoff_min_ms = 10;
    so->backoff_max_ms = 100;
}

static void
test_shipper_start_rejects_invalid_sinks_naming_the_field(void **state)
{
    (void)state;
    stele_sink_options_t so;
    stele_error_t err;
    base_sink(&so);
    so.uri = NULL;
    assert_int_equal(start_with(&so, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "uri is required"));
    base_sink(&so);
    so.uri = "http://example.invalid/";
    assert_int_equal(start_with(&so, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "invalid uri"));
    base_sink(&so);
    so.database = "bad.name";
    assert_int_equal(start_with(&so, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "database or collection"));
    base_sink(&so);
    so.batch_docs = 0;
    assert_int_equal(start_with(&so, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "sink main: invalid batch_docs 0"));
    base_sink(&so);
    so.batch_docs = 100001; /* above MongoDB's maxWriteBatchSize */
    assert_int_equal(start_with(&so, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "invalid batch_docs 100001"));
    base_sink(&so);
    so.wtimeout_ms = (uint32_t)INT32_MAX + 1; /* libmongoc takes an int32 */
    assert_int_equal(start_with(&so, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "invalid wtimeout_ms 2147483648"));
    base_sink(&so);
    so.backoff_max_ms = 1;
    assert_int_equal(start_with(&so, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "backoff"));
    base_sink(&so);
    so.w = -2;
    assert_int_equal(start_with(&so, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "invalid w -2"));
    shipper_config_t cfg = {.sink = &so, .journal_dir = NULL, .source = "src", .index = NULL};
    shipper_t *s = NULL;
    assert_int_equal(shipper_start(&cfg, &s, &err), STELE_EINVAL);
}

static void
test_shipper_stop_and_stats_accept_null(void **state)
{
    (void)state;
    shipper_stop(NULL, 0);
    assert_int_equal(shipper_shipped_seq(NULL), 0);
    stele_sink_stats_t st;
    shipper_stats(NULL, 5, &st);
    assert_int_equal(st.shipped_seq, 0);
}

/* A message cut at its capacity must not end in the first characters of the password: the
 * cut can fall inside an occurrence, before the scan could mask it. */
static void
test_scrub_leaves_no_part_of_the_password_at_a_cut(void **state)
{
    (void)state;
    static const char *const passwords[] = {"hunter2hunter2", "ab", "x"};
    for (size_t p = 0; p < sizeof passwords / sizeof passwords[0]; p++) {
        const char *pw = passwords[p];
        size_t pw_len = strlen(pw);
        for (size_t cut = 1; cut < pw_len + 8; cut++) {
            /* The password repeated, cut at every length around the second occurrence. */
            char text[256], msg[40];
            snprintf(text, sizeof text, "e %s %s %s %s", pw, pw, pw, pw);
            size_t cap = 9 + cut < sizeof msg ? 9 + cut : sizeof msg;
            size_t n = strlen(text) < cap - 1 ? strlen(text) : cap - 1;
            memcpy(msg, text, n); /* the message as vsnprintf cut it at its capacity */
            msg[n] = '\0';
            ship_scrub_password(pw, msg, cap);
            for (size_t k = pw_len > 1 ? pw_len - 1 : 1; k >= 1; k--) {
                size_t len = strlen(msg);
                if (len >= k && strncmp(msg + len - k, pw, k) == 0 && k < pw_len)
                    fail_msg("password %s, cap %zu: \"%s\" ends in its first %zu chars", pw, cap,
                             msg, k);
                if (k == 1)
                    break;
            }
            if (strstr(msg, pw))
                fail_msg("password %s, cap %zu: \"%s\" holds it", pw, cap, msg);
        }
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify_maps_every_failure_class_to_its_verdict),
        cmocka_unit_test(test_scrub_leaves_no_part_of_the_password_at_a_cut),
        cmocka_unit_test(test_shipper_start_rejects_invalid_sinks_naming_the_field),
        cmocka_unit_test(test_shipper_stop_and_stats_accept_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
