/*
 * protocol.c: the wire protocol of `stele serve` (docs/protocol.md; contracts in protocol.h):
 * wait-level names, the growable buffer, line framing, request envelopes both ways, and
 * reply lines both ways. The envelope in other spellings than the client's is read by
 * protocol_envelope.c. No I/O and no engine: the server and the client call these, and
 * tests/fuzz/fuzz_protocol.c drives them directly.
 *
 * Why the client's envelope has one exact text: protocol_request_encode() writes it and
 * protocol_request_parse() recognises it from the same head and tail strings below, without
 * a parser, so the common request costs the server one parse (the engine's, of the event).
 *
 * Invariant that bounds a server's memory per connection: a caller of protocol_frame_next()
 * never holds more than max_line_bytes of one line, because as soon as max_line_bytes bytes
 * without '\n' are seen the line is reported as oversize and its bytes are consumed
 * (discarded) from then on.
 */
#include "protocol.h"

#include "error.h"

#include <bson/bson.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* First allocation of a buffer; it doubles from there. */
#define PROTOCOL_BUF_MIN_BYTES 256

static const char *const protocol_wait_names[] = {"none", "written", "durable", "shipped"};

/* The client's envelope: head, the event's JSON text, wait_head, the level's name, tail. */
static const char protocol_envelope_head[] = "{\"$event\":";
static const char protocol_envelope_wait_head[] = ",\"$wait\":\"";
static const char protocol_envelope_tail[] = "\"}";

#define PROTOCOL_LITERAL_LEN(s) (sizeof(s) - 1)

/* ---- wait levels ------------------------------------------------------------------------ */

int
protocol_wait_parse(const char *text, size_t len, stele_wait_t *out)
{
    for (int i = STELE_WAIT_NONE; i <= STELE_WAIT_SHIPPED; i++) {
        if (strlen(protocol_wait_names[i]) == len &&
            memcmp(text, protocol_wait_names[i], len) == 0) {
            *out = (stele_wait_t)i;
            return 0;
        }
    }
    return STELE_EINVAL;
}

int
stele_wait_parse(const char *name, stele_wait_t *out)
{
    if (!name || !out)
        return STELE_EINVAL;
    return protocol_wait_parse(name, strlen(name), out);
}

const char *
stele_wait_name(stele_wait_t wait)
{
    return (unsigned)wait <= STELE_WAIT_SHIPPED ? protocol_wait_names[wait] : "?";
}

/* ---- the growable buffer ---------------------------------------------------------------- */

int
protocol_buf_reserve(protocol_buf_t *b, size_t n)
{
    if (n <= b->cap - b->len)
        return 0;
    if (b->off > 0) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
        if (n <= b->cap - b->len)
            return 0;
    }
    if (n > SIZE_MAX / 2 - b->len)
        return -ENOMEM;
    size_t new_cap = b->cap ? b->cap : PROTOCOL_BUF_MIN_BYTES;
    while (new_cap < b->len + n)
        new_cap *= 2;
    char *p = realloc(b->data, new_cap);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->cap = new_cap;
    return 0;
}

int
protocol_buf_append(protocol_buf_t *b, const char *data, size_t n)
{
    if (protocol_buf_reserve(b, n) != 0)
        return -ENOMEM;
    if (n > 0)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    return 0;
}

void
protocol_buf_consume(protocol_buf_t *b, size_t n)
{
    b->off += n;
    if (b->off >= b->len)
        b->off = b->len = 0;
}

size_t
protocol_buf_held(const protocol_buf_t *b)
{
    return b->len - b->off;
}

void
protocol_buf_free(protocol_buf_t *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* ---- line framing ----------------------------------------------------------------------- */

protocol_frame_kind_t
protocol_frame_next(protocol_frame_t *fr, const char *data, size_t n, int is_eof, const char **line,
                    size_t *line_len, size_t *consumed)
{
    size_t skipped = 0;
    *line = NULL;
    *line_len = 0;
    *consumed = 0;
    const char *nl = n ? memchr(data, '\n', n) : NULL;
    if (fr->is_discarding) {
        if (!nl) {
            *consumed = n;
            return PROTOCOL_FRAME_NEED_MORE;
        }
        /* The oversize line ends here: what follows is a fresh line. */
        fr->is_discarding = 0;
        skipped = (size_t)(nl - data) + 1;
        data += skipped;
        n -= skipped;
        nl = n ? memchr(data, '\n', n) : NULL;
    }
    size_t len = nl ? (size_t)(nl - data) : n;
    if (len > fr->max_line_bytes) {
        /* Report once; discard what we have and, without a '\n' yet, the rest to come. */
        *consumed = skipped + (nl ? len + 1 : n);
        fr->is_discarding = nl ? 0 : 1;
        return PROTOCOL_FRAME_OVERSIZE;
    }
    if (!nl && !(is_eof && n > 0)) {
        *consumed = skipped;
        return PROTOCOL_FRAME_NEED_MORE;
    }
    *line = data;
    *line_len = len;
    *consumed = skipped + (nl ? len + 1 : n);
    return PROTOCOL_FRAME_LINE;
}

/* ---- requests ----------------------------------------------------------------------------- */

int
protocol_request_encode(protocol_buf_t *out, const char *json, size_t len, stele_wait_t wait)
{
    const char *name = protocol_wait_names[wait];
    size_t head_len = PROTOCOL_LITERAL_LEN(protocol_envelope_head);
    size_t wait_head_len = PROTOCOL_LITERAL_LEN(protocol_envelope_wait_head);
    size_t tail_len = PROTOCOL_LITERAL_LEN(protocol_envelope_tail);
    size_t name_len = strlen(name);
    if (len > SIZE_MAX / 2 ||
        protocol_buf_reserve(out, head_len + len + wait_head_len + name_len + tail_len + 1) != 0)
        return -ENOMEM;
    char *w = out->data + out->len;
    memcpy(w, protocol_envelope_head, head_len);
    w += head_len;
    for (size_t i = 0; i < len; i++)
        w[i] = json[i] == '\n' || json[i] == '\r' ? ' ' : json[i];
    w += len;
    memcpy(w, protocol_envelope_wait_head, wait_head_len);
    w += wait_head_len;
    memcpy(w, name, name_len);
    w += name_len;
    memcpy(w, protocol_envelope_tail, tail_len);
    w += tail_len;
    *w++ = '\n';
    out->len = (size_t)(w - out->data);
    return 0;
}

static int
protocol_is_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return 0;
    }
    return 1;
}

/* A '$' can only start an envelope key when the line holds one, literally or escaped. */
static int
protocol_may_be_envelope(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    if (i == n || p[i] != '{')
        return 0; /* not an object: the engine reports it */
    return memchr(p, '$', n) != NULL || memmem(p, n, "\\u0024", 6) != NULL;
}

/*
 * The envelope exactly as protocol_request_encode() writes it is taken apart without a
 * parser: the event goes to the engine as JSON text, which accepts it only if it is one
 * complete object, so text that tries to close the envelope early
 * ({"a":1},"$wait":"none") is rejected there as malformed JSON. Any other spelling takes
 * the general path. Returns 1 when it matched.
 */
static int
protocol_parse_client_envelope(const char *line, size_t len, protocol_request_t *out)
{
    size_t head_len = PROTOCOL_LITERAL_LEN(protocol_envelope_head);
    size_t wait_head_len = PROTOCOL_LITERAL_LEN(protocol_envelope_wait_head);
    size_t tail_len = PROTOCOL_LITERAL_LEN(protocol_envelope_tail);
    if (len < head_len + wait_head_len + tail_len + 1 ||
        memcmp(line, protocol_envelope_head, head_len) != 0 ||
        memcmp(line + len - tail_len, protocol_envelope_tail, tail_len) != 0)
        return 0;
    for (int w = STELE_WAIT_NONE; w <= STELE_WAIT_SHIPPED; w++) {
        size_t name_len = strlen(protocol_wait_names[w]);
        size_t after_event = wait_head_len + name_len + tail_len;
        if (len < head_len + after_event + 1)
            continue;
        const char *wait_head = line + len - after_event;
        if (memcmp(wait_head, protocol_envelope_wait_head, wait_head_len) == 0 &&
            memcmp(wait_head + wait_head_len, protocol_wait_names[w], name_len) == 0) {
            out->wait = (stele_wait_t)w;
            out->json = line + head_len;
            out->json_len = len - head_len - after_event;
            return 1;
        }
    }
    return 0;
}

int
protocol_request_parse(const char *line, size_t len, stele_wait_t default_wait,
                       protocol_request_t *out, stele_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->wait = default_wait;
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (protocol_is_blank(line, len))
        return error_set(err, STELE_EEMPTY, "empty request line");
    if (protocol_parse_client_envelope(line, len, out))
        return 0;
    if (protocol_may_be_envelope(line, len)) {
        int rc = protocol_envelope_parse(line, len, out, err);
        if (rc != 0)
            return rc < 0 ? rc : 0;
    }
    out->json = line;
    out->json_len = len;
    return 0;
}

/* ---- replies ------------------------------------------------------------------------------ */

/* Appends `text` as a JSON string (quotes included), or the fallback when it is not valid
 * UTF-8 (an engine message may quote a client's bad bytes). */
static void
protocol_append_json_string(bson_string_t *s, const char *text, const char *fallback)
{
    char *escaped = bson_utf8_escape_for_json(text, -1);
    if (!escaped)
        escaped = bson_utf8_escape_for_json(fallback, -1);
    bson_string_append_printf(s, "\"%s\"", escaped ? escaped : "");
    bson_free(escaped);
}

size_t
protocol_reply_format(char *buf, size_t cap, int code, uint64_t seq, const stele_error_t *err)
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
    protocol_append_json_string(s, message, stele_strerror(code));
    if (hint[0]) {
        bson_string_append(s, ",\"hint\":");
        protocol_append_json_string(s, hint, "");
    }
    bson_string_append(s, "}}\n");
    n = snprintf(buf, cap, "%s", s->str);
    bson_string_free(s, true);
    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

/* The common reply, {"seq":N}, without a JSON parser. Returns 1 when it matched. */
static int
protocol_parse_seq_reply(const char *line, size_t len, uint64_t *seq_out)
{
    static const char head[] = "{\"seq\":";
    size_t i = PROTOCOL_LITERAL_LEN(head);
    uint64_t seq = 0;
    if (len < i + 2 || memcmp(line, head, i) != 0 || line[len - 1] != '}')
        return 0;
    for (; i < len - 1; i++) {
        if (line[i] < '0' || line[i] > '9')
            return 0;
        uint64_t digit = (uint64_t)(line[i] - '0');
        if (seq > (UINT64_MAX - digit) / 10)
            return 0; /* beyond a seq */
        seq = seq * 10 + digit;
    }
    if (seq_out)
        *seq_out = seq;
    return 1;
}

/* The members of an error reply's object; unknown ones are ignored, so a server may add
 * some. Returns the code it carries (STELE_EPROTOCOL unless a negative one). */
static int
protocol_parse_error_reply(bson_iter_t *members, stele_error_t *err)
{
    int code = STELE_EPROTOCOL;
    const char *message = "error reply without a message", *hint = "";
    while (bson_iter_next(members)) {
        const char *key = bson_iter_key(members);
        if (strcmp(key, "code") == 0 && BSON_ITER_HOLDS_NUMBER(members))
            code = (int)bson_iter_as_int64(members);
        else if (strcmp(key, "message") == 0 && BSON_ITER_HOLDS_UTF8(members))
            message = bson_iter_utf8(members, NULL);
        else if (strcmp(key, "hint") == 0 && BSON_ITER_HOLDS_UTF8(members))
            hint = bson_iter_utf8(members, NULL);
    }
    int rc = code < 0 ? code : STELE_EPROTOCOL;
    return error_set_hinted(err, rc, hint, "%s", message);
}

int
protocol_reply_parse(const char *line, size_t len, uint64_t *seq_out, stele_error_t *err)
{
    if (protocol_parse_seq_reply(line, len, seq_out))
        return 0;
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)line, (ssize_t)len, &berr);
    bson_iter_t it, sub;
    int rc;
    if (!doc)
        return error_set(err, STELE_EPROTOCOL, "malformed reply from stele server: %s",
                         berr.message);
    if (bson_iter_init_find(&it, doc, "seq") && BSON_ITER_HOLDS_NUMBER(&it)) {
        if (seq_out)
            *seq_out = (uint64_t)bson_iter_as_int64(&it);
        rc = 0;
    } else if (bson_iter_init_find(&it, doc, "error") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
               bson_iter_recurse(&it, &sub)) {
        rc = protocol_parse_error_reply(&sub, err);
    } else {
        rc = error_set(err, STELE_EPROTOCOL, "reply from stele server has neither seq nor error");
    }
    bson_destroy(doc);
    return rc;
}
