/*
 * bench_probe.c: `stele-bench --probe DIR`, a short look at a disk before choosing knobs.
 *
 * Three measurements in a scratch directory under DIR, removed afterwards: the latency
 * distribution of a 4 KiB pwrite + fdatasync on a preallocated file (what one durable
 * commit costs), the same for a 256 KiB write (how a commit's cost grows with batch size),
 * and the sequential bandwidth of 1 MiB writes with one sync at the end. From them it
 * guesses what the device is (a cache that acknowledges at once, flash with a real flush,
 * a rotating disk) and prints commit_interval_us / sync settings for a latency or a
 * throughput target, with the rates they should give.
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROBE_FILE_BYTES (64ull * 1024 * 1024)
#define PROBE_SMALL_BYTES 4096
#define PROBE_BIG_BYTES (256 * 1024)
#define PROBE_SEQ_CHUNK (1024 * 1024)
#define PROBE_SEQ_MAX_BYTES (512ull * 1024 * 1024)

/* pwrite + fdatasync of `chunk` bytes, sequentially, for `seconds`. */
static int
probe_is_interrupted(atomic_int *interrupted)
{
    return interrupted && atomic_load(interrupted);
}

static int
probe_sync_loop(int fd, size_t chunk, double seconds, bench_hist_t *h, atomic_int *interrupted)
{
    char *buf = malloc(chunk);
    if (!buf)
        return -ENOMEM;
    memset(buf, 'p', chunk);
    uint64_t end = bench_now_ns() + (uint64_t)(seconds * 1e9);
    uint64_t off = 0;
    int rc = 0;
    while (!rc && bench_now_ns() < end) {
        uint64_t t0 = bench_now_ns();
        if (pwrite(fd, buf, chunk, (off_t)off) != (ssize_t)chunk || fdatasync(fd) != 0)
            rc = -errno;
        bench_hist_record(h, bench_now_ns() - t0);
        off = (off + chunk) % (PROBE_FILE_BYTES - chunk);
        if (probe_is_interrupted(interrupted))
            rc = -EINTR;
    }
    free(buf);
    return rc;
}

/* Sequential 1 MiB writes for about `seconds`, then one fdatasync; MB/s. */
static double
probe_bandwidth(const char *path, double seconds, atomic_int *interrupted)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    char *buf = malloc(PROBE_SEQ_CHUNK);
    double mb_s = 0;
    if (fd >= 0 && buf) {
        memset(buf, 's', PROBE_SEQ_CHUNK);
        uint64_t t0 = bench_now_ns(), end = t0 + (uint64_t)(seconds * 1e9), written = 0;
        while (bench_now_ns() < end && written < PROBE_SEQ_MAX_BYTES &&
               !probe_is_interrupted(interrupted) &&
               write(fd, buf, PROBE_SEQ_CHUNK) == PROBE_SEQ_CHUNK)
            written += PROBE_SEQ_CHUNK;
        if (fdatasync(fd) == 0)
            mb_s = (double)written / 1e6 / ((double)(bench_now_ns() - t0) / 1e9);
    }
    free(buf);
    if (fd >= 0)
        close(fd);
    unlink(path);
    return mb_s;
}

static int
probe_prealloc(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    char *zeros = calloc(1, PROBE_SEQ_CHUNK);
    int rc = zeros ? 0 : -ENOMEM;
    for (uint64_t off = 0; !rc && off < PROBE_FILE_BYTES; off += PROBE_SEQ_CHUNK)
        if (pwrite(fd, zeros, PROBE_SEQ_CHUNK, (off_t)off) != PROBE_SEQ_CHUNK)
            rc = -errno;
    free(zeros);
    if (!rc && fsync(fd) != 0)
        rc = -errno;
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

static const char *
probe_classify(double p50_us, double p99_us)
{
    if (p50_us < 150)
        return "acknowledges flushes at once: a write-back cache (battery-backed, or a device "
               "or hypervisor that does not flush); durability then rests on that cache";
    if (p50_us < 2000)
        return "flash-like: a real flush costs well under a millisecond";
    if (p99_us < 30000)
        return "rotating-disk-like: a flush costs milliseconds (a platter turn is 8.3 ms at "
               "7200 rpm, 11.1 ms at 5400 rpm)";
    return "slow and erratic flushes: a busy, remote or throttled device";
}

static void
probe_advise(double p50_us, double big_p50_us, double mb_s)
{
    double lone_rate = 1e6 / p50_us;
    printf("\nrecommended settings:\n");
    printf("  latency target: sync=always commit_interval_us=0 (adaptive group commit).\n"
           "    a lone durable writer should see ~%.0f appends/s at p50 ~%.0f us; N writers\n"
           "    share each sync, so the rate grows with N at about the same latency.\n",
           lone_rate, p50_us);
    double per_byte_us = (big_p50_us - p50_us) / (double)(PROBE_BIG_BYTES - PROBE_SMALL_BYTES);
    double batch_200 = per_byte_us > 0 ? p50_us / (per_byte_us * 200.0) : 0;
    printf("  throughput target: sync=always commit_interval_us=%.0f (about one flush time,\n"
           "    so busy batches grow while a lone writer still pays nothing); a 256 KiB\n"
           "    batch syncs in ~%.0f us, so about %.0f records of 200 B fit in one before the\n"
           "    transfer costs as much as the flush itself.\n",
           p50_us, big_p50_us, batch_200 > 0 ? batch_200 : 0.0);
    printf("  if losing up to a second on power loss is acceptable: sync=interval\n"
           "    sync_interval_ms=1000 with wait=written; the ceiling is then the encoding\n"
           "    rate and the disk's %.0f MB/s (about %.0f events of 200 B per second).\n",
           mb_s, mb_s * 1e6 / 200.0);
}

static void
probe_report_hist(const char *what, const bench_hist_t *h)
{
    printf("  %-28s n=%-7llu p50 %8.0f us  p90 %8.0f us  p99 %8.0f us  p99.9 %8.0f us  max "
           "%8.0f us\n",
           what, (unsigned long long)h->count, bench_hist_quantile(h, 0.5) / 1e3,
           bench_hist_quantile(h, 0.9) / 1e3, bench_hist_quantile(h, 0.99) / 1e3,
           bench_hist_quantile(h, 0.999) / 1e3, (double)h->max_ns / 1e3);
}

int
bench_probe(const char *dir, double seconds, atomic_int *interrupted)
{
    char scratch[BENCH_PATH_BYTES], path[BENCH_PATH_BYTES + 32];
    int rc = bench_make_temp_dir(dir, "stele-probe", scratch, sizeof scratch);
    if (rc) {
        fprintf(stderr, "stele-bench: could not create a directory in %s: %s\n", dir,
                strerror(-rc));
        return rc;
    }
    bench_hist_t *small = calloc(1, sizeof *small), *big = calloc(1, sizeof *big);
    snprintf(path, sizeof path, "%s/probe.dat", scratch);
    int fd = (small && big) ? probe_prealloc(path) : -ENOMEM;
    rc = fd < 0 ? fd : 0;
    printf("probing %s for ~%.0f s\n", dir, seconds);
    rc = rc ? rc : probe_sync_loop(fd, PROBE_SMALL_BYTES, seconds * 0.5, small, interrupted);
    rc = rc ? rc : probe_sync_loop(fd, PROBE_BIG_BYTES, seconds * 0.25, big, interrupted);
    if (fd >= 0)
        close(fd);
    unlink(path);
    double mb_s = rc ? 0 : probe_bandwidth(path, seconds * 0.25, interrupted);
    if (!rc && probe_is_interrupted(interrupted))
        rc = -EINTR;
    if (!rc) {
        probe_report_hist("4 KiB write + fdatasync:", small);
        probe_report_hist("256 KiB write + fdatasync:", big);
        printf("  sequential write bandwidth:  %.0f MB/s\n", mb_s);
        double p50 = bench_hist_quantile(small, 0.5) / 1e3;
        printf("\ndevice: %s\n", probe_classify(p50, bench_hist_quantile(small, 0.99) / 1e3));
        probe_advise(p50 > 1 ? p50 : 1, bench_hist_quantile(big, 0.5) / 1e3, mb_s);
    } else if (rc != -EINTR) {
        fprintf(stderr, "stele-bench: probe of %s failed: %s\n", dir, strerror(-rc));
    }
    free(small);
    free(big);
    bench_remove_tree(scratch);
    return rc;
}
