/*
 * test_journal.c: the journal's writer API end to end on real files: create and reopen,
 * append/sync/roll, the writer lock, bad input (oversize, not a journal, newer version,
 * read-only directory, a segment size no file can have), retention, file modes, the sticky
 * failed state, and listing the directory through EINTR (interposed openat/readdir).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crc32c.h"
#include "direct.h"
#include "format.h"
#include "jtest_util.h"
#include "test_child.h"

enum { SMALL_SEGMENT_BYTES = 16 * 1024 };

/*
 * EINTR from the directory listing. A signal can interrupt the open of a directory stream
 * (openat of ".", relative to the journal's descriptor) and readdir on a FUSE or network
 * file system, never on the local disks the tests run on, so this binary puts its own openat
 * and readdir in front of the C library's (an executable's definitions win at link time):
 * each fails with EINTR as many times as armed (openat only for "."), then calls the next
 * definition (the C library's, or a sanitizer's interceptor).
 */
static struct {
    int open_dot, readdir;
} eintr_left;

int
openat(int dir_fd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, unsigned);
        va_end(ap);
    }
    if (eintr_left.open_dot > 0 && strcmp(path, ".") == 0) {
        eintr_left.open_dot--;
        errno = EINTR;
        return -1;
    }
    int (*next)(int, const char *, int, ...);
    void *sym = dlsym(RTLD_NEXT, "openat");
    memcpy(&next, &sym, sizeof next); /* POSIX's way from dlsym to a function pointer */
    return next(dir_fd, path, flags, mode);
}

struct dirent *
readdir(DIR *d)
{
    if (eintr_left.readdir > 0) {
        eintr_left.readdir--;
        errno = EINTR;
        return NULL;
    }
    struct dirent *(*next)(DIR *);
    void *sym = dlsym(RTLD_NEXT, "readdir");
    memcpy(&next, &sym, sizeof next);
    return next(d);
}

static void
test_open_creates_journal_and_reopen_keeps_records(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("create");
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/j", dir);
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    journal_recovery_t rec;
    stele_error_t err = {0};
    assert_int_equal(journal_open(sub, &o, &j, &rec, &err), 0);
    assert_int_equal(rec.last_seq, 0);
    assert_int_equal(rec.first_seq, 0);
    assert_string_equal(journal_source(j), "test");
    journal_batch_info_t info;
    assert_int_equal(jtest_append(j, 3, &info, &err), 0);
    assert_int_equal(info.first_seq, 1);
    assert_int_equal(info.last_seq, 3);
    assert_int_equal(info.segment_seq, 1);
    assert_int_equal(info.offset, SEG_HEADER_BYTES);
    assert_int_equal(jtest_append(j, 2, &info, &err), 0);
    assert_int_equal(info.first_seq, 4);
    assert_int_equal(journal_sync(j, &err), 0);
    assert_int_equal(journal_last_seq(j), 5);
    assert_int_equal(journal_close(j, &err), 0);

    o.source = "ignored-on-reopen";
    assert_int_equal(journal_open(sub, &o, &j, &rec, &err), 0);
    assert_int_equal(rec.last_seq, 5);
    assert_int_equal(rec.first_seq, 1);
    assert_int_equal(rec.last_ts_ns, 5000);
    assert_int_equal(rec.end, JOURNAL_END_CLEAN);
    assert_string_equal(rec.note, "");
    assert_string_equal(journal_source(j), "test");
    assert_int_equal(jtest_append(j, 1, NULL, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(jtest_read_all(sub, 1, &err), 6);
    jtest_rmtree(dir);
}

static void
test_append_rolls_segments_and_reader_crosses_them(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("roll");
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    int rolls = 0;
    for (int i = 0; i < 200; i++) {
        journal_batch_info_t info;
        assert_int_equal(jtest_append(j, 1 + (uint64_t)i % 5, &info, &err), 0);
        rolls += info.rolled;
        if (info.rolled)
            assert_int_equal(info.segment_seq, info.first_seq);
    }
    assert_true(rolls >= 5);
    uint64_t last = journal_last_seq(j);
    journal_stats_t st;
    journal_stats(j, &st);
    assert_int_equal(st.last_seq, last);
    assert_int_equal(st.first_seq, 1);
    assert_true(st.segments >= (uint64_t)rolls + 1);
    assert_true(st.disk_bytes >= (uint64_t)(rolls + 1) * SMALL_SEGMENT_BYTES);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last);
    assert_int_equal(jtest_read_all(dir, last - 3, &err), 4);

    journal_recovery_t rec;
    assert_int_equal(journal_open(dir, &o, &j, &rec, &err), 0);
    assert_int_equal(rec.last_seq, last);
    assert_int_equal(jtest_append(j, 2, NULL, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last + 2);
    jtest_rmtree(dir);
}

static void
test_second_writer_gets_elocked_naming_the_pid(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("lock");
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL, *j2 = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    /* Same process, a second open file description: OFD locks conflict. */
    assert_int_equal(journal_open(dir, &o, &j2, NULL, &err), STELE_ELOCKED);
    assert_null(j2);
    char want[64];
    snprintf(want, sizeof want, "(pid %d)", (int)getpid());
    assert_non_null(strstr(err.message, want));
    /* The holder may be `stele serve`: the hint names the way in beside it. */
    assert_non_null(strstr(err.hint, "stele serve"));
    assert_non_null(strstr(err.hint, "stele_client_connect"));
    /* And from another process. */
    pid_t child = test_fork_bound();
    assert_true(child >= 0);
    if (child == 0) {
        stele_error_t cerr = {0};
        journal_t *cj = NULL;
        int rc = journal_open(dir, &o, &cj, NULL, &cerr);
        _exit(rc == STELE_ELOCKED && strstr(cerr.message, want) ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(journal_open(dir, &o, &j2, NULL, &err), 0);
    assert_int_equal(journal_close(j2, &err), 0);
    jtest_rmtree(dir);
}

static void
test_append_rejects_oversize_record_and_changes_nothing(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("big");
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    o.max_record_bytes = 100;
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    uint8_t payload[101] = {1}, frame[256];
    journal_frame_prepare(JTEST_VERSION, frame, 1, 1, NULL, payload, sizeof payload);
    assert_int_equal(
        journal_append_batch(j, frame, journal_frame_bytes(JTEST_VERSION, 101), NULL, &err),
        STELE_ETOOBIG);
    assert_non_null(strstr(err.message, "101 bytes"));
    assert_int_equal(journal_last_seq(j), 0);
    /* A batch larger than a segment is refused too, and is not sticky. */
    journal_close(j, &err);
    o.max_record_bytes = 64 * 1024;
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    size_t big = 20000;
    uint8_t *p = calloc(1, big),
            *buf = calloc(1, journal_frame_bytes(JTEST_VERSION, (uint32_t)big));
    assert_non_null(p);
    assert_non_null(buf);
    p[0] = 1;
    journal_frame_prepare(JTEST_VERSION, buf, 1, 1, NULL, p, (uint32_t)big);
    assert_int_equal(
        journal_append_batch(j, buf, journal_frame_bytes(JTEST_VERSION, (uint32_t)big), NULL, &err),
        STELE_ETOOBIG);
    /* Wrong seq and going-back timestamps are refused without harm. */
    journal_frame_prepare(JTEST_VERSION, frame, 7, 1, NULL, payload, 10);
    assert_int_equal(
        journal_append_batch(j, frame, journal_frame_bytes(JTEST_VERSION, 10), NULL, &err),
        STELE_EINVAL);
    assert_int_equal(jtest_append(j, 2, NULL, &err), 0);
    journal_frame_prepare(JTEST_VERSION, frame, 3, 5, NULL, payload, 10);
    assert_int_equal(
        journal_append_batch(j, frame, journal_frame_bytes(JTEST_VERSION, 10), NULL, &err),
        STELE_EINVAL);
    assert_int_equal(jtest_append(j, 1, NULL, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(jtest_read_all(dir, 1, &err), 3);
    free(p);
    free(buf);
    jtest_rmtree(dir);
}

/* Appends records first_seq .. first_seq + 2 as one batch, their leaves hashed by
 * journal_frame_hash_leaf (with_leaves) or left for the sealer. */
static void
append_three_records(journal_t *j, uint64_t first_seq, int with_leaves)
{
    const journal_origin_t origin = {.uid = 1000, .gid = 100, .pid = 42, .kind = 1};
    uint8_t buf[2048], payload[512];
    size_t off = 0;
    for (uint64_t seq = first_seq; seq < first_seq + 3; seq++) {
        jtest_payload(seq, payload);
        journal_frame_prepare(JTEST_VERSION, buf + off, seq, (int64_t)seq * 1000, &origin, payload,
                              jtest_payload_len(seq));
        if (with_leaves)
            journal_frame_hash_leaf(JTEST_VERSION, buf + off);
        off += journal_frame_bytes(JTEST_VERSION, jtest_payload_len(seq));
    }
    stele_error_t err = {0};
    assert_int_equal(journal_append_batch(j, buf, off, NULL, &err), 0);
}

/* The sealer chains the leaf hash journal_frame_hash_leaf left in a frame, and hashes the
 * leaf itself where the field is zero: either way every record's chain hash is the one the
 * reader recomputes from its bytes (rule S3). */
static void
test_leaves_hashed_before_sealing_chain_like_leaves_hashed_by_the_sealer(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("leaf");
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    append_three_records(j, 1, 1);
    append_three_records(j, 4, 0);
    append_three_records(j, 7, 1);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(jtest_read_all(dir, 1, &err), 9);
    jtest_rmtree(dir);
}

static void
test_open_refuses_non_journal_directory_and_creates_nothing(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("notj");
    char path[4200];
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("hello\n", f);
    fclose(f);
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), STELE_ENOTJOURNAL);
    assert_non_null(strstr(err.message, "is not a stele journal"));
    assert_non_null(strstr(err.message, "(no segments, no LOCK, 1 other entries)"));
    snprintf(path, sizeof path, "%s/LOCK", dir);
    assert_int_equal(access(path, F_OK), -1);
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), STELE_ENOTJOURNAL);
    /* A plain file is not a journal either. */
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    assert_int_equal(journal_open(path, &o, &j, NULL, &err), STELE_ENOTJOURNAL);
    /* Missing without create_if_missing. */
    snprintf(path, sizeof path, "%s/missing", dir);
    o.create_if_missing = 0;
    assert_int_equal(journal_open(path, &o, &j, NULL, &err), -ENOENT);
    jtest_rmtree(dir);
}

static void
test_open_refuses_newer_format_version(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("ver");
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    assert_int_equal(jtest_append(j, 1, NULL, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    char seg[4200];
    jtest_seg_path(seg, sizeof seg, dir, 1);
    size_t len = 0;
    uint8_t *file = jtest_read_file(seg, &len);
    uint8_t head[SEG_HEADER_BYTES];
    memcpy(head, file, sizeof head);
    format_store_u32(head + SEG_OFF_VERSION, FORMAT_VERSION + 1);
    format_store_u32(head + SEG_OFF_CRC, crc32c(head, SEG_CRC_COVERED_BYTES));
    jtest_poke(seg, 0, head, SEG_CRC_COVERED_BYTES + 4);
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), STELE_EVERSION);
    char want[64];
    snprintf(want, sizeof want, "format version %u; this stele reads up to %u", FORMAT_VERSION + 1,
             FORMAT_VERSION);
    assert_non_null(strstr(err.message, want));
    assert_non_null(strstr(err.hint, "upgrade"));
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), STELE_EVERSION);
    /* Nothing was changed: the segment is byte for byte what it was. */
    size_t len2 = 0;
    uint8_t *after = jtest_read_file(seg, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(after + SEG_HEADER_BYTES, file + SEG_HEADER_BYTES, len - SEG_HEADER_BYTES);
    free(file);
    free(after);
    jtest_rmtree(dir);
}

/* Sets (or, called again, clears) a reserved header byte of segment first_seq: outside the
 * header CRC, so only rule H5 can catch it. */
static void
flip_reserved_header_byte(const char *dir, uint64_t first_seq, uint64_t off)
{
    char seg[4200];
    jtest_seg_path(seg, sizeof seg, dir, first_seq);
    size_t len = 0;
    uint8_t *file = jtest_read_file(seg, &len);
    uint8_t byte = file[off] ^ 0x5a;
    jtest_poke(seg, off, &byte, 1);
    free(file);
}

/* Open (recovery) and readers refuse a header whose reserved bytes are not zero (rule H5),
 * in a sealed segment and in the newest, naming the segment and the byte's offset, and
 * change nothing; with the byte cleared again everything reads. Not only stele verify
 * looks at those bytes. */
static void
test_open_and_readers_refuse_a_non_zero_reserved_header_byte(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("reserved");
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    journal_batch_info_t info = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    while (!info.rolled)
        assert_int_equal(jtest_append(j, 3, &info, &err), 0);
    uint64_t newest = info.segment_seq, last = journal_last_seq(j);
    assert_int_equal(journal_close(j, &err), 0);
    char seg_path[2][4200];
    jtest_seg_path(seg_path[0], sizeof seg_path[0], dir, 1);
    jtest_seg_path(seg_path[1], sizeof seg_path[1], dir, newest);
    const struct {
        uint64_t first_seq, off;
        const char *message;
    } cases[] = {
        {1, SEG_V2_USED_BYTES,
         "segment 00000000000000000001.seg offset 2216: reserved header byte is not zero"},
        {newest, SEG_HEADER_BYTES - 1, "offset 4095: reserved header byte is not zero"},
    };
    for (size_t i = 0; i < 2; i++) {
        size_t len[2], len_after = 0;
        uint8_t *before[2] = {jtest_read_file(seg_path[0], &len[0]),
                              jtest_read_file(seg_path[1], &len[1])};
        flip_reserved_header_byte(dir, cases[i].first_seq, cases[i].off);
        assert_int_equal(journal_open(dir, &o, &j, NULL, &err), STELE_ECORRUPT);
        print_message("open: %s\n", err.message);
        assert_non_null(strstr(err.message, cases[i].message));
        assert_non_null(strstr(err.hint, "stele verify"));
        memset(&err, 0, sizeof err);
        assert_int_equal(jtest_read_all(dir, 1, &err), STELE_ECORRUPT);
        assert_non_null(strstr(err.message, cases[i].message));
        flip_reserved_header_byte(dir, cases[i].first_seq, cases[i].off);
        for (int k = 0; k < 2; k++) { /* nothing else was changed */
            uint8_t *after = jtest_read_file(seg_path[k], &len_after);
            assert_int_equal(len_after, len[k]);
            assert_memory_equal(after, before[k], len[k]);
            free(after);
            free(before[k]);
        }
    }
    journal_recovery_t rec;
    assert_int_equal(journal_open(dir, &o, &j, &rec, &err), 0);
    assert_int_equal(rec.last_seq, last);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last);
    jtest_rmtree(dir);
}

/* Opening for writing fails with a clear error; reading works. Run in a process without
 * write access: root ignores permissions, so as root a child drops to "nobody" first. */
static int
ro_check(const char *dir)
{
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    int rc = journal_open(dir, &o, &j, NULL, &err);
    if (rc != -EACCES || !strstr(err.message, "LOCK") || !strstr(err.hint, "writable")) {
        fprintf(stderr, "read-only open gave %d: %s\n", rc, err.message);
        return 1;
    }
    journal_reader_t *r = NULL;
    if (journal_reader_open(dir, NULL, &r, &err) != 0)
        return 2;
    journal_record_t rec;
    int n = 0;
    while (journal_reader_next(r, &rec, &err) == 0)
        n++;
    journal_reader_close(r);
    return n == 4 ? 0 : 3;
}

static void
test_open_read_only_directory_gives_clear_error_and_readers_work(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("ro");
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    o.file_mode = 0644;
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    assert_int_equal(jtest_append(j, 4, NULL, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(chmod(dir, 0555), 0);
    if (geteuid() != 0) {
        assert_int_equal(ro_check(dir), 0);
    } else {
        pid_t child = test_fork_bound();
        assert_true(child >= 0);
        if (child == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(10);
            _exit(ro_check(dir));
        }
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    jtest_rmtree(dir);
}

static void
test_delete_before_removes_only_whole_sealed_segments(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("ret");
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    uint64_t starts[64];
    size_t n_starts = 1;
    starts[0] = 1;
    while (n_starts < 5) {
        journal_batch_info_t info;
        assert_int_equal(jtest_append(j, 3, &info, &err), 0);
        if (info.rolled)
            starts[n_starts++] = info.segment_seq;
    }
    /* seq inside segment 2: only segment 1 (all < starts[1]) may go. */
    assert_int_equal(journal_delete_before(j, starts[1] + 1, &err), 1);
    char seg[4200];
    jtest_seg_path(seg, sizeof seg, dir, starts[0]);
    assert_int_equal(access(seg, F_OK), -1);
    jtest_seg_path(seg, sizeof seg, dir, starts[1]);
    assert_int_equal(access(seg, F_OK), 0);
    /* Exactly at a segment start: everything below it goes. */
    assert_int_equal(journal_delete_before(j, starts[3], &err), 2);
    /* Never the active segment, whatever seq says. */
    assert_int_equal(journal_delete_before(j, UINT64_MAX, &err), 1);
    journal_stats_t st;
    journal_stats(j, &st);
    assert_int_equal(st.first_seq, starts[4]);
    uint64_t last = journal_last_seq(j);
    assert_int_equal(journal_close(j, &err), 0);
    /* A reader seeking below the oldest is told and starts at the oldest. */
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    assert_int_equal(journal_reader_seek(r, 1, 0, 0, &err), STELE_ENOTFOUND);
    journal_record_t rec;
    assert_int_equal(journal_reader_next(r, &rec, &err), 0);
    assert_int_equal(rec.seq, starts[4]);
    journal_reader_close(r);
    assert_int_equal(jtest_read_all(dir, starts[4], &err), (int64_t)(last - starts[4] + 1));
    /* Reopen after retention: the oldest segment verifies on its own. */
    journal_recovery_t rec2;
    assert_int_equal(journal_open(dir, &o, &j, &rec2, &err), 0);
    assert_int_equal(rec2.first_seq, starts[4]);
    assert_int_equal(rec2.last_seq, last);
    assert_int_equal(journal_close(j, &err), 0);
    jtest_rmtree(dir);
}

static void
test_files_are_owner_only_by_default_and_modes_follow_options(void **state)
{
    (void)state;
    char *base = jtest_tmpdir("mode");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/j", base);
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    mode_t old_umask = umask(022);
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    assert_int_equal(jtest_append(j, 1, NULL, &err), 0);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    char path[4300];
    jtest_seg_path(path, sizeof path, dir, 1);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    snprintf(path, sizeof path, "%s/LOCK", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(journal_close(j, &err), 0);

    snprintf(dir, sizeof dir, "%s/k", base);
    o.dir_mode = 0750;
    o.file_mode = 0640;
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0750);
    jtest_seg_path(path, sizeof path, dir, 1);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_int_equal(journal_close(j, &err), 0);
    umask(old_umask);
    jtest_rmtree(base);
}

/* An I/O table whose fdatasync fails with EIO after `ok_syncs` successes. */
typedef struct failing_sync {
    const journal_io_t *inner;
    int ok_syncs;
} failing_sync_t;

static int
failing_fdatasync(void *ctx, int fd)
{
    failing_sync_t *f = ctx;
    if (f->ok_syncs-- > 0)
        return f->inner->fdatasync(f->inner->ctx, fd);
    return -EIO;
}

/* Methods that only pass the call on, for the wrapping tables below; each table's state
 * starts with its `inner` table. */
#define FWD(name, ret, params, args)                                                               \
    static ret fwd_##name params                                                                   \
    {                                                                                              \
        const journal_io_t *inner = *(const journal_io_t *const *)ctx;                             \
        return inner->name args;                                                                   \
    }
FWD(open_file, int, (void *ctx, int d, const char *p, int fl, mode_t m), (inner->ctx, d, p, fl, m))
FWD(pread, ssize_t, (void *ctx, int fd, void *b, size_t l, off_t o), (inner->ctx, fd, b, l, o))
FWD(pwritev, int, (void *ctx, int fd, const struct iovec *v, int n, off_t o),
    (inner->ctx, fd, v, n, o))
FWD(fdatasync, int, (void *ctx, int fd), (inner->ctx, fd))
FWD(fsync, int, (void *ctx, int fd), (inner->ctx, fd))
FWD(truncate, int, (void *ctx, int fd, off_t l), (inner->ctx, fd, l))
FWD(allocate, int, (void *ctx, int fd, off_t o, off_t l, int z), (inner->ctx, fd, o, l, z))
FWD(rename, int, (void *ctx, int d, const char *a, const char *b), (inner->ctx, d, a, b))
FWD(unlink, int, (void *ctx, int d, const char *p), (inner->ctx, d, p))
FWD(sync_dir, int, (void *ctx, int d), (inner->ctx, d))
FWD(file_size, int, (void *ctx, int fd, off_t *s), (inner->ctx, fd, s))
FWD(close, int, (void *ctx, int fd), (inner->ctx, fd))
FWD(open_dir, int, (void *ctx, int d, const char *p), (inner->ctx, d, p))
FWD(make_dir, int, (void *ctx, int d, const char *p, mode_t m), (inner->ctx, d, p, m))
FWD(set_mode, int, (void *ctx, int fd, mode_t m), (inner->ctx, fd, m))

/* A table that passes every call on to the `inner` table at the start of ctx's state;
 * tests then replace the methods they watch or break. */
static journal_io_t
fwd_table(void *ctx)
{
    return (journal_io_t){.ctx = ctx,
                          .open_file = fwd_open_file,
                          .pread = fwd_pread,
                          .pwritev = fwd_pwritev,
                          .fdatasync = fwd_fdatasync,
                          .fsync = fwd_fsync,
                          .truncate = fwd_truncate,
                          .allocate = fwd_allocate,
                          .rename = fwd_rename,
                          .unlink = fwd_unlink,
                          .sync_dir = fwd_sync_dir,
                          .file_size = fwd_file_size,
                          .close = fwd_close,
                          .open_dir = fwd_open_dir,
                          .make_dir = fwd_make_dir,
                          .set_mode = fwd_set_mode};
}

static void
test_failed_sync_halts_the_journal_for_good(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("halt");
    failing_sync_t f = {.inner = journal_io_posix(), .ok_syncs = 1000};
    journal_io_t io = fwd_table(&f);
    io.fdatasync = failing_fdatasync;
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    o.io = &io;
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    assert_int_equal(jtest_append(j, 2, NULL, &err), 0);
    assert_int_equal(journal_sync(j, &err), 0);
    f.ok_syncs = 0;
    assert_int_equal(jtest_append(j, 1, NULL, &err), 0);
    assert_int_equal(journal_sync(j, &err), -EIO);
    assert_non_null(strstr(err.message, "could not sync segment 00000000000000000001.seg"));
    f.ok_syncs = 1000; /* the disk "recovers": the journal must not believe it */
    assert_int_equal(journal_sync(j, &err), STELE_EHALTED);
    assert_non_null(strstr(err.message, "Input/output error"));
    assert_int_equal(jtest_append(j, 1, NULL, &err), STELE_EHALTED);
    assert_int_equal(journal_close(j, &err), -EIO);
    /* Reopening runs recovery and keeps every synced record. */
    o.io = NULL;
    journal_recovery_t rec;
    assert_int_equal(journal_open(dir, &o, &j, &rec, &err), 0);
    assert_true(rec.last_seq >= 2);
    assert_int_equal(journal_close(j, &err), 0);
    jtest_rmtree(dir);
}

/* An I/O table that watches direct writes: every one must be aligned as O_DIRECT requires,
 * and with `refuse` set they fail with EINVAL the way some file systems fail them. */
typedef struct direct_probe {
    const journal_io_t *inner;
    int refuse;
    int is_direct[1024]; /* by fd */
    int n_direct_opens;
    int n_direct_writes;
    int n_misaligned;
    int n_buffered_writes;
} direct_probe_t;

static int
probe_open_file(void *ctx, int dir_fd, const char *name, int flags, mode_t mode)
{
    direct_probe_t *p = ctx;
    int fd = p->inner->open_file(p->inner->ctx, dir_fd, name, flags, mode);
    if (fd >= 0 && fd < 1024) {
        p->is_direct[fd] = (flags & JOURNAL_IO_DIRECT) != 0;
        p->n_direct_opens += p->is_direct[fd];
    }
    return fd;
}

static int
probe_pwritev(void *ctx, int fd, const struct iovec *v, int n, off_t off)
{
    direct_probe_t *p = ctx;
    if (fd < 0 || fd >= 1024 || !p->is_direct[fd]) {
        p->n_buffered_writes++;
        return p->inner->pwritev(p->inner->ctx, fd, v, n, off);
    }
    p->n_direct_writes++;
    for (int i = 0; i < n; i++)
        if ((uintptr_t)v[i].iov_base % DIRECT_ALIGN || v[i].iov_len % DIRECT_ALIGN)
            p->n_misaligned++;
    if (off % DIRECT_ALIGN)
        p->n_misaligned++;
    if (p->refuse)
        return -EINVAL;
    return p->inner->pwritev(p->inner->ctx, fd, v, n, off);
}

static int
probe_close(void *ctx, int fd)
{
    direct_probe_t *p = ctx;
    if (fd >= 0 && fd < 1024)
        p->is_direct[fd] = 0;
    return p->inner->close(p->inner->ctx, fd);
}

static journal_io_t
probe_table(direct_probe_t *p)
{
    journal_io_t io = fwd_table(p);
    io.open_file = probe_open_file;
    io.pwritev = probe_pwritev;
    io.close = probe_close;
    return io;
}

/* Appends batches of 1..9 records (so writes start and end anywhere in a block, and some
 * span blocks) over several segment rolls, syncing after each, then reopens and goes on. */
static uint64_t
append_synced_batches(const char *dir, journal_options_t *o, int n_batches)
{
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, o, &j, NULL, &err), 0);
    for (int i = 0; i < n_batches; i++) {
        assert_int_equal(jtest_append(j, 1 + (uint64_t)(i * 7) % 9, NULL, &err), 0);
        assert_int_equal(journal_sync(j, &err), 0);
    }
    uint64_t last = journal_last_seq(j);
    assert_int_equal(journal_close(j, &err), 0);
    return last;
}

static void
test_direct_writes_are_aligned_and_keep_every_record(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("direct");
    direct_probe_t probe = {.inner = journal_io_posix()};
    journal_io_t io = probe_table(&probe);
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    o.io = &io;
    o.direct_writes = 1;
    o.zero_fill = JOURNAL_ZERO_FILL_ALWAYS;
    uint64_t last = append_synced_batches(dir, &o, 150);
    stele_error_t err = {0};
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last);
    /* Reopened after recovery: the first write reads its block's head back from the file. */
    uint64_t last2 = append_synced_batches(dir, &o, 40);
    assert_true(last2 > last);
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last2);
    if (probe.n_direct_opens == 0) {
        print_message("direct writes skipped: this file system refuses O_DIRECT\n");
    } else {
        assert_true(probe.n_direct_opens >= 5); /* one per segment, rolls included */
        assert_int_equal(probe.n_direct_writes, 190);
        assert_int_equal(probe.n_misaligned, 0);
    }
    jtest_rmtree(dir);
}

static void
test_refused_direct_writes_fall_back_to_buffered(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("direct-refused");
    direct_probe_t probe = {.inner = journal_io_posix(), .refuse = 1};
    journal_io_t io = probe_table(&probe);
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    o.io = &io;
    o.direct_writes = 1;
    uint64_t last = append_synced_batches(dir, &o, 100);
    stele_error_t err = {0};
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last);
    if (probe.n_direct_opens == 0) {
        print_message("direct writes skipped: this file system refuses O_DIRECT\n");
    } else {
        /* Refused once, then never tried again in that journal, rolls included. */
        assert_int_equal(probe.n_direct_opens, 1);
        assert_int_equal(probe.n_direct_writes, 1);
        assert_true(probe.n_buffered_writes >= 100);
    }
    jtest_rmtree(dir);
}

/* A table whose pwritev fails (EIO) the first record write at the start of a segment once
 * armed: the journal halts right after a roll, leaving a newest segment with no record. */
typedef struct first_frame_fault {
    const journal_io_t *inner;
    int armed;
} first_frame_fault_t;

static int
first_frame_fault_pwritev(void *ctx, int fd, const struct iovec *v, int n, off_t off)
{
    first_frame_fault_t *f = ctx;
    uint64_t head = 0;
    if (n > 0 && v[0].iov_len >= sizeof head)
        memcpy(&head, v[0].iov_base, sizeof head);
    /* Zero-filling writes zeros; a frame never starts with eight zero bytes. */
    if (f->armed && off == SEG_HEADER_BYTES && head != 0) {
        f->armed = 0;
        return -EIO;
    }
    return f->inner->pwritev(f->inner->ctx, fd, v, n, off);
}

/* A newest segment with no record (the power failed right after a roll) and a reopen with a
 * larger segment size: the first batch that does not fit that old, small file rolls to a
 * segment starting at the same seq, which replaces the empty one. The journal must not list
 * the segment twice: retention then deleted the live segment with synced records in it. */
static void
test_roll_from_an_empty_newest_segment_replaces_it(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("emptyroll");
    first_frame_fault_t f = {.inner = journal_io_posix()};
    journal_io_t io = fwd_table(&f);
    io.pwritev = first_frame_fault_pwritev;
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    o.io = &io;
    journal_t *j = NULL;
    stele_error_t err = {0};
    journal_batch_info_t info = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    assert_int_equal(jtest_append(j, 3, &info, &err), 0);
    f.armed = 1;
    int rc = 0;
    while ((rc = jtest_append(j, 3, &info, &err)) == 0)
        assert_int_equal(journal_sync(j, &err), 0);
    assert_int_equal(rc, -EIO); /* the batch after the roll */
    (void)journal_close(j, NULL);

    o.io = NULL;
    o.segment_bytes = 4 * SMALL_SEGMENT_BYTES;
    journal_recovery_t rec;
    assert_int_equal(journal_open(dir, &o, &j, &rec, &err), 0);
    uint64_t synced = rec.last_seq;
    assert_true(synced >= 6);
    assert_int_equal(jtest_append(j, 120, &info, &err), 0); /* more than the old file holds */
    assert_int_equal(journal_sync(j, &err), 0);
    /* Retention may take every sealed segment, never the active one. */
    assert_true(journal_delete_before(j, UINT64_MAX, &err) >= 0);
    uint64_t last = journal_last_seq(j);
    assert_int_equal(last, synced + 120);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(journal_open(dir, &o, &j, &rec, &err), 0);
    assert_int_equal(rec.last_seq, last);
    assert_int_equal(journal_close(j, &err), 0);
    assert_true(jtest_read_all(dir, synced + 1, &err) == 120);
    jtest_rmtree(dir);
}

/* Records the directories sync_dir was asked to sync, by the path their descriptor has. */
typedef struct dir_sync_log {
    const journal_io_t *inner;
    char synced[8][PATH_MAX];
    int n;
} dir_sync_log_t;

static int
logging_sync_dir(void *ctx, int dir_fd)
{
    dir_sync_log_t *l = ctx;
    char self_path[64];
    snprintf(self_path, sizeof self_path, "/proc/self/fd/%d", dir_fd);
    if (l->n < 8 && realpath(self_path, l->synced[l->n]))
        l->n++;
    return l->inner->sync_dir(l->inner->ctx, dir_fd);
}

/* A new journal's directory entry is made durable by syncing the directory that holds it,
 * also when the path is given with a trailing slash (syncing the new directory itself
 * would leave its entry in the parent unsynced: the journal could vanish with a power
 * failure). */
static void
test_new_journal_syncs_its_parent_whatever_the_slashes(void **state)
{
    (void)state;
    char *base = jtest_tmpdir("parent");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/j/", base);
    dir_sync_log_t l = {.inner = journal_io_posix()};
    journal_io_t io = fwd_table(&l);
    io.sync_dir = logging_sync_dir;
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    o.io = &io;
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    int synced_base = 0;
    for (int i = 0; i < l.n; i++)
        synced_base |= strcmp(l.synced[i], base) == 0;
    assert_true(synced_base);
    jtest_rmtree(base);
}

static void
test_open_rejects_bad_options(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("opts");
    journal_options_t o;
    jtest_options(&o, 100);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), STELE_EINVAL);
    jtest_options(&o, 0);
    o.source = "a-source-name-that-is-far-too-long-to-fit-in-the-sixty-four-byte-field";
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), STELE_EINVAL);
    assert_int_equal(journal_close(NULL, NULL), 0);
    jtest_rmtree(dir);
}

/* A segment size no file can have (off_t is signed: 2^63 and more) is refused when the first
 * segment is made, whichever way it is preallocated. Taken as an off_t, such a size is a
 * negative length: zero-filling would write nothing and open a journal whose "2^63-byte"
 * segment is its 4 KiB header, never preallocated. */
static void
test_open_refuses_a_segment_size_no_file_can_have(void **state)
{
    (void)state;
    for (int zero_fill = 1; zero_fill >= 0; zero_fill--) {
        char *dir = jtest_tmpdir("huge-segment");
        journal_options_t o;
        jtest_options(&o, (uint64_t)1 << 63);
        o.zero_fill = zero_fill ? JOURNAL_ZERO_FILL_ALWAYS : JOURNAL_ZERO_FILL_NEVER;
        o.prepare_inline = 1;
        journal_t *j = NULL;
        stele_error_t err = {0};
        assert_int_equal(journal_open(dir, &o, &j, NULL, &err), -EFBIG);
        assert_null(j);
        assert_non_null(strstr(err.message, "could not create segment 00000000000000000001.seg"));
        char path[4300];
        jtest_seg_path(path, sizeof path, dir, 1);
        assert_int_equal(access(path, F_OK), -1);
        jtest_rmtree(dir);
    }
}

/* Disarms the interposed calls, also after a failed test. */
static int
eintr_disarm(void **state)
{
    (void)state;
    memset(&eintr_left, 0, sizeof eintr_left);
    return 0;
}

/* Listing the journal directory retries EINTR (its open, and readdir, which leaves the stream
 * where it was), as every other call of the journal does: a signal must not make an open
 * fail, nor a reader miss a segment. */
static void
test_open_and_readers_list_the_directory_through_eintr(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("eintr-list");
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    for (int i = 0; i < 150; i++) /* over several segments */
        assert_int_equal(jtest_append(j, 2, NULL, &err), 0);
    uint64_t last = journal_last_seq(j);
    assert_int_equal(journal_close(j, &err), 0);

    journal_recovery_t rec;
    eintr_left.open_dot = 2;
    eintr_left.readdir = 3;
    assert_int_equal(journal_open(dir, &o, &j, &rec, &err), 0);
    assert_int_equal(eintr_left.open_dot, 0);
    assert_int_equal(eintr_left.readdir, 0);
    assert_int_equal(rec.first_seq, 1);
    assert_int_equal(rec.last_seq, last);
    assert_int_equal(journal_close(j, &err), 0);

    journal_segment_info_t segs[64];
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    int n = journal_reader_segments(r, segs, 64, &err);
    assert_true(n >= 3);
    eintr_left.readdir = 2;
    assert_int_equal(journal_reader_segments(r, segs, 64, &err), n);
    assert_int_equal(eintr_left.readdir, 0);
    journal_reader_close(r);
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last);
    jtest_rmtree(dir);
}

/* ---- preallocation: JOURNAL_ZERO_FILL_SMALL_SYNCS ---- */

/* Counts the preallocations of each kind, then lets the POSIX table do them. */
static int zero_filled_segments, fallocated_segments;

static int
counting_allocate(void *ctx, int fd, off_t off, off_t len, int zero_fill)
{
    (void)ctx;
    if (zero_fill)
        zero_filled_segments++;
    else
        fallocated_segments++;
    const journal_io_t *posix = journal_io_posix();
    return posix->allocate(posix->ctx, fd, off, len, zero_fill);
}

/* Appends batches of `records` records, each synced, until `rolls` segments were prepared
 * after the call started. */
static void
append_synced_until_prepared(journal_t *j, uint64_t records, int rolls)
{
    stele_error_t err = {0};
    int start = zero_filled_segments + fallocated_segments;
    while (zero_filled_segments + fallocated_segments < start + rolls) {
        assert_int_equal(jtest_append(j, records, NULL, &err), 0);
        assert_int_equal(journal_sync(j, &err), 0);
    }
}

/* Segments are zero-filled while each sync carries a small batch (a lone durable writer),
 * fallocate'd once syncs carry batches of more than JOURNAL_ZERO_FILL_MAX_SYNC_BYTES (bulk
 * ingest, where zero-filling would write everything twice), and zero-filled again when the
 * batches get small. Records stay readable across all three. */
static void
test_zero_fill_follows_the_size_of_synced_batches(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("zerofill");
    journal_io_t io = *journal_io_posix();
    io.allocate = counting_allocate;
    journal_options_t o;
    jtest_options(&o, 2 << 20);
    o.io = &io;
    o.zero_fill = JOURNAL_ZERO_FILL_SMALL_SYNCS;
    o.prepare_inline = 1; /* each roll prepares its successor in this thread, in order */
    zero_filled_segments = fallocated_segments = 0;
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    assert_int_equal(zero_filled_segments, 1); /* no sync seen yet: zero-filled */
    assert_int_equal(fallocated_segments, 0);

    /* 5,000 records of 16-215 bytes (plus frame) per sync: ~450 KiB */
    append_synced_until_prepared(j, 5000, 8);
    assert_true(fallocated_segments >= 4);
    int zero_filled_before = zero_filled_segments;
    append_synced_until_prepared(j, 5000, 2);
    assert_int_equal(zero_filled_segments, zero_filled_before);

    /* 100 records per sync, ~13 KiB: the average falls below the limit within a few syncs,
     * long before the segment being filled is full */
    int fallocated_before = fallocated_segments;
    append_synced_until_prepared(j, 100, 1);
    assert_int_equal(fallocated_segments, fallocated_before);
    assert_int_equal(zero_filled_segments, zero_filled_before + 1);

    uint64_t last = journal_last_seq(j);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last);
    jtest_rmtree(dir);
}

/* Whether dir/prepared.tmp exists within `wait_ms` (polling: the preparer is a thread). */
static int
prepared_file_appears(const char *dir, int wait_ms)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, SEG_PREPARED_NAME);
    for (int waited = 0;; waited += 10) {
        if (access(path, F_OK) == 0)
            return 1;
        if (waited >= wait_ms)
            return 0;
        usleep(10 * 1000);
    }
}

/* The preparer makes the next segment only once the active one is a quarter full: right
 * after an open it would compete with the first commits for the disk. A roll before the
 * mark (one batch larger than the rest of the segment) still gets its segment. */
static void
test_next_segment_is_prepared_once_the_active_one_is_a_quarter_full(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("prepare-at");
    journal_options_t o;
    jtest_options(&o, 1 << 20);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    journal_batch_info_t info;
    assert_int_equal(jtest_append(j, 100, &info, &err), 0); /* ~15 KiB */
    assert_false(prepared_file_appears(dir, 200));
    while (info.offset < (1 << 20) / 4)
        assert_int_equal(jtest_append(j, 100, &info, &err), 0);
    assert_true(prepared_file_appears(dir, 10000));
    assert_int_equal(journal_close(j, &err), 0);

    /* reopened past the mark: prepared with the first batch (test_journal_space shows that
     * nothing is prepared before it) */
    char stale[1024];
    snprintf(stale, sizeof stale, "%s/%s", dir, SEG_PREPARED_NAME);
    assert_int_equal(unlink(stale), 0);
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    assert_int_equal(jtest_append(j, 1, &info, &err), 0);
    assert_true(prepared_file_appears(dir, 10000));
    journal_close(j, &err);
    jtest_rmtree(dir);

    /* a fresh journal, a few records (below the mark), then one batch too big for the rest
     * of the segment: the roll asks for its segment itself */
    dir = jtest_tmpdir("prepare-roll");
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    assert_int_equal(jtest_append(j, 100, &info, &err), 0);
    uint64_t used = info.offset;
    for (uint64_t seq = 1; seq <= 100; seq++)
        used += journal_frame_bytes(JTEST_VERSION, jtest_payload_len(seq));
    uint64_t before = journal_last_seq(j), n = 0, bytes = 0;
    while (bytes <= (1 << 20) - used) /* just more than what is left */
        bytes += journal_frame_bytes(JTEST_VERSION, jtest_payload_len(before + 1 + n++));
    assert_int_equal(jtest_append(j, n, &info, &err), 0);
    assert_true(info.rolled);
    uint64_t last = journal_last_seq(j);
    assert_int_equal(last, before + n);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(jtest_read_all(dir, 1, &err), (int64_t)last);
    jtest_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_creates_journal_and_reopen_keeps_records),
        cmocka_unit_test(test_append_rolls_segments_and_reader_crosses_them),
        cmocka_unit_test(test_second_writer_gets_elocked_naming_the_pid),
        cmocka_unit_test(test_leaves_hashed_before_sealing_chain_like_leaves_hashed_by_the_sealer),
        cmocka_unit_test(test_append_rejects_oversize_record_and_changes_nothing),
        cmocka_unit_test(test_open_refuses_non_journal_directory_and_creates_nothing),
        cmocka_unit_test(test_open_refuses_newer_format_version),
        cmocka_unit_test(test_open_and_readers_refuse_a_non_zero_reserved_header_byte),
        cmocka_unit_test(test_open_read_only_directory_gives_clear_error_and_readers_work),
        cmocka_unit_test(test_delete_before_removes_only_whole_sealed_segments),
        cmocka_unit_test(test_files_are_owner_only_by_default_and_modes_follow_options),
        cmocka_unit_test(test_failed_sync_halts_the_journal_for_good),
        cmocka_unit_test(test_roll_from_an_empty_newest_segment_replaces_it),
        cmocka_unit_test(test_new_journal_syncs_its_parent_whatever_the_slashes),
        cmocka_unit_test(test_open_rejects_bad_options),
        cmocka_unit_test(test_open_refuses_a_segment_size_no_file_can_have),
        cmocka_unit_test_teardown(test_open_and_readers_list_the_directory_through_eintr,
                                  eintr_disarm),
        cmocka_unit_test(test_zero_fill_follows_the_size_of_synced_batches),
        cmocka_unit_test(test_next_segment_is_prepared_once_the_active_one_is_a_quarter_full),
        cmocka_unit_test(test_direct_writes_are_aligned_and_keep_every_record),
        cmocka_unit_test(test_refused_direct_writes_fall_back_to_buffered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
