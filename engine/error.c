/*
 * error.c: the text of every return code (generated from STELE_ERROR_LIST in <stele.h>) and
 * the helpers that fill stele_error_t. Stateless: all text is static, so every function here
 * is thread-safe. -errno codes are described with glibc's strerrordesc_np/strerrorname_np,
 * which return static strings (unlike strerror, which may use a shared buffer).
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Codes -1 .. -STELE_ERRNO_MAX are -errno; stele's own start at -1000 (<stele.h>). */
#define STELE_ERRNO_MAX 999

const char *
stele_strerror(int code)
{
    switch (code) {
#define STELE_X_TEXT(name, value, text)                                                            \
    case value:                                                                                    \
        return text;
        STELE_ERROR_LIST(STELE_X_TEXT)
#undef STELE_X_TEXT
    default:
        break;
    }
    if (code < 0 && code >= -STELE_ERRNO_MAX) {
        const char *text = strerrordesc_np(-code);
        if (text)
            return text;
    }
    return "unknown error";
}

const char *
stele_errname(int code)
{
    switch (code) {
#define STELE_X_NAME(name, value, text)                                                            \
    case value:                                                                                    \
        return #name;
        STELE_ERROR_LIST(STELE_X_NAME)
#undef STELE_X_NAME
    default:
        break;
    }
    if (code < 0 && code >= -STELE_ERRNO_MAX) {
        const char *name = strerrorname_np(-code);
        if (name)
            return name;
    }
    return "STELE_EUNKNOWN";
}

int
error_set(stele_error_t *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->hint[0] = '\0';
    }
    return code;
}

int
error_set_hinted(stele_error_t *err, int code, const char *hint, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        snprintf(err->hint, sizeof err->hint, "%s", hint ? hint : "");
    }
    return code;
}

void
error_set_hint(stele_error_t *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->hint, sizeof err->hint, fmt, ap);
        va_end(ap);
    }
}

int
error_copy(stele_error_t *dst, const stele_error_t *src)
{
    if (dst && dst != src)
        *dst = *src;
    return src->code;
}

void
error_clear(stele_error_t *err)
{
    if (err) {
        err->code = 0;
        err->message[0] = '\0';
        err->hint[0] = '\0';
    }
}
