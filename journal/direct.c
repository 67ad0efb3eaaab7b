/*
 * direct.c: the O_DIRECT writes of direct.h. Owns the aligned staging buffer and the
 * direct descriptor; the journal owns when they are used.
 */
#include "direct.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Journal I/O flag for direct writes (io.h's table passes flags through to the file). */
#define DIRECT_OPEN_FLAGS (JOURNAL_IO_WRITE | JOURNAL_IO_DIRECT)

void
direct_init(direct_writer_t *dw)
{
    memset(dw, 0, sizeof *dw);
    dw->fd = -1;
    dw->head_block = UINT64_MAX;
}

int
direct_open(direct_writer_t *dw, const journal_io_t *io, int dir_fd, const char *name)
{
    int fd = io->open_file(io->ctx, dir_fd, name, DIRECT_OPEN_FLAGS, 0);
    if (fd < 0)
        return fd;
    dw->fd = fd;
    dw->head_block = UINT64_MAX; /* another file: its head is read again */
    return 0;
}

int
direct_close(direct_writer_t *dw, const journal_io_t *io)
{
    int rc = 0;
    if (dw->fd >= 0)
        rc = io->close(io->ctx, dw->fd);
    dw->fd = -1;
    dw->head_block = UINT64_MAX;
    return rc;
}

void
direct_free(direct_writer_t *dw)
{
    free(dw->stage);
    dw->stage = NULL;
    dw->stage_bytes = 0;
}

static size_t
direct_round_up(size_t n)
{
    return (n + DIRECT_ALIGN - 1) / DIRECT_ALIGN * DIRECT_ALIGN;
}

/* Grows the stage to hold `bytes`, keeping its first block (the head being written on). */
static int
direct_reserve(direct_writer_t *dw, size_t bytes)
{
    if (bytes <= dw->stage_bytes)
        return 0;
    size_t cap = dw->stage_bytes ? dw->stage_bytes : 4 * DIRECT_ALIGN;
    while (cap < bytes)
        cap *= 2;
    void *p = NULL;
    if (posix_memalign(&p, DIRECT_ALIGN, cap) != 0)
        return -ENOMEM;
    if (dw->stage)
        memcpy(p, dw->stage, DIRECT_ALIGN);
    free(dw->stage);
    dw->stage = p;
    dw->stage_bytes = cap;
    return 0;
}

/* Puts the bytes [block, block + head) of the file at the start of the stage. */
static int
direct_load_head(direct_writer_t *dw, const journal_io_t *io, int read_fd, uint64_t block,
                 size_t head)
{
    if (dw->head_block == block)
        return 0;
    if (head) {
        ssize_t n = io->pread(io->ctx, read_fd, dw->stage, head, (off_t)block);
        if (n < 0)
            return (int)n;
        if ((size_t)n != head)
            return -EIO; /* the file is shorter than the log in it: never expected */
    }
    dw->head_block = block;
    return 0;
}

int
direct_write(direct_writer_t *dw, const journal_io_t *io, int read_fd, const struct iovec *parts,
             int n_parts, uint64_t off)
{
    size_t len = 0;
    for (int i = 0; i < n_parts; i++)
        len += parts[i].iov_len;
    uint64_t block = off / DIRECT_ALIGN * DIRECT_ALIGN;
    size_t head = (size_t)(off - block);
    size_t padded = direct_round_up(head + len);
    int rc = direct_reserve(dw, padded);
    if (!rc)
        rc = direct_load_head(dw, io, read_fd, block, head);
    if (rc)
        return rc;
    size_t at = head;
    for (int i = 0; i < n_parts; i++) {
        memcpy(dw->stage + at, parts[i].iov_base, parts[i].iov_len);
        at += parts[i].iov_len;
    }
    memset(dw->stage + head + len, 0, padded - head - len);
    struct iovec iov = {.iov_base = dw->stage, .iov_len = padded};
    rc = io->pwritev(io->ctx, dw->fd, &iov, 1, (off_t)block);
    if (rc) {
        dw->head_block = UINT64_MAX; /* what the file holds is unknown now */
        return rc;
    }
    /* The block the write ended in is the next write's head: keep it at the stage's start. */
    uint64_t end = off + len;
    uint64_t last_block = end / DIRECT_ALIGN * DIRECT_ALIGN;
    if (last_block != block && end != last_block)
        memmove(dw->stage, dw->stage + (last_block - block), (size_t)(end - last_block));
    dw->head_block = last_block;
    return 0;
}
