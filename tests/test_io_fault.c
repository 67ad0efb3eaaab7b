/*
 * test_io_fault.c: the faulting I/O table (tests/support/io_fault.c) fails exactly the
 * calls it is armed for, the way the journal would see them, and counts every call.
 * Runs over the real POSIX table in a temporary directory. Also the POSIX table itself where
 * the tests cannot make the kernel do what a network or FUSE file system may: fail a call
 * with EINTR (interposed C library calls, below).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "io_fault.h"
#include "test_util.h"

/*
 * EINTR below the POSIX table. A signal can interrupt any call on a FUSE or network file
 * system, but never these on the local disks the tests run on, so the test binary puts its
 * own renameat, unlinkat and fstat in front of the C library's (an executable's definitions
 * win at link time): each fails with EINTR as many times as armed here, then makes the real
 * call through the raw system call or fstatat, which the POSIX table does not use.
 */
static struct {
    int rename, unlink, fstat;
} eintr_left;

int
renameat(int from_dir_fd, const char *from, int to_dir_fd, const char *to)
{
    if (eintr_left.rename > 0) {
        eintr_left.rename--;
        errno = EINTR;
        return -1;
    }
    return (int)syscall(SYS_renameat2, from_dir_fd, from, to_dir_fd, to, 0);
}

int
unlinkat(int dir_fd, const char *name, int flags)
{
    if (eintr_left.unlink > 0) {
        eintr_left.unlink--;
        errno = EINTR;
        return -1;
    }
    return (int)syscall(SYS_unlinkat, dir_fd, name, flags);
}

int
fstat(int fd, struct stat *st)
{
    if (eintr_left.fstat > 0) {
        eintr_left.fstat--;
        errno = EINTR;
        return -1;
    }
    return fstatat(fd, "", st, AT_EMPTY_PATH);
}

typedef struct fixture {
    char *dir;
    int dir_fd;
    char *path;
    io_fault_t *fault;
    const journal_io_t *io;
    int fd;
} fixture_t;

static int
setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    fx->dir = test_tmpdir_new("iofault");
    assert_non_null(fx->dir);
    fx->path = test_path_join(fx->dir, "file");
    fx->fault = io_fault_new(journal_io_posix(), 0);
    assert_non_null(fx->fault);
    fx->io = io_fault_io(fx->fault);
    fx->dir_fd = fx->io->open_dir(fx->io->ctx, AT_FDCWD, fx->dir);
    assert_true(fx->dir_fd >= 0);
    fx->fd = fx->io->open_file(fx->io->ctx, fx->dir_fd, "file",
                               JOURNAL_IO_WRITE | JOURNAL_IO_CREATE, 0600);
    assert_true(fx->fd >= 0);
    *state = fx;
    return 0;
}

static int
teardown(void **state)
{
    fixture_t *fx = *state;
    memset(&eintr_left, 0, sizeof eintr_left);
    if (fx->fd >= 0)
        journal_io_posix()->close(NULL, fx->fd);
    io_fault_free(fx->fault);
    free(fx->path);
    close(fx->dir_fd);
    assert_int_equal(test_tmpdir_remove(fx->dir), 0);
    free(fx);
    return 0;
}

static int
write_bytes(const fixture_t *fx, const void *buf, size_t len, off_t off)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    return fx->io->pwritev(fx->io->ctx, fx->fd, &iov, 1, off);
}

static void
test_fault_fails_only_the_nth_call_of_its_method(void **state)
{
    fixture_t *fx = *state;
    io_fault_spec_t spec = {.method = IO_METHOD_PWRITEV, .nth = 2, .error = -EIO};
    io_fault_arm(fx->fault, &spec);

    assert_int_equal(fx->io->fdatasync(fx->io->ctx, fx->fd), 0); /* other method: ignored */
    assert_int_equal(write_bytes(fx, "a", 1, 0), 0);
    assert_int_equal(write_bytes(fx, "b", 1, 1), -EIO);
    assert_int_equal(write_bytes(fx, "c", 1, 2), 0);
    assert_int_equal(io_fault_fired(fx->fault), 1);

    char buf[4] = {0};
    assert_int_equal(fx->io->pread(fx->io->ctx, fx->fd, buf, sizeof(buf), 0), 3);
    assert_memory_equal(buf, "a\0c", 3); /* the failed write changed nothing */
}

static void
test_fault_persistent_fails_every_call_from_nth(void **state)
{
    fixture_t *fx = *state;
    io_fault_spec_t spec = {
        .method = IO_METHOD_FDATASYNC, .nth = 2, .error = -ENOSPC, .is_persistent = 1};
    io_fault_arm(fx->fault, &spec);

    assert_int_equal(fx->io->fdatasync(fx->io->ctx, fx->fd), 0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(fx->io->fdatasync(fx->io->ctx, fx->fd), -ENOSPC);
    assert_int_equal(io_fault_fired(fx->fault), 5);

    io_fault_disarm(fx->fault);
    assert_int_equal(fx->io->fdatasync(fx->io->ctx, fx->fd), 0);
}

static void
test_fault_any_method_counts_calls_across_methods(void **state)
{
    fixture_t *fx = *state;
    io_fault_spec_t spec = {.method = IO_METHOD_ANY, .nth = 3, .error = -EIO};
    io_fault_arm(fx->fault, &spec);
    off_t size;

    assert_int_equal(write_bytes(fx, "x", 1, 0), 0);
    assert_int_equal(fx->io->file_size(fx->io->ctx, fx->fd, &size), 0);
    assert_int_equal(fx->io->fsync(fx->io->ctx, fx->fd), -EIO);
    assert_int_equal(fx->io->truncate(fx->io->ctx, fx->fd, 0), 0);
    assert_int_equal(io_fault_fired(fx->fault), 1);
}

static void
test_fault_short_write_lands_a_prefix_then_fails(void **state)
{
    fixture_t *fx = *state;
    io_fault_spec_t spec = {
        .method = IO_METHOD_PWRITEV, .nth = 1, .error = -EIO, .is_short_write = 1};
    io_fault_arm(fx->fault, &spec);

    struct iovec iov[2] = {{.iov_base = "abcd", .iov_len = 4}, {.iov_base = "efgh", .iov_len = 4}};
    assert_int_equal(fx->io->pwritev(fx->io->ctx, fx->fd, iov, 2, 0), -EIO);

    off_t size = -1;
    assert_int_equal(fx->io->file_size(fx->io->ctx, fx->fd, &size), 0);
    assert_int_equal(size, 4); /* half of the 8 bytes reached the file */
    char buf[8] = {0};
    assert_int_equal(fx->io->pread(fx->io->ctx, fx->fd, buf, sizeof(buf), 0), 4);
    assert_memory_equal(buf, "abcd", 4);
}

static void
test_fault_counts_every_call_per_method(void **state)
{
    fixture_t *fx = *state;
    io_fault_reset_counts(fx->fault);

    for (int i = 0; i < 3; i++)
        assert_int_equal(fx->io->fdatasync(fx->io->ctx, fx->fd), 0);
    assert_int_equal(fx->io->fsync(fx->io->ctx, fx->fd), 0);
    assert_int_equal(fx->io->sync_dir(fx->io->ctx, fx->dir_fd), 0);
    assert_int_equal(write_bytes(fx, "z", 1, 0), 0);

    assert_int_equal(io_fault_calls(fx->fault, IO_METHOD_FDATASYNC), 3);
    assert_int_equal(io_fault_calls(fx->fault, IO_METHOD_FSYNC), 1);
    assert_int_equal(io_fault_calls(fx->fault, IO_METHOD_SYNC_DIR), 1);
    assert_int_equal(io_fault_calls(fx->fault, IO_METHOD_PWRITEV), 1);
    assert_int_equal(io_fault_calls(fx->fault, IO_METHOD_ANY), 6);
}

static void
test_fault_failed_close_still_releases_the_descriptor(void **state)
{
    fixture_t *fx = *state;
    io_fault_spec_t spec = {.method = IO_METHOD_CLOSE, .nth = 1, .error = -EIO};
    io_fault_arm(fx->fault, &spec);

    assert_int_equal(fx->io->close(fx->io->ctx, fx->fd), -EIO);
    errno = 0;
    assert_int_equal(fcntl(fx->fd, F_GETFD), -1);
    assert_int_equal(errno, EBADF);
    fx->fd = -1;
}

static void
test_fault_failed_open_creates_nothing(void **state)
{
    fixture_t *fx = *state;
    io_fault_spec_t spec = {.method = IO_METHOD_OPEN, .nth = 1, .error = -ENOSPC};
    io_fault_arm(fx->fault, &spec);
    char *other = test_path_join(fx->dir, "other");

    assert_int_equal(fx->io->open_file(fx->io->ctx, fx->dir_fd, "other",
                                       JOURNAL_IO_WRITE | JOURNAL_IO_CREATE, 0600),
                     -ENOSPC);
    assert_int_equal(access(other, F_OK), -1);
    free(other);
}

static void
test_fault_noop_syncs_are_counted_and_can_fail(void **state)
{
    (void)state;
    io_fault_t *f = io_fault_new(journal_io_posix(), 1);
    assert_non_null(f);
    const journal_io_t *io = io_fault_io(f);
    io_fault_spec_t spec = {.method = IO_METHOD_FDATASYNC, .nth = 2, .error = -EIO};
    io_fault_arm(f, &spec);

    /* fd -1 would fail a real fdatasync with EBADF: the noop table never reaches the disk */
    assert_int_equal(io->fdatasync(io->ctx, -1), 0);
    assert_int_equal(io->fdatasync(io->ctx, -1), -EIO);
    assert_int_equal(io_fault_calls(f, IO_METHOD_FDATASYNC), 2);
    io_fault_free(f);
}

static void
test_fault_tells_call_sites_apart(void **state)
{
    fixture_t *fx = *state;
    io_fault_spec_t spec = {.method = IO_METHOD_FDATASYNC, .nth = 1, .error = -EIO};
    io_fault_arm(fx->fault, &spec);

    for (int i = 0; i < 3; i++)
        (void)fx->io->fdatasync(fx->io->ctx, fx->fd);        /* one site, called three times */
    assert_int_equal(fx->io->fsync(fx->io->ctx, fx->fd), 0); /* a second site */

    io_fault_site_t sites[IO_FAULT_MAX_SITES];
    size_t n = io_fault_sites(fx->fault, sites, IO_FAULT_MAX_SITES);
    size_t n_sync_sites = 0;
    for (size_t i = 0; i < n; i++) {
        if (sites[i].method == IO_METHOD_FDATASYNC) {
            n_sync_sites++;
            assert_int_equal(sites[i].n_calls, 3);
            assert_int_equal(sites[i].n_faulted, 1);
        } else if (sites[i].method == IO_METHOD_FSYNC) {
            assert_int_equal(sites[i].n_faulted, 0);
        }
    }
    assert_int_equal(n_sync_sites, 1);
}

/* io.h: every method retries EINTR (nothing was done; the call is simply made again). A
 * rename interrupted at a roll would otherwise halt the journal, and an interrupted unlink
 * fail a retention pass, for a signal. */
static void
test_posix_rename_unlink_and_file_size_retry_eintr(void **state)
{
    fixture_t *fx = *state;
    const journal_io_t *posix = journal_io_posix();
    char *to = test_path_join(fx->dir, "renamed");
    assert_non_null(to);
    assert_int_equal(write_bytes(fx, "abc", 3, 0), 0);

    eintr_left.rename = 2;
    assert_int_equal(posix->rename(posix->ctx, fx->dir_fd, "file", "renamed"), 0);
    assert_int_equal(eintr_left.rename, 0);
    assert_int_equal(access(to, F_OK), 0);
    assert_int_equal(access(fx->path, F_OK), -1);

    off_t size = -1;
    eintr_left.fstat = 2;
    assert_int_equal(posix->file_size(posix->ctx, fx->fd, &size), 0);
    assert_int_equal(eintr_left.fstat, 0);
    assert_int_equal(size, 3);

    eintr_left.unlink = 2;
    assert_int_equal(posix->unlink(posix->ctx, fx->dir_fd, "renamed"), 0);
    assert_int_equal(eintr_left.unlink, 0);
    assert_int_equal(access(to, F_OK), -1);
    free(to);
}

/* Preallocation answers the same whichever way it reserves: posix_fallocate refuses a
 * negative offset or a length that is not positive with EINVAL, and so must zero-filling,
 * which would otherwise write nothing and report the space reserved. */
static void
test_posix_allocate_refuses_a_negative_length_in_both_modes(void **state)
{
    fixture_t *fx = *state;
    const journal_io_t *posix = journal_io_posix();
    for (int zero_fill = 0; zero_fill <= 1; zero_fill++) {
        assert_int_equal(posix->allocate(posix->ctx, fx->fd, 0, -4096, zero_fill), -EINVAL);
        assert_int_equal(posix->allocate(posix->ctx, fx->fd, 0, 0, zero_fill), -EINVAL);
        assert_int_equal(posix->allocate(posix->ctx, fx->fd, -4096, 8192, zero_fill), -EINVAL);
        assert_int_equal(posix->allocate(posix->ctx, fx->fd, 0, 8192, zero_fill), 0);
    }
    off_t size = -1;
    assert_int_equal(posix->file_size(posix->ctx, fx->fd, &size), 0);
    assert_int_equal(size, 8192);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fault_fails_only_the_nth_call_of_its_method, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fault_persistent_fails_every_call_from_nth, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fault_any_method_counts_calls_across_methods, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fault_short_write_lands_a_prefix_then_fails, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fault_counts_every_call_per_method, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_failed_close_still_releases_the_descriptor,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_fault_failed_open_creates_nothing, setup, teardown),
        cmocka_unit_test(test_fault_noop_syncs_are_counted_and_can_fail),
        cmocka_unit_test_setup_teardown(test_fault_tells_call_sites_apart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_posix_rename_unlink_and_file_size_retry_eintr, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_posix_allocate_refuses_a_negative_length_in_both_modes,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
