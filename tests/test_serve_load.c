/*
 * test_serve_load.c: `stele serve` under load (label "load"; its figures are in
 * docs/protocol.md, section "Measured"):
 *  - 10,000 concurrent connections, each pipelining events at wait=durable: zero errors,
 *    every acknowledged event read back exactly once under its acknowledged seq; the
 *    server's RSS is printed idle-connected and at its peak;
 *  - throughput: 64 client connections at wait=durable against 64 in-process writer
 *    threads at the same settings, in the same run; the server must reach at least half.
 * The test raises its own RLIMIT_NOFILE (the server inherits it).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bson/bson.h>
#include <cmocka.h>

#include "stele.h"
#include "serve_fixture.h"

enum {
    LOAD_CONNS = 10000,
    LOAD_EVENTS_PER_CONN = 3,
    LOAD_FD_SLACK = 512,     /* fds besides the connections: journal, epoll, test */
    LOAD_TIME_LIMIT_S = 300, /* the whole 10k phase must finish within this */
    TP_WRITERS = 64,
    TP_RUN_MS = 2000,
    TP_ROUNDS = 3, /* alternate server / in-process; best of each */
};

static int64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
raise_fd_limit(rlim_t need)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max < need) {
        rl.rlim_max = need; /* allowed for root; otherwise the message below says what to do */
    }
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        fail_msg("need %lu file descriptors; raise the hard limit (ulimit -Hn)",
                 (unsigned long)need);
}

/* ---- 10,000 connections ------------------------------------------------------------------------
 */

typedef struct load_conn {
    int fd;
    int n_replies;
    size_t in_len;
    char in[256];
    uint64_t seq[LOAD_EVENTS_PER_CONN];
} load_conn_t;

typedef struct load_check {
    load_conn_t *conns;
    long n_records;
    long n_unexpected;
    uint8_t *seen;
} load_check_t;

static int64_t
record_int(const stele_record_t *rec, const char *key)
{
    bson_t doc;
    bson_iter_t it;
    if (!bson_init_static(&doc, rec->bson, rec->bson_len))
        return -1;
    if (!bson_iter_init_find(&it, &doc, key) || !BSON_ITER_HOLDS_NUMBER(&it))
        return -1;
    return bson_iter_as_int64(&it);
}

static void
load_check_record(void *ctx, const stele_record_t *rec)
{
    load_check_t *lc = ctx;
    int64_t c = record_int(rec, "c"), i = record_int(rec, "i");
    lc->n_records++;
    if (c < 0 || c >= LOAD_CONNS || i < 0 || i >= LOAD_EVENTS_PER_CONN ||
        lc->seen[c * LOAD_EVENTS_PER_CONN + i]++ || lc->conns[c].seq[i] != rec->seq)
        lc->n_unexpected++;
}

/* Reads what is there; returns the number of new errors. */
static int
load_conn_read(load_conn_t *lc, long *n_done)
{
    int n_errors = 0;
    ssize_t n = read(lc->fd, lc->in + lc->in_len, sizeof lc->in - lc->in_len);
    if (n <= 0)
        return (n < 0 && errno == EAGAIN) ? 0 : 1;
    lc->in_len += (size_t)n;
    char *nl;
    while ((nl = memchr(lc->in, '\n', lc->in_len)) != NULL) {
        *nl = '\0';
        uint64_t seq = 0;
        if (ts_reply_code(lc->in, &seq) != 0 || lc->n_replies >= LOAD_EVENTS_PER_CONN) {
            fprintf(stderr, "connection reply: %s\n", lc->in);
            n_errors++;
        } else {
            lc->seq[lc->n_replies++] = seq;
            if (lc->n_replies == LOAD_EVENTS_PER_CONN)
                (*n_done)++;
        }
        size_t used = (size_t)(nl - lc->in) + 1;
        memmove(lc->in, lc->in + used, lc->in_len - used);
        lc->in_len -= used;
    }
    return n_errors;
}

static void
test_serve_holds_10000_connections_with_every_ack_exactly_once(void **state)
{
    (void)state;
    char dir[256];
    ts_server_t srv;
    long rss_start, hwm_start, rss_idle, hwm_idle, rss_end, hwm_end;
    raise_fd_limit(LOAD_CONNS + LOAD_FD_SLACK);
    ts_make_dir(dir, sizeof dir, "load10k");
    int exit_code = -1;
    /* One user opens every connection here: its cap (64 by default) is lifted. */
    static const char *const caps[] = {"--serve-max-conns-per-uid", "20000", NULL};
    if (ts_server_start(&srv, dir, &exit_code, caps) != 0)
        fail_msg("server did not start (exit %d)", exit_code);
    assert_int_equal(ts_proc_rss_kib(srv.pid, &rss_start, &hwm_start), 0);
    int64_t t0 = now_ms();
    load_conn_t *conns = calloc(LOAD_CONNS, sizeof *conns);
    for (int c = 0; c < LOAD_CONNS; c++) {
        conns[c].fd = ts_connect(srv.socket_path);
        if (conns[c].fd < 0)
            fail_msg("connection %d: %s", c, strerror(errno));
    }
    int64_t t_connected = now_ms();
    usleep(200000); /* let the server accept the backlog */
    assert_int_equal(ts_proc_rss_kib(srv.pid, &rss_idle, &hwm_idle), 0);

    /* Every connection pipelines its events in one write, then all replies are awaited. */
    for (int c = 0; c < LOAD_CONNS; c++) {
        char req[512];
        int len = 0;
        for (int i = 0; i < LOAD_EVENTS_PER_CONN; i++)
            len += snprintf(req + len, sizeof req - (size_t)len,
                            "{\"$event\":{\"c\":%d,\"i\":%d,\"what\":\"login\"},"
                            "\"$wait\":\"durable\"}\n",
                            c, i);
        assert_int_equal(ts_write_all(conns[c].fd, req, (size_t)len), 0);
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    assert_true(ep >= 0);
    for (int c = 0; c < LOAD_CONNS; c++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[c]};
        assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, conns[c].fd, &ev), 0);
    }
    long n_done = 0, n_errors = 0;
    struct epoll_event events[256];
    while (n_done < LOAD_CONNS && n_errors == 0) {
        if ((now_ms() - t0) / 1000 > LOAD_TIME_LIMIT_S)
            fail_msg("only %ld of %d connections answered within %d s", n_done, LOAD_CONNS,
                     LOAD_TIME_LIMIT_S);
        int n = epoll_wait(ep, events, 256, 1000);
        for (int k = 0; k < n; k++)
            n_errors += load_conn_read(events[k].data.ptr, &n_done);
    }
    int64_t t_done = now_ms();
    assert_int_equal(ts_proc_rss_kib(srv.pid, &rss_end, &hwm_end), 0);
    close(ep);
    for (int c = 0; c < LOAD_CONNS; c++)
        close(conns[c].fd);
    assert_int_equal(n_errors, 0);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);

    load_check_t lc = {.conns = conns, .seen = calloc(LOAD_CONNS * LOAD_EVENTS_PER_CONN, 1)};
    assert_int_equal(ts_read_journal(dir, load_check_record, &lc),
                     LOAD_CONNS * LOAD_EVENTS_PER_CONN);
    assert_int_equal(lc.n_unexpected, 0);
    stele_verify_report_t report;
    assert_int_equal(stele_verify(dir, 0, 0, &report, NULL), 0);
    printf("10k connections: %d connections x %d events at wait=durable; connect %lld ms, "
           "all acknowledged %lld ms later; 0 errors; %ld records read back, each once under "
           "its acknowledged seq; chain verified\n",
           LOAD_CONNS, LOAD_EVENTS_PER_CONN, (long long)(t_connected - t0),
           (long long)(t_done - t_connected), lc.n_records);
    printf("10k connections: server RSS %ld KiB at start, %ld KiB with %d idle connections, "
           "%ld KiB after the load (peak %ld KiB)\n",
           rss_start, rss_idle, LOAD_CONNS, rss_end, hwm_end);
    free(lc.seen);
    free(conns);
    ts_remove_dir(dir);
}

/* ---- throughput: server vs in-process
 * ------------------------------------------------------------ */

typedef struct tp_writer {
    const char *dir; /* server mode: connect here */
    stele_t *db;     /* in-process mode */
    int id;
    volatile int *stop;
    long n_appended;
    int last_code;
} tp_writer_t;

static void *
tp_writer_main(void *arg)
{
    tp_writer_t *w = arg;
    stele_client_t *c = NULL;
    char json[128];
    if (!w->db && (w->last_code = stele_client_connect(w->dir, NULL, &c, NULL)) != 0)
        return NULL;
    while (!__atomic_load_n(w->stop, __ATOMIC_RELAXED)) {
        uint64_t seq;
        int n = snprintf(json, sizeof json,
                         "{\"who\":\"writer-%d\",\"what\":\"update\",\"n\":%ld,\"ok\":true}", w->id,
                         w->n_appended);
        int rc = w->db
                     ? stele_append_json(w->db, json, (size_t)n, STELE_WAIT_DURABLE, &seq, NULL)
                     : stele_client_append_json(c, json, (size_t)n, STELE_WAIT_DURABLE, &seq, NULL);
        if (rc != 0) {
            w->last_code = rc;
            break;
        }
        w->n_appended++;
    }
    stele_client_close(c);
    return NULL;
}

/* Runs TP_WRITERS writers for TP_RUN_MS; returns appends per second. */
static double
tp_run(const char *dir, stele_t *db)
{
    tp_writer_t writers[TP_WRITERS];
    pthread_t threads[TP_WRITERS];
    volatile int stop = 0;
    for (int i = 0; i < TP_WRITERS; i++) {
        writers[i] = (tp_writer_t){.dir = dir, .db = db, .id = i, .stop = &stop};
        assert_int_equal(pthread_create(&threads[i], NULL, tp_writer_main, &writers[i]), 0);
    }
    int64_t t0 = now_ms();
    usleep(TP_RUN_MS * 1000);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    long total = 0;
    for (int i = 0; i < TP_WRITERS; i++) {
        pthread_join(threads[i], NULL);
        if (writers[i].last_code != 0)
            fail_msg("writer %d: %s", i, stele_errname(writers[i].last_code));
        total += writers[i].n_appended;
    }
    int64_t elapsed_ms = now_ms() - t0;
    return (double)total * 1000.0 / (double)(elapsed_ms > 0 ? elapsed_ms : 1);
}

static void
test_serve_64_clients_throughput_is_measured_beside_in_process(void **state)
{
    (void)state;
    char server_dir[256], local_dir[256];
    ts_server_t srv;
    double best_server = 0, best_local = 0;
    ts_make_dir(server_dir, sizeof server_dir, "tp-server");
    ts_make_dir(local_dir, sizeof local_dir, "tp-local");
    for (int round = 0; round < TP_ROUNDS; round++) {
        int exit_code = -1;
        static const char *const caps[] = {"--serve-max-conns-per-uid", "1000", NULL};
        if (ts_server_start(&srv, server_dir, &exit_code, caps) != 0)
            fail_msg("server did not start (exit %d)", exit_code);
        double server_rate = tp_run(server_dir, NULL);
        assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);

        stele_t *db = NULL;
        stele_error_t err = {0};
        if (stele_open(local_dir, NULL, &db, &err) != 0)
            fail_msg("open %s: %s", local_dir, err.message);
        double local_rate = tp_run(NULL, db);
        assert_int_equal(stele_close(db, NULL), 0);
        printf("throughput round %d: %d clients via stele serve %.0f appends/s, %d in-process "
               "threads %.0f appends/s (wait=durable, sync=always, default commit policy)\n",
               round, TP_WRITERS, server_rate, TP_WRITERS, local_rate);
        if (server_rate > best_server)
            best_server = server_rate;
        if (local_rate > best_local)
            best_local = local_rate;
    }
    printf("throughput: best of %d rounds: server %.0f/s, in-process %.0f/s, ratio %.2f "
           "(target >= 0.50)\n",
           TP_ROUNDS, best_server, best_local, best_server / best_local);
    /* Reported, not asserted: the project measures performance as ratios with the
     * benchmark and writes them down (docs/protocol.md), never as a timed assertion in a
     * unit test on a shared machine. What this test asserts is that both sides ran. */
    assert_true(best_server > 0 && best_local > 0);
    ts_remove_dir(server_dir);
    ts_remove_dir(local_dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_holds_10000_connections_with_every_ack_exactly_once),
        cmocka_unit_test(test_serve_64_clients_throughput_is_measured_beside_in_process),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
