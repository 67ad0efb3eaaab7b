/*
 * tail_lines.c: the output side of `stele tail` (tail.h): one record as its line in the
 * chosen --output form (the library writes the text: stele_record_to_json,
 * stele_record_to_short, stele_event_to_json), writing lines to stdout, and the ring of
 * formatted lines that -n N and -r keep before printing.
 *
 * A write to stdout that fails stops the tailer instead of returning an error: EPIPE (the
 * reader went away, `| head`) is a normal end; anything else is remembered in write_errno
 * and reported once at the end. The ring holds at most `cap` lines and allocates as lines
 * arrive, so a large -n costs memory only for lines that exist.
 */
#include "tail.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Slots of the first allocation of the line ring; it doubles from there up to its cap. */
#define TAIL_RING_FIRST_SLOTS 64

int
tail_format_record(const tailer_t *t, const stele_record_t *rec, char **line_out,
                   stele_error_t *err)
{
    char *text = NULL;
    size_t len = 0;
    int rc;
    switch (t->q->output) {
    case TAIL_OUTPUT_SHORT:
        rc = stele_record_to_short(rec, t->src, &text, &len, err);
        break;
    case TAIL_OUTPUT_CAT:
        rc = stele_event_to_json(rec->bson, rec->bson_len, &text, &len, err);
        break;
    case TAIL_OUTPUT_JSON:
    default:
        rc = stele_record_to_json(rec, t->src, &text, &len, err);
        break;
    }
    if (rc != 0)
        return rc;
    char *line = malloc(len + 2);
    if (line != NULL) {
        memcpy(line, text, len);
        memcpy(line + len, "\n", 2);
    }
    stele_json_free(text);
    *line_out = line;
    return line == NULL ? -ENOMEM : 0;
}

static void
note_write_failure(tailer_t *t)
{
    t->stopped = 1;
    if (errno != EPIPE)
        t->write_errno = errno;
}

int
tail_write_line(tailer_t *t, const char *line)
{
    if (!t->stopped && fputs(line, stdout) == EOF)
        note_write_failure(t);
    return 0;
}

int
tail_flush(tailer_t *t)
{
    if (!t->stopped && fflush(stdout) != 0)
        note_write_failure(t);
    return 0;
}

/* Room for one more line in a ring that is not full yet. Returns 0 or -ENOMEM. */
static int
ring_grow(line_ring_t *ring)
{
    size_t n_alloc = ring->n_alloc == 0 ? TAIL_RING_FIRST_SLOTS : ring->n_alloc * 2;
    if (n_alloc > ring->cap || n_alloc < ring->n_alloc)
        n_alloc = ring->cap;
    char **lines = realloc(ring->lines, n_alloc * sizeof *lines);
    if (lines == NULL)
        return -ENOMEM;
    ring->lines = lines;
    ring->n_alloc = n_alloc;
    return 0;
}

int
tail_ring_push(line_ring_t *ring, char *line)
{
    if (ring->cap == 0) {
        free(line);
        return 0;
    }
    if (ring->count == ring->cap) {
        free(ring->lines[ring->head]);
        ring->lines[ring->head] = line;
        ring->head = (ring->head + 1) % ring->cap;
        return 0;
    }
    if (ring->count == ring->n_alloc && ring_grow(ring) != 0) {
        free(line);
        return -ENOMEM;
    }
    ring->lines[ring->count] = line; /* not full: head is 0 */
    ring->count++;
    return 0;
}

int
tail_ring_drain(tailer_t *t)
{
    line_ring_t *ring = &t->ring;
    for (; ring->count > 0; ring->count--) {
        char *line = ring->lines[ring->head];
        tail_write_line(t, line);
        free(line);
        ring->head = (ring->head + 1) % ring->cap;
    }
    ring->head = 0;
    return 0;
}

int
tail_ring_drain_newest_first(tailer_t *t, int64_t *n_left)
{
    line_ring_t *ring = &t->ring;
    for (; ring->count > 0; ring->count--) {
        char *line = ring->lines[(ring->head + ring->count - 1) % ring->cap];
        if (*n_left != 0) {
            tail_write_line(t, line);
            if (*n_left > 0)
                (*n_left)--;
        }
        free(line);
    }
    ring->head = 0;
    return 0;
}

void
tail_ring_free(line_ring_t *ring)
{
    if (ring->lines != NULL) {
        for (; ring->count > 0; ring->count--) {
            free(ring->lines[ring->head]);
            ring->head = (ring->head + 1) % ring->cap;
        }
    }
    free(ring->lines);
    memset(ring, 0, sizeof *ring);
}

int
tail_stop_requested(tailer_t *t)
{
    struct timespec zero = {0, 0};
    if (sigtimedwait(&t->stop_signals, NULL, &zero) > 0)
        t->stopped = 1;
    return t->stopped;
}
