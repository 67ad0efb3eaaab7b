/*
 * args.h: the command line every `stele` subcommand shares: the common flags (-d/--dir,
 * --config, --help), one flag per knob (generated from stele_knobs()), the help text, and
 * building the stele_options_t in the documented order (config file, then STELE_*
 * environment, then flags). Internal to cli/.
 */
#ifndef STELE_CLI_ARGS_H
#define STELE_CLI_ARGS_H

#include <getopt.h>
#include <stdint.h>

#include <stele.h>

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
 * Fills *opts: defaults, then the config file, then STELE_* environment variables, then the
 * knob flags (so flags win). On failure prints the error and returns CLI_EXIT_USAGE, also for
 * a missing or unreadable config file: the fix is in what the user gave;
 * release *opts with stele_options_release() either way. Commands that only read (tail,
 * status, verify) build them too, so a bad knob is the same usage error for every command,
 * and pass them to the read calls (allow_unsafe_dir).
 */
int cli_options_build(const cli_args_t *a, stele_options_t *opts);

/* Parses a decimal uint64 with nothing after it. Returns 0 or -1. */
int cli_parse_u64(const char *text, uint64_t *out);

/* Parses the seq `arg` of `flag` ("--from", "--to") into *seq. Returns 0, or CLI_EXIT_USAGE
 * after printing "stele COMMAND: FLAG 'ARG' is not a seq (1 or more)". */
int cli_parse_seq_flag(const char *command, const char *flag, const char *arg, uint64_t *seq);

/* Checks that a --from/--to range (0: an open end) is not backwards. Returns 0, or
 * CLI_EXIT_USAGE after printing the error. */
int cli_check_seq_range(const char *command, uint64_t from_seq, uint64_t to_seq);

#endif /* STELE_CLI_ARGS_H */
