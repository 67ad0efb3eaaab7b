/*
 * index_meta.c: the index's meta table (index.h): small named values, at most
 * INDEX_META_VALUE_MAX bytes each, such as the "rebuilt" marker index_env.c leaves and what
 * a writer publishes for status (status_publish.c); index_sinks.c keeps its dead-letter
 * counts there too. Each call is one transaction of its own (index_txn.c).
 */
#include "index_lmdb.h"

#include <string.h>

#include "error.h"

int
index_put_meta(index_t *ix, const char *key, const void *value, size_t len, stele_error_t *err)
{
    int rc = index_check_name("meta key", key, INDEX_META_VALUE_MAX, err);
    if (rc)
        return rc;
    if (!ix || (len && !value) || len > INDEX_META_VALUE_MAX)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index meta %s: value over %d bytes", key,
                                INDEX_META_VALUE_MAX);
    index_kv_arg_t kv = {ix->meta, {strlen(key), (void *)key}, {len, (void *)value}, 0};
    return index_write_kv(ix, &kv, "write meta to", err);
}

int
index_get_meta(index_t *ix, const char *key, void *value, size_t cap, size_t *len_out,
               stele_error_t *err)
{
    int rc = index_check_name("meta key", key, INDEX_META_VALUE_MAX, err);
    if (rc)
        return rc;
    if (!ix || (cap && !value))
        return error_set_hinted(err, STELE_EINVAL, NULL, "index_get_meta: bad arguments");
    MDB_txn *txn = NULL;
    rc = index_read_begin(ix, &txn, err);
    if (rc)
        return rc;
    MDB_val k = {strlen(key), (void *)key}, v;
    int mrc = mdb_get(txn, ix->meta, &k, &v);
    if (mrc == 0) {
        memcpy(value, v.mv_data, v.mv_size < cap ? v.mv_size : cap);
        if (len_out)
            *len_out = v.mv_size;
    } else if (mrc == MDB_NOTFOUND) {
        rc = STELE_ENOTFOUND;
    } else {
        rc = index_mdb_fail(err, mrc, ix, "read meta from");
    }
    index_read_end(ix, txn);
    return rc;
}

int
index_delete_meta(index_t *ix, const char *key, stele_error_t *err)
{
    int rc = index_check_name("meta key", key, INDEX_META_VALUE_MAX, err);
    if (rc)
        return rc;
    if (!ix)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index_delete_meta: no index");
    index_kv_arg_t kv = {ix->meta, {strlen(key), (void *)key}, {0, NULL}, 1};
    return index_write_kv(ix, &kv, "delete meta from", err);
}
