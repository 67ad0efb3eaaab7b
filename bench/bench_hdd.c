/*
 * bench_hdd.c: mounting and unmounting the emulated 7200 rpm disk for a run.
 *
 * The disk is the stele-hddfs program (stele_hddfs.c, built next to stele-bench): a FUSE
 * passthrough over <run_dir>/hdd-backing mounted at <run_dir>/hdd, which delays every
 * fsync/fdatasync by a rotational model. stele-bench starts it in the foreground as its
 * own child, waits until the mount appears, and at the end unmounts it and stops the child
 * by its PID. Without /dev/fuse, without the right to mount, or without the program, the
 * HDD cells are reported skipped with the reason.
 */
#include "bench_peers.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define HDD_MOUNT_TIMEOUT_MS 10000

struct bench_hdd {
    pid_t pid;
    char mount_dir[BENCH_PATH_BYTES];
    char backing_dir[BENCH_PATH_BYTES];
};

void
bench_hdd_model_default(bench_hdd_model_t *m)
{
    m->rpm = 7200;
    m->seek_ms = 8.5;           /* a typical 7200 rpm desktop drive's average seek */
    m->track_to_track_ms = 1.0; /* adjacent cylinders */
    m->bandwidth_mb_s = 150.0;  /* outer-zone sequential rate */
}

/* stele-hddfs sits next to the stele-bench executable. */
static int
hdd_find_program(char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -errno;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    if (bench_path(out, cap, self, "stele-hddfs"))
        return -ENAMETOOLONG;
    return access(out, X_OK) == 0 ? 0 : -ENOENT;
}

static int
hdd_is_mounted(const char *mount_dir, const char *backing_dir)
{
    struct stat a, b;
    return stat(mount_dir, &a) == 0 && stat(backing_dir, &b) == 0 && a.st_dev != b.st_dev;
}

static int
hdd_spawn(bench_hdd_t *h, const char *prog, const bench_hdd_model_t *m, const char *log)
{
    char model[256];
    snprintf(model, sizeof model, "rpm=%u,seek_ms=%.3f,track_ms=%.3f,mb_s=%.1f", m->rpm, m->seek_ms,
             m->track_to_track_ms, m->bandwidth_mb_s);
    char *argv[] = {
        (char *)prog, "-f",  "-o",           "max_threads=256,allow_other,default_permissions",
        "--model",    model, h->backing_dir, h->mount_dir,
        NULL};
    h->pid = bench_server_spawn(argv, log, NULL);
    if (h->pid < 0)
        return (int)h->pid;
    for (int waited = 0; waited < HDD_MOUNT_TIMEOUT_MS; waited += 50) {
        if (hdd_is_mounted(h->mount_dir, h->backing_dir))
            return 0;
        if (waitpid(h->pid, NULL, WNOHANG) == h->pid) {
            h->pid = 0;
            return -EPERM;
        }
        bench_sleep_ms(50);
    }
    return -ETIMEDOUT;
}

int
bench_hdd_mount(const char *run_dir, const bench_hdd_model_t *m, bench_hdd_t **out, char *note,
                size_t note_cap)
{
    *out = NULL;
    char prog[BENCH_PATH_BYTES], log[BENCH_PATH_BYTES];
    if (access("/dev/fuse", R_OK | W_OK) != 0) {
        snprintf(note, note_cap, "/dev/fuse is not available to this user");
        return BENCH_SKIPPED;
    }
    if (hdd_find_program(prog, sizeof prog)) {
        snprintf(note, note_cap, "stele-hddfs not built (needs libfuse3-dev)");
        return BENCH_SKIPPED;
    }
    bench_hdd_t *h = calloc(1, sizeof *h);
    if (!h)
        return BENCH_FAILED;
    snprintf(h->mount_dir, sizeof h->mount_dir, "%s/hdd", run_dir);
    snprintf(h->backing_dir, sizeof h->backing_dir, "%s/hdd-backing", run_dir);
    snprintf(log, sizeof log, "%s/hddfs.log", run_dir);
    int rc = -errno;
    if (mkdir(h->mount_dir, 0711) == 0 && mkdir(h->backing_dir, 0711) == 0)
        rc = hdd_spawn(h, prog, m, log);
    if (rc) {
        snprintf(note, note_cap, "could not mount the emulated disk (%s; see %s)", strerror(-rc),
                 log);
        bench_hdd_unmount(h);
        return BENCH_SKIPPED;
    }
    *out = h;
    return 0;
}

const char *
bench_hdd_path(const bench_hdd_t *h)
{
    return h ? h->mount_dir : NULL;
}

void
bench_hdd_unmount(bench_hdd_t *h)
{
    if (!h)
        return;
    if (h->pid > 0) {
        if (hdd_is_mounted(h->mount_dir, h->backing_dir)) {
            char fusermount[BENCH_PATH_BYTES];
            char *argv[] = {fusermount, "-u", "-z", h->mount_dir, NULL};
            if (bench_server_find("fusermount3", NULL, fusermount, sizeof fusermount) != 0 ||
                bench_server_run(argv, "/dev/null", NULL) != 0)
                umount2(h->mount_dir, MNT_DETACH);
        }
        /* Unmounting ends the FUSE loop; the signal is for a process that did not notice. */
        bench_server_stop(h->pid, SIGTERM, 5000);
    }
    rmdir(h->mount_dir);
    bench_remove_tree(h->backing_dir);
    free(h);
}
