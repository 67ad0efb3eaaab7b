/*
 * bench_peer_rocksdb.c: RocksDB as a peer, through its C API.
 *
 * One database per cell in the cell directory, shared by all writers (RocksDB is
 * thread-safe), one Put per event with WriteOptions.sync=true: the WAL is fsynced before
 * the Put returns, and concurrent writers are grouped by RocksDB's own write-group leader
 * (its group commit): durable. Keys are 8-byte big-endian counters. Rows are counted back
 * with an iterator after the run.
 */
#include "bench_peers.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef BENCH_HAVE_ROCKSDB
#include <rocksdb/c.h>

typedef struct rocks_peer {
    rocksdb_t *db;
    rocksdb_options_t *opts;
    rocksdb_writeoptions_t *wopts;
    atomic_uint_fast64_t next_key;
} rocks_peer_t;

static int
rocks_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    rocks_peer_t *p = calloc(1, sizeof *p);
    if (!p)
        return BENCH_FAILED;
    atomic_init(&p->next_key, 1);
    p->opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(p->opts, 1);
    p->wopts = rocksdb_writeoptions_create();
    rocksdb_writeoptions_set_sync(p->wopts, 1);
    char path[BENCH_PATH_BYTES], *err = NULL;
    bench_path(path, sizeof path, cell->dir, "rocksdb");
    p->db = rocksdb_open(p->opts, path, &err);
    if (!p->db) {
        bench_note(note, note_cap, "rocksdb: %s", err ? err : "open failed");
        rocksdb_free(err);
        rocksdb_writeoptions_destroy(p->wopts);
        rocksdb_options_destroy(p->opts);
        free(p);
        return BENCH_FAILED;
    }
    *state_out = p;
    return 0;
}

static int
rocks_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)wstate;
    rocks_peer_t *p = state;
    uint64_t k = atomic_fetch_add(&p->next_key, 1);
    char key_be[8];
    for (int i = 0; i < 8; i++)
        key_be[i] = (char)(k >> (56 - 8 * i));
    char *err = NULL;
    rocksdb_put(p->db, p->wopts, key_be, sizeof key_be, (const char *)ev->data, ev->len, &err);
    if (err) {
        rocksdb_free(err);
        return -1;
    }
    return 0;
}

static int
rocks_close(void *state, bench_result_t *r)
{
    rocks_peer_t *p = state;
    r->is_durable = 1;
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    rocksdb_iterator_t *it = rocksdb_create_iterator(p->db, ro);
    int64_t n = 0;
    for (rocksdb_iter_seek_to_first(it); rocksdb_iter_valid(it); rocksdb_iter_next(it))
        n++;
    r->counted_back = n;
    rocksdb_iter_destroy(it);
    rocksdb_readoptions_destroy(ro);
    rocksdb_close(p->db);
    rocksdb_writeoptions_destroy(p->wopts);
    rocksdb_options_destroy(p->opts);
    free(p);
    return 0;
}

const bench_target_t bench_peer_rocksdb = {
    .system = "rocksdb-sync", .open = rocks_open, .append = rocks_append, .close = rocks_close};
#else
static int
rocks_missing(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    (void)cell;
    (void)state_out;
    snprintf(note, note_cap, "built without RocksDB (install librocksdb-dev and rebuild)");
    return BENCH_SKIPPED;
}
const bench_target_t bench_peer_rocksdb = {.system = "rocksdb-sync", .open = rocks_missing};
#endif
