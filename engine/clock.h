/*
 * clock.h: the engine's readings of time, one definition for every module. Monotonic time
 * is for deadlines, intervals and latency; wall time is only for what people or other
 * processes read (record timestamps, published stats).
 */
#ifndef STELE_ENGINE_CLOCK_H
#define STELE_ENGINE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t
clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int64_t
clock_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t
clock_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t
clock_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A time in nanoseconds since the epoch as whole seconds, floored, with the nanoseconds past
 * them in *rem_ns (0 to 999,999,999): a time before 1970 still prints a positive fraction. */
static inline int64_t
clock_floor_s(int64_t ns, int64_t *rem_ns)
{
    int64_t sec = ns / 1000000000, rem = ns % 1000000000;
    if (rem < 0) {
        rem += 1000000000;
        sec--;
    }
    *rem_ns = rem;
    return sec;
}

/* A reading in nanoseconds as a timespec, for the deadline of pthread_cond_timedwait on a
 * condition variable of that clock (clock_cond_init for monotonic readings). */
static inline struct timespec
clock_timespec(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                          .tv_nsec = (long)(ns % 1000000000u)};
    return ts;
}

/* Initialises a condition variable whose pthread_cond_timedwait deadlines are monotonic
 * readings (clock_mono_ns, then clock_timespec), so a change of the wall clock moves no
 * wait. Returns pthread_cond_init's result. */
static inline int
clock_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

#endif
