/*
 * bench_plan.c: runs a list of cells in order and reports each as it finishes.
 *
 * Every cell gets a fresh directory of its own under the run directory (or under the
 * emulated HDD's mount point for device "hdd-emulated"), removed after the cell unless the
 * cell keeps its data, so no cell sees another's files or page cache state. A 1-writer
 * fsync-loop cell is the physical reference for the cells that follow it on the same device
 * with the same record size: their results carry its rate and p99 so that ratios are always
 * taken between two measurements of the same run, side by side.
 */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
bench_plan_add(bench_plan_t *p, const bench_cell_t *cell)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        bench_cell_t *cells = realloc(p->cells, cap * sizeof *cells);
        if (!cells)
            return -ENOMEM;
        p->cells = cells;
        p->cap = cap;
    }
    p->cells[p->n++] = *cell;
    return 0;
}

void
bench_plan_free(bench_plan_t *p)
{
    free(p->cells);
    memset(p, 0, sizeof *p);
}

static const bench_target_t *
plan_target(const char *system)
{
    if (strcmp(system, "stele") == 0)
        return &bench_target_stele;
    if (strcmp(system, "stele-signed") == 0)
        return &bench_target_stele_signed;
    if (strcmp(system, "fsync-loop") == 0)
        return &bench_target_fsync_loop;
    if (strcmp(system, "libbson-json") == 0)
        return &bench_target_json_parse;
    static const bench_target_t *const parsers[] = {
        &bench_target_json_stele, &bench_target_json_simdjson, &bench_target_json_yajl,
        &bench_target_json_jansson};
    for (size_t i = 0; i < sizeof parsers / sizeof parsers[0]; i++)
        if (strcmp(system, parsers[i]->system) == 0)
            return parsers[i];
    if (strcmp(system, "thread-wakeup") == 0)
        return &bench_target_thread_wakeup;
    if (strcmp(system, "parse-wakeup") == 0)
        return &bench_target_parse_wakeup;
    return bench_peer_find(system);
}

static void
plan_progress(const bench_run_opts_t *o, size_t i, size_t n, const bench_cell_t *c,
              double remaining_s)
{
    if (o->quiet_progress)
        return;
    int is_tty = isatty(STDERR_FILENO);
    const int bar_width = 24;
    int filled = (int)((double)i * bar_width / (double)(n ? n : 1));
    fprintf(stderr, "%s[%.*s%*s] %zu/%zu ~%.0fs left: %s %s wr=%d sync=%s wait=%s ci=%u %uB%s",
            is_tty ? "\r\033[K" : "", filled, "########################", bar_width - filled, "", i,
            n, remaining_s, c->system, c->device, c->writers, bench_sync_name(c->sync),
            bench_wait_name(c->wait), c->commit_interval_us, c->record_bytes, is_tty ? "" : "\n");
    fflush(stderr);
}

static void
plan_write_cdf(const bench_run_opts_t *o, size_t i, const bench_result_t *r)
{
    if (!o->cdf_dir || r->status != BENCH_OK)
        return;
    char path[BENCH_PATH_BYTES];
    const bench_cell_t *c = &r->cell;
    snprintf(path, sizeof path, "%s/cdf-%03zu-%s-%s-w%d-%s-%s-ci%u-%s.dat", o->cdf_dir, i,
             c->system, c->device, c->writers, bench_sync_name(c->sync), bench_wait_name(c->wait),
             c->commit_interval_us, bench_policy_name(c->policy));
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    bench_hist_write_cdf(r->hist, f);
    fclose(f);
}

/* A result for a cell that did not run, saying why. */
static void
plan_skip(bench_result_t *r, const bench_cell_t *cell, bench_status_t status, const char *why)
{
    memset(r, 0, sizeof *r);
    r->cell = *cell;
    r->counted_back = -1;
    r->status = status;
    snprintf(r->note, sizeof r->note, "%s", why);
}

static void
plan_run_one(const bench_run_opts_t *o, const bench_cell_t *cell_in, bench_result_t *r)
{
    bench_cell_t cell = *cell_in;
    cell.interrupted = o->interrupted;
    if (o->interrupted && atomic_load(o->interrupted)) {
        plan_skip(r, &cell, BENCH_SKIPPED, "interrupted");
        return;
    }
    const char *parent = o->run_dir;
    int is_hdd = strcmp(cell.device, "hdd-emulated") == 0;
    if (is_hdd)
        parent = o->hdd_dir;
    const bench_target_t *t = plan_target(cell.system);
    char dir[BENCH_PATH_BYTES];
    int rc = (t && parent) ? bench_make_temp_dir(parent, "cell", dir, sizeof dir) : 0;
    if (!t || !parent || rc) {
        plan_skip(r, &cell, (!t || (is_hdd && !parent)) ? BENCH_SKIPPED : BENCH_FAILED,
                  !t        ? "unknown system"
                  : !parent ? "emulated HDD not mounted (needs /dev/fuse and root)"
                            : strerror(-rc));
        return;
    }
    snprintf(cell.dir, sizeof cell.dir, "%s", dir);
    bench_run_cell(t, &cell, r);
    if (!cell.keep_data)
        bench_remove_tree(dir);
}

static void
plan_apply_reference(bench_result_t *r, const bench_result_t **ref, size_t n_ref)
{
    for (size_t k = n_ref; k-- > 0;) {
        if (strcmp(ref[k]->cell.device, r->cell.device) == 0 &&
            ref[k]->cell.record_bytes == r->cell.record_bytes) {
            r->ref_appends_per_s = ref[k]->appends_per_s;
            r->ref_p99_us = ref[k]->p99_us;
            return;
        }
    }
}

int
bench_plan_run(const bench_plan_t *p, const bench_run_opts_t *o, bench_result_t **out)
{
    bench_result_t *res = calloc(p->n ? p->n : 1, sizeof *res);
    const bench_result_t **refs = calloc(p->n ? p->n : 1, sizeof *refs);
    if (!res || !refs) {
        free(res);
        free(refs);
        return -ENOMEM;
    }
    size_t n_ref = 0;
    int store_hung = 0;
    double remaining_s = 0;
    for (size_t i = 0; i < p->n; i++)
        remaining_s += p->cells[i].seconds + p->cells[i].warmup_seconds + 0.5;
    if (!o->json)
        bench_print_table_header(stdout);
    for (size_t i = 0; i < p->n; i++) {
        plan_progress(o, i, p->n, &p->cells[i], remaining_s);
        if (store_hung)
            plan_skip(&res[i], &p->cells[i], BENCH_SKIPPED,
                      "not run: an earlier cell's store hung");
        else
            plan_run_one(o, &p->cells[i], &res[i]);
        remaining_s -= p->cells[i].seconds + p->cells[i].warmup_seconds + 0.5;
        bench_result_t *r = &res[i];
        if (r->status == BENCH_OK && r->cell.writers == 1 &&
            strcmp(r->cell.system, "fsync-loop") == 0)
            refs[n_ref++] = r;
        else
            plan_apply_reference(r, refs, n_ref);
        if (!o->quiet_progress && isatty(STDERR_FILENO))
            fprintf(stderr, "\r\033[K");
        if (o->json)
            bench_print_json(stdout, r);
        else
            bench_print_table_row(stdout, r);
        if (o->csv)
            bench_print_csv(o->csv, r);
        if (o->jsonl)
            bench_print_json(o->jsonl, r);
        plan_write_cdf(o, i, r);
        store_hung |= r->is_abandoned;
    }
    free(refs);
    *out = res;
    return 0;
}
