/*
 * test_seqwait.c: the futex slots of engine/seqwait.c: a wake between prepare and sleep is
 * never lost, a deadline ends a sleep with ETIMEDOUT, a range wakes exactly the sleepers of
 * its seqs (asleep in the kernel beside others of the same block), the sleeper count, and a
 * many-thread run where every waiter sees its seq.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "seqwait.h"
#include "test_util.h"

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

/* -- a range wakes exactly the waiters of its seqs ------------------------------------- */

typedef struct target {
    seqwait_t w;
    _Atomic uint64_t pos;
} target_t;

typedef struct target_waiter {
    target_t *t;
    uint64_t seq;
    _Atomic pid_t tid;
    _Atomic int returns; /* from seqwait_sleep: wake-ups, spurious or not */
    _Atomic int is_done;
} target_waiter_t;

static void *
target_waiter_main(void *arg)
{
    target_waiter_t *me = arg;
    atomic_store(&me->tid, (pid_t)syscall(SYS_gettid));
    while (atomic_load(&me->t->pos) < me->seq) {
        uint32_t word = seqwait_prepare(&me->t->w, me->seq);
        if (atomic_load(&me->t->pos) < me->seq) {
            seqwait_sleep(&me->t->w, me->seq, word, 0);
            atomic_fetch_add(&me->returns, 1);
        }
        seqwait_finish(&me->t->w, me->seq);
    }
    atomic_store(&me->is_done, 1);
    return NULL;
}

/* Whether the thread is asleep in the kernel (its only blocking call is the futex wait). */
static int
thread_is_asleep(pid_t tid)
{
    char path[64], fields[1024];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    return test_proc_stat_fields(path, fields, sizeof fields) == 0 && fields[0] == 'S';
}

static void
wait_until_asleep(target_waiter_t *waiters, int n)
{
    uint64_t deadline = mono_ns() + 10000 * NS_PER_MS;
    for (int i = 0; i < n; i++) {
        while (atomic_load(&waiters[i].tid) == 0 ||
               !thread_is_asleep(atomic_load(&waiters[i].tid))) {
            assert_true(mono_ns() < deadline);
            nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        }
        assert_int_equal(atomic_load(&waiters[i].returns), 0);
    }
}

/* Starts a waiter for each of seqs[0..n) and returns once all are asleep in the kernel. */
static void
start_asleep(target_t *t, const uint64_t *seqs, int n, target_waiter_t *waiters, pthread_t *threads)
{
    for (int i = 0; i < n; i++) {
        waiters[i] = (target_waiter_t){.t = t, .seq = seqs[i]};
        assert_int_equal(pthread_create(&threads[i], NULL, target_waiter_main, &waiters[i]), 0);
    }
    wait_until_asleep(waiters, n);
}

/* Waiters of seq 11 (in the range), 13 (same block, above it) and 40 (another block) all
 * asleep; advancing from 10 to 12 wakes the first only: the others' sleeps do not even
 * return. Then advancing to 40 wakes both. */
static void
test_wake_range_wakes_exactly_the_waiters_of_its_seqs(void **state)
{
    (void)state;
    target_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    seqwait_init(&t->w);
    atomic_store(&t->pos, 10);
    static const uint64_t seqs[] = {11, 13, 40};
    target_waiter_t waiters[3];
    pthread_t threads[3];
    start_asleep(t, seqs, 3, waiters, threads);
    atomic_store(&t->pos, 12);
    seqwait_wake_range(&t->w, 10, 12);
    pthread_join(threads[0], NULL);
    assert_int_equal(atomic_load(&waiters[0].returns), 1);
    nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL); /* a stray wake-up would show */
    for (int i = 1; i < 3; i++) {
        assert_int_equal(atomic_load(&waiters[i].returns), 0);
        assert_false(atomic_load(&waiters[i].is_done));
    }
    atomic_store(&t->pos, 40);
    seqwait_wake_range(&t->w, 12, 40);
    for (int i = 1; i < 3; i++) {
        pthread_join(threads[i], NULL);
        assert_true(atomic_load(&waiters[i].is_done));
    }
    assert_int_equal(seqwait_sleepers(&t->w), 0);
    free(t);
}

/* A range longer than the slots' ring wakes every slot, whatever bits repeat in it. */
static void
test_wake_range_longer_than_the_ring_wakes_everyone(void **state)
{
    (void)state;
    target_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    seqwait_init(&t->w);
    const uint64_t ring = (uint64_t)SEQWAIT_SLOTS * SEQWAIT_BLOCK_SEQS;
    const uint64_t seqs[] = {5, 5 + ring / 2, 5 + ring - 1};
    target_waiter_t waiters[3];
    pthread_t threads[3];
    start_asleep(t, seqs, 3, waiters, threads);
    atomic_store(&t->pos, 4 + ring);
    seqwait_wake_range(&t->w, 4, 4 + ring);
    for (int i = 0; i < 3; i++)
        pthread_join(threads[i], NULL);
    assert_int_equal(seqwait_sleepers(&t->w), 0);
    free(t);
}

/* A range ending at the last seq there is: the wake of its final block must end the loop
 * (a loop that stopped only once past `to` would wrap to seq 0 and never end). */
static void
test_wake_range_ending_at_the_largest_seq_ends(void **state)
{
    (void)state;
    target_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    seqwait_init(&t->w);
    atomic_store(&t->pos, UINT64_MAX - 40);
    const uint64_t seqs[] = {UINT64_MAX - 1, UINT64_MAX};
    target_waiter_t waiters[2];
    pthread_t threads[2];
    start_asleep(t, seqs, 2, waiters, threads);
    atomic_store(&t->pos, UINT64_MAX);
    seqwait_wake_range(&t->w, UINT64_MAX - 40, UINT64_MAX);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    assert_int_equal(seqwait_sleepers(&t->w), 0);
    free(t);
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
        cmocka_unit_test(test_wake_range_wakes_exactly_the_waiters_of_its_seqs),
        cmocka_unit_test(test_wake_range_longer_than_the_ring_wakes_everyone),
        cmocka_unit_test(test_wake_range_ending_at_the_largest_seq_ends),
        cmocka_unit_test(test_many_waiters_all_see_their_seq_with_no_lost_wakeup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
