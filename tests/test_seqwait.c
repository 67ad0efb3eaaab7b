/*
 * test_seqwait.c: the futex slots of engine/seqwait.c: a wake between prepare and sleep is
 * never lost, a deadline ends a sleep with ETIMEDOUT, a range wakes exactly its slots'
 * sleepers, the sleeper count, and a many-thread run where every waiter sees its seq.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "seqwait.h"

#define NS_PER_MS 1000000ull

static uint64_t
mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
test_wake_after_prepare_makes_the_sleep_return_at_once(void **state)
{
    (void)state;
    seqwait_t *w = malloc(sizeof *w);
    assert_non_null(w);
    seqwait_init(w);
    uint32_t word = seqwait_prepare(w, 7);
    seqwait_wake_range(w, 6, 7);
    uint64_t start = mono_ns();
    /* Without the wake this would sleep until the deadline, 10 s away. */
    assert_int_equal(seqwait_sleep(w, 7, word, start + 10000 * NS_PER_MS), 0);
    assert_true(mono_ns() - start < 5000 * NS_PER_MS);
    seqwait_finish(w, 7);
    assert_int_equal(seqwait_sleepers(w), 0);
    free(w);
}

static void
test_sleep_ends_with_etimedout_at_the_deadline(void **state)
{
    (void)state;
    seqwait_t *w = malloc(sizeof *w);
    assert_non_null(w);
    seqwait_init(w);
    uint32_t word = seqwait_prepare(w, 3);
    assert_int_equal(seqwait_sleepers(w), 1);
    uint64_t start = mono_ns();
    int rc;
    do /* spurious returns are allowed: loop as callers do */
        rc = seqwait_sleep(w, 3, word, start + 20 * NS_PER_MS);
    while (rc == 0);
    assert_int_equal(rc, ETIMEDOUT);
    assert_true(mono_ns() - start >= 20 * NS_PER_MS);
    seqwait_finish(w, 3);
    free(w);
}

static void
test_wake_range_changes_only_the_slots_it_covers(void **state)
{
    (void)state;
    seqwait_t *w = malloc(sizeof *w);
    assert_non_null(w);
    seqwait_init(w);
    uint32_t in_range = seqwait_prepare(w, 11);
    uint32_t above = seqwait_prepare(w, 13);
    uint32_t below = seqwait_prepare(w, 10);
    seqwait_wake_range(w, 10, 12); /* seqs 11 and 12 */
    /* The woken slot's word moved (a sleep on the old word returns at once); the others
     * did not, so their sleeps run to the (short) deadline. */
    assert_int_equal(seqwait_sleep(w, 11, in_range, mono_ns() + 5000 * NS_PER_MS), 0);
    int rc;
    do
        rc = seqwait_sleep(w, 13, above, mono_ns() + 5 * NS_PER_MS);
    while (rc == 0);
    assert_int_equal(rc, ETIMEDOUT);
    do
        rc = seqwait_sleep(w, 10, below, mono_ns() + 5 * NS_PER_MS);
    while (rc == 0);
    assert_int_equal(rc, ETIMEDOUT);
    seqwait_finish(w, 11);
    seqwait_finish(w, 13);
    seqwait_finish(w, 10);
    assert_int_equal(seqwait_sleepers(w), 0);
    free(w);
}

/* -- many waiters, one advancing position ---------------------------------------------- */

#define RACE_WAITERS 16
#define RACE_ROUNDS 2000

typedef struct race {
    seqwait_t w;
    _Atomic uint64_t pos;
    _Atomic uint64_t done_waiters;
} race_t;

typedef struct race_waiter {
    race_t *r;
    int id;
} race_waiter_t;

/* Waits for every seq of its own (id, id + RACE_WAITERS, ...) the way commit_wait does. */
static void *
race_waiter_main(void *arg)
{
    race_waiter_t *me = arg;
    race_t *r = me->r;
    for (uint64_t k = 0; k < RACE_ROUNDS; k++) {
        uint64_t seq = 1 + (uint64_t)me->id + k * RACE_WAITERS;
        while (atomic_load(&r->pos) < seq) {
            uint32_t word = seqwait_prepare(&r->w, seq);
            if (atomic_load(&r->pos) < seq)
                seqwait_sleep(&r->w, seq, word, 0);
            seqwait_finish(&r->w, seq);
        }
    }
    atomic_fetch_add(&r->done_waiters, 1);
    return NULL;
}

static void
test_many_waiters_all_see_their_seq_with_no_lost_wakeup(void **state)
{
    (void)state;
    race_t *r = calloc(1, sizeof *r);
    assert_non_null(r);
    seqwait_init(&r->w);
    pthread_t threads[RACE_WAITERS];
    race_waiter_t waiters[RACE_WAITERS];
    for (int i = 0; i < RACE_WAITERS; i++) {
        waiters[i] = (race_waiter_t){.r = r, .id = i};
        assert_int_equal(pthread_create(&threads[i], NULL, race_waiter_main, &waiters[i]), 0);
    }
    /* Advance in uneven steps, waking exactly the passed range, as the waker does. A lost
     * wake-up would leave a waiter asleep forever and the ctest timeout would fire. */
    uint64_t last = (uint64_t)RACE_WAITERS * RACE_ROUNDS;
    uint64_t pos = 0;
    while (pos < last) {
        uint64_t step = 1 + (pos * 2654435761u) % 37;
        uint64_t next = pos + step < last ? pos + step : last;
        atomic_store(&r->pos, next);
        if (seqwait_sleepers(&r->w))
            seqwait_wake_range(&r->w, pos, next);
        pos = next;
    }
    for (int i = 0; i < RACE_WAITERS; i++)
        pthread_join(threads[i], NULL);
    assert_int_equal(atomic_load(&r->done_waiters), RACE_WAITERS);
    assert_int_equal(seqwait_sleepers(&r->w), 0);
    free(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wake_after_prepare_makes_the_sleep_return_at_once),
        cmocka_unit_test(test_sleep_ends_with_etimedout_at_the_deadline),
        cmocka_unit_test(test_wake_range_changes_only_the_slots_it_covers),
        cmocka_unit_test(test_many_waiters_all_see_their_seq_with_no_lost_wakeup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
