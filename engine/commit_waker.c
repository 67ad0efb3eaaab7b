/*
 * commit_waker.c: the waker thread. After a batch reaches a level, whoever wrote it (the
 * committer or a leading waiter) only kicks the waker (commit_kick_waker, and then only if
 * someone sleeps; without sync=always the batch's writer wakes `written` sleepers itself); the
 * waker makes the wake-up syscalls, one FUTEX_WAKE_BITSET per block of seqs the batch touched
 * (seqwait.h). Each costs several microseconds on a virtual machine: made by the writer, they
 * delayed the next batch by as much as an fdatasync.
 *
 * State: woken_written/woken_durable are the waker thread's alone. The kick is a futex
 * handshake without a lock: a kick bumps waker_word before it reads is_waker_asleep, the
 * waker sets is_waker_asleep before it re-reads waker_word and sleeps only on the word it
 * read before its pass, so a kick during a pass makes it run another. Owns no lock.
 */
#include "commit_internal.h"

#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seqwait.h"

/* Wakes the waiters whose level was reached since the last call. Waker thread only. */
static void
commit_wake_done(commit_t *c)
{
    uint64_t written = atomic_load(&c->written_seq);
    uint64_t durable = atomic_load(&c->durable_seq);
    if (!c->is_written_woken_inline) /* else each piece's writer did (commit_write_piece) */
        seqwait_wake_range(&c->written_wait, c->woken_written, written);
    seqwait_wake_range(&c->durable_wait, c->woken_durable, durable);
    c->woken_written = written;
    c->woken_durable = durable;
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
        commit_wake_done(c);
        if (atomic_load(&c->is_waker_stopping))
            break;
        atomic_store(&c->is_waker_asleep, true);
        if (atomic_load(&c->waker_word) == word)
            syscall(SYS_futex, &c->waker_word, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, word, NULL, NULL,
                    0);
        atomic_store(&c->is_waker_asleep, false);
    }
    commit_wake_done(c);
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
commit_wake_written(commit_t *c)
{
    if (!c->is_written_woken_inline)
        return;
    uint64_t written = atomic_load(&c->written_seq);
    uint64_t woken = atomic_load(&c->woken_written_inline);
    while (woken < written) {
        /* Claims (woken, written]: a concurrent caller that claimed first wakes part of it
         * and this one the rest, or all of it and this one nothing. */
        if (atomic_compare_exchange_weak(&c->woken_written_inline, &woken, written)) {
            seqwait_wake_range(&c->written_wait, woken, written);
            return;
        }
    }
}

void
commit_wake_all(commit_t *c)
{
    seqwait_wake_all(&c->written_wait);
    seqwait_wake_all(&c->durable_wait);
}
