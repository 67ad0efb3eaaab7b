/*
 * test_ship_fan_in.c: many hosts into one cluster. Twenty journals, each with a source of its
 * own, ship concurrently into one collection of the test server (or STELE_TEST_MONGO_URI)
 * while records keep arriving, through a restart of the server and a SIGKILL of the shipping
 * processes, and end exactly once per source: every seq 1..n stored once, none extra, every
 * chain hash equal to its journal's (ship_check_exactly_once).
 *
 * Sixteen shippers are threads of this process; four run in child processes of their own
 * (this binary re-executed with --ship-child) so that they can be killed mid-batch, as a host
 * that crashes would be, and restarted from their checkpoint. Against an external server the
 * restart is skipped (the test cannot stop it) and said so.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "mongo_server.h"
#include "ship.h"
#include "ship_fixture.h"

#define N_SOURCES 20
#define N_CHILDREN 4 /* the last N_CHILDREN sources ship from child processes */
#define RECORDS_PER_PHASE 500
#define N_PHASES 3
#define WAIT_MS 300000
#define COLLECTION "fanin20"

typedef struct fan_in {
    mongo_server_t server;
    ship_journal_t sj[N_SOURCES];
    shipper_t *shipper[N_SOURCES]; /* NULL for the sources shipped by a child */
    pid_t child[N_SOURCES];
    stele_sink_options_t so;
} fan_in_t;

static int
is_child_source(int i)
{
    return i >= N_SOURCES - N_CHILDREN;
}

/* The shipper of one journal in a process of its own: argv = self --ship-child DIR SOURCE URI. */
static int
ship_child_main(char **argv)
{
    index_t *ix;
    stele_error_t err = {0};
    if (index_open(argv[2], 1, 0600, &ix, &err) != 0) {
        fprintf(stderr, "ship child: %s\n", err.message);
        return 3;
    }
    stele_sink_options_t so;
    ship_sink_options(&so, "main", argv[4], COLLECTION);
    shipper_config_t cfg = {.sink = &so, .journal_dir = argv[2], .source = argv[3], .index = ix};
    shipper_t *s;
    if (shipper_start(&cfg, &s, &err) != 0) {
        fprintf(stderr, "ship child: %s\n", err.message);
        return 3;
    }
    for (;;)
        pause();
}

static pid_t
spawn_ship_child(fan_in_t *f, int i)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        char *argv[] = {"/proc/self/exe", "--ship-child",    f->sj[i].dir,
                        f->sj[i].source,  (char *)f->so.uri, NULL};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    return pid;
}

static void
kill_child(pid_t pid)
{
    kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ;
}

/* What source i has shipped: its shipper's position, or the checkpoint its child saved
 * (LMDB: visible across processes). */
static uint64_t
shipped_of(fan_in_t *f, int i)
{
    if (f->shipper[i])
        return shipper_shipped_seq(f->shipper[i]);
    uint64_t seq = 0;
    index_get_checkpoint(f->sj[i].index, "main", &seq, NULL);
    return seq;
}

typedef struct source_ref {
    fan_in_t *f;
    int i;
} source_ref_t;

static uint64_t
shipped_of_ref(void *ctx)
{
    source_ref_t *r = ctx;
    return shipped_of(r->f, r->i);
}

static void
wait_all_shipped(fan_in_t *f, uint64_t per_source)
{
    for (int i = 0; i < N_SOURCES; i++) {
        source_ref_t r = {f, i};
        if (ship_wait_for(shipped_of_ref, &r, per_source, WAIT_MS) != 0)
            fail_msg("source %s shipped %llu of %llu", f->sj[i].source,
                     (unsigned long long)shipped_of(f, i), (unsigned long long)per_source);
    }
}

static void
start_shippers(fan_in_t *f)
{
    for (int i = 0; i < N_SOURCES; i++) {
        if (is_child_source(i)) {
            f->child[i] = spawn_ship_child(f, i);
            continue;
        }
        shipper_config_t cfg = {.sink = &f->so,
                                .journal_dir = f->sj[i].dir,
                                .source = f->sj[i].source,
                                .index = f->sj[i].index};
        stele_error_t err = {0};
        if (shipper_start(&cfg, &f->shipper[i], &err) != 0)
            fail_msg("shipper_start: %s", err.message);
    }
}

/* Appends one phase's records to every journal, batches of 50 (one sync each). */
static void
append_phase(fan_in_t *f)
{
    for (int i = 0; i < N_SOURCES; i++)
        assert_int_equal(ship_journal_append(&f->sj[i], RECORDS_PER_PHASE, 50, 64), 0);
}

static void
test_twenty_sources_ship_exactly_once_through_a_server_restart_and_a_shipper_kill(void **state)
{
    fan_in_t *f = *state;
    ship_sink_options(&f->so, "main", f->server.uri, COLLECTION);
    ship_drop_collection(&f->so);
    for (int i = 0; i < N_SOURCES; i++) {
        char source[16];
        snprintf(source, sizeof source, "host-%02d", i);
        assert_int_equal(ship_journal_create(&f->sj[i], source), 0);
    }
    int64_t start_ms = ship_fixture_now_ms();
    append_phase(f);
    start_shippers(f);
    wait_all_shipped(f, RECORDS_PER_PHASE / 2);

    /* The server goes away while every host keeps appending, and comes back. */
    int rc = mongo_server_restart(&f->server);
    if (rc == MONGO_SERVER_EXTERNAL)
        printf("# external server: its restart is skipped\n");
    else
        assert_int_equal(rc, 0);
    append_phase(f);
    wait_all_shipped(f, RECORDS_PER_PHASE + RECORDS_PER_PHASE / 2);

    /* The shipping processes die mid-batch; their hosts keep appending; they come back. */
    for (int i = 0; i < N_SOURCES; i++)
        if (is_child_source(i))
            kill_child(f->child[i]);
    append_phase(f);
    for (int i = 0; i < N_SOURCES; i++)
        if (is_child_source(i))
            f->child[i] = spawn_ship_child(f, i);

    const uint64_t n = (uint64_t)RECORDS_PER_PHASE * N_PHASES;
    wait_all_shipped(f, n);
    double secs = (double)(ship_fixture_now_ms() - start_ms) / 1000.0;
    printf("# %d sources x %llu records shipped in %.1f s\n", N_SOURCES, (unsigned long long)n,
           secs);
    for (int i = 0; i < N_SOURCES; i++) {
        if (f->shipper[i])
            shipper_stop(f->shipper[i], 1000);
        else
            kill_child(f->child[i]);
        f->shipper[i] = NULL;
    }
    assert_int_equal(ship_check_exactly_once_many(f->sj, N_SOURCES, &f->so, n), 0);
}

static int
group_setup(void **state)
{
    static fan_in_t f;
    if (mongo_server_start(&f.server) != 0)
        return -1;
    *state = &f;
    return 0;
}

static int
group_teardown(void **state)
{
    fan_in_t *f = *state;
    for (int i = 0; i < N_SOURCES; i++) {
        if (f->shipper[i])
            shipper_stop(f->shipper[i], 0);
        if (f->sj[i].journal)
            ship_journal_destroy(&f->sj[i], 0);
    }
    mongo_server_destroy(&f->server);
    return 0;
}

int
main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--ship-child") == 0)
        return ship_child_main(argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_twenty_sources_ship_exactly_once_through_a_server_restart_and_a_shipper_kill),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
