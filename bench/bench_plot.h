/*
 * bench_plot.h: what the plots draw (bench_plot_series.c: results grouped into series) and
 * how they are drawn (bench_plot.c: data files, a gnuplot script, gnuplot).
 *
 * A series is one configuration (a system, and for stele its sync, wait and input format),
 * a point one x value of it (writers, commit_interval_us), and a point keeps every round
 * that ran it (the sweep's repeated cells, --repeat): the line goes through the median
 * round, which is a measured cell, and the other rounds are drawn as dots beside it.
 */
#ifndef STELE_BENCH_PLOT_H
#define STELE_BENCH_PLOT_H

#include "bench.h"

#define PLOT_MAX_SERIES 32
#define PLOT_MAX_X 16
#define PLOT_MAX_ROUNDS 16
#define PLOT_LABEL_BYTES 128

/* How a series is drawn; series are drawn in this order, so the later ones lie on top. */
typedef enum plot_style {
    PLOT_STYLE_CEILING = 0,     /* not a store (a CPU ceiling): dotted */
    PLOT_STYLE_NOT_DURABLE = 1, /* dashed */
    PLOT_STYLE_DURABLE = 2,
    PLOT_STYLE_STELE = 3,     /* stele's durable default: thick, a colour of its own */
    PLOT_STYLE_REFERENCE = 4, /* the fsync loop: black open circles, last, never hidden */
} plot_style_t;

typedef struct plot_point {
    double x;
    size_t n_rounds;
    double rate[PLOT_MAX_ROUNDS]; /* appends/s of each round */
    size_t cell[PLOT_MAX_ROUNDS]; /* each round's index in the results */
} plot_point_t;

typedef struct plot_series {
    char label[PLOT_LABEL_BYTES];
    plot_style_t style;
    /* Drawing hints a plot sets where its series pair up (the interval plot's adaptive and
     * fixed lines of one writer count): a colour shared by the pair ("" = the style's or
     * the palette's) and a dashed line. */
    char colour[16];
    int is_dashed;
    size_t n_points;
    plot_point_t points[PLOT_MAX_X]; /* by increasing x */
} plot_series_t;

typedef struct plot_set {
    size_t n;
    plot_series_t series[PLOT_MAX_SERIES]; /* by style (plot_style_t), then first seen */
    size_t n_dropped;                      /* cells past the limits above, left out */
} plot_set_t;

/* Fills *set (zeroed first) with the cells of `device` each plot draws:
 *  - writers: appends/s by writers at 200-byte events, commit_interval_us 0, adaptive;
 *    one series per system, and for stele per sync/wait/input;
 *  - interval: stele's durable appends/s (sync=always, JSON) by commit_interval_us, one
 *    series per writer count and policy, for the writer counts measured at a nonzero
 *    interval;
 *  - cdf: the fsync loop's and stele's durable cells (JSON, interval 0, adaptive) at 1 and
 *    64 writers, one series per system and writer count, x = writers. */
void plot_set_writers(plot_set_t *set, const bench_result_t *res, size_t n, const char *device);
void plot_set_interval(plot_set_t *set, const bench_result_t *res, size_t n, const char *device);
void plot_set_cdf(plot_set_t *set, const bench_result_t *res, size_t n, const char *device);

/* The round the line goes through: the median rate, the lower middle one of an even number
 * (as the run's summary takes it), so that it is a cell that was measured. */
size_t plot_point_median(const plot_point_t *p);

/* The distinct x values of the set, increasing, up to cap of them; returns how many. */
size_t plot_set_distinct_x(const plot_set_t *set, double *xs, size_t cap);

/* The smallest and largest positive rate of the set (both 0 when it has none). */
void plot_set_rate_bounds(const plot_set_t *set, double *min_out, double *max_out);

#endif /* STELE_BENCH_PLOT_H */
