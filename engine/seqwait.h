/*
 * seqwait.h: sleeping until a position reaches a seq, without a mutex.
 *
 * Seqs are grouped in blocks of SEQWAIT_BLOCK_SEQS consecutive seqs; the waiters of every
 * seq of a block sleep on that block's slot, one futex word, each with the bit of its own
 * seq in the block as its futex bitset. Whoever advances a position wakes, per block the
 * passed range touches, exactly the bits of the seqs it passed, with one FUTEX_WAKE_BITSET:
 * a batch of N records costs one or two wake-up syscalls, not N, and wakes nobody else. A
 * slot's sleeper count tells the waker whether the syscall is needed at all. Waiters never
 * take a lock, so a batch's wake-ups do not all queue on one mutex behind the appenders
 * (which a condition variable under the committer's mutex made them do).
 */
#ifndef STELE_ENGINE_SEQWAIT_H
#define STELE_ENGINE_SEQWAIT_H

#include <stdatomic.h>
#include <stdint.h>

/* A futex bitset has 32 bits: one per seq of a block. */
#define SEQWAIT_BLOCK_SEQS 32
/* A power of two; a slot's bits come back every SEQWAIT_SLOTS blocks (2,048 seqs), so only
 * waiters that far apart can share a bit (and then one is woken early and sleeps again). */
#define SEQWAIT_SLOTS 64

typedef struct seqwait_slot {
    _Atomic uint32_t word;     /* bumped by every wake of this slot */
    _Atomic uint32_t sleepers; /* waiters between seqwait_prepare and seqwait_finish */
    char pad[56];              /* one cache line per slot: neighbours' waiters do not collide */
} seqwait_slot_t;

typedef struct seqwait {
    seqwait_slot_t slot[SEQWAIT_SLOTS];
    _Atomic uint32_t sleepers; /* over all slots: lets a waker skip the whole range */
} seqwait_t;

void seqwait_init(seqwait_t *w);

/* Waiter, step 1: registers as a sleeper of seq's slot and returns the slot's word. The
 * caller then re-checks its condition and calls seqwait_sleep only if it still must wait:
 * a wake after this call changes the word, so the sleep returns at once. */
uint32_t seqwait_prepare(seqwait_t *w, uint64_t seq);

/* Waiter, step 2: sleeps while the slot's word equals `word`, until deadline_ns
 * (CLOCK_MONOTONIC; 0 = no deadline). Returns 0, or ETIMEDOUT once the deadline passed.
 * Spurious returns are possible: callers loop on their own condition. */
int seqwait_sleep(seqwait_t *w, uint64_t seq, uint32_t word, uint64_t deadline_ns);

/* Waiter, step 3 (always, after step 1). */
void seqwait_finish(seqwait_t *w, uint64_t seq);

/* Waker: whether anyone is between seqwait_prepare and seqwait_finish. Call after storing
 * the position (any memory order: this call fences): 0 means every waiter will see the new
 * position without a wake-up. */
uint32_t seqwait_sleepers(seqwait_t *w);

/* Waker: wakes the sleepers of every seq in (from, to]. Call after storing the position. */
void seqwait_wake_range(seqwait_t *w, uint64_t from, uint64_t to);

/* Waker: wakes every sleeper (halt, close). Call after storing what they must notice. */
void seqwait_wake_all(seqwait_t *w);

#endif
