/*
 * reader.c: the public reader (stele_reader_*): records in seq order from a seq or a time,
 * waiting for new ones without polling. Status (status.c), verify (verify.c) and the index
 * catch-up at open (index_catchup.c) are other files.
 *
 * It reads the journal through journal_reader_* (journal/journal.h) and the index through
 * index.h; it never writes. The segments are the truth and the index only a hint: a seek
 * hands the index's position to journal_reader_seek(), which checks it, and a time seek
 * re-checks the batch the index named before trusting it. Without a usable index
 * (read_side_open_index) it seeks by scanning: slower, never wrong.
 *
 * Threads: a stele_reader_t belongs to one thread at a time (stele.h); it holds no lock.
 */
#include "stele.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "index.h"
#include "journal.h"
#include "read_side.h"

struct stele_reader {
    journal_reader_t *jr;
    index_t *ix; /* NULL: seek by scanning */
    /* Records below next_seq, or older than min_ts_ns while has_min_ts, are skipped: the
     * journal may position a little before the target (a batch start). */
    uint64_t next_seq;
    int64_t min_ts_ns;
    int has_min_ts;
    uint64_t last_read_seq; /* newest seq read from the journal; what wait waits past */
};

int
stele_reader_open(const char *dir, stele_reader_t **out, stele_error_t *err)
{
    return stele_reader_open_opts(dir, NULL, out, err);
}

int
stele_reader_open_opts(const char *dir, const stele_options_t *opts, stele_reader_t **out,
                       stele_error_t *err)
{
    if (!dir || !out)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_reader_open: dir and out required");
    *out = NULL;
    stele_reader_t *r = calloc(1, sizeof *r);
    if (!r)
        return error_set_hinted(err, -ENOMEM, NULL, "could not allocate a reader for %s", dir);
    int rc = read_side_open_journal(dir, opts, &r->jr, err);
    if (rc) {
        free(r);
        return rc;
    }
    r->ix = read_side_open_index(dir, r->jr);
    *out = r;
    return 0;
}

void
stele_reader_close(stele_reader_t *r)
{
    if (!r)
        return;
    index_close(r->ix);
    journal_reader_close(r->jr);
    free(r);
}

const char *
stele_reader_source(const stele_reader_t *r)
{
    return r ? journal_reader_source(r->jr) : "";
}

/* Seeks the journal reader to seq with an index batch start as a hint. The journal takes a
 * hint only for a frame strictly before seq (it reads the target's prev_hash on the way), so
 * the hint is the batch holding seq - 1. */
static int
read_seek_hinted(stele_reader_t *r, uint64_t seq, stele_error_t *err)
{
    index_batch_t b = {0};
    if (r->ix && seq > 1 && index_find_seq(r->ix, seq - 1, &b, NULL) != 0)
        memset(&b, 0, sizeof b);
    return journal_reader_seek(r->jr, seq, b.segment_seq, b.offset, err);
}

int
stele_reader_seek_seq(stele_reader_t *r, uint64_t seq, stele_error_t *err)
{
    if (!r)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_reader_seek_seq: no reader");
    r->has_min_ts = 0;
    int rc = read_seek_hinted(r, seq, err);
    if (rc == 0 || rc == STELE_ENOTFOUND) {
        /* Not found: the journal positioned at the oldest record; return from there. */
        r->next_seq = rc == 0 ? seq : 0;
        r->last_read_seq = rc == 0 && seq ? seq - 1 : 0;
    }
    /* Seq 0 names no record: it asks for the oldest, which is where the reader now is. */
    return seq == 0 && rc == STELE_ENOTFOUND ? 0 : rc;
}

/* First seq of the newest non-empty segment whose first record is older than ts_ns, or 0
 * (the oldest record) when there is none. Used when there is no usable index. */
static int
read_time_start_scanned(journal_reader_t *jr, int64_t ts_ns, uint64_t *seq_out, stele_error_t *err)
{
    *seq_out = 0;
    journal_segment_info_t *segs = NULL;
    int n = read_side_list_segments(jr, &segs, err);
    if (n <= 0) {
        free(segs);
        return n;
    }
    /* Segments are in seq order, so their first timestamps are too: binary search. */
    size_t lo = 0, hi = (size_t)n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int is_before = segs[mid].first_ts_ns != 0 && segs[mid].first_ts_ns < ts_ns;
        if (is_before)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0)
        *seq_out = segs[lo - 1].first_seq;
    free(segs);
    return 0;
}

/* The index's batch for a time seek, checked against the segment it names: a stale index
 * (say, from before a torn tail was truncated and rewritten) must not skip records. */
static int
read_time_start_indexed(stele_reader_t *r, int64_t ts_ns, uint64_t *seq_out)
{
    index_batch_t b;
    int rc = index_find_time(r->ix, ts_ns, &b, NULL);
    if (rc == STELE_ENOTFOUND) {
        *seq_out = 0;
        return 0;
    }
    if (rc)
        return rc;
    journal_record_t rec;
    rc = read_seek_hinted(r, b.first_seq, NULL);
    if (rc == 0)
        rc = journal_reader_next(r->jr, &rec, NULL);
    if (rc == 0 && (rec.seq != b.first_seq || rec.ts_ns != b.first_ts_ns ||
                    rec.segment_seq != b.segment_seq || rec.offset != b.offset))
        rc = STELE_ECORRUPT;
    if (rc == 0)
        *seq_out = b.first_seq;
    return rc;
}

int
stele_reader_seek_time(stele_reader_t *r, int64_t ts_ns, stele_error_t *err)
{
    if (!r)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_reader_seek_time: no reader");
    uint64_t start_seq = 0;
    int rc = -1;
    if (r->ix)
        rc = read_time_start_indexed(r, ts_ns, &start_seq);
    if (rc != 0) {
        rc = read_time_start_scanned(r->jr, ts_ns, &start_seq, err);
        if (rc)
            return rc;
    }
    rc = read_seek_hinted(r, start_seq, err);
    if (rc == STELE_ENOTFOUND) /* retention removed it meanwhile: the oldest is later still */
        rc = 0;
    if (rc)
        return rc;
    r->next_seq = 0;
    r->last_read_seq = start_seq ? start_seq - 1 : 0;
    r->min_ts_ns = ts_ns;
    r->has_min_ts = 1;
    return 0;
}

static void
read_fill_record(stele_record_t *out, const journal_record_t *rec)
{
    out->seq = rec->seq;
    out->ts_ns = rec->ts_ns;
    out->bson = rec->payload;
    out->bson_len = rec->payload_len;
    memcpy(out->hash, rec->hash, sizeof out->hash);
    memcpy(out->prev_hash, rec->prev_hash, sizeof out->prev_hash);
}

int
stele_reader_next(stele_reader_t *r, stele_record_t *rec, int64_t timeout_ms, stele_error_t *err)
{
    if (!r || !rec)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_reader_next: no reader or record");
    if (timeout_ms < -1)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "stele_reader_next: timeout_ms %" PRId64 " is below -1",
                                timeout_ms);
    int64_t now_ms = clock_mono_ms();
    int64_t deadline_ms = timeout_ms > INT64_MAX - now_ms ? INT64_MAX : now_ms + timeout_ms;
    for (;;) {
        journal_record_t jrec;
        int rc = journal_reader_next(r->jr, &jrec, err);
        if (rc == 0) {
            r->last_read_seq = jrec.seq;
            if (jrec.seq < r->next_seq || (r->has_min_ts && jrec.ts_ns < r->min_ts_ns))
                continue;
            r->has_min_ts = 0;
            r->next_seq = jrec.seq + 1;
            read_fill_record(rec, &jrec);
            return 0;
        }
        if (rc != STELE_EAGAIN)
            return rc;
        int wait_ms = -1;
        if (timeout_ms == 0)
            break;
        if (timeout_ms > 0) {
            int64_t left_ms = deadline_ms - clock_mono_ms();
            if (left_ms <= 0)
                break;
            /* A longer wait is taken in several: the loop comes back for the rest. */
            wait_ms = left_ms > INT_MAX ? INT_MAX : (int)left_ms;
        }
        uint64_t after = r->last_read_seq;
        if (r->next_seq > after + 1)
            after = r->next_seq - 1;
        rc = journal_reader_wait(r->jr, after, wait_ms);
        if (rc == STELE_ETIMEDOUT)
            continue; /* the deadline decides, above */
        if (rc)
            return error_set_hinted(err, rc, NULL, "could not wait for records: %s",
                                    stele_strerror(rc));
    }
    return error_set_hinted(err, STELE_EAGAIN, NULL, "no new record within %" PRId64 " ms",
                            timeout_ms);
}
