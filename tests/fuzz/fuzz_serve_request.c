/*
 * fuzz_serve_request.c: libFuzzer target for the server's input path: the line framer
 * (serve_frame.c) and the request parser (serve_request.c), fed the way the event loop
 * feeds them, in reads of varying size. Checks what the loop relies on: the framer always
 * makes progress or asks for more, never returns a line longer than the limit, never holds
 * more than limit + one read; the parser either returns 0 with exactly one event form or
 * an error code with a reply that formats.
 *
 * The first input byte picks the read size and the line limit, so short limits (where the
 * oversize paths live) get covered as well as the default.
 * Built with clang when STELE_BUILD_FUZZ is on; test_serve_request also replays it on
 * random inputs in every build (serve_fuzz_one_input).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

int serve_fuzz_one_input(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
serve_fuzz_check(int cond)
{
    if (!cond)
        abort();
}

static void
serve_fuzz_request(const char *line, size_t len)
{
    serve_request_t req;
    stele_error_t err = {0};
    char reply[SERVE_REPLY_MAX_BYTES];
    int rc = serve_request_parse(line, len, STELE_WAIT_DURABLE, &req, &err);
    if (rc == 0) {
        serve_fuzz_check(req.json != NULL);
        serve_fuzz_check((unsigned)req.wait <= STELE_WAIT_SHIPPED);
        if (req.json)
            serve_fuzz_check(req.json >= line && req.json + req.json_len <= line + len);
    } else {
        serve_fuzz_check(rc < 0 && err.code == rc);
        size_t n = serve_reply_format(reply, sizeof reply, rc, 0, &err);
        serve_fuzz_check(n > 0 && n < sizeof reply && reply[n - 1] == '\n');
        serve_fuzz_check(memchr(reply, '\n', n) == reply + n - 1);
    }
}

int
serve_fuzz_one_input(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t read_bytes = 1 + (data[0] & 0x0f) * 7;
    serve_frame_t fr = {.max_line_bytes = (data[0] & 0x80) ? 16u + (size_t)(data[0] & 0x30)
                                                           : SERVE_DEFAULT_MAX_LINE_BYTES};
    data++;
    size--;
    /* What the loop keeps between reads: at most one partial line plus one read. */
    char *held = malloc(fr.max_line_bytes + read_bytes + 1);
    size_t held_len = 0, pos = 0;
    serve_fuzz_check(held != NULL);
    while (pos < size || held_len > 0) {
        size_t take = size - pos < read_bytes ? size - pos : read_bytes;
        int is_eof = pos + take == size;
        serve_fuzz_check(held_len + take <= fr.max_line_bytes + read_bytes);
        memcpy(held + held_len, data + pos, take);
        held_len += take;
        pos += take;
        size_t off = 0;
        for (;;) {
            const char *line;
            size_t line_len, consumed;
            serve_frame_kind_t kind = serve_frame_next(&fr, held + off, held_len - off, is_eof,
                                                       &line, &line_len, &consumed);
            serve_fuzz_check(consumed <= held_len - off);
            off += consumed;
            if (kind == SERVE_FRAME_NEED_MORE)
                break;
            serve_fuzz_check(consumed > 0);
            if (kind == SERVE_FRAME_LINE) {
                serve_fuzz_check(line_len <= fr.max_line_bytes);
                serve_fuzz_request(line, line_len);
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
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return serve_fuzz_one_input(data, size);
}
#endif
