/*
 * bench_hist.c: latency histograms for stele-bench.
 *
 * Log-linear buckets, like HdrHistogram with 6 sub-bucket bits: values below 64 ns have a
 * bucket each; above, each power of two is split into 64 equal buckets, so a reported
 * quantile is within ~1.6% of the true value. Recording is one increment and no allocation,
 * so writers keep one histogram each (no sharing, no locks) and the harness merges them
 * after the threads are joined.
 */
#include "bench.h"

static unsigned
hist_index(uint64_t ns)
{
    if (ns < BENCH_HIST_SUB_COUNT)
        return (unsigned)ns;
    unsigned exp = 63u - (unsigned)__builtin_clzll(ns);
    if (exp > BENCH_HIST_MAX_EXP)
        return BENCH_HIST_BUCKETS - 1;
    unsigned sub = (unsigned)(ns >> (exp - BENCH_HIST_SUB_BITS)) & (BENCH_HIST_SUB_COUNT - 1);
    return BENCH_HIST_SUB_COUNT * (exp - BENCH_HIST_SUB_BITS + 1) + sub;
}

/* The upper edge (inclusive) of bucket idx: quantiles report it, so they never understate. */
static uint64_t
hist_bucket_high_ns(unsigned idx)
{
    if (idx < BENCH_HIST_SUB_COUNT)
        return idx;
    unsigned exp = idx / BENCH_HIST_SUB_COUNT - 1 + BENCH_HIST_SUB_BITS;
    uint64_t sub = idx % BENCH_HIST_SUB_COUNT;
    uint64_t width = 1ull << (exp - BENCH_HIST_SUB_BITS);
    return (1ull << exp) + (sub + 1) * width - 1;
}

void
bench_hist_record(bench_hist_t *h, uint64_t ns)
{
    h->buckets[hist_index(ns)]++;
    h->count++;
    h->sum_ns += ns;
    if (ns > h->max_ns)
        h->max_ns = ns;
}

void
bench_hist_merge(bench_hist_t *into, const bench_hist_t *from)
{
    for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++)
        into->buckets[i] += from->buckets[i];
    into->count += from->count;
    into->sum_ns += from->sum_ns;
    if (from->max_ns > into->max_ns)
        into->max_ns = from->max_ns;
}

uint64_t
bench_hist_quantile(const bench_hist_t *h, double q)
{
    if (h->count == 0)
        return 0;
    if (q < 0)
        q = 0;
    if (q > 1)
        q = 1;
    uint64_t rank = (uint64_t)(q * (double)h->count + 0.5);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t high = hist_bucket_high_ns(i);
            return high < h->max_ns ? high : h->max_ns;
        }
    }
    return h->max_ns;
}

int
bench_hist_write_cdf(const bench_hist_t *h, FILE *out)
{
    uint64_t seen = 0;
    for (unsigned i = 0; i < BENCH_HIST_BUCKETS && h->count > 0; i++) {
        if (h->buckets[i] == 0)
            continue;
        seen += h->buckets[i];
        uint64_t high = hist_bucket_high_ns(i);
        if (high > h->max_ns)
            high = h->max_ns;
        if (fprintf(out, "%.3f %.6f\n", (double)high / 1000.0, (double)seen / (double)h->count) < 0)
            return -1;
    }
    return 0;
}
