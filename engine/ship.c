/*
 * ship.c: the shipper: one per sink, with its thread, its client pool, its journal reader
 * and its statistics (shipper_start / _stop / _stats / _stopped), and the thread-less
 * one-shot shipper (shipper_oneshot_*) that stele_reship and the re-ship of dead letters use.
 *
 * Owns: the thread's life: prepare the sink's collection (ship_setup.c's commands, with
 * retries; an index refused for good is skipped, a refused time-series collection stops the
 * sink), find where to resume (the checkpoint, else the newest document stored for the
 * source, checked against the journal), fill a batch from the journal (batch_docs /
 * batch_bytes, lingering up to linger_ms only while the writer has appended records not yet
 * readable; a signed statement ends it), have it delivered, then the statement that ended
 * it (ship_trust.c), then acknowledge it (shipped_seq, progress callback; the checkpoint when
 * due: shipper_save_checkpoint); the backoff, the retry loop of a remote step
 * (shipper_retry_step_ex, also ship_trust.c's) and the stop request; the last error. Does
 * not own the delivery of a batch (ship_send.c), the commands sent to the sink's collection
 * (ship_collection.c), the shape of a document (ship_doc.c), what a MongoDB failure means
 * (ship_classify.c), a sink's configuration (ship_target.c), libmongoc's initialisation and
 * log handler (ship_mongoc.c), the remote check and re-ship (ship_check.c), the dead
 * letters' calls (ship_dead.c), the journal (journal_reader_*), the storage of checkpoints
 * and dead letters (index_*), nor wait=shipped (the engine, fed by on_progress).
 *
 * Invariants:
 *  - Records are read back from the journal, never queued in memory: memory is one batch
 *    (batch_docs / batch_bytes) whatever the backlog, its array allocated once when the
 *    thread starts (ship_scratch_t), so reading records never fails for memory.
 *  - A shipper's thread never ends unnoticed: unless asked to stop, it leaves its sink
 *    stopped with the reason in last_error (shipper_note_exit), as status shows.
 *  - The checkpoint advances only after shipper_send_batch delivered the whole batch
 *    (acknowledged with the write concern, dead-lettered, or found already stored with the
 *    same chain hash). So the remote holds a prefix of the journal plus at most one
 *    in-flight batch, and a retry never duplicates (deterministic _id). It is saved at most
 *    every SHIP_CHECKPOINT_MS while busy, when idle and at the stop; saved_seq says what
 *    the index holds, and retention goes by it.
 *  - Retryable errors are retried forever with capped exponential backoff and jitter, with
 *    the same pool; nothing is dropped or reordered. Only an integrity mismatch, an
 *    authentication failure, a corrupt journal, or an index that will not list a dead letter
 *    stops a sink.
 *  - A sink found without a checkpoint resumes after the newest document stored for its
 *    source only if the journal holds that seq with the same chain hash (or retention
 *    deleted it); otherwise it stops, rather than skip another journal's records.
 *  - Credentials never leave the shipping files: errors and stats name the sink by
 *    host/db.coll, and every message is scrubbed of the URI's password.
 *
 * Threads and locks: a shipper's thread is the only writer of shipped_seq (atomic) and the
 * only user of its reader and batch. `mu` protects the statistics and the stop request;
 * `cv` wakes a backoff sleep when stop is requested. struct shipper, with its fields grouped
 * by who writes them, is in ship_mongo.h.
 */
#include "ship.h"
#include "ship_mongo.h"
#include "clock.h"
#include "error.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long the thread sleeps on the journal between checks of the stop request. */
#define SHIP_IDLE_WAIT_MS 50
/* How long a stop waits past its drain deadline for a thread inside a network call before it
 * leaves the thread behind (shipper_abandon): a batch insert that a server answers takes
 * milliseconds. */
#define SHIP_STOP_GRACE_MS 500
/* While records keep coming, a sink's checkpoint is written at most this often (and when the
 * sink is idle, and at its stop): one LMDB commit per batch would sit between a lone
 * wait=shipped writer's acknowledgement and the read of its next record. A restart resumes
 * from the checkpoint and finds the records after it stored with the same hashes, so an
 * older checkpoint only re-sends them; retention deletes only what the saved checkpoint
 * covers. */
#define SHIP_CHECKPOINT_MS 200
#define SHIP_NS_PER_MS 1000000u
#define SHIP_NS_PER_S 1000000000u
/* ------------------------------------------------------------------------------------------
 * The shipper
 * ------------------------------------------------------------------------------------------ */

ship_doc_shape_t
shipper_doc_shape(const shipper_t *s)
{
    return (ship_doc_shape_t){.source = s->source, .time_field = s->target.time_field};
}

void
shipper_note_error(shipper_t *s, int is_stop, const char *fmt, ...)
{
    char msg[STELE_ERROR_MESSAGE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ship_target_scrub(&s->target, msg, sizeof msg);
    pthread_mutex_lock(&s->mu);
    snprintf(s->last_error, sizeof s->last_error, "%s", msg);
    s->last_error_unix_ms = clock_wall_ms();
    int is_first_stop = is_stop && !s->is_stopped;
    if (is_stop)
        s->is_stopped = 1;
    pthread_mutex_unlock(&s->mu);
    if (is_first_stop)
        ship_log_stopped(s, msg);
}

/* 1 when the thread must give up now: stop requested and the drain deadline passed. */
static int
shipper_must_quit(shipper_t *s)
{
    pthread_mutex_lock(&s->mu);
    int quit = s->stop_requested && clock_mono_ms() >= s->stop_deadline_ms;
    pthread_mutex_unlock(&s->mu);
    return quit;
}

static int
shipper_stop_requested(shipper_t *s)
{
    pthread_mutex_lock(&s->mu);
    int stop = s->stop_requested;
    pthread_mutex_unlock(&s->mu);
    return stop;
}

int
shipper_backoff(shipper_t *s, unsigned attempt, int is_unreachable)
{
    uint64_t delay_ms = s->target.opts.backoff_min_ms;
    for (unsigned i = 0; i < attempt && delay_ms < s->target.opts.backoff_max_ms; i++)
        delay_ms *= 2;
    if (delay_ms > s->target.opts.backoff_max_ms)
        delay_ms = s->target.opts.backoff_max_ms;
    uint64_t half = delay_ms / 2;
    uint64_t sleep_ms = half + (half ? (uint64_t)rand_r(&s->jitter_seed) % (half + 1) : 0);
    ship_log_failure(s, is_unreachable, sleep_ms);

    uint64_t until_ns = clock_mono_ns() + sleep_ms * SHIP_NS_PER_MS;
    struct timespec until = {.tv_sec = (time_t)(until_ns / SHIP_NS_PER_S),
                             .tv_nsec = (long)(until_ns % SHIP_NS_PER_S)};
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    while (rc != ETIMEDOUT && !s->stop_requested)
        rc = pthread_cond_timedwait(&s->cv, &s->mu, &until);
    int quit = s->stop_requested;
    pthread_mutex_unlock(&s->mu);
    return quit;
}

void
shipper_count_retry(shipper_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->retries++;
    pthread_mutex_unlock(&s->mu);
}

int
shipper_retry_step_ex(shipper_t *s, const char *what, ship_step_fn step, void *ctx,
                      ship_refusal_t on_refusal)
{
    for (unsigned attempt = 0;; attempt++) {
        bson_error_t berr = {0};
        bson_t reply = BSON_INITIALIZER;
        mongoc_client_t *client = mongoc_client_pool_pop(s->pool);
        int rc = step(s, client, &berr, &reply, ctx);
        mongoc_client_pool_push(s->pool, client);
        if (rc == 0) {
            bson_destroy(&reply);
            ship_log_success(s);
            return 0;
        }
        if (rc != STELE_EREMOTE) { /* the step's own verdict: it noted why */
            bson_destroy(&reply);
            return rc;
        }
        size_t index;
        shipper_verdict_t verdict = shipper_classify(&berr, &reply, &index);
        int is_refused = shipper_command_is_refused(&berr, &reply);
        bson_destroy(&reply);
        if (verdict == SHIPPER_STOP_AUTH) {
            shipper_note_error(s, 1, "sink %s: %s refused by %s: %s", s->target.name, what,
                               s->target.where, berr.message);
            return STELE_EAUTH;
        }
        if (is_refused && on_refusal == SHIP_REFUSAL_RETURN) {
            shipper_note_error(s, 0, "sink %s: %s refused by %s: %s", s->target.name, what,
                               s->target.where, berr.message);
            return STELE_EREMOTE;
        }
        shipper_note_error(s, 0, "sink %s: %s on %s failed: %s", s->target.name, what,
                           s->target.where, berr.message);
        shipper_count_retry(s);
        if (s->max_attempts && attempt + 1 >= s->max_attempts)
            return STELE_EREMOTE;
        if (shipper_backoff(s, attempt, shipper_error_is_unreachable(&berr)))
            return STELE_ECLOSED;
    }
}

static int
shipper_retry_step(shipper_t *s, const char *what, ship_step_fn step, void *ctx)
{
    return shipper_retry_step_ex(s, what, step, ctx, SHIP_REFUSAL_RETRY);
}

static int
shipper_step_timeseries(shipper_t *s, mongoc_client_t *client, bson_error_t *berr, bson_t *reply,
                        void *ctx)
{
    (void)ctx;
    return ship_setup_timeseries(&s->target, client, berr, reply);
}

static int
shipper_step_index(shipper_t *s, mongoc_client_t *client, bson_error_t *berr, bson_t *reply,
                   void *ctx)
{
    return ship_setup_index(&s->target, client, *(const size_t *)ctx, berr, reply);
}

/*
 * Prepares the sink's collection: the time-series collection when the sink asks for one (a
 * server that refuses it stops the sink: documents must not go to a plain collection
 * instead), then each index. An index the server refuses for good (an option it lacks, a
 * conflicting index of the user's) is noted in last_error and skipped: queries get slower,
 * but records keep flowing. Returns 0, or the code that stopped the sink (or STELE_ECLOSED).
 */
static int
shipper_prepare_collection(shipper_t *s)
{
    int rc = 0;
    if (s->target.opts.timeseries) {
        rc = shipper_retry_step_ex(s, "time-series collection (MongoDB 5.0 or later)",
                                   shipper_step_timeseries, NULL, SHIP_REFUSAL_RETURN);
        if (rc == STELE_EREMOTE) {
            char why[STELE_ERROR_MESSAGE_BYTES];
            pthread_mutex_lock(&s->mu);
            snprintf(why, sizeof why, "%s", s->last_error);
            pthread_mutex_unlock(&s->mu);
            shipper_note_error(s, 1, "%s", why);
        }
        if (rc != 0)
            return rc;
    }
    size_t n = ship_setup_index_count(&s->target);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char what[SHIP_INDEX_NAME_BYTES + 32];
        char name[SHIP_INDEX_NAME_BYTES];
        ship_setup_index_name(&s->target, i, name, sizeof name);
        snprintf(what, sizeof what, "creation of index %s", name);
        rc = shipper_retry_step_ex(s, what, shipper_step_index, &i, SHIP_REFUSAL_RETURN);
        if (rc == STELE_EREMOTE)
            rc = 0;
    }
    return rc;
}

static int
shipper_step_max_seq(shipper_t *s, mongoc_client_t *client, bson_error_t *berr, bson_t *reply,
                     void *ctx)
{
    return ship_collection_newest(&s->target, client, s->source, ctx, berr, reply);
}

int
shipper_borrow(shipper_t *s)
{
    pthread_rwlock_rdlock(&s->lend_lock);
    if (!s->is_abandoned)
        return 0;
    pthread_rwlock_unlock(&s->lend_lock);
    return STELE_ECLOSED;
}

void
shipper_give_back(shipper_t *s)
{
    pthread_rwlock_unlock(&s->lend_lock);
}

/* Writes the checkpoint of the last acknowledged batch when one is pending and due (or
 * `force`). Returns nothing: a failed write only means a restart re-sends documents that the
 * duplicate check then recognises; shipping goes on. */
static void
shipper_save_checkpoint(shipper_t *s, int force)
{
    uint64_t seq = s->checkpoint_pending;
    if (seq == 0)
        return;
    int64_t now_ms = clock_mono_ms();
    if ((!force && now_ms < s->checkpoint_due_ms) || shipper_borrow(s) != 0)
        return;
    stele_error_t ierr = {0};
    if (index_put_checkpoint_at(s->index, s->target.name, seq, s->target.destination, &ierr) == 0)
        atomic_store(&s->saved_seq, seq);
    else
        shipper_note_error(s, 0, "sink %s: could not save checkpoint %" PRIu64 ": %s",
                           s->target.name, seq, ierr.message);
    shipper_give_back(s);
    s->checkpoint_pending = 0;
    s->checkpoint_due_ms = now_ms + SHIP_CHECKPOINT_MS;
}

/* Acknowledges a delivered batch: shipped_seq and the progress callback first, so that
 * wait=shipped callers do not wait behind an LMDB transaction, then the checkpoint when due.
 * Returns 0, or STELE_ECLOSED when the shipper was left behind (nothing recorded: the next
 * start finds the batch stored with its hashes). */
static int
shipper_acknowledge(shipper_t *s, uint64_t last_seq)
{
    ship_log_success(s);
    if (shipper_borrow(s) != 0)
        return STELE_ECLOSED;
    /* Counted before the waiters wake, so that their stats include the batch. */
    pthread_mutex_lock(&s->mu);
    s->batches++;
    pthread_mutex_unlock(&s->mu);
    atomic_store(&s->shipped_seq, last_seq);
    atomic_store(&s->pending_ts_ns, 0);
    if (s->on_progress)
        s->on_progress(s->progress_ctx, s->target.name, last_seq);
    shipper_give_back(s);
    s->checkpoint_pending = last_seq;
    shipper_save_checkpoint(s, 0);
    return 0;
}

/* 1 when a test's fault table fails the thread's next allocation. */
static int
shipper_alloc_fails(shipper_t *s)
{
    return s->faults && s->faults->fail_alloc && s->faults->fail_alloc(s->faults->ctx);
}

/* calloc, unless a test's fault table fails it. */
static void *
shipper_calloc(shipper_t *s, size_t n, size_t size)
{
    return shipper_alloc_fails(s) ? NULL : calloc(n, size);
}

int
shipper_scratch_init(shipper_t *s, ship_scratch_t *sc)
{
    size_t n = s->target.opts.batch_docs;
    memset(sc, 0, sizeof *sc);
    sc->batch.docs = shipper_calloc(s, n, sizeof *sc->batch.docs);
    sc->ptrs = shipper_calloc(s, n, sizeof *sc->ptrs);
    sc->map = shipper_calloc(s, n, sizeof *sc->map);
    return sc->batch.docs && sc->ptrs && sc->map ? 0 : -ENOMEM;
}

void
shipper_scratch_free(ship_scratch_t *sc)
{
    ship_batch_free(&sc->batch);
    free(sc->ptrs);
    free(sc->map);
}

/*
 * How long a batch whose last record is last_seq may still wait to grow: while the writer has
 * appended past it (those records are between their append and their sync, one flush away),
 * up to linger_until_ms; 0 when nothing is on its way. A fixed wait would make a lone
 * wait=shipped writer pay the whole linger_ms for a batch that never fills.
 */
static int
shipper_linger_left_ms(shipper_t *s, uint64_t last_seq, int64_t linger_until_ms)
{
    if (!s->appended_seq || shipper_borrow(s) != 0)
        return 0;
    uint64_t appended_seq = s->appended_seq(s->appended_ctx);
    shipper_give_back(s);
    if (appended_seq <= last_seq)
        return 0;
    int64_t left_ms = linger_until_ms - clock_mono_ms();
    return left_ms > 0 && !shipper_stop_requested(s) ? (int)left_ms : 0;
}

/*
 * Fills b with the records after `after_seq`: up to batch_docs / batch_bytes. The first
 * record of an idle sink goes at once; a batch lingers for more only while more are on their
 * way (shipper_linger_left_ms), never past linger_ms after its first record. A signed
 * statement (meta frame) ends the batch and waits in *trust. Returns 0 (b may be empty when
 * nothing came within the idle wait, or only a statement), or STELE_ECORRUPT or a journal
 * read's code (the sink is stopped).
 */
static int
shipper_fill_batch(shipper_t *s, journal_reader_t *r, uint64_t after_seq, ship_batch_t *b,
                   ship_trust_t *trust)
{
    const stele_sink_options_t *o = &s->target.opts;
    const ship_doc_shape_t shape = shipper_doc_shape(s);
    int64_t linger_until_ms = 0;
    uint64_t next_seq = after_seq + 1;
    while (b->n < o->batch_docs && b->bytes < o->batch_bytes) {
        journal_record_t rec;
        stele_error_t rerr = {0};
        int rc = journal_reader_next(r, &rec, &rerr);
        if (rc == STELE_EAGAIN) {
            if (b->n == 0) {
                shipper_save_checkpoint(s, 0);
                journal_reader_wait(r, next_seq - 1, SHIP_IDLE_WAIT_MS);
                if (shipper_stop_requested(s))
                    return 0;
                continue;
            }
            int left_ms = shipper_linger_left_ms(s, next_seq - 1, linger_until_ms);
            if (left_ms == 0)
                return 0;
            journal_reader_wait(r, next_seq - 1, left_ms);
            continue;
        }
        if (rc != 0) {
            shipper_note_error(s, 1, "sink %s: cannot read the journal: %s", s->target.name,
                               rerr.message);
            return rc;
        }
        if (rec.is_meta) { /* a signed statement ends the batch: it goes after its records */
            ship_trust_take(trust, r, &rec);
            return 0;
        }
        if (rec.seq != next_seq) {
            shipper_note_error(s, 1, "sink %s: journal jumped from seq %" PRIu64 " to %" PRIu64,
                               s->target.name, next_seq - 1, rec.seq);
            return STELE_ECORRUPT;
        }
        b->bytes += ship_doc_fill(&b->docs[b->n++], &shape, &rec);
        if (b->n == 1) {
            linger_until_ms = clock_mono_ms() + o->linger_ms;
            atomic_store(&s->pending_ts_ns, rec.ts_ns);
        }
        next_seq++;
    }
    return 0;
}

/*
 * Before resuming after the remote's newest document, checks that it is ours: the journal
 * must hold that seq with the same chain hash. Otherwise another journal ships under this
 * source name (or the journal was replaced): stop loudly instead of skipping its records.
 * A seq already deleted by retention cannot be compared and is accepted.
 */
static int
shipper_check_remote_last(shipper_t *s, const ship_remote_last_t *last)
{
    journal_reader_t *r = NULL;
    stele_error_t rerr = {0};
    int rc = journal_reader_open(s->journal_dir, s->io, &r, &rerr);
    if (rc == 0) {
        rc = journal_reader_seek(r, last->seq, 0, 0, &rerr);
        if (rc == STELE_ENOTFOUND) {
            journal_reader_close(r);
            return 0;
        }
    }
    journal_record_t rec;
    if (rc == 0)
        rc = journal_reader_next(r, &rec, &rerr);
    int is_ours = rc == 0 && rec.seq == last->seq && last->has_hash &&
                  memcmp(rec.hash, last->hash, SHIP_HASH_BYTES) == 0;
    journal_reader_close(r);
    if (rc != 0 && rc != STELE_EAGAIN) {
        shipper_note_error(s, 1, "sink %s: cannot read the journal: %s", s->target.name,
                           rerr.message);
        return rc;
    }
    if (!is_ours) {
        shipper_note_error(s, 1,
                           "sink %s: seq %" PRIu64 " is stored in %s with another hash%s: "
                           "another journal uses source \"%s\" or the journal was replaced",
                           s->target.name, last->seq, s->target.where,
                           rc == STELE_EAGAIN ? " and is past the journal's end" : "", s->source);
        return STELE_EINTEGRITY;
    }
    return 0;
}

/* Where to resume: the checkpoint, else (index lost or new sink) the remote's highest seq. */
static int
shipper_resume_seq(shipper_t *s, uint64_t *seq_out)
{
    stele_error_t ierr = {0};
    uint64_t seq = 0;
    if (shipper_borrow(s) != 0)
        return STELE_ECLOSED;
    if (index_get_checkpoint(s->index, s->target.name, &seq, &ierr) != 0)
        shipper_note_error(s, 0, "sink %s: could not read checkpoint: %s", s->target.name,
                           ierr.message);
    shipper_give_back(s);
    if (seq == 0) {
        ship_remote_last_t last;
        int rc = shipper_retry_step(s, "resume query", shipper_step_max_seq, &last);
        if (rc == 0 && last.seq > 0)
            rc = shipper_check_remote_last(s, &last);
        if (rc != 0)
            return rc;
        seq = last.seq;
    }
    *seq_out = seq;
    return 0;
}

static int
shipper_open_reader(shipper_t *s, uint64_t after_seq, journal_reader_t **out)
{
    stele_error_t rerr = {0};
    int rc = journal_reader_open(s->journal_dir, s->io, out, &rerr);
    if (rc != 0) {
        shipper_note_error(s, 1, "sink %s: cannot open the journal: %s", s->target.name,
                           rerr.message);
        return rc;
    }
    /* Statements after record after_seq come back too (ship_trust.c): the hint is a batch
     * at or before that record, so the seek does not jump past them. */
    journal_reader_set_meta(*out, 1);
    index_batch_t hint = {0};
    stele_error_t ierr = {0};
    if (after_seq > 0 && shipper_borrow(s) == 0) {
        if (index_find_seq(s->index, after_seq, &hint, &ierr) != 0)
            memset(&hint, 0, sizeof hint);
        shipper_give_back(s);
    }
    rc = journal_reader_seek(*out, after_seq + 1, hint.segment_seq, hint.offset, &rerr);
    if (rc == STELE_ENOTFOUND) {
        /* Retention never deletes unshipped segments; if they are gone anyway, say so
         * loudly and ship what exists rather than nothing. */
        shipper_note_error(s, 0, "sink %s: records after %" PRIu64 " are no longer in the journal",
                           s->target.name, after_seq);
        rc = 0;
    } else if (rc != 0) {
        shipper_note_error(s, 1, "sink %s: cannot seek the journal to %" PRIu64 ": %s",
                           s->target.name, after_seq + 1, rerr.message);
        journal_reader_close(*out);
        *out = NULL;
    }
    return rc;
}

/* Ships batch after batch from after_seq on. Returns 0 when asked to stop, else the code
 * that stopped the sink (or STELE_ECLOSED: the stop's drain deadline passed). */
static int
shipper_ship_loop(shipper_t *s, journal_reader_t *reader, uint64_t after_seq, ship_scratch_t *sc)
{
    ship_batch_t *b = &sc->batch;
    for (;;) {
        int rc = shipper_fill_batch(s, reader, after_seq, b, &sc->trust);
        if (rc != 0)
            return rc;
        if (b->n == 0 && !sc->trust.has_pending) {
            if (shipper_stop_requested(s))
                return 0;
            continue;
        }
        rc = b->n ? shipper_send_batch(s, b, sc->ptrs, sc->map) : 0;
        /* A statement goes once the records it covers are acknowledged by the sink, and
         * before they are locally: a restart re-reads it after the checkpoint's record. */
        if (rc == 0 && sc->trust.has_pending)
            rc = ship_trust_deliver(s, &sc->trust);
        if (rc != 0)
            return rc;
        if (b->n == 0)
            continue;
        after_seq = b->docs[b->n - 1].seq;
        if (shipper_acknowledge(s, after_seq) != 0)
            return 0;
        ship_batch_clear(b);
        if (shipper_must_quit(s))
            return 0;
    }
}

/* A thread that ends unasked must never leave its sink looking alive: if no stop was
 * requested and nothing stopped the sink with its own reason, stop it with rc's. */
static void
shipper_note_exit(shipper_t *s, int rc)
{
    pthread_mutex_lock(&s->mu);
    int is_explained = s->stop_requested || s->is_stopped;
    pthread_mutex_unlock(&s->mu);
    if (!is_explained)
        shipper_note_error(s, 1, "sink %s: shipper ended: %s", s->target.name, stele_strerror(rc));
}

/* The thread's last act: marks it finished, and frees the shipper when its stop left it
 * behind (shipper_abandon): nobody else will. */
static void
shipper_finish(shipper_t *s)
{
    pthread_rwlock_rdlock(&s->lend_lock);
    s->is_finished = 1;
    int is_abandoned = s->is_abandoned;
    pthread_rwlock_unlock(&s->lend_lock);
    if (is_abandoned)
        shipper_free(s);
}

static void *
shipper_main(void *arg)
{
    shipper_t *s = arg;
    journal_reader_t *reader = NULL;
    ship_scratch_t sc;
    uint64_t after_seq = 0;
    int rc = shipper_scratch_init(s, &sc);
    if (rc != 0)
        shipper_note_error(s, 1, "sink %s: out of memory for a batch of %" PRIu32 " documents",
                           s->target.name, s->target.opts.batch_docs);
    if (rc == 0)
        rc = shipper_prepare_collection(s);
    if (rc == 0)
        rc = shipper_resume_seq(s, &after_seq);
    if (rc == 0) {
        atomic_store(&s->shipped_seq, after_seq);
        /* A resume from the remote's newest document is saved too, at the first idle
         * moment: retention goes by the saved checkpoint. */
        if (after_seq > atomic_load(&s->saved_seq))
            s->checkpoint_pending = after_seq;
        rc = shipper_open_reader(s, after_seq, &reader);
    }
    if (rc == 0)
        rc = shipper_ship_loop(s, reader, after_seq, &sc);
    shipper_save_checkpoint(s, 1);
    shipper_note_exit(s, rc);
    journal_reader_close(reader);
    shipper_scratch_free(&sc);
    shipper_finish(s);
    return NULL;
}

void
shipper_free(shipper_t *s)
{
    if (!s)
        return;
    if (s->pool)
        mongoc_client_pool_destroy(s->pool);
    ship_target_free(&s->target);
    free(s->journal_dir);
    free(s->source);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    pthread_rwlock_destroy(&s->lend_lock);
    free(s);
}

/* A zeroed shipper with its lock, and a condition variable on the monotonic clock (the
 * backoff sleeps until a monotonic deadline). */
static shipper_t *
shipper_alloc(void)
{
    shipper_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->is_stored_unknown = 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_rwlock_init(&s->lend_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    return s;
}

/*
 * Ties the sink's checkpoint to its destination before anything ships (ship_destination):
 * a checkpoint acknowledged by another cluster, database or collection must not make this
 * one skip the records before it. A checkpoint without an identity (stored before they
 * were kept) or at seq 0 takes this destination's. Another destination's checkpoint is
 * refused (STELE_ECONFIG naming both and the way out), or with on_destination_change =
 * restart reset: the sink starts over as a new one would. Returns 0 or an error (index's,
 * or STELE_ECONFIG).
 */
static int
shipper_claim_checkpoint(shipper_t *s, stele_error_t *err)
{
    const ship_target_t *t = &s->target;
    char stored[SHIP_DESTINATION_BYTES];
    uint64_t seq = 0;
    int rc = index_get_checkpoint_at(s->index, t->name, &seq, stored, sizeof stored, err);
    if (rc != 0 || strcmp(stored, t->destination) == 0 || (seq == 0 && stored[0] == '\0'))
        return rc; /* a new sink's first acknowledgement stores its destination */
    if (seq == 0 || stored[0] == '\0')
        return index_put_checkpoint_at(s->index, t->name, seq, t->destination, err);
    if (t->opts.on_destination_change != STELE_DESTINATION_RESTART)
        return error_set_hinted(
            err, STELE_ECONFIG,
            "ship under another sink name (a new --sink NAME or [sink NAME] section), or start "
            "this sink over there with --new-destination (on_destination_change = restart)",
            "sink %s: its checkpoint (seq %" PRIu64 ") belongs to %s, not %s", t->name, seq, stored,
            t->destination);
    uint64_t n_dropped = 0;
    rc = index_reset_sink(s->index, t->name, t->destination, &n_dropped, err);
    if (rc == 0)
        ship_log_new_destination(s, stored, seq, n_dropped);
    return rc;
}

int
shipper_start(const shipper_config_t *cfg, shipper_t **out, stele_error_t *err)
{
    *out = NULL;
    if (!cfg || !cfg->journal_dir || !cfg->source || !cfg->index)
        return error_set(err, STELE_EINVAL, "shipper: journal, source and index are required");
    shipper_t *s = shipper_alloc();
    if (!s)
        return error_set(err, -ENOMEM, "shipper: out of memory");
    int rc = ship_target_init(&s->target, cfg->sink, err);
    if (rc != 0)
        goto fail;
    s->journal_dir = strdup(cfg->journal_dir);
    s->source = strdup(cfg->source);
    if (!s->journal_dir || !s->source) {
        rc = -ENOMEM;
        error_set(err, rc, "shipper: out of memory");
        goto fail;
    }
    s->io = cfg->io;
    s->index = cfg->index;
    s->on_progress = cfg->on_progress;
    s->progress_ctx = cfg->progress_ctx;
    s->appended_seq = cfg->appended_seq;
    s->appended_ctx = cfg->appended_ctx;
    s->faults = cfg->faults;
    s->log_level = cfg->log_level;
    s->is_logging = 1;
    s->jitter_seed = (unsigned)clock_wall_ms() ^ (unsigned)(uintptr_t)s;
    rc = shipper_claim_checkpoint(s, err);
    if (rc != 0)
        goto fail;
    stele_error_t ierr = {0};
    if (index_count_dead_letters(s->index, s->target.name, &s->dead_letters, &ierr) != 0)
        s->dead_letters = 0;
    uint64_t checkpoint = 0;
    if (index_get_checkpoint(s->index, s->target.name, &checkpoint, &ierr) == 0) {
        atomic_store(&s->shipped_seq, checkpoint);
        atomic_store(&s->saved_seq, checkpoint);
    }
    s->pool = ship_target_pool_new(&s->target, err);
    if (!s->pool) {
        rc = STELE_ECONFIG;
        goto fail;
    }
    rc = pthread_create(&s->thread, NULL, shipper_main, s);
    if (rc != 0) {
        error_set(err, -rc, "sink %s: could not start its thread: %s", s->target.name,
                  stele_strerror(-rc));
        rc = -rc;
        goto fail;
    }
    s->is_thread_started = 1;
    *out = s;
    return 0;
fail:
    shipper_free(s);
    return rc;
}

void
shipper_request_stop(shipper_t *s, int drain_timeout_ms)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    if (!s->stop_requested) {
        s->stop_requested = 1;
        s->stop_deadline_ms = clock_mono_ms() + (drain_timeout_ms > 0 ? drain_timeout_ms : 0);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Joins the thread if it ends by deadline_ms (monotonic). Returns 0 when joined. */
static int
shipper_join_by(shipper_t *s, int64_t deadline_ms)
{
    int64_t left_ms = deadline_ms - clock_mono_ms();
    if (left_ms < 0)
        left_ms = 0;
    struct timespec until =
        clock_timespec((uint64_t)(clock_wall_ns() + left_ms * (int64_t)SHIP_NS_PER_MS));
    return pthread_timedjoin_np(s->thread, NULL, &until);
}

/*
 * Leaves a thread that did not end in time behind: it is inside a network call (a server
 * that accepts connections but does not answer holds one up to the socket timeout), and the
 * journal's close must not wait for it. Once abandoned, the thread no longer touches what the
 * engine lent it (the index, the progress callback: shipper_borrow), ends at its next stop
 * check and frees the shipper itself. Its batch is not acknowledged: the next start finds it
 * stored with the same hashes, or sends it again.
 */
static void
shipper_abandon(shipper_t *s)
{
    pthread_t thread = s->thread;
    ship_log_left_behind(s);
    pthread_rwlock_wrlock(&s->lend_lock);
    int is_finished = s->is_finished;
    s->is_abandoned = !is_finished;
    pthread_rwlock_unlock(&s->lend_lock);
    /* From here on an abandoned shipper belongs to its thread: s may be freed already. */
    if (!is_finished) {
        pthread_detach(thread);
        return;
    }
    pthread_join(thread, NULL);
    shipper_free(s);
}

void
shipper_stop(shipper_t *s, int drain_timeout_ms)
{
    if (!s)
        return;
    shipper_request_stop(s, drain_timeout_ms);
    if (s->is_thread_started) {
        pthread_mutex_lock(&s->mu);
        int64_t deadline_ms = s->stop_deadline_ms + SHIP_STOP_GRACE_MS;
        pthread_mutex_unlock(&s->mu);
        if (shipper_join_by(s, deadline_ms) != 0) {
            shipper_abandon(s);
            return;
        }
    }
    shipper_free(s);
}

uint64_t
shipper_shipped_seq(const shipper_t *s)
{
    return s ? atomic_load(&((shipper_t *)s)->shipped_seq) : 0;
}

uint64_t
shipper_saved_seq(const shipper_t *s)
{
    return s ? atomic_load(&((shipper_t *)s)->saved_seq) : 0;
}

void
shipper_stats(shipper_t *s, uint64_t committed_seq, stele_sink_stats_t *out)
{
    memset(out, 0, sizeof *out);
    if (!s)
        return;
    snprintf(out->name, sizeof out->name, "%s", s->target.name);
    snprintf(out->target, sizeof out->target, "%s", s->target.where);
    uint64_t shipped = atomic_load(&s->shipped_seq);
    int64_t pending_ts = atomic_load(&s->pending_ts_ns);
    out->shipped_seq = shipped;
    out->lag_records = committed_seq > shipped ? committed_seq - shipped : 0;
    if (out->lag_records > 0 && pending_ts > 0) {
        int64_t now_ns = clock_wall_ns();
        out->lag_seconds = now_ns > pending_ts ? (double)(now_ns - pending_ts) / 1e9 : 0.0;
    }
    /* The index's count of the list, not this shipper's counter: re-ships and discards
     * (from any process) shorten the list, and the index keeps its count in step. */
    uint64_t dead_listed = 0;
    stele_error_t ierr = {0};
    int is_listed = index_count_dead_letters(s->index, s->target.name, &dead_listed, &ierr) == 0;
    pthread_mutex_lock(&s->mu);
    out->batches = s->batches;
    out->retries = s->retries;
    out->dead_letters = is_listed ? dead_listed : s->dead_letters;
    out->last_error_unix_ms = s->last_error_unix_ms;
    snprintf(out->last_error, sizeof out->last_error, "%s", s->last_error);
    out->is_stopped = s->is_stopped;
    pthread_mutex_unlock(&s->mu);
}

int
shipper_stopped(shipper_t *s, stele_error_t *err)
{
    const char *hint = "`stele status` shows the sink; it ships again only after a restart";
    char self[sizeof s->target.name + 8];
    snprintf(self, sizeof self, "sink %s:", s->target.name);
    pthread_mutex_lock(&s->mu);
    int stopped = s->is_stopped;
    if (stopped && strncmp(s->last_error, self, strlen(self)) == 0)
        error_set_hinted(err, STELE_ESINKSTOPPED, hint, "%s; it stopped shipping", s->last_error);
    else if (stopped)
        error_set_hinted(err, STELE_ESINKSTOPPED, hint, "sink %s stopped shipping: %s",
                         s->target.name, s->last_error);
    pthread_mutex_unlock(&s->mu);
    return stopped;
}

/* Attempts per remote step of a one-shot shipper before it gives up. */
#define SHIP_ONESHOT_MAX_ATTEMPTS 5

int
shipper_oneshot_open(const stele_sink_options_t *sink, index_t *ix, shipper_t **out,
                     stele_error_t *err)
{
    *out = NULL;
    shipper_t *s = shipper_alloc();
    if (!s)
        return error_set(err, -ENOMEM, "re-ship: out of memory");
    int rc = ship_target_init(&s->target, sink, err);
    if (rc != 0) {
        shipper_free(s);
        return rc;
    }
    s->index = ix;
    s->max_attempts = SHIP_ONESHOT_MAX_ATTEMPTS;
    s->jitter_seed = (unsigned)clock_wall_ms();
    *out = s;
    return 0;
}

int
shipper_oneshot_attach(shipper_t *s, journal_reader_t *r, stele_error_t *err)
{
    s->source = strdup(journal_reader_source(r));
    if (!s->source)
        return error_set(err, -ENOMEM, "re-ship: out of memory");
    s->pool = ship_target_pool_new(&s->target, err);
    return s->pool ? 0 : STELE_ECONFIG;
}

int
shipper_oneshot_send(shipper_t *s, ship_batch_t *b, const bson_t **ptrs, size_t *map,
                     stele_error_t *err)
{
    int rc = shipper_send_batch(s, b, ptrs, map);
    if (rc != 0) {
        pthread_mutex_lock(&s->mu);
        error_set_hinted(err, rc, rc == STELE_EINTEGRITY ? "run stele_remote_check" : NULL, "%s",
                         s->last_error);
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}
