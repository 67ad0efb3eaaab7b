/*
 * test_serve_metrics.c: `stele serve --metrics-listen`, scraped the way Prometheus does,
 * over plain sockets (and with curl when it is installed): GET /metrics answers the status
 * metrics, GET /health answers "ok", anything else 404 or 405, an oversized request 400, and
 * an address that is not IPV4:PORT is refused before the server starts. /health answers 503,
 * naming the sink, once a sink stops for good (a second journal shipping under the first's
 * source into the FerretDB test server, or the server of STELE_TEST_MONGO_URI).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mongo_server.h"
#include "serve_fixture.h"

/* A port on 127.0.0.1 nothing listens on right now. */
static int
free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Sends `request` as it is to 127.0.0.1:port and returns the whole answer (malloc'd). */
static char *
http_exchange(int port, const char *request, size_t request_len)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    /* The endpoint starts beside the socket the fixture waits for: until it listens, a
     * connect is refused (a bound for a broken build, not a timing assertion). */
    int fd = -1, rc = -1;
    for (int waited_ms = 0; rc != 0 && waited_ms < 30000; waited_ms += 10) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        rc = connect(fd, (struct sockaddr *)&a, sizeof a);
        if (rc != 0) {
            int connect_errno = errno;
            close(fd);
            fd = -1;
            assert_int_equal(connect_errno, ECONNREFUSED);
            usleep(10 * 1000);
        }
    }
    assert_int_equal(rc, 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    assert_int_equal(ts_write_all(fd, request, request_len), 0);
    size_t cap = 1 << 20, len = 0;
    char *out = calloc(1, cap);
    assert_non_null(out);
    ssize_t n;
    while (len < cap - 1 && (n = recv(fd, out + len, cap - 1 - len, 0)) > 0)
        len += (size_t)n;
    close(fd);
    return out;
}

static char *
http_get(int port, const char *method, const char *path)
{
    char req[512];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n",
                     method, path);
    return http_exchange(port, req, (size_t)n);
}

static void
assert_answer(char *answer, const char *status_line, const char *const *wanted)
{
    if (strncmp(answer, status_line, strlen(status_line)) != 0)
        fail_msg("wanted \"%s\", got:\n%s", status_line, answer);
    for (size_t i = 0; wanted && wanted[i]; i++)
        if (!strstr(answer, wanted[i]))
            fail_msg("answer lacks \"%s\":\n%s", wanted[i], answer);
    free(answer);
}

/* Starts a server with the endpoint on a free port and the arguments `more` (NULL-ended, at
 * most two); returns the port. */
static int
start_with_metrics_extra(ts_server_t *srv, const char *dir, const char *const *more)
{
    for (int attempt = 0; attempt < 5; attempt++) {
        int port = free_port();
        char addr[32];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        const char *extra[5] = {"--metrics-listen", addr, NULL};
        for (int i = 0; more && more[i] && i < 2; i++)
            extra[2 + i] = more[i];
        int code = 0;
        if (ts_server_start(srv, dir, &code, extra) == 0)
            return port;
    }
    fail_msg("the server did not start with --metrics-listen");
    return -1;
}

static int
start_with_metrics(ts_server_t *srv, const char *dir)
{
    return start_with_metrics_extra(srv, dir, NULL);
}

static void
test_a_scrape_gets_the_metrics_and_the_health(void **state)
{
    (void)state;
    char dir[256];
    ts_make_dir(dir, sizeof dir, "metrics");
    ts_server_t srv;
    int port = start_with_metrics(&srv, dir);
    static const char *const metrics[] = {"Content-Type: text/plain; version=0.0.4",
                                          "stele_writer_pid{source=",
                                          "stele_last_seq{source=",
                                          "stele_journal_bytes_used{source=",
                                          "stele_sync_mode{source=", /* the writer's settings */
                                          NULL};
    assert_answer(http_get(port, "GET", "/metrics"), "HTTP/1.1 200 OK\r\n", metrics);
    static const char *const ok[] = {"Content-Length: 3\r\n", "\r\n\r\nok\n", NULL};
    assert_answer(http_get(port, "GET", "/health"), "HTTP/1.1 200 OK\r\n", ok);
    assert_answer(http_get(port, "GET", "/"), "HTTP/1.1 404 Not Found\r\n", NULL);
    assert_answer(http_get(port, "GET", "/metricsx"), "HTTP/1.1 404 Not Found\r\n", NULL);
    assert_answer(http_get(port, "POST", "/metrics"), "HTTP/1.1 405 Method Not Allowed\r\n", NULL);
    /* A request head larger than the bound is refused, not read on. */
    size_t big_len = 64 * 1024;
    char *big = malloc(big_len);
    assert_non_null(big);
    memcpy(big, "GET /metrics HTTP/1.1\r\nX: ", 26);
    memset(big + 26, 'a', big_len - 26);
    assert_answer(http_exchange(port, big, big_len), "HTTP/1.1 400 Bad Request\r\n", NULL);
    free(big);
    /* The endpoint still answers after those. */
    assert_answer(http_get(port, "GET", "/health"), "HTTP/1.1 200 OK\r\n", ok);
    if (system("command -v curl >/dev/null 2>&1") == 0) {
        char cmd[256];
        snprintf(cmd, sizeof cmd,
                 "curl -sf http://127.0.0.1:%d/metrics | grep -q '^stele_last_seq{' && "
                 "curl -sf http://127.0.0.1:%d/health | grep -qx ok",
                 port, port);
        assert_int_equal(system(cmd), 0);
    } else {
        fprintf(stderr, "curl not installed: scraped with sockets only\n");
    }
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    ts_remove_dir(dir);
}

/* Writes a config whose source and sink are shared by every journal that uses it. */
static void
write_sink_config(const char *path, const char *uri)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "source = metrics-health-%d\n[sink main]\nuri = %s\ndatabase = stele_metrics_%d\n",
            (int)getpid(), uri, (int)getpid());
    assert_int_equal(fclose(fp), 0);
}

/* GET /health until its status line is not 200 OK, for at most timeout_ms (a bound for a
 * broken build: the sink stops at its start); returns the last answer (malloc'd). */
static char *
health_until_unhealthy(int port, int timeout_ms)
{
    char *answer = http_get(port, "GET", "/health");
    for (int waited_ms = 0; waited_ms < timeout_ms && strncmp(answer, "HTTP/1.1 200 ", 13) == 0;
         waited_ms += 50) {
        free(answer);
        usleep(50 * 1000);
        answer = http_get(port, "GET", "/health");
    }
    return answer;
}

/* A healthy sink keeps /health at 200; a sink stopped for good (seq 1 of the source is stored
 * with another journal's hash) turns it to 503 with the sink's name and reason. */
static void
test_health_is_503_once_a_sink_stops(void **state)
{
    (void)state;
    mongo_server_t mongo;
    if (mongo_server_start(&mongo) != 0)
        fail_msg("could not start the MongoDB test server: run "
                 "tests/integration/build-test-server.sh or set STELE_TEST_MONGO_URI");
    char first[256], second[256], config[300], cmd[1024];
    ts_make_dir(first, sizeof first, "metrics-health-a");
    ts_make_dir(second, sizeof second, "metrics-health-b");
    snprintf(config, sizeof config, "%s.ini", first);
    write_sink_config(config, mongo.uri);
    snprintf(cmd, sizeof cmd, "%s insert -d %s --config %s --wait shipped '{\"a\":1}' >/dev/null",
             STELE_SERVE_BIN, first, config);
    assert_int_equal(system(cmd), 0);

    ts_server_t srv;
    const char *with_sink[] = {"--config", config, NULL};
    int port = start_with_metrics_extra(&srv, first, with_sink);
    static const char *const ok[] = {"\r\n\r\nok\n", NULL};
    snprintf(cmd, sizeof cmd, "%s insert -d %s --wait shipped '{\"a\":2}' >/dev/null",
             STELE_SERVE_BIN, first);
    assert_int_equal(system(cmd), 0); /* shipped through the served sink: it is alive */
    assert_answer(http_get(port, "GET", "/health"), "HTTP/1.1 200 OK\r\n", ok);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);

    /* Another journal under the same source: the sink finds seq 2 stored with another hash. */
    port = start_with_metrics_extra(&srv, second, with_sink);
    static const char *const stopped[] = {"sink main stopped: ", "another hash", NULL};
    assert_answer(health_until_unhealthy(port, 60000), "HTTP/1.1 503 Service Unavailable\r\n",
                  stopped);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    ts_remove_dir(first);
    ts_remove_dir(second);
    unlink(config);
    mongo_server_destroy(&mongo);
}

/* Only IPV4:PORT or PORT: a name, a bad port or garbage is refused before anything starts. */
static void
test_a_bad_metrics_address_is_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "localhost:9464", "127.0.0.1:0", "127.0.0.1:70000", "127.0.0.1:", ":9464", "9464x", NULL};
    for (size_t i = 0; bad[i]; i++) {
        char dir[256];
        ts_make_dir(dir, sizeof dir, "metrics-bad");
        ts_server_t srv;
        const char *extra[] = {"--metrics-listen", bad[i], NULL};
        int code = -1;
        if (ts_server_start(&srv, dir, &code, extra) == 0) {
            ts_server_stop(&srv, SIGTERM);
            fail_msg("--metrics-listen %s was accepted", bad[i]);
        }
        assert_int_not_equal(code, 0);
        ts_remove_dir(dir);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_scrape_gets_the_metrics_and_the_health),
        cmocka_unit_test(test_a_bad_metrics_address_is_refused),
        cmocka_unit_test(test_health_is_503_once_a_sink_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
