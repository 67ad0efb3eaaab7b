/*
 * test_cli_dead_letters.c: `stele ship --dead-letters`, `--reship-dead-letters[=SEQ]` and
 * `--discard-dead-letter SEQ` end to end, against the test server (FerretDB of the test's
 * own, or STELE_TEST_MONGO_URI). The permanent rejection is a unique index on the events'
 * "k" field (FerretDB implements no collection validators): two events repeat a "k" and
 * are dead-lettered; the index is then dropped and they are re-shipped or discarded.
 */
#include "cli_harness.h"
#include "mongo_server.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <mongoc/mongoc.h>

typedef struct dl_fixture {
    mongo_server_t server;
    char *root;
    char dir[4096];
    char db_name[64];
} dl_fixture_t;

static int
setup(void **state)
{
    dl_fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    if (mongo_server_start(&f->server) != 0) {
        free(f);
        fail_msg("could not start the MongoDB test server: run "
                 "tests/integration/build-test-server.sh or set STELE_TEST_MONGO_URI");
    }
    f->root = harness_mkdtemp();
    snprintf(f->dir, sizeof f->dir, "%s/journal", f->root);
    snprintf(f->db_name, sizeof f->db_name, "stele_cli_dl_%d", (int)getpid());
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    dl_fixture_t *f = *state;
    mongo_server_destroy(&f->server);
    harness_rmtree(f->root);
    free(f->root);
    free(f);
    return 0;
}

/* Runs a command on the collection "dl": a database command, or drop of the index "k_1". */
static void
run_on_collection(const dl_fixture_t *f, int is_create)
{
    mongoc_client_t *client = mongoc_client_new(f->server.uri);
    mongoc_database_t *db = mongoc_client_get_database(client, f->db_name);
    mongoc_collection_t *coll = mongoc_database_get_collection(db, "dl");
    bson_error_t err;
    bool ok;
    if (is_create) {
        bson_t *cmd = BCON_NEW("createIndexes", BCON_UTF8("dl"), "indexes", "[", "{", "key", "{",
                               "k", BCON_INT32(1), "}", "name", BCON_UTF8("k_1"), "unique",
                               BCON_BOOL(true), "}", "]");
        ok = mongoc_database_write_command_with_opts(db, cmd, NULL, NULL, &err);
        bson_destroy(cmd);
    } else {
        ok = mongoc_collection_drop_index(coll, "k_1", &err);
    }
    if (!ok)
        fail_msg("%s the unique index: %s", is_create ? "create" : "drop", err.message);
    mongoc_collection_destroy(coll);
    mongoc_database_destroy(db);
    mongoc_client_destroy(client);
}

/* Every line of text is a JSON object; returns how many lines there are. */
static int
count_json_lines(const char *text)
{
    int n = 0;
    for (const char *line = text; *line; n++) {
        const char *end = strchr(line, '\n');
        assert_non_null(end);
        bson_error_t err;
        bson_t *doc = bson_new_from_json((const uint8_t *)line, end - line, &err);
        if (!doc)
            fail_msg("not a JSON object: %.*s (%s)", (int)(end - line), line, err.message);
        bson_destroy(doc);
        line = end + 1;
    }
    return n;
}

static void
test_ship_lists_reships_and_discards_dead_letters(void **state)
{
    dl_fixture_t *f = *state;
    run_on_collection(f, 1);
    const char *insert[] = {"insert",    "-d",        f->dir,      "{\"k\":1}", "{\"k\":2}",
                            "{\"k\":1}", "{\"k\":3}", "{\"k\":2}", "{\"k\":4}", NULL};
    harness_result_t r = harness_run_argv(0, NULL, insert);
    harness_result_free(&r);
#define SHIP_ARGS                                                                                  \
    "ship", "-d", f->dir, "--mongo", f->server.uri, "--db", f->db_name, "--collection", "dl"
    /* seqs 3 and 5 repeat a "k": dead-lettered, the rest ships */
    const char *once[] = {SHIP_ARGS, "--once", NULL};
    r = harness_run_argv(0, NULL, once);
    assert_string_equal(r.out, "6\n");
    harness_result_free(&r);

    const char *list[] = {SHIP_ARGS, "--dead-letters", NULL};
    r = harness_run_argv(0, NULL, list);
    assert_int_equal(count_json_lines(r.out), 2);
    assert_non_null(strstr(r.out, "{\"seq\":3,\"time\":\"20"));
    assert_non_null(strstr(r.out, "{\"seq\":5,"));
    assert_non_null(strstr(r.out, "duplicate key"));
    harness_result_free(&r);

    /* refused again while the index is there: still listed, exit 3 */
    const char *reship_all[] = {SHIP_ARGS, "--reship-dead-letters", NULL};
    r = harness_run_argv(3, NULL, reship_all);
    assert_string_equal(r.out, "{\"tried\": 2, \"shipped\": 0, \"rejected\": 2, \"missing\": 0}\n");
    assert_non_null(strstr(r.err, "still rejected"));
    harness_result_free(&r);

    /* the operator gives up on 5: logged, off the list */
    const char *discard[] = {SHIP_ARGS, "--discard-dead-letter", "5", NULL};
    r = harness_run_argv(0, NULL, discard);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "msg=\"dead letter discarded\" sink=\"default\" seq=5"));
    harness_result_free(&r);
    r = harness_run_argv(3, NULL, discard);
    assert_non_null(strstr(r.err, "no dead letter at seq 5"));
    harness_result_free(&r);

    /* the cause removed, 3 ships and leaves the list */
    run_on_collection(f, 0);
    const char *reship_3[] = {SHIP_ARGS, "--reship-dead-letters=3", NULL};
    r = harness_run_argv(0, NULL, reship_3);
    assert_string_equal(r.out, "{\"tried\": 1, \"shipped\": 1, \"rejected\": 0, \"missing\": 0}\n");
    harness_result_free(&r);
    r = harness_run_argv(0, NULL, list);
    assert_string_equal(r.out, "");
    harness_result_free(&r);

    /* the remote holds everything but the discarded record */
    const char *verify[] = {"verify", "-d",       f->dir,         "--mongo", f->server.uri,
                            "--db",   f->db_name, "--collection", "dl",      NULL};
    r = harness_run_argv(2, NULL, verify);
    assert_non_null(strstr(r.err, "1 missing from the remote copy: 5"));
    harness_result_free(&r);
#undef SHIP_ARGS
}

/* The dead-letter list is JSON Python's json and jq both read, whatever the rejected
 * values hold: the server's reason quotes the duplicate key, here with escapes, non-ASCII
 * and astral characters, and long enough that the reason is cut to its size. */
static void
test_dead_letter_list_reads_back_in_python_and_jq(void **state)
{
    dl_fixture_t *f = *state;
    run_on_collection(f, 1);
    char long_key[1024] = "{\"k\":\"";
    for (int i = 0; i < 100; i++)
        strcat(long_key, "\xf0\x9f\x98\x80"); /* U+1F600, 4 bytes */
    strcat(long_key, "\"}");
    const char *insert[] = {"insert",
                            "-d",
                            f->dir,
                            "{\"k\":\"\xc3\xa9\\\"\\\\\\u0001\\t\"}",
                            "{\"k\":\"\xc3\xa9\\\"\\\\\\u0001\\t\"}",
                            long_key,
                            long_key,
                            NULL};
    harness_result_t r = harness_run_argv(0, NULL, insert);
    harness_result_free(&r);
    const char *once[] = {"ship",     "-d",           f->dir, "--mongo", f->server.uri, "--db",
                          f->db_name, "--collection", "dl",   "--once",  NULL};
    r = harness_run_argv(0, NULL, once);
    harness_result_free(&r);
    const char *list[] = {"ship", "-d",       f->dir,         "--mongo", f->server.uri,
                          "--db", f->db_name, "--collection", "dl",      "--dead-letters",
                          NULL};
    r = harness_run_argv(0, NULL, list);
    assert_int_equal(count_json_lines(r.out), 2);
    char *path = harness_write_file(f->root, "dead-letters.jsonl", r.out, r.out_len);
    harness_result_free(&r);
    const char *args[] = {"--objects", path, NULL};
    harness_json_roundtrip(args);
    free(path);
}

static void
test_ship_refuses_two_dead_letter_actions_at_once(void **state)
{
    dl_fixture_t *f = *state;
    const char *both[] = {
        "ship", "-d", f->dir, "--mongo", f->server.uri, "--dead-letters", "--reship-dead-letters",
        NULL};
    harness_result_t r = harness_run_argv(1, NULL, both);
    assert_non_null(strstr(r.err, "exclude each other"));
    harness_result_free(&r);
    const char *bad_seq[] = {
        "ship", "-d", f->dir, "--mongo", f->server.uri, "--discard-dead-letter", "x", NULL};
    r = harness_run_argv(1, NULL, bad_seq);
    assert_non_null(strstr(r.err, "'x' is not a seq"));
    harness_result_free(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ship_lists_reships_and_discards_dead_letters, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dead_letter_list_reads_back_in_python_and_jq, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ship_refuses_two_dead_letter_actions_at_once, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
