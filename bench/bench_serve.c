/*
 * bench_serve.c: stele through `stele serve`, as a benchmark target (system "stele-serve").
 *
 * The cell starts the `stele` command built beside stele-bench (else the one in PATH) as
 * `stele serve` on a journal in the cell's directory, a child process of its own; each writer
 * thread connects with stele_client_connect() and appends with stele_client_append_json() at
 * the cell's wait level, one request and its reply at a time, the same events as the
 * in-process `stele` cell. A separate process, not stele_serve_run() on a thread of this one,
 * because that is what the peers with a server (Redis, PostgreSQL) pay too: a second process
 * on the same CPUs and a round trip through the kernel per append; it is also how an
 * application reaches `stele serve` on a host.
 *
 * The server gets the cell's knobs as flags (sync, commit interval and policy, the record
 * limit) and room for every writer's connection. It is stopped with SIGTERM (its clean drain)
 * by the PID fork() returned, and every record is then read back (bench_read_back): the cell
 * fails when the journal does not hold what the writers were told was appended, or when the
 * server did not exit 0. Its syncs and batch sizes are the server's own counters, which this
 * process cannot read: unknown. The server's log stays in <cell dir>/stele-serve.log.
 */
#include "bench_peers.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

/* As bench_stele.c: a JSON event's BSON is a little longer than its text. */
#define SERVE_BSON_SLACK_BYTES 1024u
/* How long a fresh server gets to listen (the machine may be loaded). */
#define SERVE_START_TIMEOUT_MS 30000
/* SIGTERM drains: answers what arrived, syncs, closes; then SIGKILL. */
#define SERVE_STOP_TIMEOUT_MS 60000
/* Connections beyond the writers: none are needed, a few cost nothing. */
#define SERVE_SPARE_CONNS 8

typedef struct serve_target {
    pid_t pid;
    stele_wait_t wait;
    int keep_data;
    char journal_dir[BENCH_PATH_BYTES];
    char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char log_path[BENCH_PATH_BYTES];
} serve_target_t;

/* The stele command: beside this executable (installed), in the build tree's cli/, or PATH. */
static int
serve_find_stele(char *out, size_t cap)
{
    char self[BENCH_PATH_BYTES];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        const char *const beside[] = {"stele", "../cli/stele"};
        for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++)
            if (bench_path(out, cap, self, beside[i]) == 0 && access(out, X_OK) == 0)
                return 0;
    }
    return bench_server_find("stele", NULL, out, cap);
}

/* Whether the cell can run through the server at all; fills note when not. */
static int
serve_cell_supported(const bench_cell_t *cell, char *note, size_t note_cap)
{
    if (cell->input != BENCH_INPUT_JSON) {
        snprintf(note, note_cap, "the socket takes JSON events: --input json");
        return 0;
    }
    if (cell->wait == STELE_WAIT_SHIPPED) {
        snprintf(note, note_cap, "wait=shipped is measured in-process only");
        return 0;
    }
    if (cell->sync == STELE_SYNC_NEVER && cell->wait == STELE_WAIT_DURABLE) {
        snprintf(note, note_cap, "wait=durable needs sync=always or interval (as for stele)");
        return 0;
    }
    return 1;
}

/* The numbers of `stele serve`'s command line, as text. */
typedef struct serve_numbers {
    char interval_us[16], max_record[16], conns[16], sync_ms[16];
} serve_numbers_t;

/* Spawns `stele serve` for the cell; its PID, or -errno. */
static pid_t
serve_spawn(serve_target_t *st, const bench_cell_t *cell, char *exe)
{
    stele_options_t defaults;
    stele_options_init(&defaults);
    uint32_t max_record = defaults.max_record_bytes;
    if (cell->record_bytes + SERVE_BSON_SLACK_BYTES > max_record)
        max_record = cell->record_bytes + SERVE_BSON_SLACK_BYTES;
    serve_numbers_t n;
    snprintf(n.interval_us, sizeof n.interval_us, "%u", cell->commit_interval_us);
    snprintf(n.max_record, sizeof n.max_record, "%u", max_record);
    snprintf(n.conns, sizeof n.conns, "%d", cell->writers + SERVE_SPARE_CONNS);
    snprintf(n.sync_ms, sizeof n.sync_ms, "%u",
             cell->sync_interval_ms ? cell->sync_interval_ms : defaults.sync_interval_ms);
    char *argv[] = {exe,
                    "serve",
                    "-d",
                    st->journal_dir,
                    "--socket",
                    st->socket_path,
                    "--log-level",
                    "warn",
                    "--sync",
                    (char *)bench_sync_name(cell->sync),
                    "--sync-interval-ms",
                    n.sync_ms,
                    "--commit-interval-us",
                    n.interval_us,
                    "--commit-policy",
                    (char *)bench_policy_name(cell->policy),
                    "--max-record-bytes",
                    n.max_record,
                    "--serve-max-conns-per-uid",
                    n.conns,
                    "--serve-idle-timeout-ms",
                    "0",
                    NULL};
    return bench_server_spawn(argv, st->log_path, NULL);
}

/* Waits until the server answers on its socket; 0, or BENCH_FAILED with the reason. */
static int
serve_wait_ready(serve_target_t *st, char *note, size_t note_cap)
{
    for (int waited_ms = 0; waited_ms < SERVE_START_TIMEOUT_MS; waited_ms += 20) {
        stele_client_t *c = NULL;
        stele_error_t err;
        if (stele_client_connect(NULL, st->socket_path, &c, &err) == 0) {
            stele_client_close(c);
            return 0;
        }
        int code = 0;
        if (bench_server_exited(st->pid, &code)) {
            st->pid = 0;
            bench_note(note, note_cap, "stele serve exited with %d at start (see %s)", code,
                       st->log_path);
            return BENCH_FAILED;
        }
        bench_sleep_ms(20);
    }
    bench_note(note, note_cap, "stele serve did not listen within %d ms (see %s)",
               SERVE_START_TIMEOUT_MS, st->log_path);
    return BENCH_FAILED;
}

/* The journal, socket and log paths under the cell's directory. */
static int
serve_paths(serve_target_t *st, const bench_cell_t *cell, char *note, size_t note_cap)
{
    if (bench_path(st->journal_dir, sizeof st->journal_dir, cell->dir, "stele-journal") ||
        bench_path(st->log_path, sizeof st->log_path, cell->dir, "stele-serve.log") ||
        bench_path(st->socket_path, sizeof st->socket_path, cell->dir, "s.sock")) {
        bench_note(note, note_cap,
                   "the cell's directory %s is too long for a socket path: "
                   "give a shorter --dir",
                   cell->dir);
        return BENCH_SKIPPED;
    }
    return 0;
}

static int
serve_open(const bench_cell_t *cell, void **state_out, char *note, size_t note_cap)
{
    if (!serve_cell_supported(cell, note, note_cap))
        return BENCH_SKIPPED;
    char exe[BENCH_PATH_BYTES];
    if (serve_find_stele(exe, sizeof exe)) {
        snprintf(note, note_cap, "the stele command was not found beside stele-bench or in PATH");
        return BENCH_SKIPPED;
    }
    serve_target_t *st = calloc(1, sizeof *st);
    if (!st) {
        snprintf(note, note_cap, "out of memory");
        return BENCH_FAILED;
    }
    st->wait = cell->wait;
    st->keep_data = cell->keep_data;
    int rc = serve_paths(st, cell, note, note_cap);
    if (rc == 0) {
        st->pid = serve_spawn(st, cell, exe);
        if (st->pid < 0)
            bench_note(note, note_cap, "could not start %s: %s", exe, strerror((int)-st->pid));
        rc = st->pid < 0 ? BENCH_FAILED : serve_wait_ready(st, note, note_cap);
    }
    if (rc) {
        if (st->pid > 0)
            bench_server_stop(st->pid, SIGKILL, SERVE_STOP_TIMEOUT_MS);
        free(st);
        return rc;
    }
    *state_out = st;
    return 0;
}

static int
serve_writer_open(void *state, int writer_id, void **wstate_out, char *note, size_t note_cap)
{
    (void)writer_id;
    serve_target_t *st = state;
    stele_client_t *c = NULL;
    stele_error_t err;
    if (stele_client_connect(NULL, st->socket_path, &c, &err) != 0) {
        bench_note(note, note_cap, "stele_client_connect: %s", err.message);
        return BENCH_FAILED;
    }
    *wstate_out = c;
    return 0;
}

static int
serve_append(void *state, void *wstate, const bench_event_t *ev)
{
    serve_target_t *st = state;
    return stele_client_append_json(wstate, (const char *)ev->data, ev->len, st->wait, NULL, NULL);
}

static void
serve_writer_close(void *state, void *wstate)
{
    (void)state;
    stele_client_close(wstate);
}

static int
serve_close(void *state, bench_result_t *r)
{
    serve_target_t *st = state;
    r->is_durable = st->wait >= STELE_WAIT_DURABLE;
    int code = bench_server_stop(st->pid, SIGTERM, SERVE_STOP_TIMEOUT_MS);
    int rc = 0;
    if (code != 0) {
        bench_note(r->note, sizeof r->note, "stele serve exited with %d (see %s)", code,
                   st->log_path);
        rc = BENCH_FAILED;
    }
    if (rc == 0 && bench_read_back(st->journal_dir, r) != 0)
        rc = BENCH_FAILED;
    if (r->note[0] == '\0')
        snprintf(r->note, sizeof r->note,
                 "through stele serve: its own process, a connection "
                 "per writer");
    snprintf(r->data_path, sizeof r->data_path, "%s", st->journal_dir);
    if (!st->keep_data)
        bench_remove_tree(st->journal_dir);
    free(st);
    return rc;
}

const bench_target_t bench_target_stele_serve = {
    .system = "stele-serve",
    .open = serve_open,
    .writer_open = serve_writer_open,
    .append = serve_append,
    .writer_close = serve_writer_close,
    .close = serve_close,
};
