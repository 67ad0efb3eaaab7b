/*
 * filter.c: building record filters (stele.h, "Record filters"): parsing the conditions of
 * `stele tail --where`, each "PATH OP VALUE", into filter_condition_t (filter.h), and what
 * a reader may skip (filter_bounds). Matching is filter_match.c's.
 *
 * Every condition is checked whole when it is added, so a filter that was built can only
 * match or not: an unknown operator, an empty key, a regular expression regcomp refuses, a
 * number or time that VALUE is not, are refused here with the condition quoted, never
 * turned into a filter that silently matches nothing. A refused condition leaves the filter
 * as it was. The filter owns copies of its conditions and their compiled regular
 * expressions; matching only reads them, so a built filter may be shared by threads.
 * No state outside the filter, no locks.
 */
#include "filter.h"

#include <bson/bson.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* Characters that make up an operator; a PATH holds none of them (nor ':'). */
#define FILTER_OP_CHARS "=!<>~"
#define FILTER_OPS_TEXT "= != < <= > >= ~ !~ : !:"

typedef struct filter_op_name {
    const char *text;
    filter_op_t op;
} filter_op_name_t;

static const filter_op_name_t filter_op_names[] = {
    {"=", FILTER_EQ},         {"==", FILTER_EQ},  {"!=", FILTER_NE},       {"<", FILTER_LT},
    {"<=", FILTER_LE},        {">", FILTER_GT},   {">=", FILTER_GE},       {"~", FILTER_REGEX},
    {"!~", FILTER_NOT_REGEX}, {":", FILTER_GLOB}, {"!:", FILTER_NOT_GLOB},
};

int
stele_filter_new(int64_t now_ns, stele_filter_t **out, stele_error_t *err)
{
    if (out == NULL)
        return error_set(err, STELE_EINVAL, "stele_filter_new: NULL argument");
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return error_set(err, -ENOMEM, "no memory for a filter");
    (*out)->now_ns = now_ns;
    return 0;
}

static void
filter_condition_release(filter_condition_t *c)
{
    free(c->path);
    free(c->value);
    if (c->regex != NULL)
        regfree(c->regex);
    free(c->regex);
    memset(c, 0, sizeof *c);
}

static int
is_ordering(filter_op_t op)
{
    return op == FILTER_LT || op == FILTER_LE || op == FILTER_GT || op == FILTER_GE;
}

static int
is_pattern(filter_op_t op)
{
    return op == FILTER_REGEX || op == FILTER_NOT_REGEX || op == FILTER_GLOB ||
           op == FILTER_NOT_GLOB;
}

/* ---- PATH OP VALUE -------------------------------------------------------------------- */

/* Splits `cond` at its operator: the PATH before it (spaces at its end dropped) and the
 * VALUE after it (spaces at its start dropped). Returns 0 or STELE_EINVAL (err filled). */
static int
filter_split(const char *cond, size_t *path_len, filter_op_t *op, const char **value,
             stele_error_t *err)
{
    size_t at = strcspn(cond, FILTER_OP_CHARS ":");
    if (cond[at] == '\0')
        return error_set(err, STELE_EINVAL,
                         "'%s' has no operator: write PATH OP VALUE, OP one of " FILTER_OPS_TEXT,
                         cond);
    size_t op_len = cond[at] == ':' ? 1 : strspn(cond + at, FILTER_OP_CHARS);
    if (op_len == 1 && cond[at] == '!' && cond[at + 1] == ':')
        op_len = 2;
    size_t i = 0;
    for (; i < sizeof filter_op_names / sizeof filter_op_names[0]; i++) {
        if (strlen(filter_op_names[i].text) == op_len &&
            strncmp(filter_op_names[i].text, cond + at, op_len) == 0)
            break;
    }
    if (i == sizeof filter_op_names / sizeof filter_op_names[0])
        return error_set_hinted(err, STELE_EINVAL,
                                "a VALUE that starts with = ! < > or ~ is written as a JSON "
                                "string: 'msg=\"!x\"'",
                                "'%s' has the unknown operator '%.*s' (use " FILTER_OPS_TEXT ")",
                                cond, (int)op_len, cond + at);
    *op = filter_op_names[i].op;
    *path_len = at;
    while (*path_len > 0 && cond[*path_len - 1] == ' ')
        (*path_len)--;
    *value = cond + at + op_len;
    *value += strspn(*value, " ");
    return 0;
}

/* Checks the dotted PATH and sets what the condition looks at. Returns 0 or STELE_EINVAL. */
static int
filter_take_path(filter_condition_t *c, const char *cond, const char *path, size_t len,
                 stele_error_t *err)
{
    static const struct {
        const char *name;
        filter_target_t target;
    } record_fields[] = {{"seq", FILTER_SEQ}, {"ts", FILTER_TS}, {"src", FILTER_SRC}};
    while (len > 0 && *path == ' ') {
        path++;
        len--;
    }
    if (len == 0)
        return error_set(err, STELE_EINVAL, "'%s' has no PATH before its operator", cond);
    for (size_t i = 0; i < 3; i++) {
        if (strlen(record_fields[i].name) == len &&
            strncmp(path, record_fields[i].name, len) == 0) {
            c->target = record_fields[i].target;
            return 0;
        }
    }
    if (len == strlen("event") && strncmp(path, "event", len) == 0)
        return error_set(err, STELE_EINVAL,
                         "'%s' compares the whole event: name a field in it (event.actor)", cond);
    if (len > strlen("event.") && strncmp(path, "event.", strlen("event.")) == 0) {
        path += strlen("event.");
        len -= strlen("event.");
    }
    if (path[0] == '.' || path[len - 1] == '.' || memmem(path, len, "..", 2) != NULL)
        return error_set(err, STELE_EINVAL, "'%s' has an empty key in its PATH", cond);
    c->target = FILTER_EVENT;
    c->path = strndup(path, len);
    return c->path == NULL ? error_set(err, -ENOMEM, "no memory for a filter condition") : 0;
}

/* A VALUE in double quotes is a JSON string: its text, unescaped, into c->value. */
static int
filter_unquote(filter_condition_t *c, const char *cond, const char *value, stele_error_t *err)
{
    char *doc_text = NULL;
    bson_t doc;
    bson_iter_t it;
    int ok = 0;
    if (asprintf(&doc_text, "{\"v\":%s}", value) < 0)
        return error_set(err, -ENOMEM, "no memory for a filter condition");
    if (bson_init_from_json(&doc, doc_text, -1, NULL)) {
        ok = bson_count_keys(&doc) == 1 && bson_iter_init_find(&it, &doc, "v") &&
             BSON_ITER_HOLDS_UTF8(&it);
        if (ok)
            c->value = strdup(bson_iter_utf8(&it, NULL));
        bson_destroy(&doc);
    }
    free(doc_text);
    if (!ok)
        return error_set(err, STELE_EINVAL, "'%s': VALUE starts with '\"' but is not a JSON string",
                         cond);
    return c->value == NULL ? error_set(err, -ENOMEM, "no memory for a filter condition") : 0;
}

/* Whether `text` is a decimal number: sign, digits with an optional fraction (or a fraction
 * alone), an optional exponent. No hex, inf or nan, which strtod would take. */
static int
is_decimal_number(const char *text)
{
    const char *p = text + (*text == '-' || *text == '+');
    size_t int_digits = strspn(p, "0123456789");
    p += int_digits;
    size_t frac_digits = 0;
    if (*p == '.') {
        frac_digits = strspn(p + 1, "0123456789");
        p += 1 + frac_digits;
    }
    if (int_digits + frac_digits == 0)
        return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        p += *p == '-' || *p == '+';
        size_t exp_digits = strspn(p, "0123456789");
        if (exp_digits == 0)
            return 0;
        p += exp_digits;
    }
    return *p == '\0';
}

/* Reads c->value as a number: is_integer (int64) and is_number (any decimal). */
static void
filter_read_number(filter_condition_t *c)
{
    if (c->is_quoted || !is_decimal_number(c->value))
        return;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(c->value, &end, 10);
    if (errno == 0 && *end == '\0') {
        c->is_integer = 1;
        c->int_value = n;
    }
    c->double_value = strtod(c->value, NULL);
    c->is_number = 1;
}

/* Compiles VALUE as a POSIX extended regular expression. */
static int
filter_compile_regex(filter_condition_t *c, const char *cond, stele_error_t *err)
{
    c->regex = malloc(sizeof *c->regex);
    if (c->regex == NULL)
        return error_set(err, -ENOMEM, "no memory for a filter condition");
    int rc = regcomp(c->regex, c->value, REG_EXTENDED | REG_NOSUB);
    if (rc == 0)
        return 0;
    char why[128];
    regerror(rc, c->regex, why, sizeof why);
    free(c->regex);
    c->regex = NULL;
    return error_set(err, STELE_EINVAL, "'%s': '%s' is not a regular expression: %s", cond,
                     c->value, why);
}

/* seq: a whole number, for every operator but the patterns. */
static int
filter_take_seq(filter_condition_t *c, const char *cond, stele_error_t *err)
{
    if (!c->is_integer || c->int_value < 0)
        return error_set(err, STELE_EINVAL, "'%s': seq compares with a whole number, not '%s'",
                         cond, c->value);
    return 0;
}

/* ts: a time in any form stele_time_parse() takes, relative ones counted from f->now_ns. */
static int
filter_take_ts(filter_condition_t *c, const stele_filter_t *f, const char *cond, stele_error_t *err)
{
    stele_error_t time_err = {0};
    if (stele_time_parse(c->value, f->now_ns, &c->int_value, &time_err) == 0)
        return 0;
    return error_set_hinted(err, STELE_EINVAL, time_err.hint, "'%s': '%s' is not a time", cond,
                            c->value);
}

/* Checks VALUE against what the condition compares, and prepares it. */
static int
filter_take_value(filter_condition_t *c, const stele_filter_t *f, const char *cond,
                  stele_error_t *err)
{
    if (c->op == FILTER_REGEX || c->op == FILTER_NOT_REGEX)
        return filter_compile_regex(c, cond, err);
    if (is_pattern(c->op))
        return 0;
    switch (c->target) {
    case FILTER_SEQ:
        return filter_take_seq(c, cond, err);
    case FILTER_TS:
        return filter_take_ts(c, f, cond, err);
    case FILTER_SRC:
        if (is_ordering(c->op))
            return error_set(err, STELE_EINVAL,
                             "'%s': src is text: compare it with = != ~ !~ : or !:", cond);
        return 0;
    case FILTER_EVENT:
    default:
        if (is_ordering(c->op) && !c->is_number)
            return error_set(err, STELE_EINVAL,
                             "'%s': < <= > >= compare numbers, and '%s' is not one", cond,
                             c->value);
        return 0;
    }
}

static int
filter_grow(stele_filter_t *f, stele_error_t *err)
{
    if (f->n < f->cap)
        return 0;
    size_t cap = f->cap ? f->cap * 2 : 4;
    filter_condition_t *grown = realloc(f->conditions, cap * sizeof *grown);
    if (grown == NULL)
        return error_set(err, -ENOMEM, "no memory for a filter condition");
    f->conditions = grown;
    f->cap = cap;
    return 0;
}

int
stele_filter_add(stele_filter_t *f, const char *condition, stele_error_t *err)
{
    if (f == NULL || condition == NULL)
        return error_set(err, STELE_EINVAL, "stele_filter_add: NULL argument");
    filter_condition_t c = {0};
    size_t path_len = 0;
    const char *value = NULL;
    int rc = filter_split(condition, &path_len, &c.op, &value, err);
    if (rc == 0)
        rc = filter_take_path(&c, condition, condition, path_len, err);
    if (rc == 0 && value[0] == '"') {
        c.is_quoted = 1;
        rc = filter_unquote(&c, condition, value, err);
    } else if (rc == 0 && (c.value = strdup(value)) == NULL) {
        rc = error_set(err, -ENOMEM, "no memory for a filter condition");
    }
    if (rc == 0) {
        filter_read_number(&c);
        rc = filter_take_value(&c, f, condition, err);
    }
    if (rc == 0)
        rc = filter_grow(f, err);
    if (rc != 0) {
        filter_condition_release(&c);
        return rc;
    }
    f->conditions[f->n++] = c;
    return 0;
}

void
stele_filter_free(stele_filter_t *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->n; i++)
        filter_condition_release(&f->conditions[i]);
    free(f->conditions);
    free(f);
}

/* ---- what readers may skip -------------------------------------------------------------- */

static int64_t
bound_step(int64_t v, int64_t step)
{
    if ((step > 0 && v == INT64_MAX) || (step < 0 && v == INT64_MIN))
        return v;
    return v + step;
}

/* Narrows [*lo, *hi] by one condition on an ordered value. */
static void
bounds_narrow(filter_op_t op, int64_t v, int64_t *lo, int64_t *hi)
{
    int64_t new_lo = INT64_MIN, new_hi = INT64_MAX;
    if (op == FILTER_EQ || op == FILTER_GE)
        new_lo = v;
    if (op == FILTER_GT)
        new_lo = bound_step(v, 1);
    if (op == FILTER_EQ || op == FILTER_LE)
        new_hi = v;
    if (op == FILTER_LT)
        new_hi = bound_step(v, -1);
    if (new_lo > *lo)
        *lo = new_lo;
    if (new_hi < *hi)
        *hi = new_hi;
}

void
filter_bounds(const stele_filter_t *f, filter_bounds_t *out)
{
    int64_t seq_lo = 0, seq_hi = INT64_MAX;
    out->min_ts_ns = INT64_MIN;
    out->max_ts_ns = INT64_MAX;
    for (size_t i = 0; f != NULL && i < f->n; i++) {
        const filter_condition_t *c = &f->conditions[i];
        if (c->op == FILTER_NE || is_pattern(c->op))
            continue;
        if (c->target == FILTER_SEQ)
            bounds_narrow(c->op, c->int_value, &seq_lo, &seq_hi);
        else if (c->target == FILTER_TS)
            bounds_narrow(c->op, c->int_value, &out->min_ts_ns, &out->max_ts_ns);
    }
    out->min_seq = seq_lo < 0 ? 0 : (uint64_t)seq_lo;
    out->max_seq = seq_hi < 0 ? 0 : seq_hi == INT64_MAX ? UINT64_MAX : (uint64_t)seq_hi;
}

int
filter_is_string_equality(const filter_condition_t *c)
{
    if (c->target != FILTER_EVENT || c->op != FILTER_EQ)
        return 0;
    if (c->is_quoted)
        return 1;
    return !c->is_number && strcmp(c->value, "true") != 0 && strcmp(c->value, "false") != 0 &&
           strcmp(c->value, "null") != 0;
}
