/*
 * serve_request.c: one request line in, one reply line out (docs/protocol.md). Pure
 * functions with no engine and no I/O, so the libFuzzer target (tests/fuzz/
 * fuzz_serve_request.c) and the table tests drive them directly.
 *
 * Why a bare event is not parsed here: the engine validates and encodes it anyway
 * (stele_append_json), so the common case costs one parse. The envelope as the client
 * library writes it is recognised by its exact text (serve_parse_client_envelope); only
 * another line that may be an envelope (it holds a '$', literally or as \u0024) is parsed
 * with libbson to find out.
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

void
serve_request_release(serve_request_t *req)
{
    if (req->bson)
        bson_destroy(req->bson);
    req->bson = NULL;
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

/* Reads the envelope's keys. Returns 1 when `doc` is an envelope and fills req, 0 when it
 * is a plain event, or a negative code. */
static int
serve_read_envelope(const bson_t *doc, serve_request_t *req, stele_error_t *err)
{
    bson_iter_t it;
    int has_event = 0, has_wait = 0, is_envelope = 0;
    if (!bson_iter_init(&it, doc))
        return 0;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (strcmp(key, "$event") == 0 || strcmp(key, "$wait") == 0)
            is_envelope = 1;
    }
    if (!is_envelope)
        return 0;
    bson_iter_init(&it, doc);
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (strcmp(key, "$event") == 0) {
            if (has_event++) {
                serve_request_fail(err, STELE_EPROTOCOL, "envelope repeats key \"$event\"");
                return STELE_EPROTOCOL;
            }
            if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
                serve_request_fail(err, STELE_ENOTOBJECT, "envelope's $event is not an object");
                return STELE_ENOTOBJECT;
            }
            uint32_t doc_len = 0;
            const uint8_t *doc_data = NULL;
            bson_iter_document(&it, &doc_len, &doc_data);
            req->bson = bson_new_from_data(doc_data, doc_len);
            if (!req->bson) {
                serve_request_fail(err, STELE_EBSON, "envelope's $event is malformed");
                return STELE_EBSON;
            }
        } else if (strcmp(key, "$wait") == 0) {
            uint32_t n = 0;
            const char *level = BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, &n) : NULL;
            if (has_wait++) {
                serve_request_fail(err, STELE_EPROTOCOL, "envelope repeats key \"$wait\"");
                return STELE_EPROTOCOL;
            }
            if (!level || serve_wait_parse(level, n, &req->wait) != 0) {
                serve_request_fail(err, STELE_EPROTOCOL,
                                   "unknown wait level in envelope: use none, written, durable "
                                   "or shipped");
                return STELE_EPROTOCOL;
            }
        } else {
            char shown[64];
            stele_log_quote(shown, sizeof shown, key);
            serve_request_fail(err, STELE_EPROTOCOL,
                               "unknown envelope key %s: an envelope holds only $event and $wait",
                               shown);
            return STELE_EPROTOCOL;
        }
    }
    if (!has_event) {
        serve_request_fail(err, STELE_EPROTOCOL, "envelope has no $event");
        return STELE_EPROTOCOL;
    }
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
        bson_error_t berr;
        bson_t *doc = bson_new_from_json((const uint8_t *)line, (ssize_t)len, &berr);
        if (!doc) {
            serve_request_fail(err, STELE_EJSON, "malformed JSON request: %s", berr.message);
            return STELE_EJSON;
        }
        int rc = serve_read_envelope(doc, out, err);
        bson_destroy(doc);
        if (rc < 0) {
            serve_request_release(out);
            return rc;
        }
        if (rc == 1)
            return 0;
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
