/*
 * index_catchup.h: bringing the LMDB index in line with the journal's segments
 * (index_catchup.c). The index is a cache: a catch-up that fails because writing the index
 * failed (*is_index_failure, e.g. ENOSPC) leaves the journal fully usable, with the index
 * behind it; one that fails reading the journal reports the journal's error.
 */
#ifndef STELE_ENGINE_INDEX_CATCHUP_H
#define STELE_ENGINE_INDEX_CATCHUP_H

#include <stddef.h>
#include <stdint.h>

#include "index.h"
#include "io.h"
#include "stele.h"

struct journal_recovery;

/* stele_index_catch_up (stele_internal.h), also saying in *is_index_failure (may be NULL)
 * whether a failure came from writing the index. Opening thread, before the writers start. */
int index_catchup_at_open(index_t *ix, const char *dir, const journal_io_t *io,
                          const struct journal_recovery *rec, char *note, size_t note_cap,
                          int *is_index_failure, stele_error_t *err);

/*
 * Indexes the batches the index lacks, from its last entry up to the newest record readers
 * may see, while the journal is live (for an index that fell behind), and drops entries
 * below first_seq (retention). Returns 0, STELE_EAGAIN when the index's last entry is not
 * visible to readers yet (try again shortly), or an error, with *is_index_failure (may be
 * NULL) saying whether writing the index failed. On the index writer's thread.
 */
int index_catchup_live(index_t *ix, const char *dir, const journal_io_t *io, uint64_t first_seq,
                       char *note, size_t note_cap, int *is_index_failure, stele_error_t *err);

#endif /* STELE_ENGINE_INDEX_CATCHUP_H */
