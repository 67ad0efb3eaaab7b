/*
 * report.h: how a `stele` subcommand ends: the documented exit codes, the mapping from a
 * library return code to one of them, and the error lines on stderr ("stele CMD: what",
 * "hint: ..."). Internal to cli/.
 */
#ifndef STELE_CLI_REPORT_H
#define STELE_CLI_REPORT_H

#include <stele.h>

/* Exit codes: documented in docs/cli.md and docs/stele.1; tests/cli asserts them. */
enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_USAGE = 1,    /* bad flag, value, time, URI, config file or unsupported request */
    CLI_EXIT_INVALID = 2,  /* an event was rejected, or the journal failed a check */
    CLI_EXIT_ENGINE = 3,   /* I/O or engine error: missing/locked journal, halted engine, ... */
    CLI_EXIT_RETAINED = 4, /* a reader fell behind retention: records it had not read are gone */
};

/*
 * Call once a command printed its last line: flushes stdout and checks that no write to it
 * failed (a full disk, a closed stdout), so that lost output is never exit 0. Returns
 * CLI_EXIT_OK, or CLI_EXIT_ENGINE after printing "stele CMD: could not write to stdout: why"
 * (command NULL: "stele: ...").
 */
int cli_stdout_done(const char *command);

/* Prints "stele CMD: message" and "hint: ..." for a failed call, to stderr. */
void cli_report(const char *command, int rc, const stele_error_t *err);

/* Prints "stele CMD: <formatted>" to stderr; returns CLI_EXIT_USAGE for `return
 * cli_usage_error(...)`. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* As cli_usage_error, with `hint` on the hint line instead of the pointer to --help (an
 * empty or NULL hint keeps that pointer). */
int cli_usage_error_hinted(const char *command, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The exit code for a library return code (see enum cli_exit). */
int cli_exit_for(int rc);

#endif /* STELE_CLI_REPORT_H */
