/*
 * fuzz_segment_read.c: libFuzzer target for segment scanning by the reader. The first two bytes of
 * an input choose an offset inside the committed frames of a template journal; the rest overwrite
 * the segment from there. A read-only reader then walks the log. Decoding must not crash and must
 * end in STELE_EAGAIN (end of the committed log) or STELE_ECORRUPT; every record it returns has the
 * next seq and a payload inside the segment.
 *
 * Seeds (STELE_FUZZ_MAKE_SEEDS=<corpus dir>): the first batch in place, a valid next batch
 * past the tail, zeros over the first frame, and one flipped byte in the first frame.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_journal.h"
#include "test_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
violation(const char *what, const char *detail)
{
    fprintf(stderr, "segment read: %s: %s\n", what, detail ? detail : "");
    abort();
}

/* Seed = 2-byte little-endian offset from the first frame, then the bytes. */
static void
write_seed(const char *corpus, const char *name, uint16_t rel_off, const uint8_t *bytes, size_t len)
{
    uint8_t *seed = malloc(len + 2);
    if (!seed)
        abort();
    seed[0] = (uint8_t)rel_off;
    seed[1] = (uint8_t)(rel_off >> 8);
    memcpy(seed + 2, bytes, len);
    fuzz_write_seed(corpus, name, seed, len + 2);
    free(seed);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const fuzz_template_t *t = fuzz_template_get();
    const char *corpus = getenv("STELE_FUZZ_MAKE_SEEDS");
    if (!corpus || !*corpus)
        return 0;
    uint16_t tail_rel = (uint16_t)(t->tail_off - t->data_off);
    write_seed(corpus, "first-batch", 0, t->first_batch, t->first_batch_len);
    write_seed(corpus, "next-batch", tail_rel, t->next_batch, t->next_batch_len);
    uint8_t *copy = malloc(t->first_batch_len);
    if (!copy)
        abort();
    memset(copy, 0, t->first_batch_len);
    write_seed(corpus, "zeroed-first-batch", 0, copy, t->first_batch_len);
    memcpy(copy, t->first_batch, t->first_batch_len);
    copy[t->first_batch_len / 3] ^= 0x01;
    write_seed(corpus, "flipped-first-batch", 0, copy, t->first_batch_len);
    free(copy);
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const fuzz_template_t *t = fuzz_template_get();
    uint64_t span = t->tail_off - t->data_off + 1;
    uint64_t off = t->data_off + ((uint64_t)data[0] | (uint64_t)data[1] << 8) % span;
    char *dir = fuzz_copy_template(t);
    fuzz_write_segment(dir, t, off, data + 2, size - 2);

    journal_reader_t *r = NULL;
    journal_record_t rec;
    stele_error_t err = {0};
    int rc = journal_reader_open(dir, fuzz_io(), &r, &err);
    if (rc == 0) {
        uint64_t prev_seq = 0;
        while ((rc = journal_reader_next(r, &rec, &err)) == 0) {
            if (prev_seq && rec.seq != prev_seq + 1)
                violation("seqs not contiguous", NULL);
            if (rec.payload_len > FUZZ_SEGMENT_BYTES || rec.offset >= FUZZ_SEGMENT_BYTES)
                violation("record outside the segment", NULL);
            prev_seq = rec.seq;
        }
        journal_reader_close(r);
    }
    if (rc != STELE_EAGAIN && rc != STELE_ECORRUPT)
        violation("undefined result from decoding", test_code_name(rc));
    fuzz_remove_dir(dir);
    return 0;
}
