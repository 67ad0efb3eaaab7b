/*
 * log.c: stele's log line (stele.h, "Log lines"): one logfmt line on stderr per call,
 *   ts=2026-11-30T20:33:00.123456Z level=info msg="listening" socket="/run/stele.sock"
 * written with one write(2) so lines of concurrent threads and processes never
 * interleave. Used by the shippers and the libmongoc log handler (ship_mongoc.c) and by the
 * `stele` command (serve's log), so every line a stele process prints has one shape.
 *
 * ts is the wall clock as clock.h reads it, not the record clock (stamp.h): the record clock
 * belongs to an open journal's writer, while log lines also come from processes and threads
 * with no journal (serve, the libmongoc handler), and a log line should show the time the
 * machine believes, even one the record clock would not yet trust. No state, no lock.
 */
#include "stele.h"

#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/* A longer line is cut; long enough for a quoted error message and hint. */
#define LOG_LINE_BYTES 1024
/* The quoted message; a longer one is cut. */
#define LOG_MSG_BYTES 640

const char *
stele_log_quote(char *buf, size_t cap, const char *text)
{
    size_t w = 0;
    if (cap < 3) {
        if (cap)
            buf[0] = '\0';
        return buf;
    }
    buf[w++] = '"';
    for (const unsigned char *p = (const unsigned char *)(text ? text : ""); *p && w + 6 < cap;
         p++) {
        if (*p == '"' || *p == '\\') {
            buf[w++] = '\\';
            buf[w++] = (char)*p;
        } else if (*p < 0x20 || *p == 0x7f) {
            w += (size_t)snprintf(buf + w, cap - w, "\\x%02x", *p);
        } else {
            buf[w++] = (char)*p;
        }
    }
    buf[w++] = '"';
    buf[w] = '\0';
    return buf;
}

void
stele_log_vwrite(const char *level, const char *msg, const char *kv_fmt, va_list ap)
{
    char line[LOG_LINE_BYTES];
    char quoted[LOG_MSG_BYTES];
    struct tm tm_utc;
    int64_t now_ns = clock_wall_ns();
    time_t now_s = (time_t)(now_ns / 1000000000);
    gmtime_r(&now_s, &tm_utc);
    int n = snprintf(line, sizeof line, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ level=%s msg=%s",
                     tm_utc.tm_year + 1900, tm_utc.tm_mon + 1, tm_utc.tm_mday, tm_utc.tm_hour,
                     tm_utc.tm_min, tm_utc.tm_sec, (long)(now_ns % 1000000000 / 1000), level,
                     stele_log_quote(quoted, sizeof quoted, msg));
    size_t len = n < 0 ? 0 : (size_t)n;
    if (kv_fmt && kv_fmt[0] && len + 2 < sizeof line) {
        line[len++] = ' ';
        n = vsnprintf(line + len, sizeof line - len, kv_fmt, ap);
        if (n <= 0)
            len--; /* the pairs came out empty: drop the separator */
        else
            len += (size_t)n;
    }
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* A lost log line is not worth failing the caller for: short writes are ignored. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void
stele_log_write(const char *level, const char *msg, const char *kv_fmt, ...)
{
    va_list ap;
    va_start(ap, kv_fmt);
    stele_log_vwrite(level, msg, kv_fmt, ap);
    va_end(ap);
}
