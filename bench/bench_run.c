/*
 * bench_run.c: the writer harness every system runs in, and small shared helpers.
 *
 * bench_run_cell() opens the target, starts cell->writers threads that each open their own
 * connection/handle and build their own event pool *before* a start gate, then append
 * back to back until the main thread raises `stop` after cell->seconds. Each writer times
 * every append with the monotonic clock into its own histogram; the histograms are merged
 * after join, so the hot loop shares nothing but the target itself and relaxed atomic
 * loads of `stop` and `measuring`. With a warm-up (cell->warmup_seconds), writers append
 * from the gate on but count and time nothing until `measuring` rises; those appends
 * are reported apart (warmup_appends). The timed window runs from then to the last
 * writer's exit, so an append in flight when `stop` rises is counted with its time.
 */
#include "bench.h"

#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Writers get modest stacks: 512 threads x 8 MiB default would reserve 4 GiB. */
#define RUN_WRITER_STACK_BYTES (512u * 1024)
/* All writers' event pools together stay under this, whatever the writer count. */
#define RUN_POOL_TOTAL_BYTES (32u * 1024 * 1024)
#define RUN_POOL_MIN_EVENTS 16u
#define RUN_POOL_MAX_EVENTS 1024u
/* A writer whose store keeps failing stops after this many errors instead of spinning. */
#define RUN_MAX_ERRORS_PER_WRITER 1000u

/* Writers wait here until the main thread opens it. Unlike a barrier, the number of parties
 * is known only once the threads are created: when fewer start than asked for, the gate
 * opens for those that did rather than waiting for ones that never will. */
typedef struct run_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_arrived; /* protected by mu, as is is_open */
    int is_open;
} run_gate_t;

typedef struct run_shared {
    const bench_target_t *target;
    bench_cell_t cell; /* a copy: writers may outlive the caller's (see run_abandon) */
    void *state;
    run_gate_t start;
    atomic_int measuring;
    atomic_int stop;
    _Atomic uint64_t last_return_ns; /* when a writer last came back from its final append */
} run_shared_t;

typedef struct run_writer {
    run_shared_t *sh;
    int id;
    pthread_t thread;
    int is_started;
    bench_hist_t *hist;
    uint64_t n_ok;
    uint64_t n_warmup;
    uint64_t n_errors;
    int open_rc;
    char note[BENCH_NOTE_BYTES];
} run_writer_t;

static int
run_gate_init(run_gate_t *g)
{
    g->n_arrived = 0;
    g->is_open = 0;
    if (pthread_mutex_init(&g->mu, NULL))
        return -1;
    if (pthread_cond_init(&g->cv, NULL)) {
        pthread_mutex_destroy(&g->mu);
        return -1;
    }
    return 0;
}

static void
run_gate_destroy(run_gate_t *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

/* A writer: says it is ready, then waits for the gate to open. */
static void
run_gate_pass(run_gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    g->n_arrived++;
    pthread_cond_broadcast(&g->cv);
    while (!g->is_open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

/* The main thread: waits until `n_writers` are ready, then lets them all go. */
static void
run_gate_open(run_gate_t *g, int n_writers)
{
    pthread_mutex_lock(&g->mu);
    while (g->n_arrived < n_writers)
        pthread_cond_wait(&g->cv, &g->mu);
    g->is_open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

uint64_t
bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t
run_pool_events(const bench_cell_t *cell)
{
    uint64_t per_writer = RUN_POOL_TOTAL_BYTES / (uint64_t)(cell->writers > 0 ? cell->writers : 1);
    uint64_t n = per_writer / cell->record_bytes;
    if (n < RUN_POOL_MIN_EVENTS)
        n = RUN_POOL_MIN_EVENTS;
    if (n > RUN_POOL_MAX_EVENTS)
        n = RUN_POOL_MAX_EVENTS;
    return (uint32_t)n;
}

static void
run_writer_loop(run_writer_t *w, void *wstate, const bench_events_t *ev)
{
    const bench_target_t *t = w->sh->target;
    for (uint64_t i = 0; !atomic_load_explicit(&w->sh->stop, memory_order_relaxed); i++) {
        uint64_t t0 = bench_now_ns();
        int rc = t->append(w->sh->state, wstate, bench_events_get(ev, i));
        uint64_t t1 = bench_now_ns();
        if (rc == 0 && !atomic_load_explicit(&w->sh->measuring, memory_order_relaxed)) {
            w->n_warmup++;
        } else if (rc == 0) {
            bench_hist_record(w->hist, t1 - t0);
            w->n_ok++;
        } else if (++w->n_errors >= RUN_MAX_ERRORS_PER_WRITER) {
            break;
        }
    }
}

static void *
run_writer_main(void *arg)
{
    run_writer_t *w = arg;
    const bench_cell_t *cell = &w->sh->cell;
    void *wstate = NULL;
    bench_events_t *ev = bench_events_new(cell->input, cell->record_bytes, w->id,
                                          run_pool_events(cell), w->note, sizeof w->note);
    w->open_rc = ev ? 0 : BENCH_FAILED;
    if (ev && w->sh->target->writer_open)
        w->open_rc =
            w->sh->target->writer_open(w->sh->state, w->id, &wstate, w->note, sizeof w->note);
    run_gate_pass(&w->sh->start);
    if (w->open_rc == 0)
        run_writer_loop(w, wstate, ev);
    atomic_store(&w->sh->last_return_ns, bench_now_ns());
    if (w->open_rc == 0 && w->sh->target->writer_close)
        w->sh->target->writer_close(w->sh->state, wstate);
    bench_events_free(ev);
    return NULL;
}

/* Sleeps until ns have passed or the run is interrupted (checked every slice). */
static void
run_sleep_ns(uint64_t ns, atomic_int *interrupted)
{
    const uint64_t slice_ns = 50 * 1000000ull;
    uint64_t end = bench_now_ns() + ns;
    for (uint64_t now = bench_now_ns(); now < end; now = bench_now_ns()) {
        if (interrupted && atomic_load(interrupted))
            return;
        uint64_t left = end - now < slice_ns ? end - now : slice_ns;
        struct timespec ts = {.tv_sec = (time_t)(left / 1000000000ull),
                              .tv_nsec = (long)(left % 1000000000ull)};
        nanosleep(&ts, NULL);
    }
}

static void
run_fill_latencies(bench_result_t *r)
{
    const bench_hist_t *h = r->hist;
    r->p50_us = (double)bench_hist_quantile(h, 0.50) / 1000.0;
    r->p99_us = (double)bench_hist_quantile(h, 0.99) / 1000.0;
    r->p999_us = (double)bench_hist_quantile(h, 0.999) / 1000.0;
    r->max_us = (double)h->max_ns / 1000.0;
}

/* Starts the writers; returns how many started. */
static int
run_start_writers(run_shared_t *sh, run_writer_t *ws, int n)
{
    pthread_attr_t attr;
    if (pthread_attr_init(&attr))
        return 0;
    pthread_attr_setstacksize(&attr, RUN_WRITER_STACK_BYTES);
    int started = 0;
    for (int i = 0; i < n; i++) {
        ws[i].sh = sh;
        ws[i].id = i;
        ws[i].hist = calloc(1, sizeof *ws[i].hist);
        if (!ws[i].hist || pthread_create(&ws[i].thread, &attr, run_writer_main, &ws[i]))
            break;
        ws[i].is_started = 1;
        started++;
    }
    pthread_attr_destroy(&attr);
    return started;
}

/* How long writers may go without one of them returning after the stop. */
static uint64_t
run_stop_grace_ns(const bench_cell_t *cell)
{
    double grace =
        cell->stop_grace_seconds > 0 ? cell->stop_grace_seconds : BENCH_STOP_GRACE_SECONDS;
    return (uint64_t)(grace * 1e9);
}

/* The moment the writers must have returned by: the grace after the stop, or after the last
 * writer that returned, since a store that is only slow (SQLite's writers queued one at a
 * time behind an emulated disk's flushes) keeps returning them; a hung one returns none.
 * Once interrupted, a short grace from the interrupt, extended no more. */
static uint64_t
run_stop_deadline_ns(run_shared_t *sh, uint64_t stop_ns, uint64_t deadline_ns, uint64_t now)
{
    const bench_cell_t *cell = &sh->cell;
    if (cell->interrupted && atomic_load(cell->interrupted)) {
        uint64_t soon = now + (uint64_t)(BENCH_STOP_GRACE_INTERRUPTED_SECONDS * 1e9);
        /* 0: no deadline yet (the first look), not one that has passed */
        return deadline_ns != 0 && deadline_ns < soon ? deadline_ns : soon;
    }
    uint64_t last = atomic_load(&sh->last_return_ns);
    uint64_t from = last > stop_ns ? last : stop_ns;
    uint64_t deadline = from + run_stop_grace_ns(cell);
    return deadline > deadline_ns ? deadline : deadline_ns;
}

/* The CLOCK_REALTIME moment `ns` from now, as pthread_timedjoin_np wants it. */
static struct timespec
run_realtime_in(uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec = (time_t)(t / 1000000000ull);
    ts.tv_nsec = (long)(t % 1000000000ull);
    return ts;
}

/* Joins every started writer by the deadline (run_stop_deadline_ns). Returns how many are
 * still running (their is_started stays set). */
static int
run_join_writers(run_writer_t *ws, int n, run_shared_t *sh, uint64_t stop_ns)
{
    const uint64_t slice_ns = 100000000ull; /* an interrupt is noticed within a slice */
    uint64_t deadline_ns = 0;
    int running = 0;
    for (int i = 0; i < n; i++) {
        while (ws[i].is_started) {
            uint64_t now = bench_now_ns();
            deadline_ns = run_stop_deadline_ns(sh, stop_ns, deadline_ns, now);
            if (now >= deadline_ns) { /* one last look: it may have returned meanwhile */
                if (pthread_tryjoin_np(ws[i].thread, NULL) == 0)
                    ws[i].is_started = 0;
                break;
            }
            struct timespec until =
                run_realtime_in(deadline_ns - now < slice_ns ? deadline_ns - now : slice_ns);
            if (pthread_timedjoin_np(ws[i].thread, NULL, &until) == 0)
                ws[i].is_started = 0;
        }
        running += ws[i].is_started;
    }
    return running;
}

static void
run_collect(run_writer_t *ws, int n, bench_result_t *r)
{
    for (int i = 0; i < n; i++) {
        if (ws[i].hist)
            bench_hist_merge(r->hist, ws[i].hist);
        r->appends += ws[i].n_ok;
        r->warmup_appends += ws[i].n_warmup;
        r->errors += ws[i].n_errors;
        if (ws[i].open_rc && r->note[0] == '\0')
            snprintf(r->note, sizeof r->note, "writer %d: %s", i, ws[i].note);
        free(ws[i].hist);
    }
}

/* Writers that never returned still use the store, their histograms and the gate: all
 * of it is left allocated, and the result says why the run cannot go on. */
static void
run_abandon(bench_result_t *r, int blocked, int n, double waited_s, double grace_s)
{
    r->status = BENCH_FAILED;
    r->is_abandoned = 1;
    snprintf(r->note, sizeof r->note,
             "%d of %d writers still blocked in an append %.1f s after the stop, none returned "
             "for %.1f s: the store hangs; cell abandoned, run ends",
             blocked, n, waited_s, grace_s);
}

/* Runs the writers from the start gate to the stop; the timed window's start time. */
static uint64_t
run_timed_window(run_shared_t *sh, run_writer_t *ws, int n, bench_result_t *r)
{
    const bench_cell_t *cell = &sh->cell;
    int started = run_start_writers(sh, ws, n);
    if (started < n) {
        atomic_store(&sh->stop, 1); /* those that did start leave at once */
        snprintf(r->note, sizeof r->note, "could only start %d of %d writer threads", started, n);
        r->status = BENCH_FAILED;
    }
    run_gate_open(&sh->start, started);
    if (cell->warmup_seconds > 0) {
        run_sleep_ns((uint64_t)(cell->warmup_seconds * 1e9), cell->interrupted);
        if (sh->target->measure_start)
            sh->target->measure_start(sh->state);
        atomic_store(&sh->measuring, 1);
    }
    uint64_t t_start = bench_now_ns();
    run_sleep_ns((uint64_t)(cell->seconds * 1e9), cell->interrupted);
    atomic_store(&sh->stop, 1);
    return t_start;
}

static void
run_fill_rates(bench_result_t *r, int close_rc)
{
    r->appends_per_s = (double)r->appends / r->elapsed_s;
    r->mb_per_s = r->appends_per_s * r->cell.record_bytes / 1e6;
    r->syncs_per_s = r->syncs >= 0 ? (double)r->syncs / r->elapsed_s : BENCH_UNKNOWN;
    run_fill_latencies(r);
    if (close_rc || r->appends == 0)
        r->status = BENCH_FAILED;
    if (r->appends == 0 && r->note[0] == '\0')
        snprintf(r->note, sizeof r->note, "no append succeeded (%llu failed)",
                 (unsigned long long)r->errors);
    if (r->status == BENCH_OK && r->errors > 0 && r->note[0] == '\0')
        snprintf(r->note, sizeof r->note, "%llu appends failed", (unsigned long long)r->errors);
}

void
bench_run_cell(const bench_target_t *target, const bench_cell_t *cell, bench_result_t *r)
{
    memset(r, 0, sizeof *r);
    r->cell = *cell;
    snprintf(r->cell.system, sizeof r->cell.system, "%s", target->system);
    r->syncs = BENCH_UNKNOWN; /* until the target's close says what it counted */
    r->syncs_per_s = BENCH_UNKNOWN;
    r->mean_batch = BENCH_UNKNOWN;
    r->counted_back = BENCH_UNKNOWN;
    r->hist = calloc(1, sizeof *r->hist);
    /* Shared with the writers on the heap: writers that never return keep using it. */
    run_shared_t *sh = calloc(1, sizeof *sh);
    if (!r->hist || !sh) {
        free(sh);
        r->status = BENCH_FAILED;
        snprintf(r->note, sizeof r->note, "out of memory");
        return;
    }
    sh->target = target;
    sh->cell = r->cell;
    atomic_init(&sh->stop, 0);
    atomic_init(&sh->measuring, cell->warmup_seconds > 0 ? 0 : 1);
    int rc = target->open(&r->cell, &sh->state, r->note, sizeof r->note);
    if (rc) {
        free(sh);
        r->status = rc == BENCH_SKIPPED ? BENCH_SKIPPED : BENCH_FAILED;
        return;
    }
    int n = cell->writers;
    run_writer_t *ws = calloc((size_t)n, sizeof *ws);
    if (!ws || run_gate_init(&sh->start)) {
        free(ws);
        snprintf(r->note, sizeof r->note, "out of memory for %d writers", n);
        target->close(sh->state, r);
        free(sh);
        r->status = BENCH_FAILED;
        return;
    }
    uint64_t t_start = run_timed_window(sh, ws, n, r);
    int blocked = run_join_writers(ws, n, sh, bench_now_ns());
    if (blocked) {
        run_abandon(r, blocked, n, (double)(bench_now_ns() - t_start) / 1e9 - cell->seconds,
                    run_stop_grace_ns(cell) / 1e9);
        return;
    }
    run_collect(ws, n, r);
    r->elapsed_s = (double)(bench_now_ns() - t_start) / 1e9;
    run_gate_destroy(&sh->start);
    free(ws);
    run_fill_rates(r, target->close(sh->state, r));
    free(sh);
}

void
bench_result_release(bench_result_t *r)
{
    if (!r)
        return;
    free(r->hist);
    r->hist = NULL;
}

int
bench_make_temp_dir(const char *parent, const char *prefix, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/%s-XXXXXX", parent, prefix);
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    if (!mkdtemp(out))
        return -errno;
    return 0;
}

int
bench_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) == 0 ? 0 : -errno;
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char child[BENCH_PATH_BYTES];
        if (snprintf(child, sizeof child, "%s/%s", path, de->d_name) >= (int)sizeof child) {
            rc = -ENAMETOOLONG;
            continue;
        }
        int crc = bench_remove_tree(child);
        if (crc && !rc)
            rc = crc;
    }
    closedir(d);
    if (rmdir(path) != 0 && !rc)
        rc = -errno;
    return rc;
}

int
bench_path(char *out, size_t cap, const char *dir, const char *name)
{
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return (n < 0 || (size_t)n >= cap) ? -ENAMETOOLONG : 0;
}

void
bench_note(char *note, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note, cap, fmt, ap);
    va_end(ap);
}
