/*
 * journal_internal.h: the writer's state (struct journal) and the calls between the files
 * that implement journal.h's writer side. Not part of the journal's API: only journal*.c
 * include it.
 *
 *   journal.c           the write path (append, sync, publish), halting, close
 *   journal_open.c      open: validate options, create a new journal or recover an old one
 *   journal_roll.c      the next segment: the preparer thread and the roll that installs it
 *   journal_retention.c the segment list: adding, deleting old segments, disk use (stats)
 *
 * Threads and what protects what:
 *  - One thread at a time writes: append_batch, sync, publish and the roll run under a lock
 *    the caller holds (the engine's I/O lock, taken by its committer or by a leading waiter;
 *    engine/README.md). That lock also orders the fields under "writer" between the threads
 *    that take turns; nobody else touches them. close comes after the last writer is done.
 *  - last_seq, durable_seq, syncs and sticky_rc are atomics written only by the writer, so
 *    stats and other threads read them without a lock.
 *  - mu protects the segment list (seg_seqs), the preparer's hand-off fields and the
 *    deferred error; it is never held across I/O. retention_mu serialises
 *    journal_delete_before calls.
 * Invariants: write_off is the end of the last complete batch in the active segment and
 * everything past it is zero; a segment file with a final name has a durable header; once
 * sticky_rc is set no more data is written.
 */
#ifndef STELE_JOURNAL_INTERNAL_H
#define STELE_JOURNAL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "chain.h"
#include "direct.h"
#include "format.h"
#include "journal.h"
#include "jdir.h"
#include "lockfile.h"
#include "merkle.h"
#include "meta.h"
#include "segment.h"

/* Modes of a new journal's files and directory when the options name none (FORMAT.md 1). */
#define JOURNAL_NEW_FILE_MODE 0600u
#define JOURNAL_NEW_DIR_MODE 0700u

/* Signing state (journal_seal.c). Everything but the atomics is the writer's, under the
 * caller's lock; the key rotation's prepare and finish steps read epoch and key_path only,
 * which change only in its commit step. */
typedef struct journal_seal {
    int is_signing;
    char *key_path;
    note_signer_t signer; /* the current epoch's key: secret */
    uint64_t epoch;
    char origin[CHECKPOINT_ORIGIN_MAX_BYTES + 1];
    uint64_t records_since_statement;
    int64_t last_time_ns; /* of the newest statement: a new one's time never goes back */
    uint8_t *frame;       /* a meta frame being built: JOURNAL_META_FRAME_MAX bytes */
    size_t frame_len;
    uint64_t keys_bytes;        /* where the next KEYS statement goes */
    uint64_t retention_written; /* first seq of the newest retention checkpoint written */
    uint64_t key_file_epoch;    /* the key file's epoch line, read at open */
    /* The key epoch in force at the journal's end (FORMAT.md 11.4): found by recovery, moved
     * by each key statement written. Once the open has written the statement the journal
     * lacked, it is always `epoch`; until then a roll signs nothing (journal_seal_roll). */
    int has_key_end;
    uint64_t key_epoch_end;
    /* -- atomics, written by the writer -- */
    _Atomic uint64_t due_mono_ns;       /* the next interval checkpoint */
    _Atomic int64_t epoch_began_ns;     /* wall clock of the statement that began the epoch */
    _Atomic uint64_t retention_durable; /* retention_written, once a sync made it durable */
    _Atomic uint64_t checkpoints;       /* statements written */
    _Atomic uint64_t sealed_seq;        /* tree size of the newest */
    _Atomic uint64_t epoch_now;         /* epoch, for stats */
} journal_seal_t;

struct journal {
    char *dir;  /* as given, for messages: files are reached through dir_fd */
    int dir_fd; /* the journal directory, opened once (jdir.h); -1 until then */
    const journal_io_t *io;
    journal_options_t opts; /* opts.source is not kept: see source[] */
    char source[SEG_SOURCE_BYTES];
    uint8_t genesis[HASH_BYTES];
    uint32_t version;   /* the format version written: fixed at open (that of the journal) */
    unsigned file_mode; /* what new files get: opts.file_mode, else the journal's own */
    int lock_fd;
    lockfile_page_t *lock_page;

    /* -- writer: one thread at a time, under the caller's lock -- */
    chain_hasher_t *hasher;
    merkle_hasher_t *mhasher; /* version 2: leaf and node hashes */
    /* Version 2: the Merkle tree of records 1 .. last_seq as its compact range, and the stored
     * hashes the last batch completed (journal_batch_info_t hands them to the engine). */
    merkle_range_t range;
    uint8_t *stored;
    size_t stored_cap_hashes;
    journal_seal_t seal;
    int active_fd;
    direct_writer_t direct; /* the active segment's direct writes, when on (fd >= 0) */
    uint64_t active_first_seq;
    uint64_t active_bytes; /* size of the active segment file */
    uint64_t write_off;
    uint8_t last_hash[HASH_BYTES];
    int64_t last_ts_ns;
    uint64_t bytes_since_sync;
    int has_asked_prepare; /* prep_wanted set for the active segment */

    /* -- atomics, one writer each (the writer) -- */
    _Atomic uint64_t last_seq;
    _Atomic uint64_t durable_seq;
    _Atomic uint64_t syncs;
    _Atomic uint64_t sync_bytes_avg; /* bytes per fdatasync, moving average; preparer reads */
    _Atomic int sticky_rc;           /* 0, or the error that halted the journal */
    char sticky_msg[STELE_ERROR_MESSAGE_BYTES]; /* written before sticky_rc is stored */

    /* -- protected by mu; prep_cv fires when prep_fd/prep_rc change or on stop -- */
    pthread_mutex_t mu;
    pthread_cond_t prep_cv;
    uint64_t *seg_seqs; /* first seqs, ascending; the last is the active segment */
    size_t n_segs, cap_segs;
    int prep_fd; /* a prepared segment ready to install, or -1 */
    int prep_rc; /* the last preparation's failure: retried by the roll that needs it */
    int prep_stop;
    int prep_installing; /* the writer holds prepared.tmp's name until installed */
    int prep_wanted;     /* the active segment is far enough along to prepare its successor */
    int prep_started;
    pthread_t prep_thread;
    /* The first failure that did not endanger the log (a close that failed after its data
     * was synced), reported by journal_close; code 0 when none. */
    stele_error_t deferred;

    /* -- serialises journal_delete_before -- */
    pthread_mutex_t retention_mu;
    int is_open; /* open succeeded: close syncs and publishes */
};

/* -- journal.c ------------------------------------------------------------------------- */

/* Wall-clock time in ns since the Unix epoch, for segment headers. */
int64_t journal_now_ns(void);
/* segment_name into buf, returned for use inside a message. */
const char *journal_seg_name(char buf[SEG_NAME_BYTES], uint64_t first_seq);
/* Halts the journal on "could not <what> segment <first_seq's name>: <errno text>": the
 * first failure is kept (every later append, sync and delete returns STELE_EHALTED naming
 * it); err gets this one. Returns rc. */
int journal_halt_errno(journal_t *j, stele_error_t *err, int rc, const char *hint, const char *what,
                       uint64_t first_seq);
/* Halts the journal with `failure` if it is the first (later calls report STELE_EHALTED
 * naming it) and hands it to the caller in err. Returns failure's code. */
int journal_halt(journal_t *j, const stele_error_t *failure, stele_error_t *err);
/* 0, or STELE_EHALTED naming the failure that halted the journal. */
int journal_check_halted(journal_t *j, stele_error_t *err);
/* Remembers a failure that did not endanger the log ("could not <what> <obj>: <errno
 * text>"), for journal_close to report. Any thread. */
void journal_defer_error(journal_t *j, int rc, const char *what, const char *obj);
/* Closes fd; a failure is deferred (the data it held was synced already, so the log is not
 * at risk, but no failed call goes unreported). */
void journal_close_fd(journal_t *j, int fd, const char *what);
/* "could not <what> <obj>: <errno text>" into err, with a hint when the cause is access
 * rights. Returns rc. */
int journal_fail_errno(stele_error_t *err, int rc, const char *what, const char *obj);

/* -- journal_roll.c -------------------------------------------------------------------- */

/* Makes prepared.tmp, preallocated; on failure the half-made file's descriptor is closed. */
int journal_prepare_one(journal_t *j, int *fd_out);
/* Starts the preparer thread (nothing with prepare_inline). Returns 0 or -errno. */
int journal_preparer_start(journal_t *j);
/* Stops and joins the preparer and closes a segment it prepared and nobody took. */
void journal_preparer_stop(journal_t *j);
/* Asks for the next segment once the active one is a quarter full (writer). */
void journal_maybe_want_prepared(journal_t *j);
/* Clears a failed preparation so the preparer tries again (space was freed). Any thread. */
void journal_retry_prepare(journal_t *j);
/* The header of the segment that continues the log at first_seq (the writer's last hash
 * and timestamp; the genesis value for a new journal's first segment). */
void journal_next_header(const journal_t *j, uint64_t first_seq, segment_header_t *h);
/* Makes the just-installed segment fd, starting at first_seq, the one batches go to. */
void journal_activate(journal_t *j, int fd, uint64_t first_seq);
/* Points direct writes at the active segment when the options ask for them (writer). */
void journal_direct_attach(journal_t *j);
/* Syncs and seals the active segment and makes the prepared one active (writer). A failure
 * halts the journal. */
int journal_roll(journal_t *j, stele_error_t *err);

/* -- journal_seal.c -------------------------------------------------------------------- */

/* At open, before anything is created or changed: reads the signer key file (if any) into
 * seal.signer and seal.key_file_epoch; a new journal (is_new) needs an epoch 0 key. */
int journal_seal_load_key(journal_t *j, int is_new, stele_error_t *err);
/* At open, after recovery: reads KEYS and <key>.next, completes or undoes an
 * interrupted rotation (FORMAT.md 11.4, R1-R4), starts the key chain of a journal signed for
 * the first time, and gets ready to sign. Without a key: refuses a journal that has KEYS. */
int journal_seal_open(journal_t *j, stele_error_t *err);
/* Frees what journal_seal_open made; wipes the key. */
void journal_seal_free(journal_t *j);
/* Whether a batch of n_records should be followed by a checkpoint, and why (*reason:
 * records or interval). */
int journal_seal_due(const journal_t *j, uint64_t n_records, meta_reason_t *reason);
/* Room a batch must leave in its segment: JOURNAL_META_FRAME_MAX while signing, else 0. */
size_t journal_seal_reserve(const journal_t *j);
/* Builds into j->seal.frame the checkpoint of `range` (size and root), with the ts of the
 * record before it and flags (BATCH_END or 0; META is added). Returns 0 or an error (out of
 * memory, signing). */
int journal_seal_build(journal_t *j, meta_reason_t reason, uint64_t first_seq,
                       const merkle_range_t *range, int64_t ts_ns, uint32_t flags,
                       stele_error_t *err);
/* After j->seal.frame was written: the cadence starts again. */
void journal_seal_written(journal_t *j, meta_reason_t reason, uint64_t first_seq,
                          uint64_t tree_size);
/* Writes the checkpoint of the last record as the last frame of the active segment, when it
 * fits (journal_roll calls it before sealing the segment). A failure halts the journal. */
int journal_seal_roll(journal_t *j, stele_error_t *err);
/* After a successful fdatasync: what was written is durable (retention). */
void journal_seal_synced(journal_t *j);
/* At a clean close: the close checkpoint. */
int journal_seal_close(journal_t *j, stele_error_t *err);

/* -- journal.c (for journal_seal.c) ----------------------------------------------------- */

/* Writes bytes at write_off of the active segment as one write (direct or buffered); the
 * caller halts the journal on failure. */
int journal_write_at_end(journal_t *j, const struct iovec *parts, int n_parts);
/* Moves write_off past `len` written bytes (and asks for the next segment in time). */
void journal_advance_bytes(journal_t *j, size_t len);

/* -- journal_retention.c --------------------------------------------------------------- */

/* Appends a segment to the list (under mu). Returns 0 or -ENOMEM. */
int journal_segs_push(journal_t *j, uint64_t first_seq);

#endif /* STELE_JOURNAL_INTERNAL_H */
