/*
 * reader.c: the read side of the public API (stele_reader_*, stele_status_read,
 * stele_verify) and stele_index_catch_up(), which brings the LMDB index in line with the
 * segments when a writer opens the journal.
 *
 * Everything here reads the journal through journal_reader_* (journal/journal.h) and the
 * index through index.h; it never writes a segment. The segments are the truth and the
 * index only a hint: a seek hands the index's position to journal_reader_seek(), which
 * checks it, and a time seek re-checks the batch the index named before trusting it.
 * Verify alone also reads segment files directly (read-only, through the POSIX I/O table and
 * journal/record.h's decoder): the journal reader names a damaged batch, and verify finds
 * the frame inside it (or the header byte: segment_header_decode is the one header check).
 *
 * LMDB forbids opening one environment twice in a process (closing either drops the other's
 * fcntl locks), so a reader or status call in the process that holds the journal for
 * writing does not open the index; it seeks by scanning instead. A reader whose index
 * cannot be opened (missing, corrupt, directory not writable for LMDB's lock file) scans
 * too: slower, never wrong.
 *
 * Threads: a stele_reader_t belongs to one thread at a time (stele.h); it holds no lock.
 * stele_status_read and stele_verify use only their own short-lived handles.
 */
#include "stele.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "chain.h"
#include "format.h"
#include "error.h"
#include "index.h"
#include "journal.h"
#include "published.h"
#include "record.h"
#include "segment.h"
#include "stele_internal.h"

/* Batch starts written to the index per LMDB transaction during a catch-up scan. */
#define READER_CATCH_UP_CHUNK 1024

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

/* The index for a read-only user, or NULL when it must not or cannot be used. */
static index_t *
reader_open_index(const char *dir, journal_reader_t *jr)
{
    journal_live_t live;
    journal_reader_live(jr, &live);
    if (live.writer_pid == (int)getpid())
        return NULL;
    index_t *ix = NULL;
    if (index_open(dir, 0, 0, &ix, NULL) != 0)
        return NULL;
    return ix;
}

int
stele_reader_open(const char *dir, stele_reader_t **out, stele_error_t *err)
{
    if (!dir || !out)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_reader_open: dir and out required");
    *out = NULL;
    stele_reader_t *r = calloc(1, sizeof *r);
    if (!r)
        return error_set_hinted(err, -ENOMEM, NULL, "could not allocate a reader for %s", dir);
    int rc = journal_reader_open(dir, NULL, &r->jr, err);
    if (rc) {
        free(r);
        return rc;
    }
    r->ix = reader_open_index(dir, r->jr);
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
reader_seek_hinted(stele_reader_t *r, uint64_t seq, stele_error_t *err)
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
    int rc = reader_seek_hinted(r, seq, err);
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
reader_scan_start_for_time(journal_reader_t *jr, int64_t ts_ns, uint64_t *seq_out,
                           stele_error_t *err)
{
    *seq_out = 0;
    int n = journal_reader_segments(jr, NULL, 0, err);
    if (n <= 0)
        return n;
    journal_segment_info_t *segs = calloc((size_t)n, sizeof *segs);
    if (!segs)
        return error_set_hinted(err, -ENOMEM, NULL, "could not list %d segments", n);
    int got = journal_reader_segments(jr, segs, (size_t)n, err);
    if (got < 0) {
        free(segs);
        return got;
    }
    if (got > n)
        got = n;
    /* Segments are in seq order, so their first timestamps are too: binary search. */
    size_t lo = 0, hi = (size_t)got;
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
reader_index_start_for_time(stele_reader_t *r, int64_t ts_ns, uint64_t *seq_out)
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
    rc = reader_seek_hinted(r, b.first_seq, NULL);
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
        rc = reader_index_start_for_time(r, ts_ns, &start_seq);
    if (rc != 0) {
        rc = reader_scan_start_for_time(r->jr, ts_ns, &start_seq, err);
        if (rc)
            return rc;
    }
    rc = reader_seek_hinted(r, start_seq, err);
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
reader_fill(stele_record_t *out, const journal_record_t *rec)
{
    out->seq = rec->seq;
    out->ts_ns = rec->ts_ns;
    out->bson = rec->payload;
    out->bson_len = rec->payload_len;
    memcpy(out->hash, rec->hash, sizeof out->hash);
    memcpy(out->prev_hash, rec->prev_hash, sizeof out->prev_hash);
}

int
stele_reader_next(stele_reader_t *r, stele_record_t *rec, int timeout_ms, stele_error_t *err)
{
    if (!r || !rec)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_reader_next: no reader or record");
    int64_t deadline_ms = timeout_ms > 0 ? clock_mono_ms() + timeout_ms : 0;
    for (;;) {
        journal_record_t jrec;
        int rc = journal_reader_next(r->jr, &jrec, err);
        if (rc == 0) {
            r->last_read_seq = jrec.seq;
            if (jrec.seq < r->next_seq || (r->has_min_ts && jrec.ts_ns < r->min_ts_ns))
                continue;
            r->has_min_ts = 0;
            r->next_seq = jrec.seq + 1;
            reader_fill(rec, &jrec);
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
            wait_ms = (int)left_ms;
        }
        uint64_t after = r->last_read_seq;
        if (r->next_seq > after + 1)
            after = r->next_seq - 1;
        rc = journal_reader_wait(r->jr, after, wait_ms);
        if (rc == STELE_ETIMEDOUT)
            break;
        if (rc)
            return error_set_hinted(err, rc, NULL, "could not wait for records: %s",
                                    stele_strerror(rc));
    }
    return error_set_hinted(err, STELE_EAGAIN, NULL, "no new record within %d ms", timeout_ms);
}

/* ---------------------------------------------------------------------------------------
 * Status
 * --------------------------------------------------------------------------------------- */

/* Lists every segment into a fresh array (*out, freed by the caller); returns the count. */
static int
reader_list_segments(journal_reader_t *jr, journal_segment_info_t **out, stele_error_t *err)
{
    *out = NULL;
    for (;;) {
        int n = journal_reader_segments(jr, NULL, 0, err);
        if (n <= 0)
            return n;
        journal_segment_info_t *segs = calloc((size_t)n, sizeof *segs);
        if (!segs)
            return error_set_hinted(err, -ENOMEM, NULL, "could not list %d segments", n);
        int got = journal_reader_segments(jr, segs, (size_t)n, err);
        if (got >= 0 && got <= n) {
            *out = segs;
            return got;
        }
        free(segs);
        if (got < 0)
            return got;
        /* A segment appeared between the two calls: list again. */
    }
}

/* Scans from `start` (with an optional hint) to the visible end; *last_out stays put when
 * nothing is there. */
static int
reader_scan_to_end(journal_reader_t *jr, uint64_t start, const index_batch_t *hint,
                   uint64_t *last_out, stele_error_t *err)
{
    int rc =
        journal_reader_seek(jr, start, hint ? hint->segment_seq : 0, hint ? hint->offset : 0, err);
    if (rc && rc != STELE_ENOTFOUND)
        return rc;
    journal_record_t rec;
    while ((rc = journal_reader_next(jr, &rec, err)) == 0)
        *last_out = rec.seq;
    return rc == STELE_EAGAIN ? 0 : rc;
}

/* The last readable record: scanned from the index's newest batch start when the index
 * has one past the newest segment's start, else from that segment's start. An index ahead
 * of the segments (not yet caught up) finds nothing and falls back to the segment. */
static int
reader_find_last_seq(journal_reader_t *jr, index_t *ix, const journal_segment_info_t *segs,
                     int n_segs, uint64_t *last_out, stele_error_t *err)
{
    *last_out = 0;
    uint64_t start = 0;
    for (int i = n_segs - 1; i >= 0 && !start; i--)
        if (segs[i].first_ts_ns != 0)
            start = segs[i].first_seq;
    if (!start)
        return 0;
    index_batch_t b;
    if (ix && index_last_batch(ix, &b, NULL) == 0 && b.first_seq > start) {
        int rc = reader_scan_to_end(jr, b.first_seq, &b, last_out, err);
        if (rc || *last_out)
            return rc;
    }
    return reader_scan_to_end(jr, start, NULL, last_out, err);
}

/* Age in seconds of record `seq` (the oldest one a sink has not shipped), 0 when it cannot
 * be read (retention removed it, or it is not committed yet). */
static double
reader_record_age_s(journal_reader_t *jr, index_t *ix, uint64_t seq)
{
    index_batch_t b;
    int has_hint = ix && index_find_seq(ix, seq, &b, NULL) == 0;
    if (journal_reader_seek(jr, seq, has_hint ? b.segment_seq : 0, has_hint ? b.offset : 0, NULL) !=
        0)
        return 0.0;
    journal_record_t rec;
    while (journal_reader_next(jr, &rec, NULL) == 0) {
        if (rec.seq < seq)
            continue; /* the seek lands on a batch start at or before seq */
        if (rec.seq != seq)
            return 0.0;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
        return now_ns > rec.ts_ns ? (double)(now_ns - rec.ts_ns) / 1e9 : 0.0;
    }
    return 0.0;
}

static int
reader_name_in(char (*names)[64], size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

/* Sinks known from checkpoints, in name order, then those the writer published without one
 * yet (a sink that never shipped). Checkpoints outlive their sinks, so there may be more than
 * fit: the writer's own sinks always get a place, retired ones fill the rest. */
static size_t
reader_pick_sinks(index_t *ix, char (*names)[64], uint64_t *seqs)
{
    char live[STELE_MAX_SINKS][64];
    size_t n_live = published_get_sink_names(ix, live, STELE_MAX_SINKS);
    int n_all = ix ? index_list_checkpoints(ix, NULL, NULL, 0, NULL) : 0;
    char(*all_names)[64] = n_all > 0 ? calloc((size_t)n_all, sizeof *all_names) : NULL;
    uint64_t *all_seqs = n_all > 0 ? calloc((size_t)n_all, sizeof *all_seqs) : NULL;
    if (!all_names || !all_seqs ||
        index_list_checkpoints(ix, all_names, all_seqs, (size_t)n_all, NULL) < n_all)
        n_all = 0;
    size_t n = 0, retired_room = STELE_MAX_SINKS - n_live;
    for (int i = 0; i < n_all && n < STELE_MAX_SINKS; i++) {
        if (!reader_name_in(live, n_live, all_names[i])) {
            if (retired_room == 0)
                continue;
            retired_room--;
        }
        memcpy(names[n], all_names[i], sizeof names[n]);
        seqs[n++] = all_seqs[i];
    }
    for (size_t i = 0; i < n_live && n < STELE_MAX_SINKS; i++) {
        if (!reader_name_in(names, n, live[i])) {
            memcpy(names[n], live[i], sizeof names[n]);
            seqs[n++] = 0;
        }
    }
    free(all_names);
    free(all_seqs);
    return n;
}

/* The sinks status shows (reader_pick_sinks). Lag comes from the journal; counters from
 * what the writer published. */
static void
reader_status_sinks(journal_reader_t *jr, index_t *ix, stele_status_t *out)
{
    char names[STELE_MAX_SINKS][64];
    uint64_t seqs[STELE_MAX_SINKS];
    int n = (int)reader_pick_sinks(ix, names, seqs);
    out->n_sinks = (size_t)n;
    for (int i = 0; i < n; i++) {
        _Static_assert(sizeof out->sinks[i].name == sizeof names[i], "sink name sizes");
        memcpy(out->sinks[i].name, names[i], sizeof names[i]); /* NUL-terminated */
        out->sinks[i].shipped_seq = seqs[i];
        if (index_count_dead_letters(ix, names[i], &out->sinks[i].dead_letters, NULL) != 0)
            out->sinks[i].dead_letters = 0;
        if (out->committed_seq > seqs[i]) {
            out->sinks[i].lag_records = out->committed_seq - seqs[i];
            out->sinks[i].lag_seconds = reader_record_age_s(jr, ix, seqs[i] + 1);
        }
        published_get_sink(ix, out, (size_t)i);
    }
}

int
stele_status_read(const char *dir, stele_status_t *out, stele_error_t *err)
{
    if (!dir || !out)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_status_read: dir and out required");
    memset(out, 0, sizeof *out);
    journal_reader_t *jr = NULL;
    journal_segment_info_t *segs = NULL;
    int rc = journal_reader_open(dir, NULL, &jr, err);
    if (rc)
        return rc;
    index_t *ix = reader_open_index(dir, jr);
    journal_live_t live;
    journal_reader_live(jr, &live);
    snprintf(out->source, sizeof out->source, "%s", journal_reader_source(jr));
    out->format_version = journal_reader_format_version(jr);
    out->writer_pid = live.writer_pid;

    int n = reader_list_segments(jr, &segs, err);
    if (n < 0) {
        rc = n;
        goto done;
    }
    out->segments = (uint64_t)n;
    for (int i = 0; i < n; i++)
        out->disk_bytes += segs[i].disk_bytes;
    if (n > 0 && segs[0].first_ts_ns != 0)
        out->first_seq = segs[0].first_seq;
    rc = reader_find_last_seq(jr, ix, segs, n, &out->last_seq, err);
    if (rc)
        goto done;
    if (live.writer_pid) {
        if (live.visible_seq > out->last_seq)
            out->last_seq = live.visible_seq;
        out->committed_seq = live.visible_seq;
        out->durable_seq = live.durable_seq;
    } else {
        /* No writer: what is on disk was left by a closed (synced) or crashed writer; the
         * next writer's recovery keeps every complete batch, so all of it is committed. */
        out->committed_seq = out->last_seq;
        out->durable_seq = out->last_seq;
    }
    reader_status_sinks(jr, ix, out);
    published_get_settings(ix, out);
done:
    free(segs);
    index_close(ix);
    journal_reader_close(jr);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Index catch-up (called by the engine at open, with the journal's writer lock held)
 * --------------------------------------------------------------------------------------- */

/* Appends to a note, separating sentences with "; ". */
static void reader_note(char *note, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
reader_note(char *note, size_t cap, const char *fmt, ...)
{
    if (!note || cap == 0)
        return;
    size_t len = strnlen(note, cap);
    if (len + 3 >= cap)
        return;
    if (len) {
        memcpy(note + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + len, cap - len, fmt, ap);
    va_end(ap);
}

/* Does the index entry name the frame the journal has at that seq? */
static int
reader_entry_matches(journal_reader_t *jr, const index_batch_t *b, int *matches, stele_error_t *err)
{
    *matches = 0;
    int rc = journal_reader_seek(jr, b->first_seq, b->segment_seq, b->offset, err);
    if (rc == STELE_ENOTFOUND)
        return 0;
    if (rc)
        return rc;
    journal_record_t rec;
    rc = journal_reader_next(jr, &rec, err);
    if (rc == STELE_EAGAIN)
        return 0;
    if (rc)
        return rc;
    *matches = rec.seq == b->first_seq && rec.segment_seq == b->segment_seq &&
               rec.offset == b->offset && rec.ts_ns == b->first_ts_ns;
    return 0;
}

/*
 * Indexes every batch start after `from` (a known batch start, or 0 for the oldest record)
 * up to last_seq. *n_out counts the batches added.
 */
static int
reader_index_batches_after(index_t *ix, journal_reader_t *jr, uint64_t from, uint64_t last_seq,
                           uint64_t *n_out, stele_error_t *err)
{
    *n_out = 0;
    int rc = journal_reader_seek(jr, from, 0, 0, err);
    if (rc && rc != STELE_ENOTFOUND)
        return rc;
    index_batch_t pending[READER_CATCH_UP_CHUNK];
    size_t n_pending = 0;
    int is_start = 1; /* the first record read starts a batch: `from` is one, or the oldest */
    uint64_t seen_seq = from;
    journal_record_t rec;
    while ((rc = journal_reader_next(jr, &rec, err)) == 0) {
        if (is_start && rec.seq > from) {
            pending[n_pending++] = (index_batch_t){.first_seq = rec.seq,
                                                   .segment_seq = rec.segment_seq,
                                                   .offset = rec.offset,
                                                   .first_ts_ns = rec.ts_ns};
            if (n_pending == READER_CATCH_UP_CHUNK) {
                rc = index_put_batches(ix, pending, n_pending, err);
                if (rc)
                    return rc;
                *n_out += n_pending;
                n_pending = 0;
            }
        }
        is_start = rec.is_batch_end;
        seen_seq = rec.seq;
        if (rec.seq >= last_seq)
            break;
    }
    if (rc && rc != STELE_EAGAIN)
        return rc;
    /* Recovery found records up to last_seq; a reader that cannot see them would leave the
     * index silently short. */
    if (seen_seq < last_seq)
        return error_set_hinted(err, STELE_ECORRUPT, "run \"stele verify\" on the journal",
                                "index catch-up could read only to seq %" PRIu64 " of the %" PRIu64
                                " recovery found",
                                seen_seq, last_seq);
    rc = index_put_batches(ix, pending, n_pending, err);
    if (rc == 0)
        *n_out += n_pending;
    return rc;
}

/* Reports the marker index_open left when it replaced a corrupt index; 1 when there is one
 * (the catch-up removes it once the index is whole again). */
static int
reader_note_rebuilt(index_t *ix, char *note, size_t note_cap)
{
    char rebuilt[STELE_ERROR_MESSAGE_BYTES];
    size_t rebuilt_len = 0;
    if (index_get_meta(ix, "rebuilt", rebuilt, sizeof rebuilt - 1, &rebuilt_len, NULL) != 0)
        return 0;
    rebuilt[rebuilt_len < sizeof rebuilt ? rebuilt_len : sizeof rebuilt - 1] = '\0';
    reader_note(note, note_cap, "%s", rebuilt);
    return 1;
}

/* A journal without records: any entry the index still holds names nothing. */
static int
reader_empty_index(index_t *ix, char *note, size_t note_cap, stele_error_t *err)
{
    index_batch_t b;
    if (index_last_batch(ix, &b, NULL) != 0)
        return 0;
    int rc = index_clear_batches(ix, err);
    reader_note(note, note_cap, "index emptied: the journal has no records");
    return rc;
}

/* Drops entries the segments no longer hold: past the end recovery found (a torn tail it
 * truncated) and before the oldest segment (retention deleted it after the index saw it). */
static int
reader_trim_index(index_t *ix, const struct journal_recovery *rec, char *note, size_t note_cap,
                  stele_error_t *err)
{
    index_batch_t b;
    if (index_last_batch(ix, &b, NULL) == 0 && b.first_seq > rec->last_seq) {
        int rc = index_truncate_after(ix, rec->last_seq, err);
        if (rc)
            return rc;
        reader_note(note, note_cap,
                    "index entries after seq %" PRIu64 " dropped (the journal "
                    "ends there)",
                    rec->last_seq);
    }
    if (rec->first_seq > 1 && index_first_batch(ix, &b, NULL) == 0 && b.first_seq < rec->first_seq)
        return index_delete_before(ix, rec->first_seq, err);
    return 0;
}

/*
 * Where the scan for batch starts the index lacks begins: its last entry when the segments hold
 * that very frame (*from_out), else the oldest record, with the index emptied first
 * (*is_full): an entry that disagrees says the whole index may be wrong.
 */
static int
reader_catch_up_from(index_t *ix, journal_reader_t *jr, uint64_t *from_out, int *is_full,
                     char *note, size_t note_cap, stele_error_t *err)
{
    *from_out = 0;
    *is_full = 0;
    index_batch_t b;
    int rc = index_last_batch(ix, &b, NULL);
    if (rc == STELE_ENOTFOUND) {
        *is_full = 1;
        return 0;
    }
    if (rc)
        return rc;
    int matches = 0;
    rc = reader_entry_matches(jr, &b, &matches, err);
    if (rc)
        return rc;
    if (matches) {
        *from_out = b.first_seq;
        return 0;
    }
    reader_note(note, note_cap, "index disagreed with the segments at seq %" PRIu64, b.first_seq);
    *is_full = 1;
    return index_clear_batches(ix, err);
}

/* Brings the index of a journal with records in line with its segments. */
static int
reader_catch_up_batches(index_t *ix, journal_reader_t *jr, const struct journal_recovery *rec,
                        char *note, size_t note_cap, stele_error_t *err)
{
    uint64_t from = 0, n_added = 0;
    int is_full = 0;
    int rc = reader_trim_index(ix, rec, note, note_cap, err);
    if (rc == 0)
        rc = reader_catch_up_from(ix, jr, &from, &is_full, note, note_cap, err);
    if (rc == 0)
        rc = reader_index_batches_after(ix, jr, from, rec->last_seq, &n_added, err);
    if (rc)
        return rc;
    if (is_full)
        reader_note(note, note_cap, "index rebuilt from the segments (%" PRIu64 " batches)",
                    n_added);
    else if (n_added)
        reader_note(note, note_cap, "index caught up: %" PRIu64 " batches after seq %" PRIu64,
                    n_added, from);
    return 0;
}

/* Lowers every sink checkpoint past the journal's end to that end. With sync=interval or never
 * a sink may ship records that a machine crash then takes from the journal; recovery gives
 * their seqs to new records, which a sink keeping its checkpoint would skip and report
 * shipped. Lowered, the sink sends them, and the remote's stale copies stop it with an
 * integrity error instead. */
static int
reader_lower_checkpoints(index_t *ix, uint64_t last_seq, char *note, size_t note_cap,
                         stele_error_t *err)
{
    int n = index_list_checkpoints(ix, NULL, NULL, 0, err);
    if (n <= 0)
        return n;
    char(*names)[64] = calloc((size_t)n, sizeof *names);
    uint64_t *seqs = calloc((size_t)n, sizeof *seqs);
    int rc = names && seqs ? 0 : error_set(err, -ENOMEM, "index catch-up: out of memory");
    int n_listed = rc ? 0 : index_list_checkpoints(ix, names, seqs, (size_t)n, err);
    if (n_listed < 0)
        rc = n_listed;
    for (int i = 0; rc == 0 && i < n_listed && i < n; i++) {
        if (seqs[i] <= last_seq)
            continue;
        rc = index_put_checkpoint(ix, names[i], last_seq, err);
        reader_note(note, note_cap,
                    "checkpoint of sink %s lowered from seq %" PRIu64 " to %" PRIu64
                    " (the journal ends there)",
                    names[i], seqs[i], last_seq);
    }
    free(names);
    free(seqs);
    return rc;
}

int
stele_index_catch_up(index_t *ix, const char *dir, const journal_io_t *io,
                     const struct journal_recovery *rec, char *note, size_t note_cap,
                     stele_error_t *err)
{
    if (!ix || !dir || !rec)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_index_catch_up: bad arguments");
    if (note && note_cap)
        note[0] = '\0';
    int was_replaced = reader_note_rebuilt(ix, note, note_cap);
    journal_reader_t *jr = NULL;
    int rc = journal_reader_open(dir, io, &jr, err);
    if (rc)
        return rc;
    if (rec->last_seq == 0)
        rc = reader_empty_index(ix, note, note_cap, err);
    else
        rc = reader_catch_up_batches(ix, jr, rec, note, note_cap, err);
    if (rc == 0)
        rc = reader_lower_checkpoints(ix, rec->last_seq, note, note_cap, err);
    /* The marker goes only once the index is whole: a failed catch-up reports it again. */
    if (rc == 0 && was_replaced)
        rc = index_delete_meta(ix, "rebuilt", err);
    if (rc == 0)
        rc = index_sync(ix, err);
    journal_reader_close(jr);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Verify
 * --------------------------------------------------------------------------------------- */

typedef struct verify_state {
    journal_reader_t *jr;
    index_t *ix;
    chain_hasher_t *hasher;
    stele_verify_report_t *report;
    int have_prev;
    journal_record_t prev; /* payload pointer not kept */
    int prev_is_batch_end;
    int have_index_next;
    index_batch_t index_next; /* the next index entry the walk must meet */
    uint64_t start_seq;       /* where the walk began (0 = the oldest record) */
} verify_state_t;

static void
verify_segment_name(char *buf, size_t cap, uint64_t segment_seq)
{
    char name[SEG_NAME_BYTES];
    segment_name(name, segment_seq);
    snprintf(buf, cap, "%s", name);
}

static int verify_bad(verify_state_t *v, uint64_t seq, uint64_t segment_seq, uint64_t offset,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int
verify_bad(verify_state_t *v, uint64_t seq, uint64_t segment_seq, uint64_t offset, const char *fmt,
           ...)
{
    stele_verify_report_t *rep = v->report;
    rep->bad_seq = seq;
    verify_segment_name(rep->bad_segment, sizeof rep->bad_segment, segment_seq);
    rep->bad_offset = offset;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->what, sizeof rep->what, fmt, ap);
    va_end(ap);
    return STELE_ECORRUPT;
}

/* The record's chain hash recomputed from its contents (journal/chain.h, FORMAT.md). */
static int
verify_hash(chain_hasher_t *hasher, const journal_record_t *rec, uint8_t out[HASH_BYTES])
{
    return chain_hash(hasher, rec->prev_hash, rec->seq, rec->ts_ns, rec->payload, rec->payload_len,
                      out);
}

/* Checks a record against the one the walk read before it: the next seq, no earlier time,
 * and the chain link. */
static int
verify_follows_prev(verify_state_t *v, const journal_record_t *rec)
{
    const journal_record_t *p = &v->prev;
    if (!v->have_prev)
        return 0;
    if (rec->seq != p->seq + 1)
        return verify_bad(v, p->seq + 1, rec->segment_seq, rec->offset,
                          "expected seq %" PRIu64 " after seq %" PRIu64 ", found %" PRIu64,
                          p->seq + 1, p->seq, rec->seq);
    if (rec->ts_ns < p->ts_ns)
        return verify_bad(v, rec->seq, rec->segment_seq, rec->offset,
                          "timestamp %" PRId64 " is before the previous record's %" PRId64,
                          rec->ts_ns, p->ts_ns);
    if (memcmp(rec->prev_hash, p->hash, HASH_BYTES) != 0)
        return verify_bad(v, rec->seq, rec->segment_seq, rec->offset,
                          "chain broken: previous hash does not match seq %" PRIu64 "'s hash",
                          p->seq);
    return 0;
}

/* Checks a record's chain hash against its contents. */
static int
verify_own_hash(verify_state_t *v, const journal_record_t *rec, stele_error_t *err)
{
    /* The journal gives an all-zero prev_hash when it could not read the record before
     * (a hinted seek); the chain is then checked from the next record on. */
    static const uint8_t unknown[HASH_BYTES];
    int is_anchored = v->have_prev || memcmp(rec->prev_hash, unknown, HASH_BYTES) != 0;
    uint8_t hash[HASH_BYTES];
    if (!is_anchored)
        memcpy(hash, rec->hash, HASH_BYTES);
    else if (verify_hash(v->hasher, rec, hash) != 0)
        return error_set_hinted(err, -EIO, NULL, "could not compute SHA-256 (OpenSSL)");
    if (memcmp(hash, rec->hash, HASH_BYTES) != 0)
        return verify_bad(v, rec->seq, rec->segment_seq, rec->offset,
                          "chain hash does not match the record's contents");
    return 0;
}

/* Checks a record against the index entry the walk must meet next, once it is reached, and
 * moves on to the entry after. */
static int
verify_index_entry(verify_state_t *v, const journal_record_t *rec)
{
    const index_batch_t *b = &v->index_next;
    if (!v->have_index_next || b->first_seq > rec->seq)
        return 0;
    /* The walk meets every seq in order, so an entry below this one names a seq the
     * segments do not hold. */
    if (b->first_seq < rec->seq)
        return verify_bad(v, b->first_seq, b->segment_seq, b->offset,
                          "index names seq %" PRIu64 " which the segments do not hold",
                          b->first_seq);
    if (b->segment_seq != rec->segment_seq || b->offset != rec->offset)
        return verify_bad(v, rec->seq, b->segment_seq, b->offset,
                          "index puts seq %" PRIu64 " at offset %" PRIu64 " of segment %" PRIu64
                          " but it is at offset %" PRIu64 " of segment %" PRIu64,
                          rec->seq, b->offset, b->segment_seq, rec->offset, rec->segment_seq);
    if (b->first_ts_ns != rec->ts_ns)
        return verify_bad(v, rec->seq, rec->segment_seq, rec->offset,
                          "index gives seq %" PRIu64 " timestamp %" PRId64
                          " but the record has %" PRId64,
                          rec->seq, b->first_ts_ns, rec->ts_ns);
    if (v->have_prev && !v->prev_is_batch_end)
        return verify_bad(v, rec->seq, rec->segment_seq, rec->offset,
                          "index says a batch starts at seq %" PRIu64
                          " but the record before it does not end a batch",
                          rec->seq);
    v->have_index_next = index_find_next(v->ix, rec->seq + 1, &v->index_next, NULL) == 0;
    return 0;
}

/* Checks one record against the one before it, its own hash and the index; a good one
 * becomes the anchor for the next and joins the report's range. */
static int
verify_record(verify_state_t *v, const journal_record_t *rec, stele_error_t *err)
{
    int rc = verify_follows_prev(v, rec);
    if (rc == 0)
        rc = verify_own_hash(v, rec, err);
    if (rc == 0)
        rc = verify_index_entry(v, rec);
    if (rc)
        return rc;
    v->prev = *rec;
    v->prev.payload = NULL;
    v->prev_is_batch_end = rec->is_batch_end;
    v->have_prev = 1;
    v->report->records_checked++;
    if (!v->report->first_seq)
        v->report->first_seq = rec->seq;
    v->report->last_seq = rec->seq;
    return 0;
}

/* One frame read straight from a segment file, for pinpointing. */
typedef struct verify_frame {
    uint8_t *buf;
    size_t cap;
    record_status_t status;
    record_view_t view;
} verify_frame_t;

static int
verify_read_frame(const journal_io_t *io, int fd, uint64_t off, uint64_t file_bytes,
                  verify_frame_t *f)
{
    uint64_t room = off < file_bytes ? file_bytes - off : 0;
    uint64_t want = FRAME_HEADER_BYTES;
    for (int pass = 0; pass < 2; pass++) {
        if (want > room)
            want = room;
        if (want > f->cap) {
            uint8_t *grown = realloc(f->buf, want);
            if (!grown)
                return -ENOMEM;
            f->buf = grown;
            f->cap = want;
        }
        ssize_t got = want ? io->pread(io->ctx, fd, f->buf, want, (off_t)off) : 0;
        if (got < 0)
            return (int)got;
        f->status = record_decode(f->buf, (size_t)got, room, off, &f->view);
        if (f->status != RECORD_NEED_MORE)
            return 0;
        uint64_t len = format_load_u32(f->buf + FRAME_OFF_PAYLOAD_LEN);
        want = format_frame_bytes(len);
    }
    f->status = RECORD_TORN;
    return 0;
}

/* Bytes past a bad frame searched for a later valid frame (bounded: the search reads them
 * into memory). A torn tail is at most one batch, and a batch is at most a few records. */
#define VERIFY_LATER_WINDOW_BYTES (4u << 20)

/*
 * Is there a valid frame with a seq after `seq` somewhere past `off`? A torn tail is the
 * end of the log; a damaged frame with intact records after it is not a tail, it is damage
 * (or a deletion) in the middle.
 */
static int
verify_later_frame(const journal_io_t *io, int fd, uint64_t off, uint64_t file_bytes, uint64_t seq)
{
    uint64_t len = file_bytes > off ? file_bytes - off : 0;
    if (len > VERIFY_LATER_WINDOW_BYTES)
        len = VERIFY_LATER_WINDOW_BYTES;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return 0;
    ssize_t got = io->pread(io->ctx, fd, buf, len, (off_t)off);
    int is_found = 0;
    for (uint64_t at = FRAME_ALIGN;
         got > 0 && at + FRAME_HEADER_BYTES <= (uint64_t)got && !is_found; at += FRAME_ALIGN) {
        if (format_load_u32(buf + at) != FRAME_MAGIC)
            continue;
        record_view_t view;
        record_status_t st = record_decode(buf + at, (size_t)((uint64_t)got - at),
                                           file_bytes - off - at, off + at, &view);
        is_found = st == RECORD_VALID && view.seq > seq;
    }
    free(buf);
    return is_found;
}

/* Where the frame after the last good record starts (0, 0 before any). */
static void
verify_after_prev(const verify_state_t *v, uint64_t *segment_seq, uint64_t *offset)
{
    *segment_seq = v->have_prev ? v->prev.segment_seq : 0;
    *offset = v->have_prev ? v->prev.offset + journal_frame_bytes(v->prev.payload_len) : 0;
}

/* Pinpointing's walk over the frames of at most two segment files. */
typedef struct verify_cursor {
    const journal_io_t *io;
    const char *dir;
    int need_later_frame;        /* a bad frame counts only if a valid one follows it */
    stele_verify_report_t saved; /* the report to restore when a bad frame does not count */
    uint64_t seq;                /* the seq the next frame must have */
    uint64_t segment_seq;
    uint64_t offset; /* of the next frame; at most SEG_HEADER_BYTES: read the header first */
    uint8_t prev_hash[HASH_BYTES];
    int have_hash;
    int fd; /* the open segment file */
    uint64_t file_bytes;
    verify_frame_t frame; /* the last frame read; kept across segments */
} verify_cursor_t;

/* Starts just past the last good record or, when the walk read none, at the start of the
 * segment holding the walk's first seq. Returns 0 when there is no segment to walk. */
static int
verify_cursor_init(verify_state_t *v, const char *dir, int need_later_frame, verify_cursor_t *c)
{
    memset(c, 0, sizeof *c);
    c->io = journal_io_posix();
    c->dir = dir;
    c->need_later_frame = need_later_frame;
    c->saved = *v->report;
    c->fd = -1;
    if (v->have_prev) {
        c->seq = v->prev.seq + 1;
        verify_after_prev(v, &c->segment_seq, &c->offset);
        memcpy(c->prev_hash, v->prev.hash, HASH_BYTES);
        c->have_hash = 1;
        return 1;
    }
    journal_segment_info_t *segs = NULL;
    int n = reader_list_segments(v->jr, &segs, NULL);
    for (int i = 0; i < n; i++)
        if (segs[i].first_seq <= (v->start_seq ? v->start_seq : 1) || i == 0)
            c->segment_seq = segs[i].first_seq;
    free(segs);
    if (n <= 0)
        return 0;
    c->seq = c->segment_seq;
    c->offset = SEG_HEADER_BYTES;
    return 1;
}

/* Checks the header of the segment the cursor enters, whose previous hash then anchors the
 * chain. Returns 1 when it is bad (recorded in the report). */
static int
verify_pinpoint_header(verify_state_t *v, verify_cursor_t *c)
{
    segment_header_t h;
    segment_header_fault_t fault = {.why = "unreadable"};
    if (segment_header_read(c->io, c->fd, &h, &fault) != 0) {
        verify_bad(v, c->segment_seq, c->segment_seq, fault.offset, "segment header: %s",
                   fault.why);
        return 1;
    }
    if (c->have_hash && memcmp(h.prev_hash, c->prev_hash, HASH_BYTES) != 0) {
        verify_bad(v, c->segment_seq, c->segment_seq, 0,
                   "segment header's previous hash breaks the chain");
        return 1;
    }
    memcpy(c->prev_hash, h.prev_hash, HASH_BYTES);
    c->have_hash = 1;
    c->offset = SEG_HEADER_BYTES;
    return 0;
}

/* Does the valid frame just read fail to hash, from the chain so far, to the hash it holds?
 * A hash that cannot be computed proves nothing, so it is no break. */
static int
verify_frame_breaks_chain(verify_state_t *v, const verify_cursor_t *c)
{
    const record_view_t *fv = &c->frame.view;
    uint8_t calc[HASH_BYTES];
    journal_record_t jr = {
        .seq = fv->seq, .ts_ns = fv->ts_ns, .payload = fv->payload, .payload_len = fv->payload_len};
    memcpy(jr.prev_hash, c->prev_hash, HASH_BYTES);
    return verify_hash(v->hasher, &jr, calc) == 0 && memcmp(calc, fv->hash, HASH_BYTES) != 0;
}

/* Checks the frame just read: decodable, the seq due, and chained to the one before.
 * Returns 1 when it is bad (recorded in the report). */
static int
verify_pinpoint_frame(verify_state_t *v, const verify_cursor_t *c)
{
    const verify_frame_t *f = &c->frame;
    if (f->status != RECORD_VALID)
        verify_bad(v, c->seq, c->segment_seq, c->offset, "frame: %s",
                   record_status_name(f->status));
    else if (f->view.seq != c->seq)
        verify_bad(v, c->seq, c->segment_seq, c->offset,
                   "seq %" PRIu64 " where %" PRIu64 " was due", f->view.seq, c->seq);
    else if (c->have_hash && verify_frame_breaks_chain(v, c))
        verify_bad(v, c->seq, c->segment_seq, c->offset, "chain hash does not match the record");
    else
        return 0;
    return 1;
}

/* Walks the open segment's frames from the cursor to the end of the batch or of the
 * segment's frames. Returns 1 when one is bad (recorded in the report). */
static int
verify_pinpoint_frames(verify_state_t *v, verify_cursor_t *c)
{
    const verify_frame_t *f = &c->frame;
    for (;;) {
        if (verify_read_frame(c->io, c->fd, c->offset, c->file_bytes, &c->frame) != 0)
            return 0;
        if (f->status == RECORD_ZERO)
            return 0; /* end of this segment's frames: the batch may be in the next */
        int is_bad = verify_pinpoint_frame(v, c);
        if (is_bad && c->need_later_frame &&
            !verify_later_frame(c->io, c->fd, c->offset, c->file_bytes, c->seq)) {
            /* Nothing intact follows: a torn tail, which the next writer truncates. */
            *v->report = c->saved;
            return 0;
        }
        if (is_bad || (f->status == RECORD_VALID && (f->view.flags & FRAME_FLAG_BATCH_END)))
            return is_bad;
        memcpy(c->prev_hash, f->view.hash, HASH_BYTES);
        c->offset += f->view.frame_bytes;
        c->seq++;
    }
}

/* How pinpointing in one segment ended. */
typedef enum verify_scan_end {
    VERIFY_SCAN_FOUND, /* a bad frame, recorded in the report */
    VERIFY_SCAN_STOP,  /* nothing more precise to find */
    VERIFY_SCAN_NEXT,  /* the segment's frames ended mid-batch: go on in the next segment */
} verify_scan_end_t;

/* Pinpoints within the segment the cursor names. */
static verify_scan_end_t
verify_pinpoint_segment(verify_state_t *v, verify_cursor_t *c)
{
    const journal_io_t *io = c->io;
    char path[4096];
    off_t size = 0;
    if (segment_path(path, sizeof path, c->dir, c->segment_seq) != 0)
        return VERIFY_SCAN_STOP;
    c->fd = io->open_file(io->ctx, path, JOURNAL_IO_READ, 0);
    if (c->fd < 0)
        return VERIFY_SCAN_STOP;
    verify_scan_end_t end = VERIFY_SCAN_STOP;
    if (io->file_size(io->ctx, c->fd, &size) == 0) {
        c->file_bytes = (uint64_t)size;
        if ((c->offset <= SEG_HEADER_BYTES && verify_pinpoint_header(v, c)) ||
            verify_pinpoint_frames(v, c))
            end = VERIFY_SCAN_FOUND;
        else if (c->frame.status == RECORD_ZERO && c->offset > SEG_HEADER_BYTES)
            end = VERIFY_SCAN_NEXT;
    }
    io->close(io->ctx, c->fd);
    c->fd = -1;
    return end;
}

/*
 * The journal reads a batch as a unit and names the batch when any frame of it is bad.
 * This walks the frames themselves from the last good record (or the walk's start) to find
 * the first one that fails: its seq, segment and offset are what an operator needs.
 * The bad frame follows the last good record in its segment, or starts the next segment
 * when that record ended its own: two segments at most.
 * Returns 1 with the failure recorded in the report, 0 when nothing more precise was found.
 */
static int
verify_pinpoint(verify_state_t *v, const char *dir, int need_later_frame)
{
    verify_cursor_t c;
    if (!verify_cursor_init(v, dir, need_later_frame, &c))
        return 0;
    verify_scan_end_t end = verify_pinpoint_segment(v, &c);
    if (end == VERIFY_SCAN_NEXT) {
        c.segment_seq = c.seq; /* the next segment is named by the seq it should start with */
        c.offset = 0;
        end = verify_pinpoint_segment(v, &c);
    }
    free(c.frame.buf);
    return end == VERIFY_SCAN_FOUND;
}

/* A read error from the journal: corruption is a verification failure, pinpointed to the
 * frame when possible; anything else means verify could not check. */
static int
verify_read_failed(verify_state_t *v, const char *dir, int rc, stele_error_t *jerr,
                   stele_error_t *err)
{
    if (rc != STELE_ECORRUPT) {
        if (err)
            *err = *jerr;
        return rc;
    }
    if (verify_pinpoint(v, dir, 0))
        return STELE_ECORRUPT;
    uint64_t seq = v->have_prev ? v->prev.seq + 1 : v->start_seq + 1;
    uint64_t segment_seq, offset;
    verify_after_prev(v, &segment_seq, &offset);
    return verify_bad(v, seq, segment_seq, offset, "%s", jerr->message);
}

/* Reads from the record before from_seq (it anchors the chain) to to_seq or the end of the
 * journal, checking each record; *is_at_to says the walk reached to_seq. */
static int
verify_read_range(verify_state_t *v, const char *dir, uint64_t from_seq, uint64_t to_seq,
                  int *is_at_to, stele_error_t *err)
{
    stele_error_t jerr = {0};
    *is_at_to = 0;
    uint64_t start = from_seq > 1 ? from_seq - 1 : 0;
    v->start_seq = start;
    int rc = journal_reader_seek(v->jr, start, 0, 0, &jerr);
    if (rc && rc != STELE_ENOTFOUND)
        return verify_read_failed(v, dir, rc, &jerr, err);
    if (v->ix)
        v->have_index_next = index_find_next(v->ix, start, &v->index_next, NULL) == 0;
    journal_record_t rec;
    while ((rc = journal_reader_next(v->jr, &rec, &jerr)) == 0) {
        rc = verify_record(v, &rec, err);
        if (rc)
            return rc;
        if (to_seq && rec.seq >= to_seq) {
            *is_at_to = 1;
            return 0;
        }
    }
    if (rc != STELE_EAGAIN)
        return verify_read_failed(v, dir, rc, &jerr, err);
    return 0;
}

/* A walk that starts past the end checked nothing, so the last seq it checked is no end to
 * name: the message gives the journal's own, as `stele status` finds it. */
static int
verify_past_the_end(const char *dir, uint64_t from_seq, uint64_t last, stele_error_t *err)
{
    stele_status_t *st = calloc(1, sizeof *st);
    if (st && stele_status_read(dir, st, NULL) == 0 && st->last_seq > last)
        last = st->last_seq;
    free(st);
    return error_set_hinted(err, STELE_ENOTFOUND, NULL,
                            "seq %" PRIu64 " is past the end of the journal (last %" PRIu64 ")",
                            from_seq, last);
}

/*
 * Judges where a walk that did not reach to_seq ended. The index is updated after a batch
 * is written, so with a live writer it may name a batch the walk stopped short of; with
 * none, an entry past the end means records are missing from the segments. A durable seq
 * read before the walk (durable_before) is evidence with or without a writer: durable
 * records are never taken back.
 */
static int
verify_walk_end(verify_state_t *v, const char *dir, uint64_t from_seq, uint64_t to_seq,
                uint64_t durable_before, stele_error_t *err)
{
    journal_live_t live;
    journal_reader_live(v->jr, &live);
    uint64_t last = v->report->last_seq;
    int is_durable_ahead = durable_before > last && (!to_seq || durable_before <= to_seq);
    int is_index_ahead =
        v->have_index_next && !live.writer_pid && (!to_seq || v->index_next.first_seq <= to_seq);
    /* The reader treats damage in the newest segment as a torn tail (the end of the log).
     * With evidence that records are missing, any bad frame there is the culprit; without,
     * only one that intact records follow. */
    if (!live.writer_pid || is_durable_ahead || is_index_ahead) {
        if (verify_pinpoint(v, dir, !(is_durable_ahead || is_index_ahead)))
            return STELE_ECORRUPT;
    }
    uint64_t segment_seq, offset;
    verify_after_prev(v, &segment_seq, &offset);
    if (is_durable_ahead)
        return verify_bad(v, last + 1, segment_seq, offset,
                          "the journal's state records seq %" PRIu64
                          " as durable but the segments end at seq %" PRIu64
                          ": records are missing",
                          durable_before, last);
    if (is_index_ahead)
        return verify_bad(v, v->index_next.first_seq, v->index_next.segment_seq,
                          v->index_next.offset,
                          "index names seq %" PRIu64 " past the end of the journal (last %" PRIu64
                          "): records are missing",
                          v->index_next.first_seq, last);
    if (from_seq && last < from_seq)
        return verify_past_the_end(dir, from_seq, last, err);
    return 0;
}

/* Walks [from, to]; the record before `from` is checked too, to anchor the chain. */
static int
verify_walk(verify_state_t *v, const char *dir, uint64_t from_seq, uint64_t to_seq,
            stele_error_t *err)
{
    /* Read before the walk: a live writer only moves it forward, so a walk that ends short
     * of it has lost records, whatever the writer does meanwhile. */
    journal_live_t live_before;
    journal_reader_live(v->jr, &live_before);
    int is_at_to = 0;
    int rc = verify_read_range(v, dir, from_seq, to_seq, &is_at_to, err);
    if (rc || is_at_to)
        return rc;
    return verify_walk_end(v, dir, from_seq, to_seq, live_before.durable_seq, err);
}

/* journal_reader_open refused the journal. Opening decodes the oldest segment's header (to
 * learn the journal's genesis); when that header is what failed, the report says where. */
static void
verify_oldest_header(verify_state_t *v, const char *dir)
{
    segment_dir_t d;
    if (segment_dir_list(dir, &d) != 0)
        return;
    verify_cursor_t c = {.io = journal_io_posix(), .dir = dir, .fd = -1};
    char path[4096];
    if (d.n > 0 && segment_path(path, sizeof path, dir, d.seqs[0]) == 0) {
        c.segment_seq = d.seqs[0];
        c.fd = c.io->open_file(c.io->ctx, path, JOURNAL_IO_READ, 0);
    }
    segment_dir_free(&d);
    if (c.fd < 0)
        return;
    verify_pinpoint_header(v, &c);
    c.io->close(c.io->ctx, c.fd);
}

int
stele_verify(const char *dir, uint64_t from_seq, uint64_t to_seq, stele_verify_report_t *report,
             stele_error_t *err)
{
    if (!dir || !report)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_verify: dir and report required");
    if (to_seq && from_seq > to_seq)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "verify range is empty: from %" PRIu64 " is after to %" PRIu64,
                                from_seq, to_seq);
    memset(report, 0, sizeof *report);
    verify_state_t v = {.report = report};
    int rc = journal_reader_open(dir, NULL, &v.jr, err);
    if (rc == STELE_ECORRUPT)
        verify_oldest_header(&v, dir);
    if (rc)
        goto done;
    v.ix = reader_open_index(dir, v.jr);
    v.hasher = chain_hasher_new();
    if (!v.hasher) {
        rc = error_set_hinted(err, -ENOMEM, NULL, "could not allocate a SHA-256 context");
        goto done;
    }
    rc = verify_walk(&v, dir, from_seq, to_seq, err);
done:
    if (rc == STELE_ECORRUPT && report->bad_seq)
        error_set_hinted(err, rc, "back up the journal directory before repairing anything",
                         "verification failed at seq %" PRIu64 " (%s, offset %" PRIu64 "): %s",
                         report->bad_seq, report->bad_segment, report->bad_offset, report->what);
    /* The anchor record before from_seq is checked but not reported as in range. */
    if (from_seq > 1 && report->first_seq == from_seq - 1 && report->records_checked) {
        report->records_checked--;
        report->first_seq = from_seq;
    }
    chain_hasher_free(v.hasher);
    index_close(v.ix);
    journal_reader_close(v.jr);
    return rc;
}
