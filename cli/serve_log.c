/*
 * serve_log.c: the daemon's log: stele's log line (stele_log_write, one logfmt line per
 * event on stderr) below the level chosen with --log-level.
 * Stateless apart from the caller's serve_log_t (no globals).
 */
#include "serve.h"

#include <string.h>

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

static void __attribute__((format(printf, 4, 0)))
serve_log_vwrite(const serve_log_t *log, serve_log_level_t level, const char *msg,
                 const char *kv_fmt, va_list ap)
{
    if (level >= log->min_level)
        stele_log_vwrite(serve_log_level_names[level], msg, kv_fmt, ap);
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
