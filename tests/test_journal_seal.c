/*
 * test_journal_seal.c: a signed journal's key statements when one needs a roll (FORMAT.md
 * 11.4): a rotation, and the open that completes an interrupted one or starts the key chain
 * of a journal signed for the first time, each with the newest segment too full for the key
 * statement and the room every segment keeps. The journal must hold the key statement,
 * sign nothing with a key before the statement that puts it in force, and pass
 * stele_verify_trusted from the epoch 0 anchor.
 *
 * The segment is filled record by record until its room lies between the reserve and the
 * reserve plus a key statement, so the roll is certain, not a matter of timing. A rotation
 * rolls before it takes its statement, so the state an interrupted one leaves (KEYS names
 * the next key, the journal does not) has the room for it; the open must complete such a
 * state without that room too (a first signed open stopped after KEYS leaves one), and the
 * test makes it from a twin: a copy of the journal whose rotation stops at KEYS (fault I/O
 * table), its KEYS and <key>.next given to the original.
 *
 * Also a rotation whose journal write fails (fault I/O table) after KEYS named the next key:
 * the abandoned rotation keeps <key>.next, and the next open completes it; and a statement
 * written after the last record, which a reader that wants statements gets at the publish.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_fault.h"
#include "jtest_util.h"
#include "meta.h"
#include "stele.h"
#include "test_util.h"

enum { SEAL_SEGMENT_BYTES = 64 * 1024 };

/* A journal directory and its key files (epoch 0 from stele_keygen). */
typedef struct seal_fixture {
    char *root;
    char *dir;
    char *key;
    char *pub;
} seal_fixture_t;

static seal_fixture_t
fixture_new(void)
{
    seal_fixture_t f;
    f.root = test_tmpdir_new("seal");
    assert_non_null(f.root);
    f.dir = test_path_join(f.root, "journal");
    f.key = test_path_join(f.root, "signer.key");
    f.pub = test_path_join(f.root, "signer.pub");
    stele_error_t err = {0};
    assert_int_equal(stele_keygen(f.key, f.pub, "seal-test", &err), 0);
    return f;
}

static void
fixture_free(seal_fixture_t *f)
{
    assert_int_equal(test_tmpdir_remove(f->root), 0);
    free(f->dir);
    free(f->key);
    free(f->pub);
}

/* Options that take no checkpoint and no rotation on their own. */
static void
seal_options(journal_options_t *o, const char *key, const journal_io_t *io)
{
    jtest_options(o, SEAL_SEGMENT_BYTES);
    o->create_if_missing = 1;
    o->prepare_inline = 1; /* every I/O call in the writer, in order */
    o->io = io;
    o->signing_key_path = key;
    o->checkpoint_records = 1u << 30;
    o->checkpoint_interval_ms = UINT32_MAX;
    o->key_epoch_s = UINT32_MAX;
}

static journal_t *
seal_open(const char *dir, const char *key, const journal_io_t *io)
{
    journal_options_t o;
    seal_options(&o, key, io);
    journal_t *j = NULL;
    stele_error_t err = {0};
    if (journal_open(dir, &o, &j, NULL, &err) != 0)
        fail_msg("journal_open: %s", err.message);
    return j;
}

static void
seal_close(journal_t *j)
{
    stele_error_t err = {0};
    if (journal_close(j, &err) != 0)
        fail_msg("journal_close: %s", err.message);
}

/* The bytes of a start statement at tree size 0: no key statement is shorter. */
static uint64_t
key_statement_min_bytes(void)
{
    seal_fixture_t f = fixture_new();
    seal_close(seal_open(f.dir, f.key, NULL));
    char *keys = test_path_join(f.dir, "KEYS");
    struct stat st;
    assert_int_equal(stat(keys, &st), 0);
    free(keys);
    fixture_free(&f);
    return (uint64_t)st.st_size;
}

static uint64_t
active_room(const journal_t *j)
{
    journal_active_t a;
    journal_active_position(j, &a);
    return a.size - a.write_off;
}

/* Appends single records until the active segment's room is below `below`. Each record is
 * smaller than a key statement, so a signed journal stops with its reserve still there. */
static void
fill_until_room_below(journal_t *j, uint64_t below)
{
    stele_error_t err = {0};
    while (active_room(j) >= below)
        if (jtest_append(j, 1, NULL, &err) != 0)
            fail_msg("append: %s", err.message);
}

/* Room for the reserve but not for a key statement and the reserve. */
static void
fill_to_key_window(journal_t *j)
{
    fill_until_room_below(j, JOURNAL_META_FRAME_MAX + key_statement_min_bytes());
    assert_true(active_room(j) >= JOURNAL_META_FRAME_MAX);
}

static journal_t *
fill_new_journal_to_key_window(const seal_fixture_t *f)
{
    journal_t *j = seal_open(f->dir, f->key, NULL);
    fill_to_key_window(j);
    return j;
}

static void
assert_key_file_epoch(const char *key, uint64_t want)
{
    uint64_t epoch = 0;
    assert_int_equal(test_key_file_epoch(key, &epoch), 0);
    assert_int_equal(epoch, want);
}

/* V3's time order, over key statements too: no statement's time is before the one before
 * it in the journal. */
static void
check_statement_times(const char *dir)
{
    journal_reader_t *r = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    journal_reader_set_meta(r, 1);
    journal_record_t rec;
    int64_t last_ns = INT64_MIN;
    int rc;
    while ((rc = journal_reader_next(r, &rec, &err)) == 0) {
        meta_statement_t m;
        if (!rec.is_meta)
            continue;
        assert_int_equal(meta_read_unsigned(rec.payload, rec.payload_len, &m, &err), 0);
        if (m.time_ns < last_ns)
            fail_msg("the %s statement at tree size %" PRIu64 " goes back in time",
                     meta_reason_name(m.reason), m.size);
        last_ns = m.time_ns;
    }
    assert_int_equal(rc, STELE_EAGAIN);
    journal_reader_close(r);
}

/* Every signature checks from the anchor, the journal ends in `epoch`, every record is
 * sealed, and the key file is that epoch's, with no side file left. */
static void
check_trusted(const seal_fixture_t *f, uint64_t epoch, uint64_t n_segments_at_least)
{
    stele_verify_report_t report;
    stele_error_t err = {0};
    if (stele_verify_trusted(f->dir, NULL, f->pub, STELE_VERIFY_REQUIRE_SEALED, &report, &err))
        fail_msg("verify --trust: %s at seq %" PRIu64 " (%s)", report.what, report.bad_seq,
                 report.bad_segment);
    assert_int_equal(report.key_epoch, epoch);
    assert_key_file_epoch(f->key, epoch);
    assert_true(report.statements_checked >= 2);
    char side[1024];
    snprintf(side, sizeof side, "%s.next", f->key);
    assert_int_equal(access(side, F_OK), -1);
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(f->dir, NULL, &r, &err), 0);
    int n = journal_reader_segments(r, NULL, 0, &err);
    journal_reader_close(r);
    assert_true(n >= (int)n_segments_at_least); /* the roll the test is about happened */
    check_statement_times(f->dir);
}

/* A statement written after the last record (an idle journal's interval checkpoint) reaches a
 * reader that wants statements at the writer's next publish. Until then the reader looks past
 * the published end once, not at every call: a look reads the page the writer writes next. */
static void
test_seal_statement_after_the_last_record_reaches_a_reader_at_the_publish(void **state)
{
    (void)state;
    seal_fixture_t f = fixture_new();
    journal_t *j = seal_open(f.dir, f.key, NULL);
    stele_error_t err = {0};
    assert_int_equal(jtest_append(j, 2, NULL, &err), 0);
    assert_int_equal(journal_sync(j, &err), 0);
    journal_publish(j, 2, 2);
    io_fault_t *counter = io_fault_new(journal_io_posix(), 0);
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(f.dir, io_fault_io(counter), &r, &err), 0);
    journal_reader_set_meta(r, 1);
    journal_record_t rec;
    uint64_t last_seq = 0;
    int rc;
    while ((rc = journal_reader_next(r, &rec, &err)) == 0)
        last_seq = rec.is_meta ? last_seq : rec.seq;
    assert_int_equal(rc, STELE_EAGAIN);
    assert_int_equal(last_seq, 2);
    uint64_t reads = io_fault_calls(counter, IO_METHOD_PREAD);
    for (int i = 0; i < 3; i++)
        assert_int_equal(journal_reader_next(r, &rec, &err), STELE_EAGAIN);
    assert_int_equal(io_fault_calls(counter, IO_METHOD_PREAD), reads);

    assert_int_equal(journal_checkpoint(j, JOURNAL_CHECKPOINT_INTERVAL, 0, &err), 0);
    assert_int_equal(journal_sync(j, &err), 0);
    journal_publish(j, 2, 2);
    assert_int_equal(journal_reader_next(r, &rec, &err), 0);
    assert_true(rec.is_meta);
    assert_int_equal(journal_reader_next(r, &rec, &err), STELE_EAGAIN);
    journal_reader_close(r);
    io_fault_free(counter);
    assert_int_equal(journal_close(j, &err), 0);
    fixture_free(&f);
}

/* A rotation in a segment without room for its key statement: the segment rolls (its
 * checkpoint signed by epoch 0) before the statement is taken, which starts the next
 * segment, before anything the new key signs, its time after the roll's checkpoint. */
static void
test_seal_rotation_that_rolls_writes_its_key_statement(void **state)
{
    (void)state;
    seal_fixture_t f = fixture_new();
    journal_t *j = fill_new_journal_to_key_window(&f);
    journal_rotation_t r;
    stele_error_t err = {0};
    assert_int_equal(journal_rotate_prepare(j, &r, &err), 0);
    if (journal_rotate_commit(j, &r, &err) != 0)
        fail_msg("rotate: %s", err.message);
    assert_int_equal(journal_rotate_finish(j, &r, &err), 0);
    assert_int_equal(jtest_append(j, 3, NULL, &err), 0);
    seal_close(j);
    check_trusted(&f, 1, 2);
    fixture_free(&f);
}

/* Copies the regular file src to dst (mode 0600). */
static void
copy_file(const char *src, const char *dst)
{
    size_t len = 0;
    uint8_t *bytes = jtest_read_file(src, &len);
    int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
    free(bytes);
}

/* Copies the files (not the directories) of directory src into a new directory dst. */
static void
copy_journal(const char *src, const char *dst)
{
    assert_int_equal(mkdir(dst, 0700), 0);
    DIR *d = opendir(src);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *from = test_path_join(src, e->d_name);
        char *to = test_path_join(dst, e->d_name);
        struct stat st;
        if (stat(from, &st) == 0 && S_ISREG(st.st_mode))
            copy_file(from, to);
        free(from);
        free(to);
    }
    closedir(d);
}

/* In the twin (dir, key: copies), a rotation that stops once KEYS holds its statement: the
 * fsync of KEYS fails, and the writer is gone before it could abandon anything. */
static void
rotate_twin_until_keys(const char *dir, const char *key)
{
    io_fault_t *fault = io_fault_new(journal_io_posix(), 0);
    assert_non_null(fault);
    journal_t *j = seal_open(dir, key, io_fault_io(fault));
    journal_rotation_t r;
    stele_error_t err = {0};
    assert_int_equal(journal_rotate_prepare(j, &r, &err), 0);
    io_fault_set_phase(fault, "rotate");
    io_fault_spec_t spec = {
        .method = IO_METHOD_FSYNC, .nth = 1, .error = -EIO, .kind = "rotate: fsync KEYS"};
    io_fault_arm(fault, &spec);
    assert_int_not_equal(journal_rotate_commit(j, &r, &err), 0);
    assert_int_equal(io_fault_fired(fault), 1);
    note_signer_wipe(&r.next);
    journal_close(j, NULL);
    io_fault_free(fault);
}

/* A journal whose newest segment lacks room for a key statement and the reserve, KEYS naming
 * epoch 1 at its end (synced), the journal not, <key>.next holding the key of epoch 1 and
 * the key file epoch 0. */
static void
interrupt_a_rotation_in_the_key_window(const seal_fixture_t *f)
{
    seal_close(fill_new_journal_to_key_window(f));
    char *twin = test_path_join(f->root, "twin");
    char *twin_key = test_path_join(f->root, "twin.key");
    copy_journal(f->dir, twin);
    copy_file(f->key, twin_key);
    rotate_twin_until_keys(twin, twin_key);
    char *keys = test_path_join(f->dir, "KEYS");
    char *twin_keys = test_path_join(twin, "KEYS");
    char next[1024], twin_next[1024];
    snprintf(next, sizeof next, "%s.next", f->key);
    snprintf(twin_next, sizeof twin_next, "%s.next", twin_key);
    copy_file(twin_keys, keys);
    copy_file(twin_next, next);
    free(keys);
    free(twin_keys);
    free(twin);
    free(twin_key);
}

/* The open completes the rotation (R3, R2): the key statement KEYS holds needs a roll,
 * which happens under epoch 0, still in force, with no checkpoint by the key of epoch 1. */
static void
test_seal_open_completing_a_rotation_rolls_under_the_epoch_in_force(void **state)
{
    (void)state;
    seal_fixture_t f = fixture_new();
    interrupt_a_rotation_in_the_key_window(&f);
    assert_key_file_epoch(f.key, 0);
    seal_close(seal_open(f.dir, f.key, NULL));
    check_trusted(&f, 1, 2);
    fixture_free(&f);
}

/* As above, after an open that replaced the key file (R3) died before the journal caught
 * up: the key of epoch 0, still in force at the journal's end, is gone. */
static void
test_seal_open_catching_up_after_the_key_file_moved_rolls_unsigned(void **state)
{
    (void)state;
    seal_fixture_t f = fixture_new();
    interrupt_a_rotation_in_the_key_window(&f);
    char next[1024];
    snprintf(next, sizeof next, "%s.next", f.key);
    assert_int_equal(rename(next, f.key), 0);
    assert_key_file_epoch(f.key, 1);
    seal_close(seal_open(f.dir, f.key, NULL));
    check_trusted(&f, 1, 2);
    fixture_free(&f);
}

/* A journal written without a key, then opened with one (R1) when its newest segment has no
 * room for the start statement and the reserve: the roll before it signs nothing and its
 * header names no key. */
static void
test_seal_first_signed_open_of_a_full_segment_rolls_unkeyed(void **state)
{
    (void)state;
    seal_fixture_t f = fixture_new();
    journal_t *j = seal_open(f.dir, NULL, NULL);
    fill_until_room_below(j, JOURNAL_META_FRAME_MAX + key_statement_min_bytes());
    seal_close(j);
    j = seal_open(f.dir, f.key, NULL);
    stele_error_t err = {0};
    assert_int_equal(jtest_append(j, 3, NULL, &err), 0);
    seal_close(j);
    check_trusted(&f, 0, 2);
    fixture_free(&f);
}

/* The journal's write of the key statement fails once KEYS holds it: the writer halts, and
 * the key KEYS names for epoch 1 must survive the abandoned rotation for the next open. */
static void
test_seal_rotation_failing_after_keys_keeps_the_next_key_for_the_open(void **state)
{
    (void)state;
    seal_fixture_t f = fixture_new();
    io_fault_t *fault = io_fault_new(journal_io_posix(), 0);
    assert_non_null(fault);
    journal_t *j = seal_open(f.dir, f.key, io_fault_io(fault));
    stele_error_t err = {0};
    assert_int_equal(jtest_append(j, 5, NULL, &err), 0);
    journal_rotation_t r;
    assert_int_equal(journal_rotate_prepare(j, &r, &err), 0);
    io_fault_spec_t spec = {.method = IO_METHOD_PWRITEV, .nth = 2, .error = -EIO};
    io_fault_arm(fault, &spec); /* KEYS' write, then the journal's */
    assert_int_not_equal(journal_rotate_commit(j, &r, &err), 0);
    assert_int_equal(io_fault_fired(fault), 1);
    journal_rotate_abandon(j, &r);
    journal_close(j, NULL);
    io_fault_free(fault);
    seal_close(seal_open(f.dir, f.key, NULL));
    check_trusted(&f, 1, 1);
    fixture_free(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seal_rotation_that_rolls_writes_its_key_statement),
        cmocka_unit_test(test_seal_statement_after_the_last_record_reaches_a_reader_at_the_publish),
        cmocka_unit_test(test_seal_open_completing_a_rotation_rolls_under_the_epoch_in_force),
        cmocka_unit_test(test_seal_open_catching_up_after_the_key_file_moved_rolls_unsigned),
        cmocka_unit_test(test_seal_first_signed_open_of_a_full_segment_rolls_unkeyed),
        cmocka_unit_test(test_seal_rotation_failing_after_keys_keeps_the_next_key_for_the_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
