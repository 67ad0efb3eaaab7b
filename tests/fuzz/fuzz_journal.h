/*
 * fuzz_journal.h: what the journal fuzz targets share: a template journal made once per
 * process (a few committed batches in a small segment), copied into a fresh directory for
 * every input, and a way to overwrite bytes of its newest segment.
 */
#ifndef STELE_FUZZ_JOURNAL_H
#define STELE_FUZZ_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "journal.h"

/* Segment size of the template: small, so copies are cheap and inputs can reach the end. */
#define FUZZ_SEGMENT_BYTES (64u * 1024u)

typedef struct fuzz_template {
    char *dir;           /* the template journal (removed at exit) */
    char *segment_name;  /* file name of the segment holding the records */
    uint64_t data_off;   /* offset of the first frame in that segment */
    uint64_t tail_off;   /* offset just past the last committed batch */
    uint64_t last_seq;   /* last committed record */
    uint8_t *next_batch; /* bytes of a valid next batch (written in a copy, then read) */
    size_t next_batch_len;
    uint8_t *first_batch; /* bytes of the first committed batch */
    size_t first_batch_len;
} fuzz_template_t;

/* Builds the template once (aborts on failure: the fuzzer cannot run without it). */
const fuzz_template_t *fuzz_template_get(void);

/* Copies the template into a fresh directory; returns it (malloc'd) or aborts. */
char *fuzz_copy_template(const fuzz_template_t *t);

/* Overwrites [off, off+len) of the template segment inside `dir` (clamped to the segment). */
void fuzz_write_segment(const char *dir, const fuzz_template_t *t, uint64_t off,
                        const uint8_t *data, size_t len);

/* The I/O table for fuzzing: POSIX with syncs skipped (no power loss is being modelled). */
const journal_io_t *fuzz_io(void);

/* Writes the seed inputs of a target into `corpus_dir` when STELE_FUZZ_MAKE_SEEDS names it:
 * each seed is given as (bytes, len). Called from LLVMFuzzerInitialize. */
void fuzz_write_seed(const char *corpus_dir, const char *name, const uint8_t *bytes, size_t len);

/* Removes a directory tree and frees the path. */
void fuzz_remove_dir(char *dir);

#endif /* STELE_FUZZ_JOURNAL_H */
