/*
 * error.h: filling stele_error_t (message plus hint) in one place, so every module reports
 * errors the same way: short lowercase message naming the object, the hint apart.
 */
#ifndef STELE_ENGINE_ERROR_H
#define STELE_ENGINE_ERROR_H

#include "stele.h"

/* Fills *err (may be NULL) with code and a printf-style message; clears the hint.
 * Returns `code` so callers can write `return error_set(err, rc, ...)`. */
int error_set(stele_error_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* error_set with a fixed hint (NULL for none) in the same call. Returns `code`. */
int error_set_hinted(stele_error_t *err, int code, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Sets the hint of an error already filled by error_set (no-op when err is NULL). */
void error_set_hint(stele_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Copies src into *dst (dst may be NULL). Returns src->code. */
int error_copy(stele_error_t *dst, const stele_error_t *src);

/* Resets *err (may be NULL) to code 0 and empty strings. */
void error_clear(stele_error_t *err);

#endif /* STELE_ENGINE_ERROR_H */
