/*
 * verify_trust.c: stele_verify_trusted(), the check of FORMAT.md section 11.5 against a
 * trust anchor: the key chain in KEYS from the anchor (V1), every segment header's key
 * epoch (V2), every statement's signature, epoch, size and time (V3), the Merkle root at
 * every statement recomputed from the leaves (V4), deleted oldest segments covered by a
 * signed retention point (V5), no statement past the last record (V6), and the unsealed
 * tail (V7). The ordinary checks (stele_verify: CRCs, chain, seqs, index) run too.
 *
 * The walk reads every frame, meta frames included, through one journal reader from the
 * oldest segment; the tree is grown from that segment's header range, which the first
 * statement after it authenticates. A root that does not check is traced to the first
 * record whose leaf differs from the index's cached leaf hashes, when those reproduce the
 * signed root (the index is written by the writer, not by whoever rewrote the segments);
 * otherwise the failure names the first record after the last statement that checked.
 *
 * Threads: each call uses its own reader, index handle and hasher; no lock. Read-only.
 */
#include "stele.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "format.h"
#include "index.h"
#include "journal.h"
#include "keychain.h"
#include "merkle.h"
#include "meta.h"
#include "read_side.h"
#include "segment.h"
#include "sigkey.h"

typedef struct trust_walk {
    stele_verify_report_t *report;
    journal_reader_t *jr;
    index_t *ix; /* read-only; NULL when there is none */
    merkle_hasher_t *h;
    keychain_t kc;
    note_verifier_t *keys; /* keys[e]: the verifier of epoch e (KEYS statement e) */
    char origin[CHECKPOINT_ORIGIN_MAX_BYTES + 1];
    merkle_range_t range;        /* the tree of the records walked */
    merkle_range_t sealed_range; /* the tree at the last statement that checked */
    uint8_t *window;             /* leaf hashes since sealed_range */
    size_t n_window, cap_window;
    int has_key; /* a key is in force: keys[epoch] */
    uint64_t epoch;
    size_t next_key; /* the KEYS statement the journal must hold next */
    uint64_t segment_seq;
    uint64_t first_seq; /* the oldest segment's */
    int64_t last_time_ns;
    uint64_t last_seq; /* the last record walked */
} trust_walk_t;

static int trust_bad(trust_walk_t *t, uint64_t seq, const journal_record_t *at, const char *fmt,
                     ...) __attribute__((format(printf, 4, 5)));

/* Records a failure at seq (the frame `at` names its place; NULL: none) in the report. */
static int
trust_bad(trust_walk_t *t, uint64_t seq, const journal_record_t *at, const char *fmt, ...)
{
    stele_verify_report_t *rep = t->report;
    rep->bad_seq = seq ? seq : 1;
    rep->bad_segment[0] = '\0';
    rep->bad_offset = 0;
    if (at) {
        char name[SEG_NAME_BYTES];
        segment_name(name, at->segment_seq);
        snprintf(rep->bad_segment, sizeof rep->bad_segment, "%s", name);
        rep->bad_offset = at->offset;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->what, sizeof rep->what, fmt, ap);
    va_end(ap);
    return STELE_ECORRUPT;
}

/* ---- V1: the key chain ---- */

/* KEYS statement i: opened with the key before it (the anchor for the start). */
static int
trust_key_statement(trust_walk_t *t, size_t i, const note_verifier_t *anchor)
{
    const keychain_entry_t *e = &t->kc.entries[i];
    const note_verifier_t *signer = i ? &t->keys[i - 1] : anchor;
    meta_statement_t m;
    stele_error_t why = {0};
    uint64_t size = e->tree_size;
    if (meta_open(e->payload, e->payload_len, signer, &m, &why) != 0)
        return trust_bad(t, size, NULL, "KEYS statement %zu is not signed by %s: %s", i,
                         i ? "the key before it" : "the trust anchor", why.message);
    meta_reason_t want = i ? META_REASON_ROTATE : META_REASON_START;
    if (m.reason != want || m.key_epoch != i || m.epoch != (i ? i - 1 : 0))
        return trust_bad(t, size, NULL, "KEYS statement %zu is not the %s of epoch %zu", i,
                         meta_reason_name(want), i);
    if (i == 0 && memcmp(&m.key, anchor, sizeof m.key) != 0)
        return trust_bad(t, size, NULL, "the key chain starts with another key than the anchor");
    if (strcmp(m.origin, t->origin) != 0 || m.size != size ||
        (i && size < t->kc.entries[i - 1].tree_size))
        return trust_bad(t, size, NULL,
                         "KEYS statement %zu names another journal or goes back in the tree", i);
    t->keys[i] = m.key;
    return 0;
}

static int
trust_read_keys(trust_walk_t *t, const note_verifier_t *anchor, stele_error_t *err)
{
    int rc = keychain_read(journal_io_posix(), journal_reader_dir_fd(t->jr), &t->kc, err);
    if (rc == -ENOENT)
        return trust_bad(t, 1, NULL,
                         "no KEYS file: the journal was never signed, or its key chain was "
                         "deleted");
    if (rc == STELE_ECORRUPT)
        return trust_bad(t, 1, NULL, "KEYS: %s", err ? err->message : "not key statements");
    if (rc)
        return rc;
    if (t->kc.n == 0)
        return trust_bad(t, 1, NULL, "KEYS holds no key statement");
    t->keys = calloc(t->kc.n, sizeof *t->keys);
    if (!t->keys)
        return error_set(err, -ENOMEM, "out of memory reading KEYS");
    for (size_t i = 0; i < t->kc.n; i++) {
        rc = trust_key_statement(t, i, anchor);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- V2: segment headers ---- */

/* The key epoch in force where the oldest segment starts, from its header, checked against
 * the tree sizes of KEYS. */
static int
trust_first_epoch(trust_walk_t *t, const journal_segment_trust_t *st)
{
    uint64_t before = t->first_seq - 1;
    if (!st->is_keyed) {
        if (t->kc.entries[0].tree_size < before)
            return trust_bad(t, t->first_seq, NULL,
                             "segment %" PRIu64 " says no key was in force, but KEYS started "
                             "at tree size %" PRIu64,
                             t->first_seq, t->kc.entries[0].tree_size);
        return 0;
    }
    uint64_t e = st->key_epoch;
    if (e >= t->kc.n || t->kc.entries[e].tree_size > before ||
        (e + 1 < t->kc.n && t->kc.entries[e + 1].tree_size < before))
        return trust_bad(t, t->first_seq, NULL,
                         "segment %" PRIu64 " says key epoch %" PRIu64
                         " was in force, which KEYS contradicts",
                         t->first_seq, e);
    t->has_key = 1;
    t->epoch = e;
    t->next_key = (size_t)e + 1;
    return 0;
}

/* A segment the walk enters: the oldest gives the tree and epoch to start from, the others
 * must say what the walk knows. */
static int
trust_enter_segment(trust_walk_t *t, const journal_record_t *rec, stele_error_t *err)
{
    journal_segment_trust_t st;
    int rc = journal_reader_segment_trust(t->jr, rec->segment_seq, &st, err);
    if (rc == STELE_EINVAL)
        return trust_bad(t, rec->seq, rec, "a version 1 segment in a signed journal");
    if (rc)
        return rc;
    int is_first = t->segment_seq == 0;
    t->segment_seq = rec->segment_seq;
    if (is_first) {
        t->first_seq = rec->segment_seq;
        t->range = st.range;
        t->sealed_range = st.range;
        return trust_first_epoch(t, &st);
    }
    uint8_t mine[MERKLE_RANGE_MAX_BYTES], theirs[MERKLE_RANGE_MAX_BYTES];
    size_t n = merkle_range_encode(&t->range, mine, sizeof mine);
    if (n != merkle_range_encode(&st.range, theirs, sizeof theirs) || memcmp(mine, theirs, n))
        return trust_bad(t, rec->segment_seq, rec,
                         "the segment header's merkle range is not the tree before it");
    if (st.is_keyed != t->has_key || (t->has_key && st.key_epoch != t->epoch))
        return trust_bad(t, rec->segment_seq, rec,
                         "the segment header's key epoch is not the one in force");
    return 0;
}

/* ---- V4: roots, and finding the record a root contradicts ---- */

static int
trust_window_add(trust_walk_t *t, const uint8_t leaf[MERKLE_HASH_BYTES])
{
    if (t->n_window == t->cap_window) {
        size_t cap = t->cap_window ? t->cap_window * 2 : 1024;
        uint8_t *grown = realloc(t->window, cap * MERKLE_HASH_BYTES);
        if (!grown)
            return -ENOMEM;
        t->window = grown;
        t->cap_window = cap;
    }
    memcpy(t->window + t->n_window++ * MERKLE_HASH_BYTES, leaf, MERKLE_HASH_BYTES);
    return 0;
}

/*
 * The first seq a statement of tree `size` and root `root` contradicts: with the index's
 * cached leaf hashes from the last good statement to `size`, when they reproduce `root`
 * (then they are what was signed), the first record whose leaf differs, or the first one
 * missing (*exact = 1); otherwise the first record after the last good statement, the start
 * of the range the statement fails for (*exact = 0).
 */
static uint64_t
trust_pinpoint(trust_walk_t *t, uint64_t size, const uint8_t root[MERKLE_HASH_BYTES], int *exact)
{
    uint64_t lo = t->sealed_range.size;
    *exact = 0;
    if (!t->ix || size <= lo || size - lo > (1u << 24))
        return lo + 1;
    uint8_t *signed_leaves = malloc((size_t)(size - lo) * MERKLE_HASH_BYTES);
    merkle_range_t r = t->sealed_range;
    int ok = signed_leaves != NULL;
    for (uint64_t i = lo; ok && i < size; i++) {
        uint8_t *leaf = signed_leaves + (i - lo) * MERKLE_HASH_BYTES;
        ok = index_read_merkle(t->ix, merkle_stored_index(0, i), leaf, NULL) == 0 &&
             merkle_range_append(t->h, &r, leaf, NULL, NULL) == 0;
    }
    uint8_t mine[MERKLE_HASH_BYTES];
    ok = ok && merkle_range_root(t->h, &r, mine) == 0 && memcmp(mine, root, MERKLE_HASH_BYTES) == 0;
    uint64_t bad = lo + 1;
    for (uint64_t i = 0; ok && i < size - lo; i++)
        if (i >= t->n_window || memcmp(signed_leaves + i * MERKLE_HASH_BYTES,
                                       t->window + i * MERKLE_HASH_BYTES, MERKLE_HASH_BYTES)) {
            bad = lo + i + 1;
            break;
        }
    *exact = ok;
    free(signed_leaves);
    return bad;
}

/* The statement m (at frame `at`) against the tree walked so far. */
static int
trust_check_tree(trust_walk_t *t, const meta_statement_t *m, const journal_record_t *at)
{
    uint8_t root[MERKLE_HASH_BYTES];
    int exact = 0;
    if (m->size != at->seq || m->size != t->range.size)
        return trust_bad(t, trust_pinpoint(t, m->size, m->root, &exact), at,
                         "a checkpoint of tree size %" PRIu64 " where the journal holds %" PRIu64
                         " records",
                         m->size, t->range.size);
    if (merkle_range_root(t->h, &t->range, root) != 0)
        return -ENOMEM;
    if (memcmp(root, m->root, MERKLE_HASH_BYTES) != 0) {
        uint64_t bad = trust_pinpoint(t, m->size, m->root, &exact);
        if (exact)
            return trust_bad(t, bad, at,
                             "record %" PRIu64 " is not what the checkpoint of tree size %" PRIu64
                             " signed (its merkle root differs)",
                             bad, m->size);
        /* Without the signed leaves in the index, the root says only that some record of the
         * range changed, not which: name the range, never an innocent record. */
        return trust_bad(t, bad, at,
                         "records %" PRIu64 "..%" PRIu64 " are not what the checkpoint of tree "
                         "size %" PRIu64 " signed (its merkle root differs; the index holds no "
                         "signed leaf hashes to name the record)",
                         bad, m->size, m->size);
    }
    return 0;
}

/* ---- V3: statements in the journal ---- */

/* A statement checked: it seals what was walked. */
static void
trust_sealed(trust_walk_t *t, const meta_statement_t *m)
{
    stele_verify_report_t *rep = t->report;
    t->sealed_range = t->range;
    t->n_window = 0;
    t->last_time_ns = m->time_ns;
    rep->statements_checked++;
    rep->sealed_seq = m->size;
    rep->sealed_time_ns = m->time_ns;
    rep->is_closed = m->reason == META_REASON_CLOSE;
    if (m->reason == META_REASON_RETENTION && m->first_seq > rep->retention_first_seq)
        rep->retention_first_seq = m->first_seq;
}

/* A key statement in the journal must be KEYS' next one, byte for byte. */
static int
trust_journal_key(trust_walk_t *t, const journal_record_t *rec, meta_statement_t *m)
{
    if (t->next_key >= t->kc.n)
        return trust_bad(t, rec->seq, rec, "a key statement that KEYS does not hold");
    const keychain_entry_t *e = &t->kc.entries[t->next_key];
    if (e->payload_len != rec->payload_len || memcmp(e->payload, rec->payload, e->payload_len))
        return trust_bad(t, rec->seq, rec, "key statement %zu differs from KEYS'", t->next_key);
    stele_error_t why = {0};
    if (meta_read_unsigned(rec->payload, rec->payload_len, m, &why) != 0)
        return trust_bad(t, rec->seq, rec, "%s", why.message); /* KEYS' own: checked in V1 */
    t->has_key = 1;
    t->epoch = m->key_epoch;
    t->next_key++;
    return 0;
}

/* A checkpoint: signed by the key in force, naming its epoch, time not going back. */
static int
trust_journal_checkpoint(trust_walk_t *t, const journal_record_t *rec, meta_statement_t *m)
{
    stele_error_t why = {0};
    if (!t->has_key)
        return trust_bad(t, rec->seq, rec, "a checkpoint before any key was in force");
    if (meta_open(rec->payload, rec->payload_len, &t->keys[t->epoch], m, &why) != 0)
        return trust_bad(t, rec->seq, rec,
                         "the checkpoint of tree size %" PRIu64
                         " is not signed by the key of epoch %" PRIu64 ": %s",
                         rec->seq, t->epoch, why.message);
    if (m->epoch != t->epoch || strcmp(m->origin, t->origin) != 0)
        return trust_bad(t, rec->seq, rec,
                         "the checkpoint of tree size %" PRIu64 " names epoch %" PRIu64
                         " or another journal (epoch %" PRIu64 " is in force)",
                         rec->seq, m->epoch, t->epoch);
    if (m->time_ns < t->last_time_ns)
        return trust_bad(t, rec->seq, rec,
                         "the checkpoint of tree size %" PRIu64 " goes back in time", rec->seq);
    return 0;
}

static int
trust_meta(trust_walk_t *t, const journal_record_t *rec)
{
    meta_statement_t m;
    int rc = rec->payload[0] == META_TYPE_KEY ? trust_journal_key(t, rec, &m)
                                              : trust_journal_checkpoint(t, rec, &m);
    if (!rc)
        rc = trust_check_tree(t, &m, rec);
    if (!rc)
        trust_sealed(t, &m);
    return rc;
}

static int
trust_record(trust_walk_t *t, const journal_record_t *rec)
{
    if (rec->seq != t->range.size + 1)
        return trust_bad(t, t->range.size + 1, rec, "seq %" PRIu64 " where %" PRIu64 " was due",
                         rec->seq, t->range.size + 1);
    if (merkle_range_append(t->h, &t->range, rec->leaf_hash, NULL, NULL) != 0 ||
        trust_window_add(t, rec->leaf_hash) != 0)
        return -ENOMEM;
    if (t->report->unsealed_since_ns == 0 || rec->seq == t->sealed_range.size + 1)
        t->report->unsealed_since_ns = rec->ts_ns;
    t->last_seq = rec->seq;
    return 0;
}

/* Every frame from the oldest. Returns 0, STELE_ECORRUPT (in the report, or in jerr when the
 * reader itself refused a frame: *reader_failed), or another error. */
static int
trust_walk_frames(trust_walk_t *t, int *reader_failed, stele_error_t *err)
{
    journal_record_t rec;
    int rc;
    while ((rc = journal_reader_next(t->jr, &rec, err)) == 0) {
        if (rec.segment_seq != t->segment_seq && (rc = trust_enter_segment(t, &rec, err)) != 0)
            return rc;
        rc = rec.is_meta ? trust_meta(t, &rec) : trust_record(t, &rec);
        if (rc)
            return rc;
    }
    if (rc == STELE_ECORRUPT)
        *reader_failed = 1;
    return rc == STELE_EAGAIN ? 0 : rc;
}

/* ---- V5-V7: after the walk ---- */

static int
trust_finish(trust_walk_t *t, int flags)
{
    stele_verify_report_t *rep = t->report;
    if (t->first_seq > 1 && rep->retention_first_seq < t->first_seq)
        return trust_bad(t, rep->retention_first_seq ? rep->retention_first_seq : 1, NULL,
                         "records before seq %" PRIu64 " are gone and no signed retention "
                         "checkpoint says they may go (the newest says %" PRIu64 ")",
                         t->first_seq, rep->retention_first_seq);
    const keychain_entry_t *newest = &t->kc.entries[t->kc.n - 1];
    if (newest->tree_size > t->last_seq || t->next_key < t->kc.n)
        return trust_bad(t, t->last_seq + 1, NULL,
                         "KEYS has a key statement at tree size %" PRIu64
                         " that the journal, ending at seq %" PRIu64 ", lacks: records are missing",
                         t->kc.entries[t->next_key < t->kc.n ? t->next_key : t->kc.n - 1].tree_size,
                         t->last_seq);
    rep->key_epoch = t->epoch;
    if (t->last_seq > rep->sealed_seq) {
        rep->unsealed_first_seq = rep->sealed_seq + 1;
        rep->unsealed_last_seq = t->last_seq;
    } else {
        rep->unsealed_since_ns = 0;
    }
    if ((flags & STELE_VERIFY_REQUIRE_SEALED) && rep->unsealed_first_seq)
        return trust_bad(t, rep->unsealed_first_seq, NULL,
                         "records %" PRIu64 "..%" PRIu64 " are under no signed checkpoint",
                         rep->unsealed_first_seq, rep->unsealed_last_seq);
    return 0;
}

/* ---- the call ---- */

static int
trust_open(trust_walk_t *t, const char *dir, const stele_options_t *opts, stele_error_t *err)
{
    int rc = read_side_open_journal(dir, opts, &t->jr, err);
    if (rc)
        return rc;
    journal_reader_set_meta(t->jr, 1);
    t->ix = read_side_open_index(dir, t->jr);
    t->h = merkle_hasher_new();
    if (!t->h)
        return error_set(err, -ENOMEM, "could not allocate a SHA-256 context");
    uint8_t genesis[HASH_BYTES];
    rc = journal_reader_seek(t->jr, 0, 0, 0, err);
    if (rc && rc != STELE_ENOTFOUND)
        return rc;
    if (journal_reader_format_version(t->jr) < 2)
        return trust_bad(t, 1, NULL, "a format version 1 journal holds no signatures");
    if (journal_reader_genesis(t->jr, genesis) != 0)
        return trust_bad(t, 1, NULL, "the journal has no segment");
    meta_origin(t->origin, journal_reader_source(t->jr), genesis);
    return 0;
}

static void
trust_close(trust_walk_t *t)
{
    keychain_free(&t->kc);
    free(t->keys);
    free(t->window);
    merkle_hasher_free(t->h);
    index_close(t->ix);
    journal_reader_close(t->jr);
}

/* The trust walk; *reader_failed when the journal reader refused a frame (then the
 * ordinary verify pinpoints it). */
static int
trust_run(const char *dir, const stele_options_t *opts, const note_verifier_t *anchor, int flags,
          stele_verify_report_t *rep, int *reader_failed, stele_error_t *err)
{
    trust_walk_t t = {.report = rep};
    int rc = trust_open(&t, dir, opts, err);
    if (!rc)
        rc = trust_read_keys(&t, anchor, err);
    if (!rc)
        rc = trust_walk_frames(&t, reader_failed, err);
    if (!rc)
        rc = trust_finish(&t, flags);
    trust_close(&t);
    return rc;
}

int
stele_verify_trusted(const char *dir, const stele_options_t *opts, const char *pub_path, int flags,
                     stele_verify_report_t *report, stele_error_t *err)
{
    if (!dir || !pub_path || !report)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "stele_verify_trusted: dir, the public key file and a report "
                                "are required");
    memset(report, 0, sizeof *report);
    note_verifier_t anchor;
    int rc = sigkey_read_verifier(pub_path, &anchor, err);
    if (rc)
        return rc;
    stele_verify_report_t walked;
    memset(&walked, 0, sizeof walked);
    int reader_failed = 0;
    rc = trust_run(dir, opts, &anchor, flags, &walked, &reader_failed, err);
    if (rc && !(rc == STELE_ECORRUPT && reader_failed)) {
        *report = walked;
        if (rc == STELE_ECORRUPT)
            error_set_hinted(err, rc, "back up the journal directory before repairing anything",
                             "verification failed at seq %" PRIu64 ": %s", report->bad_seq,
                             report->what);
        return rc;
    }
    /* The ordinary checks; a damaged frame the reader refused is pinpointed there. */
    stele_error_t reader_err = err ? *err : (stele_error_t){0};
    rc = stele_verify_opts(dir, opts, 0, 0, report, err);
    memcpy((char *)report + offsetof(stele_verify_report_t, statements_checked),
           (char *)&walked + offsetof(stele_verify_report_t, statements_checked),
           sizeof *report - offsetof(stele_verify_report_t, statements_checked));
    if (rc == 0 && reader_failed) {
        report->bad_seq = walked.last_seq ? walked.last_seq + 1 : 1;
        snprintf(report->what, sizeof report->what, "%s", reader_err.message);
        rc = error_set_hinted(err, STELE_ECORRUPT, NULL, "%s", reader_err.message);
    }
    return rc;
}
