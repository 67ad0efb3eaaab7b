/*
 * index_catchup.c: bringing the LMDB index in line with the segments (index_catchup.h).
 * At open (stele_index_catch_up, index_catchup_at_open), after recovery and with the
 * journal's writer lock held: drop entries the segments no longer hold, index the batches a
 * lazily-synced index missed, rebuild it whole when it is empty, replaced (index.h) or
 * disagrees with the segments, lower sink checkpoints past the journal's end and, for a
 * version 2 journal, make the index's copy of the Merkle tree's stored hashes whole
 * (checked against the tree's root recovery computed). While the
 * journal is live (index_catchup_live), for an index that fell behind because writing it
 * failed: index what it missed, up to what readers may see. Each says what it did in a note
 * (empty when nothing was needed) and, when it fails, whether writing the index failed (the
 * index is a cache: the engine then runs with it behind) or reading the journal did.
 *
 * The segments are the truth: they are read through journal_reader_* only, never written.
 * The index is written through index.h, in transactions of CATCHUP_CHUNK batch starts.
 *
 * Threads: at open, on the opening thread before the committer, the index writer and the
 * shippers start; live, on the index writer's thread, the one thread writing batch starts
 * then. No lock of its own.
 */
#include "index_catchup.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "index.h"
#include "journal.h"
#include "merkle.h"
#include "stele_internal.h"

/* Batch starts written to the index per LMDB transaction during a catch-up scan. */
#define CATCHUP_CHUNK 1024

/* Appends to a note, separating sentences with "; ". */
static void catchup_note(char *note, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
catchup_note(char *note, size_t cap, const char *fmt, ...)
{
    if (!note || cap == 0)
        return;
    size_t len = strnlen(note, cap);
    if (len + 3 >= cap)
        return;
    if (len) {
        memcpy(note + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + len, cap - len, fmt, ap);
    va_end(ap);
}

/* One catch-up: the index it writes, the reader of the segments, its note, and which side
 * failed. */
typedef struct catchup {
    index_t *ix;
    journal_reader_t *jr;
    char *note;
    size_t note_cap;
    int is_index_failure; /* the failure was in writing the index */
} catchup_t;

/* Passes an index call's code through, remembering that writing the index failed. */
static int
catchup_index_rc(catchup_t *c, int rc)
{
    if (rc)
        c->is_index_failure = 1;
    return rc;
}

/* Does the index entry name the frame the journal has at that seq? */
static int
catchup_entry_matches(journal_reader_t *jr, const index_batch_t *b, int *matches,
                      stele_error_t *err)
{
    *matches = 0;
    int rc = journal_reader_seek(jr, b->first_seq, b->segment_seq, b->offset, err);
    if (rc == STELE_ENOTFOUND)
        return 0;
    if (rc)
        return rc;
    journal_record_t rec;
    rc = journal_reader_next(jr, &rec, err);
    if (rc == STELE_EAGAIN)
        return 0;
    if (rc)
        return rc;
    *matches = rec.seq == b->first_seq && rec.segment_seq == b->segment_seq &&
               rec.offset == b->offset && rec.ts_ns == b->first_ts_ns;
    return 0;
}

/* Adds pending[0, *n_pending) to the index and empties it; *n_out counts them. */
static int
catchup_flush_pending(catchup_t *c, index_batch_t *pending, size_t *n_pending, uint64_t *n_out,
                      stele_error_t *err)
{
    int rc = catchup_index_rc(c, index_put_batches(c->ix, pending, *n_pending, err));
    if (rc == 0)
        *n_out += *n_pending;
    *n_pending = 0;
    return rc;
}

/*
 * Indexes every batch start after `from` (a known batch start, or 0 for the oldest record)
 * up to last_seq. *n_out counts the batches added.
 */
static int
catchup_index_batches_after(catchup_t *c, uint64_t from, uint64_t last_seq, uint64_t *n_out,
                            stele_error_t *err)
{
    *n_out = 0;
    int rc = journal_reader_seek(c->jr, from, 0, 0, err);
    if (rc && rc != STELE_ENOTFOUND)
        return rc;
    index_batch_t pending[CATCHUP_CHUNK];
    size_t n_pending = 0;
    int is_start = 1; /* the first record read starts a batch: `from` is one, or the oldest */
    uint64_t seen_seq = from;
    journal_record_t rec;
    while ((rc = journal_reader_next(c->jr, &rec, err)) == 0) {
        if (is_start && rec.seq > from) {
            pending[n_pending++] = (index_batch_t){.first_seq = rec.seq,
                                                   .segment_seq = rec.segment_seq,
                                                   .offset = rec.offset,
                                                   .first_ts_ns = rec.ts_ns};
            if (n_pending == CATCHUP_CHUNK &&
                (rc = catchup_flush_pending(c, pending, &n_pending, n_out, err)) != 0)
                return rc;
        }
        is_start = rec.is_batch_end;
        seen_seq = rec.seq;
        if (rec.seq >= last_seq)
            break;
    }
    if (rc && rc != STELE_EAGAIN)
        return rc;
    /* Recovery found records up to last_seq; a reader that cannot see them would leave the
     * index silently short. */
    if (seen_seq < last_seq)
        return error_set_hinted(err, STELE_ECORRUPT, "run \"stele verify\" on the journal",
                                "index catch-up could read only to seq %" PRIu64 " of the %" PRIu64
                                " recovery found",
                                seen_seq, last_seq);
    return catchup_flush_pending(c, pending, &n_pending, n_out, err);
}

/* Reports the marker index_open left when it replaced a corrupt index; 1 when there is one
 * (the catch-up removes it once the index is whole again). */
static int
catchup_note_rebuilt(catchup_t *c)
{
    char rebuilt[STELE_ERROR_MESSAGE_BYTES];
    size_t rebuilt_len = 0;
    if (index_get_meta(c->ix, "rebuilt", rebuilt, sizeof rebuilt - 1, &rebuilt_len, NULL) != 0)
        return 0;
    rebuilt[rebuilt_len < sizeof rebuilt ? rebuilt_len : sizeof rebuilt - 1] = '\0';
    catchup_note(c->note, c->note_cap, "%s", rebuilt);
    return 1;
}

/* A journal without records: any entry the index still holds names nothing. */
static int
catchup_empty_index(catchup_t *c, stele_error_t *err)
{
    index_batch_t b;
    if (index_last_batch(c->ix, &b, NULL) != 0)
        return 0;
    int rc = catchup_index_rc(c, index_clear_batches(c->ix, err));
    catchup_note(c->note, c->note_cap, "index emptied: the journal has no records");
    return rc;
}

/* Drops entries before the oldest segment (retention deleted it after the index saw it). */
static int
catchup_trim_before(catchup_t *c, uint64_t first_seq, stele_error_t *err)
{
    index_batch_t b;
    if (first_seq > 1 && index_first_batch(c->ix, &b, NULL) == 0 && b.first_seq < first_seq)
        return catchup_index_rc(c, index_delete_before(c->ix, first_seq, err));
    return 0;
}

/* Drops entries the segments no longer hold: past the end recovery found (a torn tail it
 * truncated) and before the oldest segment. */
static int
catchup_trim_index(catchup_t *c, const struct journal_recovery *rec, stele_error_t *err)
{
    index_batch_t b;
    if (index_last_batch(c->ix, &b, NULL) == 0 && b.first_seq > rec->last_seq) {
        int rc = catchup_index_rc(c, index_truncate_after(c->ix, rec->last_seq, err));
        if (rc)
            return rc;
        catchup_note(c->note, c->note_cap,
                     "index entries after seq %" PRIu64 " dropped (the journal "
                     "ends there)",
                     rec->last_seq);
    }
    return catchup_trim_before(c, rec->first_seq, err);
}

/*
 * Where the scan for batch starts the index lacks begins: its last entry when the segments hold
 * that very frame (*from_out), else the oldest record, with the index emptied first
 * (*is_full): an entry that disagrees says the whole index may be wrong.
 */
static int
catchup_start(catchup_t *c, uint64_t *from_out, int *is_full, stele_error_t *err)
{
    *from_out = 0;
    *is_full = 0;
    index_batch_t b;
    int rc = index_last_batch(c->ix, &b, NULL);
    if (rc == STELE_ENOTFOUND) {
        *is_full = 1;
        return 0;
    }
    if (rc)
        return catchup_index_rc(c, rc);
    int matches = 0;
    rc = catchup_entry_matches(c->jr, &b, &matches, err);
    if (rc)
        return rc;
    if (matches) {
        *from_out = b.first_seq;
        return 0;
    }
    catchup_note(c->note, c->note_cap, "index disagreed with the segments at seq %" PRIu64,
                 b.first_seq);
    *is_full = 1;
    return catchup_index_rc(c, index_clear_batches(c->ix, err));
}

/* Indexes the batches after the index's last entry up to last_seq, and says what it did. */
static int
catchup_batches(catchup_t *c, uint64_t last_seq, stele_error_t *err)
{
    uint64_t from = 0, n_added = 0;
    int is_full = 0;
    int rc = catchup_start(c, &from, &is_full, err);
    if (rc == 0)
        rc = catchup_index_batches_after(c, from, last_seq, &n_added, err);
    if (rc)
        return rc;
    if (is_full)
        catchup_note(c->note, c->note_cap, "index rebuilt from the segments (%" PRIu64 " batches)",
                     n_added);
    else if (n_added)
        catchup_note(c->note, c->note_cap,
                     "index caught up: %" PRIu64 " batches after seq %" PRIu64, n_added, from);
    return 0;
}

/* ---- the Merkle tree's stored hashes (version 2) ---- */

/* Stored hashes collected for one index transaction. */
typedef struct catchup_runs {
    index_merkle_run_t runs[CATCHUP_CHUNK];
    uint8_t *hashes; /* CATCHUP_CHUNK runs of up to MERKLE_MAX_LEVELS hashes */
    size_t n_runs, n_hashes;
} catchup_runs_t;

static int
catchup_runs_flush(index_t *ix, catchup_runs_t *cr, stele_error_t *err)
{
    int rc = index_put_merkle_runs(ix, cr->runs, cr->n_runs, err);
    cr->n_runs = cr->n_hashes = 0;
    return rc;
}

/* Adds one append's stored hashes; writes a full chunk. */
static int
catchup_runs_add(index_t *ix, catchup_runs_t *cr, const merkle_stored_t *st, stele_error_t *err)
{
    uint8_t *at = cr->hashes + cr->n_hashes * MERKLE_HASH_BYTES;
    memcpy(at, st->hash, (size_t)st->count * MERKLE_HASH_BYTES);
    cr->runs[cr->n_runs++] = (index_merkle_run_t){st->first_index, at, st->count};
    cr->n_hashes += st->count;
    return cr->n_runs == CATCHUP_CHUNK ? catchup_runs_flush(ix, cr, err) : 0;
}

/* The index's stored hashes as a merkle_store_t. */
static int
catchup_read_stored(void *ctx, unsigned level, uint64_t index, uint8_t out[MERKLE_HASH_BYTES],
                    stele_error_t *err)
{
    return index_read_merkle(ctx, merkle_stored_index(level, index), out, err);
}

/* The number of leaves whose stored hashes end exactly at `end`, or UINT64_MAX when `end`
 * falls inside an append's hashes (binary search: merkle_stored_count grows with size). */
static uint64_t
catchup_leaves_at(uint64_t end, uint64_t max_leaves)
{
    uint64_t lo = 0, hi = max_leaves;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (merkle_stored_count(mid) < end)
            lo = mid + 1;
        else
            hi = mid;
    }
    return merkle_stored_count(lo) == end ? lo : UINT64_MAX;
}

/* Whether the index's tree of `leaves` leaves has the root recovery computed. */
static int
catchup_merkle_matches(index_t *ix, uint64_t leaves, const uint8_t root[MERKLE_HASH_BYTES])
{
    merkle_hasher_t *h = merkle_hasher_new();
    merkle_store_t store = {catchup_read_stored, ix};
    uint8_t mine[MERKLE_HASH_BYTES];
    int ok = h && merkle_tree_hash(h, &store, leaves, mine, NULL) == 0 &&
             memcmp(mine, root, MERKLE_HASH_BYTES) == 0;
    merkle_hasher_free(h);
    return ok;
}

/* The tree the rebuild starts from: the index's at `leaves`, or for 0 the oldest segment's
 * header range (whose peaks are stored first: proofs of later leaves read them). */
static int
catchup_merkle_start(index_t *ix, journal_reader_t *jr, const struct journal_recovery *rec,
                     uint64_t leaves, merkle_range_t *range, catchup_runs_t *cr, stele_error_t *err)
{
    merkle_store_t store = {catchup_read_stored, ix};
    if (leaves)
        return merkle_range_load(range, &store, leaves, err);
    journal_segment_trust_t trust;
    int rc = journal_reader_segment_trust(jr, rec->first_seq, &trust, err);
    if (rc == 0)
        *range = trust.range;
    uint64_t lo = 0; /* the first leaf under the peak: the highest peak covers the oldest */
    for (unsigned level = MERKLE_MAX_LEVELS; rc == 0 && level-- > 0;) {
        if (!((range->size >> level) & 1))
            continue;
        merkle_stored_t st = {.first_index = merkle_stored_index(level, lo >> level), .count = 1};
        memcpy(st.hash[0], range->peak[level], MERKLE_HASH_BYTES);
        rc = catchup_runs_add(ix, cr, &st, err);
        lo += UINT64_C(1) << level;
    }
    return rc;
}

/* Appends every record after the tree's size to it, storing what each completes. */
static int
catchup_merkle_append(index_t *ix, journal_reader_t *jr, uint64_t last_seq, merkle_range_t *range,
                      catchup_runs_t *cr, stele_error_t *err)
{
    merkle_hasher_t *h = merkle_hasher_new();
    if (!h)
        return error_set(err, -ENOMEM, "index catch-up: out of memory");
    int rc = journal_reader_seek(jr, range->size + 1, 0, 0, err);
    journal_record_t rec;
    merkle_stored_t st;
    while (rc == 0 && range->size < last_seq && (rc = journal_reader_next(jr, &rec, err)) == 0) {
        rc = merkle_range_append(h, range, rec.leaf_hash, &st, err);
        if (rc == 0)
            rc = catchup_runs_add(ix, cr, &st, err);
    }
    merkle_hasher_free(h);
    if (rc == STELE_EAGAIN && range->size < last_seq)
        rc = error_set_hinted(err, STELE_ECORRUPT, "run \"stele verify\" on the journal",
                              "merkle catch-up could read only to seq %" PRIu64 " of %" PRIu64,
                              range->size, last_seq);
    return rc ? rc : catchup_runs_flush(ix, cr, err);
}

/* Brings the index's stored hashes in line with the journal's tree: trims what recovery
 * cut, checks the rest against the tree's root, and computes what is missing. */
static int
catchup_merkle(index_t *ix, journal_reader_t *jr, const struct journal_recovery *rec, char *note,
               size_t note_cap, stele_error_t *err)
{
    if (rec->version < 2 || rec->last_seq == 0)
        return 0;
    uint64_t want_end = merkle_stored_count(rec->last_seq), end = 0;
    int rc = index_merkle_end(ix, &end, err);
    if (rc == 0 && end > want_end && (rc = index_truncate_merkle(ix, want_end, err)) == 0)
        end = want_end;
    if (rc || (end == want_end && catchup_merkle_matches(ix, rec->last_seq, rec->merkle_root)))
        return rc;
    uint64_t leaves = catchup_leaves_at(end, rec->last_seq);
    if (leaves == UINT64_MAX || (end == want_end) || leaves < rec->first_seq - 1) {
        leaves = 0; /* unusable: from the oldest segment again */
        rc = index_truncate_merkle(ix, 0, err);
    }
    catchup_runs_t *cr = calloc(1, sizeof *cr);
    if (cr)
        cr->hashes = malloc((size_t)CATCHUP_CHUNK * MERKLE_MAX_LEVELS * MERKLE_HASH_BYTES);
    merkle_range_t range;
    if (!rc && (!cr || !cr->hashes))
        rc = error_set(err, -ENOMEM, "index catch-up: out of memory");
    if (!rc)
        rc = catchup_merkle_start(ix, jr, rec, leaves, &range, cr, err);
    if (!rc)
        rc = catchup_merkle_append(ix, jr, rec->last_seq, &range, cr, err);
    if (!rc)
        catchup_note(note, note_cap, "merkle hashes %s from seq %" PRIu64,
                     leaves ? "caught up" : "rebuilt", leaves + 1);
    if (cr)
        free(cr->hashes);
    free(cr);
    return rc;
}

/* Lowers every sink checkpoint past the journal's end to that end. With sync=interval or never
 * a sink may ship records that a machine crash then takes from the journal; recovery gives
 * their seqs to new records, which a sink keeping its checkpoint would skip and report
 * shipped. Lowered, the sink sends them, and the remote's stale copies stop it with an
 * integrity error instead. */
static int
catchup_lower_checkpoints(catchup_t *c, uint64_t last_seq, stele_error_t *err)
{
    int n = index_list_checkpoints(c->ix, NULL, NULL, 0, err);
    if (n <= 0)
        return n;
    char(*names)[64] = calloc((size_t)n, sizeof *names);
    uint64_t *seqs = calloc((size_t)n, sizeof *seqs);
    int rc = names && seqs ? 0 : error_set(err, -ENOMEM, "index catch-up: out of memory");
    int n_listed = rc ? 0 : index_list_checkpoints(c->ix, names, seqs, (size_t)n, err);
    if (n_listed < 0)
        rc = n_listed;
    for (int i = 0; rc == 0 && i < n_listed && i < n; i++) {
        if (seqs[i] <= last_seq)
            continue;
        rc = catchup_index_rc(c, index_put_checkpoint(c->ix, names[i], last_seq, err));
        catchup_note(c->note, c->note_cap,
                     "checkpoint of sink %s lowered from seq %" PRIu64 " to %" PRIu64
                     " (the journal ends there)",
                     names[i], seqs[i], last_seq);
    }
    free(names);
    free(seqs);
    return rc;
}

/* Opens the catch-up's reader and clears the note; the caller closes the reader. */
static int
catchup_begin(catchup_t *c, index_t *ix, const char *dir, const journal_io_t *io, char *note,
              size_t note_cap, stele_error_t *err)
{
    *c = (catchup_t){.ix = ix, .note = note, .note_cap = note_cap};
    if (note && note_cap)
        note[0] = '\0';
    return journal_reader_open(dir, io, &c->jr, err);
}

/* The end of both kinds: the marker of a replaced index goes only once the index is whole
 * (a failed catch-up reports it again), then the index is flushed. */
static int
catchup_finish(catchup_t *c, int rc, int was_replaced, int *is_index_failure, stele_error_t *err)
{
    if (rc == 0 && was_replaced)
        rc = catchup_index_rc(c, index_delete_meta(c->ix, "rebuilt", err));
    if (rc == 0)
        rc = catchup_index_rc(c, index_sync(c->ix, err));
    journal_reader_close(c->jr);
    if (is_index_failure)
        *is_index_failure = rc != 0 && c->is_index_failure;
    return rc;
}

int
index_catchup_at_open(index_t *ix, const char *dir, const journal_io_t *io,
                      const struct journal_recovery *rec, char *note, size_t note_cap,
                      int *is_index_failure, stele_error_t *err)
{
    if (is_index_failure)
        *is_index_failure = 0;
    if (!ix || !dir || !rec)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_index_catch_up: bad arguments");
    catchup_t c;
    int rc = catchup_begin(&c, ix, dir, io, note, note_cap, err);
    if (rc)
        return rc;
    int was_replaced = catchup_note_rebuilt(&c);
    if (rec->last_seq == 0)
        rc = catchup_empty_index(&c, err);
    else if ((rc = catchup_trim_index(&c, rec, err)) == 0)
        rc = catchup_batches(&c, rec->last_seq, err);
    if (rc == 0)
        rc = catchup_merkle(c.ix, c.jr, rec, c.note, c.note_cap, err);
    if (rc == 0)
        rc = catchup_lower_checkpoints(&c, rec->last_seq, err);
    return catchup_finish(&c, rc, was_replaced, is_index_failure, err);
}

int
stele_index_catch_up(index_t *ix, const char *dir, const journal_io_t *io,
                     const struct journal_recovery *rec, char *note, size_t note_cap,
                     stele_error_t *err)
{
    return index_catchup_at_open(ix, dir, io, rec, note, note_cap, NULL, err);
}

int
index_catchup_live(index_t *ix, const char *dir, const journal_io_t *io, uint64_t first_seq,
                   char *note, size_t note_cap, int *is_index_failure, stele_error_t *err)
{
    if (is_index_failure)
        *is_index_failure = 0;
    catchup_t c;
    int rc = catchup_begin(&c, ix, dir, io, note, note_cap, err);
    if (rc)
        return rc;
    int was_replaced = catchup_note_rebuilt(&c);
    /* Batch starts are indexed when written, before readers may see them: a last entry past
     * what is visible now must wait, or its check would find nothing and rebuild it all. */
    journal_live_t live;
    journal_reader_live(c.jr, &live);
    index_batch_t last;
    if (index_last_batch(ix, &last, NULL) == 0 && last.first_seq > live.visible_seq)
        rc = error_set_hinted(err, STELE_EAGAIN, NULL,
                              "index catch-up waits for seq %" PRIu64 " to be committed",
                              last.first_seq);
    else if ((rc = catchup_trim_before(&c, first_seq, err)) == 0 && live.visible_seq)
        rc = catchup_batches(&c, live.visible_seq, err);
    return catchup_finish(&c, rc, was_replaced, is_index_failure, err);
}
