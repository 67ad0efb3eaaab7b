/*
 * bench_wakeup.c: the thread wake-up reference: what N blocking writer threads can do on
 * this machine's CPUs when each "append" is nothing but handing a number to one committer
 * thread and sleeping until that thread wakes it.
 *
 * A durable append with N writer threads, N much larger than the cores, costs each writer
 * one sleep and one wake-up per record whatever the engine does (its record is durable
 * only after a flush it cannot do itself). This cell does exactly that and nothing else: no
 * parse, no copy, no disk; the committer takes everything appended so far as one "batch"
 * at once and wakes the sleepers in it, each with one futex call. Its rate is the ceiling
 * of stele's durable rate with N writers on this machine, the way the fsync loop is the
 * ceiling of a lone writer's, and it is reported beside stele's N-writer cell.
 *
 * `parse-wakeup` adds the one other cost no engine built on libbson's reader avoids for a
 * JSON event: each writer first parses its event with that reader (as `libbson-json` does),
 * then hands off and sleeps. Its rate is the ceiling of N blocking writers of JSON events
 * for such an engine; stele reads JSON with its own reader (engine/json_bson.c), cheaper.
 *
 * Lost wake-ups: a writer publishes the seq it waits for and that it sleeps, then reads
 * the futex word, then re-reads `committed`; the committer stores `committed`, then reads
 * each writer's seq and sleeping flag and, if asleep in the batch, changes its word before
 * FUTEX_WAKE. All sequentially consistent: either the writer sees the new `committed`, or
 * the committer sees it asleep and its FUTEX_WAIT on the old word returns at once. The
 * committer's own sleep pairs with the writers' `appended` the same way.
 */
#include "bench.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct wakeup_writer {
    _Atomic uint64_t waits_for; /* 0 when not waiting */
    _Atomic uint32_t word;
    _Atomic int is_asleep;
    bench_json_parser_t *parser;                          /* parse-wakeup only */
    char pad[64 - 2 * sizeof(uint64_t) - sizeof(void *)]; /* one writer per cache line */
} wakeup_writer_t;
_Static_assert(sizeof(wakeup_writer_t) == 64, "one writer per cache line");

typedef struct wakeup {
    int n_writers;
    int parses_json;
    wakeup_writer_t *writers;
    _Atomic uint64_t appended;
    _Atomic uint64_t committed;
    _Atomic uint32_t work_word;
    _Atomic int is_committer_asleep;
    _Atomic int is_stopping;
    uint64_t n_batches;
    pthread_t committer;
} wakeup_t;

static void
wakeup_futex(_Atomic uint32_t *word, int op, uint32_t val)
{
    syscall(SYS_futex, (uint32_t *)word, op, val, NULL, NULL, 0);
}

/* Wakes every sleeping writer whose seq is at or below `upto`. */
static void
wakeup_batch(wakeup_t *w, uint64_t upto)
{
    for (int i = 0; i < w->n_writers; i++) {
        wakeup_writer_t *wr = &w->writers[i];
        uint64_t q = atomic_load(&wr->waits_for);
        if (q != 0 && q <= upto && atomic_load(&wr->is_asleep)) {
            atomic_fetch_add(&wr->word, 1);
            wakeup_futex(&wr->word, FUTEX_WAKE_PRIVATE, 1);
        }
    }
}

static void *
wakeup_committer_main(void *arg)
{
    wakeup_t *w = arg;
    while (!atomic_load(&w->is_stopping)) {
        uint32_t word = atomic_load(&w->work_word);
        uint64_t appended = atomic_load(&w->appended);
        if (appended == atomic_load(&w->committed)) {
            atomic_store(&w->is_committer_asleep, 1);
            if (atomic_load(&w->appended) == appended && !atomic_load(&w->is_stopping))
                wakeup_futex(&w->work_word, FUTEX_WAIT_PRIVATE, word);
            atomic_store(&w->is_committer_asleep, 0);
            continue;
        }
        atomic_store(&w->committed, appended);
        w->n_batches++;
        wakeup_batch(w, appended);
    }
    return NULL;
}

static void
wakeup_kick(wakeup_t *w)
{
    atomic_fetch_add(&w->work_word, 1);
    wakeup_futex(&w->work_word, FUTEX_WAKE_PRIVATE, 1);
}

static int
wakeup_open_as(const bench_cell_t *cell, int parses_json, void **state_out, char *note,
               size_t note_cap)
{
    wakeup_t *w = calloc(1, sizeof *w);
    if (w)
        w->writers = calloc((size_t)cell->writers, sizeof *w->writers);
    if (!w || !w->writers) {
        if (w)
            free(w);
        snprintf(note, note_cap, "out of memory");
        return BENCH_FAILED;
    }
    w->n_writers = cell->writers;
    w->parses_json = parses_json;
    if (pthread_create(&w->committer, NULL, wakeup_committer_main, w) != 0) {
        free(w->writers);
        free(w);
        snprintf(note, note_cap, "could not start the committer thread");
        return BENCH_FAILED;
    }
    *state_out = w;
    return 0;
}

static int
wakeup_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    return wakeup_open_as(cell, 0, state_out, note, note_cap);
}

static int
parse_wakeup_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    if (cell->input != BENCH_INPUT_JSON) {
        snprintf(note, note_cap, "only JSON input is parsed");
        return BENCH_SKIPPED;
    }
    return wakeup_open_as(cell, 1, state_out, note, note_cap);
}

static int
wakeup_writer_open(void *state, int writer_id, void **wstate_out, char *note, size_t note_cap)
{
    wakeup_t *w = state;
    if (writer_id < 0 || writer_id >= w->n_writers) {
        snprintf(note, note_cap, "writer %d of %d", writer_id, w->n_writers);
        return BENCH_FAILED;
    }
    wakeup_writer_t *wr = &w->writers[writer_id];
    if (w->parses_json && !(wr->parser = bench_json_parser_new())) {
        snprintf(note, note_cap, "out of memory");
        return BENCH_FAILED;
    }
    *wstate_out = wr;
    return 0;
}

static void
wakeup_writer_close(void *state, void *wstate)
{
    (void)state;
    wakeup_writer_t *wr = wstate;
    bench_json_parser_free(wr->parser);
    wr->parser = NULL;
}

static int
wakeup_append(void *state, void *wstate, const bench_event_t *ev)
{
    wakeup_t *w = state;
    wakeup_writer_t *wr = wstate;
    if (wr->parser && bench_json_parse(wr->parser, ev) != 0)
        return -1;
    uint64_t seq = atomic_fetch_add(&w->appended, 1) + 1;
    atomic_store(&wr->waits_for, seq);
    if (atomic_load(&w->is_committer_asleep))
        wakeup_kick(w);
    while (atomic_load(&w->committed) < seq) {
        atomic_store(&wr->is_asleep, 1);
        uint32_t word = atomic_load(&wr->word);
        if (atomic_load(&w->committed) < seq)
            wakeup_futex(&wr->word, FUTEX_WAIT_PRIVATE, word);
        atomic_store(&wr->is_asleep, 0);
    }
    atomic_store(&wr->waits_for, 0);
    return 0;
}

static int
wakeup_close(void *state, bench_result_t *r)
{
    wakeup_t *w = state;
    atomic_store(&w->is_stopping, 1);
    wakeup_kick(w);
    pthread_join(w->committer, NULL);
    uint64_t appended = atomic_load(&w->appended);
    r->is_durable = 0;
    r->counted_back = -1;
    r->mean_batch = w->n_batches ? (double)appended / (double)w->n_batches : 0;
    snprintf(r->note, sizeof r->note, "%s",
             w->parses_json ? "NOT A STORE: libbson parse + thread wake-up ceiling (no disk)"
                            : "NOT A STORE: thread wake-up ceiling (sleep until woken; no "
                              "parse, no disk)");
    free(w->writers);
    free(w);
    return 0;
}

const bench_target_t bench_target_thread_wakeup = {
    .system = "thread-wakeup",
    .open = wakeup_open,
    .writer_open = wakeup_writer_open,
    .append = wakeup_append,
    .writer_close = wakeup_writer_close,
    .close = wakeup_close,
};

const bench_target_t bench_target_parse_wakeup = {
    .system = "parse-wakeup",
    .open = parse_wakeup_open,
    .writer_open = wakeup_writer_open,
    .append = wakeup_append,
    .writer_close = wakeup_writer_close,
    .close = wakeup_close,
};
