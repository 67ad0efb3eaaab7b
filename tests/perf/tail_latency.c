/*
 * tail_latency.c: measures `stele tail -f` latency across processes: this process appends
 * events to a journal (the writer), a `stele tail -f` child follows it, and for each event
 * the time from the append call (and from its return) to the moment the child's line is
 * read from its stdout is recorded. The first (warm-up) event is not counted: it waits for
 * the child to start. Prints percentiles; fails (exit 1) if a line is missing,
 * out of order or later than --max-ms.
 *
 *   tail_latency STELE_BIN [--events N] [--gap-us US] [--wait written|durable] [--max-ms MS]
 *                [--dir PARENT]
 *
 * The gap between appends is random in [0, gap-us] (seed printed; STELE_TEST_SEED repeats
 * it) so events do not arrive in lock-step with the reader's wake-ups.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stele.h>

#define DEFAULT_EVENTS 1000
#define DEFAULT_GAP_US 2000
#define DEFAULT_MAX_MS 1000
#define LINE_BUF_BYTES 65536
/* The first line also waits for the child to start (slow under sanitizers). */
#define WARM_UP_TIMEOUT_MS 60000

typedef struct latency_run {
    const char *bin;
    const char *parent_dir;
    long n_events;
    long gap_us;
    long max_ms;
    stele_wait_t wait;
} latency_run_t;

typedef struct line_pipe {
    int fd;
    char buf[LINE_BUF_BYTES];
    size_t len;
} line_pipe_t;

static int64_t
mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Reads one line into `out` (NUL-terminated); returns 0, or -1 on EOF/timeout. */
static int
line_pipe_read(line_pipe_t *p, char *out, size_t cap, int timeout_ms)
{
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->len);
        if (nl != NULL) {
            size_t n = (size_t)(nl - p->buf);
            size_t copy = n < cap - 1 ? n : cap - 1;
            memcpy(out, p->buf, copy);
            out[copy] = '\0';
            memmove(p->buf, nl + 1, p->len - n - 1);
            p->len -= n + 1;
            return 0;
        }
        struct pollfd pfd = {p->fd, POLLIN, 0};
        if (poll(&pfd, 1, timeout_ms) != 1 || p->len == sizeof p->buf)
            return -1;
        ssize_t got = read(p->fd, p->buf + p->len, sizeof p->buf - p->len);
        if (got <= 0)
            return -1;
        p->len += (size_t)got;
    }
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double
pct_us(const int64_t *sorted_ns, long n, double p)
{
    long i = (long)(p * (double)(n - 1) + 0.5);
    return (double)sorted_ns[i] / 1000.0;
}

static pid_t
spawn_tail(const char *bin, const char *dir, int *out_fd)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* The tail must not outlive this program, killed or not. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        dup2(fds[1], STDOUT_FILENO);
        /* --from 1, not -n 0: the warm-up event must be printed however late the child
         * starts */
        execl(bin, "stele", "tail", "-f", "--from", "1", "-d", dir, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    *out_fd = fds[0];
    return pid;
}

static int
parse_args(int argc, char **argv, latency_run_t *run)
{
    if (argc < 2)
        return -1;
    run->bin = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--events") == 0)
            run->n_events = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--gap-us") == 0)
            run->gap_us = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--max-ms") == 0)
            run->max_ms = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--dir") == 0)
            run->parent_dir = argv[i + 1];
        else if (strcmp(argv[i], "--wait") == 0)
            run->wait =
                strcmp(argv[i + 1], "written") == 0 ? STELE_WAIT_WRITTEN : STELE_WAIT_DURABLE;
        else
            return -1;
    }
    return run->n_events > 0 ? 0 : -1;
}

/* Appends the events and reads each line back; fills the two latency arrays. */
static int
measure(const latency_run_t *run, stele_t *db, line_pipe_t *pipe_in, int64_t *from_call_ns,
        int64_t *from_return_ns)
{
    char line[LINE_BUF_BYTES];
    for (long i = 0; i <= run->n_events; i++) {
        char event[64];
        int len = snprintf(event, sizeof event, "{\"probe\":%ld}", i);
        stele_error_t err = {0};
        uint64_t seq = 0;
        int64_t t0 = mono_ns();
        int rc = stele_append_json(db, event, (size_t)len, run->wait, &seq, &err);
        int64_t t1 = mono_ns();
        if (rc != 0) {
            fprintf(stderr, "append: %s\n", err.message);
            return -1;
        }
        int timeout_ms = i == 0 ? WARM_UP_TIMEOUT_MS : (int)run->max_ms * 10;
        if (line_pipe_read(pipe_in, line, sizeof line, timeout_ms) != 0) {
            fprintf(stderr, "no line for seq %" PRIu64 " within %ld ms\n", seq, run->max_ms * 10);
            return -1;
        }
        int64_t t2 = mono_ns();
        char want[64];
        snprintf(want, sizeof want, "{\"seq\":%" PRIu64 ",", seq);
        if (strncmp(line, want, strlen(want)) != 0) {
            fprintf(stderr, "line out of order: want %s, got %.80s\n", want, line);
            return -1;
        }
        if (i > 0) { /* event 0 warms up the path and proves the reader is following */
            from_call_ns[i - 1] = t2 - t0;
            from_return_ns[i - 1] = t2 - t1;
        }
        if (run->gap_us > 0)
            usleep((useconds_t)(rand() % (run->gap_us + 1)));
    }
    return 0;
}

int
main(int argc, char **argv)
{
    latency_run_t run = {.n_events = DEFAULT_EVENTS,
                         .gap_us = DEFAULT_GAP_US,
                         .max_ms = DEFAULT_MAX_MS,
                         .wait = STELE_WAIT_DURABLE};
    if (parse_args(argc, argv, &run) != 0) {
        fprintf(stderr, "usage: tail_latency STELE_BIN [--events N] [--gap-us US] "
                        "[--wait written|durable] [--max-ms MS] [--dir PARENT]\n");
        return 2;
    }
    const char *env_seed = getenv("STELE_TEST_SEED");
    unsigned seed = env_seed ? (unsigned)strtoul(env_seed, NULL, 10) : (unsigned)time(NULL);
    printf("# seed %u\n", seed);
    srand(seed);
    signal(SIGPIPE, SIG_IGN);

    char dir[4096];
    const char *tmp = run.parent_dir ? run.parent_dir : getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/stele-tail-latency-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    stele_t *db = NULL;
    stele_error_t err = {0};
    int64_t *from_call = calloc((size_t)run.n_events, sizeof *from_call);
    int64_t *from_return = calloc((size_t)run.n_events, sizeof *from_return);
    int status = 1, tail_fd = -1;
    pid_t tail = -1;
    if (from_call == NULL || from_return == NULL)
        goto done;
    if (stele_open(dir, NULL, &db, &err) != 0) {
        fprintf(stderr, "open: %s\n", err.message);
        goto done;
    }
    tail = spawn_tail(run.bin, dir, &tail_fd);
    if (tail < 0)
        goto done;
    line_pipe_t *pipe_in = calloc(1, sizeof *pipe_in);
    if (pipe_in == NULL)
        goto done;
    pipe_in->fd = tail_fd;
    int rc = measure(&run, db, pipe_in, from_call, from_return);
    free(pipe_in);
    if (rc != 0)
        goto done;
    qsort(from_call, (size_t)run.n_events, sizeof *from_call, cmp_i64);
    qsort(from_return, (size_t)run.n_events, sizeof *from_return, cmp_i64);
    printf("events %ld, wait=%s, gap 0..%ld us\n", run.n_events,
           run.wait == STELE_WAIT_WRITTEN ? "written" : "durable", run.gap_us);
    printf("append call -> line read:   p50 %.0f us  p99 %.0f us  p99.9 %.0f us  max %.0f us\n",
           pct_us(from_call, run.n_events, 0.50), pct_us(from_call, run.n_events, 0.99),
           pct_us(from_call, run.n_events, 0.999), pct_us(from_call, run.n_events, 1.0));
    printf("append return -> line read: p50 %.0f us  p99 %.0f us  p99.9 %.0f us  max %.0f us\n",
           pct_us(from_return, run.n_events, 0.50), pct_us(from_return, run.n_events, 0.99),
           pct_us(from_return, run.n_events, 0.999), pct_us(from_return, run.n_events, 1.0));
    status = pct_us(from_call, run.n_events, 0.99) <= (double)run.max_ms * 1000.0 ? 0 : 1;
    if (status != 0)
        fprintf(stderr, "p99 above --max-ms %ld\n", run.max_ms);
done:
    if (tail > 0) {
        kill(tail, SIGINT);
        int wstatus = 0;
        waitpid(tail, &wstatus, 0);
        if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
            fprintf(stderr, "stele tail -f did not exit 0 on SIGINT\n");
            status = 1;
        }
    }
    if (tail_fd >= 0)
        close(tail_fd);
    stele_close(db, NULL);
    free(from_call);
    free(from_return);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        status = 1;
    return status;
}
