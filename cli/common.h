/*
 * common.h: what every `stele` subcommand shares: the exit codes, the common flags (-d/--dir,
 * --config, --help and one flag per knob, generated from stele_knobs()), building the
 * stele_options_t in the documented order (config file, then STELE_* environment, then
 * flags), time parsing and error reporting. Internal to cli/.
 */
#ifndef STELE_CLI_COMMON_H
#define STELE_CLI_COMMON_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include <stele.h>

/* Exit codes: documented in docs/cli.md and docs/stele.1; tests/cli asserts them. */
enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_USAGE = 1,   /* bad flag, value, time, URI, config file or unsupported request */
    CLI_EXIT_INVALID = 2, /* an event was rejected, or the journal failed a check */
    CLI_EXIT_ENGINE = 3,  /* I/O or engine error: missing/locked journal, halted engine, ... */
};

/* Used when neither -d/--dir nor STELE_DIR is given. */
#define CLI_DEFAULT_DIR "./stele-journal"
/* Knob flags kept per command line; far more than the knob table has. */
#define CLI_MAX_KNOB_FLAGS 64
/* Option codes at or above this value are common flags, handled by cli_args_next(). */
#define CLI_OPT_COMMON_BASE 1000
/* Returned by cli_args_next() after it printed a usage error. */
#define CLI_OPT_ERROR (-2)

/* One command's view of its command line. */
typedef struct cli_args {
    const char *command;     /* "insert", ... for messages */
    const char *usage;       /* the command's own usage text, printed by --help */
    const char *dir;         /* -d/--dir, else STELE_DIR, else CLI_DEFAULT_DIR */
    const char *config_path; /* --config, else STELE_CONFIG, else NULL */
    size_t n_knob_flags;
    const char *knob_names[CLI_MAX_KNOB_FLAGS];  /* from stele_knobs(): static storage */
    const char *knob_values[CLI_MAX_KNOB_FLAGS]; /* borrowed from argv */
    int want_help;
    /* getopt_long tables: the command's options, then the common ones, then one per knob */
    struct option *longopts;
    char **knob_flag_names; /* "commit-interval-us", owned */
    size_t n_knobs;
    char shortopts[64];
} cli_args_t;

/*
 * Prepares parsing of argv (argv[0] is the command name). `cmd_opts` ends with a zero entry;
 * its `val` codes must stay below CLI_OPT_COMMON_BASE. Returns 0 or -ENOMEM.
 */
int cli_args_begin(cli_args_t *a, const char *command, const char *usage,
                   const struct option *cmd_opts, const char *cmd_shortopts);

/*
 * Returns the next command-specific option code (its argument in *optarg_out), -1 when the
 * options are done (operands start at *optind_out), or CLI_OPT_ERROR after printing a usage
 * error. Common flags are consumed here.
 */
int cli_args_next(cli_args_t *a, int argc, char **argv, const char **optarg_out, int *optind_out);

void cli_args_end(cli_args_t *a);

/* Prints `usage`, the common flags and the knob flags to stdout. Returns CLI_EXIT_OK, or
 * CLI_EXIT_ENGINE (reported) when stdout could not take them (see cli_stdout_done). */
int cli_print_help(const cli_args_t *a);

/*
 * Call once a command printed its last line: flushes stdout and checks that no write to it
 * failed (a full disk, a closed stdout), so that lost output is never exit 0. Returns
 * CLI_EXIT_OK, or CLI_EXIT_ENGINE after printing "stele CMD: could not write to stdout: why"
 * (command NULL: "stele: ...").
 */
int cli_stdout_done(const char *command);

/*
 * Fills *opts: defaults, then the config file, then STELE_* environment variables, then the
 * knob flags (so flags win). On failure prints the error and returns CLI_EXIT_USAGE, also for
 * a missing or unreadable config file: the fix is in what the user gave;
 * release *opts with stele_options_release() either way. Commands that only read (tail,
 * status, verify) build them too, so a bad knob is the same usage error for every command,
 * and pass them to the read calls (allow_unsafe_dir).
 */
int cli_options_build(const cli_args_t *a, stele_options_t *opts);

/* Prints "stele CMD: message" and "hint: ..." for a failed call, to stderr. */
void cli_report(const char *command, int rc, const stele_error_t *err);

/* Prints "stele CMD: <formatted>" to stderr; returns CLI_EXIT_USAGE for `return
 * cli_usage_error(...)`. */
int cli_usage_error(const char *command, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The exit code for a library return code (see enum cli_exit). */
int cli_exit_for(int rc);

/* Parses a decimal uint64 with nothing after it. Returns 0 or -1. */
int cli_parse_u64(const char *text, uint64_t *out);

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

/*
 * The MongoDB flags shared by ship, verify, serve and tail: --mongo URI, --db NAME,
 * --collection NAME, and --sink NAME where the command keeps a checkpoint. A command puts
 * CLI_MONGO_OPTIONS (and CLI_SINK_OPTION) in its option table and hands every option code to
 * cli_mongo_take() first. The codes stay below CLI_OPT_COMMON_BASE and above any command's own.
 */
enum {
    CLI_OPT_MONGO = 900,
    CLI_OPT_DB,
    CLI_OPT_COLLECTION,
    CLI_OPT_SINK,
};
#define CLI_MONGO_OPTIONS                                                                          \
    {"mongo", required_argument, NULL, CLI_OPT_MONGO},                                             \
        {"db", required_argument, NULL, CLI_OPT_DB},                                               \
    {                                                                                              \
        "collection", required_argument, NULL, CLI_OPT_COLLECTION                                  \
    }
#define CLI_SINK_OPTION                                                                            \
    {                                                                                              \
        "sink", required_argument, NULL, CLI_OPT_SINK                                              \
    }
/* Help lines for --db and --collection (the defaults are the engine's, docs/mongodb.md). */
#define CLI_MONGO_NAMES_USAGE                                                                      \
    "      --db NAME          database (default: the URI's path, else audit)\n"                    \
    "      --collection NAME  collection (default: events)\n"

/* Returned by cli_mongo_take() for an option code that is not one of the MongoDB flags. */
#define CLI_MONGO_NOT_MINE (-1)

typedef struct cli_mongo {
    stele_sink_options_t sink; /* sink.uri is NULL when --mongo was not given */
    int has_names;             /* --db, --collection or --sink was given */
} cli_mongo_t;

/* Fills the sink with the engine's defaults (stele_sink_options_init) and no URI. */
void cli_mongo_init(cli_mongo_t *m);

/* Takes option code `c`: 0 when it was a MongoDB flag and is recorded, CLI_EXIT_USAGE after
 * printing why its value is wrong, CLI_MONGO_NOT_MINE for any other code. */
int cli_mongo_take(cli_mongo_t *m, const char *command, int c, const char *arg);

/* After parsing: a usage error when --db/--collection/--sink came without --mongo, or when
 * is_required and --mongo is missing. Returns 0 or CLI_EXIT_USAGE (printed). */
int cli_mongo_check(const cli_mongo_t *m, const char *command, int is_required);

/* Accepts "mongodb://..." and "mongodb+srv://..." with a host; the library checks the rest. */
int cli_uri_looks_valid(const char *uri);

#endif /* STELE_CLI_COMMON_H */
