/*
 * bench_peer_pg.c: PostgreSQL as a peer.
 *
 * A private cluster per cell: initdb into the cell directory, then `postgres` started
 * directly (no pg_ctl, so the PID is ours) on 127.0.0.1 and a free port, no Unix socket.
 * When stele-bench runs as root, both run as the "postgres" user (PostgreSQL refuses root),
 * and the cell directory is handed to that user. One libpq connection per writer, one
 * prepared INSERT of the event as `json` per append, autocommit. Modes:
 *   pg-sync-on       synchronous_commit=on: every commit waits for its WAL flush (durable);
 *   pg-commit-delay  the same with commit_delay=1000 us, commit_siblings=5 (durable);
 *   pg-sync-off      synchronous_commit=off: commits return before the flush (not durable).
 * WAL syncs are read back from pg_stat_wal (PostgreSQL 14+), rows with count(*).
 */
#include "bench_peers.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef BENCH_HAVE_LIBPQ
#include <libpq-fe.h>
#include <pwd.h>

#define PG_START_TIMEOUT_MS 30000
#define PG_STOP_TIMEOUT_MS 30000
#define PG_RUN_AS "postgres"

typedef enum pg_mode { PG_SYNC_ON, PG_COMMIT_DELAY, PG_SYNC_OFF } pg_mode_t;

typedef struct pg_peer {
    pid_t pid;
    int port;
    pg_mode_t mode;
    char conninfo[128];
} pg_peer_t;

static const char *const pg_bin_dirs[] = {
    "/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin", NULL};

/* Hands the cell directory to the postgres user (and lets it traverse the parent, which
 * stele-bench created with mode 0700). */
static int
pg_prepare_dir(const char *cell_dir, const char **run_as)
{
    *run_as = NULL;
    if (geteuid() != 0)
        return 0;
    struct passwd *pw = getpwnam(PG_RUN_AS);
    if (!pw)
        return -1;
    char parent[BENCH_PATH_BYTES];
    snprintf(parent, sizeof parent, "%s", cell_dir);
    char *slash = strrchr(parent, '/');
    if (slash)
        *slash = '\0';
    if (chmod(parent, 0711) != 0 || chown(cell_dir, pw->pw_uid, pw->pw_gid) != 0)
        return -1;
    *run_as = PG_RUN_AS;
    return 0;
}

static int
pg_wait_ready(const pg_peer_t *p)
{
    for (int waited = 0; waited < PG_START_TIMEOUT_MS; waited += 100) {
        if (PQping(p->conninfo) == PQPING_OK)
            return 0;
        bench_sleep_ms(100);
    }
    return -1;
}

static int
pg_exec(PGconn *c, const char *sql)
{
    PGresult *res = PQexec(c, sql);
    int rc = (PQresultStatus(res) == PGRES_COMMAND_OK) ? 0 : -1;
    PQclear(res);
    return rc;
}

static int
pg_start(pg_peer_t *p, const bench_cell_t *cell, char *note, size_t note_cap)
{
    char initdb[BENCH_PATH_BYTES], postgres[BENCH_PATH_BYTES];
    if (bench_server_find("initdb", pg_bin_dirs, initdb, sizeof initdb) ||
        bench_server_find("postgres", pg_bin_dirs, postgres, sizeof postgres)) {
        snprintf(note, note_cap, "initdb/postgres not found (install postgresql)");
        return BENCH_SKIPPED;
    }
    const char *run_as = NULL;
    char data[BENCH_PATH_BYTES], log[BENCH_PATH_BYTES], port[16];
    bench_path(data, sizeof data, cell->dir, "pgdata");
    bench_path(log, sizeof log, cell->dir, "postgres.log");
    if (pg_prepare_dir(cell->dir, &run_as)) {
        snprintf(note, note_cap, "running as root needs a \"%s\" user", PG_RUN_AS);
        return BENCH_SKIPPED;
    }
    char *init_argv[] = {initdb,  "-D", data,   "-U",        "postgres",          "-A",
                         "trust", "-E", "UTF8", "--no-sync", "--no-instructions", NULL};
    if (bench_server_run(init_argv, log, run_as) != 0) {
        snprintf(note, note_cap, "initdb failed (see %s)", log);
        return BENCH_FAILED;
    }
    p->port = bench_server_free_port();
    snprintf(port, sizeof port, "%d", p->port);
    snprintf(p->conninfo, sizeof p->conninfo,
             "host=127.0.0.1 port=%d user=postgres dbname=postgres", p->port);
    char *argv[] = {postgres,
                    "-D",
                    data,
                    "-p",
                    port,
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "unix_socket_directories=",
                    "-c",
                    "max_connections=600",
                    "-c",
                    "fsync=on",
                    "-c",
                    "wal_sync_method=fdatasync",
                    "-c",
                    p->mode == PG_SYNC_OFF ? "synchronous_commit=off" : "synchronous_commit=on",
                    "-c",
                    p->mode == PG_COMMIT_DELAY ? "commit_delay=1000" : "commit_delay=0",
                    "-c",
                    "commit_siblings=5",
                    NULL};
    p->pid = bench_server_spawn(argv, log, run_as);
    if (p->pid < 0 || pg_wait_ready(p)) {
        snprintf(note, note_cap, "postgres did not start (see %s)", log);
        bench_server_stop(p->pid, SIGKILL, 1000);
        return BENCH_FAILED;
    }
    return 0;
}

static int
pg_open_mode(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap,
             pg_mode_t mode)
{
    pg_peer_t *p = calloc(1, sizeof *p);
    if (!p)
        return BENCH_FAILED;
    p->mode = mode;
    int rc = pg_start(p, cell, note, note_cap);
    if (rc) {
        free(p);
        return rc;
    }
    PGconn *c = PQconnectdb(p->conninfo);
    if (PQstatus(c) != CONNECTION_OK ||
        pg_exec(c, "CREATE TABLE events(id bigserial PRIMARY KEY, body json NOT NULL)")) {
        snprintf(note, note_cap, "postgres: %s", PQerrorMessage(c));
        PQfinish(c);
        bench_server_stop(p->pid, SIGINT, PG_STOP_TIMEOUT_MS);
        free(p);
        return BENCH_FAILED;
    }
    /* WAL syncs from here on are the run's (initdb and CREATE TABLE do not count). */
    PGresult *res = PQexec(c, "SELECT pg_stat_reset_shared('wal')");
    PQclear(res);
    PQfinish(c);
    *state_out = p;
    return 0;
}

static int
pg_open_on(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return pg_open_mode(cell, state_out, note, note_cap, PG_SYNC_ON);
}

static int
pg_open_delay(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return pg_open_mode(cell, state_out, note, note_cap, PG_COMMIT_DELAY);
}

static int
pg_open_off(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return pg_open_mode(cell, state_out, note, note_cap, PG_SYNC_OFF);
}

/* The timed window opens: WAL sync counts restart (the warm-up's are not the run's). */
static void
pg_measure_start(void *state)
{
    pg_peer_t *p = state;
    PGconn *c = PQconnectdb(p->conninfo);
    if (PQstatus(c) == CONNECTION_OK) {
        PGresult *res = PQexec(c, "SELECT pg_stat_reset_shared('wal')");
        PQclear(res);
    }
    PQfinish(c);
}

static int
pg_writer_open(void *state, int writer_id, void **wstate_out, char *note, size_t note_cap)
{
    (void)writer_id;
    pg_peer_t *p = state;
    PGconn *c = PQconnectdb(p->conninfo);
    PGresult *res = NULL;
    if (PQstatus(c) == CONNECTION_OK)
        res = PQprepare(c, "ins", "INSERT INTO events(body) VALUES($1::json)", 1, NULL);
    if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
        snprintf(note, note_cap, "postgres: %s", PQerrorMessage(c));
        PQclear(res);
        PQfinish(c);
        return BENCH_FAILED;
    }
    PQclear(res);
    *wstate_out = c;
    return 0;
}

static int
pg_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)state;
    const char *values[1] = {(const char *)ev->data};
    int lengths[1] = {(int)ev->len};
    int formats[1] = {1}; /* binary: the text need not be NUL-terminated */
    PGresult *res = PQexecPrepared(wstate, "ins", 1, values, lengths, formats, 0);
    int rc = PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : -1;
    PQclear(res);
    return rc;
}

static void
pg_writer_close(void *state, void *wstate)
{
    (void)state;
    PQfinish(wstate);
}

static int64_t
pg_query_int(PGconn *c, const char *sql)
{
    PGresult *res = PQexec(c, sql);
    int64_t v = -1;
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
        v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return v;
}

static int
pg_close(void *state, bench_result_t *r)
{
    pg_peer_t *p = state;
    r->is_durable = p->mode != PG_SYNC_OFF;
    PGconn *c = PQconnectdb(p->conninfo);
    if (PQstatus(c) == CONNECTION_OK) {
        r->counted_back = pg_query_int(c, "SELECT count(*) FROM events");
        int64_t syncs = pg_query_int(c, "SELECT wal_sync FROM pg_stat_wal");
        if (syncs >= 0) /* -1: the query failed, they stay unknown */
            r->syncs = syncs;
        if (syncs > 0)
            r->mean_batch = (double)r->appends / (double)syncs;
    }
    PQfinish(c);
    bench_server_stop(p->pid, SIGINT, PG_STOP_TIMEOUT_MS);
    free(p);
    return 0;
}

#define PG_HOOKS                                                                                   \
    .writer_open = pg_writer_open, .append = pg_append, .writer_close = pg_writer_close,           \
    .measure_start = pg_measure_start, .close = pg_close
const bench_target_t bench_peer_pg_on = {.system = "pg-sync-on", .open = pg_open_on, PG_HOOKS};
const bench_target_t bench_peer_pg_delay = {
    .system = "pg-commit-delay", .open = pg_open_delay, PG_HOOKS};
const bench_target_t bench_peer_pg_off = {.system = "pg-sync-off", .open = pg_open_off, PG_HOOKS};
#else
static int
pg_missing(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    (void)cell;
    (void)state_out;
    snprintf(note, note_cap, "built without libpq (install libpq-dev and rebuild)");
    return BENCH_SKIPPED;
}
const bench_target_t bench_peer_pg_on = {.system = "pg-sync-on", .open = pg_missing};
const bench_target_t bench_peer_pg_delay = {.system = "pg-commit-delay", .open = pg_missing};
const bench_target_t bench_peer_pg_off = {.system = "pg-sync-off", .open = pg_missing};
#endif
