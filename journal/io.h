/*
 * io.h: the I/O method table every journal file access goes through.
 *
 * Like SQLite's VFS, the table exists so tests can substitute a faulting or crashing
 * implementation (tests/support/io_fault.c, tests/support/io_crash.c) for the POSIX one
 * (io_posix.c). The journal never calls open/pwrite/fdatasync directly.
 *
 * Names are reached relative to a directory descriptor opened once (open_dir), never by a
 * path built from strings, and no call follows a symbolic link in the last component of the
 * name it is given: a link where a journal file should be is refused (-ELOOP from open_file,
 * -ENOTDIR from open_dir), so nobody who can plant a link in the directory can make the
 * journal write through it (FORMAT.md section 1).
 *
 * Every method returns 0 (or a byte count or descriptor where noted) on success and -errno
 * on failure. Implementations retry EINTR and loop over short transfers themselves, so a
 * short count is only ever returned by pread at end of file. `ctx` is the table's own state.
 */
#ifndef STELE_JOURNAL_IO_H
#define STELE_JOURNAL_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Flags for open_file. */
enum {
    JOURNAL_IO_READ = 0,      /* read-only */
    JOURNAL_IO_WRITE = 1,     /* read-write */
    JOURNAL_IO_CREATE = 2,    /* create if missing (with mode) */
    JOURNAL_IO_EXCLUSIVE = 4, /* fail with -EEXIST if it exists */
    /* writes bypass the page cache (O_DIRECT): every pwritev must be aligned in offset,
     * length and memory (journal/direct.h); -EINVAL where the file system cannot */
    JOURNAL_IO_DIRECT = 8,
};

typedef struct journal_io journal_io_t;

struct journal_io {
    void *ctx;
    /* Opens `name` in the directory dir_fd (AT_FDCWD: the process cwd) without following a
     * link in its last component. Returns fd >= 0 or -errno (-ELOOP for a link). A file this
     * call creates (CREATE | EXCLUSIVE) gets exactly `mode`, whatever the umask. */
    int (*open_file)(void *ctx, int dir_fd, const char *name, int flags, mode_t mode);
    /* Reads up to len bytes at off. Returns bytes read (short only at EOF) or -errno. */
    ssize_t (*pread)(void *ctx, int fd, void *buf, size_t len, off_t off);
    /* Writes all iov bytes at off. Returns 0 or -errno (a short write is an error). */
    int (*pwritev)(void *ctx, int fd, const struct iovec *iov, int iovcnt, off_t off);
    /* Makes the file's data (and the metadata needed to read it) durable. */
    int (*fdatasync)(void *ctx, int fd);
    /* Makes data and all metadata durable (used for new files and directories). */
    int (*fsync)(void *ctx, int fd);
    int (*truncate)(void *ctx, int fd, off_t len);
    /* Reserves [off, off+len) on disk; `zero_fill` writes zeros instead of fallocate. Either
     * way -EINVAL when off < 0 or len <= 0 (posix_fallocate's rule). */
    int (*allocate)(void *ctx, int fd, off_t off, off_t len, int zero_fill);
    /* Renames `from` to `to`, both in dir_fd; a link named `to` is replaced, not followed. */
    int (*rename)(void *ctx, int dir_fd, const char *from, const char *to);
    int (*unlink)(void *ctx, int dir_fd, const char *name);
    /* fsyncs the directory dir_fd, making renames/creates/unlinks in it durable. */
    int (*sync_dir)(void *ctx, int dir_fd);
    int (*file_size)(void *ctx, int fd, off_t *size_out);
    int (*close)(void *ctx, int fd);
    /* Opens the directory `path` (relative to dir_fd, or AT_FDCWD) read-only for the calls
     * above. The last component must be a directory, not a link to one (-ENOTDIR). Returns
     * fd >= 0 or -errno. */
    int (*open_dir)(void *ctx, int dir_fd, const char *path);
    /* Creates directory `name` in dir_fd (mode narrowed by the umask, as mkdir does: the
     * caller opens it and sets its exact mode with set_mode). */
    int (*make_dir)(void *ctx, int dir_fd, const char *name, mode_t mode);
    /* Sets the permission bits of an open file or directory (fchmod). */
    int (*set_mode)(void *ctx, int fd, mode_t mode);
};

/* The POSIX table. Static storage; never freed. */
const journal_io_t *journal_io_posix(void);

#endif /* STELE_JOURNAL_IO_H */
