/*
 * ship_trust.c: a signed journal's statements (checkpoints and key statements, FORMAT.md
 * section 11.2) on their way to a sink's companion collection, `<collection>_checkpoints`
 * (SHIP_TRUST_SUFFIX), where `stele verify --mongo --trust` finds them.
 *
 * Owns: taking a meta frame the shipper's reader returned (ship_trust_take: a copy of its
 * signed note and, for a retention checkpoint, the tree at the new first seq from that
 * segment's header), the document it
 * becomes, and its delivery (ship_trust_deliver: one step of the shipper's retry loop,
 * shipper_retry_step_ex, which stops on a statement stored with another text). Does not own when a
 * statement is taken (ship.c cuts a batch at each meta frame and delivers the statement once
 * the records before it are acknowledged), nor what a statement means (journal/meta.c) or
 * whether its signature holds (ship_verify.c, the verifier).
 *
 * Invariants: a statement's _id depends only on its text: {src, key_epoch} for a key
 * statement, {src, size, sha} for a checkpoint, sha the start of SHA-256 of its signed note
 * (the writer may take several at one size: an idle journal's interval checkpoints, a roll,
 * a close; two with the same text say the same). Delivery inserts; a document stored under the same
 * _id with the same note is success (a retry, a restart), one with another note stops the sink
 * (STELE_EINTEGRITY): nothing stored is ever overwritten, as for records.
 *
 * Threads and locks: a ship_trust_t belongs to its shipper's thread; delivery takes a
 * client from the shipper's pool for each attempt.
 */
#include "ship_mongo.h"
#include "error.h"

#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

void
ship_trust_companion_name(const char *collection, char *out, size_t cap)
{
    snprintf(out, cap, "%s%s", collection, SHIP_TRUST_SUFFIX);
}

/* The tree at retention's new first seq, from the header of the segment that starts there:
 * what a verifier needs to recompute roots from that seq on. Left empty when the segment is
 * gone already (a later retention point supersedes this one). */
static void
ship_trust_take_range(ship_statement_t *st, journal_reader_t *r)
{
    journal_segment_trust_t seg;
    stele_error_t err = {0};
    st->range_len = 0;
    if (st->m.first_seq < 1 || journal_reader_segment_trust(r, st->m.first_seq, &seg, &err) != 0 ||
        seg.range.size != st->m.first_seq - 1)
        return;
    st->range_len = merkle_range_encode(&seg.range, st->range, sizeof st->range);
}

void
ship_trust_take(ship_trust_t *t, journal_reader_t *r, const journal_record_t *rec)
{
    ship_statement_t *st = &t->pending;
    memset(st, 0, sizeof *st);
    st->size = rec->seq;
    size_t len = rec->payload_len > 0 ? rec->payload_len - 1u : 0;
    if (len > META_NOTE_MAX_BYTES)
        len = META_NOTE_MAX_BYTES;
    memcpy(st->note, rec->payload + 1, len);
    st->note[len] = '\0';
    st->note_len = len;
    stele_error_t err = {0};
    st->is_parsed = meta_read_unsigned(rec->payload, rec->payload_len, &st->m, &err) == 0;
    st->is_key = st->is_parsed && meta_reason_is_key(st->m.reason);
    if (st->is_parsed && st->m.reason == META_REASON_RETENTION)
        ship_trust_take_range(st, r);
    t->has_pending = 1;
}

int
ship_trust_note_id(const char *note, size_t len, char out[2 * SHIP_TRUST_ID_HASH_BYTES + 1])
{
    uint8_t digest[EVP_MAX_MD_SIZE];
    unsigned digest_len = 0;
    if (EVP_Digest(note, len, digest, &digest_len, EVP_sha256(), NULL) != 1)
        return -1;
    for (size_t i = 0; i < SHIP_TRUST_ID_HASH_BYTES; i++)
        snprintf(out + 2 * i, 3, "%02x", digest[i]);
    return 0;
}

static void
ship_trust_append_id(bson_t *doc, const char *source, const ship_statement_t *st)
{
    bson_t id;
    BSON_APPEND_DOCUMENT_BEGIN(doc, "_id", &id);
    BSON_APPEND_UTF8(&id, "src", source);
    if (st->is_key) {
        BSON_APPEND_INT64(&id, "key_epoch", (int64_t)st->m.key_epoch);
    } else {
        char sha[2 * SHIP_TRUST_ID_HASH_BYTES + 1] = "";
        ship_trust_note_id(st->note, st->note_len, sha);
        BSON_APPEND_INT64(&id, "size", (int64_t)st->size);
        BSON_APPEND_UTF8(&id, "sha", sha);
    }
    bson_append_document_end(doc, &id);
}

void
ship_trust_doc(const ship_statement_t *st, const char *source, bson_t *out)
{
    ship_trust_append_id(out, source, st);
    BSON_APPEND_UTF8(out, "type", st->is_key ? "key" : "checkpoint");
    BSON_APPEND_INT64(out, "size", (int64_t)st->size);
    if (st->is_parsed) {
        BSON_APPEND_UTF8(out, "reason", meta_reason_name(st->m.reason));
        BSON_APPEND_INT64(out, "epoch", (int64_t)st->m.epoch);
        BSON_APPEND_INT64(out, "time_ns", st->m.time_ns);
        if (st->m.reason == META_REASON_RETENTION)
            BSON_APPEND_INT64(out, "first", (int64_t)st->m.first_seq);
    }
    if (st->range_len > 0)
        BSON_APPEND_BINARY(out, "range", BSON_SUBTYPE_BINARY, st->range, (uint32_t)st->range_len);
    bson_append_utf8(out, "note", 4, st->note, (int)st->note_len);
}

/* The note stored under the statement's _id: 1 when it is the same, 0 when it differs or
 * is absent, -1 when the lookup failed (*berr set). */
static int
ship_trust_stored_same(mongoc_collection_t *coll, const bson_t *doc, const ship_statement_t *st,
                       bson_error_t *berr)
{
    bson_iter_t it;
    bson_t filter = BSON_INITIALIZER;
    if (bson_iter_init_find(&it, doc, "_id"))
        bson_append_iter(&filter, "_id", 3, &it);
    mongoc_cursor_t *cursor = mongoc_collection_find_with_opts(coll, &filter, NULL, NULL);
    const bson_t *found;
    int same = 0;
    if (mongoc_cursor_next(cursor, &found)) {
        uint32_t len = 0;
        const char *note = bson_iter_init_find(&it, found, "note") && BSON_ITER_HOLDS_UTF8(&it)
                               ? bson_iter_utf8(&it, &len)
                               : NULL;
        same = note && len == st->note_len && memcmp(note, st->note, len) == 0;
    } else if (mongoc_cursor_error(cursor, berr)) {
        same = -1;
    }
    mongoc_cursor_destroy(cursor);
    bson_destroy(&filter);
    return same;
}

/* One attempt, a step of shipper_retry_step_ex: 0 (stored, or found stored the same),
 * STELE_EINTEGRITY (stored with another note: the sink is stopped), or STELE_EREMOTE with
 * *berr and *reply describing the failure. */
static int
ship_trust_try(shipper_t *s, mongoc_client_t *client, bson_error_t *berr, bson_t *reply, void *ctx)
{
    const ship_statement_t *st = ctx;
    char name[SHIP_TRUST_NAME_BYTES];
    ship_trust_companion_name(s->target.collection, name, sizeof name);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, s->target.database, name);
    bson_t doc = BSON_INITIALIZER, opts = BSON_INITIALIZER;
    ship_trust_doc(st, s->source, &doc);
    mongoc_write_concern_append(s->target.write_concern, &opts);
    int rc = 0;
    if (!mongoc_collection_insert_one(coll, &doc, &opts, reply, berr)) {
        size_t index;
        rc = STELE_EREMOTE;
        if (shipper_classify(berr, reply, &index) == SHIPPER_DUPLICATE) {
            int same = ship_trust_stored_same(coll, &doc, st, berr);
            rc = same == 1 ? 0 : same == 0 ? STELE_EINTEGRITY : STELE_EREMOTE;
        }
    }
    bson_destroy(&opts);
    bson_destroy(&doc);
    mongoc_collection_destroy(coll);
    if (rc == STELE_EINTEGRITY)
        shipper_note_error(s, 1,
                           "sink %s: the statement of tree size %" PRIu64
                           " is stored in %s" SHIP_TRUST_SUFFIX
                           " with another text: another journal uses source \"%s\", or "
                           "the copy was altered",
                           s->target.name, st->size, s->target.where, s->source);
    return rc;
}

int
ship_trust_deliver(shipper_t *s, ship_trust_t *t)
{
    char what[64];
    snprintf(what, sizeof what, "statement of tree size %" PRIu64, t->pending.size);
    int rc = shipper_retry_step_ex(s, what, ship_trust_try, &t->pending, SHIP_REFUSAL_RETRY);
    if (rc == 0)
        t->has_pending = 0;
    return rc;
}
