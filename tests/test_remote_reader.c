/*
 * test_remote_reader.c: turning a shipped MongoDB document back into its record
 * (remote_doc_to_record, engine/remote_reader.c), without a server: the document shape of
 * docs/mongodb.md in, the record and its event out; every way a document can fail to be in
 * that shape gives STELE_EINTEGRITY with a message that says what is missing, never a crash.
 * Also the arguments stele_remote_reader_open() refuses before it touches the network. The
 * remote reader against a server is tested end to end in tests/cli/test_cli_mongo.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <bson/bson.h>

#include "remote_reader.h"
#include "validate.h"

#define SOURCE "web-1"
#define WHERE "127.0.0.1:27017/audit.events"

typedef struct shipped {
    uint64_t seq;
    int64_t ts_ns;
    uint8_t hash[32];
    uint8_t prev_hash[32];
} shipped_t;

static void
shipped_init(shipped_t *s, uint64_t seq)
{
    s->seq = seq;
    s->ts_ns = INT64_C(1764535490123456789);
    memset(s->hash, 0xab, sizeof s->hash);
    memset(s->prev_hash, 0xcd, sizeof s->prev_hash);
}

static void
append_id(bson_t *doc, const char *src, uint64_t seq)
{
    bson_t id;
    BSON_APPEND_DOCUMENT_BEGIN(doc, "_id", &id);
    BSON_APPEND_UTF8(&id, "src", src);
    BSON_APPEND_INT64(&id, "seq", (int64_t)seq);
    bson_append_document_end(doc, &id);
}

/* What append_meta leaves out of the metadata, to build broken documents. */
enum { META_ALL = 0, META_NO_TS_NS = 1, META_NO_TS = 2, META_SHORT_HASH = 4 };

static void
append_meta(bson_t *doc, const shipped_t *s, int omit)
{
    bson_t meta;
    BSON_APPEND_DOCUMENT_BEGIN(doc, STELE_META_FIELD, &meta);
    if (!(omit & META_NO_TS))
        BSON_APPEND_DATE_TIME(&meta, "ts", s->ts_ns / 1000000);
    if (!(omit & META_NO_TS_NS))
        BSON_APPEND_INT64(&meta, "ts_ns", s->ts_ns);
    BSON_APPEND_BINARY(&meta, "hash", BSON_SUBTYPE_BINARY, s->hash,
                       (omit & META_SHORT_HASH) ? 16 : 32);
    BSON_APPEND_BINARY(&meta, "prev_hash", BSON_SUBTYPE_BINARY, s->prev_hash, 32);
    bson_append_document_end(doc, &meta);
}

/* The document the shipper builds for `event`: _id, the time field _ts, the event's fields,
 * the metadata. */
static bson_t *
shipped_doc(const shipped_t *s, const bson_t *event, int omit)
{
    bson_t *doc = bson_new();
    append_id(doc, SOURCE, s->seq);
    BSON_APPEND_DATE_TIME(doc, STELE_TIME_FIELD_DEFAULT, s->ts_ns / 1000000);
    bson_concat(doc, event);
    append_meta(doc, s, omit);
    return doc;
}

static bson_t *
json_doc(const char *json)
{
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr);
    assert_non_null(doc);
    return doc;
}

static void
assert_rejected(const bson_t *doc, const char *want_in_message)
{
    bson_t event;
    bson_init(&event);
    stele_record_t rec;
    stele_error_t err = {0};
    assert_int_equal(remote_doc_to_record(doc, SOURCE, NULL, WHERE, &event, &rec, &err),
                     STELE_EINTEGRITY);
    assert_int_equal(err.code, STELE_EINTEGRITY);
    if (strstr(err.message, want_in_message) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", err.message, want_in_message);
    assert_non_null(strstr(err.message, WHERE));
    assert_true(err.hint[0] != '\0');
    bson_destroy(&event);
}

static void
test_a_shipped_document_gives_back_the_record_and_the_event_bytes(void **state)
{
    (void)state;
    shipped_t s;
    shipped_init(&s, 42);
    bson_t *event = json_doc("{\"who\":\"alice\",\"n\":{\"x\":1.5,\"_id\":7},\"ok\":true,"
                             "\"big\":{\"$numberLong\":\"9000000000\"},\"list\":[1,\"two\"]}");
    bson_t *doc = shipped_doc(&s, event, META_ALL);
    bson_t out;
    bson_init(&out);
    stele_record_t rec;
    stele_error_t err = {0};
    assert_int_equal(remote_doc_to_record(doc, SOURCE, NULL, WHERE, &out, &rec, &err), 0);
    assert_int_equal(rec.seq, 42);
    assert_true(rec.ts_ns == s.ts_ns);
    assert_memory_equal(rec.hash, s.hash, 32);
    assert_memory_equal(rec.prev_hash, s.prev_hash, 32);
    /* the same bytes as the event that was shipped: same fields, order and types */
    assert_int_equal(rec.bson_len, event->len);
    assert_memory_equal(rec.bson, bson_get_data(event), event->len);
    bson_destroy(&out);
    bson_destroy(doc);
    bson_destroy(event);
}

/* The sink's time field is the envelope's, not the event's: it is left out under the name
 * the reader is given (a BSON date), while a field of that name in an event shipped under
 * another time field stays. */
static void
test_the_sinks_time_field_is_left_out_of_the_event(void **state)
{
    (void)state;
    shipped_t s;
    shipped_init(&s, 7);
    bson_t *event = json_doc("{\"ts\":\"2026-12-01\",\"who\":\"bob\"}");
    bson_t *doc = bson_new();
    append_id(doc, SOURCE, s.seq);
    BSON_APPEND_DATE_TIME(doc, "when", s.ts_ns / 1000000);
    bson_concat(doc, event);
    append_meta(doc, &s, META_ALL);
    bson_t out;
    bson_init(&out);
    stele_record_t rec;
    assert_int_equal(remote_doc_to_record(doc, SOURCE, "when", WHERE, &out, &rec, NULL), 0);
    assert_int_equal(rec.bson_len, event->len);
    assert_memory_equal(rec.bson, bson_get_data(event), event->len);
    /* Read with the default time field, "when" is a field of the event. */
    assert_int_equal(remote_doc_to_record(doc, SOURCE, NULL, WHERE, &out, &rec, NULL), 0);
    assert_true(rec.bson_len > event->len);
    bson_destroy(&out);
    bson_destroy(doc);
    bson_destroy(event);
}
static void
test_the_event_is_replaced_not_appended_on_the_next_document(void **state)
{
    (void)state;
    shipped_t s;
    shipped_init(&s, 1);
    bson_t *big = json_doc("{\"a\":1,\"b\":2,\"c\":3}");
    bson_t *small = json_doc("{\"z\":0}");
    bson_t *doc1 = shipped_doc(&s, big, META_ALL);
    s.seq = 2;
    bson_t *doc2 = shipped_doc(&s, small, META_ALL);
    bson_t out;
    bson_init(&out);
    stele_record_t rec;
    assert_int_equal(remote_doc_to_record(doc1, SOURCE, NULL, WHERE, &out, &rec, NULL), 0);
    assert_int_equal(remote_doc_to_record(doc2, SOURCE, NULL, WHERE, &out, &rec, NULL), 0);
    assert_int_equal(rec.seq, 2);
    assert_int_equal(rec.bson_len, small->len);
    assert_memory_equal(rec.bson, bson_get_data(small), small->len);
    bson_destroy(&out);
    bson_destroy(doc1);
    bson_destroy(doc2);
    bson_destroy(big);
    bson_destroy(small);
}

static void
test_without_ts_ns_the_bson_date_gives_the_time_in_ms(void **state)
{
    (void)state;
    shipped_t s;
    shipped_init(&s, 5);
    bson_t *event = json_doc("{\"a\":1}");
    bson_t *doc = shipped_doc(&s, event, META_NO_TS_NS);
    bson_t out;
    bson_init(&out);
    stele_record_t rec;
    assert_int_equal(remote_doc_to_record(doc, SOURCE, NULL, WHERE, &out, &rec, NULL), 0);
    assert_true(rec.ts_ns == (s.ts_ns / 1000000) * 1000000);
    bson_destroy(&out);
    bson_destroy(doc);
    bson_destroy(event);
}

static void
test_a_document_without_the_metadata_field_is_a_clear_error(void **state)
{
    (void)state;
    bson_t *doc = bson_new();
    append_id(doc, SOURCE, 9);
    BSON_APPEND_INT32(doc, "a", 1);
    assert_rejected(doc, "seq 9");
    assert_rejected(doc, "has no " STELE_META_FIELD " metadata");
    bson_destroy(doc);
}

static void
test_metadata_that_is_not_a_document_is_a_clear_error(void **state)
{
    (void)state;
    bson_t *doc = bson_new();
    append_id(doc, SOURCE, 9);
    BSON_APPEND_INT32(doc, "a", 1);
    BSON_APPEND_UTF8(doc, STELE_META_FIELD, "not a document");
    assert_rejected(doc, "has no " STELE_META_FIELD " metadata");
    bson_destroy(doc);
}

static void
test_metadata_without_any_timestamp_is_a_clear_error(void **state)
{
    (void)state;
    shipped_t s;
    shipped_init(&s, 3);
    bson_t *event = json_doc("{\"a\":1}");
    bson_t *doc = shipped_doc(&s, event, META_NO_TS | META_NO_TS_NS);
    assert_rejected(doc, "has no timestamp");
    bson_destroy(doc);
    bson_destroy(event);
}

static void
test_a_hash_of_the_wrong_length_is_a_clear_error(void **state)
{
    (void)state;
    shipped_t s;
    shipped_init(&s, 3);
    bson_t *event = json_doc("{\"a\":1}");
    bson_t *doc = shipped_doc(&s, event, META_SHORT_HASH);
    assert_rejected(doc, "32-byte");
    bson_destroy(doc);
    bson_destroy(event);
}

static void
test_a_document_without_an_integer_seq_is_a_clear_error(void **state)
{
    (void)state;
    static const char *const docs[] = {
        "{\"a\":1}",
        "{\"_id\":\"plain\",\"a\":1}",
        "{\"_id\":{\"src\":\"web-1\"},\"a\":1}",
        "{\"_id\":{\"src\":\"web-1\",\"seq\":\"12\"},\"a\":1}",
        "{\"_id\":{\"src\":\"web-1\",\"seq\":0},\"a\":1}",
        "{\"_id\":{\"src\":\"web-1\",\"seq\":-4},\"a\":1}",
        "{\"_id\":{\"src\":\"web-1\",\"seq\":1.5},\"a\":1}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        bson_t *doc = json_doc(docs[i]);
        assert_rejected(doc, "has no integer _id.seq");
        bson_destroy(doc);
    }
}

static void
test_a_document_of_another_source_is_refused(void **state)
{
    (void)state;
    shipped_t s;
    shipped_init(&s, 8);
    bson_t *doc = bson_new();
    append_id(doc, "web-2", s.seq);
    BSON_APPEND_INT32(doc, "a", 1);
    append_meta(doc, &s, META_ALL);
    assert_rejected(doc, "_id.src");
    bson_destroy(doc);
}

static void
test_a_document_with_no_event_fields_is_refused(void **state)
{
    (void)state;
    shipped_t s;
    shipped_init(&s, 8);
    bson_t *doc = bson_new();
    append_id(doc, SOURCE, s.seq);
    append_meta(doc, &s, META_ALL);
    assert_rejected(doc, "has no event fields");
    bson_destroy(doc);
}

static void
test_open_refuses_a_missing_or_overlong_source_before_connecting(void **state)
{
    (void)state;
    stele_sink_options_t sink;
    stele_sink_options_init(&sink);
    sink.uri = "mongodb://127.0.0.1:1/";
    stele_remote_query_t query = {0};
    stele_remote_reader_t *r = (stele_remote_reader_t *)&query; /* must be reset to NULL */
    stele_error_t err = {0};
    assert_int_equal(stele_remote_reader_open(&sink, &query, &r, &err), STELE_EINVAL);
    assert_null(r);
    assert_non_null(strstr(err.message, "source"));
    query.source = "a-source-name-that-is-longer-than-sixty-three-bytes-which-is-the-limit";
    assert_int_equal(stele_remote_reader_open(&sink, &query, &r, &err), STELE_EINVAL);
    assert_int_equal(stele_remote_reader_open(NULL, &query, &r, NULL), STELE_EINVAL);
}

static void
test_open_refuses_a_bad_uri_or_name_without_quoting_the_password(void **state)
{
    (void)state;
    static const char *const uris[] = {
        "mongodb://auditor:s3cr3t-pw@127.0.0.1:1/?replicaSet=",
        "mongodb://auditor:s3cr3t-pw@",
        "not a uri s3cr3t-pw",
    };
    stele_remote_query_t query = {.source = SOURCE};
    for (size_t i = 0; i < sizeof uris / sizeof uris[0]; i++) {
        stele_sink_options_t sink;
        stele_sink_options_init(&sink);
        sink.uri = uris[i];
        stele_remote_reader_t *r = NULL;
        stele_error_t err = {0};
        assert_int_equal(stele_remote_reader_open(&sink, &query, &r, &err), STELE_ECONFIG);
        assert_null(r);
        assert_null(strstr(err.message, "s3cr3t"));
        assert_null(strstr(err.hint, "s3cr3t"));
    }
    static const char *const bad_dbs[] = {"a.b", "a b", "a$b", "a/b"};
    for (size_t i = 0; i < sizeof bad_dbs / sizeof bad_dbs[0]; i++) {
        stele_sink_options_t sink;
        stele_sink_options_init(&sink);
        sink.uri = "mongodb://auditor:s3cr3t-pw@127.0.0.1:1/";
        sink.database = bad_dbs[i];
        stele_remote_reader_t *r = NULL;
        stele_error_t err = {0};
        assert_int_equal(stele_remote_reader_open(&sink, &query, &r, &err), STELE_ECONFIG);
        assert_non_null(strstr(err.message, "database or collection name"));
        assert_null(strstr(err.message, "s3cr3t"));
    }
}

/* A failed command's message names the collection, and every occurrence of the password in
 * it is masked with "***": a password of asterisks must not mask its own mask for ever, and a
 * one-byte password that the masks push to the end of a full message must not underflow the
 * copy that makes room. Port 1 refuses at once. */
static void
test_a_server_error_masks_any_password_and_ends(void **state)
{
    (void)state;
    char long_coll[121];
    memset(long_coll, 'q', sizeof long_coll - 1);
    long_coll[sizeof long_coll - 1] = '\0';
    static const char *const uris[] = {
        "mongodb://auditor:*@127.0.0.1:1/?serverSelectionTimeoutMS=100",
        "mongodb://auditor:**@127.0.0.1:1/?serverSelectionTimeoutMS=100",
        "mongodb://auditor:q@127.0.0.1:1/?serverSelectionTimeoutMS=100",
    };
    const char *colls[] = {"***", "a**b", long_coll};
    stele_remote_query_t query = {.source = SOURCE};
    for (size_t i = 0; i < sizeof uris / sizeof uris[0]; i++) {
        stele_sink_options_t sink;
        stele_sink_options_init(&sink);
        sink.uri = uris[i];
        sink.collection = colls[i];
        stele_remote_reader_t *r = NULL;
        stele_error_t err = {0};
        assert_int_equal(stele_remote_reader_open(&sink, &query, &r, &err), STELE_EREMOTE);
        assert_null(r);
        assert_true(strlen(err.message) < sizeof err.message);
        assert_non_null(strstr(err.message, "ping on 127.0.0.1:1/"));
    }
    stele_sink_options_t sink;
    stele_sink_options_init(&sink);
    sink.uri = uris[2];
    sink.collection = long_coll;
    stele_error_t err = {0};
    stele_remote_reader_t *r = NULL;
    assert_int_equal(stele_remote_reader_open(&sink, &query, &r, &err), STELE_EREMOTE);
    assert_null(strchr(err.message, 'q'));
}

static void
test_calls_on_a_null_reader_are_refused_and_close_is_a_no_op(void **state)
{
    (void)state;
    stele_record_t rec;
    uint64_t seq = 0;
    assert_int_equal(stele_remote_reader_next(NULL, &rec, 0, NULL), STELE_EINVAL);
    assert_int_equal(stele_remote_reader_last_seq(NULL, &seq, NULL), STELE_EINVAL);
    assert_int_equal(stele_remote_reader_seek_seq(NULL, 1, NULL), STELE_EINVAL);
    stele_remote_reader_close(NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_shipped_document_gives_back_the_record_and_the_event_bytes),
        cmocka_unit_test(test_the_sinks_time_field_is_left_out_of_the_event),
        cmocka_unit_test(test_the_event_is_replaced_not_appended_on_the_next_document),
        cmocka_unit_test(test_without_ts_ns_the_bson_date_gives_the_time_in_ms),
        cmocka_unit_test(test_a_document_without_the_metadata_field_is_a_clear_error),
        cmocka_unit_test(test_metadata_that_is_not_a_document_is_a_clear_error),
        cmocka_unit_test(test_metadata_without_any_timestamp_is_a_clear_error),
        cmocka_unit_test(test_a_hash_of_the_wrong_length_is_a_clear_error),
        cmocka_unit_test(test_a_document_without_an_integer_seq_is_a_clear_error),
        cmocka_unit_test(test_a_document_of_another_source_is_refused),
        cmocka_unit_test(test_a_document_with_no_event_fields_is_refused),
        cmocka_unit_test(test_open_refuses_a_missing_or_overlong_source_before_connecting),
        cmocka_unit_test(test_open_refuses_a_bad_uri_or_name_without_quoting_the_password),
        cmocka_unit_test(test_a_server_error_masks_any_password_and_ends),
        cmocka_unit_test(test_calls_on_a_null_reader_are_refused_and_close_is_a_no_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
