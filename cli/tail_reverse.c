/*
 * tail_reverse.c: `stele tail -r`: the records the query selects, newest first (tail.h).
 *
 * Readers only go forward, so the range is read backwards in spans: from the newest seq
 * down, each span [lo, hi] is read forward (a seek to lo, then records up to hi), its kept
 * lines pushed into the ring, and the ring printed newest first. Memory is one span's lines
 * (at most TAIL_REVERSE_MAX_SPAN) however long the range. A span that kept nothing doubles
 * the next one (a --where or --until that skips long stretches costs few seeks), one that
 * kept lines goes back to the first size. It stops at --from, at the oldest record
 * (retention may have removed older seqs), at the first record older than --since (times
 * never decrease with seq), after -n N lines, or on a stop signal or a closed stdout.
 */
#include "tail.h"

/* The first span read; -n N smaller than it reads N. */
#define TAIL_REVERSE_FIRST_SPAN 1024
/* The largest span: bounds the lines held at once. */
#define TAIL_REVERSE_MAX_SPAN 16384

/* Positions the reader at seq (the first record after it when it is gone). Sets
 * *is_oldest when the journal has nothing before seq. */
static int
reverse_seek(tailer_t *t, uint64_t seq, int *is_oldest, stele_error_t *err)
{
    if (t->remote != NULL)
        return stele_remote_reader_seek_seq(t->remote, seq, err);
    int rc = stele_reader_seek_seq(t->reader, seq, err);
    if (rc == STELE_ENOTFOUND) { /* retention removed it: the reader is at the oldest */
        *is_oldest = 1;
        rc = 0;
    }
    return rc;
}

/* Pushes the lines of the records in [lo, hi] that the query keeps into t->ring, oldest
 * first. Sets *is_last when nothing older can be kept. */
static int
reverse_read_span(tailer_t *t, uint64_t lo, uint64_t hi, int *is_last, stele_record_t *last_bad,
                  stele_error_t *err)
{
    int rc = reverse_seek(t, lo, is_last, err);
    while (rc == 0 && !tail_stop_requested(t)) {
        stele_record_t rec;
        rc = tail_next(t, &rec, 0, err);
        if (rc == STELE_EAGAIN || (rc == 0 && rec.seq > hi))
            return 0;
        if (rc != 0)
            break;
        if (t->q->has_since && rec.ts_ns < t->q->since_ns) {
            *is_last = 1;
            continue;
        }
        char *line = NULL;
        rc = tail_keeps(t, &rec);
        if (rc == 1)
            rc = tail_format_record(t, &rec, &line, err);
        if (rc == 0 && line != NULL)
            rc = tail_ring_push(&t->ring, line);
        if (rc < 0)
            *last_bad = rec;
        rc = rc < 0 ? rc : 0;
    }
    return rc;
}

int
tail_run_reverse(tailer_t *t, const char *dir, stele_record_t *last_bad, stele_error_t *err)
{
    uint64_t hi = 0;
    int rc = tail_last_seq(t, dir, &hi, err);
    uint64_t first = t->q->from_seq > 0 ? t->q->from_seq : 1;
    int64_t n_left = t->q->n_last;
    uint64_t span = TAIL_REVERSE_FIRST_SPAN;
    if (n_left > 0 && (uint64_t)n_left < span)
        span = (uint64_t)n_left;
    t->ring.cap = TAIL_REVERSE_MAX_SPAN;
    int is_last = 0;
    while (rc == 0 && hi >= first && n_left != 0 && !is_last && !tail_stop_requested(t)) {
        uint64_t lo = hi - first + 1 > span ? hi - span + 1 : first;
        rc = reverse_read_span(t, lo, hi, &is_last, last_bad, err);
        int is_empty = t->ring.count == 0;
        tail_ring_drain_newest_first(t, &n_left);
        span = !is_empty                          ? TAIL_REVERSE_FIRST_SPAN
               : span * 2 > TAIL_REVERSE_MAX_SPAN ? TAIL_REVERSE_MAX_SPAN
                                                  : span * 2;
        hi = lo - 1;
    }
    tail_ring_free(&t->ring);
    return rc != 0 ? rc : tail_flush(t);
}
