/*
 * index_lmdb.h: the LMDB side of the index that the index*.c files share, and no other
 * file: lmdb.h is included only by them. It holds the handle and the per-process
 * environment entry (index_env.c), the transactions every table goes through (index_txn.c)
 * and the big-endian key encoding. The tables themselves are index.c (batch starts by seq
 * and by time), index_meta.c (small named values), index_sinks.c (checkpoints and dead
 * letters) and index_merkle.c (the Merkle tree's stored hashes); index_env.c's top comment
 * gives the layout of all six.
 */
#ifndef STELE_ENGINE_INDEX_LMDB_H
#define STELE_ENGINE_INDEX_LMDB_H

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "index.h"

/* batches, times, meta, checkpoints, dead, merkle. */
#define INDEX_MAX_DBS 6
/* The longest meta value, and key. */
#define INDEX_META_VALUE_MAX 256
/* The longest sink name a checkpoint or dead letter is kept under. */
#define INDEX_SINK_NAME_MAX 63

/* An environment open in this process, shared by the handles of its index (index_env.c). */
typedef struct index_shared {
    dev_t dev;
    ino_t ino; /* of the index directory */
    MDB_env *env;
    MDB_dbi dbis[INDEX_MAX_DBS]; /* batches, times, meta, checkpoints, dead, merkle */
    int has_merkle;              /* the merkle table exists (a read-only open may lack it) */
    int is_writable;
    /* Held shared by every transaction on env, exclusively to resize its map. */
    pthread_rwlock_t map_lock;
    /* -- protected by index_registry_mu (index_env.c) -- */
    int refs;
    struct index_shared *next;
} index_shared_t;

struct index {
    MDB_env *env;
    MDB_dbi batches;
    MDB_dbi times;
    MDB_dbi meta;
    MDB_dbi checkpoints;
    MDB_dbi dead;
    MDB_dbi merkle;
    int has_merkle;         /* the merkle table exists (a read-only open may lack it) */
    int is_writable;        /* what this handle may do, whatever the environment allows */
    int is_snapshot;        /* path is the monitor snapshot file (index_snapshot.c) */
    index_shared_t *shared; /* the entry of the environment this handle uses */
    size_t map_bytes;       /* the map of an environment this handle opens */
    char path[4096];
    /* Test seam (index_fail_writes): write transactions of this handle left to fail, and
     * the errno they fail with. Atomics: a test arms them while another thread writes. */
    _Atomic uint32_t n_failing_writes;
    _Atomic int failing_write_errno;
    _Atomic uint64_t keep_free_bytes; /* index_keep_free */
};

/* The tables' names, in the order of index_shared_t's dbis. */
extern const char *const index_table_names[INDEX_MAX_DBS];

/* Keys and numbers are stored big-endian, so LMDB's memcmp order is numeric order. */
static inline void
index_put_u64(uint8_t *out, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline uint64_t
index_get_u64(const uint8_t *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | in[i];
    return v;
}

/* -- index_txn.c ------------------------------------------------------------------------ */

/* Fills err with LMDB's failure, as "could not <what> index <path>: <LMDB's text>" (with a
 * hint when the index is corrupt); returns the stele code for mdb_rc. */
int index_mdb_fail(stele_error_t *err, int mdb_rc, const index_t *ix, const char *what);

/* Begins a transaction (flags 0 or MDB_RDONLY) holding ix's map lock shared until
 * index_txn_end, adopting a map another process grew. Returns an LMDB code; on failure
 * nothing is held. */
int index_txn_begin(index_t *ix, unsigned flags, MDB_txn **txn);
/* Ends what index_txn_begin began: commits when is_commit, else aborts. LMDB frees the
 * transaction either way (a failed commit aborts it). Returns the commit's LMDB code. */
int index_txn_end(index_t *ix, MDB_txn *txn, int is_commit);

/* A read transaction, its failure described in err. End it with index_read_end. */
int index_read_begin(index_t *ix, MDB_txn **txn, stele_error_t *err);
void index_read_end(index_t *ix, MDB_txn *txn);

/* One write transaction's work on txn. Returns an LMDB code; nonzero aborts the
 * transaction. It may run more than once (index_write), each time in a new transaction
 * that sees nothing of the last, so it must set its outputs afresh. */
typedef int (*index_write_fn)(index_t *ix, MDB_txn *txn, void *arg);

/* Runs fn in a write transaction and commits it, growing a full map and running fn again.
 * A write armed to fail (index_fail_writes) fails here first. Returns an LMDB code. */
int index_write(index_t *ix, index_write_fn fn, void *arg);

/* One key put, or deleted (deleting a missing key is no error), in one table. */
typedef struct index_kv_arg {
    MDB_dbi dbi;
    MDB_val key;
    MDB_val value;
    int is_delete;
} index_kv_arg_t;

/* Writes kv in a write transaction of its own, its failure described as `what`. */
int index_write_kv(index_t *ix, const index_kv_arg_t *kv, const char *what, stele_error_t *err);

/* Writes need a writable handle (a read-only one may share a writable environment):
 * 0, or STELE_EINVAL described in err. */
int index_check_writable(const index_t *ix, stele_error_t *err);

/* Keys are non-empty text without NUL of at most max bytes (LMDB's key limit is larger):
 * 0, or STELE_EINVAL naming `what` in err. */
int index_check_name(const char *what, const char *name, size_t max, stele_error_t *err);

#endif /* STELE_ENGINE_INDEX_LMDB_H */
