/*
 * ship_send.c: the delivery of one batch (shipper_send_batch), for a shipper's thread and
 * the one-shot calls alike: it inserts the pending documents, acts on each failure's
 * verdict, and ends when every document is acknowledged, found stored with its hash, or
 * dead-lettered.
 *
 * Owns: what a verdict leads to: retry after the backoff, resend one by one after a
 * client-side refusal of the whole batch, compare the chain hashes of documents refused as
 * duplicates, dead-letter a document the sink refuses for good (a one-shot call without an
 * index fails instead), stop the sink on an integrity or authentication failure. Does not
 * own the commands (ship_collection.c), the verdicts (ship_classify.c), the checkpoint or
 * the thread (ship.c).
 *
 * Invariants:
 *  - A batch ends done or failed as a whole: a caller acknowledges it only after a 0 return.
 *  - A document refused for good is done only once its dead letter is in the index: a failed
 *    write is retried with the sink's backoff, then stops the sink before that record.
 *  - A document refused as a duplicate key yet not stored under its _id is dead-lettered
 *    only when seen so twice in a row (not a document deleted between insert and find).
 *  - On a time-series collection, which has no unique _id, a batch that may find documents
 *    stored already (after a start or a failed attempt) looks them up before it is sent.
 *
 * Threads and locks: runs on the shipper's thread (or the one-shot caller) only, the sole
 * user of the batch and the pool's client it pops. Statistics and errors go through the
 * shipper's `mu` (shipper_note_error, shipper_count_retry).
 */
#include "ship_mongo.h"
#include "error.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Writes of one dead letter before a shipper gives up on its index: with the default backoff
 * 8 to 16 s, long enough to ride out a brief failure (a full disk being cleaned up), short
 * enough that the stop soon shows in status. */
#define SHIP_DEAD_LETTER_TRIES 10

/*
 * Lists seq as a dead letter in the index, retrying a failed write with the sink's backoff.
 * Returns 0; the index's code once the tries are used up (the sink is stopped: the record is
 * neither in the sink nor listed, so nothing may count it as shipped); STELE_ECLOSED when the
 * thread must quit.
 */
static int
shipper_put_dead_letter(shipper_t *s, uint64_t seq, const char *why)
{
    unsigned tries = s->max_attempts ? s->max_attempts : SHIP_DEAD_LETTER_TRIES;
    for (unsigned attempt = 0;; attempt++) {
        stele_error_t ierr = {0};
        int rc = index_put_dead_letter(s->index, s->target.name, seq, why, &ierr);
        if (rc == 0)
            return 0;
        if (attempt + 1 >= tries) {
            shipper_note_error(s, 1,
                               "sink %s: seq %" PRIu64 " rejected by %s, but could not be "
                               "listed as a dead letter, stopped before it: %s",
                               s->target.name, seq, s->target.where, ierr.message);
            return rc;
        }
        shipper_note_error(s, 0, "sink %s: could not record dead letter %" PRIu64 ", retrying: %s",
                           s->target.name, seq, ierr.message);
        shipper_count_retry(s);
        if (shipper_backoff(s, attempt))
            return STELE_ECLOSED;
    }
}

/*
 * Dead-letters a document the sink refuses for good, and marks it done only once it is
 * listed. Returns 0, or shipper_put_dead_letter's failure (d stays not done, so its batch
 * is never acknowledged). A one-shot re-ship without an index only notes the first rejected
 * seq (the re-ship then fails).
 */
static int
shipper_dead_letter(shipper_t *s, ship_doc_t *d, const char *why)
{
    char msg[STELE_ERROR_MESSAGE_BYTES];
    snprintf(msg, sizeof msg, "%s", why);
    ship_target_scrub(&s->target, msg, sizeof msg);
    if (!s->index) {
        d->is_done = 1;
        shipper_note_error(s, 0, "sink %s: seq %" PRIu64 " rejected by %s: %s", s->target.name,
                           d->seq, s->target.where, msg);
        if (!s->rejected_seq)
            s->rejected_seq = d->seq;
        return 0;
    }
    int rc = shipper_put_dead_letter(s, d->seq, msg);
    if (rc != 0)
        return rc;
    d->is_done = 1;
    pthread_mutex_lock(&s->mu);
    s->dead_letters++;
    pthread_mutex_unlock(&s->mu);
    shipper_note_error(s, 0, "sink %s: seq %" PRIu64 " rejected by %s, dead-lettered: %s",
                       s->target.name, d->seq, s->target.where, msg);
    return 0;
}

/* What follows a failed attempt at a batch. */
typedef enum ship_step {
    SHIP_STEP_SEND,  /* send what is left now */
    SHIP_STEP_RETRY, /* a retryable failure: back off, then send again */
    SHIP_STEP_END,   /* the batch ends with the code given beside */
} ship_step_t;

/* One batch's delivery, across its attempts. */
typedef struct ship_send {
    ship_batch_t *b;
    const bson_t **ptrs; /* scratch for ship_collection_insert_pending, batch_docs long */
    size_t *map;
    unsigned attempt;          /* retryable failures backed off so far */
    size_t max_docs;           /* drops to 1 after a whole-batch client-side refusal */
    uint64_t unstored_dup_seq; /* refused as a duplicate yet not stored under its _id */
} ship_send_t;

/*
 * After a duplicate-key refusal, looks up on the same client which pending documents are
 * stored already (at->lookup_rc, at->bad_seq). A failed lookup is judged by its own error:
 * at->verdict becomes SHIPPER_STOP_AUTH or SHIPPER_RETRY.
 */
static void
shipper_lookup_duplicates(shipper_t *s, mongoc_client_t *client, ship_batch_t *b,
                          ship_attempt_t *at)
{
    bson_t reply = BSON_INITIALIZER;
    at->lookup_rc = ship_collection_resolve_duplicates(
        &s->target, client, s->source, b, at->bad_index, &at->bad_seq, &at->error, &reply);
    if (at->lookup_rc == STELE_EREMOTE) {
        size_t ignored;
        at->verdict = shipper_classify(&at->error, &reply, &ignored) == SHIPPER_STOP_AUTH
                          ? SHIPPER_STOP_AUTH
                          : SHIPPER_RETRY;
    }
    bson_destroy(&reply);
}

/* One attempt, on one client from the pool: the insert of the pending documents and, after
 * a duplicate-key refusal, the lookup of those stored already. */
static void
shipper_attempt(shipper_t *s, ship_send_t *st, ship_attempt_t *at)
{
    mongoc_client_t *client = mongoc_client_pool_pop(s->pool);
    ship_collection_insert_pending(&s->target, client, st->b, st->max_docs, st->ptrs, st->map, at);
    s->n_inserted += at->n_inserted;
    if (!at->is_ok && at->verdict == SHIPPER_DUPLICATE)
        shipper_lookup_duplicates(s, client, st->b, at);
    mongoc_client_pool_push(s->pool, client);
}

static int
ship_batch_is_done(const ship_batch_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (!b->docs[i].is_done)
            return 0;
    return 1;
}

/* Dead-letters a document the sink refuses for good; a one-shot re-ship (no index) ends at
 * it instead, and so does the batch when the index cannot list it. */
static ship_step_t
shipper_reject(shipper_t *s, ship_doc_t *d, const char *why, int *rc_out)
{
    int rc = shipper_dead_letter(s, d, why);
    if (rc == 0 && !s->rejected_seq)
        return SHIP_STEP_SEND;
    *rc_out = rc ? rc : STELE_EREMOTE;
    return SHIP_STEP_END;
}

/* Dead-letters the records of b that cannot become documents, before anything is sent.
 * Returns 0, or the code that ends the batch (as shipper_reject). */
static int
shipper_reject_unbuildable(shipper_t *s, ship_batch_t *b)
{
    for (size_t i = 0; i < b->n; i++) {
        ship_doc_t *d = &b->docs[i];
        int rc = 0;
        if (!d->is_unbuildable || d->is_done)
            continue;
        char why[STELE_ERROR_MESSAGE_BYTES];
        ship_doc_shape_t shape = shipper_doc_shape(s);
        ship_doc_unbuildable_reason(&shape, why, sizeof why);
        if (shipper_reject(s, d, why, &rc) == SHIP_STEP_END)
            return rc;
    }
    return 0;
}

/* Acts on a duplicate-key refusal whose lookup succeeded. */
static ship_step_t
shipper_on_duplicate(shipper_t *s, ship_send_t *st, const ship_attempt_t *at, int *rc_out)
{
    if (at->lookup_rc == STELE_EINTEGRITY) {
        shipper_note_error(s, 1,
                           "sink %s: seq %" PRIu64 " is stored in %s with another hash: "
                           "another journal uses source \"%s\" or the copy was altered",
                           s->target.name, at->bad_seq, s->target.where, s->source);
        *rc_out = STELE_EINTEGRITY;
        return SHIP_STEP_END;
    }
    ship_doc_t *d = &st->b->docs[at->bad_index];
    if (d->is_done)
        return SHIP_STEP_SEND;
    /* Not stored under its _id: the key that collided belongs to a unique index of the
     * user's, which refuses this document for good. Seen twice in a row to rule out a
     * document deleted between the insert and the find. */
    if (st->unstored_dup_seq != d->seq) {
        st->unstored_dup_seq = d->seq;
        shipper_count_retry(s);
        return SHIP_STEP_SEND;
    }
    stele_error_t why; /* the reason the dead letter keeps, cut to an error message */
    error_set(&why, STELE_EREMOTE, "duplicate key in a unique index other than _id: %s",
              at->error.message);
    return shipper_reject(s, d, why.message, rc_out);
}

/* Decides what follows a failed attempt. */
static ship_step_t
shipper_on_failure(shipper_t *s, ship_send_t *st, const ship_attempt_t *at, int *rc_out)
{
    switch (at->verdict) {
    case SHIPPER_DUPLICATE:
        return shipper_on_duplicate(s, st, at, rc_out);
    case SHIPPER_DEAD_LETTER:
        return shipper_reject(s, &st->b->docs[at->bad_index], at->error.message, rc_out);
    case SHIPPER_SPLIT:
        if (st->max_docs > 1) {
            st->max_docs = 1;
            return SHIP_STEP_SEND;
        }
        return shipper_reject(s, &st->b->docs[at->bad_index], at->error.message, rc_out);
    case SHIPPER_STOP_AUTH:
        shipper_note_error(s, 1, "sink %s: %s refused the credentials or privileges: %s",
                           s->target.name, s->target.where, at->error.message);
        *rc_out = STELE_EAUTH;
        return SHIP_STEP_END;
    case SHIPPER_RETRY:
        break;
    }
    return SHIP_STEP_RETRY;
}

/* Notes a retryable failure and sleeps its backoff. Returns 0 to send again, STELE_EREMOTE
 * when a one-shot run is out of attempts, STELE_ECLOSED when the thread must quit. */
static int
shipper_insert_backoff(shipper_t *s, ship_send_t *st, const ship_attempt_t *at)
{
    shipper_note_error(s, 0, "sink %s: insert into %s failed, retrying: %s", s->target.name,
                       s->target.where, at->error.message);
    shipper_count_retry(s);
    if (s->max_attempts && st->attempt + 1 >= s->max_attempts)
        return STELE_EREMOTE;
    if (shipper_backoff(s, st->attempt++))
        return STELE_ECLOSED;
    return 0;
}

/*
 * A time-series collection has no unique _id index: a document sent twice is stored twice.
 * So when documents of the batch may be stored already (after a start, or a failed attempt
 * whose outcome is unknown), look them up first and mark those stored with their hash done.
 * Returns 0, STELE_EINTEGRITY or STELE_EAUTH (sink stopped), or the backoff's code.
 */
static int
shipper_lookup_stored(shipper_t *s, ship_send_t *st)
{
    for (;;) {
        ship_attempt_t at;
        memset(&at, 0, sizeof at);
        mongoc_client_t *client = mongoc_client_pool_pop(s->pool);
        shipper_lookup_duplicates(s, client, st->b, &at);
        mongoc_client_pool_push(s->pool, client);
        if (at.lookup_rc == 0) {
            s->is_stored_unknown = 0;
            return 0;
        }
        int rc = 0;
        if (at.lookup_rc == STELE_EINTEGRITY)
            at.verdict = SHIPPER_DUPLICATE;
        if (at.verdict != SHIPPER_RETRY) {
            shipper_on_failure(s, st, &at, &rc);
            return rc;
        }
        rc = shipper_insert_backoff(s, st, &at);
        if (rc != 0)
            return rc;
    }
}

int
shipper_send_batch(shipper_t *s, ship_batch_t *b, const bson_t **ptrs, size_t *map)
{
    ship_send_t st = {.b = b, .ptrs = ptrs, .map = map, .max_docs = b->n};
    int rc = shipper_reject_unbuildable(s, b);
    if (rc != 0)
        return rc;
    for (;;) {
        if (s->target.opts.timeseries && s->is_stored_unknown &&
            (rc = shipper_lookup_stored(s, &st)) != 0)
            return rc;
        if (ship_batch_is_done(b))
            return 0;
        ship_attempt_t at;
        shipper_attempt(s, &st, &at);
        if (at.is_ok) {
            if (ship_batch_is_done(b))
                return 0;
            continue;
        }
        s->is_stored_unknown = 1;
        ship_step_t step = shipper_on_failure(s, &st, &at, &rc);
        if (step == SHIP_STEP_END)
            return rc;
        if (step == SHIP_STEP_RETRY) {
            rc = shipper_insert_backoff(s, &st, &at);
            if (rc != 0)
                return rc;
        }
    }
}
