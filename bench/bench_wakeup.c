/*
 * bench_wakeup.c: the thread wake-up references: what N blocking writer threads can do on
 * this machine's CPUs when each "append" is nothing but handing a number to one committer
 * thread and waiting until that thread says it is done.
 *
 * A durable append with N writer threads, N much larger than the cores, costs each writer
 * one sleep and one wake-up per record whatever the engine does (its record is durable
 * only after a flush it cannot do itself). `thread-wakeup` does exactly that and nothing
 * else: no parse, no copy, no disk; the committer takes everything appended so far as one
 * "batch" at once and wakes its writers. `parse-wakeup` adds the one other cost every JSON
 * append pays before the hand-off: each writer first turns its event into BSON the way stele
 * does, with stele_validate_json() (stele's JSON reader and every validation rule; that call
 * also checks the options struct each time, which an append does not). Their rates are the
 * ceilings of stele's rate with N writers on this machine, the way the fsync loops are the
 * ceiling of a lone writer's, and they are reported beside stele's cells.
 *
 * To be ceilings they wake their writers the cheapest way known, at least as cheaply as
 * stele (engine/seqwait.c, engine/commit_wait.c):
 *  - seqs are grouped in blocks of WAKEUP_BLOCK_SEQS; the writers of a block sleep on one
 *    futex word, each with its seq's bit as its FUTEX_WAIT_BITSET mask, and the committer
 *    wakes a batch with one FUTEX_WAKE_BITSET per block it touches, carrying the bits of its
 *    seqs: a batch of 32 costs one syscall, not 32, and wakes nobody else. A block with no
 *    sleeper costs no syscall;
 *  - the committer does the waking itself: it has nothing else to do (stele hands it to a
 *    waker thread because its committer writes and syncs meanwhile);
 *  - nobody spins: on a machine with few cores a spinning thread holds the core the thread
 *    it waits for needs (a spinning waiter and committer took a lone writer from ~300,000 to
 *    ~5,000 hand-offs/s on 2 busy vCPUs), and with many writers one futex call per batch is
 *    already less than the sleeps themselves. Waking writers one FUTEX_WAKE each instead
 *    measured 20-30% slower at 64 writers.
 *
 * Lost wake-ups: a waiter registers in its slot (`sleepers`), reads the slot's word, then
 * re-reads `committed`; the committer stores `committed`, then reads `sleepers` and, when
 * there are any, changes the word before FUTEX_WAKE_BITSET. All sequentially consistent:
 * either the waiter sees the new `committed`, or the committer sees the sleeper and its
 * FUTEX_WAIT_BITSET on the old word returns at once. The committer's own sleep pairs with
 * the writers' `appended` the same way (a writer reads is_committer_asleep after its add).
 */
#include "bench.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A futex bitset has 32 bits: one per seq of a block. */
#define WAKEUP_BLOCK_SEQS 32
/* A power of two, as in stele: a slot's bits come back every 2,048 seqs, far more than the
 * writers (the only seqs waited for at once are one per writer). */
#define WAKEUP_SLOTS 64

typedef struct wakeup_slot {
    _Atomic uint32_t word;     /* bumped by every wake of this slot */
    _Atomic uint32_t sleepers; /* waiters registered in this slot */
    char pad[56];              /* one cache line per slot */
} wakeup_slot_t;
_Static_assert(sizeof(wakeup_slot_t) == 64, "one slot per cache line");

typedef struct wakeup {
    wakeup_slot_t slots[WAKEUP_SLOTS];
    int n_writers;
    int parses_json;
    stele_options_t parse_opts; /* the limits a stele_open of the cell would use */
    _Atomic uint64_t appended;
    _Atomic uint64_t committed;
    _Atomic uint32_t work_word;
    _Atomic int is_committer_asleep;
    _Atomic int is_stopping;
    uint64_t n_batches;
    uint64_t n_wake_calls; /* FUTEX_WAKE_BITSET calls made (committer only) */
    pthread_t committer;
} wakeup_t;

static long
wakeup_futex(_Atomic uint32_t *word, int op, uint32_t val, uint32_t bits)
{
    return syscall(SYS_futex, (uint32_t *)word, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, bits);
}

static wakeup_slot_t *
wakeup_slot(wakeup_t *w, uint64_t seq)
{
    return &w->slots[(seq / WAKEUP_BLOCK_SEQS) % WAKEUP_SLOTS];
}

static void
wakeup_slot_wake(wakeup_t *w, wakeup_slot_t *s, uint32_t bits)
{
    if (atomic_load(&s->sleepers) == 0)
        return;
    atomic_fetch_add(&s->word, 1);
    wakeup_futex(&s->word, FUTEX_WAKE_BITSET, INT_MAX, bits);
    w->n_wake_calls++;
}

/* Wakes the sleepers of every seq in (from, to]: one call per block that has any. */
static void
wakeup_range(wakeup_t *w, uint64_t from, uint64_t to)
{
    if (to - from >= (uint64_t)WAKEUP_SLOTS * WAKEUP_BLOCK_SEQS) { /* every slot's bits */
        for (unsigned k = 0; k < WAKEUP_SLOTS; k++)
            wakeup_slot_wake(w, &w->slots[k], FUTEX_BITSET_MATCH_ANY);
        return;
    }
    for (uint64_t seq = from + 1; seq <= to;) {
        uint64_t block_last = seq - seq % WAKEUP_BLOCK_SEQS + WAKEUP_BLOCK_SEQS - 1;
        uint64_t last = block_last < to ? block_last : to;
        unsigned lo = seq % WAKEUP_BLOCK_SEQS, hi = last % WAKEUP_BLOCK_SEQS;
        uint32_t up_to_hi = hi == WAKEUP_BLOCK_SEQS - 1 ? UINT32_MAX : (1u << (hi + 1)) - 1;
        wakeup_slot_wake(w, wakeup_slot(w, seq), up_to_hi & ~((1u << lo) - 1));
        seq = last + 1;
    }
}

/* The committer, when nothing is new: sleeps until a writer kicks it. */
static void
wakeup_committer_idle(wakeup_t *w, uint32_t word, uint64_t seen)
{
    atomic_store(&w->is_committer_asleep, 1);
    if (atomic_load(&w->appended) == seen && !atomic_load(&w->is_stopping))
        wakeup_futex(&w->work_word, FUTEX_WAIT, word, 0);
    atomic_store(&w->is_committer_asleep, 0);
}

static void *
wakeup_committer_main(void *arg)
{
    wakeup_t *w = arg;
    uint64_t committed = 0;
    while (!atomic_load(&w->is_stopping)) {
        uint32_t word = atomic_load(&w->work_word);
        uint64_t appended = atomic_load(&w->appended);
        if (appended == committed) {
            wakeup_committer_idle(w, word, appended);
            continue;
        }
        atomic_store(&w->committed, appended); /* seq_cst: ordered before the sleeper reads */
        w->n_batches++;
        wakeup_range(w, committed, appended);
        committed = appended;
    }
    return NULL;
}

static void
wakeup_kick(wakeup_t *w)
{
    atomic_fetch_add(&w->work_word, 1);
    wakeup_futex(&w->work_word, FUTEX_WAKE, 1, 0);
}

static void
wakeup_sleep(wakeup_t *w, uint64_t seq)
{
    wakeup_slot_t *s = wakeup_slot(w, seq);
    uint32_t bit = 1u << (seq % WAKEUP_BLOCK_SEQS);
    atomic_fetch_add(&s->sleepers, 1);
    while (atomic_load(&w->committed) < seq) {
        uint32_t word = atomic_load(&s->word);
        if (atomic_load(&w->committed) < seq)
            wakeup_futex(&s->word, FUTEX_WAIT_BITSET, word, bit);
    }
    atomic_fetch_sub(&s->sleepers, 1);
}

static int
wakeup_open_as(const bench_cell_t *cell, int parses_json, void **state_out, char *note,
               size_t note_cap)
{
    wakeup_t *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(note, note_cap, "out of memory");
        return BENCH_FAILED;
    }
    w->n_writers = cell->writers;
    w->parses_json = parses_json;
    stele_options_init(&w->parse_opts);
    if (cell->record_bytes * 2u > w->parse_opts.max_record_bytes) /* BSON is a little longer */
        w->parse_opts.max_record_bytes = cell->record_bytes * 2u;
    if (pthread_create(&w->committer, NULL, wakeup_committer_main, w) != 0) {
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
wakeup_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)wstate;
    wakeup_t *w = state;
    if (w->parses_json &&
        stele_validate_json((const char *)ev->data, ev->len, &w->parse_opts, NULL) != 0)
        return -1;
    uint64_t seq = atomic_fetch_add(&w->appended, 1) + 1;
    if (atomic_load(&w->is_committer_asleep))
        wakeup_kick(w);
    if (atomic_load(&w->committed) < seq)
        wakeup_sleep(w, seq);
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
    r->mean_batch = w->n_batches ? (double)appended / (double)w->n_batches : BENCH_UNKNOWN;
    bench_note(r->note, sizeof r->note, "NOT A STORE: %s; %.2f wake-up calls per batch",
               w->parses_json ? "stele's JSON parse + thread wake-up ceiling (no disk)"
                              : "thread wake-up ceiling (sleep until woken; no parse, no disk)",
               w->n_batches ? (double)w->n_wake_calls / (double)w->n_batches : 0.0);
    free(w);
    return 0;
}

const bench_target_t bench_target_thread_wakeup = {
    .system = "thread-wakeup",
    .open = wakeup_open,
    .append = wakeup_append,
    .close = wakeup_close,
};

const bench_target_t bench_target_parse_wakeup = {
    .system = "parse-wakeup",
    .open = parse_wakeup_open,
    .append = wakeup_append,
    .close = wakeup_close,
};
