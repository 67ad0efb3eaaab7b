/*
 * bench_cli.c: stele-bench's flags, and the three kinds of plan they build:
 *  - explicit: the cartesian product of the list flags (--writers 1,8,64 --sync always,never
 *    ...) for each --system, preceded by the 1-writer fsync loop as the reference;
 *  - --quick: the README's short default sweep (well under two minutes);
 *  - --sweep: every axis the benchmark has, arranged as the grids the plots need rather than
 *    their full product (which would take hours): throughput vs writers per mode and per
 *    peer, vs commit interval (adaptive and fixed, SSD and emulated HDD), vs record size.
 * --probe, --table and --plot-from run no plan: they measure a disk, print the tables of a
 * results.csv, or draw its plots.
 */
#include "bench_cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

/* Cell durations when --seconds is not given. */
#define CLI_DEFAULT_SECONDS 5.0
#define CLI_QUICK_SECONDS 3.0
#define CLI_SWEEP_SECONDS 2.0
#define CLI_DEFAULT_RECORD_BYTES 200

static void
cli_usage(FILE *out)
{
    fprintf(out,
            "usage: stele-bench [options]\n"
            "  --quick                 short default sweep (< 2 min) with a readable table\n"
            "  --sweep                 the full sweep (writers x modes x peers x commit interval\n"
            "                          x record size x SSD/emulated HDD); use with --out DIR\n"
            "  --probe DIR             device probe: fsync latency, bandwidth, advice\n"
            "  --table FILE.csv        print the Markdown tables of an --out results.csv\n"
            "  --plot-from FILE.csv    draw the plots of an --out results.csv into --out DIR\n"
            "  --dir DIR               where the run's temporary directory goes (default .)\n"
            "  --writers N[,N..]       writer threads (default 1)\n"
            "  --seconds S             per cell (default 5; quick 3; sweep 2)\n"
            "  --warmup S              append S seconds before measuring (default 0)\n"
            "  --sync always|interval|never[,..]       (default always)\n"
            "  --wait none|written|durable|shipped[,..] (default durable)\n"
            "  --commit-interval-us N[,N..]            (default 0)\n"
            "  --commit-policy adaptive|fixed[,..]     (default adaptive)\n"
            "  --sync-interval-ms N    for sync=interval (default: stele's)\n"
            "  --record-bytes N[,N..]  event size (default 200)\n"
            "  --input json|bson[,..]  event encoding handed to stele (default json)\n"
            "  --system NAME[,..]      stele, stele-signed (with a signing key), fsync-loop,\n"
            "                          libbson-json, thread-wakeup,\n"
            "                          parse-wakeup, a JSON parser (stele-json,\n"
            "                          simdjson-json, yajl-json, jansson-json), or a peer\n"
            "  --device ssd|hdd[,..]   ssd: --dir itself; hdd: the emulated 7200 rpm disk\n"
            "  --repeat N              run the whole plan N times (noise)\n"
            "  --no-reference          do not run the fsync loop first\n"
            "  --json                  one JSON line per cell instead of the table\n"
            "  --out DIR               write results.csv, results.jsonl, CDFs (and plots)\n"
            "  --plot                  render gnuplot PNG+SVG plots into --out\n"
            "  --mongo-uri URI         MongoDB sink for wait=shipped\n"
            "  --keep                  keep the data written (prints where)\n"
            "  --quiet                 no progress on stderr\n"
            "  --list-systems          print the systems and exit\n");
}

/* Splits a comma list; calls parse_one on each item. Returns 0 or -1. */
static int
cli_split(char *arg, size_t *n, int (*parse_one)(const char *item, void *dst, size_t i), void *dst)
{
    *n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == CLI_MAX_LIST || parse_one(tok, dst, *n))
            return -1;
        (*n)++;
    }
    return *n ? 0 : -1;
}

static int
cli_parse_u32(const char *item, void *dst, size_t i)
{
    char *end;
    unsigned long v = strtoul(item, &end, 10);
    if (*item == '\0' || *end != '\0' || v > UINT32_MAX)
        return -1;
    ((uint32_t *)dst)[i] = (uint32_t)v;
    return 0;
}

static int
cli_parse_sync(const char *item, void *dst, size_t i)
{
    stele_sync_t *s = dst;
    for (int v = STELE_SYNC_ALWAYS; v <= STELE_SYNC_NEVER; v++)
        if (strcmp(item, bench_sync_name((stele_sync_t)v)) == 0) {
            s[i] = (stele_sync_t)v;
            return 0;
        }
    return -1;
}

static int
cli_parse_wait(const char *item, void *dst, size_t i)
{
    stele_wait_t *w = dst;
    for (int v = STELE_WAIT_NONE; v <= STELE_WAIT_SHIPPED; v++)
        if (strcmp(item, bench_wait_name((stele_wait_t)v)) == 0) {
            w[i] = (stele_wait_t)v;
            return 0;
        }
    return -1;
}

static int
cli_parse_input(const char *item, void *dst, size_t i)
{
    bench_input_t *in = dst;
    if (strcmp(item, "json") == 0)
        in[i] = BENCH_INPUT_JSON;
    else if (strcmp(item, "bson") == 0)
        in[i] = BENCH_INPUT_BSON;
    else
        return -1;
    return 0;
}

static int
cli_parse_policy(const char *item, void *dst, size_t i)
{
    stele_commit_policy_t *p = dst;
    if (strcmp(item, "adaptive") == 0)
        p[i] = STELE_COMMIT_ADAPTIVE;
    else if (strcmp(item, "fixed") == 0)
        p[i] = STELE_COMMIT_FIXED;
    else
        return -1;
    return 0;
}

static int
cli_parse_string(const char *item, void *dst, size_t i)
{
    ((const char **)dst)[i] = item;
    return 0;
}

static int
cli_parse_device(const char *item, void *dst, size_t i)
{
    if (strcmp(item, "ssd") == 0)
        ((const char **)dst)[i] = "ssd";
    else if (strcmp(item, "hdd") == 0 || strcmp(item, "hdd-emulated") == 0)
        ((const char **)dst)[i] = "hdd-emulated";
    else
        return -1;
    return 0;
}

static void
cli_defaults(bench_cli_t *cli)
{
    memset(cli, 0, sizeof *cli);
    cli->dir = ".";
    cli->seconds = CLI_DEFAULT_SECONDS;
    cli->writers[0] = 1;
    cli->n_writers = 1;
    cli->commit_interval_us[0] = 0;
    cli->n_commit_interval = 1;
    cli->record_bytes[0] = CLI_DEFAULT_RECORD_BYTES;
    cli->n_record_bytes = 1;
    cli->sync[0] = STELE_SYNC_ALWAYS;
    cli->n_sync = 1;
    cli->wait[0] = STELE_WAIT_DURABLE;
    cli->n_wait = 1;
    cli->input[0] = BENCH_INPUT_JSON;
    cli->n_input = 1;
    cli->policy[0] = STELE_COMMIT_ADAPTIVE;
    cli->n_policy = 1;
    cli->systems[0] = "stele";
    cli->n_systems = 1;
    cli->devices[0] = "ssd";
    cli->n_devices = 1;
    cli->repeat = 1;
    bench_hdd_model_default(&cli->hdd_model);
}

enum {
    OPT_WRITERS = 256,
    OPT_SECONDS,
    OPT_SYNC,
    OPT_WAIT,
    OPT_CI,
    OPT_POLICY,
    OPT_SYNC_INTERVAL,
    OPT_BYTES,
    OPT_INPUT,
    OPT_SYSTEM,
    OPT_DEVICE,
    OPT_REPEAT,
    OPT_NO_REF,
    OPT_OUT,
    OPT_PLOT,
    OPT_MONGO,
    OPT_KEEP,
    OPT_QUIET,
    OPT_LIST,
    OPT_PROBE,
    OPT_DIR,
    OPT_QUICK,
    OPT_SWEEP,
    OPT_JSON,
    OPT_HELP,
    OPT_WARMUP,
    OPT_TABLE,
    OPT_PLOT_FROM,
};

static const struct option cli_options[] = {
    {"writers", required_argument, NULL, OPT_WRITERS},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"sync", required_argument, NULL, OPT_SYNC},
    {"wait", required_argument, NULL, OPT_WAIT},
    {"commit-interval-us", required_argument, NULL, OPT_CI},
    {"commit-policy", required_argument, NULL, OPT_POLICY},
    {"sync-interval-ms", required_argument, NULL, OPT_SYNC_INTERVAL},
    {"record-bytes", required_argument, NULL, OPT_BYTES},
    {"input", required_argument, NULL, OPT_INPUT},
    {"system", required_argument, NULL, OPT_SYSTEM},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"no-reference", no_argument, NULL, OPT_NO_REF},
    {"out", required_argument, NULL, OPT_OUT},
    {"plot", no_argument, NULL, OPT_PLOT},
    {"mongo-uri", required_argument, NULL, OPT_MONGO},
    {"keep", no_argument, NULL, OPT_KEEP},
    {"quiet", no_argument, NULL, OPT_QUIET},
    {"list-systems", no_argument, NULL, OPT_LIST},
    {"probe", required_argument, NULL, OPT_PROBE},
    {"dir", required_argument, NULL, OPT_DIR},
    {"quick", no_argument, NULL, OPT_QUICK},
    {"sweep", no_argument, NULL, OPT_SWEEP},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, OPT_HELP},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"table", required_argument, NULL, OPT_TABLE},
    {"plot-from", required_argument, NULL, OPT_PLOT_FROM},
    {NULL, 0, NULL, 0},
};

static void
cli_list_systems(void)
{
    printf("stele\nstele-signed\nfsync-loop\nlibbson-json\nthread-wakeup\nparse-wakeup\n");
    printf("stele-json\nsimdjson-json\nyajl-json\njansson-json\n");
    for (const char *const *p = bench_peer_names(); *p; p++)
        printf("%s\n", *p);
}

/* Handles one option with an argument list; returns 0 or -1 for a bad value. */
static int
cli_parse_list_option(bench_cli_t *cli, int opt, char *arg)
{
    switch (opt) {
    case OPT_WRITERS:
        return cli_split(arg, &cli->n_writers, cli_parse_u32, cli->writers);
    case OPT_SYNC:
        return cli_split(arg, &cli->n_sync, cli_parse_sync, cli->sync);
    case OPT_WAIT:
        return cli_split(arg, &cli->n_wait, cli_parse_wait, cli->wait);
    case OPT_CI:
        return cli_split(arg, &cli->n_commit_interval, cli_parse_u32, cli->commit_interval_us);
    case OPT_POLICY:
        return cli_split(arg, &cli->n_policy, cli_parse_policy, cli->policy);
    case OPT_BYTES:
        return cli_split(arg, &cli->n_record_bytes, cli_parse_u32, cli->record_bytes);
    case OPT_INPUT:
        return cli_split(arg, &cli->n_input, cli_parse_input, cli->input);
    case OPT_SYSTEM:
        return cli_split(arg, &cli->n_systems, cli_parse_string, cli->systems);
    case OPT_DEVICE:
        return cli_split(arg, &cli->n_devices, cli_parse_device, cli->devices);
    default:
        return 1; /* not a list option */
    }
}

/* A duration in seconds within [min_s, max_s] (min_s itself only when min_is_allowed).
 * Written so that NaN, which fails every comparison, fails the range too. */
static int
cli_parse_seconds(const char *arg, double *out, double min_s, int min_is_allowed, double max_s)
{
    char *end = NULL;
    double v = strtod(arg, &end);
    int is_in_range = (min_is_allowed ? v >= min_s : v > min_s) && v <= max_s;
    if (end == arg || *end || !is_in_range)
        return -1;
    *out = v;
    return 0;
}

static int
cli_parse_scalar_option(bench_cli_t *cli, int opt, char *arg)
{
    switch (opt) {
    case OPT_SECONDS:
        cli->seconds_given = 1;
        return cli_parse_seconds(arg, &cli->seconds, 0, 0, 86400);
    case OPT_WARMUP:
        return cli_parse_seconds(arg, &cli->warmup_seconds, 0, 1, 3600);
    case OPT_SYNC_INTERVAL:
        return cli_parse_u32(arg, &cli->sync_interval_ms, 0);
    case OPT_REPEAT:
        return (cli_parse_u32(arg, &cli->repeat, 0) || cli->repeat == 0) ? -1 : 0;
    case OPT_OUT:
        cli->out_dir = arg;
        return 0;
    case OPT_MONGO:
        cli->mongo_uri = arg;
        return 0;
    case OPT_PROBE:
        cli->probe_dir = arg;
        return 0;
    case OPT_TABLE:
        cli->table_csv = arg;
        return 0;
    case OPT_PLOT_FROM:
        cli->plot_from_csv = arg;
        return 0;
    case OPT_DIR:
        cli->dir = arg;
        return 0;
    default:
        return 1;
    }
}

static int
cli_parse_flag(bench_cli_t *cli, int opt)
{
    int *flags[] = {[OPT_NO_REF - OPT_WRITERS] = &cli->no_reference,
                    [OPT_PLOT - OPT_WRITERS] = &cli->plot,
                    [OPT_KEEP - OPT_WRITERS] = &cli->keep,
                    [OPT_QUIET - OPT_WRITERS] = &cli->quiet,
                    [OPT_QUICK - OPT_WRITERS] = &cli->quick,
                    [OPT_SWEEP - OPT_WRITERS] = &cli->sweep,
                    [OPT_JSON - OPT_WRITERS] = &cli->json};
    size_t idx = (size_t)(opt - OPT_WRITERS);
    if (opt < OPT_WRITERS || idx >= sizeof flags / sizeof flags[0] || !flags[idx])
        return 1;
    *flags[idx] = 1;
    return 0;
}

static int
cli_check(const bench_cli_t *cli)
{
    for (size_t i = 0; i < cli->n_writers; i++)
        if (cli->writers[i] == 0 || cli->writers[i] > 4096) {
            fprintf(stderr, "stele-bench: --writers must be 1..4096\n");
            return 1;
        }
    for (size_t i = 0; i < cli->n_record_bytes; i++)
        if (cli->record_bytes[i] < bench_events_min_bytes() ||
            cli->record_bytes[i] > bench_events_max_bytes()) {
            fprintf(stderr, "stele-bench: --record-bytes must be %u to %u\n",
                    bench_events_min_bytes(), bench_events_max_bytes());
            return 1;
        }
    if ((cli->plot || cli->plot_from_csv) && !cli->out_dir) {
        fprintf(stderr, "stele-bench: --plot and --plot-from need --out DIR\n");
        return 1;
    }
    return 0;
}

int
bench_cli_parse(bench_cli_t *cli, int argc, char **argv)
{
    cli_defaults(cli);
    int opt;
    while ((opt = getopt_long(argc, argv, "h", cli_options, NULL)) != -1) {
        if (opt == OPT_HELP || opt == 'h') {
            cli_usage(stdout);
            return -1;
        }
        if (opt == OPT_LIST) {
            cli_list_systems();
            return -1;
        }
        int rc = cli_parse_list_option(cli, opt, optarg);
        if (rc == 1)
            rc = cli_parse_scalar_option(cli, opt, optarg);
        if (rc == 1)
            rc = cli_parse_flag(cli, opt);
        if (rc) {
            if (opt != '?')
                fprintf(stderr, "stele-bench: bad value for --%s: %s\n",
                        cli_options[opt - OPT_WRITERS].name, optarg ? optarg : "");
            cli_usage(stderr);
            return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "stele-bench: unexpected argument: %s\n", argv[optind]);
        return 1;
    }
    if (!cli->seconds_given)
        cli->seconds = cli->sweep   ? CLI_SWEEP_SECONDS
                       : cli->quick ? CLI_QUICK_SECONDS
                                    : CLI_DEFAULT_SECONDS;
    return cli_check(cli);
}

/* A cell with the flags' scalar settings and the first value of every list. */
static bench_cell_t
cli_base_cell(const bench_cli_t *cli)
{
    bench_cell_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.system, sizeof c.system, "stele");
    snprintf(c.device, sizeof c.device, "ssd");
    c.writers = (int)cli->writers[0];
    c.seconds = cli->seconds;
    c.warmup_seconds = cli->warmup_seconds;
    c.sync = cli->sync[0];
    c.wait = cli->wait[0];
    c.policy = cli->policy[0];
    c.commit_interval_us = cli->commit_interval_us[0];
    c.sync_interval_ms = cli->sync_interval_ms;
    c.record_bytes = cli->record_bytes[0];
    c.input = cli->input[0];
    c.mongo_uri = cli->mongo_uri;
    c.keep_data = cli->keep;
    return c;
}

static int
cli_add(bench_plan_t *plan, bench_cell_t c, const char *system, const char *device, int writers)
{
    snprintf(c.system, sizeof c.system, "%s", system);
    snprintf(c.device, sizeof c.device, "%s", device);
    c.writers = writers;
    return bench_plan_add(plan, &c);
}

static int
cli_plan_quick(const bench_cli_t *cli, bench_plan_t *plan)
{
    bench_cell_t c = cli_base_cell(cli);
    c.sync = STELE_SYNC_ALWAYS;
    c.wait = STELE_WAIT_DURABLE;
    c.commit_interval_us = 0;
    c.policy = STELE_COMMIT_ADAPTIVE;
    int rc = cli_add(plan, c, "fsync-loop", "ssd", 1);
    static const int quick_writers[] = {1, 8, 64};
    for (size_t i = 0; i < 3 && !rc; i++)
        rc = cli_add(plan, c, "stele", "ssd", quick_writers[i]);
    rc = rc ? rc : cli_add(plan, c, "thread-wakeup", "ssd", 64);
    rc = rc ? rc : cli_add(plan, c, "parse-wakeup", "ssd", 64);
    bench_cell_t lone = c;
    lone.commit_interval_us = 100000; /* a lone writer must not pay it */
    rc = rc ? rc : cli_add(plan, lone, "stele", "ssd", 1);
    lone.policy = STELE_COMMIT_FIXED; /* what MongoDB 2.4's journal made it pay */
    rc = rc ? rc : cli_add(plan, lone, "stele", "ssd", 1);
    bench_cell_t fast = c;
    fast.wait = STELE_WAIT_NONE;
    fast.input = BENCH_INPUT_JSON;
    rc = rc ? rc : cli_add(plan, fast, "libbson-json", "ssd", 1);
    rc = rc ? rc : cli_add(plan, fast, "stele", "ssd", 1);
    fast.input = BENCH_INPUT_BSON;
    rc = rc ? rc : cli_add(plan, fast, "stele", "ssd", 1);
    return rc;
}

/* The explicit plan: the fsync-loop reference, then the product of the lists. */
static int
cli_plan_product(const bench_cli_t *cli, bench_plan_t *plan, const char *device)
{
    bench_cell_t c = cli_base_cell(cli);
    int rc = 0;
    for (size_t b = 0; b < cli->n_record_bytes && !cli->no_reference && !rc; b++) {
        c.record_bytes = cli->record_bytes[b];
        rc = cli_add(plan, c, "fsync-loop", device, 1);
    }
    for (size_t s = 0; s < cli->n_systems && !rc; s++) {
        int is_stele = bench_system_is_stele(cli->systems[s]);
        for (size_t b = 0; b < cli->n_record_bytes && !rc; b++)
            for (size_t w = 0; w < cli->n_writers && !rc; w++)
                for (size_t sy = 0; sy < (is_stele ? cli->n_sync : 1) && !rc; sy++)
                    for (size_t wa = 0; wa < (is_stele ? cli->n_wait : 1) && !rc; wa++)
                        for (size_t ci = 0; ci < (is_stele ? cli->n_commit_interval : 1) && !rc;
                             ci++)
                            for (size_t po = 0; po < (is_stele ? cli->n_policy : 1) && !rc; po++)
                                for (size_t in = 0; in < (is_stele ? cli->n_input : 1) && !rc;
                                     in++) {
                                    if (!cli->no_reference && !is_stele &&
                                        strcmp(cli->systems[s], "fsync-loop") == 0 &&
                                        cli->writers[w] == 1)
                                        continue; /* the reference already ran it */
                                    c.record_bytes = cli->record_bytes[b];
                                    c.sync = cli->sync[sy];
                                    c.wait = cli->wait[wa];
                                    c.commit_interval_us = cli->commit_interval_us[ci];
                                    c.policy = cli->policy[po];
                                    c.input = cli->input[in];
                                    rc = cli_add(plan, c, cli->systems[s], device,
                                                 (int)cli->writers[w]);
                                }
    }
    return rc;
}

int
bench_cli_build_plan(const bench_cli_t *cli, bench_plan_t *plan)
{
    int rc = 0;
    for (uint32_t rep = 0; rep < cli->repeat && !rc; rep++) {
        if (cli->quick)
            rc = cli_plan_quick(cli, plan);
        else if (cli->sweep)
            rc = bench_sweep_plan(cli, plan);
        else
            for (size_t d = 0; d < cli->n_devices && !rc; d++)
                rc = cli_plan_product(cli, plan, cli->devices[d]);
    }
    return rc;
}
