/*
 * bench_plot.c: the sweep's plots, rendered with gnuplot (PNG and SVG).
 *
 * From the results in memory it writes one small data file per plotted series and a
 * gnuplot script (plots.gp) into the output directory, then runs `gnuplot plots.gp` there,
 * so the plots can be re-rendered or restyled by hand from the same files. Plots:
 *   writers-<device>:  appends/s vs writers, one line per stele mode and per peer;
 *   interval-<device>: appends/s vs commit_interval_us, adaptive vs fixed, 1 and 64 writers;
 *   cdf-<device>:      latency CDFs of durable appends at 1 and 64 writers and the loop.
 * Emulated-HDD plots say "emulated" in their titles. Without gnuplot it says so and leaves
 * the data and script.
 */
#include "bench_peers.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

static int
plot_is_base(const bench_result_t *r, const char *device)
{
    return r->status == BENCH_OK && strcmp(r->cell.device, device) == 0 &&
           r->cell.record_bytes == 200 && r->cell.commit_interval_us == 0 &&
           r->cell.policy == STELE_COMMIT_ADAPTIVE;
}

static void
plot_series_label(const bench_result_t *r, char *out, size_t cap)
{
    if (strcmp(r->cell.system, "stele") == 0)
        snprintf(out, cap, "stele %s/%s%s", bench_sync_name(r->cell.sync),
                 bench_wait_name(r->cell.wait), r->is_durable ? "" : " (not durable)");
    else
        snprintf(out, cap, "%s%s", r->cell.system, r->is_durable ? "" : " (not durable)");
}

/* Writes one data file per distinct series label; appends the plot command to gp. */
static int
plot_writers(FILE *gp, const char *out_dir, const bench_result_t *res, size_t n, const char *device)
{
    char labels[32][96];
    size_t n_labels = 0;
    for (size_t k = 0; k < 32; k++) { /* series files are appended to below: start empty */
        char stale[BENCH_PATH_BYTES];
        snprintf(stale, sizeof stale, "%s/plot-writers-%s-%zu.dat", out_dir, device, k);
        unlink(stale);
    }
    for (size_t i = 0; i < n && n_labels < 32; i++) {
        if (!plot_is_base(&res[i], device))
            continue;
        char label[96];
        plot_series_label(&res[i], label, sizeof label);
        size_t k = 0;
        while (k < n_labels && strcmp(labels[k], label) != 0)
            k++;
        if (k == n_labels)
            snprintf(labels[n_labels++], sizeof labels[0], "%s", label);
        char path[BENCH_PATH_BYTES];
        snprintf(path, sizeof path, "%s/plot-writers-%s-%zu.dat", out_dir, device, k);
        FILE *f = fopen(path, "a");
        if (!f)
            return -errno;
        fprintf(f, "%d %.1f\n", res[i].cell.writers, res[i].appends_per_s);
        fclose(f);
    }
    if (n_labels == 0)
        return 0;
    int emulated = strcmp(device, "hdd-emulated") == 0;
    fprintf(gp,
            "set title 'appends/s vs writers, 200-byte events, %s%s'\n"
            "set xlabel 'writers'; set ylabel 'appends/s'; set logscale xy\n"
            "set key outside right\n",
            device, emulated ? " (EMULATED 7200 rpm)" : "");
    for (int fmt = 0; fmt < 2; fmt++) {
        fprintf(gp, "%s\nset output 'writers-%s.%s'\nplot ",
                fmt ? "set terminal svg size 1100,600 noenhanced"
                    : "set terminal pngcairo size 1100,600 noenhanced",
                device, fmt ? "svg" : "png");
        for (size_t k = 0; k < n_labels; k++)
            /* smooth unique: sorted by writers, repeated cells averaged; dashed = not
             * durable; stele's durable line thick and in a colour of its own, since the
             * default palette repeats after eight lines. */
            fprintf(gp,
                    "%s'plot-writers-%s-%zu.dat' using 1:2 smooth unique with linespoints "
                    "dt %d %s title '%s'",
                    k ? ", " : "", device, k, strstr(labels[k], "not durable") ? 2 : 1,
                    strcmp(labels[k], "stele always/durable") == 0 ? "lw 5 lc rgb '#b00000'"
                                                                   : "lw 2",
                    labels[k]);
        fprintf(gp, "\n");
    }
    fprintf(gp, "unset logscale\n");
    return 0;
}

static int
plot_interval(FILE *gp, const char *out_dir, const bench_result_t *res, size_t n,
              const char *device)
{
    static const int writers[] = {1, 64};
    int any = 0;
    char path[BENCH_PATH_BYTES];
    for (int w = 0; w < 2; w++)
        for (int pol = 0; pol < 2; pol++) {
            snprintf(path, sizeof path, "%s/plot-interval-%s-w%d-%s.dat", out_dir, device,
                     writers[w], pol ? "fixed" : "adaptive");
            FILE *f = fopen(path, "w");
            if (!f)
                return -errno;
            for (size_t i = 0; i < n; i++) {
                const bench_cell_t *c = &res[i].cell;
                if (res[i].status == BENCH_OK && strcmp(c->system, "stele") == 0 &&
                    strcmp(c->device, device) == 0 && c->writers == writers[w] &&
                    (int)c->policy == pol && c->sync == STELE_SYNC_ALWAYS &&
                    c->wait == STELE_WAIT_DURABLE && c->record_bytes == 200) {
                    fprintf(f, "%u %.1f\n", c->commit_interval_us ? c->commit_interval_us : 100,
                            res[i].appends_per_s);
                    any = 1;
                }
            }
            fclose(f);
        }
    if (!any)
        return 0;
    fprintf(gp,
            "set title 'durable appends/s vs commit_interval_us (0 drawn at 100), %s%s'\n"
            "set xlabel 'commit_interval_us'; set ylabel 'appends/s'; set logscale xy\n",
            device, strcmp(device, "hdd-emulated") == 0 ? " (EMULATED 7200 rpm)" : "");
    for (int fmt = 0; fmt < 2; fmt++) {
        fprintf(gp, "%s\nset output 'interval-%s.%s'\nplot ",
                fmt ? "set terminal svg size 1100,600 noenhanced"
                    : "set terminal pngcairo size 1100,600 noenhanced",
                device, fmt ? "svg" : "png");
        for (int w = 0; w < 2; w++)
            for (int pol = 0; pol < 2; pol++)
                fprintf(gp,
                        "%s'plot-interval-%s-w%d-%s.dat' using 1:2 smooth unique with "
                        "linespoints lw 2 title "
                        "'%d writer(s), %s'",
                        (w || pol) ? ", " : "", device, writers[w], pol ? "fixed" : "adaptive",
                        writers[w], pol ? "fixed (MongoDB 2.4-like)" : "adaptive");
        fprintf(gp, "\n");
    }
    fprintf(gp, "unset logscale\n");
    return 0;
}

static int
plot_cdf(FILE *gp, const char *out_dir, const bench_result_t *res, size_t n, const char *device)
{
    int n_series = 0;
    char titles[8][96];
    for (size_t i = 0; i < n && n_series < 8; i++) {
        const bench_cell_t *c = &res[i].cell;
        if (!plot_is_base(&res[i], device) || !res[i].hist || c->sync != STELE_SYNC_ALWAYS ||
            c->wait != STELE_WAIT_DURABLE || (c->writers != 1 && c->writers != 64) ||
            (strcmp(c->system, "stele") != 0 && strcmp(c->system, "fsync-loop") != 0))
            continue;
        char path[BENCH_PATH_BYTES];
        snprintf(path, sizeof path, "%s/plot-cdf-%s-%d.dat", out_dir, device, n_series);
        FILE *f = fopen(path, "w");
        if (!f)
            return -errno;
        bench_hist_write_cdf(res[i].hist, f);
        fclose(f);
        snprintf(titles[n_series++], sizeof titles[0], "%s, %d writer(s)", c->system, c->writers);
    }
    if (n_series == 0)
        return 0;
    fprintf(gp,
            "set title 'latency CDF of durable appends, %s%s'\n"
            "set xlabel 'latency (us)'; set ylabel 'fraction'; set logscale x\n",
            device, strcmp(device, "hdd-emulated") == 0 ? " (EMULATED 7200 rpm)" : "");
    for (int fmt = 0; fmt < 2; fmt++) {
        fprintf(gp, "%s\nset output 'cdf-%s.%s'\nplot ",
                fmt ? "set terminal svg size 1100,600 noenhanced"
                    : "set terminal pngcairo size 1100,600 noenhanced",
                device, fmt ? "svg" : "png");
        for (int k = 0; k < n_series; k++)
            fprintf(gp, "%s'plot-cdf-%s-%d.dat' using 1:2 with lines title '%s'", k ? ", " : "",
                    device, k, titles[k]);
        fprintf(gp, "\n");
    }
    fprintf(gp, "unset logscale\n");
    return 0;
}

int
bench_plot(const char *out_dir, const bench_result_t *res, size_t n)
{
    static const char *const devices[] = {"ssd", "hdd-emulated"};
    char path[BENCH_PATH_BYTES];
    snprintf(path, sizeof path, "%s/plots.gp", out_dir);
    FILE *gp = fopen(path, "w");
    if (!gp) {
        fprintf(stderr, "stele-bench: could not write %s: %s\n", path, strerror(errno));
        return -errno;
    }
    int rc = 0;
    for (int d = 0; d < 2 && !rc; d++) {
        rc = plot_writers(gp, out_dir, res, n, devices[d]);
        rc = rc ? rc : plot_interval(gp, out_dir, res, n, devices[d]);
        rc = rc ? rc : plot_cdf(gp, out_dir, res, n, devices[d]);
    }
    fclose(gp);
    char gnuplot[BENCH_PATH_BYTES];
    if (rc || bench_server_find("gnuplot", NULL, gnuplot, sizeof gnuplot) != 0) {
        fprintf(stderr, "stele-bench: %s; plot data and %s left for later\n",
                rc ? "could not write plot data" : "gnuplot not found (install gnuplot-nox)", path);
        return rc;
    }
    char log[BENCH_PATH_BYTES], cwd[BENCH_PATH_BYTES];
    snprintf(log, sizeof log, "%s/gnuplot.log", out_dir);
    char *argv[] = {gnuplot, "plots.gp", NULL};
    if (!getcwd(cwd, sizeof cwd) || chdir(out_dir) != 0)
        return -errno;
    int status = bench_server_run(argv, log, NULL);
    if (chdir(cwd) != 0)
        return -errno;
    if (status != 0)
        fprintf(stderr, "stele-bench: gnuplot failed (see %s)\n", log);
    else
        fprintf(stderr, "stele-bench: plots written to %s\n", out_dir);
    return status == 0 ? 0 : -EIO;
}
