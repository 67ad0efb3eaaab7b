/*
 * bench_cli.h: stele-bench's flags and the plans they build (bench_cli.c).
 */
#ifndef STELE_BENCH_CLI_H
#define STELE_BENCH_CLI_H

#include "bench.h"

#define CLI_MAX_LIST 16

typedef struct bench_cli {
    const char *dir; /* parent of the run directory */
    double seconds;
    int seconds_given;
    double warmup_seconds;
    uint32_t writers[CLI_MAX_LIST];
    size_t n_writers;
    uint32_t commit_interval_us[CLI_MAX_LIST];
    size_t n_commit_interval;
    uint32_t record_bytes[CLI_MAX_LIST];
    size_t n_record_bytes;
    stele_sync_t sync[CLI_MAX_LIST];
    size_t n_sync;
    stele_wait_t wait[CLI_MAX_LIST];
    size_t n_wait;
    bench_input_t input[CLI_MAX_LIST];
    size_t n_input;
    stele_commit_policy_t policy[CLI_MAX_LIST];
    size_t n_policy;
    const char *systems[CLI_MAX_LIST];
    size_t n_systems;
    const char *devices[CLI_MAX_LIST];
    size_t n_devices;
    uint32_t sync_interval_ms;
    uint32_t repeat;
    int json, quick, sweep, keep, no_reference, quiet, plot;
    const char *out_dir;
    const char *probe_dir;
    const char *table_csv; /* --table: print the doc's tables of this results.csv, run nothing */
    const char *plot_from_csv; /* --plot-from: plot this results.csv into --out, run nothing */
    const char *mongo_uri;
    bench_hdd_model_t hdd_model;
} bench_cli_t;

/* Parses argv. Returns 0, 1 after printing a usage error, -1 after printing --help. */
int bench_cli_parse(bench_cli_t *cli, int argc, char **argv);

/* Fills plan from the flags: --quick, --sweep, or the cartesian product of the lists. */
int bench_cli_build_plan(const bench_cli_t *cli, bench_plan_t *plan);

/* The --sweep plan (bench_sweep.c). */
int bench_sweep_plan(const bench_cli_t *cli, bench_plan_t *plan);

#endif /* STELE_BENCH_CLI_H */
