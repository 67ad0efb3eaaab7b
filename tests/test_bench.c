/*
 * test_bench.c: stele-bench reports real numbers.
 *
 * Runs the built stele-bench (a few short cells, --keep so its data stays behind), parses
 * its JSON lines with libbson, and checks that the records it says were appended are the
 * records found afterwards: in the journal through stele_reader (every record, in seq
 * order, no gap), and in the peers through their own count (counted_back). Also checks the
 * histogram's quantiles and the event pool's sizes, which every figure rests on. Nothing
 * here is timed: the cells run one second each and only counts are compared.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <bson/bson.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench_peers.h"
#include <stele.h>

#define TEST_MAX_LINES 16

typedef struct bench_line {
    char system[64];
    char status[16];
    char data_path[1024];
    int64_t appends;
    int64_t warmup_appends;
    int64_t errors;
    int64_t counted_back;
    int64_t durable; /* bson_iter_as_int64 of the JSON boolean: 1 or 0 */
} bench_line_t;

typedef struct bench_output {
    int exit_code;
    size_t n;
    bench_line_t lines[TEST_MAX_LINES];
} bench_output_t;

static int64_t
json_int(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key))
        return INT64_MIN;
    return bson_iter_as_int64(&it);
}

static void
json_str(const bson_t *doc, const char *key, char *out, size_t cap)
{
    bson_iter_t it;
    out[0] = '\0';
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(out, cap, "%s", bson_iter_utf8(&it, NULL));
}

static void
parse_line(const char *text, bench_line_t *l)
{
    bson_error_t error;
    bson_t *doc = bson_new_from_json((const uint8_t *)text, -1, &error);
    if (!doc)
        fail_msg("stele-bench printed a line that is not JSON: %s (%s)", text, error.message);
    json_str(doc, "system", l->system, sizeof l->system);
    json_str(doc, "status", l->status, sizeof l->status);
    json_str(doc, "data_path", l->data_path, sizeof l->data_path);
    l->appends = json_int(doc, "appends");
    l->warmup_appends = json_int(doc, "warmup_appends");
    l->errors = json_int(doc, "errors");
    l->counted_back = json_int(doc, "counted_back");
    l->durable = json_int(doc, "durable");
    bson_destroy(doc);
}

/* Runs stele-bench with args (a NULL-terminated list after --dir DIR --json --keep). */
static void
run_bench(const char *dir, const char *const *args, bench_output_t *out)
{
    char cmd[4096];
    int n =
        snprintf(cmd, sizeof cmd, "'%s' --dir '%s' --json --keep --quiet", STELE_BENCH_EXE, dir);
    for (size_t i = 0; args[i]; i++)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " %s", args[i]);
    n += snprintf(cmd + n, sizeof cmd - (size_t)n, " 2>/dev/null");
    assert_true(n > 0 && (size_t)n < sizeof cmd);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    memset(out, 0, sizeof *out);
    char line[8192];
    while (fgets(line, sizeof line, p))
        if (line[0] == '{' && out->n < TEST_MAX_LINES)
            parse_line(line, &out->lines[out->n++]);
    int status = pclose(p);
    out->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Reads the whole journal back; returns the record count and checks seq contiguity. */
static int64_t
count_journal(const char *dir)
{
    stele_reader_t *r = NULL;
    stele_error_t err;
    int rc = stele_reader_open(dir, &r, &err);
    if (rc)
        fail_msg("stele_reader_open(%s): %s", dir, err.message);
    int64_t n = 0;
    uint64_t last_seq = 0;
    stele_record_t rec;
    while ((rc = stele_reader_next(r, &rec, 0, &err)) == 0) {
        if (n > 0)
            assert_int_equal(rec.seq, last_seq + 1);
        last_seq = rec.seq;
        n++;
    }
    assert_int_equal(rc, STELE_EAGAIN);
    stele_reader_close(r);
    return n;
}

static char *
make_temp_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    char templ[1024];
    snprintf(templ, sizeof templ, "%s/stele-test-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    char *dir = strdup(templ);
    assert_non_null(dir);
    assert_non_null(mkdtemp(dir));
    return dir;
}

static void
remove_dir(char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    free(dir);
}

static void
check_stele_count(const char *const *args)
{
    char *dir = make_temp_dir();
    bench_output_t out;
    run_bench(dir, args, &out);
    assert_int_equal(out.exit_code, 0);
    assert_int_equal(out.n, 1);
    const bench_line_t *l = &out.lines[0];
    assert_string_equal(l->system, "stele");
    assert_string_equal(l->status, "ok");
    assert_int_equal(l->errors, 0);
    assert_true(l->appends > 0);
    assert_true(l->warmup_appends >= 0);
    assert_int_equal(count_journal(l->data_path), l->appends + l->warmup_appends);
    assert_int_equal(l->counted_back, l->appends + l->warmup_appends);
    remove_dir(dir);
}

static void
test_bench_durable_count_equals_journal_records(void **state)
{
    (void)state;
    const char *args[] = {"--writers", "8", "--seconds", "1", "--no-reference", NULL};
    check_stele_count(args);
}

static void
test_bench_unwaited_bson_count_equals_journal_records(void **state)
{
    (void)state;
    const char *args[] = {"--writers", "2",    "--seconds", "1",     "--wait",         "none",
                          "--input",   "bson", "--sync",    "never", "--no-reference", NULL};
    check_stele_count(args);
}

static void
test_bench_warmup_appends_are_reported_apart(void **state)
{
    (void)state;
    const char *args[] = {"--writers", "2",   "--warmup",       "0.5",
                          "--seconds", "0.5", "--no-reference", NULL};
    check_stele_count(args);
}

/* An event just under stele's default max_record_bytes (1 MiB) is larger than that once
 * encoded as BSON (a few bytes per field): the limit must be raised for it, or every
 * append fails with STELE_ETOOBIG ("no append succeeded") and the cell reports nothing. */
static void
test_bench_counts_events_just_under_the_default_record_limit(void **state)
{
    (void)state;
    const char *args[] = {"--record-bytes", "1048570", "--seconds", "0.5", "--no-reference", NULL};
    check_stele_count(args);
}

static void
test_bench_peer_rows_are_counted_back(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    bench_output_t out;
    const char *args[] = {"--system", "sqlite-wal-full,lmdb", "--writers", "4", "--seconds",
                          "1",        "--no-reference",       NULL};
    run_bench(dir, args, &out);
    assert_int_equal(out.exit_code, 0);
    assert_int_equal(out.n, 2);
    for (size_t i = 0; i < out.n; i++) {
        const bench_line_t *l = &out.lines[i];
        if (strcmp(l->status, "skipped") == 0) {
            print_message("%s skipped (built without its library)\n", l->system);
            continue;
        }
        assert_string_equal(l->status, "ok");
        assert_true(l->appends > 0);
        assert_int_equal(l->counted_back, l->appends);
    }
    remove_dir(dir);
}

/* sync=never makes nothing durable before flush or close, so a durable cell would block its
 * writers for good: it is reported as skipped, with the reason, and the run goes on. */
static void
test_bench_skips_durable_waits_without_sync(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    bench_output_t out;
    const char *args[] = {"--sync",    "never", "--wait",         "durable,written",
                          "--seconds", "0.5",   "--no-reference", NULL};
    run_bench(dir, args, &out);
    assert_int_equal(out.exit_code, 0);
    assert_int_equal(out.n, 2);
    assert_string_equal(out.lines[0].status, "skipped");
    assert_string_equal(out.lines[1].status, "ok");
    assert_true(out.lines[1].appends > 0);
    assert_int_equal(out.lines[1].counted_back, out.lines[1].appends);
    remove_dir(dir);
}

/* The two references that store nothing (libbson's parse, the thread wake-up ceiling) run,
 * count their calls, and say they are neither durable nor counted back from a store. */
static void
test_bench_reference_cells_say_what_they_are(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    bench_output_t out;
    const char *args[] = {"--system",       "libbson-json,thread-wakeup",
                          "--writers",      "1,16",
                          "--seconds",      "0.5",
                          "--no-reference", NULL};
    run_bench(dir, args, &out);
    assert_int_equal(out.exit_code, 0);
    assert_int_equal(out.n, 4);
    for (size_t i = 0; i < out.n; i++) {
        const bench_line_t *l = &out.lines[i];
        assert_string_equal(l->status, "ok");
        assert_int_equal(l->errors, 0);
        assert_true(l->appends > 0);
        assert_int_equal(l->durable, 0);
        assert_int_equal(l->counted_back, -1);
    }
    remove_dir(dir);
}

/* The JSON parser cells (bench_parsers.c) run, each after checking that its parser writes
 * libbson's exact BSON for the events it is about to measure (a parser writing other bytes
 * fails its cell), and say they are not stores. A cell whose library stele-bench was built
 * without reports itself skipped; stele's own is always there. */
static void
test_bench_json_parser_cells_write_libbsons_bson(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    bench_output_t out;
    const char *args[] = {"--system",       "stele-json,simdjson-json,yajl-json,jansson-json",
                          "--record-bytes", "200,2000",
                          "--seconds",      "0.3",
                          "--no-reference", NULL};
    run_bench(dir, args, &out);
    assert_int_equal(out.exit_code, 0);
    assert_int_equal(out.n, 8);
    for (size_t i = 0; i < out.n; i++) {
        const bench_line_t *l = &out.lines[i];
        if (strcmp(l->status, "skipped") == 0 && strcmp(l->system, "stele-json") != 0)
            continue;
        if (strcmp(l->status, "ok") != 0)
            fail_msg("%s: %s", l->system, l->status);
        assert_int_equal(l->errors, 0);
        assert_true(l->appends > 0);
        assert_int_equal(l->durable, 0);
        assert_int_equal(l->counted_back, -1);
    }
    remove_dir(dir);
}

/* -- --table: the doc's tables from a results.csv ----------------------------------------- */

/* A row of a crafted results.csv: one cell with the given rate, the rest of a real cell. */
static bench_result_t
table_cell(const char *system, const char *device, int writers, stele_wait_t wait, double rate)
{
    bench_result_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.cell.system, sizeof r.cell.system, "%s", system);
    snprintf(r.cell.device, sizeof r.cell.device, "%s", device);
    r.cell.writers = writers;
    r.cell.seconds = 2;
    r.cell.sync = STELE_SYNC_ALWAYS;
    r.cell.wait = wait;
    r.cell.record_bytes = 200;
    r.is_durable = wait >= STELE_WAIT_DURABLE;
    r.appends = (uint64_t)(rate * 2);
    r.elapsed_s = 2;
    r.appends_per_s = rate;
    r.mean_batch = 1;
    r.p50_us = r.p99_us = r.p999_us = r.max_us = 1e6 / rate;
    r.counted_back = -1;
    return r;
}

/* Writes cells[0..n) as the results.csv --out writes, into dir/results.csv (path in out). */
static void
write_results_csv(const char *dir, const bench_result_t *cells, size_t n, char *path, size_t cap)
{
    snprintf(path, cap, "%s/results.csv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    bench_print_csv_header(f);
    for (size_t i = 0; i < n; i++)
        bench_print_csv(f, &cells[i]);
    assert_int_equal(fclose(f), 0);
}

/* Runs `stele-bench --table path`; returns its exit code, stdout and stderr in out. */
static int
run_table(const char *path, char *out, size_t cap)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' --table '%s' 2>&1", STELE_BENCH_EXE, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void
assert_contains(const char *text, const char *part)
{
    if (!strstr(text, part))
        fail_msg("expected \"%s\" in:\n%s", part, text);
}

/* A cell the file holds several times (the sweep's repeated disk-bound cells) shows the
 * median and the range; a cell that ran once, its rate; a skipped one says so; a reference
 * that is not a store is marked; and the summary the run printed comes out of the same rows
 * (it compares whole cells: of an even number, the lower middle one). */
static void
test_bench_table_shows_the_median_and_range_of_repeated_cells(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    bench_result_t cells[] = {
        table_cell("fsync-loop", "ssd", 1, STELE_WAIT_DURABLE, 100),
        table_cell("stele", "ssd", 1, STELE_WAIT_DURABLE, 250),
        table_cell("fsync-loop", "ssd", 1, STELE_WAIT_DURABLE, 300),
        table_cell("fsync-loop", "ssd", 1, STELE_WAIT_DURABLE, 200),
        table_cell("fsync-loop", "ssd", 1, STELE_WAIT_DURABLE, 400),
        table_cell("stele", "ssd", 64, STELE_WAIT_DURABLE, 123456.7),
        table_cell("stele", "ssd", 64, STELE_WAIT_WRITTEN, 150000),
        table_cell("sqlite-wal-full", "ssd", 64, STELE_WAIT_DURABLE, 0),
        table_cell("thread-wakeup", "ssd", 64, STELE_WAIT_DURABLE, 1234567),
    };
    cells[7].status = BENCH_SKIPPED;
    snprintf(cells[7].note, sizeof cells[7].note, "built without sqlite3, \"see\" setup");
    cells[8].is_durable = 0;
    snprintf(cells[8].note, sizeof cells[8].note, "NOT A STORE: thread wake-up ceiling");
    char path[1200], out[16384];
    write_results_csv(dir, cells, sizeof cells / sizeof cells[0], path, sizeof path);
    assert_int_equal(run_table(path, out, sizeof out), 0);
    assert_contains(out, "| system / mode | durable | 1 | 64 |\n|---|---|---|---|\n");
    assert_contains(out, "| fsync-loop | yes | 250 (100..400) | - |\n");
    assert_contains(out, "| **stele always/durable** | yes | **250** | **123,457** |\n");
    assert_contains(out, "| stele always/written | no | - | 150,000 |\n");
    assert_contains(out, "| sqlite-wal-full | yes | - | skipped |\n");
    assert_contains(out, "| thread-wakeup (not a store) | - | - | 1,234,567 |\n");
    assert_contains(out, "ssd, 1 writer sync=always wait=durable: 250/s = 125% of the fsync loop "
                         "(200/s)");
    assert_contains(out, "thread wake-up ceiling 1234567/s (stele at 10% of it)");
    remove_dir(dir);
}

/* What --table reads is what a run's --out writes: a short real run, then its file. */
static void
test_bench_table_reads_the_results_file_a_run_writes(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char out_dir[1200], path[1300], out[16384];
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    const char *args[] = {"--writers", "1,2", "--seconds", "0.3", "--out", out_dir, NULL};
    bench_output_t run;
    run_bench(dir, args, &run);
    assert_int_equal(run.exit_code, 0);
    assert_int_equal(run.n, 3); /* the fsync loop, then stele at 1 and 2 writers */
    snprintf(path, sizeof path, "%s/results.csv", out_dir);
    assert_int_equal(run_table(path, out, sizeof out), 0);
    assert_contains(out, "ssd, 200-byte events: appends/s by writers");
    assert_contains(out, "| system / mode | durable | 1 | 2 |\n");
    assert_contains(out, "| fsync-loop | yes | ");
    assert_contains(out, "| **stele always/durable** | yes | **");
    assert_contains(out, "ssd, 1 writer sync=always wait=durable: ");
    remove_dir(dir);
}

/* A file that is not a results.csv, or a row that cannot be read, is refused (exit 1) with
 * the line and the column at fault; nothing is printed on stdout for it. */
static void
test_bench_table_refuses_a_bad_file_naming_the_line_and_column(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    bench_result_t cells[] = {table_cell("fsync-loop", "ssd", 1, STELE_WAIT_DURABLE, 100),
                              table_cell("stele", "ssd", 1, STELE_WAIT_DURABLE, 90)};
    char path[1200], out[4096], cmd[2600];
    write_results_csv(dir, cells, 2, path, sizeof path);
    static const struct {
        const char *sed, *message;
    } bad[] = {
        {"3s/,90.0,/,ninety,/", "results.csv line 3: column appends_per_s: not a valid value"},
        {"2s/,always,/,sometimes,/", "results.csv line 2: column sync: not a valid value"},
        {"3s/,-1,/,-2,/", "results.csv line 3: column counted_back: not a valid value"},
        {"2s/,\"\"$//", "results.csv line 2: expected 26 columns, the last one quoted"},
        {"1s/note/remark/", "results.csv line 1: not a stele-bench results.csv"},
        {"2,$d", "results.csv holds no results"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_results_csv(dir, cells, 2, path, sizeof path);
        snprintf(cmd, sizeof cmd, "sed -i '%s' '%s'", bad[i].sed, path);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(run_table(path, out, sizeof out), 1);
        assert_contains(out, bad[i].message);
        assert_null(strstr(out, "|"));
    }
    snprintf(path, sizeof path, "%s/missing.csv", dir);
    assert_int_equal(run_table(path, out, sizeof out), 1);
    assert_contains(out, "could not open");
    remove_dir(dir);
}

/* -- plots: what is drawn is what was measured ----------------------------------------- */

/* The whole file at path (malloc'd, NUL-terminated), or NULL when it cannot be read. */
static char *
slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, out);
    fclose(f);
    assert_int_equal(fclose(out), 0);
    return text;
}

/* Runs `stele-bench --plot-from csv --out out_dir`; returns its exit code, stderr in err. */
static int
run_plot_from(const char *csv, const char *out_dir, char *err, size_t cap)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --plot-from '%s' --out '%s' 2>&1 >/dev/null", STELE_BENCH_EXE,
             csv, out_dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(err, 1, cap - 1, p);
    err[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The data file of the series titled `label` in plot `name` (malloc'd text), or NULL. */
static char *
plot_series_file(const char *out_dir, const char *name, const char *label)
{
    char head[256];
    snprintf(head, sizeof head, "# %s: ", label);
    for (int k = 0; k < 32; k++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/plot-%s-%d.dat", out_dir, name, k);
        char *text = slurp(path);
        if (text && strncmp(text, head, strlen(head)) == 0)
            return text;
        free(text);
    }
    return NULL;
}

/* The line of a series (the data file's first block) must be exactly `line`. */
static void
assert_series_line(const char *out_dir, const char *name, const char *label, const char *line)
{
    char *text = plot_series_file(out_dir, name, label);
    if (!text)
        fail_msg("no series \"%s\" in %s", label, name);
    const char *body = strchr(text, '\n') + 1;
    size_t len = strcspn(body, "#");
    while (len > 0 && body[len - 1] == '\n')
        len--;
    if (strlen(line) != len || strncmp(body, line, len) != 0)
        fail_msg("series \"%s\" of %s draws\n%.*s\nnot\n%s", label, name, (int)len, body, line);
    free(text);
}

static bench_result_t
plot_cell(const char *system, int writers, stele_wait_t wait, bench_input_t input,
          stele_commit_policy_t policy, uint32_t interval_us, double rate)
{
    bench_result_t r = table_cell(system, "ssd", writers, wait, rate);
    r.cell.input = input;
    r.cell.policy = policy;
    r.cell.commit_interval_us = interval_us;
    return r;
}

/*
 * One series per configuration, its line through measured cells only: the median round of
 * a repeated cell (the lower middle one of an even number: 200 of 100, 200, 300, 900, not
 * their mean 375 nor 250), JSON and BSON cells at the same x in series of their own, the
 * fsync loop drawn last so nothing hides it, log axes padded beyond the outermost points,
 * and gnuplot with nothing to complain about.
 */
static void
test_bench_plot_draws_measured_cells_one_series_per_configuration(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    const stele_wait_t D = STELE_WAIT_DURABLE, N = STELE_WAIT_NONE;
    const bench_input_t J = BENCH_INPUT_JSON, B = BENCH_INPUT_BSON;
    const stele_commit_policy_t A = STELE_COMMIT_ADAPTIVE, F = STELE_COMMIT_FIXED;
    bench_result_t cells[] = {
        plot_cell("fsync-loop", 1, D, J, A, 0, 150), plot_cell("stele", 1, D, J, A, 0, 100),
        plot_cell("stele", 1, D, J, A, 0, 900),      plot_cell("stele", 1, D, J, A, 0, 300),
        plot_cell("stele", 1, D, J, A, 0, 200),      plot_cell("stele", 8, D, J, A, 0, 1000),
        plot_cell("stele", 64, D, J, A, 0, 5000),    plot_cell("fsync-loop", 64, D, J, A, 0, 90),
        plot_cell("stele", 1, N, J, A, 0, 180000),   plot_cell("stele", 1, N, B, A, 0, 500000),
        plot_cell("stele", 1, D, J, A, 500, 210),    plot_cell("stele", 1, D, J, A, 2000, 220),
        plot_cell("stele", 1, D, J, F, 2000, 50),    plot_cell("stele", 1, D, J, F, 100000, 10),
    };
    char csv[1200], out_dir[1200], err[8192];
    write_results_csv(dir, cells, sizeof cells / sizeof cells[0], csv, sizeof csv);
    snprintf(out_dir, sizeof out_dir, "%s/plots", dir);
    assert_int_equal(run_plot_from(csv, out_dir, err, sizeof err), 0);
    assert_null(strstr(err, "warning"));
    assert_series_line(out_dir, "writers-ssd", "stele always/durable",
                       "1 200.0\n8 1000.0\n64 5000.0");
    assert_series_line(out_dir, "writers-ssd", "stele always/none (not durable)", "1 180000.0");
    assert_series_line(out_dir, "writers-ssd", "stele always/none bson (not durable)",
                       "1 500000.0");
    assert_series_line(out_dir, "writers-ssd", "fsync-loop", "1 150.0\n64 90.0");
    /* commit_interval_us 0 sits at 500 / 4 on the log axis, ticked "0". */
    assert_series_line(out_dir, "interval-ssd", "1 writer, adaptive",
                       "125 200.0\n500 210.0\n2000 220.0");
    assert_series_line(out_dir, "interval-ssd", "1 writer, fixed (MongoDB 2.4-like)",
                       "2000 50.0\n100000 10.0");

    char path[1400];
    snprintf(path, sizeof path, "%s/plots.gp", out_dir);
    char *gp = slurp(path);
    assert_non_null(gp);
    assert_null(strstr(gp, "smooth"));
    /* The writers plot's last series is the loop; its axes reach past 1..64 and 90..500000. */
    char *writers = strstr(gp, "# writers-ssd");
    assert_non_null(writers);
    char *plot = strstr(writers, "\nplot ");
    assert_non_null(plot);
    char *end = strstr(plot, "\nset terminal svg");
    assert_non_null(end);
    *end = '\0';
    char *last_title = NULL;
    for (char *t = strstr(plot, "title '"); t; t = strstr(t + 1, "title '"))
        last_title = t;
    assert_non_null(last_title);
    assert_int_equal(strncmp(last_title, "title 'fsync-loop'", 18), 0);
    assert_contains(writers, "set xrange [0.625:102.4]");
    assert_contains(writers, "set yrange [50:900000]");
    free(gp);

    if (bench_server_find("gnuplot", NULL, path, sizeof path) == 0) {
        snprintf(path, sizeof path, "%s/gnuplot.log", out_dir);
        char *log = slurp(path);
        assert_non_null(log);
        if (log[0])
            fail_msg("gnuplot said:\n%s", log);
        free(log);
        snprintf(path, sizeof path, "%s/writers-ssd.png", out_dir);
        assert_int_equal(access(path, R_OK), 0);
        snprintf(path, sizeof path, "%s/interval-ssd.svg", out_dir);
        assert_int_equal(access(path, R_OK), 0);
    }
    remove_dir(dir);
}

/* A plot with too little to show is not drawn, and stderr says which and why; one drawn by
 * an earlier run into the same directory is removed rather than left to mislead. */
static void
test_bench_plot_skips_a_plot_with_too_few_points_and_says_so(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    const stele_wait_t D = STELE_WAIT_DURABLE;
    const bench_input_t J = BENCH_INPUT_JSON;
    const stele_commit_policy_t A = STELE_COMMIT_ADAPTIVE, F = STELE_COMMIT_FIXED;
    bench_result_t cells[] = {
        plot_cell("fsync-loop", 1, D, J, A, 0, 150),
        plot_cell("stele", 1, D, J, A, 0, 100),
        plot_cell("stele", 1, D, J, A, 100000, 90),
        plot_cell("stele", 1, D, J, F, 100000, 10),
    };
    char csv[1200], out_dir[1200], err[8192], path[1400];
    write_results_csv(dir, cells, sizeof cells / sizeof cells[0], csv, sizeof csv);
    snprintf(out_dir, sizeof out_dir, "%s/plots", dir);
    assert_int_equal(mkdir(out_dir, 0755), 0);
    snprintf(path, sizeof path, "%s/interval-ssd.png", out_dir);
    FILE *stale = fopen(path, "w");
    assert_non_null(stale);
    fclose(stale);
    assert_int_equal(run_plot_from(csv, out_dir, err, sizeof err), 0);
    assert_contains(err, "writers-ssd not drawn: the run measured writers at 1 value");
    assert_contains(err, "interval-ssd not drawn: the run measured commit_interval_us at 2 values");
    assert_contains(err, "cdf-ssd not drawn: no latency histograms");
    assert_int_equal(access(path, F_OK), -1);
    /* Without --out, or from a file that is not a results.csv: exit 1. */
    char cmd[2600];
    snprintf(cmd, sizeof cmd, "'%s' --plot-from '%s' 2>/dev/null", STELE_BENCH_EXE, csv);
    assert_int_equal(WEXITSTATUS(system(cmd)), 1);
    assert_int_equal(run_plot_from(path, out_dir, err, sizeof err), 1);
    remove_dir(dir);
}

/* A real run's --plot: the latency CDFs come from its histograms, and gnuplot is quiet. */
static void
test_bench_plot_of_a_run_draws_its_cdfs_quietly(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char out_dir[1200], path[1400];
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    const char *args[] = {"--writers", "1,2,4", "--seconds", "0.2",
                          "--out",     out_dir, "--plot",    NULL};
    bench_output_t run;
    run_bench(dir, args, &run);
    assert_int_equal(run.exit_code, 0);
    if (bench_server_find("gnuplot", NULL, path, sizeof path) != 0) {
        print_message("gnuplot not found: only the data files are checked\n");
    } else {
        snprintf(path, sizeof path, "%s/gnuplot.log", out_dir);
        char *log = slurp(path);
        assert_non_null(log);
        if (log[0])
            fail_msg("gnuplot said:\n%s", log);
        free(log);
        snprintf(path, sizeof path, "%s/cdf-ssd.png", out_dir);
        assert_int_equal(access(path, R_OK), 0);
    }
    /* The first series' CDF: latency (us), fraction of appends. */
    snprintf(path, sizeof path, "%s/plot-cdf-ssd-0.dat", out_dir);
    char *cdf = slurp(path);
    assert_non_null(cdf);
    double us = 0, fraction = 0;
    assert_int_equal(sscanf(cdf, "%lf %lf", &us, &fraction), 2);
    assert_true(us > 0 && fraction > 0 && fraction <= 1);
    free(cdf);
    remove_dir(dir);
}

static void
test_bench_rejects_zero_writers(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    bench_output_t out;
    const char *args[] = {"--writers", "0", NULL};
    run_bench(dir, args, &out);
    assert_int_equal(out.exit_code, 1);
    assert_int_equal(out.n, 0);
    remove_dir(dir);
}

/* Durations that are not numbers are refused like any bad value (exit 1, nothing run). NaN
 * fails every comparison, so a range check that only rejects what compares outside the range
 * lets it through: --seconds nan would make the cell sleep for ever and print "seconds":nan,
 * which is not JSON. The cells here would otherwise be skipped at once (sync=never cannot
 * wait=durable), so a missed refusal does not hang the test. */
static void
test_bench_rejects_durations_that_are_not_numbers(void **state)
{
    (void)state;
    static const char *const flags[][2] = {
        {"--seconds", "nan"}, {"--warmup", "nan"}, {"--warmup", "''"}, {"--seconds", "-nan"}};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        char *dir = make_temp_dir();
        bench_output_t out;
        const char *args[] = {flags[i][0], flags[i][1], "--sync",         "never",
                              "--wait",    "durable",   "--no-reference", NULL};
        run_bench(dir, args, &out);
        print_message("%s %s: exit %d, %zu cells\n", flags[i][0], flags[i][1], out.exit_code,
                      out.n);
        assert_int_equal(out.exit_code, 1);
        assert_int_equal(out.n, 0);
        remove_dir(dir);
    }
}

/* A record size the event pool cannot build is a usage error, like one too small. */
static void
test_bench_rejects_record_bytes_above_the_event_limit(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    bench_output_t out;
    const char *args[] = {"--record-bytes", "16760000", "--seconds", "0.2", "--no-reference", NULL};
    run_bench(dir, args, &out);
    print_message("--record-bytes 16760000: exit %d, %zu cells\n", out.exit_code, out.n);
    assert_int_equal(out.exit_code, 1);
    assert_int_equal(out.n, 0);
    remove_dir(dir);
}

/* --probe DIR writes a 64 MiB file into a scratch directory under DIR; an interrupt must
 * remove it like a plan's cleanup does (exit 130). SIGINT's default action would leave
 * DIR/stele-probe-XXXXXX/probe.dat behind. */

/* Whether dir holds an entry (the probe's scratch directory). */
static int
dir_has_entries(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "[ -n \"$(ls -A '%s')\" ]", dir);
    return system(cmd) == 0;
}

static void
test_bench_interrupted_probe_removes_its_files(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null_fd = open("/dev/null", O_WRONLY);
        dup2(null_fd, STDOUT_FILENO);
        dup2(null_fd, STDERR_FILENO);
        execl(STELE_BENCH_EXE, STELE_BENCH_EXE, "--probe", dir, "--seconds", "60", (char *)NULL);
        _exit(127);
    }
    while (!dir_has_entries(dir)) /* the probe has started writing */
        usleep(10000);
    assert_int_equal(kill(pid, SIGINT), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    int leftover = dir_has_entries(dir);
    print_message(
        "probe after SIGINT: %s %d, leftover files: %s\n", WIFEXITED(status) ? "exit" : "signal",
        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), leftover ? "yes" : "no");
    assert_false(leftover);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 130);
    remove_dir(dir);
}

/* -- a store that hangs ------------------------------------------------------------------
 * Writer 0's first append blocks until the test opens the gate; writer 1 appends normally.
 * The harness must give up on writer 0 after the stop grace instead of joining it forever
 * (joined, a hung peer or a wait that can never be met would keep stele-bench from exiting
 * even on SIGTERM), and must not close the store under it. */

typedef struct hang_store {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int gate_open;
    int writers_closed;
    int closed;
} hang_store_t;

static hang_store_t hang = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static int
hang_open(const bench_cell_t *cell, void **state_out, char *note, size_t cap)
{
    (void)cell, (void)note, (void)cap;
    *state_out = &hang;
    return 0;
}

static int
hang_writer_open(void *state, int writer_id, void **wstate_out, char *note, size_t cap)
{
    (void)state, (void)note, (void)cap;
    *wstate_out = (void *)(intptr_t)(writer_id + 1);
    return 0;
}

static int
hang_append(void *state, void *wstate, const bench_event_t *ev)
{
    hang_store_t *h = state;
    (void)ev;
    if ((intptr_t)wstate == 1) {
        pthread_mutex_lock(&h->mu);
        while (!h->gate_open)
            pthread_cond_wait(&h->cv, &h->mu);
        pthread_mutex_unlock(&h->mu);
    } else {
        usleep(1000);
    }
    return 0;
}

static void
hang_writer_close(void *state, void *wstate)
{
    hang_store_t *h = state;
    (void)wstate;
    pthread_mutex_lock(&h->mu);
    h->writers_closed++;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static int
hang_close(void *state, bench_result_t *r)
{
    (void)r;
    ((hang_store_t *)state)->closed = 1;
    return 0;
}

static void
test_bench_abandons_a_cell_whose_store_hangs(void **state)
{
    (void)state;
    const bench_target_t target = {.system = "hang",
                                   .open = hang_open,
                                   .writer_open = hang_writer_open,
                                   .append = hang_append,
                                   .writer_close = hang_writer_close,
                                   .close = hang_close};
    bench_cell_t cell = {.writers = 2,
                         .seconds = 0.2,
                         .stop_grace_seconds = 0.3,
                         .record_bytes = 200,
                         .input = BENCH_INPUT_JSON};
    bench_result_t r;
    bench_run_cell(&target, &cell, &r);
    assert_int_equal(r.status, BENCH_FAILED);
    assert_int_equal(r.is_abandoned, 1);
    assert_non_null(strstr(r.note, "1 of 2 writers still blocked"));
    assert_int_equal(hang.closed, 0);
    pthread_mutex_lock(&hang.mu);
    assert_int_equal(hang.writers_closed, 1); /* writer 1 returned at the stop */
    hang.gate_open = 1;
    pthread_cond_broadcast(&hang.cv);
    while (hang.writers_closed < 2) /* the released writer sees the stop and leaves */
        pthread_cond_wait(&hang.cv, &hang.mu);
    pthread_mutex_unlock(&hang.mu);
    bench_result_release(&r);
}

/* -- a store that is slow, not hung -------------------------------------------------------
 * Appends take turns behind one lock, 150 ms each: at the stop three writers wait their
 * turn, and the last returns ~0.6 s later, longer than the 0.3 s grace, but one returns
 * every 150 ms. Like SQLite's writers queued behind an emulated disk's flushes, that store
 * is slow, not hung: the cell must wait for it and count it, not abandon the run. */

static pthread_mutex_t slow_mu = PTHREAD_MUTEX_INITIALIZER;

static int
slow_open(const bench_cell_t *cell, void **state_out, char *note, size_t cap)
{
    (void)cell, (void)note, (void)cap;
    *state_out = NULL;
    return 0;
}

static int
slow_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)state, (void)wstate, (void)ev;
    pthread_mutex_lock(&slow_mu);
    usleep(150000);
    pthread_mutex_unlock(&slow_mu);
    return 0;
}

static int
slow_close(void *state, bench_result_t *r)
{
    (void)state;
    r->is_durable = 1;
    return 0;
}

static void
test_bench_waits_for_a_slow_store_that_keeps_returning_writers(void **state)
{
    (void)state;
    const bench_target_t target = {
        .system = "slow", .open = slow_open, .append = slow_append, .close = slow_close};
    bench_cell_t cell = {.writers = 4,
                         .seconds = 0.2,
                         .stop_grace_seconds = 0.3,
                         .record_bytes = 200,
                         .input = BENCH_INPUT_JSON};
    bench_result_t r;
    bench_run_cell(&target, &cell, &r);
    assert_int_equal(r.is_abandoned, 0);
    assert_int_equal(r.status, BENCH_OK);
    assert_true(r.appends >= 4); /* each writer's last append counted */
    assert_true(r.elapsed_s >= 0.6);
    bench_result_release(&r);
}

/* -- an interrupt during an append -------------------------------------------------------
 * SIGINT arrives while the only writer is inside an append that takes 300 ms. The run must
 * give that writer its short interrupted grace (BENCH_STOP_GRACE_INTERRUPTED_SECONDS), then
 * close the store and count the cell. Taking the interrupt for a hung store would abandon
 * the cell: store never closed (a peer's server left running), its appends lost. */

static atomic_int interrupt_flag;
static atomic_int interrupt_appends;
static atomic_int interrupt_closed;

static int
interrupt_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)state, (void)wstate, (void)ev;
    atomic_store(&interrupt_flag, 1); /* what the signal thread does on SIGINT */
    usleep(300000);
    atomic_fetch_add(&interrupt_appends, 1);
    return 0;
}

static int
interrupt_close(void *state, bench_result_t *r)
{
    (void)state;
    atomic_store(&interrupt_closed, 1);
    r->counted_back = atomic_load(&interrupt_appends);
    return 0;
}

static void
test_bench_interrupt_closes_the_store_and_counts_the_cell(void **state)
{
    (void)state;
    const bench_target_t target = {.system = "interrupted",
                                   .open = slow_open,
                                   .append = interrupt_append,
                                   .close = interrupt_close};
    bench_cell_t cell = {.writers = 1,
                         .seconds = 60,
                         .record_bytes = 200,
                         .input = BENCH_INPUT_JSON,
                         .interrupted = &interrupt_flag};
    bench_result_t r;
    bench_run_cell(&target, &cell, &r);
    print_message("note: %s\n", r.note);
    assert_int_equal(r.is_abandoned, 0);
    assert_int_equal(atomic_load(&interrupt_closed), 1);
    assert_int_equal(r.status, BENCH_OK);
    assert_int_equal(r.appends, 1);
    assert_int_equal(r.counted_back, r.appends);
    bench_result_release(&r);
}

/* -- fewer writer threads than asked for ---------------------------------------------------
 * When the system refuses threads (a container's pids limit; here an address-space limit
 * in a child process), the cell must fail with a note and return. It once waited forever
 * at the start barrier for the writers that were never created, deaf to SIGINT. The
 * child's alarm turns that hang into a failure instead of a stuck test. */

static int
noop_open(const bench_cell_t *cell, void **state_out, char *note, size_t cap)
{
    (void)cell, (void)note, (void)cap;
    *state_out = NULL;
    return 0;
}

static int
noop_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)state, (void)wstate, (void)ev;
    return 0;
}

static int
noop_close(void *state, bench_result_t *r)
{
    (void)state, (void)r;
    return 0;
}

/* Bytes of address space this process maps now (/proc/self/statm, first field). */
static uint64_t
mapped_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    if (f) {
        if (fscanf(f, "%llu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void
run_cell_short_of_threads(void)
{
    const bench_target_t target = {
        .system = "noop", .open = noop_open, .append = noop_append, .close = noop_close};
    bench_cell_t cell = {
        .writers = 4096, .seconds = 0.1, .record_bytes = 200, .input = BENCH_INPUT_JSON};
    /* Room for a few dozen writer stacks, not for 4096. */
    struct rlimit lim = {.rlim_cur = mapped_bytes() + 64ull * 1024 * 1024,
                         .rlim_max = RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &lim) != 0)
        _exit(2);
    alarm(30);
    bench_result_t r;
    bench_run_cell(&target, &cell, &r);
    int ok = r.status == BENCH_FAILED && strstr(r.note, "could only start") != NULL;
    _exit(ok ? 0 : 1);
}

static void
test_bench_fails_a_cell_whose_writer_threads_cannot_all_start(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        run_cell_short_of_threads();
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status))
        fail_msg("the cell did not return (signal %d): stuck at the start barrier",
                 WTERMSIG(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void
test_hist_quantiles_are_within_resolution(void **state)
{
    (void)state;
    bench_hist_t *h = calloc(1, sizeof *h);
    assert_non_null(h);
    for (uint64_t v = 1; v <= 100000; v++)
        bench_hist_record(h, v * 1000); /* 1 us .. 100 ms, uniform */
    const double qs[] = {0.5, 0.99, 0.999};
    for (size_t i = 0; i < 3; i++) {
        double want = qs[i] * 100000 * 1000;
        double got = (double)bench_hist_quantile(h, qs[i]);
        assert_true(got >= want * 0.999 && got <= want * 1.02);
    }
    assert_int_equal(bench_hist_quantile(h, 1.0), 100000000);
    bench_hist_t *empty = calloc(1, sizeof *empty);
    assert_non_null(empty);
    assert_int_equal(bench_hist_quantile(empty, 0.5), 0);
    bench_hist_merge(empty, h);
    assert_int_equal(empty->count, h->count);
    assert_int_equal(bench_hist_quantile(empty, 0.99), bench_hist_quantile(h, 0.99));
    free(empty);
    free(h);
}

static void
test_events_are_json_objects_of_the_exact_size(void **state)
{
    (void)state;
    const uint32_t sizes[] = {200, 1024, 16384};
    char err[256];
    for (size_t s = 0; s < 3; s++) {
        bench_events_t *ev = bench_events_new(BENCH_INPUT_JSON, sizes[s], 7, 64, err, sizeof err);
        assert_non_null(ev);
        for (uint64_t i = 0; i < 64; i++) {
            const bench_event_t *e = bench_events_get(ev, i);
            assert_int_equal(e->len, sizes[s]);
            bson_error_t error;
            bson_t *doc = bson_new_from_json(e->data, e->len, &error);
            assert_non_null(doc);
            bson_destroy(doc);
        }
        bench_events_free(ev);
    }
    assert_null(bench_events_new(BENCH_INPUT_JSON, 10, 0, 4, err, sizeof err));
    assert_non_null(strstr(err, "out of range"));
}

static void
test_bson_events_are_valid_documents(void **state)
{
    (void)state;
    char err[256];
    bench_events_t *ev = bench_events_new(BENCH_INPUT_BSON, 200, 1, 16, err, sizeof err);
    assert_non_null(ev);
    for (uint64_t i = 0; i < 16; i++) {
        const bench_event_t *e = bench_events_get(ev, i);
        bson_t doc;
        assert_true(bson_init_static(&doc, e->data, e->len));
        assert_true(bson_validate(&doc, BSON_VALIDATE_UTF8 | BSON_VALIDATE_DOLLAR_KEYS, NULL));
    }
    bench_events_free(ev);
}

/* A cell abandoned because its store hung is not closed (closing could hang too), so its
 * server was never stopped and outlived stele-bench; every server spawned and not reaped
 * must go as the run ends. */
static void
test_bench_stop_all_ends_servers_never_stopped(void **state)
{
    (void)state;
    char sleep_path[BENCH_PATH_BYTES];
    assert_int_equal(bench_server_find("sleep", NULL, sleep_path, sizeof sleep_path), 0);
    char *argv[] = {sleep_path, "600", NULL};
    pid_t stopped = bench_server_spawn(argv, "/dev/null", NULL);
    pid_t forgotten = bench_server_spawn(argv, "/dev/null", NULL);
    assert_true(stopped > 0 && forgotten > 0);
    bench_server_stop(stopped, SIGTERM, 1000);
    bench_server_stop_all();
    errno = 0;
    int gone = waitpid(forgotten, NULL, WNOHANG) == -1 && errno == ECHILD; /* reaped */
    if (!gone) {
        kill(forgotten, SIGKILL);
        waitpid(forgotten, NULL, 0);
    }
    assert_true(gone);
}

/* The JSON lines must be UTF-8 whatever a note holds: a note cut at its 256 bytes in the
 * middle of a character, or a peer's message in another encoding, would make the line
 * invalid JSON (libbson refuses it). Such bytes become U+FFFD; valid characters stay. */
static void
test_bench_json_output_stays_utf8_when_a_note_is_cut(void **state)
{
    (void)state;
    bench_result_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.cell.system, sizeof r.cell.system, "stele");
    snprintf(r.cell.device, sizeof r.cell.device, "ssd");
    snprintf(r.note, sizeof r.note, "caf\xc3\xa9 \"q\" \xe2\x82 cut \xff end \xc3");
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    bench_print_json(out, &r);
    fclose(out);
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)text, -1, &berr);
    if (!doc)
        fail_msg("not JSON: %s: %s", berr.message, text);
    bson_iter_t it;
    assert_true(bson_iter_init_find(&it, doc, "note"));
    assert_string_equal(
        bson_iter_utf8(&it, NULL),
        "caf\xc3\xa9 \"q\" \xef\xbf\xbd\xef\xbf\xbd cut \xef\xbf\xbd end \xef\xbf\xbd");
    bson_destroy(doc);
    free(text);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hist_quantiles_are_within_resolution),
        cmocka_unit_test(test_events_are_json_objects_of_the_exact_size),
        cmocka_unit_test(test_bson_events_are_valid_documents),
        cmocka_unit_test(test_bench_rejects_zero_writers),
        cmocka_unit_test(test_bench_stop_all_ends_servers_never_stopped),
        cmocka_unit_test(test_bench_json_output_stays_utf8_when_a_note_is_cut),
        cmocka_unit_test(test_bench_rejects_durations_that_are_not_numbers),
        cmocka_unit_test(test_bench_rejects_record_bytes_above_the_event_limit),
        cmocka_unit_test(test_bench_interrupted_probe_removes_its_files),
        cmocka_unit_test(test_bench_waits_for_a_slow_store_that_keeps_returning_writers),
        cmocka_unit_test(test_bench_abandons_a_cell_whose_store_hangs),
        cmocka_unit_test(test_bench_interrupt_closes_the_store_and_counts_the_cell),
        cmocka_unit_test(test_bench_fails_a_cell_whose_writer_threads_cannot_all_start),
        cmocka_unit_test(test_bench_durable_count_equals_journal_records),
        cmocka_unit_test(test_bench_unwaited_bson_count_equals_journal_records),
        cmocka_unit_test(test_bench_warmup_appends_are_reported_apart),
        cmocka_unit_test(test_bench_counts_events_just_under_the_default_record_limit),
        cmocka_unit_test(test_bench_peer_rows_are_counted_back),
        cmocka_unit_test(test_bench_reference_cells_say_what_they_are),
        cmocka_unit_test(test_bench_json_parser_cells_write_libbsons_bson),
        cmocka_unit_test(test_bench_skips_durable_waits_without_sync),
        cmocka_unit_test(test_bench_table_shows_the_median_and_range_of_repeated_cells),
        cmocka_unit_test(test_bench_table_reads_the_results_file_a_run_writes),
        cmocka_unit_test(test_bench_table_refuses_a_bad_file_naming_the_line_and_column),
        cmocka_unit_test(test_bench_plot_draws_measured_cells_one_series_per_configuration),
        cmocka_unit_test(test_bench_plot_skips_a_plot_with_too_few_points_and_says_so),
        cmocka_unit_test(test_bench_plot_of_a_run_draws_its_cdfs_quietly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
