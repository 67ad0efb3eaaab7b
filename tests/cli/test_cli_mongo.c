/*
 * test_cli_mongo.c: the `stele` commands that talk to MongoDB, against the test server
 * (tests/integration/mongo_server.c: a FerretDB of the test's own on 127.0.0.1, or the
 * server named by STELE_TEST_MONGO_URI): insert --wait shipped through a configured sink,
 * verify --mongo (agreeing, then with records missing remotely), ship --once to catch up,
 * and ship --from/--to re-shipping a range.
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

static harness_result_t
run_expect(int want_exit, const char *const *args)
{
    harness_run_t run = {0};
    for (int i = 0; i < HARNESS_MAX_ARGS - 1 && args[i] != NULL; i++)
        run.args[i] = args[i];
    harness_result_t r;
    harness_exec(&run, &r);
    if (r.exit_code != want_exit)
        fail_msg("stele %s: exit %d (want %d)\nstdout: %s\nstderr: %s", args[0], r.exit_code,
                 want_exit, r.out, r.err);
    return r;
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
    harness_result_t r = run_expect(0, insert_shipped);
    assert_string_equal(r.out, "1\n2\n3\n");
    harness_result_free(&r);

    const char *verify[] = {"verify", "-d", f->dir, "--mongo", f->uri, "--db", db_name, NULL};
    r = run_expect(0, verify);
    assert_non_null(strstr(r.out, "remote copy matches"));
    harness_result_free(&r);

    /* appended without the sink: missing remotely, reported as a range */
    const char *insert_local[] = {"insert", "-d", f->dir, "{\"n\":4}", "{\"n\":5}", NULL};
    r = run_expect(0, insert_local);
    harness_result_free(&r);
    r = run_expect(2, verify);
    assert_non_null(strstr(r.err, "2 missing from the remote copy: 4-5"));
    harness_result_free(&r);

    /* the sink's checkpoint is "main": ship --once continues from it */
    const char *ship_once[] = {"ship",  "-d",     f->dir, "--mongo", f->uri, "--db",
                               db_name, "--sink", "main", "--once",  NULL};
    r = run_expect(0, ship_once);
    assert_string_equal(r.out, "5\n");
    harness_result_free(&r);
    r = run_expect(0, verify);
    harness_result_free(&r);

    /* re-shipping a range that is all there inserts nothing and changes nothing */
    const char *reship[] = {"ship",  "-d",     f->dir, "--mongo", f->uri, "--db",
                            db_name, "--from", "2",    "--to",    "4",    NULL};
    r = run_expect(0, reship);
    assert_string_equal(r.out, "0 documents inserted\n");
    harness_result_free(&r);
}

static void
test_verify_mongo_reports_an_unreachable_server_as_an_engine_error(void **state)
{
    mongo_fixture_t *f = *state;
    const char *insert[] = {"insert", "-d", f->dir, "{\"n\":1}", NULL};
    harness_result_t r = run_expect(0, insert);
    harness_result_free(&r);
    char uri[128];
    snprintf(uri, sizeof uri, "mongodb://127.0.0.1:%d/?serverSelectionTimeoutMS=300",
             mongo_server_free_port());
    const char *verify[] = {"verify", "-d", f->dir, "--mongo", uri, NULL};
    r = run_expect(3, verify);
    assert_non_null(strstr(r.err, "127.0.0.1"));
    harness_result_free(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_insert_wait_shipped_then_verify_mongo_then_ship_catches_up, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_verify_mongo_reports_an_unreachable_server_as_an_engine_error, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
