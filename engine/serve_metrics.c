/*
 * serve_metrics.c: the HTTP/1.1 endpoint of `stele serve --metrics-listen ADDR` for a
 * Prometheus server to scrape (serve.h): GET /metrics answers the journal's status in the
 * text exposition format (stele_status_to_prometheus, what `stele status --prometheus`
 * prints), GET /health answers 200 "ok", or 503 naming a halted journal or a stopped sink;
 * any other path is 404, any other method 405, a request that is malformed or larger than
 * SERVE_METRICS_MAX_REQUEST_BYTES 400.
 *
 * One thread of its own, one request per connection (Connection: close), connections
 * answered in turn: a scrape every few seconds needs no more. Each connection has a
 * deadline (SERVE_METRICS_TIMEOUT_MS for the request, the same for the reply), so a client
 * that stalls delays the next scrape by at most that, and never the journal: the thread
 * reaches the engine only through stele_stats, stele_sink_stats and a status read (a
 * reader, which takes no lock a writer waits for).
 *
 * It binds exactly the IPv4 address given (a bare port means 127.0.0.1); no name is
 * resolved. Owns the listening socket and the stop eventfd; the serve_metrics_t is written
 * before the thread starts and only read by it after, so no lock.
 */
#include "serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "error.h"

/* A scrape is one short request line and a few headers. */
#define SERVE_METRICS_MAX_REQUEST_BYTES 4096
/* How long a client may take to send its request, and to take the reply. */
#define SERVE_METRICS_TIMEOUT_MS 2000
/* Pending connections the kernel may queue while one is answered. */
#define SERVE_METRICS_BACKLOG 16

struct serve_metrics {
    char dir[PATH_MAX];
    stele_t *db;
    const stele_options_t *opts;
    const serve_log_t *log;
    int listen_fd, stop_fd;
    pthread_t thread;
};

int
serve_metrics_parse_addr(const char *text, struct sockaddr_in *out)
{
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    char host[64] = "127.0.0.1";
    const char *colon = strrchr(text, ':');
    const char *port_text = colon ? colon + 1 : text;
    if (colon) {
        size_t len = (size_t)(colon - text);
        if (len == 0 || len >= sizeof host)
            return -1;
        memcpy(host, text, len);
        host[len] = '\0';
    }
    char *end = NULL;
    errno = 0;
    unsigned long port = strtoul(port_text, &end, 10);
    if (!*port_text || *end || errno || port == 0 || port > 65535 || port_text[0] == '+' ||
        port_text[0] == '-')
        return -1;
    if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
        return -1;
    out->sin_port = htons((uint16_t)port);
    return 0;
}

static int64_t
metrics_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for `events` or the deadline passes: 1 ready, 0 not. */
static int
metrics_wait(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        int64_t left = deadline_ms - metrics_now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)left);
        if (n > 0)
            return 1;
        if (n == 0 || errno != EINTR)
            return 0;
    }
}

/* Sends all of buf before the deadline; a client that stops reading is dropped. */
static void
metrics_send_all(int fd, const char *buf, size_t len, int64_t deadline_ms)
{
    while (len > 0 && metrics_wait(fd, POLLOUT, deadline_ms)) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

static void
metrics_reply(int fd, int code, const char *reason, const char *type, const char *body,
              size_t body_len)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     code, reason, type, body_len);
    int64_t deadline_ms = metrics_now_ms() + SERVE_METRICS_TIMEOUT_MS;
    metrics_send_all(fd, head, (size_t)n, deadline_ms);
    metrics_send_all(fd, body, body_len, deadline_ms);
}

static void
metrics_reply_text(int fd, int code, const char *reason, const char *text)
{
    metrics_reply(fd, code, reason, "text/plain; charset=utf-8", text, strlen(text));
}

static void
metrics_answer_metrics(const serve_metrics_t *m, int fd)
{
    stele_status_t *st = malloc(sizeof *st);
    stele_error_t err = {0};
    char *text = NULL;
    size_t len = 0;
    int rc = st ? stele_status_read_opts(m->dir, m->opts, st, &err) : -ENOMEM;
    if (rc == 0)
        rc = stele_status_to_prometheus(st, &text, &len, &err);
    free(st);
    if (rc == 0) {
        metrics_reply(fd, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", text, len);
    } else {
        serve_log_error(m->log, "could not read the status for /metrics", rc, &err);
        metrics_reply_text(fd, 500, "Internal Server Error", "could not read the status\n");
    }
    stele_json_free(text);
}

/* 200 "ok", or 503 with the first reason the journal is not healthy. */
static void
metrics_answer_health(const serve_metrics_t *m, int fd)
{
    stele_stats_t stats;
    char why[STELE_ERROR_MESSAGE_BYTES + 128] = "";
    if (stele_stats(m->db, &stats) != 0)
        snprintf(why, sizeof why, "journal: stats unavailable\n");
    else if (stats.halted_code != 0)
        snprintf(why, sizeof why, "journal halted: %s\n", stats.halted_message);
    for (size_t i = 0; !why[0] && i < stats.n_sinks; i++) {
        stele_sink_stats_t s;
        if (stele_sink_stats(m->db, i, &s) == 0 && s.is_stopped)
            snprintf(why, sizeof why, "sink %s stopped: %s\n", s.name, s.last_error);
    }
    if (why[0])
        metrics_reply_text(fd, 503, "Service Unavailable", why);
    else
        metrics_reply_text(fd, 200, "OK", "ok\n");
}

/* Reads the request head (up to the blank line) into buf; its length, or -1 when it is
 * too large, cut short or late. */
static ssize_t
metrics_read_request(int fd, char *buf, size_t cap)
{
    int64_t deadline_ms = metrics_now_ms() + SERVE_METRICS_TIMEOUT_MS;
    size_t len = 0;
    while (len < cap - 1) {
        if (!metrics_wait(fd, POLLIN, deadline_ms))
            return -1;
        ssize_t n = recv(fd, buf + len, cap - 1 - len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return -1;
        len += (size_t)n;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
            return (ssize_t)len;
    }
    return -1;
}

static void
metrics_serve_conn(const serve_metrics_t *m, int fd)
{
    char req[SERVE_METRICS_MAX_REQUEST_BYTES + 1];
    if (metrics_read_request(fd, req, sizeof req) < 0) {
        metrics_reply_text(fd, 400, "Bad Request", "bad or too large request\n");
        return;
    }
    char method[16], target[256], version[16];
    if (sscanf(req, "%15s %255s %15s", method, target, version) != 3 ||
        strncmp(version, "HTTP/1.", 7) != 0) {
        metrics_reply_text(fd, 400, "Bad Request", "bad request\n");
        return;
    }
    if (strcmp(method, "GET") != 0) {
        metrics_reply_text(fd, 405, "Method Not Allowed", "only GET\n");
        return;
    }
    if (strcmp(target, "/metrics") == 0)
        metrics_answer_metrics(m, fd);
    else if (strcmp(target, "/health") == 0)
        metrics_answer_health(m, fd);
    else
        metrics_reply_text(fd, 404, "Not Found", "not found: try /metrics or /health\n");
}

static void *
metrics_main(void *arg)
{
    serve_metrics_t *m = arg;
    pthread_setname_np(pthread_self(), "stele-metrics");
    for (;;) {
        struct pollfd p[2] = {{.fd = m->listen_fd, .events = POLLIN},
                              {.fd = m->stop_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue; /* the client left, or descriptors ran out: the next scrape retries */
        metrics_serve_conn(m, fd);
        close(fd);
    }
    return NULL;
}

static int
metrics_listen(serve_metrics_t *m, const char *addr_text, stele_error_t *err)
{
    struct sockaddr_in addr;
    if (serve_metrics_parse_addr(addr_text, &addr) != 0)
        return error_set(err, STELE_EINVAL,
                         "metrics address '%s' is not IPV4:PORT or PORT (e.g. 127.0.0.1:9464)",
                         addr_text);
    int one = 1;
    m->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = m->listen_fd < 0 ? -errno : 0;
    if (rc == 0 && setsockopt(m->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0)
        rc = -errno;
    if (rc == 0 && bind(m->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0)
        rc = -errno;
    if (rc == 0 && listen(m->listen_fd, SERVE_METRICS_BACKLOG) != 0)
        rc = -errno;
    if (rc)
        return error_set(err, rc, "could not listen for metrics on %s: %s", addr_text,
                         stele_strerror(rc));
    if (ntohl(addr.sin_addr.s_addr) >> 24 != 127)
        serve_logf(m->log, STELE_LOG_WARN, "metrics reachable from other hosts", "addr=%s",
                   addr_text);
    return 0;
}

int
serve_metrics_start(const serve_metrics_config_t *cfg, serve_metrics_t **out, stele_error_t *err)
{
    *out = NULL;
    serve_metrics_t *m = calloc(1, sizeof *m);
    if (!m)
        return error_set(err, -ENOMEM, "out of memory starting the metrics endpoint");
    snprintf(m->dir, sizeof m->dir, "%s", cfg->dir);
    m->db = cfg->db;
    m->opts = cfg->opts;
    m->log = cfg->log;
    m->stop_fd = -1;
    int rc = metrics_listen(m, cfg->addr, err);
    if (rc == 0 && (m->stop_fd = eventfd(0, EFD_CLOEXEC)) < 0)
        rc = error_set(err, -errno, "could not start the metrics endpoint: %s",
                       stele_strerror(-errno));
    if (rc == 0 && (rc = -pthread_create(&m->thread, NULL, metrics_main, m)) != 0)
        error_set(err, rc, "could not start the metrics thread: %s", stele_strerror(rc));
    if (rc) {
        if (m->listen_fd >= 0)
            close(m->listen_fd);
        if (m->stop_fd >= 0)
            close(m->stop_fd);
        free(m);
        return rc;
    }
    serve_logf(m->log, STELE_LOG_INFO, "metrics listening", "addr=%s", cfg->addr);
    *out = m;
    return 0;
}

void
serve_metrics_stop(serve_metrics_t *m)
{
    if (!m)
        return;
    uint64_t one = 1;
    if (write(m->stop_fd, &one, sizeof one) == (ssize_t)sizeof one)
        pthread_join(m->thread, NULL);
    close(m->listen_fd);
    close(m->stop_fd);
    free(m);
}
