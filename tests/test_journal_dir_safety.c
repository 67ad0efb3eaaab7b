/*
 * test_journal_dir_safety.c: nothing in a journal directory is reached through a symbolic
 * link, and a directory that users other than its owner and root could change is refused.
 *
 * Each symlink case plants a link under a name stele creates or writes (LOCK, a segment,
 * prepared.tmp, index/, index/data.mdb, index/lock.mdb) pointing at a victim file outside
 * the journal, runs the writer or a reader, and checks that the victim's bytes and mode are
 * exactly what they were. The ownership cases make another user with useradd when the test
 * runs as root, and are skipped with a message otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jtest_util.h"
#include "journal.h"
#include "stele.h"
#include "test_child.h"

/* The victim: bigger than a LOCK page, so a LOCK written over it would change its size. */
enum { VICTIM_BYTES = 15000 };
#define VICTIM_MODE 0600
/* Users the ownership cases make (useradd) when they run as root. */
#define OTHER_USER "stele-dirsafe-a"
#define READER_USER "stele-dirsafe-b"

/* Events of about 3 KiB, so a few dozen fill a 64 KiB segment and roll. */
enum { EVENT_PAD_BYTES = 3000 };

typedef struct fixture {
    char *base; /* a fresh directory holding the journal and the victim */
    char journal[4096];
    char victim[4096];
    uint8_t victim_bytes[VICTIM_BYTES];
} fixture_t;

static int
setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = jtest_tmpdir("dirsafe");
    snprintf(f->journal, sizeof f->journal, "%s/j", f->base);
    snprintf(f->victim, sizeof f->victim, "%s/victim", f->base);
    for (size_t i = 0; i < VICTIM_BYTES; i++)
        f->victim_bytes[i] = (uint8_t)('a' + i % 26);
    int fd = open(f->victim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, VICTIM_MODE);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, f->victim_bytes, VICTIM_BYTES), VICTIM_BYTES);
    assert_int_equal(fchmod(fd, VICTIM_MODE), 0);
    close(fd);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture_t *f = *state;
    jtest_rmtree(f->base);
    free(f);
    return 0;
}

/* The victim holds exactly its bytes and mode. */
static void
assert_victim_untouched(const fixture_t *f)
{
    struct stat st;
    assert_int_equal(lstat(f->victim, &st), 0);
    if ((st.st_mode & 07777) != VICTIM_MODE)
        fail_msg("victim mode %o, not %o", (unsigned)(st.st_mode & 07777), VICTIM_MODE);
    size_t len = 0;
    uint8_t *now = jtest_read_file(f->victim, &len);
    assert_non_null(now);
    if (len != VICTIM_BYTES || memcmp(now, f->victim_bytes, VICTIM_BYTES) != 0)
        fail_msg("victim changed: %zu bytes, was %d", len, VICTIM_BYTES);
    free(now);
}

/* Replaces journal/name with a symbolic link to the victim. */
static void
plant_link(const fixture_t *f, const char *name)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", f->journal, name);
    unlink(path);
    assert_int_equal(symlink(f->victim, path), 0);
}

static void
options_small(stele_options_t *o)
{
    stele_options_init(o);
    o->segment_bytes = 64 * 1024;
    o->max_record_bytes = 4096;
}

/* Opens the journal, appends n events durably and closes it. Returns stele_open's code. */
static int
write_events(const char *dir, const stele_options_t *o, int n, stele_error_t *err)
{
    char event[EVENT_PAD_BYTES + 64];
    int len =
        snprintf(event, sizeof event, "{\"actor\":\"alice\",\"pad\":\"%0*d\"}", EVENT_PAD_BYTES, 7);
    stele_t *db = NULL;
    int rc = stele_open(dir, o, &db, err);
    if (rc)
        return rc;
    for (int i = 0; i < n && !rc; i++)
        rc = stele_append_json(db, event, (size_t)len, STELE_WAIT_DURABLE, NULL, err);
    int close_rc = stele_close(db, err);
    return rc ? rc : close_rc;
}

/* Reads every record with a public reader; returns how many, or a negative code. */
static int64_t
read_events(const char *dir, const stele_options_t *o, stele_error_t *err)
{
    stele_reader_t *r = NULL;
    int rc = stele_reader_open_opts(dir, o, &r, err);
    if (rc)
        return rc;
    int64_t n = 0;
    stele_record_t rec;
    while ((rc = stele_reader_next(r, &rec, 0, err)) == 0)
        n++;
    stele_reader_close(r);
    return rc == STELE_EAGAIN ? n : rc;
}

static void
make_journal(const fixture_t *f, int n_events)
{
    stele_options_t o;
    options_small(&o);
    stele_error_t err = {0};
    if (write_events(f->journal, &o, n_events, &err) != 0)
        fail_msg("could not make the journal: %s", err.message);
}

/* -- symbolic links ------------------------------------------------------------------- */

static void
test_writer_refuses_a_symlinked_lock_in_a_new_directory(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(mkdir(f->journal, 0700), 0);
    plant_link(f, "LOCK");
    stele_options_t o;
    options_small(&o);
    stele_error_t err = {0};
    stele_t *db = NULL;
    int rc = stele_open(f->journal, &o, &db, &err);
    assert_null(db);
    assert_victim_untouched(f);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(err.message, "symbolic link"));
}

static void
test_writer_and_readers_refuse_a_symlinked_lock_in_a_journal(void **state)
{
    fixture_t *f = *state;
    make_journal(f, 3);
    plant_link(f, "LOCK");
    stele_options_t o;
    options_small(&o);
    stele_error_t err = {0};
    assert_int_not_equal(write_events(f->journal, &o, 1, &err), 0);
    assert_non_null(strstr(err.message, "symbolic link"));
    assert_true(read_events(f->journal, &o, &err) < 0);
    assert_non_null(strstr(err.message, "symbolic link"));
    stele_status_t st;
    assert_int_not_equal(stele_status_read(f->journal, &st, &err), 0);
    assert_victim_untouched(f);
}

/* The newest segment moved out of the journal and linked back: the writer would append to
 * it through the link, wherever it points. */
static void
test_writer_and_readers_refuse_a_symlinked_segment(void **state)
{
    fixture_t *f = *state;
    make_journal(f, 3);
    char seg[8192], moved[8192];
    snprintf(seg, sizeof seg, "%s/00000000000000000001.seg", f->journal);
    snprintf(moved, sizeof moved, "%s/moved.seg", f->base);
    assert_int_equal(rename(seg, moved), 0);
    assert_int_equal(symlink(moved, seg), 0);
    size_t before_len = 0, after_len = 0;
    uint8_t *before = jtest_read_file(moved, &before_len);
    stele_options_t o;
    options_small(&o);
    stele_error_t err = {0};
    assert_int_not_equal(write_events(f->journal, &o, 1, &err), 0);
    uint8_t *after = jtest_read_file(moved, &after_len);
    assert_true(before_len == after_len && memcmp(before, after, before_len) == 0);
    free(before);
    free(after);
    assert_non_null(strstr(err.message, "symbolic link"));
    assert_true(read_events(f->journal, &o, &err) < 0);
    assert_non_null(strstr(err.message, "symbolic link"));
    stele_verify_report_t report;
    assert_int_not_equal(stele_verify(f->journal, 0, 0, &report, &err), 0);
}

/* The name the next roll gives its segment, planted ahead: the roll renames its own file
 * over the link and never writes through it. */
static void
test_a_roll_never_writes_through_a_link_at_the_next_segment_name(void **state)
{
    fixture_t *f = *state;
    journal_options_t o;
    jtest_options(&o, 16 * 1024);
    o.prepare_inline = 1;
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(f->journal, &o, &j, NULL, &err), 0);
    assert_int_equal(jtest_append(j, 1, NULL, &err), 0);
    char name[64];
    for (uint64_t seq = 2; seq < 400; seq++) {
        snprintf(name, sizeof name, "%020" PRIu64 ".seg", seq);
        plant_link(f, name);
    }
    journal_batch_info_t info = {0};
    int rolled = 0;
    for (int i = 0; i < 200 && !rolled; i++) {
        assert_int_equal(jtest_append(j, 1, &info, &err), 0);
        rolled = info.rolled;
    }
    assert_true(rolled);
    assert_int_equal(journal_sync(j, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    char path[8192];
    struct stat st;
    snprintf(path, sizeof path, "%s/%020" PRIu64 ".seg", f->journal, info.segment_seq);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_victim_untouched(f);
}

/* prepared.tmp planted as a link, before an open and while the journal runs. */
static void
test_the_preparer_never_writes_through_a_linked_prepared_tmp(void **state)
{
    fixture_t *f = *state;
    journal_options_t o;
    jtest_options(&o, 16 * 1024);
    o.prepare_inline = 1;
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(f->journal, &o, &j, NULL, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    plant_link(f, "prepared.tmp");
    if (journal_open(f->journal, &o, &j, NULL, &err) != 0)
        fail_msg("reopen: %s", err.message);
    journal_batch_info_t info = {0};
    for (int round = 0; round < 3; round++) {
        plant_link(f, "prepared.tmp");
        int rolled = 0;
        for (int i = 0; i < 200 && !rolled; i++) {
            assert_int_equal(jtest_append(j, 1, &info, &err), 0);
            rolled = info.rolled;
        }
        assert_true(rolled);
    }
    assert_int_equal(journal_close(j, &err), 0);
    assert_victim_untouched(f);
}

static void
test_writer_refuses_a_symlinked_index_lock_file(void **state)
{
    fixture_t *f = *state;
    make_journal(f, 3);
    plant_link(f, "index/lock.mdb");
    stele_options_t o;
    options_small(&o);
    stele_error_t err = {0};
    assert_int_not_equal(write_events(f->journal, &o, 1, &err), 0);
    assert_non_null(strstr(err.message, "symbolic link"));
    assert_victim_untouched(f);
    /* A reader skips an index it must not open, and reads the segments instead. */
    assert_int_equal(read_events(f->journal, &o, &err), 3);
    stele_status_t st;
    assert_int_equal(stele_status_read(f->journal, &st, &err), 0);
    stele_verify_report_t report;
    assert_int_equal(stele_verify(f->journal, 0, 0, &report, &err), 0);
    assert_victim_untouched(f);
}

static void
test_writer_refuses_a_symlinked_index_data_file(void **state)
{
    fixture_t *f = *state;
    make_journal(f, 3);
    plant_link(f, "index/data.mdb");
    stele_options_t o;
    options_small(&o);
    stele_error_t err = {0};
    assert_int_not_equal(write_events(f->journal, &o, 1, &err), 0);
    assert_non_null(strstr(err.message, "symbolic link"));
    assert_int_equal(read_events(f->journal, &o, &err), 3);
    assert_victim_untouched(f);
}

/* index/ itself a link to a directory holding the victim under LMDB's file names. */
static void
test_writer_refuses_a_symlinked_index_directory(void **state)
{
    fixture_t *f = *state;
    make_journal(f, 3);
    char elsewhere[4200], path[8192];
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", f->base);
    assert_int_equal(mkdir(elsewhere, 0700), 0);
    snprintf(path, sizeof path, "%s/lock.mdb", elsewhere);
    assert_int_equal(symlink(f->victim, path), 0);
    snprintf(path, sizeof path, "%s/index", f->journal);
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(symlink(elsewhere, path), 0);
    stele_options_t o;
    options_small(&o);
    stele_error_t err = {0};
    assert_int_not_equal(write_events(f->journal, &o, 1, &err), 0);
    assert_non_null(strstr(err.message, "symbolic link"));
    assert_int_equal(read_events(f->journal, &o, &err), 3);
    assert_victim_untouched(f);
}

/* The journal directory itself given as a link: refused, with its target in the hint. */
static void
test_writer_and_readers_refuse_a_symlinked_journal_directory(void **state)
{
    fixture_t *f = *state;
    make_journal(f, 2);
    char link[8192];
    snprintf(link, sizeof link, "%s/link", f->base);
    assert_int_equal(symlink(f->journal, link), 0);
    stele_options_t o;
    options_small(&o);
    stele_error_t err = {0};
    assert_int_equal(write_events(link, &o, 1, &err), STELE_EUNSAFE);
    assert_non_null(strstr(err.message, "symbolic link"));
    assert_non_null(strstr(err.hint, f->journal));
    assert_int_equal(read_events(link, &o, &err), STELE_EUNSAFE);
    assert_int_equal(read_events(f->journal, &o, &err), 2);
}

/* -- who may change the directory ---------------------------------------------------- */

/* The uid and primary gid of user `name`, made with useradd (extra_args: more of its
 * options) when missing. 0, or -1 when the test cannot have the user: not root, no useradd. */
static int
user_ensure(const char *name, const char *extra_args, uid_t *uid, gid_t *gid)
{
    struct passwd *pw = getpwnam(name);
    if (!pw && geteuid() == 0) {
        char cmd[512];
        snprintf(cmd, sizeof cmd,
                 "useradd --no-create-home --shell /usr/sbin/nologin %s %s >/dev/null 2>&1",
                 extra_args, name);
        if (system(cmd) != 0)
            return -1;
        pw = getpwnam(name);
    }
    if (!pw)
        return -1;
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    return 0;
}

/* Skips the test (with the reason on stderr) unless it runs as root with OTHER_USER. */
#define NEED_OTHER_USER(uid, gid)                                                                  \
    do {                                                                                           \
        if (geteuid() != 0 || user_ensure(OTHER_USER, "", &(uid), &(gid)) != 0) {                  \
            fprintf(stderr, "skipped: needs root and useradd to make user " OTHER_USER "\n");      \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* stele_open's code for the journal, closing it when it opened. */
static int
open_code(const char *dir, int allow_unsafe, stele_error_t *err)
{
    stele_options_t o;
    options_small(&o);
    o.allow_unsafe_dir = allow_unsafe;
    stele_t *db = NULL;
    int rc = stele_open(dir, &o, &db, err);
    if (!rc)
        rc = stele_close(db, err);
    return rc;
}

static int
dir_is_empty(const char *dir)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "[ -z \"$(ls -A '%s')\" ]", dir);
    return system(cmd) == 0;
}

/* The attack: another user makes the directory (and would plant links in it); root's
 * writer refuses it without writing anything, and opens it when told to. */
static void
test_writer_refuses_a_directory_owned_by_another_user(void **state)
{
    fixture_t *f = *state;
    uid_t uid = 0;
    gid_t gid = 0;
    NEED_OTHER_USER(uid, gid);
    assert_int_equal(mkdir(f->journal, 0755), 0);
    assert_int_equal(chown(f->journal, uid, gid), 0);
    stele_error_t err = {0};
    assert_int_equal(open_code(f->journal, 0, &err), STELE_EUNSAFE);
    assert_non_null(strstr(err.message, f->journal));
    assert_non_null(strstr(err.message, OTHER_USER));
    assert_non_null(strstr(err.hint, "chown"));
    assert_non_null(strstr(err.hint, "allow_unsafe_dir"));
    assert_true(dir_is_empty(f->journal));
    assert_int_equal(open_code(f->journal, 1, &err), 0);
}

/* The same attack one level up: the other user owns the directory that holds the journal,
 * and could swap the journal for a directory of theirs at any time. */
static void
test_writer_refuses_a_journal_in_another_users_directory(void **state)
{
    fixture_t *f = *state;
    uid_t uid = 0;
    gid_t gid = 0;
    NEED_OTHER_USER(uid, gid);
    char pub[4200], dir[4300];
    snprintf(pub, sizeof pub, "%s/pub", f->base);
    snprintf(dir, sizeof dir, "%s/audit", pub);
    assert_int_equal(mkdir(pub, 0755), 0);
    assert_int_equal(chown(pub, uid, gid), 0);
    stele_error_t err = {0};
    assert_int_equal(open_code(dir, 0, &err), STELE_EUNSAFE);
    assert_non_null(strstr(err.message, pub));
    assert_non_null(strstr(err.message, OTHER_USER));
    assert_true(dir_is_empty(pub)); /* nothing made where it would be refused */
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(open_code(dir, 0, &err), STELE_EUNSAFE);
    assert_true(dir_is_empty(dir));
    assert_int_equal(open_code(dir, 1, &err), 0);
    stele_options_t o;
    options_small(&o);
    assert_int_equal(read_events(dir, &o, &err), STELE_EUNSAFE);
    o.allow_unsafe_dir = 1;
    assert_int_equal(read_events(dir, &o, &err), 0);
}

/* A directory everyone (or its group) can write is refused by the writer and the readers,
 * with the mode found and the fix, and accepted with allow_unsafe_dir. */
static void
test_a_directory_others_can_write_is_refused_unless_allowed(void **state)
{
    fixture_t *f = *state;
    make_journal(f, 2);
    static const mode_t modes[] = {0777, 0770, 0730};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        assert_int_equal(chmod(f->journal, modes[i]), 0);
        stele_error_t err = {0};
        char mode_text[16];
        snprintf(mode_text, sizeof mode_text, "%04o", (unsigned)modes[i]);
        assert_int_equal(open_code(f->journal, 0, &err), STELE_EUNSAFE);
        assert_non_null(strstr(err.message, mode_text));
        assert_non_null(strstr(err.hint, "chmod go-w"));
        stele_options_t o;
        options_small(&o);
        assert_int_equal(read_events(f->journal, &o, &err), STELE_EUNSAFE);
        stele_status_t st;
        assert_int_equal(stele_status_read_opts(f->journal, &o, &st, &err), STELE_EUNSAFE);
        stele_verify_report_t report;
        assert_int_equal(stele_verify_opts(f->journal, &o, 0, 0, &report, &err), STELE_EUNSAFE);
        o.allow_unsafe_dir = 1;
        assert_int_equal(read_events(f->journal, &o, &err), 2);
        assert_int_equal(stele_status_read_opts(f->journal, &o, &st, &err), 0);
        assert_int_equal(stele_verify_opts(f->journal, &o, 0, 0, &report, &err), 0);
        assert_int_equal(open_code(f->journal, 1, &err), 0);
    }
}

/* Ancestors: one everyone may write is refused without the sticky bit and accepted with it
 * (the system's temporary directory, where every test journal lives, is such a one). */
static void
test_an_ancestor_others_can_write_needs_the_sticky_bit(void **state)
{
    fixture_t *f = *state;
    char pub[4200], dir[4300];
    snprintf(pub, sizeof pub, "%s/pub", f->base);
    snprintf(dir, sizeof dir, "%s/audit", pub);
    assert_int_equal(mkdir(pub, 0700), 0);
    assert_int_equal(chmod(pub, 0777), 0);
    stele_error_t err = {0};
    assert_int_equal(open_code(dir, 0, &err), STELE_EUNSAFE);
    assert_non_null(strstr(err.message, pub));
    assert_non_null(strstr(err.message, "0777"));
    assert_int_equal(chmod(pub, 01777), 0);
    assert_int_equal(open_code(dir, 0, &err), 0);
}

static int
child_writes_group_readable_journal(void *arg)
{
    stele_options_t o;
    options_small(&o);
    o.dir_mode = 0750;
    o.file_mode = 0640;
    stele_error_t err = {0};
    int rc = write_events(arg, &o, 3, &err);
    if (rc)
        fprintf(stderr, "writer: %s\n", err.message);
    return rc ? 1 : 0;
}

static int
child_reads_all(void *arg)
{
    stele_options_t o;
    options_small(&o);
    stele_error_t err = {0};
    int64_t n = read_events(arg, &o, &err);
    stele_status_t st;
    stele_verify_report_t report;
    if (n != 3 || stele_status_read(arg, &st, &err) != 0 ||
        stele_verify(arg, 0, 0, &report, &err) != 0 || st.last_seq != 3) {
        fprintf(stderr, "reader: %" PRId64 " records: %s\n", n, err.message);
        return 1;
    }
    return 0;
}

static int
child_is_refused(void *arg)
{
    stele_options_t o;
    options_small(&o);
    stele_error_t err = {0};
    return read_events(arg, &o, &err) == STELE_EUNSAFE ? 0 : 1;
}

/* The documented set-up: a service user writes with --dir-mode 0750 --file-mode 0640, and a
 * monitoring user in its group tails, checks status and verifies. Group-writable it is
 * refused to that user too. */
static void
test_a_reader_in_the_group_reads_a_journal_made_with_the_documented_modes(void **state)
{
    fixture_t *f = *state;
    uid_t owner_uid, reader_uid;
    gid_t owner_gid, reader_gid;
    NEED_OTHER_USER(owner_uid, owner_gid);
    if (user_ensure(READER_USER, "--groups " OTHER_USER, &reader_uid, &reader_gid) != 0)
        skip();
    assert_int_equal(chmod(f->base, 0755), 0);
    assert_int_equal(mkdir(f->journal, 0700), 0);
    assert_int_equal(chown(f->journal, owner_uid, owner_gid), 0);
    assert_int_equal(
        test_run_as(owner_uid, owner_gid, NULL, 0, child_writes_group_readable_journal, f->journal),
        0);
    gid_t groups[] = {owner_gid};
    assert_int_equal(test_run_as(reader_uid, reader_gid, groups, 1, child_reads_all, f->journal),
                     0);
    assert_int_equal(chmod(f->journal, 0770), 0);
    assert_int_equal(test_run_as(reader_uid, reader_gid, groups, 1, child_is_refused, f->journal),
                     0);
}

/* -- modes ---------------------------------------------------------------------------- */

static mode_t
mode_of(const char *dir, const char *name)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

/* Every file of the journal (segments, LOCK, index files) has `file_mode`, the journal
 * directory and index/ `dir_mode`. Returns how many segments there are. */
static int
assert_modes(const char *dir, mode_t dir_mode, mode_t file_mode)
{
    assert_int_equal(mode_of(dir, "."), dir_mode);
    assert_int_equal(mode_of(dir, "index"), dir_mode);
    assert_int_equal(mode_of(dir, "LOCK"), file_mode);
    assert_int_equal(mode_of(dir, "index/data.mdb"), file_mode);
    assert_int_equal(mode_of(dir, "index/lock.mdb"), file_mode);
    int n_segments = 0;
    char name[4200];
    for (uint64_t seq = 1; seq < 10000; seq++) {
        snprintf(name, sizeof name, "%s/%020" PRIu64 ".seg", dir, seq);
        struct stat st;
        if (lstat(name, &st) != 0)
            continue;
        if ((st.st_mode & 07777) != file_mode)
            fail_msg("%s has mode %o, not %o", name, (unsigned)(st.st_mode & 07777),
                     (unsigned)file_mode);
        n_segments++;
    }
    return n_segments;
}

/* Restarting with other modes applies them: the directory, LOCK, every segment and the
 * index (what `stele serve --dir-mode 0750 --file-mode 0640` does to a journal made with the
 * defaults, so that its group reaches the socket and the files). */
static void
test_reopen_with_modes_sets_them_on_the_directory_and_every_file(void **state)
{
    fixture_t *f = *state;
    mode_t old_umask = umask(022);
    make_journal(f, 40); /* 40 events of 3 KiB: more than one 64 KiB segment */
    assert_true(assert_modes(f->journal, 0700, 0600) >= 1);
    stele_options_t o;
    options_small(&o);
    o.dir_mode = 0750;
    o.file_mode = 0640;
    stele_error_t err = {0};
    assert_int_equal(write_events(f->journal, &o, 1, &err), 0);
    assert_true(assert_modes(f->journal, 0750, 0640) >= 1);
    umask(old_umask);
}

/* Without modes, an existing journal keeps its own, and the segments a writer adds take
 * them: a writer started without --file-mode does not cut a group off at the next roll. */
static void
test_reopen_without_modes_keeps_them_and_new_segments_follow(void **state)
{
    fixture_t *f = *state;
    mode_t old_umask = umask(077);
    stele_options_t o;
    options_small(&o);
    o.dir_mode = 0750;
    o.file_mode = 0640;
    stele_error_t err = {0};
    assert_int_equal(write_events(f->journal, &o, 1, &err), 0);
    int before = assert_modes(f->journal, 0750, 0640);
    options_small(&o);
    assert_int_equal(write_events(f->journal, &o, 40, &err), 0);
    assert_true(assert_modes(f->journal, 0750, 0640) > before);
    umask(old_umask);
}

/* Files a group may write (made so with allow_unsafe_dir) do not pass that on: a writer
 * without the option gives the segments it adds (and the index it rebuilds: the one made
 * with the option, group-writable, it would refuse) the same mode less the write bits. */
static void
test_new_segments_do_not_inherit_write_access_for_others(void **state)
{
    fixture_t *f = *state;
    mode_t old_umask = umask(077);
    stele_options_t o;
    options_small(&o);
    o.file_mode = 0660;
    o.allow_unsafe_dir = 1;
    stele_error_t err = {0};
    assert_int_equal(write_events(f->journal, &o, 1, &err), 0);
    options_small(&o);
    assert_int_equal(write_events(f->journal, &o, 1, &err), STELE_EUNSAFE);
    assert_non_null(strstr(err.message, "index"));
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/index'", f->journal);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(write_events(f->journal, &o, 40, &err), 0);
    assert_int_equal(mode_of(f->journal, "index"), 0750);
    assert_int_equal(mode_of(f->journal, "00000000000000000001.seg"), 0660);
    int n_later = 0;
    for (uint64_t seq = 2; seq < 10000; seq++) {
        char name[4200];
        struct stat st;
        snprintf(name, sizeof name, "%s/%020" PRIu64 ".seg", f->journal, seq);
        if (lstat(name, &st) != 0)
            continue;
        assert_int_equal(st.st_mode & 07777, 0640);
        n_later++;
    }
    assert_true(n_later >= 1);
    umask(old_umask);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_writer_refuses_a_symlinked_lock_in_a_new_directory,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_writer_and_readers_refuse_a_symlinked_lock_in_a_journal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_and_readers_refuse_a_symlinked_segment, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_a_roll_never_writes_through_a_link_at_the_next_segment_name, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_the_preparer_never_writes_through_a_linked_prepared_tmp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_refuses_a_symlinked_index_lock_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_writer_refuses_a_symlinked_index_data_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_writer_refuses_a_symlinked_index_directory, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_writer_and_readers_refuse_a_symlinked_journal_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_refuses_a_directory_owned_by_another_user,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_refuses_a_journal_in_another_users_directory,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_directory_others_can_write_is_refused_unless_allowed,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_ancestor_others_can_write_needs_the_sticky_bit,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_reader_in_the_group_reads_a_journal_made_with_the_documented_modes, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_reopen_with_modes_sets_them_on_the_directory_and_every_file, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_reopen_without_modes_keeps_them_and_new_segments_follow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_segments_do_not_inherit_write_access_for_others,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
