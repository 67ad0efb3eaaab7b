/*
 * index.c: the batch starts of the index (index.h): one entry per committed batch in two
 * tables, batches (first seq -> segment, offset, first timestamp) and times (biased first
 * timestamp || first seq -> nothing), for seeks by seq and by time. index_env.c gives the
 * layout of every table and opens them; index_txn.c runs the transactions.
 *
 * Keys are big-endian so LMDB's memcmp order is numeric order; a timestamp is biased by
 * 2^63 so negative times sort first. The time key carries the seq too because two batches
 * may share a first timestamp (timestamps never decrease, they may repeat).
 *
 * Invariant: every batches entry has exactly one times entry and vice versa; both are
 * written and deleted in the same transaction.
 */
#include "index_lmdb.h"

#include <string.h>

#include "error.h"

/* Entries deleted per transaction by truncate/delete, so a huge delete does not hold one
 * giant dirty transaction. */
#define INDEX_DELETE_CHUNK 4096

/* Biased so that signed order equals unsigned (memcmp) order. */
static uint64_t
index_ts_key(int64_t ts_ns)
{
    return (uint64_t)ts_ns ^ ((uint64_t)1 << 63);
}

static void
index_encode_time_key(uint8_t key[16], int64_t ts_ns, uint64_t seq)
{
    index_put_u64(key, index_ts_key(ts_ns));
    index_put_u64(key + 8, seq);
}

static void
index_encode_batch(uint8_t val[24], const index_batch_t *b)
{
    index_put_u64(val, b->segment_seq);
    index_put_u64(val + 8, b->offset);
    index_put_u64(val + 16, (uint64_t)b->first_ts_ns);
}

static int
index_decode_batch(const MDB_val *key, const MDB_val *val, index_batch_t *out)
{
    if (key->mv_size != 8 || val->mv_size != 24)
        return STELE_ECORRUPT;
    const uint8_t *v = val->mv_data;
    out->first_seq = index_get_u64(key->mv_data);
    out->segment_seq = index_get_u64(v);
    out->offset = index_get_u64(v + 8);
    out->first_ts_ns = (int64_t)index_get_u64(v + 16);
    return 0;
}

/* A batch start written again (a rebuild, a repair) may carry another timestamp: its old
 * times entry goes, so the one-to-one invariant holds. */
static int
index_drop_old_time(index_t *ix, MDB_txn *txn, const index_batch_t *b)
{
    uint8_t kb[8];
    index_put_u64(kb, b->first_seq);
    MDB_val k = {sizeof kb, kb}, v;
    int mrc = mdb_get(txn, ix->batches, &k, &v);
    if (mrc == MDB_NOTFOUND)
        return 0;
    index_batch_t old;
    if (mrc || index_decode_batch(&k, &v, &old) != 0 || old.first_ts_ns == b->first_ts_ns)
        return mrc;
    uint8_t tk[16];
    index_encode_time_key(tk, old.first_ts_ns, old.first_seq);
    MDB_val t = {sizeof tk, tk};
    mrc = mdb_del(txn, ix->times, &t, NULL);
    return mrc == MDB_NOTFOUND ? 0 : mrc;
}

typedef struct index_batches_arg {
    const index_batch_t *batches;
    size_t n;
} index_batches_arg_t;

static int
index_put_batches_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    const index_batches_arg_t *a = arg;
    for (size_t i = 0; i < a->n; i++) {
        const index_batch_t *b = &a->batches[i];
        uint8_t kb[8], vb[24], tk[16];
        index_put_u64(kb, b->first_seq);
        index_encode_batch(vb, b);
        index_encode_time_key(tk, b->first_ts_ns, b->first_seq);
        MDB_val k = {sizeof kb, kb}, v = {sizeof vb, vb};
        MDB_val t = {sizeof tk, tk}, empty = {0, NULL};
        int mrc = index_drop_old_time(ix, txn, b);
        if (mrc == 0)
            mrc = mdb_put(txn, ix->batches, &k, &v, 0);
        if (mrc == 0)
            mrc = mdb_put(txn, ix->times, &t, &empty, 0);
        if (mrc)
            return mrc;
    }
    return 0;
}

int
index_put_batches(index_t *ix, const index_batch_t *batches, size_t n, stele_error_t *err)
{
    if (!ix || (n && !batches))
        return error_set_hinted(err, STELE_EINVAL, NULL, "index_put_batches: bad arguments");
    if (n == 0)
        return 0;
    int rc = index_check_writable(ix, err);
    if (rc)
        return rc;
    index_batches_arg_t a = {batches, n};
    int mrc = index_write(ix, index_put_batches_txn, &a);
    return mrc ? index_mdb_fail(err, mrc, ix, "write a batch to") : 0;
}

/* Positions a cursor on the greatest key <= key. MDB_NOTFOUND when none. */
static int
index_cursor_floor(MDB_cursor *cur, MDB_val *key, MDB_val *val)
{
    MDB_val want = *key;
    int rc = mdb_cursor_get(cur, key, val, MDB_SET_RANGE);
    if (rc == MDB_NOTFOUND)
        return mdb_cursor_get(cur, key, val, MDB_LAST);
    if (rc)
        return rc;
    if (key->mv_size == want.mv_size && memcmp(key->mv_data, want.mv_data, want.mv_size) == 0)
        return 0;
    return mdb_cursor_get(cur, key, val, MDB_PREV);
}

/* Runs a cursor read on the batches table: op is MDB_LAST or MDB_FIRST when seq_key is
 * NULL, else a floor (MDB_SET_RANGE then back) or ceiling (MDB_SET_RANGE) lookup. */
enum index_lookup { INDEX_FLOOR, INDEX_CEIL, INDEX_FIRST, INDEX_LAST };

/* Positions cur as `how` asks (*k holds the seq key of a floor or ceiling lookup); *k and *v
 * receive the entry. Returns an LMDB code. */
static int
index_cursor_lookup(MDB_cursor *cur, enum index_lookup how, MDB_val *k, MDB_val *v)
{
    switch (how) {
    case INDEX_FLOOR:
        return index_cursor_floor(cur, k, v);
    case INDEX_CEIL:
        return mdb_cursor_get(cur, k, v, MDB_SET_RANGE);
    case INDEX_FIRST:
        return mdb_cursor_get(cur, k, v, MDB_FIRST);
    case INDEX_LAST:
        return mdb_cursor_get(cur, k, v, MDB_LAST);
    }
    return MDB_NOTFOUND; /* not reached: every lookup is handled above */
}

static int
index_lookup_batch(index_t *ix, enum index_lookup how, uint64_t seq, index_batch_t *out,
                   stele_error_t *err)
{
    if (!ix || !out)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index lookup: bad arguments");
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    int rc = index_read_begin(ix, &txn, err);
    if (rc)
        return rc;
    int mrc = mdb_cursor_open(txn, ix->batches, &cur);
    uint8_t kb[8];
    index_put_u64(kb, seq);
    MDB_val k = {sizeof kb, kb}, v = {0, NULL};
    if (mrc == 0)
        mrc = index_cursor_lookup(cur, how, &k, &v);
    if (mrc == 0 && index_decode_batch(&k, &v, out) != 0)
        rc = error_set_hinted(err, STELE_ECORRUPT, NULL, "index %s holds a malformed batch entry",
                              ix->path);
    else if (mrc == MDB_NOTFOUND)
        rc = STELE_ENOTFOUND; /* an expected outcome, not an error to describe */
    else if (mrc)
        rc = index_mdb_fail(err, mrc, ix, "read");
    if (cur)
        mdb_cursor_close(cur);
    index_read_end(ix, txn);
    return rc;
}

int
index_find_seq(index_t *ix, uint64_t seq, index_batch_t *out, stele_error_t *err)
{
    return index_lookup_batch(ix, INDEX_FLOOR, seq, out, err);
}

int
index_find_next(index_t *ix, uint64_t seq, index_batch_t *out, stele_error_t *err)
{
    return index_lookup_batch(ix, INDEX_CEIL, seq, out, err);
}

int
index_last_batch(index_t *ix, index_batch_t *out, stele_error_t *err)
{
    return index_lookup_batch(ix, INDEX_LAST, 0, out, err);
}

int
index_first_batch(index_t *ix, index_batch_t *out, stele_error_t *err)
{
    return index_lookup_batch(ix, INDEX_FIRST, 0, out, err);
}

/* Positions a cursor on the greatest key < key. MDB_NOTFOUND when none. */
static int
index_cursor_before(MDB_cursor *cur, MDB_val *key, MDB_val *val)
{
    int mrc = mdb_cursor_get(cur, key, val, MDB_SET_RANGE);
    if (mrc == MDB_NOTFOUND)
        return mdb_cursor_get(cur, key, val, MDB_LAST);
    return mrc ? mrc : mdb_cursor_get(cur, key, val, MDB_PREV);
}

/* The batch a times key names; a times key without its batch is corruption. */
static int
index_batch_of_time_key(index_t *ix, MDB_txn *txn, const MDB_val *time_key, index_batch_t *out)
{
    if (time_key->mv_size != 16)
        return MDB_CORRUPTED;
    uint8_t kb[8];
    memcpy(kb, (const uint8_t *)time_key->mv_data + 8, 8);
    MDB_val bk = {sizeof kb, kb}, bv;
    int mrc = mdb_get(txn, ix->batches, &bk, &bv);
    if (mrc == MDB_NOTFOUND)
        return MDB_CORRUPTED; /* a times entry must have its batches entry */
    if (mrc == 0 && index_decode_batch(&bk, &bv, out) != 0)
        return MDB_CORRUPTED;
    return mrc;
}

int
index_find_time(index_t *ix, int64_t ts_ns, index_batch_t *out, stele_error_t *err)
{
    if (!ix || !out)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index_find_time: bad arguments");
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    int rc = index_read_begin(ix, &txn, err);
    if (rc)
        return rc;
    /* The smallest key (ts_ns, 0) is above every batch whose first ts is < ts_ns. */
    uint8_t tk[16];
    index_encode_time_key(tk, ts_ns, 0);
    MDB_val k = {sizeof tk, tk}, v = {0, NULL};
    int mrc = mdb_cursor_open(txn, ix->times, &cur);
    if (mrc == 0)
        mrc = index_cursor_before(cur, &k, &v);
    if (mrc == 0)
        mrc = index_batch_of_time_key(ix, txn, &k, out);
    if (mrc == MDB_NOTFOUND)
        rc = STELE_ENOTFOUND;
    else if (mrc)
        rc = index_mdb_fail(err, mrc, ix, "search the time table of");
    if (cur)
        mdb_cursor_close(cur);
    index_read_end(ix, txn);
    return rc;
}

/* Deletes the batch the cursor is on and its times entry. */
static int
index_delete_at(index_t *ix, MDB_txn *txn, MDB_cursor *cur, const MDB_val *k, const MDB_val *v)
{
    index_batch_t b;
    if (index_decode_batch(k, v, &b) != 0)
        return MDB_CORRUPTED;
    uint8_t tk[16];
    index_encode_time_key(tk, b.first_ts_ns, b.first_seq);
    MDB_val t = {sizeof tk, tk};
    int mrc = mdb_del(txn, ix->times, &t, NULL);
    if (mrc && mrc != MDB_NOTFOUND)
        return mrc;
    return mdb_cursor_del(cur, 0);
}

typedef struct index_range_arg {
    uint64_t lo, hi;
    size_t n_deleted; /* out */
} index_range_arg_t;

/* Deletes up to INDEX_DELETE_CHUNK batch entries in [lo, hi] in txn. */
static int
index_delete_chunk_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    index_range_arg_t *a = arg;
    a->n_deleted = 0;
    uint8_t kb[8];
    index_put_u64(kb, a->lo);
    MDB_cursor *cur = NULL;
    int mrc = mdb_cursor_open(txn, ix->batches, &cur);
    while (mrc == 0 && a->n_deleted < INDEX_DELETE_CHUNK) {
        /* Re-seek after each delete rather than trust the cursor's post-delete place. */
        MDB_val k = {sizeof kb, kb}, v;
        mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
        if (mrc || k.mv_size != 8 || index_get_u64(k.mv_data) > a->hi)
            break;
        mrc = index_delete_at(ix, txn, cur, &k, &v);
        a->n_deleted += mrc == 0;
    }
    if (cur)
        mdb_cursor_close(cur);
    return mrc == MDB_NOTFOUND ? 0 : mrc;
}

/* Deletes batch entries in [lo, hi] in chunks of INDEX_DELETE_CHUNK per transaction. */
static int
index_delete_range(index_t *ix, uint64_t lo, uint64_t hi, stele_error_t *err)
{
    if (!ix)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index delete: no index");
    int rc = index_check_writable(ix, err);
    if (rc)
        return rc;
    index_range_arg_t a = {.lo = lo, .hi = hi};
    do {
        int mrc = index_write(ix, index_delete_chunk_txn, &a);
        if (mrc)
            return index_mdb_fail(err, mrc, ix, "delete from");
    } while (a.n_deleted == INDEX_DELETE_CHUNK);
    return 0;
}

int
index_truncate_after(index_t *ix, uint64_t seq, stele_error_t *err)
{
    if (seq == UINT64_MAX)
        return 0;
    return index_delete_range(ix, seq + 1, UINT64_MAX, err);
}

int
index_delete_before(index_t *ix, uint64_t seq, stele_error_t *err)
{
    if (seq == 0)
        return 0;
    return index_delete_range(ix, 0, seq - 1, err);
}

static int
index_clear_batches_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    (void)arg;
    int mrc = mdb_drop(txn, ix->batches, 0);
    return mrc ? mrc : mdb_drop(txn, ix->times, 0);
}

int
index_clear_batches(index_t *ix, stele_error_t *err)
{
    if (!ix)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index_clear_batches: no index");
    int rc = index_check_writable(ix, err);
    if (rc)
        return rc;
    int mrc = index_write(ix, index_clear_batches_txn, NULL);
    return mrc ? index_mdb_fail(err, mrc, ix, "clear") : 0;
}
