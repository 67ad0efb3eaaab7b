/*
 * timearg.h: times on the command line: parsing --since/--until values (RFC 3339 or a
 * duration before now) and printing record times as RFC 3339 UTC. Internal to cli/.
 */
#ifndef STELE_CLI_TIMEARG_H
#define STELE_CLI_TIMEARG_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parses a time: RFC 3339 ("2026-11-30T20:44:50Z", fraction and offset optional, a space may
 * replace the T), or a duration before now_ns ("10m", "2h", "3d", "90s", "1w"). A time
 * outside what int64 nanoseconds hold (before 1677, after 2262) saturates to INT64_MIN or
 * INT64_MAX, so it still compares right with every record's time.
 * Returns 0 or -1.
 */
int cli_parse_time(const char *text, int64_t now_ns, int64_t *ts_ns_out);

/* Formats ts_ns as RFC 3339 UTC with microseconds ("2026-11-30T20:44:50.123456Z"). */
void cli_format_time(int64_t ts_ns, char *buf, size_t cap);

/* CLOCK_REALTIME in nanoseconds. */
int64_t cli_now_ns(void);

#endif /* STELE_CLI_TIMEARG_H */
