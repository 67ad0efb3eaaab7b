/*
 * test_log.c: stele's log line (engine/log.c): its shape, the quoting of values, the cut
 * of an overlong line, and one write per line (lines of concurrent threads never mix).
 * stderr is redirected into a pipe for each test and read back.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "stele.h"

enum { TEST_CAPTURE_BYTES = 1 << 20 };

typedef struct capture {
    int saved_stderr;
    int read_fd;
    char *text;
    size_t len;
} capture_t;

static void
capture_start(capture_t *c)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    c->saved_stderr = dup(STDERR_FILENO);
    assert_true(c->saved_stderr >= 0);
    assert_true(dup2(fds[1], STDERR_FILENO) >= 0);
    close(fds[1]);
    c->read_fd = fds[0];
    c->text = NULL;
    c->len = 0;
}

/* Restores stderr and reads everything written meanwhile. For tests that write less than
 * a pipe holds (64 KiB); the thread test drains the pipe while it writes. */
static void
capture_stop(capture_t *c)
{
    assert_true(dup2(c->saved_stderr, STDERR_FILENO) >= 0);
    close(c->saved_stderr);
    c->text = malloc(TEST_CAPTURE_BYTES);
    assert_non_null(c->text);
    ssize_t n;
    while (c->len < TEST_CAPTURE_BYTES - 1 &&
           (n = read(c->read_fd, c->text + c->len, TEST_CAPTURE_BYTES - 1 - c->len)) > 0)
        c->len += (size_t)n;
    c->text[c->len] = '\0';
    close(c->read_fd);
}

/* Whether `line` starts with ts=YYYY-MM-DDTHH:MM:SS.uuuuuuZ and a space. */
static int
has_timestamp(const char *line)
{
    static const char shape[] = "ts=DDDD-DD-DDTDD:DD:DD.DDDDDDZ ";
    for (size_t i = 0; i < sizeof shape - 1; i++) {
        if (shape[i] == 'D' ? (line[i] < '0' || line[i] > '9') : line[i] != shape[i])
            return 0;
    }
    return 1;
}

static void
test_log_line_has_timestamp_level_message_and_pairs(void **state)
{
    (void)state;
    capture_t c;
    capture_start(&c);
    stele_log_write("warn", "sink unreachable", "sink=%s retry_ms=%d", "audit", 800);
    stele_log_write("info", "started", NULL);
    stele_log_write("info", "started", "%s", "");
    capture_stop(&c);
    char *second = strchr(c.text, '\n');
    assert_non_null(second);
    assert_true(has_timestamp(c.text));
    const char *rest = c.text + strlen("ts=2026-11-30T20:33:00.123456Z ");
    assert_int_equal(
        strncmp(rest, "level=warn msg=\"sink unreachable\" sink=audit retry_ms=800\n",
                strlen("level=warn msg=\"sink unreachable\" sink=audit retry_ms=800\n")),
        0);
    /* no pairs: no trailing space, both ways of saying so */
    for (int i = 0; i < 2; i++) {
        char *line = second + 1;
        second = strchr(line, '\n');
        assert_non_null(second);
        assert_true(has_timestamp(line));
        *second = '\0';
        assert_string_equal(line + strlen("ts=2026-11-30T20:33:00.123456Z "),
                            "level=info msg=\"started\"");
    }
    free(c.text);
}

static void
test_log_quote_escapes_quotes_backslashes_and_control_bytes(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(stele_log_quote(buf, sizeof buf, "a \"b\" \\c\n\x01\x7f"),
                        "\"a \\\"b\\\" \\\\c\\x0a\\x01\\x7f\"");
    assert_string_equal(stele_log_quote(buf, sizeof buf, NULL), "\"\"");
    assert_string_equal(stele_log_quote(buf, sizeof buf, "caf\xc3\xa9"), "\"caf\xc3\xa9\"");
    /* cut to fit, still quoted and terminated */
    char small[10];
    const char *q = stele_log_quote(small, sizeof small, "abcdefghijklmnop");
    assert_true(strlen(q) < sizeof small);
    assert_int_equal(q[0], '"');
    assert_int_equal(q[strlen(q) - 1], '"');
    char tiny[2] = "x";
    assert_string_equal(stele_log_quote(tiny, sizeof tiny, "abc"), "");
}

static void
test_log_overlong_line_is_cut_and_still_ends_in_newline(void **state)
{
    (void)state;
    char big[4000];
    memset(big, 'v', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    capture_t c;
    capture_start(&c);
    stele_log_write("error", "long", "value=%s", big);
    capture_stop(&c);
    assert_true(c.len <= 1024);
    assert_int_equal(c.text[c.len - 1], '\n');
    assert_null(memchr(c.text, '\n', c.len - 1));
    free(c.text);
}

enum { TEST_THREADS = 4, TEST_LINES_PER_THREAD = 200 };

static void *
test_log_thread(void *arg)
{
    long id = (long)arg;
    char pad[300];
    memset(pad, 'a' + (int)id, sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    for (int i = 0; i < TEST_LINES_PER_THREAD; i++)
        stele_log_write("info", "tick", "thread=%ld i=%d pad=%s", id, i, pad);
    return NULL;
}

/* Reads the pipe until its write end closes: 4 x 200 lines of ~370 bytes are more than a
 * pipe holds. */
static void *
test_log_drain(void *arg)
{
    capture_t *c = arg;
    ssize_t n;
    while (c->len < TEST_CAPTURE_BYTES - 1 &&
           (n = read(c->read_fd, c->text + c->len, TEST_CAPTURE_BYTES - 1 - c->len)) > 0)
        c->len += (size_t)n;
    return NULL;
}

/* Lines written at once from several threads come out whole: each line holds one thread's
 * padding only, and every line arrives. */
static void
test_log_lines_of_concurrent_threads_never_mix(void **state)
{
    (void)state;
    capture_t c;
    capture_start(&c);
    c.text = malloc(TEST_CAPTURE_BYTES);
    assert_non_null(c.text);
    pthread_t drain, writers[TEST_THREADS];
    assert_int_equal(pthread_create(&drain, NULL, test_log_drain, &c), 0);
    for (long i = 0; i < TEST_THREADS; i++)
        assert_int_equal(pthread_create(&writers[i], NULL, test_log_thread, (void *)i), 0);
    for (int i = 0; i < TEST_THREADS; i++)
        pthread_join(writers[i], NULL);
    assert_true(dup2(c.saved_stderr, STDERR_FILENO) >= 0); /* closes the pipe's write end */
    close(c.saved_stderr);
    pthread_join(drain, NULL);
    close(c.read_fd);
    c.text[c.len] = '\0';
    int n_lines = 0;
    for (char *line = c.text, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        *nl = '\0';
        assert_true(has_timestamp(line));
        const char *pad = strstr(line, "pad=");
        assert_non_null(pad);
        for (const char *p = pad + 4; *p; p++)
            assert_int_equal(*p, pad[4]);
        assert_int_equal(strlen(pad + 4), 299);
        n_lines++;
    }
    assert_int_equal(n_lines, TEST_THREADS * TEST_LINES_PER_THREAD);
    free(c.text);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_line_has_timestamp_level_message_and_pairs),
        cmocka_unit_test(test_log_quote_escapes_quotes_backslashes_and_control_bytes),
        cmocka_unit_test(test_log_overlong_line_is_cut_and_still_ends_in_newline),
        cmocka_unit_test(test_log_lines_of_concurrent_threads_never_mix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
