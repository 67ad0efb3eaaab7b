/*
 * jerr.h: filling a stele_error_t from inside the journal. Messages are short, lowercase and
 * name the object; hints go apart (STYLE.md, "Errors").
 */
#ifndef STELE_JOURNAL_JERR_H
#define STELE_JOURNAL_JERR_H

#include <stddef.h>

#include "stele.h"

/* The hint printed with every corruption report. */
#define JERR_HINT_VERIFY "run \"stele verify\" after backing up the journal directory"

/* Sets err (may be NULL) to code, hint (may be NULL) and the formatted message; returns
 * code so a caller can `return jerr_set(...)`. */
int jerr_set(stele_error_t *err, int code, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Text of -errno (thread-safe), "unknown error" for anything else. */
const char *jerr_errno_text(int neg_errno, char *buf, size_t cap);

#endif /* STELE_JOURNAL_JERR_H */
