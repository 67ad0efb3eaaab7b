/*
 * bench_parse.c: the parsing reference, libbson's bson_init_from_json alone.
 *
 * Each append turns the event's JSON text into BSON and frees it: no validation, no queue,
 * no disk. Its rate is the ceiling of stele's JSON input at wait=none, which must parse
 * every event in the caller's thread, the way the fsync loop is the ceiling of a durable
 * append. BSON events have nothing to parse: the cell reports itself skipped.
 */
#include "bench.h"

#include <bson/bson.h>
#include <stdlib.h>

static int
parse_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    if (cell->input != BENCH_INPUT_JSON) {
        snprintf(note, note_cap, "only JSON input is parsed");
        return BENCH_SKIPPED;
    }
    *state_out = NULL;
    return 0;
}

static int
parse_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)state;
    (void)wstate;
    bson_t doc;
    if (!bson_init_from_json(&doc, (const char *)ev->data, (ssize_t)ev->len, NULL))
        return -1;
    bson_destroy(&doc);
    return 0;
}

static int
parse_close(void *state, bench_result_t *r)
{
    (void)state;
    r->is_durable = 0;
    r->counted_back = -1;
    snprintf(r->note, sizeof r->note, "NOT A STORE: libbson's JSON parse alone");
    return 0;
}

const bench_target_t bench_target_json_parse = {
    .system = "libbson-json",
    .open = parse_open,
    .append = parse_append,
    .close = parse_close,
};
