/*
 * protocol.h: the wire protocol of `stele serve` (docs/protocol.md), the one definition that
 * the server (serve_*.c) and the client (serve_client.c) share: wait-level names, request
 * envelopes (written by the client, read by the server), reply lines (written by the server,
 * read by the client), line framing, and the growable buffer both sides keep their unsent and
 * unread bytes in.
 *
 * Pure functions: no I/O, no engine, no globals, any thread. tests/fuzz/fuzz_protocol.c
 * fuzzes the reading side and checks that what one side writes the other reads back.
 */
#ifndef STELE_ENGINE_PROTOCOL_H
#define STELE_ENGINE_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "stele.h"

/* Longest request line a server accepts by default: an event of max_record_bytes (1 MiB)
 * written as JSON may grow (escapes, number text), so twice that. */
#define PROTOCOL_DEFAULT_MAX_LINE_BYTES (2u * 1024u * 1024u)

/* Largest reply line protocol_reply_format() writes, '\n' included: every byte of the
 * message and hint may escape to \u00XX. */
#define PROTOCOL_REPLY_MAX_BYTES (64 + 2 * 6 * (STELE_ERROR_MESSAGE_BYTES + STELE_ERROR_HINT_BYTES))

/* ---- wait levels ------------------------------------------------------------------------ */

/* Parses a wait level's name ("none", "written", "durable", "shipped"), `len` bytes, no NUL
 * needed. Returns 0, or STELE_EINVAL with *out unchanged. */
int protocol_wait_parse(const char *text, size_t len, stele_wait_t *out);

/* ---- the growable buffer ---------------------------------------------------------------- */

/* Bytes data[off, len) are held (unsent, or received and not yet used); cap is allocated.
 * A zeroed struct is an empty buffer that holds no memory. */
typedef struct protocol_buf {
    char *data;
    size_t off, len, cap;
} protocol_buf_t;

/* Makes room for `n` more bytes at data + len. The held bytes move to the front before the
 * buffer grows, so it never holds more than the largest held span plus one request for
 * room. Returns 0 or -ENOMEM (the held bytes are untouched). */
int protocol_buf_reserve(protocol_buf_t *b, size_t n);

/* Appends n bytes. Returns 0 or -ENOMEM (nothing appended). */
int protocol_buf_append(protocol_buf_t *b, const char *data, size_t n);

/* Drops n (<= held) bytes from the front; an emptied buffer starts again at offset 0. */
void protocol_buf_consume(protocol_buf_t *b, size_t n);

/* Bytes held. */
size_t protocol_buf_held(const protocol_buf_t *b);

/* Frees the memory; the buffer is empty and usable again. */
void protocol_buf_free(protocol_buf_t *b);

/* ---- line framing ----------------------------------------------------------------------- */

/* Splits a byte stream into lines of at most max_line_bytes. A longer line is reported once
 * as oversize and its bytes are discarded up to the next '\n', never buffered whole. */
typedef struct protocol_frame {
    size_t max_line_bytes;
    int is_discarding; /* inside an oversize line: drop bytes until '\n' */
} protocol_frame_t;

typedef enum protocol_frame_kind {
    PROTOCOL_FRAME_LINE = 0,     /* line[0..len) is a complete line, '\n' excluded */
    PROTOCOL_FRAME_OVERSIZE = 1, /* a line exceeded the limit (reported once per line) */
    PROTOCOL_FRAME_NEED_MORE = 2 /* no complete line: keep data[consumed..n) and read more */
} protocol_frame_kind_t;

/*
 * Looks at data[0..n) and returns what comes next; *consumed receives the bytes to drop
 * from the front (the line and its '\n', the discarded bytes, or 0). With is_eof set, a
 * final line without '\n' is returned as a line. *line points into data.
 */
protocol_frame_kind_t protocol_frame_next(protocol_frame_t *fr, const char *data, size_t n,
                                          int is_eof, const char **line, size_t *line_len,
                                          size_t *consumed);

/* ---- requests ----------------------------------------------------------------------------- */

/* Appends one request line to `out`: the envelope {"$event":<json>,"$wait":"<level>"} and
 * '\n'. The JSON text is copied verbatim except that raw CR and LF become spaces (whitespace
 * outside strings, forbidden inside them), so valid JSON keeps its meaning and stays one
 * line. `wait` must be a stele_wait_t. Returns 0 or -ENOMEM (nothing appended). */
int protocol_request_encode(protocol_buf_t *out, const char *json, size_t len, stele_wait_t wait);

/* One parsed request line. The event is always the client's JSON text, borrowed from the
 * line: the whole line for a bare event, the $event object's text for an envelope, so the
 * engine validates both alike (stele_append_json). */
typedef struct protocol_request {
    stele_wait_t wait;
    const char *json; /* points into the line */
    size_t json_len;
} protocol_request_t;

/*
 * Parses one request line (without its '\n'; a trailing '\r' is ignored). A line is either
 * a bare event (a JSON object, appended at default_wait) or an envelope
 * {"$event": {...}, "$wait": "none|written|durable|shipped"}. Only the envelope's top level
 * is read here; the event itself is validated by the engine when appended.
 * Returns 0 and fills *out, or STELE_EEMPTY (blank line), STELE_EJSON (an envelope that is
 * not one JSON object), STELE_ENOTOBJECT ($event not an object), STELE_EPROTOCOL (unknown or
 * repeated envelope key, unknown wait level, missing $event), with err (may be NULL)
 * filled. Nothing is allocated: *out borrows from the line.
 */
int protocol_request_parse(const char *line, size_t len, stele_wait_t default_wait,
                           protocol_request_t *out, stele_error_t *err);

/*
 * Inside the module (protocol_envelope.c): reads the top level of a line that may be an
 * envelope in any spelling. Returns 1 and fills out->json, out->json_len and out->wait
 * (left as given when the envelope names none) when it is an envelope, 0 when it is a bare
 * event, or a negative code with err filled.
 */
int protocol_envelope_parse(const char *line, size_t len, protocol_request_t *out,
                            stele_error_t *err);

/* ---- replies ------------------------------------------------------------------------------ */

/* Formats a reply line ending in '\n' into buf (cap >= PROTOCOL_REPLY_MAX_BYTES):
 * {"seq":N} when code == 0, else {"error":{"code":C,"name":"...","message":"...","hint":"..."}}
 * (message and hint from err when non-NULL, else stele_strerror()). Returns its length. */
size_t protocol_reply_format(char *buf, size_t cap, int code, uint64_t seq,
                             const stele_error_t *err);

/*
 * Reads one reply line (without its '\n'). Returns 0 with *seq_out (may be NULL) set, the
 * reply's error code with err filled with its message and hint, or STELE_EPROTOCOL when the
 * line is not a reply (err says why).
 */
int protocol_reply_parse(const char *line, size_t len, uint64_t *seq_out, stele_error_t *err);

#endif /* STELE_ENGINE_PROTOCOL_H */
