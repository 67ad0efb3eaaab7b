/*
 * test_ship_faults.c: shipping through failures of the server, the network and the shipper
 * itself (its process killed, its allocations failing). Each test runs its own test server, appends
 * throughout (appends never depend on MongoDB), and ends with the exactly-once check. Tests that
 * freeze, kill or replace the server skip when STELE_TEST_MONGO_URI names an external server (they
 * cannot control it). Randomised moments print their seed and honour STELE_TEST_SEED. A signed
 * journal's statement that needed retries ends its outage with "sink recovered".
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "mongo_server.h"
#include "ship.h"
#include "ship_fixture.h"
#include "tcp_proxy.h"
#include "test_child.h"

#define FAULT_WAIT_MS 180000
/* Socket and selection timeouts of the fault tests' URIs: short, so a frozen server is
 * noticed quickly, and the stall below lasts longer than them. */
#define FAULT_SOCKET_TIMEOUT_MS 5000
#define FAULT_STALL_MS 7000
#define FAULT_BATCH_DOCS 200
/* How long the out-of-memory loop waits for a run to stop or finish; a run that does
 * neither is a silent exit. */
#define OOM_WAIT_MS 20000

typedef struct fault_test {
    mongo_server_t server;
    ship_journal_t sj;
    stele_sink_options_t so;
    char uri[640];
    shipper_t *shipper;
} fault_test_t;

static uint64_t
get_shipped(void *ctx)
{
    return shipper_shipped_seq(ctx);
}

static void
fault_uri(fault_test_t *t, int port)
{
    if (port > 0)
        snprintf(t->uri, sizeof t->uri,
                 "mongodb://127.0.0.1:%d/?socketTimeoutMS=%d&serverSelectionTimeoutMS=%d&"
                 "connectTimeoutMS=%d",
                 port, FAULT_SOCKET_TIMEOUT_MS, FAULT_SOCKET_TIMEOUT_MS, FAULT_SOCKET_TIMEOUT_MS);
    else
        snprintf(t->uri, sizeof t->uri, "%s", t->server.uri);
}

static int
fault_setup(void **state)
{
    fault_test_t *t = calloc(1, sizeof *t);
    if (!t || mongo_server_start(&t->server) != 0)
        return -1;
    fault_uri(t, t->server.is_external ? 0 : t->server.port);
    *state = t;
    return 0;
}

static int
fault_teardown(void **state)
{
    fault_test_t *t = *state;
    shipper_stop(t->shipper, 0);
    if (t->sj.journal)
        ship_journal_destroy(&t->sj, 0);
    mongo_server_destroy(&t->server);
    free(t);
    return 0;
}

static void
fault_start(fault_test_t *t, const char *source, const char *uri)
{
    assert_int_equal(ship_journal_create(&t->sj, source), 0);
    ship_sink_options(&t->so, "main", uri, source);
    /* Small batches: each insert stays far below the socket timeout even on a loaded
     * machine, so only the injected faults make attempts fail. */
    t->so.batch_docs = FAULT_BATCH_DOCS;
    ship_drop_collection(&t->so);
    shipper_config_t cfg = {
        .sink = &t->so, .journal_dir = t->sj.dir, .source = t->sj.source, .index = t->sj.index};
    stele_error_t err = {0};
    assert_int_equal(shipper_start(&cfg, &t->shipper, &err), 0);
}

static void
fault_finish(fault_test_t *t, uint64_t n)
{
    assert_int_equal(ship_wait_for(get_shipped, t->shipper, n, FAULT_WAIT_MS), 0);
    stele_sink_stats_t st;
    shipper_stats(t->shipper, n, &st);
    printf("# %s: batches %llu retries %llu last error: %s\n", t->sj.source,
           (unsigned long long)st.batches, (unsigned long long)st.retries, st.last_error);
    assert_int_equal(st.is_stopped, 0);
    assert_int_equal(st.dead_letters, 0);
    shipper_stop(t->shipper, 1000);
    t->shipper = NULL;
    /* The exactly-once check reads through the real server port, not a proxy. */
    stele_sink_options_t direct = t->so;
    direct.uri = t->server.uri;
    assert_int_equal(ship_check_exactly_once(&t->sj, &direct, n), 0);
}

static int
skip_if_external(fault_test_t *t)
{
    if (!t->server.is_external)
        return 0;
    printf("# skipped: needs to control the server; STELE_TEST_MONGO_URI names an external "
           "one\n");
    return 1;
}

static void
test_ship_survives_server_stall_longer_than_socket_timeout(void **state)
{
    fault_test_t *t = *state;
    if (skip_if_external(t))
        skip();
    fault_start(t, "stall", t->uri);
    assert_int_equal(ship_journal_append(&t->sj, 5000, 250, 256), 0);
    assert_int_equal(ship_wait_for(get_shipped, t->shipper, 1000, FAULT_WAIT_MS), 0);
    assert_int_equal(mongo_server_signal(&t->server, SIGSTOP), 0);
    int64_t stalled_at = ship_fixture_now_ms();
    assert_int_equal(ship_journal_append(&t->sj, 5000, 250, 256), 0); /* local durability */
    usleep((useconds_t)(FAULT_STALL_MS - (ship_fixture_now_ms() - stalled_at)) * 1000);
    stele_sink_stats_t st;
    shipper_stats(t->shipper, 10000, &st);
    assert_true(st.shipped_seq < 10000);
    assert_true(st.retries > 0);
    assert_true(st.last_error[0] != '\0');
    assert_int_equal(mongo_server_signal(&t->server, SIGCONT), 0);
    fault_finish(t, 10000);
}

static void
test_ship_survives_server_kill_and_restart_mid_batch(void **state)
{
    fault_test_t *t = *state;
    if (skip_if_external(t))
        skip();
    fault_start(t, "killed", t->server.uri);
    assert_int_equal(ship_journal_append(&t->sj, 20000, 500, 512), 0);
    for (int round = 0; round < 2; round++) {
        /* Progress before the kill; never past what the journal holds, since a quick
         * shipper may already have caught up with it. */
        uint64_t shipped = shipper_shipped_seq(t->shipper);
        uint64_t appended = 20000 + 1000 * (uint64_t)round;
        uint64_t want = shipped + 2000 < appended ? shipped + 2000 : appended;
        if (ship_wait_for(get_shipped, t->shipper, want, FAULT_WAIT_MS) != 0) {
            stele_sink_stats_t st;
            shipper_stats(t->shipper, 22000, &st);
            fail_msg("round %d: shipped %llu -> %llu, retries %llu, stopped %d, last error: %s",
                     round, (unsigned long long)shipped, (unsigned long long)st.shipped_seq,
                     (unsigned long long)st.retries, st.is_stopped, st.last_error);
        }
        assert_int_equal(mongo_server_signal(&t->server, SIGKILL), 0);
        assert_int_equal(ship_journal_append(&t->sj, 1000, 250, 512), 0);
        usleep(500 * 1000);
        assert_int_equal(mongo_server_restart(&t->server), 0);
    }
    fault_finish(t, 22000);
}

static void
test_ship_data_dir_replaced_by_older_copy_then_reship_restores(void **state)
{
    fault_test_t *t = *state;
    if (skip_if_external(t))
        skip();
    fault_start(t, "rollback", t->server.uri);
    assert_int_equal(ship_journal_append(&t->sj, 3000, 300, 64), 0);
    assert_int_equal(ship_wait_for(get_shipped, t->shipper, 3000, FAULT_WAIT_MS), 0);
    char snapshot[PATH_MAX + 16];
    snprintf(snapshot, sizeof snapshot, "%s/older", t->server.base_dir);
    assert_int_equal(mongo_server_signal(&t->server, SIGTERM), 0);
    assert_int_equal(mongo_server_copy_data(&t->server, snapshot), 0);
    assert_int_equal(mongo_server_restart(&t->server), 0);
    assert_int_equal(ship_journal_append(&t->sj, 2000, 200, 64), 0);
    assert_int_equal(ship_wait_for(get_shipped, t->shipper, 5000, FAULT_WAIT_MS), 0);
    /* The server loses 3001..5000: its data directory goes back to the older copy while
     * the shipper runs and appends go on. */
    assert_int_equal(mongo_server_signal(&t->server, SIGTERM), 0);
    assert_int_equal(mongo_server_replace_data(&t->server, snapshot), 0);
    assert_int_equal(ship_journal_append(&t->sj, 1000, 200, 64), 0);
    assert_int_equal(mongo_server_restart(&t->server), 0);
    assert_int_equal(ship_wait_for(get_shipped, t->shipper, 6000, FAULT_WAIT_MS), 0);
    stele_remote_report_t rep;
    stele_error_t err = {0};
    assert_int_equal(stele_remote_check(t->sj.dir, &t->so, 0, 0, &rep, &err), STELE_EINTEGRITY);
    assert_int_equal(rep.records_checked, 6000);
    assert_int_equal(rep.n_missing, 2000);
    assert_int_equal(rep.n_missing_ranges, 1);
    assert_int_equal(rep.missing[0].first_seq, 3001);
    assert_int_equal(rep.missing[0].last_seq, 5000);
    assert_int_equal(rep.n_extra + rep.n_mismatched, 0);
    uint64_t inserted = 0;
    assert_int_equal(stele_reship(t->sj.dir, &t->so, rep.missing[0].first_seq,
                                  rep.missing[0].last_seq, &inserted, &err),
                     0);
    assert_int_equal(inserted, 2000);
    fault_finish(t, 6000);
}

static void
test_ship_survives_connection_resets_and_refusals(void **state)
{
    fault_test_t *t = *state;
    if (skip_if_external(t))
        skip();
    unsigned seed = ship_test_seed();
    tcp_proxy_t *proxy;
    assert_int_equal(tcp_proxy_start(t->server.port, &proxy), 0);
    char proxied[640];
    snprintf(proxied, sizeof proxied,
             "mongodb://127.0.0.1:%d/?socketTimeoutMS=%d&serverSelectionTimeoutMS=%d",
             tcp_proxy_port(proxy), FAULT_SOCKET_TIMEOUT_MS, FAULT_SOCKET_TIMEOUT_MS);
    fault_start(t, "resets", proxied);
    const uint64_t n = 20000;
    assert_int_equal(ship_journal_append(&t->sj, n, 500, 256), 0);
    int round = 0;
    while (shipper_shipped_seq(t->shipper) < n && round < 12) {
        /* Reset every connection somewhere inside the next ~1 MB sent: mid-batch. */
        tcp_proxy_reset_after(proxy, 1000 + (uint64_t)rand_r(&seed) % 1000000);
        usleep(300 * 1000);
        if (round++ == 3) {
            tcp_proxy_set_refusing(proxy, 1);
            usleep(1500 * 1000);
            tcp_proxy_set_refusing(proxy, 0);
        }
    }
    tcp_proxy_reset_after(proxy, 0);
    printf("# proxy reset %llu connections\n", (unsigned long long)tcp_proxy_resets(proxy));
    assert_true(tcp_proxy_resets(proxy) > 0);
    fault_finish(t, n);
    tcp_proxy_stop(proxy);
}

/* stderr sent to a file while a test runs, so that it can read the engine's log lines. */
typedef struct stderr_capture {
    char path[512];
    int saved_fd;
} stderr_capture_t;

static void
stderr_capture_begin(stderr_capture_t *c, const char *dir)
{
    snprintf(c->path, sizeof c->path, "%s/stderr.log", dir);
    fflush(stderr);
    c->saved_fd = dup(STDERR_FILENO);
    int fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0 && c->saved_fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

/* 1 once the captured text holds `part`. */
static int
stderr_capture_has(const stderr_capture_t *c, const char *part)
{
    char text[65536];
    FILE *f = fopen(c->path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return strstr(text, part) != NULL;
}

/* Restores stderr and copies the captured lines onto it, for the record. */
static void
stderr_capture_end(stderr_capture_t *c)
{
    fflush(stderr);
    dup2(c->saved_fd, STDERR_FILENO);
    close(c->saved_fd);
    char line[4096];
    FILE *f = fopen(c->path, "r");
    while (f && fgets(line, sizeof line, f))
        fputs(line, stderr);
    if (f)
        fclose(f);
    unlink(c->path);
}

/* Polls the sink's retry counter until it reaches `want` (a bound for a broken build). */
static void
wait_for_retries(stele_t *db, uint64_t want)
{
    stele_sink_stats_t st = {0};
    for (int waited_ms = 0; waited_ms < FAULT_WAIT_MS; waited_ms += 20) {
        assert_int_equal(stele_sink_stats(db, 0, &st), 0);
        if (st.retries >= want)
            return;
        usleep(20 * 1000);
    }
    fail_msg("the sink never retried: %s", st.last_error);
}

/* A signed journal's statement that needed retries goes through the shipper's retry loop:
 * once it is stored, the sink says it recovered, although no record was shipped after the
 * outage (an idle journal takes only interval checkpoints). */
static void
test_ship_statement_delivered_after_retries_logs_sink_recovered(void **state)
{
    fault_test_t *t = *state;
    if (skip_if_external(t))
        skip();
    tcp_proxy_t *proxy;
    assert_int_equal(tcp_proxy_start(t->server.port, &proxy), 0);
    char proxied[640], dir[256], key[300], pub[300];
    snprintf(proxied, sizeof proxied,
             "mongodb://127.0.0.1:%d/?socketTimeoutMS=%d&serverSelectionTimeoutMS=%d",
             tcp_proxy_port(proxy), FAULT_SOCKET_TIMEOUT_MS, FAULT_SOCKET_TIMEOUT_MS);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/stele-statement-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    assert_non_null(mkdtemp(dir));
    snprintf(key, sizeof key, "%s/signer.key", dir);
    snprintf(pub, sizeof pub, "%s/signer.pub", dir);
    stele_error_t err = {0};
    assert_int_equal(stele_keygen(key, pub, "fault-test", &err), 0);

    ship_sink_options(&t->so, "main", proxied, "statement_retry");
    ship_drop_collection(&t->so);
    stele_options_t o;
    stele_options_init(&o);
    o.source = "statement-retry";
    o.signing_key = key;
    o.checkpoint_interval_ms = 200; /* an idle journal's statements keep coming */
    o.log_level = STELE_LOG_INFO;
    o.sinks = &t->so;
    o.n_sinks = 1;
    char journal[300];
    snprintf(journal, sizeof journal, "%s/journal", dir);
    stderr_capture_t cap;
    stderr_capture_begin(&cap, dir);
    stele_t *db = NULL;
    assert_int_equal(stele_open(journal, &o, &db, &err), 0);
    uint64_t seq = 0;
    for (int i = 0; i < 5; i++)
        assert_int_equal(stele_append_json(db, "{\"a\":1}", 7, STELE_WAIT_SHIPPED, &seq, &err), 0);
    stele_sink_stats_t before;
    assert_int_equal(stele_sink_stats(db, 0, &before), 0);

    /* No more records: what the sink retries now can only be a statement. */
    tcp_proxy_set_refusing(proxy, 1);
    tcp_proxy_reset_after(proxy, 1);
    wait_for_retries(db, before.retries + 1);
    tcp_proxy_set_refusing(proxy, 0);
    int is_recovered = 0;
    for (int waited_ms = 0; !is_recovered && waited_ms < FAULT_WAIT_MS; waited_ms += 20) {
        is_recovered = stderr_capture_has(&cap, "msg=\"sink recovered\" sink=\"main\"");
        if (!is_recovered)
            usleep(20 * 1000);
    }
    stele_sink_stats_t after;
    assert_int_equal(stele_sink_stats(db, 0, &after), 0);
    assert_int_equal(stele_close(db, &err), 0);
    stderr_capture_end(&cap);
    assert_true(is_recovered);
    assert_int_equal(after.shipped_seq, seq); /* recovered without a record to ship */
    assert_int_equal(after.is_stopped, 0);
    tcp_proxy_stop(proxy);
    ship_drop_collection(&t->so);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* The shipper in a child process of its own (this binary re-executed), so it can be
 * SIGKILLed mid-batch: argv = self --ship-child DIR SOURCE URI COLLECTION. */
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
    ship_sink_options(&so, "main", argv[4], argv[5]);
    so.batch_docs = FAULT_BATCH_DOCS;
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
spawn_ship_child(fault_test_t *t)
{
    pid_t pid = test_fork_bound();
    assert_true(pid >= 0);
    if (pid == 0) {
        char *argv[] = {"/proc/self/exe",  "--ship-child",           t->sj.dir, t->sj.source,
                        (char *)t->so.uri, (char *)t->so.collection, NULL};
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

/* The checkpoint the child shipper saved (LMDB: visible across processes). */
static uint64_t
read_checkpoint(fault_test_t *t)
{
    uint64_t seq = 0;
    assert_int_equal(index_get_checkpoint(t->sj.index, "main", &seq, NULL), 0);
    return seq;
}

static uint64_t
read_checkpoint_ctx(void *ctx)
{
    return read_checkpoint(ctx);
}

static int
wait_checkpoint(fault_test_t *t, uint64_t want)
{
    return ship_wait_for(read_checkpoint_ctx, t, want, FAULT_WAIT_MS);
}

static void
test_ship_survives_shipper_process_kill_mid_batch(void **state)
{
    fault_test_t *t = *state;
    unsigned seed = ship_test_seed();
    assert_int_equal(ship_journal_create(&t->sj, "shipkill"), 0);
    ship_sink_options(&t->so, "main", t->server.uri, "shipkill");
    ship_drop_collection(&t->so);
    const uint64_t n = 15000;
    assert_int_equal(ship_journal_append(&t->sj, n - 3000, 500, 256), 0);
    for (int round = 0; round < 3; round++) {
        uint64_t before = read_checkpoint(t);
        pid_t child = spawn_ship_child(t);
        /* Let it ship a few batches, then kill it at a random moment (a batch takes longer
         * than the gap between two, so most kills land mid-batch). */
        assert_int_equal(wait_checkpoint(t, before + 2000), 0);
        usleep((useconds_t)(rand_r(&seed) % 150) * 1000);
        kill_child(child);
        assert_int_equal(ship_journal_append(&t->sj, 1000, 500, 256), 0);
    }
    /* The last shipper runs to the end. */
    pid_t child = spawn_ship_child(t);
    int rc = wait_checkpoint(t, n);
    kill_child(child);
    assert_int_equal(rc, 0);
    stele_sink_options_t direct = t->so;
    direct.uri = t->server.uri;
    assert_int_equal(ship_check_exactly_once(&t->sj, &direct, n), 0);
}

/* Counts the allocations of a shipper's thread and fails the fail_at-th (shipper_faults_t). */
typedef struct alloc_fault {
    atomic_uint n_calls;
    unsigned fail_at;
} alloc_fault_t;

static int
fail_nth_alloc(void *ctx)
{
    alloc_fault_t *f = ctx;
    return atomic_fetch_add(&f->n_calls, 1) + 1 == f->fail_at;
}

/* Waits until the shipper stops or ships all n records; returns its statistics. */
static void
wait_stopped_or_shipped(shipper_t *s, uint64_t n, stele_sink_stats_t *st)
{
    int64_t deadline = ship_fixture_now_ms() + OOM_WAIT_MS;
    do {
        usleep(10 * 1000);
        shipper_stats(s, n, st);
    } while (!st->is_stopped && st->shipped_seq < n && ship_fixture_now_ms() < deadline);
}

/* A fault loop over the shipper thread's allocations: the n-th fails, n = 1, 2, ... until a
 * run meets no failure and ships everything. A failed allocation must never end the thread
 * silently (status showing a running sink that ships nothing): the sink stops, says "out of
 * memory", and has shipped nothing it had not; the next run resumes from the checkpoint. */
static void
test_ship_out_of_memory_in_the_shipper_stops_it_visibly(void **state)
{
    fault_test_t *t = *state;
    const uint64_t n = 300;
    assert_int_equal(ship_journal_create(&t->sj, "oom"), 0);
    assert_int_equal(ship_journal_append(&t->sj, n, 100, 16), 0);
    ship_sink_options(&t->so, "main", t->uri, "oom");
    t->so.batch_docs = 100;
    ship_drop_collection(&t->so);
    unsigned n_failed_runs = 0;
    for (unsigned fail_at = 1;; fail_at++) {
        alloc_fault_t fault = {.fail_at = fail_at};
        shipper_faults_t faults = {.fail_alloc = fail_nth_alloc, .ctx = &fault};
        shipper_config_t cfg = {.sink = &t->so,
                                .journal_dir = t->sj.dir,
                                .source = t->sj.source,
                                .index = t->sj.index,
                                .faults = &faults};
        stele_error_t err = {0};
        assert_int_equal(shipper_start(&cfg, &t->shipper, &err), 0);
        stele_sink_stats_t st;
        wait_stopped_or_shipped(t->shipper, n, &st);
        int is_failed = atomic_load(&fault.n_calls) >= fail_at;
        printf("# allocation %u: %s, shipped %llu, stopped %d: %s\n", fail_at,
               is_failed ? "failed" : "not reached", (unsigned long long)st.shipped_seq,
               st.is_stopped, st.last_error);
        shipper_stop(t->shipper, 1000);
        t->shipper = NULL;
        if (!is_failed) {
            assert_int_equal(st.is_stopped, 0);
            assert_int_equal(st.shipped_seq, n);
            break;
        }
        assert_true(st.is_stopped);
        assert_non_null(strstr(st.last_error, "out of memory"));
        uint64_t checkpoint = 0;
        assert_int_equal(index_get_checkpoint(t->sj.index, "main", &checkpoint, NULL), 0);
        assert_int_equal(st.shipped_seq, checkpoint);
        n_failed_runs++;
    }
    assert_true(n_failed_runs >= 1);
    assert_int_equal(ship_check_exactly_once(&t->sj, &t->so, n), 0);
}

/* Ships n records of a fresh journal through `proxy` to a sink with write concern w, and
 * returns how often the commands it sent named a read concern. */
static uint64_t
ship_counting_read_concerns(fault_test_t *t, tcp_proxy_t *proxy, int w, uint64_t n)
{
    char proxied[640];
    snprintf(proxied, sizeof proxied, "mongodb://127.0.0.1:%d/?serverSelectionTimeoutMS=%d",
             tcp_proxy_port(proxy), FAULT_SOCKET_TIMEOUT_MS);
    assert_int_equal(ship_journal_create(&t->sj, "readconcern"), 0);
    assert_int_equal(ship_journal_append(&t->sj, n, 100, 16), 0);
    ship_sink_options(&t->so, "main", proxied, "readconcern");
    t->so.w = w;
    ship_drop_collection(&t->so);
    tcp_proxy_watch(proxy, "readConcern");
    shipper_config_t cfg = {
        .sink = &t->so, .journal_dir = t->sj.dir, .source = t->sj.source, .index = t->sj.index};
    stele_error_t err = {0};
    assert_int_equal(shipper_start(&cfg, &t->shipper, &err), 0);
    assert_int_equal(ship_wait_for(get_shipped, t->shipper, n, FAULT_WAIT_MS), 0);
    shipper_stop(t->shipper, 1000);
    t->shipper = NULL;
    uint64_t seen = tcp_proxy_watched(proxy);
    ship_journal_destroy(&t->sj, 0);
    memset(&t->sj, 0, sizeof t->sj);
    return seen;
}

/* What the sink already holds is read as durably as the write concern asks: with
 * w=majority the resume query (a fresh journal has no checkpoint, so the shipper asks the
 * sink where it stands) carries read concern majority. Read without it, a document that a
 * fail-over later rolls back could become the resume point, and the records up to it would
 * never be shipped. With w=1 no read concern is sent. */
static void
test_ship_reads_the_sink_with_read_concern_majority_under_w_majority(void **state)
{
    fault_test_t *t = *state;
    if (skip_if_external(t))
        skip();
    tcp_proxy_t *proxy;
    assert_int_equal(tcp_proxy_start(t->server.port, &proxy), 0);
    assert_true(ship_counting_read_concerns(t, proxy, -1, 1000) >= 1);
    assert_int_equal(ship_counting_read_concerns(t, proxy, 1, 1000), 0);
    tcp_proxy_stop(proxy);
}

int
main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--ship-child") == 0) {
        stele_forget_driver_counters(); /* it is SIGKILLed: leave no /dev/shm file */
        return ship_child_main(argv);
    }
    if (getenv("STELE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("STELE_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ship_survives_server_stall_longer_than_socket_timeout,
                                        fault_setup, fault_teardown),
        cmocka_unit_test_setup_teardown(test_ship_survives_server_kill_and_restart_mid_batch,
                                        fault_setup, fault_teardown),
        cmocka_unit_test_setup_teardown(
            test_ship_data_dir_replaced_by_older_copy_then_reship_restores, fault_setup,
            fault_teardown),
        cmocka_unit_test_setup_teardown(
            test_ship_reads_the_sink_with_read_concern_majority_under_w_majority, fault_setup,
            fault_teardown),
        cmocka_unit_test_setup_teardown(
            test_ship_statement_delivered_after_retries_logs_sink_recovered, fault_setup,
            fault_teardown),
        cmocka_unit_test_setup_teardown(test_ship_survives_connection_resets_and_refusals,
                                        fault_setup, fault_teardown),
        cmocka_unit_test_setup_teardown(test_ship_survives_shipper_process_kill_mid_batch,
                                        fault_setup, fault_teardown),
        cmocka_unit_test_setup_teardown(test_ship_out_of_memory_in_the_shipper_stops_it_visibly,
                                        fault_setup, fault_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
