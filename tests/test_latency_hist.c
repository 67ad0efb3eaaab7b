/*
 * test_latency_hist.c: the latency histogram of engine/latency_hist.h: every value lands in
 * a bucket whose middle is within 1/16 of it, buckets grow with the value, percentiles come
 * from the counts (weights included) at the rank the fraction names, and an empty
 * histogram reads 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "latency_hist.h"

/* |mid - ns| <= ns / 16: a bucket is at most 1/8 of its values wide. */
static void
assert_bucket_holds(uint64_t ns)
{
    unsigned b = latency_hist_bucket(ns);
    assert_true(b < LATENCY_HIST_BUCKETS);
    uint64_t mid = latency_hist_bucket_mid_ns(b);
    uint64_t diff = mid > ns ? mid - ns : ns - mid;
    if (diff > ns / 16)
        fail_msg("%llu ns: bucket %u has middle %llu", (unsigned long long)ns, b,
                 (unsigned long long)mid);
}

static void
test_latency_hist_bucket_middle_is_near_every_value(void **state)
{
    (void)state;
    for (uint64_t ns = 0; ns < 100000; ns++)
        assert_bucket_holds(ns);
    for (unsigned shift = 17; shift < 64; shift++) {
        uint64_t p = 1ull << shift;
        assert_bucket_holds(p - 1);
        assert_bucket_holds(p);
        assert_bucket_holds(p + p / 3);
    }
    assert_bucket_holds(UINT64_MAX);
}

static void
test_latency_hist_buckets_grow_with_the_value(void **state)
{
    (void)state;
    unsigned prev = 0;
    for (uint64_t ns = 1; ns < (1ull << 62); ns += ns / 7 + 1) {
        unsigned b = latency_hist_bucket(ns);
        assert_true(b >= prev);
        prev = b;
    }
    assert_true(latency_hist_bucket(UINT64_MAX) < LATENCY_HIST_BUCKETS);
    assert_true(latency_hist_bucket(UINT64_MAX) > prev);
}

static void
test_latency_hist_percentiles_follow_the_counts(void **state)
{
    (void)state;
    latency_hist_t *h = calloc(1, sizeof *h);
    assert_non_null(h);
    /* 1..1000 us, one sample each; then 9 more samples of 5 ms in one weighted add. */
    for (uint64_t us = 1; us <= 1000; us++)
        latency_hist_add(h, us * 1000, 1);
    latency_hist_add(h, 5000000, 9);
    /* 1,009 samples: the ranks are 504 (505 us), 988 (989 us), 1,003 and 1,008 (5 ms). */
    static const double fractions[] = {0.50, 0.98, 0.995, 1.0};
    uint64_t out_us[4];
    latency_hist_percentiles_us(h, fractions, out_us, 4);
    assert_in_range(out_us[0], 505 - 505 / 16, 505 + 505 / 16);
    assert_in_range(out_us[1], 989 - 989 / 16, 989 + 989 / 16);
    assert_in_range(out_us[2], 5000 - 5000 / 16, 5000 + 5000 / 16);
    assert_in_range(out_us[3], 5000 - 5000 / 16, 5000 + 5000 / 16);
    free(h);
}

/* The fraction f of n samples is the sample of 0-based rank floor(n * f), in value order. */
static void
test_latency_hist_percentile_is_the_sample_at_its_rank(void **state)
{
    (void)state;
    latency_hist_t *h = calloc(1, sizeof *h);
    assert_non_null(h);
    latency_hist_add(h, 100000000, 1); /* 100 ms */
    latency_hist_add(h, 1000000, 1);   /* 1 ms */
    static const double fractions[] = {0.0, 0.49, 0.50};
    uint64_t out_us[3];
    latency_hist_percentiles_us(h, fractions, out_us, 3);
    assert_in_range(out_us[0], 1000 - 1000 / 16, 1000 + 1000 / 16);
    assert_in_range(out_us[1], 1000 - 1000 / 16, 1000 + 1000 / 16);
    assert_in_range(out_us[2], 100000 - 100000 / 16, 100000 + 100000 / 16);
    free(h);
}

static void
test_latency_hist_empty_reads_zero(void **state)
{
    (void)state;
    latency_hist_t *h = calloc(1, sizeof *h);
    assert_non_null(h);
    static const double fractions[] = {0.50, 0.999};
    uint64_t out_us[2] = {7, 7};
    latency_hist_percentiles_us(h, fractions, out_us, 2);
    assert_int_equal(out_us[0], 0);
    assert_int_equal(out_us[1], 0);
    free(h);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_latency_hist_bucket_middle_is_near_every_value),
        cmocka_unit_test(test_latency_hist_buckets_grow_with_the_value),
        cmocka_unit_test(test_latency_hist_percentiles_follow_the_counts),
        cmocka_unit_test(test_latency_hist_percentile_is_the_sample_at_its_rank),
        cmocka_unit_test(test_latency_hist_empty_reads_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
