/*
 * io_fault.c: the faulting I/O table (see io_fault.h for the contract).
 *
 * Owns: per-method call counters and one armed fault. Does not own the wrapped table or
 * any file descriptor: every call that is not failed goes to the inner table unchanged.
 * Invariants: counters only grow until io_fault_reset_counts; a failed call has no effect
 * on disk except the prefix a short write lands (and close, which always releases the fd so
 * a failing close cannot leak it, as with POSIX close).
 * Kinds name each call by what it touches (io_fault.h), so the table follows descriptors
 * from open to close and through renames.
 * Locking: `mu` protects every field below it; it is never held
 * across a call into the inner table, so the preparer thread and the writer do not
 * serialise on the disk.
 */
#include "io_fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A descriptor the table opened, and the file's current name. */
typedef struct fault_file {
    int fd;
    char *path;
    int is_direct;
} fault_file_t;

/* More descriptors than the journal keeps open at once: the rest are named "?". */
enum { FAULT_MAX_FILES = 64 };

/* One call as its wrapper sees it: a name (open, rename, unlink, open_dir, make_dir) or a
 * descriptor. */
typedef struct fault_call {
    io_method_t method;
    const void *caller;
    const char *path; /* NULL for the calls on a descriptor */
    int fd;
    int is_direct; /* an open for direct writes */
} fault_call_t;

struct io_fault {
    journal_io_t io; /* first: ctx points back at the struct */
    const journal_io_t *inner;
    int syncs_are_noops;

    /* -- protected by mu -- */
    pthread_mutex_t mu;
    uint64_t calls[IO_METHOD_COUNT];
    int is_armed;
    io_fault_spec_t spec;
    pthread_cond_t held_cv; /* fires when a call is held and when it is released */
    int is_holding;         /* a call waits in fault_check for io_fault_release */
    int is_released;
    uint64_t n_targeted; /* targeted calls seen since arming */
    uint64_t n_fired;
    io_method_t last_fired_method;
    uint64_t fired_by[IO_METHOD_COUNT]; /* failures per method since arming */
    uint64_t fired_on_arming_thread[IO_METHOD_COUNT];
    pthread_t arming_thread;
    /* Distinct call sites (return addresses into the journal) and whether each has failed. */
    io_fault_site_t sites[IO_FAULT_MAX_SITES];
    size_t n_sites;
    /* Kinds of call (io_fault_kind_t) and what names them: the workload's phase, the files
     * open on each descriptor, and each thread class's name change not yet synced (index 0
     * the arming thread, 1 any other). */
    const char *phase;
    io_fault_kind_t kinds[IO_FAULT_MAX_KINDS];
    size_t n_kinds;
    fault_file_t files[FAULT_MAX_FILES];
    size_t n_files;
    const char *unsynced_name_op[2];
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

static fault_file_t *
file_of(io_fault_t *f, int fd)
{
    for (size_t i = 0; i < f->n_files; i++) {
        if (f->files[i].fd == fd)
            return &f->files[i];
    }
    return NULL;
}

/* "segment" for any *.seg file, else the base name. */
static const char *
object_of_path(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len > 4 && strcmp(base + len - 4, ".seg") == 0)
        return "segment";
    return base;
}

/* The kind's name (io_fault.h); a sync_dir also ends the thread's unsynced name change. */
static void
kind_name(io_fault_t *f, const fault_call_t *call, char *out, size_t cap)
{
    int is_arming = pthread_equal(pthread_self(), f->arming_thread);
    const char *phase = is_arming ? (f->phase ? f->phase : "-") : "background";
    if (call->method == IO_METHOD_SYNC_DIR) {
        const char *after = f->unsynced_name_op[!is_arming];
        snprintf(out, cap, "%s: sync_dir directory%s%s", phase, after ? " after " : "",
                 after ? after : "");
        f->unsynced_name_op[!is_arming] = NULL;
        return;
    }
    const char *object = "?";
    int is_direct = call->is_direct;
    if (call->path) {
        object = object_of_path(call->path);
    } else {
        const fault_file_t *file = file_of(f, call->fd);
        if (file) {
            object = object_of_path(file->path);
            is_direct = file->is_direct;
        }
    }
    snprintf(out, cap, "%s: %s %s%s", phase, io_method_name(call->method), object,
             is_direct ? " (direct)" : "");
}

static io_fault_kind_t *
kind_of(io_fault_t *f, const fault_call_t *call)
{
    char name[IO_FAULT_KIND_NAME_BYTES];
    kind_name(f, call, name, sizeof name);
    for (size_t i = 0; i < f->n_kinds; i++) {
        if (strcmp(f->kinds[i].name, name) == 0)
            return &f->kinds[i];
    }
    if (f->n_kinds == IO_FAULT_MAX_KINDS)
        return NULL;
    io_fault_kind_t *kind = &f->kinds[f->n_kinds++];
    *kind = (io_fault_kind_t){.method = call->method};
    memcpy(kind->name, name, sizeof name);
    return kind;
}

/* Whether the armed fault fails this call (mu held); counts the failure. */
static int
fault_hits(io_fault_t *f, io_method_t method, const void *caller, const io_fault_kind_t *kind)
{
    if (!f->is_armed || (f->spec.method != IO_METHOD_ANY && f->spec.method != method) ||
        (f->spec.site && f->spec.site != caller) ||
        (f->spec.kind && (!kind || strcmp(f->spec.kind, kind->name) != 0)))
        return 0;
    f->n_targeted++;
    if (f->n_targeted != f->spec.nth && !(f->spec.is_persistent && f->n_targeted > f->spec.nth))
        return 0;
    f->n_fired++;
    f->last_fired_method = method;
    f->fired_by[method]++;
    if (pthread_equal(pthread_self(), f->arming_thread))
        f->fired_on_arming_thread[method]++;
    return 1;
}

/*
 * Counts the call and decides whether it fails. Returns 0 to let it through, or the
 * negative errno to return; *is_short_out says a pwritev should land part of its data.
 */
static int
fault_check(io_fault_t *f, const fault_call_t *call, int *is_short_out)
{
    int rc = 0;

    pthread_mutex_lock(&f->mu);
    f->calls[call->method]++;
    io_fault_site_t *site = site_of(f, call->method, call->caller);
    io_fault_kind_t *kind = kind_of(f, call);
    int is_before_fault = f->n_fired == 0;
    int is_held = 0;
    if (fault_hits(f, call->method, call->caller, kind)) {
        is_held = f->spec.is_hold;
        rc = is_held ? 0 : f->spec.error;
        if (is_short_out)
            *is_short_out = f->spec.is_short_write;
    }
    if (is_held) {
        f->is_holding = 1;
        pthread_cond_broadcast(&f->held_cv);
        while (!f->is_released)
            pthread_cond_wait(&f->held_cv, &f->mu);
    }
    if (site) {
        site->n_calls++;
        site->n_calls_before_fault += is_before_fault;
        site->n_faulted += rc != 0;
    }
    if (kind) {
        kind->n_calls++;
        kind->n_calls_before_fault += is_before_fault;
        kind->n_faulted += rc != 0;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* Remembers a name change until the same thread's next sync_dir (mu held). */
static void
note_name_op(io_fault_t *f, const char *op)
{
    f->unsynced_name_op[!pthread_equal(pthread_self(), f->arming_thread)] = op;
}

static void
note_opened(io_fault_t *f, int fd, const char *path, int flags)
{
    pthread_mutex_lock(&f->mu);
    char *copy = strdup(path);
    if (copy && f->n_files < FAULT_MAX_FILES)
        f->files[f->n_files++] =
            (fault_file_t){.fd = fd, .path = copy, .is_direct = (flags & JOURNAL_IO_DIRECT) != 0};
    else
        free(copy);
    if (flags & JOURNAL_IO_CREATE)
        note_name_op(f, "create");
    pthread_mutex_unlock(&f->mu);
}

static void
note_closed(io_fault_t *f, int fd)
{
    pthread_mutex_lock(&f->mu);
    fault_file_t *file = file_of(f, fd);
    if (file) {
        free(file->path);
        *file = f->files[--f->n_files];
    }
    pthread_mutex_unlock(&f->mu);
}

/* Descriptors open on `from` now name `to`. */
static void
note_renamed(io_fault_t *f, const char *from, const char *to)
{
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->n_files; i++) {
        char *copy = strcmp(f->files[i].path, from) == 0 ? strdup(to) : NULL;
        if (copy) {
            free(f->files[i].path);
            f->files[i].path = copy;
        }
    }
    note_name_op(f, "rename");
    pthread_mutex_unlock(&f->mu);
}

static void
note_unlinked(io_fault_t *f)
{
    pthread_mutex_lock(&f->mu);
    note_name_op(f, "unlink");
    pthread_mutex_unlock(&f->mu);
}

/* A call on a descriptor, from the journal's call site `caller`. */
#define ON_FD(method, fd) (&(fault_call_t){(method), CALLER, NULL, (fd), 0})
#define ON_PATH(method, path) (&(fault_call_t){(method), CALLER, (path), -1, 0})

static int
fault_open_file(void *ctx, int dir_fd, const char *name, int flags, mode_t mode)
{
    io_fault_t *f = ctx;
    fault_call_t call = {IO_METHOD_OPEN, CALLER, name, -1, (flags & JOURNAL_IO_DIRECT) != 0};
    int rc = fault_check(f, &call, NULL);
    if (rc)
        return rc;
    int fd = f->inner->open_file(f->inner->ctx, dir_fd, name, flags, mode);
    if (fd >= 0)
        note_opened(f, fd, name, flags);
    return fd;
}

static ssize_t
fault_pread(void *ctx, int fd, void *buf, size_t len, off_t off)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_FD(IO_METHOD_PREAD, fd), NULL);
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
    int rc = fault_check(f, ON_FD(IO_METHOD_PWRITEV, fd), &is_short);
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
    int rc = fault_check(f, ON_FD(IO_METHOD_FDATASYNC, fd), NULL);
    if (rc || f->syncs_are_noops)
        return rc;
    return f->inner->fdatasync(f->inner->ctx, fd);
}

static int
fault_fsync(void *ctx, int fd)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_FD(IO_METHOD_FSYNC, fd), NULL);
    if (rc || f->syncs_are_noops)
        return rc;
    return f->inner->fsync(f->inner->ctx, fd);
}

static int
fault_truncate(void *ctx, int fd, off_t len)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_FD(IO_METHOD_TRUNCATE, fd), NULL);
    if (rc)
        return rc;
    return f->inner->truncate(f->inner->ctx, fd, len);
}

static int
fault_allocate(void *ctx, int fd, off_t off, off_t len, int zero_fill)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_FD(IO_METHOD_ALLOCATE, fd), NULL);
    if (rc)
        return rc;
    return f->inner->allocate(f->inner->ctx, fd, off, len, zero_fill);
}

static int
fault_rename(void *ctx, int dir_fd, const char *from, const char *to)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_PATH(IO_METHOD_RENAME, from), NULL);
    if (rc)
        return rc;
    rc = f->inner->rename(f->inner->ctx, dir_fd, from, to);
    if (!rc)
        note_renamed(f, from, to);
    return rc;
}

static int
fault_unlink(void *ctx, int dir_fd, const char *name)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_PATH(IO_METHOD_UNLINK, name), NULL);
    if (rc)
        return rc;
    rc = f->inner->unlink(f->inner->ctx, dir_fd, name);
    if (!rc)
        note_unlinked(f);
    return rc;
}

static int
fault_sync_dir(void *ctx, int dir_fd)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_FD(IO_METHOD_SYNC_DIR, dir_fd), NULL);
    if (rc || f->syncs_are_noops)
        return rc;
    return f->inner->sync_dir(f->inner->ctx, dir_fd);
}

static int
fault_file_size(void *ctx, int fd, off_t *size_out)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_FD(IO_METHOD_FILE_SIZE, fd), NULL);
    if (rc)
        return rc;
    return f->inner->file_size(f->inner->ctx, fd, size_out);
}

static int
fault_close(void *ctx, int fd)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_FD(IO_METHOD_CLOSE, fd), NULL);
    int close_rc = f->inner->close(f->inner->ctx, fd);
    note_closed(f, fd);
    return rc ? rc : close_rc;
}

static int
fault_open_dir(void *ctx, int dir_fd, const char *path)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_PATH(IO_METHOD_OPEN_DIR, "directory"), NULL);
    if (rc)
        return rc;
    int fd = f->inner->open_dir(f->inner->ctx, dir_fd, path);
    if (fd >= 0)
        note_opened(f, fd, "directory", 0);
    return fd;
}

static int
fault_make_dir(void *ctx, int dir_fd, const char *name, mode_t mode)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_PATH(IO_METHOD_MAKE_DIR, "directory"), NULL);
    if (rc)
        return rc;
    rc = f->inner->make_dir(f->inner->ctx, dir_fd, name, mode);
    if (!rc) {
        pthread_mutex_lock(&f->mu);
        note_name_op(f, "create");
        pthread_mutex_unlock(&f->mu);
    }
    return rc;
}

static int
fault_set_mode(void *ctx, int fd, mode_t mode)
{
    io_fault_t *f = ctx;
    int rc = fault_check(f, ON_FD(IO_METHOD_SET_MODE, fd), NULL);
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
    if (pthread_cond_init(&f->held_cv, NULL) != 0) {
        pthread_mutex_destroy(&f->mu);
        free(f);
        return NULL;
    }
    f->inner = inner;
    f->syncs_are_noops = syncs_are_noops;
    f->arming_thread = pthread_self(); /* names the creator's calls until a fault is armed */
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
    for (size_t i = 0; i < f->n_files; i++)
        free(f->files[i].path);
    pthread_cond_destroy(&f->held_cv);
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
    f->is_holding = 0;
    f->is_released = 0;
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
    f->is_released = 1; /* a held call must not outlive its fault */
    pthread_cond_broadcast(&f->held_cv);
    pthread_mutex_unlock(&f->mu);
}

int
io_fault_wait_held(io_fault_t *f, int timeout_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    pthread_mutex_lock(&f->mu);
    while (!f->is_holding && rc == 0)
        rc = pthread_cond_timedwait(&f->held_cv, &f->mu, &deadline);
    int is_holding = f->is_holding;
    pthread_mutex_unlock(&f->mu);
    return is_holding ? 0 : -ETIMEDOUT;
}

void
io_fault_release(io_fault_t *f)
{
    pthread_mutex_lock(&f->mu);
    f->is_released = 1;
    pthread_cond_broadcast(&f->held_cv);
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
io_fault_set_phase(io_fault_t *f, const char *phase)
{
    pthread_mutex_lock(&f->mu);
    f->phase = phase;
    pthread_mutex_unlock(&f->mu);
}

size_t
io_fault_kinds(io_fault_t *f, io_fault_kind_t *out, size_t max)
{
    pthread_mutex_lock(&f->mu);
    size_t n = f->n_kinds;
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = f->kinds[i];
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
