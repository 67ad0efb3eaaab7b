/*
 * test_retention_mongo.c: retention through the public API with sinks on the test server
 * (FerretDB, or STELE_TEST_MONGO_URI). Retention may delete a segment only once every sink
 * has shipped all of it: these tests let it run with one sink or two, all reachable or one
 * not, and check what the journal still holds and what the sinks received.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "mongo_server.h"
#include "ship_fixture.h"
#include "stele.h"
#include "test_util.h"

#define RETENTION_RECORDS 200
/* Past one retention pass of the index writer (it looks every second). */
#define RETENTION_SETTLE_MS 3000
#define RETENTION_SHIP_WAIT_MS 120000

static mongo_server_t server;

static int
group_setup(void **state)
{
    (void)state;
    return mongo_server_start(&server) == 0 ? 0 : -1;
}

static int
group_teardown(void **state)
{
    (void)state;
    mongo_server_destroy(&server);
    return 0;
}

/* Small segments and the smallest byte budget: every wholly shipped segment but the
 * active one may go. */
static void
retention_options(stele_options_t *o, stele_sink_options_t *sinks, size_t n_sinks)
{
    stele_options_init(o);
    o->segment_bytes = 64u << 10;
    o->max_record_bytes = 8u << 10;
    o->retention_bytes = 1;
    o->sinks = sinks;
    o->n_sinks = n_sinks;
}

static uint64_t
fill(stele_t *db)
{
    char big[2100];
    snprintf(big, sizeof big, "{\"pad\":\"%0*d\"}", 2000, 0);
    uint64_t seq = 0;
    for (int i = 0; i < RETENTION_RECORDS; i++) {
        stele_error_t err = {0};
        if (stele_append_json(db, big, strlen(big), STELE_WAIT_NONE, &seq, &err) != 0)
            fail_msg("append: %s", err.message);
    }
    assert_int_equal(stele_flush(db, NULL), 0);
    return seq;
}

static stele_stats_t
stats_of(stele_t *db)
{
    stele_stats_t st;
    assert_int_equal(stele_stats(db, &st), 0);
    return st;
}

/* Polls until the journal's first seq moves past 1, up to RETENTION_SETTLE_MS: a check
 * that nothing is deleted (where a pass that came late passes it too). */
static uint64_t
wait_first_seq_moves(stele_t *db)
{
    int64_t until = ship_fixture_now_ms() + RETENTION_SETTLE_MS;
    uint64_t first = stats_of(db).first_seq;
    while (first <= 1 && ship_fixture_now_ms() < until) {
        struct timespec pause = {0, 50000000};
        nanosleep(&pause, NULL);
        first = stats_of(db).first_seq;
    }
    return first;
}

/* Polls until retention has deleted every segment but the active one: with every record
 * shipped and a budget of 1 byte that is where it stops, so what the test samples then
 * cannot change under it (a sample taken when the first seq first moved could: the next
 * pass, a second later, deleted more). RETENTION_SHIP_WAIT_MS bounds a hang, not a timing. */
static stele_stats_t
wait_for_only_the_active_segment(stele_t *db, const char *dir)
{
    uint64_t active_first_seq = test_newest_segment_first_seq(dir);
    int64_t until = ship_fixture_now_ms() + RETENTION_SHIP_WAIT_MS;
    stele_stats_t st = stats_of(db);
    while (st.first_seq != active_first_seq && ship_fixture_now_ms() < until) {
        struct timespec pause = {0, 50000000};
        nanosleep(&pause, NULL);
        st = stats_of(db);
    }
    if (st.first_seq != active_first_seq)
        fail_msg("retention kept seq %llu on; the active segment starts at %llu (%d ms)",
                 (unsigned long long)st.first_seq, (unsigned long long)active_first_seq,
                 RETENTION_SHIP_WAIT_MS);
    return st;
}

/* Both sinks shipped everything: the shipped segments go, the active one stays, and each
 * sink holds every record. */
static void
test_retention_deletes_what_every_sink_shipped(void **state)
{
    (void)state;
    stele_sink_options_t sinks[2];
    ship_sink_options(&sinks[0], "a", server.uri, "retention_a");
    ship_sink_options(&sinks[1], "b", server.uri, "retention_b");
    ship_drop_collection(&sinks[0]);
    ship_drop_collection(&sinks[1]);
    stele_options_t o;
    retention_options(&o, sinks, 2);
    char *dir = test_tmpdir_new("retention");
    assert_non_null(dir);
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open(dir, &o, &db, &err), 0);
    uint64_t last = fill(db);
    uint64_t segments_before = stats_of(db).segments;
    assert_true(segments_before >= 4);
    assert_int_equal(stele_wait(db, last, STELE_WAIT_SHIPPED, RETENTION_SHIP_WAIT_MS, &err), 0);

    stele_stats_t st = wait_for_only_the_active_segment(db, dir);
    uint64_t first = st.first_seq;
    assert_true(first > 1);
    assert_true(first <= last); /* the active segment stays */
    assert_int_equal(ship_count_docs(&sinks[0], NULL), (int64_t)last);
    assert_int_equal(ship_count_docs(&sinks[1], NULL), (int64_t)last);
    assert_int_equal(stele_close(db, NULL), 0);

    /* What is left still verifies, from its new first record on. A retention pass between
     * the look at stats and the close may have cut further: never back. */
    stele_verify_report_t rep;
    assert_int_equal(stele_verify(dir, 0, 0, &rep, &err), 0);
    assert_true(rep.first_seq >= first);
    assert_true(rep.first_seq <= last);
    assert_int_equal(rep.last_seq, last);
    if (!getenv("STELE_TEST_KEEP"))
        assert_int_equal(test_tmpdir_remove(dir), 0);
    else
        free(dir);
}

/* One sink shipped everything, the other cannot reach its server: nothing is deleted,
 * however long the first sink has been done. */
static void
test_retention_waits_for_the_slowest_sink(void **state)
{
    (void)state;
    stele_sink_options_t sinks[2];
    ship_sink_options(&sinks[0], "reachable", server.uri, "retention_slow");
    ship_drop_collection(&sinks[0]);
    stele_sink_options_init(&sinks[1]);
    sinks[1].name = "unreachable";
    sinks[1].uri = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100&connectTimeoutMS=100";
    stele_options_t o;
    retention_options(&o, sinks, 2);
    char *dir = test_tmpdir_new("retention");
    assert_non_null(dir);
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open(dir, &o, &db, &err), 0);
    uint64_t last = fill(db);
    int64_t until = ship_fixture_now_ms() + RETENTION_SHIP_WAIT_MS;
    while (ship_count_docs(&sinks[0], NULL) < (int64_t)last && ship_fixture_now_ms() < until) {
        struct timespec pause = {0, 100000000};
        nanosleep(&pause, NULL);
    }
    assert_int_equal(ship_count_docs(&sinks[0], NULL), (int64_t)last);

    assert_int_equal(wait_first_seq_moves(db), 1);
    stele_stats_t st = stats_of(db);
    assert_int_equal(st.n_sinks, 2);
    stele_sink_stats_t second;
    assert_int_equal(stele_sink_stats(db, 1, &second), 0);
    assert_int_equal(second.shipped_seq, 0);
    assert_int_equal(stele_close(db, NULL), 0);
    if (!getenv("STELE_TEST_KEEP"))
        assert_int_equal(test_tmpdir_remove(dir), 0);
    else
        free(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retention_deletes_what_every_sink_shipped),
        cmocka_unit_test(test_retention_waits_for_the_slowest_sink),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
