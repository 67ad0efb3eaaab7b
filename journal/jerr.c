/*
 * jerr.c: error filling for the journal (jerr.h). No state.
 */
#include "jerr.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int
jerr_set(stele_error_t *err, int code, const char *hint, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    snprintf(err->hint, sizeof err->hint, "%s", hint ? hint : "");
    return code;
}

int
jerr_copy(stele_error_t *err, const stele_error_t *src)
{
    if (err)
        *err = *src;
    return src->code;
}

const char *
jerr_errno_text(int neg_errno, char *buf, size_t cap)
{
    if (neg_errno >= 0 || neg_errno <= -1000) {
        snprintf(buf, cap, "unknown error %d", neg_errno);
        return buf;
    }
    if (neg_errno == -ELOOP)
        return "is a symbolic link, which stele does not follow";
    /* GNU strerror_r: returns the text, in buf or static. */
    return strerror_r(-neg_errno, buf, cap);
}
