/*
 * cli_harness.h: runs the built `stele` binary (path in $STELE_BIN, set by tests/cli.cmake)
 * as a child process with given stdin, captures stdout, stderr and the exit status, and
 * makes temporary journal directories. Shared by the CLI test binaries.
 */
#ifndef STELE_TESTS_CLI_HARNESS_H
#define STELE_TESTS_CLI_HARNESS_H

#include <stddef.h>
#include <sys/types.h>

#define HARNESS_MAX_ARGS 32
#define HARNESS_MAX_ENV 8

/* What a standard stream of the child is instead of the usual (a pipe; stdin /dev/null). */
typedef enum harness_stream {
    HARNESS_STREAM_USUAL = 0,
    HARNESS_STREAM_CLOSED,   /* closed before exec, as by `>&-` */
    HARNESS_STREAM_DEV_FULL, /* /dev/full: every write fails with ENOSPC */
} harness_stream_t;

typedef struct harness_run {
    const char *args[HARNESS_MAX_ARGS]; /* after "stele"; NULL-terminated */
    const char *stdin_data;             /* NULL: stdin is /dev/null */
    size_t stdin_len;                   /* 0 with stdin_data: strlen(stdin_data) */
    const char *env[HARNESS_MAX_ENV];   /* "NAME=value" set in the child, NULL-terminated */
    int drop_dac_override;              /* root: drop CAP_DAC_OVERRIDE so modes apply */
    int timeout_ms;                     /* 0: 60 s; the child is killed after it */
    const char *cwd;                    /* NULL: the test's own */
    harness_stream_t stream[3];         /* by fd: [0] stdin, [1] stdout, [2] stderr */
    /* > 0: RLIMIT_FSIZE in the child, SIGXFSZ ignored, so a write or allocation that would
     * make a file larger fails with EFBIG (a full disk without root). */
    unsigned long long file_size_limit_bytes;
} harness_run_t;

typedef struct harness_result {
    int exit_code; /* -1 when killed by a signal (then `signal` is set) */
    int signal;
    char *out; /* NUL-terminated, owned: harness_result_free() */
    size_t out_len;
    char *err;
    size_t err_len;
} harness_result_t;

/* Path of the binary under test; fails the test when STELE_BIN is not set. */
const char *harness_bin(void);

/* Runs the binary; asserts that it could be started. */
void harness_exec(const harness_run_t *run, harness_result_t *res);

void harness_result_free(harness_result_t *res);

/* Starts the binary with stdout and stderr as pipes (for follow-mode tests) and stdin from
 * `stdin_fd` (-1: /dev/null). args is NULL-terminated, after "stele". */
pid_t harness_spawn(const char *const *args, int stdin_fd, int *stdout_fd, int *stderr_fd);

/* Waits for a child; returns its exit code, or -signal. */
int harness_wait(pid_t pid);

/* A fresh directory under $TMPDIR (or /tmp): returned path is owned (free()). */
char *harness_mkdtemp(void);

/* Removes a directory tree made by the tests. */
void harness_rmtree(const char *path);

/* Copies `count` lines of the form {"i":N,"who":"user-N%3"} into a new string. */
char *harness_json_lines(size_t first, size_t count);

/*
 * What `stele status --json` and `stele verify` print about the journal in `dir`, for
 * asserting that a failed command changed nothing. Owned string.
 */
char *harness_journal_snapshot(const char *dir);

/* Runs stele with args (NULL-terminated) and stdin_data (may be NULL); fails the test,
 * showing stdout and stderr, unless it exits with want_exit. */
harness_result_t harness_run_argv(int want_exit, const char *stdin_data, const char *const *args);

/* As harness_run_argv, the arguments given one by one, ending with NULL. */
harness_result_t harness_run(int want_exit, const char *stdin_data, ...);

/* Newlines in text. */
size_t harness_count_lines(const char *text);

/* Reads from fd until `want` lines arrived or timeout_ms passed without output; returns the
 * text read (owned, NUL-terminated). */
char *harness_read_lines(int fd, size_t want, int timeout_ms);

/* Writes `len` bytes of text to DIR/NAME; returns the path (owned: free()). */
char *harness_write_file(const char *dir, const char *name, const char *text, size_t len);

/* The events of the JSON round trip, tests/cli/roundtrip_events.jsonl (one per line;
 * doubles, int64 bounds, unicode, escapes, nesting), for `stele insert`. Owned: free(). */
char *harness_roundtrip_events(void);

/*
 * Checks with tests/cli/json_roundtrip.py (Python's json and jq) that outputs of `stele`
 * read back as the round-trip events: `args` (NULL-terminated) are its flags and paths,
 * "--records" PATH (tail JSON Lines), "--events" PATH (tail -o cat), "--objects" PATH
 * (status --json, dead letters). Fails the test on any difference; skips it, saying why,
 * when python3 or jq is not installed. Needs STELE_SOURCE_DIR at compile time.
 */
void harness_json_roundtrip(const char *const *args);

/* Seed for randomised tests: $STELE_TEST_SEED or the time; printed. */
unsigned harness_seed(void);

#endif /* STELE_TESTS_CLI_HARNESS_H */
