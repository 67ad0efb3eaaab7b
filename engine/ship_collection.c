/*
 * ship_collection.c: the commands a shipper sends to its sink's collection while it ships:
 * find the newest document of a source, find which documents of a batch are stored already,
 * and insert a batch's pending documents. Preparing the collection (its indexes, a
 * time-series collection) is ship_setup.c's.
 *
 * Owns: the shape of those commands (filters, projections, sort, the write concern of the
 * insert, the read concern of every find). Does not own what a failure means
 * (ship_classify.c) nor what to do about it (the shipper: retries, dead letters, stops);
 * each command runs once, on a client its caller popped from the pool.
 *
 * Invariants: an insert is one ordered insert_many carrying the sink's write concern, so the
 * documents before a refused one are stored and those after are not; a document counts as
 * stored already only when its chain hash is the one in the batch (any other hash is
 * STELE_EINTEGRITY); every find uses the sink's read concern.
 *
 * Threads and locks: no lock; the caller owns the client and the batch.
 */
#include "ship_mongo.h"
#include "validate.h" /* STELE_META_FIELD */

#include <stdint.h>
#include <string.h>

/* Replaces *reply (initialised) by a copy of a cursor's error document, if any. */
static void
ship_copy_reply(const bson_t *err_doc, bson_t *reply)
{
    if (!err_doc)
        return;
    bson_destroy(reply);
    bson_copy_to(err_doc, reply);
}

int
ship_collection_newest(const ship_target_t *t, mongoc_client_t *client, const char *source,
                       ship_remote_last_t *out, bson_error_t *berr, bson_t *reply)
{
    mongoc_collection_t *coll = mongoc_client_get_collection(client, t->database, t->collection);
    bson_t *filter = BCON_NEW("_id.src", BCON_UTF8(source));
    bson_t *opts =
        BCON_NEW("sort", "{", "_id.seq", BCON_INT32(-1), "}", "limit", BCON_INT64(1), "projection",
                 "{", "_id", BCON_INT32(1), STELE_META_FIELD ".hash", BCON_INT32(1), "}");
    ship_target_append_read_concern(t, opts);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, filter, opts, NULL);
    const bson_t *doc;
    memset(out, 0, sizeof *out);
    int rc = 0;
    const uint8_t *hash = NULL;
    if (mongoc_cursor_next(cursor, &doc) && ship_doc_identity(doc, &out->seq, &hash) == 0 && hash) {
        memcpy(out->hash, hash, SHIP_HASH_BYTES);
        out->has_hash = 1;
    }
    const bson_t *err_doc = NULL;
    if (mongoc_cursor_error_document(cursor, berr, &err_doc)) {
        ship_copy_reply(err_doc, reply);
        rc = STELE_EREMOTE;
    }
    mongoc_cursor_destroy(cursor);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return rc;
}

int
ship_collection_resolve_duplicates(const ship_target_t *t, mongoc_client_t *client,
                                   const char *source, ship_batch_t *b, size_t from,
                                   uint64_t *bad_seq, bson_error_t *berr, bson_t *reply)
{
    bson_t filter = BSON_INITIALIZER, id_cond, in_array;
    BSON_APPEND_DOCUMENT_BEGIN(&filter, "_id", &id_cond);
    BSON_APPEND_ARRAY_BEGIN(&id_cond, "$in", &in_array);
    uint32_t n_ids = 0;
    for (size_t i = from; i < b->n; i++) {
        if (b->docs[i].is_done)
            continue;
        char key[16];
        const char *key_ptr;
        bson_uint32_to_string(n_ids++, &key_ptr, key, sizeof key);
        bson_t id;
        bson_append_document_begin(&in_array, key_ptr, -1, &id);
        BSON_APPEND_UTF8(&id, "src", source);
        BSON_APPEND_INT64(&id, "seq", (int64_t)b->docs[i].seq);
        bson_append_document_end(&in_array, &id);
    }
    bson_append_array_end(&id_cond, &in_array);
    bson_append_document_end(&filter, &id_cond);
    bson_t *opts = BCON_NEW("projection", "{", "_id", BCON_INT32(1), STELE_META_FIELD ".hash",
                            BCON_INT32(1), "}");
    ship_target_append_read_concern(t, opts);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, t->database, t->collection);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, &filter, opts, NULL);
    int rc = 0;
    const bson_t *doc;
    uint64_t first_seq = b->docs[0].seq;
    while (rc == 0 && mongoc_cursor_next(cursor, &doc)) {
        uint64_t seq;
        const uint8_t *hash;
        if (ship_doc_identity(doc, &seq, &hash) != 0 || seq < first_seq + from ||
            seq >= first_seq + b->n)
            continue;
        ship_doc_t *d = &b->docs[seq - first_seq];
        if (!hash || memcmp(hash, d->hash, SHIP_HASH_BYTES) != 0) {
            *bad_seq = seq;
            rc = STELE_EINTEGRITY;
        } else {
            d->is_done = 1;
        }
    }
    const bson_t *err_doc = NULL;
    if (rc == 0 && mongoc_cursor_error_document(cursor, berr, &err_doc)) {
        ship_copy_reply(err_doc, reply);
        rc = STELE_EREMOTE;
    }
    mongoc_cursor_destroy(cursor);
    mongoc_collection_destroy(coll);
    bson_destroy(opts);
    bson_destroy(&filter);
    return rc;
}

void
ship_collection_insert_pending(const ship_target_t *t, mongoc_client_t *client, ship_batch_t *b,
                               size_t max_docs, const bson_t **ptrs, size_t *map,
                               ship_attempt_t *out)
{
    size_t n = 0;
    for (size_t i = 0; i < b->n && n < max_docs; i++) {
        if (b->docs[i].is_done)
            continue;
        map[n] = i;
        ptrs[n++] = b->docs[i].doc;
    }
    memset(out, 0, sizeof *out);
    if (n == 0) {
        out->is_ok = 1;
        return;
    }
    mongoc_collection_t *coll = mongoc_client_get_collection(client, t->database, t->collection);
    bson_t opts = BSON_INITIALIZER;
    BSON_APPEND_BOOL(&opts, "ordered", true);
    /* The journal's validator already decided what an event may hold; dotted keys are legal
     * on MongoDB 5+, so let the server judge each document and reject it alone. */
    BSON_APPEND_BOOL(&opts, "validate", false);
    mongoc_write_concern_append(t->write_concern, &opts);
    bson_t reply;
    bool ok = mongoc_collection_insert_many(coll, ptrs, n, &opts, &reply, &out->error);
    if (ok) {
        for (size_t k = 0; k < n; k++)
            b->docs[map[k]].is_done = 1;
        out->is_ok = 1;
        out->n_inserted = n;
    } else {
        size_t index = 0;
        out->verdict = shipper_classify(&out->error, &reply, &index);
        if (out->verdict == SHIPPER_DUPLICATE || out->verdict == SHIPPER_DEAD_LETTER) {
            if (index >= n)
                out->verdict = SHIPPER_RETRY;
            else {
                for (size_t k = 0; k < index; k++)
                    b->docs[map[k]].is_done = 1;
                out->bad_index = map[index];
                out->n_inserted = index;
            }
        } else if (out->verdict == SHIPPER_SPLIT) {
            out->bad_index = map[0];
        }
    }
    bson_destroy(&reply);
    bson_destroy(&opts);
    mongoc_collection_destroy(coll);
}
