/*
 * bench_stele.c: stele itself as a benchmark target, through <stele.h> only.
 *
 * One stele_t per cell, shared by all writers (that is the point: the engine batches them).
 * The journal lives in <cell dir>/stele-journal. Syncs and batch sizes come from
 * stele_stats() taken when the timed window opens and after the writers stop (before
 * close), so they cover exactly the window; after close every record is read back
 * (bench_read_back), and the cell fails when the journal does not hold what the writers were
 * told was appended. The time close took to drain (which matters for wait=none) is written
 * into the note.
 *
 * "stele-signed" is the same cell with a signing key: a fresh key pair made in the cell's
 * directory (a new journal takes only an epoch 0 key), stele's default checkpoint and key
 * epoch knobs, so that a run of both systems shows what signing costs.
 */
#include "bench.h"
#include "bench_peers.h" /* the MongoDB collection of a wait=shipped cell */

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* stele stores an event as BSON, which spends a few bytes per field more than the JSON
 * text record_bytes counts (a 200-byte event is 214 bytes): ample room for that. */
#define STELE_BSON_SLACK_BYTES 1024u
/* Longest an append waits for its sink's acknowledgement before it counts as failed. */
#define SHIPPED_TIMEOUT_MS 10000

typedef struct stele_target {
    stele_t *db;
    uint64_t syncs_at_start; /* stele_stats() when the timed window opened */
    uint64_t batches_at_start;
    uint64_t written_at_start;
    stele_wait_t wait;
    bench_input_t input;
    int keep_data;
    char journal_dir[BENCH_PATH_BYTES];
    const char *mongo_uri;           /* wait=shipped: the sink's server (the cell's, borrowed) */
    char collection[64];             /* wait=shipped: the sink's fresh collection */
    char key_path[BENCH_PATH_BYTES]; /* "" unless signed */
    char pub_path[BENCH_PATH_BYTES];
} stele_target_t;

static int
stele_target_options(const bench_cell_t *cell, stele_options_t *o, stele_sink_options_t *sink,
                     char *source, size_t source_cap, const char *collection)
{
    stele_options_init(o);
    o->sync = cell->sync;
    o->commit_interval_us = cell->commit_interval_us;
    o->commit_policy = cell->policy;
    if (cell->sync_interval_ms)
        o->sync_interval_ms = cell->sync_interval_ms;
    if (cell->record_bytes + STELE_BSON_SLACK_BYTES > o->max_record_bytes)
        o->max_record_bytes = cell->record_bytes + STELE_BSON_SLACK_BYTES;
    if (cell->wait == STELE_WAIT_SHIPPED) {
        if (!cell->mongo_uri)
            return -1;
        /* Every cell starts a new journal whose seqs restart at 1: under the default source
         * name its documents would collide with an earlier cell's (same _id, other hash),
         * which the sink rightly treats as an integrity failure and stops. */
        snprintf(source, source_cap, "stele-bench-%ld-%lld-%llu", (long)getpid(),
                 (long long)time(NULL), (unsigned long long)bench_now_ns());
        o->source = source;
        stele_sink_options_init(sink);
        sink->uri = cell->mongo_uri;
        /* A fresh collection, as mongo-direct's: the sink's resume query (the newest document
         * of its source) then never scans what earlier cells shipped, which a server without
         * the use of the sink's index (the FerretDB test server) does document by document. */
        sink->database = BENCH_MONGO_DATABASE;
        sink->collection = collection;
        o->sinks = sink;
        o->n_sinks = 1;
    }
    return 0;
}

/* A fresh key pair for a signed cell, in its directory. */
static int
stele_target_keygen(const bench_cell_t *cell, stele_target_t *st, char *note, size_t note_cap)
{
    bench_path(st->key_path, sizeof st->key_path, cell->dir, "signing.key");
    bench_path(st->pub_path, sizeof st->pub_path, cell->dir, "signing.pub");
    unlink(st->key_path);
    unlink(st->pub_path);
    stele_error_t err;
    if (stele_keygen(st->key_path, st->pub_path, "stele-bench", &err) != 0) {
        bench_note(note, note_cap, "stele_keygen: %s", err.message);
        return -1;
    }
    return 0;
}

static int
stele_target_open_as(const bench_cell_t *cell, int is_signed, void **state_out, char *note,
                     size_t note_cap)
{
    stele_options_t o;
    stele_sink_options_t sink;
    char source[64];
    if (cell->sync == STELE_SYNC_NEVER &&
        (cell->wait == STELE_WAIT_DURABLE || cell->wait == STELE_WAIT_SHIPPED)) {
        /* sync=never makes records durable only at flush or close, which a writer blocked in
         * its wait never reaches: the cell would hang rather than measure anything. */
        snprintf(note, note_cap,
                 "wait=%s needs sync=always or interval (sync=never syncs "
                 "only at flush or close)",
                 cell->wait == STELE_WAIT_DURABLE ? "durable" : "shipped");
        return BENCH_SKIPPED;
    }
    stele_target_t *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(note, note_cap, "out of memory");
        return BENCH_FAILED;
    }
    bench_mongo_fresh_collection("shipped", st->collection, sizeof st->collection);
    if (stele_target_options(cell, &o, &sink, source, sizeof source, st->collection)) {
        snprintf(note, note_cap, "wait=shipped needs a MongoDB sink: pass --mongo-uri");
        free(st);
        return BENCH_SKIPPED;
    }
    if (cell->wait == STELE_WAIT_SHIPPED)
        st->mongo_uri = cell->mongo_uri;
    st->wait = cell->wait;
    st->input = cell->input;
    st->keep_data = cell->keep_data;
    bench_path(st->journal_dir, sizeof st->journal_dir, cell->dir, "stele-journal");
    if (is_signed && stele_target_keygen(cell, st, note, note_cap) != 0) {
        free(st);
        return BENCH_FAILED;
    }
    if (is_signed)
        o.signing_key = st->key_path;
    stele_error_t err;
    int rc = stele_open(st->journal_dir, &o, &st->db, &err);
    if (rc) {
        bench_note(note, note_cap, "stele_open: %s", err.message);
        free(st);
        return BENCH_FAILED;
    }
    *state_out = st;
    return 0;
}

static int
stele_target_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return stele_target_open_as(cell, 0, state_out, note, note_cap);
}

static int
stele_signed_target_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return stele_target_open_as(cell, 1, state_out, note, note_cap);
}

/* wait=shipped is reached in two steps so that a sink that never acknowledges costs an
 * error after SHIPPED_TIMEOUT_MS instead of a writer blocked for ever (and a run that can
 * be neither finished nor interrupted). */
static int
stele_target_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)wstate;
    stele_target_t *st = state;
    stele_wait_t first = st->wait == STELE_WAIT_SHIPPED ? STELE_WAIT_DURABLE : st->wait;
    uint64_t seq = 0;
    int rc = st->input == BENCH_INPUT_BSON
                 ? stele_append_bson(st->db, ev->data, ev->len, first, &seq, NULL)
                 : stele_append_json(st->db, (const char *)ev->data, ev->len, first, &seq, NULL);
    if (rc == 0 && st->wait == STELE_WAIT_SHIPPED)
        rc = stele_wait(st->db, seq, STELE_WAIT_SHIPPED, SHIPPED_TIMEOUT_MS, NULL);
    return rc;
}

static void
stele_target_measure_start(void *state)
{
    stele_target_t *st = state;
    stele_stats_t stats;
    if (stele_stats(st->db, &stats) == 0) {
        st->syncs_at_start = stats.syncs;
        st->batches_at_start = stats.batches;
        st->written_at_start = stats.written_seq;
    }
}

static int
stele_target_close(void *state, bench_result_t *r)
{
    stele_target_t *st = state;
    stele_stats_t stats;
    if (stele_stats(st->db, &stats) == 0) {
        /* Only the timed window's syncs and batches (the warm-up's are subtracted). */
        r->syncs = (int64_t)(stats.syncs - st->syncs_at_start);
        uint64_t batches = stats.batches - st->batches_at_start;
        r->mean_batch =
            batches ? (double)(stats.written_seq - st->written_at_start) / batches : BENCH_UNKNOWN;
    }
    r->is_durable = st->wait >= STELE_WAIT_DURABLE;
    uint64_t t0 = bench_now_ns();
    stele_error_t err;
    int rc = stele_close(st->db, &err);
    double close_ms = (double)(bench_now_ns() - t0) / 1e6;
    if (rc)
        bench_note(r->note, sizeof r->note, "stele_close: %s", err.message);
    else if (r->note[0] == '\0' && st->wait < STELE_WAIT_DURABLE && close_ms >= 1.0)
        snprintf(r->note, sizeof r->note, "close drained in %.0f ms", close_ms);
    if (rc == 0 && bench_read_back(st->journal_dir, r) != 0)
        rc = BENCH_FAILED;
    if (st->mongo_uri && !st->keep_data && bench_mongo_drop(st->mongo_uri, st->collection) != 0)
        bench_note(r->note, sizeof r->note, "could not drop %s.%s", BENCH_MONGO_DATABASE,
                   st->collection);
    snprintf(r->data_path, sizeof r->data_path, "%s", st->journal_dir);
    if (!st->keep_data) {
        bench_remove_tree(st->journal_dir);
        if (st->key_path[0]) {
            unlink(st->key_path);
            unlink(st->pub_path);
        }
    }
    free(st);
    return rc ? BENCH_FAILED : 0;
}

const bench_target_t bench_target_stele = {
    .system = "stele",
    .open = stele_target_open,
    .append = stele_target_append,
    .measure_start = stele_target_measure_start,
    .close = stele_target_close,
};

const bench_target_t bench_target_stele_signed = {
    .system = "stele-signed",
    .open = stele_signed_target_open,
    .append = stele_target_append,
    .measure_start = stele_target_measure_start,
    .close = stele_target_close,
};
