/*
 * time_parse.c: stele_time_parse (stele.h, "Times as people write them"): the times of
 * `stele tail --since/--until` and of the ts conditions of a filter, in the forms journalctl
 * takes: now/today/yesterday/tomorrow, a date, a date and time in local time or with a zone
 * (RFC 3339 included, leap second too), a time of day, a span before or after now, and
 * @UNIX_SECONDS.
 *
 * Every field is checked: a date that does not exist (2026-02-30) is refused rather than
 * normalised into the next month. Times are int64 nanoseconds since the epoch; whatever
 * falls outside them saturates. Local times go through localtime_r and mktime, so they
 * follow the process's time zone (TZ); "now" is the caller's, so one command line (and a
 * test) sees one instant. No state, no locks.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "error.h"

#define NS_PER_SEC INT64_C(1000000000)
#define NS_PER_MIN (60 * NS_PER_SEC)
#define NS_PER_HOUR (60 * NS_PER_MIN)
#define NS_PER_DAY (24 * NS_PER_HOUR)

/* The hint of every refusal: the forms, shortest first (fits STELE_ERROR_HINT_BYTES). */
#define TIME_FORMS_HINT                                                                            \
    "use 2026-12-01, '2026-12-01 21:00', 2026-12-01T21:00:00Z, 21:00, today, yesterday, now, "     \
    "-1h, +30min, '30min ago' or @SECONDS"

typedef struct span_unit {
    const char *name;
    int64_t ns;
} span_unit_t;

static const span_unit_t span_units[] = {
    {"us", 1000},
    {"usec", 1000},
    {"ms", 1000000},
    {"msec", 1000000},
    {"s", NS_PER_SEC},
    {"sec", NS_PER_SEC},
    {"secs", NS_PER_SEC},
    {"second", NS_PER_SEC},
    {"seconds", NS_PER_SEC},
    {"m", NS_PER_MIN},
    {"min", NS_PER_MIN},
    {"mins", NS_PER_MIN},
    {"minute", NS_PER_MIN},
    {"minutes", NS_PER_MIN},
    {"h", NS_PER_HOUR},
    {"hr", NS_PER_HOUR},
    {"hrs", NS_PER_HOUR},
    {"hour", NS_PER_HOUR},
    {"hours", NS_PER_HOUR},
    {"d", NS_PER_DAY},
    {"day", NS_PER_DAY},
    {"days", NS_PER_DAY},
    {"w", 7 * NS_PER_DAY},
    {"week", 7 * NS_PER_DAY},
    {"weeks", 7 * NS_PER_DAY},
};

/*
 * A time given outside int64 nanoseconds (years 1677 to 2262: "9999-12-31" meaning for
 * ever, "1000000d ago") is saturated to the nearest end: it still sorts before or after
 * every record's time, which is all a bound asks of it (an unchecked product would overflow:
 * undefined behaviour, in practice an arbitrary date).
 */
static int64_t
ns_from_seconds(int64_t seconds, int64_t frac_ns)
{
    if (seconds > (INT64_MAX - frac_ns) / NS_PER_SEC)
        return INT64_MAX;
    if (seconds < INT64_MIN / NS_PER_SEC)
        return INT64_MIN;
    return seconds * NS_PER_SEC + frac_ns;
}

static int64_t
ns_add_saturating(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

static int
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* ---- spans: "1h30m", "1h 30min", "90 s" ------------------------------------------------ */

static int64_t
span_unit_ns(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof span_units / sizeof span_units[0]; i++) {
        if (strlen(span_units[i].name) == len && memcmp(span_units[i].name, name, len) == 0)
            return span_units[i].ns;
    }
    return 0;
}

/* One NUMBER UNIT part at *p (spaces allowed before and between), its length added to
 * *total_ns (saturating). Returns 0 or -1. */
static int
span_take_part(const char **p, const char *end, int64_t *total_ns)
{
    const char *s = *p;
    int64_t amount = 0;
    const char *digits = s;
    for (; s < end && is_digit(*s); s++)
        amount = amount <= INT64_MAX / 10 - 1 ? amount * 10 + (*s - '0') : INT64_MAX;
    if (s == digits)
        return -1;
    while (s < end && *s == ' ')
        s++;
    const char *unit = s;
    while (s < end && *s >= 'a' && *s <= 'z')
        s++;
    int64_t unit_ns = span_unit_ns(unit, (size_t)(s - unit));
    if (unit_ns == 0)
        return -1;
    int64_t part_ns = amount > INT64_MAX / unit_ns ? INT64_MAX : amount * unit_ns;
    *total_ns = ns_add_saturating(*total_ns, part_ns);
    *p = s;
    return 0;
}

/* A sum of parts filling [p, end) exactly. Returns 0 or -1. */
static int
span_parse(const char *p, const char *end, int64_t *span_ns)
{
    int n_parts = 0;
    *span_ns = 0;
    for (;;) {
        while (p < end && *p == ' ')
            p++;
        if (p == end)
            return n_parts > 0 ? 0 : -1;
        if (span_take_part(&p, end, span_ns) != 0)
            return -1;
        n_parts++;
    }
}

/* "-1h", "+30min", "30min ago", or a bare span, which counts back from now ("90s"). */
static int
parse_relative(const char *text, int64_t now_ns, int64_t *ts_ns_out)
{
    static const char ago[] = " ago";
    const char *end = text + strlen(text);
    int is_ago = (size_t)(end - text) > strlen(ago) && strcmp(end - strlen(ago), ago) == 0;
    if (is_ago)
        end -= strlen(ago);
    int sign = -1;
    if (*text == '+' || *text == '-') {
        if (is_ago)
            return -1;
        sign = *text == '+' ? 1 : -1;
        text++;
    }
    int64_t span_ns;
    if (span_parse(text, end, &span_ns) != 0)
        return -1;
    *ts_ns_out = ns_add_saturating(now_ns, sign * span_ns);
    return 0;
}

/* ---- absolute times ----------------------------------------------------------------------- */

/* Reads exactly `n` digits at *p into *out, advancing *p. */
static int
take_digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (!is_digit(c))
            return -1;
        v = v * 10 + (c - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

static int
take_char(const char **p, const char *allowed)
{
    if (**p == '\0' || strchr(allowed, **p) == NULL)
        return -1;
    (*p)++;
    return 0;
}

/* "2026-12-01" into *tm. */
static int
take_date(const char **p, struct tm *tm)
{
    int year, mon, mday;
    if (take_digits(p, 4, &year) || take_char(p, "-") || take_digits(p, 2, &mon) ||
        take_char(p, "-") || take_digits(p, 2, &mday) || mon < 1 || mon > 12 || mday < 1 ||
        mday > 31)
        return -1;
    tm->tm_year = year - 1900;
    tm->tm_mon = mon - 1;
    tm->tm_mday = mday;
    return 0;
}

/* An optional ".123456" into nanoseconds (digits beyond the ninth are ignored). */
static int
take_fraction(const char **p, int64_t *frac_ns)
{
    *frac_ns = 0;
    if (**p != '.')
        return 0;
    (*p)++;
    int n_digits = 0;
    for (int64_t scale = NS_PER_SEC / 10; is_digit(**p); (*p)++, n_digits++) {
        *frac_ns += (**p - '0') * scale;
        scale /= 10;
    }
    return n_digits == 0 ? -1 : 0;
}

/* "21:00", "21:00:05" or "21:00:05.25" into *tm and *frac_ns (a fraction needs seconds). */
static int
take_time_of_day(const char **p, struct tm *tm, int64_t *frac_ns)
{
    int hour, min, sec = 0;
    *frac_ns = 0;
    if (take_digits(p, 2, &hour) || take_char(p, ":") || take_digits(p, 2, &min))
        return -1;
    if (**p == ':' && (take_char(p, ":") || take_digits(p, 2, &sec) || take_fraction(p, frac_ns)))
        return -1;
    if (hour > 23 || min > 59 || sec > 60)
        return -1;
    tm->tm_hour = hour;
    tm->tm_min = min;
    tm->tm_sec = sec;
    return 0;
}

/* The zone after a time: nothing (local time: *is_local set), "Z", " UTC", "+01:00",
 * "-0530". Returns 0 or -1; *offset_s is seconds east of UTC. */
static int
take_zone(const char **p, int *is_local, int *offset_s)
{
    *offset_s = 0;
    *is_local = **p == '\0';
    if (*is_local)
        return 0;
    if (**p == 'Z' || **p == 'z') {
        (*p)++;
        return 0;
    }
    if (strcmp(*p, " UTC") == 0) {
        *p += strlen(" UTC");
        return 0;
    }
    int sign = **p == '-' ? -1 : 1;
    int off_h, off_m;
    if (take_char(p, "+-") || take_digits(p, 2, &off_h) || (**p == ':' && take_char(p, ":")) ||
        take_digits(p, 2, &off_m) || off_h > 23 || off_m > 59)
        return -1;
    *offset_s = sign * (off_h * 3600 + off_m * 60);
    return 0;
}

/* Whole seconds of a time, floored (also before 1970). */
static time_t
seconds_floor(int64_t ts_ns)
{
    int64_t sec = ts_ns / NS_PER_SEC;
    return (time_t)(ts_ns % NS_PER_SEC < 0 ? sec - 1 : sec);
}

/*
 * The broken-down time `tm` (a date that may not exist, a leap second) as seconds: in
 * local time when is_local, else in UTC. A leap second, :60, is the instant after :59
 * (Unix time has none); it is taken off before the conversion so it cannot roll the date
 * over before the check. timegm and mktime normalise 2026-02-31 into March: reading the
 * result back refuses dates that do not exist. Returns 0 or -1.
 */
static int
tm_to_seconds(struct tm tm, int is_local, int64_t *seconds_out)
{
    int leap = tm.tm_sec == 60;
    tm.tm_sec -= leap;
    int year = tm.tm_year, mon = tm.tm_mon, mday = tm.tm_mday;
    tm.tm_isdst = -1;
    time_t t = is_local ? mktime(&tm) : timegm(&tm);
    struct tm check;
    if ((is_local ? localtime_r(&t, &check) : gmtime_r(&t, &check)) == NULL ||
        check.tm_year != year || check.tm_mon != mon || check.tm_mday != mday)
        return -1;
    *seconds_out = (int64_t)t + leap;
    return 0;
}

/* Today's date in local time, into *tm (time of day zero). */
static int
local_today(int64_t now_ns, struct tm *tm)
{
    time_t now_s = seconds_floor(now_ns);
    if (localtime_r(&now_s, tm) == NULL)
        return -1;
    tm->tm_hour = tm->tm_min = tm->tm_sec = 0;
    return 0;
}

/* "2026-12-01", "2026-12-01 21:00[:05[.25]]" with an optional zone, or "21:00[:05]". */
static int
parse_absolute(const char *text, int64_t now_ns, int64_t *ts_ns_out)
{
    const char *p = text;
    struct tm tm = {0};
    int64_t frac_ns = 0, seconds;
    int is_local = 1, offset_s = 0;
    if (take_date(&p, &tm) == 0) {
        if (*p != '\0' && (take_char(&p, "Tt ") || take_time_of_day(&p, &tm, &frac_ns) ||
                           take_zone(&p, &is_local, &offset_s)))
            return -1;
    } else {
        p = text;
        if (local_today(now_ns, &tm) || take_time_of_day(&p, &tm, &frac_ns))
            return -1;
    }
    if (*p != '\0' || tm_to_seconds(tm, is_local, &seconds) != 0)
        return -1;
    *ts_ns_out = ns_from_seconds(seconds - offset_s, frac_ns);
    return 0;
}

/* "now", "today", "yesterday", "tomorrow" (midnights in local time). */
static int
parse_word(const char *text, int64_t now_ns, int64_t *ts_ns_out)
{
    static const char *const days[] = {"yesterday", "today", "tomorrow"};
    if (strcmp(text, "now") == 0) {
        *ts_ns_out = now_ns;
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        struct tm tm;
        if (strcmp(text, days[i]) != 0)
            continue;
        if (local_today(now_ns, &tm) != 0)
            return -1;
        tm.tm_mday += i - 1; /* mktime carries it across months and years */
        tm.tm_isdst = -1;
        *ts_ns_out = ns_from_seconds((int64_t)mktime(&tm), 0);
        return 0;
    }
    return -1;
}

/* "@1795985090" or "@1795985090.25": seconds since the epoch (negative allowed). */
static int
parse_unix_seconds(const char *text, int64_t *ts_ns_out)
{
    if (*text != '@')
        return -1;
    const char *p = text + 1;
    int sign = *p == '-' ? -1 : 1;
    p += *p == '-';
    int64_t seconds = 0;
    const char *digits = p;
    for (; is_digit(*p); p++)
        seconds = seconds <= INT64_MAX / 10 - 1 ? seconds * 10 + (*p - '0') : INT64_MAX;
    int64_t frac_ns;
    if (p == digits || take_fraction(&p, &frac_ns) != 0 || *p != '\0')
        return -1;
    *ts_ns_out = sign > 0 ? ns_from_seconds(seconds, frac_ns)
                          : ns_add_saturating(ns_from_seconds(-seconds, 0), -frac_ns);
    return 0;
}

int
stele_time_parse(const char *text, int64_t now_ns, int64_t *ts_ns_out, stele_error_t *err)
{
    if (text == NULL || ts_ns_out == NULL)
        return error_set(err, STELE_EINVAL, "stele_time_parse: NULL argument");
    if (text[0] != '\0' &&
        (parse_word(text, now_ns, ts_ns_out) == 0 || parse_unix_seconds(text, ts_ns_out) == 0 ||
         parse_relative(text, now_ns, ts_ns_out) == 0 ||
         parse_absolute(text, now_ns, ts_ns_out) == 0))
        return 0;
    return error_set_hinted(err, STELE_EINVAL, TIME_FORMS_HINT, "'%s' is not a time", text);
}
