/*
 * io_fault.c: the faulting I/O table (see io_fault.h for the contract).
 *
 * Owns: per-method call counters and one armed fault. Does not own the wrapped table or
 * any file descriptor: every call that is not failed goes to the inner table unchanged.
 * Invariants: counters only grow until io_fault_reset_counts; a failed call has no effect
 * on disk except the prefix a short write lands (and close, which always releases the fd so
 * a failing close cannot leak it, as with POSIX close).
 * Locking: `mu` protects calls[], the spec, `n_targeted` and `n_fired`; it is never held
 * across a call into the inner table, so the preparer thread and the writer do not
 * serialise on the disk.
 */
#include "io_fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct io_fault {
    journal_io_t io; /* first: ctx points back at the struct */
    const journal_io_t *inner;
    int syncs_are_noops;

    /* -- protected by mu -- */
    pthread_mutex_t mu;
    uint64_t calls[IO_METHOD_COUNT];
    int is_armed;
    io_fault_spec_t spec;
    uint64_t n_targeted; /* targeted calls seen since arming */
    uint64_t n_fired;
    io_method_t last_fired_method;
    uint64_t fired_by[IO_METHOD_COUNT]; /* failures per method since arming */
    uint64_t fired_on_arming_thread[IO_METHOD_COUNT];
    pthread_t arming_thread;
    /* Distinct call sites (return addresses into the journal) and whether each has failed. */
    io_fault_site_t sites[IO_FAULT_MAX_SITES];
    size_t n_sites;
};

/* The journal's call site: wrappers are only ever called through the table's pointers. */
#define CALLER __builtin_return_address(0)

static const char *const method_names[IO_METHOD_COUNT] = {
    "open",   "pread",    "pwritev",   "fdatasync", "fsync",    "truncate", "allocate", "rename",
    "unlink", "sync_dir", "file_size", "close",     "open_dir", "make_dir", "set_mode",
};

const char *
io_method_name(io_method_t method)
{
    if (method == IO_METHOD_ANY)
        return "any";
    if (method < 0 || method >= IO_METHOD_COUNT)
        return "?";
    return method_names[method];
}

/*
 * Counts the call and decides whether it fails. Returns 0 to let it through, or the
 * negative errno to return; *is_short_out says a pwritev should land part of its data.
 */
static io_fault_site_t *
site_of(io_fault_t *f, io_method_t method, const void *caller)
{
    for (size_t i = 0; i < f->n_sites; i++) {
        if (f->sites[i].caller == caller)
            return &f->sites[i];
    }
    if (f->n_sites == IO_FAULT_MAX_SITES)
        return NULL; /* more sites than any journal has: stop recording, keep counting */
    io_fault_site_t *site = &f->sites[f->n_sites++];
    *site = (io_fault_site_t){.caller = caller, .method = method};
    return site;
}

static int
fault_check(io_fault_t *f, io_method_t method, const void *caller, int *is_short_out)
{
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    f->calls[method]++;
    io_fault_site_t *site = site_of(f, method, caller);
    if (site) {
        site->n_calls++;
        site->n_calls_before_fault += f->n_fired == 0;
    }
    if (f->is_armed && (f->spec.method == IO_METHOD_ANY || f->spec.method == method) &&
        (!f->spec.site || f->spec.site == caller)) {
        f->n_targeted++;
        int hits =
            f->n_targeted == f->spec.nth || (f->spec.is_persistent && f->n_targeted > f->spec.nth);
        if (hits) {
            f->n_fired++;
            f->last_fired_method = method;
            f->fired_by[method]++;
            if (pthread_equal(pthread_self(), f->arming_thread))
                f->fired_on_arming_thread[method]++;
            if (site)
                site->n_faulted++;
            rc = f->spec.error;
            if (is_short_out)
                *is_short_out = f->spec.is_short_write;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int
fault_open_file(void *ctx, int dir_fd, const char *name, int flags, mode_t mode)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_OPEN, CALLER, NULL);
    if (rc)
        return rc;
    return f->inner->open_file(f->inner->ctx, dir_fd, name, flags, mode);
}

static ssize_t
fault_pread(void *ctx, int fd, void *buf, size_t len, off_t off)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_PREAD, CALLER, NULL);
    if (rc)
        return rc;
    return f->inner->pread(f->inner->ctx, fd, buf, len, off);
}

/* Writes the first half of the iovec's bytes: the part a disk that fails mid-write lands. */
static void
fault_write_prefix(io_fault_t *f, int fd, const struct iovec *iov, int iovcnt, off_t off)
{
    size_t total_bytes = 0;
    for (int i = 0; i < iovcnt; i++)
        total_bytes += iov[i].iov_len;
    size_t left_bytes = total_bytes / 2;
    if (left_bytes == 0)
        return;

    struct iovec *part = calloc((size_t)iovcnt, sizeof(*part));
    if (!part)
        return; /* the call fails either way; landing nothing is also a legal outcome */
    int n_part = 0;
    for (int i = 0; i < iovcnt && left_bytes > 0; i++) {
        size_t take = iov[i].iov_len < left_bytes ? iov[i].iov_len : left_bytes;
        part[n_part].iov_base = iov[i].iov_base;
        part[n_part].iov_len = take;
        n_part++;
        left_bytes -= take;
    }
    /* The prefix's own result does not matter: the caller is told the write failed. */
    (void)f->inner->pwritev(f->inner->ctx, fd, part, n_part, off);
    free(part);
}

static int
fault_pwritev(void *ctx, int fd, const struct iovec *iov, int iovcnt, off_t off)
{
    io_fault_t *f = ctx;
    int is_short = 0;
    int rc = fault_check(f, IO_METHOD_PWRITEV, CALLER, &is_short);
    if (rc) {
        if (is_short)
            fault_write_prefix(f, fd, iov, iovcnt, off);
        return rc;
    }
    return f->inner->pwritev(f->inner->ctx, fd, iov, iovcnt, off);
}

static int
fault_fdatasync(void *ctx, int fd)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_FDATASYNC, CALLER, NULL);
    if (rc || f->syncs_are_noops)
        return rc;
    return f->inner->fdatasync(f->inner->ctx, fd);
}

static int
fault_fsync(void *ctx, int fd)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_FSYNC, CALLER, NULL);
    if (rc || f->syncs_are_noops)
        return rc;
    return f->inner->fsync(f->inner->ctx, fd);
}

static int
fault_truncate(void *ctx, int fd, off_t len)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_TRUNCATE, CALLER, NULL);
    if (rc)
        return rc;
    return f->inner->truncate(f->inner->ctx, fd, len);
}

static int
fault_allocate(void *ctx, int fd, off_t off, off_t len, int zero_fill)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_ALLOCATE, CALLER, NULL);
    if (rc)
        return rc;
    return f->inner->allocate(f->inner->ctx, fd, off, len, zero_fill);
}

static int
fault_rename(void *ctx, int dir_fd, const char *from, const char *to)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_RENAME, CALLER, NULL);
    if (rc)
        return rc;
    return f->inner->rename(f->inner->ctx, dir_fd, from, to);
}

static int
fault_unlink(void *ctx, int dir_fd, const char *name)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_UNLINK, CALLER, NULL);
    if (rc)
        return rc;
    return f->inner->unlink(f->inner->ctx, dir_fd, name);
}

static int
fault_sync_dir(void *ctx, int dir_fd)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_SYNC_DIR, CALLER, NULL);
    if (rc || f->syncs_are_noops)
        return rc;
    return f->inner->sync_dir(f->inner->ctx, dir_fd);
}

static int
fault_file_size(void *ctx, int fd, off_t *size_out)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_FILE_SIZE, CALLER, NULL);
    if (rc)
        return rc;
    return f->inner->file_size(f->inner->ctx, fd, size_out);
}

static int
fault_close(void *ctx, int fd)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_CLOSE, CALLER, NULL);
    int close_rc = f->inner->close(f->inner->ctx, fd);
    return rc ? rc : close_rc;
}

static int
fault_open_dir(void *ctx, int dir_fd, const char *path)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_OPEN_DIR, CALLER, NULL);
    if (rc)
        return rc;
    return f->inner->open_dir(f->inner->ctx, dir_fd, path);
}

static int
fault_make_dir(void *ctx, int dir_fd, const char *name, mode_t mode)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_MAKE_DIR, CALLER, NULL);
    if (rc)
        return rc;
    return f->inner->make_dir(f->inner->ctx, dir_fd, name, mode);
}

static int
fault_set_mode(void *ctx, int fd, mode_t mode)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, IO_METHOD_SET_MODE, CALLER, NULL);
    if (rc)
        return rc;
    return f->inner->set_mode(f->inner->ctx, fd, mode);
}

io_fault_t *
io_fault_new(const journal_io_t *inner, int syncs_are_noops)
{
    io_fault_t *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    if (pthread_mutex_init(&f->mu, NULL) != 0) {
        free(f);
        return NULL;
    }
    f->inner = inner;
    f->syncs_are_noops = syncs_are_noops;
    f->io = (journal_io_t){
        .ctx = f,
        .open_file = fault_open_file,
        .pread = fault_pread,
        .pwritev = fault_pwritev,
        .fdatasync = fault_fdatasync,
        .fsync = fault_fsync,
        .truncate = fault_truncate,
        .allocate = fault_allocate,
        .rename = fault_rename,
        .unlink = fault_unlink,
        .sync_dir = fault_sync_dir,
        .file_size = fault_file_size,
        .close = fault_close,
        .open_dir = fault_open_dir,
        .make_dir = fault_make_dir,
        .set_mode = fault_set_mode,
    };
    return f;
}

void
io_fault_free(io_fault_t *f)
{
    if (!f)
        return;
    pthread_mutex_destroy(&f->mu);
    free(f);
}

const journal_io_t *
io_fault_io(io_fault_t *f)
{
    return &f->io;
}

void
io_fault_arm(io_fault_t *f, const io_fault_spec_t *spec)
{
    pthread_mutex_lock(&f->mu);
    f->spec = *spec;
    f->is_armed = 1;
    f->n_targeted = 0;
    f->n_fired = 0;
    memset(f->fired_by, 0, sizeof(f->fired_by));
    memset(f->fired_on_arming_thread, 0, sizeof(f->fired_on_arming_thread));
    f->arming_thread = pthread_self();
    pthread_mutex_unlock(&f->mu);
}

void
io_fault_disarm(io_fault_t *f)
{
    pthread_mutex_lock(&f->mu);
    f->is_armed = 0;
    pthread_mutex_unlock(&f->mu);
}

uint64_t
io_fault_fired(io_fault_t *f)
{
    pthread_mutex_lock(&f->mu);
    uint64_t n = f->n_fired;
    pthread_mutex_unlock(&f->mu);
    return n;
}

uint64_t
io_fault_fired_by(io_fault_t *f, io_method_t method)
{
    if (method < 0 || method >= IO_METHOD_COUNT)
        return io_fault_fired(f);
    pthread_mutex_lock(&f->mu);
    uint64_t n = f->fired_by[method];
    pthread_mutex_unlock(&f->mu);
    return n;
}

uint64_t
io_fault_fired_on_arming_thread(io_fault_t *f, io_method_t method)
{
    if (method < 0 || method >= IO_METHOD_COUNT)
        return 0;
    pthread_mutex_lock(&f->mu);
    uint64_t n = f->fired_on_arming_thread[method];
    pthread_mutex_unlock(&f->mu);
    return n;
}

io_method_t
io_fault_last_fired_method(io_fault_t *f)
{
    pthread_mutex_lock(&f->mu);
    io_method_t method = f->n_fired ? f->last_fired_method : IO_METHOD_ANY;
    pthread_mutex_unlock(&f->mu);
    return method;
}

uint64_t
io_fault_calls(io_fault_t *f, io_method_t method)
{
    uint64_t n = 0;
    pthread_mutex_lock(&f->mu);
    if (method == IO_METHOD_ANY) {
        for (int m = 0; m < IO_METHOD_COUNT; m++)
            n += f->calls[m];
    } else if (method >= 0 && method < IO_METHOD_COUNT) {
        n = f->calls[method];
    }
    pthread_mutex_unlock(&f->mu);
    return n;
}

size_t
io_fault_sites(io_fault_t *f, io_fault_site_t *out, size_t max)
{
    pthread_mutex_lock(&f->mu);
    size_t n = f->n_sites;
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = f->sites[i];
    pthread_mutex_unlock(&f->mu);
    return n;
}

void
io_fault_reset_counts(io_fault_t *f)
{
    pthread_mutex_lock(&f->mu);
    memset(f->calls, 0, sizeof(f->calls));
    pthread_mutex_unlock(&f->mu);
}
