/*
 * test_ship_collection.c: a sink's collection made for audit queries, on the test server
 * (FerretDB, or STELE_TEST_MONGO_URI): the top-level time field, the indexes a sink creates
 * (stele_src_seq, stele_time and the declared ones), the auditor's queries of docs/mongodb.md
 * with their results and their plans, the _id field-order trap, a TTL and a time-series sink.
 *
 * What depends on the server: FerretDB's SQLite backend keeps the indexes but plans every
 * query but an _id equality as a scan, and implements neither TTL indexes nor time-series
 * collections. So against FerretDB the tests check the indexes, the results, that explain
 * answers, that a refused TTL index leaves shipping going and that a refused time-series
 * collection stops the sink with a clear error; against a real MongoDB (STELE_TEST_MONGO_URI)
 * they also check that each query's winning plan is an IXSCAN of its declared index, the TTL
 * option of stele_time, and exactly-once delivery into a time-series collection across a lost
 * checkpoint.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <mongoc/mongoc.h>

#include "mongo_server.h"
#include "ship.h"
#include "ship_fixture.h"

#define WAIT_MS 120000
#define N_EVENTS 200
/* The declared indexes, as a sink's `index` lines would give them. */
#define AUDIT_INDEXES "actor:1,_ts:-1;object:1,_ts:-1;outcome:1,_ts:-1"

typedef struct coll_test {
    mongo_server_t server;
    int is_ferretdb;
    mongoc_client_t *client;
} coll_test_t;

static uint64_t
get_shipped(void *ctx)
{
    return shipper_shipped_seq(ctx);
}

/* 1 when the server answers buildInfo as FerretDB does (with a ferretdbVersion). */
static int
server_is_ferretdb(mongoc_client_t *client)
{
    bson_t *cmd = BCON_NEW("buildInfo", BCON_INT32(1));
    bson_t reply;
    bson_error_t berr;
    int is_ferret = 0;
    if (mongoc_client_command_simple(client, "admin", cmd, NULL, &reply, &berr)) {
        bson_iter_t it;
        is_ferret = bson_iter_init_find(&it, &reply, "ferretdbVersion");
    }
    bson_destroy(&reply);
    bson_destroy(cmd);
    return is_ferret;
}

static int
group_setup(void **state)
{
    static coll_test_t t;
    if (mongo_server_start(&t.server) != 0)
        return -1;
    t.client = mongoc_client_new(t.server.uri);
    if (!t.client)
        return -1;
    mongoc_client_set_error_api(t.client, MONGOC_ERROR_API_VERSION_2);
    t.is_ferretdb = server_is_ferretdb(t.client);
    printf("# server: %s\n", t.is_ferretdb ? "FerretDB" : "MongoDB");
    *state = &t;
    return 0;
}

static int
group_teardown(void **state)
{
    coll_test_t *t = *state;
    mongoc_client_destroy(t->client);
    mongo_server_destroy(&t->server);
    return 0;
}

static shipper_t *
start_shipper(ship_journal_t *sj, const stele_sink_options_t *so)
{
    shipper_config_t cfg = {
        .sink = so, .journal_dir = sj->dir, .source = sj->source, .index = sj->index};
    shipper_t *s = NULL;
    stele_error_t err = {0};
    int rc = shipper_start(&cfg, &s, &err);
    if (rc != 0)
        fail_msg("shipper_start: %s", err.message);
    return s;
}

static mongoc_collection_t *
collection_of(coll_test_t *t, const stele_sink_options_t *so)
{
    return mongoc_client_get_collection(t->client, so->database, so->collection);
}

/* Event i of the audit trail: five actors, seven objects, every tenth access denied. */
static void
append_audit_events(ship_journal_t *sj, int n)
{
    for (int i = 0; i < n; i++) {
        char actor[16], object[16];
        snprintf(actor, sizeof actor, "user-%d", i % 5);
        snprintf(object, sizeof object, "doc-%d", i % 7);
        bson_t *ev = BCON_NEW("actor", BCON_UTF8(actor), "action",
                              BCON_UTF8(i % 2 ? "read" : "write"), "object", BCON_UTF8(object),
                              "outcome", BCON_UTF8(i % 10 == 9 ? "denied" : "ok"), "ts",
                              BCON_UTF8("the event's own ts"));
        assert_int_equal(ship_journal_append_bson(sj, bson_get_data(ev), ev->len), 0);
        bson_destroy(ev);
    }
}

/* The key document of index `name`, copied into *key; 0 when found. Also its TTL. */
static int
find_index(mongoc_collection_t *coll, const char *name, bson_t *key, int64_t *ttl_s)
{
    mongoc_cursor_t *cur = mongoc_collection_find_indexes_with_opts(coll, NULL);
    const bson_t *doc;
    int rc = -1;
    *ttl_s = -1;
    while (rc != 0 && mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it;
        if (!bson_iter_init_find(&it, doc, "name") || strcmp(bson_iter_utf8(&it, NULL), name))
            continue;
        uint32_t len;
        const uint8_t *data;
        if (bson_iter_init_find(&it, doc, "key") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_iter_document(&it, &len, &data);
            bson_t view;
            bson_init_static(&view, data, len);
            bson_copy_to(&view, key);
            rc = 0;
        }
        if (bson_iter_init_find(&it, doc, "expireAfterSeconds") && BSON_ITER_HOLDS_NUMBER(&it))
            *ttl_s = bson_iter_as_int64(&it);
    }
    mongoc_cursor_destroy(cur);
    return rc;
}

static void
assert_index(mongoc_collection_t *coll, const char *name, const char *want_key_json)
{
    bson_t key;
    int64_t ttl;
    if (find_index(coll, name, &key, &ttl) != 0)
        fail_msg("index %s is missing", name);
    char *got = bson_as_relaxed_extended_json(&key, NULL);
    bson_error_t berr;
    bson_t *want = bson_new_from_json((const uint8_t *)want_key_json, -1, &berr);
    char *want_text = bson_as_relaxed_extended_json(want, NULL);
    if (strcmp(got, want_text) != 0)
        fail_msg("index %s has key %s, expected %s", name, got, want_text);
    bson_free(got);
    bson_free(want_text);
    bson_destroy(want);
    bson_destroy(&key);
}

/* Finds the first stage in a plan tree (inputStage / inputStages) named `stage`. */
static int
plan_find_stage(const bson_t *plan, const char *stage, char *index_name, size_t cap)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, plan, "stage") && BSON_ITER_HOLDS_UTF8(&it) &&
        strcmp(bson_iter_utf8(&it, NULL), stage) == 0) {
        if (index_name && bson_iter_init_find(&it, plan, "indexName") && BSON_ITER_HOLDS_UTF8(&it))
            snprintf(index_name, cap, "%s", bson_iter_utf8(&it, NULL));
        return 1;
    }
    if (!bson_iter_init(&it, plan))
        return 0;
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) && !BSON_ITER_HOLDS_ARRAY(&it))
            continue;
        uint32_t len;
        const uint8_t *data;
        if (BSON_ITER_HOLDS_DOCUMENT(&it))
            bson_iter_document(&it, &len, &data);
        else
            bson_iter_array(&it, &len, &data);
        bson_t child;
        if (bson_init_static(&child, data, len) && plan_find_stage(&child, stage, index_name, cap))
            return 1;
    }
    return 0;
}

/* Runs explain (queryPlanner) of a find; on MongoDB asserts its winning plan is an IXSCAN of
 * `index` and no COLLSCAN; on FerretDB that it answers with a query plan (a scan: its
 * SQLite backend uses no secondary index). */
static void
assert_plan(coll_test_t *t, const stele_sink_options_t *so, const bson_t *filter,
            const bson_t *sort, const char *index)
{
    bson_t *cmd =
        BCON_NEW("explain", "{", "find", BCON_UTF8(so->collection), "filter", BCON_DOCUMENT(filter),
                 "sort", BCON_DOCUMENT(sort), "}", "verbosity", BCON_UTF8("queryPlanner"));
    bson_t reply;
    bson_error_t berr;
    if (!mongoc_client_command_simple(t->client, so->database, cmd, NULL, &reply, &berr))
        fail_msg("explain: %s", berr.message);
    bson_iter_t it, planner;
    assert_true(bson_iter_init_find(&it, &reply, "queryPlanner"));
    char *text = bson_as_relaxed_extended_json(&reply, NULL);
    printf("# explain for index %s: %.300s\n", index, text);
    bson_free(text);
    if (!t->is_ferretdb) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_recurse(&it, &planner);
        assert_true(bson_iter_find(&planner, "winningPlan"));
        bson_iter_document(&planner, &len, &data);
        bson_t plan;
        bson_init_static(&plan, data, len);
        char used[256] = "";
        if (!plan_find_stage(&plan, "IXSCAN", used, sizeof used) || strcmp(used, index) != 0)
            fail_msg("winning plan does not scan index %s (it scans \"%s\")", index, used);
        assert_false(plan_find_stage(&plan, "COLLSCAN", NULL, 0));
    }
    bson_destroy(&reply);
    bson_destroy(cmd);
}

/* Runs a find and returns how many documents it gave; checks they come newest first. */
static int64_t
run_query(mongoc_collection_t *coll, const bson_t *filter, const bson_t *sort)
{
    bson_t *opts = BCON_NEW("sort", BCON_DOCUMENT(sort));
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *doc;
    int64_t n = 0, last_ms = INT64_MAX;
    while (mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it;
        assert_true(bson_iter_init_find(&it, doc, "_ts") && BSON_ITER_HOLDS_DATE_TIME(&it));
        assert_true(bson_iter_date_time(&it) <= last_ms);
        last_ms = bson_iter_date_time(&it);
        n++;
    }
    bson_error_t berr;
    if (mongoc_cursor_error(cur, &berr))
        fail_msg("find: %s", berr.message);
    mongoc_cursor_destroy(cur);
    bson_destroy(opts);
    return n;
}

static int64_t
count_matching(mongoc_collection_t *coll, const bson_t *filter)
{
    bson_error_t berr;
    int64_t n = mongoc_collection_count_documents(coll, filter, NULL, NULL, NULL, &berr);
    if (n < 0)
        fail_msg("count: %s", berr.message);
    return n;
}

/* The time field is a top-level BSON date equal to _stele.ts, beside the event's own ts. */
static void
assert_document_shape(mongoc_collection_t *coll, const char *source)
{
    bson_t *filter = BCON_NEW("_id.src", BCON_UTF8(source), "_id.seq", BCON_INT64(1));
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, NULL, NULL);
    const bson_t *doc;
    assert_true(mongoc_cursor_next(cur, &doc));
    bson_iter_t it, meta_ts;
    assert_true(bson_iter_init_find(&it, doc, "_ts") && BSON_ITER_HOLDS_DATE_TIME(&it));
    int64_t ts_ms = bson_iter_date_time(&it);
    assert_true(bson_iter_init(&meta_ts, doc) &&
                bson_iter_find_descendant(&meta_ts, "_stele.ts", &meta_ts));
    assert_true(bson_iter_date_time(&meta_ts) == ts_ms);
    assert_true(bson_iter_init_find(&it, doc, "ts") && BSON_ITER_HOLDS_UTF8(&it));
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
}

/* The queries of docs/mongodb.md "Queries an auditor runs", each with its results and the
 * index its plan uses. */
static void
assert_auditor_queries(coll_test_t *t, const stele_sink_options_t *so, int64_t since_ms)
{
    mongoc_collection_t *coll = collection_of(t, so);
    bson_t *newest_first = BCON_NEW("_ts", BCON_INT32(-1));
    /* 1. Everything one actor did in the last hour, newest first. */
    bson_t *by_actor =
        BCON_NEW("actor", BCON_UTF8("user-1"), "_ts", "{", "$gte", BCON_DATE_TIME(since_ms), "}");
    assert_int_equal(run_query(coll, by_actor, newest_first), N_EVENTS / 5);
    assert_plan(t, so, by_actor, newest_first, "actor_1__ts_-1");
    /* 2. Everything that touched one object. */
    bson_t *by_object = BCON_NEW("object", BCON_UTF8("doc-3"));
    int64_t want_object = 0;
    for (int i = 0; i < N_EVENTS; i++)
        want_object += i % 7 == 3;
    assert_int_equal(run_query(coll, by_object, newest_first), want_object);
    assert_plan(t, so, by_object, newest_first, "object_1__ts_-1");
    /* 3. The failures within a window. */
    bson_t *denied =
        BCON_NEW("outcome", BCON_UTF8("denied"), "_ts", "{", "$gte", BCON_DATE_TIME(since_ms),
                 "$lt", BCON_DATE_TIME(since_ms + 2 * 3600 * 1000), "}");
    assert_int_equal(run_query(coll, denied, newest_first), N_EVENTS / 10);
    assert_plan(t, so, denied, newest_first, "outcome_1__ts_-1");
    bson_destroy(denied);
    bson_destroy(by_object);
    bson_destroy(by_actor);
    bson_destroy(newest_first);
    mongoc_collection_destroy(coll);
}

/* An embedded _id matches only with its fields in stored order: {seq, src} finds nothing. */
static void
assert_id_field_order_trap(coll_test_t *t, const stele_sink_options_t *so, const char *source)
{
    mongoc_collection_t *coll = collection_of(t, so);
    bson_t *wrong = BCON_NEW("_id", "{", "seq", BCON_INT64(5), "src", BCON_UTF8(source), "}");
    bson_t *whole = BCON_NEW("_id", "{", "src", BCON_UTF8(source), "seq", BCON_INT64(5), "}");
    bson_t *dotted = BCON_NEW("_id.src", BCON_UTF8(source), "_id.seq", BCON_INT64(5));
    assert_int_equal(count_matching(coll, wrong), 0);
    assert_int_equal(count_matching(coll, whole), 1);
    assert_int_equal(count_matching(coll, dotted), 1);
    bson_destroy(dotted);
    bson_destroy(whole);
    bson_destroy(wrong);
    mongoc_collection_destroy(coll);
}

static void
test_audit_collection_has_the_time_field_and_the_declared_indexes(void **state)
{
    coll_test_t *t = *state;
    ship_journal_t sj;
    stele_sink_options_t so;
    assert_int_equal(ship_journal_create(&sj, "audit"), 0);
    ship_sink_options(&so, "main", t->server.uri, "audit");
    so.indexes = AUDIT_INDEXES;
    ship_drop_collection(&so);
    int64_t since_ms = (int64_t)time(NULL) * 1000 - 3600 * 1000;
    append_audit_events(&sj, N_EVENTS);
    shipper_t *s = start_shipper(&sj, &so);
    assert_int_equal(ship_wait_for(get_shipped, s, N_EVENTS, WAIT_MS), 0);
    shipper_stop(s, 1000);
    assert_int_equal(ship_check_exactly_once(&sj, &so, N_EVENTS), 0);

    mongoc_collection_t *coll = collection_of(t, &so);
    assert_index(coll, "stele_src_seq", "{\"_id.src\": 1, \"_id.seq\": 1}");
    assert_index(coll, "stele_time", "{\"_ts\": -1}");
    assert_index(coll, "actor_1__ts_-1", "{\"actor\": 1, \"_ts\": -1}");
    assert_index(coll, "object_1__ts_-1", "{\"object\": 1, \"_ts\": -1}");
    assert_index(coll, "outcome_1__ts_-1", "{\"outcome\": 1, \"_ts\": -1}");
    assert_document_shape(coll, "audit");
    mongoc_collection_destroy(coll);
    assert_auditor_queries(t, &so, since_ms);
    assert_id_field_order_trap(t, &so, "audit");
    ship_journal_destroy(&sj, 0);
}

/* A TTL goes on stele_time as expireAfterSeconds. FerretDB refuses the option: the refusal
 * is the sink's last error, and shipping goes on without that index. */
static void
test_ttl_is_set_on_the_time_index_or_its_refusal_leaves_shipping_going(void **state)
{
    coll_test_t *t = *state;
    ship_journal_t sj;
    stele_sink_options_t so;
    assert_int_equal(ship_journal_create(&sj, "ttl"), 0);
    ship_sink_options(&so, "main", t->server.uri, "ttl");
    so.expire_after_s = 90 * 24 * 3600;
    so.indexes = "actor:1,_ts:-1";
    ship_drop_collection(&so);
    append_audit_events(&sj, 20);
    shipper_t *s = start_shipper(&sj, &so);
    assert_int_equal(ship_wait_for(get_shipped, s, 20, WAIT_MS), 0);
    stele_sink_stats_t st;
    shipper_stats(s, 20, &st);
    shipper_stop(s, 1000);
    assert_int_equal(st.is_stopped, 0);
    assert_int_equal(ship_check_exactly_once(&sj, &so, 20), 0);
    mongoc_collection_t *coll = collection_of(t, &so);
    bson_t key;
    int64_t ttl_s = -1;
    int has_time_index = find_index(coll, "stele_time", &key, &ttl_s) == 0;
    if (has_time_index)
        bson_destroy(&key);
    printf("# stele_time: %s, ttl %" PRId64 "; last error: %s\n",
           has_time_index ? "created" : "refused", ttl_s, st.last_error);
    if (t->is_ferretdb) {
        assert_false(has_time_index);
        assert_non_null(strstr(st.last_error, "creation of index stele_time refused"));
    } else {
        assert_true(has_time_index);
        assert_int_equal(ttl_s, 90 * 24 * 3600);
    }
    assert_index(coll, "actor_1__ts_-1", "{\"actor\": 1, \"_ts\": -1}");
    mongoc_collection_destroy(coll);
    ship_journal_destroy(&sj, 0);
}

/* A time-series sink: where the server refuses the collection (FerretDB, MongoDB before 5.0)
 * the sink stops saying so, rather than ship into a plain collection; where it accepts it,
 * records arrive exactly once even when a lost checkpoint makes the shipper send stored
 * documents again (a time-series collection keeps no unique _id: they are looked up first). */
static void
test_timeseries_sink_ships_exactly_once_or_stops_where_unsupported(void **state)
{
    coll_test_t *t = *state;
    ship_journal_t sj;
    stele_sink_options_t so;
    assert_int_equal(ship_journal_create(&sj, "series"), 0);
    ship_sink_options(&so, "main", t->server.uri, "series");
    so.timeseries = 1;
    ship_drop_collection(&so);
    append_audit_events(&sj, 30);
    shipper_t *s = start_shipper(&sj, &so);
    stele_error_t err = {0};
    for (int waited = 0;
         waited < WAIT_MS && !shipper_stopped(s, &err) && shipper_shipped_seq(s) < 30; waited += 20)
        usleep(20 * 1000);
    if (shipper_stopped(s, &err)) {
        printf("# time-series refused: %s\n", err.message);
        assert_non_null(
            strstr(err.message, "time-series collection (MongoDB 5.0 or later) refused"));
        assert_int_equal(shipper_shipped_seq(s), 0);
        shipper_stop(s, 0);
        ship_journal_destroy(&sj, 0);
        return;
    }
    assert_false(t->is_ferretdb);
    assert_int_equal(shipper_shipped_seq(s), 30);
    shipper_stop(s, 1000);
    /* Lose the checkpoint: the shipper resumes from the remote's newest and sends again the
     * batch after a checkpoint put back to 10. */
    assert_int_equal(index_put_checkpoint(sj.index, "main", 10, NULL), 0);
    append_audit_events(&sj, 10);
    s = start_shipper(&sj, &so);
    assert_int_equal(ship_wait_for(get_shipped, s, 40, WAIT_MS), 0);
    shipper_stop(s, 1000);
    assert_int_equal(ship_check_exactly_once(&sj, &so, 40), 0);
    ship_journal_destroy(&sj, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_audit_collection_has_the_time_field_and_the_declared_indexes),
        cmocka_unit_test(test_ttl_is_set_on_the_time_index_or_its_refusal_leaves_shipping_going),
        cmocka_unit_test(test_timeseries_sink_ships_exactly_once_or_stops_where_unsupported),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
