/*
 * timearg.h: times on the command line: reading --since/--until values (stele_time_parse:
 * dates, local or zoned times, today/yesterday, spans such as -1h or "30min ago") and
 * printing record times as RFC 3339 UTC. Internal to cli/.
 */
#ifndef STELE_CLI_TIMEARG_H
#define STELE_CLI_TIMEARG_H

#include <stddef.h>
#include <stdint.h>

/*
 * Reads `text`, the value of `flag` ("--since") of `command`, as a time with
 * stele_time_parse(), relative forms counted from now_ns. Returns 0, or CLI_EXIT_USAGE after
 * printing "FLAG 'TEXT' is not a time" and the forms it takes.
 */
int cli_parse_time_flag(const char *command, const char *flag, const char *text, int64_t now_ns,
                        int64_t *ts_ns_out);

/* Formats ts_ns as RFC 3339 UTC with microseconds ("2026-11-30T20:44:50.123456Z"). */
void cli_format_time(int64_t ts_ns, char *buf, size_t cap);

/* CLOCK_REALTIME in nanoseconds. */
int64_t cli_now_ns(void);

#endif /* STELE_CLI_TIMEARG_H */
