/*
 * stele_internal.h: hooks for stele's own tests and tools, not installed. Lets a test run
 * the whole engine over a faulting or crashing I/O table (tests/support/).
 */
#ifndef STELE_ENGINE_INTERNAL_H
#define STELE_ENGINE_INTERNAL_H

#include "stele.h"
#include "io.h"
#include "journal.h"

/* stele_open() with the journal's file I/O going through `io` (NULL = POSIX). */
int stele_open_with_io(const char *dir, const stele_options_t *opts, const journal_io_t *io,
                       stele_t **out, stele_error_t *err);

/*
 * stele_append_json() / stele_append_bson() with the record's origin block given by the
 * caller (who appended it, outside the event: FORMAT.md, "Frame"). The public calls record
 * the writing process itself (FRAME_ORIGIN_PROCESS); `stele serve` passes each peer's
 * SO_PEERCRED (FRAME_ORIGIN_PEER). origin NULL = this process. Borrowed for the call.
 * Same results as the public calls.
 */
int stele_append_json_from(stele_t *db, const journal_origin_t *origin, const char *json,
                           size_t len, stele_wait_t wait, uint64_t *seq_out, stele_error_t *err);
int stele_append_bson_from(stele_t *db, const journal_origin_t *origin, const uint8_t *bson,
                           size_t len, stele_wait_t wait, uint64_t *seq_out, stele_error_t *err);

typedef struct index index_t;
struct journal_recovery;

/*
 * Brings the index in line with the journal at open (engine/index_catchup.c): drops batch
 * starts past the recovered end, indexes batches the lazily-synced index missed, and
 * rebuilds it from the segments when it is empty, missing or unreadable. Writes what it did
 * into note (empty when nothing was needed).
 */
int stele_index_catch_up(index_t *ix, const char *dir, const journal_io_t *io,
                         const struct journal_recovery *rec, char *note, size_t note_cap,
                         stele_error_t *err);

#endif /* STELE_ENGINE_INTERNAL_H */
