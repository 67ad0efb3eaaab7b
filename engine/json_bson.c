/*
 * json_bson.c: stele's JSON reader (json_bson.h). Owns no state beyond one call's stack
 * frame; runs in the appending thread, no locks.
 *
 * Why a reader of stele's own: every JSON append must turn text into BSON and then enforce
 * validate.h's rules. libbson's JSON reader (a general extended-JSON state machine over
 * jsonsl, with callbacks per token and a second walk over the result for the rules) costs
 * more than all the rest of an unwaited append. This reader does both in one pass over the
 * text and writes the BSON bytes directly: strings, most of an event, are copied eight bytes
 * at a time while the same words are checked for '"', '\\', control characters and non-ASCII
 * bytes; only escapes and non-ASCII sequences leave the fast loop. Measured against libbson's
 * reader and the parsers Debian packages (simdjson, yajl, jansson, each building the same
 * BSON with libbson's appenders), in the same stele-bench run: see docs/benchmarks.md, "JSON
 * parsers". It is the fastest of them while also enforcing the rules, which the others do
 * not, so it is the one stele uses.
 *
 * What it must equal: for text it accepts, the bytes bson_init_from_json writes (integers as
 * int32 when they fit, else int64; other numbers as doubles through strtod, as libbson does;
 * arrays keyed "0", "1", ...); it refuses exactly what libbson's reader plus the rules
 * refuse, with the same code. tests/fuzz/fuzz_json_bson.c holds it to that, and
 * test_json_bson to Python's json module.
 *
 * Which fault is reported when there are several: the text rules of json_scan.h first (the
 * scan runs only once a fault is found: the cold path), then the first syntax fault in the
 * text, then the size (STELE_ETOOBIG) and an empty object (STELE_EEMPTY), then the first key
 * that breaks a key rule (reserved, '.', repeated), which is therefore only noted, and the
 * reading goes on. Once the BSON passes max_record_bytes the rest is still read for faults,
 * but its bytes are only counted: the buffer never grows past max_record_bytes by more than
 * one element.
 */
#include "json_bson.h"

#include <bson/bson.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "json_scan.h"
#include "keyset.h"

/* Output room taken before an element: its type byte and an array index key (10 digits and
 * a NUL) at most. */
#define JB_ELEMENT_ROOM 16
/* Room past a string's bytes: its NUL, and the word copy writes up to 8 bytes ahead. */
#define JB_STRING_SLACK 16
/* Longest key path quoted in an error message. */
#define JB_PATH_BYTES 160

typedef struct jb_level {
    size_t start;         /* output offset of the container's int32 length */
    size_t key_off;       /* objects: the current member's key, in the output */
    uint32_t key_len;     /* ... and its length */
    uint32_t index;       /* arrays: the current element's index */
    bool is_array;        /* an array, else an object */
    keyset_object_t keys; /* objects: the keys read so far */
} jb_level_t;

/* One reading. The levels are not zeroed: jb_open fills each before use. */
typedef struct jb {
    const char *in;
    size_t len;
    size_t pos; /* the next byte of `in` to read */
    validate_buf_t *out;
    uint8_t *o; /* the output (out's buffer while reading) */
    size_t olen, ocap;
    const validate_limits_t *lim; /* borrowed for the call: its reserved keys */
    uint32_t max_record_bytes;
    uint32_t depth_limit;
    bool is_discarding; /* past max_record_bytes: elements are counted, then dropped */
    size_t discard_len; /* the output's length when it passed max_record_bytes */
    size_t discarded;   /* bytes counted and dropped since */
    int deferred_rc;    /* the first key-rule fault (message in err), 0 when none */
    keyset_t keys;
    stele_error_t *err;
    uint32_t depth; /* open containers; the event is 1 */
    jb_level_t levels[JSON_MAX_DEPTH + 1];
} jb_t;

static int jb_value(jb_t *jb, size_t type_pos);

/* -- output --------------------------------------------------------------------------- */

static int
jb_grow(jb_t *jb, size_t need)
{
    size_t cap = jb->ocap * 2 > need ? jb->ocap * 2 : need;
    bool is_local = jb->o == jb->out->local;
    uint8_t *grown = is_local ? malloc(cap) : realloc(jb->o, cap);
    if (!grown)
        return error_set(jb->err, -ENOMEM, "out of memory reading a json event of %zu bytes",
                         jb->len);
    if (is_local)
        memcpy(grown, jb->o, jb->olen);
    jb->o = grown;
    jb->ocap = cap;
    return 0;
}

static inline int
jb_reserve(jb_t *jb, size_t n)
{
    return jb->olen + n <= jb->ocap ? 0 : jb_grow(jb, jb->olen + n);
}

static void
jb_put_le32(uint8_t *at, uint32_t v)
{
    v = BSON_UINT32_TO_LE(v);
    memcpy(at, &v, sizeof v);
}

/* Where an element starts: once the event is too big, the previous element's bytes are
 * counted and dropped. */
static inline int
jb_element_begin(jb_t *jb)
{
    if (jb->olen > jb->max_record_bytes) {
        if (!jb->is_discarding) {
            jb->is_discarding = true;
            jb->discard_len = jb->olen;
        } else {
            jb->discarded += jb->olen - jb->discard_len;
            jb->olen = jb->discard_len;
        }
    }
    return jb_reserve(jb, JB_ELEMENT_ROOM);
}

/* -- faults --------------------------------------------------------------------------- */

static int
jb_malformed(jb_t *jb, const char *what)
{
    if (jb->pos >= jb->len)
        return error_set(jb->err, STELE_EJSON, "malformed json: the text ends inside the event");
    return error_set(jb->err, STELE_EJSON, "malformed json at byte %zu: %s", jb->pos, what);
}

static inline void
jb_skip_space(jb_t *jb)
{
    for (; jb->pos < jb->len; jb->pos++) {
        char c = jb->in[jb->pos];
        if (c != ' ' && c != '\n' && c != '\t' && c != '\r')
            return;
    }
}

/* The key path through levels 1..upto ("a.0.c"), for messages. */
static const char *
jb_path(const jb_t *jb, uint32_t upto, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (uint32_t d = 1; d <= upto && n + 1 < cap; d++) {
        const jb_level_t *lv = &jb->levels[d];
        const char *dot = n ? "." : "";
        int w = lv->is_array ? snprintf(buf + n, cap - n, "%s%u", dot, lv->index)
                             : snprintf(buf + n, cap - n, "%s%.*s", dot, (int)lv->key_len,
                                        (const char *)jb->o + lv->key_off);
        n = w < 0 || n + (size_t)w >= cap ? cap - 1 : n + (size_t)w;
    }
    return buf;
}

/* -- strings -------------------------------------------------------------------------- */

/* The high bit of each byte of w that ends the fast copy of a string: '"', '\\', a control
 * character or a non-ASCII byte. Exact per byte (no borrow between bytes). */
static inline uint64_t
jb_word_specials(uint64_t w)
{
    const uint64_t lows = 0x7f7f7f7f7f7f7f7full, highs = 0x8080808080808080ull;
    uint64_t q = w ^ 0x2222222222222222ull, b = w ^ 0x5c5c5c5c5c5c5c5cull;
    q = ~(((q & lows) + lows) | q | lows);
    b = ~(((b & lows) + lows) | b | lows);
    uint64_t control = ~((w & lows) + 0x6060606060606060ull) & highs;
    return q | b | control | (w & highs);
}

static inline size_t
jb_first_hit(uint64_t hits)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return (size_t)__builtin_clzll(hits) / 8;
#else
    return (size_t)__builtin_ctzll(hits) / 8;
#endif
}

static uint8_t *
jb_put_utf8(uint8_t *dst, uint32_t cp)
{
    if (cp < 0x80) {
        *dst++ = (uint8_t)cp;
    } else if (cp < 0x800) {
        *dst++ = (uint8_t)(0xC0 | cp >> 6);
        *dst++ = (uint8_t)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *dst++ = (uint8_t)(0xE0 | cp >> 12);
        *dst++ = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        *dst++ = (uint8_t)(0x80 | (cp & 0x3F));
    } else {
        *dst++ = (uint8_t)(0xF0 | cp >> 18);
        *dst++ = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
        *dst++ = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        *dst++ = (uint8_t)(0x80 | (cp & 0x3F));
    }
    return dst;
}

/* The code point of the \u escape at in[*pos] (a surrogate pair read whole); advances *pos.
 * Returns it, or a fault. */
static int
jb_unicode_escape(jb_t *jb, size_t *pos, bool is_key, uint32_t *cp)
{
    size_t at = *pos;
    int v = json_hex4(jb->in, jb->len, at + 2);
    if (v < 0) {
        jb->pos = at + 6 > jb->len ? jb->len : at;
        return jb_malformed(jb, "a \\u escape needs four hex digits");
    }
    *pos = at + 6;
    if (v >= 0xD800 && v <= 0xDBFF && at + 8 <= jb->len && jb->in[at + 6] == '\\' &&
        jb->in[at + 7] == 'u') {
        int low = json_hex4(jb->in, jb->len, at + 8);
        if (low >= 0xDC00 && low <= 0xDFFF) {
            *cp = 0x10000u + ((uint32_t)(v - 0xD800) << 10) + (uint32_t)(low - 0xDC00);
            *pos = at + 12;
            return 0;
        }
    }
    if (v >= 0xD800 && v <= 0xDFFF)
        return error_set(jb->err, STELE_EUTF8,
                         "invalid unicode escape at byte %zu: a surrogate half that is not "
                         "part of a pair",
                         at);
    if (v == 0 && is_key)
        return error_set(jb->err, STELE_EKEYNUL, "key contains a NUL (\\u0000) at byte %zu", at);
    *cp = (uint32_t)v;
    return 0;
}

/* The escape at in[*pos] (a '\\'): writes its bytes at *dst, advances both. */
static int
jb_escape(jb_t *jb, size_t *pos, uint8_t **dst, bool is_key)
{
    size_t at = *pos;
    if (at + 1 >= jb->len) {
        jb->pos = jb->len;
        return jb_malformed(jb, "");
    }
    static const char simple_from[] = "\"\\/bfnrt", simple_to[] = "\"\\/\b\f\n\r\t";
    char e = jb->in[at + 1];
    const char *hit = e ? strchr(simple_from, e) : NULL;
    if (hit) {
        *(*dst)++ = (uint8_t)simple_to[hit - simple_from];
        *pos = at + 2;
        return 0;
    }
    if (e != 'u') {
        jb->pos = at + 1;
        return jb_malformed(jb, "an invalid escape in a string");
    }
    uint32_t cp = 0;
    int rc = jb_unicode_escape(jb, pos, is_key, &cp);
    if (rc == 0)
        *dst = jb_put_utf8(*dst, cp);
    return rc;
}

/* The byte at in[*pos] that stopped the fast copy, other than the closing quote. */
static int
jb_string_special(jb_t *jb, size_t open, bool is_key, size_t *pos, uint8_t **dst)
{
    unsigned char c = (unsigned char)jb->in[*pos];
    if (c == '\\')
        return jb_escape(jb, pos, dst, is_key);
    if (c < 0x20) {
        jb->pos = *pos;
        return jb_malformed(jb, "a control character in a string (write it as an escape)");
    }
    size_t n =
        c < 0x80 ? 1 : json_utf8_sequence((const unsigned char *)jb->in + *pos, jb->len - *pos);
    if (n == 0)
        return error_set(jb->err, STELE_EUTF8, "invalid utf-8 in the %s at byte %zu",
                         is_key ? "key" : "string", open);
    memcpy(*dst, jb->in + *pos, n);
    *dst += n;
    *pos += n;
    return 0;
}

/* The string opening at in[pos]: its bytes, unescaped, appended to the output (no NUL). */
static int
jb_string(jb_t *jb, bool is_key)
{
    size_t open = jb->pos, pos = open + 1;
    int rc = jb_reserve(jb, jb->len - pos + JB_STRING_SLACK);
    if (rc)
        return rc;
    const char *in = jb->in;
    size_t len = jb->len;
    uint8_t *dst = jb->o + jb->olen;
    for (;;) {
        for (; pos + 8 <= len; pos += 8, dst += 8) {
            uint64_t w;
            memcpy(&w, in + pos, sizeof w);
            memcpy(dst, &w, sizeof w);
            uint64_t hits = jb_word_specials(w);
            if (hits) {
                size_t k = jb_first_hit(hits);
                pos += k;
                dst += k;
                break;
            }
        }
        if (pos >= len) {
            jb->pos = len;
            return jb_malformed(jb, "");
        }
        if (in[pos] == '"')
            break;
        if ((rc = jb_string_special(jb, open, is_key, &pos, &dst)) != 0)
            return rc;
    }
    jb->pos = pos + 1;
    jb->olen = (size_t)(dst - jb->o);
    return 0;
}

static int
jb_string_value(jb_t *jb, size_t type_pos)
{
    int rc = jb_reserve(jb, 4);
    if (rc)
        return rc;
    jb->o[type_pos] = BSON_TYPE_UTF8;
    size_t len_pos = jb->olen;
    jb->olen += 4;
    if ((rc = jb_string(jb, false)) != 0)
        return rc;
    jb->o[jb->olen++] = 0; /* JB_STRING_SLACK covers it */
    jb_put_le32(jb->o + len_pos, (uint32_t)(jb->olen - len_pos - 4));
    return 0;
}

/* -- numbers and literals --------------------------------------------------------------- */

static bool
jb_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Advances over one or more digits; false when there is none. */
static bool
jb_digits(jb_t *jb, size_t *p)
{
    size_t start = *p;
    while (*p < jb->len && jb_is_digit(jb->in[*p]))
        (*p)++;
    return *p > start;
}

/* The end of the number token at in[start] (RFC 8259's grammar), or 0 when malformed;
 * *is_int when it has neither fraction nor exponent. */
static size_t
jb_number_end(jb_t *jb, size_t start, bool *is_int)
{
    size_t p = start + (jb->in[start] == '-');
    if (p < jb->len && jb->in[p] == '0')
        p++;
    else if (!jb_digits(jb, &p))
        return 0;
    *is_int = true;
    if (p < jb->len && jb->in[p] == '.') {
        p++;
        *is_int = false;
        if (!jb_digits(jb, &p))
            return 0;
    }
    if (p < jb->len && (jb->in[p] == 'e' || jb->in[p] == 'E')) {
        p++;
        *is_int = false;
        if (p < jb->len && (jb->in[p] == '+' || jb->in[p] == '-'))
            p++;
        if (!jb_digits(jb, &p))
            return 0;
    }
    /* "01", "1.5.2", "1e5e": more number bytes than the grammar takes. */
    return p < jb->len && json_is_number_char(jb->in[p]) ? 0 : p;
}

static void
jb_put_integer(jb_t *jb, size_t type_pos, const char *tok, size_t n)
{
    bool negative = tok[0] == '-';
    uint64_t v = 0;
    for (size_t k = negative; k < n; k++)
        v = v * 10 + (uint64_t)(tok[k] - '0');
    /* libbson: int32 when it fits, else int64 (json_scan_number has checked the range). */
    if (v <= INT32_MAX || (negative && v <= (uint64_t)INT32_MAX + 1)) {
        int32_t i32 = negative ? (int32_t)(-(int64_t)v) : (int32_t)v;
        jb->o[type_pos] = BSON_TYPE_INT32;
        jb_put_le32(jb->o + jb->olen, (uint32_t)i32);
        jb->olen += 4;
        return;
    }
    int64_t i64 = negative ? -(int64_t)(v - 1) - 1 : (int64_t)v;
    uint64_t le = BSON_UINT64_TO_LE((uint64_t)i64);
    jb->o[type_pos] = BSON_TYPE_INT64;
    memcpy(jb->o + jb->olen, &le, sizeof le);
    jb->olen += 8;
}

static int
jb_number(jb_t *jb, size_t type_pos)
{
    size_t start = jb->pos;
    bool is_int = false;
    size_t end = jb_number_end(jb, start, &is_int);
    if (end == 0 || end >= jb->len) {
        jb->pos = end ? end : start;
        return jb_malformed(jb, "a malformed number");
    }
    const char *tok = jb->in + start;
    size_t n = end - start;
    /* Short plain numbers cannot leave int64 or the double range; others are checked as the
     * scan checks them. */
    bool is_short = n <= 18 && (is_int || (!memchr(tok, 'e', n) && !memchr(tok, 'E', n)));
    int rc = is_short ? 0 : json_scan_number(jb->in, start, end, jb->err);
    if (rc == 0)
        rc = jb_reserve(jb, 8);
    if (rc)
        return rc;
    jb->pos = end;
    if (is_int) {
        jb_put_integer(jb, type_pos, tok, n);
        return 0;
    }
    /* strtod as libbson calls it; it stops at in[end], a byte no number goes on with. */
    double d = strtod(tok, NULL);
    jb->o[type_pos] = BSON_TYPE_DOUBLE;
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    bits = BSON_UINT64_TO_LE(bits);
    memcpy(jb->o + jb->olen, &bits, sizeof bits);
    jb->olen += 8;
    return 0;
}

static int
jb_literal(jb_t *jb, size_t type_pos, const char *word, bson_type_t type, int bool_value)
{
    size_t n = strlen(word);
    for (size_t k = 0; k < n; k++, jb->pos++)
        if (jb->pos >= jb->len || jb->in[jb->pos] != word[k])
            return jb_malformed(jb, "a value expected");
    int rc = jb_reserve(jb, 1);
    if (rc)
        return rc;
    jb->o[type_pos] = (uint8_t)type;
    if (bool_value >= 0)
        jb->o[jb->olen++] = (uint8_t)bool_value;
    return 0;
}

/* -- containers ----------------------------------------------------------------------- */

/* The '{' or '[' at in[pos]. */
static int
jb_open(jb_t *jb, bool is_array)
{
    if (jb->depth + 1 > jb->depth_limit)
        return error_set(jb->err, STELE_EDEPTH, "event nested deeper than %u levels at byte %zu",
                         jb->depth_limit, jb->pos);
    int rc = jb_reserve(jb, 4);
    if (rc)
        return rc;
    jb_level_t *lv = &jb->levels[++jb->depth];
    lv->start = jb->olen;
    lv->is_array = is_array;
    lv->index = 0;
    lv->key_off = 0;
    lv->key_len = 0;
    if (!is_array)
        keyset_object_begin(&jb->keys, &lv->keys);
    jb->olen += 4;
    jb->pos++;
    return 0;
}

/* The '}' or ']' at in[pos]. */
static int
jb_close(jb_t *jb)
{
    int rc = jb_reserve(jb, 1);
    if (rc)
        return rc;
    jb_level_t *lv = &jb->levels[jb->depth--];
    jb->o[jb->olen++] = 0;
    jb_put_le32(jb->o + lv->start, (uint32_t)(jb->olen - lv->start));
    if (!lv->is_array)
        keyset_object_end(&jb->keys, &lv->keys);
    jb->pos++;
    return 0;
}

/* Keys are short: a loop beats a call to memchr. */
static inline bool
jb_has_dot(const char *key, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (key[i] == '.')
            return true;
    return false;
}

/* The key rules noted for the end (see the top of the file): reserved, dotted, repeated. */
static void
jb_note_key_faults(jb_t *jb, jb_level_t *lv, size_t key_open)
{
    const char *key = (const char *)jb->o + lv->key_off;
    uint32_t n = lv->key_len;
    char path[JB_PATH_BYTES];
    if (jb->depth == 1 && validate_key_is_reserved(jb->lim, key, n)) {
        jb->deferred_rc = error_set(jb->err, STELE_ERESERVEDKEY,
                                    "key \"%.*s\" at byte %zu is reserved at the top level", (int)n,
                                    key, key_open);
    } else if (jb_has_dot(key, n)) {
        const char *parent = jb->depth > 1 ? jb_path(jb, jb->depth - 1, path, sizeof path) : NULL;
        jb->deferred_rc = validate_key_dotted(jb->err, key, n, parent, (long)key_open);
    } else {
        int rc = keyset_add(&jb->keys, &lv->keys, (const char *)jb->o, (uint32_t)lv->key_off, n);
        if (rc == 1)
            jb->deferred_rc = validate_key_repeated(
                jb->err, key, n, jb_path(jb, jb->depth, path, sizeof path), (long)key_open);
        else if (rc < 0)
            jb->deferred_rc = error_set(jb->err, rc, "out of memory checking the keys of an event");
    }
}

/* One "key": value of the object at the innermost level. */
static int
jb_member(jb_t *jb, jb_level_t *lv)
{
    int rc = jb_element_begin(jb);
    if (rc)
        return rc;
    size_t type_pos = jb->olen++, key_open = jb->pos;
    lv->key_off = jb->olen;
    if ((rc = jb_string(jb, true)) != 0)
        return rc;
    lv->key_len = (uint32_t)(jb->olen - lv->key_off);
    jb->o[jb->olen++] = 0; /* JB_STRING_SLACK covers it */
    if (lv->key_len > 0 && jb->o[lv->key_off] == '$')
        return error_set(jb->err, STELE_EDOLLARKEY, "key at byte %zu starts with '$'", key_open);
    if (!jb->is_discarding && !jb->deferred_rc)
        jb_note_key_faults(jb, lv, key_open);
    jb_skip_space(jb);
    if (jb->pos >= jb->len || jb->in[jb->pos] != ':')
        return jb_malformed(jb, "':' expected after a key");
    jb->pos++;
    jb_skip_space(jb);
    return jb_value(jb, type_pos);
}

/* After an element: skips to the next one (true) or to the container's end (false). */
static int
jb_next(jb_t *jb, char close, bool *more)
{
    jb_skip_space(jb);
    if (jb->pos < jb->len && jb->in[jb->pos] == ',') {
        jb->pos++;
        jb_skip_space(jb);
        *more = true;
        return 0;
    }
    if (jb->pos < jb->len && jb->in[jb->pos] == close) {
        *more = false;
        return 0;
    }
    return jb_malformed(jb, close == '}' ? "',' or '}' expected" : "',' or ']' expected");
}

static int
jb_object(jb_t *jb)
{
    int rc = jb_open(jb, false);
    if (rc)
        return rc;
    jb_level_t *lv = &jb->levels[jb->depth];
    jb_skip_space(jb);
    bool more = jb->pos >= jb->len || jb->in[jb->pos] != '}';
    while (more) {
        if (jb->pos >= jb->len || jb->in[jb->pos] != '"')
            return jb_malformed(jb, "a key (a string) expected");
        if ((rc = jb_member(jb, lv)) != 0 || (rc = jb_next(jb, '}', &more)) != 0)
            return rc;
    }
    return jb_close(jb);
}

/* An array index as its BSON key, with its NUL (JB_ELEMENT_ROOM covers it). */
static void
jb_put_index(jb_t *jb, uint32_t index)
{
    char digits[10];
    int n = 0;
    do {
        digits[n++] = (char)('0' + index % 10);
        index /= 10;
    } while (index);
    while (n)
        jb->o[jb->olen++] = (uint8_t)digits[--n];
    jb->o[jb->olen++] = 0;
}

static int
jb_array(jb_t *jb)
{
    int rc = jb_open(jb, true);
    if (rc)
        return rc;
    jb_level_t *lv = &jb->levels[jb->depth];
    jb_skip_space(jb);
    bool more = jb->pos >= jb->len || jb->in[jb->pos] != ']';
    for (; more; lv->index++) {
        if ((rc = jb_element_begin(jb)) != 0)
            return rc;
        size_t type_pos = jb->olen++;
        jb_put_index(jb, lv->index);
        if ((rc = jb_value(jb, type_pos)) != 0 || (rc = jb_next(jb, ']', &more)) != 0)
            return rc;
    }
    return jb_close(jb);
}

static int
jb_value(jb_t *jb, size_t type_pos)
{
    if (jb->pos >= jb->len)
        return jb_malformed(jb, "");
    char c = jb->in[jb->pos];
    switch (c) {
    case '"':
        return jb_string_value(jb, type_pos);
    case '{':
        jb->o[type_pos] = BSON_TYPE_DOCUMENT;
        return jb_object(jb);
    case '[':
        jb->o[type_pos] = BSON_TYPE_ARRAY;
        return jb_array(jb);
    case 't':
        return jb_literal(jb, type_pos, "true", BSON_TYPE_BOOL, 1);
    case 'f':
        return jb_literal(jb, type_pos, "false", BSON_TYPE_BOOL, 0);
    case 'n':
        return jb_literal(jb, type_pos, "null", BSON_TYPE_NULL, -1);
    default:
        if (c == '-' || jb_is_digit(c))
            return jb_number(jb, type_pos);
        return jb_malformed(jb, "a value expected");
    }
}

/* -- the event ------------------------------------------------------------------------ */

static int
jb_event(jb_t *jb)
{
    jb_skip_space(jb);
    if (jb->pos >= jb->len || jb->in[jb->pos] != '{')
        return jb_malformed(jb, "'{' expected");
    int rc = jb_object(jb);
    if (rc)
        return rc;
    jb_skip_space(jb);
    return jb->pos < jb->len ? jb_malformed(jb, "data after the event") : 0;
}

/* The verdict on a reading that got to the end without a fault in the text. */
static int
jb_verdict(const jb_t *jb, stele_error_t *err)
{
    size_t total = jb->discarded + jb->olen;
    if (total > jb->max_record_bytes)
        return error_set(err, STELE_ETOOBIG, "event of %zu bytes exceeds max_record_bytes (%u)",
                         total, jb->max_record_bytes);
    if (total == 5)
        return error_set(err, STELE_EEMPTY, "event has no fields");
    return jb->deferred_rc;
}

int
json_bson_transcode(const char *json, size_t len, const validate_limits_t *lim, validate_buf_t *out,
                    stele_error_t *err)
{
    jb_t jb; /* not zeroed whole: its levels are most of it, and jb_open fills each */
    jb.in = json;
    jb.len = len;
    jb.pos = 0;
    jb.out = out;
    jb.o = out->data;
    jb.olen = 0;
    jb.ocap = out->cap;
    jb.lim = lim;
    jb.max_record_bytes = lim->max_record_bytes;
    jb.depth_limit = lim->max_depth < JSON_MAX_DEPTH ? lim->max_depth : JSON_MAX_DEPTH;
    jb.is_discarding = false;
    jb.discard_len = jb.discarded = 0;
    jb.deferred_rc = 0;
    jb.err = err;
    jb.depth = 0;
    keyset_init(&jb.keys);
    int rc = jb_event(&jb);
    keyset_free(&jb.keys);
    out->data = jb.o;
    out->cap = jb.ocap;
    out->len = 0;
    if (rc) {
        int text_rc = json_scan(json, len, lim->max_depth, err);
        return text_rc ? text_rc : rc;
    }
    rc = jb_verdict(&jb, err);
    if (rc == 0)
        out->len = jb.olen;
    return rc;
}
