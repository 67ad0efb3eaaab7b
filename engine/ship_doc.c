/*
 * ship_doc.c: the document a record becomes in a sink, and the batch that carries documents
 * to it.
 *
 * Owns: the shape of a shipped document (_id {src, seq}, the event's fields at top level,
 * and under STELE_META_FIELD the timestamp, the chain hash and the previous hash), its
 * identity read back from a stored document, and a batch's documents. Does not own the
 * reading of records (the shipper's journal reader), nor the way back from a document to
 * a record (remote_reader.c).
 *
 * Invariants: a document's _id is a function of (source, seq) only, so a retried insert
 * never makes a second copy; a batch's docs array is allocated by its owner once and never
 * grows (ship_batch_clear frees the documents, not the array).
 *
 * Threads and locks: none; a batch belongs to one thread.
 */
#include "ship_mongo.h"
#include "validate.h" /* STELE_META_FIELD */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void
ship_batch_clear(ship_batch_t *b)
{
    for (size_t i = 0; i < b->n; i++)
        bson_destroy(b->docs[i].doc);
    b->n = 0;
    b->bytes = 0;
}

void
ship_batch_free(ship_batch_t *b)
{
    ship_batch_clear(b);
    free(b->docs);
    memset(b, 0, sizeof *b);
}

static void
ship_append_id(bson_t *doc, const char *source, uint64_t seq)
{
    bson_t id;
    BSON_APPEND_DOCUMENT_BEGIN(doc, "_id", &id);
    BSON_APPEND_UTF8(&id, "src", source);
    BSON_APPEND_INT64(&id, "seq", (int64_t)seq);
    bson_append_document_end(doc, &id);
}

static int64_t
ship_floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/*
 * Builds the shipped document of a record into *out (empty, from bson_new): _id {src, seq}, the
 * event's fields at top level, and under STELE_META_FIELD the timestamp (BSON date, ms, and ts_ns
 * as int64), the chain hash and the previous hash. Returns 0, or STELE_EBSON when the payload is
 * not a document or uses a reserved key (the validator prevents both; a foreign journal could still
 * hold them).
 */
static int
ship_doc_build(const char *source, const journal_record_t *rec, bson_t *out)
{
    ship_append_id(out, source, rec->seq);
    bson_t event;
    bson_iter_t it;
    if (!bson_init_static(&event, rec->payload, rec->payload_len) || !bson_iter_init(&it, &event))
        return STELE_EBSON;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (!strcmp(key, "_id") || !strcmp(key, STELE_META_FIELD))
            return STELE_EBSON;
        if (!bson_append_iter(out, key, (int)bson_iter_key_len(&it), &it))
            return STELE_EBSON;
    }
    bson_t meta;
    BSON_APPEND_DOCUMENT_BEGIN(out, STELE_META_FIELD, &meta);
    BSON_APPEND_DATE_TIME(&meta, "ts", ship_floor_div(rec->ts_ns, 1000000));
    BSON_APPEND_INT64(&meta, "ts_ns", rec->ts_ns);
    BSON_APPEND_BINARY(&meta, "hash", BSON_SUBTYPE_BINARY, rec->hash, SHIP_HASH_BYTES);
    BSON_APPEND_BINARY(&meta, "prev_hash", BSON_SUBTYPE_BINARY, rec->prev_hash, SHIP_HASH_BYTES);
    bson_append_document_end(out, &meta);
    return 0;
}

int
ship_doc_identity(const bson_t *doc, uint64_t *seq_out, const uint8_t **hash_out)
{
    bson_iter_t it;
    const uint8_t *hash = NULL;
    uint32_t hash_len = 0;
    bson_subtype_t subtype;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, "_id.seq", &it) ||
        !BSON_ITER_HOLDS_NUMBER(&it))
        return STELE_EINTEGRITY;
    *seq_out = (uint64_t)bson_iter_as_int64(&it);
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, STELE_META_FIELD ".hash", &it) &&
        BSON_ITER_HOLDS_BINARY(&it))
        bson_iter_binary(&it, &subtype, &hash_len, &hash);
    *hash_out = hash_len == SHIP_HASH_BYTES ? hash : NULL;
    return 0;
}

size_t
ship_doc_fill(ship_doc_t *d, const char *source, const journal_record_t *rec)
{
    d->seq = rec->seq;
    d->ts_ns = rec->ts_ns;
    d->is_done = 0;
    memcpy(d->hash, rec->hash, SHIP_HASH_BYTES);
    d->doc = bson_new();
    d->is_unbuildable = ship_doc_build(source, rec, d->doc) != 0;
    return d->doc->len;
}
