/*
 * stele_internal.h: hooks for stele's own tests and tools, not installed. Lets a test run
 * the whole engine over a faulting or crashing I/O table (tests/support/).
 */
#ifndef STELE_ENGINE_INTERNAL_H
#define STELE_ENGINE_INTERNAL_H

#include "stele.h"
#include "io.h"
#include "journal.h"
#include "stamp.h"

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

/* Seams for tests; a zeroed struct is stele_open(). */
typedef struct stele_hooks {
    const journal_io_t *io; /* the journal's file I/O (NULL = POSIX) */
    /* The writer's index handle fails this many writes (INDEX_FAIL_FOREVER: all) with
     * -index_failing_errno from the open on, the catch-up included (index_fail_writes). */
    uint32_t index_failing_writes;
    int index_failing_errno;
    /* The record clock's readings (wall time, boot time, boot id: stamp.h); NULL: the
     * machine's clocks. */
    stamp_clock_fn clock;
    void *clock_ctx;
} stele_hooks_t;

/* stele_open() with the seams in *hooks (copied; NULL = none). */
int stele_open_with_hooks(const char *dir, const stele_options_t *opts, const stele_hooks_t *hooks,
                          stele_t **out, stele_error_t *err);

/* The index handle the engine writes, for a test to arm or disarm index_fail_writes on it.
 * Borrowed until stele_close. */
typedef struct index index_t;
index_t *stele_index_for_tests(stele_t *db);

/* stele_verify_opts() calling hook(ctx, seq) after each record it checked, so a test can change
 * the journal (run retention) at a chosen point of the walk. */
typedef void (*stele_verify_hook_fn)(void *ctx, uint64_t seq);
int stele_verify_hooked(const char *dir, const stele_options_t *opts, uint64_t from_seq,
                        uint64_t to_seq, stele_verify_report_t *report, stele_verify_hook_fn hook,
                        void *hook_ctx, stele_error_t *err);

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
