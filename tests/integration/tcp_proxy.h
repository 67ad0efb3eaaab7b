/*
 * tcp_proxy.h: a small TCP proxy on 127.0.0.1 for fault tests. It relays bytes between a
 * client (the shipper) and the test server, and on request resets every connection after
 * a number of client bytes (mid-batch) or resets each new connection as it is accepted
 * (a server that refuses connections for a while). It also counts a byte pattern in what
 * clients send.
 */
#ifndef STELE_TEST_TCP_PROXY_H
#define STELE_TEST_TCP_PROXY_H

#include <stddef.h>
#include <stdint.h>

typedef struct tcp_proxy tcp_proxy_t;

/* Listens on a free 127.0.0.1 port, relaying to 127.0.0.1:upstream_port. 0 or -1. */
int tcp_proxy_start(int upstream_port, tcp_proxy_t **out);
int tcp_proxy_port(const tcp_proxy_t *p);

/* Resets (RST) every open connection once `n_bytes` more bytes went client -> server. */
void tcp_proxy_reset_after(tcp_proxy_t *p, uint64_t n_bytes);
/* While on, every new connection is reset as soon as it is accepted. */
void tcp_proxy_set_refusing(tcp_proxy_t *p, int is_refusing);
/* Counts from now on how often `pattern` (up to 63 bytes) appears in client -> server
 * bytes, e.g. an option name in the commands a shipper sends. */
void tcp_proxy_watch(tcp_proxy_t *p, const char *pattern);
uint64_t tcp_proxy_watched(tcp_proxy_t *p);
/* Number of connections reset so far. */
uint64_t tcp_proxy_resets(tcp_proxy_t *p);

/* Stops the relay thread and closes every socket. NULL is a no-op. */
void tcp_proxy_stop(tcp_proxy_t *p);

#endif /* STELE_TEST_TCP_PROXY_H */
