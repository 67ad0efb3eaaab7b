/*
 * prove.c: stele_prove(), the self-contained proof that one record is in a signed journal
 * (FORMAT.md section 11.6): the record (leaf data and event), its inclusion proof in the
 * tree of the first checkpoint that seals it, that checkpoint's signed note and the key
 * statements from the anchor to its epoch. The proof's hashes come from the index's cache
 * of the tree's stored hashes (index_merkle.c): O(log n) reads; the frames are read through
 * a journal reader. The proof is checked against the checkpoint's root before it is
 * returned, so a wrong cache never yields a bundle that fails later.
 *
 * Threads: each call uses its own reader, index handle and hasher; no lock. Read-only,
 * beside a live writer (whose index writer may lag the journal by a batch or two: the
 * call waits for it briefly).
 */
#include "stele.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64.h"
#include "error.h"
#include "format.h"
#include "index.h"
#include "journal.h"
#include "keychain.h"
#include "merkle.h"
#include "meta.h"
#include "read_side.h"
#include "render.h"

/* How long a proof waits for the index writer to cache a new checkpoint's hashes. */
#define PROVE_INDEX_WAIT_MS 2000
#define PROVE_INDEX_POLL_MS 20

/* What a proof is made of. */
typedef struct prove_parts {
    uint64_t seq;
    int64_t ts_ns;
    journal_origin_t origin;
    uint8_t *payload; /* the event, malloc'd */
    uint32_t payload_len;
    uint8_t leaf[MERKLE_HASH_BYTES];
    uint8_t *checkpoint; /* the sealing checkpoint's payload (type byte, note), malloc'd */
    uint32_t checkpoint_len;
    meta_statement_t sealing;
    uint8_t proof[MERKLE_MAX_PROOF_HASHES * MERKLE_HASH_BYTES];
    size_t n_hashes;
    char origin_line[CHECKPOINT_ORIGIN_MAX_BYTES + 1];
} prove_parts_t;

static void
prove_parts_free(prove_parts_t *p)
{
    free(p->payload);
    free(p->checkpoint);
}

static void *
prove_copy(const void *src, size_t len)
{
    void *copy = malloc(len ? len : 1);
    if (copy)
        memcpy(copy, src, len);
    return copy;
}

/* The record `seq` and, after it, the first checkpoint (type 1) whose tree holds it. */
static int
prove_read_frames(journal_reader_t *jr, uint64_t seq, prove_parts_t *p, stele_error_t *err)
{
    journal_record_t rec;
    int rc = journal_reader_seek(jr, seq, 0, 0, err);
    if (rc == STELE_ENOTFOUND)
        return error_set(err, rc, "seq %" PRIu64 " is no longer in the journal", seq);
    while (rc == 0 && (rc = journal_reader_next(jr, &rec, err)) == 0) {
        if (!rec.is_meta && rec.seq == seq) {
            if (rec.version < 2)
                return error_set(err, STELE_EINVAL, "a format version 1 journal has no proofs");
            p->seq = rec.seq;
            p->ts_ns = rec.ts_ns;
            p->origin = rec.origin;
            p->payload_len = rec.payload_len;
            memcpy(p->leaf, rec.leaf_hash, MERKLE_HASH_BYTES);
            if (!(p->payload = prove_copy(rec.payload, rec.payload_len)))
                return error_set(err, -ENOMEM, "out of memory proving seq %" PRIu64, seq);
        } else if (rec.is_meta && p->payload && rec.payload[0] == META_TYPE_CHECKPOINT) {
            p->checkpoint_len = rec.payload_len;
            if (!(p->checkpoint = prove_copy(rec.payload, rec.payload_len)))
                return error_set(err, -ENOMEM, "out of memory proving seq %" PRIu64, seq);
            return meta_read_unsigned(rec.payload, rec.payload_len, &p->sealing, err);
        }
    }
    if (rc == STELE_EAGAIN)
        rc = error_set_hinted(err, STELE_ENOTFOUND,
                              "wait for the next checkpoint (checkpoint_interval_ms)",
                              p->payload ? "seq %" PRIu64 " is not sealed by a checkpoint yet"
                                         : "seq %" PRIu64 " is not in the journal",
                              seq);
    return rc;
}

/* The index's cached stored hashes, for merkle.h. */
static int
prove_read_stored(void *ctx, unsigned level, uint64_t index, uint8_t out[MERKLE_HASH_BYTES],
                  stele_error_t *err)
{
    return index_read_merkle(ctx, merkle_stored_index(level, index), out, err);
}

/* Waits (briefly) until the index caches the hashes of a tree of `size` leaves. */
static int
prove_wait_index(index_t *ix, uint64_t size, stele_error_t *err)
{
    uint64_t want = merkle_stored_count(size), end = 0;
    for (int waited = 0;; waited += PROVE_INDEX_POLL_MS) {
        int rc = index_merkle_end(ix, &end, err);
        if (rc || end >= want)
            return rc;
        if (waited >= PROVE_INDEX_WAIT_MS)
            return error_set_hinted(err, STELE_ENOTFOUND,
                                    "open the journal for writing once: its catch-up fills the "
                                    "cache in",
                                    "the index caches the merkle hashes of %" PRIu64
                                    " records; the proof needs %" PRIu64,
                                    end ? end : 0, size);
        struct timespec pause = {0, PROVE_INDEX_POLL_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
}

/* The inclusion proof of the record in the sealing tree, checked against its root. */
static int
prove_inclusion(index_t *ix, prove_parts_t *p, stele_error_t *err)
{
    merkle_hasher_t *h = merkle_hasher_new();
    if (!h)
        return error_set(err, -ENOMEM, "out of memory proving seq %" PRIu64, p->seq);
    merkle_store_t store = {prove_read_stored, ix};
    uint64_t size = p->sealing.size;
    int rc = prove_wait_index(ix, size, err);
    if (!rc)
        rc = merkle_prove_inclusion(h, &store, p->seq - 1, size, p->proof, MERKLE_MAX_PROOF_HASHES,
                                    &p->n_hashes, err);
    stele_error_t why = {0};
    if (!rc && merkle_verify_inclusion(h, p->seq - 1, size, p->leaf, p->proof, p->n_hashes,
                                       p->sealing.root, &why) != 0)
        rc = error_set_hinted(err, STELE_ECORRUPT, "run \"stele verify --trust\" on the journal",
                              "the index's merkle hashes do not prove seq %" PRIu64 ": %s", p->seq,
                              why.message);
    merkle_hasher_free(h);
    return rc;
}

/* ---- the bundle ---- */

static void
prove_render_base64(render_buf_t *b, const uint8_t *bytes, size_t len)
{
    char *text = malloc(BASE64_ENCODED_LEN(len) + 1);
    if (!text) {
        render_fail(b, -ENOMEM, "proof");
        return;
    }
    size_t n = base64_encode(bytes, len, text);
    render_string(b, text, n);
    free(text);
}

/* The leaf data (FORMAT.md section 4): seq, ts, origin block, payload. */
static uint8_t *
prove_leaf_data(const prove_parts_t *p, size_t *len)
{
    *len = 16 + FRAME_ORIGIN_BYTES + p->payload_len;
    uint8_t *d = malloc(*len);
    if (!d)
        return NULL;
    format_store_u64(d, p->seq);
    format_store_i64(d + 8, p->ts_ns);
    format_store_u32(d + 16, p->origin.uid);
    format_store_u32(d + 20, p->origin.gid);
    format_store_u32(d + 24, p->origin.pid);
    format_store_u32(d + 28, p->origin.kind);
    memcpy(d + 32, p->payload, p->payload_len);
    return d;
}

static void
prove_render_record(render_buf_t *b, const prove_parts_t *p)
{
    render_key(b, "seq");
    render_uint64(b, p->seq);
    render_key(b, "ts");
    render_time_ns(b, p->ts_ns);
    render_key(b, "origin_block");
    render_object_begin(b);
    render_key(b, "uid");
    render_uint64(b, p->origin.uid);
    render_key(b, "gid");
    render_uint64(b, p->origin.gid);
    render_key(b, "pid");
    render_uint64(b, p->origin.pid);
    render_key(b, "kind");
    render_uint64(b, p->origin.kind);
    render_object_end(b);
    render_key(b, "event");
    render_bson(b, p->payload, p->payload_len);
    size_t leaf_len = 0;
    uint8_t *leaf = prove_leaf_data(p, &leaf_len);
    render_key(b, "leaf_data");
    if (leaf)
        prove_render_base64(b, leaf, leaf_len);
    else
        render_fail(b, -ENOMEM, "proof");
    free(leaf);
}

static void
prove_render_note(render_buf_t *b, const uint8_t *payload, size_t len)
{
    render_string(b, (const char *)payload + 1, len - 1); /* without its type byte */
}

static int
prove_render(const prove_parts_t *p, const keychain_t *kc, char **json_out, size_t *len_out,
             stele_error_t *err)
{
    render_buf_t b;
    render_init(&b);
    render_object_begin(&b);
    render_key(&b, "stele_proof");
    render_uint64(&b, 1);
    render_key(&b, "origin");
    render_string(&b, p->sealing.origin, strlen(p->sealing.origin));
    prove_render_record(&b, p);
    render_key(&b, "tree_size");
    render_uint64(&b, p->sealing.size);
    render_key(&b, "inclusion");
    render_array_begin(&b);
    for (size_t i = 0; i < p->n_hashes; i++)
        prove_render_base64(&b, p->proof + i * MERKLE_HASH_BYTES, MERKLE_HASH_BYTES);
    render_array_end(&b);
    render_key(&b, "checkpoint");
    prove_render_note(&b, p->checkpoint, p->checkpoint_len);
    render_key(&b, "keys");
    render_array_begin(&b);
    for (size_t i = 0; i <= p->sealing.epoch && i < kc->n; i++)
        prove_render_note(&b, kc->entries[i].payload, kc->entries[i].payload_len);
    render_array_end(&b);
    render_object_end(&b);
    return render_finish(&b, "proof", json_out, len_out, err);
}

int
stele_prove(const char *dir, const stele_options_t *opts, uint64_t seq, char **json_out,
            size_t *len_out, stele_error_t *err)
{
    if (!dir || !json_out || seq == 0)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "stele_prove: a journal, a seq of 1 or more and an out");
    prove_parts_t p;
    memset(&p, 0, sizeof p);
    keychain_t kc = {0};
    journal_reader_t *jr = NULL;
    index_t *ix = NULL;
    int rc = read_side_open_journal(dir, opts, &jr, err);
    if (!rc) {
        journal_reader_set_meta(jr, 1);
        rc = prove_read_frames(jr, seq, &p, err);
    }
    if (!rc && !(ix = read_side_open_index(dir, jr)))
        rc = error_set_hinted(err, STELE_ENOTFOUND,
                              "open the journal for writing once: its catch-up makes the index",
                              "journal %s has no index to prove from", dir);
    if (!rc)
        rc = prove_inclusion(ix, &p, err);
    if (!rc &&
        (rc = keychain_read(journal_io_posix(), journal_reader_dir_fd(jr), &kc, err)) == -ENOENT)
        rc = error_set(err, STELE_ENOTFOUND, "journal %s has no KEYS: it is not signed", dir);
    if (!rc && kc.n <= p.sealing.epoch)
        rc = error_set(err, STELE_ECORRUPT, "KEYS of %s lacks key epoch %" PRIu64, dir,
                       p.sealing.epoch);
    if (!rc)
        rc = prove_render(&p, &kc, json_out, len_out, err);
    keychain_free(&kc);
    index_close(ix);
    journal_reader_close(jr);
    prove_parts_free(&p);
    return rc;
}
