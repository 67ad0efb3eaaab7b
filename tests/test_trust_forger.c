/*
 * test_trust_forger.c: `stele verify --trust` against a forger with root. The forger is
 * tests/forger/forge.py, written from journal/FORMAT.md alone: it rewrites a signed journal
 * with correct CRCs, chain hashes, headers, compact ranges and LOCK page, and signs what it
 * can sign (a fresh key, or the current epoch's key). Each forgery must fail `verify --trust`
 * with exit 2 naming the seq it concerns; the same journal untouched, after legitimate
 * retention, after a clean restart and with an unsealed tail must pass (exit 0, and exit 2
 * for the unsealed tail only with --require-sealed).
 *
 * Bad input to the trust commands (altered and truncated proof bundles, a wrong public key
 * file, a checkpoint whose signature line is not one, signer key files of the wrong size or
 * mode, or of another journal): each a clear error, and nothing changed.
 *
 * The journal: 300 records written by three writers one after the other, each at least one
 * key epoch (1 s) after the one before, so it spans epochs 0, 1 and 2, six segments, and a
 * checkpoint at least every 10 records. Needs python3 with the `cryptography` package
 * (skipped without it) and, for the retention case, the MongoDB-compatible test server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_harness.h"
#include "mongo_server.h"
#include "ship_fixture.h"
#include "stele.h"

#define FORGER_ROUNDS 3
#define FORGER_RECORDS_PER_ROUND 100
#define FORGER_RECORDS (FORGER_ROUNDS * FORGER_RECORDS_PER_ROUND)
#define FORGER_PAD_BYTES 600 /* about 45 records per 64 KiB segment */
#define FORGER_EPOCH_S 1
#define FORGER_TRIM_AT 250 /* in the last epoch, a batch boundary after it */
#define FORGER_CMD_MAX 4096
#define FORGER_SHIP_WAIT_MS 120000
#define FORGER_RETENTION_SETTLE_MS 5000

typedef struct forger_fixture {
    char *root;          /* temporary directory holding everything below */
    char template[1024]; /* the signed journal, never forged: copied for each case */
    char key[1024];      /* its signer key file (epoch 2 after the third writer) */
    char pub[1024];      /* the anchor: epoch 0's verifier key */
    char dir[1024];      /* the copy a case forges */
} forger_fixture_t;

static mongo_server_t server;
static int server_up;

static void
forger_options(stele_options_t *o, const char *key)
{
    stele_options_init(o);
    o->segment_bytes = 64u << 10;
    o->max_record_bytes = 4u << 10;
    o->signing_key = key;
    o->checkpoint_records = 10;
    o->key_epoch_s = FORGER_EPOCH_S;
}

static void
forger_append(stele_t *db, uint64_t i)
{
    char json[FORGER_PAD_BYTES + 128];
    int n = snprintf(json, sizeof json, "{\"i\":%llu,\"who\":\"alice\",\"pad\":\"%0*d\"}",
                     (unsigned long long)i, FORGER_PAD_BYTES, 0);
    stele_error_t err = {0};
    uint64_t seq = 0;
    if (stele_append_json(db, json, (size_t)n, STELE_WAIT_NONE, &seq, &err) != 0)
        fail_msg("append: %s", err.message);
    assert_int_equal(seq, i);
}

static void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Runs a shell command; returns its exit status, its stdout in out (may be NULL). */
static int
run_shell(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t len = 0;
    char sink[256];
    for (;;) {
        char *buf = out && len + 1 < cap ? out + len : sink;
        size_t room = out && len + 1 < cap ? cap - 1 - len : sizeof sink;
        size_t n = fread(buf, 1, room, p);
        if (n == 0)
            break;
        if (buf != sink)
            len += n;
    }
    if (out)
        out[len] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Runs the forger on the case's copy; the forgery must succeed. */
static void
forge(forger_fixture_t *f, const char *args, char *out, size_t cap)
{
    char cmd[FORGER_CMD_MAX];
    snprintf(cmd, sizeof cmd, "python3 '%s' %s", STELE_FORGER, args);
    char *at = strstr(cmd, "DIR");
    if (at) {
        char rest[FORGER_CMD_MAX];
        snprintf(rest, sizeof rest, "%s", at + 3);
        snprintf(at, sizeof cmd - (size_t)(at - cmd), "'%s'%s", f->dir, rest);
    }
    if (run_shell(cmd, out, cap) != 0)
        fail_msg("the forger failed: %s", cmd);
}

static harness_result_t
verify_trust(forger_fixture_t *f, int want_exit, int require_sealed)
{
    const char *args[] = {"verify",  "-d",   f->dir,
                          "--trust", f->pub, require_sealed ? "--require-sealed" : NULL,
                          NULL};
    return harness_run_argv(want_exit, NULL, args);
}

/* verify --trust fails, naming `seq` first, and its message holds `why`. */
static void
expect_caught(forger_fixture_t *f, uint64_t seq, const char *why)
{
    harness_result_t res = verify_trust(f, 2, 0);
    char want[64];
    snprintf(want, sizeof want, "failed at seq %llu", (unsigned long long)seq);
    const char *at = strstr(res.err, want);
    if (!at || (at[strlen(want)] >= '0' && at[strlen(want)] <= '9') || !strstr(res.err, why))
        fail_msg("verify --trust: want \"%s\" and \"%s\", got: %s", want, why, res.err);
    harness_result_free(&res);
}

static void
write_template(forger_fixture_t *f)
{
    stele_error_t err = {0};
    assert_int_equal(stele_keygen(f->key, f->pub, NULL, &err), 0);
    stele_options_t o;
    forger_options(&o, f->key);
    uint64_t next = 1;
    for (int round = 0; round < FORGER_ROUNDS; round++) {
        if (round > 0)
            sleep_ms(FORGER_EPOCH_S * 1000 + 200); /* the next writer starts a new epoch */
        stele_t *db = NULL;
        if (stele_open(f->template, &o, &db, &err) != 0)
            fail_msg("open: %s", err.message);
        for (int i = 0; i < FORGER_RECORDS_PER_ROUND; i++) {
            /* A batch starts at FORGER_TRIM_AT + 1 (the index names it): see the trim case. */
            if (next == FORGER_TRIM_AT + 1)
                assert_int_equal(stele_flush(db, &err), 0);
            forger_append(db, next++);
        }
        assert_int_equal(stele_close(db, &err), 0);
    }
}

static int
group_setup(void **state)
{
    if (run_shell("python3 -c 'import cryptography' 2>/dev/null", NULL, 0) != 0) {
        fprintf(stderr, "skipped: python3 with the cryptography package (Debian: "
                        "python3-cryptography) is needed by the forger\n");
        exit(77);
    }
    forger_fixture_t *f = calloc(1, sizeof *f);
    if (!f || !(f->root = harness_mkdtemp()))
        return -1;
    snprintf(f->template, sizeof f->template, "%s/template", f->root);
    snprintf(f->key, sizeof f->key, "%s/signing.key", f->root);
    snprintf(f->pub, sizeof f->pub, "%s/anchor.pub", f->root);
    snprintf(f->dir, sizeof f->dir, "%s/forged", f->root);
    write_template(f);
    server_up = mongo_server_start(&server) == 0;
    *state = f;
    return 0;
}

static int
group_teardown(void **state)
{
    forger_fixture_t *f = *state;
    if (server_up)
        mongo_server_destroy(&server);
    harness_rmtree(f->root);
    free(f->root);
    free(f);
    return 0;
}

/* Each case forges a fresh copy of the template. */
static int
case_setup(void **state)
{
    forger_fixture_t *f = *state;
    char cmd[FORGER_CMD_MAX];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", f->dir, f->template, f->dir);
    return run_shell(cmd, NULL, 0) == 0 ? 0 : -1;
}

/* The tree size of the first statement of `reason` with size >= min_size in `epoch` (-1:
 * any), from the forger's listing. */
static uint64_t
statement_size(forger_fixture_t *f, uint64_t min_size, int epoch, const char *reason)
{
    char out[16384];
    forge(f, "list DIR", out, sizeof out);
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned long long size = 0;
        int e = 0;
        char r[32];
        if (sscanf(line, "%llu %d %31s", &size, &e, r) == 3 && size >= min_size &&
            (epoch < 0 || e == epoch) && strcmp(r, reason) == 0)
            return size;
    }
    fail_msg("no %s statement of size >= %llu in epoch %d", reason, (unsigned long long)min_size,
             epoch);
    return 0;
}

/* The tree sizes of the statements (of any kind) around `seq`, from the forger's listing:
 * *below the largest one under seq (0 when none), *over the smallest one at or above it. */
static void
statements_around(forger_fixture_t *f, uint64_t seq, uint64_t *below, uint64_t *over)
{
    char out[16384];
    forge(f, "list DIR", out, sizeof out);
    *below = 0;
    *over = UINT64_MAX;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned long long at = 0;
        if (sscanf(line, "%llu", &at) != 1)
            continue;
        if (at < seq && at > *below)
            *below = at;
        if (at >= seq && at < *over)
            *over = at;
    }
    assert_true(*over != UINT64_MAX);
}

static void
test_forger_untouched_journal_verifies(void **state)
{
    forger_fixture_t *f = *state;
    harness_result_t res = verify_trust(f, 0, 1);
    assert_non_null(strstr(res.out, "seq 1..300"));
    assert_non_null(strstr(res.out, "key epoch 2"));
    harness_result_free(&res);
}

/* One event changed, every later leaf, chain hash, header range and CRC recomputed: the
 * plain checks pass; the signed root names the record (the index caches the signed leaves). */
static void
test_forger_changed_event_is_named(void **state)
{
    forger_fixture_t *f = *state;
    forge(f, "alter DIR 15 alice malry", NULL, 0);
    const char *plain[] = {"verify", "-d", f->dir, NULL};
    harness_result_free((harness_result_t[]){harness_run_argv(0, NULL, plain)});
    expect_caught(f, 15, "record 15 is not what the checkpoint");
}

/* The same with the index deleted: the range under the first failing checkpoint is named. */
static void
test_forger_changed_event_without_index_names_its_range(void **state)
{
    forger_fixture_t *f = *state;
    forge(f, "alter DIR 15 alice malry", NULL, 0);
    char cmd[FORGER_CMD_MAX];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/index'", f->dir);
    assert_int_equal(run_shell(cmd, NULL, 0), 0);
    /* The range runs from after the last checkpoint below the changed record (where the
     * batches fell decides where the checkpoints are) to the first one over it. */
    uint64_t below = 0, over = 0;
    statements_around(f, 15, &below, &over);
    char why[128];
    snprintf(why, sizeof why, "records %llu..%llu are not what", (unsigned long long)below + 1,
             (unsigned long long)over);
    expect_caught(f, below + 1, why);
}

static void
test_forger_deleted_record_is_named(void **state)
{
    forger_fixture_t *f = *state;
    forge(f, "delete DIR 120", NULL, 0);
    expect_caught(f, 120, "");
}

/* The newest records trimmed with their checkpoints, the LOCK page set to the new end: the
 * index still names the batch that started after the cut (and without it the KEYS statement
 * does, next case). */
static void
test_forger_trimmed_tail_is_named(void **state)
{
    forger_fixture_t *f = *state;
    char args[64];
    snprintf(args, sizeof args, "trim DIR %d", FORGER_TRIM_AT);
    forge(f, args, NULL, 0);
    expect_caught(f, FORGER_TRIM_AT + 1, "records are missing");
}

/* Trimmed back past a key rotation, index deleted: KEYS (never trimmed by stele) still holds
 * the rotation at tree size 200, so records 151.. are missing. */
static void
test_forger_trim_past_a_rotation_is_named(void **state)
{
    forger_fixture_t *f = *state;
    forge(f, "trim DIR 150", NULL, 0);
    char cmd[FORGER_CMD_MAX];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/index'", f->dir);
    assert_int_equal(run_shell(cmd, NULL, 0), 0);
    expect_caught(f, 151, "records are missing");
}

static void
test_forger_deleted_oldest_segments_are_named(void **state)
{
    forger_fixture_t *f = *state;
    forge(f, "drop-oldest DIR 2", NULL, 0);
    expect_caught(f, 1, "no signed retention checkpoint says they may go");
}

/* A record changed and every checkpoint from it on signed again by a fresh key of the same
 * name: the first such checkpoint is not signed by the epoch's key. */
static void
test_forger_checkpoint_signed_by_a_fresh_key_is_named(void **state)
{
    forger_fixture_t *f = *state;
    uint64_t size = statement_size(f, 15, 0, "records");
    forge(f, "alter DIR 15 alice malry --sign fresh", NULL, 0);
    char why[128];
    snprintf(why, sizeof why, "checkpoint of tree size %llu is not signed by the key of epoch 0",
             (unsigned long long)size);
    expect_caught(f, size, why);
}

/* The holder of the current key (epoch 2) signs an epoch 0 checkpoint again, with the epoch
 * line saying 2 and, in the second forgery, a changed record under it. */
static void
test_forger_old_checkpoint_signed_with_the_current_key_is_named(void **state)
{
    forger_fixture_t *f = *state;
    uint64_t size = statement_size(f, 1, 0, "records");
    char args[FORGER_CMD_MAX];
    snprintf(args, sizeof args, "resign DIR %llu '%s'", (unsigned long long)size, f->key);
    forge(f, args, NULL, 0);
    char why[128];
    snprintf(why, sizeof why, "checkpoint of tree size %llu", (unsigned long long)size);
    expect_caught(f, size, why);

    assert_int_equal(case_setup(state), 0);
    snprintf(args, sizeof args, "alter DIR 15 alice malry --sign '%s'", f->key);
    forge(f, args, NULL, 0);
    size = statement_size(f, 15, -1, "records");
    snprintf(why, sizeof why, "checkpoint of tree size %llu", (unsigned long long)size);
    expect_caught(f, size, why);
}

/* A writer reopens the journal and closes it with nothing appended. */
static void
test_forger_clean_restart_verifies(void **state)
{
    forger_fixture_t *f = *state;
    stele_options_t o;
    forger_options(&o, f->key);
    char key_copy[1100];
    snprintf(key_copy, sizeof key_copy, "%s.restart", f->key);
    char cmd[FORGER_CMD_MAX];
    snprintf(cmd, sizeof cmd, "cp -p '%s' '%s'", f->key, key_copy);
    assert_int_equal(run_shell(cmd, NULL, 0), 0);
    o.signing_key = key_copy;
    stele_t *db = NULL;
    stele_error_t err = {0};
    if (stele_open(f->dir, &o, &db, &err) != 0)
        fail_msg("open: %s", err.message);
    assert_int_equal(stele_close(db, &err), 0);
    harness_result_free((harness_result_t[]){verify_trust(f, 0, 1)});
    unlink(key_copy);
}

/* A writer dies (no close) with records past its newest checkpoint: they are the unsealed
 * tail, fine unless --require-sealed. */
static void
test_forger_unsealed_tail_verifies_unless_required(void **state)
{
    forger_fixture_t *f = *state;
    char key_copy[1100];
    snprintf(key_copy, sizeof key_copy, "%s.tail", f->key);
    char cmd[FORGER_CMD_MAX];
    snprintf(cmd, sizeof cmd, "cp -p '%s' '%s'", f->key, key_copy);
    assert_int_equal(run_shell(cmd, NULL, 0), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        stele_options_t o;
        forger_options(&o, key_copy);
        o.checkpoint_records = 100000;
        o.checkpoint_interval_ms = 3600000;
        o.key_epoch_s = 3600;
        stele_t *db = NULL;
        stele_error_t err = {0};
        if (stele_open(f->dir, &o, &db, &err) != 0)
            _exit(3);
        for (int i = 0; i < 5; i++) {
            char json[64];
            int n = snprintf(json, sizeof json, "{\"tail\":%d}", i);
            if (stele_append_json(db, json, (size_t)n, STELE_WAIT_DURABLE, NULL, &err) != 0)
                _exit(4);
        }
        _exit(0); /* dies without closing: no close checkpoint */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    harness_result_t res = verify_trust(f, 0, 0);
    assert_non_null(strstr(res.out, "301..305"));
    harness_result_free(&res);
    res = verify_trust(f, 2, 1);
    assert_non_null(strstr(res.err, "failed at seq 301"));
    harness_result_free(&res);
    unlink(key_copy);
}

/* Retention deletes shipped segments after a signed retention checkpoint: verify passes and
 * names the retention point; the same deletion by hand (previous cases) does not. */
static void
test_forger_legitimate_retention_verifies(void **state)
{
    forger_fixture_t *f = *state;
    if (!server_up)
        skip();
    char key_copy[1100];
    snprintf(key_copy, sizeof key_copy, "%s.retention", f->key);
    char cmd[FORGER_CMD_MAX];
    snprintf(cmd, sizeof cmd, "cp -p '%s' '%s'", f->key, key_copy);
    assert_int_equal(run_shell(cmd, NULL, 0), 0);
    stele_sink_options_t sink;
    ship_sink_options(&sink, "a", server.uri, "forger_retention");
    ship_drop_collection(&sink);
    stele_options_t o;
    forger_options(&o, key_copy);
    o.retention_bytes = 1;
    o.sinks = &sink;
    o.n_sinks = 1;
    stele_t *db = NULL;
    stele_error_t err = {0};
    if (stele_open(f->dir, &o, &db, &err) != 0)
        fail_msg("open: %s", err.message);
    forger_append(db, FORGER_RECORDS + 1);
    assert_int_equal(
        stele_wait(db, FORGER_RECORDS + 1, STELE_WAIT_SHIPPED, FORGER_SHIP_WAIT_MS, &err), 0);
    stele_stats_t st = {0};
    for (int waited = 0; waited < FORGER_RETENTION_SETTLE_MS; waited += 100) {
        assert_int_equal(stele_stats(db, &st), 0);
        if (st.first_seq > 1)
            break;
        sleep_ms(100);
    }
    assert_true(st.first_seq > 1);
    assert_int_equal(stele_close(db, &err), 0);
    harness_result_t res = verify_trust(f, 0, 1);
    assert_non_null(strstr(res.out, "retention"));
    harness_result_free(&res);
    unlink(key_copy);
}

/* ---- bad input: a clear error, nothing changed ---- */

/* What a failed command must leave as it was: the journal's files and the key file, as
 * SHA-256 sums. Not LOCK (shared memory, never data) nor prepared.tmp (scratch, never
 * trusted: a writer's preparer may replace it before the writer refuses its key). Owned. */
static char *
files_digest(forger_fixture_t *f)
{
    char cmd[FORGER_CMD_MAX], *out = malloc(65536);
    assert_non_null(out);
    snprintf(
        cmd, sizeof cmd,
        "cd '%s' && find . -type f ! -name LOCK ! -name prepared.tmp ! -path './index/*' | sort | "
        "xargs sha256sum && sha256sum '%s'",
        f->dir, f->key);
    assert_int_equal(run_shell(cmd, out, 65536), 0);
    return out;
}

static void
expect_cli_error(const char *const *args, int want_exit, const char *message)
{
    harness_result_t res = harness_run_argv(want_exit, NULL, args);
    if (!strstr(res.err, message))
        fail_msg("stele %s: want \"%s\" on stderr, got: %s", args[0], message, res.err);
    harness_result_free(&res);
}

static char *
read_whole(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    char *buf = malloc(1 << 20);
    assert_non_null(buf);
    *len = fread(buf, 1, (1 << 20) - 1, fp);
    buf[*len] = '\0';
    fclose(fp);
    return buf;
}

static void
write_whole(const char *path, const char *data, size_t len, mode_t mode)
{
    unlink(path);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    fclose(fp);
    assert_int_equal(chmod(path, mode), 0);
}

/* Every prefix of a proof bundle and every one-byte change of it is refused (in process,
 * so that all of them run), and the CLI says so with exit 2. */
static void
test_trust_bad_proof_bundles_are_refused(void **state)
{
    forger_fixture_t *f = *state;
    char bundle_path[1100];
    snprintf(bundle_path, sizeof bundle_path, "%s/bundle.json", f->root);
    const char *prove[] = {"prove", "-d", f->dir, "--seq", "150", NULL};
    harness_result_t res = harness_run_argv(0, NULL, prove);
    write_whole(bundle_path, res.out, res.out_len, 0644);
    const char *check[] = {"verify-proof", "--trust", f->pub, bundle_path, NULL};
    harness_result_free((harness_result_t[]){harness_run_argv(0, NULL, check)});

    char *bundle = res.out;
    size_t len = res.out_len;
    while (len > 0 && bundle[len - 1] == '\n')
        len--;
    stele_error_t err = {0};
    assert_int_equal(stele_verify_proof(bundle, len, f->pub, NULL, &err), 0);
    for (size_t cut = 0; cut < len; cut++) {
        err.message[0] = '\0';
        if (stele_verify_proof(bundle, cut, f->pub, NULL, &err) != STELE_ECORRUPT ||
            !err.message[0])
            fail_msg("a bundle cut to %zu of %zu bytes was not refused clearly", cut, len);
    }
    for (size_t at = 0; at < len; at++) {
        char was = bundle[at];
        bundle[at] = (char)(was == '0' ? '1' : was == ' ' ? '!' : was ^ 0x01);
        err.message[0] = '\0';
        if (stele_verify_proof(bundle, len, f->pub, NULL, &err) != STELE_ECORRUPT ||
            !err.message[0])
            fail_msg("a bundle with byte %zu changed (%c to %c) was not refused", at, was,
                     bundle[at]);
        bundle[at] = was;
    }

    write_whole(bundle_path, bundle, len / 2, 0644);
    expect_cli_error(check, 2, "proof bundle");
    bundle[len / 3] ^= 0x01;
    write_whole(bundle_path, bundle, len, 0644);
    expect_cli_error(check, 2, "proof bundle");
    harness_result_free(&res);
}

/* Another journal's anchor, the private key where the public one belongs, a missing file: the
 * check fails or refuses to start, saying why, and changes nothing. */
static void
test_trust_wrong_public_key_files_are_refused(void **state)
{
    forger_fixture_t *f = *state;
    char other_key[1100], other_pub[1100], missing[1100];
    snprintf(other_key, sizeof other_key, "%s/other.key", f->root);
    snprintf(other_pub, sizeof other_pub, "%s/other.pub", f->root);
    snprintf(missing, sizeof missing, "%s/missing.pub", f->root);
    unlink(other_key);
    unlink(other_pub);
    stele_error_t err = {0};
    assert_int_equal(stele_keygen(other_key, other_pub, NULL, &err), 0);
    char *before = files_digest(f);

    const char *other[] = {"verify", "-d", f->dir, "--trust", other_pub, NULL};
    expect_cli_error(other, 2, "KEYS statement 0 is not signed by the trust anchor");
    const char *private[] = {"verify", "-d", f->dir, "--trust", f->key, NULL};
    expect_cli_error(private, 1, "holds a private key where a public key is expected");
    const char *gone[] = {"verify", "-d", f->dir, "--trust", missing, NULL};
    expect_cli_error(gone, 3, "could not open key file");
    write_whole(missing, "stele+00000000+AAAA\n", 20, 0644);
    expect_cli_error(gone, 1, "key file");

    char *after = files_digest(f);
    assert_string_equal(before, after);
    free(before);
    free(after);
    unlink(missing);
}

/* A checkpoint whose signature line is not base64: named by its tree size, with why. */
static void
test_trust_checkpoint_with_a_bad_signature_line_is_named(void **state)
{
    forger_fixture_t *f = *state;
    uint64_t size = statement_size(f, 50, 0, "records");
    char args[256];
    snprintf(args, sizeof args, "mangle-signature DIR %llu", (unsigned long long)size);
    forge(f, args, NULL, 0);
    expect_caught(f, size, "signature line 1 is not base64");
}

/* A writer given a signer key file of the wrong mode or size, or of another journal, refuses
 * before it creates or changes anything. */
static void
test_trust_bad_signing_key_files_are_refused(void **state)
{
    forger_fixture_t *f = *state;
    char bad[1100], fresh_dir[1100], other_pub[1100];
    snprintf(bad, sizeof bad, "%s/bad.key", f->root);
    snprintf(fresh_dir, sizeof fresh_dir, "%s/never-created", f->root);
    size_t key_len = 0;
    char *key_text = read_whole(f->key, &key_len);
    char *before = files_digest(f);
    const char *into_new[] = {"insert", "-d", fresh_dir, "--signing-key", bad, "{\"a\":1}", NULL};
    const char *into_old[] = {"insert", "-d", f->dir, "--signing-key", bad, "{\"a\":1}", NULL};

    write_whole(bad, key_text, key_len, 0644);
    expect_cli_error(into_new, 1, "is open to group or others (mode 0644)");
    expect_cli_error(into_old, 1, "is open to group or others (mode 0644)");
    write_whole(bad, "", 0, 0600);
    expect_cli_error(into_new, 1, "is 0 bytes; a key file holds one key string");
    expect_cli_error(into_old, 1, "is 0 bytes; a key file holds one key string");
    char big[2000];
    memset(big, 'A', sizeof big);
    write_whole(bad, big, sizeof big, 0600);
    expect_cli_error(into_new, 1, "is 2000 bytes");
    expect_cli_error(into_old, 1, "is 2000 bytes");
    unlink(bad);
    snprintf(other_pub, sizeof other_pub, "%s/bad.pub", f->root);
    unlink(other_pub);
    stele_error_t err = {0};
    assert_int_equal(stele_keygen(bad, other_pub, NULL, &err), 0);
    expect_cli_error(into_old, 1, "matches no key of journal");
    const char *unsigned_writer[] = {"insert", "-d", f->dir, "{\"a\":1}", NULL};
    expect_cli_error(unsigned_writer, 1, "is signed: a writer needs its signing key");

    assert_int_equal(access(fresh_dir, F_OK), -1);
    char *after = files_digest(f);
    if (strcmp(before, after) != 0) {
        fprintf(stderr, "before:\n%s\nafter:\n%s\n", before, after);
        fail_msg("a refused writer changed files");
    }
    free(before);
    free(after);
    free(key_text);
    unlink(bad);
    unlink(other_pub);
}

int
main(void)
{
#define T(fn) cmocka_unit_test_setup(fn, case_setup)
    const struct CMUnitTest tests[] = {
        T(test_forger_untouched_journal_verifies),
        T(test_forger_changed_event_is_named),
        T(test_forger_changed_event_without_index_names_its_range),
        T(test_forger_deleted_record_is_named),
        T(test_forger_trimmed_tail_is_named),
        T(test_forger_trim_past_a_rotation_is_named),
        T(test_forger_deleted_oldest_segments_are_named),
        T(test_forger_checkpoint_signed_by_a_fresh_key_is_named),
        T(test_forger_old_checkpoint_signed_with_the_current_key_is_named),
        T(test_forger_clean_restart_verifies),
        T(test_forger_unsealed_tail_verifies_unless_required),
        T(test_forger_legitimate_retention_verifies),
        T(test_trust_bad_proof_bundles_are_refused),
        T(test_trust_wrong_public_key_files_are_refused),
        T(test_trust_checkpoint_with_a_bad_signature_line_is_named),
        T(test_trust_bad_signing_key_files_are_refused),
    };
#undef T
    if (getenv("STELE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("STELE_TEST_FILTER"));
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
