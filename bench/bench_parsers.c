/*
 * bench_parsers.c: the JSON parser comparison: cells that only turn each event's JSON text
 * into BSON, beside `libbson-json` (bench_parse.c), on the same events in the same run.
 *
 *   stele-json     stele_validate_json(): stele's own reader (engine/json_bson.c), which
 *                  also enforces every validation rule (stele.h), writing the BSON and
 *                  dropping it; the BSON is the one stele appends, proven equal to
 *                  libbson's by tests/fuzz/fuzz_json_bson.c, so it is not compared here
 *   simdjson-json  simdjson's DOM parser, then the tree into BSON (bench_parse_simdjson.cpp)
 *   yajl-json      yajl's callback parser appending straight into BSON (bench_parse_yajl.c)
 *   jansson-json   jansson's json_loadb, then the tree into BSON (bench_parse_jansson.c)
 *
 * Fairness: every peer writes the BSON libbson's reader writes; each cell checks that on the
 * events it is about to measure (and on a document of every JSON type) before the clock
 * starts, and fails the cell if the bytes differ. None of the peers checks stele's rules
 * (repeated or dotted keys, '$'-keys, depth, size); stele-json does. Each writer thread has
 * a parser of its own, reused for every event, the cheapest way each library offers.
 */
#include "bench.h"
#include "bench_json.h"

#include <stdlib.h>
#include <string.h>

/* Events of the cell's shape checked against libbson before a peer's cell runs. */
#define PARSERS_CHECKED_EVENTS 32

/* A document of every JSON type, escapes and nesting: a peer must write libbson's bytes. */
static const char parsers_typed_event[] =
    "{\"s\":\"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\" \\n\xc3\xa9\",\"i\":42,\"neg\":-7,"
    "\"big\":9007199254740993,\"min\":-2147483649,\"d\":1.5,\"e\":-2.25e10,"
    "\"t\":true,\"f\":false,\"n\":null,\"a\":[1,\"x\",[],{}],\"o\":{\"k\":{\"j\":[0.1]}}}";

void
bench_json_append_integer(bson_t *b, const char *key, int key_len, int64_t v)
{
    if (v >= INT32_MIN && v <= INT32_MAX)
        bson_append_int32(b, key, key_len, (int32_t)v);
    else
        bson_append_int64(b, key, key_len, v);
}

/* Whether the peer writes libbson's bytes for `json`; fills why when not. */
static int
parsers_same_as_libbson(const bench_json_def_t *def, void *parser, const char *json, size_t len,
                        char *why, size_t why_cap)
{
    bson_t expected, *got = bson_new();
    bson_error_t error;
    int same = 0;
    if (!bson_init_from_json(&expected, json, (ssize_t)len, &error)) {
        snprintf(why, why_cap, "libbson refuses a check event: %s", error.message);
    } else {
        if (def->to_bson(parser, json, len, got) != 0)
            snprintf(why, why_cap, "%s refuses an event libbson reads", def->library);
        else if (got->len != expected.len ||
                 memcmp(bson_get_data(got), bson_get_data(&expected), got->len) != 0)
            snprintf(why, why_cap, "%s's BSON differs from libbson's", def->library);
        else
            same = 1;
        bson_destroy(&expected);
    }
    bson_destroy(got);
    return same;
}

/* The events a writer of this cell appends (writer 0's), then the typed document. */
static int
parsers_check(const bench_json_def_t *def, const bench_cell_t *cell, char *note, size_t cap)
{
    void *parser = def->parser_new();
    bench_events_t *ev = bench_events_new(BENCH_INPUT_JSON, cell->record_bytes, 0,
                                          PARSERS_CHECKED_EVENTS, note, cap);
    int same = parser && ev;
    for (uint32_t i = 0; same && i < PARSERS_CHECKED_EVENTS; i++) {
        const bench_event_t *e = bench_events_get(ev, i);
        same = parsers_same_as_libbson(def, parser, (const char *)e->data, e->len, note, cap);
    }
    if (same)
        same = parsers_same_as_libbson(def, parser, parsers_typed_event,
                                       sizeof parsers_typed_event - 1, note, cap);
    if (!parser)
        snprintf(note, cap, "out of memory");
    bench_events_free(ev);
    if (parser)
        def->parser_free(parser);
    return same ? 0 : BENCH_FAILED;
}

static int
parsers_open_def(const bench_json_def_t *def, const bench_cell_t *cell, void **state_out,
                 char *note, size_t note_cap)
{
    if (cell->input != BENCH_INPUT_JSON) {
        snprintf(note, note_cap, "only JSON input is parsed");
        return BENCH_SKIPPED;
    }
    if (!def->to_bson) {
        snprintf(note, note_cap, "stele-bench was built without %s", def->library);
        return BENCH_SKIPPED;
    }
    int rc = parsers_check(def, cell, note, note_cap);
    if (rc == 0)
        *state_out = (void *)def;
    return rc;
}

typedef struct parsers_writer {
    void *parser;
    bson_t *doc; /* reused for every event */
} parsers_writer_t;

static int
parsers_writer_open(void *state, int writer_id, void **wstate_out, char *note, size_t note_cap)
{
    (void)writer_id;
    const bench_json_def_t *def = state;
    parsers_writer_t *w = calloc(1, sizeof *w);
    if (w && (w->parser = def->parser_new()) != NULL) {
        w->doc = bson_new();
        *wstate_out = w;
        return 0;
    }
    free(w);
    snprintf(note, note_cap, "out of memory");
    return BENCH_FAILED;
}

static int
parsers_append(void *state, void *wstate, const bench_event_t *ev)
{
    const bench_json_def_t *def = state;
    parsers_writer_t *w = wstate;
    return def->to_bson(w->parser, (const char *)ev->data, ev->len, w->doc);
}

static void
parsers_writer_close(void *state, void *wstate)
{
    const bench_json_def_t *def = state;
    parsers_writer_t *w = wstate;
    def->parser_free(w->parser);
    bson_destroy(w->doc);
    free(w);
}

static int
parsers_close(void *state, bench_result_t *r)
{
    const bench_json_def_t *def = state;
    r->is_durable = 0;
    r->counted_back = -1;
    snprintf(r->note, sizeof r->note, "NOT A STORE: %s into libbson's BSON", def->library);
    return 0;
}

#define PARSERS_OPEN(name, def)                                                                    \
    static int name(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)       \
    {                                                                                              \
        return parsers_open_def(&(def), cell, state_out, note, note_cap);                          \
    }

PARSERS_OPEN(parsers_open_yajl, bench_json_yajl)
PARSERS_OPEN(parsers_open_jansson, bench_json_jansson)
PARSERS_OPEN(parsers_open_simdjson, bench_json_simdjson)

const bench_target_t bench_target_json_yajl = {
    .system = "yajl-json",
    .open = parsers_open_yajl,
    .writer_open = parsers_writer_open,
    .append = parsers_append,
    .writer_close = parsers_writer_close,
    .close = parsers_close,
};

const bench_target_t bench_target_json_jansson = {
    .system = "jansson-json",
    .open = parsers_open_jansson,
    .writer_open = parsers_writer_open,
    .append = parsers_append,
    .writer_close = parsers_writer_close,
    .close = parsers_close,
};

const bench_target_t bench_target_json_simdjson = {
    .system = "simdjson-json",
    .open = parsers_open_simdjson,
    .writer_open = parsers_writer_open,
    .append = parsers_append,
    .writer_close = parsers_writer_close,
    .close = parsers_close,
};

#ifndef BENCH_HAVE_SIMDJSON
/* The C++ file is compiled only with simdjson; without it the cell reports itself skipped. */
const bench_json_def_t bench_json_simdjson = {.system = "simdjson-json", .library = "simdjson"};
#endif

/* -- stele-json: stele_validate_json ------------------------------------------------------ */

static int
stele_json_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    if (cell->input != BENCH_INPUT_JSON) {
        snprintf(note, note_cap, "only JSON input is parsed");
        return BENCH_SKIPPED;
    }
    stele_options_t *opts = malloc(sizeof *opts);
    if (!opts) {
        snprintf(note, note_cap, "out of memory");
        return BENCH_FAILED;
    }
    stele_options_init(opts); /* the limits stele_open would use */
    *state_out = opts;
    return 0;
}

static int
stele_json_append(void *state, void *wstate, const bench_event_t *ev)
{
    (void)wstate;
    return stele_validate_json((const char *)ev->data, ev->len, state, NULL);
}

static int
stele_json_close(void *state, bench_result_t *r)
{
    free(state);
    r->is_durable = 0;
    r->counted_back = -1;
    snprintf(r->note, sizeof r->note,
             "NOT A STORE: stele_validate_json, stele's reader and every rule, into BSON");
    return 0;
}

const bench_target_t bench_target_json_stele = {
    .system = "stele-json",
    .open = stele_json_open,
    .append = stele_json_append,
    .close = stele_json_close,
};
