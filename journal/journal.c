/*
 * journal.c: the write path of journal.h: append (check, seal, write a batch), sync,
 * publish, halting on the first failed write or sync, the accessors, close. The writer's
 * state and its threads and locks are described in journal_internal.h; open is
 * journal_open.c, the next segment journal_roll.c, the segment list and retention
 * journal_retention.c. Frames are sealed by record.c; the format is FORMAT.md's.
 *
 * Threads: append_batch, sync and publish are the writer's, one thread at a time under the
 * caller's lock (the engine's I/O lock); the accessors and journal_last_seq any thread.
 * Invariant: once sticky_rc is set no more data is written, and every later append, sync
 * and delete returns STELE_EHALTED naming the first failure.
 */
#include "journal_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "jerr.h"
#include "record.h"

/* Defaults: a 64 MiB segment holds ~200k typical audit events and preallocates in well
 * under a second; 1 MiB records match stele_options_t's default. */
#define JOURNAL_DEFAULT_SEGMENT_BYTES (64ull * 1024 * 1024)
#define JOURNAL_DEFAULT_MAX_RECORD (1024u * 1024u)

const char *
journal_end_name(journal_end_t end)
{
    switch (end) {
    case JOURNAL_END_CLEAN:
        return "clean";
    case JOURNAL_END_TORN_FRAME:
        return "torn frame";
    case JOURNAL_END_BAD_CRC:
        return "bad crc";
    case JOURNAL_END_BAD_LENGTH:
        return "bad length";
    case JOURNAL_END_BAD_SEQ:
        return "wrong seq";
    case JOURNAL_END_TORN_BATCH:
        return "torn batch";
    case JOURNAL_END_SEALED_DAMAGE:
        return "damage before the durable tail";
    }
    return "unknown";
}

void
journal_options_init(journal_options_t *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->segment_bytes = JOURNAL_DEFAULT_SEGMENT_BYTES;
    opts->max_record_bytes = JOURNAL_DEFAULT_MAX_RECORD;
    opts->create_if_missing = 1;
    /* fallocate-only: as fast as zero-filling for append+fdatasync on the measured disk, and
     * it does not write every segment twice (docs/journal.md). */
    opts->zero_fill = JOURNAL_ZERO_FILL_NEVER;
}

int64_t
journal_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

const char *
journal_seg_name(char buf[SEG_NAME_BYTES], uint64_t first_seq)
{
    segment_name(buf, first_seq);
    return buf;
}

int
journal_halt(journal_t *j, const stele_error_t *failure, stele_error_t *err)
{
    if (atomic_load_explicit(&j->sticky_rc, memory_order_acquire) == 0) {
        memcpy(j->sticky_msg, failure->message, sizeof j->sticky_msg);
        atomic_store_explicit(&j->sticky_rc, failure->code, memory_order_release);
    }
    return jerr_copy(err, failure);
}

int
journal_halt_errno(journal_t *j, stele_error_t *err, int rc, const char *hint, const char *what,
                   uint64_t first_seq)
{
    char name[SEG_NAME_BYTES], ebuf[64];
    stele_error_t failure;
    jerr_set(&failure, rc, hint, "could not %s segment %s: %s", what,
             journal_seg_name(name, first_seq), jerr_errno_text(rc, ebuf, sizeof ebuf));
    return journal_halt(j, &failure, err);
}

int
journal_check_halted(journal_t *j, stele_error_t *err)
{
    int rc = atomic_load_explicit(&j->sticky_rc, memory_order_acquire);
    if (!rc)
        return 0;
    return jerr_set(err, STELE_EHALTED, "reopen the journal to run recovery",
                    "journal %s halted: %s", j->dir, j->sticky_msg);
}

void
journal_close_fd(journal_t *j, int fd, const char *what)
{
    int rc = j->io->close(j->io->ctx, fd);
    if (rc)
        journal_defer_error(j, rc, "close", what);
}

void
journal_defer_error(journal_t *j, int rc, const char *what, const char *obj)
{
    pthread_mutex_lock(&j->mu);
    if (!j->deferred.code)
        journal_fail_errno(&j->deferred, rc, what, obj);
    pthread_mutex_unlock(&j->mu);
}

int
journal_fail_errno(stele_error_t *err, int rc, const char *what, const char *obj)
{
    char ebuf[64];
    const char *hint = NULL;
    if (rc == -EACCES || rc == -EROFS || rc == -EPERM)
        hint = "the journal directory must be writable to write; readers need only read access";
    else if (rc == -ELOOP)
        hint = JERR_HINT_LINK;
    return jerr_set(err, rc, hint, "could not %s %s: %s", what, obj,
                    jerr_errno_text(rc, ebuf, sizeof ebuf));
}

/* ---------------------------------------------------------------------------------------
 * Writing
 * --------------------------------------------------------------------------------------- */

/* Checks a batch laid out by journal_frame_prepare before anything is changed; counts its
 * records into *n_records. */
static int
journal_check_batch(const journal_t *j, const uint8_t *buf, size_t len, uint64_t *n_records,
                    stele_error_t *err)
{
    uint64_t expect = atomic_load(&j->last_seq) + 1;
    int64_t prev_ts = j->last_ts_ns;
    uint32_t header = format_frame_header_bytes(j->version);
    size_t off = 0;
    if (len == 0)
        return jerr_set(err, STELE_EINVAL, NULL, "empty batch");
    while (off < len) {
        if (len - off < header || format_load_u32(buf + off + FRAME_OFF_MAGIC) != FRAME_MAGIC ||
            format_load_u32(buf + off + FRAME_OFF_FLAGS) != 0)
            return jerr_set(err, STELE_EINVAL, NULL,
                            "batch byte %zu is not a frame from journal_frame_prepare", off);
        uint32_t payload_len = format_load_u32(buf + off + FRAME_OFF_PAYLOAD_LEN);
        uint64_t seq = format_load_u64(buf + off + FRAME_OFF_SEQ);
        int64_t ts_ns = format_load_i64(buf + off + FRAME_OFF_TS_NS);
        if (payload_len > j->opts.max_record_bytes)
            return jerr_set(err, STELE_ETOOBIG, NULL,
                            "record seq %" PRIu64 " has %u bytes; the limit is %u", seq,
                            payload_len, j->opts.max_record_bytes);
        if (payload_len == 0)
            return jerr_set(err, STELE_EINVAL, NULL, "record seq %" PRIu64 " is empty", seq);
        if (format_frame_bytes(j->version, payload_len) > len - off)
            return jerr_set(err, STELE_EINVAL, NULL, "record seq %" PRIu64 " overruns the batch",
                            seq);
        if (seq != expect)
            return jerr_set(err, STELE_EINVAL, NULL,
                            "batch seq %" PRIu64 " does not follow %" PRIu64, seq, expect - 1);
        if (ts_ns < prev_ts)
            return jerr_set(err, STELE_EINVAL, NULL,
                            "record seq %" PRIu64 " timestamp %" PRId64 " is before %" PRId64, seq,
                            ts_ns, prev_ts);
        if (j->version >= 2 &&
            format_load_u32(buf + off + FRAME_OFF_ORIGIN_KIND) > FRAME_ORIGIN_KIND_MAX)
            return jerr_set(err, STELE_EINVAL, NULL,
                            "record seq %" PRIu64 " has an unknown origin kind", seq);
        prev_ts = ts_ns;
        expect++;
        off += format_frame_bytes(j->version, payload_len);
    }
    /* Room for it, a checkpoint after it and the segment's last checkpoint, when signing. */
    if (len + 2 * journal_seal_reserve(j) > j->opts.segment_bytes - SEG_HEADER_BYTES)
        return jerr_set(err, STELE_ETOOBIG, "raise segment_bytes or commit smaller batches",
                        "batch of %zu bytes does not fit in a %" PRIu64 "-byte segment", len,
                        j->opts.segment_bytes);
    *n_records = expect - 1 - atomic_load(&j->last_seq);
    return 0;
}

/* A sealed batch's effect on the journal, applied only once the batch is written. */
typedef struct sealed_batch {
    uint64_t first_seq;
    uint64_t last_seq;
    int64_t last_ts_ns;
    uint8_t last_hash[HASH_BYTES];
    merkle_range_t range;  /* version 2: the tree after the batch */
    uint64_t first_stored; /* version 2: the stored hashes the batch completed, in */
    size_t n_stored;       /* j->stored */
} sealed_batch_t;

/* Room in j->stored for the stored hashes a batch of n_records completes (at most 2 per
 * record, plus one per level for the carries of the first). */
static int
journal_stored_reserve(journal_t *j, size_t n_records)
{
    size_t want = 2 * n_records + MERKLE_MAX_LEVELS;
    if (want <= j->stored_cap_hashes)
        return 0;
    uint8_t *grown = realloc(j->stored, want * MERKLE_HASH_BYTES);
    if (!grown)
        return -ENOMEM;
    j->stored = grown;
    j->stored_cap_hashes = want;
    return 0;
}

/* Version 2: the record's leaf goes into the tree (its stored hashes into j->stored), and
 * the chain links its leaf hash. */
static int
journal_seal_v2(journal_t *j, uint8_t *frame, uint32_t flags, uint64_t synced, sealed_batch_t *b)
{
    uint32_t payload_len = format_load_u32(frame + FRAME_OFF_PAYLOAD_LEN);
    uint8_t leaf[MERKLE_HASH_BYTES];
    merkle_stored_t done;
    int rc = record_prepared_leaf(j->mhasher, frame, payload_len, leaf);
    if (!rc)
        rc = merkle_range_append(j->mhasher, &b->range, leaf, &done, NULL);
    if (!rc)
        rc = record_seal_v2(frame, b->last_hash, leaf, flags, synced, j->hasher, b->last_hash);
    if (rc)
        return rc;
    if (b->n_stored == 0)
        b->first_stored = done.first_index;
    memcpy(j->stored + b->n_stored * MERKLE_HASH_BYTES, done.hash,
           (size_t)done.count * MERKLE_HASH_BYTES);
    b->n_stored += done.count;
    return 0;
}

/* Seals every frame in place: hashes, BATCH_END on the last, synced_seq, CRC. */
static int
journal_seal_batch(journal_t *j, uint8_t *buf, size_t len, sealed_batch_t *out, stele_error_t *err)
{
    memcpy(out->last_hash, j->last_hash, HASH_BYTES);
    uint64_t synced = atomic_load(&j->durable_seq);
    out->first_seq = format_load_u64(buf + FRAME_OFF_SEQ);
    out->last_seq = out->first_seq;
    out->last_ts_ns = j->last_ts_ns;
    out->n_stored = 0;
    out->first_stored = 0;
    if (j->version >= 2) {
        out->range = j->range;
        size_t max_records = len / FRAME_HEADER_BYTES_V2 + 1;
        if (journal_stored_reserve(j, max_records))
            return jerr_set(err, -ENOMEM, NULL, "could not hash records: out of memory");
    }
    for (size_t off = 0; off < len;) {
        uint32_t payload_len = format_load_u32(buf + off + FRAME_OFF_PAYLOAD_LEN);
        size_t frame_bytes = (size_t)format_frame_bytes(j->version, payload_len);
        uint32_t flags = off + frame_bytes == len ? FRAME_FLAG_BATCH_END : 0;
        int rc = j->version >= 2 ? journal_seal_v2(j, buf + off, flags, synced, out)
                                 : record_seal(buf + off, out->last_hash, flags, synced, j->hasher,
                                               out->last_hash);
        if (rc)
            return jerr_set(err, rc, NULL, "could not hash record: out of memory");
        out->last_seq = format_load_u64(buf + off + FRAME_OFF_SEQ);
        out->last_ts_ns = format_load_i64(buf + off + FRAME_OFF_TS_NS);
        off += frame_bytes;
    }
    return 0;
}

/* The pieces in one write at write_off: one pwritev, or with direct writes the whole blocks
 * they touch. */
int
journal_write_at_end(journal_t *j, const struct iovec *parts, int n_parts)
{
    if (j->direct.fd >= 0) {
        int rc = direct_write(&j->direct, j->io, j->active_fd, parts, n_parts, j->write_off);
        if (rc != -EINVAL)
            return rc;
        /* A file system that opens files with O_DIRECT but refuses the writes (EINVAL,
         * before any byte is written; a FUSE file system may do so): writes go buffered
         * from now on, this one included. */
        rc = direct_close(&j->direct, j->io);
        if (rc)
            journal_defer_error(j, rc, "close", "the active segment");
        j->opts.direct_writes = 0;
    }
    return j->io->pwritev(j->io->ctx, j->active_fd, parts, n_parts, (off_t)j->write_off);
}

static void
journal_fill_batch_info(const journal_t *j, const uint8_t *buf, const sealed_batch_t *b, int rolled,
                        journal_batch_info_t *info)
{
    info->first_seq = b->first_seq;
    info->last_seq = b->last_seq;
    info->first_ts_ns = format_load_i64(buf + FRAME_OFF_TS_NS);
    info->segment_seq = j->active_first_seq;
    info->offset = j->write_off;
    info->rolled = rolled;
    info->first_stored = b->first_stored;
    info->n_stored = b->n_stored;
    info->stored = b->n_stored ? j->stored : NULL;
}

void
journal_advance_bytes(journal_t *j, size_t len)
{
    j->write_off += len;
    j->bytes_since_sync += len;
    journal_maybe_want_prepared(j);
}

/* The batch is written: the journal continues after it. */
static void
journal_advance(journal_t *j, size_t len, const sealed_batch_t *b)
{
    journal_advance_bytes(j, len);
    j->last_ts_ns = b->last_ts_ns;
    memcpy(j->last_hash, b->last_hash, HASH_BYTES);
    if (j->version >= 2)
        j->range = b->range;
    atomic_store_explicit(&j->last_seq, b->last_seq, memory_order_release);
}

/* Fails the write of the batch at write_off: the journal halts. */
static int
journal_write_failed(journal_t *j, int rc, stele_error_t *err)
{
    char name[SEG_NAME_BYTES], ebuf[64];
    stele_error_t failure;
    jerr_set(&failure, rc, NULL, "could not write segment %s at offset %" PRIu64 ": %s",
             journal_seg_name(name, j->active_first_seq), j->write_off,
             jerr_errno_text(rc, ebuf, sizeof ebuf));
    return journal_halt(j, &failure, err);
}

/* Seals the batch (and, with_checkpoint, builds the checkpoint that follows it: a batch of
 * its own, so the records end theirs as always) and writes both with one write. */
static int
journal_seal_and_write(journal_t *j, uint8_t *buf, size_t len, int with_checkpoint,
                       meta_reason_t reason, sealed_batch_t *sealed, stele_error_t *err)
{
    int rc = journal_seal_batch(j, buf, len, sealed, err);
    if (!rc && with_checkpoint)
        rc = journal_seal_build(j, reason, 0, &sealed->range, sealed->last_ts_ns,
                                FRAME_FLAG_BATCH_END, err);
    if (rc)
        return rc;
    struct iovec parts[2] = {{.iov_base = buf, .iov_len = len},
                             {.iov_base = j->seal.frame, .iov_len = j->seal.frame_len}};
    rc = journal_write_at_end(j, parts, with_checkpoint ? 2 : 1);
    return rc ? journal_write_failed(j, rc, err) : 0;
}

int
journal_append_batch(journal_t *j, uint8_t *buf, size_t len, journal_batch_info_t *info,
                     stele_error_t *err)
{
    if (!j || !buf)
        return jerr_set(err, STELE_EINVAL, NULL,
                        "journal_append_batch needs a journal and a batch");
    uint64_t n_records = 0;
    int rc = journal_check_halted(j, err);
    if (!rc)
        rc = journal_check_batch(j, buf, len, &n_records, err);
    if (rc)
        return rc;
    meta_reason_t reason = META_REASON_RECORDS;
    int with_checkpoint = journal_seal_due(j, n_records, &reason);
    size_t need = len + (with_checkpoint ? JOURNAL_META_FRAME_MAX : 0) + journal_seal_reserve(j);
    int rolled = j->write_off + need > j->active_bytes;
    if (rolled) {
        rc = journal_roll(j, err);
        if (rc)
            return rc;
    }
    sealed_batch_t sealed;
    rc = journal_seal_and_write(j, buf, len, with_checkpoint, reason, &sealed, err);
    if (rc)
        return rc;
    if (info)
        journal_fill_batch_info(j, buf, &sealed, rolled, info);
    journal_advance(j, len, &sealed);
    if (with_checkpoint) {
        journal_advance_bytes(j, j->seal.frame_len);
        journal_seal_written(j, reason, 0, sealed.last_seq);
    } else if (j->seal.is_signing) {
        j->seal.records_since_statement += n_records;
    }
    return 0;
}

/* Writes the checkpoint built in j->seal.frame as a batch of its own. */
static int
journal_write_statement(journal_t *j, stele_error_t *err)
{
    if (j->write_off + j->seal.frame_len + journal_seal_reserve(j) > j->active_bytes) {
        int rc = journal_roll(j, err);
        if (rc)
            return rc;
    }
    struct iovec part = {.iov_base = j->seal.frame, .iov_len = j->seal.frame_len};
    int rc = journal_write_at_end(j, &part, 1);
    if (rc)
        return journal_write_failed(j, rc, err);
    journal_advance_bytes(j, j->seal.frame_len);
    return 0;
}

int
journal_checkpoint(journal_t *j, journal_checkpoint_kind_t kind, uint64_t first_seq,
                   stele_error_t *err)
{
    if (!j)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_checkpoint needs a journal");
    int rc = journal_check_halted(j, err);
    if (rc || !j->seal.is_signing)
        return rc;
    meta_reason_t reason =
        kind == JOURNAL_CHECKPOINT_RETENTION ? META_REASON_RETENTION : META_REASON_INTERVAL;
    if (reason == META_REASON_RETENTION && first_seq == 0)
        return jerr_set(err, STELE_EINVAL, NULL, "a retention checkpoint needs a first seq");
    rc = journal_seal_build(j, reason, first_seq, &j->range, j->last_ts_ns, FRAME_FLAG_BATCH_END,
                            err);
    if (!rc)
        rc = journal_write_statement(j, err);
    if (!rc)
        journal_seal_written(j, reason, first_seq, atomic_load(&j->last_seq));
    return rc;
}

/* After a sync: the bytes it carried, into a moving average (1/8 weight) the preparer
 * reads (journal_zero_fill_now). */
static void
journal_note_sync_bytes(journal_t *j)
{
    uint64_t avg = atomic_load_explicit(&j->sync_bytes_avg, memory_order_relaxed);
    avg = avg ? (avg * 7 + j->bytes_since_sync) / 8 : j->bytes_since_sync;
    atomic_store_explicit(&j->sync_bytes_avg, avg, memory_order_relaxed);
    j->bytes_since_sync = 0;
}

int
journal_sync(journal_t *j, stele_error_t *err)
{
    if (!j)
        return jerr_set(err, STELE_EINVAL, NULL, "journal_sync needs a journal");
    int rc = journal_check_halted(j, err);
    if (rc)
        return rc;
    uint64_t written = atomic_load(&j->last_seq);
    rc = j->io->fdatasync(j->io->ctx, j->active_fd);
    /* Never retried: after a failed fdatasync the kernel may have dropped the dirty pages
     * and a second call could report success for data that is gone. */
    if (rc)
        return journal_halt_errno(j, err, rc, JERR_HINT_VERIFY, "sync", j->active_first_seq);
    atomic_fetch_add_explicit(&j->syncs, 1, memory_order_relaxed);
    atomic_store_explicit(&j->durable_seq, written, memory_order_release);
    journal_note_sync_bytes(j);
    journal_seal_synced(j);
    return 0;
}

void
journal_publish(journal_t *j, uint64_t visible_seq, uint64_t durable_seq)
{
    if (j && j->lock_page)
        lockfile_publish(j->lock_page, visible_seq, durable_seq);
}

uint64_t
journal_last_seq(const journal_t *j)
{
    return j ? atomic_load_explicit(&((journal_t *)j)->last_seq, memory_order_acquire) : 0;
}

uint64_t
journal_durable_seq(const journal_t *j)
{
    return j ? atomic_load_explicit(&((journal_t *)j)->durable_seq, memory_order_acquire) : 0;
}

size_t
journal_batch_fit_bytes(const journal_t *j, const uint8_t *buf, size_t len)
{
    /* Room for a checkpoint is kept whether or not this batch carries one: a prefix a few
     * hundred bytes short of the end costs nothing, a prefix that rolls after all would. */
    size_t reserve = journal_seal_reserve(j) + (j->seal.is_signing ? JOURNAL_META_FRAME_MAX : 0);
    uint64_t room =
        j->active_bytes > j->write_off + reserve ? j->active_bytes - j->write_off - reserve : 0;
    if (len <= room)
        return len;
    uint32_t header = format_frame_header_bytes(j->version);
    size_t off = 0;
    while (len - off >= header) {
        size_t frame =
            format_frame_bytes(j->version, format_load_u32(buf + off + FRAME_OFF_PAYLOAD_LEN));
        if (frame > len - off || off + frame > room)
            break;
        off += frame;
    }
    return off;
}

void
journal_active_position(const journal_t *j, journal_active_t *out)
{
    *out = j ? (journal_active_t){j->active_first_seq, j->write_off, j->active_bytes}
             : (journal_active_t){0, 0, 0};
}

uint64_t
journal_segment_bytes(const journal_t *j)
{
    return j ? j->opts.segment_bytes : 0;
}

const char *
journal_source(const journal_t *j)
{
    return j ? j->source : "";
}

uint32_t
journal_version(const journal_t *j)
{
    return j ? j->version : 0;
}

int
journal_clock_note_load(const journal_t *j, journal_clock_note_t *note)
{
    if (!j || !j->lock_page)
        return STELE_ENOTFOUND;
    return lockfile_clock_note_load(j->lock_page, note);
}

void
journal_clock_note_store(journal_t *j, const journal_clock_note_t *note)
{
    if (j && j->lock_page)
        lockfile_clock_note_store(j->lock_page, note);
}

unsigned
journal_file_mode(const journal_t *j)
{
    return j ? j->file_mode : 0;
}

/* ---------------------------------------------------------------------------------------
 * Close
 * --------------------------------------------------------------------------------------- */

int
journal_close(journal_t *j, stele_error_t *err)
{
    if (!j)
        return 0;
    journal_preparer_stop(j);
    int rc = atomic_load(&j->sticky_rc);
    if (rc) {
        jerr_set(err, rc, NULL, "journal %s halted: %s", j->dir ? j->dir : "", j->sticky_msg);
    } else if (j->is_open) {
        rc = journal_seal_close(j, err);
        if (!rc)
            rc = journal_sync(j, err);
        if (!rc) {
            uint64_t last = atomic_load(&j->last_seq);
            lockfile_publish(j->lock_page, last, last);
        }
        if (!rc && j->prep_rc) {
            /* Every record is in and the next open prepares again, so this is no failure;
             * but a full disk must not go unnoticed until the roll that needs the space. */
            char ebuf[64];
            jerr_set(err, 0,
                     "free space on the journal's file system before the active "
                     "segment fills",
                     "could not prepare the next segment of %s: %s", j->dir,
                     jerr_errno_text(j->prep_rc, ebuf, sizeof ebuf));
        }
    }
    int direct_rc = direct_close(&j->direct, j->io);
    if (direct_rc)
        journal_defer_error(j, direct_rc, "close", "the active segment");
    direct_free(&j->direct);
    if (j->active_fd >= 0)
        journal_close_fd(j, j->active_fd, "the active segment");
    if (!rc && j->is_open && j->deferred.code)
        rc = jerr_copy(err, &j->deferred);
    lockfile_close_writer(j->lock_fd, j->lock_page);
    if (j->dir_fd >= 0)
        journal_close_fd(j, j->dir_fd, "the journal directory");
    chain_hasher_free(j->hasher);
    merkle_hasher_free(j->mhasher);
    free(j->stored);
    journal_seal_free(j);
    pthread_cond_destroy(&j->prep_cv);
    pthread_mutex_destroy(&j->retention_mu);
    pthread_mutex_destroy(&j->mu);
    free(j->seg_seqs);
    free(j->dir);
    free(j);
    return rc;
}
