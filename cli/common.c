/*
 * common.c: the flags every subcommand shares and the helpers they need (see common.h).
 *
 * Knob flags are not written down here: they are generated at run time from stele_knobs(),
 * the library's one knob table, by turning "commit_interval_us" into --commit-interval-us.
 * A knob flag is only recorded while parsing; cli_options_build() applies them last, after
 * the config file and the environment, so a flag always wins. No state outlives a call but
 * what cli_args_t holds.
 */
#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
        fprintf(out, "      --%s %s\n          %s (default: %s)\n", a->knob_flag_names[i], "VALUE",
                knobs[i].help, knobs[i].default_text);
    }
    fputs("\nExit status: 0 ok, 1 usage error, 2 invalid input or failed check, 3 I/O or "
          "engine error.\n",
          out);
    return cli_stdout_done(a->command);
}

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
cli_options_check(const cli_args_t *a)
{
    stele_options_t opts;
    int code = cli_options_build(a, &opts);
    stele_options_release(&opts);
    return code;
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
    default:
        return CLI_EXIT_ENGINE;
    }
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

#define NS_PER_SEC INT64_C(1000000000)

/*
 * Times are int64 nanoseconds since the epoch, which hold the years 1677 to 2262. A time
 * given outside them ("9999-12-31T23:59:59Z" meaning for ever, "--since 1000000d") is
 * saturated to the nearest end: it still sorts before or after every record's time, which
 * is all --since and --until ask of it, where the unchecked product wrapped around to an
 * arbitrary date (and was undefined behaviour).
 */
static int64_t
ns_from_seconds(int64_t seconds, int64_t frac_ns)
{
    if (seconds > (INT64_MAX - frac_ns) / NS_PER_SEC)
        return INT64_MAX;
    if (seconds < INT64_MIN / NS_PER_SEC)
        return INT64_MIN;
    return seconds * NS_PER_SEC + frac_ns;
}

static int64_t
ns_add_saturating(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

static int
parse_relative(const char *text, int64_t now_ns, int64_t *ts_ns_out)
{
    uint64_t amount;
    char unit[3] = {0};
    size_t digits = strspn(text, "0123456789");
    if (digits == 0 || digits > 12 || strlen(text + digits) > 2)
        return -1;
    memcpy(unit, text + digits, strlen(text + digits));
    char number[16] = {0};
    memcpy(number, text, digits);
    if (cli_parse_u64(number, &amount) != 0)
        return -1;
    int64_t unit_s;
    if (strcmp(unit, "s") == 0)
        unit_s = 1;
    else if (strcmp(unit, "m") == 0)
        unit_s = 60;
    else if (strcmp(unit, "h") == 0)
        unit_s = 3600;
    else if (strcmp(unit, "d") == 0)
        unit_s = 86400;
    else if (strcmp(unit, "w") == 0)
        unit_s = 7 * 86400;
    else
        return -1;
    /* at most 12 digits of weeks: the seconds fit an int64, their nanoseconds may not */
    *ts_ns_out = ns_add_saturating(now_ns, ns_from_seconds(-(int64_t)amount * unit_s, 0));
    return 0;
}

/* Reads exactly `n` digits at *p into *out, advancing *p. */
static int
take_digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

static int
take_char(const char **p, const char *allowed)
{
    if (**p == '\0' || strchr(allowed, **p) == NULL)
        return -1;
    (*p)++;
    return 0;
}

/* "2026-11-30T20:44:50" (a 't' or a space may replace the T) into *tm; advances *p. */
static int
take_date_time(const char **p, struct tm *tm)
{
    int year, mon, mday, hour, min, sec;
    if (take_digits(p, 4, &year) || take_char(p, "-") || take_digits(p, 2, &mon) ||
        take_char(p, "-") || take_digits(p, 2, &mday) || take_char(p, "Tt ") ||
        take_digits(p, 2, &hour) || take_char(p, ":") || take_digits(p, 2, &min) ||
        take_char(p, ":") || take_digits(p, 2, &sec))
        return -1;
    if (mon < 1 || mon > 12 || mday < 1 || mday > 31 || hour > 23 || min > 59 || sec > 60)
        return -1;
    tm->tm_year = year - 1900;
    tm->tm_mon = mon - 1;
    tm->tm_mday = mday;
    tm->tm_hour = hour;
    tm->tm_min = min;
    tm->tm_sec = sec;
    return 0;
}

/* An optional ".123456" into nanoseconds (digits beyond the ninth are ignored). */
static int
take_fraction(const char **p, int64_t *frac_ns)
{
    *frac_ns = 0;
    if (**p != '.')
        return 0;
    (*p)++;
    int n_digits = 0;
    int64_t scale = NS_PER_SEC / 10;
    while (**p >= '0' && **p <= '9') {
        *frac_ns += (**p - '0') * scale;
        scale /= 10;
        (*p)++;
        n_digits++;
    }
    return n_digits == 0 ? -1 : 0;
}

/* "Z" (or "z"), "+02:00" or "-05:30" into seconds east of UTC. */
static int
take_utc_offset(const char **p, int *offset_s)
{
    *offset_s = 0;
    if (**p == 'Z' || **p == 'z') {
        (*p)++;
        return 0;
    }
    if (**p != '+' && **p != '-')
        return -1;
    int sign = (**p == '-') ? -1 : 1;
    int off_h, off_m;
    (*p)++;
    if (take_digits(p, 2, &off_h) || take_char(p, ":") || take_digits(p, 2, &off_m) || off_h > 23 ||
        off_m > 59)
        return -1;
    *offset_s = sign * (off_h * 3600 + off_m * 60);
    return 0;
}

static int
parse_rfc3339(const char *text, int64_t *ts_ns_out)
{
    const char *p = text;
    struct tm tm = {0};
    int64_t frac_ns;
    int offset_s;
    if (take_date_time(&p, &tm) || take_fraction(&p, &frac_ns) || take_utc_offset(&p, &offset_s) ||
        *p != '\0')
        return -1;
    /* A leap second, 23:59:60, is the instant after :59 (Unix time has none); it must not
     * roll the date over before the check below. */
    int leap = tm.tm_sec == 60;
    tm.tm_sec -= leap;
    int mday = tm.tm_mday, mon = tm.tm_mon;
    time_t t = timegm(&tm);
    /* timegm normalises 2026-02-31 into March: reject dates that do not exist */
    struct tm check;
    if (gmtime_r(&t, &check) == NULL || check.tm_mday != mday || check.tm_mon != mon)
        return -1;
    *ts_ns_out = ns_from_seconds((int64_t)t + leap - offset_s, frac_ns);
    return 0;
}

int
cli_parse_time(const char *text, int64_t now_ns, int64_t *ts_ns_out)
{
    if (text == NULL || text[0] == '\0')
        return -1;
    if (parse_relative(text, now_ns, ts_ns_out) == 0)
        return 0;
    return parse_rfc3339(text, ts_ns_out);
}

void
cli_format_time(int64_t ts_ns, char *buf, size_t cap)
{
    int64_t sec = ts_ns / NS_PER_SEC;
    int64_t rem_ns = ts_ns % NS_PER_SEC;
    if (rem_ns < 0) {
        rem_ns += NS_PER_SEC;
        sec--;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    char date[32] = "?";
    if (gmtime_r(&t, &tm) != NULL)
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%06dZ", date, (int)(rem_ns / 1000));
}

int64_t
cli_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

int
cli_uri_looks_valid(const char *uri)
{
    static const char *const schemes[] = {"mongodb://", "mongodb+srv://"};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i]);
        if (strncmp(uri, schemes[i], n) == 0) {
            const char *host = uri + n;
            return host[0] != '\0' && host[0] != '/' && host[0] != '?';
        }
    }
    return 0;
}

void
cli_mongo_init(cli_mongo_t *m)
{
    memset(m, 0, sizeof *m);
    stele_sink_options_init(&m->sink);
}

int
cli_mongo_take(cli_mongo_t *m, const char *command, int c, const char *arg)
{
    switch (c) {
    case CLI_OPT_MONGO:
        if (!cli_uri_looks_valid(arg))
            /* not echoed: it may hold a password */
            return cli_usage_error(command, "--mongo value is not a mongodb:// URI "
                                            "(mongodb://[user:pass@]host[:port]/[db])");
        m->sink.uri = arg;
        return 0;
    case CLI_OPT_DB:
        m->sink.database = arg;
        break;
    case CLI_OPT_COLLECTION:
        m->sink.collection = arg;
        break;
    case CLI_OPT_SINK:
        m->sink.name = arg;
        break;
    default:
        return CLI_MONGO_NOT_MINE;
    }
    if (arg[0] == '\0')
        return cli_usage_error(command, "%s needs a name",
                               c == CLI_OPT_DB           ? "--db"
                               : c == CLI_OPT_COLLECTION ? "--collection"
                                                         : "--sink");
    m->has_names = 1;
    return 0;
}

int
cli_mongo_check(const cli_mongo_t *m, const char *command, int is_required)
{
    if (m->sink.uri == NULL && is_required)
        return cli_usage_error(command, "--mongo URI is required");
    if (m->sink.uri == NULL && m->has_names)
        return cli_usage_error(command, "--db, --collection and --sink need --mongo URI");
    return 0;
}
