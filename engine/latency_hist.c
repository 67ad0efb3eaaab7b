/*
 * latency_hist.c: reading latency_hist.h's buckets back as values and percentiles. Owns no
 * state, thread or lock: the histogram is the caller's (commit.c keeps the append-to-durable
 * latencies in one), and adding is inline in the header.
 */
#include "latency_hist.h"

#define LATENCY_HIST_NS_PER_US 1000u

uint64_t
latency_hist_bucket_mid_ns(unsigned bucket)
{
    if (bucket < LATENCY_HIST_SUB_BUCKETS)
        return bucket;
    unsigned msb = (bucket >> LATENCY_HIST_SUB_BITS) + LATENCY_HIST_SUB_BITS - 1;
    uint64_t sub = bucket & (LATENCY_HIST_SUB_BUCKETS - 1);
    uint64_t width = 1ull << (msb - LATENCY_HIST_SUB_BITS);
    uint64_t low = (LATENCY_HIST_SUB_BUCKETS + sub) * width;
    return low + width / 2;
}

/* The value below which `fraction` of the `total` samples in counts lie, in microseconds. */
static uint64_t
latency_hist_percentile_us(const uint64_t *counts, uint64_t total, double fraction)
{
    if (total == 0)
        return 0;
    uint64_t rank = (uint64_t)((double)total * fraction);
    if (rank >= total)
        rank = total - 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < LATENCY_HIST_BUCKETS; b++) {
        seen += counts[b];
        if (seen > rank)
            return latency_hist_bucket_mid_ns(b) / LATENCY_HIST_NS_PER_US;
    }
    return latency_hist_bucket_mid_ns(LATENCY_HIST_BUCKETS - 1) / LATENCY_HIST_NS_PER_US;
}

void
latency_hist_percentiles_us(const latency_hist_t *h, const double *fractions, uint64_t *out_us,
                            size_t n)
{
    uint64_t counts[LATENCY_HIST_BUCKETS];
    uint64_t total = 0;
    for (unsigned b = 0; b < LATENCY_HIST_BUCKETS; b++) {
        counts[b] = atomic_load_explicit(&h->counts[b], memory_order_relaxed);
        total += counts[b];
    }
    for (size_t i = 0; i < n; i++)
        out_us[i] = latency_hist_percentile_us(counts, total, fractions[i]);
}
