/*
 * remote_reader.c: stele_remote_reader_* (<stele.h>): reads a source's records back from a
 * sink's collection, in seq order, for `stele tail --mongo`.
 *
 * Owns: one mongoc_client_t per reader (not a pool: a reader belongs to one thread), the
 * current cursor, and the conversion of a shipped document back into its record
 * (remote_doc_to_record). Does not write anything remotely or locally.
 *
 * How it reads: one find per chunk, {_id.src, _id.seq >= next_seq, ts_ns in [since, until]}
 * sorted by _id.seq with a limit of REMOTE_CHUNK_DOCS, which the sink's {_id.src, _id.seq}
 * index serves. A query.where filter narrows the find (the seq and time ranges of its seq
 * and ts conditions, the string equalities of event fields) and then decides each record
 * here, with stele_filter_match, so the records returned are exactly those a local reader
 * filtered the same way would keep. A chunk that comes back full is followed at once by the next; a
 * short one means the reader is caught up, and then it polls with exponential backoff
 * (STELE_REMOTE_POLL_MIN_MS doubling to STELE_REMOTE_POLL_MAX_MS, back to the minimum when
 * documents arrive), sleeping between polls instead of spinning.
 *
 * Invariants: records come out with strictly increasing seqs (next_seq moves past each one
 * returned, so a re-query never repeats one); credentials never appear in a message (the
 * collection is named host:port/db.collection, and libmongoc's text is scrubbed of the
 * password). The sink's database and collection defaults and name rules are
 * ship_target.c's (ship_sink_names), the meaning of a failure ship_classify.c's.
 *
 * Threads: a reader belongs to one thread at a time and holds no lock; libmongoc is
 * initialised once per process, with stele's log handler (ship_mongoc_init_once).
 */
#include "remote_reader.h"

#include <errno.h>
#include <inttypes.h>
#include <mongoc/mongoc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "error.h"
#include "filter.h"     /* query.where: its bounds and string equalities go to the server */
#include "ship_mongo.h" /* shipper_classify, ship_scrub_password: shared with the shippers */
#include "validate.h"   /* STELE_META_FIELD, STELE_ID_FIELD */

#define REMOTE_HASH_BYTES 32
/* Documents per query: bounds one query's work and a cursor's batches; a full chunk is
 * followed at once by the next. */
#define REMOTE_CHUNK_DOCS 10000
#define REMOTE_SOURCE_MAX 63
/* Timeouts applied when the URI sets none (libmongoc's own are 30 s and 5 min). */
#define REMOTE_DEFAULT_SELECT_TIMEOUT_MS 5000
#define REMOTE_DEFAULT_SOCKET_TIMEOUT_MS 60000
/* remote_take: a document was read but its record does not match query.where. */
#define REMOTE_SKIPPED 2

struct stele_remote_reader {
    mongoc_client_t *client;
    mongoc_collection_t *coll;
    char *source;
    char *password;             /* only to scrub it from messages; NULL when the URI has none */
    char where[256];            /* host:port/db.collection */
    char time_field[64];        /* the sink's: not part of the event (remote_doc_to_record) */
    stele_remote_query_t query; /* source points at `source` */
    mongoc_cursor_t *cursor;    /* NULL between queries */
    size_t chunk_docs;          /* documents the current query returned so far */
    uint64_t next_seq;          /* the next record returned has a seq >= this */
    int64_t next_poll_ms;       /* monotonic: no query before this */
    uint32_t poll_delay_ms;     /* current backoff step */
    bson_t event;               /* the last record's event; rec->bson points into it */
};

static void
remote_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- document -> record ---------------------------------------------------------------- */

static int
remote_bad_doc(stele_error_t *err, const char *where, uint64_t seq, const char *what)
{
    if (seq != 0)
        return error_set_hinted(err, STELE_EINTEGRITY,
                                "only documents shipped by stele can be read back",
                                "document seq %" PRIu64 " in %s %s", seq, where, what);
    return error_set_hinted(err, STELE_EINTEGRITY,
                            "only documents shipped by stele can be read back",
                            "a document in %s %s", where, what);
}

/* Reads _id: checks src, returns the seq (0 when it has none). */
static int
remote_doc_id(const bson_t *doc, const char *source, const char *where, uint64_t *seq_out,
              stele_error_t *err)
{
    bson_iter_t it, seq_it, src_it;
    *seq_out = 0;
    if (!bson_iter_init(&it, doc) ||
        !bson_iter_find_descendant(&it, STELE_ID_FIELD ".seq", &seq_it) ||
        (!BSON_ITER_HOLDS_INT64(&seq_it) && !BSON_ITER_HOLDS_INT32(&seq_it)) ||
        bson_iter_as_int64(&seq_it) < 1)
        return remote_bad_doc(err, where, 0, "has no integer _id.seq >= 1");
    *seq_out = (uint64_t)bson_iter_as_int64(&seq_it);
    if (!bson_iter_init(&it, doc) ||
        !bson_iter_find_descendant(&it, STELE_ID_FIELD ".src", &src_it) ||
        !BSON_ITER_HOLDS_UTF8(&src_it) || strcmp(bson_iter_utf8(&src_it, NULL), source) != 0)
        return remote_bad_doc(err, where, *seq_out, "does not have _id.src of this source");
    return 0;
}

/* Copies a 32-byte binary field of the metadata into out. */
static int
remote_meta_hash(const bson_t *meta, const char *key, uint8_t out[REMOTE_HASH_BYTES])
{
    bson_iter_t it;
    bson_subtype_t subtype;
    uint32_t len = 0;
    const uint8_t *data = NULL;
    if (!bson_iter_init_find(&it, meta, key) || !BSON_ITER_HOLDS_BINARY(&it))
        return -1;
    bson_iter_binary(&it, &subtype, &len, &data);
    if (len != REMOTE_HASH_BYTES || data == NULL)
        return -1;
    memcpy(out, data, REMOTE_HASH_BYTES);
    return 0;
}

/* Reads the metadata sub-document: ts_ns (or ts in ms), hash, prev_hash. */
static int
remote_doc_meta(const bson_t *doc, const char *where, stele_record_t *rec, stele_error_t *err)
{
    bson_iter_t it, ts_it;
    const uint8_t *data = NULL;
    uint32_t len = 0;
    if (!bson_iter_init_find(&it, doc, STELE_META_FIELD) || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return remote_bad_doc(err, where, rec->seq, "has no " STELE_META_FIELD " metadata");
    bson_iter_document(&it, &len, &data);
    bson_t meta;
    if (!bson_init_static(&meta, data, len))
        return remote_bad_doc(err, where, rec->seq, "has malformed " STELE_META_FIELD);
    if (bson_iter_init_find(&ts_it, &meta, "ts_ns") && BSON_ITER_HOLDS_INT64(&ts_it))
        rec->ts_ns = bson_iter_int64(&ts_it);
    else if (bson_iter_init_find(&ts_it, &meta, "ts") && BSON_ITER_HOLDS_DATE_TIME(&ts_it) &&
             bson_iter_date_time(&ts_it) <= INT64_MAX / 1000000 &&
             bson_iter_date_time(&ts_it) >= INT64_MIN / 1000000)
        rec->ts_ns = bson_iter_date_time(&ts_it) * 1000000;
    else
        return remote_bad_doc(err, where, rec->seq,
                              "has no timestamp (" STELE_META_FIELD ".ts_ns or .ts)");
    if (remote_meta_hash(&meta, "hash", rec->hash) != 0 ||
        remote_meta_hash(&meta, "prev_hash", rec->prev_hash) != 0)
        return remote_bad_doc(err, where, rec->seq,
                              "has no 32-byte " STELE_META_FIELD ".hash and .prev_hash");
    return 0;
}

/* 1 when the top-level field at it is the envelope's: _id, the metadata, or the time field
 * (a BSON date: the validator keeps events from using its name). */
static int
remote_key_is_envelope(const bson_iter_t *it, const char *time_field)
{
    const char *key = bson_iter_key(it);
    return strcmp(key, STELE_ID_FIELD) == 0 || strcmp(key, STELE_META_FIELD) == 0 ||
           (strcmp(key, time_field) == 0 && BSON_ITER_HOLDS_DATE_TIME(it));
}

int
remote_doc_to_record(const bson_t *doc, const char *source, const char *time_field,
                     const char *where, bson_t *event, stele_record_t *rec, stele_error_t *err)
{
    if (!time_field)
        time_field = STELE_TIME_FIELD_DEFAULT;
    memset(rec, 0, sizeof *rec);
    int rc = remote_doc_id(doc, source, where, &rec->seq, err);
    if (rc == 0)
        rc = remote_doc_meta(doc, where, rec, err);
    if (rc != 0)
        return rc;
    bson_reinit(event);
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return remote_bad_doc(err, where, rec->seq, "is malformed");
    while (bson_iter_next(&it)) {
        if (remote_key_is_envelope(&it, time_field))
            continue;
        if (!bson_append_iter(event, bson_iter_key(&it), (int)bson_iter_key_len(&it), &it))
            return remote_bad_doc(err, where, rec->seq, "has a field that cannot be copied");
    }
    if (event->len <= 5)
        return remote_bad_doc(err, where, rec->seq, "has no event fields");
    rec->bson = bson_get_data(event);
    rec->bson_len = event->len;
    return 0;
}

/* ---- errors ------------------------------------------------------------------------------ */

/* A failed command or cursor, as STELE_EAUTH or STELE_EREMOTE. */
static int
remote_fail(const stele_remote_reader_t *r, const char *what, const bson_error_t *berr,
            const bson_t *reply, stele_error_t *err)
{
    size_t index = 0;
    int is_auth = shipper_classify(berr, reply, &index) == SHIPPER_STOP_AUTH;
    int code = is_auth ? STELE_EAUTH : STELE_EREMOTE;
    error_set_hinted(err, code,
                     is_auth ? "check the user, password and roles in the URI"
                             : "check that the server is reachable",
                     "%s on %s failed: %s", what, r->where, berr->message);
    if (err)
        ship_scrub_password(r->password, err->message, sizeof err->message);
    return code;
}

/* ---- open / close -------------------------------------------------------------------------- */

/* Parses the URI, applies the timeouts the URI leaves unset, and names the target. */
static int
remote_uri(stele_remote_reader_t *r, const stele_sink_options_t *sink, mongoc_uri_t **uri_out,
           const char **db_out, const char **coll_out, stele_error_t *err)
{
    bson_error_t berr;
    mongoc_uri_t *uri = sink->uri ? mongoc_uri_new_with_error(sink->uri, &berr) : NULL;
    if (uri == NULL) /* libmongoc's message may quote the URI: say only what is wrong */
        return error_set_hinted(err, STELE_ECONFIG,
                                "expected mongodb://[user:pass@]host[:port]/[db]",
                                "invalid mongodb uri");
    const char *db, *coll;
    if (ship_sink_names(sink, mongoc_uri_get_database(uri), &db, &coll) != 0) {
        mongoc_uri_destroy(uri);
        return error_set_hinted(err, STELE_ECONFIG, "names may not contain / \\ . space \" or $",
                                "invalid database or collection name");
    }
    if (mongoc_uri_get_password(uri) &&
        (r->password = strdup(mongoc_uri_get_password(uri))) == NULL) {
        mongoc_uri_destroy(uri);
        return error_set(err, -ENOMEM, "out of memory");
    }
    ship_where(r->where, sizeof r->where, uri, db, coll);
    if (mongoc_uri_get_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, -1) == -1)
        mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
                                       REMOTE_DEFAULT_SELECT_TIMEOUT_MS);
    if (mongoc_uri_get_option_as_int32(uri, MONGOC_URI_SOCKETTIMEOUTMS, -1) == -1)
        mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SOCKETTIMEOUTMS,
                                       REMOTE_DEFAULT_SOCKET_TIMEOUT_MS);
    mongoc_uri_set_appname(uri, "stele-tail");
    *uri_out = uri;
    *db_out = db;
    *coll_out = coll;
    return 0;
}

/* Connects and pings, so that an unreachable server or bad credentials show at open. */
static int
remote_connect(stele_remote_reader_t *r, const stele_sink_options_t *sink, stele_error_t *err)
{
    mongoc_uri_t *uri = NULL;
    const char *db = NULL, *coll = NULL;
    int rc = remote_uri(r, sink, &uri, &db, &coll, err);
    if (rc != 0)
        return rc;
    bson_error_t berr;
    r->client = mongoc_client_new_from_uri_with_error(uri, &berr);
    if (r->client == NULL) {
        mongoc_uri_destroy(uri);
        return error_set(err, STELE_ECONFIG, "could not create a client for %s", r->where);
    }
    mongoc_client_set_error_api(r->client, MONGOC_ERROR_API_VERSION_2);
    r->coll = mongoc_client_get_collection(r->client, db, coll);
    mongoc_uri_destroy(uri);
    bson_t *ping = BCON_NEW("ping", BCON_INT32(1));
    bson_t reply;
    bool ok = mongoc_client_command_simple(r->client, "admin", ping, NULL, &reply, &berr);
    bson_destroy(ping);
    if (!ok)
        rc = remote_fail(r, "ping", &berr, &reply, err);
    bson_destroy(&reply);
    return rc;
}

int
stele_remote_reader_open(const stele_sink_options_t *sink, const stele_remote_query_t *query,
                         stele_remote_reader_t **out, stele_error_t *err)
{
    if (out == NULL || sink == NULL || query == NULL)
        return error_set(err, STELE_EINVAL, "remote reader: sink, query and out are required");
    *out = NULL;
    if (query->source == NULL || query->source[0] == '\0' ||
        strlen(query->source) > REMOTE_SOURCE_MAX)
        return error_set_hinted(err, STELE_EINVAL, "the journal's source name, as in _id.src",
                                "remote reader: source must be 1 to %d bytes", REMOTE_SOURCE_MAX);
    ship_mongoc_init_once(); /* with the log handler: nothing of libmongoc's reaches stdout */
    stele_remote_reader_t *r = calloc(1, sizeof *r);
    if (r == NULL || (r->source = strdup(query->source)) == NULL) {
        free(r);
        return error_set(err, -ENOMEM, "remote reader: out of memory");
    }
    bson_init(&r->event);
    r->query = *query;
    r->query.source = r->source;
    snprintf(r->time_field, sizeof r->time_field, "%s",
             sink->time_field ? sink->time_field : STELE_TIME_FIELD_DEFAULT);
    r->next_seq = query->from_seq > 0 ? query->from_seq : 1;
    r->poll_delay_ms = STELE_REMOTE_POLL_MIN_MS;
    int rc = remote_connect(r, sink, err);
    if (rc != 0) {
        stele_remote_reader_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

void
stele_remote_reader_close(stele_remote_reader_t *r)
{
    if (r == NULL)
        return;
    mongoc_cursor_destroy(r->cursor);
    mongoc_collection_destroy(r->coll);
    mongoc_client_destroy(r->client);
    if (r->password != NULL) {
        memset(r->password, 0, strlen(r->password));
        free(r->password);
    }
    bson_destroy(&r->event);
    free(r->source);
    free(r);
}

/* ---- queries ------------------------------------------------------------------------------ */

int
stele_remote_reader_last_seq(stele_remote_reader_t *r, uint64_t *seq_out, stele_error_t *err)
{
    if (r == NULL || seq_out == NULL)
        return error_set(err, STELE_EINVAL, "remote reader: reader and seq_out are required");
    *seq_out = 0;
    bson_t *filter = BCON_NEW("_id.src", BCON_UTF8(r->source));
    bson_t *opts = BCON_NEW("sort", "{", "_id.seq", BCON_INT32(-1), "}", "limit", BCON_INT64(1),
                            "projection", "{", "_id", BCON_INT32(1), "}");
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(r->coll, filter, opts, NULL);
    const bson_t *doc;
    bson_iter_t it;
    if (mongoc_cursor_next(cursor, &doc) && bson_iter_init(&it, doc) &&
        bson_iter_find_descendant(&it, "_id.seq", &it) && BSON_ITER_HOLDS_NUMBER(&it) &&
        bson_iter_as_int64(&it) > 0)
        *seq_out = (uint64_t)bson_iter_as_int64(&it);
    bson_error_t berr;
    const bson_t *err_doc = NULL;
    int rc = 0;
    if (mongoc_cursor_error_document(cursor, &berr, &err_doc))
        rc = remote_fail(r, "find of the newest document", &berr, err_doc, err);
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    return rc;
}

int
stele_remote_reader_seek_seq(stele_remote_reader_t *r, uint64_t seq, stele_error_t *err)
{
    if (r == NULL)
        return error_set(err, STELE_EINVAL, "remote reader: reader is required");
    mongoc_cursor_destroy(r->cursor);
    r->cursor = NULL;
    r->next_seq = seq > 0 ? seq : 1;
    r->next_poll_ms = 0;
    r->poll_delay_ms = STELE_REMOTE_POLL_MIN_MS;
    return 0;
}

/* Whether an event path can go into a server query as it is: no key may start with '$'
 * (events have none; the server would read one as an operator). */
static int
remote_path_is_plain(const char *path)
{
    return path[0] != '$' && strstr(path, ".$") == NULL;
}

/* The server-side part of query.where (filter.h): the string equalities of event fields
 * (exact in MongoDB as in the filter; the filter still decides, so a server that matches
 * more, e.g. array elements, changes nothing). */
static void
remote_query_add_where(const stele_remote_reader_t *r, bson_t *filter)
{
    const stele_filter_t *where = r->query.where;
    for (size_t i = 0; where != NULL && i < where->n; i++) {
        const filter_condition_t *c = &where->conditions[i];
        if (filter_is_string_equality(c) && remote_path_is_plain(c->path))
            BSON_APPEND_UTF8(filter, c->path, c->value);
    }
}

/* Starts the query of the next chunk: documents of the source from next_seq, in seq order,
 * within --since/--until and the seq and time ranges of query.where. */
static void
remote_query_start(stele_remote_reader_t *r)
{
    filter_bounds_t b;
    filter_bounds(r->query.where, &b);
    if (r->query.has_since && r->query.since_ns > b.min_ts_ns)
        b.min_ts_ns = r->query.since_ns;
    if (r->query.has_until && r->query.until_ns < b.max_ts_ns)
        b.max_ts_ns = r->query.until_ns;
    bson_t filter, seq_range, ts_range;
    bson_init(&filter);
    BSON_APPEND_UTF8(&filter, "_id.src", r->source);
    BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id.seq", &seq_range);
    BSON_APPEND_INT64(&seq_range, "$gte",
                      (int64_t)(b.min_seq > r->next_seq ? b.min_seq : r->next_seq));
    if (b.max_seq <= INT64_MAX)
        BSON_APPEND_INT64(&seq_range, "$lte", (int64_t)b.max_seq);
    bson_append_document_end(&filter, &seq_range);
    if (b.min_ts_ns != INT64_MIN || b.max_ts_ns != INT64_MAX) {
        BSON_APPEND_DOCUMENT_BEGIN(&filter, STELE_META_FIELD ".ts_ns", &ts_range);
        if (b.min_ts_ns != INT64_MIN)
            BSON_APPEND_INT64(&ts_range, "$gte", b.min_ts_ns);
        if (b.max_ts_ns != INT64_MAX)
            BSON_APPEND_INT64(&ts_range, "$lte", b.max_ts_ns);
        bson_append_document_end(&filter, &ts_range);
    }
    remote_query_add_where(r, &filter);
    bson_t *opts = BCON_NEW("sort", "{", "_id.seq", BCON_INT32(1), "}", "limit",
                            BCON_INT64(REMOTE_CHUNK_DOCS));
    r->cursor = mongoc_collection_find_with_opts(r->coll, &filter, opts, NULL);
    r->chunk_docs = 0;
    bson_destroy(opts);
    bson_destroy(&filter);
}

/* Schedules the next poll after the current delay, and doubles the delay up to the cap. */
static void
remote_back_off(stele_remote_reader_t *r)
{
    r->next_poll_ms = clock_mono_ms() + r->poll_delay_ms;
    r->poll_delay_ms = r->poll_delay_ms * 2 > STELE_REMOTE_POLL_MAX_MS ? STELE_REMOTE_POLL_MAX_MS
                                                                       : r->poll_delay_ms * 2;
}

/* The current query is exhausted: a full chunk means more may follow at once; a short one
 * means the reader caught up, so the next poll backs off (from the minimum again when this
 * query brought documents). */
static void
remote_query_end(stele_remote_reader_t *r)
{
    int is_full = r->chunk_docs >= REMOTE_CHUNK_DOCS;
    int got_any = r->chunk_docs > 0;
    mongoc_cursor_destroy(r->cursor);
    r->cursor = NULL;
    if (got_any)
        r->poll_delay_ms = STELE_REMOTE_POLL_MIN_MS;
    if (is_full)
        r->next_poll_ms = 0;
    else
        remote_back_off(r);
}

/* Takes the next document of the current query: 1 with *rec set, REMOTE_SKIPPED when it does
 * not match query.where, 0 when exhausted, or an error code (the cursor is dropped, so the
 * next call re-queries from next_seq). */
static int
remote_take(stele_remote_reader_t *r, stele_record_t *rec, stele_error_t *err)
{
    const bson_t *doc;
    if (mongoc_cursor_next(r->cursor, &doc)) {
        r->chunk_docs++;
        int rc = remote_doc_to_record(doc, r->source, r->time_field, r->where, &r->event, rec, err);
        if (rc == 0 && rec->seq < r->next_seq)
            rc = remote_bad_doc(err, r->where, rec->seq, "came out of seq order");
        if (rc != 0) {
            mongoc_cursor_destroy(r->cursor);
            r->cursor = NULL;
            return rc;
        }
        r->next_seq = rec->seq + 1;
        if (r->query.where == NULL)
            return 1;
        rc = stele_filter_match(r->query.where, rec, r->source);
        if (rc < 0)
            return error_set(err, rc, "document seq %" PRIu64 " in %s could not be filtered",
                             rec->seq, r->where);
        return rc == 1 ? 1 : REMOTE_SKIPPED;
    }
    bson_error_t berr;
    const bson_t *err_doc = NULL;
    if (mongoc_cursor_error_document(r->cursor, &berr, &err_doc)) {
        int rc = remote_fail(r, "find", &berr, err_doc, err);
        mongoc_cursor_destroy(r->cursor);
        r->cursor = NULL;
        remote_back_off(r); /* a caller that retries does not hammer a failing server */
        return rc;
    }
    remote_query_end(r);
    return 0;
}

int
stele_remote_reader_next(stele_remote_reader_t *r, stele_record_t *rec, int64_t timeout_ms,
                         stele_error_t *err)
{
    if (r == NULL || rec == NULL)
        return error_set(err, STELE_EINVAL, "remote reader: reader and rec are required");
    if (timeout_ms < -1)
        return error_set(err, STELE_EINVAL, "remote reader: timeout_ms %" PRId64 " is below -1",
                         timeout_ms);
    int64_t start_ms = clock_mono_ms();
    int64_t deadline_ms =
        timeout_ms < 0 || timeout_ms > INT64_MAX - start_ms ? INT64_MAX : start_ms + timeout_ms;
    for (;;) {
        if (r->cursor != NULL) {
            int rc = remote_take(r, rec, err);
            if (rc == 1)
                return 0;
            if (rc != 0 && rc != REMOTE_SKIPPED)
                return rc;
            continue;
        }
        int64_t now_ms = clock_mono_ms();
        if (now_ms >= r->next_poll_ms) {
            remote_query_start(r);
            continue;
        }
        if (now_ms >= deadline_ms)
            return STELE_EAGAIN;
        remote_sleep_ms((r->next_poll_ms < deadline_ms ? r->next_poll_ms : deadline_ms) - now_ms);
    }
}
