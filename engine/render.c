/*
 * render.c: the JSON writer (render.h): buffer growth, comma placement, string escaping,
 * numbers and times. Every JSON text stele prints is written through these functions
 * (BSON documents by render_bson.c, the public calls by render_output.c), so all of it is
 * compact, escaped alike, and every double has one form: the shortest text that reads back
 * as the same double. libbson's bson_as_relaxed_extended_json() is not used for output
 * because it writes `{ "a" : 1 }` and doubles with 20 significant digits (0.1 as
 * 0.10000000000000000555). Pure functions of the buffer; no state, no locks.
 */
#include "render.h"

#include <bson/bson.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"

/* First allocation; most lines are a few hundred bytes. */
#define RENDER_FIRST_BYTES 256
/* Round-trip needs at most 17 significant digits for an IEEE 754 double; up to 15 digits
 * are exact for every normal double (DBL_DIG). */
#define RENDER_DOUBLE_MAX_DIGITS 17
#define RENDER_DOUBLE_SURE_DIGITS 15
/* Decimal exponents written in fixed notation, as Python's repr() writes them. */
#define RENDER_DOUBLE_FIXED_MIN_EXPONENT (-4)
#define RENDER_DOUBLE_FIXED_MAX_EXPONENT 16

void
render_init(render_buf_t *b)
{
    memset(b, 0, sizeof *b);
}

void
render_fail(render_buf_t *b, int rc, const char *what)
{
    if (b->rc == 0) {
        b->rc = rc;
        b->what = what;
    }
}

/* Room for `n` more bytes and the NUL. Returns 0, or -1 with the buffer failed. */
static int
render_reserve(render_buf_t *b, size_t n)
{
    if (b->rc != 0)
        return -1;
    if (b->len + n + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : RENDER_FIRST_BYTES;
    while (cap < b->len + n + 1 && cap <= SIZE_MAX / 2)
        cap *= 2;
    char *text = cap >= b->len + n + 1 ? realloc(b->text, cap) : NULL;
    if (text == NULL) {
        render_fail(b, -ENOMEM, "out of memory");
        return -1;
    }
    b->text = text;
    b->cap = cap;
    return 0;
}

static void
render_raw(render_buf_t *b, const char *s, size_t n)
{
    if (render_reserve(b, n) != 0)
        return;
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = '\0';
}

void
render_text(render_buf_t *b, const char *s, size_t len)
{
    render_raw(b, s, len);
}

/* Starts an item of the open object or array (or the text itself): the comma if due. */
static void
render_item(render_buf_t *b)
{
    if (b->is_after_item)
        render_raw(b, ",", 1);
    b->is_after_item = 1;
}

void
render_object_begin(render_buf_t *b)
{
    render_item(b);
    render_raw(b, "{", 1);
    b->is_after_item = 0;
}

void
render_object_end(render_buf_t *b)
{
    render_raw(b, "}", 1);
    b->is_after_item = 1;
}

void
render_array_begin(render_buf_t *b)
{
    render_item(b);
    render_raw(b, "[", 1);
    b->is_after_item = 0;
}

void
render_array_end(render_buf_t *b)
{
    render_raw(b, "]", 1);
    b->is_after_item = 1;
}

/* The body of a JSON string: '"', '\' and the control bytes escaped, the rest copied
 * (UTF-8 is valid JSON as it is; U+007F and above need no escape). */
static void
render_escaped(render_buf_t *b, const char *s, size_t len)
{
    static const char short_escapes[] = "\b\f\n\r\t";
    static const char short_letters[] = "bfnrt";
    size_t run = 0; /* start of the bytes not copied yet */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        render_raw(b, s + run, i - run);
        run = i + 1;
        char esc[8];
        const char *short_at = c != 0 ? strchr(short_escapes, c) : NULL;
        if (c == '"' || c == '\\')
            snprintf(esc, sizeof esc, "\\%c", c);
        else if (short_at != NULL)
            snprintf(esc, sizeof esc, "\\%c", short_letters[short_at - short_escapes]);
        else
            snprintf(esc, sizeof esc, "\\u%04x", c);
        render_raw(b, esc, strlen(esc));
    }
    render_raw(b, s + run, len - run);
}

/* A quoted string; invalid UTF-8 fails the buffer. */
static void
render_quoted(render_buf_t *b, const char *s, size_t len)
{
    if (!bson_utf8_validate(s, len, true)) {
        render_fail(b, STELE_EUTF8, "a string is not valid UTF-8");
        return;
    }
    render_raw(b, "\"", 1);
    render_escaped(b, s, len);
    render_raw(b, "\"", 1);
}

void
render_key(render_buf_t *b, const char *key)
{
    render_item(b);
    render_quoted(b, key, strlen(key));
    render_raw(b, ":", 1);
    b->is_after_item = 0;
}

void
render_string(render_buf_t *b, const char *s, size_t len)
{
    render_item(b);
    render_quoted(b, s, len);
}

void
render_int64(render_buf_t *b, int64_t v)
{
    char text[24];
    int n = snprintf(text, sizeof text, "%" PRId64, v);
    render_item(b);
    render_raw(b, text, (size_t)n);
}

void
render_uint64(render_buf_t *b, uint64_t v)
{
    char text[24];
    int n = snprintf(text, sizeof text, "%" PRIu64, v);
    render_item(b);
    render_raw(b, text, (size_t)n);
}

void
render_null(render_buf_t *b)
{
    render_item(b);
    render_raw(b, "null", 4);
}

void
render_bool(render_buf_t *b, int v)
{
    render_item(b);
    render_raw(b, v ? "true" : "false", v ? 4 : 5);
}

/*
 * `text` as printf wrote it, made locale-proof: a program embedding stele may have set
 * LC_NUMERIC, which turns the decimal point into ',' (or a longer sequence); every byte that
 * is no digit, sign or exponent mark is that point and becomes one '.'. Appends ".0" when
 * nothing marks the number as a fraction, so JSON readers keep a double a double.
 */
static void
render_number_text(render_buf_t *b, const char *text)
{
    char out[48];
    size_t n = 0;
    int is_fraction = 0;
    for (const char *p = text; *p != '\0' && n + 3 < sizeof out; p++) {
        if ((*p >= '0' && *p <= '9') || *p == '-' || *p == '+') {
            out[n++] = *p;
        } else if (*p == 'e' || *p == 'E') {
            out[n++] = 'e';
            is_fraction = 1;
        } else if (n == 0 || out[n - 1] != '.') {
            out[n++] = '.';
            is_fraction = 1;
        }
    }
    if (!is_fraction) {
        out[n++] = '.';
        out[n++] = '0';
    }
    render_raw(b, out, n);
}

/*
 * The fewest significant digits that read back as the same double, laid out as Python's
 * repr() lays them out: with an exponent below 1e-4 and from 1e16 on ("1e-05", "1e+16"),
 * else in fixed notation ("100.0" where %g would write "1e+02"). The search starts at 15
 * digits: a normal double carries 15.95 decimal digits, so at most one decimal of 15 or
 * fewer significant digits reads back as it, and printing 15 digits finds it (the zeros
 * after it are dropped below); only when none exists are 16, then 17 digits needed.
 * Subnormals carry fewer bits: for them the search starts at 1 digit.
 */
static void
render_shortest_double(char *text, size_t cap, double v)
{
    int precision = fabs(v) >= DBL_MIN ? RENDER_DOUBLE_SURE_DIGITS : 1;
    for (; precision < RENDER_DOUBLE_MAX_DIGITS; precision++) {
        snprintf(text, cap, "%.*e", precision - 1, v);
        if (strtod(text, NULL) == v)
            break;
    }
    if (precision == RENDER_DOUBLE_MAX_DIGITS)
        snprintf(text, cap, "%.*e", precision - 1, v);
    const char *e = strchr(text, 'e');
    int exponent = e != NULL ? atoi(e + 1) : 0;
    int digits = 1; /* through the last nonzero digit of the mantissa */
    int n_seen = 0;
    for (const char *p = text; e != NULL && p < e; p++) {
        if (*p >= '0' && *p <= '9' && (++n_seen, *p != '0'))
            digits = n_seen;
    }
    if (exponent >= RENDER_DOUBLE_FIXED_MIN_EXPONENT && exponent < RENDER_DOUBLE_FIXED_MAX_EXPONENT)
        snprintf(text, cap, "%.*f", digits - 1 > exponent ? digits - 1 - exponent : 0, v);
    else
        snprintf(text, cap, "%.*e", digits - 1, v);
}

void
render_double(render_buf_t *b, double v)
{
    if (!isfinite(v)) {
        const char *name = isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
        render_object_begin(b);
        render_key(b, "$numberDouble");
        render_string(b, name, strlen(name));
        render_object_end(b);
        return;
    }
    char text[40];
    render_shortest_double(text, sizeof text, v);
    render_item(b);
    render_number_text(b, text);
}

/* RFC 3339 UTC with `frac_digits` digits of fraction, as a JSON string. */
void
render_time(render_buf_t *b, int64_t unix_s, int64_t frac, int frac_digits)
{
    time_t t = (time_t)unix_s;
    struct tm tm;
    char day[32] = "?";
    if (gmtime_r(&t, &tm) != NULL)
        strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    char text[64];
    int n = snprintf(text, sizeof text, "%s.%0*" PRId64 "Z", day, frac_digits, frac);
    render_string(b, text, (size_t)n);
}

int
render_finish(render_buf_t *b, const char *subject, char **text_out, size_t *len_out,
              stele_error_t *err)
{
    int rc = b->rc;
    if (rc == 0 && b->text == NULL)
        render_raw(b, "", 0);
    rc = b->rc;
    if (rc != 0) {
        free(b->text);
        error_set(err, rc, "could not write the %s as JSON: %s", subject, b->what);
    } else {
        *text_out = b->text;
        if (len_out != NULL)
            *len_out = b->len;
    }
    render_init(b);
    return rc;
}
