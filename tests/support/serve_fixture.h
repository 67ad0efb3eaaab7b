/*
 * serve_fixture.h: helpers shared by the `stele serve` tests (prefix ts_, "test server"):
 * run a server in a child process (exec of the `stele` binary, STELE_SERVE_BIN), talk to it
 * over raw sockets, read the journal back.
 */
#ifndef STELE_SERVE_FIXTURE_H
#define STELE_SERVE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "stele.h"

typedef struct ts_server {
    pid_t pid;
    char dir[256];
    char socket_path[300];
    char log_path[300];
} ts_server_t;

/* A journal path (not created) inside a fresh temporary directory under $TMPDIR (or /tmp)
 * named for the test; the server's log goes beside it. */
void ts_make_dir(char *out, size_t cap, const char *name);

/* Removes the temporary directory of a path made by ts_make_dir. */
void ts_remove_dir(const char *dir);

/* Starts `stele serve -d dir extra_args...` (NULL-terminated) with stderr to serve.log beside
 * the journal
 * and waits until its socket accepts connections. Returns 0, or -1 when it exited first
 * (then *exit_code_out receives its exit code when not NULL). */
int ts_server_start(ts_server_t *s, const char *dir, int *exit_code_out, const char *const *extra);

/* How the server process runs besides its flags; zeroed: as the test does. */
typedef struct ts_server_setup {
    gid_t gid;      /* non-zero: its group (it keeps the test's user) */
    rlim_t max_fds; /* non-zero: its RLIMIT_NOFILE soft limit */
    int has_umask;  /* 1: its umask is `umask` */
    mode_t umask;
} ts_server_setup_t;

/* ts_server_start with `setup` (NULL: as ts_server_start). */
int ts_server_start_setup(ts_server_t *s, const char *dir, const ts_server_setup_t *setup,
                          int *exit_code_out, const char *const *extra);

/* Sends `signo` and waits for the exit; returns the exit code, or 128+signal. */
int ts_server_stop(ts_server_t *s, int signo);

/* Server RSS and its high-water mark in KiB, from /proc/PID/status. */
int ts_proc_rss_kib(pid_t pid, long *rss_kib, long *hwm_kib);

/* A blocking raw connection to the server's socket; -1 on failure. */
int ts_connect(const char *socket_path);

/* Writes all of buf (blocking). Returns 0 or -1. */
int ts_write_all(int fd, const void *buf, size_t len);

/* Reads one '\n'-terminated line (without '\n') into buf, with a timeout. Returns its
 * length, or -1 on EOF, error or timeout. Reads byte by byte: for small tests only. */
ssize_t ts_read_line(int fd, char *buf, size_t cap, int timeout_ms);

/* Parses a reply line: returns 0 and *seq for {"seq":N}, else the error code it carries
 * (STELE_EPROTOCOL when the line is not a reply). */
int ts_reply_code(const char *line, uint64_t *seq);

/* Reads the journal and calls fn for every record. Returns the number of records, or a
 * negative code. */
long ts_read_journal(const char *dir, void (*fn)(void *ctx, const stele_record_t *rec), void *ctx);

/* The seed of a randomised test: $STELE_TEST_SEED or the time; printed. */
unsigned ts_seed(const char *test_name);

#endif /* STELE_SERVE_FIXTURE_H */
