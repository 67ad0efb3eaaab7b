/*
 * timearg.c: the time values of the command line (see timearg.h): a strict RFC 3339 parser
 * (every field checked, dates that do not exist refused, a leap second taken as the instant
 * after :59), durations before now, and the RFC 3339 form `tail --output pretty` prints.
 * Times are int64 nanoseconds since the epoch; whatever falls outside them saturates.
 * Pure functions but for the clock read by cli_now_ns(); no state.
 */
#include "timearg.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "args.h"

#define NS_PER_SEC INT64_C(1000000000)

/*
 * Times are int64 nanoseconds since the epoch, which hold the years 1677 to 2262. A time
 * given outside them ("9999-12-31T23:59:59Z" meaning for ever, "--since 1000000d") is
 * saturated to the nearest end: it still sorts before or after every record's time, which
 * is all --since and --until ask of it (an unchecked product would overflow: undefined
 * behaviour, in practice an arbitrary date).
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
parse_relative(const char *text, int64_t now_ns, int64_t *ts_ns_out)
{
    uint64_t amount;
    char unit[3] = {0};
    size_t digits = strspn(text, "0123456789");
    if (digits == 0 || digits > 12 || strlen(text + digits) > 2)
        return -1;
    memcpy(unit, text + digits, strlen(text + digits));
    char number[16] = {0};
    memcpy(number, text, digits);
    if (cli_parse_u64(number, &amount) != 0)
        return -1;
    int64_t unit_s;
    if (strcmp(unit, "s") == 0)
        unit_s = 1;
    else if (strcmp(unit, "m") == 0)
        unit_s = 60;
    else if (strcmp(unit, "h") == 0)
        unit_s = 3600;
    else if (strcmp(unit, "d") == 0)
        unit_s = 86400;
    else if (strcmp(unit, "w") == 0)
        unit_s = 7 * 86400;
    else
        return -1;
    /* at most 12 digits of weeks: the seconds fit an int64, their nanoseconds may not */
    *ts_ns_out = ns_add_saturating(now_ns, ns_from_seconds(-(int64_t)amount * unit_s, 0));
    return 0;
}

/* Reads exactly `n` digits at *p into *out, advancing *p. */
static int
take_digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
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

/* "2026-11-30T20:44:50" (a 't' or a space may replace the T) into *tm; advances *p. */
static int
take_date_time(const char **p, struct tm *tm)
{
    int year, mon, mday, hour, min, sec;
    if (take_digits(p, 4, &year) || take_char(p, "-") || take_digits(p, 2, &mon) ||
        take_char(p, "-") || take_digits(p, 2, &mday) || take_char(p, "Tt ") ||
        take_digits(p, 2, &hour) || take_char(p, ":") || take_digits(p, 2, &min) ||
        take_char(p, ":") || take_digits(p, 2, &sec))
        return -1;
    if (mon < 1 || mon > 12 || mday < 1 || mday > 31 || hour > 23 || min > 59 || sec > 60)
        return -1;
    tm->tm_year = year - 1900;
    tm->tm_mon = mon - 1;
    tm->tm_mday = mday;
    tm->tm_hour = hour;
    tm->tm_min = min;
    tm->tm_sec = sec;
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
    int64_t scale = NS_PER_SEC / 10;
    while (**p >= '0' && **p <= '9') {
        *frac_ns += (**p - '0') * scale;
        scale /= 10;
        (*p)++;
        n_digits++;
    }
    return n_digits == 0 ? -1 : 0;
}

/* "Z" (or "z"), "+02:00" or "-05:30" into seconds east of UTC. */
static int
take_utc_offset(const char **p, int *offset_s)
{
    *offset_s = 0;
    if (**p == 'Z' || **p == 'z') {
        (*p)++;
        return 0;
    }
    if (**p != '+' && **p != '-')
        return -1;
    int sign = (**p == '-') ? -1 : 1;
    int off_h, off_m;
    (*p)++;
    if (take_digits(p, 2, &off_h) || take_char(p, ":") || take_digits(p, 2, &off_m) || off_h > 23 ||
        off_m > 59)
        return -1;
    *offset_s = sign * (off_h * 3600 + off_m * 60);
    return 0;
}

static int
parse_rfc3339(const char *text, int64_t *ts_ns_out)
{
    const char *p = text;
    struct tm tm = {0};
    int64_t frac_ns;
    int offset_s;
    if (take_date_time(&p, &tm) || take_fraction(&p, &frac_ns) || take_utc_offset(&p, &offset_s) ||
        *p != '\0')
        return -1;
    /* A leap second, 23:59:60, is the instant after :59 (Unix time has none); it must not
     * roll the date over before the check below. */
    int leap = tm.tm_sec == 60;
    tm.tm_sec -= leap;
    int mday = tm.tm_mday, mon = tm.tm_mon;
    time_t t = timegm(&tm);
    /* timegm normalises 2026-02-31 into March: reject dates that do not exist */
    struct tm check;
    if (gmtime_r(&t, &check) == NULL || check.tm_mday != mday || check.tm_mon != mon)
        return -1;
    *ts_ns_out = ns_from_seconds((int64_t)t + leap - offset_s, frac_ns);
    return 0;
}

int
cli_parse_time(const char *text, int64_t now_ns, int64_t *ts_ns_out)
{
    if (text == NULL || text[0] == '\0')
        return -1;
    if (parse_relative(text, now_ns, ts_ns_out) == 0)
        return 0;
    return parse_rfc3339(text, ts_ns_out);
}

void
cli_format_time(int64_t ts_ns, char *buf, size_t cap)
{
    int64_t sec = ts_ns / NS_PER_SEC;
    int64_t rem_ns = ts_ns % NS_PER_SEC;
    if (rem_ns < 0) {
        rem_ns += NS_PER_SEC;
        sec--;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    char date[32] = "?";
    if (gmtime_r(&t, &tm) != NULL)
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%06dZ", date, (int)(rem_ns / 1000));
}

int64_t
cli_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}
