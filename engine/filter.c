/*
 * filter.c: record filters (stele.h, "Record filters"): the conditions of `stele tail
 * --where`, each "PATH=VALUE", and matching a record's event against all of them. A field
 * is compared by its BSON type (strings exactly, numbers numerically, booleans and null by
 * name), so "code=200" matches an int32, an int64 or a double 200. The filter owns copies of
 * its conditions; matching only reads it, so a built filter may be shared by threads.
 * libbson finds the field (bson_iter_find_descendant); no state, no locks.
 */
#include <bson/bson.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

typedef struct filter_condition {
    char *path;        /* dotted path into the event; owned */
    const char *value; /* inside the same allocation as path, after its NUL */
} filter_condition_t;

struct stele_filter {
    filter_condition_t *conditions;
    size_t n, cap;
};

int
stele_filter_new(stele_filter_t **out, stele_error_t *err)
{
    if (out == NULL)
        return error_set(err, STELE_EINVAL, "stele_filter_new: NULL argument");
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return error_set(err, -ENOMEM, "no memory for a filter");
    return 0;
}

int
stele_filter_add(stele_filter_t *f, const char *condition, stele_error_t *err)
{
    if (f == NULL || condition == NULL)
        return error_set(err, STELE_EINVAL, "stele_filter_add: NULL argument");
    const char *eq = strchr(condition, '=');
    if (eq == NULL || eq == condition)
        return error_set(err, STELE_EINVAL, "'%s' is not PATH=VALUE", condition);
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4;
        filter_condition_t *grown = realloc(f->conditions, cap * sizeof *grown);
        if (grown == NULL)
            return error_set(err, -ENOMEM, "no memory for a filter condition");
        f->conditions = grown;
        f->cap = cap;
    }
    /* one copy: "PATH\0VALUE" */
    char *copy = strdup(condition);
    if (copy == NULL)
        return error_set(err, -ENOMEM, "no memory for a filter condition");
    copy[eq - condition] = '\0';
    f->conditions[f->n].path = copy;
    f->conditions[f->n].value = copy + (eq - condition) + 1;
    f->n++;
    return 0;
}

/* VALUE read as a number equals the field's; an integer field compares exactly with an
 * integer VALUE, otherwise both are compared as doubles. */
static int
filter_number_matches(const bson_iter_t *it, const char *want)
{
    char *end = NULL;
    if (bson_iter_type(it) != BSON_TYPE_DOUBLE) {
        errno = 0;
        long long n = strtoll(want, &end, 10);
        if (errno == 0 && end != want && *end == '\0')
            return bson_iter_as_int64(it) == n;
    }
    double d = strtod(want, &end);
    if (end == want || *end != '\0')
        return 0;
    double have = bson_iter_type(it) == BSON_TYPE_DOUBLE ? bson_iter_double(it)
                                                         : (double)bson_iter_as_int64(it);
    return have == d;
}

static int
filter_value_matches(const bson_iter_t *it, const char *want)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8:
        return strcmp(bson_iter_utf8(it, NULL), want) == 0;
    case BSON_TYPE_BOOL:
        return strcmp(want, bson_iter_bool(it) ? "true" : "false") == 0;
    case BSON_TYPE_NULL:
        return strcmp(want, "null") == 0;
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
        return filter_number_matches(it, want);
    default:
        return 0;
    }
}

int
stele_filter_match(const stele_filter_t *f, const stele_record_t *rec)
{
    if (f == NULL || rec == NULL)
        return STELE_EINVAL;
    bson_t event;
    if (rec->bson == NULL || !bson_init_static(&event, rec->bson, rec->bson_len))
        return STELE_EBSON;
    for (size_t i = 0; i < f->n; i++) {
        bson_iter_t it, found;
        if (!bson_iter_init(&it, &event) ||
            !bson_iter_find_descendant(&it, f->conditions[i].path, &found) ||
            !filter_value_matches(&found, f->conditions[i].value))
            return 0;
    }
    return 1;
}

void
stele_filter_free(stele_filter_t *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->n; i++)
        free(f->conditions[i].path);
    free(f->conditions);
    free(f);
}
