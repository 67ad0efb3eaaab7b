/*
 * serve_files.c: the files the server makes: its listening socket and its pid file
 * (serve.h). serve.c decides when; this file decides how.
 *
 * Each file is reached by name relative to its directory, opened once (serve_file_init),
 * never through a link: the stale-socket check and the removals look at the entry itself
 * (fstatat/unlinkat without following), the socket is bound through the directory's
 * descriptor (/proc/self/fd/N/NAME) and its mode set without following a link, and the pid
 * file is written under a fresh name (O_EXCL | O_NOFOLLOW) with the exact mode asked for,
 * whatever the umask, then renamed over the old one, which replaces a link instead of
 * writing through it. No state of its own; the loop thread's alone.
 */
#include "serve.h"

#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Connections the kernel queues before accept(); Linux caps it at net.core.somaxconn. */
#define SERVE_LISTEN_BACKLOG 4096
/* The socket's group may connect (docs/protocol.md, "Ownership"). */
#define SERVE_SOCKET_MODE 0660
/* A quoted path in a log line. */
#define SERVE_QUOTED_PATH_BYTES (PATH_MAX + 8)

int
serve_file_init(serve_file_t *f, const char *path, stele_error_t *err)
{
    memset(f, 0, sizeof *f);
    f->dir_fd = -1;
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof f->path || path[len - 1] == '/')
        return error_set(err, STELE_EINVAL, "%s is not a file path the server can use", path);
    memcpy(f->path, path, len + 1);
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    char dir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (strlen(name) >= sizeof f->name)
        return error_set(err, -ENAMETOOLONG, "file name too long: %s", path);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f->dir_fd < 0)
        return error_set(err, -errno, "could not open directory %s: %s", dir,
                         stele_strerror(-errno));
    return 0;
}

void
serve_file_release(serve_file_t *f)
{
    if (f->is_made && f->dir_fd >= 0)
        unlinkat(f->dir_fd, f->name, 0);
    f->is_made = 0;
    if (f->dir_fd >= 0)
        close(f->dir_fd);
    f->dir_fd = -1;
}

/* The address of the socket: through the directory's descriptor when /proc has it (the
 * directory cannot be swapped between the checks and the bind), else the path. Returns 0 or
 * -ENAMETOOLONG. */
static int
serve_socket_addr(const serve_file_t *f, struct sockaddr_un *addr)
{
    *addr = (struct sockaddr_un){.sun_family = AF_UNIX};
    char via_fd[64];
    snprintf(via_fd, sizeof via_fd, "/proc/self/fd/%d", f->dir_fd);
    int n = -1;
    if (access(via_fd, F_OK) == 0)
        n = snprintf(addr->sun_path, sizeof addr->sun_path, "%s/%s", via_fd, f->name);
    if (n < 0 || (size_t)n >= sizeof addr->sun_path)
        n = snprintf(addr->sun_path, sizeof addr->sun_path, "%s", f->path);
    return n < 0 || (size_t)n >= sizeof addr->sun_path ? -ENAMETOOLONG : 0;
}

/* Removes a socket file that nothing listens on (left by a crashed server). Only a refused
 * connect() proves that: a live server answers, and a live socket of another kind (a
 * datagram socket such as /dev/log given by mistake) says EPROTOTYPE; neither is touched.
 * Never unlinks what is not a socket, a link included: the path may be a typo for a real
 * file. Returns 0 when the name is free, else an error (logged). */
static int
serve_remove_stale_socket(const serve_file_t *f, const struct sockaddr_un *addr,
                          const serve_log_t *log, stele_error_t *err)
{
    char quoted[SERVE_QUOTED_PATH_BYTES];
    struct stat st;
    stele_log_quote(quoted, sizeof quoted, f->path);
    if (fstatat(f->dir_fd, f->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISSOCK(st.st_mode)) {
        serve_logf(log, STELE_LOG_ERROR, "socket path exists and is not a socket", "socket=%s",
                   quoted);
        return error_set(err, -EEXIST, "socket path %s exists and is not a socket", f->path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return serve_socket_failed(log, -errno, err);
    int rc = connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0 ? 0 : -errno;
    close(fd);
    if (rc == 0) {
        serve_logf(log, STELE_LOG_ERROR, "another server answers on the socket", "socket=%s",
                   quoted);
        return error_set(err, STELE_ELOCKED, "another server answers on the socket %s", f->path);
    }
    if (rc != -ECONNREFUSED && rc != -ENOENT) {
        serve_logf(log, STELE_LOG_ERROR, "socket path is in use", "socket=%s errno=%s", quoted,
                   stele_errname(rc));
        return error_set(err, rc, "socket path %s is in use: %s", f->path, stele_strerror(rc));
    }
    if (unlinkat(f->dir_fd, f->name, 0) == 0)
        serve_logf(log, STELE_LOG_WARN, "removed stale socket", "socket=%s", quoted);
    return 0;
}

int
serve_socket_failed(const serve_log_t *log, int rc, stele_error_t *err)
{
    serve_logf(log, STELE_LOG_ERROR, "could not create a socket", "errno=%s", stele_errname(rc));
    return error_set(err, rc, "could not create a socket: %s", stele_strerror(rc));
}

int
serve_socket_listen(serve_file_t *f, const serve_log_t *log, int *out_fd, stele_error_t *err)
{
    struct sockaddr_un addr;
    char quoted[SERVE_QUOTED_PATH_BYTES];
    stele_log_quote(quoted, sizeof quoted, f->path);
    if (serve_socket_addr(f, &addr) != 0) {
        serve_logf(log, STELE_LOG_ERROR, "socket path too long", "socket=%s max_bytes=%zu", quoted,
                   sizeof addr.sun_path - 1);
        return error_set(err, -ENAMETOOLONG, "socket path too long (at most %zu bytes): %s",
                         sizeof addr.sun_path - 1, f->path);
    }
    int rc = serve_remove_stale_socket(f, &addr, log, err);
    if (rc != 0)
        return rc;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return serve_socket_failed(log, -errno, err);
    rc = bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 ? 0 : -errno;
    if (rc == 0)
        f->is_made = 1;
    if (rc == 0 && (fchmodat(f->dir_fd, f->name, SERVE_SOCKET_MODE, AT_SYMLINK_NOFOLLOW) != 0 ||
                    listen(fd, SERVE_LISTEN_BACKLOG) != 0))
        rc = -errno;
    if (rc != 0) {
        serve_logf(log, STELE_LOG_ERROR, "could not listen on socket", "socket=%s errno=%s", quoted,
                   stele_errname(rc));
        close(fd);
        return error_set(err, rc, "could not listen on socket %s: %s", f->path, stele_strerror(rc));
    }
    *out_fd = fd;
    return 0;
}

/* Writes "PID\n" into a new file `tmp_name` of f's directory with exactly `mode`. 0 or -errno. */
static int
serve_pid_write_new(const serve_file_t *f, const char *tmp_name, mode_t mode)
{
    int fd =
        openat(f->dir_fd, tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    char line[32];
    int len = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    int rc = 0;
    if (fchmod(fd, mode) != 0)
        rc = -errno;
    else if (write(fd, line, (size_t)len) != len) /* a few bytes to a new file: all or error */
        rc = -EIO;
    if (close(fd) != 0 && rc == 0)
        rc = -errno;
    return rc;
}

int
serve_pid_write(serve_file_t *f, mode_t mode)
{
    char tmp_name[sizeof f->name + 32];
    int n = snprintf(tmp_name, sizeof tmp_name, ".%s.%ld.tmp", f->name, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp_name || n > NAME_MAX)
        return -ENAMETOOLONG;
    unlinkat(f->dir_fd, tmp_name, 0); /* left by a server of this pid that died */
    int rc = serve_pid_write_new(f, tmp_name, mode);
    if (rc == 0 && renameat(f->dir_fd, tmp_name, f->dir_fd, f->name) != 0)
        rc = -errno;
    if (rc != 0) {
        unlinkat(f->dir_fd, tmp_name, 0);
        return rc;
    }
    f->is_made = 1;
    return 0;
}
