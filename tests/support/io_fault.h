/*
 * io_fault.h: a journal_io_t that wraps another table (normally POSIX) and fails a chosen
 * call, for the journal's fault loops (tests/test_journal_faults.c).
 *
 * A fault names which calls it targets (one method or any), the 1-based index n of the first
 * call to fail among those, whether it fails once or every targeted call from n on, and how:
 * an error code (-EIO, -ENOSPC) or, for pwritev, a short write (part of the data reaches the
 * file, then the error is returned, which is what the journal sees from io_posix when the
 * disk fills or fails mid-write). Every call is counted per method, before the fault check,
 * so the counts say how many calls the journal attempted.
 *
 * Thread-safe: the journal's segment preparer calls the table from its own thread; one mutex
 * guards the counters and the fault state.
 */
#ifndef STELE_TEST_IO_FAULT_H
#define STELE_TEST_IO_FAULT_H

#include <stdint.h>

#include "io.h"

/* The methods of journal_io_t, in table order; IO_METHOD_ANY targets all of them. */
typedef enum io_method {
    IO_METHOD_ANY = -1,
    IO_METHOD_OPEN = 0,
    IO_METHOD_PREAD,
    IO_METHOD_PWRITEV,
    IO_METHOD_FDATASYNC,
    IO_METHOD_FSYNC,
    IO_METHOD_TRUNCATE,
    IO_METHOD_ALLOCATE,
    IO_METHOD_RENAME,
    IO_METHOD_UNLINK,
    IO_METHOD_SYNC_DIR,
    IO_METHOD_FILE_SIZE,
    IO_METHOD_CLOSE,
    IO_METHOD_OPEN_DIR,
    IO_METHOD_MAKE_DIR,
    IO_METHOD_SET_MODE,
    IO_METHOD_COUNT
} io_method_t;

/* "pwritev", "fdatasync", ... ("any" for IO_METHOD_ANY). */
const char *io_method_name(io_method_t method);

typedef struct io_fault_spec {
    io_method_t method; /* which calls count towards nth; IO_METHOD_ANY = all */
    uint64_t nth;       /* 1-based index among targeted calls of the first failure */
    int error;          /* negative errno returned: -EIO, -ENOSPC */
    int is_short_write; /* a failing pwritev first writes part of its data */
    int is_persistent;  /* fail every targeted call from nth on, not just the nth */
    const void *site;   /* only calls from this call site count (io_fault_sites); NULL = all */
} io_fault_spec_t;

typedef struct io_fault io_fault_t;

/*
 * Creates a fault table wrapping `inner` (borrowed; must outlive it). With
 * `syncs_are_noops`, fdatasync/fsync/sync_dir are counted and may fail but do not reach the
 * disk: fault loops model a failing process, not power loss, so the page cache suffices and
 * the loop runs much faster. Returns NULL when out of memory.
 */
io_fault_t *io_fault_new(const journal_io_t *inner, int syncs_are_noops);
void io_fault_free(io_fault_t *f);

/* The table to hand to the journal; valid until io_fault_free. */
const journal_io_t *io_fault_io(io_fault_t *f);

/* Arms a fault and resets the fired count. Replaces any earlier fault. */
void io_fault_arm(io_fault_t *f, const io_fault_spec_t *spec);
/* No call fails from now on. */
void io_fault_disarm(io_fault_t *f);
/* How many calls failed because of the armed fault. */
uint64_t io_fault_fired(io_fault_t *f);

/* How many calls of `method` the armed fault failed (IO_METHOD_ANY: all). */
uint64_t io_fault_fired_by(io_fault_t *f, io_method_t method);
/* As io_fault_fired_by, counting only calls made on the thread that armed the fault (the
 * test's own thread, as opposed to the journal's background threads). */
uint64_t io_fault_fired_on_arming_thread(io_fault_t *f, io_method_t method);
/* The method of the last call the armed fault failed (IO_METHOD_ANY if none yet). */
io_method_t io_fault_last_fired_method(io_fault_t *f);

/* One place in the journal that calls the table, told apart by return address. */
typedef struct io_fault_site {
    const void *caller;
    io_method_t method;
    uint64_t n_calls;
    /* Calls made before the armed fault had fired in that run: a site reached only after a
     * failure is an error path, which a single fault cannot reach and fail. */
    uint64_t n_calls_before_fault;
    uint64_t n_faulted; /* calls failed here by an armed fault */
} io_fault_site_t;

enum { IO_FAULT_MAX_SITES = 256 };

/* Copies up to `max` call sites seen since creation; returns how many there are. A fault
 * loop uses it to show that every call site it reached was also failed. */
size_t io_fault_sites(io_fault_t *f, io_fault_site_t *out, size_t max);

/* Calls attempted per method (IO_METHOD_ANY: all methods), since creation or reset. */
uint64_t io_fault_calls(io_fault_t *f, io_method_t method);
void io_fault_reset_counts(io_fault_t *f);

#endif /* STELE_TEST_IO_FAULT_H */
