/*
 * index_snapshot.c: the monitor snapshot (index_snapshot_write in index.h), a copy of the
 * tables `stele status` and `stele ship --dead-letters` read, for a reader that may read the
 * journal but not write the index.
 *
 * Why a copy: LMDB's readers register in lock.mdb, so a reader must be able to write it; a
 * monitoring user in the journal's group (file mode 0640) cannot, and giving the group write
 * on lock.mdb would let it stall or corrupt the writer's mutex. Opening the live index with
 * MDB_NOLOCK instead is unsafe: an unregistered reader does not pin its snapshot, so the
 * writer may reuse the pages it is reading. The copy is made in a new file and renamed over
 * the old one, so it is never written in place and readers open it with MDB_NOLOCK safely:
 * an open descriptor keeps the file it named.
 *
 * Invariant: monitor.mdb, when present, is a complete LMDB file whose five tables exist;
 * batches holds only each segment's last batch start (enough for status to find where each
 * segment's records end) and times is empty, so other seeks scan, as without an index.
 * Only the writer calls this (stele_open, then its index writer thread after each flush);
 * no lock of its own: the source is read in one read transaction of the index.
 */
#include "index_lmdb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

/* Room for the copy beyond the live data file's size, which bounds the tables copied. */
#define INDEX_SNAPSHOT_SLACK_BYTES (1u << 20)

/* Copies every entry of table `from` (of the index) into table `to` (of the snapshot). */
static int
index_snapshot_copy_table(MDB_txn *rtxn, MDB_dbi from, MDB_txn *wtxn, MDB_dbi to)
{
    MDB_cursor *cur = NULL;
    int rc = mdb_cursor_open(rtxn, from, &cur);
    MDB_val k, v;
    for (int op = MDB_FIRST; rc == 0; op = MDB_NEXT) {
        rc = mdb_cursor_get(cur, &k, &v, (MDB_cursor_op)op);
        if (rc == 0)
            rc = mdb_put(wtxn, to, &k, &v, MDB_APPEND);
    }
    if (cur)
        mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Copies from the batches table only each segment's last batch start (the value begins
 * with the segment's first seq), newest first: what status needs to find where each
 * segment's records end without scanning it, one entry per segment. */
static int
index_snapshot_copy_segment_ends(MDB_txn *rtxn, MDB_dbi from, MDB_txn *wtxn, MDB_dbi to)
{
    MDB_cursor *cur = NULL;
    int rc = mdb_cursor_open(rtxn, from, &cur);
    MDB_val k, v;
    if (rc == 0)
        rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
    while (rc == 0 && v.mv_size >= 8) {
        rc = mdb_put(wtxn, to, &k, &v, 0);
        uint8_t seg_key[8];
        index_put_u64(seg_key, index_get_u64(v.mv_data));
        MDB_val sk = {.mv_size = sizeof seg_key, .mv_data = seg_key};
        /* The first start at or past the segment's first seq, then the one before it: the
         * last start of an older segment. */
        if (rc == 0)
            rc = mdb_cursor_get(cur, &sk, &v, MDB_SET_RANGE);
        if (rc == 0)
            rc = mdb_cursor_get(cur, &k, &v, MDB_PREV);
    }
    if (cur)
        mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Fills the snapshot environment `out` from ix in one transaction of each. */
static int
index_snapshot_fill(index_t *ix, MDB_env *out)
{
    MDB_txn *rtxn = NULL, *wtxn = NULL;
    int rc = index_txn_begin(ix, MDB_RDONLY, &rtxn);
    if (rc)
        return rc;
    rc = mdb_txn_begin(out, NULL, 0, &wtxn);
    const MDB_dbi from[INDEX_MAX_DBS] = {ix->batches,     ix->times, ix->meta,
                                         ix->checkpoints, ix->dead,  ix->merkle};
    /* meta, checkpoints, dead; the Merkle tree's hashes are the writer's and prove's only */
    const int is_copied[INDEX_MAX_DBS] = {0, 0, 1, 1, 1, 0};
    for (int i = 0; i < INDEX_MAX_DBS && rc == 0; i++) {
        MDB_dbi to;
        rc = mdb_dbi_open(wtxn, index_table_names[i], MDB_CREATE, &to);
        if (rc == 0 && is_copied[i])
            rc = index_snapshot_copy_table(rtxn, from[i], wtxn, to);
        else if (rc == 0 && from[i] == ix->batches)
            rc = index_snapshot_copy_segment_ends(rtxn, from[i], wtxn, to);
    }
    if (wtxn)
        rc = rc ? (mdb_txn_abort(wtxn), rc) : mdb_txn_commit(wtxn);
    index_txn_end(ix, rtxn, 0);
    return rc;
}

/* Writes a complete snapshot at tmp with the given mode. Returns an LMDB code or errno. */
static int
index_snapshot_make(index_t *ix, const char *tmp, const struct stat *data_st)
{
    MDB_env *out = NULL;
    int rc = mdb_env_create(&out);
    if (rc == 0)
        rc = mdb_env_set_maxdbs(out, INDEX_MAX_DBS);
    if (rc == 0)
        rc = mdb_env_set_mapsize(out, (size_t)data_st->st_size + INDEX_SNAPSHOT_SLACK_BYTES);
    if (rc == 0)
        rc = mdb_env_open(out, tmp, MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOSYNC, 0600);
    if (rc == 0)
        rc = index_snapshot_fill(ix, out);
    if (out)
        mdb_env_close(out);
    if (rc)
        return rc;
    int fd = open(tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchmod(fd, data_st->st_mode & 07777) != 0)
        rc = errno;
    if (fd >= 0)
        close(fd);
    return rc;
}

int
index_snapshot_write(index_t *ix, stele_error_t *err)
{
    int rc = index_check_writable(ix, err);
    if (rc)
        return rc;
    char data[sizeof ix->path + 16], dst[sizeof ix->path + 32], tmp[sizeof dst + 8];
    snprintf(data, sizeof data, "%s/data.mdb", ix->path);
    snprintf(dst, sizeof dst, "%s/%s", ix->path, INDEX_SNAPSHOT_NAME);
    snprintf(tmp, sizeof tmp, "%s.tmp", dst);
    struct stat st;
    if (stat(data, &st) != 0)
        return error_set_hinted(err, -errno, NULL, "could not snapshot index %s: %s", ix->path,
                                stele_strerror(-errno));
    if (unlink(tmp) != 0 && errno != ENOENT)
        return error_set_hinted(err, -errno, NULL, "could not remove %s: %s", tmp,
                                stele_strerror(-errno));
    rc = index_snapshot_make(ix, tmp, &st);
    if (rc == 0 && rename(tmp, dst) != 0)
        rc = errno;
    if (rc == 0)
        return 0;
    (void)unlink(tmp);
    return index_mdb_fail(err, rc, ix, "snapshot");
}
