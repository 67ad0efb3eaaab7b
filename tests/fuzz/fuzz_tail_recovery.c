/*
 * fuzz_tail_recovery.c: libFuzzer target for recovery at open. Each input is written just
 * past the last committed batch of a template journal (as a torn or garbled tail would be),
 * then the journal is opened for writing. Recovery must not crash, must return 0 or
 * STELE_ECORRUPT, and when it succeeds it must keep every committed record, accept a new
 * batch, and leave a log the reader walks with contiguous seqs and an unbroken chain.
 *
 * Seeds (STELE_FUZZ_MAKE_SEEDS=<corpus dir>): zeros, 0xff, a valid next batch, that batch
 * torn in half and with one byte flipped, and a replay of the first batch (wrong seq).
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
    fprintf(stderr, "tail recovery: %s: %s\n", what, detail ? detail : "");
    abort();
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
    uint8_t fill[256];
    memset(fill, 0, sizeof(fill));
    fuzz_write_seed(corpus, "zeros", fill, sizeof(fill));
    memset(fill, 0xff, sizeof(fill));
    fuzz_write_seed(corpus, "ones", fill, sizeof(fill));
    fuzz_write_seed(corpus, "next-batch", t->next_batch, t->next_batch_len);
    fuzz_write_seed(corpus, "next-batch-torn", t->next_batch, t->next_batch_len / 2);
    uint8_t *flipped = malloc(t->next_batch_len);
    if (!flipped)
        abort();
    memcpy(flipped, t->next_batch, t->next_batch_len);
    flipped[t->next_batch_len / 2] ^= 0x20;
    fuzz_write_seed(corpus, "next-batch-flipped", flipped, t->next_batch_len);
    free(flipped);
    fuzz_write_seed(corpus, "first-batch-replayed", t->first_batch, t->first_batch_len);
    return 0;
}

/* Walks the whole log: seqs from 1, contiguous, each chained to the one before. */
static uint64_t
walk_log(const char *dir)
{
    journal_reader_t *r = NULL;
    journal_record_t rec;
    stele_error_t err = {0};
    uint8_t prev_hash[32];
    uint64_t prev_seq = 0;
    if (journal_reader_open(dir, fuzz_io(), &r, &err) != 0)
        violation("reader_open after recovery", err.message);
    int rc;
    while ((rc = journal_reader_next(r, &rec, &err)) == 0) {
        if (rec.seq != prev_seq + 1)
            violation("seqs not contiguous after recovery", NULL);
        if (prev_seq && memcmp(rec.prev_hash, prev_hash, 32) != 0)
            violation("chain broken after recovery", NULL);
        memcpy(prev_hash, rec.hash, 32);
        prev_seq = rec.seq;
    }
    if (rc != STELE_EAGAIN)
        violation("reading after recovery", err.message);
    journal_reader_close(r);
    return prev_seq;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const fuzz_template_t *t = fuzz_template_get();
    char *dir = fuzz_copy_template(t);
    fuzz_write_segment(dir, t, t->tail_off, data, size);

    journal_options_t opts;
    journal_options_init(&opts);
    opts.io = fuzz_io();
    opts.segment_bytes = FUZZ_SEGMENT_BYTES;
    opts.create_if_missing = 0;
    opts.zero_fill = 1;
    journal_t *j = NULL;
    journal_recovery_t rec;
    stele_error_t err = {0};
    int rc = journal_open(dir, &opts, &j, &rec, &err);
    if (rc == 0) {
        if (rec.last_seq < t->last_seq)
            violation("recovery dropped a committed record", rec.note);
        test_ledger_t lg;
        test_rng_t rng;
        journal_batch_info_t info;
        test_ledger_init(&lg, 64);
        test_rng_init(&rng, size);
        test_ledger_truncate(&lg, rec.last_seq, rec.last_ts_ns);
        if (test_ledger_append(&lg, j, &rng, 2, &info, &err) != 0 || journal_sync(j, &err) != 0)
            violation("append after recovery", err.message);
        uint64_t last_seq = journal_last_seq(j);
        if (journal_close(j, &err) != 0)
            violation("close after recovery", err.message);
        test_ledger_free(&lg);
        if (walk_log(dir) != last_seq)
            violation("log does not end at the last append", NULL);
    } else if (rc != STELE_ECORRUPT) {
        violation("undefined result from recovery", test_code_name(rc));
    }
    fuzz_remove_dir(dir);
    return 0;
}
