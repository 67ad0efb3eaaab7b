/*
 * journal_seal.c: a signed journal's writer side (FORMAT.md section 11): the key and its
 * epoch, checkpoints at their cadence (records, interval, roll, close, retention), the key
 * chain's statements in KEYS and in the journal, key rotation, and at open the completion
 * or undoing of an interrupted rotation. Not here: KEYS and key file I/O (keychain.c),
 * statement texts (meta.c), writing batches (journal.c).
 *
 * Threads: the writer's, under the caller's lock (journal_internal.h), except the
 * rotation's prepare and finish steps, which one thread runs outside it (they read epoch,
 * the key's name and key_path, which change only in the commit step that thread also
 * runs), and the atomics of journal_seal_t, read by any thread.
 * Invariants: a statement's time never goes back; KEYS holds every key statement before the
 * journal does; records a statement covers are durable before it is in KEYS; the key file
 * holds the current epoch's key, or the one before it while <key>.next holds the current;
 * nothing in the journal is signed by a key before the key statement that puts it in force
 * (has_key_end and key_epoch_end: the epoch in force at the journal's end).
 */
#include "journal_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jerr.h"
#include "keychain.h"
#include "record.h"
#include "sigkey.h"

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ll
/* After a rotation could not be prepared, the next attempt waits this long. */
#define SEAL_ROTATION_RETRY_NS (60 * NS_PER_S)

static uint64_t
seal_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int
journal_is_signing(const journal_t *j)
{
    return j && j->seal.is_signing;
}

uint64_t
journal_checkpoint_due_ns(const journal_t *j)
{
    return journal_is_signing(j) ? atomic_load(&((journal_t *)j)->seal.due_mono_ns) : 0;
}

size_t
journal_seal_reserve(const journal_t *j)
{
    return j->seal.is_signing ? JOURNAL_META_FRAME_MAX : 0;
}

int
journal_seal_due(const journal_t *j, uint64_t n_records, meta_reason_t *reason)
{
    if (!j->seal.is_signing)
        return 0;
    if (j->seal.records_since_statement + n_records >= j->opts.checkpoint_records) {
        *reason = META_REASON_RECORDS;
        return 1;
    }
    *reason = META_REASON_INTERVAL;
    return seal_mono_ns() >= atomic_load(&((journal_t *)j)->seal.due_mono_ns);
}

/* The next interval checkpoint is due checkpoint_interval_ms from now. */
static void
seal_schedule(journal_t *j)
{
    atomic_store(&j->seal.due_mono_ns,
                 seal_mono_ns() + (uint64_t)j->opts.checkpoint_interval_ms * NS_PER_MS);
}

/* A statement of the tree `range` with the current epoch, now (never before the last one). */
static int
seal_statement(journal_t *j, meta_reason_t reason, const merkle_range_t *range, meta_statement_t *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->origin, sizeof m->origin, "%s", j->seal.origin);
    m->size = range->size;
    m->epoch = j->seal.epoch;
    m->time_ns = journal_now_ns();
    if (m->time_ns < j->seal.last_time_ns)
        m->time_ns = j->seal.last_time_ns;
    m->reason = reason;
    return merkle_range_root(j->mhasher, range, m->root);
}

/* Signs m with s and lays its meta frame out in j->seal.frame (seq m->size, ts_ns that of
 * the record before it, synced_seq as given). */
static int
seal_frame(journal_t *j, const note_signer_t *s, const meta_statement_t *m, int64_t ts_ns,
           uint32_t flags, uint64_t synced_seq, stele_error_t *err)
{
    char *note = NULL;
    size_t note_len = 0;
    int rc = meta_sign(s, m, &note, &note_len, err);
    if (rc)
        return rc;
    if (1 + note_len > META_PAYLOAD_MAX_BYTES) {
        free(note);
        return jerr_set(err, STELE_EINVAL, NULL, "signed statement of %zu bytes is too long",
                        note_len);
    }
    record_meta_build(j->seal.frame, meta_type_of(m->reason), note, note_len, m->size, ts_ns, flags,
                      synced_seq);
    j->seal.frame_len = record_meta_bytes(note_len);
    j->seal.last_time_ns = m->time_ns;
    free(note);
    return 0;
}

int
journal_seal_build(journal_t *j, meta_reason_t reason, uint64_t first_seq,
                   const merkle_range_t *range, int64_t ts_ns, uint32_t flags, stele_error_t *err)
{
    meta_statement_t m;
    if (seal_statement(j, reason, range, &m))
        return jerr_set(err, -ENOMEM, NULL, "could not hash the merkle root: out of memory");
    m.first_seq = first_seq;
    return seal_frame(j, &j->seal.signer, &m, ts_ns, flags, atomic_load(&j->durable_seq), err);
}

void
journal_seal_written(journal_t *j, meta_reason_t reason, uint64_t first_seq, uint64_t tree_size)
{
    j->seal.records_since_statement = 0;
    seal_schedule(j);
    if (reason == META_REASON_RETENTION && first_seq > j->seal.retention_written)
        j->seal.retention_written = first_seq;
    atomic_fetch_add(&j->seal.checkpoints, 1);
    atomic_store(&j->seal.sealed_seq, tree_size);
}

void
journal_seal_synced(journal_t *j)
{
    if (j->seal.retention_written > atomic_load(&j->seal.retention_durable))
        atomic_store(&j->seal.retention_durable, j->seal.retention_written);
}

/* Writes j->seal.frame at write_off when it fits in the segment (the room every segment
 * keeps for its last checkpoint). Returns 0 (also when it did not fit) or a halting error. */
static int
seal_write_last(journal_t *j, meta_reason_t reason, stele_error_t *err)
{
    if (j->write_off + j->seal.frame_len > j->active_bytes)
        return 0; /* the key came after the room was used: the next segment is sealed */
    struct iovec part = {.iov_base = j->seal.frame, .iov_len = j->seal.frame_len};
    int rc = journal_write_at_end(j, &part, 1);
    if (rc)
        return journal_halt_errno(j, err, rc, NULL, "write a checkpoint into", j->active_first_seq);
    journal_advance_bytes(j, j->seal.frame_len);
    journal_seal_written(j, reason, 0, atomic_load(&j->last_seq));
    return 0;
}

int
journal_seal_roll(journal_t *j, stele_error_t *err)
{
    /* Only the key of the epoch in force here signs. At open, before the key statement the
     * journal lacks is written (R1, R2), the key in hand is that statement's, and the key
     * in force may be gone: no checkpoint then; the statement, at the start of the next
     * segment, seals the same tree. */
    if (!j->seal.is_signing || !j->seal.has_key_end || j->seal.key_epoch_end != j->seal.epoch)
        return 0;
    int rc = journal_seal_build(j, META_REASON_ROLL, 0, &j->range, j->last_ts_ns,
                                FRAME_FLAG_BATCH_END, err);
    return rc ? rc : seal_write_last(j, META_REASON_ROLL, err);
}

int
journal_seal_close(journal_t *j, stele_error_t *err)
{
    if (!j->seal.is_signing)
        return 0;
    int rc = journal_seal_build(j, META_REASON_CLOSE, 0, &j->range, j->last_ts_ns,
                                FRAME_FLAG_BATCH_END, err);
    return rc ? rc : seal_write_last(j, META_REASON_CLOSE, err);
}

/* ---- key statements ---- */

/* Appends the key statement in j->seal.frame (built with synced_seq 0) to KEYS, durably. A
 * failure halts the journal: KEYS may hold part of it. */
static int
seal_append_keys(journal_t *j, stele_error_t *err)
{
    stele_error_t why = {0};
    int rc = keychain_append(j->io, j->dir_fd, j->file_mode, j->seal.keys_bytes, j->seal.frame,
                             j->seal.frame_len, &why);
    if (rc)
        return journal_halt(j, &why, err);
    j->seal.keys_bytes += j->seal.frame_len;
    return 0;
}

/* Appends the key statement of key_epoch (payload[0, len) of KEYS) to the journal as a meta
 * frame of its own and syncs it: from there on key_epoch is in force. A roll it needs comes
 * first, as the roll's checkpoint is built in j->seal.frame too. */
static int
seal_journal_key_statement(journal_t *j, const uint8_t *payload, size_t len, uint64_t key_epoch,
                           stele_error_t *err)
{
    size_t frame_len = record_meta_bytes(len - 1);
    if (j->write_off + frame_len + journal_seal_reserve(j) > j->active_bytes) {
        int rc = journal_roll(j, err);
        if (rc)
            return rc;
    }
    uint64_t size = atomic_load(&j->last_seq);
    record_meta_build(j->seal.frame, payload[0], (const char *)payload + 1, len - 1, size,
                      j->last_ts_ns, FRAME_FLAG_BATCH_END, atomic_load(&j->durable_seq));
    j->seal.frame_len = frame_len;
    struct iovec part = {.iov_base = j->seal.frame, .iov_len = j->seal.frame_len};
    int rc = journal_write_at_end(j, &part, 1);
    if (rc)
        return journal_halt_errno(j, err, rc, NULL, "write a key statement into",
                                  j->active_first_seq);
    journal_advance_bytes(j, j->seal.frame_len);
    j->seal.has_key_end = 1;
    j->seal.key_epoch_end = key_epoch;
    journal_seal_written(j, META_REASON_ROTATE, 0, size);
    return journal_sync(j, err);
}

/* Signs m with s, appends it to KEYS, then to the journal (FORMAT.md 11.4 steps 2 and 3). */
static int
seal_key_statement(journal_t *j, const note_signer_t *s, const meta_statement_t *m,
                   stele_error_t *err)
{
    int rc = seal_frame(j, s, m, j->last_ts_ns, FRAME_FLAG_BATCH_END, 0, err);
    if (!rc)
        rc = seal_append_keys(j, err);
    if (rc)
        return rc;
    uint8_t *payload = malloc(j->seal.frame_len);
    if (!payload)
        return jerr_set(err, -ENOMEM, NULL, "out of memory writing a key statement");
    uint32_t payload_len = format_load_u32(j->seal.frame + FRAME_OFF_PAYLOAD_LEN);
    memcpy(payload, j->seal.frame + FRAME_HEADER_BYTES_V2, payload_len);
    rc = seal_journal_key_statement(j, payload, payload_len, m->key_epoch, err);
    free(payload);
    return rc;
}

/* ---- open ---- */

static int seal_refuse(stele_error_t *err, int code, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
seal_refuse(stele_error_t *err, int code, const char *hint, const char *fmt, ...)
{
    char msg[STELE_ERROR_MESSAGE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return jerr_set(err, code, hint, "%s", msg);
}

/* R1: a journal signed for the first time starts its key chain with epoch 0. */
static int
seal_start_chain(journal_t *j, uint64_t key_file_epoch, stele_error_t *err)
{
    if (j->seal.has_key_end)
        return seal_refuse(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                           "journal %s holds key statements but no KEYS file", j->dir);
    if (key_file_epoch != 0)
        return seal_refuse(err, STELE_ECONFIG, "make a new key with \"stele keygen\"",
                           "key file %s is epoch %" PRIu64 "; a journal's first key is epoch 0",
                           j->seal.key_path, key_file_epoch);
    meta_statement_t m;
    if (seal_statement(j, META_REASON_START, &j->range, &m))
        return jerr_set(err, -ENOMEM, NULL, "could not hash the merkle root: out of memory");
    m.key_epoch = 0;
    m.key = j->seal.signer.verifier;
    j->seal.keys_bytes = 0;
    j->seal.epoch = 0;
    atomic_store(&j->seal.epoch_began_ns, m.time_ns);
    return seal_key_statement(j, &j->seal.signer, &m, err);
}

/* R2: the journal lacks KEYS' newest statement (the writer stopped between the two). */
static int
seal_catch_up_journal(journal_t *j, const keychain_entry_t *newest, stele_error_t *err)
{
    uint64_t e_k = newest->st.key_epoch;
    int has_it = j->seal.has_key_end && j->seal.key_epoch_end == e_k;
    if (has_it)
        return 0;
    int lacks_one = j->seal.has_key_end ? j->seal.key_epoch_end + 1 == e_k : e_k == 0;
    if (!lacks_one || newest->tree_size != atomic_load(&j->last_seq))
        return seal_refuse(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                           "KEYS of %s ends with key epoch %" PRIu64 " at tree size %" PRIu64
                           " but the journal (%" PRIu64 " records) does not follow it",
                           j->dir, e_k, newest->tree_size, atomic_load(&j->last_seq));
    return seal_journal_key_statement(j, newest->payload, newest->payload_len, e_k, err);
}

/* R3: the key file is one epoch behind; <key>.next holds the current key. */
static int
seal_finish_interrupted(journal_t *j, const keychain_entry_t *newest, stele_error_t *err)
{
    char side[PATH_MAX];
    note_signer_t next;
    uint64_t next_epoch = 0;
    int rc = keychain_side_path(side, sizeof side, j->seal.key_path, KEYCHAIN_NEXT_SUFFIX);
    if (!rc)
        rc = sigkey_read_signer_epoch(side, &next, &next_epoch, err);
    if (!rc && (next_epoch != newest->st.key_epoch ||
                memcmp(&next.verifier, &newest->st.key, sizeof next.verifier) != 0))
        rc =
            seal_refuse(err, STELE_ECONFIG, NULL, "%s is not the key KEYS names for epoch %" PRIu64,
                        side, newest->st.key_epoch);
    if (!rc)
        rc = keychain_replace_key(j->io, j->seal.key_path, &next, next_epoch, err);
    if (!rc)
        rc = keychain_remove(j->io, side, err);
    if (!rc) {
        note_signer_wipe(&j->seal.signer);
        j->seal.signer = next;
    }
    note_signer_wipe(&next);
    return rc;
}

/* R3/R4: the key file against KEYS' newest statement. */
static int
seal_check_key_file(journal_t *j, const keychain_entry_t *newest, uint64_t e_f, stele_error_t *err)
{
    uint64_t e_k = newest->st.key_epoch;
    int same_key = memcmp(&j->seal.signer.verifier, &newest->st.key, sizeof newest->st.key) == 0;
    if (e_f == e_k && same_key) {
        char side[PATH_MAX];
        int rc = keychain_side_path(side, sizeof side, j->seal.key_path, KEYCHAIN_NEXT_SUFFIX);
        return rc ? rc : keychain_remove(j->io, side, err); /* a rotation that never began */
    }
    if (e_f + 1 == e_k)
        return seal_finish_interrupted(j, newest, err);
    return seal_refuse(err, STELE_ECONFIG, "give the journal's current signing key file",
                       "key file %s (epoch %" PRIu64 ") matches no key of journal %s, whose "
                       "newest key is epoch %" PRIu64,
                       j->seal.key_path, e_f, j->dir, e_k);
}

/* An existing key chain: KEYS, the journal and the key file brought in line (R2-R4). */
static int
seal_resume_chain(journal_t *j, const keychain_t *kc, uint64_t e_f, stele_error_t *err)
{
    const keychain_entry_t *newest = &kc->entries[kc->n - 1];
    if (j->seal.has_key_end && j->seal.key_epoch_end > newest->st.key_epoch)
        return seal_refuse(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                           "the journal %s is at key epoch %" PRIu64 " but KEYS only at %" PRIu64,
                           j->dir, j->seal.key_epoch_end, newest->st.key_epoch);
    j->seal.keys_bytes = kc->valid_bytes; /* a torn append after it is cut off by the next */
    int rc = seal_check_key_file(j, newest, e_f, err);
    if (!rc) {
        j->seal.epoch = newest->st.key_epoch;
        j->seal.last_time_ns = newest->st.time_ns;
        atomic_store(&j->seal.epoch_began_ns, newest->st.time_ns);
        rc = seal_catch_up_journal(j, newest, err);
    }
    return rc;
}

/* Makes the state of a writer that signs; the key chain comes next. */
static int
seal_prepare_signing(journal_t *j, stele_error_t *err)
{
    j->seal.key_path = strdup(j->opts.signing_key_path);
    j->seal.frame = malloc(JOURNAL_META_FRAME_MAX);
    if (!j->seal.key_path || !j->seal.frame)
        return jerr_set(err, -ENOMEM, NULL, "out of memory opening journal %s", j->dir);
    meta_origin(j->seal.origin, j->source, j->genesis);
    if (!j->opts.checkpoint_records)
        j->opts.checkpoint_records = JOURNAL_DEFAULT_CHECKPOINT_RECORDS;
    if (!j->opts.checkpoint_interval_ms)
        j->opts.checkpoint_interval_ms = JOURNAL_DEFAULT_CHECKPOINT_INTERVAL_MS;
    if (!j->opts.key_epoch_s)
        j->opts.key_epoch_s = JOURNAL_DEFAULT_KEY_EPOCH_S;
    j->seal.is_signing = 1; /* from here on, segments and rolls are those of a signed journal */
    seal_schedule(j);
    return 0;
}

/* A writer without a key: only a journal that was never signed. */
static int
seal_refuse_unsigned(journal_t *j, const keychain_t *kc, int has_keys, stele_error_t *err)
{
    if (!has_keys && !j->seal.has_key_end)
        return 0;
    (void)kc;
    return seal_refuse(err, STELE_ECONFIG,
                       "give its signing key (option signing_key, --signing-key, "
                       "STELE_SIGNING_KEY)",
                       "journal %s is signed: a writer needs its signing key", j->dir);
}

/* The three steps of a rotation at once (at open, before any other thread runs). Only a
 * failed commit fails the open; the others leave the old key in use, reported at close. */
static int
seal_rotate_now(journal_t *j, stele_error_t *err)
{
    journal_rotation_t r;
    stele_error_t why;
    if (journal_rotate_prepare(j, &r, &why) != 0) {
        journal_defer_error(j, why.code, "prepare the next key of", j->seal.key_path);
        return 0;
    }
    int rc = journal_rotate_commit(j, &r, err);
    if (rc) {
        journal_rotate_abandon(j, &r);
        return rc;
    }
    journal_rotate_finish(j, &r, &why);
    return 0;
}

int
journal_seal_load_key(journal_t *j, int is_new, stele_error_t *err)
{
    if (!j->opts.signing_key_path)
        return 0;
    int rc = sigkey_read_signer_epoch(j->opts.signing_key_path, &j->seal.signer,
                                      &j->seal.key_file_epoch, err);
    if (!rc && is_new && j->seal.key_file_epoch != 0)
        rc = seal_refuse(err, STELE_ECONFIG, "make a new key with \"stele keygen\"",
                         "key file %s is epoch %" PRIu64 "; a journal's first key is epoch 0",
                         j->opts.signing_key_path, j->seal.key_file_epoch);
    return rc;
}

int
journal_seal_open(journal_t *j, stele_error_t *err)
{
    keychain_t kc;
    int rc = keychain_read(j->io, j->dir_fd, &kc, err);
    int has_keys = rc == 0;
    if (rc && rc != -ENOENT)
        return rc;
    if (!j->opts.signing_key_path) {
        rc = seal_refuse_unsigned(j, &kc, has_keys && kc.n > 0, err);
    } else if (j->version < 2) {
        rc = seal_refuse(err, STELE_ECONFIG, "start a new journal directory to sign it",
                         "journal %s is format version %u, which cannot be signed", j->dir,
                         j->version);
    } else {
        uint64_t e_f = j->seal.key_file_epoch;
        rc = seal_prepare_signing(j, err);
        if (!rc)
            rc = has_keys && kc.n > 0 ? seal_resume_chain(j, &kc, e_f, err)
                                      : seal_start_chain(j, e_f, err);
        atomic_store(&j->seal.epoch_now, j->seal.epoch);
        if (!rc && journal_rotation_due(j))
            rc = seal_rotate_now(j, err); /* a key past its epoch signs nothing more */
    }
    keychain_free(&kc);
    return rc;
}

void
journal_seal_free(journal_t *j)
{
    note_signer_wipe(&j->seal.signer);
    free(j->seal.key_path);
    free(j->seal.frame);
    j->seal.key_path = NULL;
    j->seal.frame = NULL;
}

/* ---- rotation ---- */

int
journal_rotation_due(const journal_t *j)
{
    if (!journal_is_signing(j))
        return 0;
    journal_t *w = (journal_t *)j;
    int64_t began = atomic_load(&w->seal.epoch_began_ns);
    return journal_now_ns() - began >= (int64_t)j->opts.key_epoch_s * NS_PER_S;
}

int
journal_rotate_prepare(journal_t *j, journal_rotation_t *r, stele_error_t *err)
{
    memset(r, 0, sizeof *r);
    if (!journal_is_signing(j))
        return jerr_set(err, STELE_EINVAL, NULL, "journal %s does not sign", j ? j->dir : "");
    char side[PATH_MAX];
    int rc = keychain_side_path(side, sizeof side, j->seal.key_path, KEYCHAIN_NEXT_SUFFIX);
    if (!rc)
        rc = note_keygen(j->seal.signer.verifier.name, &r->next, err);
    r->epoch = j->seal.epoch + 1;
    if (!rc)
        rc = keychain_write_key(j->io, side, &r->next, r->epoch, err);
    if (rc) {
        note_signer_wipe(&r->next);
        /* The epoch's end is pushed back: the next attempt comes a while later. */
        atomic_fetch_add(&j->seal.epoch_began_ns, SEAL_ROTATION_RETRY_NS);
    }
    return rc;
}

/* A segment with room for a key statement besides the room it keeps, rolled to before the
 * statement is taken: once in KEYS the statement needs no roll, whose checkpoint would come
 * before it in the journal with a later time. */
static int
seal_room_for_key_statement(journal_t *j, stele_error_t *err)
{
    if (j->write_off + JOURNAL_META_FRAME_MAX + journal_seal_reserve(j) <= j->active_bytes)
        return 0;
    return journal_roll(j, err);
}

int
journal_rotate_commit(journal_t *j, journal_rotation_t *r, stele_error_t *err)
{
    int rc = journal_check_halted(j, err);
    if (!rc)
        rc = seal_room_for_key_statement(j, err);
    if (!rc)
        rc = journal_sync(j, err); /* the records the statement covers are durable first */
    meta_statement_t m;
    if (!rc && seal_statement(j, META_REASON_ROTATE, &j->range, &m))
        rc = jerr_set(err, -ENOMEM, NULL, "could not hash the merkle root: out of memory");
    if (rc)
        return rc;
    m.key_epoch = r->epoch;
    m.key = r->next.verifier;
    r->may_be_in_keys = 1; /* from here a failure may leave KEYS naming r->next */
    rc = seal_key_statement(j, &j->seal.signer, &m, err);
    if (rc)
        return rc;
    note_signer_wipe(&j->seal.signer);
    j->seal.signer = r->next;
    j->seal.epoch = r->epoch;
    atomic_store(&j->seal.epoch_now, r->epoch);
    atomic_store(&j->seal.epoch_began_ns, m.time_ns);
    r->is_committed = 1;
    return 0;
}

int
journal_rotate_finish(journal_t *j, journal_rotation_t *r, stele_error_t *err)
{
    char side[PATH_MAX];
    int rc = keychain_side_path(side, sizeof side, j->seal.key_path, KEYCHAIN_NEXT_SUFFIX);
    if (!rc)
        rc = keychain_replace_key(j->io, j->seal.key_path, &r->next, r->epoch, err);
    if (!rc)
        rc = keychain_remove(j->io, side, err);
    if (rc && err)
        journal_defer_error(j, rc, "finish the key rotation of", j->seal.key_path);
    note_signer_wipe(&r->next);
    return rc;
}

void
journal_rotate_abandon(journal_t *j, journal_rotation_t *r)
{
    /* Once KEYS may name the next key, <key>.next is its only copy: without it the next open
     * could neither complete the rotation nor sign again. */
    char side[PATH_MAX];
    if (!r->may_be_in_keys &&
        keychain_side_path(side, sizeof side, j->seal.key_path, KEYCHAIN_NEXT_SUFFIX) == 0)
        keychain_remove(j->io, side, NULL);
    note_signer_wipe(&r->next);
}
