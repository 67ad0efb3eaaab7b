/*
 * status.c: stele_status_read(), what `stele status` shows, read from any process without
 * opening the journal for writing: the journal's extent and positions (from the segments and
 * the writer's shared positions), each sink's checkpoint, lag and dead letters (from the
 * index and the journal), and what the writer published in the index (status_publish.h).
 *
 * It never writes. Without a usable index (read_side_open_index: none, unreadable, or this
 * process writes the journal) the end of the journal is found by scanning the newest
 * segment from its start, and the sinks and the writer's settings, which live only in the
 * index, are left out.
 *
 * Threads: each call uses only its own short-lived journal reader and index handle; no lock.
 */
#include "stele.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "index.h"
#include "journal.h"
#include "read_side.h"
#include "status_publish.h"

/* The newest record a scan met: its seq, time, and where its frame ends in its segment. */
typedef struct status_tail {
    uint64_t seq; /* 0: none */
    int64_t ts_ns;
    uint64_t end_offset;
} status_tail_t;

/* Scans from `start` (with an optional hint) to the visible end; *tail stays put when
 * nothing is there. */
static int
status_scan_to_end(journal_reader_t *jr, uint64_t start, const index_batch_t *hint,
                   status_tail_t *tail, stele_error_t *err)
{
    int rc =
        journal_reader_seek(jr, start, hint ? hint->segment_seq : 0, hint ? hint->offset : 0, err);
    if (rc && rc != STELE_ENOTFOUND)
        return rc;
    journal_record_t rec;
    while ((rc = journal_reader_next(jr, &rec, err)) == 0) {
        tail->seq = rec.seq;
        tail->ts_ns = rec.ts_ns;
        tail->end_offset = rec.offset + journal_frame_bytes(rec.version, rec.payload_len);
    }
    return rc == STELE_EAGAIN ? 0 : rc;
}

/* The last readable record: scanned from the index's newest batch start when the index
 * has one past the newest segment's start, else from that segment's start. An index ahead
 * of the segments (not yet caught up) finds nothing and falls back to the segment. */
static int
status_find_last_seq(journal_reader_t *jr, index_t *ix, const journal_segment_info_t *segs,
                     int n_segs, status_tail_t *last_out, stele_error_t *err)
{
    memset(last_out, 0, sizeof *last_out);
    uint64_t start = 0;
    for (int i = n_segs - 1; i >= 0 && !start; i--)
        if (segs[i].first_ts_ns != 0)
            start = segs[i].first_seq;
    if (!start)
        return 0;
    index_batch_t b;
    if (ix && index_last_batch(ix, &b, NULL) == 0 && b.first_seq > start) {
        int rc = status_scan_to_end(jr, b.first_seq, &b, last_out, err);
        if (rc || last_out->seq)
            return rc;
    }
    return status_scan_to_end(jr, start, NULL, last_out, err);
}

/* Where the frame of record `seq` ends in its segment, 0 when it cannot be read (retention
 * removed it). The index's batch start (the monitor snapshot keeps each segment's last one)
 * makes this one batch's read; without it the reader scans the segment. */
static uint64_t
status_record_end(journal_reader_t *jr, index_t *ix, uint64_t seq)
{
    index_batch_t b;
    int has_hint = ix && index_find_seq(ix, seq, &b, NULL) == 0;
    if (journal_reader_seek(jr, seq, has_hint ? b.segment_seq : 0, has_hint ? b.offset : 0, NULL) !=
        0)
        return 0;
    journal_record_t rec;
    while (journal_reader_next(jr, &rec, NULL) == 0) {
        if (rec.seq == seq)
            return rec.offset + journal_frame_bytes(rec.version, rec.payload_len);
        if (rec.seq > seq)
            break;
    }
    return 0;
}

/* Bytes the records take in the segments (headers included, preallocated room not): each
 * sealed segment up to its last record's end, the newest up to the newest record's. */
static uint64_t
status_used_bytes(journal_reader_t *jr, index_t *ix, const journal_segment_info_t *segs, int n_segs,
                  const status_tail_t *tail)
{
    uint64_t used = 0;
    for (int i = 0; i + 1 < n_segs; i++) {
        if (segs[i].first_ts_ns != 0 && segs[i + 1].first_seq > segs[i].first_seq)
            used += status_record_end(jr, ix, segs[i + 1].first_seq - 1);
    }
    return used + (tail->seq ? tail->end_offset : 0);
}

/* Age in seconds of record `seq` (the oldest one a sink has not shipped), 0 when it cannot
 * be read (retention removed it, or it is not committed yet). */
static double
status_record_age_s(journal_reader_t *jr, index_t *ix, uint64_t seq)
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
        int64_t now_ns = clock_wall_ns();
        return now_ns > rec.ts_ns ? (double)(now_ns - rec.ts_ns) / 1e9 : 0.0;
    }
    return 0.0;
}

static int
status_name_in(char (*names)[64], size_t n, const char *name)
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
status_pick_sinks(index_t *ix, char (*names)[64], uint64_t *seqs)
{
    char live[STELE_MAX_SINKS][64];
    size_t n_live = status_publish_get_sink_names(ix, live, STELE_MAX_SINKS);
    int n_all = ix ? index_list_checkpoints(ix, NULL, NULL, 0, NULL) : 0;
    char(*all_names)[64] = n_all > 0 ? calloc((size_t)n_all, sizeof *all_names) : NULL;
    uint64_t *all_seqs = n_all > 0 ? calloc((size_t)n_all, sizeof *all_seqs) : NULL;
    if (!all_names || !all_seqs ||
        index_list_checkpoints(ix, all_names, all_seqs, (size_t)n_all, NULL) < n_all)
        n_all = 0;
    size_t n = 0, retired_room = STELE_MAX_SINKS - n_live;
    for (int i = 0; i < n_all && n < STELE_MAX_SINKS; i++) {
        if (!status_name_in(live, n_live, all_names[i])) {
            if (retired_room == 0)
                continue;
            retired_room--;
        }
        memcpy(names[n], all_names[i], sizeof names[n]);
        seqs[n++] = all_seqs[i];
    }
    for (size_t i = 0; i < n_live && n < STELE_MAX_SINKS; i++) {
        if (!status_name_in(names, n, live[i])) {
            memcpy(names[n], live[i], sizeof names[n]);
            seqs[n++] = 0;
        }
    }
    free(all_names);
    free(all_seqs);
    return n;
}

/* The sinks status shows (status_pick_sinks). Lag comes from the journal; counters from
 * what the writer published. */
static void
status_fill_sinks(journal_reader_t *jr, index_t *ix, stele_status_t *out)
{
    char names[STELE_MAX_SINKS][64];
    uint64_t seqs[STELE_MAX_SINKS];
    int n = (int)status_pick_sinks(ix, names, seqs);
    out->n_sinks = (size_t)n;
    for (int i = 0; i < n; i++) {
        _Static_assert(sizeof out->sinks[i].name == sizeof names[i], "sink name sizes");
        memcpy(out->sinks[i].name, names[i], sizeof names[i]); /* NUL-terminated */
        out->sinks[i].shipped_seq = seqs[i];
        uint64_t seq;
        if (index_get_checkpoint_at(ix, names[i], &seq, out->sinks[i].destination,
                                    sizeof out->sinks[i].destination, NULL) != 0)
            out->sinks[i].destination[0] = '\0';
        if (index_count_dead_letters(ix, names[i], &out->sinks[i].dead_letters, NULL) != 0)
            out->sinks[i].dead_letters = 0;
        if (out->committed_seq > seqs[i]) {
            out->sinks[i].lag_records = out->committed_seq - seqs[i];
            out->sinks[i].lag_seconds = status_record_age_s(jr, ix, seqs[i] + 1);
        }
        status_publish_get_sink(ix, out, (size_t)i);
    }
}

int
stele_status_read(const char *dir, stele_status_t *out, stele_error_t *err)
{
    return stele_status_read_opts(dir, NULL, out, err);
}

int
stele_status_read_opts(const char *dir, const stele_options_t *opts, stele_status_t *out,
                       stele_error_t *err)
{
    if (!dir || !out)
        return error_set_hinted(err, STELE_EINVAL, NULL, "stele_status_read: dir and out required");
    memset(out, 0, sizeof *out);
    journal_reader_t *jr = NULL;
    journal_segment_info_t *segs = NULL;
    int rc = read_side_open_journal(dir, opts, &jr, err);
    if (rc)
        return rc;
    index_t *ix = read_side_open_index_or_snapshot(dir, jr);
    journal_live_t live;
    journal_reader_live(jr, &live);
    snprintf(out->source, sizeof out->source, "%s", journal_reader_source(jr));
    out->format_version = journal_reader_format_version(jr);
    out->writer_pid = live.writer_pid;

    int n = read_side_list_segments(jr, &segs, err);
    if (n < 0) {
        rc = n;
        goto done;
    }
    out->segments = (uint64_t)n;
    for (int i = 0; i < n; i++)
        out->disk_bytes += segs[i].disk_bytes;
    if (n > 0 && segs[0].first_ts_ns != 0)
        out->first_seq = segs[0].first_seq;
    status_tail_t tail;
    rc = status_find_last_seq(jr, ix, segs, n, &tail, err);
    if (rc)
        goto done;
    out->last_seq = tail.seq;
    out->newest_ts_ns = tail.ts_ns;
    out->used_bytes = status_used_bytes(jr, ix, segs, n, &tail);
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
    status_fill_sinks(jr, ix, out);
    status_publish_get_settings(ix, out);
done:
    free(segs);
    index_close(ix);
    journal_reader_close(jr);
    return rc;
}
