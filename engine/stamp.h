/*
 * stamp.h: the timestamps records get (the record clock). A record's ts_ns is the wall-clock
 * time of its append, never less than the record before it (FORMAT.md rule S2), and immune
 * to a step of the wall clock: within a boot the record clock runs on the boot-time clock
 * (CLOCK_BOOTTIME: counts suspend, is never set) from the wall-clock time it last trusted,
 * follows the wall clock while it only slews, and believes a step of it only once the step
 * has held for STAMP_STEP_TRUST_NS. So a clock set ten years ahead for one append, then set
 * right, stamps no record in the future, and a clock set back stamps none in the past; a
 * correction that holds (NTP after boot) is followed after that delay. What the record clock
 * trusts is kept in the journal's LOCK page for the next writer of the same boot.
 * A new boot trusts the wall clock at its first append: a clock that is already wrong then
 * cannot be told from a right one (docs/journal.md, "Timestamps").
 */
#ifndef STELE_ENGINE_STAMP_H
#define STELE_ENGINE_STAMP_H

#include <stdbool.h>
#include <stdint.h>

#include "journal.h"

/* One reading of the clocks the record clock uses. */
typedef struct stamp_reading {
    int64_t wall_ns;     /* CLOCK_REALTIME, ns since the Unix epoch */
    uint64_t boot_ns;    /* CLOCK_BOOTTIME */
    uint8_t boot_id[16]; /* the kernel's boot id; all zero when unknown */
} stamp_reading_t;

/* Reads the clocks into *out. The machine's is stamp_machine_clock; tests inject others. */
typedef void (*stamp_clock_fn)(void *ctx, stamp_reading_t *out);

typedef struct stamp {
    journal_clock_note_t note; /* what the record clock trusts (valid when has_note) */
    bool has_note;
    uint64_t stored_boot_ns; /* when the note was last kept in the journal */
    journal_t *journal;      /* borrowed: where the note is kept (NULL: nowhere) */
    stamp_clock_fn clock;
    void *clock_ctx;
    uint8_t machine_boot_id[16]; /* stamp_machine_clock's boot id, read once */
} stamp_t;

/* Sets up the record clock over `clock` (NULL: the machine's) and takes the note the
 * journal's previous writer of this boot left. */
void stamp_init(stamp_t *s, journal_t *journal, stamp_clock_fn clock, void *clock_ctx);

/* The timestamp of the next record: the record clock's time, and at least last_ts_ns.
 * Updates what the record clock trusts. Not thread-safe: the caller serialises (commit.mu). */
int64_t stamp_next(stamp_t *s, int64_t last_ts_ns);

/* Keeps the note in the journal now (at close). Same serialisation as stamp_next. */
void stamp_keep(stamp_t *s);

/* The machine's clocks; ctx is the stamp_t (for its boot id). */
void stamp_machine_clock(void *ctx, stamp_reading_t *out);

#endif /* STELE_ENGINE_STAMP_H */
