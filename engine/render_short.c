/*
 * render_short.c: stele_record_to_short (stele.h, "JSON output"): a record as the one human
 * line of `stele tail --output short`:
 *   2026-12-01T21:00:05.123456+01:00 web-1 42 uid=1001 alice login target=host-1 outcome=ok
 * local time, source, seq, the uid of the record's origin (who appended it, when known), the
 * event's actor and action, then its other top-level fields as KEY=VALUE. Values are
 * written by render.c and render_bson.c (the same numbers and JSON as every other output);
 * this file chooses the layout and keeps the line safe for a terminal: a string is bare
 * only when nothing in it could be misread (a space, '=', a quote) or could drive the
 * terminal; otherwise it is a JSON string in which the C0 and C1 control characters, DEL
 * and the bidirectional overrides are all \u escapes, so no byte of a record reaches the
 * terminal as a control. Pure functions but for the time zone read by localtime_r; no
 * state, no locks.
 */
#include <bson/bson.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "error.h"
#include "render.h"

#define NS_PER_US INT64_C(1000)
/* The two fields named first, bare, in this order ("-" when the event has none). */
static const char *const short_lead_keys[] = {"actor", "action"};
#define SHORT_N_LEAD_KEYS 2

/* How many bytes at s[0..len) form a character a terminal could take as a control: a C0
 * byte, DEL, a C1 control (U+0080..U+009F: C2 80..C2 9F), the line and paragraph
 * separators and the bidirectional embeddings, overrides and isolates (U+2028..U+202E,
 * U+2066..U+2069). 0 for anything else. Its code point goes to *code_point. */
static size_t
short_control_len(const unsigned char *s, size_t len, unsigned *code_point)
{
    if (s[0] < 0x20 || s[0] == 0x7f) {
        *code_point = s[0];
        return 1;
    }
    if (len >= 2 && s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f) {
        *code_point = s[1];
        return 2;
    }
    if (len >= 3 && s[0] == 0xe2 &&
        ((s[1] == 0x80 && s[2] >= 0xa8 && s[2] <= 0xae) ||
         (s[1] == 0x81 && s[2] >= 0xa6 && s[2] <= 0xa9))) {
        *code_point = 0x2000u | ((unsigned)(s[1] & 0x3f) << 6) | (s[2] & 0x3fu);
        return 3;
    }
    return 0;
}

/* JSON text (as render.c wrote it) with every terminal control written as a \u escape:
 * such characters occur only inside its strings, where the escape means the same. */
static void
short_append_escaped(render_buf_t *b, const char *json, size_t len)
{
    const unsigned char *s = (const unsigned char *)json;
    size_t run = 0;
    for (size_t i = 0; i < len;) {
        unsigned code_point;
        size_t n = short_control_len(s + i, len - i, &code_point);
        if (n == 0) {
            i++;
            continue;
        }
        render_text(b, json + run, i - run);
        char esc[8];
        snprintf(esc, sizeof esc, "\\u%04x", code_point);
        render_text(b, esc, strlen(esc));
        i += n;
        run = i;
    }
    render_text(b, json + run, len - run);
}

/* Whether a string can be written bare: not empty, no space, quote, backslash or '=', no
 * terminal control (and valid UTF-8, which render_string checks for the quoted form). */
static int
short_is_bare(const char *s, size_t len)
{
    if (len == 0 || !bson_utf8_validate(s, len, false))
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned code_point;
        if (s[i] == ' ' || s[i] == '"' || s[i] == '\\' || s[i] == '=' ||
            short_control_len((const unsigned char *)s + i, len - i, &code_point) != 0)
            return 0;
    }
    return 1;
}

/* Appends what `v` rendered, escaped, or passes on its failure; frees v's text. */
static void
short_append_rendered(render_buf_t *b, render_buf_t *v)
{
    if (v->rc != 0)
        render_fail(b, v->rc, v->what);
    else
        short_append_escaped(b, v->text, v->len);
    free(v->text);
}

/* A string: bare when it can be, else a JSON string with the controls escaped. */
static void
short_string(render_buf_t *b, const char *s, size_t len)
{
    if (short_is_bare(s, len)) {
        render_text(b, s, len);
        return;
    }
    render_buf_t v;
    render_init(&v);
    render_string(&v, s, len);
    short_append_rendered(b, &v);
}

/* The value at `it`: a string as short_string, anything else as its compact JSON. */
static void
short_value(render_buf_t *b, const bson_iter_t *it)
{
    uint32_t len = 0;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        const char *s = bson_iter_utf8(it, &len);
        short_string(b, s, len);
        return;
    }
    render_buf_t v;
    render_init(&v);
    render_bson_value(&v, it);
    short_append_rendered(b, &v);
}

/* The commit time in local time: "2026-12-01T21:00:05.123456+01:00". */
static void
short_local_time(render_buf_t *b, int64_t ts_ns)
{
    int64_t rem_ns;
    int64_t sec = clock_floor_s(ts_ns, &rem_ns);
    time_t t = (time_t)sec;
    struct tm tm;
    char day[32] = "?", text[64];
    long offset_min = 0;
    if (localtime_r(&t, &tm) != NULL) {
        strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
        offset_min = tm.tm_gmtoff / 60;
    }
    long abs_min = offset_min < 0 ? -offset_min : offset_min;
    int n = snprintf(text, sizeof text, "%s.%06" PRId64 "%c%02ld:%02ld", day, rem_ns / NS_PER_US,
                     offset_min < 0 ? '-' : '+', abs_min / 60, abs_min % 60);
    render_text(b, text, (size_t)n);
}

static int
short_is_lead_key(const char *key)
{
    for (size_t i = 0; i < SHORT_N_LEAD_KEYS; i++) {
        if (strcmp(key, short_lead_keys[i]) == 0)
            return 1;
    }
    return 0;
}

/* " alice login": the lead fields' values, "-" for each one the event lacks. */
static void
short_lead_fields(render_buf_t *b, const bson_t *event)
{
    for (size_t i = 0; i < SHORT_N_LEAD_KEYS; i++) {
        bson_iter_t it;
        render_text(b, " ", 1);
        if (bson_iter_init_find(&it, event, short_lead_keys[i]))
            short_value(b, &it);
        else
            render_text(b, "-", 1);
    }
}

/* " target=host-1 n=7": every other top-level field, in the event's order. */
static void
short_other_fields(render_buf_t *b, const bson_t *event)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, event)) {
        render_fail(b, STELE_EBSON, "the document's length or end is wrong");
        return;
    }
    while (b->rc == 0 && bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (short_is_lead_key(key))
            continue;
        render_text(b, " ", 1);
        short_string(b, key, bson_iter_key_len(&it));
        render_text(b, "=", 1);
        short_value(b, &it);
    }
    if (it.err_off != 0)
        render_fail(b, STELE_EBSON, "the document is malformed");
}

int
stele_record_to_short(const stele_record_t *rec, const char *source, char **text_out,
                      size_t *len_out, stele_error_t *err)
{
    if (rec == NULL || source == NULL || text_out == NULL)
        return error_set(err, STELE_EINVAL, "stele_record_to_short: NULL argument");
    bson_t event;
    render_buf_t b;
    render_init(&b);
    if (rec->bson == NULL || !bson_init_static(&event, rec->bson, rec->bson_len)) {
        render_fail(&b, STELE_EBSON, "the document's length or end is wrong");
        return render_finish(&b, "record", text_out, len_out, err);
    }
    /* the whole event is checked first, as the JSON line would be: a malformed one fails
     * whole rather than print half a line */
    render_buf_t check;
    render_init(&check);
    render_bson(&check, rec->bson, rec->bson_len);
    if (check.rc != 0)
        render_fail(&b, check.rc, check.what);
    free(check.text);
    short_local_time(&b, rec->ts_ns);
    render_text(&b, " ", 1);
    short_string(&b, source, strlen(source));
    char seq[32];
    int n = snprintf(seq, sizeof seq, " %" PRIu64, rec->seq);
    render_text(&b, seq, (size_t)n);
    if (rec->origin.kind != STELE_ORIGIN_UNKNOWN) {
        n = snprintf(seq, sizeof seq, " uid=%" PRIu32, rec->origin.uid);
        render_text(&b, seq, (size_t)n);
    }
    short_lead_fields(&b, &event);
    short_other_fields(&b, &event);
    return render_finish(&b, "record", text_out, len_out, err);
}
