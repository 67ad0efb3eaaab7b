/*
 * perf_journal.c: the journal's measurements for docs/journal.md (not a ctest test: the
 * figures depend on the disk, and the machine is shared).
 *
 *   perf_journal append   [--dir D] [--records N] [--rounds R] [--payload B]
 *       single-thread append + fdatasync through the journal against a plain pwrite +
 *       fdatasync loop on a preallocated file, same record size, rounds interleaved
 *       (A B A B ...) in one run; prints records/s of each and the ratio.
 *   perf_journal prealloc [--dir D] [--records N] [--rounds R]
 *       the plain loop into a zero-filled file against a fallocate-only file.
 *   perf_journal recovery [--dir D] [--gib G]
 *       fills a journal of G GiB (64 MiB segments, newest nearly full: the worst case for
 *       the tail scan), closes it, and times journal_open with and without an index hint.
 *
 * The directory defaults to $TMPDIR (else /tmp); everything made is removed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "journal.h"

enum { PERF_SEGMENT_BYTES = 64 * 1024 * 1024 };

typedef struct perf_args {
    const char *base;
    uint64_t records;
    int rounds;
    uint32_t payload_bytes;
    double gib;
    int publish; /* 0 with --no-publish: leave out the readers' wake-up (for comparison) */
    int direct;  /* 1 with --direct: the journal writes with O_DIRECT (direct_writes) */
} perf_args_t;

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static char *
make_dir(const perf_args_t *a, const char *tag)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/stele-perf-%s-XXXXXX", a->base, tag);
    if (!mkdtemp(buf)) {
        perror("mkdtemp");
        exit(1);
    }
    return strdup(buf);
}

static void
remove_dir(char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static void
die(const char *what, int rc, const stele_error_t *err)
{
    fprintf(stderr, "%s failed (%d): %s\n", what, rc, err ? err->message : strerror(-rc));
    exit(1);
}

/* The journal side of the comparison: an open journal, one record per batch and sync. */
typedef struct journal_side {
    char *dir;
    journal_t *j;
    uint8_t *payload, *frame;
    size_t frame_bytes;
} journal_side_t;

static void
journal_side_open(journal_side_t *js, const perf_args_t *a, int zero_fill)
{
    js->dir = make_dir(a, "journal");
    journal_options_t o;
    journal_options_init(&o);
    o.source = "perf";
    o.zero_fill = zero_fill;
    o.direct_writes = a->direct;
    stele_error_t err = {0};
    int rc = journal_open(js->dir, &o, &js->j, NULL, &err);
    if (rc)
        die("journal_open", rc, &err);
    /* The preparer starts on the next segment only once the active one is a quarter full
     * (16 MiB here), far beyond what a measurement writes, so none of its zero-filling
     * lands in the measurement. */
    js->frame_bytes = journal_frame_bytes(journal_version(js->j), a->payload_bytes);
    js->payload = calloc(1, a->payload_bytes);
    js->frame = calloc(1, js->frame_bytes);
    memset(js->payload, 'x', a->payload_bytes);
}

/* n x (append one record + fdatasync); returns seconds. */
static double
journal_side_run(journal_side_t *js, const perf_args_t *a, uint64_t n)
{
    stele_error_t err = {0};
    double t0 = now_s();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t seq = journal_last_seq(js->j) + 1;
        journal_frame_prepare(journal_version(js->j), js->frame, seq, (int64_t)seq, NULL,
                              js->payload, a->payload_bytes);
        int rc = journal_append_batch(js->j, js->frame, js->frame_bytes, NULL, &err);
        if (!rc)
            rc = journal_sync(js->j, &err);
        if (rc)
            die("append+sync", rc, &err);
        if (a->publish)
            journal_publish(js->j, seq, seq);
    }
    return now_s() - t0;
}

static void
journal_side_close(journal_side_t *js)
{
    journal_close(js->j, NULL);
    free(js->payload);
    free(js->frame);
    remove_dir(js->dir);
}

/* The baseline: the same bytes with pwrite + fdatasync into a preallocated file. */
typedef struct plain_side {
    char *dir;
    int fd;
    char *buf;
    size_t write_bytes;
    off_t off;
} plain_side_t;

static void
plain_side_open(plain_side_t *ps, const perf_args_t *a, int zero_fill, size_t write_bytes)
{
    ps->dir = make_dir(a, "plain");
    char path[4200];
    snprintf(path, sizeof path, "%s/file", ps->dir);
    ps->fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (ps->fd < 0)
        die("open", -errno, NULL);
    if (zero_fill) {
        char *zeros = calloc(1, 1 << 20);
        for (off_t off = 0; off < PERF_SEGMENT_BYTES; off += 1 << 20)
            if (pwrite(ps->fd, zeros, 1 << 20, off) != 1 << 20)
                die("pwrite zeros", -errno, NULL);
        free(zeros);
    } else if (posix_fallocate(ps->fd, 0, PERF_SEGMENT_BYTES) != 0) {
        die("posix_fallocate", -EIO, NULL);
    }
    if (fsync(ps->fd) != 0)
        die("fsync", -errno, NULL);
    ps->write_bytes = write_bytes;
    ps->buf = calloc(1, write_bytes);
    memset(ps->buf, 'x', write_bytes);
    ps->off = 4096;
}

static double
plain_side_run(plain_side_t *ps, uint64_t n)
{
    double t0 = now_s();
    for (uint64_t i = 0; i < n; i++) {
        if (ps->off + (off_t)ps->write_bytes > PERF_SEGMENT_BYTES)
            ps->off = 4096;
        if (pwrite(ps->fd, ps->buf, ps->write_bytes, ps->off) != (ssize_t)ps->write_bytes ||
            fdatasync(ps->fd) != 0)
            die("pwrite+fdatasync", -errno, NULL);
        ps->off += (off_t)ps->write_bytes;
    }
    return now_s() - t0;
}

static void
plain_side_close(plain_side_t *ps)
{
    close(ps->fd);
    free(ps->buf);
    remove_dir(ps->dir);
}

static int
cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double
median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Blocks of `records` operations alternate between the two sides, `rounds` times each, so
 * both see the same moments of a shared, noisy disk; totals give the ratio. */
static void
perf_append(const perf_args_t *a)
{
    journal_side_t js;
    plain_side_t ps;
    journal_side_open(&js, a, 1);
    plain_side_open(&ps, a, 1, js.frame_bytes);
    printf("append: %d rounds of %" PRIu64 " records of %u payload bytes (%zu-byte frames), "
           "journal and plain loop alternating\n",
           a->rounds, a->records, a->payload_bytes, js.frame_bytes);
    double jt = 0, pt = 0, ratios[64];
    journal_side_run(&js, a, a->records / 4 + 1); /* warm-up, not counted */
    plain_side_run(&ps, a->records / 4 + 1);
    for (int r = 0; r < a->rounds; r++) {
        /* A B, then B A: whichever goes first after a switch pays for it equally. */
        double j_s, p_s;
        if (r % 2 == 0) {
            j_s = journal_side_run(&js, a, a->records);
            p_s = plain_side_run(&ps, a->records);
        } else {
            p_s = plain_side_run(&ps, a->records);
            j_s = journal_side_run(&js, a, a->records);
        }
        jt += j_s;
        pt += p_s;
        ratios[r] = p_s / j_s;
        printf("  round %2d: journal %6.0f/s  plain %6.0f/s  ratio %.3f\n", r + 1,
               (double)a->records / j_s, (double)a->records / p_s, ratios[r]);
    }
    uint64_t total = a->records * (uint64_t)a->rounds;
    printf("total: journal %.0f records/s, plain pwrite+fdatasync %.0f/s; ratio of totals %.3f, "
           "median round ratio %.3f\n",
           (double)total / jt, (double)total / pt, pt / jt, median(ratios, a->rounds));
    journal_side_close(&js);
    plain_side_close(&ps);
}

static void
perf_prealloc(const perf_args_t *a)
{
    plain_side_t zs, fs;
    size_t write_bytes = journal_frame_bytes(FORMAT_VERSION, a->payload_bytes);
    plain_side_open(&zs, a, 1, write_bytes);
    plain_side_open(&fs, a, 0, write_bytes);
    printf("prealloc: %d rounds of %" PRIu64 " x (pwrite %zu bytes + fdatasync), alternating\n",
           a->rounds, a->records, write_bytes);
    double zt = 0, ft = 0;
    for (int r = 0; r < a->rounds; r++) {
        double z_s, f_s;
        if (r % 2 == 0) {
            z_s = plain_side_run(&zs, a->records);
            f_s = plain_side_run(&fs, a->records);
        } else {
            f_s = plain_side_run(&fs, a->records);
            z_s = plain_side_run(&zs, a->records);
        }
        zt += z_s;
        ft += f_s;
        printf("  round %2d: zero-filled %6.0f/s  fallocate-only %6.0f/s\n", r + 1,
               (double)a->records / z_s, (double)a->records / f_s);
    }
    uint64_t total = a->records * (uint64_t)a->rounds;
    printf("total: zero-filled %.0f/s, fallocate-only %.0f/s (fallocate/zero %.3f)\n",
           (double)total / zt, (double)total / ft, zt / ft);
    plain_side_close(&zs);
    plain_side_close(&fs);
}

static double
cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

/* Wall time of journal_open; *cpu_out gets the CPU time it used (on a loaded machine the
 * CPU time is what the scan costs, the wall time what it costs there and then). */
static double
time_open(const char *dir, const journal_options_t *o, journal_recovery_t *rec, double *cpu_out)
{
    journal_t *j = NULL;
    stele_error_t err = {0};
    double c0 = cpu_s(), t0 = now_s();
    int rc = journal_open(dir, o, &j, rec, &err);
    double dt = now_s() - t0;
    *cpu_out = cpu_s() - c0;
    if (rc)
        die("journal_open", rc, &err);
    journal_close(j, NULL);
    return dt;
}

static void
perf_recovery(const perf_args_t *a)
{
    char *dir = make_dir(a, "recovery");
    journal_options_t o;
    journal_options_init(&o);
    o.source = "perf";
    journal_t *j = NULL;
    stele_error_t err = {0};
    int rc = journal_open(dir, &o, &j, NULL, &err);
    if (rc)
        die("journal_open", rc, &err);
    enum { BATCH = 256 };
    size_t frame_bytes = journal_frame_bytes(journal_version(j), a->payload_bytes);
    uint8_t *payload = calloc(1, a->payload_bytes), *batch = calloc(BATCH, frame_bytes);
    memset(payload, 'y', a->payload_bytes);
    uint64_t target = (uint64_t)(a->gib * 1024 * 1024 * 1024);
    uint64_t n_segments_target = target / PERF_SEGMENT_BYTES;
    uint64_t segments = 1, written = 0;
    journal_batch_info_t info = {0}, last_batch = {0};
    double t0 = now_s();
    for (int is_last = 0;;) {
        uint64_t seq = journal_last_seq(j) + 1;
        for (int i = 0; i < BATCH; i++)
            journal_frame_prepare(journal_version(j), batch + (size_t)i * frame_bytes,
                                  seq + (uint64_t)i, (int64_t)(seq + (uint64_t)i), NULL, payload,
                                  a->payload_bytes);
        rc = journal_append_batch(j, batch, BATCH * frame_bytes, &info, &err);
        if (rc)
            die("append", rc, &err);
        written += BATCH * frame_bytes;
        segments += info.rolled ? 1 : 0;
        last_batch = info;
        if (is_last)
            break;
        /* Stop with the newest segment nearly full: recovery scans all of it. The last
         * batch follows a sync, as with sync=always: a hint to a batch written before the
         * records ahead of it were synced is refused (FORMAT.md 7). */
        if (segments >= n_segments_target &&
            info.offset + 3 * BATCH * frame_bytes > PERF_SEGMENT_BYTES) {
            rc = journal_sync(j, &err);
            if (rc)
                die("sync", rc, &err);
            is_last = 1;
        }
    }
    rc = journal_close(j, &err);
    if (rc)
        die("journal_close", rc, &err);
    printf("recovery: filled %.2f GiB of records in %" PRIu64 " segments (%.1f s)\n",
           (double)written / (1024.0 * 1024 * 1024), segments, now_s() - t0);
    journal_recovery_t rec;
    double cold_cpu, full[5], full_cpu[5], hinted[5], hinted_cpu[5];
    double cold = time_open(dir, &o, &rec, &cold_cpu);
    for (int i = 0; i < 5; i++)
        full[i] = time_open(dir, &o, &rec, &full_cpu[i]);
    printf("open without hint: first %.3f s (cpu %.3f s), median %.3f s (cpu %.3f s); scanned "
           "%.1f MiB, last seq %" PRIu64 "\n",
           cold, cold_cpu, median(full, 5), median(full_cpu, 5),
           (double)rec.scanned_bytes / (1024.0 * 1024), rec.last_seq);
    o.hint_seq = last_batch.first_seq;
    o.hint_segment_seq = last_batch.segment_seq;
    o.hint_offset = last_batch.offset;
    for (int i = 0; i < 5; i++)
        hinted[i] = time_open(dir, &o, &rec, &hinted_cpu[i]);
    printf("open with the index hint: median %.3f s (cpu %.3f s); scanned %.1f MiB\n",
           median(hinted, 5), median(hinted_cpu, 5), (double)rec.scanned_bytes / (1024.0 * 1024));
    free(payload);
    free(batch);
    remove_dir(dir);
}

int
main(int argc, char **argv)
{
    const char *tmp = getenv("TMPDIR");
    perf_args_t a = {.base = tmp && *tmp ? tmp : "/tmp",
                     .records = 200,
                     .rounds = 10,
                     .payload_bytes = 200,
                     .gib = 1.0,
                     .publish = 1};
    if (argc < 2) {
        fprintf(stderr,
                "usage: %s append|prealloc|recovery [--dir D] [--records N] "
                "[--rounds R] [--payload B] [--gib G] [--no-publish] [--direct]\n",
                argv[0]);
        return 2;
    }
    for (int i = 2; i < argc; i += 2) {
        if (strcmp(argv[i], "--no-publish") == 0) {
            a.publish = 0;
            i--;
            continue;
        }
        if (strcmp(argv[i], "--direct") == 0) {
            a.direct = 1;
            i--;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "option %s needs a value\n", argv[i]);
            return 2;
        }
        if (strcmp(argv[i], "--dir") == 0)
            a.base = argv[i + 1];
        else if (strcmp(argv[i], "--records") == 0)
            a.records = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--rounds") == 0)
            a.rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--payload") == 0)
            a.payload_bytes = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--gib") == 0)
            a.gib = strtod(argv[i + 1], NULL);
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (a.rounds < 1 || a.rounds > 64 || a.records == 0 || a.payload_bytes == 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    if (strcmp(argv[1], "append") == 0)
        perf_append(&a);
    else if (strcmp(argv[1], "prealloc") == 0)
        perf_prealloc(&a);
    else if (strcmp(argv[1], "recovery") == 0)
        perf_recovery(&a);
    else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
