/*
 * test_status_group.c: a monitoring user in the journal's group, which may read the journal
 * (--dir-mode 0750 --file-mode 0640) but not write the index's lock file, sees what the owner
 * sees: `stele status` with the writer's settings and every sink line, every stele_sink_*
 * metric of `status --prometheus`, and `stele ship --dead-letters` (through the writer's
 * monitor snapshot, engine/index_snapshot.c).
 *
 * Needs root and useradd: it makes a writer user and a reader in the writer's group, runs
 * each side in a child with that identity (setgroups, setgid, setuid) and removes both users
 * at the end. Skipped, saying so, otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "index.h"
#include "jtest_util.h"
#include "stele.h"
#include "status_publish.h"
#include "test_child.h"

#define WRITER_USER "stele-statgrp-w"
#define READER_USER "stele-statgrp-r"
#define SINK_NAME "audit"

typedef struct fixture {
    char *base; /* jtest_tmpdir's */
    char journal[4200];
    uid_t writer_uid, reader_uid;
    gid_t writer_gid, reader_gid;
} fixture_t;

/* The uid and gid of `name`, made with useradd (extra: more options). 0 or -1. */
static int
user_make(const char *name, const char *extra, uid_t *uid, gid_t *gid)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "userdel %s >/dev/null 2>&1; useradd --no-create-home --shell /usr/sbin/nologin "
             "%s %s >/dev/null 2>&1",
             name, extra, name);
    struct passwd *pw = system(cmd) == 0 ? getpwnam(name) : NULL;
    if (!pw)
        return -1;
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    return 0;
}

static void
users_remove(void)
{
    if (system("userdel " READER_USER " >/dev/null 2>&1; userdel " WRITER_USER
               " >/dev/null 2>&1") != 0) {
        /* already gone */
    }
}

static int
setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->base = jtest_tmpdir("statgrp");
    assert_int_equal(chmod(f->base, 0755), 0);
    snprintf(f->journal, sizeof f->journal, "%s/j", f->base);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture_t *f = *state;
    jtest_rmtree(f->base);
    users_remove();
    free(f);
    return 0;
}

/* A writer with the documented modes; returns 0 when it opened and closed cleanly. */
static int
writer_session(const char *dir, int n_events)
{
    stele_options_t o;
    stele_options_init(&o);
    o.dir_mode = 0750;
    o.file_mode = 0640;
    stele_error_t err = {0};
    stele_t *db = NULL;
    int rc = stele_open(dir, &o, &db, &err);
    for (int i = 0; rc == 0 && i < n_events; i++)
        rc = stele_append_json(db, "{\"actor\":\"alice\"}", 17, STELE_WAIT_DURABLE, NULL, &err);
    if (db && stele_close(db, rc ? NULL : &err) != 0 && rc == 0)
        rc = -1;
    if (rc)
        fprintf(stderr, "writer: %s\n", err.message);
    return rc;
}

/* The owner writes 3 records and leaves a sink behind: shipped to 2, seq 3 a dead letter,
 * stopped with an error (what a shipper records), then opens the journal once more, as a
 * writer restarted without that sink would. */
static int
child_owner_writes(void *arg)
{
    const char *dir = arg;
    if (writer_session(dir, 3) != 0)
        return 1;
    index_t *ix = NULL;
    stele_error_t err = {0};
    stele_sink_stats_t s = {.batches = 1, .retries = 4, .is_stopped = 1};
    snprintf(s.name, sizeof s.name, "%s", SINK_NAME);
    snprintf(s.last_error, sizeof s.last_error, "authentication failed");
    int rc = index_open(dir, INDEX_OPEN_WRITE, 0640, &ix, &err);
    if (rc == 0)
        rc = index_put_checkpoint_at(ix, SINK_NAME, 2, "127.0.0.1:27017/audit.events", &err);
    if (rc == 0)
        rc = index_put_dead_letter(ix, SINK_NAME, 3, "document too large", &err);
    if (rc == 0)
        rc = status_publish_put_sink(ix, &s, &err);
    index_close(ix);
    if (rc) {
        fprintf(stderr, "owner: %s\n", err.message);
        return 1;
    }
    return writer_session(dir, 0) != 0 ? 1 : 0;
}

/* Runs `stele ARGS` (a shell word list) on the journal; returns its stdout (malloc'd) when
 * it exits 0, else NULL. */
static char *
cli_output(const char *args)
{
    const char *bin = getenv("STELE_BIN");
    if (!bin)
        return NULL;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s", bin, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *out = calloc(1, cap);
    while (out && len < cap - 1) {
        size_t n = fread(out + len, 1, cap - 1 - len, p);
        if (n == 0)
            break;
        len += n;
    }
    int status = pclose(p);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "`stele %s` failed (status %d):\n%s\n", args, status, out ? out : "");
        free(out);
        return NULL;
    }
    return out;
}

/* 0 when `text` holds every one of the NULL-terminated `wanted`, else 1 (saying which). */
static int
holds_all(const char *what, const char *text, const char *const *wanted)
{
    for (size_t i = 0; text && wanted[i]; i++) {
        if (!strstr(text, wanted[i])) {
            fprintf(stderr, "%s lacks \"%s\":\n%s\n", what, wanted[i], text);
            return 1;
        }
    }
    return text ? 0 : 1;
}

static int
child_reader_monitors(void *arg)
{
    const char *dir = arg;
    char args[1024];
    snprintf(args, sizeof args, "status -d '%s'", dir);
    char *status = cli_output(args);
    static const char *const status_wants[] = {"last seq:  3",
                                               "bytes used)",
                                               "newest:",
                                               "sync:",
                                               "sink " SINK_NAME ": shipped 2",
                                               "1 dead letters, stopped",
                                               NULL};
    int bad = holds_all("status", status, status_wants);
    snprintf(args, sizeof args, "status --prometheus -d '%s'", dir);
    char *prom = cli_output(args);
    static const char *const prom_wants[] = {"stele_journal_bytes_used{",
                                             "stele_newest_record_timestamp_seconds{",
                                             "stele_sink_shipped_seq{",
                                             "stele_sink_lag_records{",
                                             "stele_sink_dead_letters{",
                                             "stele_sink_lag_seconds{",
                                             "stele_sink_retries_total{",
                                             "stele_sink_batches_total{",
                                             "stele_sink_stopped{",
                                             "stele_sink_last_error_timestamp_seconds{",
                                             NULL};
    bad |= holds_all("status --prometheus", prom, prom_wants);
    snprintf(args, sizeof args,
             "ship -d '%s' --mongo mongodb://127.0.0.1:9/audit --sink " SINK_NAME " --dead-letters",
             dir);
    char *dead = cli_output(args);
    static const char *const dead_wants[] = {"\"seq\":3", "document too large", NULL};
    bad |= holds_all("ship --dead-letters", dead, dead_wants);
    free(status);
    free(prom);
    free(dead);
    return bad;
}

static void
test_a_group_member_sees_settings_sinks_metrics_and_dead_letters(void **state)
{
    fixture_t *f = *state;
    if (geteuid() != 0 || user_make(WRITER_USER, "", &f->writer_uid, &f->writer_gid) != 0 ||
        user_make(READER_USER, "--groups " WRITER_USER, &f->reader_uid, &f->reader_gid) != 0) {
        fprintf(stderr, "skipped: needs root and useradd to make users " WRITER_USER
                        " and " READER_USER "\n");
        skip();
    }
    assert_int_equal(mkdir(f->journal, 0700), 0);
    assert_int_equal(chown(f->journal, f->writer_uid, f->writer_gid), 0);
    assert_int_equal(
        test_run_as(f->writer_uid, f->writer_gid, NULL, 0, child_owner_writes, f->journal), 0);
    gid_t groups[] = {f->writer_gid};
    assert_int_equal(
        test_run_as(f->reader_uid, f->reader_gid, groups, 1, child_reader_monitors, f->journal), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_a_group_member_sees_settings_sinks_metrics_and_dead_letters, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
