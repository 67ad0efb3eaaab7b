/*
 * ship_fixture.c: journals written through journal.h for the shipping tests, and the
 * exactly-once check (count_documents for the source, then stele_remote_check for every
 * seq and hash). Owns nothing shared: each test builds its own fixtures.
 */
#include "ship_fixture.h"

#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mongo_server.h"
#include "ship_mongo.h" /* ship_doc_identity */

/* Segment size for test journals: small enough for many test directories, large enough to
 * hold the biggest test batch. */
#define SHIP_FIXTURE_SEGMENT_BYTES (16u << 20)

int64_t
ship_fixture_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t
ship_fixture_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

unsigned
ship_test_seed(void)
{
    const char *env = getenv("STELE_TEST_SEED");
    unsigned seed = env && env[0] ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    printf("# seed %u (set STELE_TEST_SEED to repeat)\n", seed);
    return seed;
}

int
ship_journal_create(ship_journal_t *sj, const char *source)
{
    memset(sj, 0, sizeof *sj);
    const char *tmp = getenv("TMPDIR");
    snprintf(sj->dir, sizeof sj->dir, "%s/stele-ship-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(sj->dir)) {
        perror("mkdtemp");
        return -1;
    }
    snprintf(sj->source, sizeof sj->source, "%s", source);
    journal_options_t jo;
    journal_options_init(&jo);
    jo.source = source;
    jo.create_if_missing = 1;
    jo.segment_bytes = SHIP_FIXTURE_SEGMENT_BYTES;
    stele_error_t err = {0};
    journal_recovery_t rec;
    int rc = journal_open(sj->dir, &jo, &sj->journal, &rec, &err);
    if (rc == 0)
        rc = index_open(sj->dir, 1, 0600, &sj->index, &err);
    if (rc != 0)
        fprintf(stderr, "ship_journal_create %s: %s\n", sj->dir, err.message);
    sj->last_seq = rec.last_seq;
    return rc;
}

static void
ship_fixture_event(bson_t *doc, uint64_t seq, uint32_t pad_bytes, char *pad)
{
    char who[32];
    snprintf(who, sizeof who, "user-%u", (unsigned)(seq % 97));
    BSON_APPEND_UTF8(doc, "who", who);
    BSON_APPEND_UTF8(doc, "what", "login");
    BSON_APPEND_INT64(doc, "i", (int64_t)seq);
    BSON_APPEND_BOOL(doc, "ok", true);
    if (pad_bytes)
        bson_append_utf8(doc, "pad", 3, pad, (int)pad_bytes);
}

/* Writes one batch of prepared payloads, syncs it, indexes it and publishes it. */
static int
ship_journal_commit(ship_journal_t *sj, bson_t **docs, uint32_t n)
{
    size_t total = 0;
    for (uint32_t k = 0; k < n; k++)
        total += journal_frame_bytes(journal_version(sj->journal), docs[k]->len);
    uint8_t *buf = malloc(total);
    if (!buf)
        return -1;
    size_t off = 0;
    int64_t ts = ship_fixture_wall_ns();
    if (ts < sj->last_ts_ns)
        ts = sj->last_ts_ns;
    for (uint32_t k = 0; k < n; k++) {
        journal_frame_prepare(journal_version(sj->journal), buf + off, sj->last_seq + 1 + k, ts,
                              NULL, bson_get_data(docs[k]), docs[k]->len);
        off += journal_frame_bytes(journal_version(sj->journal), docs[k]->len);
    }
    stele_error_t err = {0};
    journal_batch_info_t info;
    int rc = journal_append_batch(sj->journal, buf, total, &info, &err);
    if (rc == 0)
        rc = journal_sync(sj->journal, &err);
    if (rc == 0) {
        index_batch_t ib = {info.first_seq, info.segment_seq, info.offset, info.first_ts_ns};
        rc = index_put_batches(sj->index, &ib, 1, &err);
    }
    free(buf);
    if (rc != 0) {
        fprintf(stderr, "ship_journal_commit %s: %s\n", sj->dir, err.message);
        return rc;
    }
    sj->last_seq = info.last_seq;
    sj->last_ts_ns = ts;
    journal_publish(sj->journal, sj->last_seq, sj->last_seq);
    return 0;
}

int
ship_journal_append(ship_journal_t *sj, uint64_t n, uint32_t batch_records, uint32_t pad_bytes)
{
    char *pad = malloc(pad_bytes + 1);
    bson_t **docs = calloc(batch_records, sizeof *docs);
    int rc = pad && docs ? 0 : -1;
    if (pad)
        memset(pad, 'x', pad_bytes);
    for (uint64_t done = 0; rc == 0 && done < n;) {
        uint32_t k = 0;
        for (; k < batch_records && done + k < n; k++) {
            docs[k] = bson_new();
            ship_fixture_event(docs[k], sj->last_seq + 1 + k, pad_bytes, pad);
        }
        rc = ship_journal_commit(sj, docs, k);
        for (uint32_t i = 0; i < k; i++)
            bson_destroy(docs[i]);
        done += k;
    }
    free(docs);
    free(pad);
    return rc;
}

int
ship_journal_append_bson(ship_journal_t *sj, const uint8_t *bson, uint32_t len)
{
    bson_t *doc = bson_new_from_data(bson, len);
    if (!doc)
        return -1;
    int rc = ship_journal_commit(sj, &doc, 1);
    bson_destroy(doc);
    return rc;
}

void
ship_journal_destroy(ship_journal_t *sj, int keep)
{
    stele_error_t err;
    index_close(sj->index);
    journal_close(sj->journal, &err);
    if (!keep && !getenv("STELE_TEST_KEEP") && sj->dir[0])
        mongo_server_rm_rf(sj->dir);
    memset(sj, 0, sizeof *sj);
}

void
ship_sink_options(stele_sink_options_t *so, const char *name, const char *uri, const char *coll)
{
    stele_sink_options_init(so);
    so->name = name;
    so->uri = uri;
    so->database = "stele_test";
    so->collection = coll;
    so->backoff_min_ms = 20;
    so->backoff_max_ms = 500;
}

static mongoc_collection_t *
ship_fixture_collection(const stele_sink_options_t *so, mongoc_client_t **client_out)
{
    *client_out = mongoc_client_new(so->uri);
    if (!*client_out)
        return NULL;
    mongoc_client_set_error_api(*client_out, MONGOC_ERROR_API_VERSION_2);
    return mongoc_client_get_collection(*client_out, so->database, so->collection);
}

int64_t
ship_count_docs(const stele_sink_options_t *so, const char *source)
{
    mongoc_client_t *client;
    mongoc_collection_t *coll = ship_fixture_collection(so, &client);
    if (!coll)
        return -1;
    bson_t *filter = source ? BCON_NEW("_id.src", BCON_UTF8(source)) : bson_new();
    bson_error_t err;
    int64_t n = mongoc_collection_count_documents(coll, filter, NULL, NULL, NULL, &err);
    if (n < 0)
        fprintf(stderr, "count_documents: %s\n", err.message);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
    return n;
}

int64_t
ship_delete_range(const stele_sink_options_t *so, const char *source, uint64_t first, uint64_t last)
{
    mongoc_client_t *client;
    mongoc_collection_t *coll = ship_fixture_collection(so, &client);
    if (!coll)
        return -1;
    bson_t *filter = BCON_NEW("_id.src", BCON_UTF8(source), "_id.seq", "{", "$gte",
                              BCON_INT64((int64_t)first), "$lte", BCON_INT64((int64_t)last), "}");
    bson_error_t err;
    bson_t reply;
    int64_t n = -1;
    if (mongoc_collection_delete_many(coll, filter, NULL, &reply, &err)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, &reply, "deletedCount"))
            n = bson_iter_as_int64(&it);
    } else {
        fprintf(stderr, "delete_many: %s\n", err.message);
    }
    bson_destroy(&reply);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
    return n;
}

void
ship_drop_collection(const stele_sink_options_t *so)
{
    mongoc_client_t *client;
    mongoc_collection_t *coll = ship_fixture_collection(so, &client);
    if (!coll)
        return;
    mongoc_collection_drop(coll, NULL);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
}

int
ship_check_exactly_once(const ship_journal_t *sj, const stele_sink_options_t *so, uint64_t n)
{
    int64_t count = ship_count_docs(so, sj->source);
    if (count != (int64_t)n) {
        fprintf(stderr, "exactly-once: %lld documents for source %s, expected %llu\n",
                (long long)count, sj->source, (unsigned long long)n);
        return -1;
    }
    stele_remote_report_t report;
    stele_error_t err = {0};
    int rc = stele_remote_check(sj->dir, so, 0, 0, &report, &err);
    if (rc != 0 || report.records_checked != n || report.docs_checked != n ||
        report.from_seq != 1 || report.to_seq != n) {
        fprintf(
            stderr,
            "exactly-once: check rc=%d (%s) records=%llu docs=%llu seqs %llu..%llu missing=%llu "
            "extra=%llu mismatched=%llu\n",
            rc, err.message, (unsigned long long)report.records_checked,
            (unsigned long long)report.docs_checked, (unsigned long long)report.from_seq,
            (unsigned long long)report.to_seq, (unsigned long long)report.n_missing,
            (unsigned long long)report.n_extra, (unsigned long long)report.n_mismatched);
        return -1;
    }
    return 0;
}

/* The chain hashes of records 1..n of a journal, n * 32 bytes (NULL when it lacks one). */
static uint8_t *
ship_fixture_hashes(const ship_journal_t *sj, uint64_t n)
{
    uint8_t *hashes = calloc(n ? n : 1, 32);
    journal_reader_t *r = NULL;
    stele_error_t err;
    if (!hashes || journal_reader_open(sj->dir, NULL, &r, &err) != 0 ||
        journal_reader_seek(r, 1, 0, 0, &err) != 0) {
        journal_reader_close(r);
        free(hashes);
        return NULL;
    }
    journal_record_t rec;
    uint64_t got = 0;
    while (got < n && journal_reader_next(r, &rec, &err) == 0 && rec.seq == got + 1)
        memcpy(hashes + 32 * got++, rec.hash, 32);
    journal_reader_close(r);
    if (got < n) {
        free(hashes);
        return NULL;
    }
    return hashes;
}

/* Checks one stored document against the journals: known source, seq in 1..n, first time
 * seen, same hash. */
static int
ship_fixture_check_doc(const bson_t *doc, const ship_journal_t *sjs, size_t n_sources,
                       uint8_t **hashes, uint8_t **seen, uint64_t n)
{
    bson_iter_t it;
    const char *src = NULL;
    if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "_id.src", &it) &&
        BSON_ITER_HOLDS_UTF8(&it))
        src = bson_iter_utf8(&it, NULL);
    uint64_t seq = 0;
    const uint8_t *hash = NULL;
    size_t i = 0;
    while (src && i < n_sources && strcmp(src, sjs[i].source) != 0)
        i++;
    if (!src || i == n_sources || ship_doc_identity(doc, &seq, &hash) != 0 || seq < 1 || seq > n ||
        !hash) {
        fprintf(stderr, "exactly-once: unexpected document (source %s, seq %llu)\n",
                src ? src : "?", (unsigned long long)seq);
        return -1;
    }
    if (seen[i][seq - 1]++) {
        fprintf(stderr, "exactly-once: %s seq %llu stored twice\n", src, (unsigned long long)seq);
        return -1;
    }
    if (memcmp(hash, hashes[i] + 32 * (seq - 1), 32) != 0) {
        fprintf(stderr, "exactly-once: %s seq %llu has another hash\n", src,
                (unsigned long long)seq);
        return -1;
    }
    return 0;
}

int
ship_check_exactly_once_many(const ship_journal_t *sjs, size_t n_sources,
                             const stele_sink_options_t *so, uint64_t n)
{
    uint8_t **hashes = calloc(n_sources, sizeof *hashes);
    uint8_t **seen = calloc(n_sources, sizeof *seen);
    int rc = hashes && seen ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n_sources; i++) {
        hashes[i] = ship_fixture_hashes(&sjs[i], n);
        seen[i] = calloc(n ? n : 1, 1);
        if (!hashes[i] || !seen[i])
            rc = -1;
    }
    mongoc_client_t *client = NULL;
    mongoc_collection_t *coll = rc == 0 ? ship_fixture_collection(so, &client) : NULL;
    bson_t filter = BSON_INITIALIZER;
    bson_t *opts =
        BCON_NEW("projection", "{", "_id", BCON_INT32(1), "_stele.hash", BCON_INT32(1), "}");
    mongoc_cursor_t *cur =
        coll ? mongoc_collection_find_with_opts(coll, &filter, opts, NULL) : NULL;
    const bson_t *doc;
    while (rc == 0 && cur && mongoc_cursor_next(cur, &doc))
        rc = ship_fixture_check_doc(doc, sjs, n_sources, hashes, seen, n);
    bson_error_t berr;
    if (rc == 0 && (!cur || mongoc_cursor_error(cur, &berr))) {
        fprintf(stderr, "exactly-once: cannot read the collection\n");
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < n_sources; i++)
        for (uint64_t k = 0; rc == 0 && k < n; k++)
            if (!seen[i][k]) {
                fprintf(stderr, "exactly-once: %s seq %llu missing\n", sjs[i].source,
                        (unsigned long long)k + 1);
                rc = -1;
            }
    mongoc_cursor_destroy(cur);
    bson_destroy(opts);
    if (coll)
        mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
    for (size_t i = 0; i < n_sources && hashes && seen; i++) {
        free(hashes[i]);
        free(seen[i]);
    }
    free(hashes);
    free(seen);
    return rc;
}

int
ship_wait_for(uint64_t (*get)(void *ctx), void *ctx, uint64_t want, int timeout_ms)
{
    uint64_t seen = get(ctx);
    int64_t deadline = ship_fixture_now_ms() + timeout_ms;
    while (seen < want) {
        if (ship_fixture_now_ms() > deadline)
            return -1;
        usleep(5 * 1000);
        uint64_t now_seen = get(ctx);
        if (now_seen != seen)
            deadline = ship_fixture_now_ms() + timeout_ms; /* it moved: not stalled */
        seen = now_seen;
    }
    return 0;
}

long
ship_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}
