/*
 * commit_waker.c: the waker thread, and commit_wake_reached, which it shares with the
 * batches' writers. After the committer's batch reaches a level it only kicks the waker
 * (commit_kick_waker, and then only if someone sleeps); the waker makes the wake-up
 * syscalls, one FUTEX_WAKE_BITSET per block of seqs the batch touched (seqwait.h). Each
 * costs several microseconds on a virtual machine: made by the committer, they would delay
 * its next batch by as much as an fdatasync; a leader's batch after a slow sync kicks it
 * too. A leader after a quick sync or none, and the committer without sync=always (no sync
 * follows its write), wake their batch's sleepers themselves once they released io_mu: the
 * next batch's writer takes the journal meanwhile, and no thread hop is added to the round
 * trip.
 *
 * State: woken_written/woken_durable are claimed with a compare-and-swap by whoever wakes
 * (commit_wake_level), so each range is woken once. The kick is a futex handshake without
 * a lock: a kick bumps waker_word before it reads is_waker_asleep, the waker sets
 * is_waker_asleep before it re-reads waker_word and sleeps only on the word it read before
 * its pass, so a kick during a pass makes it run another. Owns no lock.
 */
#include "commit_internal.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seqwait.h"

/* Claims (woken, reached] for one level and wakes it: a concurrent caller that claimed
 * first wakes part of the range and this one the rest, or all of it and this one nothing. */
static void
commit_wake_level(seqwait_t *slots, _Atomic uint64_t *woken, uint64_t reached)
{
    uint64_t from = atomic_load(woken);
    while (from < reached) {
        if (atomic_compare_exchange_weak(woken, &from, reached)) {
            seqwait_wake_range(slots, from, reached);
            return;
        }
    }
}

void
commit_wake_reached(commit_t *c)
{
    commit_wake_level(&c->written_wait, &c->woken_written, atomic_load(&c->written_seq));
    commit_wake_level(&c->durable_wait, &c->woken_durable, atomic_load(&c->durable_seq));
}

void
commit_waker_kick(commit_t *c)
{
    atomic_fetch_add(&c->waker_word, 1);
    if (atomic_load(&c->is_waker_asleep))
        syscall(SYS_futex, &c->waker_word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}

static void *
commit_waker_main(void *arg)
{
    commit_t *c = arg;
    pthread_setname_np(pthread_self(), "stele-waker"); /* names it in top -H, perf, gdb */
    for (;;) {
        uint32_t word = atomic_load(&c->waker_word);
        commit_wake_reached(c);
        if (atomic_load(&c->is_waker_stopping))
            break;
        atomic_store(&c->is_waker_asleep, true);
        if (atomic_load(&c->waker_word) == word)
            syscall(SYS_futex, &c->waker_word, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, word, NULL, NULL,
                    0);
        atomic_store(&c->is_waker_asleep, false);
    }
    commit_wake_reached(c);
    return NULL;
}

int
commit_waker_start(commit_t *c)
{
    return pthread_create(&c->waker, NULL, commit_waker_main, c);
}

void
commit_waker_stop(commit_t *c)
{
    atomic_store(&c->is_waker_stopping, true);
    atomic_fetch_add(&c->waker_word, 1);
    syscall(SYS_futex, &c->waker_word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
    pthread_join(c->waker, NULL);
}

void
commit_wake_all(commit_t *c)
{
    seqwait_wake_all(&c->written_wait);
    seqwait_wake_all(&c->durable_wait);
}
