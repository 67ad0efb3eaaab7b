/*
 * bench_fsync.c: the physical reference, a plain pwrite + fdatasync loop.
 *
 * Each append writes one record at the next offset of a preallocated, zero-filled file and
 * fdatasyncs it: the fastest way to make one record durable on this disk, with no metadata
 * to flush (the blocks exist and the size does not change), so its rate is the ceiling a
 * lone durable writer can reach. With N writers, each claims its own offset (one atomic
 * add) and syncs on its own; the kernel and the disk may merge concurrent syncs, which is
 * what "the disk's own group commit" gives for free. Offsets wrap inside the file, so a long
 * run rewrites blocks that already exist (still no metadata).
 */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Same size as a default stele segment; zero-filling it takes well under a second. */
#define FSYNC_FILE_BYTES (64ull * 1024 * 1024)
#define FSYNC_FILL_CHUNK (1024 * 1024)

typedef struct fsync_target {
    int fd;
    uint64_t size_bytes;
    atomic_uint_fast64_t next_off;
    int keep_data;
    char path[BENCH_PATH_BYTES];
} fsync_target_t;

static int
fsync_fill_zeros(int fd, uint64_t size_bytes)
{
    char *zeros = calloc(1, FSYNC_FILL_CHUNK);
    if (!zeros)
        return -ENOMEM;
    int rc = 0;
    for (uint64_t off = 0; off < size_bytes && !rc; off += FSYNC_FILL_CHUNK) {
        ssize_t n = pwrite(fd, zeros, FSYNC_FILL_CHUNK, (off_t)off);
        if (n != FSYNC_FILL_CHUNK)
            rc = n < 0 ? -errno : -EIO;
    }
    free(zeros);
    if (!rc && fdatasync(fd) != 0)
        rc = -errno;
    return rc;
}

static int
fsync_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    fsync_target_t *ft = calloc(1, sizeof *ft);
    if (!ft) {
        snprintf(note, note_cap, "out of memory");
        return BENCH_FAILED;
    }
    bench_path(ft->path, sizeof ft->path, cell->dir, "fsync-loop.dat");
    ft->keep_data = cell->keep_data;
    ft->size_bytes = FSYNC_FILE_BYTES;
    atomic_init(&ft->next_off, 0);
    ft->fd = open(ft->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = ft->fd < 0 ? -errno : fsync_fill_zeros(ft->fd, ft->size_bytes);
    if (!rc && fsync(ft->fd) != 0) /* the size and extents, once, before the clock starts */
        rc = -errno;
    if (rc) {
        snprintf(note, note_cap, "could not preallocate %s: %s", ft->path, strerror(-rc));
        if (ft->fd >= 0)
            close(ft->fd);
        unlink(ft->path);
        free(ft);
        return BENCH_FAILED;
    }
    *state_out = ft;
    return 0;
}

static int
fsync_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)wstate;
    fsync_target_t *ft = state;
    uint64_t off = atomic_fetch_add(&ft->next_off, ev->len) % (ft->size_bytes - ev->len);
    size_t done = 0;
    while (done < ev->len) {
        ssize_t n = pwrite(ft->fd, ev->data + done, ev->len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return fdatasync(ft->fd) == 0 ? 0 : -1;
}

static int
fsync_close(void *state, bench_result_t *r)
{
    fsync_target_t *ft = state;
    r->syncs = r->appends;
    r->mean_batch = 1.0;
    r->is_durable = 1;
    int rc = close(ft->fd) == 0 ? 0 : BENCH_FAILED;
    snprintf(r->data_path, sizeof r->data_path, "%s", ft->path);
    if (!ft->keep_data)
        unlink(ft->path);
    free(ft);
    return rc;
}

const bench_target_t bench_target_fsync_loop = {
    .system = "fsync-loop",
    .open = fsync_open,
    .append = fsync_append,
    .close = fsync_close,
};
