/*
 * bench_peer_redis.c: Redis with the append-only file, as a peer.
 *
 * A private redis-server per cell (127.0.0.1, a free port, its AOF in the cell directory,
 * RDB snapshots off), one hiredis connection per writer, one RPUSH per event.
 * appendfsync=always fsyncs the AOF before replying, once per event-loop iteration, so
 * concurrent clients share a sync (Redis's own group commit): durable.
 * appendfsync=everysec replies first and syncs once a second: not durable.
 */
#include "bench_peers.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#ifdef BENCH_HAVE_HIREDIS
#include <hiredis/hiredis.h>

/* How long a fresh server gets to accept connections. */
#define REDIS_START_TIMEOUT_MS 10000
#define REDIS_STOP_TIMEOUT_MS 10000

typedef struct redis_peer {
    pid_t pid;
    int port;
    int is_always;
} redis_peer_t;

static redisContext *
redis_connect(int port)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

static int
redis_wait_ready(redis_peer_t *p)
{
    for (int waited = 0; waited < REDIS_START_TIMEOUT_MS; waited += 50) {
        redisContext *c = redis_connect(p->port);
        if (c) {
            redisReply *rep = redisCommand(c, "PING");
            int ok = rep && rep->type == REDIS_REPLY_STATUS;
            freeReplyObject(rep);
            redisFree(c);
            if (ok)
                return 0;
        }
        bench_sleep_ms(50);
    }
    return -1;
}

static int
redis_open_any(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap,
               int is_always)
{
    char bin[BENCH_PATH_BYTES];
    if (bench_server_find("redis-server", NULL, bin, sizeof bin)) {
        snprintf(note, note_cap, "redis-server not found (install redis-server)");
        return BENCH_SKIPPED;
    }
    redis_peer_t *p = calloc(1, sizeof *p);
    if (!p)
        return BENCH_FAILED;
    p->is_always = is_always;
    p->port = bench_server_free_port();
    char port[16], log[BENCH_PATH_BYTES];
    snprintf(port, sizeof port, "%d", p->port);
    bench_path(log, sizeof log, cell->dir, "redis.log");
    char *argv[] = {bin,
                    "--port",
                    port,
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    (char *)cell->dir,
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    is_always ? "always" : "everysec",
                    "--save",
                    "",
                    "--daemonize",
                    "no",
                    "--maxclients",
                    "10000",
                    NULL};
    p->pid = bench_server_spawn(argv, log, NULL);
    if (p->pid < 0 || redis_wait_ready(p)) {
        snprintf(note, note_cap, "redis-server did not start (see %s)", log);
        bench_server_stop(p->pid, SIGKILL, 1000);
        free(p);
        return BENCH_FAILED;
    }
    *state_out = p;
    return 0;
}

static int
redis_open_always(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return redis_open_any(cell, state_out, note, note_cap, 1);
}

static int
redis_open_everysec(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return redis_open_any(cell, state_out, note, note_cap, 0);
}

static int
redis_writer_open(void *state, int writer_id, void **wstate_out, char *note, size_t note_cap)
{
    (void)writer_id;
    redis_peer_t *p = state;
    redisContext *c = redis_connect(p->port);
    if (!c) {
        snprintf(note, note_cap, "could not connect to redis on port %d", p->port);
        return BENCH_FAILED;
    }
    *wstate_out = c;
    return 0;
}

static int
redis_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)state;
    redisReply *rep = redisCommand(wstate, "RPUSH events %b", ev->data, (size_t)ev->len);
    int rc = (rep && rep->type == REDIS_REPLY_INTEGER) ? 0 : -1;
    freeReplyObject(rep);
    return rc;
}

static void
redis_writer_close(void *state, void *wstate)
{
    (void)state;
    redisFree(wstate);
}

static int
redis_close(void *state, bench_result_t *r)
{
    redis_peer_t *p = state;
    r->is_durable = p->is_always;
    redisContext *c = redis_connect(p->port);
    if (c) {
        redisReply *rep = redisCommand(c, "LLEN events");
        if (rep && rep->type == REDIS_REPLY_INTEGER)
            r->counted_back = rep->integer;
        freeReplyObject(rep);
        redisFree(c);
    }
    bench_server_stop(p->pid, SIGTERM, REDIS_STOP_TIMEOUT_MS);
    free(p);
    return 0;
}

#define REDIS_HOOKS                                                                                \
    .writer_open = redis_writer_open, .append = redis_append, .writer_close = redis_writer_close,  \
    .close = redis_close
const bench_target_t bench_peer_redis_always = {
    .system = "redis-aof-always", .open = redis_open_always, REDIS_HOOKS};
const bench_target_t bench_peer_redis_everysec = {
    .system = "redis-aof-everysec", .open = redis_open_everysec, REDIS_HOOKS};
#else
static int
redis_missing(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    (void)cell;
    (void)state_out;
    snprintf(note, note_cap, "built without hiredis (install libhiredis-dev and rebuild)");
    return BENCH_SKIPPED;
}
const bench_target_t bench_peer_redis_always = {.system = "redis-aof-always",
                                                .open = redis_missing};
const bench_target_t bench_peer_redis_everysec = {.system = "redis-aof-everysec",
                                                  .open = redis_missing};
#endif
