/*
 * cli_harness.c: runs the `stele` binary under test as a child process (see cli_harness.h).
 * stdin is fed and stdout/stderr drained together with poll(), so a child that writes a lot
 * before reading all of its input cannot deadlock the test. Each child is killed after its
 * timeout so a hung command fails its test instead of hanging ctest.
 */
#include "cli_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/capability.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define HARNESS_DEFAULT_TIMEOUT_MS 60000

const char *
harness_bin(void)
{
    const char *bin = getenv("STELE_BIN");
    if (bin == NULL || bin[0] == '\0')
        fail_msg("STELE_BIN is not set (tests/cli.cmake sets it to the built stele)");
    return bin;
}

/* Root ignores file modes; drop the capabilities that let it, so a 0555 dir is read-only. */
static void
child_drop_dac_override(void)
{
    static const int caps[] = {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER};
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &hdr, data) != 0)
        _exit(126);
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        prctl(PR_CAPBSET_DROP, caps[i], 0, 0, 0);
        data[0].effective &= ~(1u << caps[i]);
        data[0].permitted &= ~(1u << caps[i]);
        data[0].inheritable &= ~(1u << caps[i]);
    }
    if (syscall(SYS_capset, &hdr, data) != 0)
        _exit(126);
}

/* In the forked child: nothing here may return into the test runner (a failed cmocka
 * assertion would longjmp the child back into the tests, and it would fork in turn), so
 * the binary was looked up by the parent and every failure is _exit. */
static void
child_exec(const char *bin, const harness_run_t *run, int in_fd, int out_fd, int err_fd)
{
    dup2(in_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    /* /dev/full first: it must not take the number of a stream closed here */
    for (int fd = 0; fd < 3; fd++) {
        if (run->stream[fd] == HARNESS_STREAM_DEV_FULL) {
            int full = open("/dev/full", O_WRONLY);
            if (full < 0 || dup2(full, fd) != fd)
                _exit(126);
            close(full);
        }
    }
    for (int fd = 0; fd < 3; fd++) {
        if (run->stream[fd] == HARNESS_STREAM_CLOSED)
            close(fd);
    }
    for (int i = 0; i < HARNESS_MAX_ENV && run->env[i] != NULL; i++)
        putenv((char *)run->env[i]);
    if (run->cwd != NULL && chdir(run->cwd) != 0)
        _exit(126);
    if (run->drop_dac_override)
        child_drop_dac_override();
    if (run->file_size_limit_bytes) {
        struct rlimit lim = {.rlim_cur = (rlim_t)run->file_size_limit_bytes,
                             .rlim_max = (rlim_t)run->file_size_limit_bytes};
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
            _exit(126);
    }
    const char *argv[HARNESS_MAX_ARGS + 2] = {"stele"};
    for (int i = 0; i < HARNESS_MAX_ARGS && run->args[i] != NULL; i++)
        argv[i + 1] = run->args[i];
    execv(bin, (char *const *)argv);
    _exit(127);
}

typedef struct sink_buf {
    char *data;
    size_t len, cap;
} sink_buf_t;

static void
sink_append(sink_buf_t *b, const char *data, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static int64_t
mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
harness_exec(const harness_run_t *run, harness_result_t *res)
{
    int in_pipe[2], out_pipe[2], err_pipe[2];
    assert_int_equal(pipe2(in_pipe, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out_pipe, O_CLOEXEC), 0);
    assert_int_equal(pipe2(err_pipe, O_CLOEXEC), 0);
    const char *bin = harness_bin();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int in_fd = in_pipe[0];
        if (run->stdin_data == NULL)
            in_fd = open("/dev/null", O_RDONLY);
        child_exec(bin, run, in_fd, out_pipe[1], err_pipe[1]);
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[1]);
    size_t in_len = run->stdin_data == NULL ? 0
                    : run->stdin_len        ? run->stdin_len
                                            : strlen(run->stdin_data);
    size_t in_off = 0;
    int in_fd = in_pipe[1];
    if (run->stdin_data == NULL || in_len == 0) {
        close(in_fd);
        in_fd = -1;
    } else {
        fcntl(in_fd, F_SETFL, O_NONBLOCK);
    }
    sink_buf_t out = {0}, err = {0};
    sink_append(&out, "", 0);
    sink_append(&err, "", 0);
    int fds_open = 2;
    int out_fd = out_pipe[0], err_fd = err_pipe[0];
    int64_t deadline = mono_ms() + (run->timeout_ms ? run->timeout_ms : HARNESS_DEFAULT_TIMEOUT_MS);
    signal(SIGPIPE, SIG_IGN);
    while (fds_open > 0 || in_fd >= 0) {
        struct pollfd pfd[3] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}, {in_fd, POLLOUT, 0}};
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            kill(pid, SIGKILL);
            break;
        }
        if (poll(pfd, 3, (int)left) < 0 && errno != EINTR)
            fail_msg("poll: %s", strerror(errno));
        char buf[65536];
        for (int i = 0; i < 2; i++) {
            if (pfd[i].fd < 0 || pfd[i].revents == 0)
                continue;
            ssize_t n = read(pfd[i].fd, buf, sizeof buf);
            if (n > 0) {
                sink_append(i == 0 ? &out : &err, buf, (size_t)n);
            } else if (n == 0 || errno != EINTR) {
                close(pfd[i].fd);
                *(i == 0 ? &out_fd : &err_fd) = -1;
                fds_open--;
            }
        }
        if (in_fd >= 0 && pfd[2].revents != 0) {
            ssize_t n = write(in_fd, run->stdin_data + in_off, in_len - in_off);
            if (n > 0)
                in_off += (size_t)n;
            if ((n < 0 && errno != EAGAIN && errno != EINTR) || in_off == in_len) {
                close(in_fd);
                in_fd = -1;
            }
        }
    }
    if (in_fd >= 0)
        close(in_fd);
    if (out_fd >= 0)
        close(out_fd);
    if (err_fd >= 0)
        close(err_fd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    res->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    res->out = out.data;
    res->out_len = out.len;
    res->err = err.data;
    res->err_len = err.len;
}

void
harness_result_free(harness_result_t *res)
{
    free(res->out);
    free(res->err);
    res->out = res->err = NULL;
}

pid_t
harness_spawn(const char *const *args, int stdin_fd, int *stdout_fd, int *stderr_fd)
{
    int out_pipe[2], err_pipe[2];
    assert_int_equal(pipe2(out_pipe, O_CLOEXEC), 0);
    assert_int_equal(pipe2(err_pipe, O_CLOEXEC), 0);
    const char *bin = harness_bin();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        harness_run_t run = {0};
        for (int i = 0; i < HARNESS_MAX_ARGS - 1 && args[i] != NULL; i++)
            run.args[i] = args[i];
        child_exec(bin, &run, stdin_fd >= 0 ? stdin_fd : open("/dev/null", O_RDONLY), out_pipe[1],
                   err_pipe[1]);
    }
    close(out_pipe[1]);
    close(err_pipe[1]);
    *stdout_fd = out_pipe[0];
    *stderr_fd = err_pipe[0];
    return pid;
}

int
harness_wait(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -255;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

char *
harness_mkdtemp(void)
{
    const char *tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/stele-cli-test-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    assert_non_null(mkdtemp(path));
    char *copy = strdup(path);
    assert_non_null(copy);
    return copy;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        chmod(path, 0700);
    return remove(path) == 0 ? 0 : 0;
}

void
harness_rmtree(const char *path)
{
    if (path != NULL) {
        chmod(path, 0700);
        nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
}

char *
harness_json_lines(size_t first, size_t count)
{
    sink_buf_t b = {0};
    sink_append(&b, "", 0);
    for (size_t i = first; i < first + count; i++) {
        char line[128];
        int n = snprintf(line, sizeof line, "{\"i\":%zu,\"who\":\"user-%zu\"}\n", i, i % 3);
        sink_append(&b, line, (size_t)n);
    }
    return b.data;
}

char *
harness_journal_snapshot(const char *dir)
{
    harness_run_t status = {.args = {"status", "--json", "-d", dir}};
    harness_run_t verify = {.args = {"verify", "-d", dir}};
    harness_result_t st, ver;
    harness_exec(&status, &st);
    harness_exec(&verify, &ver);
    sink_buf_t b = {0};
    char head[64];
    snprintf(head, sizeof head, "status exit %d: ", st.exit_code);
    sink_append(&b, head, strlen(head));
    sink_append(&b, st.out, st.out_len);
    snprintf(head, sizeof head, "verify exit %d: ", ver.exit_code);
    sink_append(&b, head, strlen(head));
    sink_append(&b, ver.out, ver.out_len);
    harness_result_free(&st);
    harness_result_free(&ver);
    return b.data;
}

unsigned
harness_seed(void)
{
    const char *env = getenv("STELE_TEST_SEED");
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    printf("# seed %u (STELE_TEST_SEED=%u to repeat)\n", seed, seed);
    return seed;
}

size_t
harness_count_lines(const char *text)
{
    size_t n = 0;
    for (const char *p = text; *p; p++)
        n += (*p == '\n');
    return n;
}

char *
harness_read_lines(int fd, size_t want, int timeout_ms)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = calloc(1, cap);
    assert_non_null(buf);
    while (harness_count_lines(buf) < want) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, timeout_ms) != 1)
            break;
        if (len + 4096 >= cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
    }
    return buf;
}

harness_result_t
harness_run_argv(int want_exit, const char *stdin_data, const char *const *args)
{
    harness_run_t run = {.stdin_data = stdin_data};
    for (int i = 0; i < HARNESS_MAX_ARGS - 1 && args[i] != NULL; i++)
        run.args[i] = args[i];
    harness_result_t res;
    harness_exec(&run, &res);
    if (res.exit_code != want_exit)
        fail_msg("stele %s %s: exit %d (want %d)\nstdout: %s\nstderr: %s",
                 run.args[0] ? run.args[0] : "", run.args[0] && run.args[1] ? run.args[1] : "",
                 res.exit_code, want_exit, res.out, res.err);
    return res;
}

harness_result_t
harness_run(int want_exit, const char *stdin_data, ...)
{
    const char *args[HARNESS_MAX_ARGS] = {0};
    va_list ap;
    va_start(ap, stdin_data);
    for (int i = 0; i < HARNESS_MAX_ARGS - 1; i++) {
        args[i] = va_arg(ap, const char *);
        if (args[i] == NULL)
            break;
    }
    va_end(ap);
    return harness_run_argv(want_exit, stdin_data, args);
}

char *
harness_write_file(const char *dir, const char *name, const char *text, size_t len)
{
    char *path = NULL;
    assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    assert_int_equal(fwrite(text, 1, len, out), len);
    assert_int_equal(fclose(out), 0);
    return path;
}

#ifdef STELE_SOURCE_DIR
char *
harness_roundtrip_events(void)
{
    FILE *in = fopen(STELE_SOURCE_DIR "/tests/cli/roundtrip_events.jsonl", "r");
    assert_non_null(in);
    sink_buf_t b = {0};
    sink_append(&b, "", 0);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, in)) > 0)
        sink_append(&b, chunk, n);
    fclose(in);
    return b.data;
}

/* The exit status the script uses when jq is missing. */
#define HARNESS_ROUNDTRIP_NO_JQ 77

void
harness_json_roundtrip(const char *const *args)
{
    sink_buf_t cmd = {0};
    const char *head =
        "python3 '" STELE_SOURCE_DIR "/tests/cli/json_roundtrip.py' --inserted '" STELE_SOURCE_DIR
        "/tests/cli/roundtrip_events.jsonl'";
    sink_append(&cmd, head, strlen(head));
    for (size_t i = 0; args[i] != NULL; i++) {
        sink_append(&cmd, " '", 2);
        sink_append(&cmd, args[i], strlen(args[i]));
        sink_append(&cmd, "'", 1);
    }
    int rc = system(cmd.data);
    free(cmd.data);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 127) {
        print_message("python3 not found: the JSON round trip is not checked\n");
        skip();
    }
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == HARNESS_ROUNDTRIP_NO_JQ) {
        print_message("jq not found: the JSON round trip is not checked\n");
        skip();
    }
    if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0)
        fail_msg("the JSON round trip failed (json_roundtrip.py, differences above)");
}
#endif
