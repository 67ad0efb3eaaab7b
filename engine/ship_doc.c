/*
 * ship_doc.c: the document a record becomes in a sink, and the batch that carries documents
 * to it.
 *
 * Owns: the shape of a shipped document (_id {src, seq}, the sink's time field, the event's
 * fields at top level, and under STELE_META_FIELD the timestamp, the chain hash, the
 * previous hash and the origin block; ship_doc_shape_t holds what a shipper fixes of it), its
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
#include <stdio.h>
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

/* The record's time as a BSON date (ms, rounded down, also before 1970). */
static int64_t
ship_doc_time_ms(const journal_record_t *rec)
{
    return ship_floor_div(rec->ts_ns, 1000000);
}

/* 1 when an event's top-level key is part of the envelope under this shape. */
static int
ship_doc_key_is_envelope(const ship_doc_shape_t *shape, const char *key)
{
    return !strcmp(key, "_id") || !strcmp(key, STELE_META_FIELD) || !strcmp(key, shape->time_field);
}

/* Who appended a version 2 record (FORMAT.md section 3, the origin block): part of its leaf
 * data, so a verifier of the remote copy recomputes the leaf from the document. */
static void
ship_append_origin(bson_t *meta, const journal_record_t *rec)
{
    bson_t origin;
    BSON_APPEND_DOCUMENT_BEGIN(meta, "origin", &origin);
    BSON_APPEND_INT64(&origin, "uid", rec->origin.uid);
    BSON_APPEND_INT64(&origin, "gid", rec->origin.gid);
    BSON_APPEND_INT64(&origin, "pid", rec->origin.pid);
    BSON_APPEND_INT64(&origin, "kind", rec->origin.kind);
    bson_append_document_end(meta, &origin);
}

static void
ship_append_meta(bson_t *doc, const journal_record_t *rec)
{
    bson_t meta;
    BSON_APPEND_DOCUMENT_BEGIN(doc, STELE_META_FIELD, &meta);
    BSON_APPEND_DATE_TIME(&meta, "ts", ship_doc_time_ms(rec));
    BSON_APPEND_INT64(&meta, "ts_ns", rec->ts_ns);
    BSON_APPEND_BINARY(&meta, "hash", BSON_SUBTYPE_BINARY, rec->hash, SHIP_HASH_BYTES);
    BSON_APPEND_BINARY(&meta, "prev_hash", BSON_SUBTYPE_BINARY, rec->prev_hash, SHIP_HASH_BYTES);
    if (rec->version >= 2)
        ship_append_origin(&meta, rec);
    bson_append_document_end(doc, &meta);
}

/*
 * Builds the shipped document of a record into *out (empty, from bson_new): _id {src, seq},
 * the time field (BSON date, ms), the event's fields at top level, and under STELE_META_FIELD
 * the timestamp (BSON date, ms, and ts_ns as int64), the chain hash, the previous hash and,
 * for a version 2 record, its origin {uid, gid, pid, kind} (int64 each). Returns 0, or STELE_EBSON
 * when the payload is not a document or uses a key of the envelope (the validator prevents both in
 * journals opened with this sink; a foreign journal, or one written before the sink named its time
 * field, could still hold them).
 */
static int
ship_doc_build(const ship_doc_shape_t *shape, const journal_record_t *rec, bson_t *out)
{
    ship_append_id(out, shape->source, rec->seq);
    BSON_APPEND_DATE_TIME(out, shape->time_field, ship_doc_time_ms(rec));
    bson_t event;
    bson_iter_t it;
    if (!bson_init_static(&event, rec->payload, rec->payload_len) || !bson_iter_init(&it, &event))
        return STELE_EBSON;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (ship_doc_key_is_envelope(shape, key))
            return STELE_EBSON;
        if (!bson_append_iter(out, key, (int)bson_iter_key_len(&it), &it))
            return STELE_EBSON;
    }
    ship_append_meta(out, rec);
    return 0;
}

void
ship_doc_unbuildable_reason(const ship_doc_shape_t *shape, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "event is not a document or uses a reserved top-level key (_id, " STELE_META_FIELD
             ", or the sink's time_field %s)",
             shape->time_field);
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
ship_doc_fill(ship_doc_t *d, const ship_doc_shape_t *shape, const journal_record_t *rec)
{
    d->seq = rec->seq;
    d->ts_ns = rec->ts_ns;
    d->is_done = 0;
    memcpy(d->hash, rec->hash, SHIP_HASH_BYTES);
    d->doc = bson_new();
    d->is_unbuildable = ship_doc_build(shape, rec, d->doc) != 0;
    return d->doc->len;
}
