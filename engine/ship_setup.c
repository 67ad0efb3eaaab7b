/*
 * ship_setup.c: preparing a sink's collection before it ships: the time-series collection a
 * sink may ask for, and the indexes it creates: stele_src_seq ({_id.src: 1, _id.seq: 1}, for
 * the resume query and the remote check), stele_time ({time_field: -1}, with the sink's TTL)
 * and the indexes its `indexes` declare.
 *
 * Owns: the shape of the create and createIndexes commands and the names of the indexes.
 * Does not own the grammar of an index spec (config_collection.c), what a failure means
 * (ship_classify.c) nor what the shipper does about it (ship.c: retry a transient failure,
 * go on without an index the server refuses, stop the sink when it refuses a time-series
 * collection).
 *
 * Invariants: each index is its own createIndexes command, so an index the server refuses
 * (an option it lacks, a conflicting index of the user's) never keeps the others from being
 * created; every command is idempotent (an index or a collection that exists as asked is
 * left alone), so a shipper runs them all at each start.
 *
 * Threads and locks: no lock; each call runs on a client its caller popped from the pool.
 */
#include "ship_mongo.h"
#include "config.h" /* config_index_next */

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* MongoDB's code for "a collection of that name exists". */
#define SHIP_NAMESPACE_EXISTS 48

int
ship_setup_timeseries(const ship_target_t *t, mongoc_client_t *client, bson_error_t *berr,
                      bson_t *reply)
{
    mongoc_database_t *db = mongoc_client_get_database(client, t->database);
    bson_t *cmd = BCON_NEW("create", BCON_UTF8(t->collection), "timeseries", "{", "timeField",
                           BCON_UTF8(t->time_field), "granularity", BCON_UTF8("seconds"), "}");
    if (t->opts.expire_after_s)
        BSON_APPEND_INT64(cmd, "expireAfterSeconds", t->opts.expire_after_s);
    bool ok = mongoc_database_write_command_with_opts(db, cmd, NULL, reply, berr);
    bson_destroy(cmd);
    mongoc_database_destroy(db);
    return ok || berr->code == SHIP_NAMESPACE_EXISTS ? 0 : STELE_EREMOTE;
}

size_t
ship_setup_index_count(const ship_target_t *t)
{
    size_t n = 2;
    const char *cursor = t->indexes;
    config_index_t ix;
    while (config_index_next(&cursor, &ix, NULL) > 0)
        n++;
    return n;
}

/* The i-th declared index (0-based) of the sink, as config_index_next parses it. */
static int
ship_setup_declared(const ship_target_t *t, size_t i, config_index_t *out)
{
    const char *cursor = t->indexes;
    for (size_t k = 0; k <= i; k++)
        if (config_index_next(&cursor, out, NULL) <= 0)
            return -1;
    return 0;
}

/* MongoDB's default name of an index: each key's field and direction joined by '_'. */
static void
ship_setup_default_name(const config_index_t *ix, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < ix->n_keys && used < cap; k++) {
        int n = snprintf(buf + used, cap - used, "%s%s_%d", k ? "_" : "", ix->keys[k].field,
                         ix->keys[k].direction);
        used += n > 0 ? (size_t)n : 0;
    }
}

/* Index i's keys into *ix (the fixed two first), its name into name. */
static int
ship_setup_index_keys(const ship_target_t *t, size_t i, config_index_t *ix, char *name, size_t cap)
{
    memset(ix, 0, sizeof *ix);
    if (i == 0) {
        ix->keys[0] = (config_index_key_t){.field = "_id.src", .direction = 1};
        ix->keys[1] = (config_index_key_t){.field = "_id.seq", .direction = 1};
        ix->n_keys = 2;
        snprintf(name, cap, "%s", SHIP_INDEX_SRC_SEQ);
        return 0;
    }
    if (i == 1) {
        snprintf(ix->keys[0].field, sizeof ix->keys[0].field, "%s", t->time_field);
        ix->keys[0].direction = -1;
        ix->n_keys = 1;
        snprintf(name, cap, "%s", SHIP_INDEX_TIME);
        return 0;
    }
    if (ship_setup_declared(t, i - 2, ix) != 0) {
        snprintf(name, cap, "?");
        return -1;
    }
    ship_setup_default_name(ix, name, cap);
    return 0;
}

int
ship_setup_index_name(const ship_target_t *t, size_t i, char *buf, size_t cap)
{
    config_index_t ix;
    return ship_setup_index_keys(t, i, &ix, buf, cap);
}

/* The createIndexes command of index i; NULL past the last index. */
static bson_t *
ship_setup_index_command(const ship_target_t *t, size_t i)
{
    config_index_t ix;
    char name[SHIP_INDEX_NAME_BYTES];
    if (ship_setup_index_keys(t, i, &ix, name, sizeof name) != 0)
        return NULL;
    bson_t *cmd = BCON_NEW("createIndexes", BCON_UTF8(t->collection));
    bson_t indexes, spec, key;
    BSON_APPEND_ARRAY_BEGIN(cmd, "indexes", &indexes);
    BSON_APPEND_DOCUMENT_BEGIN(&indexes, "0", &spec);
    BSON_APPEND_DOCUMENT_BEGIN(&spec, "key", &key);
    for (size_t k = 0; k < ix.n_keys; k++)
        BSON_APPEND_INT32(&key, ix.keys[k].field, ix.keys[k].direction);
    bson_append_document_end(&spec, &key);
    BSON_APPEND_UTF8(&spec, "name", name);
    if (i == 1 && t->opts.expire_after_s && !t->opts.timeseries)
        BSON_APPEND_INT64(&spec, "expireAfterSeconds", t->opts.expire_after_s);
    bson_append_document_end(&indexes, &spec);
    bson_append_array_end(cmd, &indexes);
    return cmd;
}

int
ship_setup_index(const ship_target_t *t, mongoc_client_t *client, size_t i, bson_error_t *berr,
                 bson_t *reply)
{
    bson_t *cmd = ship_setup_index_command(t, i);
    if (!cmd) {
        bson_set_error(berr, MONGOC_ERROR_COMMAND, MONGOC_ERROR_COMMAND_INVALID_ARG, "no index %zu",
                       i);
        return STELE_EREMOTE;
    }
    mongoc_database_t *db = mongoc_client_get_database(client, t->database);
    bool ok = mongoc_database_write_command_with_opts(db, cmd, NULL, reply, berr);
    mongoc_database_destroy(db);
    bson_destroy(cmd);
    return ok ? 0 : STELE_EREMOTE;
}
