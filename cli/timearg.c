/*
 * timearg.c: the time values of the command line (see timearg.h): flags such as --since
 * read by the library's parser (stele_time_parse, the forms journalctl takes), with the
 * usage error every command prints alike; the clock that "now" means for one command line.
 * No state.
 */
#include "timearg.h"

#include <time.h>

#include "report.h"

#define NS_PER_SEC INT64_C(1000000000)

int
cli_parse_time_flag(const char *command, const char *flag, const char *text, int64_t now_ns,
                    int64_t *ts_ns_out)
{
    stele_error_t err = {0};
    if (stele_time_parse(text, now_ns, ts_ns_out, &err) == 0)
        return 0;
    return cli_usage_error_hinted(command, err.hint, "%s '%s' is not a time", flag, text);
}

int64_t
cli_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}
