/*
 * latency_hist.h: a histogram of latencies in nanoseconds, read back as percentiles.
 *
 * Buckets are log-linear: LATENCY_HIST_SUB_BUCKETS per power of two, so each is at most
 * 1/8 of its values wide (a percentile is within about 6% of the true one) and the whole
 * range of uint64_t fits a fixed array: adding is one count, with no allocation and no lock.
 * Counts are relaxed atomics: any thread may add or read at any time; a reader sees every
 * count whole, though not necessarily every sample of a batch being added.
 */
#ifndef STELE_ENGINE_LATENCY_HIST_H
#define STELE_ENGINE_LATENCY_HIST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LATENCY_HIST_SUB_BITS 3
#define LATENCY_HIST_SUB_BUCKETS (1u << LATENCY_HIST_SUB_BITS)
#define LATENCY_HIST_BUCKETS (64u << LATENCY_HIST_SUB_BITS)

typedef struct latency_hist {
    _Atomic uint64_t counts[LATENCY_HIST_BUCKETS];
} latency_hist_t;

/* The bucket of ns: values below LATENCY_HIST_SUB_BUCKETS have one each; above, the bits
 * after the highest set bit pick one of the power of two's sub-buckets. */
static inline unsigned
latency_hist_bucket(uint64_t ns)
{
    if (ns < LATENCY_HIST_SUB_BUCKETS)
        return (unsigned)ns;
    unsigned msb = 63u - (unsigned)__builtin_clzll(ns);
    unsigned sub = (unsigned)(ns >> (msb - LATENCY_HIST_SUB_BITS)) & (LATENCY_HIST_SUB_BUCKETS - 1);
    return ((msb - LATENCY_HIST_SUB_BITS + 1) << LATENCY_HIST_SUB_BITS) + sub;
}

/* Counts `weight` samples of ns. Inline: the commit path adds up to a batch's samples
 * while it holds the journal. */
static inline void
latency_hist_add(latency_hist_t *h, uint64_t ns, uint64_t weight)
{
    atomic_fetch_add_explicit(&h->counts[latency_hist_bucket(ns)], weight, memory_order_relaxed);
}

/* The middle of a bucket's range of values, in nanoseconds. */
uint64_t latency_hist_bucket_mid_ns(unsigned bucket);

/* Fills out_us[i] with the fractions[i] percentile (0 <= fraction <= 1) in microseconds,
 * all from one reading of the counts; 0s while the histogram is empty. */
void latency_hist_percentiles_us(const latency_hist_t *h, const double *fractions, uint64_t *out_us,
                                 size_t n);

#endif /* STELE_ENGINE_LATENCY_HIST_H */
