/*
 * test_index.c: the LMDB index (engine/index*.c): batch starts by seq and by time, truncation
 * and deletion keeping both tables in step, meta, checkpoints, dead letters, reopening,
 * read-only opens, a corrupt environment being moved aside, and the write-fault seam.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <limits.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "index.h"

typedef struct fixture {
    char dir[64];
    index_t *ix;
} fixture_t;

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int
setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/stele-index-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    assert_non_null(mkdtemp(f->dir));
    stele_error_t err;
    assert_int_equal(index_open(f->dir, 1, 0600, &f->ix, &err), 0);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture_t *f = *state;
    index_close(f->ix);
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static index_batch_t
batch(uint64_t seq, uint64_t segment_seq, uint64_t offset, int64_t ts)
{
    index_batch_t b = {
        .first_seq = seq, .segment_seq = segment_seq, .offset = offset, .first_ts_ns = ts};
    return b;
}

/* Batches at seqs 1, 11, 21, ... with ts = 1000 * seq, two per segment of 20 records. */
static void
put_ladder(index_t *ix, size_t n)
{
    index_batch_t *b = calloc(n, sizeof *b);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++) {
        uint64_t seq = 1 + 10 * i;
        b[i] = batch(seq, 1 + 20 * (i / 2), 64 + 512 * (i % 2), (int64_t)(1000 * seq));
    }
    stele_error_t err;
    assert_int_equal(index_put_batches(ix, b, n, &err), 0);
    free(b);
}

static void
test_index_find_seq_returns_batch_at_or_before(void **state)
{
    fixture_t *f = *state;
    put_ladder(f->ix, 4); /* 1, 11, 21, 31 */
    index_batch_t b;
    assert_int_equal(index_find_seq(f->ix, 1, &b, NULL), 0);
    assert_int_equal(b.first_seq, 1);
    assert_int_equal(index_find_seq(f->ix, 15, &b, NULL), 0);
    assert_int_equal(b.first_seq, 11);
    assert_int_equal(b.segment_seq, 1);
    assert_int_equal(b.offset, 64 + 512);
    assert_int_equal(b.first_ts_ns, 11000);
    assert_int_equal(index_find_seq(f->ix, 21, &b, NULL), 0);
    assert_int_equal(b.first_seq, 21);
    assert_int_equal(b.segment_seq, 21);
    assert_int_equal(index_find_seq(f->ix, 1000000, &b, NULL), 0);
    assert_int_equal(b.first_seq, 31);
    assert_int_equal(index_find_seq(f->ix, 0, &b, NULL), STELE_ENOTFOUND);
}

static void
test_index_lookups_on_empty_index_say_not_found(void **state)
{
    fixture_t *f = *state;
    index_batch_t b;
    assert_int_equal(index_find_seq(f->ix, 5, &b, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_find_time(f->ix, 5, &b, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_last_batch(f->ix, &b, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_first_batch(f->ix, &b, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_find_next(f->ix, 0, &b, NULL), STELE_ENOTFOUND);
}

static void
test_index_first_last_and_next_walk_in_seq_order(void **state)
{
    fixture_t *f = *state;
    /* Inserted out of order: LMDB's order must be numeric, across byte boundaries. */
    index_batch_t b[] = {batch(300, 1, 0, 3), batch(2, 1, 0, 1), batch(70000, 1, 0, 4),
                         batch(256, 1, 0, 2)};
    assert_int_equal(index_put_batches(f->ix, b, 4, NULL), 0);
    index_batch_t got;
    assert_int_equal(index_first_batch(f->ix, &got, NULL), 0);
    assert_int_equal(got.first_seq, 2);
    assert_int_equal(index_last_batch(f->ix, &got, NULL), 0);
    assert_int_equal(got.first_seq, 70000);
    uint64_t want[] = {2, 256, 300, 70000};
    uint64_t at = 0;
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(index_find_next(f->ix, at, &got, NULL), 0);
        assert_int_equal(got.first_seq, want[i]);
        at = got.first_seq + 1;
    }
    assert_int_equal(index_find_next(f->ix, at, &got, NULL), STELE_ENOTFOUND);
}

static void
test_index_find_time_returns_last_batch_strictly_before(void **state)
{
    fixture_t *f = *state;
    put_ladder(f->ix, 4); /* ts 1000, 11000, 21000, 31000 */
    index_batch_t b;
    assert_int_equal(index_find_time(f->ix, 500, &b, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_find_time(f->ix, 1000, &b, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_find_time(f->ix, 1001, &b, NULL), 0);
    assert_int_equal(b.first_seq, 1);
    assert_int_equal(index_find_time(f->ix, 21000, &b, NULL), 0);
    assert_int_equal(b.first_seq, 11);
    assert_int_equal(index_find_time(f->ix, 25000, &b, NULL), 0);
    assert_int_equal(b.first_seq, 21);
    assert_int_equal(index_find_time(f->ix, INT64_MAX, &b, NULL), 0);
    assert_int_equal(b.first_seq, 31);
}

static void
test_index_find_time_handles_repeated_and_negative_times(void **state)
{
    fixture_t *f = *state;
    index_batch_t b[] = {batch(1, 1, 0, -50), batch(5, 1, 100, 7), batch(9, 1, 200, 7),
                         batch(12, 1, 300, 7), batch(20, 1, 400, 9)};
    assert_int_equal(index_put_batches(f->ix, b, 5, NULL), 0);
    index_batch_t got;
    assert_int_equal(index_find_time(f->ix, INT64_MIN, &got, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_find_time(f->ix, -49, &got, NULL), 0);
    assert_int_equal(got.first_seq, 1);
    /* Three batches start at ts 7: the first record at ts >= 7 may be in the batch before
     * them, so the answer is that batch. */
    assert_int_equal(index_find_time(f->ix, 7, &got, NULL), 0);
    assert_int_equal(got.first_seq, 1);
    assert_int_equal(index_find_time(f->ix, 8, &got, NULL), 0);
    assert_int_equal(got.first_seq, 12);
    assert_int_equal(got.offset, 300);
}

static void
test_index_rewriting_a_batch_with_a_new_time_replaces_its_time_entry(void **state)
{
    fixture_t *f = *state;
    index_batch_t b[] = {batch(1, 1, 0, 100), batch(5, 1, 64, 200)};
    assert_int_equal(index_put_batches(f->ix, b, 2, NULL), 0);
    b[1].first_ts_ns = 150;
    assert_int_equal(index_put_batches(f->ix, &b[1], 1, NULL), 0);
    index_batch_t got;
    assert_int_equal(index_find_time(f->ix, 151, &got, NULL), 0);
    assert_int_equal(got.first_seq, 5);
    assert_int_equal(got.first_ts_ns, 150);
    /* No stale entry at 200 is left to name seq 5 with its old time. */
    assert_int_equal(index_truncate_after(f->ix, 1, NULL), 0);
    assert_int_equal(index_find_time(f->ix, 1000, &got, NULL), 0);
    assert_int_equal(got.first_seq, 1);
}

static void
test_index_truncate_after_drops_later_batches_from_both_tables(void **state)
{
    fixture_t *f = *state;
    put_ladder(f->ix, 10); /* 1 .. 91 */
    assert_int_equal(index_truncate_after(f->ix, 45, NULL), 0);
    index_batch_t b;
    assert_int_equal(index_last_batch(f->ix, &b, NULL), 0);
    assert_int_equal(b.first_seq, 41);
    assert_int_equal(index_find_time(f->ix, INT64_MAX, &b, NULL), 0);
    assert_int_equal(b.first_seq, 41);
    /* A batch starting exactly at seq stays. */
    assert_int_equal(index_truncate_after(f->ix, 41, NULL), 0);
    assert_int_equal(index_last_batch(f->ix, &b, NULL), 0);
    assert_int_equal(b.first_seq, 41);
    assert_int_equal(index_truncate_after(f->ix, 0, NULL), 0);
    assert_int_equal(index_last_batch(f->ix, &b, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_find_time(f->ix, INT64_MAX, &b, NULL), STELE_ENOTFOUND);
}

static void
test_index_delete_before_drops_older_batches_from_both_tables(void **state)
{
    fixture_t *f = *state;
    put_ladder(f->ix, 10);
    assert_int_equal(index_delete_before(f->ix, 41, NULL), 0);
    index_batch_t b;
    assert_int_equal(index_first_batch(f->ix, &b, NULL), 0);
    assert_int_equal(b.first_seq, 41);
    assert_int_equal(index_find_time(f->ix, 2000, &b, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_find_time(f->ix, 42000, &b, NULL), 0);
    assert_int_equal(b.first_seq, 41);
    assert_int_equal(index_delete_before(f->ix, 0, NULL), 0);
    assert_int_equal(index_first_batch(f->ix, &b, NULL), 0);
    assert_int_equal(b.first_seq, 41);
}

static void
test_index_truncate_spanning_many_transactions_removes_everything_asked(void **state)
{
    fixture_t *f = *state;
    put_ladder(f->ix, 10000);
    assert_int_equal(index_truncate_after(f->ix, 10 * 1234, NULL), 0);
    index_batch_t b;
    assert_int_equal(index_last_batch(f->ix, &b, NULL), 0);
    assert_int_equal(b.first_seq, 10 * 1233 + 1);
    assert_int_equal(index_find_time(f->ix, INT64_MAX, &b, NULL), 0);
    assert_int_equal(b.first_seq, 10 * 1233 + 1);
    assert_int_equal(index_delete_before(f->ix, 10 * 1233 + 1, NULL), 0);
    assert_int_equal(index_first_batch(f->ix, &b, NULL), 0);
    assert_int_equal(b.first_seq, 10 * 1233 + 1);
    assert_int_equal(index_find_time(f->ix, 2000, &b, NULL), STELE_ENOTFOUND);
}

static void
test_index_clear_batches_keeps_checkpoints_and_dead_letters(void **state)
{
    fixture_t *f = *state;
    put_ladder(f->ix, 5);
    assert_int_equal(index_put_checkpoint(f->ix, "primary", 33, NULL), 0);
    assert_int_equal(index_put_dead_letter(f->ix, "primary", 7, "bad doc", NULL), 0);
    assert_int_equal(index_put_meta(f->ix, "source", "host-a", 6, NULL), 0);
    assert_int_equal(index_clear_batches(f->ix, NULL), 0);
    index_batch_t b;
    assert_int_equal(index_last_batch(f->ix, &b, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_find_time(f->ix, INT64_MAX, &b, NULL), STELE_ENOTFOUND);
    uint64_t seq = 0, count = 0;
    assert_int_equal(index_get_checkpoint(f->ix, "primary", &seq, NULL), 0);
    assert_int_equal(seq, 33);
    assert_int_equal(index_count_dead_letters(f->ix, "primary", &count, NULL), 0);
    assert_int_equal(count, 1);
    char value[16];
    size_t len = 0;
    assert_int_equal(index_get_meta(f->ix, "source", value, sizeof value, &len, NULL), 0);
    assert_int_equal(len, 6);
}

static void
test_index_meta_round_trips_and_rejects_oversize(void **state)
{
    fixture_t *f = *state;
    char value[300];
    size_t len = 0;
    stele_error_t err;
    assert_int_equal(index_get_meta(f->ix, "format", value, sizeof value, &len, NULL),
                     STELE_ENOTFOUND);
    assert_int_equal(index_put_meta(f->ix, "format", "1", 1, NULL), 0);
    assert_int_equal(index_put_meta(f->ix, "format", "22", 2, NULL), 0);
    assert_int_equal(index_get_meta(f->ix, "format", value, sizeof value, &len, NULL), 0);
    assert_int_equal(len, 2);
    assert_memory_equal(value, "22", 2);
    /* A small buffer gets a prefix and the full length. */
    assert_int_equal(index_get_meta(f->ix, "format", value, 1, &len, NULL), 0);
    assert_int_equal(len, 2);
    memset(value, 'x', sizeof value);
    assert_int_equal(index_put_meta(f->ix, "big", value, 257, &err), STELE_EINVAL);
    assert_non_null(strstr(err.message, "big"));
    assert_int_equal(index_put_meta(f->ix, "", value, 1, &err), STELE_EINVAL);
    assert_int_equal(index_delete_meta(f->ix, "format", NULL), 0);
    assert_int_equal(index_get_meta(f->ix, "format", value, sizeof value, &len, NULL),
                     STELE_ENOTFOUND);
    assert_int_equal(index_delete_meta(f->ix, "format", NULL), 0);
}

static void
test_index_checkpoints_default_to_zero_and_list_by_name(void **state)
{
    fixture_t *f = *state;
    uint64_t seq = 99;
    assert_int_equal(index_get_checkpoint(f->ix, "nobody", &seq, NULL), 0);
    assert_int_equal(seq, 0);
    assert_int_equal(index_put_checkpoint(f->ix, "west", 10, NULL), 0);
    assert_int_equal(index_put_checkpoint(f->ix, "east", 20, NULL), 0);
    assert_int_equal(index_put_checkpoint(f->ix, "west", 15, NULL), 0);
    char names[4][64];
    uint64_t seqs[4];
    assert_int_equal(index_list_checkpoints(f->ix, names, seqs, 4, NULL), 2);
    assert_string_equal(names[0], "east");
    assert_int_equal(seqs[0], 20);
    assert_string_equal(names[1], "west");
    assert_int_equal(seqs[1], 15);
    /* A short array still reports how many exist. */
    assert_int_equal(index_list_checkpoints(f->ix, names, seqs, 1, NULL), 2);
    char long_name[80];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[79] = '\0';
    stele_error_t err;
    assert_int_equal(index_put_checkpoint(f->ix, long_name, 1, &err), STELE_EINVAL);
    assert_int_equal(index_list_checkpoints(f->ix, names, seqs, 4, NULL), 2);
}

static void
test_index_dead_letters_are_kept_per_sink_in_seq_order(void **state)
{
    fixture_t *f = *state;
    uint64_t seqs_in[] = {900, 5, 300, 70000};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(index_put_dead_letter(f->ix, "a", seqs_in[i], "rejected", NULL), 0);
    assert_int_equal(index_put_dead_letter(f->ix, "ab", 6, "other sink", NULL), 0);
    uint64_t seqs[8], count = 0;
    assert_int_equal(index_list_dead_letters(f->ix, "a", 0, seqs, 8, NULL), 4);
    assert_int_equal(seqs[0], 5);
    assert_int_equal(seqs[1], 300);
    assert_int_equal(seqs[2], 900);
    assert_int_equal(seqs[3], 70000);
    assert_int_equal(index_list_dead_letters(f->ix, "a", 301, seqs, 1, NULL), 1);
    assert_int_equal(seqs[0], 900);
    assert_int_equal(index_count_dead_letters(f->ix, "a", &count, NULL), 0);
    assert_int_equal(count, 4);
    assert_int_equal(index_count_dead_letters(f->ix, "ab", &count, NULL), 0);
    assert_int_equal(count, 1);
    assert_int_equal(index_delete_dead_letter(f->ix, "a", 300, NULL), 0);
    assert_int_equal(index_delete_dead_letter(f->ix, "a", 300, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_count_dead_letters(f->ix, "a", &count, NULL), 0);
    assert_int_equal(count, 3);
    assert_int_equal(index_count_dead_letters(f->ix, "none", &count, NULL), 0);
    assert_int_equal(count, 0);
}

/* Each sink's count is stored beside its list and kept in step by the calls that change
 * it: re-rejecting a listed record does not count it twice, a failed delete changes
 * nothing, and an index from before the count (no count stored) is counted by walking
 * until its next change stores the count. */
/* How many of this process's file descriptors are the index's lock file. */
static int
lock_file_fds(const char *dir)
{
    char want[256], link[300], target[PATH_MAX];
    snprintf(want, sizeof want, "%s/index/lock.mdb", dir);
    char real[PATH_MAX];
    if (!realpath(want, real))
        return 0;
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len > 0) {
            target[len] = '\0';
            n += strcmp(target, real) == 0;
        }
    }
    closedir(d);
    return n;
}

/* One LMDB environment per index per process (closing a second one would drop the
 * process's locks on the lock file): more handles on an open index share it, a read-only
 * handle is served by the writable environment, and the environment lives until its last
 * handle closes, even when only read-only handles are left on it (the exception, a
 * writable open while the process holds only a read-only environment, has a test below). */
static void
test_index_handles_in_one_process_share_one_environment(void **state)
{
    fixture_t *f = *state; /* f->ix: writable */
    int fds = lock_file_fds(f->dir);
    assert_true(fds >= 1);
    index_t *r1 = NULL, *r2 = NULL, *w2 = NULL;
    assert_int_equal(index_open(f->dir, 0, 0, &r1, NULL), 0);
    assert_int_equal(index_open(f->dir, 1, 0, &w2, NULL), 0);
    assert_int_equal(lock_file_fds(f->dir), fds);
    assert_int_equal(index_put_checkpoint(w2, "sink", 42, NULL), 0);
    uint64_t seq = 0;
    assert_int_equal(index_get_checkpoint(r1, "sink", &seq, NULL), 0);
    assert_int_equal(seq, 42);
    assert_int_equal(index_put_checkpoint(r1, "sink", 43, NULL), STELE_EINVAL); /* read-only */
    index_close(w2);
    index_close(f->ix);
    f->ix = NULL;
    /* r1 holds the environment now */
    assert_int_equal(lock_file_fds(f->dir), fds);
    assert_int_equal(index_get_checkpoint(r1, "sink", &seq, NULL), 0);
    assert_int_equal(index_open(f->dir, 0, 0, &r2, NULL), 0);
    assert_int_equal(lock_file_fds(f->dir), fds);
    /* writable while only read-only handles are open: the environment they use is the
     * writable one, so it serves this handle too */
    assert_int_equal(index_open(f->dir, 1, 0, &f->ix, NULL), 0);
    assert_int_equal(index_put_checkpoint(f->ix, "sink", 44, NULL), 0);
    assert_int_equal(index_get_checkpoint(r2, "sink", &seq, NULL), 0);
    assert_int_equal(seq, 44);
    index_close(r1);
    index_close(r2);
    assert_int_equal(lock_file_fds(f->dir), fds);
}

/* -- the map's limit ----------------------------------------------------------------- */

/* A small map, so a test reaches its limit with a few megabytes of batches. */
#define SMALL_MAP_BYTES ((size_t)1 << 20)
/* Batches a test writes past the small map: about 70 bytes each in the index, 4 MiB in all. */
#define MANY_BATCHES 60000
#define MANY_PER_PUT 5000

/* MANY_BATCHES batch starts at seqs 1, 4, 7, ... with ts = 1000 * seq, from `from` on. */
static void
put_many(index_t *ix, size_t from, size_t to)
{
    index_batch_t *b = calloc(MANY_PER_PUT, sizeof *b);
    assert_non_null(b);
    for (size_t i = from; i < to;) {
        size_t n = 0;
        for (; n < MANY_PER_PUT && i < to; n++, i++) {
            uint64_t seq = 1 + 3 * (uint64_t)i;
            b[n] = batch(seq, 1 + i / 1000, 64 * (i % 1000), (int64_t)(1000 * seq));
        }
        stele_error_t err;
        int rc = index_put_batches(ix, b, n, &err);
        if (rc)
            fail_msg("index_put_batches before batch %zu: %s", i, err.message);
    }
    free(b);
}

static void
expect_many(index_t *ix)
{
    index_batch_t b;
    uint64_t last_seq = 1 + 3 * (uint64_t)(MANY_BATCHES - 1);
    assert_int_equal(index_last_batch(ix, &b, NULL), 0);
    assert_int_equal(b.first_seq, last_seq);
    assert_int_equal(index_find_seq(ix, 3 * 30000 + 2, &b, NULL), 0);
    assert_int_equal(b.first_seq, 3 * 30000 + 1);
    assert_int_equal(b.offset, 64 * (30000 % 1000));
    assert_int_equal(index_find_time(ix, INT64_MAX, &b, NULL), 0);
    assert_int_equal(b.first_seq, last_seq);
}

/* A writable index in <fixture>/small (its path into dir) whose map starts at
 * SMALL_MAP_BYTES, so a few thousand batches fill it. */
static index_t *
open_small_map(const fixture_t *f, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/small", f->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    index_t *ix = NULL;
    assert_int_equal(index_open_mapped(dir, 1, 0600, SMALL_MAP_BYTES, &ix, NULL), 0);
    return ix;
}

/* An index that outgrows its map (retention is off by default, so a busy journal's index
 * keeps growing) grows the map rather than refusing every later write with MDB_MAP_FULL,
 * and keeps what it had. */
static void
test_index_full_map_grows_and_keeps_every_batch(void **state)
{
    fixture_t *f = *state;
    char dir[128];
    index_t *ix = open_small_map(f, dir, sizeof dir);
    put_many(ix, 0, MANY_BATCHES);
    expect_many(ix);
    assert_int_equal(index_put_checkpoint(ix, "s", 99, NULL), 0);
    assert_int_equal(index_put_dead_letter(ix, "s", 7, "rejected", NULL), 0);
    assert_int_equal(index_delete_before(ix, 3 * 1000 + 1, NULL), 0);
    assert_int_equal(index_sync(ix, NULL), 0);
    index_close(ix);

    /* Reopened with the small map again: LMDB maps at least what the data needs. */
    assert_int_equal(index_open_mapped(dir, 1, 0600, SMALL_MAP_BYTES, &ix, NULL), 0);
    expect_many(ix);
    index_batch_t b;
    assert_int_equal(index_first_batch(ix, &b, NULL), 0);
    assert_int_equal(b.first_seq, 3 * 1000 + 1);
    uint64_t seq = 0, count = 0;
    assert_int_equal(index_get_checkpoint(ix, "s", &seq, NULL), 0);
    assert_int_equal(seq, 99);
    assert_int_equal(index_count_dead_letters(ix, "s", &count, NULL), 0);
    assert_int_equal(count, 1);
    index_close(ix);
}

/* Threads of the writer's process read while it grows the map under them: LMDB may remap
 * only with no transaction open in the process, so a grow waits for their reads and their
 * next reads wait for it. Each reader sees the last batch move only forward. */
typedef struct grow_reader {
    index_t *ix;
    _Atomic int *is_done;
    int n_failed;
    long n_reads;
} grow_reader_t;

static void *
grow_reader_main(void *arg)
{
    grow_reader_t *r = arg;
    uint64_t last_seen = 0;
    while (!atomic_load(r->is_done)) {
        index_batch_t b = {0};
        int is_ok = index_last_batch(r->ix, &b, NULL) == 0 && b.first_seq >= last_seen &&
                    index_find_seq(r->ix, b.first_seq, &b, NULL) == 0;
        r->n_failed += !is_ok;
        last_seen = is_ok ? b.first_seq : last_seen;
        r->n_reads++;
    }
    return NULL;
}

static void
test_index_map_grows_while_other_threads_read(void **state)
{
    fixture_t *f = *state;
    char dir[128];
    index_t *ix = open_small_map(f, dir, sizeof dir), *ro = NULL;
    assert_int_equal(index_open(dir, 0, 0, &ro, NULL), 0); /* shares ix's environment */
    put_many(ix, 0, 1);
    _Atomic int is_done = 0;
    grow_reader_t readers[3];
    pthread_t threads[3];
    for (int i = 0; i < 3; i++) {
        readers[i] = (grow_reader_t){.ix = i ? ro : ix, .is_done = &is_done};
        assert_int_equal(pthread_create(&threads[i], NULL, grow_reader_main, &readers[i]), 0);
    }
    put_many(ix, 1, MANY_BATCHES);
    atomic_store(&is_done, 1);
    for (int i = 0; i < 3; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(readers[i].n_failed, 0);
        assert_true(readers[i].n_reads > 0);
    }
    expect_many(ro);
    index_close(ro);
    index_close(ix);
}

/* The read-only side, in a child process opened with a small map: it sees the batch
 * written before it opened, then, after the writer grew the map past its own, the batches
 * written since (LMDB answers MDB_MAP_RESIZED until it adopts the new size). */
static int
small_map_reader_child(const char *dir, int ready_fd, int go_fd)
{
    index_t *ro = NULL;
    index_batch_t b;
    char byte = 'r';
    if (index_open_mapped(dir, 0, 0, SMALL_MAP_BYTES, &ro, NULL) != 0)
        return 10;
    if (index_last_batch(ro, &b, NULL) != 0 || b.first_seq != 1)
        return 11;
    if (write(ready_fd, &byte, 1) != 1 || read(go_fd, &byte, 1) != 1)
        return 12;
    if (index_last_batch(ro, &b, NULL) != 0 || b.first_seq != 1 + 3 * (uint64_t)(MANY_BATCHES - 1))
        return 13;
    index_close(ro);
    return 0;
}

static void
test_index_reader_in_another_process_follows_the_map_the_writer_grew(void **state)
{
    fixture_t *f = *state;
    char dir[128];
    index_t *ix = open_small_map(f, dir, sizeof dir);
    put_many(ix, 0, 1);
    int ready[2], go[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        close(go[1]); /* a parent that fails and exits then ends the child's wait */
        _exit(small_map_reader_child(dir, ready[1], go[0]));
    }
    char byte;
    assert_int_equal(read(ready[0], &byte, 1), 1);
    put_many(ix, 1, MANY_BATCHES);
    assert_int_equal(write(go[1], "g", 1), 1);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    index_close(ix);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Runs fn(dir) in a forked child and returns the int it computed, or -1000 minus the signal
 * that killed the child: what another process sees of the index. */
static int
int_from_child(int (*fn)(const char *dir), const char *dir)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int v = fn(dir);
        _exit(write(fds[1], &v, sizeof v) == (ssize_t)sizeof v ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    int v = 0;
    if (WIFSIGNALED(status))
        v = -1000 - WTERMSIG(status);
    else
        assert_int_equal(read(fds[0], &v, sizeof v), (ssize_t)sizeof v);
    close(fds[0]);
    close(fds[1]);
    return v;
}

/* The lock LMDB's users hold on byte 0 of the lock file, as another process sees it:
 * F_RDLCK while an environment on it is open in this process, F_UNLCK once none holds it
 * (then another process may take the environment for unused and reset its lock table). */
static int
lock_file_lock_seen(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/index/lock.mdb", dir);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    int fd = open(path, O_RDWR);
    return fd >= 0 && fcntl(fd, F_GETLK, &fl) == 0 ? fl.l_type : -1;
}

static int
lock_file_lock_seen_by_another_process(const char *dir)
{
    return int_from_child(lock_file_lock_seen, dir);
}

/* A writable open while this process holds the index only read-only cannot use the
 * read-only environment: it gets a second one, which the next writable handles share, and
 * neither is closed while the other is in use (closing either's lock file would drop the
 * locks of both). */
static void
test_index_writable_opens_after_a_read_only_one_share_one_more_environment(void **state)
{
    fixture_t *f = *state;
    index_close(f->ix);
    f->ix = NULL;
    index_t *ro = NULL, *w1 = NULL, *w2 = NULL;
    assert_int_equal(index_open(f->dir, 0, 0, &ro, NULL), 0);
    assert_int_equal(lock_file_fds(f->dir), 1);
    assert_int_equal(index_open(f->dir, 1, 0600, &w1, NULL), 0);
    assert_int_equal(lock_file_fds(f->dir), 2);
    assert_int_equal(index_open(f->dir, 1, 0600, &w2, NULL), 0);
    assert_int_equal(lock_file_fds(f->dir), 2); /* w2 shares w1's environment */
    assert_int_equal(index_put_checkpoint(w2, "sink", 5, NULL), 0);
    uint64_t seq = 0;
    assert_int_equal(index_get_checkpoint(ro, "sink", &seq, NULL), 0);
    assert_int_equal(seq, 5);

    index_close(w2);
    index_close(w1);
    assert_int_equal(lock_file_lock_seen_by_another_process(f->dir), F_RDLCK);
    assert_int_equal(index_get_checkpoint(ro, "sink", &seq, NULL), 0);
    assert_int_equal(index_open(f->dir, 1, 0600, &w1, NULL), 0);
    assert_int_equal(lock_file_fds(f->dir), 2);
    assert_int_equal(index_put_checkpoint(w1, "sink", 6, NULL), 0);
    index_close(w1);
    assert_int_equal(lock_file_lock_seen_by_another_process(f->dir), F_RDLCK);
    index_close(ro);
    assert_int_equal(lock_file_fds(f->dir), 0); /* the last handle closed both */
    assert_int_equal(lock_file_lock_seen_by_another_process(f->dir), F_UNLCK);
}

/* -- stale readers -------------------------------------------------------------------- */

/* Another program's reader, killed in the middle of a read transaction: its slot in the
 * lock table keeps that transaction's snapshot pinned (LMDB reuses no page freed after it,
 * so the data file grows with every write) until someone clears the slot. The child opens
 * the environment with LMDB itself, as any reading process does, and reports once its
 * transaction is open; it never ends it. */
static int
killed_reader_child(const char *dir, int ready_fd)
{
    char path[256];
    snprintf(path, sizeof path, "%s/index", dir);
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    if (mdb_env_create(&env) != 0 || mdb_env_set_maxdbs(env, 5) != 0 ||
        mdb_env_open(env, path, MDB_RDONLY, 0600) != 0 ||
        mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) != 0)
        return 1;
    char byte = 'r';
    if (write(ready_fd, &byte, 1) != 1)
        return 2;
    for (;;)
        pause();
}

/* How many reader slots of dead processes the lock table holds, as a process that opens
 * the index now finds them. */
static int
stale_reader_slots_seen(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/index", dir);
    MDB_env *env = NULL;
    int n_dead = -1;
    if (mdb_env_create(&env) == 0 && mdb_env_set_maxdbs(env, 5) == 0 &&
        mdb_env_open(env, path, MDB_RDONLY, 0600) == 0 && mdb_reader_check(env, &n_dead) != 0)
        n_dead = -1;
    return n_dead;
}

static int
stale_reader_slots(const char *dir)
{
    return int_from_child(stale_reader_slots_seen, dir);
}

/* A writer runs for days; readers come and go, and one killed mid-transaction must not pin
 * the index's pages until the writer happens to reopen. The engine calls index_sync about
 * once a second after writing: that clears the slots of dead readers (lmdb.h: check for
 * stale readers periodically). */
static void
test_index_sync_clears_the_slot_of_a_reader_killed_mid_transaction(void **state)
{
    fixture_t *f = *state; /* f->ix: the writer, open before the reader came and died */
    put_ladder(f->ix, 2);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        _exit(killed_reader_child(f->dir, ready[1]));
    }
    char byte;
    assert_int_equal(read(ready[0], &byte, 1), 1);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    close(ready[0]);
    close(ready[1]);

    put_ladder(f->ix, 4); /* the writer's next batch starts, then its lazy sync */
    assert_int_equal(index_sync(f->ix, NULL), 0);
    assert_int_equal(stale_reader_slots(f->dir), 0);
}

/* After fork() the child opens environments of its own (LMDB forbids using the parent's):
 * its open of the same index adds a lock-file descriptor, and what it writes the parent
 * reads. */
static void
test_index_forked_child_opens_its_own_environment(void **state)
{
    fixture_t *f = *state;
    int fds = lock_file_fds(f->dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        index_t *ix = NULL;
        int ok = index_open(f->dir, 1, 0, &ix, NULL) == 0 && lock_file_fds(f->dir) == fds + 1 &&
                 index_put_checkpoint(ix, "child", 7, NULL) == 0;
        index_close(ix);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    uint64_t seq = 0;
    assert_int_equal(index_get_checkpoint(f->ix, "child", &seq, NULL), 0);
    assert_int_equal(seq, 7);
}

static void
test_index_dead_letter_count_is_kept_in_step_with_the_list(void **state)
{
    fixture_t *f = *state;
    uint64_t count = 0;
    for (uint64_t seq = 1; seq <= 50; seq++)
        assert_int_equal(index_put_dead_letter(f->ix, "s", seq * 10, "no", NULL), 0);
    assert_int_equal(index_put_dead_letter(f->ix, "s", 20, "no again", NULL), 0);
    assert_int_equal(index_count_dead_letters(f->ix, "s", &count, NULL), 0);
    assert_int_equal(count, 50);
    assert_int_equal(index_delete_dead_letter(f->ix, "s", 15, NULL), STELE_ENOTFOUND);
    assert_int_equal(index_delete_dead_letter(f->ix, "s", 20, NULL), 0);
    assert_int_equal(index_count_dead_letters(f->ix, "s", &count, NULL), 0);
    assert_int_equal(count, 49);

    /* as written before the count existed */
    assert_int_equal(index_delete_meta(f->ix, "dead-count:s", NULL), 0);
    assert_int_equal(index_count_dead_letters(f->ix, "s", &count, NULL), 0);
    assert_int_equal(count, 49);
    assert_int_equal(index_put_dead_letter(f->ix, "s", 20, "back", NULL), 0);
    uint8_t stored[8];
    size_t len = 0;
    assert_int_equal(index_get_meta(f->ix, "dead-count:s", stored, sizeof stored, &len, NULL), 0);
    assert_int_equal(len, 8);
    assert_int_equal(stored[7], 50);
    assert_int_equal(index_count_dead_letters(f->ix, "s", &count, NULL), 0);
    assert_int_equal(count, 50);
    assert_int_equal(index_delete_meta(f->ix, "dead-count:s", NULL), 0);
    assert_int_equal(index_delete_dead_letter(f->ix, "s", 30, NULL), 0);
    assert_int_equal(index_count_dead_letters(f->ix, "s", &count, NULL), 0);
    assert_int_equal(count, 49);
    uint64_t listed[64];
    assert_int_equal(index_list_dead_letters(f->ix, "s", 0, listed, 64, NULL), 49);
}

static void
test_index_dead_letter_keeps_time_and_latest_reason(void **state)
{
    fixture_t *f = *state;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t before_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    assert_int_equal(index_put_dead_letter(f->ix, "a", 8, "validator said no", NULL), 0);
    assert_int_equal(index_put_dead_letter(f->ix, "a", 9, "too large", NULL), 0);
    assert_int_equal(index_put_dead_letter(f->ix, "a", 8, "still no", NULL), 0);
    index_dead_letter_t out[4];
    assert_int_equal(index_read_dead_letters(f->ix, "a", 0, out, 4, NULL), 2);
    assert_int_equal(out[0].seq, 8);
    assert_string_equal(out[0].why, "still no");
    assert_true(out[0].unix_ms >= before_ms);
    assert_true(out[0].unix_ms < before_ms + 60000);
    assert_int_equal(out[1].seq, 9);
    assert_string_equal(out[1].why, "too large");
    assert_int_equal(index_read_dead_letters(f->ix, "a", 9, out, 4, NULL), 1);
    assert_int_equal(out[0].seq, 9);
    char long_why[INDEX_WHY_MAX + 100];
    memset(long_why, 'x', sizeof long_why - 1);
    long_why[sizeof long_why - 1] = '\0';
    assert_int_equal(index_put_dead_letter(f->ix, "a", 10, long_why, NULL), 0);
    assert_int_equal(index_read_dead_letters(f->ix, "a", 10, out, 1, NULL), 1);
    assert_int_equal(strlen(out[0].why), INDEX_WHY_MAX);
}

static void
test_index_survives_close_and_reopen(void **state)
{
    fixture_t *f = *state;
    put_ladder(f->ix, 3);
    assert_int_equal(index_put_checkpoint(f->ix, "s", 21, NULL), 0);
    assert_int_equal(index_put_dead_letter(f->ix, "s", 4, "why", NULL), 0);
    assert_int_equal(index_sync(f->ix, NULL), 0);
    index_close(f->ix);
    f->ix = NULL;
    assert_int_equal(index_open(f->dir, 1, 0600, &f->ix, NULL), 0);
    index_batch_t b;
    assert_int_equal(index_last_batch(f->ix, &b, NULL), 0);
    assert_int_equal(b.first_seq, 21);
    uint64_t seq = 0, count = 0;
    assert_int_equal(index_get_checkpoint(f->ix, "s", &seq, NULL), 0);
    assert_int_equal(seq, 21);
    assert_int_equal(index_count_dead_letters(f->ix, "s", &count, NULL), 0);
    assert_int_equal(count, 1);
    char note[64];
    size_t len;
    assert_int_equal(index_get_meta(f->ix, "rebuilt", note, sizeof note, &len, NULL),
                     STELE_ENOTFOUND);
}

/* The read-only side, in a child process: LMDB forbids one environment open twice in a
 * process, and readers of a journal are other processes. Exits 0 when all checks held. */
static int
read_only_child(const char *dir, int ready_fd, int go_fd)
{
    index_t *ro = NULL;
    stele_error_t err;
    index_batch_t b;
    char byte = 'r';
    if (index_open(dir, 0, 0, &ro, &err) != 0)
        return 10;
    if (index_last_batch(ro, &b, NULL) != 0 || b.first_seq != 11)
        return 11;
    if (write(ready_fd, &byte, 1) != 1 || read(go_fd, &byte, 1) != 1)
        return 12;
    /* Committed by the writer after this reader opened: visible to the next call. */
    if (index_last_batch(ro, &b, NULL) != 0 || b.first_seq != 21)
        return 13;
    if (index_put_checkpoint(ro, "s", 1, &err) != STELE_EINVAL || !strstr(err.message, "read-only"))
        return 14;
    if (index_sync(ro, NULL) != 0)
        return 15;
    index_close(ro);
    return 0;
}

static void
test_index_read_only_open_sees_writes_and_refuses_to_write(void **state)
{
    fixture_t *f = *state;
    put_ladder(f->ix, 2);
    int ready[2], go[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(read_only_child(f->dir, ready[1], go[0]));
    char byte;
    assert_int_equal(read(ready[0], &byte, 1), 1);
    index_batch_t more = batch(21, 21, 64, 21000);
    assert_int_equal(index_put_batches(f->ix, &more, 1, NULL), 0);
    assert_int_equal(write(go[1], "g", 1), 1);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* The seam the shipper tests fail dead-letter writes with: armed writes of one handle fail
 * with the errno and write nothing; another handle on the same environment writes on. */
static void
test_index_fail_writes_fails_only_the_armed_writes_of_one_handle(void **state)
{
    fixture_t *f = *state;
    index_t *other = NULL;
    assert_int_equal(index_open(f->dir, 1, 0600, &other, NULL), 0);
    index_fail_writes(f->ix, 2, ENOSPC);
    stele_error_t err = {0};
    assert_int_equal(index_put_dead_letter(f->ix, "s", 7, "refused", &err), -ENOSPC);
    assert_non_null(strstr(err.message, "dead letter"));
    assert_int_equal(index_put_checkpoint(other, "s", 5, NULL), 0);
    assert_int_equal(index_put_checkpoint(f->ix, "s", 6, NULL), -ENOSPC);
    uint64_t seq = 0, count = 9;
    assert_int_equal(index_get_checkpoint(f->ix, "s", &seq, NULL), 0);
    assert_int_equal(seq, 5);
    assert_int_equal(index_count_dead_letters(f->ix, "s", &count, NULL), 0);
    assert_int_equal(count, 0);
    assert_int_equal(index_put_dead_letter(f->ix, "s", 7, "refused", NULL), 0);
    index_fail_writes(f->ix, INDEX_FAIL_FOREVER, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(index_put_checkpoint(f->ix, "s", 8, NULL), -EIO);
    index_fail_writes(f->ix, 0, 0);
    assert_int_equal(index_put_checkpoint(f->ix, "s", 8, NULL), 0);
    index_close(other);
}

static void
test_index_read_only_open_of_missing_index_says_not_found(void **state)
{
    fixture_t *f = *state;
    char other[128];
    snprintf(other, sizeof other, "%s/none", f->dir);
    assert_int_equal(mkdir(other, 0700), 0);
    index_t *ro = NULL;
    stele_error_t err;
    assert_int_equal(index_open(other, 0, 0, &ro, &err), STELE_ENOTFOUND);
    assert_null(ro);
    assert_non_null(strstr(err.message, "none/index"));
    struct stat st;
    assert_int_equal(stat(other, &st), 0);
    char idx[160];
    snprintf(idx, sizeof idx, "%s/index", other);
    assert_int_not_equal(stat(idx, &st), 0); /* nothing created */
}

/* An index directory whose data file was never written (a writer stopped between making the
 * directory and initialising the environment) is an index that does not exist yet: a
 * read-only open says STELE_ENOTFOUND, as for a missing directory, and writes nothing. */
static void
test_index_read_only_open_of_an_uninitialised_index_says_not_found(void **state)
{
    fixture_t *f = *state;
    char other[128], idx[160], data[192];
    snprintf(other, sizeof other, "%s/fresh", f->dir);
    snprintf(idx, sizeof idx, "%s/index", other);
    snprintf(data, sizeof data, "%s/data.mdb", idx);
    assert_int_equal(mkdir(other, 0700), 0);
    assert_int_equal(mkdir(idx, 0700), 0);
    index_t *ro = NULL;
    stele_error_t err;
    assert_int_equal(index_open(other, 0, 0, &ro, &err), STELE_ENOTFOUND);
    assert_null(ro);
    struct stat st;
    assert_int_not_equal(stat(data, &st), 0); /* nothing created */

    int fd = open(data, O_WRONLY | O_CREAT, 0600); /* created, never written */
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(index_open(other, 0, 0, &ro, &err), STELE_ENOTFOUND);
    assert_null(ro);
    assert_int_equal(stat(data, &st), 0);
    assert_int_equal(st.st_size, 0);

    /* The writer initialises it; then readers open it. */
    index_t *ix = NULL;
    assert_int_equal(index_open(other, 1, 0600, &ix, NULL), 0);
    assert_int_equal(index_open(other, 0, 0, &ro, NULL), 0);
    index_close(ro);
    index_close(ix);
}

static void
test_index_applies_file_mode(void **state)
{
    fixture_t *f = *state;
    char other[128], data[160];
    snprintf(other, sizeof other, "%s/shared", f->dir);
    assert_int_equal(mkdir(other, 0700), 0);
    mode_t old = umask(0);
    index_t *ix = NULL;
    int rc = index_open(other, 1, 0640, &ix, NULL);
    umask(old);
    assert_int_equal(rc, 0);
    index_close(ix);
    struct stat st;
    snprintf(data, sizeof data, "%s/index/data.mdb", other);
    assert_int_equal(stat(data, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    snprintf(data, sizeof data, "%s/index", other);
    assert_int_equal(stat(data, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0750);
}

static void
garble_file(const char *path)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    uint8_t junk[8192];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 37 + 11);
    assert_int_equal(pwrite(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
    close(fd);
}

static void
test_index_corrupt_environment_is_moved_aside_and_marked_rebuilt(void **state)
{
    fixture_t *f = *state;
    put_ladder(f->ix, 3);
    assert_int_equal(index_sync(f->ix, NULL), 0);
    index_close(f->ix);
    f->ix = NULL;
    char data[128];
    snprintf(data, sizeof data, "%s/index/data.mdb", f->dir);
    garble_file(data);

    index_t *ro = NULL;
    stele_error_t err;
    assert_int_equal(index_open(f->dir, 0, 0, &ro, &err), STELE_ECORRUPT);
    assert_non_null(strstr(err.message, "index"));
    assert_true(err.hint[0] != '\0');

    assert_int_equal(index_open(f->dir, 1, 0600, &f->ix, &err), 0);
    index_batch_t b;
    assert_int_equal(index_last_batch(f->ix, &b, NULL), STELE_ENOTFOUND);
    char note[300];
    size_t len = 0;
    assert_int_equal(index_get_meta(f->ix, "rebuilt", note, sizeof note - 1, &len, NULL), 0);
    note[len] = '\0';
    assert_non_null(strstr(note, "index.corrupt-"));
    /* The damaged copy is kept for inspection beside the new one. */
    char moved[200];
    const char *name = strstr(note, "index.corrupt-");
    snprintf(moved, sizeof moved, "%s/%s/data.mdb", f->dir, name);
    struct stat st;
    assert_int_equal(stat(moved, &st), 0);
}

/* Sound meta pages over table pages LMDB finds corrupt when it opens the tables: a
 * read-only open reports it, a writable open moves the environment aside as for a bad
 * meta page. */
static void
test_index_corrupt_tables_are_moved_aside_and_marked_rebuilt(void **state)
{
    fixture_t *f = *state;
    put_ladder(f->ix, 3);
    assert_int_equal(index_put_checkpoint(f->ix, "s", 21, NULL), 0);
    assert_int_equal(index_sync(f->ix, NULL), 0);
    index_close(f->ix);
    f->ix = NULL;
    char data[128];
    snprintf(data, sizeof data, "%s/index/data.mdb", f->dir);
    struct stat st;
    assert_int_equal(stat(data, &st), 0);
    off_t metas_bytes = 2 * (off_t)sysconf(_SC_PAGESIZE); /* LMDB's two meta pages */
    assert_true(st.st_size > metas_bytes);
    int fd = open(data, O_WRONLY);
    assert_true(fd >= 0);
    size_t len = (size_t)(st.st_size - metas_bytes);
    char *zeros = calloc(1, len);
    assert_non_null(zeros);
    assert_int_equal(pwrite(fd, zeros, len, metas_bytes), (ssize_t)len);
    free(zeros);
    close(fd);

    index_t *ro = NULL;
    stele_error_t err;
    assert_int_equal(index_open(f->dir, 0, 0, &ro, &err), STELE_ECORRUPT);
    assert_int_equal(index_open(f->dir, 1, 0600, &f->ix, &err), 0);
    index_batch_t b;
    assert_int_equal(index_last_batch(f->ix, &b, NULL), STELE_ENOTFOUND);
    uint64_t seq = 1;
    assert_int_equal(index_get_checkpoint(f->ix, "s", &seq, NULL), 0);
    assert_int_equal(seq, 0); /* the new environment starts empty */
    char note[300];
    size_t note_len = 0;
    assert_int_equal(index_get_meta(f->ix, "rebuilt", note, sizeof note - 1, &note_len, NULL), 0);
    note[note_len] = '\0';
    assert_non_null(strstr(note, "MDB_CORRUPTED"));
    char moved[200];
    snprintf(moved, sizeof moved, "%s/%s/data.mdb", f->dir, strstr(note, "index.corrupt-"));
    assert_int_equal(stat(moved, &st), 0);
}

/* A read-only open, and a read of the tree's pages through it: 0 when the open says the
 * index is corrupt, 1 when both succeed, 2 for any other error. */
static int
read_only_open_verdict(const char *dir)
{
    index_t *ix = NULL;
    int rc = index_open(dir, 0, 0, &ix, NULL);
    index_batch_t b;
    if (rc == 0)
        rc = index_last_batch(ix, &b, NULL);
    index_close(ix);
    return rc == STELE_ECORRUPT ? 0 : rc == 0 ? 1 : 2;
}

/* A power failure may keep the index's meta page and lose the growth of its data file (it
 * is written without fsync). Such a short file is corrupt: a read-only open says so instead
 * of faulting on pages past the end of the file (the engine opens the index read-only at
 * every start, for its recovery hint), and a writable one moves it aside and starts over. */
static void
test_index_data_file_shorter_than_its_pages_is_corrupt(void **state)
{
    fixture_t *f = *state;
    for (int i = 0; i < 40; i++) {
        index_batch_t b[250];
        for (int k = 0; k < 250; k++) {
            uint64_t seq = 1 + 10 * (uint64_t)(i * 250 + k);
            b[k] = batch(seq, 1, 4096 + 64 * (uint64_t)k, (int64_t)seq);
        }
        assert_int_equal(index_put_batches(f->ix, b, 250, NULL), 0);
    }
    assert_int_equal(index_sync(f->ix, NULL), 0);
    index_close(f->ix);
    f->ix = NULL;
    char data[128];
    snprintf(data, sizeof data, "%s/index/data.mdb", f->dir);
    struct stat st;
    assert_int_equal(stat(data, &st), 0);
    long page = sysconf(_SC_PAGESIZE);
    assert_true(st.st_size > 16 * page);
    assert_int_equal(truncate(data, (st.st_size / 2 / page) * page), 0);

    assert_int_equal(int_from_child(read_only_open_verdict, f->dir), 0); /* not SIGBUS */
    stele_error_t err;
    assert_int_equal(index_open(f->dir, 1, 0600, &f->ix, &err), 0);
    index_batch_t last;
    assert_int_equal(index_last_batch(f->ix, &last, NULL), STELE_ENOTFOUND);
    char note[300];
    size_t note_len = 0;
    assert_int_equal(index_get_meta(f->ix, "rebuilt", note, sizeof note - 1, &note_len, NULL), 0);
    note[note_len] = '\0';
    assert_non_null(strstr(note, "moved aside"));
}

/* Deleting most entries merges pages, and LMDB does not write a page freed in the
 * transaction that allocated it, though its meta page counts it. The writer extends the data
 * file to cover it, so a sound index is never taken for one that lost its growth: it reopens
 * as it was, read-only and writable, with nothing moved aside. */
static void
test_index_reopens_whole_after_deleting_most_entries(void **state)
{
    fixture_t *f = *state;
    for (uint64_t seq = 1; seq <= 300; seq++) {
        index_batch_t b = batch(seq, 1, 4096 + 88 * seq, (int64_t)seq);
        assert_int_equal(index_put_batches(f->ix, &b, 1, NULL), 0);
    }
    assert_int_equal(index_truncate_after(f->ix, 10, NULL), 0);
    assert_int_equal(index_sync(f->ix, NULL), 0);
    index_close(f->ix);
    f->ix = NULL;

    assert_int_equal(int_from_child(read_only_open_verdict, f->dir), 1);
    assert_int_equal(index_open(f->dir, 1, 0600, &f->ix, NULL), 0);
    index_batch_t last;
    assert_int_equal(index_last_batch(f->ix, &last, NULL), 0);
    assert_int_equal(last.first_seq, 10);
    char note[300];
    size_t note_len = 0;
    assert_int_equal(index_get_meta(f->ix, "rebuilt", note, sizeof note - 1, &note_len, NULL),
                     STELE_ENOTFOUND);
}

static void
test_index_rejects_bad_arguments(void **state)
{
    fixture_t *f = *state;
    stele_error_t err;
    index_t *ix = NULL;
    assert_int_equal(index_open(NULL, 1, 0600, &ix, &err), STELE_EINVAL);
    assert_int_equal(index_put_batches(f->ix, NULL, 2, &err), STELE_EINVAL);
    assert_int_equal(index_put_batches(f->ix, NULL, 0, &err), 0);
    assert_int_equal(index_find_seq(f->ix, 1, NULL, &err), STELE_EINVAL);
    assert_int_equal(index_put_checkpoint(f->ix, NULL, 1, &err), STELE_EINVAL);
    assert_int_equal(index_put_dead_letter(f->ix, "", 1, "x", &err), STELE_EINVAL);
    index_close(NULL);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_index_find_seq_returns_batch_at_or_before, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_lookups_on_empty_index_say_not_found, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_first_last_and_next_walk_in_seq_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_find_time_returns_last_batch_strictly_before,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_find_time_handles_repeated_and_negative_times,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_rewriting_a_batch_with_a_new_time_replaces_its_time_entry, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_truncate_after_drops_later_batches_from_both_tables, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_delete_before_drops_older_batches_from_both_tables, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_truncate_spanning_many_transactions_removes_everything_asked, setup,
            teardown),
        cmocka_unit_test_setup_teardown(test_index_clear_batches_keeps_checkpoints_and_dead_letters,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_meta_round_trips_and_rejects_oversize, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_checkpoints_default_to_zero_and_list_by_name,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_dead_letter_keeps_time_and_latest_reason, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_dead_letters_are_kept_per_sink_in_seq_order,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_survives_close_and_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_read_only_open_sees_writes_and_refuses_to_write,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_read_only_open_of_missing_index_says_not_found,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_fail_writes_fails_only_the_armed_writes_of_one_handle, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_read_only_open_of_an_uninitialised_index_says_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_applies_file_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_corrupt_environment_is_moved_aside_and_marked_rebuilt, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_corrupt_tables_are_moved_aside_and_marked_rebuilt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_data_file_shorter_than_its_pages_is_corrupt,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_reopens_whole_after_deleting_most_entries, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_rejects_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_dead_letter_count_is_kept_in_step_with_the_list,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_handles_in_one_process_share_one_environment,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_forked_child_opens_its_own_environment, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_index_sync_clears_the_slot_of_a_reader_killed_mid_transaction, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_index_writable_opens_after_a_read_only_one_share_one_more_environment, setup,
            teardown),
        cmocka_unit_test_setup_teardown(test_index_full_map_grows_and_keeps_every_batch, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_index_map_grows_while_other_threads_read, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_index_reader_in_another_process_follows_the_map_the_writer_grew, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
