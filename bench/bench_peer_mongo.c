/*
 * bench_peer_mongo.c: inserts sent straight to a MongoDB-protocol server, no local journal.
 *
 * The comparison the design starts from: what an application gets by writing each audit
 * event directly to MongoDB (here: the server at --mongo-uri, e.g. the test server) with
 * write concern {w: 1, j: true}, one insert_one per event, one pooled client per writer.
 * Shown next to stele's wait=shipped rate. Without --mongo-uri the cell is skipped. Events
 * go to database "stele_bench", a fresh collection per cell, dropped afterwards unless the
 * cell keeps its data; the documents are counted back before that. The stele cell's sink
 * gets a fresh collection the same way (bench_mongo_fresh_collection,
 * bench_mongo_drop): both sides insert into an empty collection, and a new sink's
 * resume query never scans what earlier cells shipped.
 */
#include "bench_peers.h"

#include <mongoc/mongoc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct mongo_peer {
    mongoc_client_pool_t *pool;
    mongoc_write_concern_t *wc;
    char collection[64];
    int keep_data;
} mongo_peer_t;

typedef struct mongo_writer {
    mongoc_client_t *client;
    mongoc_collection_t *coll;
    bson_t *opts;
} mongo_writer_t;

static int
mongo_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    if (!cell->mongo_uri) {
        snprintf(note, note_cap, "needs a MongoDB-protocol server: pass --mongo-uri");
        return BENCH_SKIPPED;
    }
    mongoc_init(); /* idempotent; matched by the process's exit, as libmongoc allows */
    bson_error_t error;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(cell->mongo_uri, &error);
    mongo_peer_t *p = uri ? calloc(1, sizeof *p) : NULL;
    if (!p) {
        bench_note(note, note_cap, "bad --mongo-uri: %s", error.message);
        mongoc_uri_destroy(uri);
        return BENCH_FAILED;
    }
    p->pool = mongoc_client_pool_new(uri);
    mongoc_uri_destroy(uri);
    mongoc_client_pool_max_size(p->pool, (uint32_t)cell->writers + 1);
    p->wc = mongoc_write_concern_new();
    mongoc_write_concern_set_w(p->wc, 1);
    mongoc_write_concern_set_journal(p->wc, true);
    p->keep_data = cell->keep_data;
    bench_mongo_fresh_collection("direct", p->collection, sizeof p->collection);
    *state_out = p;
    return 0;
}

static int
mongo_writer_open(void *state, int writer_id, void **wstate_out, char *note, size_t note_cap)
{
    (void)writer_id;
    mongo_peer_t *p = state;
    mongo_writer_t *w = calloc(1, sizeof *w);
    if (!w)
        return BENCH_FAILED;
    w->client = mongoc_client_pool_pop(p->pool);
    w->coll = mongoc_client_get_collection(w->client, BENCH_MONGO_DATABASE, p->collection);
    w->opts = bson_new();
    if (!mongoc_write_concern_append(p->wc, w->opts)) {
        snprintf(note, note_cap, "could not build the write concern");
        bson_destroy(w->opts);
        mongoc_collection_destroy(w->coll);
        mongoc_client_pool_push(p->pool, w->client);
        free(w);
        return BENCH_FAILED;
    }
    *wstate_out = w;
    return 0;
}

static int
mongo_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)state;
    mongo_writer_t *w = wstate;
    bson_error_t error;
    bson_t doc;
    if (!bson_init_from_json(&doc, (const char *)ev->data, ev->len, &error))
        return -1;
    bool ok = mongoc_collection_insert_one(w->coll, &doc, w->opts, NULL, &error);
    bson_destroy(&doc);
    return ok ? 0 : -1;
}

static void
mongo_writer_close(void *state, void *wstate)
{
    mongo_peer_t *p = state;
    mongo_writer_t *w = wstate;
    bson_destroy(w->opts);
    mongoc_collection_destroy(w->coll);
    mongoc_client_pool_push(p->pool, w->client);
    free(w);
}

static int
mongo_close(void *state, bench_result_t *r)
{
    mongo_peer_t *p = state;
    r->is_durable = 1; /* as durable as the server's {w:1, j:true} */
    if (r->note[0] == '\0')
        snprintf(r->note, sizeof r->note, "on the --mongo-uri server's own disk");
    mongoc_client_t *c = mongoc_client_pool_pop(p->pool);
    mongoc_collection_t *coll =
        mongoc_client_get_collection(c, BENCH_MONGO_DATABASE, p->collection);
    bson_error_t error;
    bson_t filter = BSON_INITIALIZER;
    int64_t n = mongoc_collection_count_documents(coll, &filter, NULL, NULL, NULL, &error);
    bson_destroy(&filter);
    if (n >= 0)
        r->counted_back = n;
    if (!p->keep_data)
        mongoc_collection_drop(coll, &error);
    mongoc_collection_destroy(coll);
    mongoc_client_pool_push(p->pool, c);
    mongoc_client_pool_destroy(p->pool);
    mongoc_write_concern_destroy(p->wc);
    free(p);
    return 0;
}

void
bench_mongo_fresh_collection(const char *prefix, char *out, size_t cap)
{
    snprintf(out, cap, "%s_%d_%llu", prefix, (int)getpid(), (unsigned long long)bench_now_ns());
}

int
bench_mongo_drop(const char *uri, const char *collection)
{
    mongoc_init(); /* idempotent, as in mongo_open */
    bson_error_t error;
    mongoc_client_t *c = mongoc_client_new(uri);
    if (!c)
        return -1;
    mongoc_collection_t *coll = mongoc_client_get_collection(c, BENCH_MONGO_DATABASE, collection);
    bool ok = mongoc_collection_drop(coll, &error);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(c);
    return ok ? 0 : -1;
}

const bench_target_t bench_peer_mongo_direct = {
    .system = "mongo-direct",
    .open = mongo_open,
    .writer_open = mongo_writer_open,
    .append = mongo_append,
    .writer_close = mongo_writer_close,
    .close = mongo_close,
};
