/*
 * test_io_crash.c: the power-loss I/O table (tests/support/io_crash.c) loses only what was
 * not durable, loses it in whole sectors, and can lose names that no sync_dir covered.
 * Each case repeats over many crash seeds and checks both that every outcome is legal and
 * that the interesting outcomes (kept, lost, torn) all occur.
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
#include <unistd.h>

#include "io_crash.h"
#include "test_util.h"

/* Crash seeds tried per case: enough for every outcome to show up many times. */
enum { CRASH_ROUNDS = 200 };
enum { SECTOR_BYTES = 512 };

typedef struct fixture {
    char *dir;
    int dir_fd; /* for sync_dir; the files are named by absolute path (AT_FDCWD) */
    uint64_t seed;
} fixture_t;

static int
setup(void **state)
{
    fixture_t *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    fx->dir = test_tmpdir_new("iocrash");
    assert_non_null(fx->dir);
    fx->dir_fd = open(fx->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fx->dir_fd >= 0);
    fx->seed = test_seed("test_io_crash");
    *state = fx;
    return 0;
}

static int
teardown(void **state)
{
    fixture_t *fx = *state;
    close(fx->dir_fd);
    assert_int_equal(test_tmpdir_remove(fx->dir), 0);
    free(fx);
    return 0;
}

static int
write_fill(const journal_io_t *io, int fd, int byte, size_t len, off_t off)
{
    uint8_t *buf = malloc(len);
    assert_non_null(buf);
    memset(buf, byte, len);
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    int rc = io->pwritev(io->ctx, fd, &iov, 1, off);
    free(buf);
    return rc;
}

/* Reads the whole file at path into a malloc'd buffer; *len_out its size, -1 if missing. */
static uint8_t *
slurp(const char *path, off_t *len_out)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        *len_out = -1;
        return NULL;
    }
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    assert_non_null(buf);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
    fclose(f);
    *len_out = st.st_size;
    return buf;
}

static int
open_rw(const journal_io_t *io, const char *path)
{
    int fd = io->open_file(io->ctx, AT_FDCWD, path, JOURNAL_IO_WRITE | JOURNAL_IO_CREATE, 0600);
    assert_true(fd >= 0);
    return fd;
}

/* Durable first half 'A', then an unsynced overwrite 'B' of sectors 1..3 and an unsynced
 * append 'C' of sectors 4..5. After a crash: sector 0 is always 'A'; every other sector is
 * wholly old or wholly new, apart from at most one damaged sector. */
static void
test_crash_keeps_synced_data_and_loses_unsynced_in_whole_sectors(void **state)
{
    fixture_t *fx = *state;
    char *path = test_path_join(fx->dir, "seg");
    unsigned n_old = 0, n_new = 0, n_torn = 0;

    for (int round = 0; round < CRASH_ROUNDS; round++) {
        io_crash_t *c = io_crash_new(journal_io_posix(), fx->seed + (uint64_t)round, 0);
        const journal_io_t *io = io_crash_io(c);
        int fd = open_rw(io, path);
        assert_int_equal(write_fill(io, fd, 'A', 4 * SECTOR_BYTES, 0), 0);
        assert_int_equal(io->fdatasync(io->ctx, fd), 0);
        assert_int_equal(io->sync_dir(io->ctx, fx->dir_fd), 0);
        assert_int_equal(write_fill(io, fd, 'B', 3 * SECTOR_BYTES, SECTOR_BYTES), 0);
        assert_int_equal(write_fill(io, fd, 'C', 2 * SECTOR_BYTES, 4 * SECTOR_BYTES), 0);
        assert_int_equal(io->close(io->ctx, fd), 0);

        io_crash_report_t rep;
        assert_int_equal(io_crash_apply(c, &rep), 0);
        io_crash_free(c);

        off_t len;
        uint8_t *got = slurp(path, &len);
        assert_non_null(got);
        assert_true(len == 4 * SECTOR_BYTES || len == 5 * SECTOR_BYTES || len == 6 * SECTOR_BYTES);
        for (off_t i = 0; i < SECTOR_BYTES; i++)
            assert_int_equal(got[i], 'A');
        unsigned damaged = 0;
        for (off_t s = 1; s * SECTOR_BYTES < len; s++) {
            const uint8_t *sec = got + s * SECTOR_BYTES;
            int old_byte = s < 4 ? 'A' : 0;
            int new_byte = s < 4 ? 'B' : 'C';
            size_t same_old = 0, same_new = 0;
            for (size_t i = 0; i < SECTOR_BYTES; i++) {
                same_old += sec[i] == old_byte;
                same_new += sec[i] == new_byte;
            }
            if (same_old == SECTOR_BYTES)
                n_old++;
            else if (same_new == SECTOR_BYTES)
                n_new++;
            else
                damaged++;
        }
        assert_true(damaged <= 1);
        assert_true(damaged == 0 || rep.damage != 0);
        n_torn += damaged;
        free(got);
        unlink(path);
    }
    assert_true(n_old > 0 && n_new > 0 && n_torn > 0);
    free(path);
}

static void
test_crash_reads_see_unsynced_writes_before_the_crash(void **state)
{
    fixture_t *fx = *state;
    char *path = test_path_join(fx->dir, "seg");
    io_crash_t *c = io_crash_new(journal_io_posix(), fx->seed, 0);
    const journal_io_t *io = io_crash_io(c);
    int fd = open_rw(io, path);

    assert_int_equal(write_fill(io, fd, 'Q', 100, 10), 0);
    uint8_t buf[110];
    assert_int_equal(io->pread(io->ctx, fd, buf, sizeof(buf), 0), 110);
    assert_int_equal(buf[0], 0);
    assert_int_equal(buf[10], 'Q');
    assert_int_equal(buf[109], 'Q');
    off_t size;
    assert_int_equal(io->file_size(io->ctx, fd, &size), 0);
    assert_int_equal(size, 110);

    assert_int_equal(io->close(io->ctx, fd), 0);
    io_crash_settle(c);
    io_crash_free(c);
    free(path);
}

static void
test_crash_fails_every_call_after_the_power_fails(void **state)
{
    fixture_t *fx = *state;
    char *path = test_path_join(fx->dir, "seg");
    io_crash_t *c = io_crash_new(journal_io_posix(), fx->seed, 0);
    const journal_io_t *io = io_crash_io(c);
    int fd = open_rw(io, path);

    io_crash_arm(c, 2);
    assert_int_equal(write_fill(io, fd, 'x', 10, 0), 0);
    assert_false(io_crash_has_crashed(c));
    assert_int_equal(write_fill(io, fd, 'y', 10, 10), -EIO);
    assert_true(io_crash_has_crashed(c));
    assert_int_equal(io->fdatasync(io->ctx, fd), -EIO);
    uint8_t buf[4];
    assert_int_equal(io->pread(io->ctx, fd, buf, sizeof(buf), 0), -EIO);
    assert_int_equal(io->close(io->ctx, fd), 0); /* descriptors are still released */

    assert_int_equal(io_crash_apply(c, NULL), 0);
    assert_false(io_crash_has_crashed(c)); /* ready for the next cycle */
    io_crash_free(c);
    free(path);
}

/* A new file fsynced but whose directory was not: its name may vanish; after sync_dir it
 * never does. */
static void
test_crash_may_lose_a_new_file_until_its_directory_is_synced(void **state)
{
    fixture_t *fx = *state;
    char *path = test_path_join(fx->dir, "new.seg");
    unsigned n_lost = 0, n_kept = 0;

    for (int round = 0; round < CRASH_ROUNDS; round++) {
        int sync_dir = round % 2;
        io_crash_t *c = io_crash_new(journal_io_posix(), fx->seed + (uint64_t)round, 0);
        const journal_io_t *io = io_crash_io(c);
        int fd = open_rw(io, path);
        assert_int_equal(write_fill(io, fd, 'N', 700, 0), 0);
        assert_int_equal(io->fsync(io->ctx, fd), 0);
        if (sync_dir)
            assert_int_equal(io->sync_dir(io->ctx, fx->dir_fd), 0);
        assert_int_equal(io->close(io->ctx, fd), 0);
        assert_int_equal(io_crash_apply(c, NULL), 0);
        io_crash_free(c);

        off_t len;
        uint8_t *got = slurp(path, &len);
        if (!got) {
            assert_false(sync_dir);
            n_lost++;
            continue;
        }
        assert_int_equal(len, 700); /* the data was synced: all or nothing with the name */
        assert_int_equal(got[699], 'N');
        n_kept += !sync_dir;
        free(got);
        unlink(path);
    }
    assert_true(n_lost > 0 && n_kept > 0);
    free(path);
}

/* rename(tmp, final) over an existing file, then a crash before sync_dir: either the new
 * file is at `final`, or `tmp` and the old `final` are back as they were. */
static void
test_crash_lost_rename_brings_back_both_files(void **state)
{
    fixture_t *fx = *state;
    char *tmp = test_path_join(fx->dir, "tmp");
    char *final = test_path_join(fx->dir, "final");
    unsigned n_lost = 0, n_kept = 0;

    for (int round = 0; round < CRASH_ROUNDS; round++) {
        io_crash_t *c = io_crash_new(journal_io_posix(), fx->seed + (uint64_t)round, 0);
        const journal_io_t *io = io_crash_io(c);
        int fd = open_rw(io, final);
        assert_int_equal(write_fill(io, fd, 'O', 600, 0), 0);
        assert_int_equal(io->fdatasync(io->ctx, fd), 0);
        assert_int_equal(io->close(io->ctx, fd), 0);
        fd = open_rw(io, tmp);
        assert_int_equal(write_fill(io, fd, 'T', 300, 0), 0);
        assert_int_equal(io->fdatasync(io->ctx, fd), 0);
        assert_int_equal(io->close(io->ctx, fd), 0);
        assert_int_equal(io->sync_dir(io->ctx, fx->dir_fd), 0);
        assert_int_equal(io->rename(io->ctx, AT_FDCWD, tmp, final), 0);
        assert_int_equal(io_crash_apply(c, NULL), 0);
        io_crash_free(c);

        off_t final_len, tmp_len;
        uint8_t *f = slurp(final, &final_len);
        uint8_t *t = slurp(tmp, &tmp_len);
        assert_non_null(f);
        if (t) {
            assert_int_equal(final_len, 600);
            assert_int_equal(f[599], 'O');
            assert_int_equal(tmp_len, 300);
            assert_int_equal(t[0], 'T');
            n_lost++;
        } else {
            assert_int_equal(final_len, 300);
            assert_int_equal(f[0], 'T');
            n_kept++;
        }
        free(f);
        free(t);
        unlink(tmp);
        unlink(final);
    }
    assert_true(n_lost > 0 && n_kept > 0);
    free(tmp);
    free(final);
}

static void
test_crash_lost_unlink_brings_the_file_back_intact(void **state)
{
    fixture_t *fx = *state;
    char *path = test_path_join(fx->dir, "old.seg");
    unsigned n_back = 0, n_gone = 0;

    for (int round = 0; round < CRASH_ROUNDS; round++) {
        io_crash_t *c = io_crash_new(journal_io_posix(), fx->seed + (uint64_t)round, 0);
        const journal_io_t *io = io_crash_io(c);
        int fd = open_rw(io, path);
        assert_int_equal(write_fill(io, fd, 'U', 1500, 0), 0);
        assert_int_equal(io->fdatasync(io->ctx, fd), 0);
        assert_int_equal(io->close(io->ctx, fd), 0);
        assert_int_equal(io->sync_dir(io->ctx, fx->dir_fd), 0);
        assert_int_equal(io->unlink(io->ctx, AT_FDCWD, path), 0);
        assert_int_equal(io_crash_apply(c, NULL), 0);
        io_crash_free(c);

        off_t len;
        uint8_t *got = slurp(path, &len);
        if (got) {
            assert_int_equal(len, 1500);
            for (off_t i = 0; i < len; i++)
                assert_int_equal(got[i], 'U');
            n_back++;
        } else {
            n_gone++;
        }
        free(got);
        unlink(path);
    }
    assert_true(n_back > 0 && n_gone > 0);
    free(path);
}

/* An unsynced truncate and fallocate either happen or not; synced bytes survive both. */
static void
test_crash_unsynced_truncate_and_allocate_are_all_or_nothing(void **state)
{
    fixture_t *fx = *state;
    char *path = test_path_join(fx->dir, "seg");
    unsigned n_truncated = 0, n_restored = 0;

    for (int round = 0; round < CRASH_ROUNDS; round++) {
        io_crash_t *c = io_crash_new(journal_io_posix(), fx->seed + (uint64_t)round, 0);
        const journal_io_t *io = io_crash_io(c);
        int fd = open_rw(io, path);
        assert_int_equal(write_fill(io, fd, 'D', 2048, 0), 0);
        assert_int_equal(io->fsync(io->ctx, fd), 0);
        assert_int_equal(io->sync_dir(io->ctx, fx->dir_fd), 0);
        assert_int_equal(io->truncate(io->ctx, fd, 1024), 0);
        assert_int_equal(io->allocate(io->ctx, fd, 1024, 4096, 1), 0);
        assert_int_equal(io->close(io->ctx, fd), 0);
        assert_int_equal(io_crash_apply(c, NULL), 0);
        io_crash_free(c);

        off_t len;
        uint8_t *got = slurp(path, &len);
        assert_non_null(got);
        assert_true(len == 1024 || len == 2048 || len == 5120);
        for (off_t i = 0; i < 1024; i++)
            assert_int_equal(got[i], 'D');
        if (len >= 2048 && got[1500] == 'D')
            n_restored++;
        else
            n_truncated++;
        for (off_t i = 1024; i < len && i < 2048; i++)
            assert_true(got[i] == 'D' || got[i] == 0);
        for (off_t i = 2048; i < len; i++)
            assert_int_equal(got[i], 0);
        free(got);
        unlink(path);
    }
    assert_true(n_truncated > 0 && n_restored > 0);
    free(path);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_crash_keeps_synced_data_and_loses_unsynced_in_whole_sectors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_reads_see_unsynced_writes_before_the_crash,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_fails_every_call_after_the_power_fails, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_crash_may_lose_a_new_file_until_its_directory_is_synced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_crash_lost_rename_brings_back_both_files, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_crash_lost_unlink_brings_the_file_back_intact, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_crash_unsynced_truncate_and_allocate_are_all_or_nothing, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
