/*
 * verify_proof.c: stele_verify_proof(), the offline check of a proof bundle (FORMAT.md
 * section 11.6) against nothing but the trust anchor: the key statements from the anchor,
 * the checkpoint signed by the last of them, the record's leaf data against what the bundle
 * says of it, and the inclusion proof of its leaf hash in the checkpoint's tree. The bundle
 * is parsed strictly (libbson's JSON reader, then every member checked for its name, type
 * and count), so an altered bundle fails as a bundle, never as a proof of something else.
 * No state; no journal is read.
 */
#include "stele.h"

#include <bson/bson.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "error.h"
#include "format.h"
#include "merkle.h"
#include "meta.h"
#include "render.h"
#include "sigkey.h"

/* The largest bundle read: a record of at most 16 MiB, in base64 and as JSON, plus notes. */
#define PROOF_MAX_BYTES ((size_t)64 << 20)
/* Key statements a bundle may carry: one per epoch. */
#define PROOF_MAX_KEYS 1000000

/* The members of a bundle, borrowed from the parsed document. */
typedef struct proof_bundle {
    const char *origin;
    uint64_t seq;
    const char *ts;
    uint32_t origin_block[4]; /* uid, gid, pid, kind */
    const uint8_t *event;
    uint32_t event_len;
    const char *leaf_data;
    uint32_t leaf_data_len;
    uint64_t tree_size;
    bson_iter_t inclusion; /* an array of base64 hashes */
    const char *checkpoint;
    uint32_t checkpoint_len;
    bson_iter_t keys; /* an array of signed notes */
} proof_bundle_t;

static int proof_bad(stele_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
proof_bad(stele_error_t *err, const char *fmt, ...)
{
    char msg[STELE_ERROR_MESSAGE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return error_set_hinted(err, STELE_ECORRUPT, "the proof does not hold: do not trust it",
                            "proof bundle: %s", msg);
}

/* ---- the bundle's shape ---- */

static int
proof_uint(const bson_iter_t *it, uint64_t *out)
{
    if (BSON_ITER_HOLDS_INT32(it) && bson_iter_int32(it) >= 0)
        *out = (uint64_t)bson_iter_int32(it);
    else if (BSON_ITER_HOLDS_INT64(it) && bson_iter_int64(it) >= 0)
        *out = (uint64_t)bson_iter_int64(it);
    else
        return -1;
    return 0;
}

static int
proof_origin_block(const bson_iter_t *it, uint32_t out[4])
{
    static const char *const names[4] = {"uid", "gid", "pid", "kind"};
    bson_iter_t child;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &child))
        return -1;
    for (int i = 0; i < 4; i++) {
        uint64_t v = 0;
        if (!bson_iter_next(&child) || strcmp(bson_iter_key(&child), names[i]) != 0 ||
            proof_uint(&child, &v) || v > UINT32_MAX)
            return -1;
        out[i] = (uint32_t)v;
    }
    return bson_iter_next(&child) ? -1 : 0;
}

/* One member: its name must be the next expected one. */
static int
proof_member(proof_bundle_t *pb, const bson_iter_t *it, int i)
{
    uint64_t version = 0;
    uint32_t len = 0;
    switch (i) {
    case 0:
        return proof_uint(it, &version) || version != 1 ? -1 : 0;
    case 1:
        return (pb->origin = BSON_ITER_HOLDS_UTF8(it) ? bson_iter_utf8(it, &len) : NULL) ? 0 : -1;
    case 2:
        return proof_uint(it, &pb->seq) || pb->seq == 0 ? -1 : 0;
    case 3:
        return (pb->ts = BSON_ITER_HOLDS_UTF8(it) ? bson_iter_utf8(it, &len) : NULL) ? 0 : -1;
    case 4:
        return proof_origin_block(it, pb->origin_block);
    case 5:
        if (!BSON_ITER_HOLDS_DOCUMENT(it))
            return -1;
        bson_iter_document(it, &pb->event_len, &pb->event);
        return 0;
    case 6:
        pb->leaf_data = BSON_ITER_HOLDS_UTF8(it) ? bson_iter_utf8(it, &pb->leaf_data_len) : NULL;
        return pb->leaf_data ? 0 : -1;
    case 7:
        return proof_uint(it, &pb->tree_size) || pb->tree_size < pb->seq ? -1 : 0;
    case 8:
        return BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &pb->inclusion) ? 0 : -1;
    case 9:
        pb->checkpoint = BSON_ITER_HOLDS_UTF8(it) ? bson_iter_utf8(it, &pb->checkpoint_len) : NULL;
        return pb->checkpoint ? 0 : -1;
    default:
        return BSON_ITER_HOLDS_ARRAY(it) && bson_iter_recurse(it, &pb->keys) ? 0 : -1;
    }
}

static const char *const proof_members[] = {"stele_proof",  "origin",     "seq",       "ts",
                                            "origin_block", "event",      "leaf_data", "tree_size",
                                            "inclusion",    "checkpoint", "keys"};
#define PROOF_N_MEMBERS (sizeof proof_members / sizeof proof_members[0])

/* Exactly the members of FORMAT.md 11.6, in that order, each of its type. */
static int
proof_read_members(const bson_t *doc, proof_bundle_t *pb, stele_error_t *err)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return proof_bad(err, "not a JSON object");
    for (size_t i = 0; i < PROOF_N_MEMBERS; i++) {
        if (!bson_iter_next(&it))
            return proof_bad(err, "member \"%s\" is missing", proof_members[i]);
        if (strcmp(bson_iter_key(&it), proof_members[i]) != 0)
            return proof_bad(err, "member \"%s\" where \"%s\" belongs", bson_iter_key(&it),
                             proof_members[i]);
        if (proof_member(pb, &it, (int)i))
            return proof_bad(err, "member \"%s\" is not what a proof holds", proof_members[i]);
    }
    if (bson_iter_next(&it))
        return proof_bad(err, "an unknown member \"%s\"", bson_iter_key(&it));
    return 0;
}

/* ---- the key chain and the checkpoint ---- */

/* Opens the signed note text[0, len) of `type` with v. */
static int
proof_open_note(const char *text, size_t len, uint8_t type, const note_verifier_t *v,
                meta_statement_t *out, stele_error_t *err)
{
    if (len + 1 > META_PAYLOAD_MAX_BYTES)
        return -1;
    uint8_t payload[META_PAYLOAD_MAX_BYTES];
    payload[0] = type;
    memcpy(payload + 1, text, len);
    return meta_open(payload, len + 1, v, out, err);
}

/* keys[0] is the start named by the anchor, keys[i] the rotation to epoch i; on return *key
 * is the last epoch's key and *epoch that epoch. */
static int
proof_key_chain(const proof_bundle_t *pb, const note_verifier_t *anchor, note_verifier_t *key,
                uint64_t *epoch, stele_error_t *err)
{
    bson_iter_t it = pb->keys;
    *key = *anchor;
    uint64_t i = 0;
    for (; bson_iter_next(&it); i++) {
        uint32_t len = 0;
        const char *text = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, &len) : NULL;
        meta_statement_t m;
        stele_error_t why = {0};
        if (!text || i >= PROOF_MAX_KEYS ||
            proof_open_note(text, len, META_TYPE_KEY, key, &m, &why) != 0)
            return proof_bad(err, "key statement %" PRIu64 " does not open with %s: %s", i,
                             i ? "the key before it" : "the trust anchor",
                             why.message[0] ? why.message : "not a signed note");
        meta_reason_t want = i ? META_REASON_ROTATE : META_REASON_START;
        if (m.reason != want || m.key_epoch != i || strcmp(m.origin, pb->origin) != 0 ||
            (i == 0 && memcmp(&m.key, anchor, sizeof m.key) != 0))
            return proof_bad(
                err, "key statement %" PRIu64 " is not the %s of epoch %" PRIu64 " of this journal",
                i, meta_reason_name(want), i);
        *key = m.key;
    }
    if (i == 0)
        return proof_bad(err, "no key statements");
    *epoch = i - 1;
    return 0;
}

/* ---- the record and its inclusion ---- */

/* The record's leaf data against the bundle's seq, ts, origin block and event. */
static int
proof_check_leaf(const proof_bundle_t *pb, const uint8_t *leaf, size_t len, stele_error_t *err)
{
    if (len <= 32 || format_load_u64(leaf) != pb->seq)
        return proof_bad(err, "leaf_data is not the record of seq %" PRIu64, pb->seq);
    for (int i = 0; i < 4; i++)
        if (format_load_u32(leaf + 16 + 4 * i) != pb->origin_block[i])
            return proof_bad(err, "origin_block differs from the leaf data's");
    render_buf_t b;
    char *ts = NULL, *event = NULL, *theirs = NULL;
    render_init(&b);
    render_time_ns(&b, format_load_i64(leaf + 8));
    int rc = render_finish(&b, "ts", &ts, NULL, err);
    if (!rc && stele_event_to_json(leaf + 32, len - 32, &event, NULL, NULL) != 0)
        rc = proof_bad(err, "leaf_data's payload is not a BSON document");
    if (!rc && stele_event_to_json(pb->event, pb->event_len, &theirs, NULL, NULL) != 0)
        rc = proof_bad(err, "event is not a JSON object stele renders");
    /* ts is rendered as a JSON string: compare without its quotes. */
    if (!rc && (strlen(ts) != strlen(pb->ts) + 2 || strncmp(ts + 1, pb->ts, strlen(pb->ts)) != 0))
        rc = proof_bad(err, "ts differs from the leaf data's");
    else if (!rc && strcmp(event, theirs) != 0)
        rc = proof_bad(err, "event differs from the leaf data's");
    free(ts);
    stele_json_free(event);
    stele_json_free(theirs);
    return rc;
}

/* The inclusion proof of the leaf in the checkpoint's tree. */
static int
proof_check_inclusion(const proof_bundle_t *pb, const uint8_t *leaf, size_t leaf_len,
                      const meta_statement_t *cp, stele_error_t *err)
{
    uint8_t proof[MERKLE_MAX_PROOF_HASHES * MERKLE_HASH_BYTES];
    size_t n = 0;
    bson_iter_t it = pb->inclusion;
    while (bson_iter_next(&it)) {
        uint32_t len = 0;
        const char *text = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, &len) : NULL;
        if (!text || n == MERKLE_MAX_PROOF_HASHES ||
            base64_decode(text, len, proof + n * MERKLE_HASH_BYTES, MERKLE_HASH_BYTES) !=
                MERKLE_HASH_BYTES)
            return proof_bad(err, "inclusion hash %zu is not the base64 of 32 bytes", n);
        n++;
    }
    merkle_hasher_t *h = merkle_hasher_new();
    if (!h)
        return error_set(err, -ENOMEM, "out of memory checking a proof");
    uint8_t leaf_hash[MERKLE_HASH_BYTES];
    const struct iovec part = {.iov_base = (void *)leaf, .iov_len = leaf_len};
    stele_error_t why = {0};
    int rc = merkle_hash_leaf(h, &part, 1, leaf_hash);
    if (!rc && merkle_verify_inclusion(h, pb->seq - 1, pb->tree_size, leaf_hash, proof, n, cp->root,
                                       &why) != 0)
        rc = proof_bad(err, "%s", why.message);
    merkle_hasher_free(h);
    return rc;
}

/* Everything after the shape: keys, checkpoint, leaf, inclusion. */
static int
proof_check(const proof_bundle_t *pb, const note_verifier_t *anchor, stele_proof_info_t *info,
            stele_error_t *err)
{
    note_verifier_t key;
    uint64_t epoch = 0;
    int rc = proof_key_chain(pb, anchor, &key, &epoch, err);
    meta_statement_t cp;
    stele_error_t why = {0};
    if (!rc && proof_open_note(pb->checkpoint, pb->checkpoint_len, META_TYPE_CHECKPOINT, &key, &cp,
                               &why) != 0)
        rc = proof_bad(err, "the checkpoint does not open with the key of epoch %" PRIu64 ": %s",
                       epoch, why.message);
    if (!rc && (cp.epoch != epoch || cp.size != pb->tree_size || strcmp(cp.origin, pb->origin)))
        rc = proof_bad(err,
                       "the checkpoint is not of epoch %" PRIu64 ", tree size %" PRIu64
                       " and origin %.80s",
                       epoch, pb->tree_size, pb->origin);
    uint8_t *leaf = rc ? NULL : malloc(pb->leaf_data_len);
    long leaf_len =
        leaf ? base64_decode(pb->leaf_data, pb->leaf_data_len, leaf, pb->leaf_data_len) : -1;
    if (!rc && leaf_len < 0)
        rc = leaf ? proof_bad(err, "leaf_data is not canonical base64")
                  : error_set(err, -ENOMEM, "out of memory checking a proof");
    if (!rc)
        rc = proof_check_leaf(pb, leaf, (size_t)leaf_len, err);
    if (!rc)
        rc = proof_check_inclusion(pb, leaf, (size_t)leaf_len, &cp, err);
    free(leaf);
    if (!rc && info)
        *info = (stele_proof_info_t){pb->seq, pb->tree_size, epoch, cp.time_ns};
    return rc;
}

int
stele_verify_proof(const char *bundle, size_t len, const char *pub_path, stele_proof_info_t *info,
                   stele_error_t *err)
{
    if (!bundle || !pub_path)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "stele_verify_proof: a bundle and a public key file are required");
    note_verifier_t anchor;
    int rc = sigkey_read_verifier(pub_path, &anchor, err);
    if (rc)
        return rc;
    if (len == 0 || len > PROOF_MAX_BYTES)
        return proof_bad(err, "%zu bytes", len);
    bson_error_t jerr;
    bson_t *doc = bson_new_from_json((const uint8_t *)bundle, (ssize_t)len, &jerr);
    if (!doc)
        return proof_bad(err, "not JSON (%.120s)", jerr.message);
    proof_bundle_t pb;
    memset(&pb, 0, sizeof pb);
    rc = proof_read_members(doc, &pb, err);
    if (!rc)
        rc = proof_check(&pb, &anchor, info, err);
    bson_destroy(doc);
    return rc;
}
