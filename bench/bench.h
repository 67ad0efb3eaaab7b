/*
 * bench.h: the pieces of stele-bench shared between its files.
 *
 * A benchmark "cell" is one configuration (system, device, writers, knobs, record shape) run
 * for a fixed time; it yields one bench_result_t. Every system (stele and each peer) plugs
 * into the same writer harness (bench_run.c) through bench_target_t, so the writer threads,
 * the clock, the record pool and the latency histograms are identical for all of them: the
 * only thing that differs between two rows of a table is the store under test.
 */
#ifndef STELE_BENCH_H
#define STELE_BENCH_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <stele.h>

/* ------------------------------------------------------------------------------------------
 * Latency histogram: log-linear buckets (64 per power of two, so ~1.6% resolution) over
 * nanoseconds. One per writer thread, merged at the end; recording is one increment.
 * ------------------------------------------------------------------------------------------ */
#define BENCH_HIST_SUB_BITS 6
#define BENCH_HIST_SUB_COUNT (1u << BENCH_HIST_SUB_BITS)
/* 2^44 ns is ~4.9 hours: any longer latency is clamped into the last bucket. */
#define BENCH_HIST_MAX_EXP 44
#define BENCH_HIST_BUCKETS (BENCH_HIST_SUB_COUNT * (BENCH_HIST_MAX_EXP - BENCH_HIST_SUB_BITS + 2))

typedef struct bench_hist {
    uint64_t count;
    uint64_t sum_ns;
    uint64_t max_ns;
    uint64_t buckets[BENCH_HIST_BUCKETS];
} bench_hist_t;

void bench_hist_record(bench_hist_t *h, uint64_t ns);
void bench_hist_merge(bench_hist_t *into, const bench_hist_t *from);
/* The latency (ns) at quantile q in [0, 1]; 0 for an empty histogram. */
uint64_t bench_hist_quantile(const bench_hist_t *h, double q);
/* Writes "latency_us cumulative_fraction" lines, one per non-empty bucket (for CDF plots). */
int bench_hist_write_cdf(const bench_hist_t *h, FILE *out);

/* ------------------------------------------------------------------------------------------
 * Records: realistic audit events of an exact size, pre-generated so that building them is
 * never part of the measured time.
 * ------------------------------------------------------------------------------------------ */
typedef enum bench_input { BENCH_INPUT_JSON = 0, BENCH_INPUT_BSON = 1 } bench_input_t;

typedef struct bench_event {
    const uint8_t *data; /* JSON text (no NUL counted) or BSON document */
    uint32_t len;
} bench_event_t;

typedef struct bench_events bench_events_t;

/* A pool of `n` distinct events of exactly `record_bytes` bytes (JSON text length or BSON
 * document length) for writer `writer_id`. Returns NULL (with a message in errbuf) when
 * record_bytes is too small for the event's fixed fields. Free with bench_events_free. */
bench_events_t *bench_events_new(bench_input_t input, uint32_t record_bytes, int writer_id,
                                 uint32_t n, char *errbuf, size_t errcap);
const bench_event_t *bench_events_get(const bench_events_t *ev, uint64_t i);
void bench_events_free(bench_events_t *ev);
/* The smallest and the largest record_bytes an event can have. */
uint32_t bench_events_min_bytes(void);
uint32_t bench_events_max_bytes(void);

/* ------------------------------------------------------------------------------------------
 * Cells and results
 * ------------------------------------------------------------------------------------------ */
#define BENCH_NAME_BYTES 48
#define BENCH_NOTE_BYTES 256
#define BENCH_PATH_BYTES 1024

typedef struct bench_cell {
    char system[BENCH_NAME_BYTES]; /* "stele", "fsync-loop", "sqlite-wal-full", ... */
    char device[BENCH_NAME_BYTES]; /* "ssd", "hdd-emulated", or the user's label */
    char dir[BENCH_PATH_BYTES];    /* where this cell may create its files (must exist) */
    int writers;
    double seconds;
    double warmup_seconds; /* appends before the timed window, not counted; 0 = none */
    stele_sync_t sync;
    stele_wait_t wait;
    stele_commit_policy_t policy;
    uint32_t commit_interval_us;
    uint32_t sync_interval_ms;
    uint32_t record_bytes;
    bench_input_t input;
    const char *mongo_uri;     /* for wait=shipped; NULL = none (borrowed) */
    int keep_data;             /* leave the cell's files behind (tests count them back) */
    atomic_int *interrupted;   /* set by the signal thread: cut the cell short (may be NULL) */
    double stop_grace_seconds; /* how long writers may go without one returning after the
                                  stop; 0 = BENCH_STOP_GRACE_SECONDS */
} bench_cell_t;

/* After a cell's time is up, each writer only finishes the append it is in: when none of
 * the writers still blocked returns for this long, the store hangs, and the cell is
 * abandoned (a slow store that keeps returning them is waited for). */
#define BENCH_STOP_GRACE_SECONDS 30.0
/* Once interrupted, the run waits at most this long for blocked writers. */
#define BENCH_STOP_GRACE_INTERRUPTED_SECONDS 3.0

typedef enum bench_status {
    BENCH_OK = 0,
    BENCH_SKIPPED = 1, /* software or device missing: reported, never faked */
    BENCH_FAILED = 2,
} bench_status_t;

typedef struct bench_result {
    bench_cell_t cell;
    bench_status_t status;
    int is_durable;          /* an acknowledged record survives power loss */
    uint64_t appends;        /* acknowledged at the cell's level inside the timed window */
    uint64_t errors;         /* appends that returned an error */
    uint64_t warmup_appends; /* appended during the warm-up (in the store, not in the rate) */
    double elapsed_s;
    double appends_per_s;
    double mb_per_s; /* record payload bytes, not the store's overhead */
    uint64_t syncs;  /* fdatasyncs issued by the store; 0 when it cannot tell */
    double syncs_per_s;
    double mean_batch; /* records per sync/commit; 0 when unknown */
    double p50_us, p99_us, p999_us, max_us;
    int64_t counted_back;     /* records found in the store afterwards; -1 = not counted */
    double ref_appends_per_s; /* the fsync loop's rate in the same run; 0 when not run */
    double ref_p99_us;
    char data_path[BENCH_PATH_BYTES]; /* where the data was left when keep_data */
    char note[BENCH_NOTE_BYTES];
    bench_hist_t *hist; /* merged latencies; owned, freed by bench_result_release */
    int is_abandoned;   /* writers never returned: the store was left open, the run ends */
} bench_result_t;

void bench_result_release(bench_result_t *r);

/* ------------------------------------------------------------------------------------------
 * The writer harness: every system is a bench_target_t.
 * ------------------------------------------------------------------------------------------ */
typedef struct bench_target {
    const char *system;
    /* Opens/starts the store for the cell; *state_out is passed to every other hook.
     * Returns 0, or fills note and returns BENCH_SKIPPED / BENCH_FAILED. */
    int (*open)(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap);
    /* Per writer: a connection or handle of its own (may be NULL hooks). */
    int (*writer_open)(void *state, int writer_id, void **wstate_out, char *note, size_t note_cap);
    /* One durable-as-configured insert. Returns 0 or a nonzero code (counted as an error). */
    int (*append)(void *state, void *wstate, const bench_event_t *ev);
    void (*writer_close)(void *state, void *wstate);
    /* Optional: the timed window starts now (after the warm-up); counters restart here. */
    void (*measure_start)(void *state);
    /* Stops the store; fills syncs, mean_batch, counted_back, is_durable, data_path, note.
     * Returns 0 or BENCH_FAILED. Always frees state. */
    int (*close)(void *state, bench_result_t *r);
} bench_target_t;

/* Runs one cell of `target`: opens it, starts cell->writers threads that append until
 * cell->seconds have passed, then closes it. Fills *r (r->hist owned by r). When writers
 * are still blocked in an append after the stop grace, the cell fails with
 * r->is_abandoned set: those threads and the open store are left as they are (closing the
 * store under them is not safe), and the caller should end the process after its cleanup. */
void bench_run_cell(const bench_target_t *target, const bench_cell_t *cell, bench_result_t *r);

extern const bench_target_t bench_target_stele;
extern const bench_target_t bench_target_stele_signed; /* the same with a signing key */
/* "stele" or "stele-signed": the systems that take stele's knobs (sync, wait, ...). */
int bench_system_is_stele(const char *system);
extern const bench_target_t bench_target_fsync_loop;
/* libbson's JSON parse alone: the reference of the JSON parser comparison. */
extern const bench_target_t bench_target_json_parse;
/* N threads that only sleep until one thread wakes them: the CPU ceiling of N blocking
 * durable writers on this machine (bench_wakeup.c). */
extern const bench_target_t bench_target_thread_wakeup;
/* The same, each writer first parsing its JSON event with libbson: the ceiling of N
 * blocking durable writers of JSON events, whatever the engine does after the parse. */
extern const bench_target_t bench_target_parse_wakeup;

/* The JSON parser comparison (bench_parsers.c): each parser alone, into libbson's BSON,
 * beside libbson-json; stele-json is stele_validate_json (stele's reader and its rules). */
extern const bench_target_t bench_target_json_stele;
extern const bench_target_t bench_target_json_simdjson;
extern const bench_target_t bench_target_json_yajl;
extern const bench_target_t bench_target_json_jansson;

/* libbson's JSON reader fed as one stream (bench_parse.c), for the references
 * that parse: one per writer thread. bench_json_parse returns 0 or -1 (not one object). */
typedef struct bench_json_parser bench_json_parser_t;
bench_json_parser_t *bench_json_parser_new(void);
int bench_json_parse(bench_json_parser_t *p, const bench_event_t *ev);
void bench_json_parser_free(bench_json_parser_t *p);

/* Peers: filled in by bench_peers.c; each is optional and reports itself skipped. */
const bench_target_t *bench_peer_find(const char *system);
/* Names of all peer systems, NULL-terminated. */
const char *const *bench_peer_names(void);

/* ------------------------------------------------------------------------------------------
 * Plans: the list of cells one invocation runs, and where it runs them.
 * ------------------------------------------------------------------------------------------ */
typedef struct bench_plan {
    bench_cell_t *cells;
    size_t n;
    size_t cap;
} bench_plan_t;

int bench_plan_add(bench_plan_t *p, const bench_cell_t *cell);
void bench_plan_free(bench_plan_t *p);

typedef struct bench_run_opts {
    const char *run_dir;     /* the run's own temporary directory (on the SSD / given disk) */
    const char *hdd_dir;     /* the emulated HDD's mount point, NULL when not mounted */
    int json;                /* one JSON line per cell on stdout instead of the table */
    int quiet_progress;      /* no progress bar on stderr */
    FILE *csv;               /* optional */
    FILE *jsonl;             /* optional */
    const char *cdf_dir;     /* write <cell>.cdf latency files here; NULL = none */
    atomic_int *interrupted; /* SIGINT/SIGTERM seen: skip the remaining cells */
} bench_run_opts_t;

/* Runs every cell in order; results (owned by the caller, release each) go into *out.
 * A cell whose system is "fsync-loop" with 1 writer becomes the reference for the cells
 * after it that have the same device and record size. Returns 0 or -errno. */
int bench_plan_run(const bench_plan_t *p, const bench_run_opts_t *o, bench_result_t **out);

/* ------------------------------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------------------------------ */
const char *bench_sync_name(stele_sync_t s);
const char *bench_wait_name(stele_wait_t w);
const char *bench_policy_name(stele_commit_policy_t p);
const char *bench_input_name(bench_input_t in);

void bench_print_json(FILE *out, const bench_result_t *r);
void bench_print_csv_header(FILE *out);
void bench_print_csv(FILE *out, const bench_result_t *r);
void bench_print_table_header(FILE *out);
void bench_print_table_row(FILE *out, const bench_result_t *r);

/* ------------------------------------------------------------------------------------------
 * The emulated HDD (bench_hdd.c + the stele-hddfs FUSE program), the device probe, plots.
 * ------------------------------------------------------------------------------------------ */
typedef struct bench_hdd_model {
    uint32_t rpm;             /* 7200: one rotation is 8.33 ms */
    double seek_ms;           /* average seek when a sync is not sequential to the last one */
    double track_to_track_ms; /* short seek within a few MiB */
    double bandwidth_mb_s;    /* media transfer rate */
} bench_hdd_model_t;

void bench_hdd_model_default(bench_hdd_model_t *m);

typedef struct bench_hdd bench_hdd_t;

/* Mounts the emulated disk (a FUSE passthrough over <run_dir>/hdd-backing) at
 * <run_dir>/hdd. Returns 0, or BENCH_SKIPPED with the reason in note (no /dev/fuse, not
 * root, stele-hddfs missing). */
int bench_hdd_mount(const char *run_dir, const bench_hdd_model_t *m, bench_hdd_t **out, char *note,
                    size_t note_cap);
/* The mount point, or NULL for a NULL handle. */
const char *bench_hdd_path(const bench_hdd_t *h);
/* Unmounts, stops the FUSE process by its PID and removes the backing directory. */
void bench_hdd_unmount(bench_hdd_t *h);

/* --probe DIR: fsync latency distribution and sequential bandwidth for about `seconds`,
 * with recommended knobs. Stops early, removing its files, once *interrupted is set (may
 * be NULL). Returns 0, -EINTR when interrupted, or -errno. */
int bench_probe(const char *dir, double seconds, atomic_int *interrupted);

/* Renders gnuplot plots (PNG and SVG) of the results into out_dir (bench_plot.c). The
 * latency CDFs come from each result's histogram, else (results read from a file) from the
 * cdf-NNN-*.dat files in cdf_dir (may be NULL). Says on stderr what it drew and what not,
 * and why; returns 0 when gnuplot is missing (nothing faked), or a negative code. */
int bench_plot(const char *out_dir, const bench_result_t *res, size_t n, const char *cdf_dir);

/* --plot-from FILE --out DIR: the plots of a results.csv that --out wrote, with the CDF
 * files beside it when there are. Returns 0, or -1 after a message on stderr. */
int bench_plot_from_csv(const char *csv_path, const char *out_dir);

/* Reads a results.csv that --out wrote, as --table does (bench_table.c): *res_out is a
 * malloc'd array of *n_out results in the file's order, without histograms; free() it.
 * Returns 0, or -1 after a message on stderr naming the file, line and column. */
int bench_results_read(const char *csv_path, bench_result_t **res_out, size_t *n_out);

/* --table FILE: reads a results.csv written by --out and prints docs/benchmarks.md's Markdown
 * tables of it and the run's summary on out (bench_table.c). Returns 0, or -1 after a
 * message on stderr naming the file, line and column it could not read. */
int bench_table_print(const char *csv_path, FILE *out);

/* The headline comparisons after a multi-cell run: ratios between cells of the same run. */
void bench_print_summary(FILE *out, const bench_result_t *res, size_t n);
/* After --repeat N: per cell, the median rate, p99 and ratio to the loop across the N
 * repetitions (res holds N blocks of per_rep results). */
void bench_print_repeat_summary(FILE *out, const bench_result_t *res, size_t per_rep,
                                uint32_t reps);

/* dir + "/" + name into out; 0, or -ENAMETOOLONG (out then holds a truncated path). */
int bench_path(char *out, size_t cap, const char *dir, const char *name);
/* snprintf into a note that may legitimately be cut short (messages, not paths). */
void bench_note(char *note, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Monotonic clock in nanoseconds. */
uint64_t bench_now_ns(void);
/* mkdir -p of one level below `parent` with a unique name; fills out. 0 or -errno. */
int bench_make_temp_dir(const char *parent, const char *prefix, char *out, size_t cap);
/* rm -rf of a directory the benchmark created. 0 or -errno. */
int bench_remove_tree(const char *path);

#endif /* STELE_BENCH_H */
