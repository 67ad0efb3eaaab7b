/*
 * bench_peer_embedded.c: the embedded peers, SQLite in WAL mode and LMDB.
 *
 * SQLite: one connection per writer on one database file (journal_mode=WAL), one INSERT per
 * event in autocommit, busy_timeout so writers queue on SQLite's write lock the way an
 * application's would. synchronous=FULL syncs the WAL at every commit (durable);
 * synchronous=NORMAL syncs only at checkpoints, so a power loss may drop the last commits
 * ("not durable"). LMDB: one write transaction per event (MDB default: data sync + meta
 * sync per commit, so two fdatasyncs), the writers serialised by LMDB's writer lock.
 * Neither library counts the syncs it issues: their cells report syncs and records per sync
 * as unknown rather than what the documentation says they should be.
 */
#include "bench_peers.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef BENCH_HAVE_SQLITE
#include <sqlite3.h>
#endif
#include <lmdb.h>

/* ------------------------------------------------------------------------------------------
 * SQLite
 * ------------------------------------------------------------------------------------------ */
#ifdef BENCH_HAVE_SQLITE
/* Writers wait this long for the write lock before an insert counts as failed. */
#define SQLITE_BUSY_TIMEOUT_MS 60000

typedef struct sqlite_peer {
    char path[BENCH_PATH_BYTES];
    int is_full;
} sqlite_peer_t;

typedef struct sqlite_writer {
    sqlite3 *db;
    sqlite3_stmt *insert;
} sqlite_writer_t;

static int
sqlite_exec(sqlite3 *db, const char *sql, char *note, size_t note_cap)
{
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK)
        return 0;
    snprintf(note, note_cap, "sqlite: %s: %s", sql, msg ? msg : "error");
    sqlite3_free(msg);
    return BENCH_FAILED;
}

static int
sqlite_open_any(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap,
                int is_full)
{
    sqlite_peer_t *p = calloc(1, sizeof *p);
    if (!p)
        return BENCH_FAILED;
    p->is_full = is_full;
    bench_path(p->path, sizeof p->path, cell->dir, "bench.sqlite");
    sqlite3 *db = NULL;
    int rc = sqlite3_open(p->path, &db) == SQLITE_OK ? 0 : BENCH_FAILED;
    if (rc)
        snprintf(note, note_cap, "sqlite: could not open %s", p->path);
    rc = rc ? rc : sqlite_exec(db, "PRAGMA journal_mode=WAL", note, note_cap);
    rc = rc ? rc
            : sqlite_exec(db, "CREATE TABLE events(id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
                          note, note_cap);
    sqlite3_close(db);
    if (rc) {
        free(p);
        return rc;
    }
    *state_out = p;
    return 0;
}

static int
sqlite_open_full(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return sqlite_open_any(cell, state_out, note, note_cap, 1);
}

static int
sqlite_open_normal(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return sqlite_open_any(cell, state_out, note, note_cap, 0);
}

static int
sqlite_writer_open(void *state, int writer_id, void **wstate_out, char *note, size_t note_cap)
{
    (void)writer_id;
    sqlite_peer_t *p = state;
    sqlite_writer_t *w = calloc(1, sizeof *w);
    if (!w)
        return BENCH_FAILED;
    int rc = sqlite3_open_v2(p->path, &w->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) ==
                     SQLITE_OK
                 ? 0
                 : BENCH_FAILED;
    if (!rc)
        sqlite3_busy_timeout(w->db, SQLITE_BUSY_TIMEOUT_MS);
    rc = rc ? rc
            : sqlite_exec(w->db,
                          p->is_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                          note, note_cap);
    if (!rc && sqlite3_prepare_v2(w->db, "INSERT INTO events(body) VALUES(?)", -1, &w->insert,
                                  NULL) != SQLITE_OK) {
        snprintf(note, note_cap, "sqlite: %s", sqlite3_errmsg(w->db));
        rc = BENCH_FAILED;
    }
    if (rc) {
        sqlite3_close(w->db);
        free(w);
        return rc;
    }
    *wstate_out = w;
    return 0;
}

static int
sqlite_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)state;
    sqlite_writer_t *w = wstate;
    sqlite3_bind_text(w->insert, 1, (const char *)ev->data, (int)ev->len, SQLITE_STATIC);
    int rc = sqlite3_step(w->insert);
    sqlite3_reset(w->insert);
    return rc == SQLITE_DONE ? 0 : -1;
}

static void
sqlite_writer_close(void *state, void *wstate)
{
    (void)state;
    sqlite_writer_t *w = wstate;
    sqlite3_finalize(w->insert);
    sqlite3_close(w->db);
    free(w);
}

static int
sqlite_close(void *state, bench_result_t *r)
{
    sqlite_peer_t *p = state;
    r->is_durable = p->is_full;
    /* syncs and mean_batch stay unknown: SQLite does not count its WAL syncs */
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_open(p->path, &db) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT count(*) FROM events", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        r->counted_back = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    snprintf(r->data_path, sizeof r->data_path, "%s", p->path);
    free(p);
    return 0;
}

#define SQLITE_HOOKS                                                                               \
    .writer_open = sqlite_writer_open, .append = sqlite_append,                                    \
    .writer_close = sqlite_writer_close, .close = sqlite_close
const bench_target_t bench_peer_sqlite_full = {
    .system = "sqlite-wal-full", .open = sqlite_open_full, SQLITE_HOOKS};
const bench_target_t bench_peer_sqlite_normal = {
    .system = "sqlite-wal-normal", .open = sqlite_open_normal, SQLITE_HOOKS};
#else
static int
sqlite_missing(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    (void)cell;
    (void)state_out;
    snprintf(note, note_cap, "built without SQLite (install libsqlite3-dev and rebuild)");
    return BENCH_SKIPPED;
}
const bench_target_t bench_peer_sqlite_full = {.system = "sqlite-wal-full", .open = sqlite_missing};
const bench_target_t bench_peer_sqlite_normal = {.system = "sqlite-wal-normal",
                                                 .open = sqlite_missing};
#endif

/* ------------------------------------------------------------------------------------------
 * LMDB
 * ------------------------------------------------------------------------------------------ */
/* Map size: address space only (the file grows as needed); enough for any timed cell. */
#define LMDB_MAP_BYTES (16ull * 1024 * 1024 * 1024)

typedef struct lmdb_peer {
    MDB_env *env;
    MDB_dbi dbi;
    atomic_uint_fast64_t next_key;
} lmdb_peer_t;

static int
lmdb_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    lmdb_peer_t *p = calloc(1, sizeof *p);
    if (!p)
        return BENCH_FAILED;
    atomic_init(&p->next_key, 1);
    MDB_txn *txn = NULL;
    int rc = mdb_env_create(&p->env);
    rc = rc ? rc : mdb_env_set_mapsize(p->env, LMDB_MAP_BYTES);
    rc = rc ? rc : mdb_env_set_maxreaders(p->env, 4096);
    rc = rc ? rc : mdb_env_open(p->env, cell->dir, 0, 0600);
    rc = rc ? rc : mdb_txn_begin(p->env, NULL, 0, &txn);
    rc = rc ? rc : mdb_dbi_open(txn, NULL, 0, &p->dbi);
    rc = rc ? rc : mdb_txn_commit(txn);
    if (rc) {
        snprintf(note, note_cap, "lmdb: %s", mdb_strerror(rc));
        if (p->env)
            mdb_env_close(p->env);
        free(p);
        return BENCH_FAILED;
    }
    *state_out = p;
    return 0;
}

static int
lmdb_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)wstate;
    lmdb_peer_t *p = state;
    uint64_t k = atomic_fetch_add(&p->next_key, 1);
    uint8_t key_be[8];
    for (int i = 0; i < 8; i++)
        key_be[i] = (uint8_t)(k >> (56 - 8 * i));
    MDB_val key = {.mv_size = sizeof key_be, .mv_data = key_be};
    MDB_val val = {.mv_size = ev->len, .mv_data = (void *)ev->data};
    MDB_txn *txn = NULL;
    int rc = mdb_txn_begin(p->env, NULL, 0, &txn);
    if (rc)
        return rc;
    rc = mdb_put(txn, p->dbi, &key, &val, 0);
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    return mdb_txn_commit(txn);
}

static int
lmdb_close(void *state, bench_result_t *r)
{
    lmdb_peer_t *p = state;
    r->is_durable = 1;
    /* syncs and mean_batch stay unknown: LMDB does not count its syncs */
    MDB_stat st;
    if (mdb_env_stat(p->env, &st) == 0)
        r->counted_back = (int64_t)st.ms_entries;
    mdb_env_close(p->env);
    free(p);
    return 0;
}

const bench_target_t bench_peer_lmdb = {
    .system = "lmdb", .open = lmdb_open, .append = lmdb_append, .close = lmdb_close};
