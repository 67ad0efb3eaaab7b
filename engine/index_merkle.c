/*
 * index_merkle.c: the index's merkle table (index.h): the Merkle tree's stored hashes
 * (journal/merkle.h), a cache of a version 2 journal's tree so that a proof costs O(log n)
 * reads instead of hashing every record. Each entry is a run: the stored hashes a batch
 * completed, keyed by the first one's stored index (big-endian), 32 bytes each. Runs follow
 * each other without gaps from index 0; the cache is rebuilt from the segments when it is
 * missing or short (index_catchup.c) and trimmed when recovery cut records. Writes go
 * through index_txn.c's transactions; the index writer is the only writer once the engine
 * runs.
 */
#include "index_lmdb.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define INDEX_MERKLE_HASH_BYTES 32

static int
index_merkle_check(index_t *ix, stele_error_t *err)
{
    if (!ix)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index merkle: no index");
    if (!ix->has_merkle)
        return error_set_hinted(err, STELE_ENOTFOUND, NULL, "index %s holds no merkle hashes yet",
                                ix->path);
    return 0;
}

typedef struct index_runs_arg {
    const index_merkle_run_t *runs;
    size_t n;
} index_runs_arg_t;

static int
index_put_runs_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    const index_runs_arg_t *a = arg;
    for (size_t i = 0; i < a->n; i++) {
        uint8_t kb[8];
        index_put_u64(kb, a->runs[i].first_index);
        MDB_val k = {sizeof kb, kb};
        MDB_val v = {a->runs[i].n * INDEX_MERKLE_HASH_BYTES, (void *)a->runs[i].hashes};
        int mrc = mdb_put(txn, ix->merkle, &k, &v, 0);
        if (mrc)
            return mrc;
    }
    return 0;
}

int
index_put_merkle_runs(index_t *ix, const index_merkle_run_t *runs, size_t n, stele_error_t *err)
{
    int rc = index_merkle_check(ix, err);
    if (!rc)
        rc = index_check_writable(ix, err);
    if (rc || n == 0)
        return rc;
    index_runs_arg_t a = {runs, n};
    int mrc = index_write(ix, index_put_runs_txn, &a);
    return mrc ? index_mdb_fail(err, mrc, ix, "write merkle hashes to") : 0;
}

/* The run holding stored index x, found with a cursor in txn: its key and value. */
static int
index_merkle_find(index_t *ix, MDB_txn *txn, uint64_t x, uint64_t *first, MDB_val *v)
{
    MDB_cursor *cur = NULL;
    int mrc = mdb_cursor_open(txn, ix->merkle, &cur);
    if (mrc)
        return mrc;
    uint8_t kb[8];
    index_put_u64(kb, x);
    MDB_val k = {sizeof kb, kb};
    mrc = mdb_cursor_get(cur, &k, v, MDB_SET_RANGE);
    if (mrc == 0 && index_get_u64(k.mv_data) != x)
        mrc = mdb_cursor_get(cur, &k, v, MDB_PREV);
    else if (mrc == MDB_NOTFOUND)
        mrc = mdb_cursor_get(cur, &k, v, MDB_LAST);
    if (mrc == 0 && k.mv_size == 8)
        *first = index_get_u64(k.mv_data);
    else if (mrc == 0)
        mrc = MDB_CORRUPTED;
    mdb_cursor_close(cur);
    return mrc;
}

int
index_read_merkle(index_t *ix, uint64_t stored_index, uint8_t out[32], stele_error_t *err)
{
    int rc = index_merkle_check(ix, err);
    MDB_txn *txn = NULL;
    if (!rc)
        rc = index_read_begin(ix, &txn, err);
    if (rc)
        return rc;
    uint64_t first = 0;
    MDB_val v;
    int mrc = index_merkle_find(ix, txn, stored_index, &first, &v);
    uint64_t n = mrc == 0 ? v.mv_size / INDEX_MERKLE_HASH_BYTES : 0;
    if (mrc == 0 && first <= stored_index && stored_index < first + n)
        memcpy(out, (const uint8_t *)v.mv_data + (stored_index - first) * INDEX_MERKLE_HASH_BYTES,
               INDEX_MERKLE_HASH_BYTES);
    else if (mrc == 0 || mrc == MDB_NOTFOUND)
        rc = error_set_hinted(err, STELE_ENOTFOUND, NULL, "index %s holds no merkle hash %llu",
                              ix->path, (unsigned long long)stored_index);
    else
        rc = index_mdb_fail(err, mrc, ix, "read merkle hashes from");
    index_read_end(ix, txn);
    return rc;
}

int
index_merkle_end(index_t *ix, uint64_t *end_out, stele_error_t *err)
{
    *end_out = 0;
    int rc = index_merkle_check(ix, err);
    if (rc == STELE_ENOTFOUND)
        return 0;
    MDB_txn *txn = NULL;
    if (!rc)
        rc = index_read_begin(ix, &txn, err);
    if (rc)
        return rc;
    uint64_t first = 0;
    MDB_val v;
    int mrc = index_merkle_find(ix, txn, UINT64_MAX, &first, &v);
    if (mrc == 0)
        *end_out = first + v.mv_size / INDEX_MERKLE_HASH_BYTES;
    else if (mrc != MDB_NOTFOUND)
        rc = index_mdb_fail(err, mrc, ix, "read merkle hashes from");
    index_read_end(ix, txn);
    return rc;
}

typedef struct index_cut_arg {
    uint64_t end;
} index_cut_arg_t;

/* Drops runs at or past end and shortens one that crosses it. */
static int
index_truncate_merkle_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    uint64_t end = ((const index_cut_arg_t *)arg)->end;
    uint64_t first = 0;
    MDB_val v;
    for (;;) {
        int mrc = index_merkle_find(ix, txn, UINT64_MAX, &first, &v);
        if (mrc == MDB_NOTFOUND)
            return 0;
        if (mrc)
            return mrc;
        uint64_t n = v.mv_size / INDEX_MERKLE_HASH_BYTES;
        if (first + n <= end)
            return 0;
        uint8_t kb[8];
        index_put_u64(kb, first);
        MDB_val k = {sizeof kb, kb};
        if (first >= end) {
            mrc = mdb_del(txn, ix->merkle, &k, NULL);
        } else {
            /* Copied out first: the value lives in the page the put rewrites. */
            size_t keep = (size_t)(end - first) * INDEX_MERKLE_HASH_BYTES;
            void *copy = malloc(keep);
            if (!copy)
                return ENOMEM;
            memcpy(copy, v.mv_data, keep);
            MDB_val shorter = {keep, copy};
            mrc = mdb_put(txn, ix->merkle, &k, &shorter, 0);
            free(copy);
        }
        if (mrc)
            return mrc;
    }
}

int
index_truncate_merkle(index_t *ix, uint64_t end, stele_error_t *err)
{
    int rc = index_merkle_check(ix, err);
    if (!rc)
        rc = index_check_writable(ix, err);
    if (rc)
        return rc;
    index_cut_arg_t a = {end};
    int mrc = index_write(ix, index_truncate_merkle_txn, &a);
    return mrc ? index_mdb_fail(err, mrc, ix, "trim merkle hashes of") : 0;
}
