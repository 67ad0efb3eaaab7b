/*
 * bench_fsync.c: the physical references, a plain write + fdatasync loop, buffered and
 * direct.
 *
 *   fsync-loop         pwrite of the record through the page cache + fdatasync;
 *   fsync-loop-direct  the record in a 4 KiB-aligned block, pwrite with O_DIRECT (no page
 *                      cache: fdatasync has only the device's flush left, as stele's journal
 *                      with sync=always) + fdatasync.
 *
 * Each append writes at the next offset of a preallocated, zero-filled file and fdatasyncs
 * it: the fastest way to make one record durable on this disk, with no metadata to flush
 * (the blocks exist and the size does not change), so the faster of the two is the ceiling a
 * lone durable writer can reach. With N writers, each claims its own offset (one atomic add)
 * and syncs on its own; the kernel and the disk may merge concurrent syncs, which is what
 * "the disk's own group commit" gives for free. Offsets wrap inside the file, so a long run
 * rewrites blocks that already exist (still no metadata). The direct loop gives every record
 * whole blocks of its own (a 200-byte record costs one 4 KiB block, as stele's lone writer
 * rewrites its tail block), so concurrent writers never write the same block. O_DSYNC instead
 * of fdatasync would cost the same on a disk without FUA (the kernel then sends a flush after
 * the write); a file system without O_DIRECT (tmpfs) reports the direct cell skipped.
 * syncs counts the fdatasync calls made in the timed window (an atomic counter).
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
/* O_DIRECT's offset, length and memory alignment: the largest logical block in use (as
 * stele's journal/direct.h). */
#define FSYNC_DIRECT_ALIGN 4096u

typedef struct fsync_target {
    int fd;
    int is_direct;
    uint64_t size_bytes;
    uint32_t slot_bytes; /* direct: the record rounded up to whole blocks */
    atomic_uint_fast64_t next_off;
    atomic_uint_fast64_t n_syncs; /* since the timed window opened */
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
    if (!rc && fsync(fd) != 0) /* the size and extents, once, before the clock starts */
        rc = -errno;
    return rc;
}

/* Creates and zero-fills the file, then holds the descriptor the appends use (for the direct
 * loop, a second one opened with O_DIRECT). */
static int
fsync_prepare(fsync_target_t *ft)
{
    ft->fd = -1;
    int fd = open(ft->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int rc = fsync_fill_zeros(fd, ft->size_bytes);
    if (rc == 0 && !ft->is_direct) {
        ft->fd = fd;
        return 0;
    }
    close(fd);
    if (rc)
        return rc;
    ft->fd = open(ft->path, O_RDWR | O_DIRECT | O_CLOEXEC);
    return ft->fd < 0 ? -errno : 0;
}

static int
fsync_open_as(const bench_cell_t *cell, int is_direct, void **state_out, char *note,
              size_t note_cap)
{
    fsync_target_t *ft = calloc(1, sizeof *ft);
    if (!ft) {
        snprintf(note, note_cap, "out of memory");
        return BENCH_FAILED;
    }
    bench_path(ft->path, sizeof ft->path, cell->dir,
               is_direct ? "fsync-loop-direct.dat" : "fsync-loop.dat");
    ft->is_direct = is_direct;
    ft->keep_data = cell->keep_data;
    ft->size_bytes = FSYNC_FILE_BYTES;
    ft->slot_bytes =
        (cell->record_bytes + FSYNC_DIRECT_ALIGN - 1) / FSYNC_DIRECT_ALIGN * FSYNC_DIRECT_ALIGN;
    atomic_init(&ft->next_off, 0);
    atomic_init(&ft->n_syncs, 0);
    int rc = fsync_prepare(ft);
    if (rc) {
        int is_unsupported = is_direct && rc == -EINVAL;
        if (is_unsupported)
            snprintf(note, note_cap, "the file system has no O_DIRECT (tmpfs?)");
        else
            bench_note(note, note_cap, "could not preallocate %s: %s", ft->path, strerror(-rc));
        unlink(ft->path);
        free(ft);
        return is_unsupported ? BENCH_SKIPPED : BENCH_FAILED;
    }
    *state_out = ft;
    return 0;
}

static int
fsync_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return fsync_open_as(cell, 0, state_out, note, note_cap);
}

static int
fsync_direct_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return fsync_open_as(cell, 1, state_out, note, note_cap);
}

/* Direct: a block-aligned buffer per writer, the record at its start, zeros after it. */
static int
fsync_writer_open(void *state, int writer_id, void **wstate_out, char *note, size_t note_cap)
{
    (void)writer_id;
    fsync_target_t *ft = state;
    void *block = NULL;
    if (ft->is_direct && posix_memalign(&block, FSYNC_DIRECT_ALIGN, ft->slot_bytes) != 0) {
        snprintf(note, note_cap, "out of memory");
        return BENCH_FAILED;
    }
    if (block)
        memset(block, 0, ft->slot_bytes);
    *wstate_out = block;
    return 0;
}

static void
fsync_writer_close(void *state, void *wstate)
{
    (void)state;
    free(wstate);
}

static int
fsync_write_all(int fd, const uint8_t *data, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, data + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

static int
fsync_append(void *state, void *wstate, const bench_event_t *ev)
{
    fsync_target_t *ft = state;
    const uint8_t *data = ev->data;
    size_t len = ev->len;
    if (ft->is_direct) {
        memcpy(wstate, ev->data, ev->len);
        data = wstate;
        len = ft->slot_bytes;
    }
    uint64_t off = atomic_fetch_add(&ft->next_off, len) % (ft->size_bytes - ft->slot_bytes);
    if (ft->is_direct)
        off -= off % FSYNC_DIRECT_ALIGN; /* the wrap may land between blocks */
    if (fsync_write_all(ft->fd, data, len, off))
        return -1;
    atomic_fetch_add_explicit(&ft->n_syncs, 1, memory_order_relaxed);
    return fdatasync(ft->fd) == 0 ? 0 : -1;
}

static void
fsync_measure_start(void *state)
{
    fsync_target_t *ft = state;
    atomic_store(&ft->n_syncs, 0);
}

static int
fsync_close(void *state, bench_result_t *r)
{
    fsync_target_t *ft = state;
    r->syncs = (int64_t)atomic_load(&ft->n_syncs);
    r->mean_batch = r->syncs > 0 ? (double)r->appends / (double)r->syncs : BENCH_UNKNOWN;
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
    .measure_start = fsync_measure_start,
    .close = fsync_close,
};

const bench_target_t bench_target_fsync_loop_direct = {
    .system = "fsync-loop-direct",
    .open = fsync_direct_open,
    .writer_open = fsync_writer_open,
    .append = fsync_append,
    .writer_close = fsync_writer_close,
    .measure_start = fsync_measure_start,
    .close = fsync_close,
};
