/*
 * index.c: the LMDB index beside the segments (engine/index.h). The only file that calls
 * LMDB.
 *
 * Layout: one environment in <journal dir>/index/ with five named databases:
 *   batches      first_seq (u64 BE)              -> segment_seq, offset, first_ts (3 x u64 BE)
 *   times        biased first_ts (u64 BE) || first_seq (u64 BE) -> (empty)
 *   meta         key (string, no NUL)            -> value (<= INDEX_META_VALUE_MAX bytes)
 *   checkpoints  sink name                       -> shipped seq (u64 BE)
 *   dead         sink name || NUL || seq (u64 BE) -> NUL || unix ms (u64 BE) || why (text)
 * Keys are big-endian so LMDB's memcmp order is numeric order; a timestamp is biased by 2^63
 * so negative times sort first. A dead letter's value starts with a NUL byte (text never
 * does) so that values written before the time was recorded (text only) still read. The time key
 * carries the seq too because two batches may share a first timestamp (timestamps never decrease,
 * they may repeat).
 *
 * Invariants: every batches entry has exactly one times entry and vice versa; both are
 * written and deleted in the same transaction.
 *
 * Durability: the environment is opened with MDB_NOSYNC (a commit does not fsync; the
 * index is a cache rebuilt from the segments) and flushed by index_sync(). MDB_NOTLS lets
 * the engine's threads (index writer, shippers, status) run read transactions without
 * binding them to a thread. LMDB serialises writers itself. Every call runs in its own
 * transaction, so nothing here is held between calls.
 *
 * The map: an environment starts with INDEX_MAP_BYTES of address space and doubles it
 * (up to INDEX_MAP_MAX_BYTES) when a write finds it full, then runs the write again; a
 * process whose map another process outgrew adopts the larger size (MDB_MAP_RESIZED).
 * LMDB resizes a map only while no transaction is open on the environment in the process,
 * so every transaction holds its environment's map_lock (index_shared_t) shared and a
 * resize holds it exclusively.
 *
 * An environment that LMDB refuses to open as corrupt (bad meta page, wrong version, or
 * table pages it finds corrupt when the tables are opened) is moved aside by a writable open
 * and replaced by an empty one; the "rebuilt" meta key then says why, and
 * stele_index_catch_up() refills it from the segments.
 *
 * Test seam: index_fail_writes arms a handle's next writes to fail before they reach LMDB
 * (the shipper tests fail a dead letter's write that way).
 */
#include "index.h"

#include "error.h"

#include <errno.h>
#include <inttypes.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Address space reserved for the map at open, not disk: the data file grows only with its
 * pages. At ~70 bytes per batch start this holds about 120 million of them; retention, off
 * by default, deletes old ones, so a busy journal kept whole outgrows it and the map grows
 * (index_map_grow). */
#define INDEX_MAP_BYTES ((size_t)8 << 30)
/* The largest map: 1 TiB of the 128 TiB of address space a process has on x86-64, about 15
 * billion batch starts. A write that would need more fails with MDB_MAP_FULL (-ENOSPC). */
#define INDEX_MAP_MAX_BYTES ((size_t)1 << 40)
/* Times a transaction begins again after adopting a map another process grew (it may grow
 * again meanwhile). */
#define INDEX_RESIZE_TRIES 8
/* batches, times, meta, checkpoints, dead. */
#define INDEX_MAX_DBS 5
/* Concurrent read transactions across all processes (tail -f, status, shippers). LMDB's
 * default of 126 is low for a log many tools follow; a slot costs 64 bytes of lock file. */
#define INDEX_MAX_READERS 1024
#define INDEX_META_VALUE_MAX 256
#define INDEX_SINK_NAME_MAX 63
/* Entries deleted per transaction by truncate/delete, so a huge delete does not hold one
 * giant dirty transaction. */
#define INDEX_DELETE_CHUNK 4096
#define INDEX_DIR_NAME "index"
#define INDEX_REBUILT_KEY "rebuilt"

/* An environment open in this process, shared by the handles of its index (see
 * index_registry_find). */
typedef struct index_shared {
    dev_t dev;
    ino_t ino; /* of the index directory */
    MDB_env *env;
    MDB_dbi dbis[INDEX_MAX_DBS]; /* batches, times, meta, checkpoints, dead */
    int is_writable;
    /* Held shared by every transaction on env, exclusively to resize its map. */
    pthread_rwlock_t map_lock;
    /* -- protected by index_registry_mu -- */
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
    int is_writable;        /* what this handle may do, whatever the environment allows */
    index_shared_t *shared; /* the entry of the environment this handle uses */
    size_t map_bytes;       /* the map of an environment this handle opens */
    char path[4096];
    /* Test seam (index_fail_writes): write transactions of this handle left to fail, and
     * the errno they fail with. Atomics: a test arms them while another thread writes. */
    _Atomic uint32_t n_failing_writes;
    _Atomic int failing_write_errno;
};

/*
 * One environment per index per process. LMDB must never have an environment open twice
 * in one process: its lock file is guarded by fcntl locks, which any close() of that file
 * drops for the whole process, after which another process may take the environment for
 * unused and reset its lock table (reader slots, the writer mutex) under the users still
 * open here. So index_open hands out the environment already open for the same directory
 * (by device and inode), counting references; a writable environment also serves
 * read-only handles. Only a writable open while this process holds the index read-only
 * needs a second environment (a read-only one cannot be upgraded in place); it is
 * registered too, so later writable opens share it, and neither environment of a
 * directory is closed while the other still has handles: an entry whose last handle
 * closes stays (refs 0) until its sibling's last handle closes too. Still, open the writer
 * (stele_open) before readers in a process that has both (LMDB resets its lock table when
 * it opens that second environment and no other process holds the index);
 * stele_reader_open leaves the index alone when this process already writes the journal.
 */
static pthread_mutex_t index_registry_mu = PTHREAD_MUTEX_INITIALIZER;
static index_shared_t *index_registry;
static pthread_once_t index_registry_once = PTHREAD_ONCE_INIT;

/* fork(): the child must not use its parent's environments (LMDB's rule), so it starts
 * with an empty registry (the entries are left, not closed, as LMDB asks); the lock is held
 * across the fork so that the child never inherits it taken by another thread. */
static void
index_registry_before_fork(void)
{
    pthread_mutex_lock(&index_registry_mu);
}

static void
index_registry_after_fork_parent(void)
{
    pthread_mutex_unlock(&index_registry_mu);
}

static void
index_registry_after_fork_child(void)
{
    index_registry = NULL;
    pthread_mutex_unlock(&index_registry_mu);
}

static void
index_registry_init(void)
{
    pthread_atfork(index_registry_before_fork, index_registry_after_fork_parent,
                   index_registry_after_fork_child);
}

/* The entry for st's directory that can serve a handle of this mode (mu held). */
static index_shared_t *
index_registry_find(const struct stat *st, int writable)
{
    for (index_shared_t *e = index_registry; e; e = e->next) {
        if (e->dev == st->st_dev && e->ino == st->st_ino && (e->is_writable || !writable))
            return e;
    }
    return NULL;
}

/* Makes ix a user of entry e (mu held). */
static void
index_registry_attach(index_t *ix, index_shared_t *e)
{
    e->refs++;
    ix->shared = e;
    ix->env = e->env;
    ix->batches = e->dbis[0];
    ix->times = e->dbis[1];
    ix->meta = e->dbis[2];
    ix->checkpoints = e->dbis[3];
    ix->dead = e->dbis[4];
}

/* A new entry, not yet registered, for an environment about to be opened. Its map lock
 * prefers a waiting resize to new transactions, so a steady stream of short ones cannot
 * hold a resize off. NULL without memory. */
static index_shared_t *
index_entry_new(void)
{
    index_shared_t *e = calloc(1, sizeof *e);
    pthread_rwlockattr_t attr;
    if (!e || pthread_rwlockattr_init(&attr) != 0) {
        free(e);
        return NULL;
    }
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(&e->map_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0) {
        free(e);
        return NULL;
    }
    return e;
}

/* Frees an entry whose environment is closed (or was never opened). */
static void
index_entry_free(index_shared_t *e)
{
    pthread_rwlock_destroy(&e->map_lock);
    free(e);
}

/* Registers ix's entry and the environment just opened in it, which no entry could serve:
 * the first of its directory, or the writable sibling of a read-only one (mu held). */
static int
index_registry_link(index_t *ix, stele_error_t *err)
{
    struct stat st;
    if (stat(ix->path, &st) != 0)
        return error_set_hinted(err, -errno, NULL, "could not open index %s: %s", ix->path,
                                strerror(errno));
    index_shared_t *e = ix->shared;
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->env = ix->env;
    MDB_dbi dbis[INDEX_MAX_DBS] = {ix->batches, ix->times, ix->meta, ix->checkpoints, ix->dead};
    memcpy(e->dbis, dbis, sizeof dbis);
    e->is_writable = ix->is_writable;
    e->refs = 1;
    e->next = index_registry;
    index_registry = e;
    return 0;
}

/* 1 when an entry of e's directory other than e still has handles (mu held). */
static int
index_registry_sibling_in_use(const index_shared_t *e)
{
    for (const index_shared_t *o = index_registry; o; o = o->next) {
        if (o != e && o->dev == e->dev && o->ino == e->ino && o->refs > 0)
            return 1;
    }
    return 0;
}

/* Drops ix's reference. The last handle of a directory closes its environments (one, or a
 * read-only one and its writable sibling); an entry left without handles while its sibling
 * has some stays open and registered, as closing it would drop the sibling's locks (mu
 * held). */
static void
index_registry_release(index_t *ix)
{
    index_shared_t *e = ix->shared;
    if (--e->refs > 0 || index_registry_sibling_in_use(e))
        return;
    dev_t dev = e->dev;
    ino_t ino = e->ino;
    for (index_shared_t **pp = &index_registry; *pp;) {
        index_shared_t *o = *pp;
        if (o->dev != dev || o->ino != ino) {
            pp = &o->next;
            continue;
        }
        *pp = o->next;
        mdb_env_close(o->env);
        index_entry_free(o);
    }
}

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

static int
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

static void
index_put_u64(uint8_t *out, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

static uint64_t
index_get_u64(const uint8_t *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | in[i];
    return v;
}

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

/* -- transactions and the map ---------------------------------------------------------- */

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

/* Begins a transaction (flags 0 or MDB_RDONLY) holding ix's map lock shared until
 * index_txn_end. Returns an LMDB code; on failure nothing is held. */
static int
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

/* Ends what index_txn_begin began: commits when is_commit, else aborts. LMDB frees the
 * transaction either way (a failed commit aborts it). Returns the commit's LMDB code. */
static int
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

/* A read transaction, its failure described in err. End it with index_read_end. */
static int
index_read_begin(index_t *ix, MDB_txn **txn, stele_error_t *err)
{
    int mrc = index_txn_begin(ix, MDB_RDONLY, txn);
    return mrc ? index_mdb_fail(err, mrc, ix, "begin a transaction on") : 0;
}

static void
index_read_end(index_t *ix, MDB_txn *txn)
{
    (void)index_txn_end(ix, txn, 0);
}

/* One write transaction's work on txn. Returns an LMDB code; nonzero aborts the
 * transaction. It may run more than once (index_write), each time in a new transaction
 * that sees nothing of the last, so it must set its outputs afresh. */
typedef int (*index_write_fn)(index_t *ix, MDB_txn *txn, void *arg);

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
index_fail_writes(index_t *ix, uint32_t n_writes, int errno_code)
{
    atomic_store(&ix->failing_write_errno, errno_code > 0 ? errno_code : EIO);
    atomic_store(&ix->n_failing_writes, n_writes);
}

/* Runs fn in a write transaction and commits it. When the map is full (fn's writes or the
 * commit answered MDB_MAP_FULL, which leaves the transaction good only for an abort), grows
 * the map and runs fn again. Returns an LMDB code. */
static int
index_write(index_t *ix, index_write_fn fn, void *arg)
{
    int fault_errno = index_take_write_fault(ix);
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
        if (mrc != MDB_MAP_FULL)
            return mrc;
        mrc = index_map_grow(ix->shared, seen_bytes);
        if (mrc)
            return mrc;
    }
}

/* Writes need a writable handle (a read-only one may share a writable environment). */
static int
index_check_writable(const index_t *ix, stele_error_t *err)
{
    if (ix->is_writable)
        return 0;
    return error_set_hinted(err, STELE_EINVAL, NULL, "index %s is open read-only", ix->path);
}

static const char *const index_table_names[INDEX_MAX_DBS] = {"batches", "times", "meta",
                                                             "checkpoints", "dead"};

/* Opens the tables in txn (creating them when ix may write); *arg receives the name of a
 * table LMDB refused. */
static int
index_open_dbis_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    MDB_dbi *dbis[INDEX_MAX_DBS] = {&ix->batches, &ix->times, &ix->meta, &ix->checkpoints,
                                    &ix->dead};
    for (int i = 0; i < INDEX_MAX_DBS; i++) {
        int mrc =
            mdb_dbi_open(txn, index_table_names[i], ix->is_writable ? MDB_CREATE : 0, dbis[i]);
        if (mrc) {
            *(const char **)arg = index_table_names[i];
            return mrc;
        }
    }
    return 0;
}

/* A writable open makes missing databases; a read-only one needs them to exist (its
 * transaction is committed too: an aborted one would close the handles it opened).
 * *mdb_rc_out receives LMDB's code when it refused a table (corrupt pages are found here,
 * not by mdb_env_open, when the meta pages are sound). */
static int
index_open_dbis(index_t *ix, int *mdb_rc_out, stele_error_t *err)
{
    const char *refused = NULL;
    MDB_txn *txn = NULL;
    int mrc = 0;
    if (ix->is_writable) {
        mrc = index_write(ix, index_open_dbis_txn, &refused);
    } else if ((mrc = index_txn_begin(ix, MDB_RDONLY, &txn)) == 0) {
        int open_rc = index_open_dbis_txn(ix, txn, &refused);
        int end_rc = index_txn_end(ix, txn, open_rc == 0);
        mrc = open_rc ? open_rc : end_rc;
    }
    if (mrc == 0)
        return 0;
    *mdb_rc_out = mrc;
    if (mrc == MDB_NOTFOUND && refused)
        return error_set_hinted(err, STELE_ENOTFOUND, NULL,
                                "index %s has no %s table (not yet initialised)", ix->path,
                                refused);
    return index_mdb_fail(err, mrc, ix, refused ? "open a table of" : "open the tables of");
}

/* Directory mode for a file mode: search permission wherever read is allowed. */
static mode_t
index_dir_mode(unsigned file_mode)
{
    mode_t m = (mode_t)(file_mode & 0777);
    return m | ((m & 0444) >> 2) | S_IRWXU;
}

/* mkdir with exactly index_dir_mode (not narrowed by the umask). 0, or -1 with errno. */
static int
index_make_dir(const index_t *ix, unsigned file_mode)
{
    if (mkdir(ix->path, index_dir_mode(file_mode)) != 0)
        return -1;
    return chmod(ix->path, index_dir_mode(file_mode));
}

/* MDB_CORRUPTED when the data file is shorter than the pages its meta page counts: the
 * index is written without fsync (MDB_NOSYNC), so a power failure can keep the meta page's
 * update and lose the file's growth, and LMDB would then read pages past the end of the
 * file through its map, which kills the process with SIGBUS instead of failing a call. A
 * writable open then replaces the index like any corrupt one; LMDB itself writes every page
 * it counts before the meta page that counts it, so a sound file is never short. */
static int
index_check_data_size(const index_t *ix)
{
    MDB_envinfo info;
    MDB_stat st;
    int rc = mdb_env_info(ix->env, &info);
    if (rc == 0)
        rc = mdb_env_stat(ix->env, &st);
    if (rc)
        return rc;
    char data[sizeof ix->path + 16];
    snprintf(data, sizeof data, "%s/data.mdb", ix->path);
    struct stat fs;
    if (stat(data, &fs) != 0)
        return errno;
    uint64_t counted = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
    return (uint64_t)fs.st_size < counted ? MDB_CORRUPTED : 0;
}

static bool
index_file_is_missing(const index_t *ix, const char *name)
{
    char path[sizeof ix->path + 16];
    snprintf(path, sizeof path, "%s/%s", ix->path, name);
    struct stat st;
    return stat(path, &st) != 0 && errno == ENOENT;
}

/* LMDB creates its files with the mode narrowed by the umask; a new environment's files get
 * exactly the journal's file_mode, like the segments. Returns 0 or errno. */
static int
index_set_file_modes(const index_t *ix, mode_t mode)
{
    static const char *const names[] = {"data.mdb", "lock.mdb"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[sizeof ix->path + 16];
        snprintf(path, sizeof path, "%s/%s", ix->path, names[i]);
        if (chmod(path, mode) != 0)
            return errno;
    }
    return 0;
}

static int
index_env_open(index_t *ix, unsigned file_mode, int *mdb_rc_out, stele_error_t *err)
{
    int rc = mdb_env_create(&ix->env);
    if (rc == 0)
        rc = mdb_env_set_maxdbs(ix->env, INDEX_MAX_DBS);
    if (rc == 0)
        rc = mdb_env_set_mapsize(ix->env, ix->map_bytes);
    if (rc == 0)
        rc = mdb_env_set_maxreaders(ix->env, INDEX_MAX_READERS);
    unsigned flags = MDB_NOSYNC | MDB_NOTLS | (ix->is_writable ? 0 : MDB_RDONLY);
    mode_t mode = (mode_t)(file_mode ? file_mode : 0600);
    bool is_new = ix->is_writable && index_file_is_missing(ix, "data.mdb");
    if (rc == 0)
        rc = mdb_env_open(ix->env, ix->path, flags, mode);
    if (rc == 0 && is_new)
        rc = index_set_file_modes(ix, mode);
    if (rc == 0)
        rc = index_check_data_size(ix);
    /* Readers killed mid-transaction leave their slots taken; the writer clears them so
     * they neither pin old pages nor use up the table (here, and in every index_sync). */
    if (rc == 0 && ix->is_writable) {
        int n_cleared = 0;
        rc = mdb_reader_check(ix->env, &n_cleared);
    }
    *mdb_rc_out = rc;
    if (rc) {
        if (ix->env)
            mdb_env_close(ix->env);
        ix->env = NULL;
        return index_mdb_fail(err, rc, ix, "open");
    }
    ix->shared->env = ix->env; /* for the map's size in index_write */
    return 0;
}

/* Closes the environment ix opened, before it was registered. */
static void
index_env_close(index_t *ix)
{
    if (ix->env)
        mdb_env_close(ix->env);
    ix->env = NULL;
    ix->shared->env = NULL;
}

/*
 * Replaces an environment LMDB refused as corrupt: renames it to index.corrupt-<unix time>
 * (kept for inspection), opens a fresh one and records why in meta "rebuilt", which
 * stele_index_catch_up() reports once it has rebuilt the batches.
 */
static int
index_replace_corrupt(index_t *ix, unsigned file_mode, int mdb_rc, stele_error_t *err)
{
    char base[64], moved_to[sizeof ix->path + sizeof base];
    long long now = (long long)time(NULL);
    int rc = -EEXIST;
    for (int attempt = 0; attempt < 100 && rc == -EEXIST; attempt++) {
        snprintf(base, sizeof base, "%s.corrupt-%lld%s%.0d", INDEX_DIR_NAME, now,
                 attempt ? "-" : "", attempt);
        snprintf(moved_to, sizeof moved_to, "%.*s%s",
                 (int)(strlen(ix->path) - strlen(INDEX_DIR_NAME)), ix->path, base);
        rc = rename(ix->path, moved_to) == 0 ? 0 : -errno;
        if (rc == -ENOTEMPTY)
            rc = -EEXIST;
    }
    if (rc)
        return error_set_hinted(err, rc, NULL, "could not move corrupt index %s aside: %s",
                                ix->path, strerror(-rc));
    if (index_make_dir(ix, file_mode) != 0)
        return error_set_hinted(err, -errno, NULL, "could not create index %s: %s", ix->path,
                                strerror(errno));
    int ignored;
    rc = index_env_open(ix, file_mode, &ignored, err);
    if (rc == 0)
        rc = index_open_dbis(ix, &ignored, err);
    if (rc)
        return rc;
    char note[INDEX_META_VALUE_MAX];
    snprintf(note, sizeof note, "index was unreadable (%.100s); moved aside to %s",
             mdb_strerror(mdb_rc), base);
    return index_put_meta(ix, INDEX_REBUILT_KEY, note, strlen(note), err);
}

/* A read-only open needs an initialised environment. A data file that is missing or empty
 * (a writer stopped between making the directory and writing the first meta pages) is an
 * index that does not exist yet: LMDB would answer ENOENT, or EBADF as it tried to write
 * the meta pages of a new environment through its read-only descriptor. */
static int
index_check_initialised(const index_t *ix, stele_error_t *err)
{
    char data[sizeof ix->path + 16];
    snprintf(data, sizeof data, "%s/data.mdb", ix->path);
    struct stat st;
    int rc = stat(data, &st) == 0 ? 0 : -errno;
    if (rc == 0 && st.st_size > 0)
        return 0;
    if (rc && rc != -ENOENT)
        return error_set_hinted(err, rc, NULL, "could not open index %s: %s", ix->path,
                                strerror(-rc));
    return error_set_hinted(err, STELE_ENOTFOUND, NULL,
                            "index %s is not initialised (no data file yet)", ix->path);
}

/* A handle for <dir>/index, with no environment yet; *out is set even on failure (for
 * index_close). */
static int
index_handle_new(const char *dir, int writable, size_t map_bytes, index_t **out, stele_error_t *err)
{
    index_t *ix = calloc(1, sizeof *ix);
    *out = ix;
    if (!ix)
        return error_set_hinted(err, -ENOMEM, NULL, "could not allocate the index handle");
    ix->is_writable = writable != 0;
    ix->map_bytes = map_bytes;
    int n = snprintf(ix->path, sizeof ix->path, "%s/%s", dir, INDEX_DIR_NAME);
    if (n < 0 || (size_t)n >= sizeof ix->path)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index path under %s is too long", dir);
    return 0;
}

/* A writable open creates the index directory when missing; a read-only one needs it, with
 * an initialised environment in it. */
static int
index_prepare_dir(index_t *ix, unsigned file_mode, stele_error_t *err)
{
    struct stat st;
    if (stat(ix->path, &st) != 0) {
        if (errno != ENOENT || !ix->is_writable) {
            int rc = errno == ENOENT ? STELE_ENOTFOUND : -errno;
            return error_set_hinted(err, rc, NULL, "could not open index %s: %s", ix->path,
                                    strerror(errno));
        }
        if (index_make_dir(ix, file_mode) != 0 && errno != EEXIST)
            return error_set_hinted(err, -errno, NULL, "could not create index %s: %s", ix->path,
                                    strerror(errno));
    }
    return ix->is_writable ? 0 : index_check_initialised(ix, err);
}

/* Opens a new environment for ix in an entry of its own (mu held), replacing it when LMDB
 * finds it corrupt and ix may write, and registers it. On failure ix has none. */
static int
index_open_env(index_t *ix, unsigned file_mode, stele_error_t *err)
{
    index_shared_t *e = index_entry_new();
    if (!e)
        return error_set_hinted(err, -ENOMEM, NULL, "could not allocate the index handle");
    ix->shared = e; /* its map lock serves the transactions of the open */
    int mdb_rc = 0;
    int rc = index_env_open(ix, file_mode, &mdb_rc, err);
    if (rc == 0)
        rc = index_open_dbis(ix, &mdb_rc, err);
    if (rc == STELE_ECORRUPT && ix->is_writable) {
        index_env_close(ix); /* its tables were found corrupt */
        rc = index_replace_corrupt(ix, file_mode, mdb_rc, err);
    }
    if (rc == 0)
        rc = index_registry_link(ix, err);
    if (rc) {
        index_env_close(ix);
        ix->shared = NULL;
        index_entry_free(e);
    }
    return rc;
}

/* Gives ix the environment this process has open for its directory, or opens one; the
 * registry lock is held throughout, so two opens never open one directory twice. */
static int
index_attach(index_t *ix, unsigned file_mode, stele_error_t *err)
{
    pthread_once(&index_registry_once, index_registry_init);
    pthread_mutex_lock(&index_registry_mu);
    struct stat st;
    index_shared_t *e = stat(ix->path, &st) == 0 ? index_registry_find(&st, ix->is_writable) : NULL;
    int rc = 0;
    if (e)
        index_registry_attach(ix, e);
    else
        rc = index_open_env(ix, file_mode, err);
    pthread_mutex_unlock(&index_registry_mu);
    return rc;
}

int
index_open(const char *dir, int writable, unsigned file_mode, index_t **out, stele_error_t *err)
{
    return index_open_mapped(dir, writable, file_mode, INDEX_MAP_BYTES, out, err);
}

int
index_open_mapped(const char *dir, int writable, unsigned file_mode, size_t map_bytes,
                  index_t **out, stele_error_t *err)
{
    if (!dir || !out || map_bytes == 0)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "index_open: dir, out and a map size are required");
    *out = NULL;
    index_t *ix = NULL;
    int rc = index_handle_new(dir, writable, map_bytes, &ix, err);
    if (rc == 0)
        rc = index_prepare_dir(ix, file_mode, err);
    if (rc == 0)
        rc = index_attach(ix, file_mode, err);
    if (rc) {
        index_close(ix);
        return rc;
    }
    *out = ix;
    return 0;
}

void
index_close(index_t *ix)
{
    if (!ix)
        return;
    if (ix->shared) {
        pthread_mutex_lock(&index_registry_mu);
        index_registry_release(ix);
        pthread_mutex_unlock(&index_registry_mu);
    }
    free(ix);
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

/* One key put, or deleted (deleting a missing key is no error), in one table. */
typedef struct index_kv_arg {
    MDB_dbi dbi;
    MDB_val key;
    MDB_val value;
    int is_delete;
} index_kv_arg_t;

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

/* index_kv_txn in a write transaction of its own, its failure described as `what`. */
static int
index_write_kv(index_t *ix, const index_kv_arg_t *kv, const char *what, stele_error_t *err)
{
    int rc = index_check_writable(ix, err);
    if (rc)
        return rc;
    index_kv_arg_t a = *kv;
    int mrc = index_write(ix, index_kv_txn, &a);
    return mrc ? index_mdb_fail(err, mrc, ix, what) : 0;
}

/* Keys are non-empty text without NUL that fits LMDB's key limit. */
static int
index_check_name(const char *what, const char *name, size_t max, stele_error_t *err)
{
    if (!name || !name[0] || strlen(name) > max)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index %s must be 1..%zu bytes", what,
                                max);
    return 0;
}

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

int
index_put_checkpoint(index_t *ix, const char *sink, uint64_t seq, stele_error_t *err)
{
    int rc = index_check_name("sink name", sink, INDEX_SINK_NAME_MAX, err);
    if (rc || !ix)
        return rc ? rc
                  : error_set_hinted(err, STELE_EINVAL, NULL, "index_put_checkpoint: no index");
    uint8_t vb[8];
    index_put_u64(vb, seq);
    index_kv_arg_t kv = {ix->checkpoints, {strlen(sink), (void *)sink}, {sizeof vb, vb}, 0};
    return index_write_kv(ix, &kv, "write a checkpoint to", err);
}

int
index_get_checkpoint(index_t *ix, const char *sink, uint64_t *seq, stele_error_t *err)
{
    int rc = index_check_name("sink name", sink, INDEX_SINK_NAME_MAX, err);
    if (rc || !ix || !seq)
        return rc ? rc
                  : error_set_hinted(err, STELE_EINVAL, NULL, "index_get_checkpoint: bad args");
    MDB_txn *txn = NULL;
    rc = index_read_begin(ix, &txn, err);
    if (rc)
        return rc;
    MDB_val k = {strlen(sink), (void *)sink}, v;
    int mrc = mdb_get(txn, ix->checkpoints, &k, &v);
    *seq = 0;
    if (mrc == 0 && v.mv_size == 8)
        *seq = index_get_u64(v.mv_data);
    else if (mrc == 0)
        rc = error_set_hinted(err, STELE_ECORRUPT, NULL,
                              "index %s: malformed checkpoint for sink %s", ix->path, sink);
    else if (mrc != MDB_NOTFOUND)
        rc = index_mdb_fail(err, mrc, ix, "read a checkpoint from");
    index_read_end(ix, txn);
    return rc;
}

int
index_list_checkpoints(index_t *ix, char (*names)[64], uint64_t *seqs, size_t max,
                       stele_error_t *err)
{
    if (!ix || (max && (!names || !seqs)))
        return error_set_hinted(err, STELE_EINVAL, NULL, "index_list_checkpoints: bad arguments");
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    int rc = index_read_begin(ix, &txn, err);
    if (rc)
        return rc;
    MDB_val k, v;
    size_t n = 0;
    int mrc = mdb_cursor_open(txn, ix->checkpoints, &cur);
    if (mrc == 0)
        mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    for (; mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (n < max) {
            size_t len = k.mv_size < 63 ? k.mv_size : 63;
            memcpy(names[n], k.mv_data, len);
            names[n][len] = '\0';
            seqs[n] = v.mv_size == 8 ? index_get_u64(v.mv_data) : 0;
        }
        n++;
    }
    if (mrc != MDB_NOTFOUND)
        rc = index_mdb_fail(err, mrc, ix, "list checkpoints of");
    if (cur)
        mdb_cursor_close(cur);
    index_read_end(ix, txn);
    return rc ? rc : (int)n;
}

static size_t
index_dead_key(uint8_t *key, const char *sink, uint64_t seq)
{
    size_t len = strlen(sink);
    memcpy(key, sink, len);
    key[len] = 0;
    index_put_u64(key + len + 1, seq);
    return len + 9;
}

/* The value of a dead letter: NUL, the time it was rejected (unix ms, u64 BE), the reason. */
#define INDEX_DEAD_HEADER 9

/* Each sink's number of dead letters is kept in meta under this prefix + the sink's name,
 * updated in the transaction that adds or removes one, so that statistics need not walk the
 * list (a sink with a million rejected records would make every stele_stats() walk them).
 * An index written before the count existed has none: it is walked until its next change
 * stores the count. */
#define INDEX_DEAD_COUNT_PREFIX "dead-count:"

static size_t
index_dead_count_key(char *key, const char *sink)
{
    return (size_t)sprintf(key, "%s%s", INDEX_DEAD_COUNT_PREFIX, sink);
}

static int index_walk_dead_txn(index_t *ix, MDB_txn *txn, const char *sink, uint64_t from_seq,
                               uint64_t *seqs, index_dead_letter_t *letters, size_t max,
                               uint64_t *count);

/* The sink's count as stored, or walked when it was never stored (*was_stored 0). Returns
 * an LMDB code. */
static int
index_dead_count_txn(index_t *ix, MDB_txn *txn, const char *sink, uint64_t *count, int *was_stored)
{
    char key[sizeof INDEX_DEAD_COUNT_PREFIX + INDEX_SINK_NAME_MAX];
    MDB_val k = {index_dead_count_key(key, sink), key}, v;
    int mrc = mdb_get(txn, ix->meta, &k, &v);
    *was_stored = mrc == 0 && v.mv_size == 8;
    if (*was_stored) {
        *count = index_get_u64(v.mv_data);
        return 0;
    }
    if (mrc && mrc != MDB_NOTFOUND)
        return mrc;
    return index_walk_dead_txn(ix, txn, sink, 0, NULL, NULL, 0, count);
}

static int
index_put_dead_count_txn(index_t *ix, MDB_txn *txn, const char *sink, uint64_t count)
{
    char key[sizeof INDEX_DEAD_COUNT_PREFIX + INDEX_SINK_NAME_MAX];
    uint8_t vb[8];
    index_put_u64(vb, count);
    MDB_val k = {index_dead_count_key(key, sink), key}, v = {8, vb};
    return mdb_put(txn, ix->meta, &k, &v, 0);
}

/* Adds delta (+1/-1) to the sink's stored count, inside the caller's write transaction.
 * Returns an LMDB code. */
static int
index_add_dead_count_txn(index_t *ix, MDB_txn *txn, const char *sink, int delta)
{
    uint64_t count = 0;
    int was_stored = 0;
    int mrc = index_dead_count_txn(ix, txn, sink, &count, &was_stored);
    if (mrc)
        return mrc;
    /* A walked count already includes (or excludes) the change made in this transaction. */
    if (was_stored)
        count = delta < 0 ? (count > 0 ? count - 1 : 0) : count + 1;
    return index_put_dead_count_txn(ix, txn, sink, count);
}

/* A dead letter's key and value, and the sink whose count it changes. */
typedef struct index_dead_arg {
    const char *sink;
    MDB_val key;
    MDB_val value; /* unused by a delete */
} index_dead_arg_t;

static int
index_put_dead_letter_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    const index_dead_arg_t *a = arg;
    MDB_val k = a->key, v = a->value, old;
    int is_new = mdb_get(txn, ix->dead, &k, &old) == MDB_NOTFOUND;
    int mrc = mdb_put(txn, ix->dead, &k, &v, 0);
    if (mrc == 0 && is_new)
        mrc = index_add_dead_count_txn(ix, txn, a->sink, +1);
    return mrc;
}

static int
index_delete_dead_letter_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    const index_dead_arg_t *a = arg;
    MDB_val k = a->key;
    int mrc = mdb_del(txn, ix->dead, &k, NULL);
    return mrc ? mrc : index_add_dead_count_txn(ix, txn, a->sink, -1);
}

int
index_put_dead_letter(index_t *ix, const char *sink, uint64_t seq, const char *why,
                      stele_error_t *err)
{
    int rc = index_check_name("sink name", sink, INDEX_SINK_NAME_MAX, err);
    if (rc || !ix)
        return rc ? rc
                  : error_set_hinted(err, STELE_EINVAL, NULL, "index_put_dead_letter: no index");
    uint8_t kb[INDEX_SINK_NAME_MAX + 9];
    uint8_t vb[INDEX_DEAD_HEADER + INDEX_WHY_MAX];
    size_t why_len = why ? strlen(why) : 0;
    if (why_len > INDEX_WHY_MAX)
        why_len = INDEX_WHY_MAX;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    vb[0] = 0;
    index_put_u64(vb + 1, (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000);
    if (why_len)
        memcpy(vb + INDEX_DEAD_HEADER, why, why_len);
    rc = index_check_writable(ix, err);
    if (rc)
        return rc;
    index_dead_arg_t a = {
        sink, {index_dead_key(kb, sink, seq), kb}, {INDEX_DEAD_HEADER + why_len, vb}};
    int mrc = index_write(ix, index_put_dead_letter_txn, &a);
    return mrc ? index_mdb_fail(err, mrc, ix, "write a dead letter to") : 0;
}

/* Decodes a dead letter's value (either layout) into out. */
static void
index_decode_dead(uint64_t seq, const MDB_val *v, index_dead_letter_t *out)
{
    const uint8_t *p = v->mv_data;
    size_t len = v->mv_size;
    out->seq = seq;
    out->unix_ms = 0;
    if (len >= INDEX_DEAD_HEADER && p[0] == 0) {
        out->unix_ms = (int64_t)index_get_u64(p + 1);
        p += INDEX_DEAD_HEADER;
        len -= INDEX_DEAD_HEADER;
    }
    if (len > INDEX_WHY_MAX)
        len = INDEX_WHY_MAX;
    memcpy(out->why, p, len);
    out->why[len] = '\0';
}

int
index_delete_dead_letter(index_t *ix, const char *sink, uint64_t seq, stele_error_t *err)
{
    int rc = index_check_name("sink name", sink, INDEX_SINK_NAME_MAX, err);
    if (rc || !ix)
        return rc ? rc
                  : error_set_hinted(err, STELE_EINVAL, NULL, "index_delete_dead_letter: no ix");
    rc = index_check_writable(ix, err);
    if (rc)
        return rc;
    uint8_t kb[INDEX_SINK_NAME_MAX + 9];
    index_dead_arg_t a = {sink, {index_dead_key(kb, sink, seq), kb}, {0, NULL}};
    int mrc = index_write(ix, index_delete_dead_letter_txn, &a);
    if (mrc == MDB_NOTFOUND)
        return error_set_hinted(err, STELE_ENOTFOUND, NULL,
                                "sink %s has no dead letter at seq %" PRIu64, sink, seq);
    return mrc ? index_mdb_fail(err, mrc, ix, "delete a dead letter from") : 0;
}

/* Walks a sink's dead letters from from_seq inside txn, storing up to max of them in seqs
 * and/or letters (either may be NULL); returns the count walked (all of them when both are
 * NULL) in *count, and an LMDB code. */
static int
index_walk_dead_txn(index_t *ix, MDB_txn *txn, const char *sink, uint64_t from_seq, uint64_t *seqs,
                    index_dead_letter_t *letters, size_t max, uint64_t *count)
{
    uint8_t kb[INDEX_SINK_NAME_MAX + 9];
    size_t prefix_len = strlen(sink) + 1;
    int is_bounded = seqs || letters;
    MDB_cursor *cur = NULL;
    MDB_val k = {index_dead_key(kb, sink, from_seq), kb}, v;
    uint64_t n = 0;
    int mrc = mdb_cursor_open(txn, ix->dead, &cur);
    if (mrc == 0)
        mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    for (; mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != prefix_len + 8 || memcmp(k.mv_data, kb, prefix_len) != 0)
            break;
        if (is_bounded && n == max)
            break;
        uint64_t seq = index_get_u64((const uint8_t *)k.mv_data + prefix_len);
        if (seqs)
            seqs[n] = seq;
        if (letters)
            index_decode_dead(seq, &v, &letters[n]);
        n++;
    }
    if (cur)
        mdb_cursor_close(cur);
    *count = n;
    return mrc == MDB_NOTFOUND ? 0 : mrc;
}

/* A read transaction for a sink's dead letters, after checking the sink's name. */
static int
index_begin_dead_read(index_t *ix, const char *sink, MDB_txn **txn, stele_error_t *err)
{
    int rc = index_check_name("sink name", sink, INDEX_SINK_NAME_MAX, err);
    if (rc || !ix)
        return rc ? rc : error_set_hinted(err, STELE_EINVAL, NULL, "dead letters: no index");
    return index_read_begin(ix, txn, err);
}

/* index_walk_dead_txn in a read transaction of its own. */
static int
index_walk_dead(index_t *ix, const char *sink, uint64_t from_seq, uint64_t *seqs,
                index_dead_letter_t *letters, size_t max, uint64_t *count, stele_error_t *err)
{
    MDB_txn *txn = NULL;
    int rc = index_begin_dead_read(ix, sink, &txn, err);
    if (rc)
        return rc;
    int mrc = index_walk_dead_txn(ix, txn, sink, from_seq, seqs, letters, max, count);
    index_read_end(ix, txn);
    return mrc ? index_mdb_fail(err, mrc, ix, "list dead letters of") : 0;
}

int
index_list_dead_letters(index_t *ix, const char *sink, uint64_t from_seq, uint64_t *seqs,
                        size_t max, stele_error_t *err)
{
    if (!seqs && max)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "index_list_dead_letters: no output array");
    uint64_t n = 0;
    if (max == 0)
        return 0;
    int rc = index_walk_dead(ix, sink, from_seq, seqs, NULL, max, &n, err);
    return rc ? rc : (int)n;
}

int
index_read_dead_letters(index_t *ix, const char *sink, uint64_t from_seq, index_dead_letter_t *out,
                        size_t max, stele_error_t *err)
{
    if (!out && max)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "index_read_dead_letters: no output array");
    uint64_t n = 0;
    if (max == 0)
        return 0;
    int rc = index_walk_dead(ix, sink, from_seq, NULL, out, max, &n, err);
    return rc ? rc : (int)n;
}

int
index_count_dead_letters(index_t *ix, const char *sink, uint64_t *count, stele_error_t *err)
{
    if (!count)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index_count_dead_letters: no output");
    MDB_txn *txn = NULL;
    int rc = index_begin_dead_read(ix, sink, &txn, err);
    if (rc)
        return rc;
    int was_stored = 0;
    int mrc = index_dead_count_txn(ix, txn, sink, count, &was_stored);
    index_read_end(ix, txn);
    return mrc ? index_mdb_fail(err, mrc, ix, "count dead letters of") : 0;
}

int
index_sync(index_t *ix, stele_error_t *err)
{
    if (!ix)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index_sync: no index");
    if (!ix->is_writable)
        return 0;
    /* A reader process killed inside a read transaction leaves its slot behind, and the
     * snapshot it names pinned: no page freed after it is reused, so every write grows the
     * data file (by megabytes a minute under a busy writer, on the journal's disk) until the
     * slot is cleared. lmdb.h asks for a periodic check; this is the writer's periodic call. */
    int n_cleared = 0;
    int rc = mdb_reader_check(ix->env, &n_cleared);
    if (rc)
        return index_mdb_fail(err, rc, ix, "check the readers of");
    rc = mdb_env_sync(ix->env, 1);
    if (rc)
        return index_mdb_fail(err, rc, ix, "sync");
    return 0;
}
