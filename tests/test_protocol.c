/*
 * test_protocol.c: the serve wire protocol (engine/protocol.h) that the server and the
 * client share: line framing, request envelopes both ways, reply lines both ways, wait-level
 * names, the growable buffer, and a replay of the libFuzzer target (tests/fuzz/fuzz_protocol.c) on
 * random inputs so every build runs it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include <cmocka.h>

#include "error.h"
#include "protocol.h"
#include "serve_fixture.h"

int protocol_fuzz_one_input(const uint8_t *data, size_t size);

/* ---- framing -------------------------------------------------------------------------------- */

static void
test_frame_splits_lines_and_keeps_partial_tail(void **state)
{
    (void)state;
    protocol_frame_t fr = {.max_line_bytes = 100};
    const char data[] = "{\"a\":1}\n{\"b\":2}\n{\"c\"";
    const char *line;
    size_t len, consumed, off = 0, n = sizeof data - 1;
    assert_int_equal(protocol_frame_next(&fr, data, n, 0, &line, &len, &consumed),
                     PROTOCOL_FRAME_LINE);
    assert_int_equal(len, 7);
    assert_memory_equal(line, "{\"a\":1}", 7);
    off += consumed;
    assert_int_equal(protocol_frame_next(&fr, data + off, n - off, 0, &line, &len, &consumed),
                     PROTOCOL_FRAME_LINE);
    assert_memory_equal(line, "{\"b\":2}", 7);
    off += consumed;
    assert_int_equal(protocol_frame_next(&fr, data + off, n - off, 0, &line, &len, &consumed),
                     PROTOCOL_FRAME_NEED_MORE);
    assert_int_equal(consumed, 0);
    assert_int_equal(n - off, 4);
}

static void
test_frame_returns_last_line_without_newline_at_eof(void **state)
{
    (void)state;
    protocol_frame_t fr = {.max_line_bytes = 100};
    const char *line;
    size_t len, consumed;
    assert_int_equal(protocol_frame_next(&fr, "{}", 2, 1, &line, &len, &consumed),
                     PROTOCOL_FRAME_LINE);
    assert_int_equal(len, 2);
    assert_int_equal(consumed, 2);
    assert_int_equal(protocol_frame_next(&fr, "", 0, 1, &line, &len, &consumed),
                     PROTOCOL_FRAME_NEED_MORE);
}

static void
test_frame_reports_oversize_once_and_discards_until_newline(void **state)
{
    (void)state;
    protocol_frame_t fr = {.max_line_bytes = 8};
    const char *line;
    size_t len, consumed;
    /* First read: 12 bytes without '\n' exceed the limit: reported, consumed, dropped. */
    assert_int_equal(protocol_frame_next(&fr, "aaaaaaaaaaaa", 12, 0, &line, &len, &consumed),
                     PROTOCOL_FRAME_OVERSIZE);
    assert_int_equal(consumed, 12);
    /* Later reads of the same line are swallowed without a second report. */
    assert_int_equal(
        protocol_frame_next(&fr, "bbbbbbbbbbbbbbbbbbbb", 20, 0, &line, &len, &consumed),
        PROTOCOL_FRAME_NEED_MORE);
    assert_int_equal(consumed, 20);
    /* The '\n' ends it; the next line is framed normally. */
    const char tail[] = "cc\n{}\n";
    assert_int_equal(protocol_frame_next(&fr, tail, 6, 0, &line, &len, &consumed),
                     PROTOCOL_FRAME_LINE);
    assert_int_equal(len, 2);
    assert_memory_equal(line, "{}", 2);
    assert_int_equal(consumed, 6);
}

static void
test_frame_rejects_complete_line_over_limit(void **state)
{
    (void)state;
    protocol_frame_t fr = {.max_line_bytes = 4};
    const char *line;
    size_t len, consumed;
    assert_int_equal(protocol_frame_next(&fr, "12345\n{}\n", 9, 0, &line, &len, &consumed),
                     PROTOCOL_FRAME_OVERSIZE);
    assert_int_equal(consumed, 6);
    assert_int_equal(fr.is_discarding, 0);
    assert_int_equal(protocol_frame_next(&fr, "1234\n", 5, 0, &line, &len, &consumed),
                     PROTOCOL_FRAME_LINE);
    assert_int_equal(len, 4);
}

/* ---- requests ------------------------------------------------------------------------------- */

static void
test_request_bare_event_is_passed_through_at_default_wait(void **state)
{
    (void)state;
    protocol_request_t req;
    const char line[] = "{\"who\":\"alice\",\"what\":\"login\"}";
    assert_int_equal(protocol_request_parse(line, sizeof line - 1, STELE_WAIT_WRITTEN, &req, NULL),
                     0);
    assert_ptr_equal(req.json, line);
    assert_int_equal(req.json_len, sizeof line - 1);
    assert_int_equal(req.wait, STELE_WAIT_WRITTEN);
}

static void
test_request_envelope_carries_event_and_wait(void **state)
{
    (void)state;
    protocol_request_t req;
    const char line[] = "{\"$wait\":\"none\",\"$event\":{\"who\":\"bob\",\"n\":3}}\r";
    assert_int_equal(protocol_request_parse(line, sizeof line - 1, STELE_WAIT_DURABLE, &req, NULL),
                     0);
    assert_int_equal(req.wait, STELE_WAIT_NONE);
    assert_int_equal(req.json_len, strlen("{\"who\":\"bob\",\"n\":3}"));
    assert_memory_equal(req.json, "{\"who\":\"bob\",\"n\":3}", req.json_len);
}

static void
test_request_client_envelope_passes_event_text_through(void **state)
{
    (void)state;
    protocol_request_t req;
    const char line[] = "{\"$event\":{\"who\":\"x\"},\"$wait\":\"written\"}";
    assert_int_equal(protocol_request_parse(line, sizeof line - 1, STELE_WAIT_DURABLE, &req, NULL),
                     0);
    assert_int_equal(req.wait, STELE_WAIT_WRITTEN);
    assert_int_equal(req.json_len, strlen("{\"who\":\"x\"}"));
    assert_memory_equal(req.json, "{\"who\":\"x\"}", req.json_len);
    /* Text that closes the envelope early reaches the engine as one malformed JSON value. */
    const char forged[] = "{\"$event\":{\"a\":1},\"$wait\":\"none\",\"$wait\":\"durable\"}";
    assert_int_equal(
        protocol_request_parse(forged, sizeof forged - 1, STELE_WAIT_DURABLE, &req, NULL), 0);
    assert_int_equal(req.wait, STELE_WAIT_DURABLE);
    assert_memory_equal(req.json, "{\"a\":1},\"$wait\":\"none\"", req.json_len);
}

static void
test_request_escaped_envelope_key_is_an_envelope(void **state)
{
    (void)state;
    protocol_request_t req;
    const char line[] = "{\"\\u0024event\":{\"a\":1}}";
    assert_int_equal(protocol_request_parse(line, sizeof line - 1, STELE_WAIT_DURABLE, &req, NULL),
                     0);
    assert_int_equal(req.json_len, 7);
    assert_memory_equal(req.json, "{\"a\":1}", 7);
    assert_int_equal(req.wait, STELE_WAIT_DURABLE);
}

static void
test_request_dollar_inside_a_value_is_a_bare_event(void **state)
{
    (void)state;
    protocol_request_t req;
    const char line[] = "{\"price\":\"$5\",\"note\":{\"k\":\"$event\"}}";
    assert_int_equal(protocol_request_parse(line, sizeof line - 1, STELE_WAIT_DURABLE, &req, NULL),
                     0);
    assert_ptr_equal(req.json, line);
}

/* Whatever the envelope's spelling, its $event must reach the engine as the client's JSON
 * text, so that the engine's JSON checks apply exactly as to a bare event. A JSON parser
 * reading the whole envelope would turn {"$date":...} and the other extended-JSON wrappers
 * into BSON types, wrap integers beyond int64, accept NaN, and stop after the first object
 * of the line: events the engine refuses as text would then reach the journal. */
static void
test_request_envelope_in_any_spelling_passes_event_text_through(void **state)
{
    (void)state;
    static const struct {
        const char *line, *event;
        stele_wait_t wait;
        int is_refused; /* by the engine's validation of the event text */
    } cases[] = {
        {"{\"$wait\":\"none\",\"$event\":{\"a\":{\"$date\":\"2020-01-01T00:00:00Z\"}}}",
         "{\"a\":{\"$date\":\"2020-01-01T00:00:00Z\"}}", STELE_WAIT_NONE, 1},
        {"{ \"$event\" : {\"n\":99999999999999999999} ,\t\"$wait\" : \"written\" }",
         "{\"n\":99999999999999999999}", STELE_WAIT_WRITTEN, 1},
        {"{\"\\u0024event\":{\"a\":NaN}}", "{\"a\":NaN}", STELE_WAIT_DURABLE, 1},
        {"{\"$wait\":\"none\",\"$event\":{\"b\":{\"$binary\":{\"base64\":\"AA==\",\"subType\":"
         "\"00\"}}}}",
         "{\"b\":{\"$binary\":{\"base64\":\"AA==\",\"subType\":\"00\"}}}", STELE_WAIT_NONE, 1},
        {"{\"$wait\":\"n\\u006fne\",\"$event\":{\"s\":\"}\\\"{]\",\"l\":[{},[]]}}",
         "{\"s\":\"}\\\"{]\",\"l\":[{},[]]}", STELE_WAIT_NONE, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        protocol_request_t req;
        stele_error_t err = {0};
        const char *line = cases[i].line;
        int rc = protocol_request_parse(line, strlen(line), STELE_WAIT_DURABLE, &req, &err);
        if (rc != 0)
            fail_msg("case %zu (%s): %s %s", i, line, stele_errname(rc), err.message);
        if (!req.json || req.json_len != strlen(cases[i].event) ||
            memcmp(req.json, cases[i].event, req.json_len) != 0)
            fail_msg("case %zu (%s): the event did not come through as its text", i, line);
        assert_int_equal(req.wait, cases[i].wait);
        rc = stele_validate_json(req.json, req.json_len, NULL, &err);
        if ((rc != 0) != cases[i].is_refused)
            fail_msg("case %zu (%s): the engine's validation gave %s", i, line, stele_errname(rc));
    }
}

typedef struct bad_request {
    const char *line;
    int code;
} bad_request_t;

static void
test_request_rejects_malformed_envelopes(void **state)
{
    (void)state;
    static const bad_request_t cases[] = {
        {"", STELE_EEMPTY},
        {"  \t\r", STELE_EEMPTY},
        {"{\"$event\":{\"a\":1}", STELE_EJSON},
        {"{\"$event\":[1,2]}", STELE_ENOTOBJECT},
        {"{\"$event\":\"text\"}", STELE_ENOTOBJECT},
        {"{\"$event\":{},\"$event\":{}}", STELE_EPROTOCOL},
        {"{\"$event\":{},\"$wait\":\"now\"}", STELE_EPROTOCOL},
        {"{\"$event\":{},\"$wait\":2}", STELE_EPROTOCOL},
        {"{\"$wait\":\"none\",\"$wait\":\"none\",\"$event\":{}}", STELE_EPROTOCOL},
        {"{\"$wait\":\"none\"}", STELE_EPROTOCOL},
        {"{\"$event\":{},\"user\":\"x\"}", STELE_EPROTOCOL},
        {"{\"$event\":{\"a\":1}} x", STELE_EJSON},
        {"{\"$wait\":\"none\",\"$event\":{\"a\":1}}{\"$wait\":\"none\",\"$event\":{\"a\":2}}",
         STELE_EJSON},
        {"{\"$wait\":\"none\",\"$event\":{\"a\":1}", STELE_EJSON},
        {"{\"$wait\":\"none\" \"$event\":{}}", STELE_EJSON},
        {"{\"$wait\":none,\"$event\":{}}", STELE_EJSON},
        {"{\"$event\":{},\"$wait\":\"none\",}", STELE_EJSON},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        protocol_request_t req;
        stele_error_t err = {0};
        int rc = protocol_request_parse(cases[i].line, strlen(cases[i].line), STELE_WAIT_DURABLE,
                                        &req, &err);
        if (rc != cases[i].code)
            fail_msg("case %zu (%s): got %s, want %s", i, cases[i].line, stele_errname(rc),
                     stele_errname(cases[i].code));
        assert_int_equal(err.code, rc);
        assert_true(strlen(err.message) > 0);
    }
}

static void
test_wait_names_round_trip(void **state)
{
    (void)state;
    for (int w = STELE_WAIT_NONE; w <= STELE_WAIT_SHIPPED; w++) {
        stele_wait_t parsed = STELE_WAIT_NONE, public_parsed = STELE_WAIT_NONE;
        const char *name = stele_wait_name((stele_wait_t)w);
        assert_int_equal(protocol_wait_parse(name, strlen(name), &parsed), 0);
        assert_int_equal(parsed, w);
        assert_int_equal(stele_wait_parse(name, &public_parsed), 0);
        assert_int_equal(public_parsed, w);
    }
    stele_wait_t parsed = STELE_WAIT_SHIPPED;
    assert_int_equal(protocol_wait_parse("durablex", 8, &parsed), STELE_EINVAL);
    assert_int_equal(protocol_wait_parse("", 0, &parsed), STELE_EINVAL);
    assert_int_equal(stele_wait_parse("Durable", &parsed), STELE_EINVAL);
    assert_int_equal(stele_wait_parse(NULL, &parsed), STELE_EINVAL);
    assert_int_equal(parsed, STELE_WAIT_SHIPPED);
    assert_string_equal(stele_wait_name((stele_wait_t)7), "?");
}

/* The client's request is one line whatever the caller's text, and the server's fast path
 * reads back exactly the event and the level. */
static void
test_request_encode_writes_one_line_the_parser_reads_back(void **state)
{
    (void)state;
    const char pretty[] = "{\r\n  \"who\": \"alice\",\n  \"n\": 1\n}";
    const char sent[] = "{    \"who\": \"alice\",   \"n\": 1 }";
    protocol_buf_t out = {0};
    for (int w = STELE_WAIT_NONE; w <= STELE_WAIT_SHIPPED; w++) {
        protocol_buf_free(&out);
        assert_int_equal(protocol_request_encode(&out, pretty, sizeof pretty - 1, (stele_wait_t)w),
                         0);
        assert_int_equal(out.data[out.len - 1], '\n');
        assert_ptr_equal(memchr(out.data, '\n', out.len), out.data + out.len - 1);
        protocol_request_t req;
        assert_int_equal(protocol_request_parse(out.data, out.len - 1, STELE_WAIT_NONE, &req, NULL),
                         0);
        assert_int_equal(req.wait, w);
        assert_int_equal(req.json_len, sizeof sent - 1);
        assert_memory_equal(req.json, sent, req.json_len);
    }
    const char tail[] = ",\"$wait\":\"shipped\"}\n";
    assert_memory_equal(out.data + out.len - (sizeof tail - 1), tail, sizeof tail - 1);
    protocol_buf_free(&out);
}

/* ---- the buffer ------------------------------------------------------------------------------ */

static void
test_buf_moves_held_bytes_forward_before_growing(void **state)
{
    (void)state;
    protocol_buf_t b = {0};
    char block[200];
    memset(block, 'a', sizeof block);
    assert_int_equal(protocol_buf_append(&b, block, sizeof block), 0);
    size_t cap = b.cap;
    assert_true(cap >= sizeof block);
    protocol_buf_consume(&b, 150);
    assert_int_equal(protocol_buf_held(&b), 50);
    /* 50 held + 150 more fits the same allocation once the held bytes move to the front. */
    memset(block, 'b', sizeof block);
    assert_int_equal(protocol_buf_append(&b, block, 150), 0);
    assert_int_equal(b.cap, cap);
    assert_int_equal(b.off, 0);
    assert_int_equal(protocol_buf_held(&b), 200);
    assert_int_equal(b.data[49], 'a');
    assert_int_equal(b.data[50], 'b');
    protocol_buf_consume(&b, 200);
    assert_int_equal(b.off, 0);
    assert_int_equal(b.len, 0);
    assert_int_equal(protocol_buf_reserve(&b, SIZE_MAX), -ENOMEM);
    protocol_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.cap, 0);
}

/* ---- replies -------------------------------------------------------------------------------- */

static void
test_reply_success_carries_seq(void **state)
{
    (void)state;
    char buf[PROTOCOL_REPLY_MAX_BYTES];
    size_t n = protocol_reply_format(buf, sizeof buf, 0, 18446744073709551615u, NULL);
    assert_string_equal(buf, "{\"seq\":18446744073709551615}\n");
    assert_int_equal(n, strlen(buf));
}

static void
test_reply_error_escapes_message_and_names_code(void **state)
{
    (void)state;
    char buf[PROTOCOL_REPLY_MAX_BYTES];
    stele_error_t err = {.code = STELE_EDOLLARKEY};
    snprintf(err.message, sizeof err.message, "key \"$set\"\n starts with '$'");
    snprintf(err.hint, sizeof err.hint, "rename it");
    size_t n = protocol_reply_format(buf, sizeof buf, STELE_EDOLLARKEY, 0, &err);
    assert_int_equal(buf[n - 1], '\n');
    assert_ptr_equal(memchr(buf, '\n', n), buf + n - 1);
    uint64_t seq = 0;
    buf[n - 1] = '\0';
    assert_int_equal(ts_reply_code(buf, &seq), STELE_EDOLLARKEY);
    assert_non_null(strstr(buf, "\"name\":\"STELE_EDOLLARKEY\""));
    assert_non_null(strstr(buf, "\"hint\":\"rename it\""));
}

static void
test_reply_with_invalid_utf8_message_falls_back_to_code_text(void **state)
{
    (void)state;
    char buf[PROTOCOL_REPLY_MAX_BYTES];
    stele_error_t err = {.code = STELE_EUTF8};
    snprintf(err.message, sizeof err.message, "bad key \xff\xfe");
    size_t n = protocol_reply_format(buf, sizeof buf, STELE_EUTF8, 0, &err);
    buf[n - 1] = '\0';
    assert_non_null(strstr(buf, stele_strerror(STELE_EUTF8)));
    uint64_t seq;
    assert_int_equal(ts_reply_code(buf, &seq), STELE_EUTF8);
}

static void
test_reply_of_longest_message_and_hint_fits(void **state)
{
    (void)state;
    char buf[PROTOCOL_REPLY_MAX_BYTES];
    stele_error_t err = {.code = STELE_EJSON};
    memset(err.message, 0x01, sizeof err.message - 1); /* each byte escapes to \u0001 */
    err.message[sizeof err.message - 1] = '\0';
    memset(err.hint, '"', sizeof err.hint - 1);
    err.hint[sizeof err.hint - 1] = '\0';
    size_t n = protocol_reply_format(buf, sizeof buf, STELE_EJSON, 0, &err);
    assert_true(n < sizeof buf);
    assert_int_equal(buf[n - 1], '\n');
    buf[n - 1] = '\0';
    uint64_t seq;
    assert_int_equal(ts_reply_code(buf, &seq), STELE_EJSON);
}

/* What the client makes of each kind of reply line. */
static void
test_reply_parse_reads_seq_errors_and_refuses_the_rest(void **state)
{
    (void)state;
    static const struct {
        const char *line;
        int code;
        uint64_t seq;
        const char *message, *hint;
    } cases[] = {
        {"{\"seq\":18446744073709551615}", 0, 18446744073709551615u, NULL, NULL},
        {"{ \"seq\" : 7 }", 0, 7, NULL, NULL},
        {"{\"error\":{\"code\":-1024,\"name\":\"STELE_EDOLLARKEY\",\"message\":\"key \\\"$x\\\"\","
         "\"hint\":\"rename it\",\"later\":true}}",
         STELE_EDOLLARKEY, 0, "key \"$x\"", "rename it"},
        {"{\"error\":{\"code\":-1006}}", STELE_ECLOSED, 0, "error reply without a message", ""},
        {"{\"error\":{\"code\":5,\"message\":\"m\"}}", STELE_EPROTOCOL, 0, "m", ""},
        {"{\"error\":\"text\"}", STELE_EPROTOCOL, 0, NULL, NULL},
        {"{\"seq\":\"5\"}", STELE_EPROTOCOL, 0, NULL, NULL},
        {"{\"seq\":", STELE_EPROTOCOL, 0, NULL, NULL},
        {"", STELE_EPROTOCOL, 0, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        stele_error_t err = {0};
        uint64_t seq = 0;
        int rc = protocol_reply_parse(cases[i].line, strlen(cases[i].line), &seq, &err);
        if (rc != cases[i].code)
            fail_msg("case %zu (%s): got %s, want %s", i, cases[i].line, stele_errname(rc),
                     stele_errname(cases[i].code));
        if (rc == 0) {
            assert_true(seq == cases[i].seq);
            continue;
        }
        assert_int_equal(err.code, rc);
        assert_true(strlen(err.message) > 0);
        if (cases[i].message)
            assert_string_equal(err.message, cases[i].message);
        if (cases[i].hint)
            assert_string_equal(err.hint, cases[i].hint);
    }
}

/* What the server formats, the client reads back: code, message (escapes undone), hint. */
static void
test_reply_error_round_trips_through_the_client_parser(void **state)
{
    (void)state;
    char buf[PROTOCOL_REPLY_MAX_BYTES];
    stele_error_t err, back = {0};
    error_set_hinted(&err, STELE_EDOLLARKEY, "rename \\ it", "%s",
                     "key \"$set\"\n\t\x01 at byte 1 \xc3\xa9");
    size_t n = protocol_reply_format(buf, sizeof buf, STELE_EDOLLARKEY, 0, &err);
    assert_int_equal(protocol_reply_parse(buf, n - 1, NULL, &back), STELE_EDOLLARKEY);
    assert_string_equal(back.message, err.message);
    assert_string_equal(back.hint, err.hint);
}

/* ---- the fuzz target, replayed ----------------------------------------------------------------
 */

static void
test_fuzz_target_survives_random_and_mutated_requests(void **state)
{
    (void)state;
    static const char *const seeds[] = {
        "{\"a\":1}\n",
        "{\"$event\":{\"a\":1},\"$wait\":\"written\"}\n",
        "{\"\\u0024wait\":\"none\",\"$event\":{}}\n\n",
        "[1]\n{bad\n\xff\xfe\n",
    };
    unsigned seed = ts_seed("test_fuzz_target_survives_random_and_mutated_requests");
    srand(seed);
    uint8_t buf[512];
    for (int iter = 0; iter < 20000; iter++) {
        size_t n;
        if (iter % 2 == 0) {
            const char *s = seeds[(size_t)rand() % (sizeof seeds / sizeof seeds[0])];
            n = strlen(s) + 1;
            buf[0] = (uint8_t)rand();
            memcpy(buf + 1, s, n - 1);
            for (int flips = rand() % 4; flips > 0; flips--)
                buf[1 + (size_t)rand() % (n - 1)] = (uint8_t)rand();
        } else {
            n = (size_t)rand() % sizeof buf;
            for (size_t i = 0; i < n; i++)
                buf[i] = (uint8_t)(rand() % 4 == 0 ? '\n' : rand());
        }
        assert_int_equal(protocol_fuzz_one_input(buf, n), 0);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_splits_lines_and_keeps_partial_tail),
        cmocka_unit_test(test_frame_returns_last_line_without_newline_at_eof),
        cmocka_unit_test(test_frame_reports_oversize_once_and_discards_until_newline),
        cmocka_unit_test(test_frame_rejects_complete_line_over_limit),
        cmocka_unit_test(test_request_bare_event_is_passed_through_at_default_wait),
        cmocka_unit_test(test_request_envelope_carries_event_and_wait),
        cmocka_unit_test(test_request_client_envelope_passes_event_text_through),
        cmocka_unit_test(test_request_escaped_envelope_key_is_an_envelope),
        cmocka_unit_test(test_request_dollar_inside_a_value_is_a_bare_event),
        cmocka_unit_test(test_request_envelope_in_any_spelling_passes_event_text_through),
        cmocka_unit_test(test_request_rejects_malformed_envelopes),
        cmocka_unit_test(test_wait_names_round_trip),
        cmocka_unit_test(test_request_encode_writes_one_line_the_parser_reads_back),
        cmocka_unit_test(test_buf_moves_held_bytes_forward_before_growing),
        cmocka_unit_test(test_reply_success_carries_seq),
        cmocka_unit_test(test_reply_error_escapes_message_and_names_code),
        cmocka_unit_test(test_reply_with_invalid_utf8_message_falls_back_to_code_text),
        cmocka_unit_test(test_reply_of_longest_message_and_hint_fits),
        cmocka_unit_test(test_reply_parse_reads_seq_errors_and_refuses_the_rest),
        cmocka_unit_test(test_reply_error_round_trips_through_the_client_parser),
        cmocka_unit_test(test_fuzz_target_survives_random_and_mutated_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
