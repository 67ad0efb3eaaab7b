/*
 * ship_dead.c: dead letters, from any process: the records a sink refused for good, as the
 * index lists them per sink (stele_dead_letters_list), sent again
 * (stele_dead_letters_reship, or shipper_reship_dead_letters on an index the engine holds)
 * or discarded by an operator (stele_dead_letter_discard, shipper_discard_dead_letter).
 *
 * Owns: the opening of a journal's index for these calls (never creating one), and what a
 * re-ship of letters does with each: read the record back from the journal, deliver it with
 * a one-shot shipper, count it shipped, rejected again or missing. Does not own the listing
 * itself (index_*: the shipper's thread writes letters there, ship_send.c), nor the
 * delivery (ship_send.c).
 *
 * Invariants: a letter leaves the list only when its document is acknowledged or found
 * stored with the same hash, or when an operator discards it (logged as a warning); a letter
 * rejected again stays, with the new reason; a record no longer in the journal stays listed
 * (only a discard removes it).
 *
 * Threads and locks: none of its own. Each call runs on its caller's thread, beside a live
 * writer and its shippers (in another process, or in the one that holds the journal, on the
 * index it has open); the index's transactions order its changes with theirs.
 */
#include "ship_mongo.h"
#include "error.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Dead letters read per index transaction while re-shipping them all. */
#define SHIP_DEAD_PAGE 64

/* Opens the journal's index: read-only, or writable only if it exists already (a journal
 * without an index has no dead letters, and these calls must not create one). A reader the
 * index refuses (another user's: it cannot write the lock file) reads the writer's monitor
 * snapshot instead. Returns 0, STELE_ENOTFOUND, or another code. */
static int
ship_dead_open_index(const char *dir, int writable, index_t **out, stele_error_t *err)
{
    int rc = index_open(dir, 0, 0, out, err);
    if (rc == STELE_EUNSAFE && !writable && index_open(dir, INDEX_OPEN_SNAPSHOT, 0, out, NULL) == 0)
        return 0;
    if (rc != 0 || !writable)
        return rc;
    index_close(*out);
    *out = NULL;
    return index_open(dir, 1, 0, out, err);
}

int
stele_dead_letters_list(const char *dir, const char *sink_name, uint64_t from_seq,
                        stele_dead_letter_t *out, size_t max, stele_error_t *err)
{
    if (!dir || (!out && max))
        return error_set(err, STELE_EINVAL, "dead letters: bad arguments");
    const char *name = sink_name && sink_name[0] ? sink_name : "default";
    index_t *ix = NULL;
    int rc = ship_dead_open_index(dir, 0, &ix, err);
    if (rc == STELE_ENOTFOUND)
        return 0;
    if (rc != 0)
        return rc;
    index_dead_letter_t page[SHIP_DEAD_PAGE];
    size_t n = 0;
    while (n < max) {
        size_t want = max - n < SHIP_DEAD_PAGE ? max - n : SHIP_DEAD_PAGE;
        rc = index_read_dead_letters(ix, name, from_seq, page, want, err);
        if (rc <= 0)
            break;
        for (int i = 0; i < rc; i++, n++) {
            out[n].seq = page[i].seq;
            out[n].unix_ms = page[i].unix_ms;
            /* A longer stored reason is cut to what the caller's record holds. */
            snprintf(out[n].reason, sizeof out[n].reason, "%.*s", (int)sizeof out[n].reason - 1,
                     page[i].why);
        }
        from_seq = page[rc - 1].seq + 1;
        if ((size_t)rc < want)
            break;
    }
    index_close(ix);
    return rc < 0 ? rc : (int)n;
}

/* What became of one dead letter sent again. */
typedef enum ship_dead_outcome {
    SHIP_DEAD_SHIPPED,
    SHIP_DEAD_REJECTED,
    SHIP_DEAD_MISSING,
} ship_dead_outcome_t;

/* Reads record seq into a one-document batch. STELE_ENOTFOUND when the journal no longer
 * holds it. */
static int
ship_dead_read(shipper_t *s, journal_reader_t *r, uint64_t seq, ship_batch_t *b, stele_error_t *err)
{
    index_batch_t hint = {0};
    stele_error_t ierr = {0};
    if (index_find_seq(s->index, seq, &hint, &ierr) != 0)
        memset(&hint, 0, sizeof hint);
    int rc = journal_reader_seek(r, seq, hint.segment_seq, hint.offset, err);
    if (rc != 0)
        return rc;
    journal_record_t rec;
    rc = journal_reader_next(r, &rec, err);
    if (rc == STELE_EAGAIN || (rc == 0 && rec.seq != seq))
        return STELE_ENOTFOUND;
    if (rc != 0)
        return rc;
    const ship_doc_shape_t shape = shipper_doc_shape(s);
    b->n = 1;
    b->bytes = ship_doc_fill(&b->docs[0], &shape, &rec);
    return 0;
}

/*
 * Sends dead letter seq again: off the list when acknowledged or found stored with the same
 * hash; kept with the new reason (shipper_dead_letter rewrites it) when rejected again.
 * Returns 0 with *outcome, or the code that ends the pass (STELE_EREMOTE when the server
 * stayed unreachable, STELE_EINTEGRITY, STELE_EAUTH, journal errors).
 */
static int
ship_dead_reship_one(shipper_t *s, journal_reader_t *r, uint64_t seq, ship_batch_t *b,
                     const bson_t **ptrs, size_t *map, ship_dead_outcome_t *outcome,
                     stele_error_t *err)
{
    pthread_mutex_lock(&s->mu);
    uint64_t rejected_before = s->dead_letters;
    pthread_mutex_unlock(&s->mu);
    ship_batch_clear(b);
    int rc = ship_dead_read(s, r, seq, b, err);
    if (rc == STELE_ENOTFOUND) {
        *outcome = SHIP_DEAD_MISSING;
        return 0;
    }
    if (rc == 0) {
        /* remote, integrity, authentication, or the index refused the letter */
        rc = shipper_oneshot_send(s, b, ptrs, map, err);
    }
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&s->mu);
    int is_rejected = s->dead_letters != rejected_before;
    pthread_mutex_unlock(&s->mu);
    *outcome = is_rejected ? SHIP_DEAD_REJECTED : SHIP_DEAD_SHIPPED;
    if (is_rejected)
        return 0;
    rc = index_delete_dead_letter(s->index, s->target.name, seq, err);
    return rc == STELE_ENOTFOUND ? 0 : rc; /* removed meanwhile by another re-ship */
}

/* Counts an outcome into the report. */
static void
ship_dead_count(stele_dead_letter_report_t *report, ship_dead_outcome_t outcome)
{
    report->n_tried++;
    if (outcome == SHIP_DEAD_SHIPPED)
        report->n_shipped++;
    else if (outcome == SHIP_DEAD_REJECTED)
        report->n_rejected++;
    else
        report->n_missing++;
}

/* Re-ships the letter at seq, or all of them (seq 0) page by page, into report. */
static int
ship_dead_reship_pass(shipper_t *s, journal_reader_t *r, uint64_t seq,
                      stele_dead_letter_report_t *report, stele_error_t *err)
{
    ship_doc_t doc; /* one letter at a time: nothing to allocate */
    ship_batch_t batch = {.docs = &doc};
    const bson_t *ptrs[1];
    size_t map[1];
    uint64_t page[SHIP_DEAD_PAGE];
    uint64_t from_seq = seq;
    int rc = 0;
    while (rc == 0) {
        int n = index_list_dead_letters(s->index, s->target.name, from_seq, page,
                                        seq ? 1 : SHIP_DEAD_PAGE, err);
        if (n < 0)
            rc = n;
        if (n <= 0 || (seq && page[0] != seq))
            break;
        for (int i = 0; i < n && rc == 0; i++) {
            ship_dead_outcome_t outcome;
            rc = ship_dead_reship_one(s, r, page[i], &batch, ptrs, map, &outcome, err);
            if (rc == 0)
                ship_dead_count(report, outcome);
        }
        if (seq || n < SHIP_DEAD_PAGE)
            break;
        from_seq = page[n - 1] + 1;
    }
    ship_batch_clear(&batch);
    return rc;
}

int
shipper_reship_dead_letters(index_t *ix, const char *dir, const stele_sink_options_t *sink,
                            uint64_t seq, stele_dead_letter_report_t *report, stele_error_t *err)
{
    memset(report, 0, sizeof *report);
    shipper_t *s = NULL;
    journal_reader_t *r = NULL;
    int rc = shipper_oneshot_open(sink, ix, &s, err);
    if (rc == 0)
        rc = journal_reader_open(dir, NULL, &r, err);
    if (rc == 0)
        rc = shipper_oneshot_attach(s, r, err);
    if (rc == 0)
        rc = ship_dead_reship_pass(s, r, seq, report, err);
    if (rc == 0 && seq && report->n_tried == 0) {
        rc = STELE_ENOTFOUND;
        error_set_hinted(err, rc, "list them with stele ship --dead-letters",
                         "sink %s has no dead letter at seq %" PRIu64, s->target.name, seq);
    } else if (rc == 0 && (report->n_rejected || report->n_missing)) {
        rc = STELE_EREMOTE;
        error_set_hinted(err, rc,
                         report->n_missing ? "records gone from the journal cannot be re-shipped: "
                                             "discard them"
                                           : "fix the cause (validator, index) and re-ship again",
                         "sink %s: %" PRIu64 " of %" PRIu64
                         " dead letters still rejected by %s, %" PRIu64 " no longer in the journal",
                         s->target.name, report->n_rejected, report->n_tried, s->target.where,
                         report->n_missing);
    }
    stele_error_t ierr = {0};
    (void)index_sync(ix, &ierr); /* a lost deletion only means one needless re-ship */
    journal_reader_close(r);
    shipper_free(s);
    return rc;
}

int
stele_dead_letters_reship(const char *dir, const stele_sink_options_t *sink, uint64_t seq,
                          stele_dead_letter_report_t *report, stele_error_t *err)
{
    stele_dead_letter_report_t local;
    report = report ? report : &local;
    memset(report, 0, sizeof *report);
    if (!dir)
        return error_set(err, STELE_EINVAL, "re-ship dead letters: bad arguments");
    index_t *ix = NULL;
    int rc = ship_dead_open_index(dir, 1, &ix, err);
    if (rc == STELE_ENOTFOUND && !seq)
        return 0; /* no index: no dead letters */
    if (rc == 0)
        rc = shipper_reship_dead_letters(ix, dir, sink, seq, report, err);
    index_close(ix);
    return rc;
}

int
shipper_discard_dead_letter(index_t *ix, const char *sink_name, uint64_t seq, stele_error_t *err)
{
    const char *name = sink_name && sink_name[0] ? sink_name : "default";
    index_dead_letter_t letter;
    int rc = index_read_dead_letters(ix, name, seq, &letter, 1, err);
    if (rc >= 0 && (rc == 0 || letter.seq != seq)) {
        rc = STELE_ENOTFOUND;
        error_set_hinted(err, rc, "list them with stele ship --dead-letters",
                         "sink %s has no dead letter at seq %" PRIu64, name, seq);
    }
    if (rc > 0)
        rc = index_delete_dead_letter(ix, name, seq, err);
    if (rc == 0) {
        char quoted_sink[160], quoted_why[640];
        stele_log_write("warn", "dead letter discarded", "sink=%s seq=%" PRIu64 " reason=%s",
                        stele_log_quote(quoted_sink, sizeof quoted_sink, name), seq,
                        stele_log_quote(quoted_why, sizeof quoted_why, letter.why));
        rc = index_sync(ix, err);
    }
    return rc;
}

int
stele_dead_letter_discard(const char *dir, const char *sink_name, uint64_t seq, stele_error_t *err)
{
    if (!dir || seq == 0)
        return error_set(err, STELE_EINVAL, "discard dead letter: bad arguments");
    index_t *ix = NULL;
    int rc = ship_dead_open_index(dir, 1, &ix, err);
    if (rc == STELE_ENOTFOUND)
        error_set(err, rc, "sink %s has no dead letter at seq %" PRIu64,
                  sink_name && sink_name[0] ? sink_name : "default", seq);
    if (rc == 0)
        rc = shipper_discard_dead_letter(ix, sink_name, seq, err);
    index_close(ix);
    return rc;
}
