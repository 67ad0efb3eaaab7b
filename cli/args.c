/*
 * args.c: the flags every subcommand shares (see args.h).
 *
 * Knob flags are not written down here: they are generated at run time from stele_knobs(),
 * the library's one knob table, by turning "commit_interval_us" into --commit-interval-us.
 * A knob flag is only recorded while parsing; cli_options_build() applies them last, after
 * the config file and the environment, so a flag always wins. Owns getopt's global cursor
 * (optind, opterr) for the length of one parse; no state outlives a call but what
 * cli_args_t holds. Time values and the MongoDB flags have their own files (timearg.c,
 * mongo_args.c).
 */
#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

enum {
    OPT_DIR = CLI_OPT_COMMON_BASE,
    OPT_CONFIG,
    OPT_HELP,
    OPT_KNOB_BASE = CLI_OPT_COMMON_BASE + 100, /* + index in stele_knobs() */
};

static const struct option common_opts[] = {
    {"dir", required_argument, NULL, OPT_DIR},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"help", no_argument, NULL, OPT_HELP},
};
#define N_COMMON_OPTS (sizeof common_opts / sizeof common_opts[0])

static char *
knob_flag_name(const char *knob_name)
{
    char *flag = strdup(knob_name);
    if (flag == NULL)
        return NULL;
    for (char *p = flag; *p; p++) {
        if (*p == '_')
            *p = '-';
    }
    return flag;
}

int
cli_args_begin(cli_args_t *a, const char *command, const char *usage, const struct option *cmd_opts,
               const char *cmd_shortopts)
{
    memset(a, 0, sizeof *a);
    a->command = command;
    a->usage = usage;
    const char *env_dir = getenv("STELE_DIR");
    a->dir = (env_dir != NULL && env_dir[0] != '\0') ? env_dir : CLI_DEFAULT_DIR;
    const char *env_config = getenv("STELE_CONFIG");
    a->config_path = (env_config != NULL && env_config[0] != '\0') ? env_config : NULL;

    size_t n_cmd = 0;
    while (cmd_opts != NULL && cmd_opts[n_cmd].name != NULL)
        n_cmd++;
    const stele_knob_t *knobs = stele_knobs(&a->n_knobs);
    a->longopts = calloc(n_cmd + N_COMMON_OPTS + a->n_knobs + 1, sizeof *a->longopts);
    a->knob_flag_names = calloc(a->n_knobs + 1, sizeof *a->knob_flag_names);
    if (a->longopts == NULL || a->knob_flag_names == NULL)
        goto fail;
    size_t n = 0;
    for (size_t i = 0; i < n_cmd; i++)
        a->longopts[n++] = cmd_opts[i];
    for (size_t i = 0; i < N_COMMON_OPTS; i++)
        a->longopts[n++] = common_opts[i];
    for (size_t i = 0; i < a->n_knobs; i++) {
        a->knob_flag_names[i] = knob_flag_name(knobs[i].name);
        if (a->knob_flag_names[i] == NULL)
            goto fail;
        a->longopts[n++] =
            (struct option){a->knob_flag_names[i], required_argument, NULL, OPT_KNOB_BASE + (int)i};
    }
    /* ':' first: a missing argument is reported as ':' rather than '?'. "+" is not used so
     * that flags may follow JSON operands, as with most GNU tools. */
    snprintf(a->shortopts, sizeof a->shortopts, ":d:h%s", cmd_shortopts ? cmd_shortopts : "");
    optind = 1;
    opterr = 0;
    return 0;
fail:
    cli_args_end(a);
    return -ENOMEM;
}

void
cli_args_end(cli_args_t *a)
{
    if (a->knob_flag_names != NULL) {
        for (size_t i = 0; i < a->n_knobs; i++)
            free(a->knob_flag_names[i]);
    }
    free(a->knob_flag_names);
    free(a->longopts);
    a->knob_flag_names = NULL;
    a->longopts = NULL;
}

/* Whether `given` is "--NAME=VALUE" for a flag (or an abbreviation of one) that takes no
 * value and has option code `val`: what getopt_long's '?' with optopt == val means then. */
static int
is_value_for_flag_without_one(const cli_args_t *a, const char *given, int val)
{
    const char *eq = strchr(given, '=');
    if (strncmp(given, "--", 2) != 0 || eq == NULL)
        return 0;
    size_t name_len = (size_t)(eq - (given + 2));
    for (const struct option *o = a->longopts; o->name != NULL; o++) {
        if (o->has_arg == no_argument && o->val == val &&
            strncmp(o->name, given + 2, name_len) == 0)
            return 1;
    }
    return 0;
}

/*
 * getopt's '?' (unknown, or a value given to a flag that takes none) and ':' (no value).
 * `given` is argv[optind - 1], the element getopt finished with, which is not the culprit
 * when an unknown short option sits inside a group ("-zq": optind stays on it), so that
 * case is told apart by optopt: getopt_long sets it to 0 for an unknown long option and to
 * the flag's code for a value given to a long flag that takes none.
 */
static void
report_option_error(const cli_args_t *a, int c, const char *given)
{
    if (c == ':')
        cli_usage_error(a->command, "option '%s' needs a value", given);
    else if (optopt == 0)
        cli_usage_error(a->command, "unknown option '%s'", given);
    else if (is_value_for_flag_without_one(a, given, optopt))
        cli_usage_error(a->command, "option '%s' takes no value", given);
    else
        cli_usage_error(a->command, "unknown option '-%c'", optopt);
}

int
cli_args_next(cli_args_t *a, int argc, char **argv, const char **optarg_out, int *optind_out)
{
    for (;;) {
        int c = getopt_long(argc, argv, a->shortopts, a->longopts, NULL);
        *optind_out = optind;
        *optarg_out = optarg;
        if (c == -1)
            return -1;
        if (c == '?' || c == ':') {
            report_option_error(a, c, argv[optind - 1]);
            return CLI_OPT_ERROR;
        }
        if (c == 'd' || c == OPT_DIR) {
            if (optarg[0] == '\0') {
                cli_usage_error(a->command, "--dir needs a directory");
                return CLI_OPT_ERROR;
            }
            a->dir = optarg;
        } else if (c == OPT_CONFIG) {
            a->config_path = optarg;
        } else if (c == 'h' || c == OPT_HELP) {
            a->want_help = 1;
        } else if (c >= OPT_KNOB_BASE) {
            size_t n_knobs;
            const stele_knob_t *knobs = stele_knobs(&n_knobs);
            if (a->n_knob_flags == CLI_MAX_KNOB_FLAGS) {
                cli_usage_error(a->command, "too many knob flags");
                return CLI_OPT_ERROR;
            }
            a->knob_names[a->n_knob_flags] = knobs[c - OPT_KNOB_BASE].name;
            a->knob_values[a->n_knob_flags] = optarg;
            a->n_knob_flags++;
        } else {
            return c;
        }
    }
}

int
cli_print_help(const cli_args_t *a)
{
    FILE *out = stdout;
    fputs(a->usage, out);
    fputs("\nCommon options:\n"
          "  -d, --dir DIR          journal directory (default: $STELE_DIR, else " CLI_DEFAULT_DIR
          ")\n"
          "      --config FILE      INI file of knobs and [sink NAME] sections\n"
          "                         (default: $STELE_CONFIG); flags win over STELE_<KNOB>\n"
          "                         environment variables, which win over the file\n"
          "  -h, --help             show this help\n"
          "\nKnobs (also STELE_<KNOB> in the environment and KNOB = VALUE in the file):\n",
          out);
    size_t n_knobs;
    const stele_knob_t *knobs = stele_knobs(&n_knobs);
    for (size_t i = 0; i < n_knobs && i < a->n_knobs; i++) {
        fprintf(out, "      --%s %s\n          %s", a->knob_flag_names[i], knobs[i].value_text,
                knobs[i].help);
        if (knobs[i].default_text[0] != '\0')
            fprintf(out, " (default: %s)", knobs[i].default_text);
        fputc('\n', out);
    }
    fputs("\nExit status: 0 ok, 1 usage error, 2 invalid input or failed check, 3 I/O or "
          "engine error.\n",
          out);
    return cli_stdout_done(a->command);
}

int
cli_options_build(const cli_args_t *a, stele_options_t *opts)
{
    stele_error_t err = {0};
    stele_options_init(opts);
    int rc = 0;
    if (a->config_path != NULL)
        rc = stele_options_load_file(opts, a->config_path, &err);
    if (rc == 0)
        rc = stele_options_load_env(opts, &err);
    for (size_t i = 0; rc == 0 && i < a->n_knob_flags; i++)
        rc = stele_options_set(opts, a->knob_names[i], a->knob_values[i], &err);
    if (rc != 0) {
        /* whatever the cause (a bad value, a missing or unreadable file), the fix is in what
         * the user gave us: a usage error */
        cli_report(a->command, rc, &err);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

int
cli_parse_u64(const char *text, uint64_t *out)
{
    if (text == NULL || text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = v;
    return 0;
}
