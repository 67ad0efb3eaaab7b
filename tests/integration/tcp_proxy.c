/*
 * tcp_proxy.c: the fault-injecting relay of tcp_proxy.h. One thread polls the listening
 * socket and every connection pair; `mu` protects the control fields (reset budget,
 * refusing flag, counters) that the test thread sets.
 */
#include "tcp_proxy.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TCP_PROXY_MAX_PAIRS 64
#define TCP_PROXY_POLL_MS 20

typedef struct tcp_pair {
    int client_fd;
    int upstream_fd;
} tcp_pair_t;

struct tcp_proxy {
    int listen_fd;
    int port;
    int upstream_port;
    pthread_t thread;
    tcp_pair_t pairs[TCP_PROXY_MAX_PAIRS]; /* relay thread only */
    size_t n_pairs;

    /* -- protected by mu -- */
    pthread_mutex_t mu;
    int is_stopping;
    int is_refusing;
    uint64_t reset_budget_bytes; /* 0 = no reset armed */
    uint64_t resets;
};

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

static void
tcp_proxy_drop_pair(tcp_proxy_t *p, size_t i, int is_reset)
{
    if (is_reset) {
        tcp_proxy_rst(p->pairs[i].client_fd);
        tcp_proxy_rst(p->pairs[i].upstream_fd);
    } else {
        close(p->pairs[i].client_fd);
        close(p->pairs[i].upstream_fd);
    }
    p->pairs[i] = p->pairs[--p->n_pairs];
}

static void
tcp_proxy_reset_all(tcp_proxy_t *p)
{
    while (p->n_pairs > 0)
        tcp_proxy_drop_pair(p, p->n_pairs - 1, 1);
}

static void
tcp_proxy_accept(tcp_proxy_t *p)
{
    int fd = accept(p->listen_fd, NULL, NULL);
    if (fd < 0)
        return;
    pthread_mutex_lock(&p->mu);
    int refuse = p->is_refusing;
    if (refuse)
        p->resets++;
    pthread_mutex_unlock(&p->mu);
    int up = refuse ? -1 : tcp_proxy_connect_upstream(p->upstream_port);
    if (up < 0 || p->n_pairs == TCP_PROXY_MAX_PAIRS) {
        tcp_proxy_rst(fd);
        if (up >= 0)
            close(up);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    p->pairs[p->n_pairs++] = (tcp_pair_t){fd, up};
}

/* Moves available bytes from one side to the other. Returns bytes moved, 0 on EOF, -1. */
static ssize_t
tcp_proxy_relay(int from_fd, int to_fd)
{
    char buf[65536];
    ssize_t n = read(from_fd, buf, sizeof buf);
    if (n <= 0)
        return n < 0 && (errno == EINTR || errno == EAGAIN) ? 1 : (n == 0 ? 0 : -1);
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

static void *
tcp_proxy_main(void *arg)
{
    tcp_proxy_t *p = arg;
    struct pollfd fds[1 + 2 * TCP_PROXY_MAX_PAIRS];
    for (;;) {
        pthread_mutex_lock(&p->mu);
        int stop = p->is_stopping;
        int refusing = p->is_refusing;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        if (refusing && p->n_pairs > 0) {
            pthread_mutex_lock(&p->mu);
            p->resets += p->n_pairs;
            pthread_mutex_unlock(&p->mu);
            tcp_proxy_reset_all(p);
        }
        fds[0] = (struct pollfd){.fd = p->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < p->n_pairs; i++) {
            fds[1 + 2 * i] = (struct pollfd){.fd = p->pairs[i].client_fd, .events = POLLIN};
            fds[2 + 2 * i] = (struct pollfd){.fd = p->pairs[i].upstream_fd, .events = POLLIN};
        }
        size_t n_fds = 1 + 2 * p->n_pairs;
        if (poll(fds, n_fds, TCP_PROXY_POLL_MS) <= 0)
            continue;
        size_t n_pairs_polled = p->n_pairs;
        for (size_t i = n_pairs_polled; i-- > 0;) {
            short up_ev = fds[1 + 2 * i].revents;
            short down_ev = fds[2 + 2 * i].revents;
            ssize_t moved = 1;
            if (up_ev & (POLLIN | POLLHUP | POLLERR)) {
                moved = tcp_proxy_relay(p->pairs[i].client_fd, p->pairs[i].upstream_fd);
                if (moved > 0) {
                    pthread_mutex_lock(&p->mu);
                    int fire = 0;
                    if (p->reset_budget_bytes > 0) {
                        if ((uint64_t)moved >= p->reset_budget_bytes) {
                            p->reset_budget_bytes = 0;
                            p->resets += p->n_pairs;
                            fire = 1;
                        } else {
                            p->reset_budget_bytes -= (uint64_t)moved;
                        }
                    }
                    pthread_mutex_unlock(&p->mu);
                    if (fire) {
                        tcp_proxy_reset_all(p);
                        break;
                    }
                }
            }
            if (moved > 0 && (down_ev & (POLLIN | POLLHUP | POLLERR)))
                moved = tcp_proxy_relay(p->pairs[i].upstream_fd, p->pairs[i].client_fd);
            if (moved <= 0)
                tcp_proxy_drop_pair(p, i, moved < 0);
        }
        if (fds[0].revents & POLLIN)
            tcp_proxy_accept(p);
    }
    tcp_proxy_reset_all(p);
    return NULL;
}

int
tcp_proxy_start(int upstream_port, tcp_proxy_t **out)
{
    tcp_proxy_t *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    pthread_mutex_init(&p->mu, NULL);
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
    close(p->listen_fd);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
