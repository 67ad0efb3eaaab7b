/*
 * bench_table.c: `stele-bench --table FILE.csv`, the tables of docs/benchmarks.md made from a
 * results.csv that --out wrote, so that no figure in the doc is copied by hand.
 *
 * It prints Markdown: for each device and record size, appends/s by writer count with one
 * row per system (stele: one row per sync/wait mode), from the cells at commit_interval_us=0
 * under the adaptive policy; for each device and record size that has them, stele's
 * appends/s by commit_interval_us, one row per writer count and policy; then, in a code
 * block, the summary the run printed (bench_print_summary over the same rows). Where the file
 * holds a cell more than once (the sweep's repeated disk-bound cells, --repeat) a table shows
 * the median of its rates and their range.
 *
 * The file's columns are bench_print_csv's: its header must be exactly the one
 * bench_print_csv_header writes, so a file of another layout is refused rather than misread,
 * and a row that cannot be read is refused naming its line and column. Owns nothing beyond
 * one call.
 */
#include "bench.h"
#include "bench_cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* bench_print_csv's columns: 25 without commas, then the note, quoted (it may hold commas). */
#define TABLE_CSV_COLUMNS 26
/* How the reference cells (bench_parse.c, bench_wakeup.c) start their note. */
#define TABLE_NOT_A_STORE "NOT A STORE"
/* Longest row label: a system name and a stele mode. */
#define TABLE_LABEL_BYTES (BENCH_NAME_BYTES + 48)
/* Room for "median (min..max)", each figure a formatted rate of up to 31 bytes. */
#define TABLE_CELL_BYTES 128

typedef struct table_rows {
    bench_result_t *res;
    size_t n, cap;
} table_rows_t;

/* ------------------------------------------------------------------------------------------
 * Reading the file
 * ------------------------------------------------------------------------------------------ */

/* The header bench_print_csv_header writes, without its newline (malloc'd), or NULL. */
static char *
table_expected_header(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return NULL;
    bench_print_csv_header(mem);
    fclose(mem);
    if (text && len && text[len - 1] == '\n')
        text[len - 1] = '\0';
    return text;
}

static void
table_chomp(char *line)
{
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        line[--len] = '\0';
}

/* Splits `line` in place into TABLE_CSV_COLUMNS fields. Returns 0, or -1 when it has
 * another number of columns or an unquoted note. */
static int
table_split(char *line, char **field)
{
    char *p = line;
    for (int i = 0; i < TABLE_CSV_COLUMNS - 1; i++) {
        char *comma = strchr(p, ',');
        if (!comma)
            return -1;
        *comma = '\0';
        field[i] = p;
        p = comma + 1;
    }
    size_t len = strlen(p);
    if (len < 2 || p[0] != '"' || p[len - 1] != '"')
        return -1;
    p[len - 1] = '\0';
    field[TABLE_CSV_COLUMNS - 1] = p + 1;
    return 0;
}

static int
table_double(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno)
        return -1;
    *out = v;
    return 0;
}

/* A non-negative integer up to max. */
static int
table_uint(const char *s, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || errno || *s == '-' || v > max)
        return -1;
    *out = v;
    return 0;
}

/* The enum value in [0, n) whose name is s, or -1. */
static int
table_name_index(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* The text columns of a row into r; returns -1, or the index of the column it could not read. */
static int
table_parse_names(char **f, bench_result_t *r)
{
    /* bench_output.c's status names, in bench_status_t's order */
    static const char *const status[] = {"ok", "skipped", "failed"};
    const char *sync[3], *wait[4], *policy[2], *input[2];
    for (int v = 0; v < 4; v++) {
        wait[v] = bench_wait_name((stele_wait_t)v);
        if (v < 3)
            sync[v] = bench_sync_name((stele_sync_t)v);
        if (v < 2) {
            policy[v] = bench_policy_name((stele_commit_policy_t)v);
            input[v] = bench_input_name((bench_input_t)v);
        }
    }
    static const int col[5] = {2, 6, 7, 8, 11};
    const int v[5] = {table_name_index(f[2], status, 3), table_name_index(f[6], sync, 3),
                      table_name_index(f[7], wait, 4), table_name_index(f[8], policy, 2),
                      table_name_index(f[11], input, 2)};
    for (int i = 0; i < 5; i++)
        if (v[i] < 0)
            return col[i];
    bench_cell_t *c = &r->cell;
    if (!f[0][0] || strlen(f[0]) >= sizeof c->system)
        return 0;
    if (!f[1][0] || strlen(f[1]) >= sizeof c->device)
        return 1;
    snprintf(c->system, sizeof c->system, "%s", f[0]);
    snprintf(c->device, sizeof c->device, "%s", f[1]);
    r->status = (bench_status_t)v[0];
    c->sync = (stele_sync_t)v[1];
    c->wait = (stele_wait_t)v[2];
    c->policy = (stele_commit_policy_t)v[3];
    c->input = (bench_input_t)v[4];
    snprintf(r->note, sizeof r->note, "%s", f[25]);
    return -1;
}

/* The integer columns; returns -1, or the index of the column it could not read. */
static int
table_parse_counts(char **f, bench_result_t *r)
{
    uint64_t v[7];
    static const int col[7] = {3, 4, 9, 10, 12, 13, 17};
    static const uint64_t max[7] = {1,          1u << 20,   UINT32_MAX, UINT32_MAX,
                                    UINT64_MAX, UINT64_MAX, UINT64_MAX};
    for (int i = 0; i < 7; i++)
        if (table_uint(f[col[i]], max[i], &v[i]))
            return col[i];
    char *end = NULL;
    errno = 0;
    long long back = strtoll(f[24], &end, 10);
    if (end == f[24] || *end || errno || back < -1)
        return 24; /* counted_back: -1 when not counted */
    r->is_durable = (int)v[0];
    r->cell.writers = (int)v[1];
    r->cell.commit_interval_us = (uint32_t)v[2];
    r->cell.record_bytes = (uint32_t)v[3];
    r->appends = v[4];
    r->errors = v[5];
    r->syncs = v[6];
    r->counted_back = (int64_t)back;
    return -1;
}

/* The measured figures; returns -1, or the index of the column it could not read. */
static int
table_parse_figures(char **f, bench_result_t *r)
{
    double *dst[10] = {&r->cell.seconds, &r->elapsed_s,  &r->appends_per_s, &r->mb_per_s,
                       &r->syncs_per_s,  &r->mean_batch, &r->p50_us,        &r->p99_us,
                       &r->p999_us,      &r->max_us};
    static const int col[10] = {5, 14, 15, 16, 18, 19, 20, 21, 22, 23};
    for (int i = 0; i < 10; i++)
        if (table_double(f[col[i]], dst[i]) || *dst[i] < 0)
            return col[i];
    return -1;
}

/* One data row into r; returns -1, the index of the first column it could not read, or
 * TABLE_CSV_COLUMNS when the row does not have the file's columns. */
static int
table_parse_row(char *line, bench_result_t *r)
{
    char *f[TABLE_CSV_COLUMNS];
    memset(r, 0, sizeof *r);
    if (table_split(line, f))
        return TABLE_CSV_COLUMNS;
    int bad = table_parse_names(f, r);
    bad = bad >= 0 ? bad : table_parse_counts(f, r);
    return bad >= 0 ? bad : table_parse_figures(f, r);
}

static int
table_rows_add(table_rows_t *rows, const bench_result_t *r)
{
    if (rows->n == rows->cap) {
        size_t cap = rows->cap ? rows->cap * 2 : 256;
        bench_result_t *grown = realloc(rows->res, cap * sizeof *grown);
        if (!grown)
            return -1;
        rows->res = grown;
        rows->cap = cap;
    }
    rows->res[rows->n++] = *r;
    return 0;
}

/* Checks line 1 against the expected header; on success splits a copy of it into the
 * column names (for messages) in *names_text / names. Returns 0 or -1 (reported). */
static int
table_check_header(const char *path, const char *line, char **names_text, char **names)
{
    char *expected = table_expected_header();
    int ok = expected && strcmp(line, expected) == 0;
    if (!ok)
        fprintf(stderr,
                "stele-bench: %s line 1: not a stele-bench results.csv (the header must be "
                "the one --out writes)\n",
                path);
    if (ok) {
        *names_text = expected;
        char *p = expected;
        for (int i = 0; i < TABLE_CSV_COLUMNS; i++) {
            names[i] = p;
            char *comma = strchr(p, ',');
            if (comma)
                *comma = '\0';
            p = comma ? comma + 1 : p + strlen(p);
        }
    } else {
        free(expected);
    }
    return ok ? 0 : -1;
}

static int
table_read_row(const char *path, size_t lineno, char *line, char *const *names, table_rows_t *rows)
{
    bench_result_t r;
    int bad = table_parse_row(line, &r);
    if (bad == TABLE_CSV_COLUMNS) {
        fprintf(stderr, "stele-bench: %s line %zu: expected %d columns, the last one quoted\n",
                path, lineno, TABLE_CSV_COLUMNS);
        return -1;
    }
    if (bad >= 0) {
        fprintf(stderr, "stele-bench: %s line %zu: column %s: not a valid value\n", path, lineno,
                names[bad]);
        return -1;
    }
    if (table_rows_add(rows, &r)) {
        fprintf(stderr, "stele-bench: out of memory\n");
        return -1;
    }
    return 0;
}

/* Reads every row of the file into rows. Returns 0, or -1 after a message on stderr. */
static int
table_read(const char *path, table_rows_t *rows)
{
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "stele-bench: could not open %s: %s\n", path, strerror(errno));
        return -1;
    }
    char *line = NULL, *names_text = NULL, *names[TABLE_CSV_COLUMNS];
    size_t cap = 0, lineno = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, in) >= 0) {
        table_chomp(line);
        if (++lineno == 1)
            rc = table_check_header(path, line, &names_text, names);
        else if (line[0])
            rc = table_read_row(path, lineno, line, names, rows);
    }
    if (rc == 0 && ferror(in)) {
        fprintf(stderr, "stele-bench: could not read %s: %s\n", path, strerror(errno));
        rc = -1;
    }
    if (rc == 0 && rows->n == 0) {
        fprintf(stderr, "stele-bench: %s holds no results\n", path);
        rc = -1;
    }
    free(line);
    free(names_text);
    fclose(in);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * Printing
 * ------------------------------------------------------------------------------------------ */

/* Which cells one table shows: one device and one record size; for a table by
 * commit_interval_us, stele's cells of one writer count, policy and mode. */
typedef struct table_scope {
    const char *device;
    uint32_t record_bytes;
    const bench_result_t *row; /* the first cell of the row being printed */
} table_scope_t;

static int
table_is_reference(const bench_result_t *r)
{
    return strncmp(r->note, TABLE_NOT_A_STORE, strlen(TABLE_NOT_A_STORE)) == 0;
}

static int
table_is_stele(const bench_result_t *r)
{
    return strcmp(r->cell.system, "stele") == 0;
}

static int
table_in_scope(const bench_result_t *r, const table_scope_t *s)
{
    return strcmp(r->cell.device, s->device) == 0 && r->cell.record_bytes == s->record_bytes;
}

/* A cell of the table by writers: commit_interval_us=0 under the adaptive policy. */
static int
table_in_writers_grid(const bench_result_t *r, const table_scope_t *s)
{
    return table_in_scope(r, s) && r->cell.commit_interval_us == 0 &&
           r->cell.policy == STELE_COMMIT_ADAPTIVE;
}

/* A cell of the table by interval: stele with an interval or the fixed policy. */
static int
table_in_interval_grid(const bench_result_t *r, const table_scope_t *s)
{
    return table_in_scope(r, s) && table_is_stele(r) &&
           (r->cell.commit_interval_us > 0 || r->cell.policy == STELE_COMMIT_FIXED);
}

/* The row of the table by writers a cell belongs to: its system, and stele's mode. */
static void
table_row_label(const bench_result_t *r, char *out, size_t cap)
{
    const bench_cell_t *c = &r->cell;
    if (table_is_stele(r))
        snprintf(out, cap, "stele %s/%s%s", bench_sync_name(c->sync), bench_wait_name(c->wait),
                 c->input == BENCH_INPUT_BSON ? " bson" : "");
    else
        snprintf(out, cap, "%s%s", c->system, table_is_reference(r) ? " (not a store)" : "");
}

static int
table_same_row(const bench_result_t *a, const bench_result_t *b)
{
    char la[TABLE_LABEL_BYTES], lb[TABLE_LABEL_BYTES];
    table_row_label(a, la, sizeof la);
    table_row_label(b, lb, sizeof lb);
    return strcmp(la, lb) == 0;
}

/* The same row of the table by interval: writers, policy and stele's mode. */
static int
table_same_interval_row(const bench_result_t *a, const bench_result_t *b)
{
    const bench_cell_t *x = &a->cell, *y = &b->cell;
    return x->writers == y->writers && x->policy == y->policy && x->sync == y->sync &&
           x->wait == y->wait && x->input == y->input;
}

static int
table_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A rate as the doc prints it: thousands separated by commas, one decimal below 100/s. */
static void
table_format_rate(double v, char *out, size_t cap)
{
    if (v < 100) {
        snprintf(out, cap, "%.1f", v);
        return;
    }
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v);
    size_t n = strlen(digits), o = 0;
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
}

/* What a table shows for the cells same[0..k): the rate of the one cell that ran, or the
 * median of several and their range; without one that ran, the first's status; "-" for none.
 * `bold` is the Markdown emphasis put around the rate ("" or "**"). */
static void
table_format_cell(const bench_result_t *const *same, size_t k, const char *bold, char *out,
                  size_t cap)
{
    double rate[64];
    size_t n = 0;
    for (size_t i = 0; i < k && n < sizeof rate / sizeof rate[0]; i++)
        if (same[i]->status == BENCH_OK)
            rate[n++] = same[i]->appends_per_s;
    if (n == 0) {
        snprintf(out, cap, "%s",
                 k == 0                             ? "-"
                 : same[0]->status == BENCH_SKIPPED ? "skipped"
                                                    : "failed");
        return;
    }
    qsort(rate, n, sizeof *rate, table_cmp_double);
    double median = n % 2 ? rate[n / 2] : (rate[n / 2 - 1] + rate[n / 2]) / 2;
    char med[32], lo[32], hi[32];
    table_format_rate(median, med, sizeof med);
    table_format_rate(rate[0], lo, sizeof lo);
    table_format_rate(rate[n - 1], hi, sizeof hi);
    if (strcmp(lo, hi) == 0)
        snprintf(out, cap, "%s%s%s", bold, med, bold);
    else
        snprintf(out, cap, "%s%s%s (%s..%s)", bold, med, bold, lo, hi);
}

/* Sorted distinct values of `key` over the cells `in` accepts, into vals (room for
 * rows->n + 1); `with_zero` adds 0. Returns how many. */
static size_t
table_columns(const table_rows_t *rows, const table_scope_t *s,
              int (*in)(const bench_result_t *, const table_scope_t *),
              uint32_t (*key)(const bench_result_t *), int with_zero, uint32_t *vals)
{
    size_t n = 0;
    if (with_zero)
        vals[n++] = 0;
    for (size_t i = 0; i < rows->n; i++) {
        if (!in(&rows->res[i], s))
            continue;
        uint32_t v = key(&rows->res[i]);
        size_t j = 0;
        while (j < n && vals[j] != v)
            j++;
        if (j == n)
            vals[n++] = v;
    }
    for (size_t i = 1; i < n; i++) /* insertion sort: a handful of columns */
        for (size_t j = i; j > 0 && vals[j - 1] > vals[j]; j--) {
            uint32_t t = vals[j];
            vals[j] = vals[j - 1];
            vals[j - 1] = t;
        }
    return n;
}

static uint32_t
table_key_writers(const bench_result_t *r)
{
    return (uint32_t)r->cell.writers;
}

static uint32_t
table_key_interval(const bench_result_t *r)
{
    return r->cell.commit_interval_us;
}

/* Prints the cell of the table by writers at row s->row and `writers`. */
static void
table_print_writers_cell(FILE *out, const table_rows_t *rows, const table_scope_t *s,
                         uint32_t writers, int is_bold, const bench_result_t **same)
{
    size_t k = 0;
    for (size_t i = 0; i < rows->n; i++) {
        const bench_result_t *r = &rows->res[i];
        if (table_in_writers_grid(r, s) && (uint32_t)r->cell.writers == writers &&
            table_same_row(r, s->row))
            same[k++] = r;
    }
    char text[TABLE_CELL_BYTES];
    table_format_cell(same, k, is_bold ? "**" : "", text, sizeof text);
    fprintf(out, " %s |", text);
}

static void
table_print_writers_row(FILE *out, const table_rows_t *rows, const table_scope_t *s,
                        const uint32_t *writers, size_t n_writers, const bench_result_t **same)
{
    const bench_result_t *r = s->row;
    char label[TABLE_LABEL_BYTES];
    table_row_label(r, label, sizeof label);
    /* the headline: what an application asking for durability gets */
    int is_bold = table_is_stele(r) && r->cell.sync == STELE_SYNC_ALWAYS &&
                  r->cell.wait == STELE_WAIT_DURABLE && r->cell.input == BENCH_INPUT_JSON;
    const char *durable = table_is_reference(r) ? "-" : r->is_durable ? "yes" : "no";
    fprintf(out, is_bold ? "| **%s** | %s |" : "| %s | %s |", label, durable);
    for (size_t w = 0; w < n_writers; w++)
        table_print_writers_cell(out, rows, s, writers[w], is_bold, same);
    fprintf(out, "\n");
}

/* The index of the first cell `in` accepts that shares `same_row`'s row with cell i. */
static size_t
table_first_of_row(const table_rows_t *rows, const table_scope_t *s, size_t i,
                   int (*in)(const bench_result_t *, const table_scope_t *),
                   int (*same_row)(const bench_result_t *, const bench_result_t *))
{
    size_t j = 0;
    while (j < i && !(in(&rows->res[j], s) && same_row(&rows->res[j], &rows->res[i])))
        j++;
    return j;
}

/* The header row: the `n_labels` label columns (`labels`, with their separators), then one
 * column per value of cols. */
static void
table_print_header(FILE *out, const char *labels, int n_labels, const uint32_t *cols, size_t n_cols,
                   const char *suffix)
{
    fprintf(out, "| %s |", labels);
    for (size_t c = 0; c < n_cols; c++)
        fprintf(out, " %u%s |", cols[c], suffix);
    fprintf(out, "\n|");
    for (size_t c = 0; c < n_cols + (size_t)n_labels; c++)
        fprintf(out, "---|");
    fprintf(out, "\n");
}

/* Appends/s by writer count, a row per system and stele mode. */
static void
table_print_writers(FILE *out, const table_rows_t *rows, table_scope_t *s, uint32_t *cols,
                    const bench_result_t **same)
{
    size_t n_cols = table_columns(rows, s, table_in_writers_grid, table_key_writers, 0, cols);
    if (n_cols == 0)
        return;
    fprintf(out, "\n%s, %u-byte events: appends/s by writers\n\n", s->device, s->record_bytes);
    table_print_header(out, "system / mode | durable", 2, cols, n_cols, "");
    for (size_t i = 0; i < rows->n; i++) {
        if (!table_in_writers_grid(&rows->res[i], s) ||
            table_first_of_row(rows, s, i, table_in_writers_grid, table_same_row) != i)
            continue;
        s->row = &rows->res[i];
        table_print_writers_row(out, rows, s, cols, n_cols, same);
    }
}

static void
table_print_interval_row(FILE *out, const table_rows_t *rows, const table_scope_t *s,
                         const uint32_t *cols, size_t n_cols, const bench_result_t **same)
{
    const bench_cell_t *c = &s->row->cell;
    char mode[64] = "";
    if (c->sync != STELE_SYNC_ALWAYS || c->wait != STELE_WAIT_DURABLE ||
        c->input != BENCH_INPUT_JSON)
        snprintf(mode, sizeof mode, ", %s/%s%s", bench_sync_name(c->sync), bench_wait_name(c->wait),
                 c->input == BENCH_INPUT_BSON ? " bson" : "");
    fprintf(out, "| %d writer%s, %s%s |", c->writers, c->writers == 1 ? "" : "s",
            bench_policy_name(c->policy), mode);
    for (size_t col = 0; col < n_cols; col++) {
        size_t k = 0;
        for (size_t i = 0; i < rows->n; i++) {
            const bench_result_t *r = &rows->res[i];
            if (table_in_scope(r, s) && table_is_stele(r) && table_same_interval_row(r, s->row) &&
                r->cell.commit_interval_us == cols[col])
                same[k++] = r;
        }
        char text[TABLE_CELL_BYTES];
        table_format_cell(same, k, "", text, sizeof text);
        fprintf(out, " %s |", text);
    }
    fprintf(out, "\n");
}

/* stele's appends/s by commit_interval_us, a row per writer count, policy and mode; the
 * column at 0 is the adaptive cell of the table by writers. */
static void
table_print_intervals(FILE *out, const table_rows_t *rows, table_scope_t *s, uint32_t *cols,
                      const bench_result_t **same)
{
    size_t n_cols = table_columns(rows, s, table_in_interval_grid, table_key_interval, 1, cols);
    if (n_cols < 2)
        return;
    fprintf(out, "\n%s, %u-byte events: stele's appends/s by commit_interval_us\n\n", s->device,
            s->record_bytes);
    table_print_header(out, "writers, policy", 1, cols, n_cols, " us");
    for (size_t i = 0; i < rows->n; i++) {
        if (!table_in_interval_grid(&rows->res[i], s) ||
            table_first_of_row(rows, s, i, table_in_interval_grid, table_same_interval_row) != i)
            continue;
        s->row = &rows->res[i];
        table_print_interval_row(out, rows, s, cols, n_cols, same);
    }
}

/* The summary the run printed, from the same rows, in a code block. */
static void
table_print_summary(FILE *out, const table_rows_t *rows)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return;
    bench_print_summary(mem, rows->res, rows->n);
    fclose(mem);
    const char *body = text;
    while (*body == '\n')
        body++;
    fprintf(out, "\n```\n%s```\n", body);
    free(text);
}

static int
table_print_all(FILE *out, const table_rows_t *rows)
{
    uint32_t *cols = malloc((rows->n + 1) * sizeof *cols);
    const bench_result_t **same = malloc(rows->n * sizeof *same);
    if (!cols || !same) {
        free(cols);
        free(same);
        fprintf(stderr, "stele-bench: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < rows->n; i++) {
        const bench_result_t *r = &rows->res[i];
        table_scope_t s = {.device = r->cell.device, .record_bytes = r->cell.record_bytes};
        size_t j = 0;
        while (j < i && !table_in_scope(&rows->res[j], &s))
            j++;
        if (j < i)
            continue; /* this device and record size are printed already */
        table_print_writers(out, rows, &s, cols, same);
        table_print_intervals(out, rows, &s, cols, same);
    }
    table_print_summary(out, rows);
    free(cols);
    free(same);
    return 0;
}

int
bench_results_read(const char *csv_path, bench_result_t **res_out, size_t *n_out)
{
    table_rows_t rows = {0};
    if (table_read(csv_path, &rows) != 0) {
        free(rows.res);
        return -1;
    }
    *res_out = rows.res;
    *n_out = rows.n;
    return 0;
}

int
bench_table_print(const char *csv_path, FILE *out)
{
    table_rows_t rows = {0};
    int rc = table_read(csv_path, &rows);
    if (rc == 0)
        rc = table_print_all(out, &rows);
    free(rows.res);
    return rc;
}
