/*
 * test_cli_retention.c: `stele tail -f` and `stele verify` beside retention (docs/cli.md,
 * "stele tail", exit status 4). The test process is the journal's writer (journal.h): it
 * appends records of valid BSON and deletes old segments as retention does.
 *  - A follower that retention passes (it is held back by a full stdout pipe, and in every
 *    other round also stopped with SIGSTOP) says it fell behind retention and exits 4, never
 *    "segment is missing"; with --skip-retained it names the records it skipped and goes on
 *    from the oldest record left. Hundreds of rounds; the follower is behind by construction
 *    (its output pipe holds far fewer lines than the segments deleted), not by timing.
 *  - `stele verify` run again and again while a child process appends and deletes segments
 *    in a tight loop never reports damage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_harness.h"
#include "format.h"
#include "journal.h"

enum { RET_SEGMENT_BYTES = 64 << 10, RET_SEGMENTS = 6 };
/* A frame of the records below is 88 bytes (72 of header, a 16-byte BSON document), written
 * in batches of 50 that do not straddle segments: 13 batches to a segment. */
enum { RET_RECORDS_PER_SEGMENT = (RET_SEGMENT_BYTES - 4096) / (50 * 88) * 50 };

/* -- the writer ---------------------------------------------------------------------------- */

/* Opens the journal for writing; NULL on failure (err says why). */
static journal_t *
writer_open(const char *dir, stele_error_t *err)
{
    journal_options_t o;
    journal_options_init(&o);
    o.segment_bytes = RET_SEGMENT_BYTES;
    o.max_record_bytes = 1024;
    o.source = "retention-test";
    journal_t *j = NULL;
    return journal_open(dir, &o, &j, NULL, err) == 0 ? j : NULL;
}

/* Appends n records {"i": seq} in batches of 50, synced and visible to readers. Returns 0
 * or the journal's error. */
static int
writer_append(journal_t *j, uint64_t n, stele_error_t *err)
{
    uint8_t buf[50 * 104]; /* a version 2 frame of this event is 104 bytes */
    for (uint64_t done = 0; done < n;) {
        uint64_t batch = n - done < 50 ? n - done : 50;
        size_t off = 0;
        for (uint64_t k = 0; k < batch; k++) {
            uint64_t seq = journal_last_seq(j) + 1 + k;
            uint8_t doc[16] = {16, 0, 0, 0, 0x12, 'i', 0};
            for (int b = 0; b < 8; b++)
                doc[7 + b] = (uint8_t)(seq >> (8 * b));
            journal_frame_prepare(journal_version(j), buf + off, seq, (int64_t)seq * 1000, NULL,
                                  doc, sizeof doc);
            off += journal_frame_bytes(journal_version(j), sizeof doc);
        }
        int rc = journal_append_batch(j, buf, off, NULL, err);
        if (rc)
            return rc;
        done += batch;
    }
    int rc = journal_sync(j, err);
    if (rc == 0)
        journal_publish(j, journal_last_seq(j), journal_last_seq(j));
    return rc;
}

/* The test's own writer: open, append, or fail the test. */
static journal_t *
writer_start(const char *dir, uint64_t n)
{
    stele_error_t err = {0};
    journal_t *j = writer_open(dir, &err);
    if (j == NULL || writer_append(j, n, &err) != 0)
        fail_msg("writer: %s", err.message);
    return j;
}

/* -- reading the follower ------------------------------------------------------------------ */

/* Reads fd until `needle` appears in what was read, or it closes, or 60 s pass without
 * output; returns the text (owned). */
static char *
read_until(int fd, const char *needle)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = calloc(1, cap);
    assert_non_null(buf);
    while (needle == NULL || strstr(buf, needle) == NULL) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 60000) != 1)
            break;
        if (len + 4096 >= cap) {
            buf = realloc(buf, cap *= 2);
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

/* Checks that the lines of out carry seqs first.. (contiguous, with one jump from
 * jump_from to jump_to when jump_from is not 0); returns the last seq. */
static uint64_t
seqs_in(const char *out, uint64_t jump_from, uint64_t jump_to)
{
    uint64_t want = 1;
    for (const char *p = strstr(out, "{\"seq\":"); p; p = strstr(p + 1, "{\"seq\":")) {
        if (jump_from && want == jump_from)
            want = jump_to;
        assert_int_equal(strtoull(p + 7, NULL, 10), want);
        want++;
    }
    return want - 1;
}

/* One round: a follower from seq 1, behind; retention deletes every sealed segment; the
 * writer appends 10 more. Without --skip-retained the follower exits 4 saying it fell behind;
 * with it, it skips what is gone and prints the new records. */
static void
follower_round(int round)
{
    int skip = round % 2;
    int stop = (round / 2) % 2;
    char *dir = harness_mkdtemp();
    char journal[512];
    snprintf(journal, sizeof journal, "%s/j", dir);
    journal_t *j = writer_start(journal, RET_SEGMENTS * RET_RECORDS_PER_SEGMENT);

    const char *args[] = {
        "tail", "-f", "--from", "1", "-d", journal, skip ? "--skip-retained" : NULL, NULL};
    int out_fd = -1, err_fd = -1;
    pid_t pid = harness_spawn(args, -1, &out_fd, &err_fd);
    (void)fcntl(out_fd, F_SETPIPE_SZ, 4096); /* best effort: holds it back sooner */
    char *first = read_until(out_fd, "\n");  /* it is reading segment 1 */
    if (stop)
        assert_int_equal(kill(pid, SIGSTOP), 0);

    stele_error_t err = {0};
    int deleted = journal_delete_before(j, journal_last_seq(j), &err);
    assert_true(deleted >= RET_SEGMENTS - 1); /* every sealed one */
    journal_stats_t st;
    journal_stats(j, &st);
    uint64_t oldest = st.first_seq;
    assert_int_equal(writer_append(j, 10, &err), 0);
    uint64_t last = journal_last_seq(j);
    if (stop)
        assert_int_equal(kill(pid, SIGCONT), 0);

    char last_line[64];
    snprintf(last_line, sizeof last_line, "{\"seq\":%" PRIu64 ",", last);
    char *rest = read_until(out_fd, skip ? last_line : NULL);
    if (skip)
        assert_int_equal(kill(pid, SIGTERM), 0);
    char *errs = read_until(err_fd, NULL);
    int code = harness_wait(pid);
    char *out = NULL;
    assert_true(asprintf(&out, "%s%s", first, rest) > 0);
    if (strstr(errs, "missing") != NULL)
        fail_msg("round %d: %s", round, errs);
    uint64_t lost_from = 0, lost_to = 0, starts = 0;
    const char *at = strstr(errs, "records ");
    assert_non_null(at);
    assert_int_equal(sscanf(at, "records %" SCNu64 "-%" SCNu64, &lost_from, &lost_to), 2);
    assert_non_null(strstr(at, "were deleted by retention before they were read; the journal "
                               "now starts at seq "));
    starts = strtoull(strstr(at, "starts at seq ") + strlen("starts at seq "), NULL, 10);
    assert_int_equal(starts, oldest);
    assert_int_equal(lost_to, oldest - 1);
    if (skip) {
        assert_int_equal(code, 0);
        assert_non_null(strstr(errs, "stele tail: skipped: records "));
        assert_int_equal(seqs_in(out, lost_from, oldest), last);
    } else {
        assert_int_equal(code, 4);
        assert_non_null(strstr(errs, "stele tail: fell behind retention: records "));
        assert_non_null(strstr(errs, "hint: --skip-retained"));
        assert_int_equal(seqs_in(out, 0, 0), lost_from - 1);
    }
    free(first);
    free(rest);
    free(errs);
    free(out);
    close(out_fd);
    close(err_fd);
    assert_int_equal(journal_close(j, &err), 0);
    harness_rmtree(dir);
    free(dir);
}

static void
test_tail_f_behind_retention_says_so_and_skips_on_request(void **state)
{
    (void)state;
    for (int round = 0; round < 200; round++)
        follower_round(round);
}

/* -- verify beside a retention loop --------------------------------------------------------- */

/* The child's loop: append a batch, delete all but the newest two segments; until killed.
 * It must not return into the test runner: it _exits on any failure. */
static void
retention_loop(const char *journal)
{
    stele_error_t err = {0};
    journal_t *j = writer_open(journal, &err);
    if (j == NULL)
        _exit(2);
    for (;;) {
        if (writer_append(j, 200, &err) != 0)
            _exit(3);
        journal_stats_t st;
        journal_stats(j, &st);
        if (st.segments > 3 &&
            journal_delete_before(j, journal_last_seq(j) - RET_RECORDS_PER_SEGMENT, &err) < 0)
            _exit(4);
    }
}

static void
test_verify_beside_a_retention_loop_never_reports_damage(void **state)
{
    (void)state;
    char *dir = harness_mkdtemp();
    char journal[512];
    snprintf(journal, sizeof journal, "%s/j", dir);
    journal_t *j = writer_start(journal, 3 * RET_RECORDS_PER_SEGMENT); /* before the loop */
    stele_error_t err = {0};
    assert_int_equal(journal_close(j, &err), 0);
    pid_t writer = fork();
    assert_true(writer >= 0);
    if (writer == 0) {
        retention_loop(journal);
        _exit(0);
    }
    for (int round = 0; round < 200; round++) {
        harness_run_t run = {.args = {"verify", "-d", journal}};
        harness_result_t r;
        harness_exec(&run, &r);
        if (r.exit_code != 0) {
            kill(writer, SIGKILL);
            waitpid(writer, NULL, 0);
            fail_msg("round %d: verify exit %d: %s", round, r.exit_code, r.err);
        }
        assert_non_null(strstr(r.out, "ok: "));
        harness_result_free(&r);
    }
    assert_int_equal(kill(writer, SIGKILL), 0);
    assert_int_equal(waitpid(writer, NULL, 0), writer);
    harness_rmtree(dir);
    free(dir);
}

int
main(void)
{
    /* Hundreds of journals with rolls and retention: the races are in the order of reads and
     * deletions, not on the disk, so a memory file system serves when there is one. */
    if (access("/dev/shm", W_OK) == 0 && getenv("TMPDIR") == NULL)
        setenv("TMPDIR", "/dev/shm", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tail_f_behind_retention_says_so_and_skips_on_request),
        cmocka_unit_test(test_verify_beside_a_retention_loop_never_reports_damage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
