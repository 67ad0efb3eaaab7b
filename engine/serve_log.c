/*
 * serve_log.c: the server's log: stele's log line (stele_log_write, one logfmt line per
 * event on stderr) below the level chosen in stele_serve_options_t (`--log-level`).
 * Stateless apart from the caller's serve_log_t (no globals).
 */
#include "serve.h"

#include <string.h>

static const char *const serve_log_level_names[] = {"debug", "info", "warn", "error"};

int
stele_log_level_parse(const char *name, stele_log_level_t *out)
{
    for (int i = STELE_LOG_DEBUG; name && out && i <= STELE_LOG_ERROR; i++) {
        if (strcmp(name, serve_log_level_names[i]) == 0) {
            *out = (stele_log_level_t)i;
            return 0;
        }
    }
    return STELE_EINVAL;
}

static void __attribute__((format(printf, 4, 0)))
serve_log_vwrite(const serve_log_t *log, stele_log_level_t level, const char *msg,
                 const char *kv_fmt, va_list ap)
{
    if (level >= log->min_level)
        stele_log_vwrite(serve_log_level_names[level], msg, kv_fmt, ap);
}

void
serve_logf(const serve_log_t *log, stele_log_level_t level, const char *msg, const char *kv_fmt,
           ...)
{
    va_list ap;
    va_start(ap, kv_fmt);
    serve_log_vwrite(log, level, msg, kv_fmt, ap);
    va_end(ap);
}

void
serve_log(const serve_log_t *log, stele_log_level_t level, const char *msg)
{
    serve_logf(log, level, msg, "%s", "");
}

void
serve_log_error(const serve_log_t *log, const char *msg, int rc, const stele_error_t *err)
{
    char quoted_msg[STELE_ERROR_MESSAGE_BYTES + 16];
    char quoted_hint[STELE_ERROR_HINT_BYTES + 16];
    if (err && err->message[0] && err->hint[0]) {
        serve_logf(log, STELE_LOG_ERROR, msg, "code=%s error=%s hint=%s", stele_errname(rc),
                   stele_log_quote(quoted_msg, sizeof quoted_msg, err->message),
                   stele_log_quote(quoted_hint, sizeof quoted_hint, err->hint));
    } else {
        serve_logf(log, STELE_LOG_ERROR, msg, "code=%s error=%s", stele_errname(rc),
                   stele_log_quote(quoted_msg, sizeof quoted_msg,
                                   err && err->message[0] ? err->message : stele_strerror(rc)));
    }
}
