/*
 * test_cli_mongo.c: the `stele` commands that talk to MongoDB, against the test server
 * (tests/integration/mongo_server.c: a FerretDB of the test's own on 127.0.0.1, or the
 * server named by STELE_TEST_MONGO_URI): insert --wait shipped through a configured sink,
 * verify --mongo (agreeing, then with records missing remotely), ship --once to catch up,
 * ship --from/--to re-shipping a range, and tail --mongo (the same lines as the local tail,
 * with every filter; following records shipped after it started; its errors).
 */
#include "cli_harness.h"
#include "mongo_server.h"

#include <fcntl.h>
#include <mongoc/mongoc.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

typedef struct mongo_fixture {
    mongo_server_t server;
    char *root;
    char dir[4096];
    char config[4096];
    char uri[700];
} mongo_fixture_t;

static int
setup(void **state)
{
    mongo_fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    if (mongo_server_start(&f->server) != 0) {
        free(f);
        fail_msg("could not start the MongoDB test server: run "
                 "tests/integration/build-test-server.sh or set STELE_TEST_MONGO_URI");
    }
    f->root = harness_mkdtemp();
    snprintf(f->dir, sizeof f->dir, "%s/journal", f->root);
    snprintf(f->config, sizeof f->config, "%s/stele.ini", f->root);
    /* a database of this test's own, so an external server's other data does not count */
    snprintf(f->uri, sizeof f->uri, "%s", f->server.uri);
    FILE *fp = fopen(f->config, "w");
    assert_non_null(fp);
    fprintf(fp, "[sink main]\nuri = %s\ndatabase = stele_cli_test_%d\n", f->uri, (int)getpid());
    fclose(fp);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    mongo_fixture_t *f = *state;
    mongo_server_destroy(&f->server);
    harness_rmtree(f->root);
    free(f->root);
    free(f);
    return 0;
}

/* Inserts `count` lines ({"i":N,"who":"user-N%3"}) locally, then ships them with --once. */
static void
insert_and_ship(const mongo_fixture_t *f, const char *db_name, size_t first, size_t count)
{
    char *lines = harness_json_lines(first, count);
    harness_result_t r = harness_run(0, lines, "insert", "-d", f->dir, "--wait", "written", NULL);
    assert_int_equal(harness_count_lines(r.out), count);
    harness_result_free(&r);
    free(lines);
    r = harness_run(0, NULL, "ship", "-d", f->dir, "--mongo", f->uri, "--db", db_name, "--once",
                    NULL);
    harness_result_free(&r);
}

/* Runs `tail -d DIR ARGS...` on the journal, then with --mongo on the copy, and asserts the
 * two print the same bytes; returns how many lines they printed. */
static size_t
assert_remote_tail_equals_local(const mongo_fixture_t *f, const char *db_name, const char *a1,
                                const char *a2, const char *a3, const char *a4)
{
    harness_result_t local =
        harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", a1, a2, a3, a4, NULL);
    harness_result_t remote = harness_run(0, NULL, "tail", "-d", f->dir, "--mongo", f->uri, "--db",
                                          db_name, "-n", "all", a1, a2, a3, a4, NULL);
    if (strcmp(local.out, remote.out) != 0)
        fail_msg("tail %s %s %s %s differs:\nlocal:\n%s\nremote:\n%s", a1 ? a1 : "",
                 a1 && a2 ? a2 : "", a1 && a2 && a3 ? a3 : "", a1 && a2 && a3 && a4 ? a4 : "",
                 local.out, remote.out);
    size_t n = harness_count_lines(local.out);
    harness_result_free(&local);
    harness_result_free(&remote);
    return n;
}

/* The "ts" of the line of `seq` in tail output, copied into buf. */
static void
line_ts(const char *out, uint64_t seq, char *buf, size_t cap)
{
    char key[64];
    snprintf(key, sizeof key, "{\"seq\":%llu,\"ts\":\"", (unsigned long long)seq);
    const char *p = strstr(out, key);
    assert_non_null(p);
    p += strlen(key);
    const char *end = strchr(p, '"');
    assert_non_null(end);
    assert_true((size_t)(end - p) < cap);
    memcpy(buf, p, (size_t)(end - p));
    buf[end - p] = '\0';
}

static void
test_tail_mongo_prints_the_same_lines_as_the_local_tail(void **state)
{
    mongo_fixture_t *f = *state;
    char db_name[64];
    snprintf(db_name, sizeof db_name, "stele_cli_tail_%d", (int)getpid());
    /* three shipments, so the records span several commit batches and timestamps */
    insert_and_ship(f, db_name, 0, 120);
    insert_and_ship(f, db_name, 120, 50);
    insert_and_ship(f, db_name, 170, 30);

    /* -n all: every record, byte for byte */
    harness_result_t local = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", NULL);
    harness_result_t remote = harness_run(0, NULL, "tail", "-d", f->dir, "--mongo", f->uri, "--db",
                                          db_name, "-n", "all", NULL);
    assert_int_equal(harness_count_lines(local.out), 200);
    assert_string_equal(remote.out, local.out);
    char since[64], until[64], earlier[64];
    line_ts(local.out, 121, since, sizeof since);
    line_ts(local.out, 170, until, sizeof until);
    /* The printed ts is cut to µs and --since/--until compare it with the stored ns: every
     * record printed at `since` or later is taken; of those printed exactly at `until`, any
     * may be left out. So the count lies between the records printed in [since, until) and
     * those printed in [since, until] (the ISO timestamps compare as strings). */
    size_t between_min = 0, between_max = 0;
    for (uint64_t k = 1; k <= 200; k++) {
        line_ts(local.out, k, earlier, sizeof earlier);
        if (strcmp(earlier, since) < 0 || strcmp(earlier, until) > 0)
            continue;
        between_max++;
        between_min += strcmp(earlier, until) < 0;
    }
    assert_true(between_max >= 50); /* records 121..170 at least */
    harness_result_free(&local);
    harness_result_free(&remote);

    /* the default -n 10, and -n N: the last N, found through the newest remote seq */
    local = harness_run(0, NULL, "tail", "-d", f->dir, NULL);
    remote = harness_run(0, NULL, "tail", "-d", f->dir, "--mongo", f->uri, "--db", db_name, NULL);
    assert_int_equal(harness_count_lines(remote.out), 10);
    assert_string_equal(remote.out, local.out);
    harness_result_free(&local);
    harness_result_free(&remote);

    /* every filter, remotely as locally */
    assert_int_equal(assert_remote_tail_equals_local(f, db_name, "--from", "150", NULL, NULL), 51);
    assert_int_equal(
        assert_remote_tail_equals_local(f, db_name, "--where", "who=user-1", NULL, NULL), 67);
    assert_int_equal(assert_remote_tail_equals_local(f, db_name, "--where", "i=7", NULL, NULL), 1);
    /* every --where operator: the server narrows the find (seq and ts ranges, string
     * equalities), the filter decides; records i = 0..199 at seq i + 1, who = user-(i % 3) */
    static const struct {
        const char *where[2];
        size_t want;
    } wheres[] = {
        {{"who!=user-1"}, 133},
        {{"who=\"user-1\""}, 67},
        {{"i=\"7\""}, 0},
        {{"i>=150"}, 50},
        {{"i<5.5"}, 6},
        {{"who~^user-[12]$"}, 133},
        {{"who:user-?"}, 200},
        {{"who!:user-0"}, 133},
        {{"seq>=190"}, 11},
        {{"seq<3"}, 2},
        {{"seq>190", "seq<=195"}, 5},
        {{"who=user-1", "i>100"}, 33},
        {{"src:*"}, 200},
        {{"src!=no-such-source"}, 200},
        {{"seq=0"}, 0},
        {{"ts<1970-01-02"}, 0},
    };
    for (size_t i = 0; i < sizeof wheres / sizeof wheres[0]; i++) {
        size_t n = assert_remote_tail_equals_local(f, db_name, "--where", wheres[i].where[0],
                                                   wheres[i].where[1] ? "--where" : NULL,
                                                   wheres[i].where[1]);
        if (n != wheres[i].want)
            fail_msg("--where %s: %zu lines, want %zu", wheres[i].where[0], n, wheres[i].want);
    }
    assert_true(assert_remote_tail_equals_local(f, db_name, "--since", since, NULL, NULL) >= 80);
    char ts_since[96];
    snprintf(ts_since, sizeof ts_since, "ts>=%s", since);
    assert_true(assert_remote_tail_equals_local(f, db_name, "--where", ts_since, NULL, NULL) >= 80);
    /* the printed ts is cut to µs: --until of record 170's ts may leave record 170 out */
    size_t n_until = assert_remote_tail_equals_local(f, db_name, "--until", until, NULL, NULL);
    assert_true(n_until >= 120 && n_until <= 170);
    size_t n_between =
        assert_remote_tail_equals_local(f, db_name, "--since", since, "--until", until);
    assert_true(n_between >= between_min && n_between <= between_max);
    assert_int_equal(assert_remote_tail_equals_local(f, db_name, "--from", "190", "-o", "pretty"),
                     11);
    /* newest first, and the other output forms */
    assert_int_equal(assert_remote_tail_equals_local(f, db_name, "-r", NULL, NULL, NULL), 200);
    assert_int_equal(
        assert_remote_tail_equals_local(f, db_name, "-r", "--where", "who=user-1", NULL), 67);
    assert_int_equal(assert_remote_tail_equals_local(f, db_name, "-o", "short", NULL, NULL), 200);
    assert_int_equal(assert_remote_tail_equals_local(f, db_name, "-o", "cat", "-r", NULL), 200);
    /* -n N with a filter: the last N matching, kept in the ring */
    local = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "3", "--where", "who=user-2", NULL);
    remote = harness_run(0, NULL, "tail", "-d", f->dir, "--mongo", f->uri, "--db", db_name, "-n",
                         "3", "--where", "who=user-2", NULL);
    assert_int_equal(harness_count_lines(remote.out), 3);
    assert_string_equal(remote.out, local.out);
    harness_result_free(&local);
    harness_result_free(&remote);

    /* --source names the journal explicitly: needed when DIR is not a journal */
    local = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "1", NULL);
    const char *src = strstr(local.out, "\"src\":\"");
    assert_non_null(src);
    char source[64] = {0};
    src += 7;
    memcpy(source, src, (size_t)(strchr(src, '"') - src));
    remote = harness_run(0, NULL, "tail", "-d", f->root, "--mongo", f->uri, "--db", db_name,
                         "--source", source, "-n", "1", NULL);
    assert_string_equal(remote.out, local.out);
    harness_result_free(&local);
    harness_result_free(&remote);
    remote = harness_run(0, NULL, "tail", "-d", f->root, "--mongo", f->uri, "--db", db_name,
                         "--source", "no-such-source", "-n", "all", NULL);
    assert_string_equal(remote.out, "");
    harness_result_free(&remote);
}

static void
test_tail_mongo_follow_prints_records_shipped_after_it_started_through_a_restart(void **state)
{
    mongo_fixture_t *f = *state;
    char db_name[64];
    snprintf(db_name, sizeof db_name, "stele_cli_follow_%d", (int)getpid());
    insert_and_ship(f, db_name, 0, 5);
    const char *args[] = {"tail",  "-d", f->dir, "--mongo", f->uri, "--db",
                          db_name, "-n", "2",    "-f",      NULL};
    int out_fd, err_fd;
    pid_t tail = harness_spawn(args, -1, &out_fd, &err_fd);
    char *first = harness_read_lines(out_fd, 2, 20000);
    assert_int_equal(harness_count_lines(first), 2);
    assert_non_null(strstr(first, "{\"seq\":4,"));
    free(first);
    /* two more shipments while it follows: each line appears once, in seq order */
    for (size_t round = 0; round < 2; round++) {
        insert_and_ship(f, db_name, 5 + round * 3, 3);
        char *more = harness_read_lines(out_fd, 3, 20000);
        assert_int_equal(harness_count_lines(more), 3);
        char want[32];
        snprintf(want, sizeof want, "{\"seq\":%zu,", 6 + round * 3);
        if (strncmp(more, want, strlen(want)) != 0)
            fail_msg("round %zu: got %s", round, more);
        free(more);
    }
    /* the server killed and restarted under it: the follow retries, says so, and prints
     * what was shipped once the server is back */
    size_t n_records = 11;
    int rc = mongo_server_signal(&f->server, SIGKILL);
    if (rc == MONGO_SERVER_EXTERNAL) {
        fprintf(stderr, "note: external server (STELE_TEST_MONGO_URI): the restart part of "
                        "this test needs the test's own server and was not run\n");
    } else {
        assert_int_equal(rc, 0);
        usleep(1500 * 1000); /* longer than the longest poll delay: the follow sees it */
        assert_int_equal(mongo_server_restart(&f->server), 0);
        insert_and_ship(f, db_name, 11, 3);
        n_records += 3;
        char *more = harness_read_lines(out_fd, 3, 30000);
        assert_int_equal(harness_count_lines(more), 3);
        assert_non_null(strstr(more, "{\"seq\":12,"));
        assert_non_null(strstr(more, "{\"seq\":14,"));
        free(more);
    }
    harness_result_t local = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", NULL);
    assert_int_equal(harness_count_lines(local.out), n_records);
    harness_result_free(&local);
    kill(tail, SIGINT);
    assert_int_equal(harness_wait(tail), 0);
    char *err_text = harness_read_lines(err_fd, 1000, 2000);
    if (rc != MONGO_SERVER_EXTERNAL) {
        assert_non_null(strstr(err_text, "still following: retrying"));
        assert_non_null(strstr(err_text, "reading from the server again"));
    }
    free(err_text);
    close(out_fd);
    close(err_fd);

    /* a reader that goes away (`| head -1`): the next line written ends it with 0 */
    const char *head_args[] = {"tail",  "-d", f->dir, "--mongo", f->uri, "--db",
                               db_name, "-n", "1",    "-f",      NULL};
    tail = harness_spawn(head_args, -1, &out_fd, &err_fd);
    char *one = harness_read_lines(out_fd, 1, 20000);
    assert_int_equal(harness_count_lines(one), 1);
    free(one);
    close(out_fd);
    insert_and_ship(f, db_name, n_records, 1);
    assert_int_equal(harness_wait(tail), 0);
    close(err_fd);
}

/* Inserts a document of the journal's source that lacks the metadata field. */
static void
insert_foreign_document(const mongo_fixture_t *f, const char *db_name, const char *source,
                        int64_t seq)
{
    mongoc_init();
    bson_error_t berr;
    mongoc_client_t *client = mongoc_client_new(f->uri);
    assert_non_null(client);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, db_name, "events");
    bson_t *doc = BCON_NEW("_id", "{", "src", BCON_UTF8(source), "seq", BCON_INT64(seq), "}", "who",
                           BCON_UTF8("mallory"));
    if (!mongoc_collection_insert_one(coll, doc, NULL, NULL, &berr))
        fail_msg("insert_one: %s", berr.message);
    bson_destroy(doc);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
    mongoc_cleanup();
}

static void
test_tail_mongo_errors_exit_with_the_documented_codes_and_no_credentials(void **state)
{
    mongo_fixture_t *f = *state;
    char db_name[64];
    snprintf(db_name, sizeof db_name, "stele_cli_tailerr_%d", (int)getpid());
    insert_and_ship(f, db_name, 0, 3);

    /* unreachable server: 3, naming the host, never the password */
    char uri[160];
    snprintf(uri, sizeof uri,
             "mongodb://auditor:s3cr3t-pw@127.0.0.1:%d/?serverSelectionTimeoutMS=300",
             mongo_server_free_port());
    harness_result_t r = harness_run(3, NULL, "tail", "-d", f->dir, "--mongo", uri, NULL);
    assert_non_null(strstr(r.err, "127.0.0.1"));
    assert_null(strstr(r.err, "s3cr3t"));
    assert_string_equal(r.out, "");
    harness_result_free(&r);

    /* a URI libmongoc refuses, and one that is not mongodb:// at all: 1, not echoed */
    r = harness_run(1, NULL, "tail", "-d", f->dir, "--mongo",
                    "mongodb://auditor:s3cr3t-pw@127.0.0.1/?replicaSet=", NULL);
    assert_non_null(strstr(r.err, "invalid mongodb uri"));
    assert_null(strstr(r.err, "s3cr3t"));
    harness_result_free(&r);
    r = harness_run(1, NULL, "tail", "-d", f->dir, "--mongo", "http://auditor:s3cr3t-pw@127.0.0.1",
                    NULL);
    assert_non_null(strstr(r.err, "is not a mongodb:// URI"));
    assert_null(strstr(r.err, "s3cr3t"));
    harness_result_free(&r);

    /* no journal in DIR and no --source: 1, saying what to add */
    r = harness_run(1, NULL, "tail", "-d", f->root, "--mongo", f->uri, "--db", db_name, NULL);
    assert_non_null(strstr(r.err, "--mongo needs --source NAME"));
    harness_result_free(&r);

    /* a document of the source that stele did not ship: 2, naming its seq and what it lacks,
     * after the records before it */
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "1", NULL);
    const char *src = strstr(r.out, "\"src\":\"");
    assert_non_null(src);
    char source[64] = {0};
    src += 7;
    memcpy(source, src, (size_t)(strchr(src, '"') - src));
    harness_result_free(&r);
    insert_foreign_document(f, db_name, source, 4);
    r = harness_run(2, NULL, "tail", "-d", f->dir, "--mongo", f->uri, "--db", db_name, "-n", "all",
                    NULL);
    assert_int_equal(harness_count_lines(r.out), 3);
    assert_non_null(strstr(r.err, "document seq 4"));
    assert_non_null(strstr(r.err, "has no _stele metadata"));
    harness_result_free(&r);
}

static void
test_insert_wait_shipped_then_verify_mongo_then_ship_catches_up(void **state)
{
    mongo_fixture_t *f = *state;
    char db_name[64];
    snprintf(db_name, sizeof db_name, "stele_cli_test_%d", (int)getpid());

    /* shipped through the sink of the config file: a printed seq is in MongoDB */
    const char *insert_shipped[] = {"insert",    "-d",        f->dir,    "--config",
                                    f->config,   "--wait",    "shipped", "{\"n\":1}",
                                    "{\"n\":2}", "{\"n\":3}", NULL};
    harness_result_t r = harness_run_argv(0, NULL, insert_shipped);
    assert_string_equal(r.out, "1\n2\n3\n");
    harness_result_free(&r);

    const char *verify[] = {"verify", "-d", f->dir, "--mongo", f->uri, "--db", db_name, NULL};
    r = harness_run_argv(0, NULL, verify);
    assert_non_null(strstr(r.out, "remote copy matches"));
    harness_result_free(&r);

    /* appended without the sink: missing remotely, reported as a range */
    const char *insert_local[] = {"insert", "-d", f->dir, "{\"n\":4}", "{\"n\":5}", NULL};
    r = harness_run_argv(0, NULL, insert_local);
    harness_result_free(&r);
    r = harness_run_argv(2, NULL, verify);
    assert_non_null(strstr(r.err, "2 missing from the remote copy: 4-5"));
    harness_result_free(&r);

    /* the sink's checkpoint is "main": ship --once continues from it */
    const char *ship_once[] = {"ship",  "-d",     f->dir, "--mongo", f->uri, "--db",
                               db_name, "--sink", "main", "--once",  NULL};
    r = harness_run_argv(0, NULL, ship_once);
    assert_string_equal(r.out, "5\n");
    harness_result_free(&r);
    r = harness_run_argv(0, NULL, verify);
    harness_result_free(&r);

    /* re-shipping a range that is all there inserts nothing and changes nothing */
    const char *reship[] = {"ship",  "-d",     f->dir, "--mongo", f->uri, "--db",
                            db_name, "--from", "2",    "--to",    "4",    NULL};
    r = harness_run_argv(0, NULL, reship);
    assert_string_equal(r.out, "0 documents inserted\n");
    harness_result_free(&r);
}

/* Runs stele with stdout on /dev/full; asserts exit 3 and that stderr says so. */
static void
assert_lost_output_is_exit_3(const char *const *args)
{
    harness_run_t run = {0};
    run.stream[STDOUT_FILENO] = HARNESS_STREAM_DEV_FULL;
    for (int i = 0; args[i] != NULL; i++)
        run.args[i] = args[i];
    harness_result_t r;
    harness_exec(&run, &r);
    if (r.exit_code != 3 || strstr(r.err, "could not write to stdout") == NULL)
        fail_msg("stele %s %s with stdout on /dev/full: exit %d (want 3), stderr: %s", args[0],
                 args[3], r.exit_code, r.err);
    harness_result_free(&r);
}

/* What ship --once, ship --from/--to and verify --mongo print is their answer: lost to a full
 * disk, it must not be exit 0. */
static void
test_ship_and_verify_mongo_exit_3_when_stdout_is_full(void **state)
{
    mongo_fixture_t *f = *state;
    char db_name[64];
    snprintf(db_name, sizeof db_name, "stele_cli_test_%d", (int)getpid());
    const char *insert[] = {"insert", "-d", f->dir, "{\"n\":1}", "{\"n\":2}", NULL};
    harness_result_t r = harness_run_argv(0, NULL, insert);
    harness_result_free(&r);
    const char *ship_once[] = {"ship", "-d",    f->dir,   "--mongo", f->uri,
                               "--db", db_name, "--once", NULL};
    assert_lost_output_is_exit_3(ship_once);
    const char *verify[] = {"verify", "-d", f->dir, "--mongo", f->uri, "--db", db_name, NULL};
    assert_lost_output_is_exit_3(verify);
    const char *reship[] = {"ship",  "-d",     f->dir, "--mongo", f->uri, "--db",
                            db_name, "--from", "1",    "--to",    "2",    NULL};
    assert_lost_output_is_exit_3(reship);
}

static void
test_verify_mongo_reports_an_unreachable_server_as_an_engine_error(void **state)
{
    mongo_fixture_t *f = *state;
    const char *insert[] = {"insert", "-d", f->dir, "{\"n\":1}", NULL};
    harness_result_t r = harness_run_argv(0, NULL, insert);
    harness_result_free(&r);
    char uri[128];
    snprintf(uri, sizeof uri, "mongodb://127.0.0.1:%d/?serverSelectionTimeoutMS=300",
             mongo_server_free_port());
    const char *verify[] = {"verify", "-d", f->dir, "--mongo", uri, NULL};
    r = harness_run_argv(3, NULL, verify);
    assert_non_null(strstr(r.err, "127.0.0.1"));
    harness_result_free(&r);
}

/* The round-trip events (doubles, int64 bounds, unicode, escapes, nesting) come back from
 * the MongoDB copy as Python's json and jq read them in: tail --mongo's lines and events.
 * The FerretDB test server cannot store all of them (json_roundtrip.py --test-server says
 * which); a real MongoDB (STELE_TEST_MONGO_URI) is held to every one. */
static void
test_json_round_trips_through_tail_mongo(void **state)
{
    mongo_fixture_t *f = *state;
    char db_name[64];
    snprintf(db_name, sizeof db_name, "stele_cli_roundtrip_%d", (int)getpid());
    char *events = harness_roundtrip_events();
    harness_result_t r = harness_run(0, events, "insert", "-d", f->dir, "--wait", "written", NULL);
    harness_result_free(&r);
    free(events);
    r = harness_run(0, NULL, "ship", "-d", f->dir, "--mongo", f->uri, "--db", db_name, "--once",
                    NULL);
    harness_result_free(&r);
    harness_result_t tail = harness_run(0, NULL, "tail", "-d", f->dir, "--mongo", f->uri, "--db",
                                        db_name, "-n", "all", NULL);
    harness_result_t cat = harness_run(0, NULL, "tail", "-d", f->dir, "--mongo", f->uri, "--db",
                                       db_name, "-n", "all", "-o", "cat", NULL);
    char *paths[2] = {
        harness_write_file(f->root, "mongo-tail.jsonl", tail.out, tail.out_len),
        harness_write_file(f->root, "mongo-cat.jsonl", cat.out, cat.out_len),
    };
    harness_result_free(&tail);
    harness_result_free(&cat);
    /* FerretDB refuses nested arrays and drops a zero's sign (json_roundtrip.py) */
    const char *args[] = {
        "--records", paths[0], "--events", paths[1], f->server.is_external ? NULL : "--test-server",
        NULL};
    harness_json_roundtrip(args);
    free(paths[0]);
    free(paths[1]);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_insert_wait_shipped_then_verify_mongo_then_ship_catches_up, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_verify_mongo_reports_an_unreachable_server_as_an_engine_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ship_and_verify_mongo_exit_3_when_stdout_is_full,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_round_trips_through_tail_mongo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tail_mongo_prints_the_same_lines_as_the_local_tail,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_tail_mongo_follow_prints_records_shipped_after_it_started_through_a_restart, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_tail_mongo_errors_exit_with_the_documented_codes_and_no_credentials, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
