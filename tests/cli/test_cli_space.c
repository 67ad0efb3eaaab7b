/*
 * test_cli_space.c: `stele insert` when the disk fills or the command is stopped
 * (docs/journal.md "When the disk fills", docs/cli.md "stele insert"):
 *  - whatever stops insert (a halted engine, a stop signal), every seq that is stored is
 *    printed, stderr names the first input line that was not, and re-running from that line
 *    stores no event twice;
 *  - an insert that stored everything exits 0 even when the next segment could not be
 *    prepared;
 *  - on a real nearly full file system (a small tmpfs, a loop-mounted ext4 image: root only,
 *    skipped with a message otherwise) the journal keeps opening and taking appends into the
 *    room its active segment has, whatever the index and the next segment lack, and halts
 *    only when a roll cannot get its segment.
 * Without root, a full disk is RLIMIT_FSIZE in the child (writes fail with EFBIG), which
 * the journal meets exactly where it would meet ENOSPC: preparing the next segment.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_harness.h"
#include "test_child.h"

/* Events of harness_json_lines take ~130 bytes in a segment: 1 MiB holds ~8,000. */
enum { SPACE_LINES = 30000 };

/* -- reading back ------------------------------------------------------------------------ */

/* The journal's last seq, from `stele status --json`. */
static uint64_t
journal_last_seq(const char *dir)
{
    harness_result_t r = harness_run(0, NULL, "status", "--json", "-d", dir, NULL);
    const char *at = strstr(r.out, "\"last_seq\":");
    assert_non_null(at);
    uint64_t last = strtoull(at + strlen("\"last_seq\":"), NULL, 10);
    harness_result_free(&r);
    return last;
}

/* Checks that stdout holds exactly the seqs first..last, one per line, and returns last
 * (first - 1 when it holds none). */
static uint64_t
printed_run(const char *out, uint64_t first)
{
    uint64_t want = first;
    for (const char *p = out; *p;) {
        char *end = NULL;
        uint64_t seq = strtoull(p, &end, 10);
        assert_true(end != p && *end == '\n');
        assert_int_equal(seq, want);
        want++;
        p = end + 1;
    }
    return want - 1;
}

/* The line number in "nothing from stdin line N on was stored". */
static uint64_t
resume_line(const char *err)
{
    const char *at = strstr(err, "nothing from stdin line ");
    assert_non_null(at);
    return strtoull(at + strlen("nothing from stdin line "), NULL, 10);
}

/* Every "i" of harness_json_lines in [first, first + n) appears in the journal exactly once. */
static void
assert_each_event_once(const char *dir, size_t first, size_t n)
{
    harness_result_t r = harness_run(0, NULL, "tail", "-n", "all", "-d", dir, NULL);
    unsigned char *seen = calloc(n, 1);
    assert_non_null(seen);
    size_t n_seen = 0;
    for (const char *p = strstr(r.out, "\"i\":"); p; p = strstr(p + 1, "\"i\":")) {
        size_t i = strtoull(p + 4, NULL, 10);
        if (i < first || i >= first + n)
            continue;
        assert_int_equal(seen[i - first], 0);
        seen[i - first] = 1;
        n_seen++;
    }
    assert_int_equal(n_seen, n);
    free(seen);
    harness_result_free(&r);
}

/* Lines first..last (1-based) of `all` in a new string. */
static char *
lines_from(const char *all, uint64_t first)
{
    const char *p = all;
    for (uint64_t line = 1; line < first && p; line++) {
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return strdup(p ? p : "");
}

/* -- a halted insert ----------------------------------------------------------------------- */

/* The engine halts mid-input (the roll cannot make its segment): the seqs printed are
 * exactly the stored ones, stderr names the first line not stored, and a re-run from it
 * stores every event once. */
static void
test_halted_insert_prints_every_stored_seq_and_the_line_to_resume_from(void **state)
{
    (void)state;
    char *dir = harness_mkdtemp();
    char journal[512];
    snprintf(journal, sizeof journal, "%s/j", dir);
    /* A 1 MiB active segment; the next ones would be 4 MiB, past the 2 MiB file limit. */
    harness_result_t r = harness_run(0, NULL, "insert", "-q", "-d", journal, "--segment-bytes",
                                     "1M", "--max-record-bytes", "64K", "{\"i\":0}", NULL);
    harness_result_free(&r);
    char *lines = harness_json_lines(1, SPACE_LINES);
    harness_run_t run = {
        .args = {"insert", "-d", journal, "--segment-bytes", "4M", "--max-record-bytes", "64K"},
        .stdin_data = lines,
        .file_size_limit_bytes = 2u << 20};
    harness_exec(&run, &r);
    assert_int_equal(r.exit_code, 3);
    assert_non_null(strstr(r.err, "could not prepare segment"));
    uint64_t last_printed = printed_run(r.out, 2);
    if (last_printed <= 2 || last_printed >= SPACE_LINES)
        fail_msg("insert printed seqs 2..%llu of %d lines; its stderr: %s",
                 (unsigned long long)last_printed, SPACE_LINES, r.err);
    assert_int_equal(journal_last_seq(journal), last_printed);
    uint64_t resume = resume_line(r.err);
    assert_int_equal(resume, last_printed); /* line n holds the event of seq n + 1 */
    harness_result_free(&r);

    char *rest = lines_from(lines, resume);
    r = harness_run(0, rest, "insert", "-q", "-d", journal, "--max-record-bytes", "64K", NULL);
    harness_result_free(&r);
    assert_each_event_once(journal, 0, SPACE_LINES + 1);
    free(rest);
    free(lines);
    harness_rmtree(dir);
    free(dir);
}

/* Every event stored, the next segment not prepared (the file limit): exit 0, every seq
 * printed; a warning on stderr is the only thing it may say. */
static void
test_insert_that_stored_everything_exits_0_without_a_next_segment(void **state)
{
    (void)state;
    char *dir = harness_mkdtemp();
    char journal[512];
    snprintf(journal, sizeof journal, "%s/j", dir);
    char *first = harness_json_lines(1, 3000); /* past the quarter mark of 1 MiB */
    harness_result_t r = harness_run(0, first, "insert", "-q", "-d", journal, "--segment-bytes",
                                     "1M", "--max-record-bytes", "64K", NULL);
    harness_result_free(&r);
    char *more = harness_json_lines(3001, 500);
    harness_run_t run = {
        .args = {"insert", "-d", journal, "--segment-bytes", "4M", "--max-record-bytes", "64K"},
        .stdin_data = more,
        .file_size_limit_bytes = 2u << 20};
    harness_exec(&run, &r);
    assert_int_equal(r.exit_code, 0);
    assert_int_equal(printed_run(r.out, 3001), 3500);
    if (r.err_len)
        assert_non_null(strstr(r.err, "stele insert: warning: could not prepare the next segment"));
    harness_result_free(&r);
    assert_int_equal(journal_last_seq(journal), 3500);
    free(first);
    free(more);
    harness_rmtree(dir);
    free(dir);
}

/* -- a stopped insert ---------------------------------------------------------------------- */

/* Reads what fd has until it closes. */
static char *
read_all(int fd)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
        assert_non_null(buf);
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return buf;
}

/* Writes text into fd from a child process (so the test can read the command's output
 * meanwhile) and closes it; returns the child's pid. */
static pid_t
feed(int fd, const char *text)
{
    pid_t pid = test_fork_bound();
    assert_true(pid >= 0);
    if (pid == 0) {
        size_t len = strlen(text), done = 0;
        while (done < len) {
            ssize_t n = write(fd, text + done, len - done);
            if (n <= 0)
                _exit(n < 0 && errno == EPIPE ? 0 : 1);
            done += (size_t)n;
        }
        _exit(0);
    }
    return pid;
}

/* SIGTERM while insert waits for input, and while input streams in: either way it prints
 * every stored seq, says which line to resume from, and dies of the signal. */
static void
test_stop_signal_prints_every_stored_seq_and_dies_of_it(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    for (int streaming = 0; streaming <= 1; streaming++) {
        char *dir = harness_mkdtemp();
        char journal[512];
        snprintf(journal, sizeof journal, "%s/j", dir);
        int in[2];
        assert_int_equal(pipe2(in, O_CLOEXEC), 0);
        const char *args[] = {"insert", "-d", journal, NULL};
        int out_fd = -1, err_fd = -1;
        pid_t pid = harness_spawn(args, in[0], &out_fd, &err_fd);
        close(in[0]);
        char *lines = harness_json_lines(1, streaming ? 200000 : 100);
        pid_t feeder = feed(in[1], lines);
        /* waiting: all 100 seqs printed, insert now waits for input that never comes;
         * streaming: some seqs printed, more input coming */
        char *seen = harness_read_lines(out_fd, streaming ? 1000 : 100, 30000);
        assert_true(harness_count_lines(seen) >= (streaming ? 1000 : 100));
        assert_int_equal(kill(pid, SIGTERM), 0);
        char *rest = read_all(out_fd);
        char *err = read_all(err_fd);
        assert_int_equal(harness_wait(pid), -SIGTERM);
        close(in[1]);
        harness_wait(feeder);
        char *out = NULL;
        assert_true(asprintf(&out, "%s%s", seen, rest) > 0);
        uint64_t last = printed_run(out, 1);
        assert_int_equal(journal_last_seq(journal), last);
        assert_non_null(strstr(err, "stopped by"));
        assert_int_equal(resume_line(err), last + 1);
        if (streaming)
            assert_true(last < 200000); /* it stopped mid-stream */
        free(seen);
        free(rest);
        free(out);
        free(err);
        free(lines);
        close(out_fd);
        close(err_fd);
        harness_rmtree(dir);
        free(dir);
    }
}

/* -- a real nearly full file system (root) ---------------------------------------------- */

/* A small file system mounted for one test: a tmpfs, or an ext4 image on a loop device. */
typedef struct small_fs {
    int is_ext4;
    char *base; /* a temporary directory holding the mount point (and the image) */
    char mnt[512];
    char image[512];
    int is_mounted;
} small_fs_t;

/* Runs a shell command quietly; its exit status. */
static int shell(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
shell(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Mounts the file system, or says why not and returns -1 (the test is then skipped). */
static int
small_fs_mount(small_fs_t *fs)
{
    if (geteuid() != 0) {
        print_message("skipped: mounting a small file system needs root\n");
        return -1;
    }
    fs->base = harness_mkdtemp();
    snprintf(fs->mnt, sizeof fs->mnt, "%s/mnt", fs->base);
    assert_int_equal(mkdir(fs->mnt, 0700), 0);
    if (!fs->is_ext4) {
        if (mount("tmpfs", fs->mnt, "tmpfs", 0, "size=24m,mode=0700") != 0) {
            print_message("skipped: cannot mount a tmpfs here: %s\n", strerror(errno));
            return -1;
        }
    } else {
        snprintf(fs->image, sizeof fs->image, "%s/fs.img", fs->base);
        /* -m 0: root gets no reserved blocks, so full means full for this test too */
        if (shell("truncate -s 40M '%s' && mkfs.ext4 -q -F -m 0 '%s' >/dev/null 2>&1", fs->image,
                  fs->image) != 0 ||
            shell("mount -o loop '%s' '%s' 2>/dev/null", fs->image, fs->mnt) != 0) {
            print_message("skipped: cannot make and loop-mount an ext4 image here (mkfs.ext4, "
                          "loop devices)\n");
            return -1;
        }
    }
    fs->is_mounted = 1;
    return 0;
}

/* Unmounts (the loop device goes with it: mount -o loop sets autoclear) and removes. */
static int
small_fs_teardown(void **state)
{
    small_fs_t *fs = *state;
    if (fs->is_mounted && umount2(fs->mnt, 0) != 0)
        umount2(fs->mnt, MNT_DETACH);
    if (fs->base) {
        harness_rmtree(fs->base);
        free(fs->base);
    }
    free(fs);
    return 0;
}

static int
tmpfs_setup(void **state)
{
    small_fs_t *fs = calloc(1, sizeof *fs);
    *state = fs;
    return fs ? 0 : -1;
}

static int
ext4_setup(void **state)
{
    int rc = tmpfs_setup(state);
    if (rc == 0)
        ((small_fs_t *)*state)->is_ext4 = 1;
    return rc;
}

/* Fills what is left of the file system with a file (written until ENOSPC). */
static void
fill_up(const char *mnt)
{
    char path[600];
    snprintf(path, sizeof path, "%s/filler", mnt);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    static const char block[1 << 16];
    size_t chunk = sizeof block;
    while (chunk >= 512) {
        ssize_t n = write(fd, block, chunk);
        if (n < 0 && errno == ENOSPC)
            chunk /= 2;
        else
            assert_true(n > 0);
    }
    fsync(fd);
    close(fd);
}

/* An insert of n events from line `first` on, SIGKILLed once it printed a seq (so the index
 * may lag the segments). */
static void
insert_killed_mid_stream(const char *journal, size_t first, size_t n)
{
    int in[2];
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    const char *args[] = {"insert", "-d", journal, "--segment-bytes", "16M", NULL};
    int out_fd = -1, err_fd = -1;
    pid_t pid = harness_spawn(args, in[0], &out_fd, &err_fd);
    close(in[0]);
    char *lines = harness_json_lines(first, n);
    signal(SIGPIPE, SIG_IGN);
    pid_t feeder = feed(in[1], lines);
    free(harness_read_lines(out_fd, 1, 30000)); /* it is writing */
    kill(pid, SIGKILL);
    harness_wait(pid);
    close(in[1]);
    harness_wait(feeder);
    close(out_fd);
    close(err_fd);
    free(lines);
}

/* A full disk: 16 MiB segments on a file system that holds one and a half; a writer
 * killed mid-stream (so the index may lag); then the disk filled to the last block. Each
 * later insert still opens the journal and stores its event in the room the active segment
 * has; a stream that needs the next segment halts with every stored seq printed; with space
 * back, a re-run from the line named stores each event once. */
static void
full_disk_never_wedges_the_journal(small_fs_t *fs)
{
    if (small_fs_mount(fs) != 0) {
        skip();
        return;
    }
    char journal[600];
    snprintf(journal, sizeof journal, "%s/j", fs->mnt);
    /* more than the 16 MiB segment holds (~150,000 of these events) */
    const size_t n_first = 40000, n_killed = 20000, n_stream = 200000, stream_first = 1000000;
    char *first = harness_json_lines(1, n_first);
    harness_result_t r =
        harness_run(0, first, "insert", "-q", "-d", journal, "--segment-bytes", "16M", NULL);
    harness_result_free(&r);

    insert_killed_mid_stream(journal, n_first + 1, n_killed);
    uint64_t stored = journal_last_seq(journal);
    fill_up(fs->mnt);

    for (int i = 0; i < 5; i++) {
        r = harness_run(0, "{\"k\":1}", "insert", "-d", journal, "--segment-bytes", "16M", NULL);
        assert_int_equal(printed_run(r.out, stored + 1), stored + 1);
        stored++;
        harness_result_free(&r);
    }
    assert_int_equal(journal_last_seq(journal), stored);

    char *stream = harness_json_lines(stream_first, n_stream);
    harness_run_t run = {.args = {"insert", "-d", journal, "--segment-bytes", "16M"},
                         .stdin_data = stream};
    harness_exec(&run, &r);
    assert_int_equal(r.exit_code, 3);
    assert_non_null(strstr(r.err, "No space left on device"));
    uint64_t last_printed = printed_run(r.out, stored + 1);
    assert_int_equal(journal_last_seq(journal), last_printed);
    uint64_t resume = resume_line(r.err);
    assert_int_equal(resume, last_printed - stored + 1);
    harness_result_free(&r);

    /* Space back (the filler goes, new segments are smaller): the re-run from the line named
     * stores the events from there, and none before it again. */
    char filler[600];
    snprintf(filler, sizeof filler, "%s/filler", fs->mnt);
    assert_int_equal(unlink(filler), 0);
    char *rest = lines_from(stream, resume);
    char *cut = rest;
    for (int line = 0; line < 1000 && cut; line++)
        cut = strchr(cut, '\n') ? strchr(cut, '\n') + 1 : NULL;
    if (cut)
        *cut = '\0';
    /* The halted stream filled the active segment to its end, so this run needs the next
     * segment: 1 MiB fits in what the filler gave back, as the index, catching up at the
     * open, leaves room for it. */
    harness_run_t rerun = {.args = {"insert", "-q", "-d", journal, "--segment-bytes", "1M",
                                    "--max-record-bytes", "64K"},
                           .stdin_data = rest};
    harness_exec(&rerun, &r);
    if (r.exit_code != 0)
        fail_msg("the re-run with space back failed: %s", r.err);
    harness_result_free(&r);
    assert_int_equal(journal_last_seq(journal), last_printed + 1000);
    assert_each_event_once(journal, stream_first, resume - 1 + 1000);
    r = harness_run(0, NULL, "verify", "-d", journal, NULL);
    harness_result_free(&r);
    free(rest);
    free(stream);
    free(first);
}

static void
test_full_tmpfs_never_wedges_the_journal(void **state)
{
    full_disk_never_wedges_the_journal(*state);
}

static void
test_full_ext4_image_never_wedges_the_journal(void **state)
{
    full_disk_never_wedges_the_journal(*state);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_halted_insert_prints_every_stored_seq_and_the_line_to_resume_from),
        cmocka_unit_test(test_insert_that_stored_everything_exits_0_without_a_next_segment),
        cmocka_unit_test(test_stop_signal_prints_every_stored_seq_and_dies_of_it),
        cmocka_unit_test_setup_teardown(test_full_tmpfs_never_wedges_the_journal, tmpfs_setup,
                                        small_fs_teardown),
        cmocka_unit_test_setup_teardown(test_full_ext4_image_never_wedges_the_journal, ext4_setup,
                                        small_fs_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
