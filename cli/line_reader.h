/*
 * line_reader.h: JSON Lines from a descriptor (stdin) in bounded memory: one buffer of
 * max_line_bytes plus a read chunk; a longer line is skipped to its newline without being
 * kept. While it waits for input it also watches a stop descriptor (stop_signal.h's
 * signalfd), so a stop signal is noticed even when the producer is silent.
 */
#ifndef STELE_CLI_LINE_READER_H
#define STELE_CLI_LINE_READER_H

#include <stddef.h>
#include <stdint.h>

typedef enum line_status {
    LINE_OK,
    LINE_TOO_LONG,
    LINE_EOF,
    LINE_WOULD_BLOCK,
    LINE_READ_ERROR,
    LINE_STOPPED, /* the stop descriptor became readable while waiting for input */
} line_status_t;

typedef struct line_reader {
    int fd;
    int stop_fd; /* -1: none */
    char *buf;
    size_t cap;
    size_t start, end; /* unread bytes are buf[start, end) */
    int is_eof;
    uint64_t line_no; /* number of the line last returned, from 1 */
    size_t max_line_bytes;
    int read_errno;
} line_reader_t;

/* Sets up a reader of fd with a buffer for lines of up to max_line_bytes. Returns 0, or -1
 * when out of memory. */
int line_reader_init(line_reader_t *lr, int fd, int stop_fd, size_t max_line_bytes);
void line_reader_free(line_reader_t *lr);

/* Returns the next line (without its newline) in *line and *len, borrowed until the next
 * call. With may_block 0 it returns LINE_WOULD_BLOCK instead of waiting for input; waiting,
 * it returns LINE_STOPPED when the stop descriptor becomes readable first. */
line_status_t line_reader_next(line_reader_t *lr, int may_block, const char **line, size_t *len);

#endif /* STELE_CLI_LINE_READER_H */
