/*
 * tail.h: what the files of `stele tail` share: the query the command line asks for, the
 * tailer that runs it, and the output side. cmd_tail.c reads the command line and runs the
 * forward read (history, then -f); tail_reverse.c runs -r (newest first); tail_lines.c
 * formats and writes the lines and keeps the ring of lines they both use. Internal to cli/.
 */
#ifndef STELE_CLI_TAIL_H
#define STELE_CLI_TAIL_H

#include <signal.h>
#include <stdint.h>

#include "mongo_args.h"

#define TAIL_ALL (-1)

typedef enum tail_output {
    TAIL_OUTPUT_JSON,  /* the record line of stele_record_to_json() */
    TAIL_OUTPUT_SHORT, /* the human line of stele_record_to_short() */
    TAIL_OUTPUT_CAT,   /* the event alone, stele_event_to_json() */
} tail_output_t;

typedef struct tail_query {
    cli_mongo_t mongo;  /* mongo.sink.uri set: read the remote copy */
    const char *source; /* --source, for --mongo; NULL: the journal's */
    int64_t n_last;     /* TAIL_ALL or a count */
    int is_n_given;
    int follow;
    int reverse;
    tail_output_t output;
    uint64_t from_seq; /* 0: not given */
    int has_since, has_until;
    int64_t since_ns, until_ns;
    stele_filter_t *where; /* the --where conditions; NULL when none was given */
    int skip_retained;     /* go on past records retention deleted before they were read */
} tail_query_t;

/* The last `cap` formatted lines, oldest at head. `lines` grows with the lines pushed, up
 * to `cap` (a count like -n 99999999999 means "all", not that much memory); it wraps only
 * once full, so until then head is 0 and the lines are contiguous. */
typedef struct line_ring {
    char **lines;
    size_t cap, n_alloc, head, count;
} line_ring_t;

typedef struct tailer {
    stele_reader_t *reader;        /* the local journal, or NULL with --mongo */
    stele_remote_reader_t *remote; /* the sink's collection, or NULL */
    const char *src;
    const tail_query_t *q;
    const stele_options_t *opts; /* allow_unsafe_dir for the local reader */
    line_ring_t ring; /* lines kept before they are printed (see cmd_tail.c, tail_reverse.c) */
    int use_ring;
    uint64_t history_last_seq; /* with the ring: the newest seq when the tail started */
    sigset_t stop_signals;
    int stopped;        /* a stop signal arrived or stdout failed */
    int is_remote_down; /* following --mongo: the last poll failed, retrying */
    int write_errno;    /* stdout failed with something other than EPIPE */
} tailer_t;

/* ---- tail_lines.c ---- */

/* One record as its output line, with the newline, into *line_out (free with free()).
 * Returns 0, or the code of the stele_*_to_json call (STELE_EBSON: a bad event). */
int tail_format_record(const tailer_t *t, const stele_record_t *rec, char **line_out,
                       stele_error_t *err);

/* Writes a line / flushes stdout. Always 0: a write failure stops the tailer (t->stopped;
 * t->write_errno unless it was EPIPE, the reader going away, which is a normal end). */
int tail_write_line(tailer_t *t, const char *line);
int tail_flush(tailer_t *t);

/* Takes ownership of `line`. Returns 0 or -ENOMEM (the line is freed either way). */
int tail_ring_push(line_ring_t *ring, char *line);

/* Writes the ring's lines oldest first and empties it. Returns 0. */
int tail_ring_drain(tailer_t *t);

/* Writes the ring's lines newest first, at most *n_left of them (TAIL_ALL: every one),
 * subtracting what it wrote, and empties it. Returns 0. */
int tail_ring_drain_newest_first(tailer_t *t, int64_t *n_left);

/* Frees the ring's lines and the ring. */
void tail_ring_free(line_ring_t *ring);

/* Whether SIGINT, SIGTERM or SIGPIPE arrived (or stdout failed): then t->stopped. */
int tail_stop_requested(tailer_t *t);

/* ---- cmd_tail.c ---- */

/* The next record from the journal or, with --mongo, from the remote copy: the contract of
 * stele_reader_next(). */
int tail_next(tailer_t *t, stele_record_t *rec, int timeout_ms, stele_error_t *err);

/* Whether the query keeps rec (before --until, matching --where): 1, 0, or a negative code
 * (STELE_EBSON: the event is not BSON). */
int tail_keeps(const tailer_t *t, const stele_record_t *rec);

/* The newest seq the reader can return now: committed locally, or stored remotely. */
int tail_last_seq(tailer_t *t, const char *dir, uint64_t *seq_out, stele_error_t *err);

/* ---- tail_reverse.c ---- */

/*
 * -r: the records the query selects, newest first (the newest N with -n N). Reads the
 * range backwards in spans, each read forward and printed in reverse, so memory holds one
 * span's lines whatever the range. Returns 0 or a negative code (details in *err; the
 * record at fault in *last_bad).
 */
int tail_run_reverse(tailer_t *t, const char *dir, stele_record_t *last_bad, stele_error_t *err);

#endif /* STELE_CLI_TAIL_H */
