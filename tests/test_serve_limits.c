/*
 * test_serve_limits.c: what keeps `stele serve` from being turned against its users: the
 * per-user and global connection caps and the idle timeout (one local user cannot lock the
 * others out), the pid file and the socket made without following links and with the
 * journal's modes (not the umask's), and the socket's group access with the documented
 * --dir-mode 0750 --file-mode 0640, applied to an existing journal on restart.
 *
 * The cases with a second user make one with useradd when the test runs as root (the server
 * then runs as root in that user's group, as a service runs in its group), and are skipped
 * with a message otherwise. No case asserts how fast something happens, only that it does.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "serve_fixture.h"
#include "stele.h"
#include "test_child.h"

/* Long enough for any reply or close on a loaded machine; nothing asserts it is reached. */
enum { REPLY_TIMEOUT_MS = 60000 };
#define OTHER_USER "stele-serve-a"
/* What a victim file holds, and its mode. */
#define VICTIM_TEXT "a file stele must never write through a link\n"
#define VICTIM_MODE 0600

/* The base directory of a journal path made by ts_make_dir. */
static void
base_of(const char *dir, char *out, size_t cap)
{
    snprintf(out, cap, "%s", dir);
    char *slash = strrchr(out, '/');
    if (slash)
        *slash = '\0';
}

static void
make_victim(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, VICTIM_MODE);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, VICTIM_TEXT, strlen(VICTIM_TEXT)), (ssize_t)strlen(VICTIM_TEXT));
    assert_int_equal(fchmod(fd, VICTIM_MODE), 0);
    close(fd);
}

static void
assert_victim_untouched(const char *path)
{
    char buf[256] = "";
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, VICTIM_MODE);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    assert_int_equal(n, (ssize_t)strlen(VICTIM_TEXT));
    assert_string_equal(buf, VICTIM_TEXT);
}

/* Makes the journal (a server started and stopped) so names can be planted in it. */
static void
make_journal(const char *dir)
{
    stele_t *db = NULL;
    stele_error_t err = {0};
    if (stele_open(dir, NULL, &db, &err) != 0)
        fail_msg("open %s: %s", dir, err.message);
    assert_int_equal(stele_close(db, &err), 0);
}

/* The server writes its pid file just after its socket listens, where the fixture sees it
 * ready: waits for the file (a bound for a broken build, not a timing assertion). */
static mode_t
pid_file_mode(const char *dir)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/stele.pid", dir);
    for (int waited_ms = 0; lstat(path, &st) != 0 && waited_ms < 30000; waited_ms += 10)
        usleep(10 * 1000);
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

static mode_t
mode_of(const char *dir, const char *name)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

/* Sends one event and reads its reply. Returns the reply's code (0: acknowledged), or 1
 * when no reply came (EOF, error or timeout). */
static int
append_one(int fd)
{
    static const char req[] = "{\"probe\":1}\n";
    char line[1024];
    uint64_t seq = 0;
    if (ts_write_all(fd, req, sizeof req - 1) != 0 ||
        ts_read_line(fd, line, sizeof line, REPLY_TIMEOUT_MS) < 0)
        return 1;
    return ts_reply_code(line, &seq);
}

/* 1 when the server closed fd (end of stream, nothing before it), 0 when it is still open
 * after REPLY_TIMEOUT_MS or sent something. */
static int
is_closed_by_server(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char byte;
    return poll(&p, 1, REPLY_TIMEOUT_MS) == 1 && recv(fd, &byte, 1, MSG_DONTWAIT) == 0;
}

/* -- the pid file -------------------------------------------------------------------- */

/* Under umask 000 the pid file has the journal's file mode, not 0666. */
static void
test_serve_pid_file_has_the_journal_file_mode_under_umask_000(void **state)
{
    (void)state;
    char dir[256];
    ts_server_t srv;
    ts_make_dir(dir, sizeof dir, "pidmode");
    ts_server_setup_t setup = {.has_umask = 1, .umask = 0};
    assert_int_equal(ts_server_start_setup(&srv, dir, &setup, NULL, NULL), 0);
    assert_int_equal(pid_file_mode(dir), 0600);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    static const char *const modes[] = {"--file-mode", "0640", "--dir-mode", "0750", NULL};
    assert_int_equal(ts_server_start_setup(&srv, dir, &setup, NULL, modes), 0);
    assert_int_equal(pid_file_mode(dir), 0640);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    ts_remove_dir(dir);
}

/* A link planted as stele.pid (left over, or put there) is replaced, never written
 * through: the file it points to keeps its bytes and mode. */
static void
test_serve_never_writes_through_a_linked_pid_file(void **state)
{
    (void)state;
    char dir[256], base[256], victim[300], pid_path[300], buf[64] = "";
    ts_server_t srv;
    ts_make_dir(dir, sizeof dir, "pidlink");
    base_of(dir, base, sizeof base);
    snprintf(victim, sizeof victim, "%s/victim", base);
    make_victim(victim);
    make_journal(dir);
    snprintf(pid_path, sizeof pid_path, "%s/stele.pid", dir);
    assert_int_equal(symlink(victim, pid_path), 0);
    assert_int_equal(ts_server_start(&srv, dir, NULL, NULL), 0);
    assert_victim_untouched(victim);
    struct stat st;
    assert_int_equal(lstat(pid_path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    int fd = open(pid_path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0 && read(fd, buf, sizeof buf - 1) > 0);
    close(fd);
    assert_int_equal(strtol(buf, NULL, 10), (long)srv.pid);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    assert_victim_untouched(victim);
    ts_remove_dir(dir);
}

/* A link at the socket's name is not a stale socket: the server refuses to start, and
 * neither removes nor follows it. */
static void
test_serve_refuses_a_link_at_its_socket_path(void **state)
{
    (void)state;
    char dir[256], base[256], victim[300], sock[300];
    ts_server_t srv;
    ts_make_dir(dir, sizeof dir, "socklink");
    base_of(dir, base, sizeof base);
    snprintf(victim, sizeof victim, "%s/victim", base);
    make_victim(victim);
    make_journal(dir);
    snprintf(sock, sizeof sock, "%s/stele.sock", dir);
    assert_int_equal(symlink(victim, sock), 0);
    int exit_code = -1;
    assert_int_equal(ts_server_start(&srv, dir, &exit_code, NULL), -1);
    assert_int_equal(exit_code, 3);
    struct stat st;
    assert_int_equal(lstat(sock, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_victim_untouched(victim);
    ts_remove_dir(dir);
}

/* -- idle connections --------------------------------------------------------------- */

/* A connection that sends nothing is closed after serve_idle_timeout_ms; one that was
 * answered and then went quiet too. */
static void
test_serve_closes_idle_connections(void **state)
{
    (void)state;
    char dir[256];
    ts_server_t srv;
    ts_make_dir(dir, sizeof dir, "idle");
    static const char *const idle[] = {"--serve-idle-timeout-ms", "300", NULL};
    assert_int_equal(ts_server_start(&srv, dir, NULL, idle), 0);
    int silent = ts_connect(srv.socket_path);
    int answered = ts_connect(srv.socket_path);
    assert_true(silent >= 0 && answered >= 0);
    assert_int_equal(append_one(answered), 0);
    /* Both closed by the server: the end of the stream, and nothing before it. */
    assert_true(is_closed_by_server(silent));
    assert_true(is_closed_by_server(answered));
    close(silent);
    close(answered);
    /* The server goes on serving new connections. */
    int again = ts_connect(srv.socket_path);
    assert_true(again >= 0);
    assert_int_equal(append_one(again), 0);
    close(again);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    ts_remove_dir(dir);
}

/* -- another user --------------------------------------------------------------------- */

/* OTHER_USER's uid and gid, made with useradd when missing; skips the test unless root. */
static void
need_other_user(uid_t *uid, gid_t *gid)
{
    struct passwd *pw = getpwnam(OTHER_USER);
    if (!pw && geteuid() == 0 &&
        system("useradd --no-create-home --shell /usr/sbin/nologin " OTHER_USER
               " >/dev/null 2>&1") == 0)
        pw = getpwnam(OTHER_USER);
    if (geteuid() != 0 || !pw) {
        fprintf(stderr, "skipped: needs root and useradd to make user " OTHER_USER "\n");
        skip();
    }
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
}

/* In a child running as uid/gid: connects and appends one event. Returns 0 when it was
 * acknowledged, 2 when the connect failed, other values for other failures. */
static int
append_as(uid_t uid, gid_t gid, const char *socket_path)
{
    pid_t pid = test_fork_bound();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgroups(1, &gid) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
            _exit(100);
        int fd = ts_connect(socket_path);
        if (fd < 0)
            _exit(2);
        _exit(append_one(fd) == 0 ? 0 : 3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The documented set-up: the server runs in its group with --dir-mode 0750 --file-mode 0640,
 * and a member of the group appends through the socket. Started first with the defaults
 * (0700: the group cannot reach the socket), then restarted with those modes: the restart
 * sets them on the existing journal. */
static void
test_serve_socket_serves_its_group_with_the_documented_modes_after_a_restart(void **state)
{
    (void)state;
    uid_t uid;
    gid_t gid;
    need_other_user(&uid, &gid);
    char dir[256], base[256];
    ts_server_t srv;
    ts_make_dir(dir, sizeof dir, "group");
    base_of(dir, base, sizeof base);
    assert_int_equal(chmod(base, 0755), 0);
    ts_server_setup_t in_group = {.gid = gid};
    assert_int_equal(ts_server_start_setup(&srv, dir, &in_group, NULL, NULL), 0);
    assert_int_equal(mode_of(dir, "."), 0700);
    assert_int_equal(append_as(uid, gid, srv.socket_path), 2);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    static const char *const modes[] = {"--dir-mode", "0750", "--file-mode", "0640", NULL};
    assert_int_equal(ts_server_start_setup(&srv, dir, &in_group, NULL, modes), 0);
    assert_int_equal(mode_of(dir, "."), 0750);
    assert_int_equal(mode_of(dir, "00000000000000000001.seg"), 0640);
    assert_int_equal(mode_of(dir, "stele.sock") & 0660, 0660);
    assert_int_equal(append_as(uid, gid, srv.socket_path), 0);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    ts_remove_dir(dir);
}

/* One user (root here) opens more idle connections than its cap, with a descriptor limit
 * they would otherwise exhaust: those beyond the cap get STELE_EBUSY and are closed, and
 * another user is still served. */
static void
test_serve_caps_one_users_connections_and_serves_another_user(void **state)
{
    (void)state;
    uid_t uid;
    gid_t gid;
    need_other_user(&uid, &gid);
    enum { MAX_FDS = 160, PER_UID = 64, N_FLOOD = 150 };
    char dir[256], base[256], line[1024];
    ts_server_t srv;
    ts_make_dir(dir, sizeof dir, "caps");
    base_of(dir, base, sizeof base);
    assert_int_equal(chmod(base, 0755), 0);
    ts_server_setup_t setup = {.gid = gid, .max_fds = MAX_FDS};
    static const char *const modes[] = {"--dir-mode", "0750", "--file-mode", "0640", NULL};
    assert_int_equal(ts_server_start_setup(&srv, dir, &setup, NULL, modes), 0);
    int fds[N_FLOOD];
    /* The first connection's round trip makes sure the server has seen the start-up probe
     * close, so this user's count starts from it. */
    fds[0] = ts_connect(srv.socket_path);
    assert_true(fds[0] >= 0);
    assert_int_equal(append_one(fds[0]), 0);
    for (int i = 1; i < N_FLOOD; i++) {
        fds[i] = ts_connect(srv.socket_path);
        assert_true(fds[i] >= 0);
    }
    /* Every connection beyond the cap is answered STELE_EBUSY and closed; the others stay
     * open (they are accepted in order, so the refused ones are the last). */
    int n_refused = 0;
    for (int i = PER_UID; i < N_FLOOD; i++) {
        uint64_t seq;
        if (ts_read_line(fds[i], line, sizeof line, REPLY_TIMEOUT_MS) < 0)
            fail_msg("connection %d was neither refused nor closed", i);
        assert_int_equal(ts_reply_code(line, &seq), STELE_EBUSY);
        assert_non_null(strstr(line, "connections"));
        n_refused++;
    }
    assert_int_equal(n_refused, N_FLOOD - PER_UID);
    assert_true(is_closed_by_server(fds[N_FLOOD - 1]));
    assert_int_equal(append_one(fds[1]), 0); /* one within the cap still works */
    assert_int_equal(append_as(uid, gid, srv.socket_path), 0);
    for (int i = 0; i < N_FLOOD; i++)
        close(fds[i]);
    assert_int_equal(ts_server_stop(&srv, SIGTERM), 0);
    ts_remove_dir(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_pid_file_has_the_journal_file_mode_under_umask_000),
        cmocka_unit_test(test_serve_never_writes_through_a_linked_pid_file),
        cmocka_unit_test(test_serve_refuses_a_link_at_its_socket_path),
        cmocka_unit_test(test_serve_closes_idle_connections),
        cmocka_unit_test(
            test_serve_socket_serves_its_group_with_the_documented_modes_after_a_restart),
        cmocka_unit_test(test_serve_caps_one_users_connections_and_serves_another_user),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
