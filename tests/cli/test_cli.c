/*
 * test_cli.c: the `stele` command end to end: each subcommand and flag run as a child
 * process against a journal in a fresh temporary directory, including `tail -f` following
 * a writer in another process. Bad input has its own table test (test_cli_bad_input.c).
 */
#include "cli_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <regex.h>
#include <time.h>
#include <unistd.h>

#include <bson/bson.h>
#include <cmocka.h>

#include <stele.h>

typedef struct fixture {
    char *root;     /* temporary directory of the test */
    char dir[4096]; /* journal directory inside it */
} fixture_t;

static int
setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->root = harness_mkdtemp();
    snprintf(f->dir, sizeof f->dir, "%s/journal", f->root);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture_t *f = *state;
    harness_rmtree(f->root);
    free(f->root);
    free(f);
    return 0;
}

/* The seq of each JSON line of `stele tail` output, in order. Returns how many. */
static size_t
tail_seqs(const char *out, uint64_t *seqs, size_t cap)
{
    size_t n = 0;
    for (const char *p = strstr(out, "{\"seq\":"); p != NULL && n < cap;
         p = strstr(p + 1, "{\"seq\":"))
        seqs[n++] = strtoull(p + 7, NULL, 10);
    return n;
}

static void
insert_lines(const fixture_t *f, size_t first, size_t count)
{
    char *lines = harness_json_lines(first, count);
    harness_result_t r = harness_run(0, lines, "insert", "-d", f->dir, NULL);
    assert_int_equal(harness_count_lines(r.out), count);
    harness_result_free(&r);
    free(lines);
}

/* ---- version and help ---------------------------------------------------------------- */

static void
test_version_prints_the_library_version(void **state)
{
    (void)state;
    harness_result_t r = harness_run(0, NULL, "--version", NULL);
    assert_non_null(strstr(r.out, STELE_VERSION_STRING));
    harness_result_free(&r);
}

static void
test_help_on_every_command_lists_knob_flags(void **state)
{
    (void)state;
    static const char *const commands[] = {"insert", "tail", "status", "verify", "ship"};
    size_t n_knobs = 0;
    const stele_knob_t *knobs = stele_knobs(&n_knobs);
    assert_true(n_knobs > 0);
    char flag[128] = "--";
    for (size_t i = 0; knobs[0].name[i] && i < sizeof flag - 3; i++)
        flag[2 + i] = knobs[0].name[i] == '_' ? '-' : knobs[0].name[i];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        harness_result_t r = harness_run(0, NULL, commands[i], "--help", NULL);
        char usage[64];
        snprintf(usage, sizeof usage, "usage: stele %s", commands[i]);
        assert_non_null(strstr(r.out, usage));
        assert_non_null(strstr(r.out, flag));
        assert_non_null(strstr(r.out, "Exit status"));
        harness_result_free(&r);
    }
    harness_result_t r = harness_run(0, NULL, "--help", NULL);
    assert_non_null(strstr(r.out, "insert"));
    harness_result_free(&r);
    /* "stele help" alone is "stele --help", as with git */
    r = harness_run(0, NULL, "help", NULL);
    assert_non_null(strstr(r.out, "usage: stele [--version]"));
    harness_result_free(&r);
    r = harness_run(0, NULL, "help", "tail", NULL);
    assert_non_null(strstr(r.out, "usage: stele tail"));
    harness_result_free(&r);
}

/* ---- insert -------------------------------------------------------------------------- */

static void
test_insert_arguments_print_seqs_in_order(void **state)
{
    fixture_t *f = *state;
    harness_result_t r =
        harness_run(0, NULL, "insert", "-d", f->dir, "{\"a\":1}", "{\"b\":{\"c\":\"x\"}}", NULL);
    assert_string_equal(r.out, "1\n2\n");
    harness_result_free(&r);
    r = harness_run(0, NULL, "insert", "--dir", f->dir, "{\"a\":3}", NULL);
    assert_string_equal(r.out, "3\n");
    harness_result_free(&r);
}

static void
test_insert_stdin_prints_one_seq_per_line_and_tail_reads_them_back(void **state)
{
    fixture_t *f = *state;
    const size_t n = 20000; /* more than the pending ring, so it settles mid-stream */
    char *lines = harness_json_lines(0, n);
    harness_result_t r = harness_run(0, lines, "insert", "-d", f->dir, NULL);
    free(lines);
    assert_int_equal(harness_count_lines(r.out), n);
    uint64_t expect = 1;
    for (const char *p = r.out; *p; p = strchr(p, '\n') + 1)
        assert_int_equal(strtoull(p, NULL, 10), expect++);
    harness_result_free(&r);

    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", NULL);
    assert_int_equal(harness_count_lines(r.out), n);
    assert_non_null(strstr(r.out, "\"event\":{\"i\":19999,\"who\":\"user-1\"}}"));
    harness_result_free(&r);
}

static void
test_insert_every_wait_level_is_accepted(void **state)
{
    fixture_t *f = *state;
    static const char *const levels[] = {"none", "written", "durable"};
    for (int i = 0; i < 3; i++) {
        char event[64], want[16];
        snprintf(event, sizeof event, "{\"level\":\"%s\"}", levels[i]);
        snprintf(want, sizeof want, "%d\n", i + 1);
        harness_result_t r =
            harness_run(0, NULL, "insert", "-d", f->dir, "--wait", levels[i], event, NULL);
        assert_string_equal(r.out, want);
        harness_result_free(&r);
    }
    harness_result_t r = harness_run(0, NULL, "tail", "-d", f->dir, "--where", "level=none", NULL);
    assert_int_equal(harness_count_lines(r.out), 1);
    harness_result_free(&r);
}

static void
test_insert_quiet_prints_nothing(void **state)
{
    fixture_t *f = *state;
    harness_result_t r =
        harness_run(0, "{\"a\":1}\n{\"a\":2}\n", "insert", "-d", f->dir, "-q", NULL);
    assert_string_equal(r.out, "");
    harness_result_free(&r);
    r = harness_run(0, NULL, "insert", "-d", f->dir, "--quiet", "{\"a\":3}", NULL);
    assert_string_equal(r.out, "");
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, NULL);
    assert_int_equal(harness_count_lines(r.out), 3);
    harness_result_free(&r);
}

static void
test_insert_bad_line_commits_what_came_before_and_nothing_after(void **state)
{
    fixture_t *f = *state;
    harness_result_t r =
        harness_run(2, "{\"a\":1}\n{\"a\":2}\n{\"a\":\n{\"a\":4}\n", "insert", "-d", f->dir, NULL);
    assert_string_equal(r.out, "1\n2\n");
    assert_non_null(strstr(r.err, "stdin line 3"));
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", NULL);
    assert_int_equal(harness_count_lines(r.out), 2);
    harness_result_free(&r);
}

static void
test_insert_skip_invalid_reports_each_bad_line_and_goes_on(void **state)
{
    fixture_t *f = *state;
    harness_result_t r = harness_run(2, "{\"a\":1}\nnot json\n\n{\"a\":4}\n[1]\n{\"a\":6}\n",
                                     "insert", "-d", f->dir, "--skip-invalid", NULL);
    assert_string_equal(r.out, "1\n2\n3\n");
    assert_non_null(strstr(r.err, "stdin line 2"));
    assert_non_null(strstr(r.err, "stdin line 3: empty line"));
    assert_non_null(strstr(r.err, "stdin line 5"));
    assert_non_null(strstr(r.err, "3 invalid line(s) skipped"));
    harness_result_free(&r);
}

/* A full quota (on_full=fail) stops insert mid-stream: the events before it are in the
 * journal, so their seqs are printed (a rerun resumes after the last), then the error. */
static void
test_insert_stopped_by_a_full_quota_prints_the_seqs_it_appended(void **state)
{
    fixture_t *f = *state;
    /* 4.3 MB of events for a 2 MiB quota of 1 MiB segments. The quota is checked against
     * the disk usage the committer last saw, so the queue (bounded here) may overshoot it,
     * never by the 3 MB past the second segment. */
    enum { N_LINES = 10000, PAD_BYTES = 400 };
    char *lines = malloc((size_t)N_LINES * (PAD_BYTES + 32));
    assert_non_null(lines);
    size_t len = 0;
    for (int i = 0; i < N_LINES; i++)
        len += (size_t)sprintf(lines + len, "{\"i\":%d,\"pad\":\"%0*d\"}\n", i, PAD_BYTES, 0);
    harness_result_t r = harness_run(3, lines, "insert", "-d", f->dir, "--segment-bytes", "1M",
                                     "--max-record-bytes", "64K", "--max-journal-bytes", "2M",
                                     "--on-full", "fail", "--max-queue-bytes", "256K", NULL);
    free(lines);
    assert_non_null(strstr(r.err, "quota"));
    size_t n_printed = harness_count_lines(r.out);
    uint64_t expect = 1;
    for (const char *p = r.out; *p; p = strchr(p, '\n') + 1)
        assert_int_equal(strtoull(p, NULL, 10), expect++);
    harness_result_free(&r);

    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "1", NULL);
    uint64_t last_seq = 0;
    assert_int_equal(tail_seqs(r.out, &last_seq, 1), 1);
    harness_result_free(&r);
    assert_true(last_seq > 0 && last_seq < N_LINES);
    assert_int_equal(n_printed, last_seq);
}

/* ---- closed standard streams --------------------------------------------------------- */

/* The first bytes of the journal's LOCK page (journal/FORMAT.md, section 5). */
#define LOCK_PAGE_MAGIC "STELELCK"

/* Asserts that the LOCK page still starts with its magic: nothing meant for a closed
 * standard stream was written into it. */
static void
assert_lock_page_intact(const fixture_t *f)
{
    char path[4200], head[sizeof LOCK_PAGE_MAGIC] = "";
    snprintf(path, sizeof path, "%s/LOCK", f->dir);
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fread(head, 1, sizeof head - 1, fp), sizeof head - 1);
    fclose(fp);
    assert_string_equal(head, LOCK_PAGE_MAGIC);
}

/* Runs `stele insert -d DIR [event]` with standard stream `fd` closed. */
static harness_result_t
insert_with_stream_closed(const fixture_t *f, int fd, const char *event)
{
    harness_run_t run = {.args = {"insert", "-d", f->dir, event}};
    run.stream[fd] = HARNESS_STREAM_CLOSED;
    harness_result_t r;
    harness_exec(&run, &r);
    return r;
}

static void
test_insert_with_stdout_closed_exits_3_and_writes_no_seq_into_the_journal(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 3);
    harness_result_t r = insert_with_stream_closed(f, STDOUT_FILENO, "{\"a\":1}");
    assert_int_equal(r.exit_code, 3);
    assert_non_null(strstr(r.err, "could not write to stdout"));
    harness_result_free(&r);
    assert_lock_page_intact(f);
    r = harness_run(0, NULL, "insert", "-d", f->dir, "{\"a\":2}", NULL);
    assert_string_equal(r.out, "5\n");
    harness_result_free(&r);
    r = harness_run(0, NULL, "verify", "-d", f->dir, NULL);
    harness_result_free(&r);
}

static void
test_insert_with_stdin_closed_exits_3_and_reads_no_journal_file(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 3);
    harness_result_t r = insert_with_stream_closed(f, STDIN_FILENO, NULL);
    assert_int_equal(r.exit_code, 3);
    assert_non_null(strstr(r.err, "could not read stdin"));
    assert_string_equal(r.out, "");
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", NULL);
    assert_int_equal(harness_count_lines(r.out), 3);
    harness_result_free(&r);
}

static void
test_insert_with_stderr_closed_writes_no_message_into_the_journal(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 3);
    harness_result_t r = insert_with_stream_closed(f, STDERR_FILENO, "{\"a\":");
    assert_int_equal(r.exit_code, 2);
    harness_result_free(&r);
    assert_lock_page_intact(f);
    r = harness_run(0, NULL, "verify", "-d", f->dir, NULL);
    harness_result_free(&r);
}

static void
test_insert_takes_the_directory_from_stele_dir(void **state)
{
    fixture_t *f = *state;
    char env_dir[4200];
    snprintf(env_dir, sizeof env_dir, "STELE_DIR=%s", f->dir);
    harness_run_t run = {.args = {"insert", "{\"via\":\"env\"}"}, .env = {env_dir}};
    harness_result_t r;
    harness_exec(&run, &r);
    assert_int_equal(r.exit_code, 0);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "--where", "via=env", NULL);
    assert_int_equal(harness_count_lines(r.out), 1);
    harness_result_free(&r);
}

static void
test_insert_while_another_writer_holds_the_journal_names_its_pid(void **state)
{
    fixture_t *f = *state;
    int in_pipe[2];
    assert_int_equal(pipe2(in_pipe, O_CLOEXEC), 0);
    const char *args[] = {"insert", "-d", f->dir, NULL};
    int out_fd, err_fd;
    pid_t holder = harness_spawn(args, in_pipe[0], &out_fd, &err_fd);
    close(in_pipe[0]);
    /* the holder has the journal open once it acknowledged its first line */
    assert_int_equal(write(in_pipe[1], "{\"who\":\"holder\"}\n", 17), 17);
    char buf[64] = {0};
    struct pollfd pfd = {out_fd, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 30000), 1);
    assert_true(read(out_fd, buf, sizeof buf - 1) > 0);
    assert_string_equal(buf, "1\n");

    harness_result_t r = harness_run(3, NULL, "insert", "-d", f->dir, "{\"a\":1}", NULL);
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "%d", (int)holder);
    assert_non_null(strstr(r.err, pid_text));
    harness_result_free(&r);

    close(in_pipe[1]);
    assert_int_equal(harness_wait(holder), 0);
    close(out_fd);
    close(err_fd);
}

/* libmongoc keeps counters in /dev/shm/mongoc-PID; a `stele` that dies by a signal must not
 * leave its file behind (hundreds piled up here, and a later process with a reused PID
 * printed "Falling back to malloc for counters" on stderr). */
static void
test_a_killed_stele_leaves_no_driver_counters_file(void **state)
{
    fixture_t *f = *state;
    harness_result_t r = harness_run(0, NULL, "insert", "-d", f->dir, "{\"a\":1}", NULL);
    harness_result_free(&r);
    unsetenv("MONGOC_DISABLE_SHM"); /* the child gets libmongoc's default */
    const char *args[] = {"tail", "-d", f->dir, "-f", NULL};
    int out_fd, err_fd;
    pid_t tail = harness_spawn(args, -1, &out_fd, &err_fd);
    char *line = harness_read_lines(out_fd, 1, 30000); /* running, libmongoc loaded */
    assert_int_equal(harness_count_lines(line), 1);
    free(line);
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/mongoc-%d", (int)tail);
    int present_alive = access(path, F_OK) == 0;
    kill(tail, SIGKILL);
    assert_int_equal(harness_wait(tail), -SIGKILL);
    int present_dead = access(path, F_OK) == 0;
    if (present_dead)
        unlink(path); /* the test's own mess, not the next run's */
    assert_false(present_alive);
    assert_false(present_dead);
    close(out_fd);
    close(err_fd);
}

static void
test_insert_goes_through_a_running_serve_and_stops_at_a_bad_line(void **state)
{
    fixture_t *f = *state;
    const char *args[] = {"serve", "-d", f->dir, NULL};
    int out_fd, err_fd;
    pid_t server = harness_spawn(args, -1, &out_fd, &err_fd);
    char sock[4200];
    snprintf(sock, sizeof sock, "%s/%s", f->dir, STELE_SOCKET_NAME);
    for (int i = 0; i < 300 && access(sock, F_OK) != 0; i++)
        usleep(20 * 1000);
    assert_int_equal(access(sock, F_OK), 0);

    harness_result_t r = harness_run(0, "{\"a\":1}\n{\"a\":2}\n", "insert", "-d", f->dir, NULL);
    assert_string_equal(r.out, "1\n2\n");
    harness_result_free(&r);
    r = harness_run(0, NULL, "insert", "-d", f->dir, "--wait", "written", "{\"b\":3}", NULL);
    assert_string_equal(r.out, "3\n");
    harness_result_free(&r);
    /* the line is validated before it is sent: the error names it, nothing after it is sent */
    r = harness_run(2, "{\"a\":4}\n{\"$bad\":1}\n", "insert", "-d", f->dir, NULL);
    assert_string_equal(r.out, "4\n");
    assert_non_null(strstr(r.err, "stdin line 2: "));
    harness_result_free(&r);
    r = harness_run(0, NULL, "status", "-d", f->dir, "--json", NULL);
    char pid_field[64];
    snprintf(pid_field, sizeof pid_field, "\"writer_pid\":%d", (int)server);
    assert_non_null(strstr(r.out, pid_field));
    harness_result_free(&r);

    kill(server, SIGTERM);
    assert_int_equal(harness_wait(server), 0);
    close(out_fd);
    close(err_fd);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", NULL);
    assert_int_equal(harness_count_lines(r.out), 4);
    harness_result_free(&r);
}

/* Starts `stele serve` on the fixture's journal and waits for its socket. */
static pid_t
start_server(const fixture_t *f, int *out_fd, int *err_fd)
{
    const char *args[] = {"serve", "-d", f->dir, NULL};
    pid_t server = harness_spawn(args, -1, out_fd, err_fd);
    char sock[4200];
    snprintf(sock, sizeof sock, "%s/%s", f->dir, STELE_SOCKET_NAME);
    for (int i = 0; i < 300 && access(sock, F_OK) != 0; i++)
        usleep(20 * 1000);
    assert_int_equal(access(sock, F_OK), 0);
    return server;
}

/* The journal's committed seq, as `stele status --json` reports it beside the server. */
static uint64_t
committed_seq(const fixture_t *f)
{
    harness_result_t r = harness_run(0, NULL, "status", "-d", f->dir, "--json", NULL);
    const char *p = strstr(r.out, "\"committed_seq\":");
    assert_non_null(p);
    uint64_t seq = strtoull(p + strlen("\"committed_seq\":"), NULL, 10);
    harness_result_free(&r);
    return seq;
}

/* The text with every digit run written as "N": replies compare without their seqs. */
static void
mask_digits(char *text)
{
    char *w = text;
    for (const char *r = text; *r; r++) {
        if (*r >= '0' && *r <= '9') {
            if (w == text || w[-1] != 'N')
                *w++ = 'N';
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* Whether the shell has `tool`, and for nc whether it is OpenBSD's (which has -N). */
static int
shell_has_client(const char *tool)
{
    char cmd[128];
    if (strcmp(tool, "nc") == 0)
        snprintf(cmd, sizeof cmd, "nc -h 2>&1 | grep -q -- '-N'");
    else
        snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
    int rc = system(cmd);
    return WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

/* docs/protocol.md's shell clients (socat, nc -N), run as written there against a
 * `stele serve`, the socket path swapped for the test's: each ends and prints the reply
 * the page shows. Skipped for a tool that is not installed. */
/* Runs one documented client line (the socket path swapped for `sock`) and compares what
 * it prints with the page's reply, seqs aside. Returns NULL or what went wrong (owned). */
static char *
run_documented_client(const fixture_t *f, const char *line, const char *doc_sock, const char *sock,
                      const char *reply)
{
    const char *at = strstr(line, doc_sock);
    char script_text[8192], cmd[8192];
    snprintf(script_text, sizeof script_text, "%.*s%s%s", (int)(at - line - 4), line + 4, sock,
             at + strlen(doc_sock));
    char *script = harness_write_file(f->root, "client.sh", script_text, strlen(script_text));
    /* a client that never ends fails the test instead of hanging it */
    snprintf(cmd, sizeof cmd, "timeout 20 sh '%s'", script);
    free(script);
    FILE *p = popen(cmd, "r");
    char got[256] = "", want[256], *problem = NULL;
    size_t n = p != NULL ? fread(got, 1, sizeof got - 1, p) : 0;
    got[n] = '\0';
    int rc = p != NULL ? pclose(p) : -1;
    snprintf(want, sizeof want, "%s", reply + 4);
    mask_digits(got);
    mask_digits(want);
    if (rc != 0 || strcmp(got, want) != 0)
        assert_true(asprintf(&problem, "%s: exit %d, printed '%s', the page shows '%s'",
                             script_text, rc, got, want) > 0);
    return problem;
}

/* docs/protocol.md's shell clients (socat, nc -N), run as written there against a
 * `stele serve`, the socket path swapped for the test's: each ends and prints the reply
 * the page shows. Skipped for a tool that is not installed. */
static void
test_protocol_shell_clients_work_as_documented(void **state)
{
    fixture_t *f = *state;
    static const char doc_sock[] = "/var/lib/stele/stele.sock";
    FILE *doc = fopen(STELE_SOURCE_DIR "/docs/protocol.md", "r");
    assert_non_null(doc);
    int out_fd, err_fd;
    pid_t server = start_server(f, &out_fd, &err_fd);
    char sock[4200];
    snprintf(sock, sizeof sock, "%s/%s", f->dir, STELE_SOCKET_NAME);
    char line[1024], reply[256], *problem = NULL;
    int n_run = 0, n_documented = 0;
    while (problem == NULL && fgets(line, sizeof line, doc) != NULL) {
        const char *tool = strstr(line, "| socat ")   ? "socat"
                           : strstr(line, "| nc -N ") ? "nc"
                                                      : NULL;
        if (strncmp(line, "    printf ", 11) != 0 || tool == NULL || !strstr(line, doc_sock) ||
            fgets(reply, sizeof reply, doc) == NULL)
            continue;
        n_documented++;
        if (!shell_has_client(tool)) {
            print_message("%s is not installed: its documented command is not run\n", tool);
            continue;
        }
        problem = run_documented_client(f, line, doc_sock, sock, reply);
        n_run++;
    }
    fclose(doc);
    kill(server, SIGTERM);
    assert_int_equal(harness_wait(server), 0);
    close(out_fd);
    close(err_fd);
    if (problem != NULL)
        fail_msg("%s", problem);
    assert_int_equal(n_documented, 2);
    if (n_run == 0) {
        print_message("neither socat nor OpenBSD nc is installed: nothing was run\n");
        skip();
    }
}

/* `n` JSON lines, {"i":N,...} each, with the 1-based lines in `bad` replaced by bad events. */
static char *
lines_with_bad(size_t n, const size_t *bad, size_t n_bad)
{
    static const char *const bad_events[] = {"{\"$set\":1}", "{\"a\":", "[1,2]"};
    size_t cap = n * 48 + 1;
    char *text = calloc(1, cap);
    assert_non_null(text);
    size_t len = 0;
    for (size_t line = 1; line <= n; line++) {
        const char *bad_event = NULL;
        for (size_t j = 0; j < n_bad; j++)
            if (bad[j] == line)
                bad_event = bad_events[j % 3];
        if (bad_event != NULL)
            len += (size_t)snprintf(text + len, cap - len, "%s\n", bad_event);
        else
            len += (size_t)snprintf(text + len, cap - len, "{\"i\":%zu,\"who\":\"u\"}\n", line);
    }
    return text;
}

static void
test_insert_through_serve_appends_exactly_the_lines_before_a_bad_one(void **state)
{
    fixture_t *f = *state;
    int out_fd, err_fd;
    pid_t server = start_server(f, &out_fd, &err_fd);
    /* line K is bad, with more than the client's window (1024) of good lines after it:
     * exactly K-1 records are appended, and their seqs printed */
    static const size_t k_values[] = {1, 700, 2000};
    uint64_t expect_seq = 0;
    for (size_t i = 0; i < sizeof k_values / sizeof k_values[0]; i++) {
        size_t k = k_values[i];
        char *lines = lines_with_bad(k + 1500, &k, 1);
        harness_result_t r = harness_run(2, lines, "insert", "-d", f->dir, NULL);
        assert_int_equal(harness_count_lines(r.out), k - 1);
        char want[64];
        snprintf(want, sizeof want, "stdin line %zu: ", k);
        assert_non_null(strstr(r.err, want));
        harness_result_free(&r);
        free(lines);
        expect_seq += k - 1;
        assert_int_equal(committed_seq(f), expect_seq);
    }
    /* --skip-invalid: each bad line is reported and skipped, every good one appended */
    static const size_t bad[] = {3, 1100, 1101, 2500};
    char *lines = lines_with_bad(3000, bad, 4);
    harness_result_t r = harness_run(2, lines, "insert", "-d", f->dir, "--skip-invalid", NULL);
    assert_int_equal(harness_count_lines(r.out), 3000 - 4);
    for (size_t j = 0; j < 4; j++) {
        char want[64];
        snprintf(want, sizeof want, "stdin line %zu: ", bad[j]);
        assert_non_null(strstr(r.err, want));
    }
    assert_non_null(strstr(r.err, "4 invalid line(s) skipped"));
    harness_result_free(&r);
    free(lines);
    assert_int_equal(committed_seq(f), expect_seq + 3000 - 4);

    kill(server, SIGTERM);
    assert_int_equal(harness_wait(server), 0);
    close(out_fd);
    close(err_fd);
    /* and the records are exactly the good lines, in input order */
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "1", NULL);
    assert_non_null(strstr(r.out, "\"i\":3000"));
    harness_result_free(&r);
    r = harness_run(0, NULL, "verify", "-d", f->dir, NULL);
    harness_result_free(&r);
}

/* ---- knobs: flag over environment over file ------------------------------------------ */

static void
test_knob_flag_wins_over_environment_which_wins_over_config_file(void **state)
{
    fixture_t *f = *state;
    char big_event[2100];
    snprintf(big_event, sizeof big_event, "{\"pad\":\"%01800d\"}", 0);
    char config_small[4200], config_large[4200];
    snprintf(config_small, sizeof config_small, "%s/small.ini", f->root);
    snprintf(config_large, sizeof config_large, "%s/large.ini", f->root);
    FILE *fp = fopen(config_small, "w");
    assert_non_null(fp);
    fputs("# a small record limit\nmax_record_bytes = 1024\n", fp);
    fclose(fp);
    fp = fopen(config_large, "w");
    assert_non_null(fp);
    fputs("[journal]\nmax_record_bytes = 65536\n", fp);
    fclose(fp);

    /* the file alone: too big */
    harness_result_t r =
        harness_run(2, NULL, "insert", "-d", f->dir, "--config", config_small, big_event, NULL);
    harness_result_free(&r);
    /* a flag beats the file */
    r = harness_run(0, NULL, "insert", "-d", f->dir, "--config", config_small, "--max-record-bytes",
                    "65536", big_event, NULL);
    harness_result_free(&r);
    /* the environment beats the file */
    harness_run_t run = {.args = {"insert", "-d", f->dir, "--config", config_large, big_event},
                         .env = {"STELE_MAX_RECORD_BYTES=1024"}};
    harness_exec(&run, &r);
    assert_int_equal(r.exit_code, 2);
    harness_result_free(&r);
    /* a flag beats the environment */
    harness_run_t run2 = {
        .args = {"insert", "-d", f->dir, "--max-record-bytes", "65536", big_event},
        .env = {"STELE_MAX_RECORD_BYTES=1024"}};
    harness_exec(&run2, &r);
    assert_int_equal(r.exit_code, 0);
    harness_result_free(&r);
    /* $STELE_CONFIG names the file when --config is absent */
    char env_config[4300];
    snprintf(env_config, sizeof env_config, "STELE_CONFIG=%s", config_small);
    harness_run_t run3 = {.args = {"insert", "-d", f->dir, big_event}, .env = {env_config}};
    harness_exec(&run3, &r);
    assert_int_equal(r.exit_code, 2);
    harness_result_free(&r);
}

/* ---- tail ---------------------------------------------------------------------------- */

static void
test_tail_prints_the_last_ten_by_default_and_honours_n(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 25);
    uint64_t seqs[64];
    harness_result_t r = harness_run(0, NULL, "tail", "-d", f->dir, NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 64), 10);
    assert_int_equal(seqs[0], 16);
    assert_int_equal(seqs[9], 25);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "3", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 64), 3);
    assert_int_equal(seqs[0], 23);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "--lines", "all", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 64), 25);
    assert_int_equal(seqs[0], 1);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "0", NULL);
    assert_string_equal(r.out, "");
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "100", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 64), 25);
    harness_result_free(&r);
}

static void
test_tail_line_has_seq_rfc3339_ts_src_origin_and_event(void **state)
{
    fixture_t *f = *state;
    harness_result_t r = harness_run(0, NULL, "insert", "-d", f->dir, "--source", "host-a",
                                     "{\"user\":\"alice\",\"n\":7}", NULL);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, NULL);
    const char *p = r.out;
    assert_memory_equal(p, "{\"seq\":1,\"ts\":\"", 15);
    p += 15; /* 2026-11-30T20:44:50.123456Z */
    assert_int_equal(strlen(p) > 27, 1);
    assert_true(p[4] == '-' && p[7] == '-' && p[10] == 'T' && p[13] == ':' && p[19] == '.');
    assert_true(p[26] == 'Z' && p[27] == '"');
    char origin[160];
    snprintf(origin, sizeof origin,
             ",\"src\":\"host-a\",\"origin\":{\"kind\":\"process\",\"uid\":%u,\"gid\":%u,"
             "\"pid\":",
             (unsigned)getuid(), (unsigned)getgid());
    assert_non_null(strstr(r.out, origin));
    assert_non_null(strstr(r.out, "},\"event\":"));
    assert_non_null(strstr(r.out, "\"user\":\"alice\""));
    assert_string_equal(r.out + r.out_len - 2, "}\n");
    harness_result_free(&r);
}

static void
test_tail_from_starts_at_the_seq(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 8);
    uint64_t seqs[16];
    harness_result_t r = harness_run(0, NULL, "tail", "-d", f->dir, "--from", "5", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 16), 4);
    assert_int_equal(seqs[0], 5);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "--from", "2", "-n", "2", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 16), 2);
    assert_int_equal(seqs[0], 7);
    harness_result_free(&r);
}

static void
format_rfc3339_now(char *buf, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%06ldZ", date, ts.tv_nsec / 1000);
}

static void
test_tail_since_and_until_split_at_a_time(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 5);
    usleep(30 * 1000);
    char middle[64];
    format_rfc3339_now(middle, sizeof middle);
    usleep(30 * 1000);
    insert_lines(f, 5, 5);
    uint64_t seqs[16];
    harness_result_t r = harness_run(0, NULL, "tail", "-d", f->dir, "--since", middle, NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 16), 5);
    assert_int_equal(seqs[0], 6);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", "--until", middle, NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 16), 5);
    assert_int_equal(seqs[4], 5);
    harness_result_free(&r);
    /* relative times count back from now */
    r = harness_run(0, NULL, "tail", "-d", f->dir, "--since", "1h", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 16), 10);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", "--until", "2d", NULL);
    assert_string_equal(r.out, "");
    harness_result_free(&r);
    /* -n with --since: the last N of the range */
    r = harness_run(0, NULL, "tail", "-d", f->dir, "--since", "10m", "-n", "2", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 16), 2);
    assert_int_equal(seqs[1], 10);
    harness_result_free(&r);
}

/* Times are nanoseconds in an int64, which holds 1677 to 2262: a time outside that (a
 * "for ever" such as 9999-12-31, a relative time of a million days) must still sort before
 * or after every record, not wrap around to an arbitrary date. */
static void
test_tail_times_beyond_the_nanosecond_range_keep_their_order(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 3);
    static const struct {
        const char *flag, *time;
        size_t want;
    } cases[] = {
        {"--until", "9999-12-31T23:59:59Z", 3},
        {"--until", "2262-04-12T00:00:00Z", 3},
        {"--since", "1000000d", 3},
        {"--since", "999999999999w", 3},
        {"--since", "0001-01-01T00:00:00Z", 3},
        {"--since", "1600-01-01T00:00:00+23:59", 3},
        {"--since", "2500-01-01T00:00:00Z", 0},
        {"--since", "9999-12-31T23:59:59.5Z", 0},
        {"--until", "1600-01-01T00:00:00Z", 0},
        {"--until", "999999999999w", 0},
        /* a leap second (RFC 3339 allows :60) is the second after :59 */
        {"--since", "2016-12-31T23:59:60Z", 3},
        {"--until", "2016-12-31T23:59:60Z", 0},
        {"--since", "2017-01-01T05:29:60.5+05:30", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t seqs[16];
        harness_result_t r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", cases[i].flag,
                                         cases[i].time, NULL);
        size_t got = tail_seqs(r.out, seqs, 16);
        if (got != cases[i].want)
            fail_msg("tail %s %s: %zu records, want %zu", cases[i].flag, cases[i].time, got,
                     cases[i].want);
        harness_result_free(&r);
    }
}

static void
test_tail_where_matches_dotted_paths_by_type(void **state)
{
    fixture_t *f = *state;
    harness_result_t r = harness_run(
        0, NULL, "insert", "-d", f->dir,
        "{\"actor\":{\"name\":\"alice\",\"admin\":true},\"code\":200,\"ratio\":0.5}",
        "{\"actor\":{\"name\":\"bob\",\"admin\":false},\"code\":404,\"ratio\":1.5,\"x\":null}",
        "{\"actor\":{\"name\":\"alice\",\"admin\":false},\"code\":500}", NULL);
    harness_result_free(&r);
    static const struct {
        const char *where[3];
        size_t n_matches;
    } cases[] = {
        {{"actor.name=alice"}, 2}, {{"actor.name=bob"}, 1},
        {{"actor.admin=true"}, 1}, {{"actor.admin=false"}, 2},
        {{"code=404"}, 1},         {{"ratio=1.5"}, 1},
        {{"x=null"}, 1},           {{"actor.name=alice", "code=500"}, 1},
        {{"actor.name=carol"}, 0}, {{"actor.missing=1"}, 0},
        {{"code=two hundred"}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        harness_run_t run = {.args = {"tail", "-d", f->dir, "-n", "all"}};
        int a = 5;
        for (int w = 0; w < 3 && cases[i].where[w] != NULL; w++) {
            run.args[a++] = "--where";
            run.args[a++] = cases[i].where[w];
        }
        harness_exec(&run, &r);
        assert_int_equal(r.exit_code, 0);
        if (harness_count_lines(r.out) != cases[i].n_matches)
            fail_msg("--where %s: %zu matches, want %zu", cases[i].where[0],
                     harness_count_lines(r.out), cases[i].n_matches);
        harness_result_free(&r);
    }
}

/* The ring that keeps the last N matching lines grows with the matches: a count far beyond
 * memory ("-n 99999999999", as good as all) must not be allocated up front. */
static void
test_tail_huge_count_with_a_filter_keeps_only_the_matches(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 9);
    uint64_t seqs[16];
    static const char *const filters[][2] = {
        {"--where", "who=user-1"}, {"--since", "1h"}, {"--until", "2262-01-01T00:00:00Z"}};
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++) {
        harness_result_t r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "99999999999",
                                         filters[i][0], filters[i][1], NULL);
        size_t want = strcmp(filters[i][0], "--where") == 0 ? 3 : 9;
        assert_int_equal(tail_seqs(r.out, seqs, 16), want);
        assert_int_equal(seqs[want - 1], strcmp(filters[i][0], "--where") == 0 ? 8 : 9);
        harness_result_free(&r);
    }
    harness_result_t r =
        harness_run(0, NULL, "tail", "-d", f->dir, "-n", "2", "--where", "who=user-1", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 16), 2);
    assert_int_equal(seqs[0], 5);
    assert_int_equal(seqs[1], 8);
    harness_result_free(&r);
}

/* -o short: TIME SRC SEQ actor action KEY=VALUE..., the time in the zone of TZ; -o pretty
 * is the same; -o cat: the event alone; -o json: the record line. */
static void
test_tail_output_forms(void **state)
{
    fixture_t *f = *state;
    harness_run_t ins = {
        .args = {"insert", "-d", f->dir, "--source", "web-1",
                 "{\"actor\":\"alice\",\"action\":\"login\",\"target\":\"h 1\",\"n\":7}",
                 "{\"who\":\"x\",\"esc\":\"\\u001b[2J\"}"}};
    harness_result_t r;
    harness_exec(&ins, &r);
    assert_int_equal(r.exit_code, 0);
    harness_result_free(&r);
    harness_run_t short_run = {.args = {"tail", "-d", f->dir, "-o", "short"},
                               .env = {"TZ=CET-1CEST,M3.5.0,M10.5.0/3"}};
    harness_exec(&short_run, &r);
    assert_int_equal(r.exit_code, 0);
    regex_t line_re;
    char pattern[512];
    snprintf(pattern, sizeof pattern,
             "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}"
             "\\+0[12]:00 web-1 1 uid=%u alice login target=\"h 1\" n=7\n"
             "[0-9T:.+-]+ web-1 2 uid=%u - - who=x esc=\"\\\\u001b\\[2J\"\n$",
             (unsigned)getuid(), (unsigned)getuid());
    assert_int_equal(regcomp(&line_re, pattern, REG_EXTENDED), 0);
    if (regexec(&line_re, r.out, 0, NULL, 0) != 0)
        fail_msg("tail -o short printed:\n%s", r.out);
    regfree(&line_re);
    harness_run_t pretty_run = short_run;
    pretty_run.args[4] = "pretty";
    harness_result_t pretty;
    harness_exec(&pretty_run, &pretty);
    assert_string_equal(pretty.out, r.out);
    harness_result_free(&pretty);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "--output", "cat", NULL);
    assert_string_equal(r.out, "{\"actor\":\"alice\",\"action\":\"login\",\"target\":\"h 1\","
                               "\"n\":7}\n{\"who\":\"x\",\"esc\":\"\\u001b[2J\"}\n");
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-o", "json", "-n", "1", NULL);
    assert_non_null(strstr(r.out, "{\"seq\":2,"));
    assert_non_null(strstr(r.out, ",\"src\":\"web-1\",\"origin\":{\"kind\":\"process\","));
    assert_non_null(strstr(r.out, "},\"event\":{\"who\":\"x\","));
    harness_result_free(&r);
}

/* -r: newest first, through spans of the reverse read (3000 records), with -n, --from,
 * --where and --since; refused with -f. */
static void
test_tail_reverse_prints_newest_first(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 3000);
    uint64_t seqs[3100];
    harness_result_t r = harness_run(0, NULL, "tail", "-d", f->dir, "-r", "-n", "all", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 3100), 3000);
    for (size_t i = 0; i < 3000; i++)
        assert_int_equal(seqs[i], 3000 - i);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "--reverse", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 3100), 10);
    assert_int_equal(seqs[0], 3000);
    assert_int_equal(seqs[9], 2991);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-r", "--from", "2990", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 3100), 11);
    assert_int_equal(seqs[10], 2990);
    harness_result_free(&r);
    /* the matches are far apart: the spans grow until they reach them */
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-r", "-n", "all", "--where", "i<3", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 3100), 3);
    assert_int_equal(seqs[0], 3);
    assert_int_equal(seqs[2], 1);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-r", "-n", "2", "--where", "who=user-1", NULL);
    assert_int_equal(tail_seqs(r.out, seqs, 3100), 2);
    assert_int_equal(seqs[0], 2999); /* i = 2998 */
    assert_int_equal(seqs[1], 2996);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-r", "--since", "-1h", "-o", "cat", NULL);
    assert_int_equal(harness_count_lines(r.out), 3000);
    assert_true(strncmp(r.out, "{\"i\":2999,", 10) == 0);
    harness_result_free(&r);
    r = harness_run(0, NULL, "tail", "-d", f->dir, "-r", "--since", "+1h", NULL);
    assert_string_equal(r.out, "");
    harness_result_free(&r);
    r = harness_run(1, NULL, "tail", "-d", f->dir, "-r", "-f", NULL);
    assert_non_null(strstr(r.err, "-r and -f exclude each other"));
    harness_result_free(&r);
}

/* The --since/--until forms journalctl takes, on the command line: each valid one runs
 * (and selects the records it should), each malformed one is exit 1 naming the value. */
static void
test_tail_time_forms_on_the_command_line(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 3);
    static const struct {
        const char *flag, *value;
        size_t want_lines;
    } forms[] = {
        {"--since", "-1h", 3},
        {"--since", "1h ago", 3},
        {"--since", "30min ago", 3},
        {"--since", "1h30m ago", 3},
        {"--since", "1 hour ago", 3},
        {"--since", "+30min", 0},
        {"--since", "yesterday", 3},
        {"--since", "tomorrow", 0},
        {"--since", "@0", 3},
        {"--since", "1970-01-02", 3},
        {"--since", "2000-01-01 00:00:00", 3},
        {"--since", "2000-01-01T00:00", 3},
        {"--since", "2016-12-31T23:59:60Z", 3},
        {"--until", "yesterday", 0},
        {"--until", "now", 3},
        {"--until", "+1w", 3},
        {"--until", "2000-01-01", 0},
        {"--since", "00:00", 3},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        harness_result_t r = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", forms[i].flag,
                                         forms[i].value, NULL);
        if (harness_count_lines(r.out) != forms[i].want_lines)
            fail_msg("%s '%s': %zu lines, want %zu", forms[i].flag, forms[i].value,
                     harness_count_lines(r.out), forms[i].want_lines);
        harness_result_free(&r);
    }
    static const char *const malformed[] = {
        "someday", "2026-02-30", "2026-12-01T25:00", "10y", "-1h ago", "1.5h", "21", "@x",
        "",        "Today"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        harness_result_t r =
            harness_run(1, NULL, "tail", "-d", f->dir, "--since", malformed[i], NULL);
        char want[96];
        snprintf(want, sizeof want, "--since '%s' is not a time", malformed[i]);
        assert_non_null(strstr(r.err, want));
        assert_non_null(strstr(r.err, "hint: use 2026-12-01"));
        harness_result_free(&r);
    }
}

static void
test_tail_follow_prints_records_of_a_concurrent_writer_and_exits_on_sigint(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 3);
    const char *args[] = {"tail", "-d", f->dir, "-f", "-n", "1", NULL};
    int out_fd, err_fd;
    pid_t tail = harness_spawn(args, -1, &out_fd, &err_fd);
    char *first = harness_read_lines(out_fd, 1, 10000);
    assert_non_null(strstr(first, "{\"seq\":3,"));
    free(first);
    /* writers in other processes, one after the other */
    for (size_t round = 0; round < 5; round++)
        insert_lines(f, 3 + round * 4, 4);
    char *more = harness_read_lines(out_fd, 20, 10000);
    uint64_t seqs[32];
    assert_int_equal(tail_seqs(more, seqs, 32), 20);
    for (size_t i = 0; i < 20; i++)
        assert_int_equal(seqs[i], 4 + i);
    free(more);
    kill(tail, SIGINT);
    assert_int_equal(harness_wait(tail), 0);
    close(out_fd);
    close(err_fd);
}

/* Appends n events {"who":who} in-process (BSON: fast enough for a long history). */
static void
append_who(stele_t *db, const char *who, size_t n, stele_wait_t wait)
{
    bson_t *doc = BCON_NEW("who", BCON_UTF8(who));
    for (size_t i = 0; i < n; i++) {
        stele_error_t err = {0};
        if (stele_append_bson(db, bson_get_data(doc), doc->len, wait, NULL, &err) != 0)
            fail_msg("append: %s", err.message);
    }
    bson_destroy(doc);
}

/* Bytes pid has read with read(2) and its kin (rchar in /proc/PID/io); 0 when unknown. */
static uint64_t
bytes_read_by(pid_t pid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%d/io", (int)pid);
    FILE *io = fopen(path, "r");
    unsigned long long rchar = 0;
    while (io && fgets(line, sizeof line, io))
        if (sscanf(line, "rchar: %llu", &rchar) == 1)
            break;
    if (io)
        fclose(io);
    return rchar;
}

/* `tail -f -n 1 --where` scans a long history for the last match; records a busy writer
 * commits during that scan are new, and every matching one must be printed: the ring that
 * keeps the last N lines of the history must not absorb them. The test checks its premise
 * too: the new matches were committed while the tail was still scanning (it prints nothing
 * before the scan ends, having to find the history's last match first). */
static void
test_tail_follow_with_a_filter_prints_every_match_committed_during_its_scan(void **state)
{
    fixture_t *f = *state;
    enum { HISTORY = 1000000, NEW_MATCHES = 50, HISTORY_READ_BYTES = 8 << 20 };
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open(f->dir, NULL, &db, &err), 0);
    append_who(db, "other", HISTORY - 1, STELE_WAIT_NONE);
    append_who(db, "target", 1, STELE_WAIT_DURABLE); /* seq HISTORY: the history's last match */
    const char *args[] = {"tail", "-d", f->dir, "-f", "-n", "1", "--where", "who=target", NULL};
    int out_fd, err_fd;
    pid_t tail = harness_spawn(args, -1, &out_fd, &err_fd);
    /* Append once the tail is well into the history (megabytes of it read): it takes its
     * snapshot of the newest seq before that scan, so these are new records for it, however
     * slowly a loaded machine got it there. The tail is stopped while they are appended, so
     * however fast the machine, the scan cannot end meanwhile. */
    for (int tries = 0; bytes_read_by(tail) < HISTORY_READ_BYTES && tries < 60000; tries++)
        usleep(1000);
    assert_int_equal(kill(tail, SIGSTOP), 0);
    int stop_status = 0;
    assert_int_equal(waitpid(tail, &stop_status, WUNTRACED), tail);
    assert_true(WIFSTOPPED(stop_status));
    append_who(db, "target", NEW_MATCHES - 1, STELE_WAIT_WRITTEN);
    append_who(db, "target", 1, STELE_WAIT_DURABLE); /* all committed: readers may see them */
    struct pollfd out_ready = {.fd = out_fd, .events = POLLIN};
    int was_scanning = poll(&out_ready, 1, 0) == 0;
    assert_int_equal(kill(tail, SIGCONT), 0);
    char *lines = harness_read_lines(out_fd, 1 + NEW_MATCHES, 20000);
    uint64_t seqs[1 + NEW_MATCHES + 1];
    size_t n = tail_seqs(lines, seqs, 1 + NEW_MATCHES + 1);
    printf("# tail printed %zu lines, the first seq %llu; it was %s its scan when the last "
           "match was committed\n",
           n, n ? (unsigned long long)seqs[0] : 0ull, was_scanning ? "still in" : "past");
    free(lines);
    kill(tail, SIGINT); /* before the checks: a failed one must not leave it running */
    int tail_exit = harness_wait(tail);
    close(out_fd);
    close(err_fd);
    assert_int_equal(stele_close(db, NULL), 0);
    assert_int_equal(tail_exit, 0);
    if (!was_scanning)
        fail_msg("the tail had ended its scan before the new matches were committed: the test "
                 "did not try what it is for");
    assert_int_equal(n, 1 + NEW_MATCHES);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(seqs[i], HISTORY + i);
}

static void
test_tail_follow_exits_zero_when_its_reader_goes_away(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 1);
    const char *args[] = {"tail", "-d", f->dir, "-f", NULL};
    int out_fd, err_fd;
    pid_t tail = harness_spawn(args, -1, &out_fd, &err_fd);
    char *first = harness_read_lines(out_fd, 1, 10000);
    assert_int_equal(harness_count_lines(first), 1);
    free(first);
    close(out_fd); /* like `stele tail -f | head -1` */
    insert_lines(f, 1, 1);
    assert_int_equal(harness_wait(tail), 0);
    close(err_fd);
}

static void
test_tail_follow_with_where_and_since_waits_for_matching_records(void **state)
{
    fixture_t *f = *state;
    const char *args[] = {"tail", "-d",      f->dir,       "-f", "--since",
                          "1m",   "--where", "who=user-2", NULL};
    insert_lines(f, 0, 1);
    int out_fd, err_fd;
    pid_t tail = harness_spawn(args, -1, &out_fd, &err_fd);
    insert_lines(f, 1, 9); /* i = 2, 5, 8 match */
    char *lines = harness_read_lines(out_fd, 3, 10000);
    uint64_t seqs[8];
    assert_int_equal(tail_seqs(lines, seqs, 8), 3);
    assert_int_equal(seqs[0], 3);
    assert_int_equal(seqs[2], 9);
    free(lines);
    kill(tail, SIGTERM);
    assert_int_equal(harness_wait(tail), 0);
    close(out_fd);
    close(err_fd);
}

/* ---- status -------------------------------------------------------------------------- */

static void
test_status_reports_positions_as_text_json_and_prometheus(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 3);
    harness_result_t r = harness_run(0, NULL, "status", "-d", f->dir, NULL);
    assert_non_null(strstr(r.out, "last seq:  3"));
    assert_non_null(strstr(r.out, "writer:    none"));
    /* The settings the (closed) insert writer published, labelled as the last writer's. */
    assert_non_null(strstr(r.out, "quota:     none (last writer's)"));
    assert_non_null(strstr(r.out, "sync:      always, commit adaptive"));
    harness_result_free(&r);
    r = harness_run(0, NULL, "status", "-d", f->dir, "--json", NULL);
    assert_non_null(strstr(r.out, "\"last_seq\":3"));
    assert_non_null(strstr(r.out, "\"committed_seq\":3"));
    assert_non_null(strstr(r.out, "\"sinks\":["));
    assert_non_null(strstr(r.out, "\"live\":false"));
    assert_non_null(strstr(r.out, "\"sync\":\"always\""));
    assert_non_null(strstr(r.out, "\"max_journal_bytes\":0"));
    harness_result_free(&r);
    r = harness_run(0, NULL, "status", "-d", f->dir, "--prometheus", NULL);
    assert_non_null(strstr(r.out, "# TYPE stele_last_seq gauge\n"));
    assert_non_null(strstr(r.out, "stele_last_seq{source=\""));
    assert_non_null(strstr(r.out, "\"} 3\n"));
    assert_non_null(strstr(r.out, "\nstele_sync_mode{source=\""));
    assert_non_null(strstr(r.out, "\nstele_max_journal_bytes{source=\""));
    harness_result_free(&r);
}

/* The round-trip events (doubles, int64 bounds, unicode, escapes, nesting) come back from
 * every JSON output of a local journal as Python's json and jq read them in: the tail
 * lines, the events alone (-o cat), and status --json beside them. */
static void
test_json_round_trips_through_tail_and_status(void **state)
{
    fixture_t *f = *state;
    char *events = harness_roundtrip_events();
    harness_result_t r = harness_run(0, events, "insert", "-d", f->dir, NULL);
    harness_result_free(&r);
    free(events);
    harness_result_t tail = harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", NULL);
    harness_result_t cat =
        harness_run(0, NULL, "tail", "-d", f->dir, "-n", "all", "-o", "cat", NULL);
    harness_result_t status = harness_run(0, NULL, "status", "-d", f->dir, "--json", NULL);
    char *paths[3] = {
        harness_write_file(f->root, "tail.jsonl", tail.out, tail.out_len),
        harness_write_file(f->root, "cat.jsonl", cat.out, cat.out_len),
        harness_write_file(f->root, "status.json", status.out, status.out_len),
    };
    harness_result_free(&tail);
    harness_result_free(&cat);
    harness_result_free(&status);
    const char *args[] = {"--records", paths[0], "--events", paths[1], "--objects", paths[2], NULL};
    harness_json_roundtrip(args);
    for (int i = 0; i < 3; i++)
        free(paths[i]);
}

static void
test_status_never_prints_credentials_of_a_configured_sink(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 1);
    char config[4200];
    snprintf(config, sizeof config, "%s/sink.ini", f->root);
    FILE *fp = fopen(config, "w");
    assert_non_null(fp);
    fputs("[sink main]\nuri = "
          "mongodb://auditor:s3cr3t-pw@127.0.0.1:1/?serverSelectionTimeoutMS=100\n",
          fp);
    fclose(fp);
    static const char *const formats[] = {"--json", "--prometheus", NULL};
    for (int i = 0; i < 3; i++) {
        harness_run_t run = {.args = {"status", "-d", f->dir, "--config", config, formats[i]}};
        harness_result_t r;
        harness_exec(&run, &r);
        assert_int_equal(r.exit_code, 0);
        assert_null(strstr(r.out, "s3cr3t"));
        assert_null(strstr(r.err, "s3cr3t"));
        harness_result_free(&r);
    }
}

/* ---- verify -------------------------------------------------------------------------- */

static void
test_verify_passes_on_a_sound_journal_and_honours_the_range(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 6);
    harness_result_t r = harness_run(0, NULL, "verify", "-d", f->dir, NULL);
    assert_non_null(strstr(r.out, "ok: 6 records"));
    harness_result_free(&r);
    r = harness_run(0, NULL, "verify", "-d", f->dir, "--from", "2", "--to", "4", NULL);
    assert_non_null(strstr(r.out, "ok: 3 records"));
    harness_result_free(&r);
}

/* Flips one byte of `marker` wherever it occurs in the journal's files. */
static int
tamper_with(const char *dir, const char *marker)
{
    char cmd[8400];
    /* grep -l finds the segment holding the marker without knowing the file layout */
    snprintf(cmd, sizeof cmd, "grep -rla '%s' '%s'", marker, dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char path[4096];
    int n_changed = 0;
    size_t mlen = strlen(marker);
    while (fgets(path, sizeof path, p) != NULL) {
        path[strcspn(path, "\n")] = '\0';
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        char *buf = malloc((size_t)st.st_size);
        assert_non_null(buf);
        assert_int_equal(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
        for (off_t off = 0; off + (off_t)mlen <= st.st_size; off++) {
            if (memcmp(buf + off, marker, mlen) == 0) {
                char flipped = (char)(buf[off] ^ 0x01);
                assert_int_equal(pwrite(fd, &flipped, 1, off), 1);
                n_changed++;
            }
        }
        free(buf);
        close(fd);
    }
    pclose(p);
    return n_changed;
}

static void
test_verify_exits_2_and_names_the_seq_after_a_byte_is_flipped(void **state)
{
    fixture_t *f = *state;
    /* one insert each, so the tampered record is a batch of its own */
    static const char *const events[] = {"{\"n\":1}", "{\"n\":2,\"note\":\"TAMPER-ME-9f3\"}",
                                         "{\"n\":3}"};
    harness_result_t r;
    for (int i = 0; i < 3; i++) {
        r = harness_run(0, NULL, "insert", "-d", f->dir, events[i], NULL);
        harness_result_free(&r);
    }
    assert_true(tamper_with(f->dir, "TAMPER-ME-9f3") >= 1);
    r = harness_run(2, NULL, "verify", "-d", f->dir, NULL);
    assert_non_null(strstr(r.err, "seq 2"));
    harness_result_free(&r);
}

/* ---- output that cannot be written ---------------------------------------------------- */

/* allow_unsafe_dir, as a flag or from the environment, lets every command use a journal its
 * directory's mode opens to every user (test_cli_bad_input has the refusals). */
static void
test_allow_unsafe_dir_opens_a_world_writable_journal_for_every_command(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 2);
    assert_int_equal(chmod(f->dir, 0777), 0);
    static const char *const commands[][8] = {
        {"insert", "-d", "@J", "{\"a\":1}"},
        {"tail", "-d", "@J", "-n", "all"},
        {"status", "-d", "@J"},
        {"verify", "-d", "@J"},
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        for (int via_env = 0; via_env <= 1; via_env++) {
            harness_run_t run = {.env = {via_env ? "STELE_ALLOW_UNSAFE_DIR=true" : NULL}};
            size_t n = 0;
            for (; n < 7 && commands[i][n] != NULL; n++)
                run.args[n] = strcmp(commands[i][n], "@J") == 0 ? f->dir : commands[i][n];
            if (!via_env) {
                run.args[n++] = "--allow-unsafe-dir";
                run.args[n++] = "true";
            }
            harness_result_t r;
            harness_exec(&run, &r);
            if (r.exit_code != 0)
                fail_msg("%s (%s): exit %d: %s", commands[i][0], via_env ? "env" : "flag",
                         r.exit_code, r.err);
            harness_result_free(&r);
        }
    }
    harness_result_t r = harness_run(3, NULL, "status", "-d", f->dir, NULL);
    assert_non_null(strstr(r.err, "allow-unsafe-dir"));
    harness_result_free(&r);
}

/* A command whose output is lost (a full disk, here /dev/full) must not exit 0: a script
 * would take the missing output for the answer. Each row is one command; "@J" is a journal
 * of three records. */
static void
test_every_command_exits_3_and_says_so_when_stdout_is_full(void **state)
{
    fixture_t *f = *state;
    insert_lines(f, 0, 3);
    static const struct {
        const char *args[8];
        const char *stdin_data;
    } rows[] = {
        {{"--version"}, NULL},
        {{"--help"}, NULL},
        {{"help", "status"}, NULL},
        {{"insert", "--help"}, NULL},
        {{"tail", "--help"}, NULL},
        {{"verify", "--help"}, NULL},
        {{"ship", "--help"}, NULL},
        {{"status", "-d", "@J"}, NULL},
        {{"status", "-d", "@J", "--json"}, NULL},
        {{"status", "-d", "@J", "--prometheus"}, NULL},
        {{"verify", "-d", "@J"}, NULL},
        {{"tail", "-d", "@J", "-n", "all"}, NULL},
        {{"tail", "-d", "@J", "-n", "1", "--where", "who=user-1"}, NULL},
        {{"insert", "-d", "@J", "{\"a\":1}"}, NULL},
        /* the bad line is reported, then why its predecessor's seq is missing */
        {{"insert", "-d", "@J"}, "{\"a\":2}\n{\"a\":\n"},
    };
    size_t n_failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        harness_run_t run = {.stdin_data = rows[i].stdin_data};
        run.stream[STDOUT_FILENO] = HARNESS_STREAM_DEV_FULL;
        for (size_t a = 0; rows[i].args[a] != NULL; a++)
            run.args[a] = strcmp(rows[i].args[a], "@J") == 0 ? f->dir : rows[i].args[a];
        harness_result_t r;
        harness_exec(&run, &r);
        int is_ok = r.exit_code == 3 && strstr(r.err, "could not write to stdout") != NULL;
        printf("%s stele %s %s: exit %d, stderr: %s\n", is_ok ? "ok  " : "FAIL", run.args[0],
               run.args[1] ? run.args[1] : "", r.exit_code, r.err);
        n_failed += !is_ok;
        harness_result_free(&r);
    }
    if (n_failed > 0)
        fail_msg("%zu commands did not exit 3 with 'could not write to stdout'", n_failed);
}

/* ---- ship ---------------------------------------------------------------------------- */

static void
test_ship_needs_a_mongo_uri(void **state)
{
    fixture_t *f = *state;
    harness_result_t r = harness_run(1, NULL, "ship", "-d", f->dir, "--once", NULL);
    assert_non_null(strstr(r.err, "--mongo URI is required"));
    harness_result_free(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_prints_the_library_version),
        cmocka_unit_test(test_help_on_every_command_lists_knob_flags),
        cmocka_unit_test_setup_teardown(test_insert_arguments_print_seqs_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_insert_through_serve_appends_exactly_the_lines_before_a_bad_one, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_insert_stdin_prints_one_seq_per_line_and_tail_reads_them_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insert_every_wait_level_is_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insert_quiet_prints_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_insert_bad_line_commits_what_came_before_and_nothing_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insert_skip_invalid_reports_each_bad_line_and_goes_on,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_insert_stopped_by_a_full_quota_prints_the_seqs_it_appended, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_insert_with_stdout_closed_exits_3_and_writes_no_seq_into_the_journal, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_insert_with_stdin_closed_exits_3_and_reads_no_journal_file, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_insert_with_stderr_closed_writes_no_message_into_the_journal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insert_takes_the_directory_from_stele_dir, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_insert_while_another_writer_holds_the_journal_names_its_pid, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_insert_goes_through_a_running_serve_and_stops_at_a_bad_line, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_knob_flag_wins_over_environment_which_wins_over_config_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tail_prints_the_last_ten_by_default_and_honours_n,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_tail_line_has_seq_rfc3339_ts_src_origin_and_event,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_tail_from_starts_at_the_seq, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tail_since_and_until_split_at_a_time, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_tail_times_beyond_the_nanosecond_range_keep_their_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tail_where_matches_dotted_paths_by_type, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tail_huge_count_with_a_filter_keeps_only_the_matches,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_tail_output_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tail_reverse_prints_newest_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tail_time_forms_on_the_command_line, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_tail_follow_prints_records_of_a_concurrent_writer_and_exits_on_sigint, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_tail_follow_with_a_filter_prints_every_match_committed_during_its_scan, setup,
            teardown),
        cmocka_unit_test_setup_teardown(test_tail_follow_exits_zero_when_its_reader_goes_away,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_tail_follow_with_where_and_since_waits_for_matching_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_shell_clients_work_as_documented, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_json_round_trips_through_tail_and_status, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_status_reports_positions_as_text_json_and_prometheus,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_never_prints_credentials_of_a_configured_sink,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_passes_on_a_sound_journal_and_honours_the_range,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_verify_exits_2_and_names_the_seq_after_a_byte_is_flipped, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_allow_unsafe_dir_opens_a_world_writable_journal_for_every_command, setup,
            teardown),
        cmocka_unit_test_setup_teardown(test_every_command_exits_3_and_says_so_when_stdout_is_full,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_ship_needs_a_mongo_uri, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_killed_stele_leaves_no_driver_counters_file, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
