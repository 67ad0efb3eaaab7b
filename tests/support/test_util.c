/*
 * test_util.c: temp directories, the seeded PRNG, and the record ledger used by the
 * durability tests (see test_util.h).
 *
 * Owns: nothing global; every helper works on caller-owned state. A ledger belongs to the
 * thread that drives the journal's writer side. Payloads are built with libbson so the
 * journal sees the same kind of bytes the engine hands it.
 */
#include "test_util.h"

#include <bson/bson.h>
#include <openssl/evp.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Largest payload a ledger builds (on the stack): far above what the tests use. */
enum { TEST_PAYLOAD_MAX_BYTES = 64 * 1024 };
/* Timestamps start at a realistic wall-clock time (2020-09-13) rather than at 0. */
#define TEST_FIRST_TS_NS INT64_C(1600000000000000000)

uint64_t
test_seed(const char *test_name)
{
    uint64_t seed;
    const char *env = getenv("STELE_TEST_SEED");
    if (env && *env) {
        seed = strtoull(env, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ((uint64_t)ts.tv_sec * 1000000007ULL) ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)getpid() << 32);
    }
    fprintf(stderr, "%s: seed %" PRIu64 " (replay with STELE_TEST_SEED=%" PRIu64 ")\n", test_name,
            seed, seed);
    return seed;
}

int
test_long_mode(void)
{
    const char *env = getenv("STELE_TEST_LONG");
    if (env && *env)
        return strcmp(env, "0") != 0;
#ifdef STELE_TEST_LONG_DEFAULT
    return 1;
#else
    return 0;
#endif
}

uint64_t
test_iterations(uint64_t normal, uint64_t long_n)
{
    const char *env = getenv("STELE_TEST_ITERATIONS");
    if (env && *env)
        return strtoull(env, NULL, 0);
    return test_long_mode() ? long_n : normal;
}

const char *
test_code_name(int code)
{
    switch (code) {
#define TEST_X_NAME(name, value, text)                                                             \
    case value:                                                                                    \
        return #name;
        STELE_ERROR_LIST(TEST_X_NAME)
#undef TEST_X_NAME
    default:
        return code < 0 && code > -1000 ? strerror(-code) : "unknown code";
    }
}

char *
test_tmpdir_new(const char *tag)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    size_t cap = strlen(base) + strlen(tag) + 32;
    char *path = malloc(cap);
    if (!path)
        return NULL;
    snprintf(path, cap, "%s/stele-%s-XXXXXX", base, tag);
    if (!mkdtemp(path)) {
        int saved = errno;
        free(path);
        errno = saved;
        return NULL;
    }
    return path;
}

char *
test_path_join(const char *dir, const char *name)
{
    size_t cap = strlen(dir) + strlen(name) + 2;
    char *path = malloc(cap);
    if (path)
        snprintf(path, cap, "%s/%s", dir, name);
    return path;
}

int
test_proc_stat_fields(const char *stat_path, char *out, size_t cap)
{
    char text[1024];
    FILE *f = fopen(stat_path, "re");
    if (!f)
        return -1;
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *end_of_name = strrchr(text, ')');
    if (!end_of_name || end_of_name[1] != ' ')
        return -1;
    snprintf(out, cap, "%s", end_of_name + 2);
    return 0;
}

static int
remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) == 0 ? 0 : -errno;

    int rc = 0;
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *child = test_path_join(path, de->d_name);
        int child_rc = child ? remove_tree(child) : -ENOMEM;
        if (child_rc && !rc)
            rc = child_rc;
        free(child);
    }
    closedir(d);
    if (rmdir(path) != 0 && !rc)
        rc = -errno;
    return rc;
}

int
test_tmpdir_remove(char *path)
{
    if (!path)
        return 0;
    int rc = remove_tree(path);
    free(path);
    return rc;
}

void
test_rng_init(test_rng_t *rng, uint64_t seed)
{
    rng->state = seed;
}

uint64_t
test_rng_next(test_rng_t *rng)
{
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t
test_rng_below(test_rng_t *rng, uint64_t n)
{
    return n ? test_rng_next(rng) % n : 0;
}

uint64_t
test_rng_range(test_rng_t *rng, uint64_t lo, uint64_t hi)
{
    return lo + test_rng_below(rng, hi - lo + 1);
}

int
test_rng_chance(test_rng_t *rng, unsigned percent)
{
    return test_rng_below(rng, 100) < percent;
}

void
test_rng_fill(test_rng_t *rng, uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)test_rng_next(rng);
}

uint64_t
test_digest(const uint8_t *bytes, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a offset basis */
    for (size_t i = 0; i < len; i++) {
        h ^= bytes[i];
        h *= 0x100000001b3ULL;
    }
    return h ? h : 1; /* 0 means "no payload recorded" in the ledger */
}

/* SHA-256 of the pieces, concatenated. Returns 0 or -1. */
static int
test_sha256(const struct iovec *parts, int n_parts, uint8_t out[32])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int out_len = 0;
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    for (int i = 0; ok && i < n_parts; i++)
        ok = EVP_DigestUpdate(ctx, parts[i].iov_base, parts[i].iov_len) == 1;
    ok = ok && EVP_DigestFinal_ex(ctx, out, &out_len) == 1 && out_len == 32;
    EVP_MD_CTX_free(ctx);
    return ok ? 0 : -1;
}

static void
test_store_le(uint8_t *out, uint64_t v, int n_bytes)
{
    for (int i = 0; i < n_bytes; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

int
test_chain_hash(const journal_record_t *rec, uint8_t out[32])
{
    /* Spelled out here rather than taken from journal/chain.c, so the test checks the
     * format's definition instead of the journal agreeing with itself. */
    uint8_t fields[16], origin[16];
    uint64_t ts_bits;
    memcpy(&ts_bits, &rec->ts_ns, sizeof(ts_bits));
    test_store_le(fields, rec->seq, 8);
    test_store_le(fields + 8, ts_bits, 8);
    if (rec->version < 2) {
        struct iovec parts[3] = {{(void *)rec->prev_hash, 32},
                                 {fields, sizeof fields},
                                 {(void *)rec->payload, rec->payload_len}};
        return test_sha256(parts, 3, out);
    }
    /* Version 2: the chain links the record's Merkle leaf hash, SHA-256(0x00 || seq || ts ||
     * origin block || payload). */
    test_store_le(origin, rec->origin.uid, 4);
    test_store_le(origin + 4, rec->origin.gid, 4);
    test_store_le(origin + 8, rec->origin.pid, 4);
    test_store_le(origin + 12, rec->origin.kind, 4);
    uint8_t prefix = 0, leaf[32];
    struct iovec leaf_parts[4] = {{&prefix, 1},
                                  {fields, sizeof fields},
                                  {origin, sizeof origin},
                                  {(void *)rec->payload, rec->payload_len}};
    struct iovec link[2] = {{(void *)rec->prev_hash, 32}, {leaf, 32}};
    if (test_sha256(leaf_parts, 4, leaf) || memcmp(leaf, rec->leaf_hash, 32) != 0)
        return -1;
    return test_sha256(link, 2, out);
}

void
test_ledger_init(test_ledger_t *lg, uint32_t max_pad_bytes)
{
    memset(lg, 0, sizeof(*lg));
    lg->max_pad_bytes = max_pad_bytes;
    lg->last_ts_ns = TEST_FIRST_TS_NS;
}

void
test_ledger_free(test_ledger_t *lg)
{
    free(lg->digests);
    memset(lg, 0, sizeof(*lg));
}

static int
ledger_reserve(test_ledger_t *lg, uint64_t seq)
{
    if (seq < lg->cap_seqs)
        return 0;
    uint64_t cap = lg->cap_seqs ? lg->cap_seqs : 1024;
    while (cap <= seq)
        cap *= 2;
    uint64_t *grown = realloc(lg->digests, cap * sizeof(*grown));
    if (!grown)
        return -ENOMEM;
    memset(grown + lg->cap_seqs, 0, (cap - lg->cap_seqs) * sizeof(*grown));
    lg->digests = grown;
    lg->cap_seqs = cap;
    return 0;
}

uint32_t
test_payload_build(test_rng_t *rng, uint64_t seq, uint32_t max_pad_bytes, uint8_t *buf, size_t cap)
{
    char pad[TEST_PAYLOAD_MAX_BYTES];
    uint32_t pad_bytes = (uint32_t)test_rng_below(rng, (uint64_t)max_pad_bytes + 1);
    if (pad_bytes >= sizeof(pad))
        pad_bytes = sizeof(pad) - 1;
    for (uint32_t i = 0; i < pad_bytes; i++)
        pad[i] = (char)('a' + test_rng_below(rng, 26));
    pad[pad_bytes] = '\0';

    bson_t doc = BSON_INITIALIZER;
    uint32_t len = 0;
    if (BSON_APPEND_INT64(&doc, "seq", (int64_t)seq) &&
        BSON_APPEND_INT64(&doc, "nonce", (int64_t)test_rng_next(rng)) &&
        BSON_APPEND_UTF8(&doc, "pad", pad) && doc.len <= cap) {
        memcpy(buf, bson_get_data(&doc), doc.len);
        len = doc.len;
    }
    bson_destroy(&doc);
    return len;
}

uint64_t
test_payload_seq(const uint8_t *payload, uint32_t len)
{
    bson_t doc;
    bson_iter_t it;
    if (!bson_init_static(&doc, payload, len) || !bson_validate(&doc, BSON_VALIDATE_NONE, NULL))
        return 0;
    if (!bson_iter_init_find(&it, &doc, "seq") || !BSON_ITER_HOLDS_INT64(&it))
        return 0;
    return (uint64_t)bson_iter_int64(&it);
}

int
test_ledger_append(test_ledger_t *lg, journal_t *j, test_rng_t *rng, unsigned n_records,
                   journal_batch_info_t *info, stele_error_t *err)
{
    uint8_t payload[TEST_PAYLOAD_MAX_BYTES];
    uint64_t first_seq = journal_last_seq(j) + 1;
    size_t cap_bytes = 0, used_bytes = 0;
    uint8_t *batch = NULL;
    int rc = ledger_reserve(lg, first_seq + n_records);
    if (rc)
        return rc;

    for (unsigned i = 0; i < n_records; i++) {
        uint64_t seq = first_seq + i;
        uint32_t len = test_payload_build(rng, seq, lg->max_pad_bytes, payload, sizeof(payload));
        if (len == 0) {
            rc = STELE_EINVAL;
            goto out;
        }
        size_t frame_bytes = journal_frame_bytes(journal_version(j), len);
        if (used_bytes + frame_bytes > cap_bytes) {
            size_t grown_cap = (used_bytes + frame_bytes) * 2;
            uint8_t *grown = realloc(batch, grown_cap);
            if (!grown) {
                rc = -ENOMEM;
                goto out;
            }
            batch = grown;
            cap_bytes = grown_cap;
        }
        /* Timestamps advance by a random step: the journal requires them never to decrease. */
        lg->last_ts_ns += (int64_t)test_rng_below(rng, 3);
        journal_frame_prepare(journal_version(j), batch + used_bytes, seq, lg->last_ts_ns, NULL,
                              payload, len);
        used_bytes += frame_bytes;
        lg->digests[seq] = test_digest(payload, len);
    }
    rc = journal_append_batch(j, batch, used_bytes, info, err);
out:
    free(batch);
    return rc;
}

int
test_ledger_sync(test_ledger_t *lg, journal_t *j, stele_error_t *err)
{
    int rc = journal_sync(j, err);
    if (rc == 0 && journal_last_seq(j) > lg->durable_seq)
        lg->durable_seq = journal_last_seq(j);
    return rc;
}

void
test_ledger_truncate(test_ledger_t *lg, uint64_t last_seq, int64_t last_ts_ns)
{
    for (uint64_t seq = last_seq + 1; seq < lg->cap_seqs; seq++)
        lg->digests[seq] = 0;
    /* What recovery kept is now on disk and shown to readers: it must never go away. */
    if (last_seq > lg->durable_seq)
        lg->durable_seq = last_seq;
    if (last_ts_ns > lg->last_ts_ns)
        lg->last_ts_ns = last_ts_ns;
}

static int check_fail(test_check_t *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
check_fail(test_check_t *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->what, sizeof(out->what), fmt, ap);
    va_end(ap);
    return -1;
}

/* Checks one record against the ledger and the record before it. */
static int
check_record(const test_ledger_t *lg, const journal_record_t *rec, const uint8_t *prev_hash,
             uint64_t prev_seq, test_check_t *out)
{
    if (prev_seq && rec->seq != prev_seq + 1)
        return check_fail(out, "seq %" PRIu64 " follows %" PRIu64, rec->seq, prev_seq);
    if (prev_seq && memcmp(rec->prev_hash, prev_hash, 32) != 0)
        return check_fail(out, "seq %" PRIu64 ": prev_hash is not seq %" PRIu64 "'s hash", rec->seq,
                          prev_seq);
    uint8_t want_hash[32];
    if (test_chain_hash(rec, want_hash) != 0 || memcmp(want_hash, rec->hash, 32) != 0)
        return check_fail(out, "seq %" PRIu64 ": hash is not its chain hash (FORMAT.md section 4)",
                          rec->seq);
    if (test_payload_seq(rec->payload, rec->payload_len) != rec->seq)
        return check_fail(out, "seq %" PRIu64 ": payload is not the one appended (%" PRIu64 ")",
                          rec->seq, test_payload_seq(rec->payload, rec->payload_len));
    uint64_t want = rec->seq < lg->cap_seqs ? lg->digests[rec->seq] : 0;
    if (want == 0)
        return check_fail(out, "seq %" PRIu64 " was never appended (durable %" PRIu64 ")", rec->seq,
                          lg->durable_seq);
    if (test_digest(rec->payload, rec->payload_len) != want)
        return check_fail(out,
                          "seq %" PRIu64 ": payload differs from the append (durable %" PRIu64 ")",
                          rec->seq, lg->durable_seq);
    return 0;
}

int
test_ledger_check(const test_ledger_t *lg, const char *dir, const journal_io_t *io,
                  test_check_t *out)
{
    journal_reader_t *r = NULL;
    stele_error_t err = {0};
    journal_record_t rec;
    uint8_t prev_hash[32] = {0};
    uint64_t prev_seq = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = journal_reader_open(dir, io, &r, &err);
    if (rc) {
        snprintf(out->what, sizeof(out->what), "reader_open: %s", err.message);
        return rc;
    }
    uint64_t from_seq = lg->deleted_below > 1 ? lg->deleted_below : 1;
    rc = journal_reader_seek(r, from_seq, 0, 0, &err);
    if (rc && rc != STELE_ENOTFOUND) {
        snprintf(out->what, sizeof(out->what), "reader_seek %" PRIu64 ": %s", from_seq,
                 err.message);
        goto out;
    }
    while ((rc = journal_reader_next(r, &rec, &err)) == 0) {
        if (out->n_records == 0)
            out->first_seq = rec.seq;
        rc = check_record(lg, &rec, prev_hash, prev_seq, out);
        if (rc)
            goto out;
        memcpy(prev_hash, rec.hash, 32);
        prev_seq = rec.seq;
        out->n_records++;
    }
    if (rc != STELE_EAGAIN) {
        snprintf(out->what, sizeof(out->what), "reader_next after %" PRIu64 ": %s (%s)", prev_seq,
                 err.message, test_code_name(rc));
        goto out;
    }
    rc = 0;
    out->last_seq = prev_seq;
    if (prev_seq < lg->durable_seq)
        rc = check_fail(out, "journal ends at %" PRIu64 " but %" PRIu64 " was durable", prev_seq,
                        lg->durable_seq);
    else if (lg->durable_seq >= from_seq && out->first_seq > from_seq)
        rc = check_fail(out, "journal starts at %" PRIu64 ", expected %" PRIu64, out->first_seq,
                        from_seq);
out:
    journal_reader_close(r);
    return rc;
}

int
test_key_file_epoch(const char *key, uint64_t *epoch)
{
    FILE *f = fopen(key, "r");
    if (!f)
        return -1;
    char line[1100];
    unsigned long long e = 0;
    int rc = fgets(line, sizeof line, f) ? 0 : -1;
    if (rc == 0 && fgets(line, sizeof line, f) && sscanf(line, "epoch %llu", &e) != 1)
        rc = -1;
    fclose(f);
    *epoch = e;
    return rc;
}

uint64_t
test_newest_segment_first_seq(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "test_newest_segment_first_seq: cannot read %s: %s\n", dir,
                strerror(errno));
        abort();
    }
    uint64_t newest = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        uint64_t first_seq = strtoull(de->d_name, NULL, 10);
        if (len > 4 && strcmp(de->d_name + len - 4, ".seg") == 0 && first_seq > newest)
            newest = first_seq;
    }
    closedir(d);
    return newest;
}
