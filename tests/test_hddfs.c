/*
 * test_hddfs.c: stele-hddfs, the benchmark's emulated disk, charges what its model says.
 *
 * Mounts the built stele-hddfs over a temporary directory (needs /dev/fuse and the right to
 * mount: root here; skipped with the reason elsewhere), runs file operations through it,
 * unmounts, and reads the count of modelled flushes it prints on exit. Nothing is timed:
 * the model is set to a disk so fast that its delays do not matter, and only counts are
 * compared.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_child.h"
#include "test_util.h"

/* More files than the model tracks at once (HDDFS_DIRTY_SLOTS, 8192). */
#define MANY_FILES 9000
#define MOUNT_WAIT_MS 10000

typedef struct hddfs_mount {
    char *run_dir;
    char backing[512];
    char mount[512];
    char log[512];
    pid_t pid;
} hddfs_mount_t;

static int
is_mounted(const hddfs_mount_t *m)
{
    struct stat a, b;
    return stat(m->mount, &a) == 0 && stat(m->backing, &b) == 0 && a.st_dev != b.st_dev;
}

static pid_t
spawn_hddfs(const hddfs_mount_t *m)
{
    pid_t pid = test_fork_bound();
    if (pid != 0)
        return pid;
    int log_fd = open(m->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (log_fd >= 0)
        dup2(log_fd, STDERR_FILENO);
    execl(STELE_HDDFS_EXE, STELE_HDDFS_EXE, "-f", "--model",
          "rpm=600000,seek_ms=0,track_ms=0,mb_s=100000", m->backing, m->mount, (char *)NULL);
    _exit(127);
}

/* Mounts a fast model disk; returns 0, or a reason to skip in why. */
static int
mount_hddfs(hddfs_mount_t *m, char *why, size_t why_cap)
{
    if (access("/dev/fuse", R_OK | W_OK) != 0 || geteuid() != 0) {
        snprintf(why, why_cap, "needs /dev/fuse and root to mount");
        return -1;
    }
    m->run_dir = test_tmpdir_new("hddfs");
    snprintf(m->backing, sizeof m->backing, "%s/backing", m->run_dir);
    snprintf(m->mount, sizeof m->mount, "%s/mnt", m->run_dir);
    snprintf(m->log, sizeof m->log, "%s/hddfs.log", m->run_dir);
    assert_int_equal(mkdir(m->backing, 0700), 0);
    assert_int_equal(mkdir(m->mount, 0700), 0);
    m->pid = spawn_hddfs(m);
    assert_true(m->pid > 0);
    for (int waited = 0; waited < MOUNT_WAIT_MS && !is_mounted(m); waited += 10) {
        if (waitpid(m->pid, NULL, WNOHANG) == m->pid) {
            m->pid = 0;
            break;
        }
        usleep(10 * 1000);
    }
    if (is_mounted(m))
        return 0;
    snprintf(why, why_cap, "stele-hddfs did not mount (see its log in a kept run)");
    if (m->pid > 0) {
        kill(m->pid, SIGTERM);
        waitpid(m->pid, NULL, 0);
    }
    test_tmpdir_remove(m->run_dir);
    return -1;
}

/* The whole file as a string (owned). */
static char *
read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *text = calloc(1, 65536);
    assert_non_null(text);
    size_t n = fread(text, 1, 65535, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* Unmounts, waits for the program to exit, and returns what it printed last. */
static char *
unmount_hddfs(hddfs_mount_t *m)
{
    int rc = -1;
    for (int tries = 0; rc != 0 && tries < 100; tries++) {
        rc = umount2(m->mount, 0);
        if (rc != 0 && errno != EBUSY)
            break;
        if (rc != 0)
            usleep(50 * 1000); /* a release still in flight */
    }
    if (rc != 0)
        print_message("umount %s: %s\n", m->mount, strerror(errno));
    assert_int_equal(rc, 0);
    int status = 0;
    assert_int_equal(waitpid(m->pid, &status, 0), m->pid);
    if (!WIFEXITED(status))
        print_message("stele-hddfs ended by signal %d\n", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    char *log = read_text(m->log);
    test_tmpdir_remove(m->run_dir);
    return log;
}

static void
write_and_sync(const char *path, size_t bytes)
{
    char buf[256] = {0};
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, bytes), (ssize_t)bytes);
    assert_int_equal(fdatasync(fd), 0);
    assert_int_equal(close(fd), 0);
}

static void
sync_only(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(fsync(fd), 0);
    assert_int_equal(close(fd), 0);
}

/* A flush costs the model only for a file with unflushed writes: syncing a file never
 * written, or one already synced, is free (it was charged a seek and half a turn, which made
 * peers that sync clean files look slower on the "HDD" than they are). And the model keeps
 * tracking files however many were written before (after 8192 it charged every flush the
 * flat cost of an unknown file). */
static void
test_hddfs_charges_only_files_with_unflushed_writes(void **state)
{
    (void)state;
    hddfs_mount_t m = {0};
    char why[256];
    if (mount_hddfs(&m, why, sizeof why) != 0) {
        print_message("skipped: %s\n", why);
        skip();
    }
    char path[600];
    snprintf(path, sizeof path, "%s/written", m.mount);
    write_and_sync(path, 100); /* one flush */
    sync_only(path);           /* clean now: free */
    snprintf(path, sizeof path, "%s/never-written", m.mount);
    sync_only(path); /* free */
    for (int i = 0; i < MANY_FILES; i++) {
        snprintf(path, sizeof path, "%s/f%d", m.mount, i);
        write_and_sync(path, 1); /* one flush each */
    }
    char *log = unmount_hddfs(&m);
    const char *line = strstr(log, "stele-hddfs: ");
    unsigned long long flushes = 0, untracked = 0;
    assert_non_null(line);
    assert_int_equal(sscanf(line, "stele-hddfs: %llu flushes modelled, %llu of them of untracked",
                            &flushes, &untracked),
                     2);
    print_message("%llu flushes modelled, %llu of untracked files\n", flushes, untracked);
    free(log);
    assert_int_equal(untracked, 0);
    assert_int_equal(flushes, 1 + MANY_FILES);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hddfs_charges_only_files_with_unflushed_writes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
