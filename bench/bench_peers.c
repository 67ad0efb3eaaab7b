/*
 * bench_peers.c: the systems users would pick instead of stele, as benchmark targets, and
 * the private servers some of them need.
 *
 * Every peer gets the same events (JSON text), the same writer threads and the same
 * directory (so the same disk, emulated or not) as stele. Each is optional: when its
 * library was not found at build time or its server binary is missing, the cell is
 * reported "skipped" with the reason, never faked. Servers (Redis, PostgreSQL) are started
 * by the benchmark itself on 127.0.0.1 and a free port, with their data in the cell's
 * directory, and stopped by the PID the benchmark got from fork(); nothing else is
 * touched. After each run the rows are counted back from the peer into counted_back.
 * Modes that acknowledge before the disk has the record are marked not durable.
 */
#include "bench_peers.h"

#include <errno.h>
#include <string.h>

static const bench_target_t *const peer_targets[] = {
    &bench_peer_sqlite_full,  &bench_peer_sqlite_normal,  &bench_peer_lmdb,  &bench_peer_rocksdb,
    &bench_peer_redis_always, &bench_peer_redis_everysec, &bench_peer_pg_on, &bench_peer_pg_delay,
    &bench_peer_pg_off,       &bench_peer_mongo_direct,
};
static const char *const peer_names[] = {
    "sqlite-wal-full",  "sqlite-wal-normal",  "lmdb",       "rocksdb-sync",
    "redis-aof-always", "redis-aof-everysec", "pg-sync-on", "pg-commit-delay",
    "pg-sync-off",      "mongo-direct",       NULL,
};

_Static_assert(sizeof peer_targets / sizeof peer_targets[0] + 1 ==
                   sizeof peer_names / sizeof peer_names[0],
               "one name per peer");

const bench_target_t *
bench_peer_find(const char *system)
{
    for (size_t i = 0; i < sizeof peer_targets / sizeof peer_targets[0]; i++)
        if (strcmp(peer_targets[i]->system, system) == 0)
            return peer_targets[i];
    return NULL;
}

const char *const *
bench_peer_names(void)
{
    return peer_names;
}
