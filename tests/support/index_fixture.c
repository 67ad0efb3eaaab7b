/*
 * index_fixture.c: see index_fixture.h. Test-only; failures abort the running cmocka test.
 */
#include "index_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <bson/bson.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void
fx_tmpdir(char *buf, size_t cap, const char *tag)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, cap, "%s/stele-%s-XXXXXX", tmp && tmp[0] ? tmp : "/tmp", tag);
    assert_non_null(mkdtemp(buf));
}

static int
fx_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void
fx_rmtree(const char *dir)
{
    nftw(dir, fx_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void
fx_writer_open(fx_writer_t *w, const char *dir, int with_index)
{
    memset(w, 0, sizeof *w);
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    journal_options_t opts;
    journal_options_init(&opts);
    opts.source = "test-host";
    opts.segment_bytes = FX_SEGMENT_BYTES;
    opts.create_if_missing = 1;
    stele_error_t err;
    int rc = journal_open(dir, &opts, &w->j, &w->rec, &err);
    if (rc)
        fail_msg("journal_open %s: %s", dir, err.message);
    w->last_seq = w->rec.last_seq;
    w->last_ts_ns = w->rec.last_ts_ns;
    if (with_index) {
        rc = index_open(dir, 1, 0600, &w->ix, &err);
        if (rc)
            fail_msg("index_open %s: %s", dir, err.message);
    }
}

void
fx_writer_publish(fx_writer_t *w)
{
    journal_publish(w->j, w->last_seq, w->last_seq);
}

void
fx_writer_batch(fx_writer_t *w, size_t n, const int64_t *ts_ns, int publish)
{
    bson_t **docs = calloc(n, sizeof *docs);
    assert_non_null(docs);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t seq = w->last_seq + 1 + i;
        char pad[8] = "abcdefg";
        pad[seq % 7] = '\0';
        docs[i] = bson_new();
        BSON_APPEND_INT64(docs[i], "seq", (int64_t)seq);
        BSON_APPEND_UTF8(docs[i], "pad", pad);
        total += journal_frame_bytes(journal_version(w->j), docs[i]->len);
    }
    uint8_t *buf = calloc(1, total);
    assert_non_null(buf);
    size_t off = 0;
    int64_t ts = w->last_ts_ns;
    for (size_t i = 0; i < n; i++) {
        ts = ts_ns ? ts_ns[i] : ts + 1000;
        journal_frame_prepare(journal_version(w->j), buf + off, w->last_seq + 1 + i, ts, NULL,
                              bson_get_data(docs[i]), docs[i]->len);
        off += journal_frame_bytes(journal_version(w->j), docs[i]->len);
        bson_destroy(docs[i]);
    }
    free(docs);
    journal_batch_info_t info;
    stele_error_t err;
    int rc = journal_append_batch(w->j, buf, total, &info, &err);
    free(buf);
    if (rc)
        fail_msg("journal_append_batch: %s", err.message);
    /* No fdatasync per batch: these tests read, they do not crash; journal_close syncs. */
    w->last_seq += n;
    w->last_ts_ns = ts;
    if (w->ix) {
        index_batch_t b = {.first_seq = info.first_seq,
                           .segment_seq = info.segment_seq,
                           .offset = info.offset,
                           .first_ts_ns = info.first_ts_ns};
        rc = index_put_batches(w->ix, &b, 1, &err);
        if (rc)
            fail_msg("index_put_batches: %s", err.message);
        /* As the engine's index writer does: the Merkle tree's stored hashes too. */
        index_merkle_run_t run = {info.first_stored, info.stored, info.n_stored};
        if (info.n_stored && index_put_merkle_runs(w->ix, &run, 1, &err) != 0)
            fail_msg("index_put_merkle_runs: %s", err.message);
    }
    if (publish)
        fx_writer_publish(w);
}

void
fx_writer_close(fx_writer_t *w)
{
    stele_error_t err;
    if (w->ix) {
        assert_int_equal(index_sync(w->ix, &err), 0);
        index_close(w->ix);
        w->ix = NULL;
    }
    int rc = journal_close(w->j, &err);
    if (rc)
        fail_msg("journal_close: %s", err.message);
    w->j = NULL;
}

void
fx_write_journal(const char *dir, size_t n_batches, size_t per_batch, int with_index)
{
    fx_writer_t w;
    fx_writer_open(&w, dir, with_index);
    for (size_t i = 0; i < n_batches; i++)
        fx_writer_batch(&w, per_batch, NULL, 1);
    fx_writer_close(&w);
}

size_t
fx_read_positions(const char *dir, fx_record_t *out, size_t max)
{
    journal_reader_t *r = NULL;
    stele_error_t err;
    int rc = journal_reader_open(dir, NULL, &r, &err);
    if (rc)
        fail_msg("journal_reader_open %s: %s", dir, err.message);
    size_t n = 0;
    journal_record_t rec;
    while ((rc = journal_reader_next(r, &rec, &err)) == 0) {
        if (n < max)
            out[n] = (fx_record_t){.seq = rec.seq,
                                   .ts_ns = rec.ts_ns,
                                   .segment_seq = rec.segment_seq,
                                   .offset = rec.offset,
                                   .frame_bytes = (uint32_t)rec.frame_bytes,
                                   .is_batch_end = rec.is_batch_end};
        n++;
    }
    if (rc != STELE_EAGAIN)
        fail_msg("journal_reader_next: %s", err.message);
    journal_reader_close(r);
    return n;
}

void
fx_segment_path(char *buf, size_t cap, const char *dir, uint64_t segment_seq)
{
    /* Found by its number rather than by a fixed width, so the test does not restate the
     * journal's naming. */
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    buf[0] = '\0';
    while ((e = readdir(d)) != NULL) {
        char *end = NULL;
        unsigned long long v = strtoull(e->d_name, &end, 10);
        if (end != e->d_name && strcmp(end, ".seg") == 0 && v == segment_seq) {
            snprintf(buf, cap, "%s/%s", dir, e->d_name);
            break;
        }
    }
    closedir(d);
    if (!buf[0])
        fail_msg("no segment file for seq %llu in %s", (unsigned long long)segment_seq, dir);
}

void
fx_read_bytes(const char *path, uint64_t off, void *buf, size_t len)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, buf, len, (off_t)off), (ssize_t)len);
    close(fd);
}

void
fx_write_bytes(const char *path, uint64_t off, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
    close(fd);
}

void
fx_flip_byte(const char *path, uint64_t off, uint8_t mask)
{
    uint8_t b;
    fx_read_bytes(path, off, &b, 1);
    b ^= mask;
    fx_write_bytes(path, off, &b, 1);
}

void
fx_move_bytes(const char *path, uint64_t to, uint64_t from, uint64_t len)
{
    uint8_t *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    fx_read_bytes(path, from, buf, len);
    fx_write_bytes(path, to, buf, len);
    free(buf);
}

void
fx_zero_bytes(const char *path, uint64_t off, uint64_t len)
{
    uint8_t *buf = calloc(1, len ? len : 1);
    assert_non_null(buf);
    fx_write_bytes(path, off, buf, len);
    free(buf);
}
