/*
 * direct.h: writes to the active segment that bypass the page cache (O_DIRECT).
 *
 * Why: a small batch written through the page cache is copied there and then found again
 * by fdatasync's writeback (dirty-page lookup, block mapping, bio building), CPU time that
 * sits on a lone durable writer's critical path. Written directly, the batch goes to the
 * device in the write call, and fdatasync is left with only the cache flush. The data's
 * durability still comes from that fdatasync: the crash model (unsynced writes may be
 * lost) is the same as for buffered writes.
 *
 * O_DIRECT writes must be aligned in offset, length and memory, so each write covers whole
 * DIRECT_ALIGN blocks: the bytes of the first block before the batch (already in the file,
 * read back once per block and then kept here), the batch, and zeros to the end of the
 * last block (the file holds zeros there already: segments are preallocated, and beyond
 * the log's end recovery expects nothing else). The buffered descriptor of the segment
 * stays in use for everything else; the kernel keeps the page cache coherent with the
 * direct writes, so readers see them.
 */
#ifndef STELE_JOURNAL_DIRECT_H
#define STELE_JOURNAL_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include <sys/uio.h>

#include "io.h"

/* Offset, length and buffer alignment of every direct write: the largest logical block
 * size of common devices, so it is right for 512-byte and 4 KiB sectors alike. */
#define DIRECT_ALIGN 4096u

typedef struct direct_writer {
    int fd;              /* O_DIRECT descriptor of the active segment; -1: write buffered */
    uint8_t *stage;      /* DIRECT_ALIGN-aligned: the first block's head, then the batch */
    size_t stage_bytes;  /* capacity of stage */
    uint64_t head_block; /* file offset of the block whose head stage holds; UINT64_MAX: none */
} direct_writer_t;

void direct_init(direct_writer_t *dw);

/* Opens segment `name` in the journal directory dir_fd for direct writes. Returns 0, or
 * -errno: the file system does not support O_DIRECT (tmpfs), or any other failure, after
 * which the caller writes buffered (direct writes are an optimisation, never needed for
 * correctness). */
int direct_open(direct_writer_t *dw, const journal_io_t *io, int dir_fd, const char *name);

/* Closes the descriptor (-errno from close, 0 if none); the stage is kept for the next. */
int direct_close(direct_writer_t *dw, const journal_io_t *io);

/* Frees the stage (after direct_close). */
void direct_free(direct_writer_t *dw);

/* Writes the n_parts pieces, back to back, at file offset off through the direct
 * descriptor. The head of the first block is read through read_fd (a buffered descriptor of
 * the same file) when it is not the block the previous write ended in. off + their length
 * rounded up to DIRECT_ALIGN must not pass the end of the file. Returns 0 or -errno
 * (-ENOMEM when the stage cannot grow). */
int direct_write(direct_writer_t *dw, const journal_io_t *io, int read_fd,
                 const struct iovec *parts, int n_parts, uint64_t off);

#endif
