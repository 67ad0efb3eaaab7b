/*
 * validate.c: the rules of validate.h. Owns no state; runs in the appending thread.
 *
 * JSON goes through three steps:
 *   1. a scan of the raw text (validate_json_scan) for what libbson's parser does not refuse
 *      on its own: a top level that is not an object (libbson turns `[1,2]` into a document),
 *      data after the object (libbson stops at the first one), integers beyond int64 (libbson
 *      wraps some of them silently), NaN/Infinity, and nesting deeper than max_depth;
 *   2. libbson's JSON reader (one per thread, reused: see json_parser_t), whose failures
 *      are then classified (UTF-8, NUL in a key, syntax) by a slower diagnostic pass that
 *      finds the byte position; errors are the cold path;
 *   3. the document walk shared with BSON input: key rules, reserved keys, depth, size.
 * BSON input gets only the walk, which also checks UTF-8 of every key and string.
 */
#include "validate.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "config.h" /* config_check */
#include "error.h"

/* Longest key path quoted in an error message; longer paths end in "...". */
#define VALIDATE_PATH_BYTES 160
/* Longest number token converted with strtod; a longer one is refused (it has more digits
 * than a double can carry and would only hide an out-of-range exponent). */
#define VALIDATE_NUMBER_TOKEN_MAX 400
/* Integers with at most this many digits always fit int64 (max is 9223372036854775807). */
#define VALIDATE_SAFE_INT_DIGITS 18
/* libbson's JSON parser refuses deeper nesting ("LEVELS_EXCEEDED"), below max_depth's largest
 * value: the scan refuses it first, as the depth error it is, with its byte. */
#define VALIDATE_JSON_PARSER_MAX_DEPTH 98
/* Largest JSON parse buffer; a longer event is fed to the parser in pieces of this size. */
#define JSON_PARSE_BUF_MAX ((size_t)16 << 10)
/* Events up to this size go through the thread's reused reader (json_parser_t), which keeps
 * a copy buffer of this size; a rare larger one gets a reader of its own. */
#define JSON_REUSE_MAX_BYTES ((size_t)64 << 10)

/* -- the document walk ------------------------------------------------------------------ */

typedef struct walk {
    const validate_limits_t *lim;
    bool check_strings; /* JSON input was already UTF-8 checked by libbson */
    size_t path_len;
    char path[VALIDATE_PATH_BYTES];
    stele_error_t *err;
} walk_t;

/* Formats "path.key" of the element the iterator is on, for messages. */
static const char *
walk_key_path(walk_t *w, const char *key, char *buf, size_t cap)
{
    if (w->path_len == 0)
        snprintf(buf, cap, "%s", key);
    else
        snprintf(buf, cap, "%s.%s", w->path, key);
    return buf;
}

static int
walk_fail(walk_t *w, int code, const char *key, const char *what)
{
    char path[VALIDATE_PATH_BYTES + 64];
    return error_set(w->err, code, "key \"%s\" %s", walk_key_path(w, key, path, sizeof path), what);
}

/* Plain ASCII (the common case for keys and most values) is checked here in one pass;
 * anything else goes to libbson's validator, which is exact but several times slower. */
static bool
walk_utf8_ok(const char *s, size_t len, bool allow_nul)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t any_high = 0, any_nul = 0;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, sizeof w);
        any_high |= w & highs;
        any_nul |= (w - ones) & ~w & highs; /* non-zero iff some byte of w is zero */
    }
    for (; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        any_high |= ch & 0x80u;
        any_nul |= ch == 0;
    }
    if (!any_high && (allow_nul || !any_nul))
        return true;
    if (!bson_utf8_validate(s, len, allow_nul))
        return false;
    /* Allowing NUL, libbson also takes C0 80, the overlong U+0000 of "modified UTF-8"; no
     * other sequence it accepts holds a 0xC0 byte. */
    return !allow_nul || !memchr(s, 0xC0, len);
}

static int walk_document(walk_t *w, bson_iter_t *it, uint32_t depth);

/* The shipped document's envelope: _id, the metadata, the default time field and the time
 * field of each sink. */
static bool
walk_key_is_reserved(const validate_limits_t *lim, const char *key)
{
    if (key[0] == '_' && (strcmp(key, STELE_ID_FIELD) == 0 || strcmp(key, STELE_META_FIELD) == 0 ||
                          strcmp(key, STELE_TIME_FIELD_DEFAULT) == 0))
        return true;
    for (size_t i = 0; i < lim->n_time_fields; i++)
        if (strcmp(key, lim->time_fields[i]) == 0)
            return true;
    return false;
}

void
validate_limits_reserve_sinks(validate_limits_t *lim, const stele_options_t *opts)
{
    lim->n_time_fields = 0;
    for (size_t i = 0; i < opts->n_sinks && i < STELE_MAX_SINKS; i++)
        if (opts->sinks[i].time_field && opts->sinks[i].time_field[0])
            lim->time_fields[lim->n_time_fields++] = opts->sinks[i].time_field;
}

static int
walk_check_key(walk_t *w, const char *key, uint32_t key_len, uint32_t depth)
{
    if (!walk_utf8_ok(key, key_len, false)) {
        char path[VALIDATE_PATH_BYTES];
        snprintf(path, sizeof path, "%s", w->path_len ? w->path : "(top level)");
        return error_set(w->err, STELE_EUTF8, "invalid utf-8 in a key under %s", path);
    }
    if (key[0] == '$')
        return walk_fail(w, STELE_EDOLLARKEY, key, "starts with '$'");
    if (depth == 1 && walk_key_is_reserved(w->lim, key))
        return walk_fail(w, STELE_ERESERVEDKEY, key, "is reserved at the top level");
    return 0;
}

static int
walk_check_strings(walk_t *w, const bson_iter_t *it, const char *key)
{
    uint32_t len = 0;
    const char *s = NULL;
    const char *s2 = NULL;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8:
        s = bson_iter_utf8(it, &len);
        break;
    case BSON_TYPE_CODE:
        s = bson_iter_code(it, &len);
        break;
    case BSON_TYPE_SYMBOL:
        s = bson_iter_symbol(it, &len);
        break;
    case BSON_TYPE_CODEWSCOPE: {
        uint32_t scope_len;
        const uint8_t *scope;
        s = bson_iter_codewscope(it, &len, &scope_len, &scope);
        break;
    }
    case BSON_TYPE_REGEX:
        s = bson_iter_regex(it, &s2);
        len = (uint32_t)strlen(s);
        break;
    case BSON_TYPE_DBPOINTER: {
        const bson_oid_t *oid;
        bson_iter_dbpointer(it, &len, &s, &oid);
        break;
    }
    default:
        return 0;
    }
    /* Strings are length-prefixed in BSON, so an embedded NUL is legal data. */
    if (s && !walk_utf8_ok(s, len, true))
        return walk_fail(w, STELE_EUTF8, key, "has invalid utf-8 in its value");
    if (s2 && !walk_utf8_ok(s2, strlen(s2), false))
        return walk_fail(w, STELE_EUTF8, key, "has invalid utf-8 in its regex options");
    return 0;
}

static int
walk_child(walk_t *w, const bson_iter_t *it, const char *key, uint32_t depth)
{
    bson_iter_t child;
    if (depth + 1 > w->lim->max_depth) {
        char what[64];
        snprintf(what, sizeof what, "is nested deeper than %u levels", w->lim->max_depth);
        return walk_fail(w, STELE_EDEPTH, key, what);
    }
    if (!bson_iter_recurse(it, &child))
        return walk_fail(w, STELE_EBSON, key, "holds a malformed embedded document");
    /* The path is kept for messages only; memcpy keeps this cheap on the success path. */
    size_t saved = w->path_len;
    size_t key_len = strlen(key);
    size_t room = sizeof w->path - 1 - saved;
    size_t dot = saved ? 1 : 0;
    if (dot + key_len <= room) {
        if (dot)
            w->path[saved] = '.';
        memcpy(w->path + saved + dot, key, key_len);
        w->path_len = saved + dot + key_len;
    } else {
        w->path_len = sizeof w->path - 1;
    }
    w->path[w->path_len] = '\0';
    int rc = walk_document(w, &child, depth + 1);
    w->path_len = saved;
    w->path[saved] = '\0';
    return rc;
}

static int
walk_document(walk_t *w, bson_iter_t *it, uint32_t depth)
{
    while (bson_iter_next(it)) {
        const char *key = bson_iter_key(it);
        int rc = walk_check_key(w, key, bson_iter_key_len(it), depth);
        if (rc)
            return rc;
        bson_type_t type = bson_iter_type(it);
        if (type == BSON_TYPE_DOCUMENT || type == BSON_TYPE_ARRAY)
            rc = walk_child(w, it, key, depth);
        else if (w->check_strings)
            rc = walk_check_strings(w, it, key);
        if (rc)
            return rc;
    }
    if (it->err_off) {
        char path[VALIDATE_PATH_BYTES];
        snprintf(path, sizeof path, "%s", w->path_len ? w->path : "(top level)");
        return error_set(w->err, STELE_EBSON, "malformed bson element at byte %u of %s",
                         (unsigned)it->err_off, path);
    }
    return 0;
}

static int
validate_walk(const bson_t *doc, const validate_limits_t *lim, bool check_strings,
              stele_error_t *err)
{
    walk_t w = {.lim = lim, .check_strings = check_strings, .err = err};
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return error_set(err, STELE_EBSON, "malformed bson document");
    return walk_document(&w, &it, 1);
}

int
validate_bson(const uint8_t *doc, size_t len, const validate_limits_t *lim, stele_error_t *err)
{
    bson_t b;
    if (!doc || len == 0)
        return error_set(err, STELE_EEMPTY, "event is empty (0 bytes)");
    if (len > lim->max_record_bytes)
        return error_set(err, STELE_ETOOBIG, "event of %zu bytes exceeds max_record_bytes (%u)",
                         len, lim->max_record_bytes);
    if (len < 5)
        return error_set(err, STELE_EBSON, "bson of %zu bytes is shorter than the 5-byte minimum",
                         len);
    uint32_t declared =
        (uint32_t)doc[0] | (uint32_t)doc[1] << 8 | (uint32_t)doc[2] << 16 | (uint32_t)doc[3] << 24;
    if (declared != len)
        return error_set(err, STELE_EBSON,
                         "bson length field says %u bytes but %zu bytes were given", declared, len);
    if (doc[len - 1] != 0 || !bson_init_static(&b, doc, len))
        return error_set(err, STELE_EBSON, "bson document does not end with a NUL byte");
    if (len == 5)
        return error_set(err, STELE_EEMPTY, "event has no fields");
    return validate_walk(&b, lim, true, err);
}

/* -- the JSON text scan ----------------------------------------------------------------- */

static bool
json_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t
json_skip_space(const char *s, size_t len, size_t i)
{
    while (i < len && json_is_space(s[i]))
        i++;
    return i;
}

/* The high bit of each byte of w that equals the byte repeated in `pattern`, exactly (no
 * borrow from a neighbour), so the first marked byte is the first match. */
static uint64_t
json_word_matches(uint64_t w, uint64_t pattern)
{
    const uint64_t lows = 0x7f7f7f7f7f7f7f7full;
    uint64_t x = w ^ pattern;
    return ~(((x & lows) + lows) | x | lows);
}

/* Offset in its word of the first byte json_word_matches marked (hits != 0). */
static size_t
json_first_hit(uint64_t hits)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return (size_t)__builtin_clzll(hits) / 8;
#else
    return (size_t)__builtin_ctzll(hits) / 8;
#endif
}

/* Index just past the closing quote of the string opening at s[i], or len if unterminated.
 * Strings are most of an event's text: eight bytes at a time, jumping straight to the first
 * '"' or '\\' of a word. */
static size_t
json_skip_string(const char *s, size_t len, size_t i)
{
    const uint64_t quotes = 0x2222222222222222ull, backslashes = 0x5c5c5c5c5c5c5c5cull;
    for (i++; i < len; i++) {
        for (; i + 8 <= len; i += 8) {
            uint64_t w;
            memcpy(&w, s + i, sizeof w);
            uint64_t hits = json_word_matches(w, quotes) | json_word_matches(w, backslashes);
            if (hits) {
                i += json_first_hit(hits);
                break;
            }
        }
        if (i >= len)
            break;
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return len;
}

/* Whether the string token at s[start..end) is an object key: the next non-space is ':'. */
static bool
json_token_is_key(const char *s, size_t len, size_t end)
{
    size_t i = json_skip_space(s, len, end);
    return i < len && s[i] == ':';
}

static bool
json_is_number_char(char c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* An integer token fits int64 (the sign is part of the token). */
static bool
json_int_fits(const char *tok, size_t n)
{
    bool negative = tok[0] == '-';
    const char *digits = tok + (negative ? 1 : 0);
    size_t n_digits = n - (negative ? 1 : 0);
    while (n_digits > 1 && digits[0] == '0') {
        digits++;
        n_digits--;
    }
    if (n_digits <= VALIDATE_SAFE_INT_DIGITS)
        return true;
    if (n_digits > 19)
        return false;
    const char *limit = negative ? "9223372036854775808" : "9223372036854775807";
    return memcmp(digits, limit, 19) <= 0;
}

static int
json_check_number(const char *s, size_t start, size_t end, stele_error_t *err)
{
    const char *tok = s + start;
    size_t n = end - start;
    /* libbson's parser refuses "01" but reads "-01" as 0 and "-00.5" as -0.5. */
    size_t lead = tok[0] == '-' ? 1 : 0;
    if (n > lead + 1 && tok[lead] == '0' && tok[lead + 1] >= '0' && tok[lead + 1] <= '9')
        return error_set(err, STELE_EJSON,
                         "malformed json at byte %zu: a number has a leading zero: %.*s", start,
                         (int)(n > 40 ? 40 : n), tok);
    bool is_float = false;
    for (size_t k = 0; k < n; k++)
        if (tok[k] == '.' || tok[k] == 'e' || tok[k] == 'E')
            is_float = true;
    if (!is_float) {
        if (json_int_fits(tok, n))
            return 0;
        return error_set(err, STELE_ENUMBER, "integer at byte %zu does not fit int64: %.*s", start,
                         (int)(n > 40 ? 40 : n), tok);
    }
    /* Plain decimals of ordinary length cannot leave the double range. */
    if (n <= VALIDATE_SAFE_INT_DIGITS && !memchr(tok, 'e', n) && !memchr(tok, 'E', n))
        return 0;
    if (n > VALIDATE_NUMBER_TOKEN_MAX)
        return error_set(err, STELE_ENUMBER, "number at byte %zu has %zu characters", start, n);
    char buf[VALIDATE_NUMBER_TOKEN_MAX + 1];
    memcpy(buf, tok, n);
    buf[n] = '\0';
    errno = 0;
    char *stop = NULL;
    double v = strtod(buf, &stop);
    if (errno == ERANGE && (isinf(v) || v == 0.0))
        return error_set(err, STELE_ENUMBER, "number at byte %zu does not fit a double: %.*s",
                         start, (int)(n > 40 ? 40 : n), tok);
    return 0;
}

static int
json_not_object(const char *s, size_t len, size_t i, stele_error_t *err)
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
    return error_set(err, STELE_EJSON, "malformed json at byte %zu: unexpected '%c'", i, c);
}

/* Whether the string token s[start..end) is an object key starting with '$' (also written
 * \u0024). libbson would turn extended-JSON wrappers such as {"$date": ...} into BSON types,
 * so such keys must be caught in the text, before they disappear. */
static bool
json_is_dollar_key(const char *s, size_t len, size_t start, size_t end)
{
    const char *tok = s + start + 1;
    size_t n = end - start - 1;
    bool dollar = (n >= 1 && tok[0] == '$') || (n >= 6 && memcmp(tok, "\\u0024", 6) == 0);
    if (!dollar)
        return false;
    size_t i = json_skip_space(s, len, end);
    return i < len && s[i] == ':';
}

static void
json_path_append(char *out, size_t cap, size_t *n, const char *part, size_t part_len)
{
    int w = snprintf(out + *n, cap - *n, "%s%.*s", *n ? "." : "", (int)part_len, part);
    if (w > 0)
        *n = *n + (size_t)w >= cap ? cap - 1 : *n + (size_t)w;
}

/* The key path ("a.0.$x", keys as written) of the key token starting at s[pos]: a second,
 * slower pass over the text that only an error pays for. */
static void
json_path_at(const char *s, size_t len, size_t pos, char *out, size_t cap)
{
    struct {
        bool is_array;
        size_t key_start, key_len;
        uint32_t index;
    } stack[VALIDATE_MAX_DEPTH_LIMIT + 1];
    size_t depth = 0, n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < len && i <= pos;) {
        char c = s[i];
        if (c == '"') {
            size_t end = json_skip_string(s, len, i);
            if (depth > 0 && !stack[depth - 1].is_array && json_token_is_key(s, len, end)) {
                stack[depth - 1].key_start = i + 1;
                stack[depth - 1].key_len = end - i - 2;
                if (i == pos)
                    break;
            }
            i = end;
            continue;
        }
        if ((c == '{' || c == '[') && depth < VALIDATE_MAX_DEPTH_LIMIT + 1) {
            stack[depth].is_array = c == '[';
            stack[depth].index = 0;
            stack[depth].key_start = stack[depth].key_len = 0;
            depth++;
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        } else if (c == ',' && depth > 0 && stack[depth - 1].is_array) {
            stack[depth - 1].index++;
        }
        i++;
    }
    for (size_t k = 0; k < depth; k++) {
        if (stack[k].is_array) {
            char index[16];
            int w = snprintf(index, sizeof index, "%u", stack[k].index);
            json_path_append(out, cap, &n, index, (size_t)w);
        } else {
            json_path_append(out, cap, &n, s + stack[k].key_start, stack[k].key_len);
        }
    }
}

_Static_assert(VALIDATE_MAX_DEPTH_LIMIT < 128, "json_mark_container keeps 128 depth bits");

/* Notes whether the container opened at `depth` (1..VALIDATE_MAX_DEPTH_LIMIT) is an array. */
static void
json_mark_container(uint64_t in_array[2], uint32_t depth, bool is_array)
{
    uint64_t bit = 1ull << (depth % 64);
    if (is_array)
        in_array[depth / 64] |= bit;
    else
        in_array[depth / 64] &= ~bit;
}

/* An element of an array (ending at s[end]) followed by something other than ',' or ']'.
 * libbson's parser takes ["x" "y"] for ["x", "y"], and calls [{} {}] "Incomplete JSON",
 * which would be reported as a text that ends inside the event. */
static bool
json_array_element_unfollowed(const char *s, size_t len, size_t end, const uint64_t in_array[2],
                              uint32_t depth)
{
    if (depth == 0 || !(in_array[depth / 64] & (1ull << (depth % 64))))
        return false;
    size_t next = json_skip_space(s, len, end);
    return next < len && s[next] != ',' && s[next] != ']';
}

static int
json_missing_comma(const char *s, size_t len, size_t end, stele_error_t *err)
{
    return error_set(err, STELE_EJSON,
                     "malformed json at byte %zu: ',' or ']' expected after an array element",
                     json_skip_space(s, len, end));
}

/* The scan of step 1 (see the top of the file). Syntax errors it does not care about are
 * left for libbson's parser to report. */
static int
validate_json_scan(const char *s, size_t len, uint32_t max_depth, stele_error_t *err)
{
    size_t i = json_skip_space(s, len, 0);
    if (i == len)
        return error_set(err, STELE_EEMPTY, "event is empty (%zu bytes of whitespace)", len);
    if (s[i] != '{')
        return json_not_object(s, len, i, err);
    uint32_t limit =
        max_depth < VALIDATE_JSON_PARSER_MAX_DEPTH ? max_depth : VALIDATE_JSON_PARSER_MAX_DEPTH;
    uint32_t depth = 0;
    uint64_t in_array[2] = {0, 0}; /* bit d: the container at depth d is an array */
    while (i < len) {
        char c = s[i];
        if (c == '"') {
            size_t end = json_skip_string(s, len, i);
            if (json_array_element_unfollowed(s, len, end, in_array, depth))
                return json_missing_comma(s, len, end, err);
            if (json_is_dollar_key(s, len, i, end)) {
                char path[VALIDATE_PATH_BYTES];
                json_path_at(s, len, i, path, sizeof path);
                return error_set(err, STELE_EDOLLARKEY, "key \"%s\" at byte %zu starts with '$'",
                                 path, i);
            }
            i = end;
            continue;
        }
        if (c == '{' || c == '[') {
            if (++depth > limit)
                return error_set(err, STELE_EDEPTH,
                                 "event nested deeper than %u levels at byte %zu%s", limit, i,
                                 limit < max_depth ? " (the most json input can nest)" : "");
            json_mark_container(in_array, depth, c == '[');
        } else if (c == '}' || c == ']') {
            if (--depth == 0) {
                i = json_skip_space(s, len, i + 1);
                if (i < len)
                    return error_set(err, STELE_EJSON,
                                     "malformed json at byte %zu: data after the event", i);
                return 0;
            }
            if (json_array_element_unfollowed(s, len, i + 1, in_array, depth))
                return json_missing_comma(s, len, i + 1, err);
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t end = i + 1;
            while (end < len && json_is_number_char(s[end]))
                end++;
            int rc = json_check_number(s, i, end, err);
            if (rc)
                return rc;
            i = end;
            continue;
        } else if (c == 'N' || c == 'I') {
            return error_set(err, STELE_EJSON,
                             "malformed json at byte %zu: NaN and Infinity are not json", i);
        }
        i++;
    }
    return 0; /* unterminated: libbson reports it */
}

/* -- classifying libbson's parse failures (cold path) ----------------------------------- */

static bool
json_has_escaped_nul(const char *tok, size_t n)
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

/* Finds the string token that libbson refused as bad UTF-8 and names it. */
static int
json_diagnose_utf8(const char *s, size_t len, stele_error_t *err)
{
    for (size_t i = 0; i < len;) {
        if (s[i] != '"') {
            i++;
            continue;
        }
        size_t end = json_skip_string(s, len, i);
        const char *tok = s + i;
        size_t n = end - i;
        bool is_key = json_token_is_key(s, len, end);
        if (is_key && json_has_escaped_nul(tok, n))
            return error_set(err, STELE_EKEYNUL, "key at byte %zu contains a NUL (\\u0000)", i);
        if (!bson_utf8_validate(tok, n, false))
            return error_set(err, STELE_EUTF8, "invalid utf-8 in the %s at byte %zu",
                             is_key ? "key" : "string", i);
        i = end;
    }
    return error_set(err, STELE_EUTF8, "invalid utf-8 in the event");
}

static int
json_classify_failure(const char *s, size_t len, const bson_error_t *berr, stele_error_t *err)
{
    if (strstr(berr->message, "UTF8"))
        return json_diagnose_utf8(s, len, err);
    if (strstr(berr->message, "INVALID_CODEPOINT"))
        return error_set(err, STELE_EUTF8, "invalid unicode escape in the event: %s",
                         berr->message);
    if (strstr(berr->message, "out of range"))
        return error_set(err, STELE_ENUMBER, "number fits neither int64 nor double: %s",
                         berr->message);
    if (strstr(berr->message, "Incomplete JSON"))
        return error_set(err, STELE_EJSON, "malformed json: the text ends inside the event");
    return error_set(err, STELE_EJSON, "malformed json: %s", berr->message);
}

/* bson_init_from_json with a parse buffer sized to the event, for events too large for the
 * thread's reader: the library's default 16 KiB buffer would be allocated for every call. */
static bool
json_to_bson_once(const char *json, size_t len, bson_t *out, bson_error_t *berr)
{
    size_t buf_bytes = len < JSON_PARSE_BUF_MAX ? len : JSON_PARSE_BUF_MAX;
    bson_json_reader_t *reader = bson_json_data_reader_new(false, buf_bytes);
    bson_json_data_reader_ingest(reader, (const uint8_t *)json, len);
    bson_init(out);
    int n = bson_json_reader_read(reader, out, berr);
    bson_json_reader_destroy(reader);
    if (n == 1)
        return true;
    if (n == 0)
        bson_set_error(berr, BSON_ERROR_JSON, BSON_JSON_ERROR_READ_INVALID_PARAM,
                       "Empty JSON string");
    bson_destroy(out);
    return false;
}

/* -- the per-thread JSON reader -------------------------------------------------------------
 * Creating a libbson JSON reader allocates and zeroes ~20 KiB (its parse stack): more than
 * parsing a typical event costs. So each thread keeps one reader and feeds it its events as
 * one multi-document stream. libbson starts the next document of a stream when that
 * document's '{' arrives after a finished one in the same feed, and keeps the '{' for the
 * next read; so each event is fed followed by a '{', and the next event without its own
 * opening brace (validate_json_scan has checked that the text is one object with nothing
 * after it but whitespace). A failed parse leaves the reader in an unknown state: it is
 * dropped, the event is parsed again by a reader of its own for the verdict and the
 * message, and the next event starts a fresh reader. */

typedef struct json_parser {
    bson_json_reader_t *reader;
    bson_t *doc;           /* the event parsed last; bson_reinit keeps its heap buffer */
    bool holds_open_brace; /* the reader kept the '{' that opens the next event */
    char *text;            /* the event as fed: after its '{', plus the next '{' */
    size_t text_cap;       /* grows to the largest event seen, up to JSON_REUSE_MAX_BYTES */
} json_parser_t;

static pthread_key_t json_parser_key;
static pthread_once_t json_parser_once = PTHREAD_ONCE_INIT;
static bool json_parser_key_ok;

static void
json_parser_free(void *arg)
{
    json_parser_t *p = arg;
    if (p) {
        bson_json_reader_destroy(p->reader);
        if (p->doc)
            bson_destroy(p->doc);
        free(p->text);
        free(p);
    }
}

static void
json_parser_key_create(void)
{
    json_parser_key_ok = pthread_key_create(&json_parser_key, json_parser_free) == 0;
}

/* This thread's parser, created on first use; NULL when out of memory. */
static json_parser_t *
json_parser_get(void)
{
    pthread_once(&json_parser_once, json_parser_key_create);
    if (!json_parser_key_ok)
        return NULL;
    json_parser_t *p = pthread_getspecific(json_parser_key);
    if (p)
        return p;
    p = calloc(1, sizeof *p);
    /* bson_new, not a bson_t inside *p: a bson_t must be 128-byte aligned, calloc's is not. */
    if (p && (p->doc = bson_new()) != NULL && pthread_setspecific(json_parser_key, p) == 0)
        return p;
    if (p && p->doc)
        bson_destroy(p->doc);
    free(p);
    return NULL;
}

/* Room for `need` bytes of text; false when out of memory. */
static bool
json_parser_reserve(json_parser_t *p, size_t need)
{
    if (need <= p->text_cap)
        return true;
    size_t cap = p->text_cap ? p->text_cap * 2 : 512;
    while (cap < need)
        cap *= 2;
    char *grown = realloc(p->text, cap);
    if (!grown)
        return false;
    p->text = grown;
    p->text_cap = cap;
    return true;
}

static bool
json_to_bson(const char *json, size_t len, bson_t *out, bson_error_t *berr)
{
    json_parser_t *p = len <= JSON_REUSE_MAX_BYTES ? json_parser_get() : NULL;
    if (!p || !json_parser_reserve(p, len + 1))
        return json_to_bson_once(json, len, out, berr);
    size_t open = json_skip_space(json, len, 0); /* json[open] == '{' (validate_json_scan) */
    size_t from = p->holds_open_brace ? open + 1 : open;
    size_t n = len - from;
    memcpy(p->text, json + from, n);
    p->text[n++] = '{';
    if (!p->reader)
        p->reader = bson_json_data_reader_new(true, JSON_PARSE_BUF_MAX);
    bson_json_data_reader_ingest(p->reader, (const uint8_t *)p->text, n);
    /* Parsed into the thread's document, whose buffer outlives the call: a fresh bson_t
     * per event cost a malloc, reallocs as it grew past its inline bytes, and a free. */
    bson_reinit(p->doc);
    int rc = bson_json_reader_read(p->reader, p->doc, berr);
    if (rc == 1) {
        p->holds_open_brace = true;
        return bson_init_static(out, bson_get_data(p->doc), p->doc->len);
    }
    /* A parse that failed inside a nested document leaves the document marked as having a
     * child open, which bson_reinit keeps: it is started afresh (bson_new does not fail:
     * libbson aborts when out of memory). */
    bson_destroy(p->doc);
    p->doc = bson_new();
    bson_json_reader_destroy(p->reader);
    p->reader = NULL;
    p->holds_open_brace = false;
    /* The verdict and message come from a fresh reader: this one's positions count the
     * events fed before, and a refusal is the cold path. */
    return json_to_bson_once(json, len, out, berr);
}

int
validate_json(const char *json, size_t len, const validate_limits_t *lim, bson_t *out,
              stele_error_t *err)
{
    bson_error_t berr;
    if (!json || len == 0)
        return error_set(err, STELE_EEMPTY, "event is empty (0 bytes)");
    if (len > SSIZE_MAX)
        return error_set(err, STELE_ETOOBIG, "json text of %zu bytes", len);
    int rc = validate_json_scan(json, len, lim->max_depth, err);
    if (rc)
        return rc;
    if (!json_to_bson(json, len, out, &berr))
        return json_classify_failure(json, len, &berr, err);
    /* The parser checks string values as walk_utf8_ok would without its C0 80 rule; JSON
     * text holds no 0xC0 byte outside strings, and valid UTF-8 none at all. */
    if (memchr(json, 0xC0, len)) {
        rc = json_diagnose_utf8(json, len, err);
    } else if (out->len > lim->max_record_bytes) {
        rc = error_set(err, STELE_ETOOBIG, "event of %u bytes exceeds max_record_bytes (%u)",
                       out->len, lim->max_record_bytes);
    } else if (out->len == 5) {
        rc = error_set(err, STELE_EEMPTY, "event has no fields");
    } else {
        rc = validate_walk(out, lim, false, err);
    }
    if (rc)
        bson_destroy(out);
    return rc;
}

/* -- the public validate-only call --------------------------------------------------------- */

int
stele_validate_json(const char *json, size_t len, const stele_options_t *opts, stele_error_t *err)
{
    stele_options_t defaults;
    if (opts == NULL) {
        stele_options_init(&defaults);
        opts = &defaults;
    }
    int rc = config_check(opts, err); /* what stele_open would refuse, refused the same way */
    if (rc)
        return rc;
    validate_limits_t limits = {.max_record_bytes = opts->max_record_bytes,
                                .max_depth = opts->max_depth};
    validate_limits_reserve_sinks(&limits, opts);
    bson_t doc;
    rc = validate_json(json, len, &limits, &doc, err);
    if (rc == 0)
        bson_destroy(&doc);
    return rc;
}
