/*
 * bench_server.c: starting and stopping the peers' private servers.
 *
 * Servers are children of stele-bench: started with fork/exec (never through a shell or a
 * service manager), known only by the PID fork() returned, and stopped by signalling that
 * PID and reaping it; every PID is kept until it is reaped, so a server a hung cell never
 * stopped is still killed as the run ends (bench_server_stop_all). When stele-bench runs as root
 * and a server refuses root (PostgreSQL), the child drops to a named unprivileged user before exec.
 */
#include "bench_peers.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void
bench_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

int
bench_server_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

int
bench_server_find(const char *name, const char *const *extra_dirs, char *out, size_t cap)
{
    const char *path = getenv("PATH");
    char *copy = strdup(path ? path : "/usr/bin:/bin");
    if (!copy)
        return -ENOMEM;
    int rc = -ENOENT;
    char *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d && rc; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, cap, "%s/%s", d, name);
        if (access(out, X_OK) == 0)
            rc = 0;
    }
    free(copy);
    for (size_t i = 0; rc && extra_dirs && extra_dirs[i]; i++) {
        snprintf(out, cap, "%s/%s", extra_dirs[i], name);
        if (access(out, X_OK) == 0)
            rc = 0;
    }
    return rc;
}

/* In the child: redirect output, drop privileges, exec. Never returns. */
static void
server_child(char *const argv[], const char *log_path, const char *run_as)
{
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        close(devnull);
    }
    setsid(); /* a terminal's Ctrl-C reaches stele-bench, which stops the server itself */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL); /* stele-bench blocks signals; servers must not */
    if (run_as && geteuid() == 0) {
        struct passwd *pw = getpwnam(run_as);
        if (!pw || setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 || setuid(pw->pw_uid) != 0)
            _exit(126);
    }
    execv(argv[0], argv);
    _exit(127);
}

/* Servers spawned and not yet reaped. A run starts a few at a time (one peer, the HDD). */
#define SERVER_MAX_LIVE 64
static pthread_mutex_t server_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t server_live[SERVER_MAX_LIVE];

static void
server_note(pid_t pid, pid_t replace)
{
    pthread_mutex_lock(&server_mu);
    for (size_t i = 0; i < SERVER_MAX_LIVE; i++) {
        if (server_live[i] == replace) {
            server_live[i] = pid;
            break;
        }
    }
    pthread_mutex_unlock(&server_mu);
}

/* A wait status as bench_server_run reports it: the exit code, or 128 + the signal. */
static int
server_exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

pid_t
bench_server_spawn(char *const argv[], const char *log_path, const char *run_as)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0)
        server_child(argv, log_path, run_as);
    server_note(pid, 0);
    return pid;
}

int
bench_server_run(char *const argv[], const char *log_path, const char *run_as)
{
    pid_t pid = bench_server_spawn(argv, log_path, run_as);
    if (pid < 0)
        return pid;
    int status;
    pid_t got;
    while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    server_note(0, pid);
    if (got < 0)
        return -errno;
    return server_exit_code(status);
}

int
bench_server_stop(pid_t pid, int sig, int timeout_ms)
{
    if (pid <= 0)
        return -1;
    kill(pid, sig);
    int status = 0;
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            server_note(0, pid);
            return server_exit_code(status);
        }
        bench_sleep_ms(20);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    server_note(0, pid);
    return -1;
}

int
bench_server_exited(pid_t pid, int *exit_code)
{
    int status = 0;
    if (pid <= 0 || waitpid(pid, &status, WNOHANG) != pid)
        return 0;
    server_note(0, pid); /* reaped: its PID may be reused, so it is never signalled again */
    *exit_code = server_exit_code(status);
    return 1;
}

void
bench_server_stop_all(void)
{
    for (size_t i = 0; i < SERVER_MAX_LIVE; i++) {
        pthread_mutex_lock(&server_mu);
        pid_t pid = server_live[i];
        pthread_mutex_unlock(&server_mu);
        if (pid > 0)
            bench_server_stop(pid, SIGKILL, 1000);
    }
}
