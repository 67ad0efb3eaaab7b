/*
 * io_crash.h: a journal_io_t that simulates power loss, for the power-loss loops
 * (tests/test_journal_powerloss.c, tests/test_engine_crash.c).
 *
 * The model (strict POSIX, like SQLite's test6.c crash VFS):
 *  - File data: a write, truncate or allocate reaches the "page cache" (the real file, so
 *    every read sees it) but is durable only once fdatasync or fsync on that file returns.
 *    Until then the table remembers what the write replaced.
 *  - Directory entries: creating a file, renaming and unlinking are durable only once
 *    sync_dir on the directory returns. fsync of the file does not make its name durable.
 *    Making a directory and setting a mode are not modelled: they reach the disk at once.
 *  - A crash keeps a random subset of what was not durable: each unsynced write is split
 *    into its 512-byte sectors and each piece survives or not on its own; truncates and
 *    allocations survive or not; in each directory a random prefix of the pending
 *    create/rename/unlink operations survives (a journaling file system keeps their order).
 *    Optionally one sector piece of an unsynced write is zeroed or filled with garbage (a
 *    torn sector). Durable bytes are never touched: sectors are assumed to be written
 *    atomically, so damage is confined to bytes that were not yet durable, and to bytes a
 *    write changed (an O_DIRECT write rewrites the durable head of its first block with
 *    the same bytes; page-cache writeback does the same with whole pages, unseen here).
 *
 * Use: hand io_crash_io() to the journal; io_crash_arm() picks the call at which the power
 * fails, io_crash_arm_method() the nth call of one method (or call io_crash_trigger() at any
 * moment). From then on every call fails with -EIO
 * except close, which releases the descriptor. Close the journal, then io_crash_apply()
 * rewrites the files on disk to one possible post-crash state, and the journal is reopened
 * with the real POSIX table. The table can be reused for the next cycle after apply.
 *
 * Assumes the inner table returns real file descriptors (the POSIX table does) and Linux's
 * /proc: the crash table fstat()s them and reopens them through /proc/self/fd to follow
 * files across renames and unlinks.
 * Thread-safe: one mutex serialises every call (the journal's preparer thread included).
 */
#ifndef STELE_TEST_IO_CRASH_H
#define STELE_TEST_IO_CRASH_H

#include <stdint.h>

#include "io.h"

typedef struct io_crash io_crash_t;

/* What one io_crash_apply did, for the test's statistics. */
typedef struct io_crash_report {
    uint64_t pending_ops;     /* unsynced file operations at the crash */
    uint64_t sectors_kept;    /* sector pieces of unsynced writes that survived */
    uint64_t sectors_dropped; /* ... that were lost */
    uint64_t dir_ops_lost;    /* creates/renames/unlinks undone */
    int damage;               /* 0 none, 1 a sector piece zeroed, 2 garbled */
} io_crash_report_t;

/* Creates a crash table over `inner` (borrowed), its choices driven by `seed`. With
 * `syncs_reach_disk` 0 the syncs are simulated only (much faster; the crash is simulated
 * anyway). NULL when out of memory. */
io_crash_t *io_crash_new(const journal_io_t *inner, uint64_t seed, int syncs_reach_disk);
/* Frees the table (forgetting pending state). Every descriptor the journal opened through it
 * must be closed first. NULL is a no-op. */
void io_crash_free(io_crash_t *c);

const journal_io_t *io_crash_io(io_crash_t *c);

/* The power fails at the `nth` call from now (1 = the next one); 0 disarms. */
void io_crash_arm(io_crash_t *c, uint64_t nth);

/* The calls io_crash_arm_method counts: all of them (which disarms it), or one method. */
typedef enum io_crash_method {
    IO_CRASH_AT_ANY,
    IO_CRASH_AT_PWRITEV,
    IO_CRASH_AT_FDATASYNC,
} io_crash_method_t;
/* The power fails at the `nth` call of `method` from now, whatever calls come between: a
 * point of a workload a call count cannot aim at (the one sync of a recovery among the
 * header reads of every segment). Replaces io_crash_arm's arming, and it replaces this. */
void io_crash_arm_method(io_crash_t *c, io_crash_method_t method, uint64_t nth);
/* The power fails now. */
void io_crash_trigger(io_crash_t *c);
int io_crash_has_crashed(io_crash_t *c);
/* Calls made through the table since creation (counting the one that crashed). */
uint64_t io_crash_calls(io_crash_t *c);

/*
 * Turns the files into one possible post-crash state (triggering the crash first if it has
 * not happened), then forgets all pending state and disarms, ready for the next cycle.
 * Call with every descriptor the journal opened through the table closed.
 * Returns 0, or -errno if rewriting a file failed (the state on disk is then undefined).
 */
int io_crash_apply(io_crash_t *c, io_crash_report_t *report);

/* Without a crash: everything pending becomes durable (a clean shutdown of the machine). */
void io_crash_settle(io_crash_t *c);

#endif /* STELE_TEST_IO_CRASH_H */
