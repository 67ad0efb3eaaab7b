/*
 * bench_plot.c: the plots of a run, or of a results.csv (--plot-from), drawn with gnuplot
 * as PNG and SVG. It writes one small data file per series and a gnuplot script (plots.gp)
 * into the output directory, then runs `gnuplot plots.gp` there, so a plot can be redrawn
 * or restyled by hand from the same files. Plots, per device:
 *   writers-<device>:  appends/s by writers, one series per stele mode and per peer;
 *   interval-<device>: stele's durable appends/s by commit_interval_us, adaptive vs fixed;
 *   cdf-<device>:      latency CDFs of durable appends, stele and the fsync loop, 1 and 64
 *                      writers (from the run's histograms, or the cdf-NNN-*.dat files an
 *                      --out run leaves beside its results.csv).
 * What is drawn is what was measured (bench_plot.h): a line goes through each point's
 * median round and every round is a dot; nothing is averaged or smoothed. The fsync loop
 * is drawn last, in black with open circles, so no other line hides it; log axes are
 * padded beyond the outermost points and ticked at the measured x values; the key sits
 * below the plot. A plot without enough to show (fewer than PLOT_MIN_X measured x values,
 * or no histograms) is not drawn, any earlier file of it is removed, and stderr says why.
 * Emulated-HDD plots say "EMULATED" in their titles. Without gnuplot it says so and leaves
 * the data and script. gnuplot's own output goes to gnuplot.log.
 */
#include "bench_peers.h"
#include "bench_plot.h"

#include <errno.h>
#include <glob.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Fewest distinct x values a line plot is drawn with: below it there is no curve to see. */
#define PLOT_MIN_X 3
/* Log axes reach this factor beyond the outermost points, so no marker sits on a border. */
#define PLOT_X_PAD 1.6
#define PLOT_Y_PAD 1.8
/* Canvas: the plot area, plus one key row per PLOT_KEY_COLUMNS series. */
#define PLOT_WIDTH 1000
#define PLOT_HEIGHT 560
#define PLOT_KEY_ROW_HEIGHT 20
#define PLOT_KEY_COLUMNS 3
/* The marker of a round that is not the median, against the median's. */
#define PLOT_ROUND_SCALE 0.5
/* commit_interval_us 0 sits this factor left of the smallest nonzero one on its log axis. */
#define PLOT_ZERO_INTERVAL_FACTOR 4.0

/* Colours for the series that have none of their own (stele's is red, the loop's black). */
static const char *const plot_palette[] = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22", "#7f7f7f", "#005f5f", "#d4a017", "#6a3d9a",
};
#define PLOT_PALETTE_N (sizeof plot_palette / sizeof plot_palette[0])

/* What the run drew and what it left out, reported on stderr at the end. */
typedef struct plot_report {
    char drawn[512];
    char skipped[1024];
} plot_report_t;

static void
plot_report_add(char *list, size_t cap, const char *text)
{
    size_t len = strlen(list);
    snprintf(list + len, cap - len, "%s", text);
}

static void
plot_drawn(plot_report_t *rep, const char *name)
{
    char item[96];
    snprintf(item, sizeof item, "%s%s", rep->drawn[0] ? ", " : "", name);
    plot_report_add(rep->drawn, sizeof rep->drawn, item);
}

/* Records why `name` is not drawn and removes its files of an earlier run. */
static void
plot_skipped(plot_report_t *rep, const char *out_dir, const char *name, const char *why)
{
    char item[320];
    snprintf(item, sizeof item, "stele-bench: %s not drawn: %s\n", name, why);
    plot_report_add(rep->skipped, sizeof rep->skipped, item);
    static const char *const exts[] = {"png", "svg"};
    for (int e = 0; e < 2; e++) {
        char path[BENCH_PATH_BYTES];
        snprintf(path, sizeof path, "%s/%s.%s", out_dir, name, exts[e]);
        unlink(path);
    }
}

/* ------------------------------------------------------------------------------------------
 * Data files
 * ------------------------------------------------------------------------------------------ */

static int
plot_series_has_rounds(const plot_series_t *s)
{
    for (size_t p = 0; p < s->n_points; p++)
        if (s->points[p].n_rounds > 1)
            return 1;
    return 0;
}

/* plot-<name>-<k>.dat: block 0 the line (each point's median round), block 1 (when some
 * point ran more than once) every round. x_zero replaces x = 0 (log axes cannot hold 0). */
static int
plot_write_series(const char *out_dir, const char *name, size_t k, const plot_series_t *s,
                  double x_zero)
{
    char path[BENCH_PATH_BYTES];
    snprintf(path, sizeof path, "%s/plot-%s-%zu.dat", out_dir, name, k);
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fprintf(f, "# %s: x, appends/s of the median round\n", s->label);
    for (size_t p = 0; p < s->n_points; p++) {
        const plot_point_t *pt = &s->points[p];
        fprintf(f, "%g %.1f\n", pt->x == 0 ? x_zero : pt->x, pt->rate[plot_point_median(pt)]);
    }
    if (plot_series_has_rounds(s)) {
        fprintf(f, "\n\n# every round\n");
        for (size_t p = 0; p < s->n_points; p++)
            for (size_t r = 0; r < s->points[p].n_rounds; r++)
                fprintf(f, "%g %.1f\n", s->points[p].x == 0 ? x_zero : s->points[p].x,
                        s->points[p].rate[r]);
    }
    return fclose(f) == 0 ? 0 : -errno;
}

/* ------------------------------------------------------------------------------------------
 * The script
 * ------------------------------------------------------------------------------------------ */

/* The style of series k: line width, dash and colour, then (point_scale > 0) its marker at
 * that scale of its size. */
static void
plot_style_text(const plot_series_t *s, size_t k, double point_scale, char *out, size_t cap)
{
    const char *colour = s->colour[0] ? s->colour : plot_palette[k % PLOT_PALETTE_N];
    int dash = s->is_dashed ? 2 : 1;
    double width = 2, point_size = 1.2;
    int point_type = 1 + (int)(k % 12);
    switch (s->style) {
    case PLOT_STYLE_REFERENCE:
        colour = "#000000";
        point_type = 6; /* an open circle around whatever lies beneath */
        point_size = 2.2;
        break;
    case PLOT_STYLE_STELE:
        colour = s->colour[0] ? s->colour : "#b00000";
        width = 4;
        point_type = 7;
        break;
    case PLOT_STYLE_DURABLE:
        break;
    case PLOT_STYLE_NOT_DURABLE:
        width = 1.5;
        dash = 2;
        break;
    case PLOT_STYLE_CEILING:
        width = 1.5;
        dash = 3;
        break;
    }
    int len = snprintf(out, cap, "lw %g dt %d lc rgb '%s'", width, dash, colour);
    if (point_scale > 0 && len > 0 && (size_t)len < cap)
        snprintf(out + len, cap - (size_t)len, " pt %d ps %g", point_type,
                 point_size * point_scale);
}

/* The terminals: one PNG and one SVG of the same plot, tall enough for the key. */
static void
plot_emit_terminal(FILE *gp, const char *name, size_t n_series, int is_svg)
{
    int height = PLOT_HEIGHT +
                 PLOT_KEY_ROW_HEIGHT * (int)((n_series + PLOT_KEY_COLUMNS - 1) / PLOT_KEY_COLUMNS);
    fprintf(gp, "set terminal %s size %d,%d noenhanced font ',11'\nset output '%s.%s'\n",
            is_svg ? "svg" : "pngcairo", PLOT_WIDTH, height, name, is_svg ? "svg" : "png");
}

/* `plot` over the set's data files: each series' rounds as dots first, then its line. */
static void
plot_emit_lines(FILE *gp, const char *name, const plot_set_t *set)
{
    fprintf(gp, "plot ");
    for (size_t k = 0; k < set->n; k++) {
        const plot_series_t *s = &set->series[k];
        char style[128];
        if (plot_series_has_rounds(s)) { /* the rounds beside the median: small, beneath */
            plot_style_text(s, k, PLOT_ROUND_SCALE, style, sizeof style);
            fprintf(gp, "'plot-%s-%zu.dat' index 1 using 1:2 with points %s notitle, ", name, k,
                    style);
        }
        plot_style_text(s, k, 1, style, sizeof style);
        fprintf(gp, "'plot-%s-%zu.dat' index 0 using 1:2 with linespoints %s title '%s'%s", name, k,
                style, s->label, k + 1 < set->n ? ", \\\n     " : "\n");
    }
}

/* Axis ranges and ticks for a log-log plot of appends/s over the given x values. */
static void
plot_emit_axes(FILE *gp, const plot_set_t *set, const double *xs, size_t n_x, double x_zero)
{
    double y_min, y_max;
    plot_set_rate_bounds(set, &y_min, &y_max);
    double x_lo = xs[0] == 0 ? x_zero : xs[0];
    fprintf(gp, "set logscale xy\nset xrange [%g:%g]\nset yrange [%g:%g]\nunset mxtics\n",
            x_lo / PLOT_X_PAD, xs[n_x - 1] * PLOT_X_PAD, y_min / PLOT_Y_PAD, y_max * PLOT_Y_PAD);
    fprintf(gp, "set xtics (");
    for (size_t i = 0; i < n_x; i++)
        fprintf(gp, "%s\"%g\" %g", i ? ", " : "", xs[i], xs[i] == 0 ? x_zero : xs[i]);
    fprintf(gp, ")\nset ytics format '%%.0s%%c'\n");
}

static void
plot_emit_key(FILE *gp)
{
    fprintf(gp,
            "set key outside below center horizontal Left reverse maxcols %d samplen 3 "
            "spacing 1.1 width 2 height 1\nset grid ytics lc rgb '#dddddd'\n",
            PLOT_KEY_COLUMNS);
}

static const char *
plot_device_note(const char *device)
{
    return strcmp(device, "hdd-emulated") == 0 ? " (EMULATED 7200 rpm disk)" : "";
}

/* Writes the data files and the script of one appends/s plot of `set`. */
static int
plot_emit_rates(FILE *gp, const char *out_dir, const char *name, const plot_set_t *set,
                const char *title, const char *xlabel)
{
    double xs[PLOT_MAX_SERIES * PLOT_MAX_X];
    size_t n_x = plot_set_distinct_x(set, xs, sizeof xs / sizeof xs[0]);
    double x_zero = n_x > 1 && xs[0] == 0 ? xs[1] / PLOT_ZERO_INTERVAL_FACTOR : 1;
    for (size_t k = 0; k < set->n; k++) {
        int rc = plot_write_series(out_dir, name, k, &set->series[k], x_zero);
        if (rc)
            return rc;
    }
    fprintf(gp, "\n# %s\nreset\nset title '%s'\nset xlabel '%s'\nset ylabel 'appends/s'\n", name,
            title, xlabel);
    plot_emit_axes(gp, set, xs, n_x, x_zero);
    plot_emit_key(gp);
    for (int is_svg = 0; is_svg < 2; is_svg++) {
        plot_emit_terminal(gp, name, set->n, is_svg);
        plot_emit_lines(gp, name, set);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * The plots
 * ------------------------------------------------------------------------------------------ */

/* Draws `set` as plot `name` when it has PLOT_MIN_X measured x values, else says why not. */
static int
plot_rates_if_enough(FILE *gp, const char *out_dir, const char *name, const plot_set_t *set,
                     const char *title, const char *xlabel, plot_report_t *rep)
{
    if (set->n == 0)
        return 0;
    double xs[PLOT_MAX_SERIES * PLOT_MAX_X];
    size_t n_x = plot_set_distinct_x(set, xs, sizeof xs / sizeof xs[0]);
    if (n_x < PLOT_MIN_X) {
        char why[192];
        snprintf(why, sizeof why,
                 "the run measured %s at %zu value%s (a curve needs %d; --sweep "
                 "measures them)",
                 xlabel, n_x, n_x == 1 ? "" : "s", PLOT_MIN_X);
        plot_skipped(rep, out_dir, name, why);
        return 0;
    }
    int rc = plot_emit_rates(gp, out_dir, name, set, title, xlabel);
    if (rc == 0)
        plot_drawn(rep, name);
    return rc;
}

static int
plot_writers(FILE *gp, const char *out_dir, const bench_result_t *res, size_t n, const char *device,
             plot_set_t *set, plot_report_t *rep)
{
    plot_set_writers(set, res, n, device);
    char name[64], title[160];
    snprintf(name, sizeof name, "writers-%s", device);
    snprintf(title, sizeof title, "appends/s by writers, 200-byte events, %s%s", device,
             plot_device_note(device));
    return plot_rates_if_enough(gp, out_dir, name, set, title, "writers", rep);
}

static int
plot_interval(FILE *gp, const char *out_dir, const bench_result_t *res, size_t n,
              const char *device, plot_set_t *set, plot_report_t *rep)
{
    plot_set_interval(set, res, n, device);
    char name[64], title[192];
    snprintf(name, sizeof name, "interval-%s", device);
    snprintf(title, sizeof title,
             "stele durable appends/s by commit_interval_us, sync=always, 200-byte JSON, %s%s",
             device, plot_device_note(device));
    return plot_rates_if_enough(gp, out_dir, name, set, title, "commit_interval_us", rep);
}

/* Copies the CDF of result i into f: from its histogram, else from the cdf-NNN-*.dat file
 * an --out run wrote for row i in cdf_dir. Returns 0, or -1 when neither exists. */
static int
plot_copy_cdf(FILE *f, const bench_result_t *res, size_t i, const char *cdf_dir)
{
    if (res[i].hist)
        return bench_hist_write_cdf(res[i].hist, f);
    if (!cdf_dir)
        return -1;
    char pattern[BENCH_PATH_BYTES];
    snprintf(pattern, sizeof pattern, "%s/cdf-%03zu-*.dat", cdf_dir, i);
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0)
        return -1;
    FILE *in = g.gl_pathc == 1 ? fopen(g.gl_pathv[0], "r") : NULL;
    globfree(&g);
    if (!in)
        return -1;
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, got, f);
    fclose(in);
    return 0;
}

/* One data file per series: the CDF of its median round. Returns how many it wrote. */
static size_t
plot_cdf_files(const char *out_dir, const char *name, const plot_set_t *set,
               const bench_result_t *res, const char *cdf_dir, int *has_file)
{
    size_t written = 0;
    for (size_t k = 0; k < set->n; k++) {
        const plot_point_t *pt = &set->series[k].points[0];
        char path[BENCH_PATH_BYTES];
        snprintf(path, sizeof path, "%s/plot-%s-%zu.dat", out_dir, name, k);
        FILE *f = fopen(path, "w");
        has_file[k] = f && plot_copy_cdf(f, res, pt->cell[plot_point_median(pt)], cdf_dir) == 0;
        if (f)
            fclose(f);
        written += (size_t)has_file[k];
    }
    return written;
}

static void
plot_emit_cdf(FILE *gp, const char *name, const char *device, const plot_set_t *set,
              const int *has_file)
{
    fprintf(gp,
            "\n# %s\nreset\nset title 'latency CDF of durable appends (median round), %s%s'\n"
            "set xlabel 'latency (us)'\nset ylabel 'fraction of appends'\nset logscale x\n"
            "set format x '%%.0s%%c'\nset yrange [0:1.03]\n"
            "set autoscale xfix\nset offsets graph 0.03, graph 0.03, 0, 0\n",
            name, device, plot_device_note(device));
    plot_emit_key(gp);
    for (int is_svg = 0; is_svg < 2; is_svg++) {
        plot_emit_terminal(gp, name, set->n, is_svg);
        fprintf(gp, "plot ");
        const char *sep = "";
        for (size_t k = 0; k < set->n; k++) {
            if (!has_file[k])
                continue;
            const plot_series_t *s = &set->series[k];
            char style[128];
            plot_style_text(s, k, 0, style, sizeof style);
            fprintf(gp, "%s'plot-%s-%zu.dat' using 1:2 with lines %s title '%s'", sep, name, k,
                    style, s->label);
            sep = ", \\\n     ";
        }
        fprintf(gp, "\n");
    }
}

static int
plot_cdf(FILE *gp, const char *out_dir, const bench_result_t *res, size_t n, const char *device,
         const char *cdf_dir, plot_set_t *set, plot_report_t *rep)
{
    plot_set_cdf(set, res, n, device);
    if (set->n == 0)
        return 0;
    char name[64];
    snprintf(name, sizeof name, "cdf-%s", device);
    int has_file[PLOT_MAX_SERIES] = {0};
    if (plot_cdf_files(out_dir, name, set, res, cdf_dir, has_file) == 0) {
        plot_skipped(rep, out_dir, name,
                     "no latency histograms (an --out run writes them as cdf-NNN-*.dat beside "
                     "results.csv)");
        return 0;
    }
    plot_emit_cdf(gp, name, device, set, has_file);
    plot_drawn(rep, name);
    return 0;
}

/* Runs gnuplot on out_dir/plots.gp, its output into gnuplot.log. Returns 0 or -EIO. */
static int
plot_run_gnuplot(const char *out_dir, const char *gnuplot)
{
    char log[BENCH_PATH_BYTES], cwd[BENCH_PATH_BYTES];
    snprintf(log, sizeof log, "%s/gnuplot.log", out_dir);
    char *argv[] = {(char *)gnuplot, "plots.gp", NULL};
    if (!getcwd(cwd, sizeof cwd) || chdir(out_dir) != 0)
        return -errno;
    int status = bench_server_run(argv, "gnuplot.log", NULL);
    if (chdir(cwd) != 0)
        return -errno;
    if (status != 0) {
        fprintf(stderr, "stele-bench: gnuplot failed (see %s)\n", log);
        return -EIO;
    }
    return 0;
}

/* Writes every plot's data and plots.gp; fills rep. */
static int
plot_write_all(FILE *gp, const char *out_dir, const bench_result_t *res, size_t n,
               const char *cdf_dir, plot_report_t *rep)
{
    static const char *const devices[] = {"ssd", "hdd-emulated"};
    plot_set_t *set = malloc(sizeof *set);
    if (!set)
        return -ENOMEM;
    int rc = 0;
    for (int d = 0; d < 2 && !rc; d++) {
        rc = plot_writers(gp, out_dir, res, n, devices[d], set, rep);
        rc = rc ? rc : plot_interval(gp, out_dir, res, n, devices[d], set, rep);
        rc = rc ? rc : plot_cdf(gp, out_dir, res, n, devices[d], cdf_dir, set, rep);
    }
    free(set);
    return rc;
}

int
bench_plot_from_csv(const char *csv_path, const char *out_dir)
{
    bench_result_t *res = NULL;
    size_t n = 0;
    if (bench_results_read(csv_path, &res, &n) != 0)
        return -1;
    /* The directory itself is made if missing, as --out does. */
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "stele-bench: could not create --out %s: %s\n", out_dir, strerror(errno));
        free(res);
        return -1;
    }
    char *csv_copy = strdup(csv_path);
    int rc = csv_copy ? bench_plot(out_dir, res, n, dirname(csv_copy)) : -ENOMEM;
    free(csv_copy);
    free(res);
    return rc ? -1 : 0;
}

int
bench_plot(const char *out_dir, const bench_result_t *res, size_t n, const char *cdf_dir)
{
    char path[BENCH_PATH_BYTES];
    snprintf(path, sizeof path, "%s/plots.gp", out_dir);
    FILE *gp = fopen(path, "w");
    if (!gp) {
        fprintf(stderr, "stele-bench: could not write %s: %s\n", path, strerror(errno));
        return -errno;
    }
    fprintf(gp, "# stele-bench's plots: `gnuplot plots.gp` in this directory redraws them.\n");
    plot_report_t rep = {"", ""};
    int rc = plot_write_all(gp, out_dir, res, n, cdf_dir, &rep);
    if (fclose(gp) != 0 && rc == 0)
        rc = -errno;
    fputs(rep.skipped, stderr);
    char gnuplot[BENCH_PATH_BYTES];
    if (rc || bench_server_find("gnuplot", NULL, gnuplot, sizeof gnuplot) != 0) {
        fprintf(stderr, "stele-bench: %s; plot data and %s left for later\n",
                rc ? "could not write plot data" : "gnuplot not found (install gnuplot-nox)", path);
        return rc;
    }
    if (!rep.drawn[0])
        return 0;
    rc = plot_run_gnuplot(out_dir, gnuplot);
    if (rc == 0)
        fprintf(stderr, "stele-bench: plots written to %s: %s (PNG and SVG)\n", out_dir, rep.drawn);
    return rc;
}
