/*
 * ship_verify.c: stele_remote_verify_trusted(): a sink's copy of a signed journal checked on
 * its own, against the trust anchor and the statements shipped to its companion collection
 * (ship_trust.c), with no journal at hand. FORMAT.md section 11.5's checks, for documents:
 *
 *  1. the key statements, epoch 0 up, each signed by the key before it (the first by the
 *     anchor, naming it), all naming one journal: stele/<source>/<genesis>;
 *  2. every checkpoint signed by the key of an epoch in force at its tree size (from the
 *     rotation to that epoch up to the next one), naming that epoch, its _id its own, times
 *     and epochs never going back;
 *  3. the documents from seq 1 (or a signed retention point whose shipped tree reproduces
 *     the later roots) to the newest checkpoint: each one's leaf recomputed from its fields
 *     (seq, _stele.ts_ns, _stele.origin, the event's fields in stored order as BSON), linked
 *     to the chain hash the document before it carries, and the Merkle root at every
 *     statement's tree size compared with the signed one.
 *
 * Owns: the walk and its report (missing, extra and mismatched seqs as ranges, the first
 * divergence named). A document whose own chain hash its fields contradict is named
 * exactly; one altered along with every later chain hash is caught by the root of the first
 * checkpoint after it, which names the first record after the last root that held. Does not
 * own the document's shape (ship_doc.c, remote_reader.c), statements' texts (meta.c).
 *
 * Threads: each call has its own client and hashers; no lock. Read-only everywhere.
 */
#include "ship_mongo.h"
#include "chain.h"
#include "error.h"
#include "remote_reader.h"
#include "sigkey.h"
#include "validate.h" /* STELE_META_FIELD */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* Seqs per query of the documents: the server sorts at most this many at a time. */
#define RV_CHUNK_SEQS 20000
/* Socket timeout of the queries when the URI sets none: chunks are sorted on the server. */
#define RV_SOCKET_TIMEOUT_MS 300000
#define RV_ORIGIN_PREFIX "stele/"

/* A signed tree head: a statement's size and root, in tree order. */
typedef struct rv_head {
    uint64_t size;
    uint8_t root[MERKLE_HASH_BYTES];
} rv_head_t;

/* A retention checkpoint that verified, with the tree it shipped. */
typedef struct rv_retention {
    uint64_t first_seq;
    merkle_range_t range;
} rv_retention_t;

typedef struct rv_walk {
    stele_remote_trust_report_t *rep;
    ship_target_t t;
    mongoc_client_t *client;
    mongoc_collection_t *docs, *statements;
    const char *source;
    char companion[SHIP_TRUST_NAME_BYTES];
    char origin[CHECKPOINT_ORIGIN_MAX_BYTES + 1];
    uint8_t genesis[MERKLE_HASH_BYTES];
    note_verifier_t *keys; /* keys[e]: the key of epoch e */
    uint64_t *key_sizes;   /* the tree size of the statement that put keys[e] in force */
    size_t n_keys;
    rv_head_t *heads; /* every statement's size and root, sorted by size */
    size_t n_heads, cap_heads;
    rv_retention_t retention; /* the newest usable retention point (first_seq 0: none) */
    merkle_hasher_t *mh;
    chain_hasher_t *ch;
    bson_t event;
    /* the document walk */
    merkle_range_t range;
    size_t next_head;
    uint64_t next_seq;      /* the seq the next document should have */
    uint64_t good_size;     /* the tree size of the last root that held */
    uint64_t last_mismatch; /* the last seq found mismatched (0: none) */
    int is_tree_broken;     /* a document is missing: no root can be computed past it */
    int is_root_failed;     /* a root did not hold: later ones are not compared */
    int has_prev;           /* prev_hash holds the chain hash of seq next_seq - 1 */
    uint8_t prev_hash[MERKLE_HASH_BYTES];
} rv_walk_t;

static int rv_bad(rv_walk_t *w, uint64_t seq, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records a divergence at seq; the report names the first by seq. Returns STELE_EINTEGRITY. */
static int
rv_bad(rv_walk_t *w, uint64_t seq, const char *fmt, ...)
{
    stele_remote_trust_report_t *rep = w->rep;
    if (seq == 0)
        seq = 1;
    if (rep->bad_seq == 0 || seq < rep->bad_seq) {
        rep->bad_seq = seq;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rep->what, sizeof rep->what, fmt, ap);
        va_end(ap);
    }
    return STELE_EINTEGRITY;
}

/* Adds seqs first..last to one of the report's lists, merging with the range before. */
static void
rv_ranges_add(uint64_t *n_seqs, size_t *n_ranges, stele_seq_range_t *ranges, uint64_t first,
              uint64_t last)
{
    *n_seqs += last - first + 1;
    size_t n = *n_ranges;
    if (n > 0 && n <= STELE_REMOTE_MAX_RANGES && ranges[n - 1].last_seq + 1 == first) {
        ranges[n - 1].last_seq = last;
        return;
    }
    if (n < STELE_REMOTE_MAX_RANGES)
        ranges[n] = (stele_seq_range_t){first, last};
    (*n_ranges)++;
}

static void
rv_missing(rv_walk_t *w, uint64_t first, uint64_t last)
{
    stele_remote_report_t *r = &w->rep->ranges;
    rv_ranges_add(&r->n_missing, &r->n_missing_ranges, r->missing, first, last);
    if (first == last)
        rv_bad(w, first, "document seq %" PRIu64 " is missing", first);
    else
        rv_bad(w, first, "documents seq %" PRIu64 "..%" PRIu64 " are missing", first, last);
}

static void
rv_mismatched(rv_walk_t *w, uint64_t first, uint64_t last, const char *why)
{
    stele_remote_report_t *r = &w->rep->ranges;
    rv_ranges_add(&r->n_mismatched, &r->n_mismatched_ranges, r->mismatched, first, last);
    w->last_mismatch = last;
    rv_bad(w, first, "document seq %" PRIu64 " %s", first, why);
}

static void
rv_extra(rv_walk_t *w, uint64_t seq)
{
    stele_remote_report_t *r = &w->rep->ranges;
    rv_ranges_add(&r->n_extra, &r->n_extra_ranges, r->extra, seq, seq);
    rv_bad(w, seq, "document seq %" PRIu64 " is stored more than once", seq);
}

/* ---- reading the companion collection ---- */

/* The signed note of a statement document as a meta frame payload (type byte, note) into
 * buf. Returns its length, or 0 when the document has no note of a plausible size. */
static size_t
rv_payload(const bson_t *doc, uint8_t type, uint8_t *buf, size_t cap)
{
    bson_iter_t it;
    uint32_t len = 0;
    if (!bson_iter_init_find(&it, doc, "note") || !BSON_ITER_HOLDS_UTF8(&it))
        return 0;
    const char *note = bson_iter_utf8(&it, &len);
    if (len == 0 || len + 1u > cap)
        return 0;
    buf[0] = type;
    memcpy(buf + 1, note, len);
    return len + 1u;
}

/* An int64 field of the document's _id; -1 when absent or negative. */
static int64_t
rv_id_int(const bson_t *doc, const char *path)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &it) ||
        !BSON_ITER_HOLDS_NUMBER(&it))
        return -1;
    int64_t v = bson_iter_as_int64(&it);
    return v < 0 ? -1 : v;
}

static int
rv_add_head(rv_walk_t *w, uint64_t size, const uint8_t root[MERKLE_HASH_BYTES])
{
    if (w->n_heads > 0 && w->heads[w->n_heads - 1].size == size &&
        memcmp(w->heads[w->n_heads - 1].root, root, MERKLE_HASH_BYTES) == 0)
        return 0; /* an idle journal's repeats say nothing new */
    if (w->n_heads == w->cap_heads) {
        size_t cap = w->cap_heads ? 2 * w->cap_heads : 256;
        rv_head_t *grown = realloc(w->heads, cap * sizeof *grown);
        if (!grown)
            return -ENOMEM;
        w->heads = grown;
        w->cap_heads = cap;
    }
    w->heads[w->n_heads].size = size;
    memcpy(w->heads[w->n_heads++].root, root, MERKLE_HASH_BYTES);
    return 0;
}

/* A find on the companion collection of this source's statements of one kind, sorted. */
static mongoc_cursor_t *
rv_find_statements(rv_walk_t *w, int is_key)
{
    bson_t *filter = is_key ? BCON_NEW("_id.src", BCON_UTF8(w->source), "_id.key_epoch", "{",
                                       "$exists", BCON_BOOL(true), "}")
                            : BCON_NEW("_id.src", BCON_UTF8(w->source), "_id.size", "{", "$exists",
                                       BCON_BOOL(true), "}");
    bson_t *opts =
        is_key ? BCON_NEW("sort", "{", "_id.key_epoch", BCON_INT32(1), "}")
               : BCON_NEW("sort", "{", "_id.size", BCON_INT32(1), "time_ns", BCON_INT32(1), "}");
    ship_target_append_read_concern(&w->t, opts);
    mongoc_cursor_t *c = mongoc_collection_find_with_opts(w->statements, filter, opts, NULL);
    bson_destroy(opts);
    bson_destroy(filter);
    return c;
}

/* A failed cursor as STELE_EREMOTE / STELE_EAUTH in err; 0 when it did not fail. */
static int
rv_cursor_failed(rv_walk_t *w, mongoc_cursor_t *c, const char *what, stele_error_t *err)
{
    bson_error_t berr;
    const bson_t *reply = NULL;
    if (!mongoc_cursor_error_document(c, &berr, &reply))
        return 0;
    size_t index;
    int code =
        shipper_classify(&berr, reply, &index) == SHIPPER_STOP_AUTH ? STELE_EAUTH : STELE_EREMOTE;
    error_set_hinted(err, code, "check that the server is reachable and the credentials valid",
                     "sink %s: %s on %s failed: %s", w->t.name, what, w->t.where, berr.message);
    if (err)
        ship_target_scrub(&w->t, err->message, sizeof err->message);
    return code;
}

/* ---- 1: the key chain ---- */

/* The journal named by the start statement: stele/<source>/<genesis hex>. */
static int
rv_take_origin(rv_walk_t *w, const meta_statement_t *m)
{
    size_t n = strlen(RV_ORIGIN_PREFIX) + strlen(w->source);
    const char *hex = m->origin + n + 1;
    if (strncmp(m->origin, RV_ORIGIN_PREFIX, strlen(RV_ORIGIN_PREFIX)) != 0 ||
        strncmp(m->origin + strlen(RV_ORIGIN_PREFIX), w->source, strlen(w->source)) != 0 ||
        m->origin[n] != '/' || strlen(hex) != 2 * MERKLE_HASH_BYTES)
        return rv_bad(w, 1, "the key chain names journal \"%s\", not one of source \"%s\"",
                      m->origin, w->source);
    for (size_t i = 0; i < MERKLE_HASH_BYTES; i++) {
        unsigned byte;
        if (sscanf(hex + 2 * i, "%2x", &byte) != 1)
            return rv_bad(w, 1, "the key chain's origin \"%s\" has no genesis", m->origin);
        w->genesis[i] = (uint8_t)byte;
    }
    snprintf(w->origin, sizeof w->origin, "%s", m->origin);
    return 0;
}

/* Key statement doc of epoch e, opened with the key before it (the anchor for epoch 0). */
static int
rv_key_statement(rv_walk_t *w, const bson_t *doc, uint64_t e, const note_verifier_t *anchor)
{
    uint8_t payload[META_PAYLOAD_MAX_BYTES];
    size_t len = rv_payload(doc, META_TYPE_KEY, payload, sizeof payload);
    meta_statement_t m;
    stele_error_t why = {0};
    const note_verifier_t *signer = e ? &w->keys[e - 1] : anchor;
    uint64_t at = e ? w->key_sizes[e - 1] : 1;
    if (rv_id_int(doc, "_id.key_epoch") != (int64_t)e)
        return rv_bad(w, at, "the key statement of epoch %" PRIu64 " is missing", e);
    if (len == 0 || meta_open(payload, len, signer, &m, &why) != 0)
        return rv_bad(w, at, "the key statement of epoch %" PRIu64 " is not signed by %s: %s", e,
                      e ? "the key before it" : "the trust anchor", why.message);
    meta_reason_t want = e ? META_REASON_ROTATE : META_REASON_START;
    if (m.reason != want || m.key_epoch != e || m.epoch != (e ? e - 1 : 0) ||
        (e == 0 && memcmp(&m.key, anchor, sizeof m.key) != 0))
        return rv_bad(w, m.size, "the key statement of epoch %" PRIu64 " is not the %s of it", e,
                      meta_reason_name(want));
    if (e == 0 && rv_take_origin(w, &m) != 0)
        return STELE_EINTEGRITY;
    if (strcmp(m.origin, w->origin) != 0 || (e && m.size < w->key_sizes[e - 1]))
        return rv_bad(w, m.size,
                      "the key statement of epoch %" PRIu64
                      " names another journal or goes back in the tree",
                      e);
    w->keys[e] = m.key;
    w->key_sizes[e] = m.size;
    w->n_keys = e + 1;
    return rv_add_head(w, m.size, m.root) ? -ENOMEM : 0;
}

static int
rv_grow_keys(rv_walk_t *w, size_t cap)
{
    note_verifier_t *keys = realloc(w->keys, cap * sizeof *keys);
    if (keys)
        w->keys = keys;
    uint64_t *sizes = keys ? realloc(w->key_sizes, cap * sizeof *sizes) : NULL;
    if (sizes)
        w->key_sizes = sizes;
    return keys && sizes ? 0 : -ENOMEM;
}

static int
rv_read_keys(rv_walk_t *w, const note_verifier_t *anchor, stele_error_t *err)
{
    mongoc_cursor_t *c = rv_find_statements(w, 1);
    const bson_t *doc;
    int rc = 0;
    size_t cap = 0;
    while (rc == 0 && mongoc_cursor_next(c, &doc)) {
        if (w->n_keys == cap && (rc = rv_grow_keys(w, cap = cap ? 2 * cap : 16)) != 0)
            break;
        rc = rv_key_statement(w, doc, w->n_keys, anchor);
    }
    if (rc == 0)
        rc = rv_cursor_failed(w, c, "find of the key statements", err);
    mongoc_cursor_destroy(c);
    if (rc == 0 && w->n_keys == 0)
        rc = rv_bad(w, 1,
                    "%s holds no key statement of source \"%s\": the journal was not "
                    "signed, or its statements were not shipped or were deleted",
                    w->companion, w->source);
    if (rc == 0)
        w->rep->statements_checked += w->n_keys;
    return rc == -ENOMEM ? error_set(err, rc, "out of memory") : rc;
}

/* ---- 2: the checkpoints ---- */

/* 1 when epoch e may sign a checkpoint of tree size `size`: its rotation is at or before it
 * and the next one at or after it. */
static int
rv_epoch_in_force(const rv_walk_t *w, uint64_t e, uint64_t size)
{
    return e < w->n_keys && w->key_sizes[e] <= size &&
           (e + 1 == w->n_keys || w->key_sizes[e + 1] >= size);
}

/* The retention point of a checkpoint, when it shipped the tree at its first seq. */
static void
rv_take_retention(rv_walk_t *w, const bson_t *doc, const meta_statement_t *m)
{
    bson_iter_t it;
    bson_subtype_t subtype;
    uint32_t len = 0;
    const uint8_t *data = NULL;
    merkle_range_t r;
    if (m->reason != META_REASON_RETENTION || m->first_seq <= w->retention.first_seq ||
        !bson_iter_init_find(&it, doc, "range") || !BSON_ITER_HOLDS_BINARY(&it))
        return;
    bson_iter_binary(&it, &subtype, &len, &data);
    if (merkle_range_decode(&r, data, len, NULL) == 0 && r.size == m->first_seq - 1) {
        w->retention.first_seq = m->first_seq;
        w->retention.range = r;
    }
}

/* One checkpoint document; *last_time_ns and *last_epoch carry the order checks. */
static int
rv_checkpoint(rv_walk_t *w, const bson_t *doc, int64_t *last_time_ns, uint64_t *last_epoch)
{
    uint8_t payload[META_PAYLOAD_MAX_BYTES];
    size_t len = rv_payload(doc, META_TYPE_CHECKPOINT, payload, sizeof payload);
    int64_t id_size = rv_id_int(doc, "_id.size");
    uint64_t at = id_size > 0 ? (uint64_t)id_size : 1;
    meta_statement_t m;
    stele_error_t why = {0};
    if (len == 0 || meta_read_unsigned(payload, len, &m, &why) != 0)
        return rv_bad(w, at, "the checkpoint of tree size %" PRIu64 " is not a statement: %s", at,
                      why.message);
    char sha[2 * SHIP_TRUST_ID_HASH_BYTES + 1] = "";
    bson_iter_t it;
    ship_trust_note_id((const char *)payload + 1, len - 1, sha);
    if (m.size != (uint64_t)id_size || !bson_iter_init(&it, doc) ||
        !bson_iter_find_descendant(&it, "_id.sha", &it) || !BSON_ITER_HOLDS_UTF8(&it) ||
        strcmp(bson_iter_utf8(&it, NULL), sha) != 0)
        return rv_bad(w, m.size,
                      "the checkpoint of tree size %" PRIu64 " is stored under "
                      "another _id than its own",
                      m.size);
    if (!rv_epoch_in_force(w, m.epoch, m.size) ||
        meta_open(payload, len, &w->keys[m.epoch], &m, &why) != 0 || strcmp(m.origin, w->origin))
        return rv_bad(w, m.size,
                      "the checkpoint of tree size %" PRIu64 " is not signed by the key of an "
                      "epoch in force at that size (it names epoch %" PRIu64 ")%s%s",
                      m.size, m.epoch, why.message[0] ? ": " : "", why.message);
    if (m.time_ns < *last_time_ns || m.epoch < *last_epoch)
        return rv_bad(w, m.size,
                      "the checkpoint of tree size %" PRIu64 " goes back in time or "
                      "in key epochs",
                      m.size);
    *last_time_ns = m.time_ns;
    *last_epoch = m.epoch;
    rv_take_retention(w, doc, &m);
    w->rep->statements_checked++;
    if (m.size >= w->rep->sealed_seq) {
        w->rep->sealed_seq = m.size;
        w->rep->sealed_time_ns = m.time_ns;
    }
    return rv_add_head(w, m.size, m.root) ? -ENOMEM : 0;
}

static int
rv_head_cmp(const void *a, const void *b)
{
    const rv_head_t *x = a, *y = b;
    return x->size < y->size ? -1 : x->size > y->size;
}

/* Every checkpoint: a bad one is reported and left out of the roots; the walk goes on. */
static int
rv_read_checkpoints(rv_walk_t *w, stele_error_t *err)
{
    mongoc_cursor_t *c = rv_find_statements(w, 0);
    const bson_t *doc;
    int64_t last_time_ns = INT64_MIN;
    uint64_t last_epoch = 0;
    int rc = 0;
    while (rc != -ENOMEM && mongoc_cursor_next(c, &doc))
        rc = rv_checkpoint(w, doc, &last_time_ns, &last_epoch);
    if (rc == -ENOMEM)
        error_set(err, rc, "out of memory");
    else
        rc = rv_cursor_failed(w, c, "find of the checkpoints", err);
    mongoc_cursor_destroy(c);
    if (rc == 0 && w->n_heads > 1)
        qsort(w->heads, w->n_heads, sizeof *w->heads, rv_head_cmp);
    for (size_t i = 0; i < w->n_keys; i++)
        if (w->key_sizes[i] > w->rep->sealed_seq)
            w->rep->sealed_seq = w->key_sizes[i];
    w->rep->key_epoch = w->n_keys ? w->n_keys - 1 : 0;
    return rc;
}

/* ---- 3: the documents ---- */

/* The origin block (FORMAT.md section 3) of a record read back from its document: uid,
 * gid, pid and kind as little-endian u32; zeros when the document had no _stele.origin. */
static void
rv_origin_block(const stele_origin_t *o, uint8_t out[16])
{
    const uint32_t fields[4] = {o->uid, o->gid, o->pid, (uint32_t)o->kind};
    for (size_t i = 0; i < 4; i++)
        for (size_t b = 0; b < 4; b++)
            out[4 * i + b] = (uint8_t)(fields[i] >> (8 * b));
}

/* The document's leaf hash (FORMAT.md section 4's leaf data, from its fields) and the chain
 * hash it carries. Returns 0, or -1 when the document lacks what the leaf needs. */
static int
rv_doc_leaf(rv_walk_t *w, const bson_t *doc, stele_record_t *rec, uint8_t leaf[MERKLE_HASH_BYTES])
{
    stele_error_t why = {0};
    uint8_t head[32];
    if (remote_doc_to_record(doc, w->source, w->t.time_field, w->t.where, &w->event, rec, &why))
        return -1;
    rv_origin_block(&rec->origin, head + 16);
    for (size_t b = 0; b < 8; b++) {
        head[b] = (uint8_t)(rec->seq >> (8 * b));
        head[8 + b] = (uint8_t)((uint64_t)rec->ts_ns >> (8 * b));
    }
    struct iovec parts[2] = {{head, sizeof head}, {(void *)rec->bson, rec->bson_len}};
    return merkle_hash_leaf(w->mh, parts, 2, leaf) == 0 ? 0 : -1;
}

/* Compares the roots of the statements at the tree's size. */
static void
rv_check_heads(rv_walk_t *w)
{
    while (w->next_head < w->n_heads && w->heads[w->next_head].size <= w->range.size) {
        const rv_head_t *hd = &w->heads[w->next_head++];
        uint8_t root[MERKLE_HASH_BYTES];
        if (hd->size < w->range.size || w->is_tree_broken || w->is_root_failed ||
            merkle_range_root(w->mh, &w->range, root) != 0)
            continue; /* before the start, or not computable */
        if (memcmp(root, hd->root, MERKLE_HASH_BYTES) == 0) {
            w->good_size = hd->size;
            continue;
        }
        w->is_root_failed = 1;
        if (w->last_mismatch <= w->good_size && hd->size > w->good_size)
            rv_mismatched(w, w->good_size + 1, hd->size,
                          "or one after it up to the checkpoint is not what was signed (the "
                          "merkle root differs)");
        else
            rv_bad(w, hd->size, "the merkle root of tree size %" PRIu64 " differs", hd->size);
    }
}

/* One document at the walk's place (its seq is next_seq). */
static void
rv_doc(rv_walk_t *w, const bson_t *doc, uint64_t seq)
{
    stele_record_t rec;
    uint8_t leaf[MERKLE_HASH_BYTES], calc[MERKLE_HASH_BYTES];
    w->rep->docs_checked++;
    w->next_seq = seq + 1;
    if (rv_doc_leaf(w, doc, &rec, leaf) != 0) {
        rv_mismatched(w, seq, seq, "lacks what its leaf is computed from");
        w->is_tree_broken = 1;
        w->has_prev = 0;
        return;
    }
    const uint8_t *prev = w->has_prev ? w->prev_hash : seq == 1 ? w->genesis : NULL;
    if (prev && (chain_link(w->ch, prev, leaf, calc) != 0 ||
                 memcmp(calc, rec.hash, MERKLE_HASH_BYTES) != 0))
        rv_mismatched(w, seq, seq, "is not what its chain hash says (altered)");
    memcpy(w->prev_hash, rec.hash, MERKLE_HASH_BYTES);
    w->has_prev = 1;
    if (!w->is_tree_broken && merkle_range_append(w->mh, &w->range, leaf, NULL, NULL) != 0)
        w->is_tree_broken = 1;
    rv_check_heads(w);
}

/* Documents of the source with seq in [from, to], sorted by seq. */
static mongoc_cursor_t *
rv_find_docs(rv_walk_t *w, uint64_t from, uint64_t to)
{
    bson_t *filter = BCON_NEW("_id.src", BCON_UTF8(w->source), "_id.seq", "{", "$gte",
                              BCON_INT64((int64_t)from), "$lte", BCON_INT64((int64_t)to), "}");
    bson_t *opts = BCON_NEW("sort", "{", "_id.seq", BCON_INT32(1), "}");
    ship_target_append_read_concern(&w->t, opts);
    mongoc_cursor_t *c = mongoc_collection_find_with_opts(w->docs, filter, opts, NULL);
    bson_destroy(opts);
    bson_destroy(filter);
    return c;
}

/* One chunk of seqs [from, to]. */
static int
rv_walk_chunk(rv_walk_t *w, uint64_t from, uint64_t to, stele_error_t *err)
{
    mongoc_cursor_t *c = rv_find_docs(w, from, to);
    const bson_t *doc;
    while (mongoc_cursor_next(c, &doc)) {
        int64_t seq = rv_id_int(doc, "_id.seq");
        if (seq < (int64_t)from || seq > (int64_t)to)
            continue;
        if ((uint64_t)seq < w->next_seq) {
            rv_extra(w, (uint64_t)seq);
            continue;
        }
        if ((uint64_t)seq > w->next_seq) {
            rv_missing(w, w->next_seq, (uint64_t)seq - 1);
            w->is_tree_broken = 1;
            w->has_prev = 0;
        }
        rv_doc(w, doc, (uint64_t)seq);
    }
    int rc = rv_cursor_failed(w, c, "find of the documents", err);
    mongoc_cursor_destroy(c);
    return rc;
}

/* Where the walk starts: seq 1, or the newest retention point whose tree was shipped when
 * the documents before it are gone. */
static void
rv_start(rv_walk_t *w, uint64_t first_doc_seq)
{
    merkle_range_init(&w->range);
    w->next_seq = 1;
    if (first_doc_seq > 1 && w->retention.first_seq > 1 &&
        w->retention.first_seq <= first_doc_seq) {
        w->range = w->retention.range;
        w->next_seq = w->retention.first_seq;
        w->rep->retention_first_seq = w->retention.first_seq;
    }
    w->rep->from_seq = w->next_seq;
    w->good_size = w->range.size;
    rv_check_heads(w);
}

/* The lowest or highest seq of the source's documents in [from, UINT64 max]; 0 when none. */
static int
rv_doc_edge(rv_walk_t *w, uint64_t from, int is_newest, uint64_t *seq_out, stele_error_t *err)
{
    bson_t *filter = BCON_NEW("_id.src", BCON_UTF8(w->source), "_id.seq", "{", "$gte",
                              BCON_INT64((int64_t)from), "}");
    bson_t *opts = BCON_NEW("sort", "{", "_id.seq", BCON_INT32(is_newest ? -1 : 1), "}", "limit",
                            BCON_INT64(1), "projection", "{", "_id", BCON_INT32(1), "}");
    mongoc_cursor_t *c = mongoc_collection_find_with_opts(w->docs, filter, opts, NULL);
    const bson_t *doc;
    int64_t seq = 0;
    if (mongoc_cursor_next(c, &doc))
        seq = rv_id_int(doc, "_id.seq");
    int rc = rv_cursor_failed(w, c, "find of the documents' ends", err);
    mongoc_cursor_destroy(c);
    bson_destroy(opts);
    bson_destroy(filter);
    *seq_out = seq > 0 ? (uint64_t)seq : 0;
    return rc;
}

static int
rv_walk_docs(rv_walk_t *w, stele_error_t *err)
{
    uint64_t first_doc = 0, sealed = w->rep->sealed_seq;
    int rc = rv_doc_edge(w, 1, 0, &first_doc, err);
    if (rc)
        return rc;
    rv_start(w, first_doc);
    for (uint64_t from = w->next_seq; rc == 0 && from <= sealed; from += RV_CHUNK_SEQS) {
        uint64_t to = sealed - from < RV_CHUNK_SEQS ? sealed : from + RV_CHUNK_SEQS - 1;
        rc = rv_walk_chunk(w, from, to, err);
    }
    if (rc)
        return rc;
    if (w->next_seq <= sealed)
        rv_missing(w, w->next_seq, sealed);
    uint64_t newest = 0;
    rc = rv_doc_edge(w, sealed + 1, 1, &newest, err);
    if (rc == 0 && newest > sealed) {
        w->rep->unsealed_first_seq = sealed + 1;
        w->rep->unsealed_last_seq = newest;
    }
    return rc;
}

/* ---- the call ---- */

/* The one source of the companion collection, when the caller named none. */
static int
rv_pick_source(rv_walk_t *w, char *buf, size_t cap, stele_error_t *err)
{
    bson_t *cmd = BCON_NEW("distinct", BCON_UTF8(w->companion), "key", BCON_UTF8("_id.src"));
    bson_t reply;
    bson_error_t berr;
    bson_iter_t it, arr;
    int rc = 0;
    if (!mongoc_client_read_command_with_opts(w->client, w->t.database, cmd, NULL, NULL, &reply,
                                              &berr))
        rc = error_set(err, STELE_EREMOTE, "sink %s: distinct on %s failed: %s", w->t.name,
                       w->companion, berr.message);
    size_t n = 0;
    if (rc == 0 && bson_iter_init_find(&it, &reply, "values") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &arr))
        while (bson_iter_next(&arr))
            if (BSON_ITER_HOLDS_UTF8(&arr) && n++ == 0)
                snprintf(buf, cap, "%s", bson_iter_utf8(&arr, NULL));
    if (rc == 0 && n != 1)
        rc = error_set_hinted(err, n ? STELE_EINVAL : STELE_ENOTFOUND,
                              n ? "name the journal with its source (--source NAME)"
                                : "is the journal signed, and does a shipper ship it here?",
                              "%s holds statements of %zu sources", w->companion, n);
    bson_destroy(&reply);
    bson_destroy(cmd);
    return rc;
}

static int
rv_connect(rv_walk_t *w, const stele_sink_options_t *sink, stele_error_t *err)
{
    int rc = ship_target_init(&w->t, sink, err);
    if (rc)
        return rc;
    if (!w->t.is_socket_timeout_set)
        mongoc_uri_set_option_as_int32(w->t.uri, MONGOC_URI_SOCKETTIMEOUTMS, RV_SOCKET_TIMEOUT_MS);
    w->client = mongoc_client_new_from_uri(w->t.uri);
    if (!w->client)
        return error_set(err, STELE_ECONFIG, "sink %s: could not create a client", w->t.name);
    mongoc_client_set_error_api(w->client, MONGOC_ERROR_API_VERSION_2);
    ship_trust_companion_name(w->t.collection, w->companion, sizeof w->companion);
    w->docs = mongoc_client_get_collection(w->client, w->t.database, w->t.collection);
    w->statements = mongoc_client_get_collection(w->client, w->t.database, w->companion);
    w->mh = merkle_hasher_new();
    w->ch = chain_hasher_new();
    bson_init(&w->event);
    return w->mh && w->ch ? 0 : error_set(err, -ENOMEM, "out of memory");
}

static void
rv_close(rv_walk_t *w)
{
    free(w->keys);
    free(w->key_sizes);
    free(w->heads);
    merkle_hasher_free(w->mh);
    chain_hasher_free(w->ch);
    bson_destroy(&w->event);
    mongoc_collection_destroy(w->docs);
    mongoc_collection_destroy(w->statements);
    mongoc_client_destroy(w->client);
    ship_target_free(&w->t);
}

static int
rv_run(rv_walk_t *w, const stele_sink_options_t *sink, const char *source,
       const note_verifier_t *anchor, stele_error_t *err)
{
    stele_remote_trust_report_t *rep = w->rep;
    int rc = rv_connect(w, sink, err);
    if (rc == 0 && !source)
        rc = rv_pick_source(w, rep->source, sizeof rep->source, err);
    else if (rc == 0)
        snprintf(rep->source, sizeof rep->source, "%s", source);
    w->source = rep->source;
    if (rc == 0)
        rc = rv_read_keys(w, anchor, err);
    if (rc == 0 || rc == STELE_EINTEGRITY) {
        int keys_rc = rc;
        rc = w->n_keys ? rv_read_checkpoints(w, err) : 0;
        if (rc == 0 || rc == STELE_EINTEGRITY)
            rc = w->n_keys ? rv_walk_docs(w, err) : 0;
        if (rc == 0)
            rc = keys_rc;
    }
    return rc;
}

int
stele_remote_verify_trusted(const stele_sink_options_t *sink, const char *source,
                            const char *pub_path, stele_remote_trust_report_t *report,
                            stele_error_t *err)
{
    if (!sink || !pub_path || !report || (source && (!source[0] || strlen(source) > 63)))
        return error_set(err, STELE_EINVAL,
                         "remote verify: a sink, a public key file, a report and a source of 1 "
                         "to 63 bytes (or none) are required");
    memset(report, 0, sizeof *report);
    note_verifier_t anchor;
    int rc = sigkey_read_verifier(pub_path, &anchor, err);
    if (rc)
        return rc;
    rv_walk_t w = {.rep = report};
    rc = rv_run(&w, sink, source, &anchor, err);
    rv_close(&w);
    if (rc == 0 && report->bad_seq)
        rc = STELE_EINTEGRITY;
    if (rc == STELE_EINTEGRITY)
        error_set_hinted(err, rc, "compare with the journal: stele verify -d DIR --trust PUB",
                         "remote copy failed verification at seq %" PRIu64 ": %s", report->bad_seq,
                         report->what);
    return rc;
}
