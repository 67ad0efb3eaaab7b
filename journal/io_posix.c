/*
 * io_posix.c: the POSIX journal_io_t (io.h). Thin wrappers over the *at calls that retry
 * EINTR, loop over short transfers and return -errno. Every open carries O_NOFOLLOW (and a
 * directory open O_DIRECTORY too), so a symbolic link where a journal file or directory
 * should be is refused by the kernel, with no window between a check and the open.
 * Stateless: ctx is unused and the table is constant.
 */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes zeros in chunks of this size when asked to preallocate by zero-filling. */
enum { IO_ZERO_CHUNK_BYTES = 1024 * 1024 };

static int
io_posix_open(void *ctx, int dir_fd, const char *name, int flags, mode_t mode)
{
    (void)ctx;
    int oflags = O_CLOEXEC | O_NOFOLLOW | ((flags & JOURNAL_IO_WRITE) ? O_RDWR : O_RDONLY);
    if (flags & JOURNAL_IO_CREATE)
        oflags |= O_CREAT;
    if (flags & JOURNAL_IO_EXCLUSIVE)
        oflags |= O_EXCL;
    if (flags & JOURNAL_IO_DIRECT)
        oflags |= O_DIRECT;
    int fd;
    do {
        fd = openat(dir_fd, name, oflags, mode);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -errno;
    /* A file this call made gets exactly `mode`: the process umask must not take away what
     * the journal's file_mode grants (a group that reads the journal). */
    if ((flags & JOURNAL_IO_CREATE) && (flags & JOURNAL_IO_EXCLUSIVE) && fchmod(fd, mode) < 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

static ssize_t
io_posix_pread(void *ctx, int fd, void *buf, size_t len, off_t off)
{
    (void)ctx;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

/* Past the n bytes a pwritev wrote: *cur and *left move over the iovecs it finished, and
 * the one it stopped in starts where it stopped. */
static void
io_posix_iov_advance(struct iovec **cur, int *left, ssize_t n)
{
    while (n > 0 && *left > 0) {
        size_t step = (size_t)n < (*cur)->iov_len ? (size_t)n : (*cur)->iov_len;
        (*cur)->iov_base = (char *)(*cur)->iov_base + step;
        (*cur)->iov_len -= step;
        n -= (ssize_t)step;
        if ((*cur)->iov_len == 0) {
            (*cur)++;
            (*left)--;
        }
    }
}

/* Writes all of iov[0..iovcnt) at off, consuming the vector as it goes. */
static int
io_posix_pwritev_all(int fd, struct iovec *iov, int iovcnt, off_t off)
{
    struct iovec *cur = iov;
    int left = iovcnt;
    while (left > 0) {
        if (cur->iov_len == 0) {
            cur++;
            left--;
            continue;
        }
        ssize_t n = pwritev(fd, cur, left > IOV_MAX ? IOV_MAX : left, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO;
        off += n;
        io_posix_iov_advance(&cur, &left, n);
    }
    return 0;
}

static int
io_posix_pwritev(void *ctx, int fd, const struct iovec *iov_in, int iovcnt, off_t off)
{
    (void)ctx;
    /* The common case is one call; a short write continues from where it stopped on a
     * private copy of the vector so the caller's stays untouched. */
    struct iovec local[16];
    struct iovec *iov = local;
    if (iovcnt > (int)(sizeof local / sizeof local[0])) {
        iov = malloc(sizeof *iov * (size_t)iovcnt);
        if (!iov)
            return -ENOMEM;
    }
    memcpy(iov, iov_in, sizeof *iov * (size_t)iovcnt);
    int rc = io_posix_pwritev_all(fd, iov, iovcnt, off);
    if (iov != local)
        free(iov);
    return rc;
}

static int
io_posix_fdatasync(void *ctx, int fd)
{
    (void)ctx;
    /* Never retried on failure (only EINTR, which means nothing was attempted). */
    int rc;
    do {
        rc = fdatasync(fd);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : 0;
}

static int
io_posix_fsync(void *ctx, int fd)
{
    (void)ctx;
    int rc;
    do {
        rc = fsync(fd);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : 0;
}

static int
io_posix_truncate(void *ctx, int fd, off_t len)
{
    (void)ctx;
    int rc;
    do {
        rc = ftruncate(fd, len);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : 0;
}

static int
io_posix_zero_fill(int fd, off_t off, off_t len)
{
    char *zeros = calloc(1, IO_ZERO_CHUNK_BYTES);
    if (!zeros)
        return -ENOMEM;
    int rc = 0;
    while (len > 0) {
        size_t chunk = len < IO_ZERO_CHUNK_BYTES ? (size_t)len : IO_ZERO_CHUNK_BYTES;
        struct iovec iov = {.iov_base = zeros, .iov_len = chunk};
        rc = io_posix_pwritev(NULL, fd, &iov, 1, off);
        if (rc)
            break;
        off += (off_t)chunk;
        len -= (off_t)chunk;
    }
    free(zeros);
    return rc;
}

static int
io_posix_allocate(void *ctx, int fd, off_t off, off_t len, int zero_fill)
{
    (void)ctx;
    /* posix_fallocate's own rule, for zero-filling too, which would otherwise write nothing
     * for a negative length and report the space reserved. */
    if (off < 0 || len <= 0)
        return -EINVAL;
    if (zero_fill)
        return io_posix_zero_fill(fd, off, len);
    int rc;
    do {
        rc = posix_fallocate(fd, off, len);
    } while (rc == EINTR);
    return -rc;
}

/* rename and unlink are retried on EINTR like every call here: on a FUSE or network file
 * system a signal can interrupt them, and a roll or a retention pass must not fail for it. */
static int
io_posix_rename(void *ctx, int dir_fd, const char *from, const char *to)
{
    (void)ctx;
    int rc;
    do {
        rc = renameat(dir_fd, from, dir_fd, to);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : 0;
}

static int
io_posix_unlink(void *ctx, int dir_fd, const char *name)
{
    (void)ctx;
    int rc;
    do {
        rc = unlinkat(dir_fd, name, 0);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : 0;
}

static int
io_posix_sync_dir(void *ctx, int dir_fd)
{
    return io_posix_fsync(ctx, dir_fd);
}

static int
io_posix_open_dir(void *ctx, int dir_fd, const char *path)
{
    (void)ctx;
    int fd;
    do {
        fd = openat(dir_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
}

static int
io_posix_make_dir(void *ctx, int dir_fd, const char *name, mode_t mode)
{
    (void)ctx;
    int rc;
    do {
        rc = mkdirat(dir_fd, name, mode);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : 0;
}

static int
io_posix_set_mode(void *ctx, int fd, mode_t mode)
{
    (void)ctx;
    int rc;
    do {
        rc = fchmod(fd, mode);
    } while (rc < 0 && errno == EINTR);
    return rc < 0 ? -errno : 0;
}

static int
io_posix_file_size(void *ctx, int fd, off_t *size_out)
{
    (void)ctx;
    struct stat st;
    int rc;
    do {
        rc = fstat(fd, &st);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return -errno;
    *size_out = st.st_size;
    return 0;
}

static int
io_posix_close(void *ctx, int fd)
{
    (void)ctx;
    /* close is not retried on EINTR: on Linux the descriptor is released either way. */
    return close(fd) < 0 && errno != EINTR ? -errno : 0;
}

static const journal_io_t io_posix_table = {
    .ctx = NULL,
    .open_file = io_posix_open,
    .pread = io_posix_pread,
    .pwritev = io_posix_pwritev,
    .fdatasync = io_posix_fdatasync,
    .fsync = io_posix_fsync,
    .truncate = io_posix_truncate,
    .allocate = io_posix_allocate,
    .rename = io_posix_rename,
    .unlink = io_posix_unlink,
    .sync_dir = io_posix_sync_dir,
    .file_size = io_posix_file_size,
    .close = io_posix_close,
    .open_dir = io_posix_open_dir,
    .make_dir = io_posix_make_dir,
    .set_mode = io_posix_set_mode,
};

const journal_io_t *
journal_io_posix(void)
{
    return &io_posix_table;
}
