/*
 * jerr.h: filling a stele_error_t from inside the journal, the one way the journal's files
 * report errors. A message is short and lowercase and names the object ("could not sync
 * segment 00000000000000000042.seg: Input/output error"); what the operator can do goes in
 * the hint, apart from it.
 */
#ifndef STELE_JOURNAL_JERR_H
#define STELE_JOURNAL_JERR_H

#include <stddef.h>

#include "stele.h"

/* The hint printed with every corruption report. */
#define JERR_HINT_VERIFY "run \"stele verify\" after backing up the journal directory"

/* The hint for a link found where a journal file should be (-ELOOP from io.h's opens). */
#define JERR_HINT_LINK "remove the link: someone who can write the journal directory put it there"

/* Sets err (may be NULL) to code, hint (may be NULL) and the formatted message; returns
 * code so a caller can `return jerr_set(...)`. */
int jerr_set(stele_error_t *err, int code, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Copies src into err (may be NULL); returns src->code. */
int jerr_copy(stele_error_t *err, const stele_error_t *src);

/* Text of -errno (thread-safe), "unknown error" for anything else. -ELOOP, which the
 * journal's opens return for a link in the last component only, reads "is a symbolic link,
 * which stele does not follow". */
const char *jerr_errno_text(int neg_errno, char *buf, size_t cap);

#endif /* STELE_JOURNAL_JERR_H */
