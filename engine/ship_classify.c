/*
 * ship_classify.c: the one place that decides what a MongoDB failure means (shipper_classify),
 * for the shippers, the one-shot calls and the remote reader alike.
 *
 * Owns: the tables of server codes (duplicate key, authentication, transient) and the
 * messages that mark a transient failure, and the verdict they give an insert or a query.
 * Does not act on a verdict: the shipper retries, dead-letters or stops; the one-shot calls
 * and the remote reader turn it into STELE_EAUTH or STELE_EREMOTE.
 *
 * Invariant: anything not known to be permanent is SHIPPER_RETRY, so no record is ever
 * dropped on a guess. A verdict comes from libmongoc's error (error API version 2) and the
 * command's reply only.
 *
 * Threads and locks: pure functions, no state; any thread.
 */
#include "ship_mongo.h"

#include <stdint.h>
#include <string.h>

static int
ship_code_is_duplicate(int64_t code)
{
    return code == 11000 || code == 11001 || code == 12582;
}

static int
ship_code_is_auth(int64_t code)
{
    return code == 11 /* UserNotFound */ || code == 13 /* Unauthorized */ ||
           code == 18 /* AuthenticationFailed */ || code == 31 /* RoleNotFound */ ||
           code == 33 /* PrivilegeNotFound */;
}

/* Server codes after which the same write can succeed later (MongoDB's retryable-write set
 * plus interruptions, stale routing and lock timeouts). */
static int
ship_code_is_transient(int64_t code)
{
    static const int32_t codes[] = {
        6,     /* HostUnreachable */
        7,     /* HostNotFound */
        24,    /* LockTimeout */
        46,    /* LockBusy */
        50,    /* MaxTimeMSExpired */
        64,    /* WriteConcernFailed (wtimeout) */
        89,    /* NetworkTimeout */
        91,    /* ShutdownInProgress */
        100,   /* UnsatisfiableWriteConcern (e.g. majority lost during fail-over) */
        112,   /* WriteConflict */
        133,   /* FailedToSatisfyReadPreference */
        150,   /* StaleEpoch */
        189,   /* PrimarySteppedDown */
        262,   /* ExceededTimeLimit */
        9001,  /* SocketException */
        10107, /* NotWritablePrimary ("not master") */
        11600, /* InterruptedAtShutdown */
        11602, /* InterruptedDueToReplStateChange */
        13388, /* StaleConfig */
        13435, /* NotPrimaryNoSecondaryOk */
        13436, /* NotPrimaryOrSecondary ("node is recovering") */
    };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (code == codes[i])
            return 1;
    return 0;
}

static int
ship_message_is_transient(const char *msg)
{
    return strstr(msg, "not master") || strstr(msg, "not primary") ||
           strstr(msg, "node is recovering") || strstr(msg, "shutdown in progress");
}

/*
 * Classifies a failed insert_many (or find) from libmongoc's error and reply.
 * *index_out receives the batch index of the offending document for SHIPPER_DUPLICATE and
 * SHIPPER_DEAD_LETTER; documents before it were inserted (ordered insert) unless the reply
 * also carries a write-concern error, in which case the verdict is SHIPPER_RETRY.
 * Anything not known to be permanent is retried: never drop a record on a guess.
 */
shipper_verdict_t
shipper_classify(const bson_error_t *error, const bson_t *reply, size_t *index_out)
{
    *index_out = 0;
    bson_iter_t it, child;
    if (reply && mongoc_error_has_label(reply, "RetryableWriteError"))
        return SHIPPER_RETRY;
    if (reply && bson_iter_init_find(&it, reply, "writeConcernErrors") &&
        BSON_ITER_HOLDS_ARRAY(&it)) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_array(&it, &len, &data);
        if (len > 5) /* a non-empty array */
            return SHIPPER_RETRY;
    }
    if (reply && bson_iter_init_find(&it, reply, "writeErrors") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &child) && bson_iter_next(&child) &&
        BSON_ITER_HOLDS_DOCUMENT(&child)) {
        bson_iter_t we;
        int64_t code = 0;
        const char *msg = "";
        if (bson_iter_recurse(&child, &we)) {
            while (bson_iter_next(&we)) {
                const char *key = bson_iter_key(&we);
                if (!strcmp(key, "index") && BSON_ITER_HOLDS_NUMBER(&we))
                    *index_out = (size_t)bson_iter_as_int64(&we);
                else if (!strcmp(key, "code") && BSON_ITER_HOLDS_NUMBER(&we))
                    code = bson_iter_as_int64(&we);
                else if (!strcmp(key, "errmsg") && BSON_ITER_HOLDS_UTF8(&we))
                    msg = bson_iter_utf8(&we, NULL);
            }
        }
        if (ship_code_is_duplicate(code))
            return SHIPPER_DUPLICATE;
        if (ship_code_is_auth(code))
            return SHIPPER_STOP_AUTH;
        if (ship_code_is_transient(code) || ship_message_is_transient(msg))
            return SHIPPER_RETRY;
        return SHIPPER_DEAD_LETTER;
    }
    /* No per-document error: the command as a whole failed. */
    if (error->domain == MONGOC_ERROR_CLIENT && error->code == MONGOC_ERROR_CLIENT_AUTHENTICATE)
        return SHIPPER_STOP_AUTH;
    if (error->domain == MONGOC_ERROR_SERVER || error->domain == MONGOC_ERROR_WRITE_CONCERN) {
        if (ship_code_is_auth(error->code))
            return SHIPPER_STOP_AUTH;
        if (ship_code_is_duplicate(error->code))
            return SHIPPER_DUPLICATE;
        return SHIPPER_RETRY;
    }
    if (error->domain == MONGOC_ERROR_BSON ||
        (error->domain == MONGOC_ERROR_COMMAND && error->code == MONGOC_ERROR_COMMAND_INVALID_ARG))
        return SHIPPER_SPLIT;
    /* Stream, server selection, protocol, cursor: the network or the topology. */
    return SHIPPER_RETRY;
}

int
shipper_command_is_refused(const bson_error_t *error, const bson_t *reply)
{
    if (reply && mongoc_error_has_label(reply, "RetryableWriteError"))
        return 0;
    if (error->domain != MONGOC_ERROR_SERVER || error->code == 0)
        return 0;
    return !ship_code_is_transient(error->code) && !ship_code_is_auth(error->code) &&
           !ship_message_is_transient(error->message);
}
