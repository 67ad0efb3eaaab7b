/*
 * mongo_server.h: the MongoDB-compatible test server for stele's integration tests.
 *
 * By default each test starts its own FerretDB (SQLite backend; tests/integration/
 * ferretdb-server) on a free 127.0.0.1 port with a data directory of its own under a
 * mkdtemp directory, and stops it by PID. The binary is found in STELE_TEST_SERVER_BIN,
 * else ${XDG_CACHE_HOME:-$HOME/.cache}/stele/ferretdb-server (where build-test-server.sh
 * puts it). When STELE_TEST_MONGO_URI is set, that server is used instead, and the calls
 * that stop, freeze or restart the server return MONGO_SERVER_EXTERNAL so a test can skip
 * with a clear message.
 */
#ifndef STELE_TEST_MONGO_SERVER_H
#define STELE_TEST_MONGO_SERVER_H

#include <limits.h>
#include <sys/types.h>

#define MONGO_SERVER_EXTERNAL 1 /* returned by control calls on an external server */

typedef struct mongo_server {
    int is_external;
    pid_t pid; /* 0 when not running */
    int port;
    char base_dir[PATH_MAX]; /* mkdtemp: data/, log */
    char data_dir[PATH_MAX];
    char uri[512]; /* without options; the tests add theirs */
} mongo_server_t;

/* Starts a fresh server (or adopts STELE_TEST_MONGO_URI) and waits until it answers ping.
 * Returns 0 or -1 with a message on stderr. */
int mongo_server_start(mongo_server_t *ms);

/* Stops the server (SIGTERM, then SIGKILL after 10 s) and removes its directory. */
void mongo_server_destroy(mongo_server_t *ms);

/* Sends `sig` to the server (SIGSTOP, SIGCONT, SIGKILL, ...). After SIGKILL/SIGTERM the
 * process is reaped. Returns 0, MONGO_SERVER_EXTERNAL, or -1. */
int mongo_server_signal(mongo_server_t *ms, int sig);

/* Starts the server again on the same port and data directory (after a kill). */
int mongo_server_restart(mongo_server_t *ms);

/* Copies the data directory to `dest` (cp -a); take it while the server is stopped. */
int mongo_server_copy_data(const mongo_server_t *ms, const char *dest);

/* Replaces the data directory by the copy in `src` (server must be stopped). */
int mongo_server_replace_data(mongo_server_t *ms, const char *src);

/* Waits until the server answers ping, up to timeout_ms. Returns 0 or -1. */
int mongo_server_wait_ready(const mongo_server_t *ms, int timeout_ms);

/* Picks a free 127.0.0.1 TCP port (bind to 0, read it back, close). */
int mongo_server_free_port(void);

/* Removes a directory tree (rm -rf by posix_spawn). */
int mongo_server_rm_rf(const char *path);

#endif /* STELE_TEST_MONGO_SERVER_H */
