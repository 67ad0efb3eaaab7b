/*
 * index_writer.h: the index writer thread of one stele_t. It takes batch starts from
 * whoever writes the journal (index_writer_on_batch, a copy into a bounded ring that never
 * blocks), applies them to the index in batches, flushes the index lazily, applies the
 * retention policy and publishes the sinks' counters for `stele status` in other processes.
 * Everything it does is off the append path; the index is a cache, so a failure to write it
 * never reaches the journal: the index falls behind (readers seek from its last entry and
 * scan the rest), and the thread catches it up from the segments once writing works again
 * (retried with a growing pause, and at once when retention freed space).
 */
#ifndef STELE_ENGINE_INDEX_WRITER_H
#define STELE_ENGINE_INDEX_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commit.h"
#include "index.h"
#include "io.h"
#include "journal.h"
#include "stele.h"

typedef struct index_writer index_writer_t;
typedef struct shipper shipper_t; /* ship.h; declared here so this header needs no libmongoc */

typedef struct index_writer_config {
    index_t *index;             /* borrowed: batch starts, flushes, sink counters, retention */
    journal_t *journal;         /* borrowed: retention deletes its oldest segments */
    const char *dir;            /* borrowed: the journal directory, for segment listings */
    const journal_io_t *io;     /* borrowed; NULL = POSIX */
    uint64_t retention_bytes;   /* stele_options_t's; 0 = keep all */
    uint64_t retention_seconds; /* stele_options_t's; 0 = keep all */
    /* The catch-up at open could not write the index (a full disk): start behind, with this
     * error as the reason (borrowed for the call to index_writer_create); NULL when the
     * index is in line. */
    const stele_error_t *behind;
} index_writer_config_t;

/* Makes an index writer with no thread yet, so its index_writer_on_batch can be handed to
 * the committer before either thread starts. Borrowed pointers must outlive
 * index_writer_free. Returns 0 or -ENOMEM. */
int index_writer_create(const index_writer_config_t *cfg, index_writer_t **out, stele_error_t *err);

/* A commit_batch_fn (ctx is the index_writer_t): copies the batch start into the ring and
 * returns. When the ring is full the start is dropped (the index is sparse: a seek then
 * scans a little further). */
void index_writer_on_batch(void *ctx, const journal_batch_info_t *info);

/* Starts the thread. `commit` is borrowed until index_writer_stop: the thread reads where
 * the journal ended at open and tells it when retention freed space. Returns 0 or -errno
 * from pthread_create. */
int index_writer_start(index_writer_t *w, commit_t *commit, stele_error_t *err);

/* Lets the thread publish the counters of shippers[0, n) and hold retention to what they
 * have all shipped; before this call it publishes none and retains everything. Call once,
 * when every sink's shipper has started; the array must outlive index_writer_stop. */
void index_writer_set_shippers(index_writer_t *w, shipper_t *const *shippers, size_t n);

/* Applies what is queued, publishes and flushes the index once more, and joins the thread.
 * No-op when it was never started or already stopped. */
void index_writer_stop(index_writer_t *w);

/* Whether the index is behind the journal; when it is, copies why into msg (cap bytes).
 * Any thread. */
bool index_writer_behind(index_writer_t *w, char *msg, size_t cap);

/* index_sync calls so far (stats.index_syncs). Any thread. */
uint64_t index_writer_syncs(const index_writer_t *w);

/* Frees a stopped (or never started) index writer. NULL is a no-op. */
void index_writer_free(index_writer_t *w);

#endif /* STELE_ENGINE_INDEX_WRITER_H */
