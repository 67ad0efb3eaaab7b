/*
 * checkpoint.c: formatting and strict parsing of C2SP tlog-checkpoint texts
 * (checkpoint.h). The text rules of signed notes apply (note_text_check), so a text this
 * writes can always be signed. No state.
 */
#include "checkpoint.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base64.h"
#include "jerr.h"
#include "note.h"

#define ROOT_CHARS BASE64_ENCODED_LEN(MERKLE_HASH_BYTES)
#define SIZE_MAX_DIGITS 20 /* UINT64_MAX has 20 */

static int parse_failed(stele_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
parse_failed(stele_error_t *err, const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY, "checkpoint does not parse: %s", why);
}

/* Each extension line non-empty and newline-terminated. Returns the 1-based number of the
 * first bad line, or 0. */
static unsigned
first_bad_extension(const char *ext, size_t len)
{
    unsigned line = 1;
    for (size_t at = 0; at < len; line++) {
        const char *nl = memchr(ext + at, '\n', len - at);
        if (!nl || nl == ext + at)
            return line;
        at = (size_t)(nl - ext) + 1;
    }
    return 0;
}

int
checkpoint_format(const checkpoint_t *c, char *out, size_t cap, size_t *len_out, stele_error_t *err)
{
    size_t origin_len = strnlen(c->origin, sizeof c->origin);
    size_t ext_len = c->extensions ? c->extensions_len : 0;
    if (origin_len == 0 || origin_len > CHECKPOINT_ORIGIN_MAX_BYTES ||
        memchr(c->origin, '\n', origin_len) || note_text_check(c->origin, origin_len, NULL))
        return jerr_set(err, STELE_EINVAL, NULL,
                        "checkpoint origin must be 1 to %d bytes of UTF-8 on one line",
                        CHECKPOINT_ORIGIN_MAX_BYTES);
    unsigned bad = first_bad_extension(c->extensions, ext_len);
    if (bad || note_text_check(c->extensions, ext_len, NULL))
        return jerr_set(err, STELE_EINVAL, NULL,
                        "checkpoint extension line %u is empty, unterminated or not text", bad);
    char root64[ROOT_CHARS + 1];
    base64_encode(c->root, MERKLE_HASH_BYTES, root64);
    int n = snprintf(out, cap, "%s\n%" PRIu64 "\n%s\n%.*s", c->origin, c->size, root64,
                     (int)ext_len, ext_len ? c->extensions : "");
    if (n < 0 || (size_t)n >= cap)
        return jerr_set(err, STELE_EINVAL, NULL, "checkpoint text does not fit %zu bytes", cap);
    *len_out = (size_t)n;
    return 0;
}

/* Decimal digits only, no leading zero (but "0"), within a u64. */
int
checkpoint_parse_u64(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > SIZE_MAX_DIGITS || (len > 1 && s[0] == '0'))
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        uint64_t digit = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return -1;
        v = v * 10 + digit;
    }
    *out = v;
    return 0;
}

/* Splits the next line off text[*at, len): its start and length; -1 when no newline. */
static int
next_line(const char *text, size_t len, size_t *at, const char **line, size_t *line_len)
{
    const char *nl = *at < len ? memchr(text + *at, '\n', len - *at) : NULL;
    if (!nl)
        return -1;
    *line = text + *at;
    *line_len = (size_t)(nl - *line);
    *at = (size_t)(nl - text) + 1;
    return 0;
}

int
checkpoint_parse(const char *text, size_t len, checkpoint_t *out, stele_error_t *err)
{
    size_t bad_at = 0, at = 0;
    if (len == 0 || text[len - 1] != '\n')
        return parse_failed(err, "the text does not end with a newline");
    if (note_text_check(text, len, &bad_at))
        return parse_failed(err, "byte %zu is not UTF-8 or is a control character", bad_at);
    const char *origin, *size_line, *root_line;
    size_t origin_len, size_len, root_len;
    if (next_line(text, len, &at, &origin, &origin_len) ||
        next_line(text, len, &at, &size_line, &size_len) ||
        next_line(text, len, &at, &root_line, &root_len))
        return parse_failed(err, "fewer than three lines (origin, size, root)");
    if (origin_len == 0 || origin_len > CHECKPOINT_ORIGIN_MAX_BYTES)
        return parse_failed(err, "the origin line is %zu bytes; it must be 1 to %d", origin_len,
                            CHECKPOINT_ORIGIN_MAX_BYTES);
    checkpoint_t c;
    memset(&c, 0, sizeof c);
    if (checkpoint_parse_u64(size_line, size_len, &c.size))
        return parse_failed(err, "the size line is not a decimal u64 without leading zeros");
    if (root_len != ROOT_CHARS ||
        base64_decode(root_line, root_len, c.root, sizeof c.root) != MERKLE_HASH_BYTES)
        return parse_failed(err, "the root line is not the base64 of 32 bytes");
    unsigned bad = first_bad_extension(text + at, len - at);
    if (bad)
        return parse_failed(err, "extension line %u is empty", bad);
    memcpy(c.origin, origin, origin_len);
    c.extensions = at < len ? text + at : NULL;
    c.extensions_len = len - at;
    *out = c;
    return 0;
}
