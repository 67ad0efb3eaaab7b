/*
 * seqwait.c: futex slots for seqwait.h. Owns no thread and no lock.
 *
 * Ordering (why a wake is never lost): the waiter increments `sleepers`, reads `word`, then
 * re-reads the position; the waker stores the position, then reads `sleepers` and, if any,
 * increments `word` before FUTEX_WAKE. The waker's side starts with a sequentially
 * consistent fence, because callers store their positions with release order only, which
 * lets a later load (of `sleepers`) pass the store (x86 reorders store->load); with the
 * fence, either the waiter sees the new position, or the waker sees the sleeper and changes
 * the word, which makes a FUTEX_WAIT on the old word return at once.
 */
#include "seqwait.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S 1000000000ull

static seqwait_slot_t *
seqwait_slot(seqwait_t *w, uint64_t seq)
{
    return &w->slot[(seq / SEQWAIT_BLOCK_SEQS) % SEQWAIT_SLOTS];
}

/* The futex bitset of seq's waiters in its block's slot. */
static uint32_t
seqwait_bit(uint64_t seq)
{
    return 1u << (seq % SEQWAIT_BLOCK_SEQS);
}

/* The bits of the seqs whose offsets in their block run from `lo` to `hi`, inclusive. */
static uint32_t
seqwait_bits(unsigned lo, unsigned hi)
{
    uint32_t up_to_hi = hi + 1 >= SEQWAIT_BLOCK_SEQS ? UINT32_MAX : (1u << (hi + 1)) - 1;
    return up_to_hi & ~((1u << lo) - 1);
}

void
seqwait_init(seqwait_t *w)
{
    memset(w, 0, sizeof *w);
    for (unsigned k = 0; k < SEQWAIT_SLOTS; k++) {
        atomic_init(&w->slot[k].word, 0);
        atomic_init(&w->slot[k].sleepers, 0);
    }
    atomic_init(&w->sleepers, 0);
}

uint32_t
seqwait_prepare(seqwait_t *w, uint64_t seq)
{
    seqwait_slot_t *s = seqwait_slot(w, seq);
    atomic_fetch_add(&s->sleepers, 1);
    atomic_fetch_add(&w->sleepers, 1); /* after the slot's: a waker that sees it sees both */
    return atomic_load(&s->word);
}

int
seqwait_sleep(seqwait_t *w, uint64_t seq, uint32_t word, uint64_t deadline_ns)
{
    seqwait_slot_t *s = seqwait_slot(w, seq);
    struct timespec abs = {.tv_sec = (time_t)(deadline_ns / NS_PER_S),
                           .tv_nsec = (long)(deadline_ns % NS_PER_S)};
    /* FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline, so a retried sleep
     * does not stretch the caller's timeout. */
    long rc = syscall(SYS_futex, &s->word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, word,
                      deadline_ns ? &abs : NULL, NULL, seqwait_bit(seq));
    if (rc < 0 && errno == ETIMEDOUT)
        return ETIMEDOUT;
    return 0; /* woken, EAGAIN (the word moved) or EINTR: the caller re-checks */
}

void
seqwait_finish(seqwait_t *w, uint64_t seq)
{
    atomic_fetch_sub(&w->sleepers, 1);
    atomic_fetch_sub(&seqwait_slot(w, seq)->sleepers, 1);
}

uint32_t
seqwait_sleepers(seqwait_t *w)
{
    atomic_thread_fence(memory_order_seq_cst); /* see the top comment */
    return atomic_load(&w->sleepers);
}

static void
seqwait_wake_slot(seqwait_slot_t *s, uint32_t bits)
{
    if (atomic_load(&s->sleepers) == 0)
        return;
    atomic_fetch_add(&s->word, 1);
    syscall(SYS_futex, &s->word, FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG, INT_MAX, NULL, NULL, bits);
}

void
seqwait_wake_range(seqwait_t *w, uint64_t from, uint64_t to)
{
    if (to <= from)
        return;
    atomic_thread_fence(memory_order_seq_cst); /* see the top comment */
    if (to - from >= (uint64_t)SEQWAIT_SLOTS * SEQWAIT_BLOCK_SEQS) {
        for (unsigned k = 0; k < SEQWAIT_SLOTS; k++)
            seqwait_wake_slot(&w->slot[k], FUTEX_BITSET_MATCH_ANY);
        return;
    }
    /* One wake per block the range touches, with the bits of the range's seqs in it. Ends
     * on reaching `to` rather than on passing it, which UINT64_MAX could not. */
    for (uint64_t seq = from + 1;;) {
        uint64_t block_last = seq - seq % SEQWAIT_BLOCK_SEQS + SEQWAIT_BLOCK_SEQS - 1;
        uint64_t last = block_last < to ? block_last : to;
        seqwait_wake_slot(seqwait_slot(w, seq),
                          seqwait_bits(seq % SEQWAIT_BLOCK_SEQS, last % SEQWAIT_BLOCK_SEQS));
        if (last == to)
            return;
        seq = last + 1;
    }
}

void
seqwait_wake_all(seqwait_t *w)
{
    atomic_thread_fence(memory_order_seq_cst); /* see the top comment */
    for (unsigned k = 0; k < SEQWAIT_SLOTS; k++)
        seqwait_wake_slot(&w->slot[k], FUTEX_BITSET_MATCH_ANY);
}
