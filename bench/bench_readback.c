/*
 * bench_readback.c: after a stele cell (in-process or through `stele serve`), every record is
 * read back from the journal with stele_reader and counted, and the cell fails when the count
 * is not what the writers were told was appended.
 *
 * Every append that returned success is counted once, in `appends` (the timed window) or in
 * `warmup_appends` (before it), so a journal written only by the cell holds exactly their sum.
 * An append that returned an error may still have been appended (a wait that failed after
 * the record was queued, a connection that broke before its reply): the journal may hold up
 * to `errors` more, never fewer. The seqs must follow each other without a gap. Reads only
 * the journal the cell wrote, after its writer closed it; owns nothing beyond the call.
 */
#include "bench.h"

#include <string.h>

/* Counts the records of `dir`, checking their seqs follow each other. 0 or a stele code. */
static int
readback_count(const char *dir, int64_t *n_out, char *why, size_t why_cap)
{
    stele_reader_t *rd = NULL;
    stele_error_t err;
    int rc = stele_reader_open(dir, &rd, &err);
    if (rc) {
        bench_note(why, why_cap, "read-back: stele_reader_open: %s", err.message);
        return rc;
    }
    int64_t n = 0;
    uint64_t last_seq = 0;
    stele_record_t rec;
    while ((rc = stele_reader_next(rd, &rec, 0, &err)) == 0) {
        if (n > 0 && rec.seq != last_seq + 1) {
            bench_note(why, why_cap, "read-back: seq %llu follows seq %llu",
                       (unsigned long long)rec.seq, (unsigned long long)last_seq);
            rc = STELE_ECORRUPT;
            break;
        }
        last_seq = rec.seq;
        n++;
    }
    if (rc == STELE_EAGAIN)
        rc = 0;              /* the end of the journal */
    else if (why[0] == '\0') /* not the gap above: the reader's own error */
        bench_note(why, why_cap, "read-back: stele_reader_next: %s", err.message);
    stele_reader_close(rd);
    *n_out = n;
    return rc;
}

int
bench_read_back(const char *journal_dir, bench_result_t *r)
{
    char why[BENCH_NOTE_BYTES] = "";
    int64_t n = 0;
    if (readback_count(journal_dir, &n, why, sizeof why) != 0) {
        snprintf(r->note, sizeof r->note, "%s", why);
        return BENCH_FAILED;
    }
    r->counted_back = n;
    uint64_t expected = r->appends + r->warmup_appends;
    if ((uint64_t)n >= expected && (uint64_t)n <= expected + r->errors)
        return 0;
    if (r->errors)
        bench_note(r->note, sizeof r->note,
                   "read back %lld records, expected appends + warmup_appends = %llu (up to "
                   "%llu with the %llu failed appends)",
                   (long long)n, (unsigned long long)expected,
                   (unsigned long long)(expected + r->errors), (unsigned long long)r->errors);
    else
        bench_note(r->note, sizeof r->note,
                   "read back %lld records, expected appends + warmup_appends = %llu", (long long)n,
                   (unsigned long long)expected);
    return BENCH_FAILED;
}
