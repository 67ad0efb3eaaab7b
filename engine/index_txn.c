/*
 * index_txn.c: the transactions every table of the index goes through (index_lmdb.h):
 * begin and end with the map lock, a write that grows a full map and runs again, LMDB's
 * codes turned into stele's, the free space a handle's writes leave to the journal, and the
 * test seam that fails a handle's writes.
 *
 * The map: an environment starts with the address space index_open reserves and doubles it
 * (up to INDEX_MAP_MAX_BYTES) when a write finds it full, then runs the write again; a
 * process whose map another process outgrew adopts the larger size (MDB_MAP_RESIZED).
 * LMDB resizes a map only while no transaction is open on the environment in the process,
 * so every transaction holds its environment's map_lock (index_shared_t) shared and a
 * resize holds it exclusively; no other lock is taken under it.
 *
 * Every call runs in its own transaction, so nothing here is held between calls.
 *
 * After each write the data file is made to cover every page the meta page counts
 * (index_cover_counted_pages): LMDB does not write a page freed in the transaction that
 * allocated it, and a file short of its counted pages is what index_env.c takes for one
 * that lost its growth in a power failure.
 */
#include "index_lmdb.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "error.h"

/* The largest map: 1 TiB of the 128 TiB of address space a process has on x86-64, about 15
 * billion batch starts. A write that would need more fails with MDB_MAP_FULL (-ENOSPC). */
#define INDEX_MAP_MAX_BYTES ((size_t)1 << 40)
/* Times a transaction begins again after adopting a map another process grew (it may grow
 * again meanwhile). */
#define INDEX_RESIZE_TRIES 8

/* LMDB's own codes become stele codes; errno values pass through as -errno. */
static int
index_code(int mdb_rc)
{
    switch (mdb_rc) {
    case MDB_SUCCESS:
        return 0;
    case MDB_NOTFOUND:
        return STELE_ENOTFOUND;
    case MDB_INVALID:
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_VERSION_MISMATCH:
    case MDB_BAD_TXN:
        return STELE_ECORRUPT;
    case MDB_MAP_FULL:
        return -ENOSPC;
    default:
        return mdb_rc > 0 ? -mdb_rc : STELE_EINVAL;
    }
}

int
index_mdb_fail(stele_error_t *err, int mdb_rc, const index_t *ix, const char *what)
{
    int code = index_code(mdb_rc);
    const char *hint = code == STELE_ECORRUPT
                           ? "the index is a cache: move it aside and reopen the journal to "
                             "rebuild it"
                           : NULL;
    return error_set_hinted(err, code, hint, "could not %s index %s: %s", what, ix ? ix->path : "",
                            mdb_strerror(mdb_rc));
}

/* The size of e's map (its map lock held, either way). */
static size_t
index_map_size(index_shared_t *e)
{
    MDB_envinfo info;
    return mdb_env_info(e->env, &info) == 0 ? info.me_mapsize : 0;
}

/* Adopts the larger map another process gave the environment (mdb_txn_begin answered
 * MDB_MAP_RESIZED): size 0 maps what the meta page records. Returns an LMDB code. */
static int
index_map_adopt(index_shared_t *e)
{
    pthread_rwlock_wrlock(&e->map_lock);
    int mrc = mdb_env_set_mapsize(e->env, 0);
    pthread_rwlock_unlock(&e->map_lock);
    return mrc;
}

/* Doubles e's map after a write found it full at seen_bytes, up to INDEX_MAP_MAX_BYTES (a
 * map another writer of this process grew meanwhile is left as it is). The new size reaches
 * other processes with the next commit. Returns an LMDB code, MDB_MAP_FULL at the ceiling. */
static int
index_map_grow(index_shared_t *e, size_t seen_bytes)
{
    pthread_rwlock_wrlock(&e->map_lock);
    int mrc = 0;
    if (index_map_size(e) <= seen_bytes) {
        size_t want = seen_bytes < INDEX_MAP_MAX_BYTES / 2 ? seen_bytes * 2 : INDEX_MAP_MAX_BYTES;
        mrc = want > seen_bytes ? mdb_env_set_mapsize(e->env, want) : MDB_MAP_FULL;
        if (mrc && mrc != MDB_MAP_FULL)
            (void)mdb_env_set_mapsize(e->env, seen_bytes); /* the old map back: it fit before */
    }
    pthread_rwlock_unlock(&e->map_lock);
    return mrc;
}

int
index_txn_begin(index_t *ix, unsigned flags, MDB_txn **txn)
{
    index_shared_t *e = ix->shared;
    int mrc = MDB_MAP_RESIZED;
    for (int attempt = 0; attempt < INDEX_RESIZE_TRIES && mrc == MDB_MAP_RESIZED; attempt++) {
        pthread_rwlock_rdlock(&e->map_lock);
        mrc = mdb_txn_begin(ix->env, NULL, flags, txn);
        if (mrc == 0)
            return 0;
        pthread_rwlock_unlock(&e->map_lock);
        if (mrc == MDB_MAP_RESIZED) {
            int adopt_rc = index_map_adopt(e);
            if (adopt_rc)
                return adopt_rc;
        }
    }
    return mrc;
}

int
index_txn_end(index_t *ix, MDB_txn *txn, int is_commit)
{
    int mrc = 0;
    if (is_commit)
        mrc = mdb_txn_commit(txn);
    else
        mdb_txn_abort(txn);
    pthread_rwlock_unlock(&ix->shared->map_lock);
    return mrc;
}

int
index_read_begin(index_t *ix, MDB_txn **txn, stele_error_t *err)
{
    int mrc = index_txn_begin(ix, MDB_RDONLY, txn);
    return mrc ? index_mdb_fail(err, mrc, ix, "begin a transaction on") : 0;
}

void
index_read_end(index_t *ix, MDB_txn *txn)
{
    (void)index_txn_end(ix, txn, 0);
}

/* The errno a write armed by index_fail_writes fails with, counting it; 0 when none is. */
static int
index_take_write_fault(index_t *ix)
{
    uint32_t n = atomic_load(&ix->n_failing_writes);
    while (n != 0) {
        uint32_t left = n == INDEX_FAIL_FOREVER ? n : n - 1;
        if (atomic_compare_exchange_weak(&ix->n_failing_writes, &n, left))
            return atomic_load(&ix->failing_write_errno);
    }
    return 0;
}

void
index_keep_free(index_t *ix, uint64_t bytes)
{
    atomic_store(&ix->keep_free_bytes, bytes);
}

/* ENOSPC when the file system holding the index has less free than index_keep_free asks
 * (a failed fstatvfs does not stop the write: LMDB's own write reports a real failure). */
static int
index_space_short(index_t *ix)
{
    uint64_t keep = atomic_load(&ix->keep_free_bytes);
    mdb_filehandle_t fd;
    struct statvfs vfs;
    if (keep == 0 || mdb_env_get_fd(ix->env, &fd) || fstatvfs(fd, &vfs) != 0)
        return 0;
    return (uint64_t)vfs.f_bavail * vfs.f_frsize < keep ? ENOSPC : 0;
}

void
index_fail_writes(index_t *ix, uint32_t n_writes, int errno_code)
{
    atomic_store(&ix->failing_write_errno, errno_code > 0 ? errno_code : EIO);
    atomic_store(&ix->n_failing_writes, n_writes);
}

/* LMDB counts in the meta page every page a transaction allocated, but writes only those
 * still in use when it commits: a page freed by the transaction that allocated it (deleting
 * entries merges pages) is never written, so a commit can leave the data file shorter than
 * its counted pages, which index_env.c's open check takes for a file that lost its growth in
 * a power failure (and would rebuild the index for). The writer extends such a file:
 * fallocate never shrinks a file nor changes its data, so it is safe beside other writers,
 * and the pages it adds are free ones LMDB never reads. A failure (a full disk) only leaves
 * the file short until a later write extends it. */
static void
index_cover_counted_pages(index_t *ix)
{
    MDB_envinfo info;
    MDB_stat st;
    mdb_filehandle_t fd;
    struct stat fs;
    if (mdb_env_info(ix->env, &info) || mdb_env_stat(ix->env, &st) ||
        mdb_env_get_fd(ix->env, &fd) || fstat(fd, &fs) != 0)
        return;
    off_t counted = (off_t)((info.me_last_pgno + 1) * st.ms_psize);
    if (fs.st_size < counted)
        (void)fallocate(fd, 0, fs.st_size, counted - fs.st_size);
}

/* Runs fn in a write transaction and commits it. When the map is full (fn's writes or the
 * commit answered MDB_MAP_FULL, which leaves the transaction good only for an abort), grows
 * the map and runs fn again. Returns an LMDB code. */
int
index_write(index_t *ix, index_write_fn fn, void *arg)
{
    int fault_errno = index_take_write_fault(ix);
    if (!fault_errno)
        fault_errno = index_space_short(ix);
    if (fault_errno)
        return fault_errno; /* as LMDB reports a failed system call */
    for (;;) {
        MDB_txn *txn = NULL;
        int mrc = index_txn_begin(ix, 0, &txn);
        if (mrc)
            return mrc;
        size_t seen_bytes = index_map_size(ix->shared);
        int fn_rc = fn(ix, txn, arg);
        int end_rc = index_txn_end(ix, txn, fn_rc == 0);
        mrc = fn_rc ? fn_rc : end_rc;
        if (mrc == 0)
            index_cover_counted_pages(ix);
        if (mrc != MDB_MAP_FULL)
            return mrc;
        mrc = index_map_grow(ix->shared, seen_bytes);
        if (mrc)
            return mrc;
    }
}

int
index_check_writable(const index_t *ix, stele_error_t *err)
{
    if (ix->is_writable)
        return 0;
    return error_set_hinted(err, STELE_EINVAL, NULL, "index %s is open read-only", ix->path);
}

static int
index_kv_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    (void)ix;
    index_kv_arg_t *a = arg;
    MDB_val key = a->key, value = a->value;
    if (!a->is_delete)
        return mdb_put(txn, a->dbi, &key, &value, 0);
    int mrc = mdb_del(txn, a->dbi, &key, NULL);
    return mrc == MDB_NOTFOUND ? 0 : mrc;
}

int
index_write_kv(index_t *ix, const index_kv_arg_t *kv, const char *what, stele_error_t *err)
{
    int rc = index_check_writable(ix, err);
    if (rc)
        return rc;
    index_kv_arg_t a = *kv;
    int mrc = index_write(ix, index_kv_txn, &a);
    return mrc ? index_mdb_fail(err, mrc, ix, what) : 0;
}

int
index_check_name(const char *what, const char *name, size_t max, stele_error_t *err)
{
    if (!name || !name[0] || strlen(name) > max)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index %s must be 1..%zu bytes", what,
                                max);
    return 0;
}
