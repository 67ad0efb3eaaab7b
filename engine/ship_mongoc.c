/*
 * ship_mongoc.c: libmongoc for the whole process: its one initialisation, its log handler,
 * and the scrubbing of passwords out of the text stele prints.
 *
 * Owns: the once-guard of mongoc_init; the handler that turns libmongoc's log lines into
 * stele log lines on stderr (log.c), at or above STELE_MONGOC_LOG_LEVEL (default warning),
 * with every URI's password redacted by shape and the warnings nobody can act on (endSessions
 * refused) lowered to debug; the scrubbing of a known password out of a
 * message (ship_scrub_password, used by the shippers and the remote reader); the removal of
 * libmongoc's shared-memory counters (stele_forget_driver_counters). Does not own any
 * client, pool or sink: ship_target.c and remote_reader.c make those.
 *
 * Invariants: nothing libmongoc logs reaches stdout (it would corrupt the JSON of `stele
 * tail`); no log line shows a URI's password, whichever sink it belongs to; every file that
 * uses libmongoc calls ship_mongoc_init_once first.
 *
 * Threads and locks: no lock. pthread_once orders the initialisation before any use; the
 * log handler keeps its minimum level in user_data and writes each line with one write(2),
 * so libmongoc may call it from any thread.
 */
#include "ship_mongo.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h> /* shm_unlink */
#include <unistd.h>

/*
 * Replaces the password of every URI in text ("scheme://user:password@host") by "***".
 * The process-wide libmongoc log handler knows no sink's password, so it redacts by shape;
 * messages of a sink are also scrubbed of its exact password (ship_scrub_password).
 */
static void
ship_redact_uris(char *text, size_t cap)
{
    char *p = text;
    while ((p = strstr(p, "://")) != NULL) {
        char *host = p + 3;
        size_t authority = strcspn(host, "/?#\"' \t\r\n");
        char *at = NULL;
        for (size_t i = 0; i < authority; i++)
            if (host[i] == '@')
                at = host + i;
        char *colon = at ? memchr(host, ':', (size_t)(at - host)) : NULL;
        if (!colon) {
            p = host;
            continue;
        }
        char *pw = colon + 1;
        size_t tail = strlen(at) + 1;
        if ((size_t)(pw - text) + 3 + tail > cap)
            tail = cap - (size_t)(pw - text) - 3;
        memmove(pw + 3, at, tail);
        memcpy(pw, "***", 3);
        text[cap - 1] = '\0';
        p = pw + 3;
    }
}

/* libmongoc's levels, most severe first; the handler passes those <= the minimum. */
static mongoc_log_level_t
ship_mongoc_min_level(void)
{
    static const struct {
        const char *name;
        mongoc_log_level_t level;
    } names[] = {
        {"error", MONGOC_LOG_LEVEL_ERROR},     {"critical", MONGOC_LOG_LEVEL_CRITICAL},
        {"warning", MONGOC_LOG_LEVEL_WARNING}, {"message", MONGOC_LOG_LEVEL_MESSAGE},
        {"info", MONGOC_LOG_LEVEL_INFO},       {"debug", MONGOC_LOG_LEVEL_DEBUG},
        {"trace", MONGOC_LOG_LEVEL_TRACE},
    };
    const char *want = getenv("STELE_MONGOC_LOG_LEVEL");
    for (size_t i = 0; want && i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(want, names[i].name))
            return names[i].level;
    return MONGOC_LOG_LEVEL_WARNING;
}

/*
 * The level of a libmongoc line in stele's log. Its warnings that report nothing an operator
 * can act on go down to debug, so they are not on stderr by default: "Couldn't send
 * endSessions" comes at every client's end from servers without sessions (standalone
 * servers of some versions, MongoDB-compatible servers), and shipping is unaffected.
 */
static mongoc_log_level_t
ship_mongoc_effective_level(mongoc_log_level_t level, const char *message)
{
    if (level == MONGOC_LOG_LEVEL_WARNING && message && strstr(message, "\"endSessions\""))
        return MONGOC_LOG_LEVEL_DEBUG;
    return level;
}

/*
 * libmongoc's log handler: its default one prints to stdout, which would corrupt the JSON of
 * `stele tail` and may show a URI. This one writes stele's log line on stderr, with URI
 * passwords redacted. user_data carries the minimum level (no global state).
 */
static void
ship_mongoc_log(mongoc_log_level_t level, const char *domain, const char *message, void *user_data)
{
    level = ship_mongoc_effective_level(level, message);
    if ((intptr_t)level > (intptr_t)user_data)
        return;
    char text[512], quoted_domain[64];
    snprintf(text, sizeof text, "%s", message ? message : "");
    ship_redact_uris(text, sizeof text);
    const char *name = level <= MONGOC_LOG_LEVEL_CRITICAL  ? "error"
                       : level == MONGOC_LOG_LEVEL_WARNING ? "warn"
                       : level <= MONGOC_LOG_LEVEL_INFO    ? "info"
                                                           : "debug";
    stele_log_write(name, text, "component=mongoc domain=%s",
                    stele_log_quote(quoted_domain, sizeof quoted_domain, domain ? domain : ""));
}

/* ------------------------------------------------------------------------------------------
 * Process-wide libmongoc initialisation. The once-guard is the only static state: libmongoc
 * itself is process-global and must be initialised, and its log handler set, exactly once.
 * ------------------------------------------------------------------------------------------ */
static pthread_once_t ship_mongoc_once = PTHREAD_ONCE_INIT;

static void ship_mongoc_init(void);

void
stele_forget_driver_counters(void)
{
    /* libmongoc's own name for the file (mongoc-counters.c); ENOENT when its counters are
     * not in shared memory (disabled, or built without them). */
    char name[32];
    snprintf(name, sizeof name, "/mongoc-%u", (unsigned)getpid());
    (void)shm_unlink(name);
}

void
ship_mongoc_init_once(void)
{
    pthread_once(&ship_mongoc_once, ship_mongoc_init);
}

static void
ship_mongoc_init(void)
{
    mongoc_log_level_t min_level = ship_mongoc_min_level();
    if (min_level < MONGOC_LOG_LEVEL_TRACE)
        mongoc_log_trace_disable();
    mongoc_log_set_handler(ship_mongoc_log, (void *)(intptr_t)min_level);
    mongoc_init();
}

/* A message cut at its capacity may end inside an occurrence of the password, where no scan
 * can find it whole: drops the longest end of msg that is a beginning of the password. */
static void
ship_strip_password_prefix(const char *password, size_t pw_len, char *msg)
{
    size_t len = strlen(msg);
    for (size_t k = pw_len - 1 < len ? pw_len - 1 : len; k > 0; k--) {
        if (memcmp(msg + len - k, password, k) == 0) {
            msg[len - k] = '\0';
            return;
        }
    }
}

void
ship_scrub_password(const char *password, char *msg, size_t cap)
{
    if (!password || !password[0] || cap == 0)
        return;
    size_t pw_len = strlen(password);
    int is_cut = strlen(msg) + 1 >= cap; /* vsnprintf filled it: it may have cut the text */
    char *from = msg;
    char *hit;
    while ((hit = strstr(from, password)) != NULL) {
        size_t at = (size_t)(hit - msg);
        if (at + 3 >= cap) { /* no room for the mask and the NUL: the text ends here */
            *hit = '\0';
            is_cut = 1;
            break;
        }
        size_t tail = strlen(hit + pw_len) + 1;
        if (at + 3 + tail > cap) {
            tail = cap - at - 3;
            is_cut = 1;
        }
        memmove(hit + 3, hit + pw_len, tail);
        memcpy(hit, "***", 3);
        msg[cap - 1] = '\0';
        from = hit + 3;
    }
    if (is_cut)
        ship_strip_password_prefix(password, pw_len, msg);
}
