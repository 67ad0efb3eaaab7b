/*
 * bench_event.c: the records stele-bench appends.
 *
 * Each record is a plausible audit event (time, actor, action, target, outcome, request id)
 * padded with a free-text "note" to exactly the requested size, so "200-byte events" means
 * 200 bytes of JSON text. For --input bson the same event is converted to BSON by libbson
 * beforehand, as an application that already holds BSON would hand it over (a 200-byte JSON
 * event is a ~214-byte BSON document: BSON spends a few bytes per field). A pool of
 * distinct events is built before the clock starts; writers cycle through it, so encoding
 * never counts against the store. The pool is immutable once built and shared by nobody:
 * each writer owns its own.
 */
#include "bench.h"

#include <bson/bson.h>
#include <stdlib.h>
#include <string.h>

/* Actions and outcomes drawn from, so the pool is not one event repeated. */
static const char *const event_actions[] = {"invoice.update", "user.login",   "role.grant",
                                            "file.download",  "payment.void", "key.rotate"};
static const char *const event_outcomes[] = {"success", "success", "success", "denied"};
#define EVENT_N_ACTIONS (sizeof event_actions / sizeof event_actions[0])
#define EVENT_N_OUTCOMES (sizeof event_outcomes / sizeof event_outcomes[0])
/* Largest event the pool builds: MongoDB's 16 MiB document limit less headroom. */
#define EVENT_MAX_BYTES (16u * 1024 * 1024 - 64 * 1024)

struct bench_events {
    uint32_t n;
    uint8_t *arena; /* n slots of record_bytes (JSON) or 2 * record_bytes (BSON) */
    bench_event_t *items;
};

typedef struct event_fields {
    char ts[32];
    char actor[24];
    char ip[20];
    const char *action;
    char target[32];
    const char *outcome;
    char request_id[24];
} event_fields_t;

static void
event_fields_fill(event_fields_t *f, int writer_id, uint32_t i)
{
    /* A fixed base time keeps runs reproducible; events are 1 ms apart. */
    unsigned ms = i % 1000u, s = (i / 1000u) % 60u, m = (i / 60000u) % 60u;
    snprintf(f->ts, sizeof f->ts, "2026-11-30T20:%02u:%02u.%03uZ", m, s, ms);
    snprintf(f->actor, sizeof f->actor, "u-%06u", (unsigned)(writer_id * 7919 + i * 31) % 1000000u);
    snprintf(f->ip, sizeof f->ip, "10.%u.%u.%u", (unsigned)writer_id % 256u, (i / 256u) % 256u,
             i % 256u);
    f->action = event_actions[(i + (unsigned)writer_id) % EVENT_N_ACTIONS];
    snprintf(f->target, sizeof f->target, "invoice/%08u", (i * 2654435761u) % 100000000u);
    f->outcome = event_outcomes[i % EVENT_N_OUTCOMES];
    snprintf(f->request_id, sizeof f->request_id, "r%04x%08x", (unsigned)writer_id & 0xffffu, i);
}

/* Padding text: lower-case words, varied per event so compression-friendly runs of one byte
 * do not flatter any store. */
static void
event_pad(char *dst, size_t len, uint32_t seed)
{
    static const char letters[] = "abcdefghijklmnopqrstuvwxyz";
    uint32_t x = seed * 2654435761u + 1u;
    for (size_t k = 0; k < len; k++) {
        x = x * 1103515245u + 12345u;
        dst[k] = (k % 8 == 7) ? ' ' : letters[(x >> 16) % 26];
    }
}

static int
event_json_len(const event_fields_t *f, size_t note_len)
{
    return snprintf(NULL, 0,
                    "{\"ts\":\"%s\",\"actor\":{\"id\":\"%s\",\"ip\":\"%s\"},\"action\":\"%s\","
                    "\"target\":\"%s\",\"outcome\":\"%s\",\"request_id\":\"%s\",\"note\":\"%*s\"}",
                    f->ts, f->actor, f->ip, f->action, f->target, f->outcome, f->request_id,
                    (int)note_len, "");
}

static int
event_build_json(uint8_t *dst, uint32_t record_bytes, int writer_id, uint32_t i)
{
    event_fields_t f;
    event_fields_fill(&f, writer_id, i);
    int fixed = event_json_len(&f, 0);
    if (fixed < 0 || (uint32_t)fixed > record_bytes)
        return -1;
    size_t note_len = record_bytes - (uint32_t)fixed;
    char *note = malloc(note_len + 1);
    if (!note)
        return -1;
    event_pad(note, note_len, i ^ ((uint32_t)writer_id << 20));
    note[note_len] = '\0';
    char *text = malloc((size_t)record_bytes + 1);
    if (!text) {
        free(note);
        return -1;
    }
    int n = snprintf(text, (size_t)record_bytes + 1,
                     "{\"ts\":\"%s\",\"actor\":{\"id\":\"%s\",\"ip\":\"%s\"},\"action\":\"%s\","
                     "\"target\":\"%s\",\"outcome\":\"%s\",\"request_id\":\"%s\",\"note\":\"%s\"}",
                     f.ts, f.actor, f.ip, f.action, f.target, f.outcome, f.request_id, note);
    int rc = (n == (int)record_bytes) ? 0 : -1;
    if (rc == 0)
        memcpy(dst, text, record_bytes);
    free(text);
    free(note);
    return rc;
}

/* The BSON form of the same event: the JSON text converted by libbson (so its size is the
 * JSON size plus BSON's per-field overhead, not exactly record_bytes). */
static int
event_build_bson(uint8_t *dst, uint32_t slot_bytes, uint32_t record_bytes, int writer_id,
                 uint32_t i, uint32_t *len_out)
{
    uint8_t *json = malloc(record_bytes);
    if (!json || event_build_json(json, record_bytes, writer_id, i)) {
        free(json);
        return -1;
    }
    bson_t b;
    bson_error_t error;
    bool ok = bson_init_from_json(&b, (const char *)json, record_bytes, &error);
    free(json);
    if (!ok)
        return -1;
    ok = b.len <= slot_bytes;
    if (ok) {
        memcpy(dst, bson_get_data(&b), b.len);
        *len_out = b.len;
    }
    bson_destroy(&b);
    return ok ? 0 : -1;
}

uint32_t
bench_events_min_bytes(void)
{
    /* The JSON form is the longer of the two; the widest fields give the bound. */
    event_fields_t f;
    event_fields_fill(&f, 65535, 999999999u);
    f.action = "invoice.update";
    int fixed = event_json_len(&f, 0);
    return fixed > 0 ? (uint32_t)fixed : 0;
}

uint32_t
bench_events_max_bytes(void)
{
    return EVENT_MAX_BYTES;
}

bench_events_t *
bench_events_new(bench_input_t input, uint32_t record_bytes, int writer_id, uint32_t n,
                 char *errbuf, size_t errcap)
{
    if (record_bytes < bench_events_min_bytes() || record_bytes > EVENT_MAX_BYTES || n == 0) {
        snprintf(errbuf, errcap, "record size %u out of range: use %u to %u bytes", record_bytes,
                 bench_events_min_bytes(), EVENT_MAX_BYTES);
        return NULL;
    }
    bench_events_t *ev = calloc(1, sizeof *ev);
    if (!ev)
        goto oom;
    ev->n = n;
    /* BSON adds a few bytes per field to the JSON text; twice the size is ample. */
    uint32_t slot_bytes = input == BENCH_INPUT_BSON ? 2 * record_bytes : record_bytes;
    ev->arena = malloc((size_t)n * slot_bytes);
    ev->items = calloc(n, sizeof *ev->items);
    if (!ev->arena || !ev->items)
        goto oom;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *dst = ev->arena + (size_t)i * slot_bytes;
        uint32_t len = record_bytes;
        int rc = input == BENCH_INPUT_BSON
                     ? event_build_bson(dst, slot_bytes, record_bytes, writer_id, i, &len)
                     : event_build_json(dst, record_bytes, writer_id, i);
        if (rc) {
            snprintf(errbuf, errcap, "could not build a %u-byte %s event", record_bytes,
                     bench_input_name(input));
            bench_events_free(ev);
            return NULL;
        }
        ev->items[i].data = dst;
        ev->items[i].len = len;
    }
    return ev;
oom:
    snprintf(errbuf, errcap, "out of memory building the event pool");
    bench_events_free(ev);
    return NULL;
}

const bench_event_t *
bench_events_get(const bench_events_t *ev, uint64_t i)
{
    return &ev->items[i % ev->n];
}

void
bench_events_free(bench_events_t *ev)
{
    if (!ev)
        return;
    free(ev->arena);
    free(ev->items);
    free(ev);
}
