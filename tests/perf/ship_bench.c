/*
 * ship_bench.c: stele-ship-bench, the figures of docs/benchmarks.md "Shipping to MongoDB".
 *
 *   stele-ship-bench rate   [--records N] [--batch N] [--rounds N] [--uri URI]
 *       shipping rate of a shipper draining a journal of N records, against a plain
 *       mongoc_collection_insert_many loop of the same documents and batch size on the
 *       same server, alternating, in the same run.
 *   stele-ship-bench lag    [--rate R] [--seconds S] [--uri URI]
 *       shipping lag (age of the oldest unshipped record) while appending R records/s.
 *   stele-ship-bench memory [--records N] [--seconds S] [--catch-up S] [--max-rss-kib K]
 *       peak RSS of a process (the engine, one sink) while MongoDB is down and N records
 *       wait in the journal, and with --catch-up while it ships them once MongoDB is back
 *       (for up to S seconds, 0 = until caught up). Needs its own test server. Exits 1
 *       when a phase's peak exceeds K KiB.
 *   stele-ship-bench fanin  [--sources N] [--records N] [--batch N] [--rounds N] [--uri URI]
 *       many hosts into one collection: N journals of --records each shipped by N shippers at
 *       once, against N clients inserting the same documents with insert_many, alternating.
 *
 * Without --uri it starts its own test server (mongo_server.h). Prints one line per
 * figure; exit status 0, or 1 on a usage or setup error.
 */
#include <bson/bson.h>
#include <mongoc/mongoc.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mongo_server.h"
#include "ship.h"
#include "ship_fixture.h"

typedef struct bench_args {
    const char *mode;
    const char *uri;
    uint64_t records;
    uint32_t batch;
    int rounds;
    uint64_t rate;
    int seconds;
    int catch_up;     /* memory: -1 = no catch-up, 0 = until caught up, else seconds */
    long max_rss_kib; /* memory: fail when a phase's peak RSS exceeds it (0 = no limit) */
    int sources;      /* fanin: journals, shippers and direct clients (1..64) */
} bench_args_t;

static uint64_t
get_shipped(void *ctx)
{
    return shipper_shipped_seq(ctx);
}

/* The document a shipper builds for a record (docs/mongodb.md), built here independently. */
static bson_t *
bench_doc(const char *source, const journal_record_t *rec)
{
    bson_t *doc = bson_new();
    bson_t id, meta, event;
    BSON_APPEND_DOCUMENT_BEGIN(doc, "_id", &id);
    BSON_APPEND_UTF8(&id, "src", source);
    BSON_APPEND_INT64(&id, "seq", (int64_t)rec->seq);
    bson_append_document_end(doc, &id);
    BSON_APPEND_DATE_TIME(doc, "_ts", rec->ts_ns / 1000000);
    bson_init_static(&event, rec->payload, rec->payload_len);
    bson_concat(doc, &event);
    BSON_APPEND_DOCUMENT_BEGIN(doc, "_stele", &meta);
    BSON_APPEND_DATE_TIME(&meta, "ts", rec->ts_ns / 1000000);
    BSON_APPEND_INT64(&meta, "ts_ns", rec->ts_ns);
    BSON_APPEND_BINARY(&meta, "hash", BSON_SUBTYPE_BINARY, rec->hash, 32);
    BSON_APPEND_BINARY(&meta, "prev_hash", BSON_SUBTYPE_BINARY, rec->prev_hash, 32);
    bson_append_document_end(doc, &meta);
    return doc;
}

/* Reads every record of the journal into documents (the baseline's input, prepared before
 * timing so that the loop measures only inserts). */
static bson_t **
bench_load_docs(const ship_journal_t *sj, uint64_t n)
{
    bson_t **docs = calloc(n, sizeof *docs);
    journal_reader_t *r;
    stele_error_t err;
    if (!docs || journal_reader_open(sj->dir, NULL, &r, &err) != 0)
        return NULL;
    journal_reader_seek(r, 1, 0, 0, &err);
    journal_record_t rec;
    for (uint64_t i = 0; i < n && journal_reader_next(r, &rec, &err) == 0; i++)
        docs[i] = bench_doc(sj->source, &rec);
    journal_reader_close(r);
    return docs;
}

/* Gives a baseline's collection the indexes a sink creates on its own (stele_src_seq and
 * stele_time), so that both sides of a comparison pay the same index maintenance and the
 * difference is the shipping itself. */
static void
bench_sink_indexes(mongoc_collection_t *coll)
{
    bson_t *keys[2] = {BCON_NEW("_id.src", BCON_INT32(1), "_id.seq", BCON_INT32(1)),
                       BCON_NEW("_ts", BCON_INT32(-1))};
    const char *names[2] = {"stele_src_seq", "stele_time"};
    for (int i = 0; i < 2; i++) {
        bson_t *cmd =
            BCON_NEW("createIndexes", BCON_UTF8(mongoc_collection_get_name(coll)), "indexes", "[",
                     "{", "key", BCON_DOCUMENT(keys[i]), "name", BCON_UTF8(names[i]), "}", "]");
        bson_error_t err;
        if (!mongoc_collection_write_command_with_opts(coll, cmd, NULL, NULL, &err))
            fprintf(stderr, "baseline index %s: %s\n", names[i], err.message);
        bson_destroy(cmd);
        bson_destroy(keys[i]);
    }
}

static double
bench_plain_loop(const stele_sink_options_t *so, bson_t **docs, uint64_t n, uint32_t batch)
{
    mongoc_uri_t *uri = mongoc_uri_new(so->uri);
    mongoc_client_pool_t *pool = mongoc_client_pool_new(uri);
    mongoc_client_t *client = mongoc_client_pool_pop(pool);
    mongoc_collection_t *coll = mongoc_client_get_collection(client, so->database, so->collection);
    mongoc_collection_drop(coll, NULL);
    bench_sink_indexes(coll);
    mongoc_write_concern_t *wc = mongoc_write_concern_new();
    mongoc_write_concern_set_wmajority(wc, (int32_t)so->wtimeout_ms);
    mongoc_write_concern_set_journal(wc, true);
    bson_t opts = BSON_INITIALIZER;
    BSON_APPEND_BOOL(&opts, "ordered", true);
    mongoc_write_concern_append(wc, &opts);
    int64_t start = ship_fixture_now_ms();
    for (uint64_t off = 0; off < n; off += batch) {
        size_t k = n - off < batch ? (size_t)(n - off) : batch;
        bson_error_t err;
        if (!mongoc_collection_insert_many(coll, (const bson_t **)docs + off, k, &opts, NULL,
                                           &err)) {
            fprintf(stderr, "plain loop: %s\n", err.message);
            break;
        }
    }
    double secs = (double)(ship_fixture_now_ms() - start) / 1000.0;
    bson_destroy(&opts);
    mongoc_write_concern_destroy(wc);
    mongoc_collection_destroy(coll);
    mongoc_client_pool_push(pool, client);
    mongoc_client_pool_destroy(pool);
    mongoc_uri_destroy(uri);
    return (double)n / secs;
}

static double
bench_shipper(ship_journal_t *sj, const stele_sink_options_t *so, uint64_t n)
{
    ship_drop_collection(so);
    index_put_checkpoint(sj->index, so->name, 0, NULL);
    shipper_config_t cfg = {
        .sink = so, .journal_dir = sj->dir, .source = sj->source, .index = sj->index};
    shipper_t *s;
    stele_error_t err;
    int64_t start = ship_fixture_now_ms();
    if (shipper_start(&cfg, &s, &err) != 0) {
        fprintf(stderr, "shipper: %s\n", err.message);
        return 0;
    }
    ship_wait_for(get_shipped, s, n, 600000);
    double secs = (double)(ship_fixture_now_ms() - start) / 1000.0;
    shipper_stop(s, 0);
    return (double)n / secs;
}

static int
bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int
bench_rate(const bench_args_t *a, const char *uri)
{
    ship_journal_t sj;
    if (ship_journal_create(&sj, "bench") != 0 ||
        ship_journal_append(&sj, a->records, 1000, 100) != 0)
        return 1;
    stele_sink_options_t so;
    ship_sink_options(&so, "bench", uri, "bench");
    so.batch_docs = a->batch;
    so.backoff_min_ms = 50;
    so.backoff_max_ms = 5000;
    bson_t **docs = bench_load_docs(&sj, a->records);
    if (!docs)
        return 1;
    double plain[16], shipped[16], ratio[16];
    int rounds = a->rounds > 16 ? 16 : a->rounds;
    for (int i = 0; i < rounds; i++) {
        plain[i] = bench_plain_loop(&so, docs, a->records, a->batch);
        shipped[i] = bench_shipper(&sj, &so, a->records);
        ratio[i] = shipped[i] / plain[i];
        printf("round %d: plain insert_many %.0f docs/s, shipper %.0f docs/s, ratio %.2f\n", i + 1,
               plain[i], shipped[i], ratio[i]);
    }
    qsort(plain, (size_t)rounds, sizeof plain[0], bench_cmp_double);
    qsort(shipped, (size_t)rounds, sizeof shipped[0], bench_cmp_double);
    qsort(ratio, (size_t)rounds, sizeof ratio[0], bench_cmp_double);
    printf("median of %d rounds, %llu records, batch %u: plain %.0f docs/s, shipper %.0f docs/s, "
           "ratio %.2f\n",
           rounds, (unsigned long long)a->records, a->batch, plain[rounds / 2], shipped[rounds / 2],
           ratio[rounds / 2]);
    for (uint64_t i = 0; i < a->records; i++)
        bson_destroy(docs[i]);
    free(docs);
    ship_journal_destroy(&sj, 0);
    return 0;
}

static int
bench_lag(const bench_args_t *a, const char *uri)
{
    ship_journal_t sj;
    if (ship_journal_create(&sj, "lag") != 0)
        return 1;
    stele_sink_options_t so;
    ship_sink_options(&so, "lag", uri, "lag");
    ship_drop_collection(&so);
    shipper_config_t cfg = {
        .sink = &so, .journal_dir = sj.dir, .source = sj.source, .index = sj.index};
    shipper_t *s;
    stele_error_t err;
    if (shipper_start(&cfg, &s, &err) != 0)
        return 1;
    /* Append in 10 ms ticks (the committer's group commits at that rate would be similar),
     * sampling the lag before each tick. */
    const int tick_ms = 10;
    uint64_t per_tick = a->rate * (uint64_t)tick_ms / 1000;
    int n_ticks = a->seconds * 1000 / tick_ms;
    double *lag = calloc((size_t)n_ticks, sizeof *lag);
    int64_t start = ship_fixture_now_ms();
    for (int t = 0; t < n_ticks; t++) {
        int64_t due = start + (int64_t)t * tick_ms;
        int64_t now = ship_fixture_now_ms();
        if (due > now)
            usleep((useconds_t)(due - now) * 1000);
        stele_sink_stats_t st;
        shipper_stats(s, sj.last_seq, &st);
        lag[t] = st.lag_seconds;
        if (ship_journal_append(&sj, per_tick, (uint32_t)per_tick, 100) != 0)
            return 1;
    }
    double elapsed = (double)(ship_fixture_now_ms() - start) / 1000.0;
    uint64_t appended = sj.last_seq;
    ship_wait_for(get_shipped, s, appended, 600000);
    double drain = (double)(ship_fixture_now_ms() - start) / 1000.0 - elapsed;
    qsort(lag, (size_t)n_ticks, sizeof lag[0], bench_cmp_double);
    printf("steady %llu appends/s for %d s (achieved %.0f/s): lag p50 %.3f s, p99 %.3f s, max "
           "%.3f s; drained %.2f s after the last append\n",
           (unsigned long long)a->rate, a->seconds, (double)appended / elapsed, lag[n_ticks / 2],
           lag[n_ticks * 99 / 100], lag[n_ticks - 1], drain);
    shipper_stop(s, 0);
    free(lag);
    ship_journal_destroy(&sj, 0);
    return 0;
}

/* One client of the direct fan-in: its own client, its source's documents. */
typedef struct fanin_client {
    const stele_sink_options_t *so;
    mongoc_client_pool_t *pool;
    bson_t **docs;
    uint64_t n;
    uint32_t batch;
    int rc;
} fanin_client_t;

static void *
fanin_client_run(void *arg)
{
    fanin_client_t *c = arg;
    mongoc_client_t *client = mongoc_client_pool_pop(c->pool);
    mongoc_collection_t *coll =
        mongoc_client_get_collection(client, c->so->database, c->so->collection);
    mongoc_write_concern_t *wc = mongoc_write_concern_new();
    mongoc_write_concern_set_wmajority(wc, (int32_t)c->so->wtimeout_ms);
    mongoc_write_concern_set_journal(wc, true);
    bson_t opts = BSON_INITIALIZER;
    BSON_APPEND_BOOL(&opts, "ordered", true);
    mongoc_write_concern_append(wc, &opts);
    for (uint64_t off = 0; c->rc == 0 && off < c->n; off += c->batch) {
        size_t k = c->n - off < c->batch ? (size_t)(c->n - off) : c->batch;
        bson_error_t err;
        if (!mongoc_collection_insert_many(coll, (const bson_t **)c->docs + off, k, &opts, NULL,
                                           &err)) {
            fprintf(stderr, "direct fan-in: %s\n", err.message);
            c->rc = -1;
        }
    }
    bson_destroy(&opts);
    mongoc_write_concern_destroy(wc);
    mongoc_collection_destroy(coll);
    mongoc_client_pool_push(c->pool, client);
    return NULL;
}

/* n_sources clients, each inserting its source's documents with insert_many in batches, at
 * once into one collection. Returns the aggregate documents/s. */
static double
fanin_direct(const stele_sink_options_t *so, bson_t ***docs, int n_sources, uint64_t n,
             uint32_t batch)
{
    ship_drop_collection(so);
    mongoc_uri_t *uri = mongoc_uri_new(so->uri);
    mongoc_client_pool_t *pool = mongoc_client_pool_new(uri);
    mongoc_client_pool_max_size(pool, (uint32_t)n_sources);
    mongoc_client_t *setup = mongoc_client_pool_pop(pool);
    mongoc_collection_t *coll = mongoc_client_get_collection(setup, so->database, so->collection);
    bench_sink_indexes(coll);
    mongoc_collection_destroy(coll);
    mongoc_client_pool_push(pool, setup);
    fanin_client_t c[64];
    pthread_t th[64];
    int64_t start = ship_fixture_now_ms();
    for (int i = 0; i < n_sources; i++) {
        c[i] = (fanin_client_t){so, pool, docs[i], n, batch, 0};
        pthread_create(&th[i], NULL, fanin_client_run, &c[i]);
    }
    int rc = 0;
    for (int i = 0; i < n_sources; i++) {
        pthread_join(th[i], NULL);
        rc |= c[i].rc;
    }
    double secs = (double)(ship_fixture_now_ms() - start) / 1000.0;
    mongoc_client_pool_destroy(pool);
    mongoc_uri_destroy(uri);
    return rc ? 0 : (double)n * n_sources / secs;
}

/* n_sources shippers, one per journal, started at once on their whole journals. Returns the
 * aggregate documents/s until the last one shipped its last record. */
static double
fanin_shippers(ship_journal_t *sj, const stele_sink_options_t *so, int n_sources, uint64_t n)
{
    ship_drop_collection(so);
    shipper_t *s[64] = {0};
    int64_t start = ship_fixture_now_ms();
    for (int i = 0; i < n_sources; i++) {
        index_put_checkpoint(sj[i].index, so->name, 0, NULL);
        shipper_config_t cfg = {
            .sink = so, .journal_dir = sj[i].dir, .source = sj[i].source, .index = sj[i].index};
        stele_error_t err;
        if (shipper_start(&cfg, &s[i], &err) != 0)
            fprintf(stderr, "shipper: %s\n", err.message);
    }
    int rc = 0;
    for (int i = 0; i < n_sources; i++)
        rc |= !s[i] || ship_wait_for(get_shipped, s[i], n, 600000) != 0;
    double secs = (double)(ship_fixture_now_ms() - start) / 1000.0;
    for (int i = 0; i < n_sources; i++)
        shipper_stop(s[i], 0);
    return rc ? 0 : (double)n * n_sources / secs;
}

/*
 * Many hosts into one collection: `sources` journals of `records` each, shipped by as many
 * shippers at once, against as many clients inserting the same documents with insert_many,
 * alternating, in the same run. Prints each round and the medians.
 */
static int
bench_fanin(const bench_args_t *a, const char *uri)
{
    int n_sources = a->sources;
    ship_journal_t sj[64];
    bson_t **docs[64];
    for (int i = 0; i < n_sources; i++) {
        char source[16];
        snprintf(source, sizeof source, "host-%02d", i);
        if (ship_journal_create(&sj[i], source) != 0 ||
            ship_journal_append(&sj[i], a->records, 1000, 100) != 0 ||
            !(docs[i] = bench_load_docs(&sj[i], a->records)))
            return 1;
    }
    stele_sink_options_t so;
    ship_sink_options(&so, "fanin", uri, "fanin");
    so.batch_docs = a->batch;
    so.backoff_min_ms = 50;
    so.backoff_max_ms = 5000;
    double direct[16], shipped[16], ratio[16];
    int rounds = a->rounds > 16 ? 16 : a->rounds;
    for (int r = 0; r < rounds; r++) {
        direct[r] = fanin_direct(&so, docs, n_sources, a->records, a->batch);
        shipped[r] = fanin_shippers(sj, &so, n_sources, a->records);
        ratio[r] = direct[r] > 0 ? shipped[r] / direct[r] : 0;
        printf("round %d: %d clients insert_many %.0f docs/s, %d shippers %.0f docs/s, ratio "
               "%.2f\n",
               r + 1, n_sources, direct[r], n_sources, shipped[r], ratio[r]);
        fflush(stdout);
    }
    qsort(direct, (size_t)rounds, sizeof direct[0], bench_cmp_double);
    qsort(shipped, (size_t)rounds, sizeof shipped[0], bench_cmp_double);
    qsort(ratio, (size_t)rounds, sizeof ratio[0], bench_cmp_double);
    printf("median of %d rounds, %d sources x %llu records, batch %u: direct %.0f docs/s, "
           "shippers %.0f docs/s, ratio %.2f\n",
           rounds, n_sources, (unsigned long long)a->records, a->batch, direct[rounds / 2],
           shipped[rounds / 2], ratio[rounds / 2]);
    for (int i = 0; i < n_sources; i++) {
        for (uint64_t k = 0; k < a->records; k++)
            bson_destroy(docs[i][k]);
        free(docs[i]);
        ship_journal_destroy(&sj[i], 0);
    }
    return 0;
}

/* This process's resident memory, from /proc/self/status: VmRSS, its peak VmHWM, and the
 * anonymous and file-backed (mapped segments, LMDB) parts of VmRSS. */
typedef struct bench_mem {
    long rss_kib, hwm_kib, anon_kib, file_kib;
} bench_mem_t;

static bench_mem_t
bench_mem_read(void)
{
    bench_mem_t m = {-1, -1, -1, -1};
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return m;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "VmRSS: %ld", &m.rss_kib);
        sscanf(line, "VmHWM: %ld", &m.hwm_kib);
        sscanf(line, "RssAnon: %ld", &m.anon_kib);
        sscanf(line, "RssFile: %ld", &m.file_kib);
    }
    fclose(f);
    return m;
}

static long
bench_max_long(long a, long b)
{
    return a > b ? a : b;
}

/* Resets VmHWM to the current RSS (Linux: "5" > /proc/self/clear_refs), so that each phase
 * reports its own peak. */
static void
bench_mem_reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* Prints a phase's figures; returns its peak. */
static long
bench_mem_print(const char *phase, bench_mem_t m)
{
    printf("%-44s peak RSS %7ld KiB (now %7ld KiB: anon %7ld, file %7ld)\n", phase, m.hwm_kib,
           m.rss_kib, m.anon_kib, m.file_kib);
    fflush(stdout);
    return m.hwm_kib;
}

static uint64_t
bench_engine_shipped(void *ctx)
{
    stele_sink_stats_t sink;
    if (stele_sink_stats(ctx, 0, &sink) != 0)
        return 0;
    return sink.shipped_seq;
}

/*
 * Memory while MongoDB is down and `records` wait in the journal, through the engine as an
 * application uses it: stele_open with one sink whose server was killed, `records` small
 * events appended with wait=none, then `seconds` of the shipper retrying; with --catch-up S
 * the server is restarted on the same port and the shipper ships for up to S seconds
 * (0 = until caught up). Prints each phase's peak RSS.
 */
static int
bench_memory(const bench_args_t *a)
{
    mongo_server_t ms = {0};
    if (mongo_server_start(&ms) != 0 || ms.is_external || mongo_server_signal(&ms, SIGKILL) != 0) {
        fprintf(stderr, "memory: needs its own test server (unset STELE_TEST_MONGO_URI)\n");
        mongo_server_destroy(&ms);
        return 1;
    }
    char dir[PATH_MAX], uri[600];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/stele-membench-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    snprintf(uri, sizeof uri, "%s?serverSelectionTimeoutMS=500&connectTimeoutMS=500", ms.uri);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        mongo_server_destroy(&ms);
        return 1;
    }
    stele_sink_options_t so;
    ship_sink_options(&so, "down", uri, "membench");
    so.backoff_max_ms = 200;
    stele_options_t opts;
    stele_options_init(&opts);
    opts.sinks = &so;
    opts.n_sinks = 1;
    stele_t *db = NULL;
    stele_error_t err = {0};
    int rc = stele_open(dir, &opts, &db, &err);
    bench_mem_reset_peak();
    long peak_kib = bench_mem_print("opened, MongoDB down", bench_mem_read());
    char json[160];
    uint64_t seq = 0;
    int64_t t0 = ship_fixture_now_ms();
    for (uint64_t i = 1; rc == 0 && i <= a->records; i++) {
        int len = snprintf(json, sizeof json,
                           "{\"who\":\"user-%llu\",\"what\":\"login\",\"i\":%llu,\"ok\":true}",
                           (unsigned long long)(i % 97), (unsigned long long)i);
        rc = stele_append_json(db, json, (size_t)len, STELE_WAIT_NONE, &seq, &err);
    }
    if (rc == 0)
        rc = stele_wait(db, seq, STELE_WAIT_WRITTEN, -1, &err);
    double append_s = (double)(ship_fixture_now_ms() - t0) / 1000.0;
    char phase[96];
    stele_stats_t st;
    stele_stats(db, &st);
    snprintf(phase, sizeof phase, "appended %llu (wait=none, %.0f/s, %.2f GB on disk)",
             (unsigned long long)seq, (double)seq / append_s, (double)st.disk_bytes / 1e9);
    peak_kib = bench_max_long(peak_kib, bench_mem_print(phase, bench_mem_read()));
    if (rc == 0) {
        bench_mem_reset_peak();
        sleep((unsigned)a->seconds);
        stele_sink_stats_t sink = {0};
        stele_sink_stats(db, 0, &sink);
        snprintf(phase, sizeof phase, "MongoDB down %d s (%llu retries, shipped %llu)", a->seconds,
                 (unsigned long long)sink.retries, (unsigned long long)sink.shipped_seq);
        peak_kib = bench_max_long(peak_kib, bench_mem_print(phase, bench_mem_read()));
    }
    if (rc == 0 && a->catch_up >= 0) {
        bench_mem_reset_peak();
        if (mongo_server_restart(&ms) != 0)
            rc = -1;
        int64_t t1 = ship_fixture_now_ms();
        int limit_ms = a->catch_up > 0 ? a->catch_up * 1000 : 24 * 3600 * 1000;
        int is_caught_up = rc == 0 && ship_wait_for(bench_engine_shipped, db, seq, limit_ms) == 0;
        double ship_s = (double)(ship_fixture_now_ms() - t1) / 1000.0;
        uint64_t shipped = bench_engine_shipped(db);
        snprintf(phase, sizeof phase, "%s: shipped %llu in %.0f s (%.0f/s)",
                 is_caught_up ? "caught up" : "catching up", (unsigned long long)shipped, ship_s,
                 (double)shipped / ship_s);
        peak_kib = bench_max_long(peak_kib, bench_mem_print(phase, bench_mem_read()));
        int64_t n_docs = is_caught_up ? ship_count_docs(&so, NULL) : -1;
        if (is_caught_up)
            printf("the collection holds %lld documents\n", (long long)n_docs);
        if (is_caught_up && n_docs != (int64_t)seq)
            rc = -1;
    }
    if (rc != 0 && err.message[0])
        fprintf(stderr, "memory: %s\n", err.message);
    if (a->max_rss_kib && peak_kib > a->max_rss_kib) {
        fprintf(stderr, "memory: peak RSS %ld KiB is over the limit of %ld KiB\n", peak_kib,
                a->max_rss_kib);
        rc = -1;
    }
    if (db) {
        mongo_server_signal(&ms, SIGKILL); /* close drains at most a few seconds: skip it */
        stele_close(db, NULL);
    }
    if (!getenv("STELE_TEST_KEEP"))
        mongo_server_rm_rf(dir);
    mongo_server_destroy(&ms);
    return rc == 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
    bench_args_t a = {.mode = argc > 1 ? argv[1] : "",
                      .records = 100000,
                      .batch = 1000,
                      .rounds = 3,
                      .rate = 10000,
                      .seconds = 10,
                      .catch_up = -1,
                      .sources = 20};
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--uri"))
            a.uri = argv[i + 1];
        else if (!strcmp(argv[i], "--records"))
            a.records = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--batch"))
            a.batch = (uint32_t)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--rounds"))
            a.rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rate"))
            a.rate = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--seconds"))
            a.seconds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--catch-up"))
            a.catch_up = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-rss-kib"))
            a.max_rss_kib = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--sources"))
            a.sources = atoi(argv[i + 1]);
        else
            a.mode = "";
    }
    if (strcmp(a.mode, "rate") && strcmp(a.mode, "lag") && strcmp(a.mode, "memory") &&
        strcmp(a.mode, "fanin")) {
        fprintf(stderr, "usage: stele-ship-bench rate|lag|memory|fanin [--records N] [--batch N] "
                        "[--rounds N] [--rate R] [--seconds S] [--catch-up S] [--max-rss-kib K] "
                        "[--sources N] [--uri URI]\n");
        return 1;
    }
    if (a.records == 0 || a.batch == 0 || a.rounds < 1 || a.rate < 100 || a.seconds < 1 ||
        a.sources < 1 || a.sources > 64)
        return 1;
    if (!strcmp(a.mode, "memory"))
        return bench_memory(&a);
    mongo_server_t ms = {0};
    if (!a.uri) {
        if (mongo_server_start(&ms) != 0)
            return 1;
        a.uri = ms.uri;
    }
    int rc = !strcmp(a.mode, "rate")    ? bench_rate(&a, a.uri)
             : !strcmp(a.mode, "fanin") ? bench_fanin(&a, a.uri)
                                        : bench_lag(&a, a.uri);
    mongo_server_destroy(&ms);
    return rc;
}
