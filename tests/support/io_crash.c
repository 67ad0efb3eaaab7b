/*
 * io_crash.c: the power-loss I/O table (model and contract in io_crash.h).
 *
 * How it works: every operation is written through to the real file at once (so reads, file
 * sizes and readers in other processes see the page cache as they would), and logged with
 * an undo image: the bytes and size it replaced. A sync drops the file's log (it is durable
 * now); sync_dir drops the directory's pending create/rename/unlink log. A crash first
 * undoes every logged file operation in reverse order, which leaves each file as it was at
 * its last sync, then replays a random subset of them sector piece by sector piece, then
 * undoes the lost directory operations in reverse order.
 *
 * Owns: the undo logs, one inode record per file seen (with its own descriptor, reopened
 * through /proc/self/fd so it shares no lock with the journal's, so a file can be rewritten
 * after the journal closed, renamed or unlinked it), the PRNG. The real
 * files are only touched by the journal's own calls and by apply.
 * Invariants: an inode's ops are exactly its unsynced operations, oldest first; undoing them
 * in reverse restores its last durable state. dir_ops are the unsynced directory
 * operations, oldest first.
 * Locking: `mu` protects everything and is held across the inner call, so the log order is
 * the order the operations reached the file system.
 */
#include "io_crash.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

/* The unit a disk writes atomically, and so the unit a crash keeps or loses. */
enum { CRASH_SECTOR_BYTES = 512 };
/* Chunk for copying or zeroing file regions during apply. */
enum { CRASH_CHUNK_BYTES = 64 * 1024 };

typedef enum file_op_kind { FILE_OP_WRITE, FILE_OP_TRUNCATE, FILE_OP_ALLOCATE } file_op_kind_t;

typedef struct file_op {
    file_op_kind_t kind;
    off_t off;       /* write/allocate: start; truncate: the new length */
    off_t len_bytes; /* write/allocate: length of the region */
    int zero_fill;   /* allocate: zeros written rather than fallocate */
    uint8_t *data;   /* write: the bytes written */
    off_t size_before;
    off_t pre_off; /* undo image: bytes [pre_off, pre_off+pre_len) as they were */
    size_t pre_len;
    uint8_t *pre;
} file_op_t;

typedef struct inode {
    dev_t dev;
    ino_t ino;
    int fd; /* our own descriptor, valid until apply/settle/free */
    file_op_t *ops;
    size_t n_ops, cap_ops;
} inode_t;

typedef enum dir_op_kind { DIR_OP_CREATE, DIR_OP_RENAME, DIR_OP_UNLINK } dir_op_kind_t;

typedef struct dir_op {
    dir_op_kind_t kind;
    char *dir;      /* canonical directory the entry lives in */
    char *path;     /* create/unlink: the name; rename: the target */
    char *from;     /* rename: the source */
    inode_t *inode; /* unlink: the file removed; rename: the target replaced (or NULL) */
} dir_op_t;

struct io_crash {
    journal_io_t io; /* ctx points back at the struct */
    const journal_io_t *inner;
    int syncs_reach_disk;

    /* -- protected by mu -- */
    pthread_mutex_t mu;
    test_rng_t rng;
    uint64_t n_calls;
    uint64_t crash_at_call; /* 0 = not armed */
    io_crash_method_t crash_method;
    uint64_t method_calls_left; /* calls of crash_method until the crash; 0 = not armed */
    int has_crashed;
    inode_t **inodes;
    size_t n_inodes, cap_inodes;
    dir_op_t *dir_ops;
    size_t n_dir_ops, cap_dir_ops;
};

/* ---------------------------------------------------------------------------------------
 * Small helpers (called with mu held)
 * --------------------------------------------------------------------------------------- */

static int
grow(void **items, size_t *cap, size_t need, size_t item_bytes)
{
    if (need <= *cap)
        return 0;
    size_t new_cap = *cap ? *cap * 2 : 8;
    while (new_cap < need)
        new_cap *= 2;
    void *grown = realloc(*items, new_cap * item_bytes);
    if (!grown)
        return -ENOMEM;
    *items = grown;
    *cap = new_cap;
    return 0;
}

static int
pread_full(int fd, uint8_t *buf, size_t len, off_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, buf + done, len - done, off + (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0) {
            memset(buf + done, 0, len - done); /* past EOF reads as zeros */
            return 0;
        }
        done += (size_t)n;
    }
    return 0;
}

static int
pwrite_full(int fd, const uint8_t *buf, size_t len, off_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, buf + done, len - done, off + (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        done += (size_t)n;
    }
    return 0;
}

static int
fd_size(int fd, off_t *size_out)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    *size_out = st.st_size;
    return 0;
}

/* The canonical directory holding `path` (malloc'd), or NULL. */
static char *
canonical_dir_of(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return NULL;
    char *slash = strrchr(copy, '/');
    const char *dir = ".";
    if (slash == copy)
        dir = "/";
    else if (slash) {
        *slash = '\0';
        dir = copy;
    }
    char *canon = realpath(dir, NULL);
    free(copy);
    return canon;
}

/* The directory open as dir_fd, as a canonical path (malloc'd), or NULL. */
static char *
canonical_dir_fd(int dir_fd)
{
    if (dir_fd == AT_FDCWD)
        return realpath(".", NULL);
    char self_path[64];
    snprintf(self_path, sizeof(self_path), "/proc/self/fd/%d", dir_fd);
    return realpath(self_path, NULL);
}

/* `name` in the directory dir_fd as an absolute path (malloc'd), or NULL: the undo log
 * names files by path, since the journal's descriptors are gone by the time it is applied. */
static char *
path_at(int dir_fd, const char *name)
{
    if (name[0] == '/')
        return strdup(name);
    char *dir = canonical_dir_fd(dir_fd);
    if (!dir)
        return NULL;
    size_t cap = strlen(dir) + strlen(name) + 2;
    char *path = malloc(cap);
    if (path)
        snprintf(path, cap, "%s/%s", dir, name);
    free(dir);
    return path;
}

static void
inode_free(inode_t *in)
{
    for (size_t i = 0; i < in->n_ops; i++) {
        free(in->ops[i].data);
        free(in->ops[i].pre);
    }
    free(in->ops);
    if (in->fd >= 0)
        close(in->fd);
    free(in);
}

static void
inode_forget_ops(inode_t *in)
{
    for (size_t i = 0; i < in->n_ops; i++) {
        free(in->ops[i].data);
        free(in->ops[i].pre);
    }
    in->n_ops = 0;
}

/* The inode record for the file open as `fd`, created (with a dup of fd) if new. */
static inode_t *
inode_of_fd(io_crash_t *c, int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return NULL;
    for (size_t i = 0; i < c->n_inodes; i++) {
        if (c->inodes[i]->dev == st.st_dev && c->inodes[i]->ino == st.st_ino)
            return c->inodes[i];
    }
    if (grow((void **)&c->inodes, &c->cap_inodes, c->n_inodes + 1, sizeof(*c->inodes)))
        return NULL;
    inode_t *in = calloc(1, sizeof(*in));
    if (!in)
        return NULL;
    in->dev = st.st_dev;
    in->ino = st.st_ino;
    /* A new open file description of the same inode, not a dup: a dup would share (and so
     * keep alive) the journal's flock/OFD writer lock after the journal closes its fd. */
    char self_path[64];
    snprintf(self_path, sizeof(self_path), "/proc/self/fd/%d", fd);
    in->fd = open(self_path, O_RDWR | O_CLOEXEC);
    if (in->fd < 0)
        in->fd = open(self_path, O_RDONLY | O_CLOEXEC);
    if (in->fd < 0) {
        free(in);
        return NULL;
    }
    c->inodes[c->n_inodes++] = in;
    return in;
}

/* The inode record for the file at `path` (NULL if it does not exist). */
static inode_t *
inode_of_path(io_crash_t *c, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    inode_t *in = inode_of_fd(c, fd);
    close(fd);
    return in;
}

/* Logs an operation on `fd` with the undo image of [pre_off, pre_off+pre_len) ∩ file. The
 * image is read through the inode's own descriptor: the caller's may be O_DIRECT, which
 * refuses unaligned reads. */
static int
log_file_op(io_crash_t *c, int fd, file_op_t *op, off_t pre_off, off_t pre_len)
{
    inode_t *in = inode_of_fd(c, fd);
    if (!in)
        return -ENOMEM;
    int rc = fd_size(fd, &op->size_before);
    if (rc)
        return rc;
    if (pre_off < op->size_before && pre_len > 0) {
        off_t end = pre_off + pre_len < op->size_before ? pre_off + pre_len : op->size_before;
        op->pre_off = pre_off;
        op->pre_len = (size_t)(end - pre_off);
        op->pre = malloc(op->pre_len);
        if (!op->pre)
            return -ENOMEM;
        rc = pread_full(in->fd, op->pre, op->pre_len, pre_off);
        if (rc) {
            free(op->pre);
            return rc;
        }
    }
    if (grow((void **)&in->ops, &in->cap_ops, in->n_ops + 1, sizeof(*in->ops))) {
        free(op->pre);
        return -ENOMEM;
    }
    in->ops[in->n_ops++] = *op;
    return 0;
}

/* Drops the log entry just added to fd's inode when the real operation then failed. */
static void
unlog_last_file_op(io_crash_t *c, int fd)
{
    inode_t *in = inode_of_fd(c, fd);
    if (!in || in->n_ops == 0)
        return;
    file_op_t *op = &in->ops[--in->n_ops];
    free(op->data);
    free(op->pre);
}

static int
log_dir_op(io_crash_t *c, dir_op_kind_t kind, const char *path, const char *from, inode_t *in)
{
    if (grow((void **)&c->dir_ops, &c->cap_dir_ops, c->n_dir_ops + 1, sizeof(*c->dir_ops)))
        return -ENOMEM;
    dir_op_t op = {.kind = kind, .inode = in};
    op.dir = canonical_dir_of(path);
    op.path = strdup(path);
    op.from = from ? strdup(from) : NULL;
    if (!op.dir || !op.path || (from && !op.from)) {
        free(op.dir);
        free(op.path);
        free(op.from);
        return -ENOMEM;
    }
    c->dir_ops[c->n_dir_ops++] = op;
    return 0;
}

static void
dir_op_free(dir_op_t *op)
{
    free(op->dir);
    free(op->path);
    free(op->from);
}

/* Counts the call; returns -EIO once the power has failed (the nth call included). */
static int
crash_gate(io_crash_t *c, io_crash_method_t method)
{
    c->n_calls++;
    if (c->crash_at_call && c->n_calls >= c->crash_at_call)
        c->has_crashed = 1;
    if (c->method_calls_left && method == c->crash_method && --c->method_calls_left == 0)
        c->has_crashed = 1;
    return c->has_crashed ? -EIO : 0;
}

/* ---------------------------------------------------------------------------------------
 * The table
 * --------------------------------------------------------------------------------------- */

static int
crash_open_file(void *ctx, int dir_fd, const char *name, int flags, mode_t mode)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = crash_gate(c, IO_CRASH_AT_ANY);
    if (rc)
        goto out;
    struct stat st;
    int is_new = (flags & JOURNAL_IO_CREATE) &&
                 fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT;
    rc = c->inner->open_file(c->inner->ctx, dir_fd, name, flags, mode);
    if (rc < 0)
        goto out;
    int fd = rc;
    int log_rc = inode_of_fd(c, fd) ? 0 : -ENOMEM;
    char *path = is_new && !log_rc ? path_at(dir_fd, name) : NULL;
    if (is_new && !log_rc)
        log_rc = path ? log_dir_op(c, DIR_OP_CREATE, path, NULL, NULL) : -ENOMEM;
    free(path);
    if (log_rc) {
        c->inner->close(c->inner->ctx, fd);
        rc = log_rc;
    }
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static ssize_t
crash_pread(void *ctx, int fd, void *buf, size_t len, off_t off)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    ssize_t rc = crash_gate(c, IO_CRASH_AT_ANY);
    if (!rc)
        rc = c->inner->pread(c->inner->ctx, fd, buf, len, off);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int
crash_pwritev(void *ctx, int fd, const struct iovec *iov, int iovcnt, off_t off)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = crash_gate(c, IO_CRASH_AT_PWRITEV);
    if (rc)
        goto out;
    size_t total_bytes = 0;
    for (int i = 0; i < iovcnt; i++)
        total_bytes += iov[i].iov_len;
    file_op_t op = {.kind = FILE_OP_WRITE, .off = off, .len_bytes = (off_t)total_bytes};
    op.data = malloc(total_bytes ? total_bytes : 1);
    if (!op.data) {
        rc = -ENOMEM;
        goto out;
    }
    size_t at = 0;
    for (int i = 0; i < iovcnt; i++) {
        memcpy(op.data + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    rc = log_file_op(c, fd, &op, off, (off_t)total_bytes);
    if (rc) {
        free(op.data);
        goto out;
    }
    rc = c->inner->pwritev(c->inner->ctx, fd, iov, iovcnt, off);
    if (rc)
        unlog_last_file_op(c, fd);
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* A file sync: the file's logged operations are durable from now on. */
static int
crash_sync_file(io_crash_t *c, int fd, int is_full)
{
    pthread_mutex_lock(&c->mu);
    int rc = crash_gate(c, is_full ? IO_CRASH_AT_ANY : IO_CRASH_AT_FDATASYNC);
    if (!rc && c->syncs_reach_disk)
        rc = is_full ? c->inner->fsync(c->inner->ctx, fd) : c->inner->fdatasync(c->inner->ctx, fd);
    if (!rc) {
        inode_t *in = inode_of_fd(c, fd);
        if (in)
            inode_forget_ops(in);
        else
            rc = -ENOMEM;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int
crash_fdatasync(void *ctx, int fd)
{
    return crash_sync_file(ctx, fd, 0);
}

static int
crash_fsync(void *ctx, int fd)
{
    return crash_sync_file(ctx, fd, 1);
}

static int
crash_truncate(void *ctx, int fd, off_t len)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = crash_gate(c, IO_CRASH_AT_ANY);
    if (rc)
        goto out;
    file_op_t op = {.kind = FILE_OP_TRUNCATE, .off = len};
    rc = log_file_op(c, fd, &op, len, (off_t)INT64_MAX - len);
    if (rc)
        goto out;
    rc = c->inner->truncate(c->inner->ctx, fd, len);
    if (rc)
        unlog_last_file_op(c, fd);
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int
crash_allocate(void *ctx, int fd, off_t off, off_t len, int zero_fill)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = crash_gate(c, IO_CRASH_AT_ANY);
    if (rc)
        goto out;
    file_op_t op = {.kind = FILE_OP_ALLOCATE, .off = off, .len_bytes = len, .zero_fill = zero_fill};
    /* fallocate leaves existing bytes alone; zero filling overwrites them. */
    rc = log_file_op(c, fd, &op, off, zero_fill ? len : 0);
    if (rc)
        goto out;
    rc = c->inner->allocate(c->inner->ctx, fd, off, len, zero_fill);
    if (rc)
        unlog_last_file_op(c, fd);
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int
crash_rename(void *ctx, int dir_fd, const char *from, const char *to)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    char *from_path = NULL, *to_path = NULL;
    int rc = crash_gate(c, IO_CRASH_AT_ANY);
    if (rc)
        goto out;
    from_path = path_at(dir_fd, from);
    to_path = path_at(dir_fd, to);
    if (!from_path || !to_path) {
        rc = -ENOMEM;
        goto out;
    }
    /* The file a rename replaces must come back if the rename is lost. */
    inode_t *replaced = inode_of_path(c, to_path);
    rc = c->inner->rename(c->inner->ctx, dir_fd, from, to);
    if (!rc)
        rc = log_dir_op(c, DIR_OP_RENAME, to_path, from_path, replaced);
out:
    free(from_path);
    free(to_path);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int
crash_unlink(void *ctx, int dir_fd, const char *name)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    char *path = NULL;
    int rc = crash_gate(c, IO_CRASH_AT_ANY);
    if (rc)
        goto out;
    path = path_at(dir_fd, name);
    if (!path) {
        rc = -ENOMEM;
        goto out;
    }
    inode_t *removed = inode_of_path(c, path);
    rc = c->inner->unlink(c->inner->ctx, dir_fd, name);
    if (!rc && removed)
        rc = log_dir_op(c, DIR_OP_UNLINK, path, NULL, removed);
out:
    free(path);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int
crash_sync_dir(void *ctx, int dir_fd)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = crash_gate(c, IO_CRASH_AT_ANY);
    if (!rc && c->syncs_reach_disk)
        rc = c->inner->sync_dir(c->inner->ctx, dir_fd);
    char *canon = rc ? NULL : canonical_dir_fd(dir_fd);
    if (!rc && !canon)
        rc = -errno;
    if (!rc) {
        size_t kept = 0;
        for (size_t i = 0; i < c->n_dir_ops; i++) {
            if (strcmp(c->dir_ops[i].dir, canon) == 0)
                dir_op_free(&c->dir_ops[i]);
            else
                c->dir_ops[kept++] = c->dir_ops[i];
        }
        c->n_dir_ops = kept;
    }
    free(canon);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Opening a directory, making one and setting a mode pass straight through once gated: the
 * model keeps no undo image of them (the journal syncs a new directory's parent before it
 * relies on it, and a mode is not log data). */
static int
crash_open_dir(void *ctx, int dir_fd, const char *path)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = crash_gate(c, IO_CRASH_AT_ANY);
    if (!rc)
        rc = c->inner->open_dir(c->inner->ctx, dir_fd, path);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int
crash_make_dir(void *ctx, int dir_fd, const char *name, mode_t mode)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = crash_gate(c, IO_CRASH_AT_ANY);
    if (!rc)
        rc = c->inner->make_dir(c->inner->ctx, dir_fd, name, mode);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int
crash_set_mode(void *ctx, int fd, mode_t mode)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = crash_gate(c, IO_CRASH_AT_ANY);
    if (!rc)
        rc = c->inner->set_mode(c->inner->ctx, fd, mode);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int
crash_file_size(void *ctx, int fd, off_t *size_out)
{
    io_crash_t *c = ctx;
    pthread_mutex_lock(&c->mu);
    int rc = crash_gate(c, IO_CRASH_AT_ANY);
    if (!rc)
        rc = c->inner->file_size(c->inner->ctx, fd, size_out);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int
crash_close(void *ctx, int fd)
{
    io_crash_t *c = ctx;
    /* Closing never fails the power-loss model: the descriptor is released either way. */
    pthread_mutex_lock(&c->mu);
    c->n_calls++;
    int rc = c->inner->close(c->inner->ctx, fd);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * The crash
 * --------------------------------------------------------------------------------------- */

/* Writes zeros over [off, off+len) of fd. */
static int
write_zeros(int fd, off_t off, off_t len)
{
    static const uint8_t zeros[CRASH_CHUNK_BYTES];
    while (len > 0) {
        size_t n = len < (off_t)sizeof(zeros) ? (size_t)len : sizeof(zeros);
        int rc = pwrite_full(fd, zeros, n, off);
        if (rc)
            return rc;
        off += (off_t)n;
        len -= (off_t)n;
    }
    return 0;
}

static int
undo_file_op(int fd, const file_op_t *op)
{
    if (ftruncate(fd, op->size_before) != 0)
        return -errno;
    return op->pre_len ? pwrite_full(fd, op->pre, op->pre_len, op->pre_off) : 0;
}

/* The survival odds of one crash: everything, nothing, or each piece with some chance. */
typedef struct crash_plan {
    unsigned keep_percent;
} crash_plan_t;

static int
redo_write(io_crash_t *c, int fd, const file_op_t *op, const crash_plan_t *plan,
           io_crash_report_t *rep)
{
    off_t end = op->off + op->len_bytes;
    for (off_t at = op->off; at < end;) {
        off_t sector_end = (at / CRASH_SECTOR_BYTES + 1) * CRASH_SECTOR_BYTES;
        off_t piece_end = sector_end < end ? sector_end : end;
        if (test_rng_chance(&c->rng, plan->keep_percent)) {
            int rc = pwrite_full(fd, op->data + (at - op->off), (size_t)(piece_end - at), at);
            if (rc)
                return rc;
            rep->sectors_kept++;
        } else {
            rep->sectors_dropped++;
        }
        at = piece_end;
    }
    return 0;
}

static int
redo_file_op(io_crash_t *c, int fd, const file_op_t *op, const crash_plan_t *plan,
             io_crash_report_t *rep)
{
    if (op->kind == FILE_OP_WRITE)
        return redo_write(c, fd, op, plan, rep);
    if (!test_rng_chance(&c->rng, plan->keep_percent))
        return 0;
    if (op->kind == FILE_OP_TRUNCATE)
        return ftruncate(fd, op->off) == 0 ? 0 : -errno;
    off_t size = 0;
    int rc = fd_size(fd, &size);
    if (!rc && size < op->off + op->len_bytes && ftruncate(fd, op->off + op->len_bytes) != 0)
        rc = -errno;
    if (!rc && op->zero_fill)
        rc = write_zeros(fd, op->off, op->len_bytes);
    return rc;
}

/* In a damaged piece [start, end) of op, puts back the bytes the write did not change (it
 * wrote what the file already held there, as an O_DIRECT write does with the durable head
 * of its first block): sectors are written atomically, so such a sector holds its old or
 * its new bytes, and both are these. Returns whether any byte of the piece is damaged. */
static bool
damage_keep_unchanged(const file_op_t *op, off_t start, off_t end, uint8_t *piece)
{
    bool damaged = false;
    for (off_t at = start; at < end; at++) {
        uint8_t written = op->data[at - op->off];
        bool had_before = op->pre && at >= op->pre_off && at < op->pre_off + (off_t)op->pre_len;
        if (had_before && op->pre[at - op->pre_off] == written)
            piece[at - start] = written;
        else
            damaged = true;
    }
    return damaged;
}

/* Zeroes or garbles one sector piece of one unsynced write (bytes that were not durable). */
static int
damage_one_piece(io_crash_t *c, io_crash_report_t *rep)
{
    size_t n_writes = 0;
    for (size_t i = 0; i < c->n_inodes; i++)
        for (size_t k = 0; k < c->inodes[i]->n_ops; k++)
            n_writes += c->inodes[i]->ops[k].kind == FILE_OP_WRITE;
    if (n_writes == 0)
        return 0;
    size_t pick = (size_t)test_rng_below(&c->rng, n_writes);
    for (size_t i = 0; i < c->n_inodes; i++) {
        inode_t *in = c->inodes[i];
        for (size_t k = 0; k < in->n_ops; k++) {
            const file_op_t *op = &in->ops[k];
            if (op->kind != FILE_OP_WRITE || op->len_bytes == 0 || pick-- != 0)
                continue;
            off_t at = op->off + (off_t)test_rng_below(&c->rng, (uint64_t)op->len_bytes);
            off_t start = at / CRASH_SECTOR_BYTES * CRASH_SECTOR_BYTES;
            off_t end = start + CRASH_SECTOR_BYTES;
            if (start < op->off)
                start = op->off;
            if (end > op->off + op->len_bytes)
                end = op->off + op->len_bytes;
            uint8_t piece[CRASH_SECTOR_BYTES];
            int kind = test_rng_chance(&c->rng, 50) ? 1 : 2;
            if (kind == 1)
                memset(piece, 0, sizeof(piece));
            else
                test_rng_fill(&c->rng, piece, sizeof(piece));
            if (!damage_keep_unchanged(op, start, end, piece))
                return 0;
            rep->damage = kind;
            return pwrite_full(in->fd, piece, (size_t)(end - start), start);
        }
    }
    return 0;
}

/* Recreates `path` holding the current bytes of `in` (a lost unlink or rename-over). */
static int
restore_file(const inode_t *in, const char *path)
{
    struct stat st;
    if (fstat(in->fd, &st) != 0)
        return -errno;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, st.st_mode & 07777);
    if (fd < 0)
        return -errno;
    int rc = 0;
    uint8_t *buf = malloc(CRASH_CHUNK_BYTES);
    if (!buf)
        rc = -ENOMEM;
    for (off_t at = 0; !rc && at < st.st_size;) {
        size_t n = st.st_size - at < CRASH_CHUNK_BYTES ? (size_t)(st.st_size - at)
                                                       : (size_t)CRASH_CHUNK_BYTES;
        rc = pread_full(in->fd, buf, n, at);
        if (!rc)
            rc = pwrite_full(fd, buf, n, at);
        at += (off_t)n;
    }
    free(buf);
    close(fd);
    return rc;
}

static int
undo_dir_op(const dir_op_t *op)
{
    switch (op->kind) {
    case DIR_OP_CREATE:
        return unlink(op->path) == 0 || errno == ENOENT ? 0 : -errno;
    case DIR_OP_RENAME:
        if (rename(op->path, op->from) != 0)
            return -errno;
        return op->inode ? restore_file(op->inode, op->path) : 0;
    case DIR_OP_UNLINK:
        return restore_file(op->inode, op->path);
    }
    return -EINVAL;
}

/* Undoes the directory operations lost in the crash: in each directory all but a prefix. */
static int
crash_dir_ops(io_crash_t *c, const crash_plan_t *plan, io_crash_report_t *rep)
{
    unsigned char *lost = calloc(c->n_dir_ops ? c->n_dir_ops : 1, 1);
    unsigned char *seen = calloc(c->n_dir_ops ? c->n_dir_ops : 1, 1);
    int rc = (!lost || !seen) ? -ENOMEM : 0;
    for (size_t i = 0; !rc && i < c->n_dir_ops; i++) {
        if (seen[i])
            continue;
        size_t n_in_dir = 0;
        for (size_t k = i; k < c->n_dir_ops; k++)
            n_in_dir += strcmp(c->dir_ops[k].dir, c->dir_ops[i].dir) == 0;
        size_t n_kept = plan->keep_percent == 100 ? n_in_dir
                        : plan->keep_percent == 0 ? 0
                                                  : (size_t)test_rng_below(&c->rng, n_in_dir + 1);
        size_t index = 0;
        for (size_t k = i; k < c->n_dir_ops; k++) {
            if (strcmp(c->dir_ops[k].dir, c->dir_ops[i].dir) != 0)
                continue;
            seen[k] = 1;
            lost[k] = index++ >= n_kept;
        }
    }
    for (size_t i = c->n_dir_ops; !rc && i-- > 0;) {
        if (!lost[i])
            continue;
        rc = undo_dir_op(&c->dir_ops[i]);
        rep->dir_ops_lost++;
    }
    free(lost);
    free(seen);
    return rc;
}

static int
crash_files(io_crash_t *c, const crash_plan_t *plan, io_crash_report_t *rep)
{
    for (size_t i = 0; i < c->n_inodes; i++) {
        inode_t *in = c->inodes[i];
        rep->pending_ops += in->n_ops;
        for (size_t k = in->n_ops; k-- > 0;) {
            int rc = undo_file_op(in->fd, &in->ops[k]);
            if (rc)
                return rc;
        }
        for (size_t k = 0; k < in->n_ops; k++) {
            int rc = redo_file_op(c, in->fd, &in->ops[k], plan, rep);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static void
forget_all(io_crash_t *c)
{
    for (size_t i = 0; i < c->n_dir_ops; i++)
        dir_op_free(&c->dir_ops[i]);
    c->n_dir_ops = 0;
    for (size_t i = 0; i < c->n_inodes; i++)
        inode_free(c->inodes[i]);
    c->n_inodes = 0;
    c->has_crashed = 0;
    c->crash_at_call = 0;
    c->method_calls_left = 0;
}

int
io_crash_apply(io_crash_t *c, io_crash_report_t *report)
{
    io_crash_report_t rep = {0};
    crash_plan_t plan;

    pthread_mutex_lock(&c->mu);
    c->has_crashed = 1;
    /* A fifth of crashes lose everything pending, a fifth keep it all; the rest a mix. */
    uint64_t mode = test_rng_below(&c->rng, 5);
    plan.keep_percent = mode == 0 ? 0 : mode == 1 ? 100 : (unsigned)test_rng_range(&c->rng, 1, 99);

    int rc = crash_files(c, &plan, &rep);
    if (!rc && test_rng_chance(&c->rng, 40))
        rc = damage_one_piece(c, &rep);
    if (!rc)
        rc = crash_dir_ops(c, &plan, &rep);
    forget_all(c);
    pthread_mutex_unlock(&c->mu);
    if (report)
        *report = rep;
    return rc;
}

void
io_crash_settle(io_crash_t *c)
{
    pthread_mutex_lock(&c->mu);
    forget_all(c);
    pthread_mutex_unlock(&c->mu);
}

io_crash_t *
io_crash_new(const journal_io_t *inner, uint64_t seed, int syncs_reach_disk)
{
    io_crash_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    c->inner = inner;
    c->syncs_reach_disk = syncs_reach_disk;
    test_rng_init(&c->rng, seed);
    c->io = (journal_io_t){
        .ctx = c,
        .open_file = crash_open_file,
        .pread = crash_pread,
        .pwritev = crash_pwritev,
        .fdatasync = crash_fdatasync,
        .fsync = crash_fsync,
        .truncate = crash_truncate,
        .allocate = crash_allocate,
        .rename = crash_rename,
        .unlink = crash_unlink,
        .sync_dir = crash_sync_dir,
        .file_size = crash_file_size,
        .close = crash_close,
        .open_dir = crash_open_dir,
        .make_dir = crash_make_dir,
        .set_mode = crash_set_mode,
    };
    return c;
}

void
io_crash_free(io_crash_t *c)
{
    if (!c)
        return;
    forget_all(c);
    free(c->inodes);
    free(c->dir_ops);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

const journal_io_t *
io_crash_io(io_crash_t *c)
{
    return &c->io;
}

void
io_crash_arm(io_crash_t *c, uint64_t nth)
{
    pthread_mutex_lock(&c->mu);
    c->crash_at_call = nth ? c->n_calls + nth : 0;
    c->method_calls_left = 0;
    pthread_mutex_unlock(&c->mu);
}

void
io_crash_arm_method(io_crash_t *c, io_crash_method_t method, uint64_t nth)
{
    pthread_mutex_lock(&c->mu);
    c->crash_at_call = 0;
    c->crash_method = method;
    c->method_calls_left = method == IO_CRASH_AT_ANY ? 0 : nth;
    pthread_mutex_unlock(&c->mu);
}

void
io_crash_trigger(io_crash_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->has_crashed = 1;
    pthread_mutex_unlock(&c->mu);
}

int
io_crash_has_crashed(io_crash_t *c)
{
    pthread_mutex_lock(&c->mu);
    int crashed = c->has_crashed;
    pthread_mutex_unlock(&c->mu);
    return crashed;
}

uint64_t
io_crash_calls(io_crash_t *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t n = c->n_calls;
    pthread_mutex_unlock(&c->mu);
    return n;
}
