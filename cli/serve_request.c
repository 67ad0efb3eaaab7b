/*
 * serve_request.c: one request line in, one reply line out (docs/protocol.md). Pure
 * functions with no engine and no I/O, so the libFuzzer target (tests/fuzz/
 * fuzz_serve_request.c) and the table tests drive them directly.
 *
 * Why a bare event is not parsed here: the engine validates and encodes it anyway
 * (stele_append_json), so the common case costs one parse. The envelope as the client
 * library writes it is recognised by its exact text (serve_parse_client_envelope); only
 * another line that may be an envelope (it holds a '$', literally or as \u0024) has its top
 * level scanned to find out (serve_parse_envelope). Either way the event goes to the engine
 * as the client's JSON text, never as BSON from another parser, so an event is judged the
 * same whether it came bare or in an envelope of any spelling.
 * Envelope keys start with '$' because an event may not have such keys: a bare event can
 * never be mistaken for an envelope, and an envelope never for an event.
 */
#include "serve.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const serve_wait_names[] = {"none", "written", "durable", "shipped"};

static void __attribute__((format(printf, 3, 4)))
serve_request_fail(stele_error_t *err, int code, const char *fmt, ...)
{
    if (!err)
        return;
    err->code = code;
    err->hint[0] = '\0';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

int
serve_wait_parse(const char *text, size_t len, stele_wait_t *out)
{
    for (int i = 0; i < 4; i++) {
        if (strlen(serve_wait_names[i]) == len && memcmp(text, serve_wait_names[i], len) == 0) {
            *out = (stele_wait_t)i;
            return 0;
        }
    }
    return STELE_EINVAL;
}

const char *
serve_wait_name(stele_wait_t wait)
{
    return (unsigned)wait < 4 ? serve_wait_names[wait] : "?";
}

static int
serve_is_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return 0;
    }
    return 1;
}

/* A '$' can only start an envelope key when the line holds one, literally or escaped. */
static int
serve_may_be_envelope(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    if (i == n || p[i] != '{')
        return 0; /* not an object: the engine reports it */
    return memchr(p, '$', n) != NULL || memmem(p, n, "\\u0024", 6) != NULL;
}

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
typedef struct serve_scan {
    const char *p;
    size_t n;
    size_t pos;
} serve_scan_t;

/* Longest envelope key or wait level kept for comparison and messages. */
#define SERVE_SCAN_NAME_BYTES 32

static int
serve_scan_is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static void
serve_scan_skip_ws(serve_scan_t *s)
{
    while (s->pos < s->n && serve_scan_is_ws(s->p[s->pos]))
        s->pos++;
}

/* Consumes `c` (after whitespace); 0, or -1 when something else comes. */
static int
serve_scan_expect(serve_scan_t *s, char c)
{
    serve_scan_skip_ws(s);
    if (s->pos >= s->n || s->p[s->pos] != c)
        return -1;
    s->pos++;
    return 0;
}

static int
serve_scan_hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d == 16u)
            return -1;
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

/* Reads one escape after its backslash; stores the byte it stands for in *out. An escape of
 * a character beyond ASCII becomes '?': it can never match an envelope key or a wait name.
 * Returns 0, or -1 when malformed. */
static int
serve_scan_escape(serve_scan_t *s, char *out)
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
    unsigned code;
    if (c != 'u' || s->n - s->pos < 4 || serve_scan_hex4(s->p + s->pos, &code) != 0)
        return -1;
    s->pos += 4;
    *out = code < 0x80 ? (char)code : '?';
    return 0;
}

/* Reads the string at s->pos (its opening quote). With `name` set, its first bytes are
 * decoded into name[0..SERVE_SCAN_NAME_BYTES) and *name_len receives the decoded length
 * (which may be larger). Returns 0, or -1 when malformed or unterminated. */
static int
serve_scan_string(serve_scan_t *s, char *name, size_t *name_len)
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
        if (c == '\\' && serve_scan_escape(s, &c) != 0)
            return -1;
        if (name && n_decoded < SERVE_SCAN_NAME_BYTES)
            name[n_decoded] = c;
        n_decoded++;
    }
    return -1;
}

/* Skips an object or array at s->pos, brackets counted outside strings. What is inside is
 * checked by whoever reads the value (the engine, for $event). Returns 0 or -1. */
static int
serve_scan_skip_nested(serve_scan_t *s)
{
    size_t depth = 0;
    while (s->pos < s->n) {
        char c = s->p[s->pos];
        if (c == '"') {
            if (serve_scan_string(s, NULL, NULL) != 0)
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
serve_scan_skip_value(serve_scan_t *s)
{
    serve_scan_skip_ws(s);
    if (s->pos >= s->n)
        return -1;
    char c = s->p[s->pos];
    if (c == '"')
        return serve_scan_string(s, NULL, NULL);
    if (c == '{' || c == '[')
        return serve_scan_skip_nested(s);
    /* A literal or a number: a run of the characters they are made of. */
    size_t start = s->pos;
    while (s->pos < s->n && s->p[s->pos] && strchr("truefalsn0123456789+-.E", s->p[s->pos]))
        s->pos++;
    return s->pos > start ? 0 : -1;
}

/* What the top level of a line says about it being an envelope. */
typedef struct serve_envelope {
    int is_envelope;     /* a top-level key is $event or $wait */
    int n_event, n_wait; /* how often each appeared */
    int problem;         /* the first refusal in member order, 0 if none */
    char problem_message[STELE_ERROR_MESSAGE_BYTES];
    const char *event; /* the first $event's object text */
    size_t event_len;
    stele_wait_t wait;
} serve_envelope_t;

static void __attribute__((format(printf, 3, 4)))
serve_envelope_refuse(serve_envelope_t *env, int code, const char *fmt, ...)
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
serve_name_is(const char *name, size_t len, const char *literal)
{
    return len == strlen(literal) && memcmp(name, literal, len) == 0;
}

/* Reads the value of $event: its span when it is an object. Returns 0 or -1 (syntax). */
static int
serve_envelope_take_event(serve_scan_t *s, serve_envelope_t *env)
{
    serve_scan_skip_ws(s);
    size_t start = s->pos;
    int is_object = start < s->n && s->p[start] == '{';
    if (serve_scan_skip_value(s) != 0)
        return -1;
    if (env->n_event++ > 0) {
        serve_envelope_refuse(env, STELE_EPROTOCOL, "envelope repeats key \"$event\"");
    } else if (!is_object) {
        serve_envelope_refuse(env, STELE_ENOTOBJECT, "envelope's $event is not an object");
    } else {
        env->event = s->p + start;
        env->event_len = s->pos - start;
    }
    return 0;
}

/* Reads the value of $wait: a wait level's name. Returns 0 or -1 (syntax). */
static int
serve_envelope_take_wait(serve_scan_t *s, serve_envelope_t *env)
{
    char name[SERVE_SCAN_NAME_BYTES];
    size_t len = 0;
    serve_scan_skip_ws(s);
    int is_string = s->pos < s->n && s->p[s->pos] == '"';
    if ((is_string ? serve_scan_string(s, name, &len) : serve_scan_skip_value(s)) != 0)
        return -1;
    if (env->n_wait++ > 0)
        serve_envelope_refuse(env, STELE_EPROTOCOL, "envelope repeats key \"$wait\"");
    else if (!is_string || len > sizeof name || serve_wait_parse(name, len, &env->wait) != 0)
        serve_envelope_refuse(env, STELE_EPROTOCOL,
                              "unknown wait level in envelope: use none, written, durable or "
                              "shipped");
    return 0;
}

/* Reads one member, "key": value. Returns 0 or -1 (syntax). */
static int
serve_envelope_take_member(serve_scan_t *s, serve_envelope_t *env)
{
    char key[SERVE_SCAN_NAME_BYTES + 1];
    size_t len = 0;
    serve_scan_skip_ws(s);
    if (s->pos >= s->n || s->p[s->pos] != '"' || serve_scan_string(s, key, &len) != 0 ||
        serve_scan_expect(s, ':') != 0)
        return -1;
    if (serve_name_is(key, len, "$event")) {
        env->is_envelope = 1;
        return serve_envelope_take_event(s, env);
    }
    if (serve_name_is(key, len, "$wait")) {
        env->is_envelope = 1;
        return serve_envelope_take_wait(s, env);
    }
    char shown[64];
    key[len < SERVE_SCAN_NAME_BYTES ? len : SERVE_SCAN_NAME_BYTES] = '\0';
    stele_log_quote(shown, sizeof shown, key);
    serve_envelope_refuse(env, STELE_EPROTOCOL,
                          "unknown envelope key %s: an envelope holds only $event and $wait",
                          shown);
    return serve_scan_skip_value(s);
}

/* Reads the top-level object: its members, then nothing but whitespace. Returns 0, or the
 * byte offset + 1 where it stopped being one JSON object. */
static size_t
serve_envelope_scan(serve_scan_t *s, serve_envelope_t *env)
{
    if (serve_scan_expect(s, '{') != 0)
        return s->pos + 1;
    serve_scan_skip_ws(s);
    if (s->pos < s->n && s->p[s->pos] == '}') {
        s->pos++;
    } else {
        for (;;) {
            if (serve_envelope_take_member(s, env) != 0)
                return s->pos + 1;
            serve_scan_skip_ws(s);
            if (s->pos < s->n && s->p[s->pos] == ',') {
                s->pos++;
                continue;
            }
            if (serve_scan_expect(s, '}') != 0)
                return s->pos + 1;
            break;
        }
    }
    serve_scan_skip_ws(s);
    return s->pos < s->n ? s->pos + 1 : 0;
}

/* Returns 1 when the line is an envelope and fills req, 0 when it is a plain event (then
 * the engine parses and judges all of it), or a negative code with err filled. */
static int
serve_parse_envelope(const char *line, size_t len, serve_request_t *req, stele_error_t *err)
{
    serve_scan_t s = {.p = line, .n = len, .pos = 0};
    serve_envelope_t env = {.wait = req->wait};
    size_t bad_at = serve_envelope_scan(&s, &env);
    if (!env.is_envelope)
        return 0;
    if (bad_at) {
        serve_request_fail(err, STELE_EJSON, "malformed JSON request: envelope at byte %zu",
                           bad_at - 1);
        return STELE_EJSON;
    }
    if (env.problem) {
        serve_request_fail(err, env.problem, "%s", env.problem_message);
        return env.problem;
    }
    if (env.n_event == 0) {
        serve_request_fail(err, STELE_EPROTOCOL, "envelope has no $event");
        return STELE_EPROTOCOL;
    }
    req->json = env.event;
    req->json_len = env.event_len;
    req->wait = env.wait;
    return 1;
}

/*
 * The envelope exactly as stele_client_send_json() writes it, {"$event":E,"$wait":"W"},
 * is taken apart without a parser: E goes to the engine as JSON text, which accepts it only
 * if it is one complete object, so text that tries to close the envelope early
 * ({"a":1},"$wait":"none") is rejected there as malformed JSON. Any other spelling takes the
 * general path. Returns 1 when it matched.
 */
static int
serve_parse_client_envelope(const char *line, size_t len, serve_request_t *out)
{
    static const char head[] = "{\"$event\":";
    static const char wait_key[] = ",\"$wait\":\"";
    size_t head_len = sizeof head - 1, key_len = sizeof wait_key - 1;
    if (len < head_len + key_len + 3 || memcmp(line, head, head_len) != 0 ||
        memcmp(line + len - 2, "\"}", 2) != 0)
        return 0;
    for (int w = STELE_WAIT_NONE; w <= STELE_WAIT_SHIPPED; w++) {
        size_t name_len = strlen(serve_wait_names[w]);
        size_t tail_len = key_len + name_len + 2;
        if (len < head_len + tail_len + 1)
            continue;
        const char *tail = line + len - tail_len;
        if (memcmp(tail, wait_key, key_len) == 0 &&
            memcmp(tail + key_len, serve_wait_names[w], name_len) == 0) {
            out->wait = (stele_wait_t)w;
            out->json = line + head_len;
            out->json_len = len - head_len - tail_len;
            return 1;
        }
    }
    return 0;
}

int
serve_request_parse(const char *line, size_t len, stele_wait_t default_wait, serve_request_t *out,
                    stele_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->wait = default_wait;
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (serve_is_blank(line, len)) {
        serve_request_fail(err, STELE_EEMPTY, "empty request line");
        return STELE_EEMPTY;
    }
    if (serve_parse_client_envelope(line, len, out))
        return 0;
    if (serve_may_be_envelope(line, len)) {
        int rc = serve_parse_envelope(line, len, out, err);
        if (rc != 0)
            return rc < 0 ? rc : 0;
    }
    out->json = line;
    out->json_len = len;
    return 0;
}

/* Appends `text` as a JSON string (quotes included), or the fallback when it is not valid
 * UTF-8 (an engine message may quote a client's bad bytes). */
static void
serve_append_json_string(bson_string_t *s, const char *text, const char *fallback)
{
    char *escaped = bson_utf8_escape_for_json(text, -1);
    if (!escaped)
        escaped = bson_utf8_escape_for_json(fallback, -1);
    bson_string_append_printf(s, "\"%s\"", escaped ? escaped : "");
    bson_free(escaped);
}

size_t
serve_reply_format(char *buf, size_t cap, int code, uint64_t seq, const stele_error_t *err)
{
    int n;
    if (code == 0) {
        n = snprintf(buf, cap, "{\"seq\":%" PRIu64 "}\n", seq);
        return n < 0 ? 0 : (size_t)n;
    }
    const char *message = err && err->message[0] ? err->message : stele_strerror(code);
    const char *hint = err ? err->hint : "";
    bson_string_t *s = bson_string_new(NULL);
    bson_string_append_printf(s, "{\"error\":{\"code\":%d,\"name\":\"%s\",\"message\":", code,
                              stele_errname(code));
    serve_append_json_string(s, message, stele_strerror(code));
    if (hint[0]) {
        bson_string_append(s, ",\"hint\":");
        serve_append_json_string(s, hint, "");
    }
    bson_string_append(s, "}}\n");
    n = snprintf(buf, cap, "%s", s->str);
    bson_string_free(s, true);
    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}
