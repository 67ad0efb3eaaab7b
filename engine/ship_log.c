/*
 * ship_log.c: what a shipper tells the operator, as stele log lines on stderr (log.c), at or
 * above the level of its journal's log_level:
 *   level=warn  msg="sink unreachable"      the first failure after shipping went well (a
 *               msg="sink failing"          network or server-selection error; any other)
 *   level=info  msg="sink retrying"         the same outage, at most every SHIP_LOG_RETRY_MS
 *   level=info  msg="sink recovered"        the first success after failures
 *   level=warn  msg="record dead-lettered"  a record the sink refused for good, listed
 *   level=error msg="sink stopped"          the sink stopped for good, with why
 *   level=warn  msg="sink starts over at a new destination"
 * each with sink="NAME" target="host/db.coll" and the error, the next delay (retry_ms), the
 * attempts and how long the outage lasts (down_ms). Messages were scrubbed of the URI's
 * password before they got here (shipper_note_error, ship_target_scrub).
 *
 * Owns: the outage bookkeeping (is_failing, failures, the time of the last line), which
 * only the shipper's thread touches. Does not own the statistics or last_error (ship.c,
 * under the shipper's mu) nor the backoff (ship.c). One-shot shippers (stele_reship, the
 * dead letters' calls) have logging off: their callers report.
 *
 * Threads and locks: the outage fields belong to the shipper's thread; the stop line may come
 * from whichever thread stops the sink, and reads only what was set before the thread ran.
 */
#include "ship_mongo.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "clock.h"

/* A long outage says it is still retrying this often, not at every attempt. */
#define SHIP_LOG_RETRY_MS 10000
/* Room for a quoted error message, sink name or target in a line. */
#define SHIP_LOG_QUOTED_BYTES (STELE_ERROR_MESSAGE_BYTES + 16)

static const char *const ship_log_level_names[] = {"debug", "info", "warn", "error"};

/* Writes one line when level reaches the shipper's threshold, with sink and target first. */
static void __attribute__((format(printf, 4, 5)))
ship_log_line(const shipper_t *s, stele_log_level_t level, const char *msg, const char *kv_fmt, ...)
{
    if (!s->is_logging || level < s->log_level)
        return;
    char kv[STELE_ERROR_MESSAGE_BYTES * 2];
    va_list ap;
    va_start(ap, kv_fmt);
    vsnprintf(kv, sizeof kv, kv_fmt, ap);
    va_end(ap);
    char sink[96], target[sizeof s->target.where + 16];
    stele_log_write(ship_log_level_names[level], msg, "sink=%s target=%s%s%s",
                    stele_log_quote(sink, sizeof sink, s->target.name),
                    stele_log_quote(target, sizeof target, s->target.where), kv[0] ? " " : "", kv);
}

/* The shipper's last error, quoted. */
static const char *
ship_log_last_error(shipper_t *s, char *buf, size_t cap)
{
    char text[STELE_ERROR_MESSAGE_BYTES];
    pthread_mutex_lock(&s->mu);
    snprintf(text, sizeof text, "%s", s->last_error);
    pthread_mutex_unlock(&s->mu);
    return stele_log_quote(buf, cap, text);
}

void
ship_log_failure(shipper_t *s, int is_unreachable, uint64_t retry_ms)
{
    int64_t now_ms = clock_mono_ms();
    char error[SHIP_LOG_QUOTED_BYTES];
    s->failures++;
    if (!s->is_failing) {
        s->is_failing = 1;
        s->failing_since_ms = now_ms;
        s->last_failure_log_ms = now_ms;
        ship_log_line(s, STELE_LOG_WARN, is_unreachable ? "sink unreachable" : "sink failing",
                      "error=%s retry_ms=%" PRIu64 " attempt=1",
                      ship_log_last_error(s, error, sizeof error), retry_ms);
        return;
    }
    if (now_ms - s->last_failure_log_ms < SHIP_LOG_RETRY_MS)
        return;
    s->last_failure_log_ms = now_ms;
    ship_log_line(s, STELE_LOG_INFO, "sink retrying",
                  "error=%s retry_ms=%" PRIu64 " attempt=%" PRIu64 " down_ms=%" PRId64,
                  ship_log_last_error(s, error, sizeof error), retry_ms, s->failures,
                  now_ms - s->failing_since_ms);
}

void
ship_log_success(shipper_t *s)
{
    if (!s->is_failing)
        return;
    ship_log_line(s, STELE_LOG_INFO, "sink recovered", "down_ms=%" PRId64 " attempts=%" PRIu64,
                  clock_mono_ms() - s->failing_since_ms, s->failures);
    s->is_failing = 0;
    s->failures = 0;
}

void
ship_log_dead_letter(shipper_t *s, uint64_t seq, const char *reason)
{
    char quoted[SHIP_LOG_QUOTED_BYTES];
    ship_log_line(s, STELE_LOG_WARN, "record dead-lettered", "seq=%" PRIu64 " reason=%s", seq,
                  stele_log_quote(quoted, sizeof quoted, reason));
}

void
ship_log_stopped(const shipper_t *s, const char *why)
{
    char quoted[SHIP_LOG_QUOTED_BYTES];
    ship_log_line(s, STELE_LOG_ERROR, "sink stopped", "error=%s",
                  stele_log_quote(quoted, sizeof quoted, why));
}

void
ship_log_new_destination(const shipper_t *s, const char *old_destination, uint64_t old_seq,
                         uint64_t n_dropped)
{
    char old[SHIP_DESTINATION_BYTES + 16], now[SHIP_DESTINATION_BYTES + 16];
    ship_log_line(s, STELE_LOG_WARN, "sink starts over at a new destination",
                  "destination=%s previous=%s previous_seq=%" PRIu64
                  " dead_letters_dropped=%" PRIu64,
                  stele_log_quote(now, sizeof now, s->target.destination),
                  stele_log_quote(old, sizeof old, old_destination), old_seq, n_dropped);
}

void
ship_log_left_behind(const shipper_t *s)
{
    ship_log_line(s, STELE_LOG_WARN, "sink stopped without waiting for its thread", "why=%s",
                  "\"a call to the destination is still in progress; the checkpoint "
                  "keeps what was acknowledged\"");
}
