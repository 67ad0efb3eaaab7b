/*
 * lockfile.h: the LOCK file (FORMAT.md, "LOCK file"): the writer's OFD lock and one page of
 * state shared with readers in other processes through a MAP_SHARED mapping.
 *
 * The writer holds an F_OFD_SETLK write lock on the whole file for its lifetime; readers
 * never lock, they test for the lock (F_OFD_GETLK) to learn whether a writer is live.
 * Positions are stored with release order after the data they describe is written, and
 * loaded with acquire order; futex_word is bumped on every publish and is what readers sleep
 * on (FUTEX_WAIT on a shared file mapping works across processes).
 */
#ifndef STELE_JOURNAL_LOCKFILE_H
#define STELE_JOURNAL_LOCKFILE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "io.h"

/* The clock note's bytes in the page (FORMAT.md, "LOCK file"): boot id, trusted offset,
 * confirmed at, step offset, step since (16 + 4 x 8), flags (4), CRC32C of the rest (4). */
#define LOCK_CLOCK_NOTE_BYTES 56u

typedef struct lockfile_page {
    char magic[8];    /* LOCK_MAGIC */
    uint32_t version; /* LOCK_VERSION */
    _Atomic int32_t writer_pid;
    _Atomic uint64_t visible_seq; /* readers may return records <= this */
    _Atomic uint64_t durable_seq; /* records <= this are fdatasynced */
    _Atomic uint32_t futex_word;  /* bumped on every publish */
    uint32_t reserved;
    /* Written and read by the writer alone (journal_clock_note_store/load): the engine's
     * record clock, kept for the next writer of the same boot. Not atomic: one writer at a
     * time, and the CRC turns a note a crash tore into no note. */
    uint8_t clock_note[LOCK_CLOCK_NOTE_BYTES];
} lockfile_page_t;

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "shared positions need lock-free atomics to work across processes");
_Static_assert(offsetof(lockfile_page_t, writer_pid) == 12, "LOCK layout");
_Static_assert(offsetof(lockfile_page_t, visible_seq) == 16, "LOCK layout");
_Static_assert(offsetof(lockfile_page_t, durable_seq) == 24, "LOCK layout");
_Static_assert(offsetof(lockfile_page_t, futex_word) == 32, "LOCK layout");
_Static_assert(offsetof(lockfile_page_t, clock_note) == 40, "LOCK layout");
_Static_assert(sizeof(lockfile_page_t) <= LOCK_FILE_BYTES, "LOCK layout");

/*
 * Writer side: opens or creates LOCK in the journal directory dir_fd (directly, not through
 * `io`: see lockfile.c; never through a link), takes the OFD write lock, sizes the file and
 * maps it read-write. Returns 0; STELE_ELOCKED with *holder_pid set (0 if unknown) when
 * another writer holds it; -ELOOP when LOCK is a link; -errno. On success *fd_out and
 * *page_out are set.
 */
int lockfile_open_writer(const journal_io_t *io, int dir_fd, unsigned file_mode, int *fd_out,
                         lockfile_page_t **page_out, int *holder_pid);
void lockfile_close_writer(int fd, lockfile_page_t *page);

/* Reader side: maps LOCK in dir_fd read-only if it exists and is complete. Returns 0 (with
 * *page_out NULL when there is no usable LOCK yet), -ELOOP when LOCK is a link, or -errno. */
int lockfile_open_reader(int dir_fd, int *fd_out, lockfile_page_t **page_out);
void lockfile_close_reader(int fd, lockfile_page_t *page);

/* The pid of the live writer holding the lock on fd's file, 0 when none. */
int lockfile_writer_pid(int fd, const lockfile_page_t *page);

/* Stores positions (release) and wakes waiters. */
void lockfile_publish(lockfile_page_t *page, uint64_t visible_seq, uint64_t durable_seq);

/* Sleeps until futex_word differs from `seen` or timeout_ms passes (bounded by the caller).
 * Spurious returns are allowed; callers re-check. */
void lockfile_wait(const lockfile_page_t *page, uint32_t seen, int timeout_ms);

struct journal_clock_note;
/* Writer side: the clock note into the page, with its CRC. */
void lockfile_clock_note_store(lockfile_page_t *page, const struct journal_clock_note *note);
/* Writer side: the note the page holds. Returns 0, or STELE_ENOTFOUND when there is none
 * (a new page, one an older stele wrote, or a note whose CRC fails). */
int lockfile_clock_note_load(const lockfile_page_t *page, struct journal_clock_note *note);

#endif /* STELE_JOURNAL_LOCKFILE_H */
