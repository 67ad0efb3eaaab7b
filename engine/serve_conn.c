/*
 * serve_conn.c: one client connection of the server: reads its bytes, frames request lines
 * (protocol.h), appends each event with STELE_WAIT_NONE, keeps its replies in request order
 * and sends them once the ack threads (serve_ack.c) report the wait level reached. The loop
 * (serve_loop.c) owns accepting, the ack wakeups, signals and the drain.
 *
 * Everything here belongs to the loop thread; no locks. epoll is level-triggered; a
 * connection's interest is recomputed after every change (conn_update).
 *
 * Bounds (why memory cannot grow without limit, whatever a client does):
 *  - input: a connection holds at most max_line_bytes of a partial line plus one read
 *    chunk; an oversize line is discarded as it arrives (protocol_frame_next);
 *  - output: a connection whose unsent replies exceed SERVE_OUT_HIGH_BYTES, or with
 *    SERVE_MAX_PENDING unanswered requests, is not read from until it catches up, so a
 *    client that stops reading stops being served, and only it;
 *  - fairness: one read of at most SERVE_READ_CHUNK_BYTES per connection per wakeup;
 *  - an idle connection holds no buffer: each is freed when it empties.
 *
 * Caps (why one local user cannot lock the others out): a connection is admitted only while
 * its user (SO_PEERCRED) holds fewer than max_conns_per_uid and the server fewer than
 * max_conns, which stays below the descriptor limit; beyond either it gets one STELE_EBUSY
 * reply and is closed at once, never left waiting in the backlog. The loop closes a
 * connection idle for idle_timeout_ms (serve_loop.c): every connection sits in an LRU list
 * that each byte read or sent moves to the tail.
 *
 * Origin: each record appended for a connection carries its peer's SO_PEERCRED uid, gid and
 * pid (STELE_ORIGIN_PEER), read once at accept, through the engine-internal
 * stele_append_json_from(): the kernel vouches for them, and nothing in a request line can
 * change them (a field the event names "uid" or "origin" is event data).
 *
 * Order: each connection keeps a FIFO of unanswered requests; a reply leaves only when
 * every earlier one on that connection has. Errors found before the append (bad JSON,
 * validation) are formatted at once and wait their turn in the FIFO.
 */
#include "serve.h"

#include "clock.h"
#include "error.h"
#include "stele_internal.h" /* stele_append_json_from: the record's origin */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum {
    SERVE_PENDING_MIN_CAP = 8, /* first FIFO allocation */
    SERVE_UIDS_MIN_CAP = 8,    /* first allocation of the uid table */
    /* Refused connections are logged in one line per this long, however many: a flood of
     * connections must not become a flood of log lines. */
    SERVE_REFUSAL_LOG_MS = 10000,
    /* At shutdown, reads of what a client sent before the signal: at most a socket
     * buffer's worth. */
    SERVE_DRAIN_MAX_READS = 64,
};

static int conn_update(serve_loop_t *loop, serve_conn_t *c);

/* ---- output -------------------------------------------------------------------------------- */

static int
conn_is_throttled(const serve_conn_t *c)
{
    return protocol_buf_held(&c->out) > SERVE_OUT_HIGH_BYTES || c->fifo_count >= SERVE_MAX_PENDING;
}

static void
conn_out_append(serve_conn_t *c, const char *data, size_t n)
{
    if (c->is_peer_gone)
        return;
    if (protocol_buf_append(&c->out, data, n) != 0)
        c->is_peer_gone = 1; /* cannot answer in order any more: drop the connection */
}

/* Sends what it can without blocking. */
static void
conn_write(serve_loop_t *loop, serve_conn_t *c)
{
    while (!c->is_peer_gone && protocol_buf_held(&c->out) > 0) {
        ssize_t n = send(c->fd, c->out.data + c->out.off, protocol_buf_held(&c->out),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            protocol_buf_consume(&c->out, (size_t)n);
            serve_conn_touch(loop, c);
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            c->is_peer_gone = 1;
        }
    }
    if (protocol_buf_held(&c->out) == 0 || c->is_peer_gone)
        protocol_buf_free(&c->out); /* idle connections should cost next to nothing */
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

static void
fifo_pop(serve_conn_t *c)
{
    c->fifo_head = (c->fifo_head + 1) % c->fifo_cap;
    c->fifo_count--;
}

/* Moves every answerable reply at the head of the FIFO to the output buffer. */
static void
fifo_flush_ready(serve_loop_t *loop, serve_conn_t *c)
{
    char reply[PROTOCOL_REPLY_MAX_BYTES];
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
            size_t n = protocol_reply_format(reply, sizeof reply, code, p->seq, err);
            conn_out_append(c, reply, n);
        }
        fifo_pop(c);
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
    char reply[PROTOCOL_REPLY_MAX_BYTES];
    serve_pending_t p = {.seq = seq, .level = level, .error_reply = NULL};
    size_t n = 0;
    if (code != 0)
        n = protocol_reply_format(reply, sizeof reply, code, 0, err);
    if (c->fifo_count == 0 && (code != 0 || level == STELE_WAIT_NONE)) {
        conn_out_append(c, reply,
                        code != 0 ? n : protocol_reply_format(reply, sizeof reply, 0, seq, NULL));
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
conn_handle_request(serve_loop_t *loop, serve_conn_t *c, const char *line, size_t len)
{
    const serve_config_t *cfg = loop->cfg;
    protocol_request_t req;
    stele_error_t err = {0};
    uint64_t seq = 0;
    c->n_requests++;
    int rc = protocol_request_parse(line, len, cfg->default_wait, &req, &err);
    if (rc == 0 && req.wait == STELE_WAIT_SHIPPED && cfg->n_sinks == 0)
        rc = error_set_hinted(&err, STELE_ENOSINK,
                              "start the server with --mongo URI or a [sink] section in its "
                              "config",
                              "wait level shipped needs a sink");
    if (rc == 0) {
        journal_origin_t origin = {.uid = c->origin.uid,
                                   .gid = c->origin.gid,
                                   .pid = c->origin.pid,
                                   .kind = (uint32_t)c->origin.kind};
        rc = stele_append_json_from(cfg->db, &origin, req.json, req.json_len, STELE_WAIT_NONE, &seq,
                                    &err);
    }
    stele_wait_t level = req.wait;
    if (rc == STELE_EHALTED && !loop->has_logged_halt) {
        char quoted[300];
        loop->has_logged_halt = 1;
        serve_logf(cfg->log, STELE_LOG_ERROR, "engine halted", "error=%s code=%d",
                   stele_log_quote(quoted, sizeof quoted, err.message), rc);
    }
    if (rc != 0 && err.code == 0)
        err.code = rc;
    conn_answer(loop, c, rc, seq, level, rc ? &err : NULL);
    if (rc == 0 && level > STELE_WAIT_NONE) {
        loop->n_round_wants[level]++;
        if (seq > loop->want_seq[level])
            loop->want_seq[level] = seq;
    }
}

/* Handles the complete lines in data[0..n) while the connection is not throttled; returns
 * the bytes consumed. */
static size_t
conn_handle_lines(serve_loop_t *loop, serve_conn_t *c, const char *data, size_t n, int is_eof)
{
    size_t pos = 0;
    while ((!conn_is_throttled(c) || c->is_peer_gone) && pos <= n) {
        const char *line;
        size_t line_len, consumed;
        protocol_frame_kind_t kind = protocol_frame_next(&c->frame, data + pos, n - pos, is_eof,
                                                         &line, &line_len, &consumed);
        pos += consumed;
        if (kind == PROTOCOL_FRAME_NEED_MORE)
            break;
        if (kind == PROTOCOL_FRAME_OVERSIZE) {
            stele_error_t err;
            error_set(&err, STELE_ETOOBIG, "request line longer than %zu bytes: discarded",
                      c->frame.max_line_bytes);
            c->n_requests++;
            conn_answer(loop, c, STELE_ETOOBIG, 0, STELE_WAIT_NONE, &err);
        } else {
            conn_handle_request(loop, c, line, line_len);
        }
    }
    return pos;
}

/* Handles the lines buffered in c->in (left over while throttled). */
static void
conn_handle_buffered(serve_loop_t *loop, serve_conn_t *c)
{
    if (protocol_buf_held(&c->in) == 0)
        return;
    size_t used = conn_handle_lines(loop, c, c->in.data + c->in.off, protocol_buf_held(&c->in),
                                    c->is_read_closed);
    protocol_buf_consume(&c->in, used);
    if (protocol_buf_held(&c->in) == 0)
        protocol_buf_free(&c->in);
}

/* Holds input that is not yet a whole line, or that waits while the connection is
 * throttled. Returns 0, or -1 when out of memory (the connection is then dropped). */
static int
conn_keep_input(serve_conn_t *c, const char *data, size_t n)
{
    if (protocol_buf_append(&c->in, data, n) == 0)
        return 0;
    c->is_peer_gone = c->is_read_closed = 1;
    return -1;
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
    serve_conn_touch(loop, c);
    const char *data = loop->scratch;
    size_t len = (size_t)n;
    if (protocol_buf_held(&c->in) > 0) {
        /* The read continues a line held from before. */
        if (conn_keep_input(c, data, len) != 0)
            return -1;
        conn_handle_buffered(loop, c);
        return 1;
    }
    size_t used = conn_handle_lines(loop, c, data, len, 0);
    if (used < len && conn_keep_input(c, data + used, len - used) != 0)
        return -1;
    return 1;
}

/* ---- the connection's life ----------------------------------------------------------------- */

/* Recomputes the epoll interest; closes the connection when nothing is left to do. Returns
 * 0 when the connection is still open. */
static int
conn_update(serve_loop_t *loop, serve_conn_t *c)
{
    conn_write(loop, c);
    if (c->is_peer_gone ||
        (c->is_read_closed && c->fifo_count == 0 && protocol_buf_held(&c->out) == 0)) {
        serve_conn_close(loop, c);
        return -1;
    }
    uint32_t want = 0;
    if (!c->is_read_closed && !conn_is_throttled(c))
        want |= EPOLLIN;
    if (protocol_buf_held(&c->out) > 0)
        want |= EPOLLOUT;
    if (want != c->events) {
        struct epoll_event ev = {.events = want, .data.ptr = c};
        if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev) != 0) {
            serve_conn_close(loop, c);
            return -1;
        }
        c->events = want;
    }
    return 0;
}

/* ---- admission ----------------------------------------------------------------------------- */

/* The peer's credentials as the kernel recorded them at connect (STELE_ORIGIN_PEER), or an
 * unknown origin when it cannot say. */
static stele_origin_t
conn_peer_origin(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred)
        return (stele_origin_t){.kind = STELE_ORIGIN_UNKNOWN};
    return (stele_origin_t){.uid = (uint32_t)cred.uid,
                            .gid = (uint32_t)cred.gid,
                            .pid = (uint32_t)cred.pid,
                            .kind = STELE_ORIGIN_PEER};
}

/* uid's entry in the loop's table; made (n_conns 0) when missing and `make` is set. NULL
 * when missing, or out of memory. */
static serve_uid_count_t *
uid_entry(serve_loop_t *loop, uid_t uid, int make)
{
    for (size_t i = 0; i < loop->n_uids; i++)
        if (loop->uids[i].uid == uid)
            return &loop->uids[i];
    if (!make)
        return NULL;
    if (loop->n_uids == loop->cap_uids) {
        size_t new_cap = loop->cap_uids ? loop->cap_uids * 2 : SERVE_UIDS_MIN_CAP;
        serve_uid_count_t *grown = realloc(loop->uids, new_cap * sizeof *grown);
        if (!grown)
            return NULL;
        loop->uids = grown;
        loop->cap_uids = new_cap;
    }
    loop->uids[loop->n_uids] = (serve_uid_count_t){.uid = uid, .n_conns = 0};
    return &loop->uids[loop->n_uids++];
}

/* Drops u from the table when it counts no connection (its slot takes the last entry). */
static void
uid_forget_if_unused(serve_loop_t *loop, serve_uid_count_t *u)
{
    if (u->n_conns == 0)
        *u = loop->uids[--loop->n_uids];
}

static void
uid_release(serve_loop_t *loop, uid_t uid)
{
    serve_uid_count_t *u = uid_entry(loop, uid, 0);
    if (u && u->n_conns > 0) {
        u->n_conns--;
        uid_forget_if_unused(loop, u);
    }
}

/* One warn line per SERVE_REFUSAL_LOG_MS, counting the refusals since the last one. */
static void
conn_log_refusal(serve_loop_t *loop, uid_t uid, uint32_t n_uid)
{
    int64_t now = clock_mono_ms();
    loop->n_refused++;
    if (loop->refused_logged_at_ms && now - loop->refused_logged_at_ms < SERVE_REFUSAL_LOG_MS)
        return;
    serve_logf(loop->cfg->log, STELE_LOG_WARN, "connections refused",
               "refused=%" PRIu64 " uid=%ld uid_connections=%" PRIu32
               " connections=%zu max_conns_per_uid=%" PRIu32 " max_conns=%zu",
               loop->n_refused, (long)uid, n_uid, loop->n_conns, loop->cfg->max_conns_per_uid,
               loop->cfg->max_conns);
    loop->n_refused = 0;
    loop->refused_logged_at_ms = now;
}

/* Answers a connection beyond a cap with one STELE_EBUSY reply naming it, and closes it. */
static int
conn_refuse(serve_loop_t *loop, int fd, uid_t uid, uint32_t n_uid)
{
    char reply[PROTOCOL_REPLY_MAX_BYTES];
    stele_error_t err;
    if (n_uid >= loop->cfg->max_conns_per_uid)
        error_set_hinted(
            &err, STELE_EBUSY, "close idle connections, or raise serve_max_conns_per_uid",
            "uid %ld holds %" PRIu32 " connections to the server, its limit", (long)uid, n_uid);
    else
        error_set_hinted(&err, STELE_EBUSY, "retry later, or raise serve_max_conns",
                         "the server holds %zu connections, its limit", loop->n_conns);
    size_t n = protocol_reply_format(reply, sizeof reply, STELE_EBUSY, 0, &err);
    ssize_t sent = send(fd, reply, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)sent; /* a client that cannot take one line finds the connection closed all the same */
    close(fd);
    conn_log_refusal(loop, uid, n_uid);
    return STELE_EBUSY;
}

/* ---- the idle list ------------------------------------------------------------------------- */

static void
lru_unlink(serve_loop_t *loop, serve_conn_t *c)
{
    if (c->lru_prev)
        c->lru_prev->lru_next = c->lru_next;
    else if (loop->lru_head == c)
        loop->lru_head = c->lru_next;
    if (c->lru_next)
        c->lru_next->lru_prev = c->lru_prev;
    else if (loop->lru_tail == c)
        loop->lru_tail = c->lru_prev;
    c->lru_prev = c->lru_next = NULL;
}

void
serve_conn_touch(serve_loop_t *loop, serve_conn_t *c)
{
    c->last_active_ms = clock_mono_ms();
    if (loop->lru_tail == c)
        return;
    lru_unlink(loop, c);
    c->lru_prev = loop->lru_tail;
    if (loop->lru_tail)
        loop->lru_tail->lru_next = c;
    else
        loop->lru_head = c;
    loop->lru_tail = c;
}

int
serve_conn_is_idle(const serve_conn_t *c)
{
    return c->fifo_count == 0 && protocol_buf_held(&c->out) == 0 && protocol_buf_held(&c->in) == 0;
}

/* ---- the connection's life, continued ------------------------------------------------------ */

int
serve_conn_open(serve_loop_t *loop, int fd)
{
    stele_origin_t origin = conn_peer_origin(fd);
    /* (uid_t)-1 when the kernel cannot say: then all such share a count */
    uid_t uid = origin.kind == STELE_ORIGIN_PEER ? (uid_t)origin.uid : (uid_t)-1;
    serve_uid_count_t *u = uid_entry(loop, uid, 1);
    if (!u) {
        close(fd);
        return -ENOMEM;
    }
    if (u->n_conns >= loop->cfg->max_conns_per_uid || loop->n_conns >= loop->cfg->max_conns) {
        uint32_t n_uid = u->n_conns;
        uid_forget_if_unused(loop, u);
        return conn_refuse(loop, fd, uid, n_uid);
    }
    serve_conn_t *c = calloc(1, sizeof *c);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (!c || epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        int rc = c ? -errno : -ENOMEM;
        free(c);
        close(fd);
        uid_forget_if_unused(loop, u);
        return rc;
    }
    u->n_conns++;
    c->uid = uid;
    c->origin = origin;
    c->fd = fd;
    c->id = ++loop->next_conn_id;
    c->events = EPOLLIN;
    c->frame.max_line_bytes = loop->cfg->max_line_bytes;
    c->all_next = loop->all;
    if (loop->all)
        loop->all->all_prev = c;
    loop->all = c;
    loop->n_conns++;
    serve_conn_touch(loop, c);
    serve_logf(loop->cfg->log, STELE_LOG_DEBUG, "connection opened",
               "conn=%" PRIu64 " uid=%ld connections=%zu", c->id, (long)uid, loop->n_conns);
    return 0;
}

void
serve_conn_close(serve_loop_t *loop, serve_conn_t *c)
{
    if (c->is_closed)
        return;
    c->is_closed = 1;
    serve_logf(loop->cfg->log, STELE_LOG_DEBUG, "connection closed",
               "conn=%" PRIu64 " requests=%" PRIu64 " unanswered=%zu", c->id, c->n_requests,
               c->fifo_count);
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    waiting_unlink(loop, c);
    for (size_t i = 0; i < c->fifo_count; i++)
        free(c->fifo[(c->fifo_head + i) % c->fifo_cap].error_reply);
    free(c->fifo);
    c->fifo = NULL;
    c->fifo_count = 0;
    protocol_buf_free(&c->in);
    protocol_buf_free(&c->out);
    if (c->all_prev)
        c->all_prev->all_next = c->all_next;
    else
        loop->all = c->all_next;
    if (c->all_next)
        c->all_next->all_prev = c->all_prev;
    lru_unlink(loop, c);
    uid_release(loop, c->uid);
    loop->n_conns--;
    c->dead_next = loop->dead;
    loop->dead = c;
    serve_loop_accept_resume(loop); /* a descriptor came free */
}

void
serve_conn_on_event(serve_loop_t *loop, serve_conn_t *c, uint32_t events)
{
    if (c->is_closed)
        return;
    if (events & (EPOLLHUP | EPOLLERR)) {
        /* The peer is gone: appends what it sent before hanging up, answers nobody. */
        c->is_peer_gone = 1;
        while (conn_read(loop, c) > 0)
            ;
        serve_conn_close(loop, c);
        return;
    }
    if (events & EPOLLOUT) {
        conn_write(loop, c);
        if (!conn_is_throttled(c))
            conn_handle_buffered(loop, c);
    }
    if ((events & EPOLLIN) && !conn_is_throttled(c) && !c->is_read_closed)
        conn_read(loop, c);
    conn_update(loop, c);
}

void
serve_conn_on_acks(serve_loop_t *loop, serve_conn_t *c)
{
    fifo_flush_ready(loop, c);
    conn_write(loop, c);
    if (!conn_is_throttled(c))
        conn_handle_buffered(loop, c);
    conn_update(loop, c);
}

void
serve_conn_drain_input(serve_loop_t *loop, serve_conn_t *c)
{
    int n_reads = 0;
    /* What is already in the socket buffer was sent before the signal: take it in, within
     * the same bounds as always. */
    while (!c->is_read_closed && !conn_is_throttled(c) && n_reads++ < SERVE_DRAIN_MAX_READS) {
        if (conn_read(loop, c) <= 0)
            break;
    }
    c->is_read_closed = 1;
    protocol_buf_free(&c->in);
    conn_update(loop, c);
}

size_t
serve_conn_fail_unanswered(serve_loop_t *loop, serve_conn_t *c)
{
    char reply[PROTOCOL_REPLY_MAX_BYTES];
    size_t n_failed = 0;
    while (c->fifo_count > 0) {
        fifo_flush_ready(loop, c);
        if (c->fifo_count == 0)
            break;
        serve_pending_t *p = &c->fifo[c->fifo_head];
        stele_error_t err;
        error_set(&err, STELE_ECLOSED,
                  "server stopped before seq %" PRIu64 " reached wait level %s", p->seq,
                  stele_wait_name(p->level));
        size_t n = protocol_reply_format(reply, sizeof reply, STELE_ECLOSED, 0, &err);
        conn_out_append(c, reply, n);
        fifo_pop(c);
        n_failed++;
    }
    fifo_flush_ready(loop, c); /* unlinks and frees the empty FIFO */
    conn_write(loop, c);
    serve_conn_close(loop, c);
    return n_failed;
}
