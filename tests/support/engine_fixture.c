/*
 * engine_fixture.c: see engine_fixture.h. The gate's state is guarded by its own mutex;
 * everything else is single-threaded test code.
 */
#include "engine_fixture.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"

void
fixture_options(stele_options_t *opts)
{
    stele_options_init(opts);
    opts->source = "test-host";
    opts->segment_bytes = 1u << 20;
    opts->max_record_bytes = 64u << 10;
}

long
fixture_read_all(const char *dir, fixture_record_t **out)
{
    journal_reader_t *r = NULL;
    stele_error_t err;
    *out = NULL;
    int rc = journal_reader_open(dir, NULL, &r, &err);
    if (rc)
        return rc;
    long n = 0, cap = 0;
    fixture_record_t *recs = NULL;
    for (;;) {
        journal_record_t rec;
        rc = journal_reader_next(r, &rec, &err);
        if (rc == STELE_EAGAIN)
            break;
        if (rc) {
            fixture_records_free(recs, n);
            journal_reader_close(r);
            return rc;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            fixture_record_t *grown = realloc(recs, (size_t)cap * sizeof *grown);
            if (!grown) {
                fixture_records_free(recs, n);
                journal_reader_close(r);
                return -12;
            }
            recs = grown;
        }
        fixture_record_t *f = &recs[n++];
        f->seq = rec.seq;
        f->ts_ns = rec.ts_ns;
        f->payload_len = rec.payload_len;
        f->payload = malloc(rec.payload_len ? rec.payload_len : 1);
        if (f->payload)
            memcpy(f->payload, rec.payload, rec.payload_len);
        memcpy(f->hash, rec.hash, 32);
        memcpy(f->prev_hash, rec.prev_hash, 32);
    }
    journal_reader_close(r);
    *out = recs;
    return n;
}

void
fixture_records_free(fixture_record_t *recs, long n)
{
    for (long i = 0; i < n; i++)
        free(recs[i].payload);
    free(recs);
}

const char *
fixture_check_chain(const fixture_record_t *recs, long n)
{
    for (long i = 0; i < n; i++) {
        if (recs[i].seq != (uint64_t)i + 1)
            return "seqs are not 1..n without gaps";
        if (i > 0 && recs[i].ts_ns < recs[i - 1].ts_ns)
            return "a timestamp decreased";
        if (i > 0 && memcmp(recs[i].prev_hash, recs[i - 1].hash, 32) != 0)
            return "a prev_hash is not the previous record's hash";
    }
    return NULL;
}

/* -- gate ---------------------------------------------------------------------------------- */

struct fixture_gate {
    journal_io_t io;
    const journal_io_t *inner;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool is_closed;
    int n_held;
};

static int
gate_open_file(void *ctx, int dir_fd, const char *name, int flags, mode_t mode)
{
    fixture_gate_t *g = ctx;
    return g->inner->open_file(g->inner->ctx, dir_fd, name, flags, mode);
}

static ssize_t
gate_pread(void *ctx, int fd, void *buf, size_t len, off_t off)
{
    fixture_gate_t *g = ctx;
    return g->inner->pread(g->inner->ctx, fd, buf, len, off);
}

static int
gate_pwritev(void *ctx, int fd, const struct iovec *iov, int iovcnt, off_t off)
{
    fixture_gate_t *g = ctx;
    /* Only writes that carry records are held: the segment preparer's zero fill (all-zero
     * buffers) passes, so a closed gate stalls the committer and nothing else. */
    bool carries_data = false;
    const uint8_t *head = iovcnt > 0 ? iov[0].iov_base : NULL;
    for (size_t i = 0; head && i < iov[0].iov_len && i < 64 && !carries_data; i++)
        carries_data = head[i] != 0;
    pthread_mutex_lock(&g->mu);
    while (g->is_closed && carries_data) {
        g->n_held++;
        pthread_cond_broadcast(&g->cv);
        pthread_cond_wait(&g->cv, &g->mu);
        g->n_held--;
    }
    pthread_mutex_unlock(&g->mu);
    return g->inner->pwritev(g->inner->ctx, fd, iov, iovcnt, off);
}

static int
gate_fdatasync(void *ctx, int fd)
{
    fixture_gate_t *g = ctx;
    return g->inner->fdatasync(g->inner->ctx, fd);
}

static int
gate_fsync(void *ctx, int fd)
{
    fixture_gate_t *g = ctx;
    return g->inner->fsync(g->inner->ctx, fd);
}

static int
gate_truncate(void *ctx, int fd, off_t len)
{
    fixture_gate_t *g = ctx;
    return g->inner->truncate(g->inner->ctx, fd, len);
}

static int
gate_allocate(void *ctx, int fd, off_t off, off_t len, int zero_fill)
{
    fixture_gate_t *g = ctx;
    return g->inner->allocate(g->inner->ctx, fd, off, len, zero_fill);
}

static int
gate_rename(void *ctx, int dir_fd, const char *from, const char *to)
{
    fixture_gate_t *g = ctx;
    return g->inner->rename(g->inner->ctx, dir_fd, from, to);
}

static int
gate_unlink(void *ctx, int dir_fd, const char *name)
{
    fixture_gate_t *g = ctx;
    return g->inner->unlink(g->inner->ctx, dir_fd, name);
}

static int
gate_sync_dir(void *ctx, int dir_fd)
{
    fixture_gate_t *g = ctx;
    return g->inner->sync_dir(g->inner->ctx, dir_fd);
}

static int
gate_open_dir(void *ctx, int dir_fd, const char *path)
{
    fixture_gate_t *g = ctx;
    return g->inner->open_dir(g->inner->ctx, dir_fd, path);
}

static int
gate_make_dir(void *ctx, int dir_fd, const char *name, mode_t mode)
{
    fixture_gate_t *g = ctx;
    return g->inner->make_dir(g->inner->ctx, dir_fd, name, mode);
}

static int
gate_set_mode(void *ctx, int fd, mode_t mode)
{
    fixture_gate_t *g = ctx;
    return g->inner->set_mode(g->inner->ctx, fd, mode);
}

static int
gate_file_size(void *ctx, int fd, off_t *size_out)
{
    fixture_gate_t *g = ctx;
    return g->inner->file_size(g->inner->ctx, fd, size_out);
}

static int
gate_close(void *ctx, int fd)
{
    fixture_gate_t *g = ctx;
    return g->inner->close(g->inner->ctx, fd);
}

fixture_gate_t *
fixture_gate_new(void)
{
    fixture_gate_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->inner = journal_io_posix();
    g->io = (journal_io_t){.ctx = g,
                           .open_file = gate_open_file,
                           .pread = gate_pread,
                           .pwritev = gate_pwritev,
                           .fdatasync = gate_fdatasync,
                           .fsync = gate_fsync,
                           .truncate = gate_truncate,
                           .allocate = gate_allocate,
                           .rename = gate_rename,
                           .unlink = gate_unlink,
                           .sync_dir = gate_sync_dir,
                           .file_size = gate_file_size,
                           .close = gate_close,
                           .open_dir = gate_open_dir,
                           .make_dir = gate_make_dir,
                           .set_mode = gate_set_mode};
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    return g;
}

void
fixture_gate_free(fixture_gate_t *g)
{
    if (!g)
        return;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

const journal_io_t *
fixture_gate_io(fixture_gate_t *g)
{
    return &g->io;
}

void
fixture_gate_close(fixture_gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    g->is_closed = true;
    pthread_mutex_unlock(&g->mu);
}

void
fixture_gate_open(fixture_gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    g->is_closed = false;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void
fixture_gate_wait_held(fixture_gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    while (g->n_held == 0)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}
