/*
 * bench_peers.h: the peer targets (one file each) and the helpers they share for private
 * server processes (bench_server.c).
 */
#ifndef STELE_BENCH_PEERS_H
#define STELE_BENCH_PEERS_H

#include "bench.h"

#include <sys/types.h>

extern const bench_target_t bench_peer_sqlite_full;
extern const bench_target_t bench_peer_sqlite_normal;
extern const bench_target_t bench_peer_lmdb;
extern const bench_target_t bench_peer_rocksdb;
extern const bench_target_t bench_peer_redis_always;
extern const bench_target_t bench_peer_redis_everysec;
extern const bench_target_t bench_peer_pg_on;
extern const bench_target_t bench_peer_pg_delay;
extern const bench_target_t bench_peer_pg_off;
extern const bench_target_t bench_peer_mongo_direct;

/* The database the MongoDB cells write to (mongo-direct and stele's wait=shipped sink). */
#define BENCH_MONGO_DATABASE "stele_bench"
/* A collection name no earlier cell used: prefix, PID and the monotonic clock. */
void bench_mongo_fresh_collection(const char *prefix, char *out, size_t cap);
/* Drops BENCH_MONGO_DATABASE.collection at uri. Returns 0, or -1 when it could not. */
int bench_mongo_drop(const char *uri, const char *collection);

/* A free TCP port on 127.0.0.1 (bound and released; the server binds it right after). */
int bench_server_free_port(void);
/* Finds an executable by name in PATH, then in each of the extra directories (may be NULL).
 * Fills out; returns 0 or -ENOENT. */
int bench_server_find(const char *name, const char *const *extra_dirs, char *out, size_t cap);
/* fork + exec argv with stdout/stderr into log_path, as user `run_as` when not NULL and we
 * are root. Returns the child's PID or -errno. */
pid_t bench_server_spawn(char *const argv[], const char *log_path, const char *run_as);
/* Runs argv to completion (same options); returns its exit status or -errno. */
int bench_server_run(char *const argv[], const char *log_path, const char *run_as);
/* Sends sig to pid and waits for it up to timeout_ms, then SIGKILL. Only for PIDs we
 * spawned. Returns its exit code (128 + the signal that ended it), or -1 when it had to be
 * killed. */
int bench_server_stop(pid_t pid, int sig, int timeout_ms);
/* Whether a server we spawned has exited (then it is reaped, forgotten, and *exit_code set as
 * bench_server_stop reports it). Never blocks. */
int bench_server_exited(pid_t pid, int *exit_code);
/* SIGKILLs and reaps every server still running: those of a cell abandoned because its
 * store hung, which was not closed (closing could hang too). Called as the run ends. */
void bench_server_stop_all(void);
/* Sleeps ms milliseconds. */
void bench_sleep_ms(int ms);

#endif /* STELE_BENCH_PEERS_H */
