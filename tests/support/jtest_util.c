/*
 * jtest_util.c: helpers for the journal's unit tests (jtest_util.h). Test-only; aborts the
 * test through cmocka's asserts when the environment fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "jtest_util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"

char *
jtest_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/stele-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    assert_non_null(mkdtemp(buf));
    char *path = strdup(buf);
    assert_non_null(path);
    return path;
}

static int
jtest_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void
jtest_rmtree(char *path)
{
    if (!path)
        return;
    chmod(path, 0700);
    nftw(path, jtest_rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(path);
}

uint64_t
jtest_seed(const char *name)
{
    const char *env = getenv("STELE_TEST_SEED");
    uint64_t seed;
    if (env && *env) {
        seed = strtoull(env, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
    }
    fprintf(stderr, "%s: STELE_TEST_SEED=%" PRIu64 "\n", name, seed);
    return seed ? seed : 1;
}

uint64_t
jtest_rand(uint64_t *s)
{
    /* xorshift64*: enough for choosing test cases. */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

void
jtest_options(journal_options_t *o, uint64_t segment_bytes)
{
    journal_options_init(o);
    o->source = "test";
    if (segment_bytes)
        o->segment_bytes = segment_bytes;
}

uint32_t
jtest_payload_len(uint64_t seq)
{
    return (uint32_t)(16 + (seq * 37) % 200);
}

void
jtest_payload(uint64_t seq, uint8_t *out)
{
    uint32_t len = jtest_payload_len(seq);
    for (uint32_t i = 0; i < len; i++)
        out[i] = (uint8_t)(seq * 131 + i * 7);
}

int
jtest_append(journal_t *j, uint64_t n, journal_batch_info_t *info, stele_error_t *err)
{
    uint64_t first = journal_last_seq(j) + 1;
    size_t total = 0;
    for (uint64_t s = first; s < first + n; s++)
        total += journal_frame_bytes(journal_version(j), jtest_payload_len(s));
    uint8_t *buf = malloc(total ? total : 1);
    uint8_t payload[512];
    assert_non_null(buf);
    size_t off = 0;
    for (uint64_t s = first; s < first + n; s++) {
        jtest_payload(s, payload);
        journal_frame_prepare(journal_version(j), buf + off, s, (int64_t)s * 1000, NULL, payload,
                              jtest_payload_len(s));
        off += journal_frame_bytes(journal_version(j), jtest_payload_len(s));
    }
    int rc = journal_append_batch(j, buf, total, info, err);
    free(buf);
    return rc;
}

int64_t
jtest_read_all(const char *dir, uint64_t from, stele_error_t *err)
{
    journal_reader_t *r = NULL;
    int rc = journal_reader_open(dir, NULL, &r, err);
    if (rc)
        return rc;
    rc = journal_reader_seek(r, from, 0, 0, err);
    if (rc && rc != STELE_ENOTFOUND) {
        journal_reader_close(r);
        return rc;
    }
    int64_t n = 0;
    uint64_t expect = from;
    uint8_t prev[32], payload[512];
    int have_prev = 0;
    journal_record_t rec;
    while ((rc = journal_reader_next(r, &rec, err)) == 0) {
        assert_int_equal(rec.seq, expect);
        assert_int_equal(rec.payload_len, jtest_payload_len(rec.seq));
        jtest_payload(rec.seq, payload);
        assert_memory_equal(rec.payload, payload, rec.payload_len);
        assert_int_equal(rec.ts_ns, (int64_t)rec.seq * 1000);
        if (have_prev)
            assert_memory_equal(rec.prev_hash, prev, 32);
        memcpy(prev, rec.hash, 32);
        have_prev = 1;
        expect++;
        n++;
    }
    journal_reader_close(r);
    return rc == STELE_EAGAIN ? n : rc;
}

uint8_t *
jtest_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return buf;
}

void
jtest_poke(const char *path, uint64_t off, const void *bytes, size_t len)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, bytes, len, (off_t)off), (ssize_t)len);
    close(fd);
}

void
jtest_seg_path(char *out, size_t cap, const char *dir, uint64_t first_seq)
{
    snprintf(out, cap, "%s/%020" PRIu64 ".seg", dir, first_seq);
}
