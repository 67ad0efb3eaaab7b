/*
 * fuzz_protocol.c: libFuzzer target for the serve wire protocol (engine/protocol.h), the
 * module the server reads requests with and the client reads replies with. The input is fed
 * the way the server's event loop feeds it, in reads of varying size, and each line goes
 * through both readers. Checks what the two sides rely on:
 *  - the framer always makes progress or asks for more, never returns a line longer than the
 *    limit, never makes its caller hold more than limit + one read;
 *  - the request parser returns 0 with the event inside the line, or an error code with a
 *    reply that formats as one line;
 *  - what one side writes the other reads back: a parsed request re-encoded the way the
 *    client writes it parses to the same event text and wait level; an error reply parses to
 *    the same code, message and hint, a success reply to the same seq;
 *  - the reply parser (a client reading a broken server) returns 0 or a negative code.
 *
 * The first input byte picks the read size and the line limit, so short limits (where the
 * oversize paths live) get covered as well as the default.
 * Built with clang when STELE_BUILD_FUZZ is on (tests/fuzz.cmake); test_protocol also
 * replays it on random inputs in every build (protocol_fuzz_one_input).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "protocol.h"

int protocol_fuzz_one_input(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
fuzz_check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "protocol: %s\n", what);
        abort();
    }
}

/* The request as the client would send it reads back as the same request. */
static void
fuzz_request_round_trip(const protocol_request_t *req)
{
    protocol_buf_t line = {0};
    protocol_request_t back;
    stele_error_t err = {0};
    fuzz_check(protocol_request_encode(&line, req->json, req->json_len, req->wait) == 0,
               "encode failed");
    fuzz_check(line.len > 0 && line.data[line.len - 1] == '\n' &&
                   memchr(line.data, '\n', line.len) == line.data + line.len - 1,
               "an encoded request is not one line");
    int rc = protocol_request_parse(line.data, line.len - 1, STELE_WAIT_NONE, &back, &err);
    fuzz_check(rc == 0 && back.wait == req->wait && back.json_len == req->json_len,
               "a re-encoded request did not parse back");
    for (size_t i = 0; i < req->json_len; i++) {
        char sent = req->json[i] == '\r' ? ' ' : req->json[i];
        fuzz_check(back.json[i] == sent, "a re-encoded event changed");
    }
    protocol_buf_free(&line);
}

/* The error reply the server would send reads back as the same error. */
static void
fuzz_error_reply_round_trip(int code, const stele_error_t *err)
{
    char reply[PROTOCOL_REPLY_MAX_BYTES];
    stele_error_t back = {0};
    size_t n = protocol_reply_format(reply, sizeof reply, code, 0, err);
    fuzz_check(n > 0 && n < sizeof reply && reply[n - 1] == '\n', "a reply is not a line");
    fuzz_check(memchr(reply, '\n', n) == reply + n - 1, "a reply holds a newline");
    fuzz_check(protocol_reply_parse(reply, n - 1, NULL, &back) == code,
               "an error reply lost its code");
    if (bson_utf8_validate(err->message, strlen(err->message), false))
        fuzz_check(strcmp(back.message, err->message) == 0, "an error reply lost its message");
    fuzz_check(strcmp(back.hint, err->hint) == 0, "an error reply lost its hint");
}

static void
fuzz_seq_reply_round_trip(uint64_t seq)
{
    char reply[PROTOCOL_REPLY_MAX_BYTES];
    uint64_t back = 0;
    size_t n = protocol_reply_format(reply, sizeof reply, 0, seq, NULL);
    fuzz_check(protocol_reply_parse(reply, n - 1, &back, NULL) == 0 && back == seq,
               "a seq reply did not read back");
}

static void
fuzz_line(const char *line, size_t len)
{
    protocol_request_t req;
    stele_error_t err = {0};
    uint64_t seq = 0;
    int rc = protocol_request_parse(line, len, STELE_WAIT_DURABLE, &req, &err);
    if (rc == 0) {
        fuzz_check(req.json != NULL && (unsigned)req.wait <= STELE_WAIT_SHIPPED,
                   "a parsed request has no event or no wait level");
        fuzz_check(req.json >= line && req.json + req.json_len <= line + len,
                   "the event is not inside the line");
        fuzz_request_round_trip(&req);
    } else {
        fuzz_check(rc < 0 && err.code == rc, "a refusal does not fill its error");
        fuzz_error_reply_round_trip(rc, &err);
    }
    rc = protocol_reply_parse(line, len, &seq, &err);
    fuzz_check(rc <= 0, "the reply parser returned a positive code");
    fuzz_seq_reply_round_trip(len > 0 ? seq ^ (uint64_t)(unsigned char)line[0] << 56 : seq);
}

int
protocol_fuzz_one_input(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t read_bytes = 1 + (data[0] & 0x0f) * 7;
    protocol_frame_t fr = {.max_line_bytes = (data[0] & 0x80) ? 16u + (size_t)(data[0] & 0x30)
                                                              : PROTOCOL_DEFAULT_MAX_LINE_BYTES};
    data++;
    size--;
    /* What the loop keeps between reads: at most one partial line plus one read. */
    char *held = malloc(fr.max_line_bytes + read_bytes + 1);
    size_t held_len = 0, pos = 0;
    fuzz_check(held != NULL, "out of memory");
    while (pos < size || held_len > 0) {
        size_t take = size - pos < read_bytes ? size - pos : read_bytes;
        int is_eof = pos + take == size;
        fuzz_check(held_len + take <= fr.max_line_bytes + read_bytes, "held more than a line");
        memcpy(held + held_len, data + pos, take);
        held_len += take;
        pos += take;
        size_t off = 0;
        for (;;) {
            const char *line;
            size_t line_len, consumed;
            protocol_frame_kind_t kind = protocol_frame_next(&fr, held + off, held_len - off,
                                                             is_eof, &line, &line_len, &consumed);
            fuzz_check(consumed <= held_len - off, "consumed more than held");
            off += consumed;
            if (kind == PROTOCOL_FRAME_NEED_MORE)
                break;
            fuzz_check(consumed > 0, "no progress");
            if (kind == PROTOCOL_FRAME_LINE) {
                fuzz_check(line_len <= fr.max_line_bytes, "a line over the limit");
                fuzz_line(line, line_len);
            }
        }
        memmove(held, held + off, held_len - off);
        held_len -= off;
        if (is_eof)
            break;
    }
    free(held);
    return 0;
}

#ifdef STELE_FUZZ_MAIN
/* Seeds (STELE_FUZZ_MAKE_SEEDS=<corpus dir>, tests/fuzz/run-fuzz.sh): each request form, an
 * error and a success reply, and lines the framer must cut; the first byte of each is the
 * mode byte (read size, line limit). */
static const char *const fuzz_seeds[] = {
    "\x03{\"a\":1}\n",
    "\x05{\"$event\":{\"a\":1},\"$wait\":\"written\"}\n",
    "\x07{\"\\u0024wait\":\"none\",\"$event\":{\"s\":\"}\\\"{]\"}}\n\n",
    "\x09{\"$wait\":\"shipped\",\"$event\":{},\"x\":1}\r\n[1]\n",
    ("\x0b{\"seq\":42}\n{\"error\":{\"code\":-1024,\"name\":\"STELE_EDOLLARKEY\",\"message\":"
     "\"key \\\"$set\\\"\",\"hint\":\"h\"}}\n"),
    "\x91{\"$event\":{\"a\":\"0123456789abcdef0123456789\"}}\n{}\n",
};

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *corpus = getenv("STELE_FUZZ_MAKE_SEEDS");
    for (size_t i = 0; corpus && i < sizeof fuzz_seeds / sizeof fuzz_seeds[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%zu", corpus, i);
        FILE *f = fopen(path, "wb");
        size_t len = strlen(fuzz_seeds[i]);
        fuzz_check(f && fwrite(fuzz_seeds[i], 1, len, f) == len && fclose(f) == 0,
                   "could not write a seed");
    }
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return protocol_fuzz_one_input(data, size);
}
#endif
