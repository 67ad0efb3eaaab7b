/*
 * client.c: the library side of `stele serve`: connects to the server's Unix socket and
 * speaks docs/protocol.md. Knows nothing of the engine; a server may run another version
 * of the library as long as the protocol matches.
 *
 * Every request goes in an envelope {"$event":<the caller's JSON>,"$wait":"<level>"} so
 * the wait level is explicit. The caller's text is copied verbatim except that raw CR and
 * LF become spaces: outside strings they are whitespace, inside strings JSON forbids them,
 * so the meaning of valid JSON is unchanged and one request stays one line. A caller's text
 * cannot forge another envelope: anything after its object would repeat $wait or $event or
 * add a key, which the server rejects.
 *
 * The socket is non-blocking and every wait goes through poll() on both directions: while
 * a long pipelined burst is being written, replies are read into `in` as they come, so
 * neither side can block the other with full socket buffers.
 * A stele_client_t belongs to one thread at a time: no locks.
 */
#include "stele.h"

#include <bson/bson.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Requests are written out once this much is queued, to bound the client's memory. */
#define CLIENT_FLUSH_BYTES (64 * 1024)
#define CLIENT_READ_BYTES (16 * 1024)

struct stele_client {
    int fd;
    int broken_code; /* sticky: the connection failed; 0 while usable */
    size_t n_pending;
    char *out; /* queued request bytes */
    size_t out_len, out_cap;
    char *in; /* received bytes not yet returned: in[in_off, in_len) */
    size_t in_off, in_len, in_cap;
};

static void __attribute__((format(printf, 3, 4)))
client_fail(stele_error_t *err, int code, const char *fmt, ...)
{
    if (!err)
        return;
    err->code = code;
    err->hint[0] = '\0';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

static int
client_reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t new_cap = *cap ? *cap : 4096;
    while (new_cap < need)
        new_cap *= 2;
    char *p = realloc(*buf, new_cap);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = new_cap;
    return 0;
}

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

int
stele_client_connect(const char *dir, const char *socket_path, stele_client_t **out,
                     stele_error_t *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char path[PATH_MAX];
    int n;
    if (!out || (!dir && !socket_path)) {
        client_fail(err, STELE_EINVAL, "stele_client_connect needs a directory or a socket");
        return STELE_EINVAL;
    }
    if (socket_path)
        n = snprintf(path, sizeof path, "%s", socket_path);
    else
        n = snprintf(path, sizeof path, "%s/%s", dir, STELE_SOCKET_NAME);
    if (n < 0 || (size_t)n >= sizeof addr.sun_path) {
        client_fail(err, STELE_EINVAL, "socket path too long (at most %zu bytes): %s",
                    sizeof addr.sun_path - 1, path);
        return STELE_EINVAL;
    }
    memcpy(addr.sun_path, path, (size_t)n + 1);
    stele_client_t *c = calloc(1, sizeof *c);
    if (!c) {
        client_fail(err, -ENOMEM, "could not allocate a client");
        return -ENOMEM;
    }
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = 0;
    if (c->fd < 0 || client_connect_retrying(c->fd, &addr) != 0 ||
        fcntl(c->fd, F_SETFL, O_NONBLOCK) != 0) {
        rc = -errno;
        client_fail(err, rc, "could not connect to stele server at %s: %s", path, strerror(-rc));
        if (err && (rc == -ENOENT || rc == -ECONNREFUSED))
            snprintf(err->hint, sizeof err->hint, "is \"stele serve\" running on this journal?");
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
    client_fail(err, c->broken_code,
                "connection to stele server lost with %zu requests unanswered: %s", c->n_pending,
                strerror(-c->broken_code));
    if (err)
        snprintf(err->hint, sizeof err->hint,
                 "unanswered events may or may not have been appended; check with stele tail");
    return c->broken_code;
}

/* Reads whatever is available into `in`. Returns 0, or a -errno when the connection broke
 * (EOF is -ECONNRESET). */
static int
client_read_some(stele_client_t *c)
{
    /* The bytes not yet returned move to the front first: otherwise a reply line split
     * across reads (a server's write or this read stopping mid-line) keeps every byte the
     * connection ever received, and the buffer grows for as long as it lives. */
    if (c->in_off > 0) {
        memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
        c->in_len -= c->in_off;
        c->in_off = 0;
    }
    if (client_reserve(&c->in, &c->in_cap, c->in_len + CLIENT_READ_BYTES) != 0)
        return -ENOMEM;
    ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (n > 0) {
        c->in_len += (size_t)n;
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
    size_t off = 0;
    int rc = 0;
    while (off < c->out_len && rc == 0) {
        ssize_t n = send(c->fd, c->out + off, c->out_len - off, MSG_NOSIGNAL);
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            rc = client_poll(c, POLLOUT);
        else if (n < 0 && errno != EINTR)
            rc = -errno;
    }
    memmove(c->out, c->out + off, c->out_len - off);
    c->out_len -= off;
    return rc;
}

int
stele_client_send_json(stele_client_t *c, const char *json, size_t len, stele_wait_t wait,
                       stele_error_t *err)
{
    static const char *const wait_names[] = {"none", "written", "durable", "shipped"};
    if (!c || (!json && len) || (unsigned)wait > STELE_WAIT_SHIPPED) {
        client_fail(err, STELE_EINVAL, "stele_client_send_json: invalid argument");
        return STELE_EINVAL;
    }
    if (c->broken_code)
        return client_broken(c, c->broken_code, err);
    char tail[48];
    int tail_len = snprintf(tail, sizeof tail, ",\"$wait\":\"%s\"}\n", wait_names[wait]);
    static const char head[] = "{\"$event\":";
    size_t need = c->out_len + sizeof head - 1 + len + (size_t)tail_len;
    if (client_reserve(&c->out, &c->out_cap, need) != 0) {
        client_fail(err, -ENOMEM, "could not queue a request of %zu bytes", len);
        return -ENOMEM;
    }
    char *w = c->out + c->out_len;
    memcpy(w, head, sizeof head - 1);
    w += sizeof head - 1;
    for (size_t i = 0; i < len; i++)
        w[i] = json[i] == '\n' || json[i] == '\r' ? ' ' : json[i];
    memcpy(w + len, tail, (size_t)tail_len);
    c->out_len = need;
    c->n_pending++;
    if (c->out_len >= CLIENT_FLUSH_BYTES) {
        int rc = client_flush(c);
        if (rc != 0)
            return client_broken(c, rc, err);
    }
    return 0;
}

/* The common reply, {"seq":N}, without a JSON parser. Returns 1 when it matched. */
static int
client_parse_seq_reply(const char *line, size_t len, uint64_t *seq_out)
{
    static const char head[] = "{\"seq\":";
    size_t i = sizeof head - 1;
    uint64_t seq = 0;
    if (len < i + 2 || memcmp(line, head, i) != 0 || line[len - 1] != '}')
        return 0;
    for (; i < len - 1; i++) {
        if (line[i] < '0' || line[i] > '9' || seq > (UINT64_MAX - 9) / 10)
            return 0;
        seq = seq * 10 + (uint64_t)(line[i] - '0');
    }
    if (seq_out)
        *seq_out = seq;
    return 1;
}

/* Parses one reply line. Returns the request's result. */
static int
client_parse_reply(const char *line, size_t len, uint64_t *seq_out, stele_error_t *err)
{
    if (client_parse_seq_reply(line, len, seq_out))
        return 0;
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)line, (ssize_t)len, &berr);
    bson_iter_t it, sub;
    int rc = STELE_EPROTOCOL;
    if (!doc) {
        client_fail(err, rc, "malformed reply from stele server: %s", berr.message);
        return rc;
    }
    if (bson_iter_init_find(&it, doc, "seq") && BSON_ITER_HOLDS_NUMBER(&it)) {
        if (seq_out)
            *seq_out = (uint64_t)bson_iter_as_int64(&it);
        rc = 0;
    } else if (bson_iter_init_find(&it, doc, "error") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
               bson_iter_recurse(&it, &sub)) {
        int code = STELE_EPROTOCOL;
        const char *message = "error reply without a message", *hint = "";
        while (bson_iter_next(&sub)) {
            const char *key = bson_iter_key(&sub);
            if (strcmp(key, "code") == 0 && BSON_ITER_HOLDS_NUMBER(&sub))
                code = (int)bson_iter_as_int64(&sub);
            else if (strcmp(key, "message") == 0 && BSON_ITER_HOLDS_UTF8(&sub))
                message = bson_iter_utf8(&sub, NULL);
            else if (strcmp(key, "hint") == 0 && BSON_ITER_HOLDS_UTF8(&sub))
                hint = bson_iter_utf8(&sub, NULL);
        }
        rc = code < 0 ? code : STELE_EPROTOCOL;
        client_fail(err, rc, "%s", message);
        if (err)
            snprintf(err->hint, sizeof err->hint, "%s", hint);
    } else {
        client_fail(err, rc, "reply from stele server has neither seq nor error");
    }
    bson_destroy(doc);
    return rc;
}

int
stele_client_recv(stele_client_t *c, uint64_t *seq_out, stele_error_t *err)
{
    if (!c || c->n_pending == 0) {
        client_fail(err, STELE_EINVAL, "stele_client_recv: no request is waiting for a reply");
        return STELE_EINVAL;
    }
    /* Replies the server sent before the connection broke are still good: they are
     * returned before the error, also when a send saw the break first (broken_code). */
    int rc = c->broken_code ? c->broken_code : client_flush(c);
    for (;;) {
        char *start = c->in + c->in_off;
        char *nl = c->in_len > c->in_off ? memchr(start, '\n', c->in_len - c->in_off) : NULL;
        if (nl) {
            size_t line_len = (size_t)(nl - start);
            c->in_off += line_len + 1;
            c->n_pending--;
            return client_parse_reply(start, line_len, seq_out, err);
        }
        if (rc != 0) {
            /* What is left in the socket; client_read_some() moves the unreturned bytes to
             * the front, so progress is counted in unreturned bytes. */
            size_t had = c->in_len - c->in_off;
            client_read_some(c);
            if (c->in_len - c->in_off > had)
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
    if (c && c->n_pending > 0) {
        client_fail(err, STELE_EINVAL,
                    "stele_client_append_json: %zu pipelined requests are still unanswered",
                    c->n_pending);
        return STELE_EINVAL;
    }
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
    free(c->out);
    free(c->in);
    free(c);
}
