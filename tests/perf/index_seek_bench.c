/*
 * index_seek_bench.c: what the LMDB index buys a reader. Writes N records through the
 * engine into a fresh journal under $TMPDIR, then times random stele_reader_seek_seq and
 * stele_reader_seek_time calls with the index and again with the index moved away (the
 * reader then scans from the segment start). Not a test: run it by hand,
 *   build/tests/index_seek_bench [records=1000000] [seeks=200]
 * and it prints one line per mode. Every seek is checked to land where it should.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stele.h"
#include "test_util.h"

static double
bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
bench_write(const char *dir, long n_records)
{
    stele_options_t opts;
    stele_options_init(&opts);
    opts.sync = STELE_SYNC_NEVER; /* the write is set-up, not what is measured */
    stele_t *db = NULL;
    stele_error_t err;
    if (stele_open(dir, &opts, &db, &err) != 0) {
        fprintf(stderr, "open: %s\n", err.message);
        return 1;
    }
    char json[160];
    for (long i = 1; i <= n_records; i++) {
        int len = snprintf(json, sizeof json,
                           "{\"actor\":\"user-%ld\",\"action\":\"read\",\"object\":\"doc-%ld\"}",
                           i % 977, i);
        stele_wait_t wait = i % 1000 ? STELE_WAIT_NONE : STELE_WAIT_WRITTEN;
        if (stele_append_json(db, json, (size_t)len, wait, NULL, &err) != 0) {
            fprintf(stderr, "append: %s\n", err.message);
            stele_close(db, NULL);
            return 1;
        }
    }
    return stele_close(db, &err) != 0;
}

/* Times n_seeks seeks of each kind at random targets; prints one line. */
static int
bench_seeks(const char *dir, long n_records, int n_seeks, const char *label)
{
    stele_reader_t *r = NULL;
    stele_error_t err;
    stele_record_t rec;
    if (stele_reader_open(dir, &r, &err) != 0) {
        fprintf(stderr, "reader: %s\n", err.message);
        return 1;
    }
    test_rng_t rng;
    test_rng_init(&rng, 1);
    int64_t *ts = calloc((size_t)n_seeks, sizeof *ts);
    int rc = ts ? 0 : 1;
    double t0 = bench_now_s();
    for (int i = 0; i < n_seeks && rc == 0; i++) {
        uint64_t seq = 1 + test_rng_below(&rng, (uint64_t)n_records);
        if (stele_reader_seek_seq(r, seq, &err) != 0 || stele_reader_next(r, &rec, 0, &err) != 0 ||
            rec.seq != seq)
            rc = 1;
        ts[i] = rec.ts_ns;
    }
    double t1 = bench_now_s();
    for (int i = 0; i < n_seeks && rc == 0; i++) {
        if (stele_reader_seek_time(r, ts[i], &err) != 0 ||
            stele_reader_next(r, &rec, 0, &err) != 0 || rec.ts_ns < ts[i])
            rc = 1;
    }
    double t2 = bench_now_s();
    if (rc)
        fprintf(stderr, "%s: a seek went wrong: %s\n", label, err.message);
    else
        printf("%-14s seek_seq %8.3f ms   seek_time %8.3f ms   (mean of %d, %ld records)\n", label,
               (t1 - t0) * 1e3 / n_seeks, (t2 - t1) * 1e3 / n_seeks, n_seeks, n_records);
    free(ts);
    stele_reader_close(r);
    return rc;
}

int
main(int argc, char **argv)
{
    long n_records = argc > 1 ? atol(argv[1]) : 1000000;
    int n_seeks = argc > 2 ? atoi(argv[2]) : 200;
    if (n_records < 1 || n_seeks < 1) {
        fprintf(stderr, "usage: %s [records] [seeks]\n", argv[0]);
        return 2;
    }
    char *dir = test_tmpdir_new("seek-bench");
    if (!dir) {
        fprintf(stderr, "could not make a temp directory: %s\n", strerror(errno));
        return 1;
    }
    char *index_dir = test_path_join(dir, "index");
    char *aside = test_path_join(dir, "index.aside");
    int rc = !index_dir || !aside || bench_write(dir, n_records);
    if (rc == 0)
        rc = bench_seeks(dir, n_records, n_seeks, "with index");
    if (rc == 0 && rename(index_dir, aside) != 0)
        rc = 1;
    if (rc == 0)
        rc = bench_seeks(dir, n_records, n_seeks, "without index");
    free(index_dir);
    free(aside);
    test_tmpdir_remove(dir);
    return rc;
}
