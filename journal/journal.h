/*
 * journal.h: the journal's API for the engine: open with recovery, append batches of
 * framed records, sync, roll segments, delete old segments, and read records back from any
 * process. The on-disk format is specified in FORMAT.md and mirrored by format.h.
 *
 * The journal knows nothing about LMDB, JSON or MongoDB. It uses libc, its own I/O method
 * table (io.h) and OpenSSL's SHA-256 for the chain hash. Error codes and the error struct
 * are the public ones from <stele.h>.
 *
 * Threads: one thread at a time writes. journal_append_batch, journal_sync,
 * journal_publish and journal_active_position may be called from any thread, but never two
 * at once: the caller serialises them with a lock of its own (the engine's I/O lock, held by
 * its committer or by a leading waiter), and that lock also carries the writer's state from
 * one thread to the next. journal_close comes after the last of them. journal_last_seq,
 * journal_stats and journal_delete_before may be called from any thread at any time (they
 * take the journal's own locks). Internally a segment-preparer thread creates and
 * preallocates the next segment ahead of need. A journal_reader_t belongs to one thread.
 */
#ifndef STELE_JOURNAL_H
#define STELE_JOURNAL_H

#include <stdint.h>
#include <stddef.h>

#include "format.h"
#include "io.h"
#include "merkle.h"
#include "meta.h"
#include "note.h"
#include "stele.h"

typedef struct journal journal_t;

/* Who appended a record: version 2's origin block (FORMAT.md, "Frame"), set by the engine,
 * never by the event. kind is FRAME_ORIGIN_UNKNOWN, _PROCESS (the writing process itself)
 * or _PEER (a peer of `stele serve`, vouched for by SO_PEERCRED). Version 1 stores none. */
typedef struct journal_origin {
    uint32_t uid;
    uint32_t gid;
    uint32_t pid;
    uint32_t kind;
} journal_origin_t;

/* How a log ended, as classified by recovery or a scan. */
typedef enum journal_end {
    JOURNAL_END_CLEAN = 0,     /* zero-filled preallocated space (or end of file) */
    JOURNAL_END_TORN_FRAME,    /* a frame header or payload cut short / partly zero */
    JOURNAL_END_BAD_CRC,       /* a complete-looking frame whose CRC does not match */
    JOURNAL_END_BAD_LENGTH,    /* a length that cannot be (too big, past the segment) */
    JOURNAL_END_BAD_SEQ,       /* a valid frame whose seq does not follow */
    JOURNAL_END_TORN_BATCH,    /* valid frames after the last batch end, batch not complete */
    JOURNAL_END_SEALED_DAMAGE, /* damage in a sealed segment or before the durable tail */
} journal_end_t;

const char *journal_end_name(journal_end_t end);

/* How a new segment's space is reserved. Writing into fallocate'd space makes the next
 * fdatasync also flush extent metadata (the blocks turn from unwritten to written), which
 * a zero-filled segment does not have; zero-filling costs one extra write of the segment. */
typedef enum journal_zero_fill {
    JOURNAL_ZERO_FILL_NEVER = 0,  /* fallocate only */
    JOURNAL_ZERO_FILL_ALWAYS = 1, /* write zeros over the whole segment */
    /* Zero-fill while recent syncs carried small batches (below
     * JOURNAL_ZERO_FILL_MAX_SYNC_BYTES each on average): then a sync costs mostly its
     * metadata. With bigger batches the metadata is noise beside the data, and zero-filling
     * would write every byte twice. */
    JOURNAL_ZERO_FILL_SMALL_SYNCS = 2,
} journal_zero_fill_t;

#define JOURNAL_ZERO_FILL_MAX_SYNC_BYTES ((uint64_t)256 << 10)

typedef struct journal_options {
    const journal_io_t *io;    /* NULL = journal_io_posix() */
    const char *source;        /* stored at creation; ignored when the journal exists */
    uint64_t segment_bytes;    /* preallocated size of a segment file */
    uint32_t max_record_bytes; /* largest payload accepted */
    /* The modes of the journal's files and directory. 0 (the default): a new journal gets
     * 0600 and 0700, and an existing one keeps its own (new segments take the newest
     * segment's mode). Non-zero: exact (the umask does not narrow them), for a new journal
     * and an existing one alike: open sets the directory's mode and every file's that
     * differs (FORMAT.md section 1). */
    unsigned file_mode;
    unsigned dir_mode;
    int create_if_missing;
    /* 1: skip the check that nobody but the journal's owner and root can change it (jdir.h).
     * Links are never followed either way. Default 0. */
    int allow_unsafe_dir;
    int zero_fill; /* how segments are preallocated: journal_zero_fill_t */
    /* 1: prepare the next segment in the thread that rolls, at roll time, instead of in the
     * background preparer thread. Slower rolls, but every I/O call happens in the writer, in
     * a fixed order, which fault-injection loops that number calls rely on. Default 0. */
    int prepare_inline;
    /* 1: write the active segment with O_DIRECT (journal/direct.h) where the file system
     * allows it and the segment size is a multiple of DIRECT_ALIGN; elsewhere buffered.
     * Worth it when every batch is synced (sync=always): fdatasync then has no page-cache
     * writeback to do. Default 0. */
    int direct_writes;
    /* Where recovery may start its tail scan: a batch start known to the index (0 = none).
     * The journal checks it and falls back to the newest segment's start if it is wrong, or
     * if the batch was written before every record ahead of it was synced (FORMAT.md 7). */
    uint64_t hint_seq;
    uint64_t hint_segment_seq;
    uint64_t hint_offset;
    /* The format version of a journal this open creates: 0 = FORMAT_VERSION (the newest);
     * 1 makes a version 1 journal (tests). An existing journal keeps its own version. */
    uint32_t create_version;
    /* Signing (version 2, FORMAT.md section 11): the signer key file the writer signs with
     * and evolves in place (NULL: no signing; a journal that has KEYS then refuses to open),
     * and the cadence of checkpoints and key epochs. Zeros take the defaults
     * (JOURNAL_DEFAULT_CHECKPOINT_*, JOURNAL_DEFAULT_KEY_EPOCH_S). */
    const char *signing_key_path;
    uint64_t checkpoint_records;
    uint32_t checkpoint_interval_ms;
    uint32_t key_epoch_s;
} journal_options_t;

/* The largest meta frame (a checkpoint or key statement): room every segment of a signed
 * journal keeps at its end, for the checkpoint of its last record, and after each batch. */
#define JOURNAL_META_FRAME_MAX ((size_t)format_frame_bytes(2, META_PAYLOAD_MAX_BYTES))

#define JOURNAL_DEFAULT_CHECKPOINT_RECORDS 1000
#define JOURNAL_DEFAULT_CHECKPOINT_INTERVAL_MS 10000
#define JOURNAL_DEFAULT_KEY_EPOCH_S 900

void journal_options_init(journal_options_t *opts);

/* What recovery found and did at open. */
typedef struct journal_recovery {
    uint32_t version;   /* the journal's format version (that of its newest segment) */
    uint64_t first_seq; /* oldest record (0 when empty) */
    uint64_t last_seq;  /* newest valid record after recovery (0 when empty) */
    int64_t last_ts_ns;
    uint8_t last_hash[32];    /* chain hash to continue from (genesis when empty) */
    uint8_t merkle_root[32];  /* version 2: the root of the Merkle tree of all records */
    journal_end_t end;        /* how the newest segment ended */
    uint64_t truncated_bytes; /* bytes of torn tail zeroed */
    uint64_t scanned_bytes;
    char note[STELE_ERROR_MESSAGE_BYTES]; /* empty when nothing notable happened */
} journal_recovery_t;

/*
 * Opens the journal directory for writing: refuses a directory others could change
 * (STELE_EUNSAFE, unless opts->allow_unsafe_dir) or a link where a journal file should be,
 * takes the writer lock (STELE_ELOCKED naming the holder's pid), checks the format version
 * (STELE_EVERSION), runs tail recovery (may zero a torn tail; STELE_ECORRUPT with segment
 * and offset for damage anywhere else), and starts the segment preparer, which makes the
 * next segment once the first batch after the open is written past the active segment's
 * quarter mark (so that what the caller does between the open and its first append, such
 * as catching up an index, has the disk's free space first). *rec_out (may be NULL) tells
 * what recovery did.
 */
int journal_open(const char *dir, const journal_options_t *opts, journal_t **out,
                 journal_recovery_t *rec_out, stele_error_t *err);

/* Syncs the active segment, stops the preparer, releases the lock, frees. NULL is a no-op.
 * Returns the sticky error if the journal had failed; else the sync's error; else a failure
 * that did not endanger the log but must not go unreported (a descriptor failed to close, a
 * retention step failed); else 0. A next segment that could not be prepared is no failure
 * (every record is in; the next open prepares again): then 0 is returned with a warning in
 * *err, code 0 and the message set. */
int journal_close(journal_t *j, stele_error_t *err);

/* The format version the journal writes (fixed when it was created). Any thread. */
uint32_t journal_version(const journal_t *j);

/* Bytes a frame with a `payload_len`-byte payload occupies in a journal of `version`
 * (header + payload + padding). */
size_t journal_frame_bytes(uint32_t version, uint32_t payload_len);

/*
 * Lays out one frame of `version` at `frame` (journal_frame_bytes(version, payload_len)
 * bytes): header fields seq and ts_ns, the origin block (version 2; origin NULL = all zero,
 * FRAME_ORIGIN_UNKNOWN), the payload copied in, padding zeroed. The hashes, batch flag and
 * CRC are left for journal_append_batch. Pure; any thread.
 */
void journal_frame_prepare(uint32_t version, uint8_t *frame, uint64_t seq, int64_t ts_ns,
                           const journal_origin_t *origin, const uint8_t *payload,
                           uint32_t payload_len);

/*
 * Optional, between journal_frame_prepare and journal_append_batch, version 2 only (a version
 * 1 frame is left as it is): hashes the record's leaf (about half of its SHA-256 work) into
 * the frame's hash field, where journal_append_batch takes it from instead of hashing it
 * itself; the frame must not change after. Lets the thread that lays a frame take that work
 * off the one thread that seals batches. Pure; any thread.
 */
void journal_frame_hash_leaf(uint32_t version, uint8_t *frame);

/* Where a batch landed. */
typedef struct journal_batch_info {
    uint64_t first_seq;
    uint64_t last_seq;
    int64_t first_ts_ns;
    uint64_t segment_seq; /* first seq of the segment holding the batch (its file name) */
    uint64_t offset;      /* byte offset of the batch's first frame in that segment */
    int rolled;           /* 1 when this batch started a new segment */
    /* Version 2: the Merkle tree's stored hashes the batch completed (merkle.h), numbered
     * first_stored .. first_stored + n_stored - 1, 32 bytes each back to back; borrowed
     * until the next append. NULL and 0 in version 1. */
    uint64_t first_stored;
    size_t n_stored;
    const uint8_t *stored;
} journal_batch_info_t;

/*
 * Seals and writes a batch of prepared frames laid out back to back in buf[0..len): fills
 * each frame's chain hash, flags the last frame as the batch end, computes CRCs, then writes
 * the batch with one vectored write. Seqs must continue journal_last_seq()+1 without gaps;
 * ts must not decrease. Rolls to the next (already prepared) segment first when the batch
 * does not fit; the old segment is synced and sealed. Does not fdatasync the batch.
 * A failure puts the journal in a sticky failed state (every later call returns it).
 * Returns 0, STELE_ETOOBIG (batch larger than a segment), STELE_EINVAL, STELE_EHALTED, -errno.
 */
int journal_append_batch(journal_t *j, uint8_t *buf, size_t len, journal_batch_info_t *info,
                         stele_error_t *err);

/* fdatasyncs the active segment. On failure the journal halts (sticky); never retried. */
int journal_sync(journal_t *j, stele_error_t *err);

/*
 * Publishes positions to readers in other processes (the LOCK file's page) and wakes readers
 * waiting for new records: `visible_seq` is the last record readers may return, `durable_seq`
 * the last fdatasynced. Cheap (memory stores and a futex wake); never does file I/O.
 */
void journal_publish(journal_t *j, uint64_t visible_seq, uint64_t durable_seq);

uint64_t journal_last_seq(const journal_t *j);
/* The last seq journal_sync (or a roll, which syncs the segment it leaves) made durable. */
uint64_t journal_durable_seq(const journal_t *j);

/*
 * How many leading bytes of the batch buf[0..len) (prepared frames, as journal_append_batch
 * takes them) the active segment still holds without a roll: whole frames only, with room
 * kept for a checkpoint the batch may carry. len when all of it fits, 0 when not one frame
 * does. Writing that prefix first puts every record the room can take into it before the
 * roll, which a full disk may refuse. Only under the caller's writer lock.
 */
size_t journal_batch_fit_bytes(const journal_t *j, const uint8_t *buf, size_t len);

/* The active segment: its first seq (its name), where the next batch would start in it, and
 * its size: what a quota check needs to tell when queued bytes roll into new segments. Only
 * under the caller's writer lock (Threads, above): the writer moves them. */
typedef struct journal_active {
    uint64_t first_seq;
    uint64_t write_off;
    uint64_t size;
} journal_active_t;
void journal_active_position(const journal_t *j, journal_active_t *out);
/* The size new segments are created with (journal_options_t.segment_bytes). */
uint64_t journal_segment_bytes(const journal_t *j);

/* Deletes whole segments whose records all have seq < `seq` (never the active one), oldest
 * first: unlink each, then fsync the directory; a preparation of the next segment that
 * failed is then tried again. Returns the number of segments deleted, or
 * -errno when none could be. It stops at the first failed unlink and still returns the count
 * of those already gone (they are gone for readers too); that failure, or a failed directory
 * fsync, is reported by journal_close. STELE_EHALTED on a halted journal. */
int journal_delete_before(journal_t *j, uint64_t seq, stele_error_t *err);

typedef struct journal_stats {
    uint64_t first_seq;
    uint64_t last_seq;
    uint64_t segments;     /* sealed + active + prepared */
    uint64_t disk_bytes;   /* allocated size of all segment files */
    uint64_t sealed_bytes; /* of them, the segments before the active one */
    uint64_t syncs;
    /* Signing (0 without a key): statements written by this writer, the tree size of the
     * newest, the key epoch in force. */
    int is_signing;
    uint64_t checkpoints;
    uint64_t sealed_seq;
    uint64_t key_epoch;
    /* 0, or why the next segment could not be prepared (-ENOSPC ...): the preparation is
     * tried again when retention frees space and when a roll needs it, and only a failure
     * then halts the journal. */
    int prepare_rc;
} journal_stats_t;

void journal_stats(journal_t *j, journal_stats_t *out);

const char *journal_source(const journal_t *j);

/* The engine's record clock (engine/stamp.c), kept in the LOCK page for the next writer of
 * the same boot, so that a clock step between two processes is recognised. Shared memory,
 * never synced: it lives as long as the boot (boot_id says which). */
#define JOURNAL_CLOCK_STEP 1u /* flags: the wall clock showed step_offset_ns since ... */
typedef struct journal_clock_note {
    uint8_t boot_id[16];        /* the kernel's boot id when written */
    int64_t trusted_offset_ns;  /* wall time minus boot time that stamps follow */
    uint64_t confirmed_boot_ns; /* boot time when the wall clock last agreed with it */
    int64_t step_offset_ns;     /* with JOURNAL_CLOCK_STEP: the other offset the clock shows */
    uint64_t step_since_boot_ns;
    uint32_t flags;
} journal_clock_note_t;

/* The note the previous writer left; STELE_ENOTFOUND when there is none. Writer only. */
int journal_clock_note_load(const journal_t *j, journal_clock_note_t *note);
/* Keeps the note for the next writer. No I/O (a store into the shared page); the caller
 * serialises calls. Writer only. */
void journal_clock_note_store(journal_t *j, const journal_clock_note_t *note);

/* The mode the journal gives new files: file_mode when set, else the one its files have
 * (journal_options_t.file_mode). */
unsigned journal_file_mode(const journal_t *j);

/* Opens `dir` as a journal directory for reading its files relative to it (io.h): never
 * through a link (STELE_EUNSAFE naming the target), STELE_ENOTJOURNAL when it is not a
 * directory, -errno (-ENOENT: it does not exist). Close *fd_out with close(). */
int journal_dir_open(const char *dir, int *fd_out, stele_error_t *err);

/* ---------------------------------------------------------------------------------------
 * Signing (version 2 with a signing key; FORMAT.md section 11). The writer calls these
 * under the same lock as journal_append_batch unless said otherwise. Without a key they do
 * nothing and return 0.
 * --------------------------------------------------------------------------------------- */

/* Why a checkpoint is written outside the batch path. */
typedef enum journal_checkpoint_kind {
    JOURNAL_CHECKPOINT_INTERVAL = 1,  /* the interval passed with nothing to write */
    JOURNAL_CHECKPOINT_RETENTION = 2, /* before deleting segments below first_seq */
} journal_checkpoint_kind_t;

/* 1 when the journal signs. Any thread. */
int journal_is_signing(const journal_t *j);

/* The monotonic time (clock.h's CLOCK_MONOTONIC, ns) by which the next interval checkpoint
 * is due, 0 when not signing. Any thread (a committer's idle wait). */
uint64_t journal_checkpoint_due_ns(const journal_t *j);

/*
 * Writes a checkpoint alone, as a batch of its own (a roll first when the segment lacks
 * room), of the tree as it is. For JOURNAL_CHECKPOINT_RETENTION, first_seq is the first seq
 * retention will keep: journal_delete_before never deletes below the newest one that a
 * journal_sync has made durable. Does not sync. A failed write halts the journal.
 * Returns 0, STELE_EHALTED, -errno.
 */
int journal_checkpoint(journal_t *j, journal_checkpoint_kind_t kind, uint64_t first_seq,
                       stele_error_t *err);

/* A key rotation in three steps (FORMAT.md section 11.4), so the slow file work runs without
 * the writer's lock: prepare (not under the lock; writes <key>.next), commit (under it:
 * KEYS, the journal's key statement, synced; the writer signs with the new key from here),
 * finish (not under it: the key file replaced, the old key's bytes scrubbed, <key>.next
 * removed). One rotation at a time, from one thread. */
typedef struct journal_rotation {
    note_signer_t next; /* the next epoch's key: secret, wiped by finish or abandon */
    uint64_t epoch;
    int is_committed;
    int may_be_in_keys; /* commit reached KEYS: its statement may name the next key */
} journal_rotation_t;

/* 1 when the current key epoch began key_epoch_s or more ago (wall clock). Any thread. */
int journal_rotation_due(const journal_t *j);

/* Returns 0 with r ready, or an error: nothing changed but perhaps a removed <key>.next. */
int journal_rotate_prepare(journal_t *j, journal_rotation_t *r, stele_error_t *err);
/* Returns 0, or an error that halted the journal (KEYS or the journal could not be written:
 * the next open completes or undoes the rotation). */
int journal_rotate_commit(journal_t *j, journal_rotation_t *r, stele_error_t *err);
/* Returns 0; an error leaves the old key file in place until the next open completes the
 * rotation (it is reported by journal_close too). Wipes r either way. */
int journal_rotate_finish(journal_t *j, journal_rotation_t *r, stele_error_t *err);
/* A prepared rotation not committed: removes <key>.next unless KEYS may name that key (then
 * the next open completes the rotation with it, or removes it: FORMAT.md 11.4 R3, R4), wipes
 * r. */
void journal_rotate_abandon(journal_t *j, journal_rotation_t *r);

/* ---------------------------------------------------------------------------------------
 * Reading (any process, read-only)
 * --------------------------------------------------------------------------------------- */
typedef struct journal_reader journal_reader_t;

/* A decoded record (or, from a reader asked for them, a meta frame); pointers borrowed until
 * the next call on the reader. */
typedef struct journal_record {
    uint64_t seq; /* a meta frame: the tree size, i.e. the seq of the record before it */
    int64_t ts_ns;
    const uint8_t *payload; /* a meta frame: its type byte, then the signed note's text */
    uint32_t payload_len;
    uint8_t hash[32];        /* chain hash (zero for a meta frame) */
    uint8_t prev_hash[32];   /* chain hash of the record before (zero when not known) */
    uint8_t leaf_hash[32];   /* version 2: the record's Merkle leaf hash; zero otherwise */
    journal_origin_t origin; /* version 2: who appended it; zero otherwise */
    uint32_t version;        /* format version of the segment it is in */
    uint64_t segment_seq;
    uint64_t offset;
    uint64_t frame_bytes;
    int is_batch_end;
    int is_meta; /* a checkpoint or key statement (journal_reader_set_meta), not a record */
} journal_record_t;

int journal_reader_open(const char *dir, const journal_io_t *io, journal_reader_t **out,
                        stele_error_t *err);
void journal_reader_close(journal_reader_t *r);

/* With want_meta 1, journal_reader_next also returns version 2's meta frames (checkpoints
 * and key statements, is_meta 1) in their place between the records, those that follow the
 * record before the position sought; with 0 (the default) it skips them. */
void journal_reader_set_meta(journal_reader_t *r, int want_meta);

/* The check journal_open makes on the writer's directory (jdir.h), for a reader: nobody but
 * the journal's owner and root could change what it reads. Links are refused by the open
 * itself, whatever this says. Returns 0, STELE_EUNSAFE (naming the path, what was found and
 * the fix) or -errno. */
int journal_reader_check_dir(const journal_reader_t *r, stele_error_t *err);

/* The reader's descriptor of the journal directory, for opening its files relative to it
 * (io.h). Owned by the reader: valid until journal_reader_close. */
int journal_reader_dir_fd(const journal_reader_t *r);

/* Positions at `seq`. A hint (segment_seq, offset of a frame at or before seq, 0 = none)
 * from the index avoids scanning; a wrong hint is detected and ignored.
 * Returns 0, STELE_ENOTFOUND (seq older than the oldest segment: positioned at the oldest). */
int journal_reader_seek(journal_reader_t *r, uint64_t seq, uint64_t hint_segment_seq,
                        uint64_t hint_offset, stele_error_t *err);

/* Next committed record, without waiting. Returns 0, STELE_EAGAIN (none visible yet),
 * STELE_ERETAINED (retention deleted the segment holding the next record while the reader
 * was behind; err names the records lost and where the journal now starts; a seek goes on),
 * STELE_ECORRUPT (segment, offset and why in err), -errno. With no live writer, the visible
 * end is the last complete batch on disk. */
int journal_reader_next(journal_reader_t *r, journal_record_t *rec, stele_error_t *err);

/* Waits until a record after `after_seq` becomes visible or timeout_ms passes (-1 forever),
 * without busy polling (futex on the LOCK file's page; bounded re-checks if no writer).
 * Returns 0 or STELE_ETIMEDOUT. */
int journal_reader_wait(journal_reader_t *r, uint64_t after_seq, int timeout_ms);

/* Live positions from the LOCK file's page; writer_pid 0 when no writer holds the lock. */
typedef struct journal_live {
    int writer_pid;
    uint64_t visible_seq;
    uint64_t durable_seq;
} journal_live_t;

void journal_reader_live(journal_reader_t *r, journal_live_t *out);

const char *journal_reader_source(const journal_reader_t *r);

/* What a version 2 segment header says for trust (FORMAT.md section 2): the Merkle tree of
 * the records before the segment, and the key epoch in force at its start. */
typedef struct journal_segment_trust {
    merkle_range_t range;
    int is_keyed;
    uint64_t key_epoch;
} journal_segment_trust_t;

/* Reads it from the header of segment first_seq. Returns 0, -ENOENT (no such segment),
 * STELE_ECORRUPT, STELE_EINVAL (a version 1 segment), -errno. */
int journal_reader_segment_trust(journal_reader_t *r, uint64_t first_seq,
                                 journal_segment_trust_t *out, stele_error_t *err);

/* The journal's genesis value (HASH_BYTES) into out; 0, or -ENOENT before any segment was
 * read. */
int journal_reader_genesis(const journal_reader_t *r, uint8_t out[32]);
uint32_t journal_reader_format_version(const journal_reader_t *r);

/* Segment listing for status, verify and index rebuild. */
typedef struct journal_segment_info {
    uint64_t first_seq;
    uint64_t disk_bytes;
    int64_t first_ts_ns; /* 0 when empty */
} journal_segment_info_t;

/* Fills up to `max` segments in seq order; returns how many exist (may exceed max) or -errno. */
int journal_reader_segments(journal_reader_t *r, journal_segment_info_t *out, size_t max,
                            stele_error_t *err);

#endif /* STELE_JOURNAL_H */
