/*
 * test_ship_mongo.c: shipping to the test server (FerretDB, or STELE_TEST_MONGO_URI):
 * exactly-once delivery, resume from the checkpoint and from the remote, the checkpoint an
 * idle sink saves, integrity stop, dead letters (and an index that cannot list one), the keys
 * the server refuses that append refuses too, fan-in, remote check and re-ship, credential
 * redaction.
 * Every test ends with the exactly-once check (ship_check_exactly_once) where it applies.
 * STELE_TEST_SHIP_RECORDS overrides the record count of the bulk test (default 20000; the
 * test_ship_100k ctest entry, in the default suite, runs it with 100000).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>
#include <mongoc/mongoc.h>

#include "mongo_server.h"
#include "ship.h"
#include "ship_fixture.h"
#include "test_util.h"

#define SHIP_TEST_WAIT_MS 120000

typedef struct ship_test {
    mongo_server_t server;
} ship_test_t;

static uint64_t
get_shipped(void *ctx)
{
    return shipper_shipped_seq(ctx);
}

static uint64_t
get_saved(void *ctx)
{
    return shipper_saved_seq(ctx);
}

static int
group_setup(void **state)
{
    static ship_test_t t;
    if (mongo_server_start(&t.server) != 0)
        return -1;
    *state = &t;
    return 0;
}

static int
group_teardown(void **state)
{
    ship_test_t *t = *state;
    mongo_server_destroy(&t->server);
    return 0;
}

/* A shipper of sj's journal that writes through index handle ix. */
static shipper_t *
start_shipper_on(ship_journal_t *sj, index_t *ix, const stele_sink_options_t *so)
{
    shipper_config_t cfg = {.sink = so, .journal_dir = sj->dir, .source = sj->source, .index = ix};
    shipper_t *s = NULL;
    stele_error_t err = {0};
    int rc = shipper_start(&cfg, &s, &err);
    if (rc != 0)
        fprintf(stderr, "shipper_start: %s\n", err.message);
    assert_int_equal(rc, 0);
    return s;
}

static shipper_t *
start_shipper(ship_journal_t *sj, const stele_sink_options_t *so)
{
    return start_shipper_on(sj, sj->index, so);
}

static uint64_t
records_from_env(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && v[0] ? strtoull(v, NULL, 10) : dflt;
}

/* A new journal whose source is `name`, and sink options ("main") for a collection of that
 * name emptied for the test. */
static void
fresh_journal_and_sink(ship_test_t *t, const char *name, ship_journal_t *sj,
                       stele_sink_options_t *so)
{
    assert_int_equal(ship_journal_create(sj, name), 0);
    ship_sink_options(so, "main", t->server.uri, name);
    ship_drop_collection(so);
}

static void
test_ship_delivers_every_record_exactly_once(void **state)
{
    ship_test_t *t = *state;
    uint64_t n = records_from_env("STELE_TEST_SHIP_RECORDS", 20000);
    ship_journal_t sj;
    stele_sink_options_t so;
    fresh_journal_and_sink(t, "bulk", &sj, &so);
    shipper_t *s = start_shipper(&sj, &so);
    int64_t start_ms = ship_fixture_now_ms();
    assert_int_equal(ship_journal_append(&sj, n, 500, 64), 0);
    assert_int_equal(ship_wait_for(get_shipped, s, n, SHIP_TEST_WAIT_MS), 0);
    printf("# shipped %llu records in %lld ms\n", (unsigned long long)n,
           (long long)(ship_fixture_now_ms() - start_ms));
    stele_sink_stats_t st;
    shipper_stats(s, n, &st);
    assert_int_equal(st.shipped_seq, n);
    assert_int_equal(st.lag_records, 0);
    assert_true(st.batches >= n / so.batch_docs);
    assert_int_equal(st.dead_letters, 0);
    assert_int_equal(st.is_stopped, 0);
    shipper_stop(s, 1000);
    uint64_t checkpoint = 0;
    assert_int_equal(index_get_checkpoint(sj.index, "main", &checkpoint, NULL), 0);
    assert_int_equal(checkpoint, n);
    assert_int_equal(ship_check_exactly_once(&sj, &so, n), 0);
    ship_journal_destroy(&sj, 0);
}

/* Events of about the largest size stele accepts (max_record_bytes' default, 1 MiB) ship
 * exactly once: each wrapped document stays far below MongoDB's 16 MiB, and batches of them
 * are split by the driver where one message would be too large. */
static void
test_ship_delivers_the_largest_records(void **state)
{
    ship_test_t *t = *state;
    const uint64_t n = 40;
    ship_journal_t sj;
    stele_sink_options_t so;
    fresh_journal_and_sink(t, "large", &sj, &so);
    shipper_t *s = start_shipper(&sj, &so);
    assert_int_equal(ship_journal_append(&sj, n, 4, (1u << 20) - 256), 0);
    assert_int_equal(ship_wait_for(get_shipped, s, n, SHIP_TEST_WAIT_MS), 0);
    stele_sink_stats_t st;
    shipper_stats(s, n, &st);
    assert_int_equal(st.dead_letters, 0);
    assert_int_equal(st.is_stopped, 0);
    shipper_stop(s, 1000);
    assert_int_equal(ship_check_exactly_once(&sj, &so, n), 0);
    ship_journal_destroy(&sj, 0);
}

static void
test_ship_resumes_from_checkpoint_after_restart(void **state)
{
    ship_test_t *t = *state;
    ship_journal_t sj;
    stele_sink_options_t so;
    fresh_journal_and_sink(t, "resume", &sj, &so);
    shipper_t *s = start_shipper(&sj, &so);
    assert_int_equal(ship_journal_append(&sj, 3000, 100, 16), 0);
    assert_int_equal(ship_wait_for(get_shipped, s, 3000, SHIP_TEST_WAIT_MS), 0);
    shipper_stop(s, 1000);
    assert_int_equal(ship_journal_append(&sj, 2000, 100, 16), 0); /* while no shipper runs */
    s = start_shipper(&sj, &so);
    assert_int_equal(ship_wait_for(get_shipped, s, 5000, SHIP_TEST_WAIT_MS), 0);
    stele_sink_stats_t st;
    shipper_stats(s, 5000, &st);
    assert_int_equal(st.retries, 0); /* nothing was re-sent: it resumed after 3000 */
    shipper_stop(s, 1000);
    assert_int_equal(ship_check_exactly_once(&sj, &so, 5000), 0);
    ship_journal_destroy(&sj, 0);
}

/* A sink's checkpoint is not written after every batch, but a sink that goes idle saves it
 * without waiting for its stop: a crash then re-sends nothing it shipped before it went idle.
 * So does a sink that resumed after the remote's newest document with nothing new to send. */
static void
test_ship_saves_its_checkpoint_when_idle_without_a_stop(void **state)
{
    ship_test_t *t = *state;
    ship_journal_t sj;
    stele_sink_options_t so;
    fresh_journal_and_sink(t, "idle_checkpoint", &sj, &so);
    shipper_t *s = start_shipper(&sj, &so);
    for (uint64_t n = 100; n <= 500; n += 100) {
        assert_int_equal(ship_journal_append(&sj, 100, 10, 16), 0);
        assert_int_equal(ship_wait_for(get_shipped, s, n, SHIP_TEST_WAIT_MS), 0);
        assert_true(shipper_saved_seq(s) <= shipper_shipped_seq(s));
    }
    assert_int_equal(ship_wait_for(get_saved, s, 500, SHIP_TEST_WAIT_MS), 0);
    uint64_t checkpoint = 0;
    assert_int_equal(index_get_checkpoint(sj.index, "main", &checkpoint, NULL), 0);
    assert_int_equal(checkpoint, 500);
    shipper_stop(s, 1000);

    assert_int_equal(index_put_checkpoint(sj.index, "main", 0, NULL), 0); /* index lost */
    s = start_shipper(&sj, &so);
    assert_int_equal(ship_wait_for(get_saved, s, 500, SHIP_TEST_WAIT_MS), 0);
    assert_int_equal(index_get_checkpoint(sj.index, "main", &checkpoint, NULL), 0);
    assert_int_equal(checkpoint, 500);
    shipper_stop(s, 1000);
    assert_int_equal(ship_check_exactly_once(&sj, &so, 500), 0);
    ship_journal_destroy(&sj, 0);
}

static void
test_ship_resumes_from_remote_when_checkpoint_is_lost(void **state)
{
    ship_test_t *t = *state;
    ship_journal_t sj;
    stele_sink_options_t so;
    fresh_journal_and_sink(t, "lostckpt", &sj, &so);
    shipper_t *s = start_shipper(&sj, &so);
    assert_int_equal(ship_journal_append(&sj, 2500, 250, 16), 0);
    assert_int_equal(ship_wait_for(get_shipped, s, 2500, SHIP_TEST_WAIT_MS), 0);
    shipper_stop(s, 1000);
    /* The index was lost: the checkpoint reads as 0, so the shipper asks MongoDB. */
    assert_int_equal(index_put_checkpoint(sj.index, "main", 0, NULL), 0);
    assert_int_equal(ship_journal_append(&sj, 500, 250, 16), 0);
    s = start_shipper(&sj, &so);
    assert_int_equal(ship_wait_for(get_shipped, s, 3000, SHIP_TEST_WAIT_MS), 0);
    stele_sink_stats_t st;
    shipper_stats(s, 3000, &st);
    assert_int_equal(st.batches, 1); /* only the 500 new records were sent, in one batch */
    shipper_stop(s, 1000);
    assert_int_equal(ship_check_exactly_once(&sj, &so, 3000), 0);
    ship_journal_destroy(&sj, 0);
}

static void
test_ship_treats_stored_duplicate_with_same_hash_as_shipped(void **state)
{
    ship_test_t *t = *state;
    ship_journal_t sj;
    stele_sink_options_t so;
    fresh_journal_and_sink(t, "dupsame", &sj, &so);
    assert_int_equal(ship_journal_append(&sj, 1000, 100, 16), 0);
    /* Records 1..400 and 601..700 are already stored but the checkpoint says 300 (as if an
     * earlier run died before saving its later checkpoints): re-sending them must neither
     * fail nor duplicate. */
    uint64_t inserted = 0;
    assert_int_equal(stele_reship(sj.dir, &so, 1, 400, &inserted, NULL), 0);
    assert_int_equal(inserted, 400);
    assert_int_equal(stele_reship(sj.dir, &so, 601, 700, &inserted, NULL), 0);
    assert_int_equal(index_put_checkpoint(sj.index, "main", 300, NULL), 0);
    shipper_t *s = start_shipper(&sj, &so);
    assert_int_equal(ship_wait_for(get_shipped, s, 1000, SHIP_TEST_WAIT_MS), 0);
    stele_sink_stats_t st;
    shipper_stats(s, 1000, &st);
    assert_int_equal(st.is_stopped, 0);
    shipper_stop(s, 1000);
    assert_int_equal(ship_check_exactly_once(&sj, &so, 1000), 0);
    ship_journal_destroy(&sj, 0);
}

static void
wait_stopped(shipper_t *s, uint64_t committed, const char *why)
{
    stele_sink_stats_t st;
    int64_t deadline = ship_fixture_now_ms() + SHIP_TEST_WAIT_MS;
    do {
        usleep(10 * 1000);
        shipper_stats(s, committed, &st);
    } while (!st.is_stopped && ship_fixture_now_ms() < deadline);
    assert_true(st.is_stopped);
    if (!strstr(st.last_error, why))
        fprintf(stderr, "last error: %s\n", st.last_error);
    assert_non_null(strstr(st.last_error, why));
}

static void
test_ship_stops_sink_when_stored_hash_differs(void **state)
{
    ship_test_t *t = *state;
    ship_journal_t a, b;
    /* Two journals wrongly sharing one source name: their hashes differ. */
    assert_int_equal(ship_journal_create(&a, "twin"), 0);
    assert_int_equal(ship_journal_create(&b, "twin"), 0);
    stele_sink_options_t so;
    ship_sink_options(&so, "main", t->server.uri, "twin");
    ship_drop_collection(&so);
    assert_int_equal(ship_journal_append(&a, 100, 100, 16), 0);
    assert_int_equal(ship_journal_append(&b, 150, 150, 8), 0);
    assert_int_equal(stele_reship(a.dir, &so, 0, 0, NULL, NULL), 0);
    /* Without a checkpoint, b would resume after the remote's newest document (a's 100):
     * its hash is not b's, so the sink stops instead of skipping b's first 100 records. */
    shipper_t *s = start_shipper(&b, &so);
    wait_stopped(s, 150, "another hash");
    shipper_stop(s, 0);
    /* With a checkpoint at 50, b's next batch (51..150) meets a's 51..100 as duplicates
     * with other hashes: the sink stops and counts none of the batch as shipped. */
    assert_int_equal(index_put_checkpoint(b.index, "main", 50, NULL), 0);
    s = start_shipper(&b, &so);
    wait_stopped(s, 150, "another hash");
    assert_int_equal(shipper_shipped_seq(s), 50);
    /* The journal is unaffected: appends go on. */
    assert_int_equal(ship_journal_append(&b, 10, 10, 8), 0);
    shipper_stop(s, 0);
    assert_int_equal(ship_count_docs(&so, "twin"), 100);
    /* The check reports the collision as mismatches. */
    stele_remote_report_t rep;
    assert_int_equal(stele_remote_check(b.dir, &so, 1, 100, &rep, NULL), STELE_EINTEGRITY);
    assert_int_equal(rep.n_mismatched, 100);
    assert_int_equal(rep.n_mismatched_ranges, 1);
    assert_int_equal(rep.mismatched[0].first_seq, 1);
    assert_int_equal(rep.mismatched[0].last_seq, 100);
    assert_int_equal(stele_reship(b.dir, &so, 1, 100, NULL, NULL), STELE_EINTEGRITY);
    ship_journal_destroy(&a, 0);
    ship_journal_destroy(&b, 0);
}

/* A sink that stops for good (here: its collection holds another journal's records under
 * this journal's source name) fails a wait=shipped at once, naming the sink and why, rather
 * than leaving the caller to wait out its timeout (or for ever, without one). */
static void
test_wait_shipped_fails_at_once_when_its_sink_stops(void **state)
{
    ship_test_t *t = *state;
    ship_journal_t other;
    stele_sink_options_t so;
    fresh_journal_and_sink(t, "stopped", &other, &so);
    assert_int_equal(ship_journal_append(&other, 20, 20, 8), 0);
    assert_int_equal(stele_reship(other.dir, &so, 0, 0, NULL, NULL), 0);
    stele_options_t o;
    stele_options_init(&o);
    o.source = "stopped";
    o.sinks = &so;
    o.n_sinks = 1;
    char *dir = test_tmpdir_new("stopped");
    assert_non_null(dir);
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open(dir, &o, &db, &err), 0);
    uint64_t seq = 0;
    for (int i = 0; i < 25; i++)
        assert_int_equal(stele_append_json(db, "{\"a\":1}", 7, STELE_WAIT_DURABLE, &seq, &err), 0);
    const int64_t timeout_ms = 30000;
    int64_t start = ship_fixture_now_ms();
    int rc = stele_wait(db, seq, STELE_WAIT_SHIPPED, timeout_ms, &err);
    int64_t waited_ms = ship_fixture_now_ms() - start;
    printf("# wait=shipped: %s after %lld ms: %s\n", stele_errname(rc), (long long)waited_ms,
           err.message);
    assert_int_equal(rc, STELE_ESINKSTOPPED);
    assert_non_null(strstr(err.message, "sink main"));
    assert_non_null(strstr(err.message, "another hash"));
    assert_true(waited_ms < timeout_ms / 2);
    /* The journal is unaffected: appends that do not wait for the sink go on. */
    assert_int_equal(stele_append_json(db, "{\"a\":2}", 7, STELE_WAIT_DURABLE, &seq, &err), 0);
    assert_int_equal(stele_close(db, NULL), 0);
    test_tmpdir_remove(dir);
    ship_journal_destroy(&other, 0);
}

/* A journal with one sink whose batches may linger an hour (linger_ms's largest value). */
static stele_t *
open_lingering(ship_test_t *t, const char *name, stele_sink_options_t *so, char **dir_out)
{
    ship_sink_options(so, "main", t->server.uri, name);
    ship_drop_collection(so);
    so->linger_ms = 3600000;
    stele_options_t o;
    stele_options_init(&o);
    o.source = name;
    o.sinks = so;
    o.n_sinks = 1;
    *dir_out = test_tmpdir_new(name);
    assert_non_null(*dir_out);
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open(*dir_out, &o, &db, &err), 0);
    return db;
}

/* A lone writer's record goes to the sink as soon as it is durable: the batch lingers only
 * while more records are on their way, so however long linger_ms is, a wait=shipped returns
 * once MongoDB acknowledged it (with a fixed linger each one would wait the whole hour). */
static void
test_wait_shipped_of_a_lone_writer_does_not_wait_for_the_linger(void **state)
{
    ship_test_t *t = *state;
    stele_sink_options_t so;
    char *dir;
    stele_t *db = open_lingering(t, "lone", &so, &dir);
    for (int i = 0; i < 3; i++) {
        uint64_t seq = 0;
        stele_error_t err = {0};
        assert_int_equal(stele_append_json(db, "{\"a\":1}", 7, STELE_WAIT_DURABLE, &seq, &err), 0);
        int rc = stele_wait(db, seq, STELE_WAIT_SHIPPED, SHIP_TEST_WAIT_MS / 2, &err);
        if (rc != 0)
            fprintf(stderr, "wait=shipped of seq %llu: %s\n", (unsigned long long)seq, err.message);
        assert_int_equal(rc, 0);
    }
    stele_sink_stats_t sink;
    assert_int_equal(stele_sink_stats(db, 0, &sink), 0);
    assert_int_equal(sink.batches, 3);
    assert_int_equal(stele_close(db, NULL), 0);
    test_tmpdir_remove(dir);
}

typedef struct shipped_writer {
    stele_t *db;
    int n;
    int rc;
} shipped_writer_t;

static void *
shipped_writer_run(void *arg)
{
    shipped_writer_t *w = arg;
    for (int i = 0; i < w->n && w->rc == 0; i++) {
        uint64_t seq = 0;
        w->rc = stele_append_json(w->db, "{\"b\":2}", 7, STELE_WAIT_DURABLE, &seq, NULL);
        if (w->rc == 0)
            w->rc = stele_wait(w->db, seq, STELE_WAIT_SHIPPED, SHIP_TEST_WAIT_MS / 2, NULL);
    }
    return NULL;
}

/* Writers that each wait for the sink never leave a batch waiting for records that will not
 * come: once every writer waits, nothing is on its way and the batch goes. */
static void
test_wait_shipped_of_many_writers_does_not_wait_for_the_linger(void **state)
{
    ship_test_t *t = *state;
    enum { N_WRITERS = 8, N_EACH = 25 };
    stele_sink_options_t so;
    char *dir;
    stele_t *db = open_lingering(t, "many", &so, &dir);
    pthread_t th[N_WRITERS];
    shipped_writer_t w[N_WRITERS];
    for (int i = 0; i < N_WRITERS; i++) {
        w[i] = (shipped_writer_t){db, N_EACH, 0};
        assert_int_equal(pthread_create(&th[i], NULL, shipped_writer_run, &w[i]), 0);
    }
    for (int i = 0; i < N_WRITERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].rc, 0);
    }
    stele_sink_stats_t sink;
    assert_int_equal(stele_sink_stats(db, 0, &sink), 0);
    printf("# %d records in %llu batches\n", N_WRITERS * N_EACH, (unsigned long long)sink.batches);
    assert_int_equal(sink.shipped_seq, N_WRITERS * N_EACH);
    assert_int_equal(stele_close(db, NULL), 0);
    test_tmpdir_remove(dir);
}

/* An event the server rejects for good: a dotted key (FerretDB refuses it) and, for a real
 * MongoDB, a value that breaks the collection's validator created below. */
static void
append_poison(ship_journal_t *sj)
{
    bson_t *doc = BCON_NEW("who", BCON_UTF8("mallory"), "a.b", BCON_INT32(1), "poison",
                           BCON_UTF8("not an int"));
    assert_int_equal(ship_journal_append_bson(sj, bson_get_data(doc), doc->len), 0);
    bson_destroy(doc);
}

/* What append refuses as ambiguous (STELE_EAMBIGUOUS) is what the sink refuses: the test
 * server (FerretDB) refuses a key holding '.' and a repeated key at any depth, inside arrays
 * too, so local and sink acceptance agree and no event stele takes becomes a dead letter
 * for these. Against STELE_TEST_MONGO_URI the server's verdicts are printed, not asserted:
 * MongoDB 5 and later store dotted keys (stele still refuses them: queries read them as
 * paths). */
static void
test_ship_sink_refuses_the_keys_append_refuses_as_ambiguous(void **state)
{
    ship_test_t *t = *state;
    static const char *const ambiguous[] = {
        "{\"a.b\":1}",       "{\"x\":{\"a.b\":1}}",       "{\"x\":[{\"a.b\":1}]}",
        "{\"a\":1,\"a\":2}", "{\"x\":{\"k\":1,\"k\":2}}", "{\"x\":[{\"k\":1,\"k\":2}]}",
    };
    stele_sink_options_t so;
    ship_sink_options(&so, "main", t->server.uri, "ambiguous");
    ship_drop_collection(&so);
    mongoc_client_t *client = mongoc_client_new(so.uri);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, so.database, so.collection);
    for (size_t i = 0; i < sizeof ambiguous / sizeof ambiguous[0]; i++) {
        const char *json = ambiguous[i];
        assert_int_equal(stele_validate_json(json, strlen(json), NULL, NULL), STELE_EAMBIGUOUS);
        bson_error_t berr;
        bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr); /* keeps them */
        assert_non_null(doc);
        bool stored = mongoc_collection_insert_one(coll, doc, NULL, NULL, &berr);
        printf("# %s: the server %s%s\n", json,
               stored ? "stored it" : "refused it: ", stored ? "" : berr.message);
        if (!t->server.is_external)
            assert_false(stored);
        bson_destroy(doc);
    }
    const char *nested = "{\"ip\":{\"v4\":\"10.0.0.1\"},\"k\":[{\"k\":1},{\"k\":2}]}";
    assert_int_equal(stele_validate_json(nested, strlen(nested), NULL, NULL), 0);
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)nested, -1, &berr);
    assert_true(mongoc_collection_insert_one(coll, doc, NULL, NULL, &berr));
    bson_destroy(doc);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
}

static void
create_validated_collection(const stele_sink_options_t *so)
{
    mongoc_client_t *client = mongoc_client_new(so->uri);
    mongoc_database_t *db = mongoc_client_get_database(client, so->database);
    bson_t *opts = BCON_NEW("validator", "{", "$jsonSchema", "{", "properties", "{", "poison", "{",
                            "bsonType", BCON_UTF8("int"), "}", "}", "}", "}");
    bson_error_t err;
    mongoc_collection_t *coll = mongoc_database_create_collection(db, so->collection, opts, &err);
    mongoc_collection_destroy(coll); /* FerretDB ignores validators; the dotted key does it */
    bson_destroy(opts);
    mongoc_database_destroy(db);
    mongoc_client_destroy(client);
}

static void
test_ship_dead_letters_rejected_record_and_goes_on(void **state)
{
    ship_test_t *t = *state;
    ship_journal_t sj;
    stele_sink_options_t so;
    fresh_journal_and_sink(t, "poison", &sj, &so);
    create_validated_collection(&so);
    assert_int_equal(ship_journal_append(&sj, 50, 50, 8), 0);
    append_poison(&sj); /* seq 51 */
    assert_int_equal(ship_journal_append(&sj, 49, 49, 8), 0);
    shipper_t *s = start_shipper(&sj, &so);
    assert_int_equal(ship_wait_for(get_shipped, s, 100, SHIP_TEST_WAIT_MS), 0);
    stele_sink_stats_t st;
    shipper_stats(s, 100, &st);
    assert_int_equal(st.dead_letters, 1);
    assert_int_equal(st.is_stopped, 0);
    assert_non_null(strstr(st.last_error, "seq 51"));
    shipper_stop(s, 1000);
    uint64_t seqs[4];
    assert_int_equal(index_list_dead_letters(sj.index, "main", 0, seqs, 4, NULL), 1);
    assert_int_equal(seqs[0], 51);
    assert_int_equal(ship_count_docs(&so, "poison"), 99);
    stele_remote_report_t rep;
    assert_int_equal(stele_remote_check(sj.dir, &so, 0, 0, &rep, NULL), STELE_EINTEGRITY);
    assert_int_equal(rep.n_missing, 1);
    assert_int_equal(rep.missing[0].first_seq, 51);
    /* Re-shipping the dead letter fails loudly while the server still rejects it. */
    assert_int_equal(stele_reship(sj.dir, &so, 51, 51, NULL, NULL), STELE_EREMOTE);
    ship_journal_destroy(&sj, 0);
}

/* A handle of the shipper's own on sj's index, so that a test can fail its writes while the
 * journal's go on (index_fail_writes). */
static index_t *
open_shipper_index(ship_journal_t *sj)
{
    index_t *ix = NULL;
    assert_int_equal(index_open(sj->dir, 1, 0600, &ix, NULL), 0);
    return ix;
}

/* 100 records into collection `coll`, seq 51 poison: n_before records, the poison, the rest. */
static void
journal_with_poison(ship_test_t *t, ship_journal_t *sj, stele_sink_options_t *so, const char *coll,
                    uint64_t n_before)
{
    assert_int_equal(ship_journal_create(sj, coll), 0);
    ship_sink_options(so, "main", t->server.uri, coll);
    ship_drop_collection(so);
    create_validated_collection(so);
    if (n_before)
        assert_int_equal(ship_journal_append(sj, n_before, (uint32_t)n_before, 8), 0);
    append_poison(sj);
    assert_int_equal(ship_journal_append(sj, 99 - n_before, (uint32_t)(99 - n_before), 8), 0);
}

static void
assert_listed_dead_letter(ship_journal_t *sj, uint64_t seq)
{
    uint64_t seqs[2];
    assert_int_equal(index_list_dead_letters(sj->index, "main", 0, seqs, 2, NULL), 1);
    assert_int_equal(seqs[0], seq);
}

/* An event with a top-level "_id": a foreign journal's record that cannot become a
 * document, dead-lettered by the shipper itself before anything is sent. */
static void
append_unbuildable(ship_journal_t *sj)
{
    bson_t *doc = BCON_NEW("_id", BCON_INT32(7), "who", BCON_UTF8("mallory"));
    assert_int_equal(ship_journal_append_bson(sj, bson_get_data(doc), doc->len), 0);
    bson_destroy(doc);
}

/* A dead letter whose index write fails is written again after the sink's backoff: it is
 * listed once the index takes it, and only then does shipping go past it. Both kinds: a
 * record that cannot become a document (seq 101) and one the server refuses (seq 1). */
static void
test_ship_retries_a_dead_letter_write_until_the_index_takes_it(void **state)
{
    ship_journal_t sj;
    stele_sink_options_t so;
    journal_with_poison(*state, &sj, &so, "dlretry", 0); /* poison at seq 1 */
    append_unbuildable(&sj);                             /* seq 101 */
    index_t *ix = open_shipper_index(&sj);
    /* The shipper's first writes are dead letters (no checkpoint comes before them). */
    index_fail_writes(ix, 3, EIO);
    shipper_t *s = start_shipper_on(&sj, ix, &so);
    assert_int_equal(ship_wait_for(get_shipped, s, 101, SHIP_TEST_WAIT_MS), 0);
    stele_sink_stats_t st;
    shipper_stats(s, 101, &st);
    assert_int_equal(st.is_stopped, 0);
    assert_true(st.retries >= 3);
    assert_int_equal(st.dead_letters, 2);
    shipper_stop(s, 1000);
    index_close(ix);
    uint64_t seqs[3];
    assert_int_equal(index_list_dead_letters(sj.index, "main", 0, seqs, 3, NULL), 2);
    assert_int_equal(seqs[0], 1);
    assert_int_equal(seqs[1], 101);
    assert_int_equal(ship_count_docs(&so, "dlretry"), 99);
    ship_journal_destroy(&sj, 0);
}

/* Polls until the shipper stops or ships past seq `past`. */
static void
wait_stopped_or_past(shipper_t *s, uint64_t past, stele_sink_stats_t *st)
{
    int64_t deadline = ship_fixture_now_ms() + SHIP_TEST_WAIT_MS;
    do {
        usleep(10 * 1000);
        shipper_stats(s, 100, st);
    } while (!st->is_stopped && st->shipped_seq <= past && ship_fixture_now_ms() < deadline);
}

/* While the index stays unwritable, a record the sink refuses for good can be neither
 * shipped nor listed: the sink stops before it, saying why, and a restart (the index
 * writable again) resumes at it, lists it and ships the rest. */
static void
test_ship_stops_before_a_dead_letter_the_index_cannot_list(void **state)
{
    ship_journal_t sj;
    stele_sink_options_t so;
    journal_with_poison(*state, &sj, &so, "dlstuck", 50);
    index_t *ix = open_shipper_index(&sj);
    index_fail_writes(ix, INDEX_FAIL_FOREVER, EIO);
    shipper_t *s = start_shipper_on(&sj, ix, &so);
    stele_sink_stats_t st;
    wait_stopped_or_past(s, 50, &st);
    if (!st.is_stopped || !strstr(st.last_error, "seq 51"))
        fprintf(stderr, "shipped %llu, stopped %d, last error: %s\n",
                (unsigned long long)st.shipped_seq, st.is_stopped, st.last_error);
    assert_true(st.is_stopped);
    assert_true(st.shipped_seq <= 50);
    assert_non_null(strstr(st.last_error, "seq 51"));
    assert_non_null(strstr(st.last_error, "dead letter"));
    assert_int_equal(st.dead_letters, 0);
    usleep(200 * 1000); /* the stop is sticky: nothing moves */
    shipper_stats(s, 100, &st);
    assert_true(st.is_stopped);
    assert_true(st.shipped_seq <= 50);
    shipper_stop(s, 0);
    index_close(ix);
    assert_int_equal(ship_count_docs(&so, "dlstuck"), 50);
    s = start_shipper(&sj, &so);
    assert_int_equal(ship_wait_for(get_shipped, s, 100, SHIP_TEST_WAIT_MS), 0);
    shipper_stats(s, 100, &st);
    assert_int_equal(st.is_stopped, 0);
    shipper_stop(s, 1000);
    assert_listed_dead_letter(&sj, 51);
    assert_int_equal(ship_count_docs(&so, "dlstuck"), 99);
    ship_journal_destroy(&sj, 0);
}

/* A unique index on the events' "i" field, so that an event repeating another's "i" is
 * refused for good (E11000 on an index other than _id) until the index is dropped: the
 * reversible permanent rejection of the dead-letter tests. FerretDB does not implement
 * collection validators (create refuses "validator"), but it does enforce unique indexes,
 * as MongoDB does. */
static void
create_unique_index_on_i(const stele_sink_options_t *so)
{
    mongoc_client_t *client = mongoc_client_new(so->uri);
    mongoc_database_t *db = mongoc_client_get_database(client, so->database);
    bson_t *cmd = BCON_NEW("createIndexes", BCON_UTF8(so->collection), "indexes", "[", "{", "key",
                           "{", "i", BCON_INT32(1), "}", "name", BCON_UTF8("i_unique"), "unique",
                           BCON_BOOL(true), "}", "]");
    bson_error_t err;
    bool ok = mongoc_database_write_command_with_opts(db, cmd, NULL, NULL, &err);
    if (!ok)
        fprintf(stderr, "createIndexes: %s\n", err.message);
    assert_true(ok);
    bson_destroy(cmd);
    mongoc_database_destroy(db);
    mongoc_client_destroy(client);
}

static void
drop_unique_index_on_i(const stele_sink_options_t *so)
{
    mongoc_client_t *client = mongoc_client_new(so->uri);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, so->database, so->collection);
    bson_error_t err;
    assert_true(mongoc_collection_drop_index(coll, "i_unique", &err));
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
}

/* An event whose "i" repeats record i_taken's. */
static void
append_clashing(ship_journal_t *sj, int64_t i_taken)
{
    bson_t *doc = BCON_NEW("who", BCON_UTF8("mallory"), "i", BCON_INT64(i_taken));
    assert_int_equal(ship_journal_append_bson(sj, bson_get_data(doc), doc->len), 0);
    bson_destroy(doc);
}

/* 100 records shipped into a collection with the unique index; 51 and 52 clash with 5 and 7
 * and become dead letters while the other 98 ship. The shipper's index is closed after it
 * stops, so that the public calls open it as another process would. */
static shipper_t *
ship_with_two_dead_letters(ship_test_t *t, ship_journal_t *sj, stele_sink_options_t *so,
                           const char *coll)
{
    assert_int_equal(ship_journal_create(sj, coll), 0);
    ship_sink_options(so, "main", t->server.uri, coll);
    ship_drop_collection(so);
    create_unique_index_on_i(so);
    assert_int_equal(ship_journal_append(sj, 50, 50, 8), 0);
    append_clashing(sj, 5); /* seq 51 */
    append_clashing(sj, 7); /* seq 52 */
    assert_int_equal(ship_journal_append(sj, 48, 48, 8), 0);
    shipper_t *s = start_shipper(sj, so);
    assert_int_equal(ship_wait_for(get_shipped, s, 100, SHIP_TEST_WAIT_MS), 0);
    return s;
}

static void
test_dead_letters_are_listed_reshipped_and_leave_the_list(void **state)
{
    ship_test_t *t = *state;
    ship_journal_t sj;
    stele_sink_options_t so;
    shipper_t *s = ship_with_two_dead_letters(t, &sj, &so, "dlreship");
    stele_sink_stats_t st;
    shipper_stats(s, 100, &st);
    assert_int_equal(st.dead_letters, 2);
    assert_int_equal(st.is_stopped, 0);
    shipper_stop(s, 1000);
    index_close(sj.index);
    sj.index = NULL;
    assert_int_equal(ship_count_docs(&so, sj.source), 98);

    stele_dead_letter_t dl[4];
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 4, NULL), 2);
    assert_int_equal(dl[0].seq, 51);
    assert_int_equal(dl[1].seq, 52);
    assert_true(dl[0].unix_ms > 0);
    assert_non_null(strstr(dl[0].reason, "duplicate key"));
    assert_int_equal(stele_dead_letters_list(sj.dir, "other", 0, dl, 4, NULL), 0);

    /* Still refused: the letter stays, with the time of the new rejection. */
    int64_t first_rejected_ms = dl[1].unix_ms;
    usleep(20 * 1000);
    stele_dead_letter_report_t rep;
    stele_error_t err = {0};
    assert_int_equal(stele_dead_letters_reship(sj.dir, &so, 52, &rep, &err), STELE_EREMOTE);
    assert_int_equal(rep.n_tried, 1);
    assert_int_equal(rep.n_rejected, 1);
    assert_int_equal(rep.n_shipped, 0);
    assert_non_null(strstr(err.message, "still rejected"));
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 4, NULL), 2);
    assert_true(dl[1].unix_ms > first_rejected_ms);
    assert_int_equal(stele_dead_letters_reship(sj.dir, &so, 50, &rep, NULL), STELE_ENOTFOUND);

    /* The cause is removed. 51 is re-shipped by a range re-ship first (which leaves the list
     * alone), so the dead-letter re-ship finds it stored with the same hash. */
    drop_unique_index_on_i(&so);
    uint64_t n_inserted = 0;
    assert_int_equal(stele_reship(sj.dir, &so, 51, 51, &n_inserted, NULL), 0);
    assert_int_equal(n_inserted, 1);
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 4, NULL), 2);
    err = (stele_error_t){0};
    int rc = stele_dead_letters_reship(sj.dir, &so, 0, &rep, &err);
    if (rc != 0)
        fprintf(stderr, "reship dead letters: %s\n", err.message);
    assert_int_equal(rc, 0);
    assert_int_equal(rep.n_tried, 2);
    assert_int_equal(rep.n_shipped, 2);
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 4, NULL), 0);
    assert_int_equal(stele_dead_letters_reship(sj.dir, &so, 0, &rep, NULL), 0);
    assert_int_equal(rep.n_tried, 0);

    assert_int_equal(ship_check_exactly_once(&sj, &so, 100), 0);
    assert_int_equal(ship_count_docs(&so, NULL), 100); /* the whole collection */
    ship_journal_destroy(&sj, 0);
}

static void
test_dead_letter_discard_removes_it_without_shipping(void **state)
{
    ship_test_t *t = *state;
    ship_journal_t sj;
    stele_sink_options_t so;
    shipper_t *s = ship_with_two_dead_letters(t, &sj, &so, "dldiscard");
    shipper_stop(s, 1000);
    index_close(sj.index);
    sj.index = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_dead_letter_discard(sj.dir, "main", 50, &err), STELE_ENOTFOUND);
    assert_int_equal(stele_dead_letter_discard(sj.dir, "main", 51, &err), 0);
    stele_dead_letter_t dl[4];
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 4, NULL), 1);
    assert_int_equal(dl[0].seq, 52);
    drop_unique_index_on_i(&so);
    assert_int_equal(stele_dead_letters_reship(sj.dir, &so, 0, NULL, NULL), 0);
    stele_remote_report_t rep;
    assert_int_equal(stele_remote_check(sj.dir, &so, 0, 0, &rep, NULL), STELE_EINTEGRITY);
    assert_int_equal(rep.n_missing, 1); /* the discarded record, and only it */
    assert_int_equal(rep.missing[0].first_seq, 51);
    assert_int_equal(rep.n_extra + rep.n_mismatched, 0);
    ship_journal_destroy(&sj, 0);
}

typedef struct fan_in_writer {
    ship_journal_t *sj;
    uint64_t n;
    int rc;
} fan_in_writer_t;

static void *
fan_in_append(void *arg)
{
    fan_in_writer_t *w = arg;
    w->rc = ship_journal_append(w->sj, w->n, 200, 32);
    return NULL;
}

static void
test_ship_fans_in_four_sources_into_one_collection(void **state)
{
    ship_test_t *t = *state;
    enum { N_SOURCES = 4 };
    const uint64_t n = 5000;
    ship_journal_t sj[N_SOURCES];
    shipper_t *s[N_SOURCES];
    stele_sink_options_t so;
    ship_sink_options(&so, "main", t->server.uri, "fanin");
    ship_drop_collection(&so);
    pthread_t writers[N_SOURCES];
    fan_in_writer_t w[N_SOURCES];
    for (int i = 0; i < N_SOURCES; i++) {
        char source[32];
        snprintf(source, sizeof source, "host-%d", i);
        assert_int_equal(ship_journal_create(&sj[i], source), 0);
        s[i] = start_shipper(&sj[i], &so);
        w[i] = (fan_in_writer_t){&sj[i], n, -1};
        assert_int_equal(pthread_create(&writers[i], NULL, fan_in_append, &w[i]), 0);
    }
    for (int i = 0; i < N_SOURCES; i++) {
        pthread_join(writers[i], NULL);
        assert_int_equal(w[i].rc, 0);
        assert_int_equal(ship_wait_for(get_shipped, s[i], n, SHIP_TEST_WAIT_MS), 0);
    }
    for (int i = 0; i < N_SOURCES; i++) {
        shipper_stop(s[i], 1000);
        assert_int_equal(ship_check_exactly_once(&sj[i], &so, n), 0);
        ship_journal_destroy(&sj[i], 0);
    }
}

static void
test_remote_check_names_deleted_range_and_reship_restores_it(void **state)
{
    ship_test_t *t = *state;
    ship_journal_t sj;
    stele_sink_options_t so;
    fresh_journal_and_sink(t, "holes", &sj, &so);
    assert_int_equal(ship_journal_append(&sj, 4000, 400, 16), 0);
    assert_int_equal(stele_reship(sj.dir, &so, 0, 0, NULL, NULL), 0);
    assert_int_equal(ship_delete_range(&so, "holes", 1001, 1500), 500);
    assert_int_equal(ship_delete_range(&so, "holes", 3990, 4000), 11);
    stele_remote_report_t rep;
    stele_error_t err = {0};
    assert_int_equal(stele_remote_check(sj.dir, &so, 0, 0, &rep, &err), STELE_EINTEGRITY);
    assert_int_equal(rep.records_checked, 4000);
    assert_int_equal(rep.n_missing, 511);
    assert_int_equal(rep.n_missing_ranges, 2);
    assert_int_equal(rep.missing[0].first_seq, 1001);
    assert_int_equal(rep.missing[0].last_seq, 1500);
    assert_int_equal(rep.missing[1].first_seq, 3990);
    assert_int_equal(rep.missing[1].last_seq, 4000);
    assert_int_equal(rep.n_extra + rep.n_mismatched, 0);
    assert_non_null(strstr(err.message, "511 missing"));
    uint64_t inserted = 0;
    assert_int_equal(stele_reship(sj.dir, &so, 1001, 4000, &inserted, NULL), 0);
    assert_int_equal(inserted, 511);
    assert_int_equal(ship_check_exactly_once(&sj, &so, 4000), 0);
    ship_journal_destroy(&sj, 0);
}

static void
test_remote_check_reports_documents_past_the_journal_as_extra(void **state)
{
    ship_test_t *t = *state;
    ship_journal_t big, small;
    assert_int_equal(ship_journal_create(&big, "extra"), 0);
    assert_int_equal(ship_journal_create(&small, "extra"), 0);
    stele_sink_options_t so;
    ship_sink_options(&so, "main", t->server.uri, "extra");
    ship_drop_collection(&so);
    assert_int_equal(ship_journal_append(&big, 300, 300, 0), 0);
    assert_int_equal(stele_reship(big.dir, &so, 201, 300, NULL, NULL), 0);
    assert_int_equal(ship_journal_append(&small, 200, 200, 0), 0);
    assert_int_equal(stele_reship(small.dir, &so, 0, 0, NULL, NULL), 0);
    stele_remote_report_t rep;
    assert_int_equal(stele_remote_check(small.dir, &so, 0, 0, &rep, NULL), STELE_EINTEGRITY);
    assert_int_equal(rep.n_missing + rep.n_mismatched, 0);
    assert_int_equal(rep.n_extra, 100);
    assert_int_equal(rep.extra[0].first_seq, 201);
    assert_int_equal(rep.extra[0].last_seq, 300);
    ship_journal_destroy(&big, 0);
    ship_journal_destroy(&small, 0);
}

static void
test_ship_never_shows_uri_password(void **state)
{
    (void)state;
    ship_journal_t sj;
    assert_int_equal(ship_journal_create(&sj, "secret"), 0);
    assert_int_equal(ship_journal_append(&sj, 10, 10, 0), 0);
    char uri[128];
    /* Nothing listens there: every attempt fails, and each message must stay clean. */
    snprintf(uri, sizeof uri,
             "mongodb://auditor:hunter2pw@127.0.0.1:%d/?serverSelectionTimeoutMS=200",
             mongo_server_free_port());
    stele_sink_options_t so;
    ship_sink_options(&so, "main", uri, "secret");
    shipper_t *s = start_shipper(&sj, &so);
    stele_sink_stats_t st;
    int64_t deadline = ship_fixture_now_ms() + 30000;
    do {
        usleep(20 * 1000);
        shipper_stats(s, 10, &st);
    } while (st.retries < 2 && ship_fixture_now_ms() < deadline);
    assert_true(st.retries >= 2);
    assert_true(st.last_error[0] != '\0');
    assert_true(st.last_error_unix_ms > 0);
    assert_null(strstr(st.last_error, "hunter2pw"));
    assert_null(strstr(st.target, "hunter2pw"));
    assert_null(strstr(st.target, "auditor"));
    shipper_stop(s, 0);
    stele_error_t err = {0};
    stele_remote_report_t rep;
    assert_int_not_equal(stele_remote_check(sj.dir, &so, 0, 0, &rep, &err), 0);
    assert_null(strstr(err.message, "hunter2pw"));
    /* The check's message names the collection: a password that is part of its name is
     * masked there too. */
    so.collection = "events_hunter2pw";
    assert_int_equal(stele_remote_check(sj.dir, &so, 0, 0, &rep, &err), STELE_EREMOTE);
    assert_non_null(strstr(err.message, "remote check on 127.0.0.1:"));
    assert_null(strstr(err.message, "hunter2pw"));
    so.uri = "mongodb://auditor:hunter2pw@127.0.0.1:notaport/";
    shipper_config_t cfg = {
        .sink = &so, .journal_dir = sj.dir, .source = "secret", .index = sj.index};
    assert_int_equal(shipper_start(&cfg, &s, &err), STELE_ECONFIG);
    assert_null(strstr(err.message, "hunter2pw"));
    ship_journal_destroy(&sj, 0);
}

int
main(void)
{
    if (getenv("STELE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("STELE_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_shipped_fails_at_once_when_its_sink_stops),
        cmocka_unit_test(test_wait_shipped_of_a_lone_writer_does_not_wait_for_the_linger),
        cmocka_unit_test(test_wait_shipped_of_many_writers_does_not_wait_for_the_linger),
        cmocka_unit_test(test_ship_delivers_every_record_exactly_once),
        cmocka_unit_test(test_ship_delivers_the_largest_records),
        cmocka_unit_test(test_ship_resumes_from_checkpoint_after_restart),
        cmocka_unit_test(test_ship_saves_its_checkpoint_when_idle_without_a_stop),
        cmocka_unit_test(test_ship_resumes_from_remote_when_checkpoint_is_lost),
        cmocka_unit_test(test_ship_treats_stored_duplicate_with_same_hash_as_shipped),
        cmocka_unit_test(test_ship_stops_sink_when_stored_hash_differs),
        cmocka_unit_test(test_ship_dead_letters_rejected_record_and_goes_on),
        cmocka_unit_test(test_ship_sink_refuses_the_keys_append_refuses_as_ambiguous),
        cmocka_unit_test(test_ship_retries_a_dead_letter_write_until_the_index_takes_it),
        cmocka_unit_test(test_ship_stops_before_a_dead_letter_the_index_cannot_list),
        cmocka_unit_test(test_dead_letters_are_listed_reshipped_and_leave_the_list),
        cmocka_unit_test(test_dead_letter_discard_removes_it_without_shipping),
        cmocka_unit_test(test_ship_fans_in_four_sources_into_one_collection),
        cmocka_unit_test(test_remote_check_names_deleted_range_and_reship_restores_it),
        cmocka_unit_test(test_remote_check_reports_documents_past_the_journal_as_extra),
        cmocka_unit_test(test_ship_never_shows_uri_password),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
