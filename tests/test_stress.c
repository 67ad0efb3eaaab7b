/*
 * test_stress.c: many writer threads at once (1, 8, 64, 1024), wait=durable and a mix of
 * levels. Every append must be acknowledged exactly once with a seq; seqs run 1..N with no
 * gap or duplicate; each thread sees its own seqs in increasing order; a durable
 * acknowledgement is never ahead of durable_seq; and the records read back from the journal
 * are exactly the events each thread appended under those seqs. Meant to run under TSan too.
 * The mix of levels is drawn from a seed (printed; STELE_TEST_SEED replays it).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>
#include <cmocka.h>

#include "engine_fixture.h"
#include "stele.h"
#include "test_util.h"

/* Small thread stacks so 1,024 writers stay cheap (also under TSan). */
#define STRESS_STACK_BYTES (256u << 10)

typedef struct stress_run {
    stele_t *db;
    unsigned n_threads;
    unsigned per_thread;
    int mixed_levels;
    uint64_t seed;
    uint64_t *acked; /* acked[t * per_thread + i]: the seq thread t got for its i-th event */
    pthread_barrier_t start;
} stress_run_t;

typedef struct stress_thread {
    stress_run_t *run;
    unsigned index;
    int failed;
    char why[512];
} stress_thread_t;

static stele_wait_t
stress_level(stress_run_t *run, unsigned t, unsigned i)
{
    if (!run->mixed_levels)
        return STELE_WAIT_DURABLE;
    test_rng_t rng;
    test_rng_init(&rng, run->seed ^ ((uint64_t)t << 32) ^ i);
    return (stele_wait_t)test_rng_below(&rng, 3);
}

static int
stress_append(stress_thread_t *th, unsigned i, stele_wait_t level, uint64_t *seq,
              stele_error_t *err)
{
    unsigned t = th->index;
    if ((t + i) % 2 == 0) {
        char json[96];
        int n = snprintf(json, sizeof json, "{\"t\":%u,\"i\":%u,\"via\":\"json\"}", t, i);
        return stele_append_json(th->run->db, json, (size_t)n, level, seq, err);
    }
    bson_t doc;
    bson_init(&doc);
    BSON_APPEND_INT32(&doc, "t", (int32_t)t);
    BSON_APPEND_INT32(&doc, "i", (int32_t)i);
    BSON_APPEND_UTF8(&doc, "via", "bson");
    int rc = stele_append_bson(th->run->db, bson_get_data(&doc), doc.len, level, seq, err);
    bson_destroy(&doc);
    return rc;
}

static void *
stress_writer(void *arg)
{
    stress_thread_t *th = arg;
    stress_run_t *run = th->run;
    pthread_barrier_wait(&run->start);
    uint64_t last = 0;
    for (unsigned i = 0; i < run->per_thread && !th->failed; i++) {
        stele_wait_t level = stress_level(run, th->index, i);
        uint64_t seq = 0;
        stele_error_t err = {0};
        int rc = stress_append(th, i, level, &seq, &err);
        if (rc) {
            th->failed = 1;
            snprintf(th->why, sizeof th->why, "thread %u event %u: %s %.160s", th->index, i,
                     stele_errname(rc), err.message);
        } else if (seq <= last) {
            th->failed = 1;
            snprintf(th->why, sizeof th->why, "thread %u got seq %llu after %llu", th->index,
                     (unsigned long long)seq, (unsigned long long)last);
        } else if (level == STELE_WAIT_DURABLE) {
            stele_stats_t st;
            stele_stats(run->db, &st);
            if (st.durable_seq < seq) {
                th->failed = 1;
                snprintf(th->why, sizeof th->why, "seq %llu acknowledged durable at %llu",
                         (unsigned long long)seq, (unsigned long long)st.durable_seq);
            }
        }
        run->acked[(size_t)th->index * run->per_thread + i] = seq;
        last = seq;
    }
    return NULL;
}

/* The (t, i) an event read back claims. */
static int
stress_decode(const fixture_record_t *rec, unsigned *t, unsigned *i)
{
    bson_t doc;
    bson_iter_t it;
    if (!bson_init_static(&doc, rec->payload, rec->payload_len))
        return -1;
    if (!bson_iter_init_find(&it, &doc, "t") || !BSON_ITER_HOLDS_INT32(&it))
        return -1;
    *t = (unsigned)bson_iter_int32(&it);
    if (!bson_iter_init_find(&it, &doc, "i") || !BSON_ITER_HOLDS_INT32(&it))
        return -1;
    *i = (unsigned)bson_iter_int32(&it);
    return 0;
}

static void
stress_check(stress_run_t *run, const char *dir)
{
    size_t total = (size_t)run->n_threads * run->per_thread;
    uint8_t *seen = calloc(total + 1, 1);
    for (size_t k = 0; k < total; k++) {
        uint64_t seq = run->acked[k];
        if (seq == 0 || seq > total)
            fail_msg("event %zu acknowledged with seq %llu outside 1..%zu", k,
                     (unsigned long long)seq, total);
        if (seen[seq]++)
            fail_msg("seq %llu acknowledged twice", (unsigned long long)seq);
    }
    free(seen);

    fixture_record_t *recs;
    long n = fixture_read_all(dir, &recs);
    assert_int_equal(n, (long)total);
    const char *broken = fixture_check_chain(recs, n);
    if (broken)
        fail_msg("journal read back: %s", broken);
    for (long k = 0; k < n; k++) {
        unsigned t = 0, i = 0;
        if (stress_decode(&recs[k], &t, &i) || t >= run->n_threads || i >= run->per_thread)
            fail_msg("record %llu is not an event of this run", (unsigned long long)recs[k].seq);
        if (run->acked[(size_t)t * run->per_thread + i] != recs[k].seq)
            fail_msg("record %llu holds thread %u event %u, acknowledged as seq %llu",
                     (unsigned long long)recs[k].seq, t, i,
                     (unsigned long long)run->acked[(size_t)t * run->per_thread + i]);
    }
    fixture_records_free(recs, n);
}

static void
stress(unsigned n_threads, unsigned per_thread, int mixed_levels, const char *name)
{
    char *dir = test_tmpdir_new("stress");
    assert_non_null(dir);
    stress_run_t run = {
        .n_threads = n_threads, .per_thread = per_thread, .mixed_levels = mixed_levels};
    run.seed = test_seed(name);
    run.acked = calloc((size_t)n_threads * per_thread, sizeof *run.acked);
    stele_options_t o;
    fixture_options(&o);
    o.segment_bytes = 256u << 10; /* several segment rolls per run */
    o.max_record_bytes = 4u << 10;
    stele_error_t err = {0};
    int rc = stele_open(dir, &o, &run.db, &err);
    if (rc)
        fail_msg("open: %s", err.message);
    pthread_barrier_init(&run.start, NULL, n_threads);
    stress_thread_t *threads = calloc(n_threads, sizeof *threads);
    pthread_t *ids = calloc(n_threads, sizeof *ids);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, STRESS_STACK_BYTES);
    for (unsigned t = 0; t < n_threads; t++) {
        threads[t] = (stress_thread_t){.run = &run, .index = t};
        assert_int_equal(pthread_create(&ids[t], &attr, stress_writer, &threads[t]), 0);
    }
    pthread_attr_destroy(&attr);
    for (unsigned t = 0; t < n_threads; t++)
        pthread_join(ids[t], NULL);
    for (unsigned t = 0; t < n_threads; t++)
        if (threads[t].failed)
            fail_msg("%s", threads[t].why);
    stele_stats_t st;
    stele_stats(run.db, &st);
    print_message("%s: %u threads x %u events, %llu batches, mean %.1f records/batch\n", name,
                  n_threads, per_thread, (unsigned long long)st.batches, st.mean_batch_records);
    assert_int_equal(stele_close(run.db, &err), 0);
    stress_check(&run, dir);
    pthread_barrier_destroy(&run.start);
    free(threads);
    free(ids);
    free(run.acked);
    test_tmpdir_remove(dir);
}

static void
test_stress_one_writer_durable(void **state)
{
    (void)state;
    stress(1, 500, 0, "stress_1_durable");
}

static void
test_stress_8_writers_durable(void **state)
{
    (void)state;
    stress(8, 200, 0, "stress_8_durable");
}

static void
test_stress_64_writers_durable(void **state)
{
    (void)state;
    stress(64, 50, 0, "stress_64_durable");
}

static void
test_stress_1024_writers_durable(void **state)
{
    (void)state;
    stress(1024, 4, 0, "stress_1024_durable");
}

static void
test_stress_64_writers_mixed_levels(void **state)
{
    (void)state;
    stress(64, 100, 1, "stress_64_mixed");
}

static void
test_stress_1024_writers_mixed_levels(void **state)
{
    (void)state;
    stress(1024, 8, 1, "stress_1024_mixed");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_one_writer_durable),
        cmocka_unit_test(test_stress_8_writers_durable),
        cmocka_unit_test(test_stress_64_writers_durable),
        cmocka_unit_test(test_stress_1024_writers_durable),
        cmocka_unit_test(test_stress_64_writers_mixed_levels),
        cmocka_unit_test(test_stress_1024_writers_mixed_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
