/*
 * bench_plot_series.c: which measured cells each plot draws, grouped into series (see
 * bench_plot.h). Pure functions over the results of one run or one results.csv; nothing is
 * averaged or smoothed here: a point keeps the rounds as they were measured.
 */
#include "bench_plot.h"

#include <string.h>

/* How the reference cells (bench_parse.c, bench_wakeup.c) start their note. */
#define PLOT_NOT_A_STORE "NOT A STORE"

static int
plot_is_cell_of(const bench_result_t *r, const char *device)
{
    return r->status == BENCH_OK && strcmp(r->cell.device, device) == 0 &&
           r->cell.record_bytes == 200 && r->appends_per_s > 0;
}

/* The series a point joins: found by label, or appended. NULL when the set is full. */
static plot_series_t *
plot_set_series(plot_set_t *set, const char *label, plot_style_t style)
{
    for (size_t k = 0; k < set->n; k++)
        if (strcmp(set->series[k].label, label) == 0)
            return &set->series[k];
    if (set->n == PLOT_MAX_SERIES)
        return NULL;
    /* Keep the set ordered by style: shift the later styles up by one. */
    size_t at = set->n;
    while (at > 0 && set->series[at - 1].style > style)
        at--;
    memmove(&set->series[at + 1], &set->series[at], (set->n - at) * sizeof set->series[0]);
    set->n++;
    plot_series_t *s = &set->series[at];
    memset(s, 0, sizeof *s);
    snprintf(s->label, sizeof s->label, "%s", label);
    s->style = style;
    return s;
}

/* The point of s at x: found, or inserted in order. NULL when the series is full. */
static plot_point_t *
plot_series_point(plot_series_t *s, double x)
{
    size_t at = 0;
    while (at < s->n_points && s->points[at].x < x)
        at++;
    if (at < s->n_points && s->points[at].x == x)
        return &s->points[at];
    if (s->n_points == PLOT_MAX_X)
        return NULL;
    memmove(&s->points[at + 1], &s->points[at], (s->n_points - at) * sizeof s->points[0]);
    s->n_points++;
    memset(&s->points[at], 0, sizeof s->points[at]);
    s->points[at].x = x;
    return &s->points[at];
}

/* Adds round i of results to the series `label` at x; returns the series (NULL when it
 * did not fit: counted in n_dropped). */
static plot_series_t *
plot_set_add(plot_set_t *set, const char *label, plot_style_t style, double x,
             const bench_result_t *res, size_t i)
{
    plot_series_t *s = plot_set_series(set, label, style);
    plot_point_t *p = s ? plot_series_point(s, x) : NULL;
    if (!p || p->n_rounds == PLOT_MAX_ROUNDS) {
        set->n_dropped++;
        return NULL;
    }
    p->rate[p->n_rounds] = res[i].appends_per_s;
    p->cell[p->n_rounds++] = i;
    return s;
}

/* A colour per writer count, shared by a plot's series of that count. */
static const char *
plot_writers_colour(int writers)
{
    switch (writers) {
    case 1:
        return "#b00000";
    case 8:
        return "#ff7f0e";
    case 64:
        return "#1f77b4";
    default:
        return "#2ca02c";
    }
}

/* A writers-plot series: the system, and for stele its mode and input; what is not durable
 * or not a store says so. */
static plot_style_t
plot_writers_label(const bench_result_t *r, char *out, size_t cap)
{
    const bench_cell_t *c = &r->cell;
    int is_stele = strcmp(c->system, "stele") == 0;
    int is_ceiling = strncmp(r->note, PLOT_NOT_A_STORE, strlen(PLOT_NOT_A_STORE)) == 0;
    const char *tail = is_ceiling ? " (not a store)" : r->is_durable ? "" : " (not durable)";
    if (is_stele)
        snprintf(out, cap, "stele %s/%s%s%s", bench_sync_name(c->sync), bench_wait_name(c->wait),
                 c->input == BENCH_INPUT_BSON ? " bson" : "", tail);
    else
        snprintf(out, cap, "%s%s", c->system, tail);
    if (is_ceiling)
        return PLOT_STYLE_CEILING;
    if (!r->is_durable)
        return PLOT_STYLE_NOT_DURABLE;
    if (strcmp(c->system, "fsync-loop") == 0)
        return PLOT_STYLE_REFERENCE;
    if (is_stele && c->sync == STELE_SYNC_ALWAYS && c->wait == STELE_WAIT_DURABLE &&
        c->input == BENCH_INPUT_JSON)
        return PLOT_STYLE_STELE;
    return PLOT_STYLE_DURABLE;
}

void
plot_set_writers(plot_set_t *set, const bench_result_t *res, size_t n, const char *device)
{
    memset(set, 0, sizeof *set);
    for (size_t i = 0; i < n; i++) {
        const bench_cell_t *c = &res[i].cell;
        if (!plot_is_cell_of(&res[i], device) || c->commit_interval_us != 0 ||
            c->policy != STELE_COMMIT_ADAPTIVE)
            continue;
        char label[PLOT_LABEL_BYTES];
        plot_style_t style = plot_writers_label(&res[i], label, sizeof label);
        plot_set_add(set, label, style, c->writers, res, i);
    }
}

static int
plot_is_stele_durable_json(const bench_result_t *r, const char *device)
{
    const bench_cell_t *c = &r->cell;
    return plot_is_cell_of(r, device) && strcmp(c->system, "stele") == 0 &&
           c->sync == STELE_SYNC_ALWAYS && c->wait == STELE_WAIT_DURABLE &&
           c->input == BENCH_INPUT_JSON;
}

void
plot_set_interval(plot_set_t *set, const bench_result_t *res, size_t n, const char *device)
{
    memset(set, 0, sizeof *set);
    for (size_t i = 0; i < n; i++) {
        if (!plot_is_stele_durable_json(&res[i], device))
            continue;
        /* Only writer counts the run measured at a nonzero interval: the others would be
         * lone dots at 0. */
        int has_interval = 0;
        for (size_t j = 0; j < n && !has_interval; j++)
            has_interval = plot_is_stele_durable_json(&res[j], device) &&
                           res[j].cell.writers == res[i].cell.writers &&
                           res[j].cell.commit_interval_us != 0;
        if (!has_interval)
            continue;
        const bench_cell_t *c = &res[i].cell;
        char label[PLOT_LABEL_BYTES];
        int is_fixed = c->policy == STELE_COMMIT_FIXED;
        snprintf(label, sizeof label, "%d writer%s, %s", c->writers, c->writers == 1 ? "" : "s",
                 is_fixed ? "fixed (MongoDB 2.4-like)" : "adaptive");
        plot_series_t *s =
            plot_set_add(set, label, PLOT_STYLE_DURABLE, c->commit_interval_us, res, i);
        if (s) {
            snprintf(s->colour, sizeof s->colour, "%s", plot_writers_colour(c->writers));
            s->is_dashed = is_fixed;
        }
    }
}

void
plot_set_cdf(plot_set_t *set, const bench_result_t *res, size_t n, const char *device)
{
    memset(set, 0, sizeof *set);
    for (size_t i = 0; i < n; i++) {
        const bench_cell_t *c = &res[i].cell;
        int is_loop = strcmp(c->system, "fsync-loop") == 0;
        if (!plot_is_cell_of(&res[i], device) || c->commit_interval_us != 0 ||
            c->policy != STELE_COMMIT_ADAPTIVE || (c->writers != 1 && c->writers != 64) ||
            (!is_loop && !plot_is_stele_durable_json(&res[i], device)))
            continue;
        char label[PLOT_LABEL_BYTES];
        snprintf(label, sizeof label, "%s, %d writer%s", c->system, c->writers,
                 c->writers == 1 ? "" : "s");
        plot_series_t *s = plot_set_add(
            set, label, is_loop ? PLOT_STYLE_REFERENCE : PLOT_STYLE_STELE, c->writers, res, i);
        if (s)
            s->is_dashed = c->writers != 1;
    }
}

size_t
plot_point_median(const plot_point_t *p)
{
    /* The round with (n-1)/2 rounds below it (ties broken by order). */
    size_t want = (p->n_rounds - 1) / 2;
    for (size_t i = 0; i < p->n_rounds; i++) {
        size_t below = 0;
        for (size_t j = 0; j < p->n_rounds; j++)
            below += p->rate[j] < p->rate[i] || (p->rate[j] == p->rate[i] && j < i);
        if (below == want)
            return i;
    }
    return 0;
}

size_t
plot_set_distinct_x(const plot_set_t *set, double *xs, size_t cap)
{
    size_t n = 0;
    for (size_t k = 0; k < set->n; k++)
        for (size_t p = 0; p < set->series[k].n_points; p++) {
            double x = set->series[k].points[p].x;
            size_t at = 0;
            while (at < n && xs[at] < x)
                at++;
            if ((at < n && xs[at] == x) || n == cap)
                continue;
            memmove(&xs[at + 1], &xs[at], (n - at) * sizeof xs[0]);
            xs[at] = x;
            n++;
        }
    return n;
}

void
plot_set_rate_bounds(const plot_set_t *set, double *min_out, double *max_out)
{
    double lo = 0, hi = 0;
    for (size_t k = 0; k < set->n; k++)
        for (size_t p = 0; p < set->series[k].n_points; p++)
            for (size_t r = 0; r < set->series[k].points[p].n_rounds; r++) {
                double v = set->series[k].points[p].rate[r];
                if (v > 0 && (lo == 0 || v < lo))
                    lo = v;
                if (v > hi)
                    hi = v;
            }
    *min_out = lo;
    *max_out = hi;
}
