/*
 * serve_loop.c: the event loop of `stele serve`: accepts connections on the Unix socket,
 * frames request lines, appends each event with STELE_WAIT_NONE, and sends replies in
 * request order once the ack threads (serve_ack.c) report the wait level reached.
 *
 * Everything here belongs to the loop thread; no locks. epoll is level-triggered
 * throughout; a connection's interest is recomputed after every change (conn_update).
 *
 * Bounds (why memory cannot grow without limit, whatever a client does):
 *  - input: a connection holds at most max_line_bytes of a partial line plus one read
 *    chunk; an oversize line is discarded as it arrives (serve_frame.c);
 *  - output: a connection whose unsent replies exceed SERVE_OUT_HIGH_BYTES, or with
 *    SERVE_MAX_PENDING unanswered requests, is not read from until it catches up, so a
 *    client that stops reading stops being served, and only it;
 *  - fairness: one read of at most SERVE_READ_CHUNK_BYTES per connection per wakeup.
 *
 * Out of descriptors: when accept() fails with EMFILE/ENFILE (or ENOMEM/ENOBUFS) the
 * listening socket leaves the epoll interest, or the pending connection would wake the loop
 * at once for ever. Accepting resumes when a connection closes, and also after a backoff
 * (SERVE_ACCEPT_RETRY_MIN_MS doubling to SERVE_ACCEPT_RETRY_MAX_MS), since what took the
 * descriptors may be another part of the process or a passing spike, and no connection
 * need ever close.
 *
 * Order: each connection keeps a FIFO of unanswered requests; a reply leaves only when
 * every earlier one on that connection has. Errors found before the append (bad JSON,
 * validation) are formatted at once and wait their turn in the FIFO.
 */
#include "serve.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
    SERVE_EPOLL_BATCH = 256,   /* events per epoll_wait */
    SERVE_ACCEPT_BATCH = 256,  /* accepts per wakeup, so a connect storm cannot starve I/O */
    SERVE_PENDING_MIN_CAP = 8, /* first FIFO allocation */
    /* Accept retries while out of descriptors: soon enough that a passing spike costs new
     * clients well under a second, spaced out while it lasts so the retries cost nothing. */
    SERVE_ACCEPT_RETRY_MIN_MS = 250,
    SERVE_ACCEPT_RETRY_MAX_MS = 4000,
};

/* One unanswered request. */
typedef struct serve_pending {
    uint64_t seq;
    stele_wait_t level;
    char *error_reply; /* owned: an error reply already formatted, or NULL */
} serve_pending_t;

typedef struct serve_conn {
    int fd;
    uint64_t id;
    uint32_t events; /* current epoll interest */
    serve_frame_t frame;
    char *in; /* unconsumed input: a partial line, or lines left while throttled */
    size_t in_len, in_cap;
    char *out; /* formatted replies not yet sent: out[out_off, out_len) */
    size_t out_off, out_len, out_cap;
    serve_pending_t *fifo; /* ring buffer of unanswered requests */
    size_t fifo_head, fifo_count, fifo_cap;
    uint64_t n_requests;
    int is_read_closed; /* EOF seen, or the server is draining */
    int is_peer_gone;   /* peer hung up or a write failed: replies are dropped */
    struct serve_conn *all_prev, *all_next;   /* every connection */
    struct serve_conn *wait_prev, *wait_next; /* connections with a non-empty FIFO */
    int is_waiting;
    int is_closed; /* retired: fd closed, struct freed after the epoll batch */
    struct serve_conn *dead_next;
} serve_conn_t;

typedef struct serve_loop {
    const serve_config_t *cfg;
    int epoll_fd;
    int wake_fd;
    serve_acks_t *acks;
    serve_ack_state_t acked;
    serve_conn_t *all;
    serve_conn_t *waiting;
    serve_conn_t *dead; /* closed during this epoll batch; freed when it is done */
    size_t n_conns;
    uint64_t next_conn_id;
    int is_accept_paused;            /* listening socket out of the epoll interest */
    uint32_t accept_retry_ms;        /* backoff while short of descriptors; 0 when not */
    struct timespec accept_retry_at; /* when a paused accept is tried again */
    int is_draining;
    int has_logged_halt;
    uint64_t want_seq[4]; /* per wait level: the newest seq a request waits for */
    uint64_t told_seq[4]; /* per wait level: the newest seq the ack threads were told */
    struct timespec drain_deadline;
    char *scratch; /* SERVE_READ_CHUNK_BYTES, one read at a time */
    /* epoll tags for the non-connection fds: their addresses identify them */
    char tag_listen, tag_signal, tag_wake;
} serve_loop_t;

static void conn_close(serve_loop_t *loop, serve_conn_t *c);
static void serve_accept_resume(serve_loop_t *loop);

/* ---- time ---------------------------------------------------------------------------------- */

/* Milliseconds from now until a CLOCK_MONOTONIC deadline; 0 once it has passed. */
static int64_t
ms_until(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t ms = (int64_t)(deadline->tv_sec - now.tv_sec) * 1000 +
                 (deadline->tv_nsec - now.tv_nsec) / 1000000;
    return ms < 0 ? 0 : ms;
}

static void
deadline_after_ms(struct timespec *out, uint32_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, out);
    out->tv_sec += (time_t)(ms / 1000);
    out->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (out->tv_nsec >= 1000000000L) {
        out->tv_sec++;
        out->tv_nsec -= 1000000000L;
    }
}

/* ---- buffers ------------------------------------------------------------------------------ */

static int
buf_reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t new_cap = *cap ? *cap : 256;
    while (new_cap < need)
        new_cap *= 2;
    char *p = realloc(*buf, new_cap);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = new_cap;
    return 0;
}

static int
conn_is_throttled(const serve_conn_t *c)
{
    return c->out_len - c->out_off > SERVE_OUT_HIGH_BYTES || c->fifo_count >= SERVE_MAX_PENDING;
}

static void
conn_out_append(serve_conn_t *c, const char *data, size_t n)
{
    if (c->is_peer_gone)
        return;
    if (c->out_off > 0 && c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    if (buf_reserve(&c->out, &c->out_cap, c->out_len + n) != 0) {
        c->is_peer_gone = 1; /* cannot answer in order any more: drop the connection */
        return;
    }
    memcpy(c->out + c->out_len, data, n);
    c->out_len += n;
}

/* Sends what it can without blocking. */
static void
conn_write(serve_conn_t *c)
{
    while (!c->is_peer_gone && c->out_off < c->out_len) {
        ssize_t n =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c->out_off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            c->is_peer_gone = 1;
        }
    }
    if (c->out_off == c->out_len || c->is_peer_gone) {
        c->out_off = c->out_len = 0;
        free(c->out); /* idle connections should cost next to nothing */
        c->out = NULL;
        c->out_cap = 0;
    }
}

/* ---- the reply FIFO ------------------------------------------------------------------------ */

static void
waiting_link(serve_loop_t *loop, serve_conn_t *c)
{
    if (c->is_waiting)
        return;
    c->is_waiting = 1;
    c->wait_prev = NULL;
    c->wait_next = loop->waiting;
    if (loop->waiting)
        loop->waiting->wait_prev = c;
    loop->waiting = c;
}

static void
waiting_unlink(serve_loop_t *loop, serve_conn_t *c)
{
    if (!c->is_waiting)
        return;
    c->is_waiting = 0;
    if (c->wait_prev)
        c->wait_prev->wait_next = c->wait_next;
    else
        loop->waiting = c->wait_next;
    if (c->wait_next)
        c->wait_next->wait_prev = c->wait_prev;
    c->wait_prev = c->wait_next = NULL;
}

/* 1 and *code set when `p` can be answered now; 0 while its wait level is pending. */
static int
pending_outcome(const serve_loop_t *loop, const serve_pending_t *p, int *code,
                const stele_error_t **err)
{
    *code = 0;
    *err = NULL;
    if (p->error_reply || p->level == STELE_WAIT_NONE)
        return 1;
    const serve_ack_state_t *s = &loop->acked;
    for (int level = p->level; level <= STELE_WAIT_SHIPPED; level++) {
        if (s->reached_seq[level] >= p->seq)
            return 1; /* a higher level implies this one */
    }
    if (s->failed_upto[p->level] >= p->seq) {
        *code = s->fail_code[p->level];
        *err = &s->fail_err[p->level];
        return 1;
    }
    return 0;
}

static int
fifo_push(serve_loop_t *loop, serve_conn_t *c, const serve_pending_t *p)
{
    if (c->fifo_count == c->fifo_cap) {
        size_t new_cap = c->fifo_cap ? c->fifo_cap * 2 : SERVE_PENDING_MIN_CAP;
        serve_pending_t *ring = malloc(new_cap * sizeof *ring);
        if (!ring)
            return -ENOMEM;
        for (size_t i = 0; i < c->fifo_count; i++)
            ring[i] = c->fifo[(c->fifo_head + i) % c->fifo_cap];
        free(c->fifo);
        c->fifo = ring;
        c->fifo_cap = new_cap;
        c->fifo_head = 0;
    }
    c->fifo[(c->fifo_head + c->fifo_count) % c->fifo_cap] = *p;
    c->fifo_count++;
    waiting_link(loop, c);
    return 0;
}

/* Moves every answerable reply at the head of the FIFO to the output buffer. */
static void
fifo_flush_ready(serve_loop_t *loop, serve_conn_t *c)
{
    char reply[SERVE_REPLY_MAX_BYTES];
    while (c->fifo_count > 0) {
        serve_pending_t *p = &c->fifo[c->fifo_head];
        int code;
        const stele_error_t *err;
        if (!pending_outcome(loop, p, &code, &err))
            break;
        if (p->error_reply) {
            conn_out_append(c, p->error_reply, strlen(p->error_reply));
            free(p->error_reply);
        } else {
            size_t n = serve_reply_format(reply, sizeof reply, code, p->seq, err);
            conn_out_append(c, reply, n);
        }
        c->fifo_head = (c->fifo_head + 1) % c->fifo_cap;
        c->fifo_count--;
    }
    if (c->fifo_count == 0) {
        waiting_unlink(loop, c);
        free(c->fifo);
        c->fifo = NULL;
        c->fifo_cap = c->fifo_head = 0;
    }
}

/* Queues the answer to one request behind the earlier ones. */
static void
conn_answer(serve_loop_t *loop, serve_conn_t *c, int code, uint64_t seq, stele_wait_t level,
            const stele_error_t *err)
{
    char reply[SERVE_REPLY_MAX_BYTES];
    serve_pending_t p = {.seq = seq, .level = level, .error_reply = NULL};
    size_t n = 0;
    if (code != 0)
        n = serve_reply_format(reply, sizeof reply, code, 0, err);
    if (c->fifo_count == 0 && (code != 0 || level == STELE_WAIT_NONE)) {
        conn_out_append(c, reply,
                        code != 0 ? n : serve_reply_format(reply, sizeof reply, 0, seq, NULL));
        return;
    }
    if (code != 0) {
        p.error_reply = malloc(n + 1);
        if (!p.error_reply) {
            c->is_peer_gone = 1;
            return;
        }
        memcpy(p.error_reply, reply, n + 1);
    }
    if (fifo_push(loop, c, &p) != 0) {
        free(p.error_reply);
        c->is_peer_gone = 1;
    }
}

/* ---- requests ------------------------------------------------------------------------------ */

static void
serve_handle_request(serve_loop_t *loop, serve_conn_t *c, const char *line, size_t len)
{
    const serve_config_t *cfg = loop->cfg;
    serve_request_t req;
    stele_error_t err = {0};
    uint64_t seq = 0;
    c->n_requests++;
    int rc = serve_request_parse(line, len, cfg->default_wait, &req, &err);
    if (rc == 0 && req.wait == STELE_WAIT_SHIPPED && cfg->n_sinks == 0) {
        rc = err.code = STELE_ENOSINK;
        snprintf(err.message, sizeof err.message, "wait level shipped needs a sink");
        snprintf(err.hint, sizeof err.hint,
                 "start the server with --mongo URI or a [sink] "
                 "section in its config");
    }
    if (rc == 0)
        rc = stele_append_json(cfg->db, req.json, req.json_len, STELE_WAIT_NONE, &seq, &err);
    stele_wait_t level = req.wait;
    if (rc == STELE_EHALTED && !loop->has_logged_halt) {
        char quoted[300];
        loop->has_logged_halt = 1;
        serve_logf(cfg->log, SERVE_LOG_ERROR, "engine halted", "error=%s code=%d",
                   stele_log_quote(quoted, sizeof quoted, err.message), rc);
    }
    if (rc != 0 && err.code == 0)
        err.code = rc;
    conn_answer(loop, c, rc, seq, level, rc ? &err : NULL);
    if (rc == 0 && level > STELE_WAIT_NONE && seq > loop->want_seq[level])
        loop->want_seq[level] = seq;
}

/* Tells the ack threads what the requests taken in since the last call wait for: once per
 * epoll batch, not once per request, so the loop takes their mutex once per batch. */
static void
serve_flush_wants(serve_loop_t *loop)
{
    for (int level = STELE_WAIT_WRITTEN; level <= STELE_WAIT_SHIPPED; level++) {
        if (loop->want_seq[level] > loop->told_seq[level]) {
            serve_acks_want(loop->acks, (stele_wait_t)level, loop->want_seq[level]);
            loop->told_seq[level] = loop->want_seq[level];
        }
    }
}

/* Handles the complete lines in data[0..n) while the connection is not throttled; returns
 * the bytes consumed. */
static size_t
serve_handle_lines(serve_loop_t *loop, serve_conn_t *c, const char *data, size_t n, int is_eof)
{
    size_t pos = 0;
    while ((!conn_is_throttled(c) || c->is_peer_gone) && pos <= n) {
        const char *line;
        size_t line_len, consumed;
        serve_frame_kind_t kind =
            serve_frame_next(&c->frame, data + pos, n - pos, is_eof, &line, &line_len, &consumed);
        pos += consumed;
        if (kind == SERVE_FRAME_NEED_MORE)
            break;
        if (kind == SERVE_FRAME_OVERSIZE) {
            stele_error_t err = {.code = STELE_ETOOBIG};
            snprintf(err.message, sizeof err.message,
                     "request line longer than %zu bytes: discarded", c->frame.max_line_bytes);
            c->n_requests++;
            conn_answer(loop, c, STELE_ETOOBIG, 0, STELE_WAIT_NONE, &err);
        } else {
            serve_handle_request(loop, c, line, line_len);
        }
    }
    return pos;
}

/* Handles the lines buffered in c->in (left over while throttled). */
static void
conn_handle_buffered(serve_loop_t *loop, serve_conn_t *c)
{
    if (c->in_len == 0)
        return;
    size_t used = serve_handle_lines(loop, c, c->in, c->in_len, c->is_read_closed);
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    if (c->in_len == 0) {
        free(c->in);
        c->in = NULL;
        c->in_cap = 0;
    }
}

/* One read(2) and the lines it completes. Returns 1 when bytes came in, 0 when none were
 * ready, -1 at EOF or on error (is_read_closed is then set). */
static int
conn_read(serve_loop_t *loop, serve_conn_t *c)
{
    ssize_t n;
    do {
        n = read(c->fd, loop->scratch, SERVE_READ_CHUNK_BYTES);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        c->is_read_closed = 1;
        c->is_peer_gone = 1;
        return -1;
    }
    if (n == 0) {
        c->is_read_closed = 1; /* a final line without '\n' still counts */
        conn_handle_buffered(loop, c);
        return -1;
    }
    const char *data = loop->scratch;
    size_t len = (size_t)n;
    if (c->in_len > 0) {
        if (buf_reserve(&c->in, &c->in_cap, c->in_len + len) != 0) {
            c->is_peer_gone = c->is_read_closed = 1;
            return -1;
        }
        memcpy(c->in + c->in_len, data, len);
        c->in_len += len;
        conn_handle_buffered(loop, c);
        return 1;
    }
    size_t used = serve_handle_lines(loop, c, data, len, 0);
    if (used < len) {
        if (buf_reserve(&c->in, &c->in_cap, len - used) != 0) {
            c->is_peer_gone = c->is_read_closed = 1;
            return -1;
        }
        memcpy(c->in, data + used, len - used);
        c->in_len = len - used;
    }
    return 1;
}

/* ---- connections --------------------------------------------------------------------------- */

/* Recomputes the epoll interest; closes the connection when nothing is left to do. Returns
 * 0 when the connection is still open. */
static int
conn_update(serve_loop_t *loop, serve_conn_t *c)
{
    conn_write(c);
    if (c->is_peer_gone || (c->is_read_closed && c->fifo_count == 0 && c->out_len == 0)) {
        conn_close(loop, c);
        return -1;
    }
    uint32_t want = 0;
    if (!c->is_read_closed && !conn_is_throttled(c))
        want |= EPOLLIN;
    if (c->out_len > c->out_off)
        want |= EPOLLOUT;
    if (want != c->events) {
        struct epoll_event ev = {.events = want, .data.ptr = c};
        if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
            conn_close(loop, c);
            return -1;
        }
        c->events = want;
    }
    return 0;
}

/* Closes the fd and unlinks the connection now; the struct is freed after the current
 * epoll batch (serve_free_dead), since a later event of the batch may still name it. */
static void
conn_close(serve_loop_t *loop, serve_conn_t *c)
{
    if (c->is_closed)
        return;
    c->is_closed = 1;
    serve_logf(loop->cfg->log, SERVE_LOG_DEBUG, "connection closed",
               "conn=%" PRIu64 " requests=%" PRIu64 " unanswered=%zu", c->id, c->n_requests,
               c->fifo_count);
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    waiting_unlink(loop, c);
    for (size_t i = 0; i < c->fifo_count; i++)
        free(c->fifo[(c->fifo_head + i) % c->fifo_cap].error_reply);
    free(c->fifo);
    free(c->in);
    free(c->out);
    c->fifo = NULL;
    c->in = c->out = NULL;
    c->fifo_count = c->in_len = c->out_len = c->out_off = 0;
    if (c->all_prev)
        c->all_prev->all_next = c->all_next;
    else
        loop->all = c->all_next;
    if (c->all_next)
        c->all_next->all_prev = c->all_prev;
    loop->n_conns--;
    c->dead_next = loop->dead;
    loop->dead = c;
    serve_accept_resume(loop); /* a descriptor came free */
}

/* Takes the listening socket back into the epoll interest after a pause; the pending
 * connections then wake the loop as usual (level-triggered). */
static void
serve_accept_resume(serve_loop_t *loop)
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
        serve_logf(loop->cfg->log, SERVE_LOG_WARN, what,
                   "connections=%zu errno=%s retry_ms=%" PRIu32, loop->n_conns,
                   stele_errname(-error), loop->accept_retry_ms);
    } else if (loop->accept_retry_ms < SERVE_ACCEPT_RETRY_MAX_MS) {
        loop->accept_retry_ms *= 2;
    }
    deadline_after_ms(&loop->accept_retry_at, loop->accept_retry_ms);
}

/* Every pending connection was taken: a shortage of descriptors, if any, is over. */
static void
serve_accept_drained(serve_loop_t *loop)
{
    if (loop->accept_retry_ms == 0)
        return;
    loop->accept_retry_ms = 0;
    serve_logf(loop->cfg->log, SERVE_LOG_INFO, "accept resumed", "connections=%zu", loop->n_conns);
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
        serve_conn_t *c = calloc(1, sizeof *c);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (!c || epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->id = ++loop->next_conn_id;
        c->events = EPOLLIN;
        c->frame.max_line_bytes = loop->cfg->max_line_bytes;
        c->all_next = loop->all;
        if (loop->all)
            loop->all->all_prev = c;
        loop->all = c;
        loop->n_conns++;
        serve_logf(loop->cfg->log, SERVE_LOG_DEBUG, "connection opened",
                   "conn=%" PRIu64 " connections=%zu", c->id, loop->n_conns);
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

static void
serve_on_conn_event(serve_loop_t *loop, serve_conn_t *c, uint32_t events)
{
    if (c->is_closed)
        return;
    if (events & (EPOLLHUP | EPOLLERR)) {
        /* The peer is gone: appends what it sent before hanging up, answers nobody. */
        c->is_peer_gone = 1;
        while (conn_read(loop, c) > 0)
            ;
        conn_close(loop, c);
        return;
    }
    if (events & EPOLLOUT) {
        conn_write(c);
        if (!conn_is_throttled(c))
            conn_handle_buffered(loop, c);
    }
    if ((events & EPOLLIN) && !conn_is_throttled(c) && !c->is_read_closed)
        conn_read(loop, c);
    conn_update(loop, c);
}

/* The ack threads moved: answer what became answerable. */
static void
serve_on_acks(serve_loop_t *loop)
{
    uint64_t count;
    ssize_t n = read(loop->wake_fd, &count, sizeof count);
    (void)n; /* EAGAIN: a spurious wakeup; the snapshot below is still right */
    serve_acks_snapshot(loop->acks, &loop->acked);
    serve_conn_t *next;
    for (serve_conn_t *c = loop->waiting; c; c = next) {
        next = c->wait_next;
        fifo_flush_ready(loop, c);
        conn_write(c);
        if (!conn_is_throttled(c))
            conn_handle_buffered(loop, c);
        conn_update(loop, c);
    }
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
    serve_logf(cfg->log, SERVE_LOG_INFO, "shutting down", "signal=%s connections=%zu",
               signo == SIGINT ? "SIGINT" : "SIGTERM", loop->n_conns);
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, cfg->listen_fd, NULL);
    close(cfg->listen_fd);
    serve_conn_t *next;
    for (serve_conn_t *c = loop->all; c; c = next) {
        next = c->all_next;
        int n_reads = 0;
        /* What is already in the socket buffer was sent before the signal: take it in,
         * within the same bounds as always (at most a socket buffer's worth of reads). */
        while (!c->is_read_closed && !conn_is_throttled(c) && n_reads++ < 64) {
            if (conn_read(loop, c) <= 0)
                break;
        }
        c->is_read_closed = 1;
        c->in_len = 0;
        conn_update(loop, c);
    }
    int rc = stele_flush(cfg->db, &err);
    if (rc != 0) {
        char quoted[300];
        serve_logf(cfg->log, SERVE_LOG_ERROR, "final flush failed", "error=%s code=%d",
                   stele_log_quote(quoted, sizeof quoted, err.message), rc);
    }
    deadline_after_ms(&loop->drain_deadline, cfg->drain_timeout_ms);
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
    char reply[SERVE_REPLY_MAX_BYTES];
    serve_conn_t *next;
    size_t n_failed = 0;
    serve_refresh_acked(loop);
    for (serve_conn_t *c = loop->all; c; c = next) {
        next = c->all_next;
        while (c->fifo_count > 0) {
            fifo_flush_ready(loop, c);
            if (c->fifo_count == 0)
                break;
            serve_pending_t *p = &c->fifo[c->fifo_head];
            stele_error_t err = {.code = STELE_ECLOSED};
            snprintf(err.message, sizeof err.message,
                     "server stopped before seq %" PRIu64 " reached wait level %s", p->seq,
                     serve_wait_name(p->level));
            size_t n = serve_reply_format(reply, sizeof reply, STELE_ECLOSED, 0, &err);
            conn_out_append(c, reply, n);
            c->fifo_head = (c->fifo_head + 1) % c->fifo_cap;
            c->fifo_count--;
            n_failed++;
        }
        fifo_flush_ready(loop, c); /* unlinks and frees the empty FIFO */
        conn_write(c);
        conn_close(loop, c);
    }
    if (n_failed > 0)
        serve_logf(loop->cfg->log, SERVE_LOG_WARN, "drain timed out",
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
        conn_close(loop, loop->all);
    serve_free_dead(loop);
    serve_acks_stop(loop->acks);
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
            serve_on_conn_event(loop, tag, events[i].events);
        }
    }
}

/* A paused accept whose backoff ran out is tried now rather than at the next readiness,
 * so that, with nobody pending, the shortage is known to be over (EAGAIN). */
static void
serve_accept_retry_if_due(serve_loop_t *loop)
{
    if (!loop->is_accept_paused || loop->is_draining || ms_until(&loop->accept_retry_at) > 0)
        return;
    serve_accept_resume(loop);
    if (!loop->is_accept_paused)
        serve_accept(loop);
}

/* How long epoll_wait may block: until the drain deadline, or until a paused accept is due
 * to be retried, else for ever. */
static int
serve_loop_timeout_ms(const serve_loop_t *loop)
{
    if (loop->is_draining)
        return (int)ms_until(&loop->drain_deadline);
    if (loop->is_accept_paused)
        return (int)ms_until(&loop->accept_retry_at);
    return -1;
}

int
serve_loop_run(const serve_config_t *cfg)
{
    serve_loop_t loop;
    struct epoll_event events[SERVE_EPOLL_BATCH];
    int rc = serve_loop_setup(&loop, cfg);
    if (rc != 0) {
        serve_logf(cfg->log, SERVE_LOG_ERROR, "event loop setup failed", "errno=%s",
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
            serve_logf(cfg->log, SERVE_LOG_ERROR, "epoll_wait failed", "errno=%s",
                       stele_errname(rc));
            break;
        }
        serve_on_events(&loop, events, n, &rc);
        serve_accept_retry_if_due(&loop);
        serve_flush_wants(&loop);
        serve_free_dead(&loop);
    }
    serve_loop_teardown(&loop);
    return rc;
}
