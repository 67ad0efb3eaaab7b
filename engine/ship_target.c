/*
 * ship_target.c: a sink's resolved configuration (ship_target_t), from stele_sink_options_t
 * to what libmongoc needs: the parsed URI with stele's default timeouts, the database and
 * collection names and their rules, the write and read concerns, the client pool, and the
 * host:port/db.coll name that messages use instead of the URI.
 *
 * Owns: the copies a target keeps (names, the time field and index specs, the password
 * kept only to scrub it, the URI and the concerns) and their checks (STELE_ECONFIG naming the
 * field). Does not own any client or thread (the shipper and the one-shot calls do), nor the ranges
 * of the sink's numbers (config.c's table, config_check_sink_numbers).
 *
 * Invariants: a target that ship_target_init returned is valid throughout (names follow
 * MongoDB's rules, numbers are in range); its password never leaves it except through
 * ship_target_scrub, which removes it from a message; a timeout the user's URI sets is never
 * overridden.
 *
 * Threads and locks: no lock. A target is written only by ship_target_init, then read by
 * its owner's threads.
 */
#include "ship_mongo.h"
#include "config.h" /* config_check_sink_numbers: one table of sink ranges */
#include "error.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Socket timeout when the URI sets none: above any sane wtimeout, far below libmongoc's
 * 5-minute default, so a stalled server is noticed and retried. */
#define SHIP_DEFAULT_SOCKET_TIMEOUT_MS 30000
#define SHIP_DEFAULT_SELECT_TIMEOUT_MS 5000

void
ship_target_free(ship_target_t *t)
{
    free(t->name);
    free(t->database);
    free(t->collection);
    free(t->time_field);
    free(t->indexes);
    if (t->password) {
        memset(t->password, 0, strlen(t->password));
        free(t->password);
    }
    mongoc_uri_destroy(t->uri);
    mongoc_write_concern_destroy(t->write_concern);
    mongoc_read_concern_destroy(t->read_concern);
    memset(t, 0, sizeof *t);
}

void
ship_target_scrub(const ship_target_t *t, char *msg, size_t cap)
{
    ship_scrub_password(t->password, msg, cap);
}

static int
ship_name_ok(const char *s, size_t max_len)
{
    return s && s[0] && strlen(s) <= max_len;
}

int
ship_sink_names(const stele_sink_options_t *sink, const char *uri_db, const char **db_out,
                const char **coll_out)
{
    const char *db = sink->database && sink->database[0] ? sink->database
                     : uri_db && uri_db[0]               ? uri_db
                                                         : "audit";
    const char *coll = sink->collection && sink->collection[0] ? sink->collection : "events";
    *db_out = db;
    *coll_out = coll;
    if (!ship_name_ok(db, 63) || strpbrk(db, "/\\. \"$") || !ship_name_ok(coll, 200) ||
        strchr(coll, '$'))
        return -1;
    return 0;
}

/* Applies an integer URI option only when the URI leaves it unset. */
static void
ship_uri_default(mongoc_uri_t *uri, const char *option, int32_t value)
{
    if (mongoc_uri_get_option_as_int32(uri, option, -1) == -1)
        mongoc_uri_set_option_as_int32(uri, option, value);
}

/* The sink's name ("default" when unset), or NULL with the error set when the sink has no
 * URI or its name is too long. */
static const char *
ship_sink_name(const stele_sink_options_t *sink, stele_error_t *err)
{
    if (!sink || !sink->uri || !sink->uri[0]) {
        error_set_hinted(err, STELE_ECONFIG, "set uri to a mongodb:// connection string",
                         "sink %s: uri is required", sink && sink->name ? sink->name : "default");
        return NULL;
    }
    const char *name = sink->name && sink->name[0] ? sink->name : "default";
    if (!ship_name_ok(name, 63)) {
        error_set(err, STELE_ECONFIG, "sink name is longer than 63 bytes");
        return NULL;
    }
    return name;
}

/* Copies the sink's names and its URI's password (t->uri) into t, and checks the names. */
static int
ship_target_copy_names(ship_target_t *t, const stele_sink_options_t *sink, const char *name,
                       stele_error_t *err)
{
    if (mongoc_uri_get_password(t->uri))
        t->password = strdup(mongoc_uri_get_password(t->uri));
    const char *db, *coll;
    int names_rc = ship_sink_names(sink, mongoc_uri_get_database(t->uri), &db, &coll);
    t->name = strdup(name);
    t->database = strdup(db);
    t->collection = strdup(coll);
    t->time_field = strdup(sink->time_field ? sink->time_field : CONFIG_TIME_FIELD_DEFAULT);
    t->indexes = sink->indexes ? strdup(sink->indexes) : NULL;
    if (!t->name || !t->database || !t->collection || !t->time_field ||
        (sink->indexes && !t->indexes))
        return error_set(err, -ENOMEM, "sink %s: out of memory", name);
    if (names_rc != 0)
        return error_set_hinted(err, STELE_ECONFIG, "names may not contain / \\ . space \" or $",
                                "sink %s: invalid database or collection name", name);
    return 0;
}

static void
ship_target_set_concerns(ship_target_t *t, const stele_sink_options_t *sink)
{
    t->write_concern = mongoc_write_concern_new();
    if (sink->w == -1)
        mongoc_write_concern_set_wmajority(t->write_concern, (int32_t)sink->wtimeout_ms);
    else {
        mongoc_write_concern_set_w(t->write_concern, sink->w);
        mongoc_write_concern_set_wtimeout_int64(t->write_concern, sink->wtimeout_ms);
    }
    if (sink->w != 0)
        mongoc_write_concern_set_journal(t->write_concern, sink->journaled != 0);
    /* Documents found already stored count as shipped only if they are as durable as the
     * write concern asked: with w=majority, read them with read concern majority. */
    t->read_concern = mongoc_read_concern_new();
    if (sink->w == -1)
        mongoc_read_concern_set_level(t->read_concern, MONGOC_READ_CONCERN_LEVEL_MAJORITY);
}

/* Timeouts the URI leaves unset: a socket timeout that outlasts the write concern's own. */
static void
ship_target_set_timeouts(ship_target_t *t, const stele_sink_options_t *sink)
{
    t->is_socket_timeout_set =
        mongoc_uri_get_option_as_int32(t->uri, MONGOC_URI_SOCKETTIMEOUTMS, -1) != -1;
    int32_t socket_ms = SHIP_DEFAULT_SOCKET_TIMEOUT_MS;
    if ((int64_t)sink->wtimeout_ms + 10000 > socket_ms)
        socket_ms = (int32_t)(sink->wtimeout_ms > INT32_MAX - 10000 ? INT32_MAX
                                                                    : sink->wtimeout_ms + 10000);
    ship_uri_default(t->uri, MONGOC_URI_SOCKETTIMEOUTMS, socket_ms);
    ship_uri_default(t->uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, SHIP_DEFAULT_SELECT_TIMEOUT_MS);
}

int
ship_target_init(ship_target_t *t, const stele_sink_options_t *sink, stele_error_t *err)
{
    memset(t, 0, sizeof *t);
    ship_mongoc_init_once();
    const char *name = ship_sink_name(sink, err);
    if (!name)
        return STELE_ECONFIG;
    bson_error_t berr;
    t->uri = mongoc_uri_new_with_error(sink->uri, &berr);
    if (!t->uri) {
        /* libmongoc's parse message may quote the URI; say only what is wrong with it. */
        return error_set_hinted(err, STELE_ECONFIG,
                                "expected mongodb://[user:pass@]host[:port]/[db]",
                                "sink %s: invalid uri", name);
    }
    t->opts = *sink;
    int rc = ship_target_copy_names(t, sink, name, err);
    if (rc == 0)
        rc = config_check_sink_numbers(sink, name, err);
    if (rc != 0) {
        ship_target_free(t);
        return rc;
    }
    t->opts.name = t->name;
    t->opts.uri = NULL;
    t->opts.database = t->database;
    t->opts.collection = t->collection;
    t->opts.time_field = t->time_field;
    t->opts.indexes = t->indexes;
    ship_where(t->where, sizeof t->where, t->uri, t->database, t->collection);
    ship_target_set_concerns(t, sink);
    ship_target_set_timeouts(t, sink);
    mongoc_uri_set_appname(t->uri, "stele");
    return 0;
}

mongoc_client_pool_t *
ship_target_pool_new(const ship_target_t *t, stele_error_t *err)
{
    bson_error_t berr;
    mongoc_client_pool_t *pool = mongoc_client_pool_new_with_error(t->uri, &berr);
    if (!pool) {
        error_set(err, STELE_ECONFIG, "sink %s: could not create client pool for %s", t->name,
                  t->where);
        return NULL;
    }
    mongoc_client_pool_set_error_api(pool, MONGOC_ERROR_API_VERSION_2);
    return pool;
}

/* Every read of what the sink holds (the resume point, duplicates, the remote check) uses
 * the sink's read concern: with w=majority, a document read without it may be rolled back
 * by a fail-over, and a resume point taken from it would skip records for good. */
void
ship_target_append_read_concern(const ship_target_t *t, bson_t *opts)
{
    if (mongoc_read_concern_get_level(t->read_concern))
        mongoc_read_concern_append(t->read_concern, opts);
}

void
ship_where(char *buf, size_t cap, const mongoc_uri_t *uri, const char *db, const char *coll)
{
    const mongoc_host_list_t *host = mongoc_uri_get_hosts(uri);
    snprintf(buf, cap, "%s/%s.%s", host ? host->host_and_port : "?", db, coll);
}
