/*
 * stele_hddfs.c: stele-hddfs, the benchmark's emulated 7200 rpm disk.
 *
 * A FUSE (libfuse3) passthrough filesystem: every operation goes to the same path under a
 * backing directory, and every fsync/fdatasync of a file with unsynced writes is delayed by
 * a model of a rotating disk with its write cache off, so that stele and every peer can be
 * measured on "an HDD" on a machine that has none. Figures measured on it are emulated.
 *
 * The model (one disk, queue depth 1, so flushes are served one after the other):
 *   - The disk is busy until `busy_until`; a flush starts at max(now, busy_until).
 *   - Seek: none when the flush starts within SEQ_WINDOW of where the head stopped in the
 *     same file (an append right after the last one), track_ms within the same file,
 *     seek_ms (the average seek) when it changes file.
 *   - Rotation: the platter turns once per 60/rpm s. A byte offset of a file sits at the
 *     angle (file_base + offset) mod track_bytes, track_bytes being what passes under the
 *     head in one turn at mb_s. The flush waits until its first dirty byte comes round.
 *   - Transfer: dirty bytes / mb_s; the head then stops at the end of the dirty range.
 * Consequences, as on a real drive: a lone writer that appends and syncs waits almost a
 * full turn per sync (~120 syncs/s at 7200 rpm); a batch of N records costs about the same
 * turn, so group commit scales by N; jumping between files pays a seek. The real fdatasync
 * of the backing file is still issued, so the data is as durable as the backing disk.
 *
 * Locks: `model_mu` protects the model (head, busy_until, the dirty table). Sleeping
 * happens outside it, so reads and writes go on while a flush is "rotating".
 */
#define FUSE_USE_VERSION 31

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* Within this distance of the head, a flush needs no seek (same or adjacent track). */
#define HDDFS_SEQ_WINDOW_BYTES (1024 * 1024)
/* Files with unflushed writes the model can track at once; past that, flushes of files it
 * does not know are charged a seek plus half a turn (hddfs_delay_flush). */
#define HDDFS_DIRTY_SLOTS 8192
#define HDDFS_PATH_BYTES 4096

typedef struct hddfs_dirty {
    uint64_t ino; /* 0 = free slot */
    uint64_t lo, hi;
    uint64_t bytes;
} hddfs_dirty_t;

typedef struct hddfs {
    char root[HDDFS_PATH_BYTES];
    double period_ns; /* one rotation */
    double seek_ns;
    double track_ns;
    double bytes_per_ns;
    double track_bytes; /* bytes under the head per rotation */
    /* -- protected by model_mu -- */
    pthread_mutex_t model_mu;
    uint64_t busy_until_ns;
    uint64_t head_ino;
    uint64_t head_off;
    uint64_t n_flushes;
    uint64_t n_lost_writes;       /* writes that found the dirty table full */
    uint64_t n_untracked_flushes; /* flushes charged a flat cost for that reason */
    hddfs_dirty_t dirty[HDDFS_DIRTY_SLOTS];
} hddfs_t;

static hddfs_t *
hddfs_get(void)
{
    return fuse_get_context()->private_data;
}

static void
hddfs_path(char *out, const char *path)
{
    snprintf(out, HDDFS_PATH_BYTES, "%s%s", hddfs_get()->root, path);
}

static uint64_t
hddfs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The dirty table: files with writes not yet flushed, by inode, open addressing with linear
 * probing. A flush removes its file's entry, so the table holds only what is dirty now (not
 * every file ever written: a sweep writes tens of thousands). */
static size_t
hddfs_home(uint64_t ino)
{
    return (size_t)(ino * 11400714819323198485ull >> 51) % HDDFS_DIRTY_SLOTS;
}

/* ino's slot, or the empty one where it would go; NULL when the table is full without it. */
static hddfs_dirty_t *
hddfs_probe(hddfs_t *fs, uint64_t ino)
{
    size_t start = hddfs_home(ino);
    for (size_t k = 0; k < HDDFS_DIRTY_SLOTS; k++) {
        hddfs_dirty_t *d = &fs->dirty[(start + k) % HDDFS_DIRTY_SLOTS];
        if (d->ino == ino || d->ino == 0)
            return d;
    }
    return NULL;
}

/* ino's entry, or NULL: the file has no unflushed write. */
static hddfs_dirty_t *
hddfs_find(hddfs_t *fs, uint64_t ino)
{
    hddfs_dirty_t *d = hddfs_probe(fs, ino);
    return d && d->ino == ino ? d : NULL;
}

/* ino's entry, made when missing; NULL when HDDFS_DIRTY_SLOTS files are dirty at once. */
static hddfs_dirty_t *
hddfs_claim(hddfs_t *fs, uint64_t ino)
{
    hddfs_dirty_t *d = hddfs_probe(fs, ino);
    if (d && d->ino == 0)
        *d = (hddfs_dirty_t){.ino = ino, .lo = UINT64_MAX, .hi = 0, .bytes = 0};
    return d;
}

/* Whether slot h lies in the cyclic range (from, to]. */
static int
hddfs_cyclic_between(size_t from, size_t h, size_t to)
{
    return from < to ? (from < h && h <= to) : (from < h || h <= to);
}

/* Removes an entry; later entries of its probe run move up so every lookup still finds them
 * (backward-shift deletion: no tombstones to pile up). */
static void
hddfs_forget(hddfs_t *fs, hddfs_dirty_t *d)
{
    size_t hole = (size_t)(d - fs->dirty);
    for (size_t i = (hole + 1) % HDDFS_DIRTY_SLOTS; fs->dirty[i].ino != 0;
         i = (i + 1) % HDDFS_DIRTY_SLOTS) {
        if (!hddfs_cyclic_between(hole, hddfs_home(fs->dirty[i].ino), i)) {
            fs->dirty[hole] = fs->dirty[i];
            hole = i;
        }
    }
    fs->dirty[hole].ino = 0;
}

static void
hddfs_note_write(uint64_t ino, uint64_t off, uint64_t len)
{
    hddfs_t *fs = hddfs_get();
    pthread_mutex_lock(&fs->model_mu);
    hddfs_dirty_t *d = hddfs_claim(fs, ino);
    if (d) {
        if (off < d->lo)
            d->lo = off;
        if (off + len > d->hi)
            d->hi = off + len;
        d->bytes += len;
    } else {
        fs->n_lost_writes++;
    }
    pthread_mutex_unlock(&fs->model_mu);
}

/* Where a flush of [lo, hi) of ino ends, per the model; updates the head. Called locked. */
static uint64_t
hddfs_schedule_flush(hddfs_t *fs, uint64_t ino, uint64_t lo, uint64_t hi, uint64_t bytes)
{
    uint64_t now = hddfs_now_ns();
    double t = (double)(now > fs->busy_until_ns ? now : fs->busy_until_ns);
    uint64_t dist = lo > fs->head_off ? lo - fs->head_off : fs->head_off - lo;
    if (ino != fs->head_ino)
        t += fs->seek_ns;
    else if (dist > HDDFS_SEQ_WINDOW_BYTES)
        t += fs->track_ns;
    /* Each file starts at its own angle, so two files are not secretly aligned. */
    double base = (double)((ino * 2654435761u) % 1000003u) / 1000003.0 * fs->track_bytes;
    double target = fmod(base + (double)lo, fs->track_bytes) / fs->track_bytes;
    double angle = fmod(t, fs->period_ns) / fs->period_ns;
    double wait = fmod(target - angle + 1.0, 1.0) * fs->period_ns;
    uint64_t span = hi > lo ? hi - lo : 0;
    double transfer = (double)(bytes < span ? bytes : span) / fs->bytes_per_ns;
    uint64_t finish = (uint64_t)(t + wait + transfer);
    fs->busy_until_ns = finish;
    fs->head_ino = ino;
    fs->head_off = hi;
    fs->n_flushes++;
    return finish;
}

static void
hddfs_delay_flush(uint64_t ino)
{
    hddfs_t *fs = hddfs_get();
    uint64_t finish = 0;
    pthread_mutex_lock(&fs->model_mu);
    hddfs_dirty_t *d = hddfs_find(fs, ino);
    if (d) {
        finish = hddfs_schedule_flush(fs, ino, d->lo, d->hi, d->bytes);
        hddfs_forget(fs, d);
    } else if (fs->n_lost_writes > 0) {
        /* Some write found the table full, maybe this file's: charge a seek plus half a turn
         * after whatever the disk is doing. A file with nothing to flush costs nothing. */
        uint64_t now = hddfs_now_ns();
        uint64_t start = now > fs->busy_until_ns ? now : fs->busy_until_ns;
        fs->busy_until_ns = start + (uint64_t)(fs->seek_ns + fs->period_ns / 2);
        finish = fs->busy_until_ns;
        fs->n_flushes++;
        fs->n_untracked_flushes++;
    }
    pthread_mutex_unlock(&fs->model_mu);
    if (finish == 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)(finish / 1000000000ull),
                          .tv_nsec = (long)(finish % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* ------------------------------------------------------------------------------------------
 * Passthrough operations
 * ------------------------------------------------------------------------------------------ */
/* A root daemon creates files as root: hand each new one to the calling process's user, as
 * a real filesystem would (PostgreSQL, running as its own user, needs this). */
static void
hddfs_own(const char *backing_path)
{
    struct fuse_context *ctx = fuse_get_context();
    if (geteuid() == 0 && ctx)
        (void)lchown(backing_path, ctx->uid, ctx->gid);
}

static void *
hddfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
    (void)conn;
    cfg->use_ino = 1;
    /* Attributes change under us only through us; no caching keeps sizes exact. */
    cfg->attr_timeout = 0;
    cfg->entry_timeout = 0;
    cfg->negative_timeout = 0;
    return fuse_get_context()->private_data;
}

static int
hddfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
    if (fi)
        return fstat((int)fi->fh, st) == 0 ? 0 : -errno;
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    return lstat(p, st) == 0 ? 0 : -errno;
}

static int
hddfs_access(const char *path, int mask)
{
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    return access(p, mask) == 0 ? 0 : -errno;
}

static int
hddfs_readlink(const char *path, char *buf, size_t size)
{
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    ssize_t n = readlink(p, buf, size - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return 0;
}

static int
hddfs_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t offset,
              struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    (void)offset;
    (void)fi;
    (void)flags;
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    DIR *d = opendir(p);
    if (!d)
        return -errno;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat st = {.st_ino = de->d_ino, .st_mode = (mode_t)de->d_type << 12};
        if (filler(buf, de->d_name, &st, 0, 0))
            break;
    }
    closedir(d);
    return 0;
}

static int
hddfs_mkdir(const char *path, mode_t mode)
{
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    if (mkdir(p, mode) != 0)
        return -errno;
    hddfs_own(p);
    return 0;
}

static int
hddfs_unlink(const char *path)
{
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    return unlink(p) == 0 ? 0 : -errno;
}

static int
hddfs_rmdir(const char *path)
{
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    return rmdir(p) == 0 ? 0 : -errno;
}

static int
hddfs_symlink(const char *from, const char *to)
{
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, to);
    if (symlink(from, p) != 0)
        return -errno;
    hddfs_own(p);
    return 0;
}

static int
hddfs_rename(const char *from, const char *to, unsigned int flags)
{
    if (flags)
        return -EINVAL;
    char a[HDDFS_PATH_BYTES], b[HDDFS_PATH_BYTES];
    hddfs_path(a, from);
    hddfs_path(b, to);
    return rename(a, b) == 0 ? 0 : -errno;
}

static int
hddfs_link(const char *from, const char *to)
{
    char a[HDDFS_PATH_BYTES], b[HDDFS_PATH_BYTES];
    hddfs_path(a, from);
    hddfs_path(b, to);
    return link(a, b) == 0 ? 0 : -errno;
}

static int
hddfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    if (fi)
        return fchmod((int)fi->fh, mode) == 0 ? 0 : -errno;
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    return chmod(p, mode) == 0 ? 0 : -errno;
}

static int
hddfs_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
    if (fi)
        return fchown((int)fi->fh, uid, gid) == 0 ? 0 : -errno;
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    return lchown(p, uid, gid) == 0 ? 0 : -errno;
}

static int
hddfs_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    if (fi)
        return ftruncate((int)fi->fh, size) == 0 ? 0 : -errno;
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    return truncate(p, size) == 0 ? 0 : -errno;
}

static int
hddfs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
    if (fi)
        return futimens((int)fi->fh, tv) == 0 ? 0 : -errno;
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    return utimensat(AT_FDCWD, p, tv, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

/* The backing file's open flags. O_DIRECT is dropped: FUSE hands this process the data in
 * buffers of its own, not aligned as O_DIRECT requires, and the emulated disk's costs are
 * modelled at fsync anyway. */
static int
hddfs_backing_flags(int flags)
{
    return (flags & ~O_DIRECT) | O_CLOEXEC;
}

static int
hddfs_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    int fd = open(p, hddfs_backing_flags(fi->flags), mode);
    if (fd < 0)
        return -errno;
    hddfs_own(p);
    fi->fh = (uint64_t)fd;
    return 0;
}

static int
hddfs_open(const char *path, struct fuse_file_info *fi)
{
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    int fd = open(p, hddfs_backing_flags(fi->flags));
    if (fd < 0)
        return -errno;
    fi->fh = (uint64_t)fd;
    return 0;
}

static int
hddfs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)path;
    ssize_t n = pread((int)fi->fh, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

static uint64_t
hddfs_ino(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 1;
}

static int
hddfs_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)path;
    ssize_t n = pwrite((int)fi->fh, buf, size, off);
    if (n < 0)
        return -errno;
    hddfs_note_write(hddfs_ino((int)fi->fh), (uint64_t)off, (uint64_t)n);
    return (int)n;
}

static int
hddfs_statfs(const char *path, struct statvfs *st)
{
    char p[HDDFS_PATH_BYTES];
    hddfs_path(p, path);
    return statvfs(p, st) == 0 ? 0 : -errno;
}

static int
hddfs_release(const char *path, struct fuse_file_info *fi)
{
    (void)path;
    close((int)fi->fh);
    return 0;
}

static int
hddfs_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
    (void)path;
    int fd = (int)fi->fh;
    int rc = (datasync ? fdatasync(fd) : fsync(fd)) == 0 ? 0 : -errno;
    hddfs_delay_flush(hddfs_ino(fd));
    return rc;
}

static int
hddfs_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
    (void)path;
    return fallocate((int)fi->fh, mode, off, len) == 0 ? 0 : -errno;
}

static off_t
hddfs_lseek(const char *path, off_t off, int whence, struct fuse_file_info *fi)
{
    (void)path;
    off_t r = lseek((int)fi->fh, off, whence);
    return r < 0 ? -errno : r;
}

static const struct fuse_operations hddfs_ops = {
    .init = hddfs_init,
    .getattr = hddfs_getattr,
    .access = hddfs_access,
    .readlink = hddfs_readlink,
    .readdir = hddfs_readdir,
    .mkdir = hddfs_mkdir,
    .symlink = hddfs_symlink,
    .unlink = hddfs_unlink,
    .rmdir = hddfs_rmdir,
    .rename = hddfs_rename,
    .link = hddfs_link,
    .chmod = hddfs_chmod,
    .chown = hddfs_chown,
    .truncate = hddfs_truncate,
    .utimens = hddfs_utimens,
    .open = hddfs_open,
    .create = hddfs_create,
    .read = hddfs_read,
    .write = hddfs_write,
    .statfs = hddfs_statfs,
    .release = hddfs_release,
    .fsync = hddfs_fsync,
    .fallocate = hddfs_fallocate,
    .lseek = hddfs_lseek,
};

/* Parses "rpm=7200,seek_ms=8.5,track_ms=1,mb_s=150". Returns 0 or -1. */
static int
hddfs_parse_model(hddfs_t *fs, char *spec)
{
    double rpm = 7200, seek_ms = 8.5, track_ms = 1.0, mb_s = 150.0;
    char *save = NULL;
    for (char *kv = strtok_r(spec, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return -1;
        *eq = '\0';
        double v = strtod(eq + 1, NULL);
        if (v <= 0 && strcmp(kv, "seek_ms") != 0 && strcmp(kv, "track_ms") != 0)
            return -1;
        if (strcmp(kv, "rpm") == 0)
            rpm = v;
        else if (strcmp(kv, "seek_ms") == 0)
            seek_ms = v;
        else if (strcmp(kv, "track_ms") == 0)
            track_ms = v;
        else if (strcmp(kv, "mb_s") == 0)
            mb_s = v;
        else
            return -1;
    }
    fs->period_ns = 60e9 / rpm;
    fs->seek_ns = seek_ms * 1e6;
    fs->track_ns = track_ms * 1e6;
    fs->bytes_per_ns = mb_s * 1e6 / 1e9;
    fs->track_bytes = fs->bytes_per_ns * fs->period_ns;
    return 0;
}

/* Takes "--model SPEC" and the backing directory (the first non-option argument) out of
 * argv; the rest goes to libfuse (mount point, -f, -o ...). */
static int
hddfs_take_args(hddfs_t *fs, int *argc, char **argv)
{
    char default_model[] = "rpm=7200";
    int rc = hddfs_parse_model(fs, default_model);
    int out = 1, have_root = 0;
    for (int i = 1; i < *argc && !rc; i++) {
        if (strcmp(argv[i], "--model") == 0 && i + 1 < *argc) {
            rc = hddfs_parse_model(fs, argv[++i]);
        } else if (strcmp(argv[i], "-o") == 0 && i + 1 < *argc) {
            argv[out++] = argv[i++];
            argv[out++] = argv[i];
        } else if (argv[i][0] != '-' && !have_root) {
            if (!realpath(argv[i], fs->root))
                rc = -1;
            have_root = 1;
        } else {
            argv[out++] = argv[i];
        }
    }
    *argc = out;
    argv[out] = NULL;
    return (rc || !have_root) ? -1 : 0;
}

int
main(int argc, char **argv)
{
    hddfs_t *fs = calloc(1, sizeof *fs);
    if (!fs)
        return 1;
    pthread_mutex_init(&fs->model_mu, NULL);
    if (hddfs_take_args(fs, &argc, argv)) {
        fprintf(stderr, "usage: stele-hddfs [--model rpm=7200,seek_ms=8.5,track_ms=1,mb_s=150] "
                        "BACKING_DIR MOUNT_POINT [-f] [-o opt]\n");
        free(fs);
        return 1;
    }
    umask(0);
    int rc = fuse_main(argc, argv, &hddfs_ops, fs);
    fprintf(stderr, "stele-hddfs: %llu flushes modelled, %llu of them of untracked files\n",
            (unsigned long long)fs->n_flushes, (unsigned long long)fs->n_untracked_flushes);
    pthread_mutex_destroy(&fs->model_mu);
    free(fs);
    return rc;
}
