/*
 * test_cli_mongo_trust.c: `stele verify --mongo URI --trust PUB` against the test server
 * (tests/integration/mongo_server.c, or STELE_TEST_MONGO_URI), with no journal present: a
 * signed journal is written (keygen, three inserts, so checkpoints at 40, 70 and 100),
 * shipped with its statements to <collection>_checkpoints, then deleted; the copy is then
 * damaged through the driver as someone with write access to the database would (documents
 * deleted from the middle, the start and the end, an event altered, a statement forged or
 * removed, one signed by a fresh key, an old one re-signed with the newest epoch's key), and
 * verify must exit 2 naming the right seq, and 0 on the intact copy.
 */
#include "cli_harness.h"
#include "mongo_server.h"

#include <mongoc/mongoc.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "meta.h"   /* a forger's statements: FORMAT.md section 11.3 */
#include "sigkey.h" /* and keys: section 10.3 */

#define SOURCE "trust-src"
#define N_RECORDS 100

typedef struct trust_fixture {
    mongo_server_t server;
    mongoc_client_t *client;
    int n_db;
} trust_fixture_t;

/* One test's signed copy: its database, and the key files (the journal is gone). */
typedef struct trust_copy {
    char *root;
    char db[64];
    char pub[4096];
    char key[4096];
    char dir[4096];
    const char *key_epoch_s;
} trust_copy_t;

static int
group_setup(void **state)
{
    trust_fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    if (mongo_server_start(&f->server) != 0) {
        free(f);
        fail_msg("could not start the MongoDB test server: run "
                 "tests/integration/build-test-server.sh or set STELE_TEST_MONGO_URI");
    }
    mongoc_init();
    f->client = mongoc_client_new(f->server.uri);
    assert_non_null(f->client);
    *state = f;
    return 0;
}

static int
group_teardown(void **state)
{
    trust_fixture_t *f = *state;
    mongoc_client_destroy(f->client);
    mongoc_cleanup();
    mongo_server_destroy(&f->server);
    free(f);
    return 0;
}

static void
insert_lines(const trust_copy_t *c, size_t first, size_t count)
{
    char *lines = harness_json_lines(first, count);
    harness_result_t r = harness_run(0, lines, "insert", "-d", c->dir, "--source", SOURCE,
                                     "--signing-key", c->key, "--checkpoint-records", "1000",
                                     "--key-epoch-s", c->key_epoch_s, "--wait", "written", NULL);
    harness_result_free(&r);
    free(lines);
}

/* A signed journal of N_RECORDS records, closed after 40, 70 and 100 (a checkpoint each),
 * shipped to a database of its own, then removed: only the copy and the keys remain. With
 * key_epoch_s "1", each insert after the first opens the journal more than a key epoch after
 * the last rotation, so it rotates: epoch 1 from tree size 40, epoch 2 from 70. */
static void
copy_make(trust_fixture_t *f, trust_copy_t *c, const char *key_epoch_s)
{
    memset(c, 0, sizeof *c);
    c->key_epoch_s = key_epoch_s ? key_epoch_s : "900";
    c->root = harness_mkdtemp();
    snprintf(c->db, sizeof c->db, "stele_trust_%d_%d", (int)getpid(), f->n_db++);
    snprintf(c->key, sizeof c->key, "%s/signer.key", c->root);
    snprintf(c->pub, sizeof c->pub, "%s/anchor.pub", c->root);
    snprintf(c->dir, sizeof c->dir, "%s/journal", c->root);
    harness_result_t r = harness_run(0, NULL, "keygen", "--key", c->key, "--pub", c->pub, NULL);
    harness_result_free(&r);
    insert_lines(c, 0, 40);
    if (key_epoch_s)
        usleep(1100 * 1000);
    insert_lines(c, 40, 30);
    if (key_epoch_s)
        usleep(1100 * 1000);
    insert_lines(c, 70, 30);
    r = harness_run(0, NULL, "ship", "-d", c->dir, "--signing-key", c->key, "--key-epoch-s",
                    c->key_epoch_s, "--mongo", f->server.uri, "--db", c->db, "--once", NULL);
    harness_result_free(&r);
    harness_rmtree(c->dir);
}

static void
copy_free(trust_copy_t *c)
{
    harness_rmtree(c->root);
    free(c->root);
}

/* Runs verify --mongo --trust on the copy; asserts the exit code and returns the result. */
static harness_result_t
copy_verify(const trust_fixture_t *f, const trust_copy_t *c, int want_exit)
{
    return harness_run(want_exit, NULL, "verify", "--mongo", f->server.uri, "--db", c->db,
                       "--trust", c->pub, "--source", SOURCE, NULL);
}

static mongoc_collection_t *
copy_coll(const trust_fixture_t *f, const trust_copy_t *c, const char *name)
{
    return mongoc_client_get_collection(f->client, c->db, name);
}

/* Deletes the events of seqs first..last. */
static void
copy_delete(const trust_fixture_t *f, const trust_copy_t *c, int64_t first, int64_t last)
{
    mongoc_collection_t *coll = copy_coll(f, c, "events");
    bson_t *filter = BCON_NEW("_id.src", BCON_UTF8(SOURCE), "_id.seq", "{", "$gte",
                              BCON_INT64(first), "$lte", BCON_INT64(last), "}");
    bson_t reply;
    bson_error_t berr;
    assert_true(mongoc_collection_delete_many(coll, filter, NULL, &reply, &berr));
    bson_iter_t it;
    assert_true(bson_iter_init_find(&it, &reply, "deletedCount"));
    assert_int_equal(bson_iter_as_int64(&it), last - first + 1);
    bson_destroy(&reply);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
}

/* Applies `update` to the one document of coll matching `filter`. */
static void
copy_update(const trust_fixture_t *f, const trust_copy_t *c, const char *name, bson_t *filter,
            bson_t *update)
{
    mongoc_collection_t *coll = copy_coll(f, c, name);
    bson_t reply;
    bson_error_t berr;
    if (!mongoc_collection_update_one(coll, filter, update, NULL, &reply, &berr))
        fail_msg("update: %s", berr.message);
    bson_iter_t it;
    assert_true(bson_iter_init_find(&it, &reply, "modifiedCount"));
    assert_int_equal(bson_iter_as_int64(&it), 1);
    bson_destroy(&reply);
    bson_destroy(filter);
    bson_destroy(update);
    mongoc_collection_destroy(coll);
}

static int64_t
copy_count(const trust_fixture_t *f, const trust_copy_t *c, const char *name)
{
    mongoc_collection_t *coll = copy_coll(f, c, name);
    bson_t filter = BSON_INITIALIZER;
    bson_error_t berr;
    int64_t n = mongoc_collection_count_documents(coll, &filter, NULL, NULL, NULL, &berr);
    assert_true(n >= 0);
    mongoc_collection_destroy(coll);
    return n;
}

static void
assert_contains(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("expected \"%s\" in:\n%s", part, text);
}

static void
test_intact_copy_verifies_without_a_journal(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c;
    copy_make(f, &c, NULL);
    assert_true(copy_count(f, &c, "events_checkpoints") >= 4); /* start, 40, 70, 100 */
    harness_result_t r = copy_verify(f, &c, 0);
    assert_contains(r.out, "ok: remote copy of " SOURCE " verified, 100 documents (seq 1..100)");
    harness_result_free(&r);
    /* without --source: the only journal the companion collection knows */
    r = harness_run(0, NULL, "verify", "--mongo", f->server.uri, "--db", c.db, "--trust", c.pub,
                    NULL);
    assert_contains(r.out, "seq 1..100");
    harness_result_free(&r);
    copy_free(&c);
}

static void
test_documents_deleted_from_the_middle_fail_at_the_first(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c;
    copy_make(f, &c, NULL);
    copy_delete(f, &c, 50, 52);
    harness_result_t r = copy_verify(f, &c, 2);
    assert_contains(r.err, "failed at seq 50:");
    assert_contains(r.err, "3 missing from the remote copy: 50-52");
    harness_result_free(&r);
    copy_free(&c);
}

static void
test_documents_deleted_from_the_start_fail_at_seq_1(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c;
    copy_make(f, &c, NULL);
    copy_delete(f, &c, 1, 3);
    harness_result_t r = copy_verify(f, &c, 2);
    assert_contains(r.err, "failed at seq 1:");
    assert_contains(r.err, "3 missing from the remote copy: 1-3");
    harness_result_free(&r);
    copy_free(&c);
}

static void
test_documents_deleted_from_the_end_fail_below_the_checkpoint(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c;
    copy_make(f, &c, NULL);
    copy_delete(f, &c, 96, 100);
    harness_result_t r = copy_verify(f, &c, 2);
    assert_contains(r.err, "failed at seq 96:");
    assert_contains(r.err, "5 missing from the remote copy: 96-100");
    harness_result_free(&r);
    copy_free(&c);
}

static void
test_an_altered_event_fails_at_its_seq(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c;
    copy_make(f, &c, NULL);
    copy_update(f, &c, "events", BCON_NEW("_id.src", BCON_UTF8(SOURCE), "_id.seq", BCON_INT64(61)),
                BCON_NEW("$set", "{", "who", BCON_UTF8("mallory"), "}"));
    harness_result_t r = copy_verify(f, &c, 2);
    assert_contains(r.err, "failed at seq 61:");
    assert_contains(r.err, "1 not what was signed: 61");
    harness_result_free(&r);
    copy_free(&c);
}

static void
test_an_altered_origin_fails_at_its_seq(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c;
    copy_make(f, &c, NULL);
    copy_update(f, &c, "events", BCON_NEW("_id.src", BCON_UTF8(SOURCE), "_id.seq", BCON_INT64(7)),
                BCON_NEW("$set", "{", "_stele.origin.uid", BCON_INT64(4242), "}"));
    harness_result_t r = copy_verify(f, &c, 2);
    assert_contains(r.err, "failed at seq 7:");
    harness_result_free(&r);
    copy_free(&c);
}

/* A checkpoint whose text says another root (its signature no longer holds), stored under
 * its own _id: the statement fails at its tree size. */
static void
test_a_forged_checkpoint_fails_at_its_tree_size(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c;
    copy_make(f, &c, NULL);
    mongoc_collection_t *coll = copy_coll(f, &c, "events_checkpoints");
    bson_t *filter = BCON_NEW("_id.src", BCON_UTF8(SOURCE), "_id.size", BCON_INT64(70));
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, NULL, NULL);
    const bson_t *doc;
    assert_true(mongoc_cursor_next(cur, &doc));
    bson_iter_t it;
    assert_true(bson_iter_init_find(&it, doc, "note"));
    char *note = strdup(bson_iter_utf8(&it, NULL));
    mongoc_cursor_destroy(cur);
    mongoc_collection_destroy(coll);
    /* the third line is the root: change one base64 character of it */
    char *root = strchr(strchr(note, '\n') + 1, '\n') + 1;
    root[0] = root[0] == 'A' ? 'B' : 'A';
    copy_update(f, &c, "events_checkpoints", filter,
                BCON_NEW("$set", "{", "note", BCON_UTF8(note), "}"));
    free(note);
    harness_result_t r = copy_verify(f, &c, 2);
    assert_contains(r.err, "failed at seq 70:");
    assert_contains(r.err, "checkpoint of tree size 70");
    harness_result_free(&r);
    copy_free(&c);
}

/* A checkpoint of another journal with the same source, signed by a key of its own, slipped
 * into the companion collection. */
static void
test_a_checkpoint_of_another_journal_fails(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c, other;
    copy_make(f, &c, NULL);
    copy_make(f, &other, NULL);
    mongoc_collection_t *from = copy_coll(f, &other, "events_checkpoints");
    mongoc_collection_t *to = copy_coll(f, &c, "events_checkpoints");
    bson_t *filter = BCON_NEW("_id.size", BCON_INT64(40));
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(from, filter, NULL, NULL);
    const bson_t *doc;
    bson_error_t berr;
    assert_true(mongoc_cursor_next(cur, &doc));
    assert_true(mongoc_collection_insert_one(to, doc, NULL, NULL, &berr));
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    mongoc_collection_destroy(from);
    mongoc_collection_destroy(to);
    harness_result_t r = copy_verify(f, &c, 2);
    assert_contains(r.err, "failed at seq 40:");
    assert_contains(r.err, "not signed by the key of an epoch in force");
    harness_result_free(&r);
    copy_free(&other);
    copy_free(&c);
}

/* The note of the checkpoint of tree size `size` in the copy's companion collection. */
static char *
copy_checkpoint_note(const trust_fixture_t *f, const trust_copy_t *c, int64_t size)
{
    mongoc_collection_t *coll = copy_coll(f, c, "events_checkpoints");
    bson_t *filter = BCON_NEW("_id.src", BCON_UTF8(SOURCE), "_id.size", BCON_INT64(size));
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, NULL, NULL);
    const bson_t *doc;
    bson_iter_t it;
    assert_true(mongoc_cursor_next(cur, &doc));
    assert_true(bson_iter_init_find(&it, doc, "note"));
    char *note = strdup(bson_iter_utf8(&it, NULL));
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    return note;
}

/* Signs statement m with the signer key file key_path and stores it in the companion
 * collection under the _id docs/mongodb.md gives it, as a forger with that key would. */
static void
copy_insert_signed(const trust_fixture_t *f, const trust_copy_t *c, const meta_statement_t *m,
                   const char *key_path)
{
    note_signer_t signer;
    uint64_t epoch = 0;
    assert_int_equal(sigkey_read_signer_epoch(key_path, &signer, &epoch, NULL), 0);
    char *note = NULL;
    size_t len = 0;
    assert_int_equal(meta_sign(&signer, m, &note, &len, NULL), 0);
    note_signer_wipe(&signer);
    uint8_t digest[EVP_MAX_MD_SIZE];
    unsigned digest_len = 0;
    assert_int_equal(EVP_Digest(note, len, digest, &digest_len, EVP_sha256(), NULL), 1);
    char sha[17];
    for (int i = 0; i < 8; i++)
        snprintf(sha + 2 * i, 3, "%02x", digest[i]);
    bson_t *doc = BCON_NEW("_id", "{", "src", BCON_UTF8(SOURCE), "size",
                           BCON_INT64((int64_t)m->size), "sha", BCON_UTF8(sha), "}", "type",
                           BCON_UTF8("checkpoint"), "size", BCON_INT64((int64_t)m->size), "time_ns",
                           BCON_INT64(m->time_ns), "note", BCON_UTF8(note));
    mongoc_collection_t *coll = copy_coll(f, c, "events_checkpoints");
    bson_error_t berr;
    if (!mongoc_collection_insert_one(coll, doc, NULL, NULL, &berr))
        fail_msg("insert: %s", berr.message);
    mongoc_collection_destroy(coll);
    bson_destroy(doc);
    free(note);
}

/* The statement text of the checkpoint of tree size `size`, parsed. */
static void
copy_checkpoint_text(const trust_fixture_t *f, const trust_copy_t *c, int64_t size,
                     meta_statement_t *m)
{
    char *note = copy_checkpoint_note(f, c, size);
    size_t text_len = meta_note_text_len(note, strlen(note));
    assert_true(text_len > 0);
    assert_int_equal(meta_parse(note, text_len, m, NULL), 0);
    free(note);
}

/* A checkpoint that says another root, signed by a key of the forger's own. */
static void
test_a_checkpoint_signed_by_a_fresh_key_fails(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c;
    copy_make(f, &c, NULL);
    char fresh_key[4200], fresh_pub[4200];
    snprintf(fresh_key, sizeof fresh_key, "%s/fresh.key", c.root);
    snprintf(fresh_pub, sizeof fresh_pub, "%s/fresh.pub", c.root);
    harness_result_t r =
        harness_run(0, NULL, "keygen", "--key", fresh_key, "--pub", fresh_pub, NULL);
    harness_result_free(&r);
    meta_statement_t m;
    copy_checkpoint_text(f, &c, 70, &m);
    m.root[0] ^= 1;
    m.time_ns++;
    copy_insert_signed(f, &c, &m, fresh_key);
    r = copy_verify(f, &c, 2);
    assert_contains(r.err, "failed at seq 70:");
    assert_contains(r.err, "not signed by the key of an epoch in force");
    harness_result_free(&r);
    copy_free(&c);
}

/* Forward security: whoever holds the newest key re-signs an old checkpoint with it (its
 * epoch line saying so). The key came into force after that tree size: refused. */
static void
test_an_old_checkpoint_re_signed_with_the_current_key_fails(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c;
    copy_make(f, &c, "1"); /* a key epoch of 1 s: a rotation at each later open */
    note_signer_t signer;
    uint64_t epoch = 0;
    assert_int_equal(sigkey_read_signer_epoch(c.key, &signer, &epoch, NULL), 0);
    note_signer_wipe(&signer);
    assert_true(epoch >= 2);
    harness_result_t r = copy_verify(f, &c, 0);
    harness_result_free(&r);
    meta_statement_t m;
    copy_checkpoint_text(f, &c, 40, &m);
    assert_int_equal(m.epoch, 0);
    m.epoch = epoch;
    m.root[0] ^= 1;
    copy_insert_signed(f, &c, &m, c.key);
    r = copy_verify(f, &c, 2);
    assert_contains(r.err, "failed at seq 40:");
    assert_contains(r.err, "not signed by the key of an epoch in force at that size");
    harness_result_free(&r);
    copy_free(&c);
}

static void
test_a_deleted_key_statement_fails(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c;
    copy_make(f, &c, NULL);
    mongoc_collection_t *coll = copy_coll(f, &c, "events_checkpoints");
    bson_t *filter = BCON_NEW("_id.key_epoch", BCON_INT64(0));
    bson_error_t berr;
    assert_true(mongoc_collection_delete_one(coll, filter, NULL, NULL, &berr));
    bson_destroy(filter);
    mongoc_collection_destroy(coll);
    harness_result_t r = copy_verify(f, &c, 2);
    assert_contains(r.err, "failed at seq 1:");
    assert_contains(r.err, "no key statement");
    harness_result_free(&r);
    copy_free(&c);
}

/* Shipping the statements is idempotent: a shipper that lost its checkpoint (no index)
 * ships everything again, and the companion collection holds each statement once. */
static void
test_statements_are_stored_once_when_shipped_again(void **state)
{
    trust_fixture_t *f = *state;
    trust_copy_t c;
    memset(&c, 0, sizeof c);
    c.root = harness_mkdtemp();
    snprintf(c.db, sizeof c.db, "stele_trust_%d_%d", (int)getpid(), f->n_db++);
    snprintf(c.key, sizeof c.key, "%s/signer.key", c.root);
    snprintf(c.pub, sizeof c.pub, "%s/anchor.pub", c.root);
    snprintf(c.dir, sizeof c.dir, "%s/journal", c.root);
    c.key_epoch_s = "900";
    harness_result_t r = harness_run(0, NULL, "keygen", "--key", c.key, "--pub", c.pub, NULL);
    harness_result_free(&r);
    insert_lines(&c, 0, 40);
    insert_lines(&c, 40, 30);
    const char *ship[] = {"ship",        "-d",   c.dir, "--signing-key", c.key, "--mongo",
                          f->server.uri, "--db", c.db,  "--once",        NULL};
    r = harness_run_argv(0, NULL, ship);
    harness_result_free(&r);
    int64_t n = copy_count(f, &c, "events_checkpoints");
    char index_dir[4200];
    snprintf(index_dir, sizeof index_dir, "%s/index", c.dir);
    harness_rmtree(index_dir);
    for (int run = 0; run < 2; run++) { /* each run's close adds a checkpoint, never a copy */
        r = harness_run_argv(0, NULL, ship);
        harness_result_free(&r);
    }
    int64_t again = copy_count(f, &c, "events_checkpoints");
    assert_true(again >= n && again <= n + 4);
    r = copy_verify(f, &c, 0);
    assert_contains(r.out, "documents (seq 1..70)");
    harness_result_free(&r);
    copy_free(&c);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intact_copy_verifies_without_a_journal),
        cmocka_unit_test(test_documents_deleted_from_the_middle_fail_at_the_first),
        cmocka_unit_test(test_documents_deleted_from_the_start_fail_at_seq_1),
        cmocka_unit_test(test_documents_deleted_from_the_end_fail_below_the_checkpoint),
        cmocka_unit_test(test_an_altered_event_fails_at_its_seq),
        cmocka_unit_test(test_an_altered_origin_fails_at_its_seq),
        cmocka_unit_test(test_a_forged_checkpoint_fails_at_its_tree_size),
        cmocka_unit_test(test_a_checkpoint_of_another_journal_fails),
        cmocka_unit_test(test_a_checkpoint_signed_by_a_fresh_key_fails),
        cmocka_unit_test(test_an_old_checkpoint_re_signed_with_the_current_key_fails),
        cmocka_unit_test(test_a_deleted_key_statement_fails),
        cmocka_unit_test(test_statements_are_stored_once_when_shipped_again),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
