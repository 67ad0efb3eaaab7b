/*
 * bench_sweep.c: the --sweep plan and the summary printed after multi-cell runs.
 *
 * The sweep covers the benchmark's axes -- writers (1, 8, 64, 512), commit_interval_us (0,
 * 500, 2000, 10000, 100000), sync (always, interval, never), wait (written, durable,
 * shipped), record size (200 B, 1 KiB, 16 KiB), device (SSD, emulated HDD) -- as grids, one
 * per question, instead of the full product (1,080 cells, hours):
 *  - throughput vs writers, per stele mode and per peer (SSD);
 *  - throughput vs commit interval, adaptive vs fixed policy, 1 and 64 writers (SSD, HDD);
 *  - throughput vs record size, 1 and 64 writers (SSD);
 *  - throughput vs writers on the emulated HDD, stele and the durable peers.
 * Each device's grids start with the 1-writer fsync loop, the reference for the ratios.
 * Below SWEEP_CPU_BOUND_WRITERS writers every durable system waits mostly for the disk's
 * flushes, so on a real disk the order of two systems there is decided by how the flush
 * latency drifts between their cells: those cells (the loop, stele durable, the peers) run
 * SWEEP_ROUNDS times, interleaved, and the summary compares medians. The emulated HDD's
 * latency is a model, steady from cell to cell: one round there.
 * With --repeat, each cell's line also gives its ratio to the libbson-json cell of the same
 * repetition when it is a JSON parser cell (bench_parsers.c) or stele at wait=none.
 */
#include "bench_cli.h"

#include <stdlib.h>
#include <string.h>

static const int sweep_writers[] = {1, 8, 64, 512};
/* From this many writers on, durable appends wait for the CPUs more than for the disk: the
 * thread wake-up ceiling (bench_wakeup.c) is run and reported beside them. */
#define SWEEP_CPU_BOUND_WRITERS 64
/* Rounds of the disk-bound cells on a real disk (see the top comment). */
#define SWEEP_ROUNDS 3
/* Most cells of one kind the summary takes a median over. */
#define SUMMARY_MAX_SAME 16
static const uint32_t sweep_intervals_us[] = {0, 500, 2000, 10000, 100000};
static const uint32_t sweep_record_bytes[] = {200, 1024, 16384};
#define SWEEP_N(a) (sizeof(a) / sizeof((a)[0]))

typedef struct sweep_mode {
    stele_sync_t sync;
    stele_wait_t wait;
} sweep_mode_t;

static const sweep_mode_t sweep_modes[] = {
    {STELE_SYNC_ALWAYS, STELE_WAIT_DURABLE},   {STELE_SYNC_ALWAYS, STELE_WAIT_WRITTEN},
    {STELE_SYNC_INTERVAL, STELE_WAIT_WRITTEN}, {STELE_SYNC_NEVER, STELE_WAIT_WRITTEN},
    {STELE_SYNC_ALWAYS, STELE_WAIT_SHIPPED},
};

static int
sweep_add(bench_plan_t *plan, bench_cell_t c, const char *system, const char *device, int writers)
{
    snprintf(c.system, sizeof c.system, "%s", system);
    snprintf(c.device, sizeof c.device, "%s", device);
    c.writers = writers;
    return bench_plan_add(plan, &c);
}

/* The peers at `writers` on `device`. */
static int
sweep_add_peers(bench_plan_t *plan, const bench_cell_t *base, const char *device, int writers)
{
    int rc = 0;
    for (const char *const *p = bench_peer_names(); *p && !rc; p++) {
        /* mongo-direct writes to the --mongo-uri server, whose data is on that server's
         * own disk: it has a place beside stele's wait=shipped, not on another device. */
        if (strcmp(*p, "mongo-direct") == 0 && strcmp(device, "ssd") != 0)
            continue;
        rc = sweep_add(plan, *base, *p, device, writers);
    }
    return rc;
}

static int
sweep_grid_writers(bench_plan_t *plan, const bench_cell_t *base, const char *device,
                   int with_all_modes)
{
    int rc = 0;
    for (size_t w = 0; w < SWEEP_N(sweep_writers) && !rc; w++) {
        for (size_t m = 0; m < (with_all_modes ? SWEEP_N(sweep_modes) : 1) && !rc; m++) {
            bench_cell_t c = *base;
            c.sync = sweep_modes[m].sync;
            c.wait = sweep_modes[m].wait;
            rc = sweep_add(plan, c, "stele", device, sweep_writers[w]);
        }
        rc = rc ? rc : sweep_add(plan, *base, "fsync-loop", device, sweep_writers[w]);
        /* The wake-up ceiling uses no disk: once, beside the SSD cells. */
        if (strcmp(device, "ssd") == 0 && sweep_writers[w] >= SWEEP_CPU_BOUND_WRITERS) {
            rc = rc ? rc : sweep_add(plan, *base, "thread-wakeup", device, sweep_writers[w]);
            rc = rc ? rc : sweep_add(plan, *base, "parse-wakeup", device, sweep_writers[w]);
        }
        rc = rc ? rc : sweep_add_peers(plan, base, device, sweep_writers[w]);
        int is_disk_bound =
            strcmp(device, "ssd") == 0 && sweep_writers[w] < SWEEP_CPU_BOUND_WRITERS;
        for (int round = 1; round < SWEEP_ROUNDS && is_disk_bound && !rc; round++) {
            rc = sweep_add(plan, *base, "fsync-loop", device, sweep_writers[w]);
            rc = rc ? rc : sweep_add(plan, *base, "stele", device, sweep_writers[w]);
            rc = rc ? rc : sweep_add_peers(plan, base, device, sweep_writers[w]);
        }
    }
    return rc;
}

static int
sweep_grid_interval(bench_plan_t *plan, const bench_cell_t *base, const char *device)
{
    static const int writers[] = {1, 64};
    int rc = 0;
    for (size_t w = 0; w < SWEEP_N(writers) && !rc; w++)
        for (size_t p = 0; p < 2 && !rc; p++)
            for (size_t i = 0; i < SWEEP_N(sweep_intervals_us) && !rc; i++) {
                bench_cell_t c = *base;
                c.policy = p ? STELE_COMMIT_FIXED : STELE_COMMIT_ADAPTIVE;
                c.commit_interval_us = sweep_intervals_us[i];
                if (c.commit_interval_us == 0)
                    continue; /* fixed needs an interval; adaptive at 0 ran in the writers grid */
                rc = sweep_add(plan, c, "stele", device, writers[w]);
            }
    return rc;
}

static int
sweep_grid_record_size(bench_plan_t *plan, const bench_cell_t *base)
{
    static const int writers[] = {1, 64};
    int rc = 0;
    for (size_t b = 1; b < SWEEP_N(sweep_record_bytes) && !rc; b++) {
        bench_cell_t c = *base;
        c.record_bytes = sweep_record_bytes[b];
        rc = sweep_add(plan, c, "fsync-loop", "ssd", 1);
        for (size_t w = 0; w < SWEEP_N(writers) && !rc; w++)
            rc = sweep_add(plan, c, "stele", "ssd", writers[w]);
    }
    return rc;
}

int
bench_sweep_plan(const bench_cli_t *cli, bench_plan_t *plan)
{
    bench_cell_t base;
    memset(&base, 0, sizeof base);
    base.seconds = cli->seconds;
    base.warmup_seconds = cli->warmup_seconds;
    base.sync = STELE_SYNC_ALWAYS;
    base.wait = STELE_WAIT_DURABLE;
    base.policy = STELE_COMMIT_ADAPTIVE;
    base.record_bytes = 200;
    base.input = BENCH_INPUT_JSON;
    base.sync_interval_ms = cli->sync_interval_ms;
    base.mongo_uri = cli->mongo_uri;
    int rc = sweep_add(plan, base, "fsync-loop", "ssd", 1);
    rc = rc ? rc : sweep_grid_writers(plan, &base, "ssd", 1);
    rc = rc ? rc : sweep_grid_interval(plan, &base, "ssd");
    rc = rc ? rc : sweep_grid_record_size(plan, &base);
    rc = rc ? rc : sweep_add(plan, base, "fsync-loop", "hdd-emulated", 1);
    rc = rc ? rc : sweep_grid_writers(plan, &base, "hdd-emulated", 0);
    rc = rc ? rc : sweep_grid_interval(plan, &base, "hdd-emulated");
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * Summary
 * ------------------------------------------------------------------------------------------ */
static int
summary_cmp_rate(const void *a, const void *b)
{
    double x = (*(const bench_result_t *const *)a)->appends_per_s;
    double y = (*(const bench_result_t *const *)b)->appends_per_s;
    return (x > y) - (x < y);
}

/* The cell of the median rate among `k` cells of one kind (a run may hold a cell more than
 * once: the sweep's 1-writer rounds). */
static const bench_result_t *
summary_median_cell(const bench_result_t **same, size_t k)
{
    if (k == 0)
        return NULL;
    qsort(same, k, sizeof *same, summary_cmp_rate);
    return same[(k - 1) / 2];
}

static const bench_result_t *
summary_find(const bench_result_t *res, size_t n, const char *system, const char *device,
             int writers, stele_wait_t wait, uint32_t ci, stele_commit_policy_t policy,
             bench_input_t input)
{
    const bench_result_t *same[SUMMARY_MAX_SAME];
    size_t k = 0;
    for (size_t i = 0; i < n && k < SUMMARY_MAX_SAME; i++) {
        const bench_cell_t *c = &res[i].cell;
        if (res[i].status == BENCH_OK && strcmp(c->system, system) == 0 &&
            strcmp(c->device, device) == 0 && c->writers == writers && c->wait == wait &&
            c->commit_interval_us == ci && c->policy == policy && c->input == input &&
            c->sync == STELE_SYNC_ALWAYS && c->record_bytes == 200)
            same[k++] = &res[i];
    }
    return summary_median_cell(same, k);
}

/* The best durable peer (not stele, not the fsync loop) at `writers` on `device`. Not
 * mongo-direct: its server keeps its data on its own disk, whatever the cell's device. */
static const bench_result_t *
summary_best_peer(const bench_result_t *res, size_t n, const char *device, int writers)
{
    const bench_result_t *best = NULL;
    for (size_t i = 0; i < n; i++) {
        const bench_cell_t *c = &res[i].cell;
        if (res[i].status != BENCH_OK || !res[i].is_durable || strcmp(c->device, device) ||
            c->writers != writers || strcmp(c->system, "stele") == 0 ||
            strcmp(c->system, "fsync-loop") == 0 || strcmp(c->system, "mongo-direct") == 0 ||
            c->record_bytes != 200)
            continue;
        /* each peer by its median over the cells it has here */
        const bench_result_t *same[SUMMARY_MAX_SAME];
        size_t k = 0;
        for (size_t j = 0; j < n && k < SUMMARY_MAX_SAME; j++) {
            const bench_cell_t *d = &res[j].cell;
            if (res[j].status == BENCH_OK && strcmp(d->system, c->system) == 0 &&
                strcmp(d->device, device) == 0 && d->writers == writers && d->record_bytes == 200)
                same[k++] = &res[j];
        }
        const bench_result_t *median = summary_median_cell(same, k);
        if (!best || median->appends_per_s > best->appends_per_s)
            best = median;
    }
    return best;
}

/* Beside the writer counts where the CPUs, not the disk, bound a durable append: the
 * references that only sleep and get woken, without and with libbson's parse. */
static void
summary_cpu_ceilings(FILE *out, const bench_result_t *res, size_t n, int writers,
                     const bench_result_t *s)
{
    static const struct {
        const char *system, *label;
    } ceilings[] = {{"thread-wakeup", "thread wake-up ceiling"},
                    {"parse-wakeup", "with libbson's parse"}};
    for (size_t i = 0; i < SWEEP_N(ceilings); i++) {
        const bench_result_t *c =
            summary_find(res, n, ceilings[i].system, "ssd", writers, STELE_WAIT_DURABLE, 0,
                         STELE_COMMIT_ADAPTIVE, BENCH_INPUT_JSON);
        if (c && c->appends_per_s > 0)
            fprintf(out, "; %s %.0f/s (stele at %.0f%% of it)", ceilings[i].label, c->appends_per_s,
                    100.0 * s->appends_per_s / c->appends_per_s);
    }
}

static void
summary_device(FILE *out, const bench_result_t *res, size_t n, const char *device)
{
    const bench_result_t *loop = summary_find(res, n, "fsync-loop", device, 1, STELE_WAIT_DURABLE,
                                              0, STELE_COMMIT_ADAPTIVE, BENCH_INPUT_JSON);
    const bench_result_t *one = summary_find(res, n, "stele", device, 1, STELE_WAIT_DURABLE, 0,
                                             STELE_COMMIT_ADAPTIVE, BENCH_INPUT_JSON);
    if (loop && one)
        fprintf(out,
                "  %s, 1 writer sync=always wait=durable: %.0f/s = %.0f%% of the fsync loop "
                "(%.0f/s); p99 %.0f us = %.2fx the loop's %.0f us\n",
                device, one->appends_per_s, 100.0 * one->appends_per_s / loop->appends_per_s,
                loop->appends_per_s, one->p99_us, one->p99_us / loop->p99_us, loop->p99_us);
    for (size_t w = 0; w < SWEEP_N(sweep_writers); w++) {
        const bench_result_t *s =
            summary_find(res, n, "stele", device, sweep_writers[w], STELE_WAIT_DURABLE, 0,
                         STELE_COMMIT_ADAPTIVE, BENCH_INPUT_JSON);
        if (!s)
            continue;
        const bench_result_t *peer = summary_best_peer(res, n, device, sweep_writers[w]);
        fprintf(out, "  %s, %d writer%s durable: stele %.0f/s (mean batch %.1f)", device,
                sweep_writers[w], sweep_writers[w] > 1 ? "s" : "", s->appends_per_s, s->mean_batch);
        if (one && sweep_writers[w] > 1)
            fprintf(out, ", %.1fx the 1-writer rate", s->appends_per_s / one->appends_per_s);
        if (peer)
            fprintf(out, "; best durable peer %s %.0f/s (stele %.2fx)", peer->cell.system,
                    peer->appends_per_s, s->appends_per_s / peer->appends_per_s);
        if (strcmp(device, "ssd") == 0 && sweep_writers[w] >= SWEEP_CPU_BOUND_WRITERS)
            summary_cpu_ceilings(out, res, n, sweep_writers[w], s);
        fprintf(out, "\n");
    }
}

static void
summary_lone_writer(FILE *out, const bench_result_t *res, size_t n)
{
    const bench_result_t *loop = summary_find(res, n, "fsync-loop", "ssd", 1, STELE_WAIT_DURABLE, 0,
                                              STELE_COMMIT_ADAPTIVE, BENCH_INPUT_JSON);
    const bench_result_t *adaptive = summary_find(res, n, "stele", "ssd", 1, STELE_WAIT_DURABLE,
                                                  100000, STELE_COMMIT_ADAPTIVE, BENCH_INPUT_JSON);
    const bench_result_t *fixed = summary_find(res, n, "stele", "ssd", 1, STELE_WAIT_DURABLE,
                                               100000, STELE_COMMIT_FIXED, BENCH_INPUT_JSON);
    if (adaptive && loop)
        fprintf(out,
                "  lone writer, commit_interval_us=100000, adaptive: %.0f/s = %.0f%% of the "
                "fsync loop\n",
                adaptive->appends_per_s, 100.0 * adaptive->appends_per_s / loop->appends_per_s);
    if (fixed)
        fprintf(out,
                "  lone writer, commit_interval_us=100000, fixed (MongoDB 2.4-like): %.1f/s, "
                "p50 %.1f ms\n",
                fixed->appends_per_s, fixed->p50_us / 1000.0);
    for (int in = 0; in < 2; in++) {
        const bench_result_t *none = summary_find(res, n, "stele", "ssd", 1, STELE_WAIT_NONE, 0,
                                                  STELE_COMMIT_ADAPTIVE, (bench_input_t)in);
        const bench_result_t *parse =
            summary_find(res, n, "libbson-json", "ssd", 1, STELE_WAIT_NONE, 0,
                         STELE_COMMIT_ADAPTIVE, (bench_input_t)in);
        if (!none)
            continue;
        fprintf(out, "  1 writer wait=none %s: %.0f/s (not durable)",
                bench_input_name((bench_input_t)in), none->appends_per_s);
        if (parse && parse->appends_per_s > 0)
            fprintf(out, "; libbson's JSON parse alone %.0f/s (stele at %.0f%% of it)",
                    parse->appends_per_s, 100.0 * none->appends_per_s / parse->appends_per_s);
        fprintf(out, "\n");
    }
}

void
bench_print_summary(FILE *out, const bench_result_t *res, size_t n)
{
    fprintf(out, "\nsummary (ratios between cells of this run):\n");
    summary_device(out, res, n, "ssd");
    summary_lone_writer(out, res, n);
    summary_device(out, res, n, "hdd-emulated");
}

static int
summary_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static double
summary_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, summary_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The libbson-json cell of one repetition beside cell c (same size, writers and input): the
 * reference of the JSON parser comparison. NULL when none ran. */
static const bench_result_t *
summary_parse_reference(const bench_result_t *rep, size_t n, const bench_cell_t *c)
{
    for (size_t i = 0; i < n; i++) {
        const bench_result_t *r = &rep[i];
        if (r->status == BENCH_OK && strcmp(r->cell.system, "libbson-json") == 0 &&
            r->cell.record_bytes == c->record_bytes && r->cell.writers == c->writers &&
            r->cell.input == c->input)
            return r;
    }
    return NULL;
}

/* Cells compared with libbson-json: the other JSON parsers, and stele at wait=none. */
static int
summary_is_json_parse(const bench_cell_t *c)
{
    size_t n = strlen(c->system);
    if (c->input != BENCH_INPUT_JSON)
        return 0;
    if (strcmp(c->system, "stele") == 0)
        return c->wait == STELE_WAIT_NONE;
    return n > 5 && strcmp(c->system + n - 5, "-json") == 0 &&
           strcmp(c->system, "libbson-json") != 0;
}

/* Per-repetition figures of one cell of the plan, gathered for the medians. */
typedef struct summary_series {
    double *rate, *p99, *ratio, *p99_ratio, *parse_ratio;
    size_t n, n_ratio, n_parse;
} summary_series_t;

static void
summary_gather(summary_series_t *s, const bench_result_t *res, size_t per_rep, uint32_t reps,
               size_t i)
{
    s->n = s->n_ratio = s->n_parse = 0;
    for (uint32_t k = 0; k < reps; k++) {
        const bench_result_t *r = &res[k * per_rep + i];
        if (r->status != BENCH_OK)
            continue;
        s->rate[s->n] = r->appends_per_s;
        s->p99[s->n++] = r->p99_us;
        if (r->ref_appends_per_s > 0 && r->ref_p99_us > 0 && r->is_durable) {
            s->ratio[s->n_ratio] = r->appends_per_s / r->ref_appends_per_s;
            s->p99_ratio[s->n_ratio++] = r->p99_us / r->ref_p99_us;
        }
        const bench_result_t *parse =
            summary_is_json_parse(&r->cell)
                ? summary_parse_reference(&res[k * per_rep], per_rep, &r->cell)
                : NULL;
        if (parse && parse->appends_per_s > 0)
            s->parse_ratio[s->n_parse++] = r->appends_per_s / parse->appends_per_s;
    }
}

static void
summary_repeat_line(FILE *out, const bench_cell_t *c, summary_series_t *s)
{
    char knobs[96] = "";
    if (strcmp(c->system, "stele") == 0)
        snprintf(knobs, sizeof knobs, " ci=%u %s %s/%s %s", c->commit_interval_us,
                 bench_policy_name(c->policy), bench_sync_name(c->sync), bench_wait_name(c->wait),
                 bench_input_name(c->input));
    fprintf(out, "  %-18s %-12s wr=%-4d%s %uB: %.0f/s, p99 %.0f us", c->system, c->device,
            c->writers, knobs, c->record_bytes, summary_median(s->rate, s->n),
            summary_median(s->p99, s->n));
    if (s->n_ratio > 0) {
        double med = summary_median(s->ratio, s->n_ratio); /* sorted: [0] min, [n-1] max */
        fprintf(out, "; %.2fx loop rate [%.2f..%.2f], p99 %.2fx loop", med, s->ratio[0],
                s->ratio[s->n_ratio - 1], summary_median(s->p99_ratio, s->n_ratio));
    }
    if (s->n_parse > 0) {
        double med = summary_median(s->parse_ratio, s->n_parse);
        fprintf(out, "; %.2fx libbson-json [%.2f..%.2f]", med, s->parse_ratio[0],
                s->parse_ratio[s->n_parse - 1]);
    }
    fprintf(out, "\n");
}

void
bench_print_repeat_summary(FILE *out, const bench_result_t *res, size_t per_rep, uint32_t reps)
{
    summary_series_t s = {.rate = calloc(reps, sizeof(double)),
                          .p99 = calloc(reps, sizeof(double)),
                          .ratio = calloc(reps, sizeof(double)),
                          .p99_ratio = calloc(reps, sizeof(double)),
                          .parse_ratio = calloc(reps, sizeof(double))};
    if (s.rate && s.p99 && s.ratio && s.p99_ratio && s.parse_ratio) {
        fprintf(out,
                "\nmedian over %u repetitions (ratios taken inside each repetition, then the "
                "median; min..max of the ratio in brackets):\n",
                reps);
        for (size_t i = 0; i < per_rep; i++) {
            summary_gather(&s, res, per_rep, reps, i);
            if (s.n > 0)
                summary_repeat_line(out, &res[i].cell, &s);
        }
    }
    free(s.rate);
    free(s.p99);
    free(s.ratio);
    free(s.p99_ratio);
    free(s.parse_ratio);
}
