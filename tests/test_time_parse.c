/*
 * test_time_parse.c: stele_time_parse (stele.h, "Times as people write them";
 * engine/time_parse.c), what `stele tail --since/--until` and ts conditions take. Every
 * form in one table against a fixed clock and a fixed time zone (TZ set by the test, a
 * POSIX rule so no zone database is needed), with the expected instants worked out apart
 * (Python's datetime), and a table of malformed forms, each refused with STELE_EINVAL
 * quoting the text.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "stele.h"

#define NS(seconds) ((int64_t)(seconds)*INT64_C(1000000000))
#define MS(ms) ((int64_t)(ms)*INT64_C(1000000))
/* Central European Time, with its summer time, as a POSIX rule. */
#define TEST_TZ "CET-1CEST,M3.5.0,M10.5.0/3"
/* 2026-12-01T20:00:00Z, 21:00 in CET. */
#define NOW NS(1796155200)
/* 2026-12-01T00:00:00+01:00, local midnight of NOW. */
#define TODAY NS(1796079600)
/* 2026-03-30T10:00:00+02:00, the day after the switch to summer time. */
#define NOW_AFTER_DST NS(1774857600)

typedef struct time_row {
    const char *text;
    int64_t want_ns;
    int64_t now_ns; /* 0: NOW */
} time_row_t;

static const time_row_t rows[] = {
    {"now", NOW, 0},
    {"today", TODAY, 0},
    {"yesterday", NS(1795993200), 0},
    {"tomorrow", NS(1796166000), 0},
    /* a day across the switch to summer time is 23 hours long */
    {"yesterday", NS(1774738800), NOW_AFTER_DST},
    {"today", NS(1774821600), NOW_AFTER_DST},
    /* dates and local times */
    {"2026-12-01", TODAY, 0},
    {"2026-07-01", NS(1782856800), 0}, /* summer time: +02:00 */
    {"2026-12-01 21:00", NOW, 0},
    {"2026-12-01 21:00:00", NOW, 0},
    {"2026-12-01T21:00", NOW, 0},
    {"2026-12-01t21:00:00.25", NOW + MS(250), 0},
    {"21:00", NOW, 0},
    {"21:00:30", NOW + NS(30), 0},
    {"00:00", TODAY, 0},
    /* with a zone: RFC 3339 as it is */
    {"2026-12-01T20:00:00Z", NOW, 0},
    {"2026-12-01t20:00:00z", NOW, 0},
    {"2026-12-01 20:00:00Z", NOW, 0},
    {"2026-12-01 20:00:00 UTC", NOW, 0},
    {"2026-12-01T21:00:00+01:00", NOW, 0},
    {"2026-12-01T21:00:00+0100", NOW, 0},
    {"2026-12-01T15:00:00-05:00", NOW, 0},
    {"2026-12-01T20:00Z", NOW, 0},
    {"2026-12-01T20:00:00.123456789Z", NOW + 123456789, 0},
    {"2026-12-01T20:00:00.1234567891Z", NOW + 123456789, 0},
    {"2016-12-31T23:59:60Z", NS(1483228800), 0}, /* leap second: the instant after :59 */
    {"2016-12-31T23:59:60.5Z", NS(1483228800) + MS(500), 0},
    {"1969-12-31T23:59:59.5Z", -MS(500), 0},
    /* spans */
    {"-1h", NOW - NS(3600), 0},
    {"+30min", NOW + NS(1800), 0},
    {"30min ago", NOW - NS(1800), 0},
    {"1h30m ago", NOW - NS(5400), 0},
    {"1h 30min", NOW - NS(5400), 0},
    {"1 h 30 min ago", NOW - NS(5400), 0},
    {"90s", NOW - NS(90), 0},
    {"10m", NOW - NS(600), 0},
    {"2h", NOW - NS(7200), 0},
    {"3d", NOW - NS(3 * 86400), 0},
    {"1w", NOW - NS(7 * 86400), 0},
    {"-0s", NOW, 0},
    {"5sec ago", NOW - NS(5), 0},
    {"5secs ago", NOW - NS(5), 0},
    {"1 second ago", NOW - NS(1), 0},
    {"2 seconds ago", NOW - NS(2), 0},
    {"+1 minute", NOW + NS(60), 0},
    {"-2minutes", NOW - NS(120), 0},
    {"3 mins ago", NOW - NS(180), 0},
    {"1hr ago", NOW - NS(3600), 0},
    {"2hrs ago", NOW - NS(7200), 0},
    {"1 hour ago", NOW - NS(3600), 0},
    {"+2 hours", NOW + NS(7200), 0},
    {"1 day ago", NOW - NS(86400), 0},
    {"-2days", NOW - NS(2 * 86400), 0},
    {"1 week ago", NOW - NS(7 * 86400), 0},
    {"+2 weeks", NOW + NS(14 * 86400), 0},
    {"500ms ago", NOW - MS(500), 0},
    {"+250msec", NOW + MS(250), 0},
    {"7us ago", NOW - 7000, 0},
    {"7usec ago", NOW - 7000, 0},
    /* seconds since the epoch */
    {"@1796155200", NOW, 0},
    {"@1796155200.5", NOW + MS(500), 0},
    {"@-1", -NS(1), 0},
    {"@0", 0, 0},
    /* beyond int64 nanoseconds: saturated */
    {"9999-12-31T23:59:59Z", INT64_MAX, 0},
    {"0001-01-01", INT64_MIN, 0},
    {"999999999999w", NOW - INT64_MAX, 0},
    {"+999999999999w", INT64_MAX, 0},
    {"@99999999999999999999", INT64_MAX, 0},
};

static const char *const malformed[] = {
    "",
    " ",
    "yesterdy",
    "Today",
    " now",
    "now ",
    "2026-13-01",
    "2026-00-10",
    "2026-02-30",
    "2026-02-29", /* 2026 is not a leap year */
    "2026-04-31",
    "2026-12-1",
    "26-12-01",
    "2026/12/01",
    "2026-12-01T",
    "2026-12-01 ",
    "2026-12-01Z",
    "2026-12-01T25:00",
    "2026-12-01T24:00",
    "2026-12-01T21:60",
    "2026-12-01T21:00:61",
    "2026-12-01 21",
    "2026-12-01 21:0",
    "2026-12-01T21:00:00.Z",
    "2026-12-01 21:00 CET",
    "2026-12-01T21:00:00+1",
    "2026-12-01T21:00:00+01",
    "2026-12-01T21:00:00+24:00",
    "2026-12-01T21:00:00+01:60",
    "2026-12-01T21:00.5",
    "21",
    "21:00Z",
    "25:00",
    "1h30",
    "10y",
    "10M",
    "1.5h",
    "h",
    "-",
    "+",
    "ago",
    " ago",
    "1h ago ago",
    "-1h ago",
    "+1h ago",
    "--1h",
    "1h-",
    "1h,30m",
    "@",
    "@abc",
    "@1.",
    "@1x",
    "1796155200",
    "tomorrow 21:00",
};

static void
test_time_parse_takes_every_form(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t now_ns = rows[i].now_ns != 0 ? rows[i].now_ns : NOW;
        int64_t got = 0;
        stele_error_t err = {0};
        int rc = stele_time_parse(rows[i].text, now_ns, &got, &err);
        if (rc != 0)
            fail_msg("'%s': refused: %s", rows[i].text, err.message);
        if (got != rows[i].want_ns)
            fail_msg("'%s': got %lld, want %lld (%+lld s)", rows[i].text, (long long)got,
                     (long long)rows[i].want_ns,
                     (long long)((got - rows[i].want_ns) / INT64_C(1000000000)));
    }
}

static void
test_time_parse_refuses_malformed_forms_and_quotes_them(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        int64_t got = 12345;
        stele_error_t err = {0};
        int rc = stele_time_parse(malformed[i], NOW, &got, &err);
        if (rc != STELE_EINVAL)
            fail_msg("'%s': got rc %d and %lld, want STELE_EINVAL", malformed[i], rc,
                     (long long)got);
        char quoted[128];
        snprintf(quoted, sizeof quoted, "'%s' is not a time", malformed[i]);
        assert_string_equal(err.message, quoted);
        assert_non_null(strstr(err.hint, "yesterday"));
    }
    int64_t got;
    assert_int_equal(stele_time_parse(NULL, NOW, &got, NULL), STELE_EINVAL);
    assert_int_equal(stele_time_parse("now", NOW, NULL, NULL), STELE_EINVAL);
}

/* Local forms follow TZ: the same text is another instant in another zone. */
static void
test_time_parse_reads_local_times_in_the_process_zone(void **state)
{
    (void)state;
    int64_t in_cet, in_utc;
    assert_int_equal(stele_time_parse("2026-12-01 21:00", NOW, &in_cet, NULL), 0);
    setenv("TZ", "UTC0", 1);
    tzset();
    assert_int_equal(stele_time_parse("2026-12-01 21:00", NOW, &in_utc, NULL), 0);
    int64_t zoned;
    assert_int_equal(stele_time_parse("2026-12-01T21:00:00Z", NOW, &zoned, NULL), 0);
    setenv("TZ", TEST_TZ, 1);
    tzset();
    assert_int_equal(in_utc - in_cet, NS(3600));
    assert_int_equal(in_utc, zoned);
}

static int
set_zone(void **state)
{
    (void)state;
    setenv("TZ", TEST_TZ, 1);
    tzset();
    return 0;
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_parse_takes_every_form),
        cmocka_unit_test(test_time_parse_refuses_malformed_forms_and_quotes_them),
        cmocka_unit_test(test_time_parse_reads_local_times_in_the_process_zone),
    };
    return cmocka_run_group_tests(tests, set_zone, NULL);
}
