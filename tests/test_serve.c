/*
 * test_serve.c: `stele serve` end to end: the server runs as its own process (exec of
 * STELE_SERVE_BIN, see serve_fixture.c); tests talk to it over raw sockets or through
 * the client library (stele_client_*), stop or SIGKILL it, and read the journal back
 * directly with stele_reader_* and stele_verify.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <bson/bson.h>
#include <cmocka.h>

#include "stele.h"
#include "serve_fixture.h"
#include "test_util.h"

enum { REPLY_TIMEOUT_MS = 20000 };

/* Sanitizer allocators quarantine freed memory, so memory bounds are only held in plain
 * builds (the figures are printed either way). */
#ifdef STELE_TEST_SANITIZED
#define RSS_BOUND_HOLDS(cond) ((void)(cond), 1)
#else
#define RSS_BOUND_HOLDS(cond) (cond)
#endif

static int64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Field `key` of a record's event as an int64, or -1. */
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

static int
file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void
start_server(ts_server_t *srv, const char *dir, const char *const *extra)
{
    int exit_code = -1;
    if (ts_server_start(srv, dir, &exit_code, extra) != 0)
        fail_msg("server did not start (exit %d); see %s/serve.log", exit_code, dir);
}

/* ---- ordering and read-back ------------------------------------------------------------------ */

typedef struct order_check {
    int64_t next_i;
    long n_mismatch;
} order_check_t;

static void
check_order(void *ctx, const stele_record_t *rec)
{
    order_check_t *oc = ctx;
    if (record_int(rec, "i") != oc->next_i)
        oc->n_mismatch++;
    oc->next_i++;
}

static void
test_serve_acknowledges_pipelined_requests_in_order(void **state)
{
    (void)state;
    char dir[256];
    ts_server_t srv;
    enum { N = 600 };
    static const char *const waits[] = {"none", "written", "durable"};
    ts_make_dir(dir, sizeof dir, "order");
    start_server(&srv, dir, NULL);
    int fd = ts_connect(srv.socket_path);
    assert_true(fd >= 0);
    /* All requests in one burst: bare events and envelopes of every local level mixed. */
    bson_string_t *burst = bson_string_new(NULL);
    for (int i = 0; i < N; i++) {
        if (i % 4 == 3)
            bson_string_append_printf(burst, "{\"i\":%d,\"who\":\"alice\"}\n", i);
        else
            bson_string_append_printf(burst, "{\"$event\":{\"i\":%d},\"$wait\":\"%s\"}\n", i,
                                      waits[i % 3]);
    }
    assert_int_equal(ts_write_all(fd, burst->str, burst->len), 0);
    bson_string_free(burst, true);
    uint64_t prev_seq = 0;
    char line[1024];
    for (int i = 0; i < N; i++) {
        uint64_t seq = 0;
        assert_true(ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) >= 0);
        assert_int_equal(ts_reply_code(line, &seq), 0);
        assert_true(seq > prev_seq);
        prev_seq = seq;
    }
    close(fd);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    order_check_t oc = {0};
    assert_int_equal(ts_read_journal(dir, check_order, &oc), N);
    assert_int_equal(oc.n_mismatch, 0);
    ts_remove_dir(dir);
}

/* With sync=never nothing becomes durable until a flush: the server flushes for a durable
 * request, as `stele insert` does in-process, instead of answering it only at shutdown. */
static void
test_serve_answers_durable_requests_with_sync_never(void **state)
{
    (void)state;
    char dir[256], config[300], line[256];
    ts_server_t srv;
    ts_make_dir(dir, sizeof dir, "syncnever");
    snprintf(config, sizeof config, "%s.ini", dir);
    FILE *f = fopen(config, "w");
    assert_non_null(f);
    fputs("sync = never\n", f);
    fclose(f);
    const char *const extra[] = {"--config", config, NULL};
    start_server(&srv, dir, extra);
    int fd = ts_connect(srv.socket_path);
    assert_true(fd >= 0);
    for (int i = 0; i < 3; i++) {
        const char req[] = "{\"$event\":{\"who\":\"alice\"},\"$wait\":\"durable\"}\n";
        assert_int_equal(ts_write_all(fd, req, sizeof req - 1), 0);
        uint64_t seq = 0;
        assert_true(ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) >= 0);
        assert_int_equal(ts_reply_code(line, &seq), 0);
        assert_int_equal(seq, (uint64_t)i + 1);
    }
    close(fd);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    unlink(config);
    ts_remove_dir(dir);
}

static void
test_serve_answers_half_closed_client_then_closes(void **state)
{
    (void)state;
    char dir[256], line[256];
    ts_server_t srv;
    ts_make_dir(dir, sizeof dir, "halfclose");
    start_server(&srv, dir, NULL);
    int fd = ts_connect(srv.socket_path);
    assert_true(fd >= 0);
    /* The last request has no '\n': end of stream ends it. */
    const char req[] = "{\"i\":0}\n{\"i\":1}\n{\"i\":2}";
    assert_int_equal(ts_write_all(fd, req, sizeof req - 1), 0);
    shutdown(fd, SHUT_WR);
    for (int i = 0; i < 3; i++) {
        uint64_t seq;
        assert_true(ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) >= 0);
        assert_int_equal(ts_reply_code(line, &seq), 0);
    }
    assert_int_equal(ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS), -1); /* EOF */
    close(fd);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    assert_int_equal(ts_read_journal(dir, NULL, NULL), 3);
    ts_remove_dir(dir);
}

/* ---- bad requests ------------------------------------------------------------------------------
 */

typedef struct bad_row {
    const char *what;
    const char *line; /* NULL: built by the test (see below) */
    size_t len;       /* 0: strlen(line) */
    int code;
    int alt_code; /* another acceptable code (0: none) */
} bad_row_t;

#define ROW(what, text, code, alt)                                                                 \
    {                                                                                              \
        what, text, sizeof text - 1, code, alt                                                     \
    }

static void
test_serve_rejects_bad_requests_and_keeps_connection_usable(void **state)
{
    (void)state;
    char dir[256];
    ts_server_t srv;
    enum { MAX_LINE = 4096 };
    char deep[2 * 300 + 16];
    char oversize[3 * MAX_LINE];
    int depth = 300;
    size_t w = 0;
    for (int i = 0; i < depth; i++)
        w += (size_t)snprintf(deep + w, sizeof deep - w, "%s", i ? "[" : "{\"a\":");
    for (int i = 1; i < depth; i++)
        deep[w++] = ']';
    deep[w++] = '}';
    memset(oversize, 'x', sizeof oversize);
    oversize[0] = '{';
    const bad_row_t rows[] = {
        ROW("malformed JSON", "{\"a\":", STELE_EJSON, 0),
        ROW("trailing garbage", "{\"a\":1} x", STELE_EJSON, 0),
        ROW("unquoted key", "{a:1}", STELE_EJSON, 0),
        ROW("array, not an object", "[1,2,3]", STELE_ENOTOBJECT, 0),
        ROW("number, not an object", "42", STELE_ENOTOBJECT, STELE_EJSON),
        ROW("string, not an object", "\"hello\"", STELE_ENOTOBJECT, STELE_EJSON),
        ROW("null, not an object", "null", STELE_ENOTOBJECT, STELE_EJSON),
        ROW("empty line", "", STELE_EEMPTY, 0),
        ROW("blank line", " \t \r", STELE_EEMPTY, 0),
        ROW("empty object", "{}", STELE_EEMPTY, 0),
        ROW("invalid UTF-8 in a value", "{\"a\":\"\xff\xfe\"}", STELE_EUTF8, STELE_EJSON),
        ROW("invalid UTF-8 in a key", "{\"\xc3\x28\":1}", STELE_EUTF8, STELE_EJSON),
        ROW("truncated UTF-8 in an envelope", "{\"$event\":{\"a\":\"\xe2\x82\"}}", STELE_EUTF8,
            STELE_EJSON),
        ROW("top-level $-key", "{\"$set\":{\"a\":1}}", STELE_EDOLLARKEY, 0),
        ROW("nested $-key", "{\"q\":{\"$gt\":1}}", STELE_EDOLLARKEY, 0),
        ROW("NUL in a key", "{\"a\\u0000b\":1}", STELE_EKEYNUL, STELE_EJSON),
        ROW("repeated key", "{\"actor\":\"alice\",\"actor\":\"mallory\"}", STELE_EAMBIGUOUS, 0),
        ROW("dotted key in an envelope's event", "{\"$event\":{\"ip.v4\":\"10.0.0.1\"}}",
            STELE_EAMBIGUOUS, 0),
        ROW("number out of range", "{\"n\":1e999}", STELE_ENUMBER, STELE_EJSON),
        ROW("unknown wait level", "{\"$event\":{\"a\":1},\"$wait\":\"eventually\"}",
            STELE_EPROTOCOL, 0),
        ROW("wait level not a string", "{\"$event\":{\"a\":1},\"$wait\":2}", STELE_EPROTOCOL, 0),
        ROW("envelope event not an object", "{\"$event\":[1]}", STELE_ENOTOBJECT, 0),
        ROW("envelope with an unknown key", "{\"$event\":{\"a\":1},\"user\":\"x\"}",
            STELE_EPROTOCOL, 0),
        ROW("envelope without an event", "{\"$wait\":\"none\"}", STELE_EPROTOCOL, 0),
        ROW("envelope repeating $wait",
            "{\"$event\":{\"a\":1},\"$wait\":\"none\",\"$wait\":\"durable\"}", STELE_EJSON,
            STELE_EPROTOCOL),
        ROW("envelope repeating $event", "{\"$event\":{\"a\":1},\"$event\":{\"b\":2}}",
            STELE_EPROTOCOL, 0),
        /* Envelopes not spelled as the client library writes them: the event is still
         * checked as JSON text, as a bare event is (extended JSON, int64 range, NaN). */
        ROW("envelope event with an extended-JSON date",
            "{\"$wait\":\"none\",\"$event\":{\"a\":{\"$date\":\"2020-01-01T00:00:00Z\"}}}",
            STELE_EDOLLARKEY, 0),
        ROW("envelope event with an integer beyond int64",
            "{\"$wait\":\"none\",\"$event\":{\"n\":99999999999999999999}}", STELE_ENUMBER, 0),
        ROW("envelope event with NaN", "{\"$wait\":\"none\",\"$event\":{\"n\":NaN}}", STELE_ENUMBER,
            STELE_EJSON),
        ROW("two envelopes on one line",
            "{\"$wait\":\"none\",\"$event\":{\"a\":1}}{\"$wait\":\"none\",\"$event\":{\"a\":2}}",
            STELE_EJSON, 0),
        ROW("wait=shipped without a sink", "{\"$event\":{\"a\":1},\"$wait\":\"shipped\"}",
            STELE_ENOSINK, 0),
        ROW("binary garbage", "\x00\x01\x02\xfe\xff\x7f", STELE_EJSON, STELE_ENOTOBJECT),
        {"nested too deeply", deep, w, STELE_EDEPTH, STELE_EJSON},
        {"oversize line", oversize, sizeof oversize, STELE_ETOOBIG, 0},
    };
    const size_t n_rows = sizeof rows / sizeof rows[0];
    const char *const extra[] = {"--max-line-bytes", "4096", NULL};
    ts_make_dir(dir, sizeof dir, "badreq");
    start_server(&srv, dir, extra);
    int fd = ts_connect(srv.socket_path);
    assert_true(fd >= 0);
    char line[8192];
    for (size_t i = 0; i < n_rows; i++) {
        char good[64];
        int good_len = snprintf(good, sizeof good, "\n{\"good\":%zu}\n", i);
        assert_int_equal(ts_write_all(fd, rows[i].line, rows[i].len), 0);
        assert_int_equal(ts_write_all(fd, good, (size_t)good_len), 0);
        uint64_t seq = 0;
        if (ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) < 0)
            fail_msg("row %zu (%s): no reply", i, rows[i].what);
        int code = ts_reply_code(line, &seq);
        if (code != rows[i].code && (rows[i].alt_code == 0 || code != rows[i].alt_code))
            fail_msg("row %zu (%s): got %s, want %s; reply %s", i, rows[i].what,
                     stele_errname(code), stele_errname(rows[i].code), line);
        assert_non_null(strstr(line, "\"message\":\""));
        /* The same connection still works. */
        if (ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) < 0)
            fail_msg("row %zu (%s): no reply to the good request after it", i, rows[i].what);
        if (ts_reply_code(line, &seq) != 0)
            fail_msg("row %zu (%s): good request after it failed: %s", i, rows[i].what, line);
    }
    close(fd);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    /* Bad requests changed nothing: only the good ones are in the journal. */
    assert_int_equal(ts_read_journal(dir, NULL, NULL), (long)n_rows);
    stele_verify_report_t report;
    assert_int_equal(stele_verify(dir, 0, 0, &report, NULL), 0);
    printf("bad-request table: %zu rows, each answered with its error\n", n_rows);
    ts_remove_dir(dir);
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

/* 1 when one line of the log at `path` holds both needles (b may be NULL). */
static int
log_line_contains(const char *path, const char *a, const char *b)
{
    FILE *f = fopen(path, "re");
    char line[2048];
    int found = 0;
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, a) != NULL && (!b || strstr(line, b) != NULL);
    fclose(f);
    return found;
}

static int
log_contains(const char *path, const char *needle)
{
    return log_line_contains(path, needle, NULL);
}

static void
test_serve_second_server_on_same_journal_fails_with_locked(void **state)
{
    (void)state;
    char dir[256], other[256], pid_text[32], pid_path[300], second_socket[300];
    ts_server_t first, second;
    ts_make_dir(dir, sizeof dir, "locked");
    ts_make_dir(other, sizeof other, "locked-other");
    start_server(&first, dir, NULL);
    snprintf(pid_path, sizeof pid_path, "%s/stele.pid", dir);
    /* The server writes its pid file just after its socket listens, where the fixture sees
     * it ready: a bound for a broken build, not a timing assertion. */
    for (int waited_ms = 0; !file_exists(pid_path) && waited_ms < 30000; waited_ms += 10)
        usleep(10 * 1000);
    assert_true(file_exists(pid_path));
    snprintf(pid_text, sizeof pid_text, "%ld", (long)first.pid);

    /* Even with a socket of its own, the second server must not start. */
    snprintf(second_socket, sizeof second_socket, "%s.sock", other);
    const char *const extra[] = {"--socket", second_socket, NULL};
    int exit_code = -1;
    assert_int_equal(ts_server_start(&second, dir, &exit_code, extra), -1);
    assert_int_equal(exit_code, 3);
    /* One error line names the code and the holder's pid. */
    assert_true(log_line_contains(second.log_path, "STELE_ELOCKED", pid_text));
    assert_false(file_exists(second_socket));

    /* The first server is untouched and still serves. */
    stele_client_t *c = NULL;
    uint64_t seq = 0;
    assert_true(file_exists(first.socket_path));
    assert_int_equal(stele_client_connect(dir, NULL, &c, NULL), 0);
    assert_int_equal(stele_client_append_json(c, "{\"a\":1}", 7, STELE_WAIT_DURABLE, &seq, NULL),
                     0);
    stele_client_close(c);
    assert_int_equal(ts_server_stop(&first, SIGTERM), 0);
    ts_remove_dir(dir);
    ts_remove_dir(other);
}

/* A socket file is replaced only when nothing listens on it (connect() refused). A live
 * socket of another kind at the --socket path (a datagram socket such as /dev/log, given by
 * mistake) answers connect() with EPROTOTYPE, not "refused": it must be left to its owner,
 * not unlinked and replaced. */
static void
test_serve_leaves_a_live_socket_of_another_kind_alone(void **state)
{
    (void)state;
    char dir[256], sock[300];
    ts_server_t srv;
    ts_make_dir(dir, sizeof dir, "dgram");
    snprintf(sock, sizeof sock, "%s.sock", dir);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    assert_true(strlen(sock) < sizeof addr.sun_path);
    memcpy(addr.sun_path, sock, strlen(sock) + 1);
    int dgram = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(dgram >= 0);
    assert_int_equal(bind(dgram, (struct sockaddr *)&addr, sizeof addr), 0);
    struct stat before, after;
    assert_int_equal(stat(sock, &before), 0);
    const char *const extra[] = {"--socket", sock, NULL};
    int exit_code = -1;
    int started = ts_server_start(&srv, dir, &exit_code, extra);
    if (started == 0)
        ts_server_stop(&srv, SIGTERM);
    int is_left_alone = stat(sock, &after) == 0 && after.st_ino == before.st_ino;
    int is_logged = log_contains(srv.log_path, "socket path is in use");
    close(dgram);
    unlink(sock);
    ts_remove_dir(dir);
    if (started == 0 || !is_left_alone)
        fail_msg("the server %s and the datagram socket was %s",
                 started == 0 ? "started" : "exited", is_left_alone ? "left alone" : "replaced");
    assert_int_equal(exit_code, 3);
    assert_true(is_logged);
}

static void
test_serve_sigterm_answers_received_requests_and_cleans_up(void **state)
{
    (void)state;
    char dir[256], line[1024], path[300];
    ts_server_t srv;
    enum { N = 2000 };
    ts_make_dir(dir, sizeof dir, "sigterm");
    start_server(&srv, dir, NULL);
    int fd = ts_connect(srv.socket_path);
    assert_true(fd >= 0);
    bson_string_t *burst = bson_string_new(NULL);
    for (int i = 0; i < N; i++)
        bson_string_append_printf(burst, "{\"i\":%d}\n", i);
    assert_int_equal(ts_write_all(fd, burst->str, burst->len), 0);
    bson_string_free(burst, true);
    kill(srv.pid, SIGTERM); /* before reading a single reply */
    long n_acked = 0;
    for (int i = 0; i < N; i++) {
        uint64_t seq;
        if (ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) < 0)
            break;
        int code = ts_reply_code(line, &seq);
        if (code == 0)
            n_acked++;
        else
            assert_int_equal(code, STELE_ECLOSED);
    }
    close(fd);
    assert_int_equal(ts_server_stop(&srv, 0), 0);
    /* Everything sent before the signal was received, so it is all acknowledged. */
    assert_int_equal(n_acked, N);
    assert_false(file_exists(srv.socket_path));
    snprintf(path, sizeof path, "%s/stele.pid", dir);
    assert_false(file_exists(path));
    assert_true(log_contains(srv.log_path, "msg=\"shutting down\""));
    assert_true(log_contains(srv.log_path, "msg=\"stopped\""));
    assert_int_equal(ts_read_journal(dir, NULL, NULL), N);
    ts_remove_dir(dir);
}

/* The final flush makes every appended event durable. With --drain-timeout-ms 0 the server
 * does not wait for its ack threads to notice, but a written or durable request the flush
 * covered must still get its seq: STELE_ECLOSED ("stopped before seq N reached wait level
 * durable") would be false, and a client that retries would append the event twice. */
static void
test_serve_drain_timeout_zero_still_acknowledges_what_the_flush_made_durable(void **state)
{
    (void)state;
    char dir[256], line[1024];
    ts_server_t srv;
    enum { N = 2000 };
    const char *const extra[] = {"--drain-timeout-ms", "0", NULL};
    ts_make_dir(dir, sizeof dir, "drain0");
    start_server(&srv, dir, extra);
    int fd = ts_connect(srv.socket_path);
    assert_true(fd >= 0);
    bson_string_t *burst = bson_string_new(NULL);
    for (int i = 0; i < N; i++) {
        if (i % 2)
            bson_string_append_printf(burst, "{\"i\":%d}\n", i);
        else
            bson_string_append_printf(burst, "{\"$event\":{\"i\":%d},\"$wait\":\"written\"}\n", i);
    }
    assert_int_equal(ts_write_all(fd, burst->str, burst->len), 0);
    bson_string_free(burst, true);
    kill(srv.pid, SIGTERM); /* before reading a single reply */
    long n_acked = 0, n_closed = 0;
    for (int i = 0; i < N; i++) {
        uint64_t seq;
        if (ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) < 0)
            break;
        int code = ts_reply_code(line, &seq);
        if (code == 0)
            n_acked++;
        else if (code == STELE_ECLOSED)
            n_closed++;
        else
            fail_msg("reply %d: %s", i, line);
    }
    close(fd);
    assert_int_equal(ts_server_stop(&srv, 0), 0);
    long n_records = ts_read_journal(dir, NULL, NULL);
    ts_remove_dir(dir);
    if (n_acked != N)
        fail_msg("%ld of %d acknowledged, %ld refused as not durable; %ld in the journal", n_acked,
                 N, n_closed, n_records);
    assert_int_equal(n_records, N);
}

static void
test_serve_drain_timeout_fails_only_requests_short_of_their_level(void **state)
{
    (void)state;
    char dir[256], line[1024];
    ts_server_t srv;
    /* A sink that can never acknowledge: nothing reaches wait level shipped. */
    const char *const extra[] = {"--mongo", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200",
                                 "--drain-timeout-ms", "300", NULL};
    ts_make_dir(dir, sizeof dir, "drain");
    start_server(&srv, dir, extra);
    int fd = ts_connect(srv.socket_path);
    assert_true(fd >= 0);
    const char req[] = "{\"$event\":{\"a\":1},\"$wait\":\"shipped\"}\n"
                       "{\"$event\":{\"a\":2},\"$wait\":\"durable\"}\n";
    assert_int_equal(ts_write_all(fd, req, sizeof req - 1), 0);
    usleep(300000);
    kill(srv.pid, SIGTERM);
    uint64_t seq = 0;
    assert_true(ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) >= 0);
    assert_int_equal(ts_reply_code(line, &seq), STELE_ECLOSED);
    assert_non_null(strstr(line, "shipped"));
    /* Behind it in order, but durable: acknowledged, not failed. */
    assert_true(ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) >= 0);
    assert_int_equal(ts_reply_code(line, &seq), 0);
    assert_int_equal(seq, 2);
    close(fd);
    assert_int_equal(ts_server_stop(&srv, 0), 0);
    assert_true(log_contains(srv.log_path, "msg=\"drain timed out\" unanswered=1"));
    assert_int_equal(ts_read_journal(dir, NULL, NULL), 2);
    ts_remove_dir(dir);
}

/* Starts a server whose descriptor limit is fd_limit (the test keeps its own) and opens
 * n_conns connections, each sending one request: more than the server has descriptors for,
 * so the rest wait in the listen backlog. The connection caps are set above the limit: what
 * is tested is the server running out of descriptors (for any reason), which its default
 * caps keep connections alone from doing. */
static void
start_server_short_of_descriptors(ts_server_t *srv, const char *dir, int fd_limit, int *fds,
                                  int n_conns)
{
    struct rlimit saved, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    low = saved;
    low.rlim_cur = (rlim_t)fd_limit;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    static const char *const above_the_limit[] = {"--serve-max-conns", "100000",
                                                  "--serve-max-conns-per-uid", "100000", NULL};
    int started = ts_server_start(srv, dir, NULL, above_the_limit);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    assert_int_equal(started, 0);
    for (int i = 0; i < n_conns; i++) {
        fds[i] = ts_connect(srv->socket_path);
        assert_true(fds[i] >= 0);
        char req[64];
        int n = snprintf(req, sizeof req, "{\"conn\":%d}\n", i);
        assert_int_equal(ts_write_all(fds[i], req, (size_t)n), 0);
    }
}

static void
test_serve_pauses_accept_when_out_of_descriptors_and_resumes(void **state)
{
    (void)state;
    char dir[256], line[256];
    ts_server_t srv;
    enum { FD_LIMIT = 64, N_CONNS = 100 };
    int fds[N_CONNS];
    ts_make_dir(dir, sizeof dir, "emfile");
    start_server_short_of_descriptors(&srv, dir, FD_LIMIT, fds, N_CONNS);
    /* Each answered connection that closes lets the server accept one more. */
    for (int i = 0; i < N_CONNS; i++) {
        uint64_t seq;
        if (ts_read_line(fds[i], line, sizeof line, REPLY_TIMEOUT_MS) < 0)
            fail_msg("connection %d never answered", i);
        assert_int_equal(ts_reply_code(line, &seq), 0);
        close(fds[i]);
    }
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    assert_true(log_contains(srv.log_path, "accept paused"));
    assert_int_equal(ts_read_journal(dir, NULL, NULL), N_CONNS);
    ts_remove_dir(dir);
}

/* Polls the server's log until it contains `needle`; 1 when it did within timeout_ms. */
static int
wait_for_log(const char *path, const char *needle, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    while (!log_contains(path, needle)) {
        if (now_ms() > deadline)
            return 0;
        usleep(10 * 1000);
    }
    return 1;
}

/* CPU time (user + system) a process has used so far, in ms; -1 when unreadable. */
static long
proc_cpu_ms(pid_t pid)
{
    char path[64], fields[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    unsigned long utime, stime;
    if (test_proc_stat_fields(path, fields, sizeof fields) != 0 ||
        sscanf(fields, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return -1;
    return (long)((utime + stime) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

/* The descriptors come back without any connection closing (here the limit is raised from
 * outside, as when another part of the process or a transient spike released them): the
 * paused accept must be retried on its own, not only when a connection closes. */
static void
test_serve_resumes_accept_when_descriptors_free_up_without_a_close(void **state)
{
    (void)state;
    char dir[256], line[256];
    ts_server_t srv;
    enum { FD_LIMIT = 64, N_CONNS = 100, PAUSED_MS = 1500, RESUME_BOUND_MS = 10000 };
    struct rlimit saved;
    int fds[N_CONNS];
    ts_make_dir(dir, sizeof dir, "emfile-noclose");
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    start_server_short_of_descriptors(&srv, dir, FD_LIMIT, fds, N_CONNS);
    if (!wait_for_log(srv.log_path, "accept paused", REPLY_TIMEOUT_MS))
        fail_msg("the server never ran out of descriptors; see %s", srv.log_path);
    /* Paused long enough for a few retries, and they must not spin. */
    long cpu_before = proc_cpu_ms(srv.pid);
    usleep(PAUSED_MS * 1000);
    long paused_cpu_ms = proc_cpu_ms(srv.pid) - cpu_before;
    printf("server CPU while paused %d ms: %ld ms\n", (int)PAUSED_MS, paused_cpu_ms);
    assert_true(cpu_before >= 0 && paused_cpu_ms < PAUSED_MS / 4);
    assert_int_equal(prlimit(srv.pid, RLIMIT_NOFILE, &saved, NULL), 0);
    /* No connection is closed before every one of them is answered. */
    int64_t freed_at = now_ms();
    int n_answered = 0;
    uint64_t seq;
    while (n_answered < N_CONNS) {
        int left_ms = (int)(freed_at + RESUME_BOUND_MS - now_ms());
        if (ts_read_line(fds[n_answered], line, sizeof line, left_ms > 0 ? left_ms : 1) < 0 ||
            ts_reply_code(line, &seq) != 0)
            break;
        n_answered++;
    }
    if (n_answered < N_CONNS) {
        ts_server_stop(&srv, SIGKILL);
        fail_msg("connection %d not answered %d ms after descriptors were freed", n_answered,
                 (int)RESUME_BOUND_MS);
    }
    printf("all %d connections answered %lld ms after descriptors were freed\n", N_CONNS,
           (long long)(now_ms() - freed_at));
    for (int i = 0; i < N_CONNS; i++)
        close(fds[i]);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    assert_int_equal(ts_read_journal(dir, NULL, NULL), N_CONNS);
    ts_remove_dir(dir);
}

/* ---- memory bounds -----------------------------------------------------------------------------
 */

static void
test_serve_client_that_stops_reading_stalls_only_itself(void **state)
{
    (void)state;
    char dir[256];
    ts_server_t srv;
    long rss0, hwm0, rss1, hwm1;
    ts_make_dir(dir, sizeof dir, "noread");
    start_server(&srv, dir, NULL);
    assert_int_equal(ts_proc_rss_kib(srv.pid, &rss0, &hwm0), 0);
    /* A pipelines requests and never reads a reply, until the server stops reading it. */
    int hog = ts_connect(srv.socket_path);
    assert_true(hog >= 0);
    fcntl(hog, F_SETFL, O_NONBLOCK);
    static const char req[] = "{\"$event\":{\"hog\":1},\"$wait\":\"none\"}\n";
    size_t sent = 0;
    int64_t blocked_since = 0;
    for (;;) {
        ssize_t n = send(hog, req, sizeof req - 1, MSG_NOSIGNAL);
        if (n > 0) {
            sent += (size_t)n;
            blocked_since = 0;
            continue;
        }
        assert_true(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        if (!blocked_since)
            blocked_since = now_ms();
        else if (now_ms() - blocked_since > 500)
            break; /* the server no longer reads from it */
        usleep(10000);
    }
    /* Another client is served normally meanwhile. */
    stele_client_t *c = NULL;
    int64_t t0 = now_ms();
    assert_int_equal(stele_client_connect(dir, NULL, &c, NULL), 0);
    for (int i = 0; i < 50; i++) {
        uint64_t seq;
        assert_int_equal(
            stele_client_append_json(c, "{\"other\":1}", 11, STELE_WAIT_DURABLE, &seq, NULL), 0);
    }
    int64_t other_ms = now_ms() - t0;
    stele_client_close(c);
    assert_int_equal(ts_proc_rss_kib(srv.pid, &rss1, &hwm1), 0);
    printf("stalled client: sent %zu bytes before the server stopped reading it; server RSS "
           "%ld -> %ld KiB; 50 durable appends by another client took %lld ms\n",
           sent, rss0, rss1, (long long)other_ms);
    /* The hog's bytes are held by the kernel's socket buffers, not by the server. */
    assert_true(RSS_BOUND_HOLDS(rss1 - rss0 < 16 * 1024));
    assert_true(other_ms < 10000);
    close(hog);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    ts_remove_dir(dir);
}

static void
test_serve_discards_oversize_line_without_buffering_it(void **state)
{
    (void)state;
    char dir[256], line[1024];
    ts_server_t srv;
    long rss0, hwm0, rss1, hwm1;
    enum { CHUNK = 1 << 20, TOTAL_MIB = 64 };
    ts_make_dir(dir, sizeof dir, "oversize");
    start_server(&srv, dir, NULL); /* default limit: 2 MiB */
    assert_int_equal(ts_proc_rss_kib(srv.pid, &rss0, &hwm0), 0);
    int fd = ts_connect(srv.socket_path);
    assert_true(fd >= 0);
    char *chunk = malloc(CHUNK);
    memset(chunk, 'x', CHUNK);
    memcpy(chunk, "{\"big\":\"", 8);
    for (int i = 0; i < TOTAL_MIB; i++)
        assert_int_equal(ts_write_all(fd, chunk, CHUNK), 0);
    free(chunk);
    assert_int_equal(ts_write_all(fd, "\"}\n{\"small\":1}\n", 15), 0);
    uint64_t seq;
    assert_true(ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) >= 0);
    assert_int_equal(ts_reply_code(line, &seq), STELE_ETOOBIG);
    assert_true(ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) >= 0);
    assert_int_equal(ts_reply_code(line, &seq), 0);
    assert_int_equal(ts_proc_rss_kib(srv.pid, &rss1, &hwm1), 0);
    printf("64 MiB line: server peak RSS %ld -> %ld KiB\n", hwm0, hwm1);
    assert_true(RSS_BOUND_HOLDS(hwm1 - hwm0 < 16 * 1024));
    close(fd);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    ts_remove_dir(dir);
}

/* ---- SIGKILL during load
 * ------------------------------------------------------------------------- */

enum { KILL_ROUNDS = 3, KILL_WRITERS = 8, KILL_WINDOW = 32, KILL_MAX_EVENTS = 100000 };
/* The kill comes only once the server has acknowledged this many events in the round (then
 * after a random delay): a round that killed a server which acknowledged nothing would
 * prove nothing. KILL_WAIT_MS bounds the wait against a server that never acknowledges. */
enum { KILL_MIN_ACKED = 4 * KILL_WRITERS, KILL_WAIT_MS = 60000 };

typedef struct kill_writer {
    const char *dir;
    int round, id;
    uint64_t *acked_seq;     /* [i] = seq acknowledged for event i */
    _Atomic int64_t n_acked; /* events 0 .. n_acked-1 were acknowledged, in order */
    int last_code;
} kill_writer_t;

static void *
kill_writer_main(void *arg)
{
    kill_writer_t *w = arg;
    stele_client_t *c = NULL;
    char json[96];
    if ((w->last_code = stele_client_connect(w->dir, NULL, &c, NULL)) != 0)
        return NULL;
    int64_t next = 0;
    for (;;) {
        while (next < KILL_MAX_EVENTS && stele_client_pending(c) < KILL_WINDOW) {
            int n = snprintf(json, sizeof json, "{\"r\":%d,\"w\":%d,\"i\":%lld}", w->round, w->id,
                             (long long)next);
            w->last_code = stele_client_send_json(c, json, (size_t)n, STELE_WAIT_DURABLE, NULL);
            if (w->last_code != 0)
                goto done;
            next++;
        }
        if (stele_client_pending(c) == 0)
            break;
        uint64_t seq = 0;
        w->last_code = stele_client_recv(c, &seq, NULL);
        if (w->last_code != 0)
            break;
        w->acked_seq[atomic_load(&w->n_acked)] = seq;
        atomic_fetch_add(&w->n_acked, 1);
    }
done:
    stele_client_close(c);
    return NULL;
}

typedef struct kill_check {
    kill_writer_t (*writers)[KILL_WRITERS];
    long n_records;
    long n_duplicates;
    long n_wrong_seq;
    uint8_t *seen[KILL_ROUNDS][KILL_WRITERS];
} kill_check_t;

static void
kill_check_record(void *ctx, const stele_record_t *rec)
{
    kill_check_t *kc = ctx;
    int64_t r = record_int(rec, "r"), w = record_int(rec, "w"), i = record_int(rec, "i");
    kc->n_records++;
    if (r < 0 || r >= KILL_ROUNDS || w < 0 || w >= KILL_WRITERS || i < 0 || i >= KILL_MAX_EVENTS)
        return;
    if (kc->seen[r][w][i]++)
        kc->n_duplicates++;
    const kill_writer_t *kw = &kc->writers[r][w];
    if (i < kw->n_acked && kw->acked_seq[i] != rec->seq)
        kc->n_wrong_seq++; /* acknowledged under another seq */
}

/* The events the round's writers have had acknowledged so far. */
static int64_t
kill_round_acked(kill_writer_t *round_writers)
{
    int64_t n = 0;
    for (int w = 0; w < KILL_WRITERS; w++)
        n += atomic_load(&round_writers[w].n_acked);
    return n;
}

/* Waits until the server has acknowledged KILL_MIN_ACKED events of the round. */
static void
kill_wait_for_acks(kill_writer_t *round_writers, int round)
{
    for (int waited_ms = 0; kill_round_acked(round_writers) < KILL_MIN_ACKED; waited_ms++) {
        if (waited_ms == KILL_WAIT_MS)
            fail_msg("round %d: the server acknowledged %lld events in %d ms (want %d before "
                     "the kill)",
                     round, (long long)kill_round_acked(round_writers), KILL_WAIT_MS,
                     KILL_MIN_ACKED);
        usleep(1000);
    }
}

/* Verifies the chain and that every acknowledged event of rounds 0..last is there once. */
static void
kill_check_journal(const char *dir, kill_writer_t (*writers)[KILL_WRITERS], int last_round)
{
    kill_check_t kc = {.writers = writers};
    stele_verify_report_t report;
    stele_error_t err = {0};
    int vrc = stele_verify(dir, 0, 0, &report, &err);
    if (vrc != 0)
        fail_msg("verify failed: %s (%s at seq %llu)", err.message, report.what,
                 (unsigned long long)report.bad_seq);
    for (int r = 0; r <= last_round; r++)
        for (int w = 0; w < KILL_WRITERS; w++)
            kc.seen[r][w] = calloc(KILL_MAX_EVENTS, 1);
    assert_true(ts_read_journal(dir, kill_check_record, &kc) >= 0);
    long missing = 0, acked = 0;
    for (int r = 0; r <= last_round; r++) {
        for (int w = 0; w < KILL_WRITERS; w++) {
            for (int64_t i = 0; i < writers[r][w].n_acked; i++)
                missing += kc.seen[r][w][i] == 0;
            acked += (long)writers[r][w].n_acked;
            free(kc.seen[r][w]);
        }
    }
    printf("after round %d and a restart: %ld acknowledged, %ld records, %ld acknowledged "
           "missing, %ld duplicated, %ld under another seq; chain verified (%llu records)\n",
           last_round, acked, kc.n_records, missing, kc.n_duplicates, kc.n_wrong_seq,
           (unsigned long long)report.records_checked);
    assert_int_equal(missing, 0);
    assert_int_equal(kc.n_duplicates, 0);
    assert_int_equal(kc.n_wrong_seq, 0);
}

static void
test_serve_sigkill_during_load_never_acknowledges_falsely(void **state)
{
    (void)state;
    char dir[256];
    ts_server_t srv;
    static kill_writer_t writers[KILL_ROUNDS][KILL_WRITERS];
    pthread_t threads[KILL_WRITERS];
    unsigned seed = ts_seed("test_serve_sigkill_during_load_never_acknowledges_falsely");
    srand(seed);
    ts_make_dir(dir, sizeof dir, "sigkill");
    for (int round = 0; round < KILL_ROUNDS; round++) {
        /* Each round starts a server on the journal the last SIGKILL left behind. */
        start_server(&srv, dir, NULL);
        for (int w = 0; w < KILL_WRITERS; w++) {
            writers[round][w] = (kill_writer_t){.dir = dir, .round = round, .id = w};
            writers[round][w].acked_seq = calloc(KILL_MAX_EVENTS, sizeof(uint64_t));
            assert_int_equal(
                pthread_create(&threads[w], NULL, kill_writer_main, &writers[round][w]), 0);
        }
        kill_wait_for_acks(writers[round], round);
        usleep((useconds_t)(rand() % 400000));
        assert_int_equal(ts_server_stop(&srv, SIGKILL), 128 + SIGKILL);
        for (int w = 0; w < KILL_WRITERS; w++) {
            pthread_join(threads[w], NULL);
            /* Each writer saw the connection break: an error, not a hang, not a success. */
            assert_true(writers[round][w].last_code != 0);
        }
        assert_true(kill_round_acked(writers[round]) >= KILL_MIN_ACKED);
        /* Restart (recovery runs in the new server), stop cleanly, check from outside. */
        start_server(&srv, dir, NULL);
        assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
        kill_check_journal(dir, writers, round);
    }
    for (int r = 0; r < KILL_ROUNDS; r++)
        for (int w = 0; w < KILL_WRITERS; w++)
            free(writers[r][w].acked_seq);
    ts_remove_dir(dir);
}

/* ---- stele_serve_run in a program of its own ----------------------------------------------- */

static void
test_serve_run_refuses_bad_options_and_touches_nothing(void **state)
{
    (void)state;
    char dir[256];
    ts_make_dir(dir, sizeof dir, "servebadopts");
    stele_serve_options_t so;
    stele_serve_options_init(&so);
    assert_int_equal(so.default_wait, STELE_WAIT_DURABLE);
    assert_int_equal(so.max_line_bytes, 2u * 1024u * 1024u);
    assert_int_equal(so.drain_timeout_ms, 5000);
    assert_int_equal(so.log_level, STELE_LOG_INFO);
    assert_null(so.socket_path);
    stele_serve_options_t bad[4] = {so, so, so, so};
    bad[0].max_line_bytes = 1;
    bad[1].drain_timeout_ms = STELE_SERVE_MAX_DRAIN_TIMEOUT_MS + 1;
    bad[2].default_wait = (stele_wait_t)4;
    bad[3].log_level = (stele_log_level_t)9;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        stele_error_t err = {0};
        assert_int_equal(stele_serve_run(dir, NULL, &bad[i], &err), STELE_EINVAL);
        assert_non_null(strstr(err.message, "stele_serve_run"));
    }
    struct stat st;
    assert_int_equal(stat(dir, &st), -1); /* the journal was never created */
    stele_log_level_t level = STELE_LOG_ERROR;
    assert_int_equal(stele_log_level_parse("debug", &level), 0);
    assert_int_equal(level, STELE_LOG_DEBUG);
    assert_int_equal(stele_log_level_parse("verbose", &level), STELE_EINVAL);
    assert_int_equal(level, STELE_LOG_DEBUG);
    ts_remove_dir(dir);
}

typedef struct in_process_server {
    const char *dir;
    const stele_serve_options_t *serve;
    int rc;
    stele_error_t err;
} in_process_server_t;

static void *
in_process_server_main(void *arg)
{
    in_process_server_t *s = arg;
    s->rc = stele_serve_run(s->dir, NULL, s->serve, &s->err);
    return NULL;
}

/* The server a program runs itself: it serves from the calling thread, and a SIGTERM sent
 * to that thread (the signal it blocks and reads) drains and stops it cleanly, removing its
 * socket and pid file. */
static void
test_serve_run_in_process_serves_until_a_signal_to_its_thread(void **state)
{
    (void)state;
    char dir[256], sock[300], pid_file[300];
    ts_make_dir(dir, sizeof dir, "serveinproc");
    snprintf(sock, sizeof sock, "%s.sock", dir);
    snprintf(pid_file, sizeof pid_file, "%s.pid", dir);
    stele_serve_options_t so;
    stele_serve_options_init(&so);
    so.socket_path = sock;
    so.pid_path = pid_file;
    so.log_level = STELE_LOG_WARN;
    in_process_server_t srv = {.dir = dir, .serve = &so};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, in_process_server_main, &srv), 0);
    stele_client_t *c = NULL;
    stele_error_t err = {0};
    int rc = -ENOENT;
    for (int attempt = 0; attempt < 30000 && rc != 0; attempt++) { /* until it listens */
        rc = stele_client_connect(NULL, sock, &c, &err);
        if (rc != 0)
            usleep(1000);
    }
    assert_int_equal(rc, 0);
    uint64_t seq = 0;
    assert_int_equal(stele_client_append_json(c, "{\"a\":1}", 7, STELE_WAIT_DURABLE, &seq, &err),
                     0);
    assert_true(seq == 1);
    stele_client_close(c);
    assert_int_equal(pthread_kill(thread, SIGTERM), 0);
    pthread_join(thread, NULL);
    if (srv.rc != 0)
        fail_msg("stele_serve_run: %s %s", stele_errname(srv.rc), srv.err.message);
    assert_int_equal(access(sock, F_OK), -1);
    assert_int_equal(access(pid_file, F_OK), -1);
    assert_int_equal(ts_read_journal(dir, NULL, NULL), 1);
    ts_remove_dir(dir);
}

/* ---- the client library -----------------------------------------------------------------------
 */

static void
test_client_connect_without_server_says_so(void **state)
{
    (void)state;
    char dir[256];
    ts_server_t srv;
    stele_client_t *c = NULL;
    stele_error_t err = {0};
    ts_make_dir(dir, sizeof dir, "noserver");
    assert_int_equal(stele_client_connect(dir, NULL, &c, &err), -ENOENT);
    assert_non_null(strstr(err.message, "stele.sock"));
    assert_true(strlen(err.hint) > 0);
    assert_null(c);
    /* A socket left by a killed server: refused, and the next server replaces it. */
    start_server(&srv, dir, NULL);
    assert_int_equal(ts_server_stop(&srv, SIGKILL), 128 + SIGKILL);
    assert_int_equal(stele_client_connect(dir, NULL, &c, &err), -ECONNREFUSED);
    start_server(&srv, dir, NULL);
    assert_true(log_contains(srv.log_path, "removed stale socket"));
    assert_int_equal(stele_client_connect(dir, NULL, &c, &err), 0);
    stele_client_close(c);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    ts_remove_dir(dir);
}

static void
test_client_reaches_server_on_a_socket_path_of_its_own(void **state)
{
    (void)state;
    char dir[256], sock[300], too_long[200];
    ts_server_t srv;
    stele_client_t *c = NULL;
    stele_error_t err = {0};
    uint64_t seq = 0;
    ts_make_dir(dir, sizeof dir, "sockpath");
    snprintf(sock, sizeof sock, "%s.sock", dir);
    const char *const extra[] = {"--socket", sock, NULL};
    start_server(&srv, dir, extra);
    assert_int_equal(stele_client_connect(NULL, sock, &c, &err), 0);
    assert_int_equal(stele_client_append_json(c, "{\"a\":1}", 7, STELE_WAIT_WRITTEN, &seq, &err),
                     0);
    stele_client_close(c);
    /* Nothing listens in the journal directory itself. */
    assert_int_equal(stele_client_connect(dir, NULL, &c, &err), -ENOENT);
    memset(too_long, 'x', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = '\0';
    assert_int_equal(stele_client_connect(NULL, too_long, &c, &err), STELE_EINVAL);
    assert_int_equal(stele_client_connect(NULL, NULL, &c, &err), STELE_EINVAL);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    assert_false(file_exists(sock));
    /* A path that exists and is not a socket is refused, and left alone. */
    FILE *f = fopen(sock, "we");
    assert_non_null(f);
    fputs("precious\n", f);
    fclose(f);
    int exit_code = -1;
    assert_int_equal(ts_server_start(&srv, dir, &exit_code, extra), -1);
    assert_int_equal(exit_code, 3);
    assert_true(log_contains(srv.log_path, "is not a socket"));
    assert_true(file_exists(sock));
    ts_remove_dir(dir);
}

static void
test_client_pipelines_and_reports_server_errors(void **state)
{
    (void)state;
    char dir[256];
    ts_server_t srv;
    stele_client_t *c = NULL;
    stele_error_t err = {0};
    uint64_t seq = 0, prev = 0;
    ts_make_dir(dir, sizeof dir, "client");
    start_server(&srv, dir, NULL);
    assert_int_equal(stele_client_connect(dir, NULL, &c, &err), 0);
    for (int w = STELE_WAIT_NONE; w <= STELE_WAIT_DURABLE; w++) {
        assert_int_equal(stele_client_append_json(c, "{\"lvl\":1}", 9, (stele_wait_t)w, &seq, &err),
                         0);
        assert_true(seq > prev);
        prev = seq;
    }
    /* A pretty-printed event spans lines; it still travels as one request. */
    const char pretty[] = "{\n  \"who\": \"carol\",\r\n  \"n\": [1,\n 2]\n}\n";
    assert_int_equal(
        stele_client_append_json(c, pretty, sizeof pretty - 1, STELE_WAIT_DURABLE, &seq, &err), 0);
    /* Errors come back with the server's code and message; the connection stays usable. */
    assert_int_equal(stele_client_append_json(c, "{\"a\":", 5, STELE_WAIT_DURABLE, &seq, &err),
                     STELE_EJSON);
    assert_int_equal(err.code, STELE_EJSON);
    assert_true(strlen(err.message) > 0);
    assert_int_equal(stele_client_append_json(c, "{\"$x\":1}", 8, STELE_WAIT_DURABLE, &seq, &err),
                     STELE_EDOLLARKEY);
    /* Text that tries to close the envelope early cannot change the wait level. */
    const char forged[] = "{\"a\":1},\"$wait\":\"none\"";
    int forged_rc =
        stele_client_append_json(c, forged, sizeof forged - 1, STELE_WAIT_DURABLE, &seq, &err);
    assert_true(forged_rc == STELE_EJSON || forged_rc == STELE_EPROTOCOL);
    assert_int_equal(stele_client_recv(c, &seq, &err), STELE_EINVAL);
    /* Pipelined: 3000 sends, then the replies, in order. */
    enum { N = 3000 };
    for (int i = 0; i < N; i++) {
        char json[32];
        int n = snprintf(json, sizeof json, "{\"p\":%d}", i);
        assert_int_equal(stele_client_send_json(c, json, (size_t)n, STELE_WAIT_WRITTEN, &err), 0);
    }
    assert_int_equal(stele_client_pending(c), N);
    assert_int_equal(stele_client_append_json(c, "{}", 2, STELE_WAIT_NONE, &seq, &err),
                     STELE_EINVAL);
    for (int i = 0; i < N; i++) {
        assert_int_equal(stele_client_recv(c, &seq, &err), 0);
        assert_true(seq > prev);
        prev = seq;
    }
    assert_int_equal(stele_client_pending(c), 0);
    stele_client_close(c);
    stele_client_close(NULL);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    assert_int_equal(ts_read_journal(dir, NULL, NULL), 3 + 1 + N);
    ts_remove_dir(dir);
}

/* ---- a scripted server, for what a real one does only by chance ------------------------------
 */

typedef struct scripted_server {
    int listen_fd;
    const char *reply; /* sent once per request line */
    size_t reply_len;
    size_t head_len; /* the reply is sent in two parts: [0, head_len) and the rest */
    long n_lines;
} scripted_server_t;

/* Answers every request line, sending the head of each reply with the tail of the previous
 * one: what it has sent always ends inside a reply line, as happens whenever a server's
 * write or a client's read stops mid-line. */
static void *
scripted_server_main(void *arg)
{
    scripted_server_t *ss = arg;
    int fd = accept(ss->listen_fd, NULL, NULL);
    char in[4096], out[2048];
    ssize_t n;
    size_t tail_len = ss->reply_len - ss->head_len;
    assert_true(tail_len + ss->head_len <= sizeof out);
    memcpy(out, ss->reply + ss->head_len, tail_len);
    memcpy(out + tail_len, ss->reply, ss->head_len);
    while (fd >= 0 && (n = read(fd, in, sizeof in)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (in[i] != '\n')
                continue;
            /* One write: the previous reply's tail and this one's head. */
            int is_first = ss->n_lines++ == 0;
            if (ts_write_all(fd, is_first ? out + tail_len : out,
                             is_first ? ss->head_len : ss->reply_len) != 0)
                break;
        }
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

static int
scripted_server_listen(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path)
        return -1;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 8) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Bytes allocated with malloc in this process, mmapped blocks included. */
static size_t
heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* A long-lived connection must not keep every reply it ever received: the client's input
 * buffer holds at most what is unanswered, whatever the boundaries of the server's writes. */
static void
test_client_memory_stays_bounded_on_a_long_connection(void **state)
{
    (void)state;
    enum { ROUND_TRIPS = 10000, BOUND_BYTES = 1 << 20 };
    char dir[256], sock[300], reply[1024];
    ts_make_dir(dir, sizeof dir, "clientmem");
    snprintf(sock, sizeof sock, "%s.sock", dir);
    char message[201], hint[151];
    memset(message, 'm', sizeof message - 1);
    message[sizeof message - 1] = '\0';
    memset(hint, 'h', sizeof hint - 1);
    hint[sizeof hint - 1] = '\0';
    int reply_len = snprintf(reply, sizeof reply,
                             "{\"error\":{\"code\":%d,\"name\":\"STELE_EJSON\",\"message\":\"%s\","
                             "\"hint\":\"%s\"}}\n",
                             STELE_EJSON, message, hint);
    scripted_server_t ss = {.listen_fd = scripted_server_listen(sock),
                            .reply = reply,
                            .reply_len = (size_t)reply_len,
                            .head_len = 10};
    assert_true(ss.listen_fd >= 0);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, scripted_server_main, &ss), 0);
    stele_client_t *c = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_client_connect(NULL, sock, &c, &err), 0);
    /* One request always ahead of the replies: each recv finds the previous head waiting. */
    assert_int_equal(stele_client_send_json(c, "{\"i\":0}", 7, STELE_WAIT_NONE, &err), 0);
    size_t before = 0;
    for (int i = 1; i <= ROUND_TRIPS; i++) {
        assert_int_equal(stele_client_send_json(c, "{\"i\":1}", 7, STELE_WAIT_NONE, &err), 0);
        assert_int_equal(stele_client_recv(c, NULL, &err), STELE_EJSON);
        assert_string_equal(err.message, message);
        if (i == 100)
            before = heap_bytes();
    }
    size_t after = heap_bytes();
    size_t grown = after > before ? after - before : 0;
    printf("client heap over %d round trips of %d-byte replies: %zu -> %zu bytes\n",
           ROUND_TRIPS - 100, reply_len, before, after);
    stele_client_close(c);
    pthread_join(thread, NULL);
    close(ss.listen_fd);
    unlink(sock);
    ts_remove_dir(dir);
    if (!RSS_BOUND_HOLDS(grown < BOUND_BYTES))
        fail_msg("client heap grew by %zu bytes (bound %d)", grown, BOUND_BYTES);
}

/* A server that answers a fixed number of request lines, then goes away. */
typedef struct vanishing_server {
    int listen_fd;
    int n_lines;        /* requests to read before answering */
    const char *answer; /* sent in one write once n_lines came in */
    const char *last;   /* then, when go_fd becomes readable, this; then close */
    int go_fd;          /* -1: close at once after `answer` */
} vanishing_server_t;

static void *
vanishing_server_main(void *arg)
{
    vanishing_server_t *vs = arg;
    int fd = accept(vs->listen_fd, NULL, NULL);
    char in[4096], go;
    int n_lines = 0;
    ssize_t n;
    while (fd >= 0 && n_lines < vs->n_lines && (n = read(fd, in, sizeof in)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            n_lines += in[i] == '\n';
    }
    if (fd >= 0 && ts_write_all(fd, vs->answer, strlen(vs->answer)) == 0 && vs->go_fd >= 0 &&
        read(vs->go_fd, &go, 1) == 1)
        ts_write_all(fd, vs->last, strlen(vs->last));
    if (fd >= 0)
        close(fd);
    return NULL;
}

/* A reply the server sent before it went away is an acknowledgement: the client returns
 * it, even when the send of a later request already failed, and even when the reply's
 * first bytes were read before and its last bytes after the break. */
static void
test_client_returns_replies_that_came_before_the_server_went_away(void **state)
{
    (void)state;
    char dir[256], sock[300], answer[1024];
    ts_make_dir(dir, sizeof dir, "clientgone");
    snprintf(sock, sizeof sock, "%s.sock", dir);
    stele_client_t *c = NULL;
    stele_error_t err = {0};
    uint64_t seq = 0;
    pthread_t thread;

    /* 1. A long error reply and the head of a short one; the tail comes, then the close,
     *    only once the client has read the head. The next send fails (EPIPE). */
    char message[401];
    memset(message, 'm', sizeof message - 1);
    message[sizeof message - 1] = '\0';
    snprintf(answer, sizeof answer, "{\"error\":{\"code\":%d,\"message\":\"%s\"}}\n{\"se",
             STELE_EJSON, message);
    int go[2];
    assert_int_equal(pipe(go), 0);
    vanishing_server_t vs = {.listen_fd = scripted_server_listen(sock),
                             .n_lines = 2,
                             .answer = answer,
                             .last = "q\":5}\n",
                             .go_fd = go[0]};
    assert_true(vs.listen_fd >= 0);
    assert_int_equal(pthread_create(&thread, NULL, vanishing_server_main, &vs), 0);
    assert_int_equal(stele_client_connect(NULL, sock, &c, &err), 0);
    assert_int_equal(stele_client_send_json(c, "{\"i\":0}", 7, STELE_WAIT_NONE, &err), 0);
    assert_int_equal(stele_client_send_json(c, "{\"i\":1}", 7, STELE_WAIT_NONE, &err), 0);
    assert_int_equal(stele_client_recv(c, &seq, &err), STELE_EJSON);
    assert_int_equal(write(go[1], "g", 1), 1);
    pthread_join(thread, NULL);
    assert_int_equal(stele_client_send_json(c, "{\"i\":2}", 7, STELE_WAIT_NONE, &err), 0);
    int rc = stele_client_recv(c, &seq, &err);
    if (rc != 0 || seq != 5)
        fail_msg("reply split across the break: got %s (%s), seq %llu", stele_errname(rc),
                 err.message, (unsigned long long)seq);
    rc = stele_client_recv(c, &seq, &err);
    assert_true(rc == -EPIPE || rc == -ECONNRESET);
    stele_client_close(c);
    close(go[0]);
    close(go[1]);
    close(vs.listen_fd);
    unlink(sock);

    /* 2. Ten replies, then the server closes while the client is still sending: the send
     *    that fails makes the handle fail, but the ten replies are still returned. */
    char replies[256] = "";
    for (int i = 1; i <= 10; i++)
        snprintf(replies + strlen(replies), sizeof replies - strlen(replies), "{\"seq\":%d}\n", i);
    vanishing_server_t vs2 = {
        .listen_fd = scripted_server_listen(sock), .n_lines = 10, .answer = replies, .go_fd = -1};
    assert_true(vs2.listen_fd >= 0);
    assert_int_equal(pthread_create(&thread, NULL, vanishing_server_main, &vs2), 0);
    assert_int_equal(stele_client_connect(NULL, sock, &c, &err), 0);
    int send_rc = 0;
    for (int i = 0; i < 1000000 && send_rc == 0; i++)
        send_rc = stele_client_send_json(c, "{\"i\":0}", 7, STELE_WAIT_NONE, &err);
    assert_true(send_rc == -EPIPE || send_rc == -ECONNRESET);
    pthread_join(thread, NULL);
    for (uint64_t i = 1; i <= 10; i++) {
        rc = stele_client_recv(c, &seq, &err);
        if (rc != 0 || seq != i)
            fail_msg("reply %llu of 10 sent before the close: got %s, seq %llu",
                     (unsigned long long)i, stele_errname(rc), (unsigned long long)seq);
    }
    rc = stele_client_recv(c, &seq, &err);
    assert_true(rc == -EPIPE || rc == -ECONNRESET);
    assert_non_null(strstr(err.hint, "may or may not"));
    stele_client_close(c);
    close(vs2.listen_fd);
    unlink(sock);
    ts_remove_dir(dir);
}

/* A reply line longer than any reply is refused as it arrives, never buffered whole, and
 * the line after it is read as usual. */
static void
test_client_refuses_an_oversize_reply_and_reads_the_next(void **state)
{
    (void)state;
    enum { JUNK_BYTES = 1024 * 1024 };
    char dir[256], sock[300];
    ts_make_dir(dir, sizeof dir, "clientbigreply");
    snprintf(sock, sizeof sock, "%s.sock", dir);
    char *answer = malloc(JUNK_BYTES + 32);
    assert_non_null(answer);
    memset(answer, 'x', JUNK_BYTES);
    snprintf(answer + JUNK_BYTES, 32, "\n{\"seq\":5}\n");
    vanishing_server_t vs = {
        .listen_fd = scripted_server_listen(sock), .n_lines = 2, .answer = answer, .go_fd = -1};
    assert_true(vs.listen_fd >= 0);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, vanishing_server_main, &vs), 0);
    stele_client_t *c = NULL;
    stele_error_t err = {0};
    uint64_t seq = 0;
    assert_int_equal(stele_client_connect(NULL, sock, &c, &err), 0);
    assert_int_equal(stele_client_send_json(c, "{}", 2, STELE_WAIT_NONE, &err), 0);
    assert_int_equal(stele_client_send_json(c, "{}", 2, STELE_WAIT_NONE, &err), 0);
    assert_int_equal(stele_client_recv(c, &seq, &err), STELE_EPROTOCOL);
    assert_non_null(strstr(err.message, "longer than"));
    assert_int_equal(stele_client_recv(c, &seq, &err), 0);
    assert_true(seq == 5);
    assert_int_equal(stele_client_pending(c), 0);
    stele_client_close(c);
    pthread_join(thread, NULL);
    close(vs.listen_fd);
    unlink(sock);
    free(answer);
    ts_remove_dir(dir);
}

static void
on_test_signal(int signo)
{
    (void)signo;
}

typedef struct interrupter {
    pthread_t target;
    int listen_fd;
    atomic_int is_done;
} interrupter_t;

/* Interrupts the target thread with signals for a while, then makes room in the listen
 * backlog until told to stop. */
static void *
interrupter_main(void *arg)
{
    interrupter_t *it = arg;
    enum { N_SIGNALS = 20, PAUSE_US = 10000 };
    for (int i = 0; i < N_SIGNALS && !atomic_load(&it->is_done); i++) {
        usleep(PAUSE_US);
        pthread_kill(it->target, SIGUSR1);
    }
    while (!atomic_load(&it->is_done)) {
        int fd = accept4(it->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0)
            close(fd);
        usleep(1000);
    }
    return NULL;
}

/* connect() waits while the server's listen backlog is full (a busy or paused server); a
 * signal handler installed without SA_RESTART then interrupts it with EINTR, which means
 * "not connected yet", not "no server". */
static void
test_client_connect_survives_signals_while_the_backlog_is_full(void **state)
{
    (void)state;
    char dir[256], sock[300];
    ts_make_dir(dir, sizeof dir, "clientintr");
    snprintf(sock, sizeof sock, "%s.sock", dir);
    int listen_fd = scripted_server_listen(sock);
    assert_true(listen_fd >= 0);
    assert_int_equal(listen(listen_fd, 0), 0); /* one queued connection fills it */
    int filler = ts_connect(sock);
    assert_true(filler >= 0);
    struct sigaction sa = {.sa_handler = on_test_signal}, old;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    interrupter_t it = {.target = pthread_self(), .listen_fd = listen_fd};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, interrupter_main, &it), 0);
    stele_client_t *c = NULL;
    stele_error_t err = {0};
    int rc = stele_client_connect(NULL, sock, &c, &err);
    atomic_store(&it.is_done, 1);
    pthread_join(thread, NULL);
    sigaction(SIGUSR1, &old, NULL);
    stele_client_close(c);
    close(filler);
    close(listen_fd);
    unlink(sock);
    ts_remove_dir(dir);
    if (rc != 0)
        fail_msg("connect gave %s: %s", stele_errname(rc), err.message);
}

static void
test_client_sees_server_death_as_error_not_ack(void **state)
{
    (void)state;
    char dir[256];
    ts_server_t srv;
    stele_client_t *c = NULL;
    stele_error_t err = {0};
    uint64_t seq = 0;
    ts_make_dir(dir, sizeof dir, "death");
    start_server(&srv, dir, NULL);
    assert_int_equal(stele_client_connect(dir, NULL, &c, &err), 0);
    assert_int_equal(stele_client_append_json(c, "{\"a\":1}", 7, STELE_WAIT_DURABLE, &seq, &err),
                     0);
    assert_int_equal(ts_server_stop(&srv, SIGKILL), 128 + SIGKILL);
    int rc = stele_client_append_json(c, "{\"a\":2}", 7, STELE_WAIT_DURABLE, &seq, &err);
    assert_true(rc == -ECONNRESET || rc == -EPIPE);
    assert_non_null(strstr(err.hint, "may or may not"));
    /* Sticky: the handle stays failed. */
    assert_int_equal(stele_client_send_json(c, "{}", 2, STELE_WAIT_NONE, &err), rc);
    stele_client_close(c);
    ts_remove_dir(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_acknowledges_pipelined_requests_in_order),
        cmocka_unit_test(test_serve_answers_durable_requests_with_sync_never),
        cmocka_unit_test(test_serve_answers_half_closed_client_then_closes),
        cmocka_unit_test(test_serve_rejects_bad_requests_and_keeps_connection_usable),
        cmocka_unit_test(test_serve_second_server_on_same_journal_fails_with_locked),
        cmocka_unit_test(test_serve_leaves_a_live_socket_of_another_kind_alone),
        cmocka_unit_test(test_serve_sigterm_answers_received_requests_and_cleans_up),
        cmocka_unit_test(
            test_serve_drain_timeout_zero_still_acknowledges_what_the_flush_made_durable),
        cmocka_unit_test(test_serve_drain_timeout_fails_only_requests_short_of_their_level),
        cmocka_unit_test(test_serve_pauses_accept_when_out_of_descriptors_and_resumes),
        cmocka_unit_test(test_serve_resumes_accept_when_descriptors_free_up_without_a_close),
        cmocka_unit_test(test_serve_client_that_stops_reading_stalls_only_itself),
        cmocka_unit_test(test_serve_discards_oversize_line_without_buffering_it),
        cmocka_unit_test(test_serve_sigkill_during_load_never_acknowledges_falsely),
        cmocka_unit_test(test_serve_run_refuses_bad_options_and_touches_nothing),
        cmocka_unit_test(test_serve_run_in_process_serves_until_a_signal_to_its_thread),
        cmocka_unit_test(test_client_connect_without_server_says_so),
        cmocka_unit_test(test_client_reaches_server_on_a_socket_path_of_its_own),
        cmocka_unit_test(test_client_pipelines_and_reports_server_errors),
        cmocka_unit_test(test_client_sees_server_death_as_error_not_ack),
        cmocka_unit_test(test_client_memory_stays_bounded_on_a_long_connection),
        cmocka_unit_test(test_client_connect_survives_signals_while_the_backlog_is_full),
        cmocka_unit_test(test_client_returns_replies_that_came_before_the_server_went_away),
        cmocka_unit_test(test_client_refuses_an_oversize_reply_and_reads_the_next),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
