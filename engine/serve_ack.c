/*
 * serve_ack.c: the ack threads. The event loop appends with STELE_WAIT_NONE and never
 * waits; for each wait level (written, durable, shipped) one thread here blocks in
 * stele_wait() for the oldest seq the loop still waits for, records how far the level got
 * (stele_reached_seq: seqs reach each level in order, so everything below it has too), and
 * wakes the loop through its eventfd. Waiting for the newest seq instead would hold the
 * replies of a finished commit until the next one, which carries that seq, finished too.
 *
 * Why one thread per level: a shipped wait may last as long as MongoDB is down; durable
 * replies must not queue behind it.
 *
 * Never a false ack: reached_seq only advances to a seq stele_wait() returned 0 for, or,
 * after a failed wait, to what stele_reached_seq() says the engine really reached.
 *
 * The loop tells each level once per epoll batch what it waits for (serve_acks_want), and a
 * thread is signalled only when it sleeps on its own condition variable: every request
 * signalling all three threads made them queue on mu against the loop.
 *
 * A lone request (one per epoll batch, the only connection waiting, its level's thread idle)
 * the loop first tries itself (serve_acks_reach_now): a zero-timeout stele_wait() in the
 * loop's thread commits the record when the journal is free, the way an in-process writer
 * leads its own commit, and saves the round trip through the thread and the eventfd (two
 * thread wake-ups of the four a lone client's request cost). With other clients in flight the
 * thread waits, so the loop keeps reading while the journal syncs.
 *
 * -- protected by mu: want_seq, is_idle, state, is_stopping; cv[level] fires when that
 *    level's want_seq grows, or on stop --
 */
#include "serve.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* stele_wait() returns at least this often so a thread notices serve_acks_stop(). */
#define SERVE_ACK_POLL_MS 200

struct serve_acks;

typedef struct serve_ack_thread {
    struct serve_acks *owner;
    stele_wait_t level;
    pthread_t thread;
    int is_started;
} serve_ack_thread_t;

struct serve_acks {
    stele_t *db;
    int wake_fd;
    int flush_for_durable;         /* sync=never: nothing becomes durable unless flushed */
    serve_ack_thread_t threads[4]; /* [WRITTEN..SHIPPED] used */

    pthread_mutex_t mu;
    pthread_cond_t cv[4];
    uint64_t want_seq[4];
    int is_idle[4]; /* the level's thread sleeps on cv[level] */
    serve_ack_state_t state;
    int is_stopping;
};

static void
serve_acks_wake(struct serve_acks *a)
{
    uint64_t one = 1;
    /* EAGAIN means the counter is already non-zero: the loop will wake anyway. */
    ssize_t w = write(a->wake_fd, &one, sizeof one);
    (void)w;
}

static void *
serve_acks_thread_main(void *arg)
{
    serve_ack_thread_t *t = arg;
    struct serve_acks *a = t->owner;
    stele_wait_t level = t->level;
    pthread_setname_np(pthread_self(), "stele-ack"); /* names it in top -H, perf, gdb */
    pthread_mutex_lock(&a->mu);
    while (!a->is_stopping) {
        uint64_t done = a->state.reached_seq[level];
        if (a->state.failed_upto[level] > done)
            done = a->state.failed_upto[level];
        if (a->want_seq[level] <= done) {
            a->is_idle[level] = 1;
            pthread_cond_wait(&a->cv[level], &a->mu);
            a->is_idle[level] = 0;
            continue;
        }
        uint64_t want = a->want_seq[level];
        uint64_t target = done + 1;
        pthread_mutex_unlock(&a->mu);

        stele_error_t err = {0};
        int rc = 0;
        /* As `stele insert` does in-process: with sync=never a durable wait would last
         * until shutdown; one flush makes everything appended so far durable. */
        if (level == STELE_WAIT_DURABLE && a->flush_for_durable)
            rc = stele_flush(a->db, &err);
        if (rc == 0)
            rc = stele_wait(a->db, target, level, SERVE_ACK_POLL_MS, &err);
        /* After a failed wait too: what the engine really reached is still acknowledged. */
        uint64_t engine_seq = rc == STELE_ETIMEDOUT ? 0 : stele_reached_seq(a->db, level);

        pthread_mutex_lock(&a->mu);
        if (rc == STELE_ETIMEDOUT)
            continue;
        serve_ack_state_t *s = &a->state;
        if (rc == 0) {
            uint64_t reached = engine_seq < want ? engine_seq : want;
            if (reached < target)
                reached = target;
            if (reached > s->reached_seq[level])
                s->reached_seq[level] = reached;
        } else {
            uint64_t reached = engine_seq < want ? engine_seq : want;
            if (reached > s->reached_seq[level])
                s->reached_seq[level] = reached;
            if (want > s->failed_upto[level])
                s->failed_upto[level] = want;
            s->fail_code[level] = rc;
            s->fail_err[level] = err;
            s->fail_err[level].code = rc;
        }
        serve_acks_wake(a);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

int
serve_acks_start(stele_t *db, int wake_fd, int flush_for_durable, serve_acks_t **out)
{
    struct serve_acks *a = calloc(1, sizeof *a);
    int rc = 0;
    if (!a)
        return -ENOMEM;
    a->db = db;
    a->wake_fd = wake_fd;
    a->flush_for_durable = flush_for_durable;
    pthread_mutex_init(&a->mu, NULL);
    for (int level = 0; level < 4; level++)
        pthread_cond_init(&a->cv[level], NULL);
    for (int level = STELE_WAIT_WRITTEN; level <= STELE_WAIT_SHIPPED; level++) {
        serve_ack_thread_t *t = &a->threads[level];
        t->owner = a;
        t->level = (stele_wait_t)level;
        rc = pthread_create(&t->thread, NULL, serve_acks_thread_main, t);
        if (rc != 0) {
            serve_acks_stop(a);
            return -rc;
        }
        t->is_started = 1;
    }
    *out = a;
    return 0;
}

void
serve_acks_want(serve_acks_t *a, stele_wait_t level, uint64_t seq)
{
    if (level < STELE_WAIT_WRITTEN || level > STELE_WAIT_SHIPPED)
        return;
    pthread_mutex_lock(&a->mu);
    if (seq > a->want_seq[level]) {
        a->want_seq[level] = seq;
        if (a->is_idle[level])
            pthread_cond_signal(&a->cv[level]);
    }
    pthread_mutex_unlock(&a->mu);
}

int
serve_acks_reach_now(serve_acks_t *a, stele_wait_t level, uint64_t seq)
{
    if (level != STELE_WAIT_WRITTEN && level != STELE_WAIT_DURABLE)
        return 0;
    pthread_mutex_lock(&a->mu);
    /* Only while the level's thread waits for nothing: it never has to catch up with a
     * reached_seq moved under it, and the loop never blocks behind its wait. */
    int is_free = a->want_seq[level] <= a->state.reached_seq[level] &&
                  a->state.failed_upto[level] <= a->state.reached_seq[level];
    pthread_mutex_unlock(&a->mu);
    if (!is_free)
        return 0;
    stele_error_t err = {0};
    if (stele_wait(a->db, seq, level, 0, &err) != 0)
        return 0; /* not reached yet, or failed: the thread waits and reports it */
    pthread_mutex_lock(&a->mu);
    if (seq > a->state.reached_seq[level])
        a->state.reached_seq[level] = seq;
    pthread_mutex_unlock(&a->mu);
    return 1;
}

void
serve_acks_snapshot(serve_acks_t *a, serve_ack_state_t *out)
{
    pthread_mutex_lock(&a->mu);
    *out = a->state;
    pthread_mutex_unlock(&a->mu);
}

void
serve_acks_stop(serve_acks_t *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->is_stopping = 1;
    for (int level = 0; level < 4; level++)
        pthread_cond_broadcast(&a->cv[level]);
    pthread_mutex_unlock(&a->mu);
    for (int level = STELE_WAIT_WRITTEN; level <= STELE_WAIT_SHIPPED; level++) {
        if (a->threads[level].is_started)
            pthread_join(a->threads[level].thread, NULL);
    }
    for (int level = 0; level < 4; level++)
        pthread_cond_destroy(&a->cv[level]);
    pthread_mutex_destroy(&a->mu);
    free(a);
}
