/*
 * mongo_server.c: starts, freezes, kills, restarts and stops the test server for the
 * integration tests (see mongo_server.h). Every process it signals is one it started, by
 * PID. The server only ever listens on 127.0.0.1.
 */
#include "mongo_server.h"

#include <errno.h>
#include <fcntl.h>
#include <mongoc/mongoc.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* How long a fresh server may take to answer ping (SQLite backend on a busy machine). */
#define MONGO_SERVER_READY_MS 30000

int
mongo_server_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
        getsockname(fd, (struct sockaddr *)&addr, &len) == 0)
        port = ntohs(addr.sin_port);
    close(fd);
    return port;
}

static int
mongo_server_find_binary(char *out, size_t cap)
{
    const char *env = getenv("STELE_TEST_SERVER_BIN");
    if (env && env[0]) {
        snprintf(out, cap, "%s", env);
    } else {
        const char *cache = getenv("XDG_CACHE_HOME");
        const char *home = getenv("HOME");
        if (cache && cache[0])
            snprintf(out, cap, "%s/stele/ferretdb-server", cache);
        else if (home && home[0])
            snprintf(out, cap, "%s/.cache/stele/ferretdb-server", home);
        else
            return -1;
    }
    return access(out, X_OK);
}

static int
mongo_server_run(const char *const argv[])
{
    pid_t pid;
    if (posix_spawnp(&pid, argv[0], NULL, NULL, (char *const *)argv, environ) != 0)
        return -1;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int
mongo_server_rm_rf(const char *path)
{
    const char *argv[] = {"rm", "-rf", "--", path, NULL};
    return mongo_server_run(argv);
}

int
mongo_server_wait_ready(const mongo_server_t *ms, int timeout_ms)
{
    char uri_text[640];
    snprintf(uri_text, sizeof uri_text, "%s%sserverSelectionTimeoutMS=500&connectTimeoutMS=500",
             ms->uri, strchr(ms->uri, '?') ? "&" : "?");
    mongoc_client_t *client = mongoc_client_new(uri_text);
    if (!client)
        return -1;
    mongoc_client_set_error_api(client, MONGOC_ERROR_API_VERSION_2);
    bson_t *ping = BCON_NEW("ping", BCON_INT32(1));
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int rc = -1;
    for (;;) {
        bson_error_t err;
        if (mongoc_client_command_simple(client, "admin", ping, NULL, NULL, &err)) {
            rc = 0;
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed_ms =
            (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (elapsed_ms > timeout_ms) {
            fprintf(stderr, "mongo_server: %s did not answer ping: %s\n", ms->uri, err.message);
            break;
        }
        usleep(100 * 1000);
    }
    bson_destroy(ping);
    mongoc_client_destroy(client);
    return rc;
}

static int
mongo_server_spawn(mongo_server_t *ms)
{
    char bin[PATH_MAX], listen[64], log_path[PATH_MAX + 8];
    if (mongo_server_find_binary(bin, sizeof bin) != 0) {
        fprintf(stderr,
                "mongo_server: test server binary not found (%s); build it with "
                "tests/integration/build-test-server.sh or set STELE_TEST_SERVER_BIN\n",
                bin);
        return -1;
    }
    snprintf(listen, sizeof listen, "127.0.0.1:%d", ms->port);
    if (snprintf(log_path, sizeof log_path, "%s/server.log", ms->base_dir) >= (int)sizeof log_path)
        return -1;
    const char *argv[] = {bin, "-listen", listen, "-data", ms->data_dir, NULL};
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (log_fd < 0)
        return -1;
    pid_t parent = getpid();
    ms->pid = fork();
    if (ms->pid == 0) {
        /* The server must not outlive a test that crashes or is killed by ctest. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(log_fd);
    if (ms->pid < 0) {
        fprintf(stderr, "mongo_server: cannot start %s: %s\n", bin, strerror(errno));
        ms->pid = 0;
        return -1;
    }
    return mongo_server_wait_ready(ms, MONGO_SERVER_READY_MS);
}

int
mongo_server_start(mongo_server_t *ms)
{
    memset(ms, 0, sizeof *ms);
    mongoc_init();
    const char *external = getenv("STELE_TEST_MONGO_URI");
    if (external && external[0]) {
        ms->is_external = 1;
        snprintf(ms->uri, sizeof ms->uri, "%s", external);
        return mongo_server_wait_ready(ms, MONGO_SERVER_READY_MS);
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(ms->base_dir, sizeof ms->base_dir, "%s/stele-mongo-XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(ms->base_dir)) {
        perror("mongo_server: mkdtemp");
        return -1;
    }
    if (snprintf(ms->data_dir, sizeof ms->data_dir, "%s/data", ms->base_dir) >=
        (int)sizeof ms->data_dir)
        return -1;
    if (mkdir(ms->data_dir, 0700) != 0)
        return -1;
    ms->port = mongo_server_free_port();
    if (ms->port < 0)
        return -1;
    snprintf(ms->uri, sizeof ms->uri, "mongodb://127.0.0.1:%d/", ms->port);
    return mongo_server_spawn(ms);
}

static void
mongo_server_reap(mongo_server_t *ms, int timeout_ms)
{
    for (int waited_ms = 0; ms->pid > 0; waited_ms += 20) {
        int status;
        pid_t got = waitpid(ms->pid, &status, WNOHANG);
        if (got == ms->pid || (got < 0 && errno == ECHILD)) {
            ms->pid = 0;
            return;
        }
        if (waited_ms >= timeout_ms) {
            kill(ms->pid, SIGKILL);
            timeout_ms = INT_MAX;
        }
        usleep(20 * 1000);
    }
}

int
mongo_server_signal(mongo_server_t *ms, int sig)
{
    if (ms->is_external)
        return MONGO_SERVER_EXTERNAL;
    if (ms->pid <= 0 || kill(ms->pid, sig) != 0)
        return -1;
    if (sig == SIGKILL || sig == SIGTERM || sig == SIGINT)
        mongo_server_reap(ms, 10000);
    return 0;
}

int
mongo_server_restart(mongo_server_t *ms)
{
    if (ms->is_external)
        return MONGO_SERVER_EXTERNAL;
    if (ms->pid > 0) {
        kill(ms->pid, SIGCONT);
        kill(ms->pid, SIGTERM);
        mongo_server_reap(ms, 10000);
    }
    return mongo_server_spawn(ms);
}

int
mongo_server_copy_data(const mongo_server_t *ms, const char *dest)
{
    if (ms->is_external)
        return MONGO_SERVER_EXTERNAL;
    const char *argv[] = {"cp", "-a", "--", ms->data_dir, dest, NULL};
    return mongo_server_run(argv);
}

int
mongo_server_replace_data(mongo_server_t *ms, const char *src)
{
    if (ms->is_external)
        return MONGO_SERVER_EXTERNAL;
    if (mongo_server_rm_rf(ms->data_dir) != 0)
        return -1;
    const char *argv[] = {"cp", "-a", "--", src, ms->data_dir, NULL};
    return mongo_server_run(argv);
}

void
mongo_server_destroy(mongo_server_t *ms)
{
    if (!ms->is_external && ms->pid > 0) {
        kill(ms->pid, SIGCONT);
        kill(ms->pid, SIGTERM);
        mongo_server_reap(ms, 10000);
    }
    if (ms->base_dir[0] && !getenv("STELE_TEST_KEEP"))
        mongo_server_rm_rf(ms->base_dir);
    memset(ms, 0, sizeof *ms);
}
