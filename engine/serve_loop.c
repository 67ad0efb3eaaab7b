/*
 * serve_loop.c: the event loop of the server: accepts connections on the Unix socket and
 * hands their events to serve_conn.c, wakes the connections whose replies the ack threads
 * (serve_ack.c) made answerable, tells the ack threads what to wait for, and on
 * SIGTERM/SIGINT drains (docs/protocol.md, "Shutdown").
 *
 * Everything here belongs to the loop thread; no locks. epoll is level-triggered
 * throughout.
 *
 * Out of descriptors: when accept() fails with EMFILE/ENFILE (or ENOMEM/ENOBUFS) the
 * listening socket leaves the epoll interest, or the pending connection would wake the loop
 * at once for ever. Accepting resumes when a connection closes, and also after a backoff
 * (SERVE_ACCEPT_RETRY_MIN_MS doubling to SERVE_ACCEPT_RETRY_MAX_MS), since what took the
 * descriptors may be another part of the process or a passing spike, and no connection
 * need ever close. Caps below the descriptor limit (serve_conn_open) keep that shortage for
 * a machine short of descriptors, not a client holding them.
 *
 * Idle connections: after each epoll batch the loop closes the connections that have had
 * nothing in flight (serve_conn_is_idle) and no byte read or sent for idle_timeout_ms. They
 * are kept least recently active first, so the sweep looks only at the head of that list,
 * and epoll_wait sleeps no longer than until the head's deadline.
 */
#include "serve.h"

#include "clock.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

enum {
    SERVE_EPOLL_BATCH = 256,  /* events per epoll_wait */
    SERVE_ACCEPT_BATCH = 256, /* accepts per wakeup, so a connect storm cannot starve I/O */
    /* Accept retries while out of descriptors: soon enough that a passing spike costs new
     * clients well under a second, spaced out while it lasts so the retries cost nothing. */
    SERVE_ACCEPT_RETRY_MIN_MS = 250,
    SERVE_ACCEPT_RETRY_MAX_MS = 4000,
};

/* Milliseconds from now until a clock_mono_ms() deadline; 0 once it has passed. */
static int64_t
ms_until(int64_t deadline_ms)
{
    int64_t ms = deadline_ms - clock_mono_ms();
    return ms < 0 ? 0 : ms;
}

/* ---- accepting ----------------------------------------------------------------------------- */

/* Takes the listening socket back into the epoll interest after a pause; the pending
 * connections then wake the loop as usual (level-triggered). */
void
serve_loop_accept_resume(serve_loop_t *loop)
{
    if (!loop->is_accept_paused || loop->is_draining)
        return;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &loop->tag_listen};
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_MOD, loop->cfg->listen_fd, &ev) == 0)
        loop->is_accept_paused = 0;
}

/* accept() failed for lack of descriptors or memory: stop watching the listening socket
 * (level-triggered, the pending connection would wake us at once for ever) and retry after
 * the backoff, doubled on each failure in a row. Logged once per shortage. */
static void
serve_accept_pause(serve_loop_t *loop, int error)
{
    struct epoll_event ev = {.events = 0, .data.ptr = &loop->tag_listen};
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_MOD, loop->cfg->listen_fd, &ev);
    loop->is_accept_paused = 1;
    if (loop->accept_retry_ms == 0) {
        loop->accept_retry_ms = SERVE_ACCEPT_RETRY_MIN_MS;
        const char *what = error == ENOMEM || error == ENOBUFS
                               ? "accept paused: out of memory"
                               : "accept paused: out of file descriptors";
        serve_logf(loop->cfg->log, STELE_LOG_WARN, what,
                   "connections=%zu errno=%s retry_ms=%" PRIu32, loop->n_conns,
                   stele_errname(-error), loop->accept_retry_ms);
    } else if (loop->accept_retry_ms < SERVE_ACCEPT_RETRY_MAX_MS) {
        loop->accept_retry_ms *= 2;
    }
    loop->accept_retry_at_ms = clock_mono_ms() + loop->accept_retry_ms;
}

/* Every pending connection was taken: a shortage of descriptors, if any, is over. */
static void
serve_accept_drained(serve_loop_t *loop)
{
    if (loop->accept_retry_ms == 0)
        return;
    loop->accept_retry_ms = 0;
    serve_logf(loop->cfg->log, STELE_LOG_INFO, "accept resumed", "connections=%zu", loop->n_conns);
}

static void
serve_accept(serve_loop_t *loop)
{
    for (int i = 0; i < SERVE_ACCEPT_BATCH; i++) {
        int fd = accept4(loop->cfg->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOMEM || errno == ENOBUFS)
                serve_accept_pause(loop, errno);
            else if (errno == EAGAIN || errno == EWOULDBLOCK)
                serve_accept_drained(loop);
            return;
        }
        serve_conn_open(loop, fd);
    }
}

/* Closes the connections idle for idle_timeout_ms (top of the file). One at the head that
 * has something in flight counts as active: it moves behind the others. */
static void
serve_close_idle(serve_loop_t *loop)
{
    uint32_t timeout_ms = loop->cfg->idle_timeout_ms;
    if (timeout_ms == 0 || loop->is_draining)
        return;
    int64_t now_ms = clock_mono_ms();
    for (size_t left = loop->n_conns; left > 0 && loop->lru_head; left--) {
        serve_conn_t *c = loop->lru_head;
        if (now_ms - c->last_active_ms < (int64_t)timeout_ms)
            break;
        if (!serve_conn_is_idle(c)) {
            serve_conn_touch(loop, c);
            continue;
        }
        serve_logf(loop->cfg->log, STELE_LOG_DEBUG, "idle connection closed",
                   "conn=%" PRIu64 " uid=%ld idle_timeout_ms=%" PRIu32, c->id, (long)c->uid,
                   timeout_ms);
        serve_conn_close(loop, c);
    }
}

static void
serve_free_dead(serve_loop_t *loop)
{
    while (loop->dead) {
        serve_conn_t *c = loop->dead;
        loop->dead = c->dead_next;
        free(c);
    }
}

/* Answers what became answerable, from a fresh snapshot of the ack state. */
static void
serve_answer_acked(serve_loop_t *loop)
{
    serve_acks_snapshot(loop->acks, &loop->acked);
    serve_conn_t *next;
    for (serve_conn_t *c = loop->waiting; c; c = next) {
        next = c->wait_next;
        serve_conn_on_acks(loop, c);
    }
}

/* The ack threads moved: answer what became answerable. */
static void
serve_on_acks(serve_loop_t *loop)
{
    uint64_t count;
    ssize_t n = read(loop->wake_fd, &count, sizeof count);
    (void)n; /* EAGAIN: a spurious wakeup; the snapshot below is still right */
    serve_answer_acked(loop);
}

/* Whether the loop tries a level's lone request itself (serve_acks_reach_now): one request
 * in this epoll batch, from the only connection waiting for a reply (with other clients in
 * flight the loop keeps reading while the level's thread waits), at a level the loop's
 * stele_wait() commits by itself (written without sync=always; durable with it: a written
 * wait with sync=always would sit through the sync the level's thread skips). */
static int
serve_may_reach_now(const serve_loop_t *loop, int level)
{
    int is_lone_client = loop->waiting && !loop->waiting->wait_next;
    if (loop->n_round_wants[level] != 1 || !is_lone_client || loop->is_draining)
        return 0;
    if (level == STELE_WAIT_WRITTEN)
        return !loop->cfg->is_sync_always;
    return level == STELE_WAIT_DURABLE && loop->cfg->is_sync_always;
}

/* Tells the ack threads what the requests taken in since the last call wait for: once per
 * epoll batch, not once per request, so the loop takes their mutex once per batch. A lone
 * request the loop first tries to commit itself. */
static void
serve_flush_wants(serve_loop_t *loop)
{
    int is_reached_now = 0;
    for (int level = STELE_WAIT_WRITTEN; level <= STELE_WAIT_SHIPPED; level++) {
        if (loop->want_seq[level] > loop->told_seq[level]) {
            if (serve_may_reach_now(loop, level) &&
                serve_acks_reach_now(loop->acks, (stele_wait_t)level, loop->want_seq[level]))
                is_reached_now = 1;
            else
                serve_acks_want(loop->acks, (stele_wait_t)level, loop->want_seq[level]);
            loop->told_seq[level] = loop->want_seq[level];
        }
        loop->n_round_wants[level] = 0;
    }
    if (is_reached_now)
        serve_answer_acked(loop);
}

/* ---- shutdown ------------------------------------------------------------------------------ */

/* Stop accepting, take in what clients already sent, make it durable. The loop then runs
 * until every reply is out or the drain deadline passes. */
static int
serve_begin_drain(serve_loop_t *loop, int signo)
{
    const serve_config_t *cfg = loop->cfg;
    stele_error_t err = {0};
    loop->is_draining = 1;
    serve_logf(cfg->log, STELE_LOG_INFO, "shutting down", "signal=%s connections=%zu",
               signo == SIGINT ? "SIGINT" : "SIGTERM", loop->n_conns);
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, cfg->listen_fd, NULL);
    close(cfg->listen_fd);
    serve_conn_t *next;
    for (serve_conn_t *c = loop->all; c; c = next) {
        next = c->all_next;
        serve_conn_drain_input(loop, c);
    }
    int rc = stele_flush(cfg->db, &err);
    if (rc != 0) {
        char quoted[300];
        serve_logf(cfg->log, STELE_LOG_ERROR, "final flush failed", "error=%s code=%d",
                   stele_log_quote(quoted, sizeof quoted, err.message), rc);
    }
    loop->drain_deadline_ms = clock_mono_ms() + cfg->drain_timeout_ms;
    return rc;
}

/* What the ack threads reported, raised to what the engine itself says each level reached
 * (stele_reached_seq: every seq up to it did). The final flush made everything appended
 * durable, but the ack threads may not have reported it yet, or not run at all with
 * --drain-timeout-ms 0: without this, such a request would be refused as short of its
 * level, which is false, and a client that retries would append it twice. */
static void
serve_refresh_acked(serve_loop_t *loop)
{
    serve_acks_snapshot(loop->acks, &loop->acked);
    for (int level = STELE_WAIT_WRITTEN; level <= STELE_WAIT_SHIPPED; level++) {
        uint64_t engine_seq = stele_reached_seq(loop->cfg->db, (stele_wait_t)level);
        if (engine_seq > loop->acked.reached_seq[level])
            loop->acked.reached_seq[level] = engine_seq;
    }
}

/* The drain deadline passed: whoever still waits gets an error, never a silent close. A
 * request that did reach its level behind one that did not still gets its seq. */
static void
serve_fail_remaining(serve_loop_t *loop)
{
    serve_conn_t *next;
    size_t n_failed = 0;
    serve_refresh_acked(loop);
    for (serve_conn_t *c = loop->all; c; c = next) {
        next = c->all_next;
        n_failed += serve_conn_fail_unanswered(loop, c);
    }
    if (n_failed > 0)
        serve_logf(loop->cfg->log, STELE_LOG_WARN, "drain timed out",
                   "unanswered=%zu drain_timeout_ms=%" PRIu32, n_failed,
                   loop->cfg->drain_timeout_ms);
}

/* ---- the loop ------------------------------------------------------------------------------ */

static int
serve_loop_setup(serve_loop_t *loop, const serve_config_t *cfg)
{
    memset(loop, 0, sizeof *loop);
    loop->cfg = cfg;
    loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    loop->scratch = malloc(SERVE_READ_CHUNK_BYTES);
    if (loop->epoll_fd < 0 || loop->wake_fd < 0 || !loop->scratch)
        return loop->scratch ? -errno : -ENOMEM;
    struct epoll_event ev_listen = {.events = EPOLLIN, .data.ptr = &loop->tag_listen};
    struct epoll_event ev_signal = {.events = EPOLLIN, .data.ptr = &loop->tag_signal};
    struct epoll_event ev_wake = {.events = EPOLLIN, .data.ptr = &loop->tag_wake};
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, cfg->listen_fd, &ev_listen) != 0 ||
        epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, cfg->signal_fd, &ev_signal) != 0 ||
        epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, loop->wake_fd, &ev_wake) != 0)
        return -errno;
    return serve_acks_start(cfg->db, loop->wake_fd, cfg->is_sync_never, &loop->acks);
}

static void
serve_loop_teardown(serve_loop_t *loop)
{
    while (loop->all)
        serve_conn_close(loop, loop->all);
    serve_free_dead(loop);
    serve_acks_stop(loop->acks);
    free(loop->uids);
    if (!loop->is_draining && loop->cfg->listen_fd >= 0)
        close(loop->cfg->listen_fd);
    if (loop->wake_fd >= 0)
        close(loop->wake_fd);
    if (loop->epoll_fd >= 0)
        close(loop->epoll_fd);
    free(loop->scratch);
}

/* A signal: the first starts the drain, a second stops waiting and fails what is left.
 * Returns 1 when the rest of the epoll batch must be skipped: it may name connections
 * that were closed here. A failed final flush is stored in *rc. */
static int
serve_on_signal(serve_loop_t *loop, int *rc)
{
    struct signalfd_siginfo si;
    if (read(loop->cfg->signal_fd, &si, sizeof si) != (ssize_t)sizeof si)
        return 0;
    if (loop->is_draining) {
        serve_fail_remaining(loop);
        return 1;
    }
    int flush_rc = serve_begin_drain(loop, (int)si.ssi_signo);
    if (flush_rc != 0)
        *rc = flush_rc;
    return 1;
}

/* Handles one epoll batch. */
static void
serve_on_events(serve_loop_t *loop, const struct epoll_event *events, int n, int *rc)
{
    for (int i = 0; i < n; i++) {
        void *tag = events[i].data.ptr;
        if (tag == &loop->tag_listen) {
            if (!loop->is_draining)
                serve_accept(loop);
        } else if (tag == &loop->tag_wake) {
            serve_on_acks(loop);
        } else if (tag == &loop->tag_signal) {
            if (serve_on_signal(loop, rc))
                break;
        } else {
            serve_conn_on_event(loop, tag, events[i].events);
        }
    }
}

/* A paused accept whose backoff ran out is tried now rather than at the next readiness,
 * so that, with nobody pending, the shortage is known to be over (EAGAIN). */
static void
serve_accept_retry_if_due(serve_loop_t *loop)
{
    if (!loop->is_accept_paused || loop->is_draining || ms_until(loop->accept_retry_at_ms) > 0)
        return;
    serve_loop_accept_resume(loop);
    if (!loop->is_accept_paused)
        serve_accept(loop);
}

/* How long epoll_wait may block: until the drain deadline, or until a paused accept is due
 * to be retried or the least recently active connection would turn idle, else for ever. */
static int
serve_loop_timeout_ms(const serve_loop_t *loop)
{
    if (loop->is_draining)
        return (int)ms_until(loop->drain_deadline_ms);
    int64_t ms = -1;
    if (loop->is_accept_paused)
        ms = ms_until(loop->accept_retry_at_ms);
    if (loop->cfg->idle_timeout_ms && loop->lru_head) {
        int64_t idle_ms = ms_until(loop->lru_head->last_active_ms + loop->cfg->idle_timeout_ms);
        if (ms < 0 || idle_ms < ms)
            ms = idle_ms;
    }
    return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

int
serve_loop_run(const serve_config_t *cfg)
{
    serve_loop_t loop;
    struct epoll_event events[SERVE_EPOLL_BATCH];
    int rc = serve_loop_setup(&loop, cfg);
    if (rc != 0) {
        serve_logf(cfg->log, STELE_LOG_ERROR, "event loop setup failed", "errno=%s",
                   stele_errname(rc));
        serve_loop_teardown(&loop);
        return rc;
    }
    for (;;) {
        if (loop.is_draining && loop.n_conns == 0)
            break;
        int timeout_ms = serve_loop_timeout_ms(&loop);
        if (loop.is_draining && timeout_ms == 0) {
            serve_fail_remaining(&loop);
            break;
        }
        int n = epoll_wait(loop.epoll_fd, events, SERVE_EPOLL_BATCH, timeout_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = -errno;
            serve_logf(cfg->log, STELE_LOG_ERROR, "epoll_wait failed", "errno=%s",
                       stele_errname(rc));
            break;
        }
        serve_on_events(&loop, events, n, &rc);
        serve_close_idle(&loop);
        serve_accept_retry_if_due(&loop);
        serve_flush_wants(&loop);
        serve_free_dead(&loop);
    }
    serve_loop_teardown(&loop);
    return rc;
}
