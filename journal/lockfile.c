/*
 * lockfile.c: the LOCK file's writer lock and shared page (lockfile.h). The lock is an OFD lock
 * (F_OFD_SETLK), tied to the open file description: it is released when the writer's
 * descriptor closes or the process dies, so a crashed writer never leaves a stale lock.
 * OFD locks report l_pid = -1, which is why the holder's pid is also written into the page.
 * LOCK is opened relative to the journal's directory descriptor with O_NOFOLLOW, by the
 * writer and by readers alike: a link named LOCK is refused (-ELOOP), never written through.
 */
#include "lockfile.h"

#include "crc32c.h"
#include "journal.h"
#include "stele.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Creates the lock file with exactly file_mode (the umask must not narrow what the journal's
 * file_mode grants). Returns the descriptor, -EEXIST or -errno. */
static int
lockfile_create(int dir_fd, unsigned file_mode)
{
    int fd;
    do {
        fd = openat(dir_fd, LOCK_NAME, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    (mode_t)file_mode);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -errno;
    if (fchmod(fd, (mode_t)file_mode) < 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}

/* Opens the lock file, creating it when missing; an existing one keeps its mode. */
static int
lockfile_open_or_create(int dir_fd, unsigned file_mode)
{
    for (;;) {
        int fd = lockfile_create(dir_fd, file_mode);
        if (fd != -EEXIST)
            return fd;
        do {
            fd = openat(dir_fd, LOCK_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        } while (fd < 0 && errno == EINTR);
        if (fd >= 0 || errno != ENOENT)
            return fd < 0 ? -errno : fd;
        /* removed between the two opens: create it after all */
    }
}

/* Takes the OFD write lock without waiting. Returns 0, STELE_ELOCKED with *holder_pid read
 * from the page (OFD locks report no pid; 0 if the page has none), or -errno. */
static int
lockfile_take_lock(int fd, int *holder_pid)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_OFD_SETLK, &fl) >= 0)
        return 0;
    int rc = -errno;
    if (rc != -EAGAIN && rc != -EACCES)
        return rc;
    uint8_t page[16] = {0};
    if (pread(fd, page, sizeof page, 0) == (ssize_t)sizeof page && memcmp(page, LOCK_MAGIC, 8) == 0)
        *holder_pid = (int)format_load_u32(page + 12);
    return STELE_ELOCKED;
}

/* Grows a new (empty) LOCK to its page and maps it read-write. Returns 0 or -errno. */
static int
lockfile_map_page(int fd, lockfile_page_t **out)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (st.st_size < (off_t)LOCK_FILE_BYTES) {
        int rc;
        do
            rc = ftruncate(fd, (off_t)LOCK_FILE_BYTES);
        while (rc < 0 && errno == EINTR);
        if (rc < 0)
            return -errno;
    }
    void *map = mmap(NULL, LOCK_FILE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return -errno;
    *out = map;
    return 0;
}

/* The page becomes this writer's: laid out afresh unless it already is a version-1 page. */
static void
lockfile_claim_page(lockfile_page_t *page)
{
    if (memcmp(page->magic, LOCK_MAGIC, 8) != 0 || page->version != LOCK_VERSION) {
        memset(page, 0, LOCK_FILE_BYTES);
        page->version = LOCK_VERSION;
        memcpy(page->magic, LOCK_MAGIC, 8);
    }
    /* Nothing is visible until recovery has run and the writer publishes: a reader must not
     * trust positions a dead writer left behind while this one may still truncate. */
    atomic_store_explicit(&page->visible_seq, 0, memory_order_release);
    atomic_store_explicit(&page->durable_seq, 0, memory_order_release);
    atomic_store_explicit(&page->writer_pid, (int32_t)getpid(), memory_order_release);
}

int
lockfile_open_writer(const journal_io_t *io, int dir_fd, unsigned file_mode, int *fd_out,
                     lockfile_page_t **page_out, int *holder_pid)
{
    int rc;
    *holder_pid = 0;
    /* Opened directly, not through the I/O table: an OFD lock lives as long as any
     * descriptor of its open file description, and a test table that dup()s descriptors
     * would keep the lock after close. LOCK holds no log data, so faults there prove
     * nothing about durability. */
    (void)io;
    int fd = lockfile_open_or_create(dir_fd, file_mode);
    if (fd < 0)
        return fd;
    lockfile_page_t *page = NULL;
    rc = lockfile_take_lock(fd, holder_pid);
    if (!rc)
        rc = lockfile_map_page(fd, &page);
    if (rc) {
        close(fd); /* releases the lock if it was taken */
        return rc;
    }
    lockfile_claim_page(page);
    *fd_out = fd;
    *page_out = page;
    return 0;
}

void
lockfile_close_writer(int fd, lockfile_page_t *page)
{
    if (page) {
        atomic_store_explicit(&page->writer_pid, 0, memory_order_release);
        /* Wake readers so they notice the writer is gone and fall back to the files. */
        atomic_fetch_add_explicit(&page->futex_word, 1, memory_order_release);
        syscall(SYS_futex, &page->futex_word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        munmap(page, LOCK_FILE_BYTES);
    }
    if (fd >= 0)
        close(fd); /* releases the OFD lock */
}

int
lockfile_open_reader(int dir_fd, int *fd_out, lockfile_page_t **page_out)
{
    *page_out = NULL;
    if (*fd_out < 0) {
        int fd;
        do
            fd = openat(dir_fd, LOCK_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        while (fd < 0 && errno == EINTR);
        if (fd < 0)
            return errno == ENOENT ? 0 : -errno;
        *fd_out = fd;
    }
    struct stat st;
    if (fstat(*fd_out, &st) < 0)
        return -errno;
    if (st.st_size < (off_t)LOCK_FILE_BYTES)
        return 0; /* a writer is creating it; try again later */
    void *map = mmap(NULL, LOCK_FILE_BYTES, PROT_READ, MAP_SHARED, *fd_out, 0);
    if (map == MAP_FAILED)
        return -errno;
    *page_out = map;
    return 0;
}

void
lockfile_close_reader(int fd, lockfile_page_t *page)
{
    if (page)
        munmap(page, LOCK_FILE_BYTES);
    if (fd >= 0)
        close(fd);
}

int
lockfile_writer_pid(int fd, const lockfile_page_t *page)
{
    if (fd < 0)
        return 0;
    /* A read lock conflicts with the writer's write lock, so GETLK reports it if held. */
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_OFD_GETLK, &fl) < 0 || fl.l_type == F_UNLCK)
        return 0;
    int pid = page ? (int)atomic_load_explicit(&page->writer_pid, memory_order_acquire) : 0;
    return pid > 0 ? pid : -1;
}

void
lockfile_publish(lockfile_page_t *page, uint64_t visible_seq, uint64_t durable_seq)
{
    atomic_store_explicit(&page->durable_seq, durable_seq, memory_order_release);
    atomic_store_explicit(&page->visible_seq, visible_seq, memory_order_release);
    atomic_fetch_add_explicit(&page->futex_word, 1, memory_order_acq_rel);
    /* Always wake: readers map the page read-only, so they cannot announce themselves, and
     * one syscall per batch is noise next to the batch's fdatasync. */
    syscall(SYS_futex, &page->futex_word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void
lockfile_wait(const lockfile_page_t *page, uint32_t seen, int timeout_ms)
{
    struct timespec ts = {.tv_sec = timeout_ms / 1000,
                          .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};
    /* The kernel compares futex_word with `seen` atomically before sleeping, so a publish
     * between the caller's check and this call is never missed. */
    if (atomic_load_explicit(&page->futex_word, memory_order_acquire) == seen)
        syscall(SYS_futex, &page->futex_word, FUTEX_WAIT, seen, &ts, NULL, 0);
}

void
lockfile_clock_note_store(lockfile_page_t *page, const journal_clock_note_t *note)
{
    uint8_t b[LOCK_CLOCK_NOTE_BYTES];
    memcpy(b, note->boot_id, 16);
    format_store_u64(b + 16, (uint64_t)note->trusted_offset_ns);
    format_store_u64(b + 24, note->confirmed_boot_ns);
    format_store_u64(b + 32, (uint64_t)note->step_offset_ns);
    format_store_u64(b + 40, note->step_since_boot_ns);
    format_store_u32(b + 48, note->flags);
    format_store_u32(b + 52, crc32c(b, 52));
    memcpy(page->clock_note, b, sizeof b);
}

int
lockfile_clock_note_load(const lockfile_page_t *page, journal_clock_note_t *note)
{
    uint8_t b[LOCK_CLOCK_NOTE_BYTES];
    memcpy(b, page->clock_note, sizeof b);
    if (format_load_u32(b + 52) != crc32c(b, 52))
        return STELE_ENOTFOUND;
    memcpy(note->boot_id, b, 16);
    note->trusted_offset_ns = (int64_t)format_load_u64(b + 16);
    note->confirmed_boot_ns = format_load_u64(b + 24);
    note->step_offset_ns = (int64_t)format_load_u64(b + 32);
    note->step_since_boot_ns = format_load_u64(b + 40);
    note->flags = format_load_u32(b + 48);
    return 0;
}
