/*
 * bench_parse.c: the parsing reference, libbson's JSON reader alone.
 *
 * Each append turns the event's JSON text into BSON and frees it: no validation, no queue,
 * no disk. It is the reference of the JSON parser comparison (bench_parsers.c: stele's own
 * reader and the other parsers, each writing this reader's BSON), and the parse of
 * `parse-wakeup`. BSON events have nothing to parse: the cell reports itself skipped.
 *
 * Each writer keeps one reader and feeds it its events as one multi-document stream, the
 * cheapest way to use the library (creating a reader zeroes ~20 KiB, more than a small
 * event's parse costs): libbson starts the next document of a stream when its '{' follows a
 * finished one in the same feed, so each event goes in followed by a '{', and the next one
 * without its own.
 */
#include "bench.h"

#include <bson/bson.h>
#include <stdlib.h>
#include <string.h>

enum { PARSE_TEXT_MAX = 64 << 10 };

struct bench_json_parser {
    bson_json_reader_t *reader;
    int holds_open_brace;
    char text[PARSE_TEXT_MAX + 1];
};

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

bench_json_parser_t *
bench_json_parser_new(void)
{
    return calloc(1, sizeof(bench_json_parser_t));
}

int
bench_json_parse(bench_json_parser_t *p, const bench_event_t *ev)
{
    const char *json = (const char *)ev->data;
    size_t from = 0;
    while (from < ev->len && json[from] != '{')
        from++;
    if (from == ev->len || ev->len - from > PARSE_TEXT_MAX)
        return -1;
    from += p->holds_open_brace ? 1 : 0;
    size_t n = ev->len - from;
    memcpy(p->text, json + from, n);
    p->text[n++] = '{';
    if (!p->reader)
        p->reader = bson_json_data_reader_new(true, 16 << 10);
    bson_json_data_reader_ingest(p->reader, (const uint8_t *)p->text, n);
    bson_t doc = BSON_INITIALIZER;
    int rc = bson_json_reader_read(p->reader, &doc, NULL);
    bson_destroy(&doc);
    p->holds_open_brace = rc == 1;
    if (rc == 1)
        return 0;
    bson_json_reader_destroy(p->reader);
    p->reader = NULL;
    return -1;
}

void
bench_json_parser_free(bench_json_parser_t *p)
{
    if (p)
        bson_json_reader_destroy(p->reader);
    free(p);
}

static int
parse_writer_open(void *state, int writer_id, void **wstate_out, char *note, size_t note_cap)
{
    (void)state;
    (void)writer_id;
    bench_json_parser_t *p = bench_json_parser_new();
    if (!p) {
        snprintf(note, note_cap, "out of memory");
        return BENCH_FAILED;
    }
    *wstate_out = p;
    return 0;
}

static int
parse_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)state;
    return bench_json_parse(wstate, ev);
}

static void
parse_writer_close(void *state, void *wstate)
{
    (void)state;
    bench_json_parser_free(wstate);
}

static int
parse_close(void *state, bench_result_t *r)
{
    (void)state;
    r->is_durable = 0;
    r->counted_back = -1;
    snprintf(r->note, sizeof r->note, "NOT A STORE: libbson's JSON reader alone");
    return 0;
}

const bench_target_t bench_target_json_parse = {
    .system = "libbson-json",
    .open = parse_open,
    .writer_open = parse_writer_open,
    .append = parse_append,
    .writer_close = parse_writer_close,
    .close = parse_close,
};
