/*
 * protocol_envelope.c: reads the top level of a request line that may be an envelope in any
 * spelling (docs/protocol.md, "Requests"); protocol.c recognises the client's own spelling
 * first and calls this for any other line that holds a '$', literally or as \u0024. Pure.
 *
 * Why a bare event is not parsed here: the engine validates and encodes it anyway
 * (stele_append_json), so the common case costs one parse. Either way the event goes to the
 * engine as the client's JSON text, never as BSON from another parser, so an event is judged
 * the same whether it came bare or in an envelope of any spelling.
 * Envelope keys start with '$' because an event may not have such keys: a bare event can
 * never be mistaken for an envelope, and an envelope never for an event.
 */
#include "protocol.h"

#include "error.h"
#include "json_scan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- the envelope's top level, read without a JSON parser ------------------------------
 *
 * Why not libbson's parser: it reads extended JSON, so {"$date":...}, {"$binary":...} and
 * the other wrappers inside $event would become BSON types; it wraps integers beyond int64
 * and accepts NaN; and it stops after the first object of the line. The engine refuses all
 * of that in JSON text (validate.c), so the event must reach it as text: this scanner only
 * finds the envelope's members and the span of the $event object, and the engine checks
 * that span exactly as it checks a bare event.
 */

/* A cursor over one request line. */
typedef struct envelope_scan {
    const char *p;
    size_t n;
    size_t pos;
} envelope_scan_t;

/* Longest envelope key or wait level kept for comparison and messages. */
#define ENVELOPE_NAME_BYTES 32

static int
envelope_scan_is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static void
envelope_scan_skip_ws(envelope_scan_t *s)
{
    while (s->pos < s->n && envelope_scan_is_ws(s->p[s->pos]))
        s->pos++;
}

/* Consumes `c` (after whitespace); 0, or -1 when something else comes. */
static int
envelope_scan_expect(envelope_scan_t *s, char c)
{
    envelope_scan_skip_ws(s);
    if (s->pos >= s->n || s->p[s->pos] != c)
        return -1;
    s->pos++;
    return 0;
}

/* Reads one escape after its backslash; stores the byte it stands for in *out. An escape of
 * a character beyond ASCII becomes '?': it can never match an envelope key or a wait name.
 * Returns 0, or -1 when malformed. */
static int
envelope_scan_escape(envelope_scan_t *s, char *out)
{
    static const char plain[] = "\"\\/bfnrt";
    static const char means[] = "\"\\/\b\f\n\r\t";
    if (s->pos >= s->n)
        return -1;
    char c = s->p[s->pos++];
    const char *hit = c ? strchr(plain, c) : NULL;
    if (hit) {
        *out = means[hit - plain];
        return 0;
    }
    int code = c == 'u' ? json_hex4(s->p, s->n, s->pos) : -1;
    if (code < 0)
        return -1;
    s->pos += 4;
    *out = code < 0x80 ? (char)code : '?';
    return 0;
}

/* Reads the string at s->pos (its opening quote). With `name` set, its first bytes are
 * decoded into name[0..ENVELOPE_NAME_BYTES) and *name_len receives the decoded length
 * (which may be larger). Returns 0, or -1 when malformed or unterminated. */
static int
envelope_scan_string(envelope_scan_t *s, char *name, size_t *name_len)
{
    size_t n_decoded = 0;
    s->pos++; /* the opening quote */
    while (s->pos < s->n) {
        char c = s->p[s->pos++];
        if (c == '"') {
            if (name_len)
                *name_len = n_decoded;
            return 0;
        }
        if ((unsigned char)c < 0x20)
            return -1; /* JSON strings hold no raw control characters */
        if (c == '\\' && envelope_scan_escape(s, &c) != 0)
            return -1;
        if (name && n_decoded < ENVELOPE_NAME_BYTES)
            name[n_decoded] = c;
        n_decoded++;
    }
    return -1;
}

/* Skips an object or array at s->pos, brackets counted outside strings. What is inside is
 * checked by whoever reads the value (the engine, for $event). Returns 0 or -1. */
static int
envelope_scan_skip_nested(envelope_scan_t *s)
{
    size_t depth = 0;
    while (s->pos < s->n) {
        char c = s->p[s->pos];
        if (c == '"') {
            if (envelope_scan_string(s, NULL, NULL) != 0)
                return -1;
            continue;
        }
        s->pos++;
        if (c == '{' || c == '[')
            depth++;
        else if ((c == '}' || c == ']') && --depth == 0)
            return 0;
    }
    return -1;
}

/* Skips one JSON value (after whitespace). Returns 0 or -1. */
static int
envelope_scan_skip_value(envelope_scan_t *s)
{
    envelope_scan_skip_ws(s);
    if (s->pos >= s->n)
        return -1;
    char c = s->p[s->pos];
    if (c == '"')
        return envelope_scan_string(s, NULL, NULL);
    if (c == '{' || c == '[')
        return envelope_scan_skip_nested(s);
    /* A literal or a number: a run of the characters they are made of. */
    size_t start = s->pos;
    while (s->pos < s->n && s->p[s->pos] && strchr("truefalsn0123456789+-.E", s->p[s->pos]))
        s->pos++;
    return s->pos > start ? 0 : -1;
}

/* What the top level of a line says about it being an envelope. */
typedef struct envelope {
    int is_envelope;     /* a top-level key is $event or $wait */
    int n_event, n_wait; /* how often each appeared */
    int problem;         /* the first refusal in member order, 0 if none */
    char problem_message[STELE_ERROR_MESSAGE_BYTES];
    const char *event; /* the first $event's object text */
    size_t event_len;
    stele_wait_t wait;
} envelope_t;

static void __attribute__((format(printf, 3, 4)))
envelope_refuse(envelope_t *env, int code, const char *fmt, ...)
{
    if (env->problem)
        return; /* the first one in member order is reported */
    env->problem = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(env->problem_message, sizeof env->problem_message, fmt, ap);
    va_end(ap);
}

static int
envelope_name_is(const char *name, size_t len, const char *literal)
{
    return len == strlen(literal) && memcmp(name, literal, len) == 0;
}

/* Reads the value of $event: its span when it is an object. Returns 0 or -1 (syntax). */
static int
envelope_take_event(envelope_scan_t *s, envelope_t *env)
{
    envelope_scan_skip_ws(s);
    size_t start = s->pos;
    int is_object = start < s->n && s->p[start] == '{';
    if (envelope_scan_skip_value(s) != 0)
        return -1;
    if (env->n_event++ > 0) {
        envelope_refuse(env, STELE_EPROTOCOL, "envelope repeats key \"$event\"");
    } else if (!is_object) {
        envelope_refuse(env, STELE_ENOTOBJECT, "envelope's $event is not an object");
    } else {
        env->event = s->p + start;
        env->event_len = s->pos - start;
    }
    return 0;
}

/* Reads the value of $wait: a wait level's name. Returns 0 or -1 (syntax). */
static int
envelope_take_wait(envelope_scan_t *s, envelope_t *env)
{
    char name[ENVELOPE_NAME_BYTES];
    size_t len = 0;
    envelope_scan_skip_ws(s);
    int is_string = s->pos < s->n && s->p[s->pos] == '"';
    if ((is_string ? envelope_scan_string(s, name, &len) : envelope_scan_skip_value(s)) != 0)
        return -1;
    if (env->n_wait++ > 0)
        envelope_refuse(env, STELE_EPROTOCOL, "envelope repeats key \"$wait\"");
    else if (!is_string || len > sizeof name || protocol_wait_parse(name, len, &env->wait) != 0)
        envelope_refuse(env, STELE_EPROTOCOL,
                        "unknown wait level in envelope: use none, written, durable or "
                        "shipped");
    return 0;
}

/* Reads one member, "key": value. Returns 0 or -1 (syntax). */
static int
envelope_take_member(envelope_scan_t *s, envelope_t *env)
{
    char key[ENVELOPE_NAME_BYTES + 1];
    size_t len = 0;
    envelope_scan_skip_ws(s);
    if (s->pos >= s->n || s->p[s->pos] != '"' || envelope_scan_string(s, key, &len) != 0 ||
        envelope_scan_expect(s, ':') != 0)
        return -1;
    if (envelope_name_is(key, len, "$event")) {
        env->is_envelope = 1;
        return envelope_take_event(s, env);
    }
    if (envelope_name_is(key, len, "$wait")) {
        env->is_envelope = 1;
        return envelope_take_wait(s, env);
    }
    char shown[64];
    key[len < ENVELOPE_NAME_BYTES ? len : ENVELOPE_NAME_BYTES] = '\0';
    stele_log_quote(shown, sizeof shown, key);
    envelope_refuse(env, STELE_EPROTOCOL,
                    "unknown envelope key %s: an envelope holds only $event and $wait", shown);
    return envelope_scan_skip_value(s);
}

/* Reads the top-level object: its members, then nothing but whitespace. Returns 0, or the
 * byte offset + 1 where it stopped being one JSON object. */
static size_t
envelope_scan_top(envelope_scan_t *s, envelope_t *env)
{
    if (envelope_scan_expect(s, '{') != 0)
        return s->pos + 1;
    envelope_scan_skip_ws(s);
    if (s->pos < s->n && s->p[s->pos] == '}') {
        s->pos++;
    } else {
        for (;;) {
            if (envelope_take_member(s, env) != 0)
                return s->pos + 1;
            envelope_scan_skip_ws(s);
            if (s->pos < s->n && s->p[s->pos] == ',') {
                s->pos++;
                continue;
            }
            if (envelope_scan_expect(s, '}') != 0)
                return s->pos + 1;
            break;
        }
    }
    envelope_scan_skip_ws(s);
    return s->pos < s->n ? s->pos + 1 : 0;
}

int
protocol_envelope_parse(const char *line, size_t len, protocol_request_t *out, stele_error_t *err)
{
    envelope_scan_t s = {.p = line, .n = len, .pos = 0};
    envelope_t env = {.wait = out->wait};
    size_t bad_at = envelope_scan_top(&s, &env);
    if (!env.is_envelope)
        return 0;
    if (bad_at)
        return error_set(err, STELE_EJSON, "malformed JSON request: envelope at byte %zu",
                         bad_at - 1);
    if (env.problem)
        return error_set(err, env.problem, "%s", env.problem_message);
    if (env.n_event == 0)
        return error_set(err, STELE_EPROTOCOL, "envelope has no $event");
    out->json = env.event;
    out->json_len = env.event_len;
    out->wait = env.wait;
    return 1;
}
