/*
 * tcp_proxy.c: the fault-injecting relay of tcp_proxy.h. One thread accepts; each
 * connection pair has a thread of its own (so a peer that stops reading stalls only its
 * pair). `mu` protects the control fields (reset budget and generation, refusing flag,
 * counters, pair count) that the test thread and the pair threads share.
 */
#include "tcp_proxy.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TCP_PROXY_POLL_MS 20

struct tcp_proxy {
    int listen_fd;
    int port;
    int upstream_port;
    pthread_t thread;

    /* -- protected by mu; pair threads poll it every TCP_PROXY_POLL_MS -- */
    pthread_mutex_t mu;
    pthread_cond_t pairs_cv; /* fires when n_pairs drops */
    int is_stopping;
    int is_refusing;
    uint64_t reset_budget_bytes; /* 0 = no reset armed */
    uint64_t reset_generation;   /* bumped to reset every open connection */
    uint64_t resets;
    int n_pairs;
    char watch[64]; /* counted in client -> server bytes (tcp_proxy_watch) */
    size_t watch_len;
    uint64_t watch_hits;
};

/* One relayed connection: its own thread, so a peer that stops reading blocks only it. */
typedef struct tcp_pair {
    tcp_proxy_t *proxy;
    int client_fd;
    int upstream_fd;
    uint64_t generation;
} tcp_pair_t;

static void
tcp_proxy_rst(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

static int
tcp_proxy_connect_upstream(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Counts the watched pattern in bytes a client sent (within one read: a command is sent
 * whole, so a pattern split across two reads is not expected). */
static void
tcp_proxy_count_watched(tcp_proxy_t *p, const char *buf, size_t n)
{
    pthread_mutex_lock(&p->mu);
    for (size_t off = 0; p->watch_len && off + p->watch_len <= n;) {
        const char *hit = memmem(buf + off, n - off, p->watch, p->watch_len);
        if (!hit)
            break;
        p->watch_hits++;
        off = (size_t)(hit - buf) + p->watch_len;
    }
    pthread_mutex_unlock(&p->mu);
}

/* Moves available bytes from one side to the other; `watcher` (client -> server only)
 * counts its pattern in them. Returns bytes moved, 0 on EOF, -1. */
static ssize_t
tcp_proxy_relay(int from_fd, int to_fd, tcp_proxy_t *watcher)
{
    char buf[65536];
    ssize_t n = read(from_fd, buf, sizeof buf);
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 1 : -1;
    if (watcher && n > 0)
        tcp_proxy_count_watched(watcher, buf, (size_t)n);
    for (ssize_t off = 0; off < n;) {
        ssize_t w = send(to_fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        off += w;
    }
    return n;
}

/* Counts client bytes against an armed reset; returns 1 when the reset fires. */
static int
tcp_proxy_spend(tcp_proxy_t *p, uint64_t n_bytes)
{
    int fire = 0;
    pthread_mutex_lock(&p->mu);
    if (p->reset_budget_bytes > 0) {
        if (n_bytes >= p->reset_budget_bytes) {
            p->reset_budget_bytes = 0;
            p->reset_generation++;
            fire = 1;
        } else {
            p->reset_budget_bytes -= n_bytes;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return fire;
}

static void *
tcp_proxy_pair_main(void *arg)
{
    tcp_pair_t *pair = arg;
    tcp_proxy_t *p = pair->proxy;
    int is_reset = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int stop = p->is_stopping || p->is_refusing || p->reset_generation != pair->generation;
        if (stop && !p->is_stopping)
            p->resets++;
        pthread_mutex_unlock(&p->mu);
        if (stop) {
            is_reset = 1;
            break;
        }
        struct pollfd fds[2] = {{.fd = pair->client_fd, .events = POLLIN},
                                {.fd = pair->upstream_fd, .events = POLLIN}};
        if (poll(fds, 2, TCP_PROXY_POLL_MS) <= 0)
            continue;
        ssize_t moved = 1;
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            moved = tcp_proxy_relay(pair->client_fd, pair->upstream_fd, p);
            if (moved > 0 && tcp_proxy_spend(p, (uint64_t)moved))
                continue; /* the generation check above resets this pair too */
        }
        if (moved > 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)))
            moved = tcp_proxy_relay(pair->upstream_fd, pair->client_fd, NULL);
        if (moved <= 0) {
            is_reset = moved < 0;
            break;
        }
    }
    if (is_reset) {
        tcp_proxy_rst(pair->client_fd);
        tcp_proxy_rst(pair->upstream_fd);
    } else {
        close(pair->client_fd);
        close(pair->upstream_fd);
    }
    pthread_mutex_lock(&p->mu);
    p->n_pairs--;
    pthread_cond_broadcast(&p->pairs_cv);
    pthread_mutex_unlock(&p->mu);
    free(pair);
    return NULL;
}

static void
tcp_proxy_accept(tcp_proxy_t *p)
{
    int fd = accept(p->listen_fd, NULL, NULL);
    if (fd < 0)
        return;
    pthread_mutex_lock(&p->mu);
    int refuse = p->is_refusing;
    uint64_t generation = p->reset_generation;
    if (refuse)
        p->resets++;
    pthread_mutex_unlock(&p->mu);
    int up = refuse ? -1 : tcp_proxy_connect_upstream(p->upstream_port);
    tcp_pair_t *pair = up >= 0 ? calloc(1, sizeof *pair) : NULL;
    if (!pair) {
        tcp_proxy_rst(fd);
        if (up >= 0)
            close(up);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *pair = (tcp_pair_t){p, fd, up, generation};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    pthread_mutex_lock(&p->mu);
    p->n_pairs++;
    pthread_mutex_unlock(&p->mu);
    if (pthread_create(&thread, &attr, tcp_proxy_pair_main, pair) != 0) {
        pthread_mutex_lock(&p->mu);
        p->n_pairs--;
        pthread_mutex_unlock(&p->mu);
        tcp_proxy_rst(fd);
        close(up);
        free(pair);
    }
    pthread_attr_destroy(&attr);
}

static void *
tcp_proxy_main(void *arg)
{
    tcp_proxy_t *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int stop = p->is_stopping;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        struct pollfd pfd = {.fd = p->listen_fd, .events = POLLIN};
        if (poll(&pfd, 1, TCP_PROXY_POLL_MS) > 0 && (pfd.revents & POLLIN))
            tcp_proxy_accept(p);
    }
    return NULL;
}

int
tcp_proxy_start(int upstream_port, tcp_proxy_t **out)
{
    tcp_proxy_t *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->pairs_cv, NULL);
    p->upstream_port = upstream_port;
    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(p->listen_fd, 64) != 0 ||
        getsockname(p->listen_fd, (struct sockaddr *)&addr, &len) != 0)
        goto fail;
    p->port = ntohs(addr.sin_port);
    if (pthread_create(&p->thread, NULL, tcp_proxy_main, p) != 0)
        goto fail;
    *out = p;
    return 0;
fail:
    if (p->listen_fd >= 0)
        close(p->listen_fd);
    pthread_cond_destroy(&p->pairs_cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    return -1;
}

int
tcp_proxy_port(const tcp_proxy_t *p)
{
    return p->port;
}

void
tcp_proxy_watch(tcp_proxy_t *p, const char *pattern)
{
    pthread_mutex_lock(&p->mu);
    snprintf(p->watch, sizeof p->watch, "%s", pattern);
    p->watch_len = strlen(p->watch);
    p->watch_hits = 0;
    pthread_mutex_unlock(&p->mu);
}

uint64_t
tcp_proxy_watched(tcp_proxy_t *p)
{
    pthread_mutex_lock(&p->mu);
    uint64_t n = p->watch_hits;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void
tcp_proxy_reset_after(tcp_proxy_t *p, uint64_t n_bytes)
{
    pthread_mutex_lock(&p->mu);
    p->reset_budget_bytes = n_bytes;
    pthread_mutex_unlock(&p->mu);
}

void
tcp_proxy_set_refusing(tcp_proxy_t *p, int is_refusing)
{
    pthread_mutex_lock(&p->mu);
    p->is_refusing = is_refusing;
    pthread_mutex_unlock(&p->mu);
}

uint64_t
tcp_proxy_resets(tcp_proxy_t *p)
{
    pthread_mutex_lock(&p->mu);
    uint64_t n = p->resets;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void
tcp_proxy_stop(tcp_proxy_t *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->is_stopping = 1;
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_mutex_lock(&p->mu);
    while (p->n_pairs > 0)
        pthread_cond_wait(&p->pairs_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    close(p->listen_fd);
    pthread_cond_destroy(&p->pairs_cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
