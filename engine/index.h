/*
 * index.h: the LMDB index beside the segments. The index*.c files are the only ones that
 * call LMDB (index_lmdb.h): index_env.c opens and shares environments, index_txn.c runs
 * transactions and grows the map, index.c keeps batch starts, index_meta.c named values,
 * index_sinks.c checkpoints and dead letters.
 *
 * The index is a cache: everything in it but the sinks' checkpoints and dead letters (and,
 * after retention, the Merkle hashes of deleted records) can be rebuilt from the segments, and a
 * checkpoint can be re-derived from MongoDB. It is sparse: one entry per committed batch (first seq
 * -> segment, offset; first ts -> first seq), so a lookup lands at most one batch before the wanted
 * record and the reader scans forward. Batch starts are written by one thread (the engine's index
 * writer; the catch-up at open before it starts), a sink's checkpoint and dead letters by that
 * sink's shipper; LMDB serialises the writers. Writes are not synced (MDB_NOSYNC): index_sync
 * flushes them lazily. Readers in any process open the index read-only.
 *
 * A writable index_open() of an environment LMDB finds corrupt moves it aside
 * (index.corrupt-<unix time>) and starts an empty one; the meta key "rebuilt" then says so,
 * and stele_index_catch_up() refills the batches from the segments and reports it.
 */
#ifndef STELE_ENGINE_INDEX_H
#define STELE_ENGINE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "stele.h"

typedef struct index index_t;

/* A batch start as the index records it. */
typedef struct index_batch {
    uint64_t first_seq;
    uint64_t segment_seq;
    uint64_t offset;
    int64_t first_ts_ns;
} index_batch_t;

/* index_open's flags. */
enum {
    INDEX_OPEN_WRITE = 1,     /* writable; the index is created when missing */
    INDEX_OPEN_SET_MODES = 2, /* an existing index's directory and files get file_mode too */
    /* accept an index directory that is another user's, or that its group or others can
     * write (allow_unsafe_dir); a link is refused all the same */
    INDEX_OPEN_ALLOW_UNSAFE = 4,
    /* read the monitor snapshot (index_snapshot_write) instead of the index: for a reader
     * that may not write the index's lock file; read-only, owner rule lifted, link refused */
    INDEX_OPEN_SNAPSHOT = 8,
};

/* The monitor snapshot's file name inside the index directory. */
#define INDEX_SNAPSHOT_NAME "monitor.mdb"

/* Opens (creating with INDEX_OPEN_WRITE when missing) the LMDB environment in `dir`/index.
 * New files get file_mode (0: 0600), the directory the same with search where read is
 * allowed. Read-only opens of an index that does not exist (no directory, or no data file
 * written yet) return STELE_ENOTFOUND and create nothing.
 * LMDB opens its files by path, following links, and writes its lock file even for a
 * read-only open, so nothing is left to it that another user could have changed: index/
 * must not be a link and must belong to the caller or root and not be writable by its group
 * or others, and data.mdb and lock.mdb must not be links (STELE_EUNSAFE otherwise, naming
 * the path; INDEX_OPEN_ALLOW_UNSAFE lifts the owner and mode rules, never the link rule).
 * Readers the index refuses read the monitor snapshot (INDEX_OPEN_SNAPSHOT) or scan. */
int index_open(const char *dir, int flags, unsigned file_mode, index_t **out, stele_error_t *err);
/* index_open with the initial size of the map (address space, not disk) of an environment
 * it opens, in bytes; index_open reserves 8 GiB. Ignored when the process has the index open
 * already (the handles share that environment). For tests that reach the map's limit. */
int index_open_mapped(const char *dir, int flags, unsigned file_mode, size_t map_bytes,
                      index_t **out, stele_error_t *err);
void index_close(index_t *ix);

/* Writes the monitor snapshot: a new LMDB file, index/monitor.mdb, holding a copy of the
 * meta, checkpoints and dead tables (batches and times left empty), with data.mdb's mode,
 * put in place by rename so a reader never sees it half written. Readers that cannot open
 * the index (index_open refuses another user's) open it with INDEX_OPEN_SNAPSHOT.
 * Needs a writable handle. Blocks on file I/O; no fsync (a snapshot lost to a crash is
 * made again at the writer's next flush). */
int index_snapshot_write(index_t *ix, stele_error_t *err);

/* Records batch starts in one transaction. */
int index_put_batches(index_t *ix, const index_batch_t *batches, size_t n, stele_error_t *err);

/* The batch start with the greatest first_seq <= seq. STELE_ENOTFOUND when none. */
int index_find_seq(index_t *ix, uint64_t seq, index_batch_t *out, stele_error_t *err);
/* The last batch start with first_ts_ns < ts_ns, so a scan from it finds the first record
 * with ts >= ts_ns (strictly less: timestamps may repeat across a batch boundary, and the
 * batch before one starting at exactly ts_ns may end with records at ts_ns).
 * STELE_ENOTFOUND when none (scan from the oldest record). */
int index_find_time(index_t *ix, int64_t ts_ns, index_batch_t *out, stele_error_t *err);
/* The newest batch start. STELE_ENOTFOUND when empty. */
int index_last_batch(index_t *ix, index_batch_t *out, stele_error_t *err);
/* The oldest batch start. STELE_ENOTFOUND when empty. */
int index_first_batch(index_t *ix, index_batch_t *out, stele_error_t *err);
/* The batch start with the smallest first_seq >= seq (for walking the index in order, as
 * verify does). STELE_ENOTFOUND when none. */
int index_find_next(index_t *ix, uint64_t seq, index_batch_t *out, stele_error_t *err);

/* Drops batch starts with first_seq > seq (after recovery truncated a torn tail). */
int index_truncate_after(index_t *ix, uint64_t seq, stele_error_t *err);
/* Drops batch starts with first_seq < seq (after retention deleted segments). */
int index_delete_before(index_t *ix, uint64_t seq, stele_error_t *err);
/* Empties the batch tables (before a rebuild). Checkpoints and dead letters stay. */
int index_clear_batches(index_t *ix, stele_error_t *err);

/* Small named values (source, format, rebuild marker). Values up to 256 bytes. */
int index_put_meta(index_t *ix, const char *key, const void *value, size_t len, stele_error_t *err);
/* Copies up to cap bytes into value; *len_out = stored length. STELE_ENOTFOUND when unset. */
int index_get_meta(index_t *ix, const char *key, void *value, size_t cap, size_t *len_out,
                   stele_error_t *err);
/* Removes a meta key; 0 also when it was unset. */
int index_delete_meta(index_t *ix, const char *key, stele_error_t *err);

/* Per-sink shipped checkpoints, each with the identity of the destination that acknowledged
 * it (text, at most INDEX_DESTINATION_MAX bytes; "" for a checkpoint stored without one).
 * get returns 0 with *seq = 0 (and destination "") when the sink has none; the destination is
 * cut to cap - 1 bytes. put keeps the stored destination; put_at replaces it (NULL keeps). */
#define INDEX_DESTINATION_MAX 255
int index_put_checkpoint(index_t *ix, const char *sink, uint64_t seq, stele_error_t *err);
int index_get_checkpoint(index_t *ix, const char *sink, uint64_t *seq, stele_error_t *err);
int index_put_checkpoint_at(index_t *ix, const char *sink, uint64_t seq, const char *destination,
                            stele_error_t *err);
int index_get_checkpoint_at(index_t *ix, const char *sink, uint64_t *seq, char *destination,
                            size_t cap, stele_error_t *err);
/* Starts a sink over at a new destination, in one transaction: its dead letters (and their
 * count) are deleted, its checkpoint becomes seq 0 with `destination`. *n_dropped (may be
 * NULL) receives how many dead letters were deleted. */
int index_reset_sink(index_t *ix, const char *sink, const char *destination, uint64_t *n_dropped,
                     stele_error_t *err);
/* Lists up to max checkpoints; returns how many exist or a negative code. */
int index_list_checkpoints(index_t *ix, char (*names)[64], uint64_t *seqs, size_t max,
                           stele_error_t *err);

/* Dead letters: seqs a sink's remote rejected permanently, with the time (now) and reason
 * of the last rejection (put replaces an existing one). Reasons are cut at INDEX_WHY_MAX. */
#define INDEX_WHY_MAX 512

typedef struct index_dead_letter {
    uint64_t seq;
    int64_t unix_ms; /* when last rejected; 0 for letters recorded without a time */
    char why[INDEX_WHY_MAX + 1];
} index_dead_letter_t;

int index_put_dead_letter(index_t *ix, const char *sink, uint64_t seq, const char *why,
                          stele_error_t *err);
int index_delete_dead_letter(index_t *ix, const char *sink, uint64_t seq, stele_error_t *err);
/* Fills up to max seqs in order from `from_seq`; returns how many were filled or < 0. */
int index_list_dead_letters(index_t *ix, const char *sink, uint64_t from_seq, uint64_t *seqs,
                            size_t max, stele_error_t *err);
/* As index_list_dead_letters, with the time and reason of each. */
int index_read_dead_letters(index_t *ix, const char *sink, uint64_t from_seq,
                            index_dead_letter_t *out, size_t max, stele_error_t *err);
int index_count_dead_letters(index_t *ix, const char *sink, uint64_t *count, stele_error_t *err);

/* The Merkle tree's stored hashes (journal/merkle.h) of a version 2 journal, a cache: runs
 * of them, each the hashes one batch completed, numbered from first_index. */
typedef struct index_merkle_run {
    uint64_t first_index;
    const uint8_t *hashes; /* n x 32 bytes, borrowed for the call */
    size_t n;
} index_merkle_run_t;

/* Writes runs in one transaction. Returns 0 or a negative code. */
int index_put_merkle_runs(index_t *ix, const index_merkle_run_t *runs, size_t n,
                          stele_error_t *err);
/* The stored hash of stored_index into out. STELE_ENOTFOUND when the index does not hold it
 * (a short or missing cache). */
int index_read_merkle(index_t *ix, uint64_t stored_index, uint8_t out[32], stele_error_t *err);
/* One past the last stored hash the index holds (0 when none): the runs cover 0 .. end - 1
 * when the cache is whole. */
int index_merkle_end(index_t *ix, uint64_t *end_out, stele_error_t *err);
/* Drops the stored hashes from end on (after recovery cut records). */
int index_truncate_merkle(index_t *ix, uint64_t end, stele_error_t *err);

/* Flushes the environment to disk (the index is opened with MDB_NOSYNC) and clears the
 * lock-table slots of reader processes that died inside a transaction (they would pin old
 * pages and make the data file grow with every write). A no-op on a read-only handle.
 * Until it runs, a crash may lose what was written since the last flush: batch starts are
 * then re-indexed by the catch-up at the next open, and a sink's checkpoint falls back to
 * an earlier one (those records are sent again; their deterministic _ids keep the remote
 * from storing them twice).
 * The engine's index writer calls it when the index was written since the last flush and
 * 100,000 records were indexed since then, a sink's published counters changed, or 30 s
 * passed, checked at most once a second, and at close (engine/index_writer.c,
 * INDEX_WRITER_SYNC_*); the catch-up at open and the dead-letter commands call it when they
 * are done. */
int index_sync(index_t *ix, stele_error_t *err);

/* Test seam, like the journal's faulting I/O table (tests/support/io_fault.h): the next
 * n_writes write calls through this handle (INDEX_FAIL_FOREVER: every one, until armed
 * again; 0 disarms) fail with -errno_code (EIO when not positive) as a failed LMDB write
 * would, writing nothing. Other handles, even on the same environment, are unaffected, so a
 * test can fail a shipper's index writes while its own go on. Any thread. */
#define INDEX_FAIL_FOREVER UINT32_MAX
void index_fail_writes(index_t *ix, uint32_t n_writes, int errno_code);

/* Write calls through this handle fail with -ENOSPC, writing nothing, while the index's
 * file system has fewer than `bytes` free (0: no limit). The writer's index keeps that way
 * the room the journal's next segment needs: the index is a cache that falls behind and is
 * caught up later, the segment is where records go (docs/journal.md, "When the disk
 * fills"). Any thread. */
void index_keep_free(index_t *ix, uint64_t bytes);

#endif /* STELE_ENGINE_INDEX_H */
