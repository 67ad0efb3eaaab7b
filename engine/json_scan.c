/*
 * json_scan.c: the text rules of json_scan.h. Owns no state.
 *
 * The scan reads the text the way a lenient tokenizer would: a '"' outside a string opens a
 * string that runs to the next unescaped '"' (or the end), a string right after '{' or after
 * a ',' in an object is a key (whatever follows it: libbson checks a key as soon as it ends,
 * and so does stele's reader), '{' and '[' count a level and '}' and ']' drop one, a '-' or
 * digit starts a number that runs over json_is_number_char bytes. It never stops at a syntax error,
 * only at a broken rule. On valid JSON these tokens are exactly the JSON ones, which is what makes
 * the scan and a strict parser agree: a rule the scan finds broken is broken in the text a strict
 * parser sees, or that text is malformed (and the parser finds some fault, then asks the
 * scan for the verdict).
 */
#include "json_scan.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* Longest key path quoted in an error message; longer paths are cut. */
#define SCAN_PATH_BYTES 160
/* Longest number token converted with strtod; a longer one is refused (it has more digits
 * than a double can carry and would only hide an out-of-range exponent). */
#define SCAN_NUMBER_TOKEN_MAX 400
/* Integers with at most this many digits always fit int64 (max is 9223372036854775807). */
#define SCAN_SAFE_INT_DIGITS 18
/* Bytes of a number token quoted in a message. */
#define SCAN_QUOTED_NUMBER_MAX 40

bool
json_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

size_t
json_skip_space(const char *s, size_t len, size_t i)
{
    while (i < len && json_is_space(s[i]))
        i++;
    return i;
}

bool
json_is_number_char(char c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

static bool
scan_is_continuation(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

size_t
json_utf8_sequence(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    if (c < 0xC2) /* a continuation byte, or the lead of an overlong two-byte form */
        return 0;
    if (c < 0xE0)
        return n >= 2 && scan_is_continuation(s[1]) ? 2 : 0;
    if (c < 0xF0) {
        if (n < 3 || !scan_is_continuation(s[1]) || !scan_is_continuation(s[2]))
            return 0;
        if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0)) /* overlong, surrogate */
            return 0;
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || !scan_is_continuation(s[1]) || !scan_is_continuation(s[2]) ||
            !scan_is_continuation(s[3]))
            return 0;
        if ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90)) /* overlong, > 10FFFF */
            return 0;
        return 4;
    }
    return 0;
}

/* The high bit of each byte of w that equals the byte repeated in `pattern`, exactly (no
 * borrow from a neighbour), so the first marked byte is the first match. */
static uint64_t
scan_word_matches(uint64_t w, uint64_t pattern)
{
    const uint64_t lows = 0x7f7f7f7f7f7f7f7full;
    uint64_t x = w ^ pattern;
    return ~(((x & lows) + lows) | x | lows);
}

/* Offset in its word of the first byte scan_word_matches marked (hits != 0). */
static size_t
scan_first_hit(uint64_t hits)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return (size_t)__builtin_clzll(hits) / 8;
#else
    return (size_t)__builtin_ctzll(hits) / 8;
#endif
}

/* Index of the closing quote of the string opening at s[i], or len if unterminated. Eight
 * bytes at a time, jumping straight to the first '"' or '\\' of a word. */
static size_t
scan_string_close(const char *s, size_t len, size_t i)
{
    const uint64_t quotes = 0x2222222222222222ull, backslashes = 0x5c5c5c5c5c5c5c5cull;
    for (i++; i < len; i++) {
        for (; i + 8 <= len; i += 8) {
            uint64_t w;
            memcpy(&w, s + i, sizeof w);
            uint64_t hits = scan_word_matches(w, quotes) | scan_word_matches(w, backslashes);
            if (hits) {
                i += scan_first_hit(hits);
                break;
            }
        }
        if (i >= len)
            break;
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i;
    }
    return len;
}

/* Index just past the string opening at s[i] (len if unterminated). */
static size_t
scan_skip_string(const char *s, size_t len, size_t i)
{
    size_t close = scan_string_close(s, len, i);
    return close < len ? close + 1 : len;
}

/* -- numbers ---------------------------------------------------------------------------- */

/* An integer token fits int64 (the sign is part of the token). */
static bool
scan_int_fits(const char *tok, size_t n)
{
    bool negative = tok[0] == '-';
    const char *digits = tok + (negative ? 1 : 0);
    size_t n_digits = n - (negative ? 1 : 0);
    while (n_digits > 1 && digits[0] == '0') {
        digits++;
        n_digits--;
    }
    if (n_digits <= SCAN_SAFE_INT_DIGITS)
        return true;
    if (n_digits > 19)
        return false;
    const char *limit = negative ? "9223372036854775808" : "9223372036854775807";
    return memcmp(digits, limit, 19) <= 0;
}

static int
scan_double_fits(const char *tok, size_t n, size_t start, stele_error_t *err)
{
    int quoted = (int)(n > SCAN_QUOTED_NUMBER_MAX ? SCAN_QUOTED_NUMBER_MAX : n);
    if (n > SCAN_NUMBER_TOKEN_MAX)
        return error_set(err, STELE_ENUMBER, "number at byte %zu has %zu characters", start, n);
    char buf[SCAN_NUMBER_TOKEN_MAX + 1];
    memcpy(buf, tok, n);
    buf[n] = '\0';
    errno = 0;
    char *stop = NULL;
    double v = strtod(buf, &stop);
    if (errno == ERANGE && (isinf(v) || v == 0.0))
        return error_set(err, STELE_ENUMBER, "number at byte %zu does not fit a double: %.*s",
                         start, quoted, tok);
    return 0;
}

static size_t
scan_digits(const char *tok, size_t n, size_t k)
{
    while (k < n && tok[k] >= '0' && tok[k] <= '9')
        k++;
    return k;
}

/* The token is exactly one number of RFC 8259's grammar. libbson's reader takes some that
 * are not ("999e.5" reads as 999) and strtod reads what it can of them. */
static bool
scan_number_grammar(const char *tok, size_t n)
{
    size_t k = tok[0] == '-' ? 1 : 0, from = k;
    if ((k = scan_digits(tok, n, k)) == from)
        return false;
    if (k < n && tok[k] == '.') {
        from = ++k;
        if ((k = scan_digits(tok, n, k)) == from)
            return false;
    }
    if (k < n && (tok[k] == 'e' || tok[k] == 'E')) {
        k++;
        if (k < n && (tok[k] == '+' || tok[k] == '-'))
            k++;
        from = k;
        if ((k = scan_digits(tok, n, k)) == from)
            return false;
    }
    return k == n;
}

int
json_scan_number(const char *s, size_t start, size_t end, stele_error_t *err)
{
    const char *tok = s + start;
    size_t n = end - start;
    int quoted = (int)(n > SCAN_QUOTED_NUMBER_MAX ? SCAN_QUOTED_NUMBER_MAX : n);
    /* libbson's reader refuses "01" but reads "-01" as 0 and "-00.5" as -0.5. */
    size_t lead = tok[0] == '-' ? 1 : 0;
    if (n > lead + 1 && tok[lead] == '0' && tok[lead + 1] >= '0' && tok[lead + 1] <= '9')
        return error_set(err, STELE_EJSON,
                         "malformed json at byte %zu: a number has a leading zero: %.*s", start,
                         quoted, tok);
    if (!scan_number_grammar(tok, n))
        return error_set(err, STELE_EJSON, "malformed json at byte %zu: a malformed number: %.*s",
                         start, quoted, tok);
    bool is_float = false;
    for (size_t k = 0; k < n; k++)
        if (tok[k] == '.' || tok[k] == 'e' || tok[k] == 'E')
            is_float = true;
    if (!is_float) {
        if (scan_int_fits(tok, n))
            return 0;
        return error_set(err, STELE_ENUMBER, "integer at byte %zu does not fit int64: %.*s", start,
                         quoted, tok);
    }
    /* Plain decimals of ordinary length cannot leave the double range. */
    if (n <= SCAN_SAFE_INT_DIGITS && !memchr(tok, 'e', n) && !memchr(tok, 'E', n))
        return 0;
    return scan_double_fits(tok, n, start, err);
}

/* -- strings ---------------------------------------------------------------------------- */

int
json_hex4(const char *s, size_t len, size_t at)
{
    if (at + 4 > len)
        return -1;
    int v = 0;
    for (size_t k = at; k < at + 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

/* The escape at s[k] (a '\\' before `close`): bytes it spans, or 0 for a surrogate half not
 * paired as UTF-16 writes a code point past U+FFFF (a high half right before a low one).
 * Malformed escapes are left to the parser: they span 2 bytes here. */
static size_t
scan_escape(const char *s, size_t close, size_t k)
{
    if (k + 1 >= close || s[k + 1] != 'u')
        return 2;
    int v = json_hex4(s, close, k + 2);
    if (v < 0xD800 || v > 0xDFFF)
        return 2;
    if (v >= 0xDC00)
        return 0;
    int low =
        k + 7 < close && s[k + 6] == '\\' && s[k + 7] == 'u' ? json_hex4(s, close, k + 8) : -1;
    return low >= 0xDC00 && low <= 0xDFFF ? 12 : 0;
}

/* Whether the key token tok[0..n) holds the escape \u0000. */
static bool
scan_has_escaped_nul(const char *tok, size_t n)
{
    for (size_t k = 0; k + 5 < n; k++) {
        if (tok[k] == '\\') {
            if (memcmp(tok + k + 1, "u0000", 5) == 0)
                return true;
            k++;
        }
    }
    return false;
}

/* The encoding rules of the string token whose quotes are s[open] and s[close] (close is the
 * text's length when it is unterminated). */
static int
scan_string(const char *s, size_t open, size_t close, bool is_key, stele_error_t *err)
{
    const unsigned char *u = (const unsigned char *)s;
    const char *what = is_key ? "key" : "string";
    if (is_key && scan_has_escaped_nul(s + open, close - open))
        return error_set(err, STELE_EKEYNUL, "key at byte %zu contains a NUL (\\u0000)", open);
    for (size_t k = open + 1; k < close;) {
        if (u[k] < 0x20) /* libbson's reader lets 0x14..0x1f through */
            return error_set(err, STELE_EJSON,
                             "malformed json at byte %zu: a control character in the %s at byte "
                             "%zu (write it as an escape)",
                             k, what, open);
        size_t n = u[k] == '\\' ? scan_escape(s, close, k) : json_utf8_sequence(u + k, close - k);
        if (n == 0 && u[k] == '\\')
            return error_set(err, STELE_EUTF8,
                             "invalid unicode escape at byte %zu in the %s at byte %zu: a "
                             "surrogate half that is not part of a pair",
                             k, what, open);
        if (n == 0)
            return error_set(err, STELE_EUTF8, "invalid utf-8 in the %s at byte %zu", what, open);
        k += n;
    }
    return 0;
}

/* -- keys and structure ----------------------------------------------------------------- */

static int
scan_not_object(const char *s, size_t len, size_t i, stele_error_t *err)
{
    const char *kind = NULL;
    char c = s[i];
    if (c == '[')
        kind = "an array";
    else if (c == '"')
        kind = "a string";
    else if (c == '-' || (c >= '0' && c <= '9'))
        kind = "a number";
    else if (len - i >= 4 && memcmp(s + i, "true", 4) == 0)
        kind = "a boolean";
    else if (len - i >= 5 && memcmp(s + i, "false", 5) == 0)
        kind = "a boolean";
    else if (len - i >= 4 && memcmp(s + i, "null", 4) == 0)
        kind = "null";
    if (kind)
        return error_set(err, STELE_ENOTOBJECT, "event is %s, not a json object", kind);
    if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
        return error_set(err, STELE_EJSON, "malformed json at byte %zu: unexpected byte 0x%02x", i,
                         (unsigned char)c);
    return error_set(err, STELE_EJSON, "malformed json at byte %zu: unexpected '%c'", i, c);
}

/* Whether the key token s[start..end) starts with '$' (also written \u0024). libbson would
 * turn extended-JSON wrappers such as {"$date": ...} into BSON types, and MongoDB reserves
 * such keys, so they are caught in the text, as written. */
static bool
scan_is_dollar_key(const char *s, size_t start, size_t end)
{
    const char *tok = s + start + 1;
    size_t n = end - start - 1;
    return (n >= 1 && tok[0] == '$') || (n >= 6 && memcmp(tok, "\\u0024", 6) == 0);
}

static void
scan_path_append(char *out, size_t cap, size_t *n, const char *part, size_t part_len)
{
    int w = snprintf(out + *n, cap - *n, "%s%.*s", *n ? "." : "", (int)part_len, part);
    if (w > 0)
        *n = *n + (size_t)w >= cap ? cap - 1 : *n + (size_t)w;
}

/* The key path ("a.0.$x", keys as written) of the key token starting at s[pos]: a second,
 * slower pass over the text that only an error pays for. */
/* The key path ("a.0.$x", keys as written) of the key token starting at s[pos]: a second,
 * slower pass over the text that only an error pays for. */
static void
scan_path_at(const char *s, size_t len, size_t pos, char *out, size_t cap)
{
    struct {
        bool is_array;
        size_t key_start, key_len;
        uint32_t index;
    } stack[JSON_MAX_DEPTH + 1];
    size_t depth = 0, n = 0;
    bool expect_key = false;
    out[0] = '\0';
    for (size_t i = 0; i < len && i <= pos; i++) {
        char c = s[i];
        if (json_is_space(c))
            continue;
        bool was_key_position = expect_key;
        expect_key = false;
        if (c == '"') {
            size_t end = scan_skip_string(s, len, i);
            if (was_key_position) {
                stack[depth - 1].key_start = i + 1;
                stack[depth - 1].key_len = end - i - 2;
            }
            i = end - 1;
        } else if ((c == '{' || c == '[') && depth < JSON_MAX_DEPTH + 1) {
            stack[depth].is_array = c == '[';
            stack[depth].index = 0;
            stack[depth].key_start = stack[depth].key_len = 0;
            expect_key = c == '{';
            depth++;
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        } else if (c == ',' && depth > 0) {
            stack[depth - 1].index += stack[depth - 1].is_array;
            expect_key = !stack[depth - 1].is_array;
        }
    }
    for (size_t k = 0; k < depth; k++) {
        if (stack[k].is_array) {
            char index[16];
            int w = snprintf(index, sizeof index, "%u", stack[k].index);
            scan_path_append(out, cap, &n, index, (size_t)w);
        } else {
            scan_path_append(out, cap, &n, s + stack[k].key_start, stack[k].key_len);
        }
    }
}

_Static_assert(JSON_MAX_DEPTH < 128, "scan_mark_container keeps 128 depth bits");

/* Notes whether the container opened at `depth` (1..JSON_MAX_DEPTH) is an array. */
static void
scan_mark_container(uint64_t in_array[2], uint32_t depth, bool is_array)
{
    uint64_t bit = 1ull << (depth % 64);
    if (is_array)
        in_array[depth / 64] |= bit;
    else
        in_array[depth / 64] &= ~bit;
}

/* An element of an array (ending at s[end]) followed by something other than ',' or ']'.
 * libbson's reader takes ["x" "y"] for ["x", "y"]: that text is refused here. */
static int
scan_check_array_element_end(const char *s, size_t len, size_t end, const uint64_t in_array[2],
                             uint32_t depth, stele_error_t *err)
{
    if (depth == 0 || !(in_array[depth / 64] & (1ull << (depth % 64))))
        return 0;
    size_t next = json_skip_space(s, len, end);
    if (next >= len || s[next] == ',' || s[next] == ']')
        return 0;
    return error_set(err, STELE_EJSON,
                     "malformed json at byte %zu: ',' or ']' expected after an array element",
                     next);
}

/* The state of one scan: the text and how deep it is at s[i]. */
typedef struct scan {
    const char *s;
    size_t len;
    uint32_t limit, max_depth;
    uint32_t depth;
    uint64_t in_array[2]; /* bit d: the container at depth d is an array */
    bool expect_key;      /* the next token is in key position: after '{' or an object's ',' */
    stele_error_t *err;
} scan_t;

static int
scan_string_token(scan_t *sc, size_t i, size_t *next)
{
    const char *s = sc->s;
    size_t close = scan_string_close(s, sc->len, i);
    size_t end = close < sc->len ? close + 1 : sc->len;
    *next = end;
    int rc = scan_check_array_element_end(s, sc->len, end, sc->in_array, sc->depth, sc->err);
    if (rc)
        return rc;
    bool is_key = sc->expect_key;
    sc->expect_key = false;
    if (is_key && scan_is_dollar_key(s, i, end)) {
        char path[SCAN_PATH_BYTES];
        scan_path_at(s, sc->len, i, path, sizeof path);
        return error_set(sc->err, STELE_EDOLLARKEY, "key \"%s\" at byte %zu starts with '$'", path,
                         i);
    }
    return scan_string(s, i, close, is_key, sc->err);
}

static int
scan_open(scan_t *sc, size_t i)
{
    if (++sc->depth > sc->limit)
        return error_set(sc->err, STELE_EDEPTH, "event nested deeper than %u levels at byte %zu%s",
                         sc->limit, i,
                         sc->limit < sc->max_depth ? " (the most json input can nest)" : "");
    scan_mark_container(sc->in_array, sc->depth, sc->s[i] == '[');
    sc->expect_key = sc->s[i] == '{';
    return 0;
}

/* A '}' or ']' at s[i]; *done when it closed the event. */
static int
scan_close(scan_t *sc, size_t i, bool *done)
{
    if (--sc->depth == 0) {
        *done = true;
        size_t after = json_skip_space(sc->s, sc->len, i + 1);
        if (after < sc->len)
            return error_set(sc->err, STELE_EJSON,
                             "malformed json at byte %zu: data after the event", after);
        return 0;
    }
    return scan_check_array_element_end(sc->s, sc->len, i + 1, sc->in_array, sc->depth, sc->err);
}

static bool
scan_is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* A word outside strings: only true, false and null are JSON. libbson's reader takes NaN,
 * Infinity, "nan" and even a lone "n" (as 0.0): all are refused here. */
static int
scan_word(scan_t *sc, size_t i, size_t *next)
{
    size_t end = i;
    while (end < sc->len && scan_is_letter(sc->s[end]))
        end++;
    *next = end;
    size_t n = end - i;
    const char *w = sc->s + i;
    if ((n == 4 && (memcmp(w, "true", 4) == 0 || memcmp(w, "null", 4) == 0)) ||
        (n == 5 && memcmp(w, "false", 5) == 0))
        return 0;
    if (w[0] == 'N' || w[0] == 'I' || w[0] == 'n' || w[0] == 'i')
        return error_set(sc->err, STELE_EJSON,
                         "malformed json at byte %zu: '%.*s' is not json (NaN and Infinity are "
                         "not json)",
                         i, (int)(n > 16 ? 16 : n), w);
    return error_set(sc->err, STELE_EJSON, "malformed json at byte %zu: '%.*s' is not json", i,
                     (int)(n > 16 ? 16 : n), w);
}

/* The token at s[i] (not a string); *next is where the next one starts. */
static int
scan_token(scan_t *sc, size_t i, size_t *next, bool *done)
{
    const char *s = sc->s;
    char c = s[i];
    *next = i + 1;
    sc->expect_key =
        c == ',' && sc->depth > 0 && !(sc->in_array[sc->depth / 64] & (1ull << (sc->depth % 64)));
    if (c == '{' || c == '[')
        return scan_open(sc, i);
    if (c == '}' || c == ']')
        return scan_close(sc, i, done);
    if (c == '-' || (c >= '0' && c <= '9')) {
        size_t end = i + 1;
        while (end < sc->len && json_is_number_char(s[end]))
            end++;
        *next = end;
        return json_scan_number(s, i, end, sc->err);
    }
    if (scan_is_letter(c))
        return scan_word(sc, i, next);
    return 0;
}

int
json_scan(const char *s, size_t len, uint32_t max_depth, stele_error_t *err)
{
    size_t i = json_skip_space(s, len, 0);
    if (i == len)
        return error_set(err, STELE_EEMPTY, "event is empty (%zu bytes of whitespace)", len);
    if (s[i] != '{')
        return scan_not_object(s, len, i, err);
    scan_t sc = {.s = s,
                 .len = len,
                 .limit = max_depth < JSON_MAX_DEPTH ? max_depth : JSON_MAX_DEPTH,
                 .max_depth = max_depth,
                 .err = err};
    bool done = false;
    while (i < len && !done) {
        if (json_is_space(s[i])) {
            i++;
            continue;
        }
        size_t next;
        int rc = s[i] == '"' ? scan_string_token(&sc, i, &next) : scan_token(&sc, i, &next, &done);
        if (rc)
            return rc;
        i = next;
    }
    return 0; /* unterminated: the parser reports it */
}
