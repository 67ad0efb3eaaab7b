/*
 * filter.h: the inside of a stele_filter_t (stele.h, "Record filters"), shared by the
 * files that build it (filter.c: parsing "PATH OP VALUE"), match records against it
 * (filter_match.c) and narrow a remote query with it (remote_reader.c).
 * A built filter is only read: threads may share it.
 */
#ifndef STELE_ENGINE_FILTER_H
#define STELE_ENGINE_FILTER_H

#include <regex.h>
#include <stdint.h>

#include "stele.h"

/* What a condition looks at: a field of the record, or a path into its event. */
typedef enum filter_target {
    FILTER_SEQ,
    FILTER_TS,
    FILTER_SRC,
    FILTER_EVENT,
} filter_target_t;

typedef enum filter_op {
    FILTER_EQ,
    FILTER_NE,
    FILTER_LT,
    FILTER_LE,
    FILTER_GT,
    FILTER_GE,
    FILTER_REGEX,     /* ~  */
    FILTER_NOT_REGEX, /* !~ */
    FILTER_GLOB,      /* :  */
    FILTER_NOT_GLOB,  /* !: */
} filter_op_t;

typedef struct filter_condition {
    filter_target_t target;
    filter_op_t op;
    char *path;          /* FILTER_EVENT: the dotted path into the event; owned */
    char *value;         /* VALUE without its quotes, if it had them; owned */
    int is_quoted;       /* VALUE was a JSON string: it compares with strings only */
    int is_integer;      /* VALUE reads as an int64: int_value */
    int is_number;       /* VALUE reads as a number: double_value (integers too) */
    int64_t int_value;   /* the number; the seq (as int64, >= 0); the time for ts, in ns */
    double double_value; /* the number as a double */
    regex_t *regex;      /* FILTER_REGEX, FILTER_NOT_REGEX: compiled VALUE; owned (apart from
                            the array, which moves as it grows) */
} filter_condition_t;

struct stele_filter {
    int64_t now_ns; /* relative times in ts conditions count from here */
    filter_condition_t *conditions;
    size_t n, cap;
};

/* The seq and time ranges outside which no record can match f (from its seq and ts
 * conditions with =, <, <=, >, >=): a reader may skip what lies outside. */
typedef struct filter_bounds {
    uint64_t min_seq, max_seq;    /* 0 and UINT64_MAX when unbounded */
    int64_t min_ts_ns, max_ts_ns; /* INT64_MIN and INT64_MAX when unbounded */
} filter_bounds_t;

void filter_bounds(const stele_filter_t *f, filter_bounds_t *out);

/* Whether condition c can only hold for an event field that is a string equal to c->value
 * (an `=` whose VALUE is quoted, or is neither a number, true, false nor null): what a
 * server may be asked to match exactly. */
int filter_is_string_equality(const filter_condition_t *c);

#endif /* STELE_ENGINE_FILTER_H */
