/*
 * test_origin.c: who appended a record (stele_origin_t), end to end in one process: a library
 * writer records itself (kind process, its uid, gid and pid), the engine-internal append
 * records the origin it is given (what `stele serve` does with a peer's SO_PEERCRED), and
 * nothing an event says ("uid", "origin", ...) changes either; readers return it, the tail
 * line shows it, the shipped document carries it as _stele.origin and the remote reader reads
 * it back; a malformed _stele.origin is refused, never guessed. The server's side (two users
 * through the socket, MongoDB receiving their uids) is test_serve_origin.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <bson/bson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index_fixture.h"
#include "origin.h"
#include "remote_reader.h"
#include "ship_mongo.h"
#include "stele.h"
#include "stele_internal.h"
#include "validate.h"

#define SOURCE "origin-test"
/* An event that claims an author of its own: data, never the record's origin. */
#define CLAIMING_EVENT                                                                             \
    "{\"what\":\"login\",\"uid\":0,\"origin\":{\"kind\":\"peer\",\"uid\":0,\"gid\":0,"             \
    "\"pid\":1}}"

static const journal_origin_t PEER = {.uid = 1001, .gid = 1002, .pid = 4242, .kind = 2};

typedef struct fixture {
    char dir[256];
} fixture_t;

static int
setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    fx_tmpdir(f->dir, sizeof f->dir, "origin");
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture_t *f = *state;
    fx_rmtree(f->dir);
    free(f);
    return 0;
}

static stele_t *
open_db(const char *dir)
{
    stele_options_t o;
    stele_options_init(&o);
    o.source = SOURCE;
    stele_t *db = NULL;
    stele_error_t err;
    if (stele_open(dir, &o, &db, &err) != 0)
        fail_msg("stele_open: %s", err.message);
    return db;
}

static void
close_db(stele_t *db)
{
    stele_error_t err;
    if (stele_close(db, &err) != 0)
        fail_msg("stele_close: %s", err.message);
}

/* Reads records 1..n of the journal into out, with copies of their events in events (free
 * with bson_destroy; out[i].bson is cleared). */
static void
read_all(const char *dir, stele_record_t *out, bson_t *events, size_t n)
{
    stele_reader_t *r = NULL;
    stele_error_t err;
    assert_int_equal(stele_reader_open(dir, &r, &err), 0);
    for (size_t i = 0; i < n; i++) {
        if (stele_reader_next(r, &out[i], 0, &err) != 0)
            fail_msg("record %zu: %s", i + 1, err.message);
        bson_t ev;
        assert_true(bson_init_static(&ev, out[i].bson, out[i].bson_len));
        bson_copy_to(&ev, &events[i]);
        out[i].bson = NULL;
    }
    stele_reader_close(r);
}

static void
assert_origin(const stele_origin_t *o, stele_origin_kind_t kind, uint32_t uid, uint32_t gid,
              uint32_t pid)
{
    assert_int_equal(o->kind, kind);
    assert_int_equal(o->uid, uid);
    assert_int_equal(o->gid, gid);
    assert_int_equal(o->pid, pid);
}

/* The event still says what it said: its claim is kept as data. */
static void
assert_event_keeps_its_claim(const bson_t *event)
{
    bson_iter_t it;
    assert_true(bson_iter_init(&it, event));
    assert_true(bson_iter_find_descendant(&it, "origin.uid", &it));
    assert_int_equal(bson_iter_as_int64(&it), 0);
}

static void
test_library_writer_records_itself_and_an_event_claim_changes_nothing(void **state)
{
    fixture_t *f = *state;
    stele_t *db = open_db(f->dir);
    stele_error_t err;
    uint64_t seq = 0;
    assert_int_equal(stele_append_json(db, CLAIMING_EVENT, strlen(CLAIMING_EVENT),
                                       STELE_WAIT_WRITTEN, &seq, &err),
                     0);
    bson_t *doc = BCON_NEW("what", "bson", "uid", BCON_INT32(0));
    assert_int_equal(
        stele_append_bson(db, bson_get_data(doc), doc->len, STELE_WAIT_WRITTEN, &seq, &err), 0);
    bson_destroy(doc);
    close_db(db);

    stele_record_t recs[2];
    bson_t events[2];
    read_all(f->dir, recs, events, 2);
    assert_event_keeps_its_claim(&events[0]);
    for (size_t i = 0; i < 2; i++) {
        assert_origin(&recs[i].origin, STELE_ORIGIN_PROCESS, (uint32_t)getuid(), (uint32_t)getgid(),
                      (uint32_t)getpid());
        bson_destroy(&events[i]);
    }
}

static void
test_internal_append_records_the_given_peer_whatever_the_event_claims(void **state)
{
    fixture_t *f = *state;
    stele_t *db = open_db(f->dir);
    stele_error_t err;
    uint64_t seq = 0;
    assert_int_equal(stele_append_json_from(db, &PEER, CLAIMING_EVENT, strlen(CLAIMING_EVENT),
                                            STELE_WAIT_WRITTEN, &seq, &err),
                     0);
    bson_t *doc = BCON_NEW("what", "bson");
    assert_int_equal(stele_append_bson_from(db, &PEER, bson_get_data(doc), doc->len,
                                            STELE_WAIT_WRITTEN, &seq, &err),
                     0);
    bson_destroy(doc);
    /* NULL: this process, as the public calls */
    assert_int_equal(
        stele_append_json_from(db, NULL, "{\"a\":1}", 7, STELE_WAIT_WRITTEN, &seq, &err), 0);
    close_db(db);

    stele_record_t recs[3];
    bson_t events[3];
    read_all(f->dir, recs, events, 3);
    assert_origin(&recs[0].origin, STELE_ORIGIN_PEER, 1001, 1002, 4242);
    assert_origin(&recs[1].origin, STELE_ORIGIN_PEER, 1001, 1002, 4242);
    assert_origin(&recs[2].origin, STELE_ORIGIN_PROCESS, (uint32_t)getuid(), (uint32_t)getgid(),
                  (uint32_t)getpid());
    assert_event_keeps_its_claim(&events[0]);
    for (size_t i = 0; i < 3; i++)
        bson_destroy(&events[i]);

    /* the origin is in the chain: the journal verifies as written */
    stele_verify_report_t report;
    assert_int_equal(stele_verify(f->dir, 0, 0, &report, &err), 0);
    assert_int_equal(report.records_checked, 3);
}

static void
test_tail_line_shows_the_origin_beside_seq_ts_src(void **state)
{
    (void)state;
    bson_t *ev = BCON_NEW("uid", BCON_INT32(0));
    stele_record_t rec = {
        .seq = 7,
        .ts_ns = 0,
        .bson = bson_get_data(ev),
        .bson_len = ev->len,
        .origin = {.uid = 1001, .gid = 1002, .pid = 4242, .kind = STELE_ORIGIN_PEER}};
    char *json = NULL;
    stele_error_t err;
    assert_int_equal(stele_record_to_json(&rec, "web-1", &json, NULL, &err), 0);
    assert_string_equal(json, "{\"seq\":7,\"ts\":\"1970-01-01T00:00:00.000000Z\",\"src\":\"web-1\","
                              "\"origin\":{\"kind\":\"peer\",\"uid\":1001,\"gid\":1002,"
                              "\"pid\":4242},\"event\":{\"uid\":0}}");
    stele_json_free(json);
    rec.origin = (stele_origin_t){.uid = 0, .gid = 0, .pid = 1, .kind = STELE_ORIGIN_PROCESS};
    assert_int_equal(stele_record_to_json(&rec, "web-1", &json, NULL, &err), 0);
    assert_non_null(
        strstr(json, ",\"origin\":{\"kind\":\"process\",\"uid\":0,\"gid\":0,\"pid\":1},"));
    stele_json_free(json);
    /* unknown (a version 1 journal): no origin object at all */
    rec.origin = (stele_origin_t){0};
    assert_int_equal(stele_record_to_json(&rec, "web-1", &json, NULL, &err), 0);
    assert_null(strstr(json, "origin"));
    stele_json_free(json);
    bson_destroy(ev);
    assert_string_equal(stele_origin_kind_name(STELE_ORIGIN_UNKNOWN), "unknown");
    assert_string_equal(stele_origin_kind_name(STELE_ORIGIN_PROCESS), "process");
    assert_string_equal(stele_origin_kind_name(STELE_ORIGIN_PEER), "peer");
    assert_null(stele_origin_kind_name((stele_origin_kind_t)3));
}

/* The shipped document of a record with `origin`, built as the shipper builds it. */
static bson_t *
shipped_doc(const journal_origin_t *origin, const bson_t *event)
{
    journal_record_t rec = {.seq = 9, .ts_ns = INT64_C(1764535490123456789)};
    rec.payload = bson_get_data(event);
    rec.payload_len = event->len;
    memset(rec.hash, 0xab, sizeof rec.hash);
    memset(rec.prev_hash, 0xcd, sizeof rec.prev_hash);
    if (origin)
        rec.origin = *origin;
    ship_doc_shape_t shape = {.source = SOURCE, .time_field = STELE_TIME_FIELD_DEFAULT};
    ship_doc_t d;
    ship_doc_fill(&d, &shape, &rec);
    assert_false(d.is_unbuildable);
    return d.doc;
}

static void
test_shipped_document_carries_the_origin_and_reads_back(void **state)
{
    (void)state;
    bson_t *ev = BCON_NEW("what", "login", "origin", "{", "uid", BCON_INT32(0), "}");
    bson_t *doc = shipped_doc(&PEER, ev);
    bson_iter_t it;
    assert_true(bson_iter_init(&it, doc));
    assert_true(bson_iter_find_descendant(&it, STELE_META_FIELD ".origin.kind", &it));
    assert_string_equal(bson_iter_utf8(&it, NULL), "peer");
    assert_true(bson_iter_init(&it, doc));
    assert_true(bson_iter_find_descendant(&it, STELE_META_FIELD ".origin.uid", &it));
    assert_true(BSON_ITER_HOLDS_INT64(&it));
    assert_int_equal(bson_iter_int64(&it), 1001);
    /* the event's own "origin" stays an event field, at the top level */
    assert_true(bson_iter_init(&it, doc));
    assert_true(bson_iter_find_descendant(&it, "origin.uid", &it));
    assert_int_equal(bson_iter_as_int64(&it), 0);

    bson_t event = BSON_INITIALIZER;
    stele_record_t rec;
    stele_error_t err;
    assert_int_equal(remote_doc_to_record(doc, SOURCE, NULL, "test", &event, &rec, &err), 0);
    assert_origin(&rec.origin, STELE_ORIGIN_PEER, 1001, 1002, 4242);
    assert_event_keeps_its_claim(&event);
    bson_destroy(&event);
    bson_destroy(doc);

    /* a record without an origin ships none and reads back unknown */
    doc = shipped_doc(NULL, ev);
    assert_true(bson_iter_init(&it, doc));
    assert_false(bson_iter_find_descendant(&it, STELE_META_FIELD ".origin", &it));
    bson_init(&event);
    assert_int_equal(remote_doc_to_record(doc, SOURCE, NULL, "test", &event, &rec, &err), 0);
    assert_origin(&rec.origin, STELE_ORIGIN_UNKNOWN, 0, 0, 0);
    bson_destroy(&event);
    bson_destroy(doc);
    bson_destroy(ev);
}

/* A shipped document whose _stele.origin is replaced by `origin` (a BSON value under key
 * "origin" of the given document). */
static bson_t *
doc_with_origin(const bson_t *origin_holder)
{
    bson_t *ev = BCON_NEW("what", "x");
    bson_t *good = shipped_doc(&PEER, ev);
    bson_destroy(ev);
    bson_t *doc = bson_new();
    bson_iter_t it, meta_it, sub;
    assert_true(bson_iter_init(&it, good));
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), STELE_META_FIELD) != 0) {
            bson_append_iter(doc, NULL, 0, &it);
            continue;
        }
        bson_t meta;
        BSON_APPEND_DOCUMENT_BEGIN(doc, STELE_META_FIELD, &meta);
        assert_true(bson_iter_recurse(&it, &meta_it));
        while (bson_iter_next(&meta_it))
            if (strcmp(bson_iter_key(&meta_it), "origin") != 0)
                bson_append_iter(&meta, NULL, 0, &meta_it);
        assert_true(bson_iter_init_find(&sub, origin_holder, "origin"));
        bson_append_iter(&meta, NULL, 0, &sub);
        bson_append_document_end(doc, &meta);
    }
    bson_destroy(good);
    return doc;
}

static void
test_malformed_shipped_origin_is_refused(void **state)
{
    (void)state;
    bson_t *bad[] = {
        BCON_NEW("origin", BCON_UTF8("peer")),
        BCON_NEW("origin", "{", "kind", "root", "uid", BCON_INT64(0), "gid", BCON_INT64(0), "pid",
                 BCON_INT64(1), "}"),
        BCON_NEW("origin", "{", "kind", "peer", "uid", BCON_INT64(-1), "gid", BCON_INT64(0), "pid",
                 BCON_INT64(1), "}"),
        BCON_NEW("origin", "{", "kind", "peer", "uid", BCON_INT64(INT64_C(4294967296)), "gid",
                 BCON_INT64(0), "pid", BCON_INT64(1), "}"),
        BCON_NEW("origin", "{", "kind", "peer", "uid", BCON_UTF8("0"), "gid", BCON_INT64(0), "pid",
                 BCON_INT64(1), "}"),
        BCON_NEW("origin", "{", "kind", "peer", "uid", BCON_INT64(0), "gid", BCON_INT64(0), "}"),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bson_t *doc = doc_with_origin(bad[i]);
        stele_origin_t o;
        assert_int_equal(ship_doc_origin(doc, &o), -1);
        assert_int_equal(o.kind, STELE_ORIGIN_UNKNOWN);
        bson_t event = BSON_INITIALIZER;
        stele_record_t rec;
        stele_error_t err;
        assert_int_equal(remote_doc_to_record(doc, SOURCE, NULL, "test", &event, &rec, &err),
                         STELE_EINTEGRITY);
        assert_non_null(strstr(err.message, STELE_META_FIELD ".origin"));
        bson_destroy(&event);
        bson_destroy(doc);
        bson_destroy(bad[i]);
    }
    /* the widest ids are fine */
    bson_t *widest = BCON_NEW("origin", "{", "kind", "peer", "uid", BCON_INT64(UINT32_MAX), "gid",
                              BCON_INT32(0), "pid", BCON_INT64(UINT32_MAX), "}");
    bson_t *doc = doc_with_origin(widest);
    stele_origin_t o;
    assert_int_equal(ship_doc_origin(doc, &o), 0);
    assert_origin(&o, STELE_ORIGIN_PEER, UINT32_MAX, 0, UINT32_MAX);
    bson_destroy(doc);
    bson_destroy(widest);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_library_writer_records_itself_and_an_event_claim_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_internal_append_records_the_given_peer_whatever_the_event_claims, setup, teardown),
        cmocka_unit_test(test_tail_line_shows_the_origin_beside_seq_ts_src),
        cmocka_unit_test(test_shipped_document_carries_the_origin_and_reads_back),
        cmocka_unit_test(test_malformed_shipped_origin_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
