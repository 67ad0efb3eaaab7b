/*
 * filter_match.c: stele_filter_match (stele.h, "Record filters"): whether a record meets
 * every condition of a filter that filter.c built.
 *
 * An event field is compared by its BSON type: a string exactly, an int32, int64 or double
 * numerically (an integer with an integer exactly, mixed ones without rounding the integer
 * to a double), booleans and null by name. Patterns (~ regular expressions, : globs) read a
 * string's text, or a number, boolean or null as `stele tail` writes it; other types have
 * no text and never match. A negated operator (!=, !~, !:) holds exactly when its positive
 * form does not, a missing field included. libbson finds the field
 * (bson_iter_find_descendant). Only reads the filter; no state, no locks.
 */
#include "filter.h"

#include <bson/bson.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "render.h"

#define NS_PER_US INT64_C(1000)
/* A comparison with a NaN, or with a field that is not a number: only != holds. */
#define FILTER_UNORDERED 2

/* ---- comparing numbers ------------------------------------------------------------------- */

static int
cmp_int64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

static int
cmp_double(double a, double b)
{
    if (isnan(a) || isnan(b))
        return FILTER_UNORDERED;
    return a < b ? -1 : a > b;
}

/* An int64 against a double, exactly: the double's integer part is compared as an int64
 * (every double in the int64 range has one), then its fraction decides a tie. */
static int
cmp_int_double(int64_t i, double d)
{
    if (isnan(d))
        return FILTER_UNORDERED;
    if (d >= 9223372036854775808.0)
        return -1;
    if (d < -9223372036854775808.0)
        return 1;
    int64_t whole = (int64_t)d;
    if (i != whole)
        return cmp_int64(i, whole);
    double frac = d - (double)whole;
    return frac > 0 ? -1 : frac < 0;
}

/* The event number at `it` against the condition's number: -1, 0, 1, or FILTER_UNORDERED
 * (a NaN, or a field that is not a number). */
static int
filter_compare_number(const bson_iter_t *it, const filter_condition_t *c)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
        if (c->is_integer)
            return cmp_int64(bson_iter_as_int64(it), c->int_value);
        return cmp_int_double(bson_iter_as_int64(it), c->double_value);
    case BSON_TYPE_DOUBLE: {
        if (!c->is_integer)
            return cmp_double(bson_iter_double(it), c->double_value);
        int r = cmp_int_double(c->int_value, bson_iter_double(it));
        return r == FILTER_UNORDERED ? r : -r;
    }
    default:
        return FILTER_UNORDERED;
    }
}

/* Whether `op` holds for a comparison result (-1, 0, 1 or FILTER_UNORDERED). */
static int
op_holds(filter_op_t op, int cmp)
{
    switch (op) {
    case FILTER_EQ:
        return cmp == 0;
    case FILTER_NE:
        return cmp != 0;
    case FILTER_LT:
        return cmp == -1;
    case FILTER_LE:
        return cmp == -1 || cmp == 0;
    case FILTER_GT:
        return cmp == 1;
    case FILTER_GE:
        return cmp == 0 || cmp == 1;
    default:
        return 0;
    }
}

/* ---- patterns -------------------------------------------------------------------------- */

static int
is_negated_pattern(filter_op_t op)
{
    return op == FILTER_NOT_REGEX || op == FILTER_NOT_GLOB;
}

/* A ~ or : condition (or its negation) on `text`; NULL: the field has no text. */
static int
pattern_holds(const filter_condition_t *c, const char *text)
{
    int is_match = 0;
    if (text != NULL && c->regex != NULL)
        is_match = regexec(c->regex, text, 0, NULL, 0) == 0;
    else if (text != NULL)
        is_match = fnmatch(c->value, text, 0) == 0;
    return is_negated_pattern(c->op) ? !is_match : is_match;
}

/* A pattern against the event field at `it` (NULL: missing): a string's own text, else a
 * number, boolean or null as the JSON `stele tail` prints. */
static int
pattern_holds_for_field(const filter_condition_t *c, const bson_iter_t *it)
{
    render_buf_t b;
    render_init(&b);
    const char *text = NULL;
    switch (it != NULL ? bson_iter_type(it) : BSON_TYPE_EOD) {
    case BSON_TYPE_UTF8:
        text = bson_iter_utf8(it, NULL);
        break;
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
        render_int64(&b, bson_iter_as_int64(it));
        break;
    case BSON_TYPE_DOUBLE:
        render_double(&b, bson_iter_double(it));
        break;
    case BSON_TYPE_BOOL:
        render_bool(&b, bson_iter_bool(it));
        break;
    case BSON_TYPE_NULL:
        render_null(&b);
        break;
    default:
        break;
    }
    if (text == NULL && b.rc == 0)
        text = b.text;
    int holds = pattern_holds(c, text);
    free(b.text);
    return holds;
}

/* ---- conditions ------------------------------------------------------------------------ */

/* `=` on an event field, by the field's type. */
static int
filter_event_equals(const bson_iter_t *it, const filter_condition_t *c)
{
    uint32_t len = 0;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8: {
        const char *s = bson_iter_utf8(it, &len);
        return len == strlen(c->value) && memcmp(s, c->value, len) == 0;
    }
    case BSON_TYPE_BOOL:
        return !c->is_quoted && strcmp(c->value, bson_iter_bool(it) ? "true" : "false") == 0;
    case BSON_TYPE_NULL:
        return !c->is_quoted && strcmp(c->value, "null") == 0;
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
        return c->is_number && filter_compare_number(it, c) == 0;
    default:
        return 0;
    }
}

static int
filter_event_holds(const filter_condition_t *c, const bson_t *event)
{
    bson_iter_t it, found;
    int is_found = bson_iter_init(&it, event) && bson_iter_find_descendant(&it, c->path, &found);
    if (c->op == FILTER_REGEX || c->op == FILTER_NOT_REGEX || c->op == FILTER_GLOB ||
        c->op == FILTER_NOT_GLOB)
        return pattern_holds_for_field(c, is_found ? &found : NULL);
    if (!is_found)
        return c->op == FILTER_NE;
    if (c->op == FILTER_EQ || c->op == FILTER_NE)
        return filter_event_equals(&found, c) == (c->op == FILTER_EQ);
    return op_holds(c->op, filter_compare_number(&found, c));
}

/* ts as `stele tail` prints it: "2026-11-30T20:44:50.123456Z" (floored to microseconds). */
static void
filter_ts_text(int64_t ts_ns, char *buf, size_t cap)
{
    int64_t rem_ns;
    int64_t sec = clock_floor_s(ts_ns, &rem_ns);
    time_t t = (time_t)sec;
    struct tm tm;
    char day[32] = "?";
    if (gmtime_r(&t, &tm) != NULL)
        strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%06" PRId64 "Z", day, rem_ns / NS_PER_US);
}

static int
filter_record_holds(const filter_condition_t *c, const stele_record_t *rec, const char *source)
{
    char text[64];
    int is_pattern = c->op == FILTER_REGEX || c->op == FILTER_NOT_REGEX || c->op == FILTER_GLOB ||
                     c->op == FILTER_NOT_GLOB;
    switch (c->target) {
    case FILTER_SEQ:
        if (is_pattern) {
            snprintf(text, sizeof text, "%" PRIu64, rec->seq);
            return pattern_holds(c, text);
        }
        return op_holds(c->op,
                        rec->seq < (uint64_t)c->int_value ? -1 : rec->seq > (uint64_t)c->int_value);
    case FILTER_TS:
        if (is_pattern) {
            filter_ts_text(rec->ts_ns, text, sizeof text);
            return pattern_holds(c, text);
        }
        return op_holds(c->op, cmp_int64(rec->ts_ns, c->int_value));
    case FILTER_SRC:
    default:
        if (is_pattern)
            return pattern_holds(c, source);
        return op_holds(c->op, strcmp(source, c->value) == 0 ? 0 : FILTER_UNORDERED);
    }
}

int
stele_filter_match(const stele_filter_t *f, const stele_record_t *rec, const char *source)
{
    if (f == NULL || rec == NULL)
        return STELE_EINVAL;
    bson_t event;
    if (rec->bson == NULL || !bson_init_static(&event, rec->bson, rec->bson_len))
        return STELE_EBSON;
    for (size_t i = 0; i < f->n; i++) {
        const filter_condition_t *c = &f->conditions[i];
        if (c->target == FILTER_SRC && source == NULL)
            return STELE_EINVAL;
        int holds = c->target == FILTER_EVENT ? filter_event_holds(c, &event)
                                              : filter_record_holds(c, rec, source);
        if (!holds)
            return 0;
    }
    return 1;
}
