/*
 * serve_log.c: the daemon's log, one logfmt line per event on stderr:
 *   ts=2026-11-30T20:33:00.123456Z level=info msg="listening" socket="/var/lib/stele/stele.sock"
 * Each line goes out in one write(2) so lines from the loop and from main never interleave.
 * Stateless apart from the caller's serve_log_t (no globals).
 */
#include "serve.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A log line is truncated beyond this; long enough for a quoted error message and hint. */
#define SERVE_LOG_LINE_BYTES 1024

static const char *const serve_log_level_names[] = {"debug", "info", "warn", "error"};

int
serve_log_parse_level(const char *text, serve_log_level_t *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(text, serve_log_level_names[i]) == 0) {
            *out = (serve_log_level_t)i;
            return 0;
        }
    }
    return STELE_EINVAL;
}

const char *
serve_log_quote(char *buf, size_t cap, const char *text)
{
    size_t w = 0;
    if (cap < 3) {
        if (cap)
            buf[0] = '\0';
        return buf;
    }
    buf[w++] = '"';
    for (const unsigned char *p = (const unsigned char *)text; *p && w + 6 < cap; p++) {
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

static void __attribute__((format(printf, 4, 0)))
serve_log_vwrite(const serve_log_t *log, serve_log_level_t level, const char *msg,
                 const char *kv_fmt, va_list ap)
{
    if (level < log->min_level)
        return;
    char line[SERVE_LOG_LINE_BYTES];
    char quoted[256];
    struct timespec now;
    struct tm tm_utc;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm_utc);
    int n = snprintf(line, sizeof line, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ level=%s msg=%s",
                     tm_utc.tm_year + 1900, tm_utc.tm_mon + 1, tm_utc.tm_mday, tm_utc.tm_hour,
                     tm_utc.tm_min, tm_utc.tm_sec, now.tv_nsec / 1000, serve_log_level_names[level],
                     serve_log_quote(quoted, sizeof quoted, msg));
    size_t len = n < 0 ? 0 : (size_t)n;
    if (len + 2 < sizeof line) {
        line[len++] = ' ';
        n = vsnprintf(line + len, sizeof line - len, kv_fmt, ap);
        if (n <= 0)
            len--; /* no key=value pairs: drop the separator */
        else
            len += (size_t)n;
    }
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* A lost log line is not worth failing the server for: ignore short writes. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void
serve_logf(const serve_log_t *log, serve_log_level_t level, const char *msg, const char *kv_fmt,
           ...)
{
    va_list ap;
    va_start(ap, kv_fmt);
    serve_log_vwrite(log, level, msg, kv_fmt, ap);
    va_end(ap);
}

void
serve_log(const serve_log_t *log, serve_log_level_t level, const char *msg)
{
    serve_logf(log, level, msg, "%s", "");
}
