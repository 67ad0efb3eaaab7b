/*
 * timearg.h: times on the command line: reading --since/--until values (stele_time_parse:
 * dates, local or zoned times, today/yesterday, spans such as -1h or "30min ago") and the
 * clock that "now" means for one command line. Internal to cli/.
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

/* CLOCK_REALTIME in nanoseconds. */
int64_t cli_now_ns(void);

#endif /* STELE_CLI_TIMEARG_H */
