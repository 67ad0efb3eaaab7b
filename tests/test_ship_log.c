/*
 * test_ship_log.c: libmongoc's log lines, as stele routes them (engine/ship_mongoc.c): never on
 * stdout (it carries `stele tail`'s JSON), on stderr in stele's one-line logfmt, warnings
 * and above by default (the endSessions warning of servers without sessions is debug), and with
 * URI passwords redacted. No server needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stele.h"

/* stdout and stderr sent to files while a test runs, so it can read what reached them. */
typedef struct captured {
    char dir[PATH_MAX];
    char out_path[PATH_MAX + 16];
    char err_path[PATH_MAX + 16];
    int saved_out, saved_err;
} captured_t;

static void
capture_begin(captured_t *c)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(c->dir, sizeof c->dir, "%s/stele-shiplog-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    assert_non_null(mkdtemp(c->dir));
    snprintf(c->out_path, sizeof c->out_path, "%s/stdout", c->dir);
    snprintf(c->err_path, sizeof c->err_path, "%s/stderr", c->dir);
    fflush(stdout);
    fflush(stderr);
    c->saved_out = dup(STDOUT_FILENO);
    c->saved_err = dup(STDERR_FILENO);
    int out = open(c->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(c->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(out >= 0 && err >= 0 && c->saved_out >= 0 && c->saved_err >= 0);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    close(out);
    close(err);
}

/* Restores stdout and stderr and returns what each received (free both). */
static void
capture_end(captured_t *c, char **out_text, char **err_text)
{
    fflush(stdout);
    fflush(stderr);
    dup2(c->saved_out, STDOUT_FILENO);
    dup2(c->saved_err, STDERR_FILENO);
    close(c->saved_out);
    close(c->saved_err);
    const char *paths[2] = {c->out_path, c->err_path};
    char **texts[2] = {out_text, err_text};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(paths[i], "r");
        assert_non_null(f);
        *texts[i] = calloc(1, 65536);
        assert_non_null(*texts[i]);
        size_t n = fread(*texts[i], 1, 65535, f);
        (*texts[i])[n] = '\0';
        fclose(f);
        unlink(paths[i]);
    }
    rmdir(c->dir);
    fputs(*err_text, stderr); /* shown for the record */
}

static void
test_mongoc_warning_goes_to_stderr_as_stele_log_line_without_password(void **state)
{
    (void)state;
    unsetenv("STELE_MONGOC_LOG_LEVEL");
    captured_t c;
    capture_begin(&c);
    /* An unknown URI option makes libmongoc warn while stele parses the sink's URI; the
     * journal directory does not exist, so the call fails right after. */
    stele_sink_options_t so;
    stele_sink_options_init(&so);
    so.uri = "mongodb://auditor:hunter2pw@127.0.0.1:1/?bogusOption=1";
    stele_remote_report_t rep;
    stele_error_t err = {0};
    int rc = stele_remote_check("no-such-journal-dir", &so, 0, 0, &rep, &err);
    /* libmongoc messages that quote a URI are redacted by shape; debug stays out. */
    mongoc_log(MONGOC_LOG_LEVEL_WARNING, "cluster",
               "cannot reach mongodb://auditor:hunter2pw@db1.example:27017/audit");
    mongoc_log(MONGOC_LOG_LEVEL_ERROR, "cluster", "\"quoted\"\nand a newline");
    /* libmongoc's own handler prints these levels on stdout; below warning, stele drops them */
    mongoc_log(MONGOC_LOG_LEVEL_MESSAGE, "cluster", "a message line for nobody");
    mongoc_log(MONGOC_LOG_LEVEL_DEBUG, "cluster", "a debug line for nobody");
    /* a warning nobody can act on (a server without sessions) is a debug line */
    mongoc_log(MONGOC_LOG_LEVEL_WARNING, "client",
               "Couldn't send \"endSessions\": no such command: 'endSessions' (for nobody)");
    char *out_text, *err_text;
    capture_end(&c, &out_text, &err_text);
    assert_int_not_equal(rc, 0);
    assert_string_equal(out_text, "");
    assert_null(strstr(err_text, "hunter2pw"));
    assert_non_null(strstr(err_text, "level=warn msg=\"Unsupported URI option"));
    assert_non_null(strstr(err_text, "bogusoption"));
    assert_non_null(strstr(err_text, "component=mongoc"));
    assert_non_null(strstr(err_text, "mongodb://auditor:***@db1.example:27017/audit"));
    assert_non_null(strstr(err_text, "level=error msg=\"\\\"quoted\\\"\\x0aand a newline\""));
    assert_null(strstr(err_text, "for nobody"));
    /* one line per message, each in stele's format */
    for (char *line = err_text; *line; line = strchr(line, '\n') + 1) {
        assert_memory_equal(line, "ts=", 3);
        assert_non_null(strchr(line, '\n'));
    }
    free(out_text);
    free(err_text);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mongoc_warning_goes_to_stderr_as_stele_log_line_without_password),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
