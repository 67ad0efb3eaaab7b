/*
 * test_journal_space.c: the journal when its file system runs out of space (journal_roll.c,
 * docs/journal.md "When the disk fills"). The next segment is the first thing to yield: a
 * preparation that fails gives back what it took, is tried again when a roll needs it or
 * retention frees space, and halts the journal only when the roll that needs it cannot
 * make it. The preparer does not start before the first batch after an open.
 *
 * ENOSPC comes from the fault I/O table (tests/support/io_fault.h) on the allocate calls,
 * so the tests run anywhere and without root; tests/cli/test_cli_space.c does the same on
 * a real full tmpfs and ext4 image.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "format.h"
#include "io_fault.h"
#include "jtest_util.h"
#include "journal.h"
#include "segment.h"

enum { SPACE_SEGMENT_BYTES = 1 << 20 };
/* How long a test waits for the preparer thread to act: a bound for a broken build, not a
 * timing assertion (it normally acts within milliseconds). */
enum { SPACE_WAIT_MS = 20000 };

static int
prepared_exists(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, SEG_PREPARED_NAME);
    return access(path, F_OK) == 0;
}

/* Waits until journal_stats reports want_rc for the preparer and prepared.tmp exists or not
 * as want_file says; 0 when that never happens. */
static int
wait_prepare_rc(journal_t *j, int want_rc, const char *dir, int want_file)
{
    for (int waited = 0; waited < SPACE_WAIT_MS; waited += 5) {
        journal_stats_t st;
        journal_stats(j, &st);
        if (st.prepare_rc == want_rc && prepared_exists(dir) == want_file)
            return 1;
        usleep(5 * 1000);
    }
    return 0;
}

/* Appends batches of 50 records until the active segment is past its quarter mark (the
 * preparer is then asked for the next one). */
static void
append_past_quarter(journal_t *j)
{
    journal_batch_info_t info = {0};
    stele_error_t err = {0};
    do
        assert_int_equal(jtest_append(j, 50, &info, &err), 0);
    while (info.offset < SPACE_SEGMENT_BYTES / 4);
}

/* Appends until a batch rolls or fails; returns the append's code. */
static int
append_until_roll(journal_t *j, stele_error_t *err)
{
    journal_batch_info_t info = {0};
    for (;;) {
        int rc = jtest_append(j, 50, &info, err);
        if (rc || info.rolled)
            return rc;
    }
}

static journal_t *
open_faulty(const char *dir, io_fault_t *f)
{
    journal_options_t o;
    jtest_options(&o, SPACE_SEGMENT_BYTES);
    o.io = io_fault_io(f);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    return j;
}

/* The preparer runs out of space: the half-made file is removed, stats say why, appends into
 * the active segment go on, and the roll that needs the segment tries again and succeeds
 * once the space is back. */
static void
test_failed_preparation_gives_its_space_back_and_the_roll_retries(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("space-retry");
    io_fault_t *f = io_fault_new(journal_io_posix(), 0);
    journal_t *j = open_faulty(dir, f);
    io_fault_reset_counts(f);
    io_fault_spec_t once = {.method = IO_METHOD_ALLOCATE, .nth = 1, .error = -ENOSPC};
    io_fault_arm(f, &once);
    append_past_quarter(j);
    assert_true(wait_prepare_rc(j, -ENOSPC, dir, 0));
    assert_int_equal(io_fault_fired_by(f, IO_METHOD_ALLOCATE), 1);

    stele_error_t err = {0};
    assert_int_equal(append_until_roll(j, &err), 0);
    journal_stats_t st;
    journal_stats(j, &st);
    assert_int_equal(st.prepare_rc, 0);
    assert_int_equal(io_fault_calls(f, IO_METHOD_ALLOCATE), 2);
    uint64_t last = journal_last_seq(j);
    memset(&err, 0, sizeof err);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(err.message[0], '\0');
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last);
    io_fault_free(f);
    jtest_rmtree(dir);
}

/* With no space at all, every record that fits the active segment is accepted; only the
 * roll that cannot make the next segment halts the journal, naming the cause, and every
 * record before it stays readable. */
static void
test_no_space_halts_only_at_the_roll_that_needs_it(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("space-halt");
    io_fault_t *f = io_fault_new(journal_io_posix(), 0);
    journal_t *j = open_faulty(dir, f);
    io_fault_spec_t always = {
        .method = IO_METHOD_ALLOCATE, .nth = 1, .error = -ENOSPC, .is_persistent = 1};
    io_fault_arm(f, &always);
    append_past_quarter(j);
    assert_true(wait_prepare_rc(j, -ENOSPC, dir, 0));

    stele_error_t err = {0};
    int rc = append_until_roll(j, &err);
    assert_int_equal(rc, -ENOSPC);
    assert_non_null(strstr(err.message, "could not prepare segment"));
    assert_non_null(strstr(err.message, "No space left on device"));
    assert_false(prepared_exists(dir));
    uint64_t last = journal_last_seq(j);
    assert_int_equal(jtest_append(j, 1, NULL, &err), STELE_EHALTED);
    assert_int_equal(journal_close(j, &err), -ENOSPC);
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last);
    io_fault_free(f);
    jtest_rmtree(dir);
}

/* A journal closed while its next segment could not be prepared lost nothing: close
 * succeeds and says so as a warning (code 0, message set). */
static void
test_close_warns_about_an_unprepared_segment(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("space-close");
    io_fault_t *f = io_fault_new(journal_io_posix(), 0);
    journal_t *j = open_faulty(dir, f);
    io_fault_spec_t always = {
        .method = IO_METHOD_ALLOCATE, .nth = 1, .error = -ENOSPC, .is_persistent = 1};
    io_fault_arm(f, &always);
    append_past_quarter(j);
    assert_true(wait_prepare_rc(j, -ENOSPC, dir, 0));
    uint64_t last = journal_last_seq(j);
    stele_error_t err = {0};
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(err.code, 0);
    assert_non_null(strstr(err.message, "could not prepare the next segment"));
    assert_non_null(strstr(err.message, "No space left on device"));
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last);
    io_fault_free(f);
    jtest_rmtree(dir);
}

/* Retention frees space: a preparation that failed is tried again at once, without waiting
 * for the roll. */
static void
test_retention_retries_a_failed_preparation(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("space-retention");
    io_fault_t *f = io_fault_new(journal_io_posix(), 0);
    journal_t *j = open_faulty(dir, f);
    stele_error_t err = {0};
    assert_int_equal(append_until_roll(j, &err), 0); /* two segments: one can go */
    io_fault_spec_t once = {.method = IO_METHOD_ALLOCATE, .nth = 1, .error = -ENOSPC};
    io_fault_arm(f, &once);
    append_past_quarter(j);
    assert_true(wait_prepare_rc(j, -ENOSPC, dir, 0));
    assert_int_equal(journal_delete_before(j, journal_last_seq(j), &err), 1);
    assert_true(wait_prepare_rc(j, 0, dir, 1));
    assert_int_equal(journal_close(j, &err), 0);
    io_fault_free(f);
    jtest_rmtree(dir);
}

/* An open past the quarter mark does not start the preparer: the caller's first work after
 * the open (the engine's index catch-up) has the free space first. The first batch asks for
 * the segment. */
static void
test_preparer_waits_for_the_first_batch_after_open(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("space-open");
    journal_options_t o;
    jtest_options(&o, SPACE_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    append_past_quarter(j);
    assert_true(wait_prepare_rc(j, 0, dir, 1));
    assert_int_equal(journal_close(j, &err), 0);

    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, SEG_PREPARED_NAME);
    assert_int_equal(unlink(path), 0); /* never trusted across opens anyway */
    io_fault_t *f = io_fault_new(journal_io_posix(), 0);
    j = open_faulty(dir, f);
    /* No allocation may happen before the first append: one would fail here. */
    io_fault_spec_t never = {
        .method = IO_METHOD_ALLOCATE, .nth = 1, .error = -ENOSPC, .is_persistent = 1};
    io_fault_arm(f, &never);
    usleep(50 * 1000); /* a chance for a preparer that wrongly starts at open to show itself */
    assert_int_equal(io_fault_calls(f, IO_METHOD_ALLOCATE), 0);
    io_fault_disarm(f);
    assert_int_equal(jtest_append(j, 1, NULL, &err), 0);
    assert_true(wait_prepare_rc(j, 0, dir, 1));
    assert_int_equal(journal_close(j, &err), 0);
    io_fault_free(f);
    jtest_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failed_preparation_gives_its_space_back_and_the_roll_retries),
        cmocka_unit_test(test_no_space_halts_only_at_the_roll_that_needs_it),
        cmocka_unit_test(test_close_warns_about_an_unprepared_segment),
        cmocka_unit_test(test_retention_retries_a_failed_preparation),
        cmocka_unit_test(test_preparer_waits_for_the_first_batch_after_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
