/*
 * ship_check.c: the remote copy against the journal, from any process: the consistency check
 * (stele_remote_check) and the re-ship of a range (stele_reship) that repairs what the check
 * finds missing.
 *
 * Owns: the merge of the journal's records and the sink's documents by seq into the
 * report's missing, extra and mismatched ranges, and the remote side of that merge (a cursor
 * that queries SHIP_CHECK_CHUNK_SEQS seqs at a time and never runs ahead of the journal);
 * the reading of a range into batches for a one-shot shipper. Does not own the delivery of a
 * batch (ship_send.c), the shipper (ship.c), nor the sink's configuration (ship_target.c).
 *
 * Invariants: the check writes nothing, locally or remotely; it compares chain hashes and
 * origins, so a document whose stored hash or _stele.origin was altered in the sink shows
 * as mismatched; the report's counts are exact even where
 * its ranges stop at STELE_REMOTE_MAX_RANGES. A re-ship inserts under the shipper's
 * deterministic _id, so a document stored already with the same hash is not inserted again,
 * one stored with another hash fails it (STELE_EINTEGRITY), and without an index a document
 * the sink refuses fails it instead of becoming a dead letter.
 *
 * Threads and locks: none. Each call runs on its caller's thread, beside any running
 * shipper, with a client (check) or a pool (re-ship) of its own.
 */
#include "ship_mongo.h"
#include "error.h"
#include "origin.h"
#include "validate.h" /* STELE_META_FIELD */

#include <inttypes.h>
#include <stdint.h>
#include <string.h>

/* One list of ranges in a report being built; `last` is the previous seq added (0 = none),
 * so ranges past the listed ones are still counted right. */
typedef struct ship_range_list {
    stele_seq_range_t *ranges;
    size_t *n_ranges;
    uint64_t *n_seqs;
    uint64_t last;
} ship_range_list_t;

static void
ship_range_add(ship_range_list_t *l, uint64_t seq)
{
    (*l->n_seqs)++;
    size_t n = *l->n_ranges;
    int follows = l->last != 0 && l->last + 1 == seq;
    l->last = seq;
    if (follows) {
        if (n <= STELE_REMOTE_MAX_RANGES)
            l->ranges[n - 1].last_seq = seq;
        return;
    }
    if (n < STELE_REMOTE_MAX_RANGES) {
        l->ranges[n].first_seq = seq;
        l->ranges[n].last_seq = seq;
    }
    (*l->n_ranges)++;
}

/* Opens a reader on dir positioned at from_seq (clamped to the oldest record). */
static int
ship_open_range_reader(const char *dir, uint64_t from_seq, journal_reader_t **out,
                       stele_error_t *err)
{
    int rc = journal_reader_open(dir, NULL, out, err);
    if (rc != 0)
        return rc;
    rc = journal_reader_seek(*out, from_seq ? from_seq : 1, 0, 0, err);
    if (rc == STELE_ENOTFOUND)
        rc = 0;
    if (rc != 0) {
        journal_reader_close(*out);
        *out = NULL;
    }
    return rc;
}

/* Turns a libmongoc failure of a one-shot call into a stele error. */
static int
ship_remote_error(const ship_target_t *t, const bson_error_t *berr, const bson_t *reply,
                  const char *what, stele_error_t *err)
{
    size_t index;
    int code =
        shipper_classify(berr, reply, &index) == SHIPPER_STOP_AUTH ? STELE_EAUTH : STELE_EREMOTE;
    error_set_hinted(err, code, "check that the server is reachable and the credentials valid",
                     "sink %s: %s on %s failed: %s", t->name, what, t->where, berr->message);
    if (err)
        ship_target_scrub(t, err->message, sizeof err->message);
    return code;
}

/* The remote side of the check: documents of `source` from from_seq up, by _id.seq. */
static mongoc_cursor_t *
ship_range_cursor(const ship_target_t *t, mongoc_collection_t *coll, const char *source,
                  uint64_t from_seq, uint64_t to_seq)
{
    bson_t *filter =
        BCON_NEW("_id.src", BCON_UTF8(source), "_id.seq", "{", "$gte",
                 BCON_INT64((int64_t)from_seq), "$lte", BCON_INT64((int64_t)to_seq), "}");
    bson_t *opts = BCON_NEW("sort", "{", "_id.seq", BCON_INT32(1), "}", "projection", "{", "_id",
                            BCON_INT32(1), STELE_META_FIELD ".hash", BCON_INT32(1),
                            STELE_META_FIELD ".origin", BCON_INT32(1), "}");
    ship_target_append_read_concern(t, opts);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    bson_destroy(opts);
    bson_destroy(filter);
    return cursor;
}

/* Seqs per remote query of the check: each query sorts at most this many documents, so a
 * server without a usable index (FerretDB sorts in memory) still answers within the socket
 * timeout. */
#define SHIP_CHECK_CHUNK_SEQS 20000
/* Socket timeout of the check's queries when the URI sets none. */
#define SHIP_CHECK_SOCKET_TIMEOUT_MS 300000

/* The remote side of the check, walked in seq order one chunk of seqs at a time. */
typedef struct ship_check_cursor {
    const ship_target_t *target;
    mongoc_collection_t *coll;
    const char *source;
    mongoc_cursor_t *cursor;
    uint64_t chunk_end;   /* last seq the current query covers */
    uint64_t remote_to;   /* last seq to look at */
    int is_journal_done;  /* set by the caller: the rest is fetched in one query */
    uint64_t journal_seq; /* set by the caller: the journal's current seq */
    int is_pending;       /* chunk exhausted up to journal_seq: resume once the journal moves */
    int is_drained;       /* the current query returned everything */
    int has_doc;
    uint64_t seq;
    const uint8_t *hash;
    stele_origin_t origin;
    int is_origin_bad; /* the document's origin is malformed: it matches no record */
    int has_error;
    bson_error_t error;
    bson_t error_doc;
} ship_check_cursor_t;

static void
ship_check_cursor_open(ship_check_cursor_t *c, uint64_t from_seq)
{
    uint64_t end = c->remote_to;
    if (from_seq > c->remote_to)
        from_seq = c->remote_to; /* an empty range: nothing past remote_to is fetched */
    if (!c->is_journal_done && c->remote_to - from_seq >= SHIP_CHECK_CHUNK_SEQS)
        end = from_seq + SHIP_CHECK_CHUNK_SEQS - 1;
    mongoc_cursor_destroy(c->cursor);
    c->cursor = ship_range_cursor(c->target, c->coll, c->source, from_seq, end);
    c->chunk_end = end;
    c->is_drained = 0;
}

static void
ship_check_cursor_next(ship_check_cursor_t *c, stele_remote_report_t *report)
{
    const bson_t *doc;
    c->has_doc = 0;
    while (!c->has_error) {
        while (!c->is_drained && mongoc_cursor_next(c->cursor, &doc)) {
            if (ship_doc_identity(doc, &c->seq, &c->hash) != 0)
                continue;
            c->is_origin_bad = ship_doc_origin(doc, &c->origin) != 0;
            report->docs_checked++;
            c->has_doc = 1;
            return;
        }
        const bson_t *err_doc = NULL;
        if (!c->is_drained && mongoc_cursor_error_document(c->cursor, &c->error, &err_doc)) {
            c->has_error = 1;
            if (err_doc)
                bson_copy_to(err_doc, &c->error_doc);
            return;
        }
        c->is_drained = 1;
        if (c->chunk_end >= c->remote_to)
            return;
        if (!c->is_journal_done && c->chunk_end >= c->journal_seq) {
            c->is_pending = 1; /* never run ahead of the journal: it may end here */
            return;
        }
        ship_check_cursor_open(c, c->chunk_end + 1);
    }
}

static int
ship_check_journal_next(journal_reader_t *r, uint64_t to_seq, journal_record_t *rec, int *has_rec,
                        stele_error_t *err)
{
    *has_rec = 0;
    int rc = journal_reader_next(r, rec, err);
    if (rc == STELE_EAGAIN)
        return 0;
    if (rc != 0)
        return rc;
    *has_rec = rec->seq <= to_seq;
    return 0;
}

/* Tells the remote side where the journal is now, and resumes a query that waited for it. */
static void
ship_check_cursor_follow(ship_check_cursor_t *c, const journal_record_t *rec, int has_rec,
                         stele_remote_report_t *report)
{
    c->is_journal_done = !has_rec;
    c->journal_seq = has_rec ? rec->seq : c->journal_seq;
    if (c->is_pending && (!has_rec || rec->seq > c->chunk_end)) {
        c->is_pending = 0;
        ship_check_cursor_next(c, report);
    }
}

/* 1 when the remote's current document is the record's: the same chain hash and origin (the
 * hash covers the origin in the journal, but a document carries both as stored fields). */
static int
ship_check_doc_matches(const ship_check_cursor_t *remote, const journal_record_t *rec)
{
    stele_origin_t want = origin_from_journal(&rec->origin);
    return remote->hash && memcmp(remote->hash, rec->hash, SHIP_HASH_BYTES) == 0 &&
           !remote->is_origin_bad && origin_equal(&remote->origin, &want);
}

/* Merges the journal's records (from *rec on, up to to_seq) and the remote's documents by
 * seq into the report's missing, extra and mismatched ranges. */
static int
ship_check_merge(journal_reader_t *r, uint64_t to_seq, journal_record_t *rec, int has_rec,
                 ship_check_cursor_t *remote, stele_remote_report_t *report, stele_error_t *err)
{
    ship_range_list_t missing = {report->missing, &report->n_missing_ranges, &report->n_missing, 0};
    ship_range_list_t extra = {report->extra, &report->n_extra_ranges, &report->n_extra, 0};
    ship_range_list_t mismatched = {report->mismatched, &report->n_mismatched_ranges,
                                    &report->n_mismatched, 0};
    while (has_rec || remote->has_doc) {
        if (has_rec && (!remote->has_doc || rec->seq < remote->seq)) {
            ship_range_add(&missing, rec->seq);
        } else if (remote->has_doc && (!has_rec || remote->seq < rec->seq)) {
            ship_range_add(&extra, remote->seq);
            ship_check_cursor_next(remote, report);
            continue;
        } else {
            if (!ship_check_doc_matches(remote, rec))
                ship_range_add(&mismatched, rec->seq);
            ship_check_cursor_next(remote, report);
        }
        report->records_checked++;
        report->to_seq = rec->seq;
        int rc = ship_check_journal_next(r, to_seq, rec, &has_rec, err);
        if (rc != 0)
            return rc;
        ship_check_cursor_follow(remote, rec, has_rec, report);
        if (remote->has_error)
            break;
    }
    return 0;
}

/* Compares the journal from from_seq to to_seq (0: its end) with the documents stored for its
 * source, into the report. */
static int
ship_check_compare(const ship_target_t *t, journal_reader_t *r, mongoc_collection_t *coll,
                   uint64_t from_seq, uint64_t to_seq, ship_check_cursor_t *remote,
                   stele_remote_report_t *report, stele_error_t *err)
{
    uint64_t journal_to = to_seq ? to_seq : UINT64_MAX;
    journal_record_t rec;
    int has_rec;
    int rc = ship_check_journal_next(r, journal_to, &rec, &has_rec, err);
    if (rc != 0)
        return rc;
    report->from_seq = has_rec ? rec.seq : from_seq;
    remote->target = t;
    remote->coll = coll;
    remote->source = journal_reader_source(r);
    remote->remote_to = to_seq ? to_seq : (uint64_t)INT64_MAX;
    remote->is_journal_done = !has_rec;
    remote->journal_seq = has_rec ? rec.seq : 0;
    ship_check_cursor_open(remote, report->from_seq ? report->from_seq : 1);
    ship_check_cursor_next(remote, report);
    return ship_check_merge(r, journal_to, &rec, has_rec, remote, report, err);
}

/* The check's verdict once the comparison ran: the remote's failure, or what differs. */
static int
ship_check_verdict(const ship_target_t *t, const ship_check_cursor_t *remote,
                   const stele_remote_report_t *report, stele_error_t *err)
{
    if (remote->has_error)
        return ship_remote_error(t, &remote->error, &remote->error_doc, "remote check", err);
    if (!report->n_missing && !report->n_extra && !report->n_mismatched)
        return 0;
    error_set_hinted(
        err, STELE_EINTEGRITY, "re-ship the missing ranges with stele_reship / stele ship",
        "sink %s: %" PRIu64 " missing, %" PRIu64 " extra, %" PRIu64 " mismatched documents in %s",
        t->name, report->n_missing, report->n_extra, report->n_mismatched, t->where);
    return STELE_EINTEGRITY;
}

/* A client of its own for the check, whose queries sort whole chunks on the server: they
 * get more time than inserts unless the URI says otherwise. */
static int
ship_check_client_new(ship_target_t *t, mongoc_client_t **out, stele_error_t *err)
{
    if (!t->is_socket_timeout_set)
        mongoc_uri_set_option_as_int32(t->uri, MONGOC_URI_SOCKETTIMEOUTMS,
                                       SHIP_CHECK_SOCKET_TIMEOUT_MS);
    *out = mongoc_client_new_from_uri(t->uri);
    if (!*out)
        return error_set(err, STELE_ECONFIG, "sink %s: could not create a client", t->name);
    mongoc_client_set_error_api(*out, MONGOC_ERROR_API_VERSION_2);
    return 0;
}

int
stele_remote_check(const char *dir, const stele_sink_options_t *sink, uint64_t from_seq,
                   uint64_t to_seq, stele_remote_report_t *report, stele_error_t *err)
{
    if (!dir || !report || (to_seq && from_seq > to_seq))
        return error_set(err, STELE_EINVAL, "remote check: bad arguments");
    memset(report, 0, sizeof *report);
    ship_target_t t;
    int rc = ship_target_init(&t, sink, err);
    if (rc != 0)
        return rc;
    journal_reader_t *r = NULL;
    mongoc_client_t *client = NULL;
    mongoc_collection_t *coll = NULL;
    ship_check_cursor_t remote = {.error_doc = BSON_INITIALIZER};
    rc = ship_open_range_reader(dir, from_seq, &r, err);
    if (rc == 0)
        rc = ship_check_client_new(&t, &client, err);
    if (rc != 0)
        goto done;
    coll = mongoc_client_get_collection(client, t.database, t.collection);
    rc = ship_check_compare(&t, r, coll, from_seq, to_seq, &remote, report, err);
    if (rc == 0)
        rc = ship_check_verdict(&t, &remote, report, err);
done:
    mongoc_cursor_destroy(remote.cursor);
    bson_destroy(&remote.error_doc);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
    journal_reader_close(r);
    ship_target_free(&t);
    return rc;
}

/* Reads records next_seq..to_seq (as many as fit a batch) without waiting. */
static int
ship_fill_range(shipper_t *s, journal_reader_t *r, uint64_t to_seq, ship_batch_t *b,
                stele_error_t *err)
{
    const stele_sink_options_t *o = &s->target.opts;
    const ship_doc_shape_t shape = shipper_doc_shape(s);
    while (b->n < o->batch_docs && b->bytes < o->batch_bytes) {
        journal_record_t rec;
        int rc = journal_reader_next(r, &rec, err);
        if (rc == STELE_EAGAIN)
            return 0;
        if (rc != 0)
            return rc;
        if (rec.seq > to_seq)
            return 0;
        b->bytes += ship_doc_fill(&b->docs[b->n++], &shape, &rec);
    }
    return 0;
}

/* Sends the records up to to_seq batch by batch, until the first batch that fails. */
static int
ship_reship_batches(shipper_t *s, journal_reader_t *r, uint64_t to_seq, stele_error_t *err)
{
    ship_scratch_t sc;
    int rc = shipper_scratch_init(s, &sc);
    if (rc != 0)
        error_set(err, rc, "re-ship: out of memory");
    while (rc == 0) {
        ship_batch_clear(&sc.batch);
        rc = ship_fill_range(s, r, to_seq, &sc.batch, err);
        if (rc != 0 || sc.batch.n == 0)
            break;
        /* Without an index a refused document is not dead-lettered: it fails the re-ship. */
        rc = shipper_oneshot_send(s, &sc.batch, sc.ptrs, sc.map, err);
    }
    shipper_scratch_free(&sc);
    return rc;
}

int
stele_reship(const char *dir, const stele_sink_options_t *sink, uint64_t from_seq, uint64_t to_seq,
             uint64_t *n_inserted, stele_error_t *err)
{
    if (n_inserted)
        *n_inserted = 0;
    if (!dir || (to_seq && from_seq > to_seq))
        return error_set(err, STELE_EINVAL, "re-ship: bad arguments");
    shipper_t *s = NULL;
    journal_reader_t *r = NULL;
    int rc = shipper_oneshot_open(sink, NULL, &s, err);
    if (rc == 0)
        rc = ship_open_range_reader(dir, from_seq, &r, err);
    if (rc == 0)
        rc = shipper_oneshot_attach(s, r, err);
    if (rc == 0)
        rc = ship_reship_batches(s, r, to_seq ? to_seq : UINT64_MAX, err);
    if (n_inserted && s)
        *n_inserted = s->n_inserted;
    journal_reader_close(r);
    shipper_free(s);
    return rc;
}
