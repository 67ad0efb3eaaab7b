/*
 * serve_client.c: the library side of `stele serve` (stele_client_*): connects to the
 * server's Unix socket and speaks docs/protocol.md through protocol.h, the module the server
 * reads and writes with too. Knows nothing of the engine; a server may run another version
 * of the library as long as the protocol matches.
 *
 * Every request goes in an envelope (protocol_request_encode) so the wait level is explicit.
 * A caller's text cannot forge another envelope: anything after its object would repeat
 * $wait or $event or add a key, which the server rejects.
 *
 * The socket is non-blocking and every wait goes through poll() on both directions: while
 * a long pipelined burst is being written, replies are read into `in` as they come, so
 * neither side can block the other with full socket buffers. A reply line longer than
 * CLIENT_REPLY_MAX_BYTES (far above any the server writes) is refused as it arrives, so a
 * broken peer cannot grow the client's memory.
 * A stele_client_t belongs to one thread at a time: no locks.
 */
#include "stele.h"

#include "error.h"
#include "protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Requests are written out once this much is queued, to bound the client's memory. */
#define CLIENT_FLUSH_BYTES (64 * 1024)
#define CLIENT_READ_BYTES (16 * 1024)
/* Longest reply line read: a reply is at most PROTOCOL_REPLY_MAX_BYTES; room to spare for a
 * server of another version. */
#define CLIENT_REPLY_MAX_BYTES (64 * 1024)

struct stele_client {
    int fd;
    int broken_code; /* sticky: the connection failed; 0 while usable */
    size_t n_pending;
    protocol_buf_t out;     /* queued request bytes */
    protocol_buf_t in;      /* received bytes not yet returned */
    protocol_frame_t frame; /* splits `in` into reply lines */
};

/* connect() waits while the server's listen backlog is full (a busy server, or one that
 * paused accepting at its descriptor limit); a signal handler installed without SA_RESTART
 * interrupts that wait with EINTR. The connection was not made and the socket is still
 * unconnected, so trying again is right: EINTR is not "no server". Returns 0 or -1. */
static int
client_connect_retrying(int fd, const struct sockaddr_un *addr)
{
    int rc;
    do {
        rc = connect(fd, (const struct sockaddr *)addr, sizeof *addr);
    } while (rc != 0 && errno == EINTR);
    return rc;
}

/* The socket's path: socket_path, else dir/stele.sock. Returns 0 or STELE_EINVAL. */
static int
client_socket_address(const char *dir, const char *socket_path, struct sockaddr_un *addr,
                      stele_error_t *err)
{
    char path[PATH_MAX];
    int n = socket_path ? snprintf(path, sizeof path, "%s", socket_path)
                        : snprintf(path, sizeof path, "%s/%s", dir, STELE_SOCKET_NAME);
    if (n < 0 || (size_t)n >= sizeof addr->sun_path)
        return error_set(err, STELE_EINVAL, "socket path too long (at most %zu bytes): %s",
                         sizeof addr->sun_path - 1, path);
    memcpy(addr->sun_path, path, (size_t)n + 1);
    return 0;
}

int
stele_client_connect(const char *dir, const char *socket_path, stele_client_t **out,
                     stele_error_t *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (!out || (!dir && !socket_path))
        return error_set(err, STELE_EINVAL, "stele_client_connect needs a directory or a socket");
    int rc = client_socket_address(dir, socket_path, &addr, err);
    if (rc != 0)
        return rc;
    stele_client_t *c = calloc(1, sizeof *c);
    if (!c)
        return error_set(err, -ENOMEM, "could not allocate a client");
    c->frame.max_line_bytes = CLIENT_REPLY_MAX_BYTES;
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || client_connect_retrying(c->fd, &addr) != 0 ||
        fcntl(c->fd, F_SETFL, O_NONBLOCK) != 0) {
        rc = -errno;
        int is_no_server = rc == -ENOENT || rc == -ECONNREFUSED;
        error_set_hinted(err, rc, is_no_server ? "is \"stele serve\" running on this journal?" : "",
                         "could not connect to stele server at %s: %s", addr.sun_path,
                         stele_strerror(rc));
        if (c->fd >= 0)
            close(c->fd);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int
client_broken(stele_client_t *c, int code, stele_error_t *err)
{
    if (!c->broken_code)
        c->broken_code = code;
    return error_set_hinted(
        err, c->broken_code,
        "unanswered events may or may not have been appended; check with stele tail",
        "connection to stele server lost with %zu requests unanswered: %s", c->n_pending,
        stele_strerror(c->broken_code));
}

/* Reads whatever is available into `in`. Returns 0, or a -errno when the connection broke
 * (EOF is -ECONNRESET). */
static int
client_read_some(stele_client_t *c)
{
    if (protocol_buf_reserve(&c->in, CLIENT_READ_BYTES) != 0)
        return -ENOMEM;
    ssize_t n = read(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len);
    if (n > 0) {
        c->in.len += (size_t)n;
        return 0;
    }
    if (n == 0)
        return -ECONNRESET;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    return -errno;
}

/* Waits for the socket; reads replies whenever they come so the server never blocks. */
static int
client_poll(stele_client_t *c, short events)
{
    struct pollfd pfd = {.fd = c->fd, .events = (short)(events | POLLIN)};
    int n = poll(&pfd, 1, -1);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
        return client_read_some(c);
    return 0;
}

static int
client_flush(stele_client_t *c)
{
    int rc = 0;
    while (protocol_buf_held(&c->out) > 0 && rc == 0) {
        ssize_t n = send(c->fd, c->out.data + c->out.off, protocol_buf_held(&c->out), MSG_NOSIGNAL);
        if (n > 0)
            protocol_buf_consume(&c->out, (size_t)n);
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            rc = client_poll(c, POLLOUT);
        else if (n < 0 && errno != EINTR)
            rc = -errno;
    }
    return rc;
}

int
stele_client_send_json(stele_client_t *c, const char *json, size_t len, stele_wait_t wait,
                       stele_error_t *err)
{
    if (!c || (!json && len) || (unsigned)wait > STELE_WAIT_SHIPPED)
        return error_set(err, STELE_EINVAL, "stele_client_send_json: invalid argument");
    if (c->broken_code)
        return client_broken(c, c->broken_code, err);
    if (protocol_request_encode(&c->out, json, len, wait) != 0)
        return error_set(err, -ENOMEM, "could not queue a request of %zu bytes", len);
    c->n_pending++;
    if (protocol_buf_held(&c->out) >= CLIENT_FLUSH_BYTES) {
        int rc = client_flush(c);
        if (rc != 0)
            return client_broken(c, rc, err);
    }
    return 0;
}

/* The next reply line in `in`, if a whole one is there: returns 1 and the request's result
 * in *rc, or 0 when more bytes are needed. */
static int
client_next_reply(stele_client_t *c, uint64_t *seq_out, int *rc, stele_error_t *err)
{
    const char *line;
    size_t line_len, consumed;
    const char *held = c->in.data ? c->in.data + c->in.off : "";
    protocol_frame_kind_t kind = protocol_frame_next(&c->frame, held, protocol_buf_held(&c->in), 0,
                                                     &line, &line_len, &consumed);
    protocol_buf_consume(&c->in, consumed); /* moves offsets only: `line` stays valid */
    if (kind == PROTOCOL_FRAME_NEED_MORE)
        return 0;
    c->n_pending--;
    if (kind == PROTOCOL_FRAME_OVERSIZE)
        *rc = error_set(err, STELE_EPROTOCOL,
                        "reply from stele server longer than %d bytes: not a reply",
                        CLIENT_REPLY_MAX_BYTES);
    else
        *rc = protocol_reply_parse(line, line_len, seq_out, err);
    return 1;
}

int
stele_client_recv(stele_client_t *c, uint64_t *seq_out, stele_error_t *err)
{
    if (!c || c->n_pending == 0)
        return error_set(err, STELE_EINVAL, "stele_client_recv: no request is waiting for a reply");
    /* Replies the server sent before the connection broke are still good: they are
     * returned before the error, also when a send saw the break first (broken_code). */
    int rc = c->broken_code ? c->broken_code : client_flush(c);
    for (;;) {
        int reply_rc;
        if (client_next_reply(c, seq_out, &reply_rc, err))
            return reply_rc;
        if (rc != 0) {
            /* What is left in the socket: progress is counted in bytes not yet returned. */
            size_t had = protocol_buf_held(&c->in);
            client_read_some(c);
            if (protocol_buf_held(&c->in) > had)
                continue;
            return client_broken(c, rc, err);
        }
        rc = client_poll(c, 0);
    }
}

int
stele_client_append_json(stele_client_t *c, const char *json, size_t len, stele_wait_t wait,
                         uint64_t *seq_out, stele_error_t *err)
{
    if (c && c->n_pending > 0)
        return error_set(err, STELE_EINVAL,
                         "stele_client_append_json: %zu pipelined requests are still unanswered",
                         c->n_pending);
    int rc = stele_client_send_json(c, json, len, wait, err);
    if (rc != 0)
        return rc;
    return stele_client_recv(c, seq_out, err);
}

size_t
stele_client_pending(const stele_client_t *c)
{
    return c ? c->n_pending : 0;
}

void
stele_client_close(stele_client_t *c)
{
    if (!c)
        return;
    close(c->fd);
    protocol_buf_free(&c->out);
    protocol_buf_free(&c->in);
    free(c);
}
