/*
 * report.c: the exit codes and error lines of every subcommand (see report.h). Owns the one
 * table from library return codes to exit codes, so a new STELE_E* code is classified here
 * and nowhere else. Writes only to stderr, and reads stdout's error state; no state.
 */
#include "report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int
cli_stdout_done(const char *command)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return CLI_EXIT_OK;
    /* errno is the failed write's when fflush failed; an earlier failed write (a buffer
     * that filled up) left only the error flag */
    fprintf(stderr, "stele%s%s: could not write to stdout%s%s\n", command ? " " : "",
            command ? command : "", errno ? ": " : "", errno ? strerror(errno) : "");
    return CLI_EXIT_ENGINE;
}

void
cli_report(const char *command, int rc, const stele_error_t *err)
{
    const char *message = stele_strerror(rc);
    const char *hint = "";
    if (err != NULL && err->code == rc && err->message[0] != '\0') {
        message = err->message;
        hint = err->hint;
    }
    fprintf(stderr, "stele %s: %s\n", command, message);
    if (hint[0] != '\0')
        fprintf(stderr, "hint: %s\n", hint);
}

int
cli_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "stele %s: ", command);
    vfprintf(stderr, fmt, ap);
    fputs("\nhint: see \"stele ", stderr);
    fprintf(stderr, "%s --help\"\n", command);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int
cli_usage_error_hinted(const char *command, const char *hint, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "stele %s: ", command);
    vfprintf(stderr, fmt, ap);
    if (hint == NULL || hint[0] == '\0')
        fprintf(stderr, "\nhint: see \"stele %s --help\"\n", command);
    else
        fprintf(stderr, "\nhint: %s\n", hint);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int
cli_exit_for(int rc)
{
    switch (rc) {
    case STELE_OK:
        return CLI_EXIT_OK;
    case STELE_ECONFIG:
    case STELE_ENOSINK:
    case STELE_EINVAL:
        return CLI_EXIT_USAGE;
    case STELE_ECORRUPT:
    case STELE_EINTEGRITY:
    case STELE_ETOOBIG:
    case STELE_EJSON:
    case STELE_ENOTOBJECT:
    case STELE_EUTF8:
    case STELE_EKEYNUL:
    case STELE_EDOLLARKEY:
    case STELE_ERESERVEDKEY:
    case STELE_EDEPTH:
    case STELE_ENUMBER:
    case STELE_EBSON:
    case STELE_EEMPTY:
    case STELE_EAMBIGUOUS:
        return CLI_EXIT_INVALID;
    case STELE_ERETAINED:
        return CLI_EXIT_RETAINED;
    default:
        return CLI_EXIT_ENGINE;
    }
}
