/*
 * serve_fixture.c: see serve_fixture.h. The server runs as a separate process (exec,
 * not just fork) so a test can SIGKILL it and so fork never copies a test's threads' locks;
 * it dies with the test process (PR_SET_PDEATHSIG), so a crashed test leaves no server.
 * STELE_SERVE_BIN (a compile definition from tests/serve.cmake) names the `stele` binary.
 */
#include "serve_fixture.h"

#include <bson/bson.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef STELE_SERVE_BIN
#error "STELE_SERVE_BIN must name the stele binary"
#endif

enum { TS_START_TIMEOUT_MS = 20000, TS_MAX_ARGS = 32 };

void
ts_make_dir(char *out, size_t cap, const char *name)
{
    const char *tmp = getenv("TMPDIR");
    char base[200];
    snprintf(base, sizeof base, "%s/stele-%s-XXXXXX", tmp && tmp[0] ? tmp : "/tmp", name);
    if (!mkdtemp(base)) {
        fprintf(stderr, "mkdtemp %s: %s\n", base, strerror(errno));
        abort();
    }
    snprintf(out, cap, "%s/journal", base);
}

/* The temporary directory a journal path from ts_make_dir() lives in. */
static void
ts_base_dir(const char *dir, char *out, size_t cap)
{
    snprintf(out, cap, "%s", dir);
    char *slash = strrchr(out, '/');
    if (slash && slash != out)
        *slash = '\0';
}

void
ts_remove_dir(const char *dir)
{
    char base[256];
    ts_base_dir(dir, base, sizeof base);
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", "--", base, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

int
ts_connect(const char *socket_path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int
ts_exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

int
ts_server_start(ts_server_t *s, const char *dir, int *exit_code_out, const char *const *extra)
{
    return ts_server_start_setup(s, dir, NULL, exit_code_out, extra);
}

/* In the server's child, before exec: what `setup` asks for. 0 or -1. */
static int
ts_apply_setup(const ts_server_setup_t *setup)
{
    if (!setup)
        return 0;
    if (setup->gid && (setgroups(1, &setup->gid) != 0 || setgid(setup->gid) != 0))
        return -1;
    struct rlimit rl;
    if (setup->max_fds && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = setup->max_fds;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            return -1;
    }
    if (setup->has_umask)
        umask(setup->umask);
    return 0;
}

int
ts_server_start_setup(ts_server_t *s, const char *dir, const ts_server_setup_t *setup,
                      int *exit_code_out, const char *const *extra)
{
    const char *argv[TS_MAX_ARGS];
    int argc = 0;
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(s->socket_path, sizeof s->socket_path, "%s/stele.sock", dir);
    char base[256];
    ts_base_dir(dir, base, sizeof base);
    snprintf(s->log_path, sizeof s->log_path, "%s/serve.log", base);
    argv[argc++] = STELE_SERVE_BIN;
    argv[argc++] = "serve";
    argv[argc++] = "-d";
    argv[argc++] = dir;
    for (int i = 0; extra && extra[i] && argc < TS_MAX_ARGS - 1; i++) {
        if (strcmp(extra[i], "--socket") == 0 && extra[i + 1])
            snprintf(s->socket_path, sizeof s->socket_path, "%s", extra[i + 1]);
        argv[argc++] = extra[i];
    }
    argv[argc] = NULL;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            dup2(fd, STDOUT_FILENO); /* libmongoc's own log lines go to stdout */
        }
        if (ts_apply_setup(setup) != 0)
            _exit(126);
        /* The server must not outlive a test that crashes or is killed by ctest. Set after
         * the setup: a change of group id clears it. A test that died before this line
         * handed the child to another parent already: getppid() says so. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        execv(STELE_SERVE_BIN, (char *const *)argv);
        _exit(127);
    }
    s->pid = pid;
    for (int waited_ms = 0; waited_ms < TS_START_TIMEOUT_MS; waited_ms += 5) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            if (exit_code_out)
                *exit_code_out = ts_exit_code(status);
            s->pid = 0;
            return -1;
        }
        int cfd = ts_connect(s->socket_path);
        if (cfd >= 0) {
            close(cfd);
            return 0;
        }
        usleep(5000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    s->pid = 0;
    return -1;
}

int
ts_server_stop(ts_server_t *s, int signo)
{
    int status = 0;
    if (s->pid <= 0)
        return -1;
    kill(s->pid, signo);
    while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
        ;
    s->pid = 0;
    return ts_exit_code(status);
}

int
ts_proc_rss_kib(pid_t pid, long *rss_kib, long *hwm_kib)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    *rss_kib = *hwm_kib = -1;
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "VmRSS: %ld", rss_kib);
        sscanf(line, "VmHWM: %ld", hwm_kib);
    }
    fclose(f);
    return *rss_kib >= 0 ? 0 : -1;
}

int
ts_write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

ssize_t
ts_read_line(int fd, char *buf, size_t cap, int timeout_ms)
{
    size_t len = 0;
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, timeout_ms) <= 0)
            return -1;
        char ch;
        ssize_t n = read(fd, &ch, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        if (ch == '\n') {
            buf[len] = '\0';
            return (ssize_t)len;
        }
        if (len + 1 < cap)
            buf[len++] = ch;
    }
}

int
ts_reply_code(const char *line, uint64_t *seq)
{
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)line, -1, &berr);
    bson_iter_t it;
    int code = STELE_EPROTOCOL;
    if (!doc)
        return code;
    if (bson_iter_init_find(&it, doc, "seq") && BSON_ITER_HOLDS_NUMBER(&it)) {
        *seq = (uint64_t)bson_iter_as_int64(&it);
        code = 0;
    } else if (bson_iter_init_find(&it, doc, "error") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_t sub;
        if (bson_iter_recurse(&it, &sub) && bson_iter_find(&sub, "code") &&
            BSON_ITER_HOLDS_NUMBER(&sub))
            code = (int)bson_iter_as_int64(&sub);
    }
    bson_destroy(doc);
    return code;
}

long
ts_read_journal(const char *dir, void (*fn)(void *ctx, const stele_record_t *rec), void *ctx)
{
    stele_reader_t *r = NULL;
    stele_error_t err = {0};
    int rc = stele_reader_open(dir, &r, &err);
    if (rc != 0) {
        fprintf(stderr, "reader open %s: %s\n", dir, err.message);
        return rc;
    }
    long n = 0;
    stele_record_t rec;
    while ((rc = stele_reader_next(r, &rec, 0, &err)) == 0) {
        if (fn)
            fn(ctx, &rec);
        n++;
    }
    stele_reader_close(r);
    if (rc != STELE_EAGAIN) {
        fprintf(stderr, "reader next %s: %s\n", dir, err.message);
        return rc;
    }
    return n;
}

unsigned
ts_seed(const char *test_name)
{
    const char *env = getenv("STELE_TEST_SEED");
    unsigned seed = env && env[0] ? (unsigned)strtoul(env, NULL, 0) : (unsigned)time(NULL);
    printf("%s: seed %u (set STELE_TEST_SEED to repeat)\n", test_name, seed);
    return seed;
}
