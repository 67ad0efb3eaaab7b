/*
 * test_serve_origin.c: what `stele serve` records about who sent each event. Every record
 * appended for a connection carries the peer's SO_PEERCRED uid, gid and pid (origin kind
 * "peer"), which the kernel vouches for: an event or an envelope that claims another author
 * changes none of it.
 *
 * With two users (the second made with useradd when the test runs as root, and removed at
 * the end; skipped with a message otherwise): root and that user write through the socket
 * (the server runs in the user's group with --dir-mode 0750 --file-mode 0640, as a service
 * does), and their records carry their distinct uids, which `stele tail` shows, MongoDB (the
 * FerretDB test server, tests/integration) receives as _stele.origin, `tail --mongo` prints
 * back unchanged, and `verify --mongo` compares: a document whose origin was changed in the
 * sink is reported as mismatched.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <bson/bson.h>
#include <mongoc/mongoc.h>

#include "cli_harness.h"
#include "mongo_server.h"
#include "serve_fixture.h"

/* The second user, made for this test and removed after it. */
#define ORIGIN_USER "stele-origin-t"
#define REPLY_TIMEOUT_MS 30000
/* An event that claims root as its author, inside the event where a client may write. */
#define CLAIMING_EVENT                                                                             \
    "{\"who\":\"other\",\"uid\":0,\"origin\":{\"kind\":\"peer\",\"uid\":0,\"gid\":0,\"pid\":1}}"

/* What the journal says of one record. */
typedef struct seen {
    stele_origin_t origin[8];
    char who[8][16];
    size_t n;
} seen_t;

static void
seen_record(void *ctx, const stele_record_t *rec)
{
    seen_t *s = ctx;
    if (s->n >= 8)
        return;
    s->origin[s->n] = rec->origin;
    bson_t ev;
    bson_iter_t it;
    s->who[s->n][0] = '\0';
    if (bson_init_static(&ev, rec->bson, rec->bson_len) && bson_iter_init_find(&it, &ev, "who") &&
        BSON_ITER_HOLDS_UTF8(&it))
        snprintf(s->who[s->n], sizeof s->who[s->n], "%s", bson_iter_utf8(&it, NULL));
    s->n++;
}

/* Sends one request line and returns the reply's code (0 with *seq for {"seq":N}). */
static int
send_line(int fd, const char *line, uint64_t *seq)
{
    char reply[1024];
    if (ts_write_all(fd, line, strlen(line)) != 0 || ts_write_all(fd, "\n", 1) != 0 ||
        ts_read_line(fd, reply, sizeof reply, REPLY_TIMEOUT_MS) < 0)
        return -1;
    return ts_reply_code(reply, seq);
}

static void
assert_peer(const stele_origin_t *o, uid_t uid, gid_t gid, pid_t pid)
{
    assert_int_equal(o->kind, STELE_ORIGIN_PEER);
    assert_int_equal(o->uid, (uint32_t)uid);
    assert_int_equal(o->gid, (uint32_t)gid);
    assert_int_equal(o->pid, (uint32_t)pid);
}

/* Any user: the event's own "uid" and "origin", bare or in an envelope, change nothing of
 * the trusted origin, and an envelope cannot carry one ($origin is refused). */
static void
test_serve_records_the_peer_whatever_the_event_claims(void **state)
{
    (void)state;
    char dir[256];
    ts_server_t srv;
    ts_make_dir(dir, sizeof dir, "origin-claim");
    assert_int_equal(ts_server_start(&srv, dir, NULL, NULL), 0);
    int fd = ts_connect(srv.socket_path);
    assert_true(fd >= 0);
    uint64_t seq = 0;
    assert_int_equal(send_line(fd, CLAIMING_EVENT, &seq), 0);
    assert_int_equal(seq, 1);
    assert_int_equal(send_line(fd, "{\"$event\":" CLAIMING_EVENT ",\"$wait\":\"durable\"}", &seq),
                     0);
    assert_int_equal(seq, 2);
    assert_int_equal(send_line(fd,
                               "{\"$event\":{\"who\":\"x\"},\"$origin\":{\"kind\":\"peer\","
                               "\"uid\":0,\"gid\":0,\"pid\":1}}",
                               &seq),
                     STELE_EPROTOCOL);
    close(fd);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);

    seen_t seen = {0};
    assert_int_equal(ts_read_journal(dir, seen_record, &seen), 2);
    for (size_t i = 0; i < 2; i++) {
        assert_peer(&seen.origin[i], getuid(), getgid(), getpid());
        assert_string_equal(seen.who[i], "other");
    }
    ts_remove_dir(dir);
}

/* ---- two users -------------------------------------------------------------------------- */

typedef struct two_users {
    uid_t uid;
    gid_t gid;
    int is_made; /* made by this test: removed at the end */
    mongo_server_t mongo;
    char dir[256];
    char base[256];
    char uri[600];
    char db_name[64];
} two_users_t;

/* ORIGIN_USER's ids, made with useradd when missing; skips unless root. */
static void
need_origin_user(two_users_t *t)
{
    struct passwd *pw = getpwnam(ORIGIN_USER);
    if (!pw && geteuid() == 0 &&
        system("useradd --no-create-home --shell /usr/sbin/nologin " ORIGIN_USER
               " >/dev/null 2>&1") == 0) {
        pw = getpwnam(ORIGIN_USER);
        t->is_made = pw != NULL;
    }
    if (geteuid() != 0 || !pw) {
        fprintf(stderr, "skipped: needs root and useradd to make user " ORIGIN_USER "\n");
        skip();
    }
    t->uid = pw->pw_uid;
    t->gid = pw->pw_gid;
}

static void
remove_origin_user(const two_users_t *t)
{
    if (t->is_made && system("userdel " ORIGIN_USER " >/dev/null 2>&1") != 0)
        fprintf(stderr, "warning: could not remove user " ORIGIN_USER "\n");
}

/* In a child running as the second user: connects and sends CLAIMING_EVENT. Returns the
 * child's pid (the peer the server sees) once it exited 0. */
static pid_t
append_as_other(const two_users_t *t, const char *socket_path)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgroups(1, &t->gid) != 0 || setgid(t->gid) != 0 || setuid(t->uid) != 0)
            _exit(100);
        int fd = ts_connect(socket_path);
        uint64_t seq = 0;
        _exit(fd < 0 ? 2 : send_line(fd, CLAIMING_EVENT, &seq) == 0 && seq == 2 ? 0 : 3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    return pid;
}

/* `"origin":{"kind":"peer","uid":U,"gid":G,"pid":P}` as tail prints it. */
static void
origin_json(char *buf, size_t cap, uid_t uid, gid_t gid, pid_t pid)
{
    snprintf(buf, cap, "\"origin\":{\"kind\":\"peer\",\"uid\":%u,\"gid\":%u,\"pid\":%u}",
             (unsigned)uid, (unsigned)gid, (unsigned)pid);
}

/* The _stele.origin.uid of the document of `seq` in the sink. */
static int64_t
remote_origin_uid(mongoc_collection_t *coll, int64_t seq)
{
    bson_t *filter = BCON_NEW("_id.seq", BCON_INT64(seq));
    mongoc_cursor_t *c = mongoc_collection_find_with_opts(coll, filter, NULL, NULL);
    const bson_t *doc;
    int64_t uid = -1;
    bson_iter_t it;
    if (mongoc_cursor_next(c, &doc) && bson_iter_init(&it, doc) &&
        bson_iter_find_descendant(&it, "_stele.origin.uid", &it))
        uid = bson_iter_as_int64(&it);
    mongoc_cursor_destroy(c);
    bson_destroy(filter);
    return uid;
}

/* Changes the sink's copy of seq's origin uid, as someone with write access to it could. */
static void
remote_forge_origin_uid(mongoc_collection_t *coll, int64_t seq, int64_t uid)
{
    bson_t *filter = BCON_NEW("_id.seq", BCON_INT64(seq));
    bson_t *update = BCON_NEW("$set", "{", "_stele.origin.uid", BCON_INT64(uid), "}");
    bson_error_t berr;
    if (!mongoc_collection_update_one(coll, filter, update, NULL, NULL, &berr))
        fail_msg("update: %s", berr.message);
    bson_destroy(update);
    bson_destroy(filter);
}

/* The local tail shows both uids, each with its own peer; the short line shows the uid. */
static void
check_local_tail(const two_users_t *t, pid_t other_pid)
{
    char want_root[160], want_other[160], short_other[64];
    origin_json(want_root, sizeof want_root, 0, getgid(), getpid());
    origin_json(want_other, sizeof want_other, t->uid, t->gid, other_pid);
    harness_result_t r = harness_run(0, NULL, "tail", "-d", t->dir, "-n", "all", NULL);
    assert_int_equal(harness_count_lines(r.out), 2);
    const char *second = strchr(r.out, '\n') + 1;
    assert_non_null(strstr(r.out, want_root));
    assert_true(strstr(r.out, want_root) < second);
    assert_non_null(strstr(second, want_other));
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", t->dir, "-n", "all", "-o", "short", NULL);
    snprintf(short_other, sizeof short_other, " 2 uid=%u - - who=other ", (unsigned)t->uid);
    assert_non_null(strstr(r.out, " 1 uid=0 - - who=root\n"));
    assert_non_null(strstr(r.out, short_other));
    harness_result_free(&r);
}

/* Ships the journal, then: MongoDB has both uids, tail --mongo prints the local lines,
 * verify --mongo agrees, and catches a forged origin in the sink. */
static void
check_mongo(const two_users_t *t)
{
    harness_result_t r = harness_run(0, NULL, "ship", "-d", t->dir, "--mongo", t->uri, "--db",
                                     t->db_name, "--once", NULL);
    harness_result_free(&r);
    mongoc_client_t *client = mongoc_client_new(t->uri);
    assert_non_null(client);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, t->db_name, "events");
    assert_int_equal(remote_origin_uid(coll, 1), 0);
    assert_int_equal(remote_origin_uid(coll, 2), (int64_t)t->uid);

    harness_result_t local = harness_run(0, NULL, "tail", "-d", t->dir, "-n", "all", NULL);
    harness_result_t remote = harness_run(0, NULL, "tail", "-d", t->dir, "--mongo", t->uri, "--db",
                                          t->db_name, "-n", "all", NULL);
    assert_string_equal(remote.out, local.out);
    harness_result_free(&local);
    harness_result_free(&remote);

    const char *verify[] = {"verify", "-d", t->dir, "--mongo", t->uri, "--db", t->db_name, NULL};
    r = harness_run_argv(0, NULL, verify);
    harness_result_free(&r);
    remote_forge_origin_uid(coll, 2, 0);
    r = harness_run_argv(2, NULL, verify);
    assert_non_null(strstr(r.err, "1 mismatching the journal: 2"));
    harness_result_free(&r);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
}

static int
two_users_setup(void **state)
{
    two_users_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    *state = t;
    return 0;
}

/* Removes what the test made, also when it failed half-way. */
static int
two_users_teardown(void **state)
{
    two_users_t *t = *state;
    if (t->dir[0])
        ts_remove_dir(t->dir);
    if (t->mongo.pid || t->mongo.is_external)
        mongo_server_destroy(&t->mongo);
    remove_origin_user(t);
    free(t);
    return 0;
}

static void
test_two_users_through_the_socket_carry_their_own_uids_to_tail_and_mongodb(void **state)
{
    two_users_t *t = *state;
    need_origin_user(t);
    if (mongo_server_start(&t->mongo) != 0)
        fail_msg("could not start the MongoDB test server: run "
                 "tests/integration/build-test-server.sh or set STELE_TEST_MONGO_URI");
    snprintf(t->uri, sizeof t->uri, "%s", t->mongo.uri);
    snprintf(t->db_name, sizeof t->db_name, "stele_origin_test_%d", (int)getpid());
    ts_make_dir(t->dir, sizeof t->dir, "origin-users");
    snprintf(t->base, sizeof t->base, "%s", t->dir);
    *strrchr(t->base, '/') = '\0';
    assert_int_equal(chmod(t->base, 0755), 0);

    /* the server in the second user's group, the socket reachable by that group */
    ts_server_t srv;
    ts_server_setup_t in_group = {.gid = t->gid};
    static const char *const modes[] = {"--dir-mode", "0750", "--file-mode", "0640", NULL};
    assert_int_equal(ts_server_start_setup(&srv, t->dir, &in_group, NULL, modes), 0);
    int fd = ts_connect(srv.socket_path);
    assert_true(fd >= 0);
    uint64_t seq = 0;
    assert_int_equal(send_line(fd, "{\"who\":\"root\"}", &seq), 0);
    assert_int_equal(seq, 1);
    pid_t other_pid = append_as_other(t, srv.socket_path);
    close(fd);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);

    seen_t seen = {0};
    assert_int_equal(ts_read_journal(t->dir, seen_record, &seen), 2);
    assert_string_equal(seen.who[0], "root");
    assert_peer(&seen.origin[0], 0, getgid(), getpid());
    assert_string_equal(seen.who[1], "other");
    assert_peer(&seen.origin[1], t->uid, t->gid, other_pid);
    assert_int_not_equal(seen.origin[0].uid, seen.origin[1].uid);

    check_local_tail(t, other_pid);
    check_mongo(t);
}

int
main(void)
{
    mongoc_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_records_the_peer_whatever_the_event_claims),
        cmocka_unit_test_setup_teardown(
            test_two_users_through_the_socket_carry_their_own_uids_to_tail_and_mongodb,
            two_users_setup, two_users_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mongoc_cleanup();
    return rc;
}
