/*
 * index_env.c: the LMDB environments behind index handles: opening one (creating it when
 * writable, moving a corrupt one aside), the process-wide registry that shares one
 * environment per index per process, fork, closing, and the flush (index_sync).
 *
 * Layout: one environment in <journal dir>/index/ with six named databases:
 *   batches      first_seq (u64 BE)              -> segment_seq, offset, first_ts (3 x u64 BE)
 *   times        biased first_ts (u64 BE) || first_seq (u64 BE) -> (empty)
 *   meta         key (string, no NUL)            -> value (<= INDEX_META_VALUE_MAX bytes)
 *   checkpoints  sink name                       -> shipped seq (u64 BE)
 *   dead         sink name || NUL || seq (u64 BE) -> NUL || unix ms (u64 BE) || why (text)
 *   merkle       first stored index (u64 BE)     -> the run of stored hashes from it (32 bytes
 * each) index.c keeps the first two, index_meta.c the third, index_sinks.c the next two,
 * index_merkle.c the last (absent from an index made before it: read-only opens do without).
 *
 * Durability: the environment is opened with MDB_NOSYNC (a commit does not fsync; the
 * index is a cache rebuilt from the segments) and flushed by index_sync(). MDB_NOTLS lets
 * the engine's threads (index writer, shippers, status) run read transactions without
 * binding them to a thread. LMDB serialises writers itself.
 *
 * LMDB opens data.mdb and lock.mdb by path, following links, and writes and truncates its
 * lock file even for a read-only open; so before any environment is opened, index/ and its
 * two files are checked with lstat (index_check_path): no link, and an index directory of
 * the caller's user or root that its group and others cannot write. Only the journal's owner
 * and root can then swap them between the check and LMDB's open. Modes are set through
 * O_NOFOLLOW descriptors, never chmod by path.
 *
 * An environment that LMDB refuses to open as corrupt (bad meta page, wrong version, or
 * table pages it finds corrupt when the tables are opened) is moved aside by a writable open
 * and replaced by an empty one; the "rebuilt" meta key then says why, and
 * stele_index_catch_up() refills it from the segments.
 *
 * Locks: index_registry_mu (process-wide) protects the registry and each entry's refs; it
 * is held while an environment is opened (with the transaction that opens its tables) or
 * closed, never across a handle's own transactions.
 */
#include "index_lmdb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"

/* Address space reserved for the map at open, not disk: the data file grows only with its
 * pages. At ~70 bytes per batch start this holds about 120 million of them; retention, off
 * by default, deletes old ones, so a busy journal kept whole outgrows it and the map grows
 * (index_write, index_txn.c). */
#define INDEX_MAP_BYTES ((size_t)8 << 30)
/* Concurrent read transactions across all processes (tail -f, status, shippers). LMDB's
 * default of 126 is low for a log many tools follow; a slot costs 64 bytes of lock file. */
#define INDEX_MAX_READERS 1024
#define INDEX_DIR_NAME "index"
#define INDEX_REBUILT_KEY "rebuilt"

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
    ix->merkle = e->dbis[5];
    ix->has_merkle = e->has_merkle;
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
                                stele_strerror(-errno));
    index_shared_t *e = ix->shared;
    e->dev = st.st_dev;
    e->ino = st.st_ino;
    e->env = ix->env;
    MDB_dbi dbis[INDEX_MAX_DBS] = {ix->batches,     ix->times, ix->meta,
                                   ix->checkpoints, ix->dead,  ix->merkle};
    memcpy(e->dbis, dbis, sizeof dbis);
    e->has_merkle = ix->has_merkle;
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

const char *const index_table_names[INDEX_MAX_DBS] = {"batches",     "times", "meta",
                                                      "checkpoints", "dead",  "merkle"};
/* The tables an index written before the Merkle tree's cache lacks; a read-only open does
 * without them (a writable one creates them). */
#define INDEX_FIRST_OPTIONAL_DB 5

/* Opens the tables in txn (creating them when ix may write); *arg receives the name of a
 * table LMDB refused. */
static int
index_open_dbis_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    MDB_dbi *dbis[INDEX_MAX_DBS] = {&ix->batches,     &ix->times, &ix->meta,
                                    &ix->checkpoints, &ix->dead,  &ix->merkle};
    ix->has_merkle = 1;
    for (int i = 0; i < INDEX_MAX_DBS; i++) {
        int mrc =
            mdb_dbi_open(txn, index_table_names[i], ix->is_writable ? MDB_CREATE : 0, dbis[i]);
        if (mrc == MDB_NOTFOUND && i >= INDEX_FIRST_OPTIONAL_DB) {
            ix->has_merkle = 0;
            continue;
        }
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

/* Sets the mode of `path`, never through a link (O_NOFOLLOW); unchanged when it has it.
 * 0, or -1 with errno. */
static int
index_chmod_nofollow(const char *path, mode_t mode)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    int rc = fstat(fd, &st);
    if (rc == 0 && (st.st_mode & 07777) != mode)
        rc = fchmod(fd, mode);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* mkdir with exactly index_dir_mode (not narrowed by the umask). 0, or -1 with errno. */
static int
index_make_dir(const index_t *ix, unsigned file_mode)
{
    if (mkdir(ix->path, index_dir_mode(file_mode)) != 0)
        return -1;
    return index_chmod_nofollow(ix->path, index_dir_mode(file_mode));
}

/* The file LMDB maps: data.mdb in the index directory, or the monitor snapshot itself. */
static void
index_data_path(const index_t *ix, char *buf, size_t cap)
{
    if (ix->is_snapshot)
        snprintf(buf, cap, "%s", ix->path);
    else
        snprintf(buf, cap, "%s/data.mdb", ix->path);
}

/* The data file's path (into data, cap bytes), the bytes LMDB's meta page counts and the
 * file's size. Returns 0 or an LMDB/errno code. */
static int
index_data_file_sizes(const index_t *ix, char *data, size_t cap, uint64_t *counted, uint64_t *size)
{
    MDB_envinfo info;
    MDB_stat st;
    int rc = mdb_env_info(ix->env, &info);
    if (rc == 0)
        rc = mdb_env_stat(ix->env, &st);
    if (rc)
        return rc;
    index_data_path(ix, data, cap);
    struct stat fs;
    if (stat(data, &fs) != 0)
        return errno;
    *counted = ((uint64_t)info.me_last_pgno + 1) * st.ms_psize;
    *size = (uint64_t)fs.st_size;
    return 0;
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
    char data[sizeof ix->path + 16];
    uint64_t counted = 0, size = 0;
    int rc = index_data_file_sizes(ix, data, sizeof data, &counted, &size);
    return rc ? rc : size < counted ? MDB_CORRUPTED : 0;
}

/* Pages LMDB counts but never wrote: one allocated and freed again in the same transaction
 * (a "loose" page, left by deletions) is counted in the meta page and never written, so a
 * sound file can be shorter than its count, and index_check_data_size would refuse it. The
 * writer extends the file over them (with zeros; no page the tree reaches is among them)
 * once its writes are flushed. Returns 0 or an LMDB/errno code. */
static int
index_extend_data_file(const index_t *ix)
{
    char data[sizeof ix->path + 16];
    uint64_t counted = 0, size = 0;
    int rc = index_data_file_sizes(ix, data, sizeof data, &counted, &size);
    if (rc || size >= counted)
        return rc;
    return truncate(data, (off_t)counted) == 0 ? 0 : errno;
}

static bool
index_file_is_missing(const index_t *ix, const char *name)
{
    char path[sizeof ix->path + 16];
    snprintf(path, sizeof path, "%s/%s", ix->path, name);
    struct stat st;
    return lstat(path, &st) != 0 && errno == ENOENT;
}

static const char *const index_file_names[] = {"data.mdb", "lock.mdb"};
#define INDEX_N_FILES (sizeof index_file_names / sizeof index_file_names[0])

/* LMDB creates its files with the mode narrowed by the umask; a new environment's files get
 * exactly the journal's file_mode, like the segments (and an existing one's with
 * INDEX_OPEN_SET_MODES). Returns 0 or errno. */
static int
index_set_file_modes(const index_t *ix, mode_t mode)
{
    for (size_t i = 0; i < INDEX_N_FILES; i++) {
        char path[sizeof ix->path + 16];
        snprintf(path, sizeof path, "%s/%s", ix->path, index_file_names[i]);
        if (index_chmod_nofollow(path, mode) != 0 && errno != ENOENT)
            return errno;
    }
    return 0;
}

/* The rules index_open states for what LMDB will open by path (index.h). */
static int
index_check_path(const index_t *ix, int flags, stele_error_t *err)
{
    static const char hint[] = "a link or a foreign file in a journal is planted: remove it";
    struct stat st;
    if (lstat(ix->path, &st) != 0)
        return error_set_hinted(err, -errno, NULL, "could not open index %s: %s", ix->path,
                                stele_strerror(-errno));
    if (S_ISLNK(st.st_mode))
        return error_set_hinted(err, STELE_EUNSAFE, hint,
                                "index %s is a symbolic link, which stele does not follow",
                                ix->path);
    if (!(flags & INDEX_OPEN_ALLOW_UNSAFE) && st.st_uid != geteuid() && st.st_uid != 0)
        return error_set_hinted(err, STELE_EUNSAFE, "run stele as the index's owner",
                                "index %s belongs to uid %u: LMDB writes its lock file even to "
                                "read, so stele opens only an index of its own user or root",
                                ix->path, (unsigned)st.st_uid);
    if (!(flags & INDEX_OPEN_ALLOW_UNSAFE) && (st.st_mode & 022))
        return error_set_hinted(err, STELE_EUNSAFE, "chmod go-w it, or set allow_unsafe_dir",
                                "index %s has mode %04o: others could plant links in it", ix->path,
                                (unsigned)(st.st_mode & 07777));
    for (size_t i = 0; i < INDEX_N_FILES; i++) {
        char path[sizeof ix->path + 16];
        snprintf(path, sizeof path, "%s/%s", ix->path, index_file_names[i]);
        if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
            return error_set_hinted(err, STELE_EUNSAFE, hint, "index file %s is %s", path,
                                    S_ISLNK(st.st_mode)
                                        ? "a symbolic link, which stele does not follow"
                                        : "not a regular file");
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
    /* The snapshot is replaced by rename, never written in place: no reader table needed. */
    if (ix->is_snapshot)
        flags |= MDB_NOSUBDIR | MDB_NOLOCK;
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
    long long now = (long long)(clock_wall_ms() / 1000);
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
                                ix->path, stele_strerror(rc));
    if (index_make_dir(ix, file_mode) != 0)
        return error_set_hinted(err, -errno, NULL, "could not create index %s: %s", ix->path,
                                stele_strerror(-errno));
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
    index_data_path(ix, data, sizeof data);
    struct stat st;
    int rc = stat(data, &st) == 0 ? 0 : -errno;
    if (rc == 0 && st.st_size > 0)
        return 0;
    if (rc && rc != -ENOENT)
        return error_set_hinted(err, rc, NULL, "could not open index %s: %s", ix->path,
                                stele_strerror(rc));
    return error_set_hinted(err, STELE_ENOTFOUND, NULL,
                            "index %s is not initialised (no data file yet)", ix->path);
}

/* A handle for <dir>/index, with no environment yet; *out is set even on failure (for
 * index_close). */
static int
index_handle_new(const char *dir, int flags, size_t map_bytes, index_t **out, stele_error_t *err)
{
    index_t *ix = calloc(1, sizeof *ix);
    *out = ix;
    if (!ix)
        return error_set_hinted(err, -ENOMEM, NULL, "could not allocate the index handle");
    ix->is_snapshot = (flags & INDEX_OPEN_SNAPSHOT) != 0;
    ix->is_writable = (flags & INDEX_OPEN_WRITE) != 0 && !ix->is_snapshot;
    ix->map_bytes = map_bytes;
    int n = snprintf(ix->path, sizeof ix->path, "%s/%s%s", dir, INDEX_DIR_NAME,
                     ix->is_snapshot ? "/" INDEX_SNAPSHOT_NAME : "");
    if (n < 0 || (size_t)n >= sizeof ix->path)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index path under %s is too long", dir);
    return 0;
}

/* The snapshot must be a regular file, not a link. LMDB opens it read-only without a lock
 * file (MDB_NOLOCK) and writes nothing, so it may belong to another user (the writer). */
static int
index_check_snapshot(const index_t *ix, stele_error_t *err)
{
    struct stat st;
    if (lstat(ix->path, &st) != 0)
        return error_set_hinted(err, errno == ENOENT ? STELE_ENOTFOUND : -errno, NULL,
                                "could not open index snapshot %s: %s", ix->path,
                                stele_strerror(-errno));
    if (!S_ISREG(st.st_mode))
        return error_set_hinted(err, STELE_EUNSAFE, "remove it: the writer makes a new one",
                                "index snapshot %s is not a regular file", ix->path);
    return index_check_initialised(ix, err);
}

/* With INDEX_OPEN_SET_MODES an existing index takes file_mode (its directory the matching
 * index_dir_mode). */
static int
index_apply_modes(const index_t *ix, unsigned file_mode, stele_error_t *err)
{
    int rc = index_chmod_nofollow(ix->path, index_dir_mode(file_mode)) == 0 ? 0 : errno;
    if (rc == 0)
        rc = index_set_file_modes(ix, (mode_t)file_mode);
    if (rc)
        return error_set_hinted(err, -rc, NULL, "could not set the modes of index %s: %s", ix->path,
                                stele_strerror(-rc));
    return 0;
}

/* A writable open creates the index directory when missing; a read-only one needs it, with
 * an initialised environment in it. Either way what LMDB will open must pass
 * index_check_path first. */
static int
index_prepare_dir(index_t *ix, unsigned file_mode, int flags, stele_error_t *err)
{
    struct stat st;
    if (lstat(ix->path, &st) != 0) {
        if (errno != ENOENT || !ix->is_writable) {
            int rc = errno == ENOENT ? STELE_ENOTFOUND : -errno;
            return error_set_hinted(err, rc, NULL, "could not open index %s: %s", ix->path,
                                    stele_strerror(-errno));
        }
        if (index_make_dir(ix, file_mode) != 0 && errno != EEXIST)
            return error_set_hinted(err, -errno, NULL, "could not create index %s: %s", ix->path,
                                    stele_strerror(-errno));
    }
    int rc = index_check_path(ix, flags, err);
    if (rc == 0 && (flags & INDEX_OPEN_SET_MODES) && file_mode)
        rc = index_apply_modes(ix, file_mode, err);
    if (rc)
        return rc;
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
index_open(const char *dir, int flags, unsigned file_mode, index_t **out, stele_error_t *err)
{
    return index_open_mapped(dir, flags, file_mode, INDEX_MAP_BYTES, out, err);
}

int
index_open_mapped(const char *dir, int flags, unsigned file_mode, size_t map_bytes, index_t **out,
                  stele_error_t *err)
{
    if (!dir || !out || map_bytes == 0)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "index_open: dir, out and a map size are required");
    *out = NULL;
    index_t *ix = NULL;
    int rc = index_handle_new(dir, flags, map_bytes, &ix, err);
    if (rc == 0)
        rc = ix->is_snapshot ? index_check_snapshot(ix, err)
                             : index_prepare_dir(ix, file_mode, flags, err);
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
    if (rc == 0)
        rc = index_extend_data_file(ix);
    if (rc)
        return index_mdb_fail(err, rc, ix, "sync");
    return 0;
}
