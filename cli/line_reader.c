/*
 * line_reader.c: bounded JSON Lines reading for `stele insert` (line_reader.h). Owns its
 * buffer; no state beyond the caller's struct, no lock (one thread).
 */
#include "line_reader.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bytes read from the descriptor at once, on top of the longest line. */
#define LINE_READ_CHUNK_BYTES (64 * 1024)

int
line_reader_init(line_reader_t *lr, int fd, int stop_fd, size_t max_line_bytes)
{
    *lr = (line_reader_t){.fd = fd, .stop_fd = stop_fd, .max_line_bytes = max_line_bytes};
    lr->cap = max_line_bytes + LINE_READ_CHUNK_BYTES;
    lr->buf = malloc(lr->cap);
    return lr->buf ? 0 : -1;
}

void
line_reader_free(line_reader_t *lr)
{
    free(lr->buf);
    lr->buf = NULL;
}

/* Waits until the descriptor has input (1), the stop descriptor fired (0), or nothing
 * arrived within timeout_ms (-1 = wait for ever; returns 2 on a timeout). */
static int
line_reader_poll(const line_reader_t *lr, int timeout_ms)
{
    struct pollfd pfd[2] = {{.fd = lr->fd, .events = POLLIN},
                            {.fd = lr->stop_fd, .events = POLLIN}};
    nfds_t n = lr->stop_fd >= 0 ? 2 : 1;
    for (;;) {
        int rc = poll(pfd, n, timeout_ms);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0)
            return 2;
        if (n == 2 && (pfd[1].revents & POLLIN))
            return 0;
        return 1; /* input, end of input, or an error the read reports */
    }
}

static int
line_reader_fill(line_reader_t *lr)
{
    for (;;) {
        ssize_t n = read(lr->fd, lr->buf + lr->end, lr->cap - lr->end);
        if (n > 0) {
            lr->end += (size_t)n;
            return 0;
        }
        if (n == 0) {
            lr->is_eof = 1;
            return 0;
        }
        if (errno != EINTR) {
            lr->read_errno = errno;
            return -1;
        }
    }
}

/* Drops the rest of an over-long line, up to and including its newline. */
static line_status_t
line_reader_skip_line(line_reader_t *lr)
{
    for (;;) {
        char *nl = memchr(lr->buf + lr->start, '\n', lr->end - lr->start);
        if (nl != NULL) {
            lr->start = (size_t)(nl - lr->buf) + 1;
            return LINE_TOO_LONG;
        }
        lr->start = lr->end = 0;
        if (lr->is_eof)
            return LINE_TOO_LONG;
        if (line_reader_fill(lr) != 0)
            return LINE_READ_ERROR;
    }
}

/* Moves the unread bytes to the front of the buffer, making room for a read. */
static void
line_reader_compact(line_reader_t *lr)
{
    size_t avail = lr->end - lr->start;
    if (lr->start > 0) {
        memmove(lr->buf, lr->buf + lr->start, avail);
        lr->start = 0;
        lr->end = avail;
    }
}

line_status_t
line_reader_next(line_reader_t *lr, int may_block, const char **line, size_t *len)
{
    for (;;) {
        size_t avail = lr->end - lr->start;
        char *nl = memchr(lr->buf + lr->start, '\n', avail);
        size_t line_len = (nl != NULL) ? (size_t)(nl - (lr->buf + lr->start)) : avail;
        if (line_len > lr->max_line_bytes) {
            lr->line_no++;
            return line_reader_skip_line(lr);
        }
        if (nl != NULL || (lr->is_eof && avail > 0)) {
            *line = lr->buf + lr->start;
            *len = line_len;
            lr->start += line_len + (nl != NULL ? 1 : 0);
            lr->line_no++;
            return LINE_OK;
        }
        if (lr->is_eof)
            return LINE_EOF;
        line_reader_compact(lr);
        int ready = line_reader_poll(lr, may_block ? -1 : 0);
        if (ready == 2)
            return LINE_WOULD_BLOCK;
        if (ready == 0)
            return LINE_STOPPED;
        if (line_reader_fill(lr) != 0)
            return LINE_READ_ERROR;
    }
}
