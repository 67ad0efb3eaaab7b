/*
 * test_retention_races.c: readers and verify beside retention (journal/jreader.c,
 * engine/verify.c). Retention deletes whole segments, oldest first, then their index
 * entries; what it deleted is never damage:
 *  - a reader whose next segment retention deleted gets STELE_ERETAINED naming the records
 *    it lost, and a seek to the oldest goes on; a segment missing above the oldest one is
 *    still corruption;
 *  - verify beside retention checks what exists: index entries of deleted segments are no
 *    damage, and a walk retention cut short starts again from the new oldest record.
 * Every interleaving is chosen, not timed: the reader reads k records before the deletion,
 * verify's walk calls a hook after each record (stele_verify_hooked) and the hook runs
 * retention there; hundreds of rounds vary k and the cut.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine_fixture.h"
#include "index.h"
#include "journal.h"
#include "jtest_util.h"
#include "segment.h"
#include "stele.h"
#include "stele_internal.h"

enum { RACE_SEGMENT_BYTES = 64 << 10 };

/* -- the journal reader -------------------------------------------------------------------- */

/* Appends n records in batches of 20 and makes them visible to readers. */
static void
append_visible(journal_t *j, uint64_t n)
{
    stele_error_t err = {0};
    for (uint64_t done = 0; done < n; done += 20)
        assert_int_equal(jtest_append(j, n - done < 20 ? n - done : 20, NULL, &err), 0);
    assert_int_equal(journal_sync(j, &err), 0);
    journal_publish(j, journal_last_seq(j), journal_last_seq(j));
}

/* First seqs of the segments in dir, oldest first; returns how many (at most max). */
static size_t
list_segments(const char *dir, uint64_t *out, size_t max)
{
    segment_dir_t d;
    int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dir_fd >= 0);
    assert_int_equal(segment_dir_list(dir_fd, &d), 0);
    close(dir_fd);
    size_t n = d.n < max ? d.n : max;
    memcpy(out, d.seqs, n * sizeof *out);
    segment_dir_free(&d);
    return n;
}

/* One round: a reader reads k records, retention deletes every sealed segment, the reader
 * goes on. It reads to the end of the segment it has open, then gets STELE_ERETAINED naming
 * exactly the records it lost; a seek to the oldest gives every record from there on. */
static void
reader_round(const char *dir, journal_t *j, uint64_t k)
{
    stele_error_t err = {0};
    uint64_t segs[64];
    size_t n_segs = list_segments(dir, segs, 64);
    assert_true(n_segs >= 4);
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    journal_record_t rec;
    uint64_t next = segs[0];
    for (uint64_t i = 0; i < k; i++) {
        assert_int_equal(journal_reader_next(r, &rec, &err), 0);
        assert_int_equal(rec.seq, next++);
    }
    uint64_t newest = segs[n_segs - 1];
    assert_int_equal(journal_delete_before(j, newest, &err), (int)n_segs - 1);
    int rc;
    while ((rc = journal_reader_next(r, &rec, &err)) == 0)
        assert_int_equal(rec.seq, next++);
    if (next < newest) { /* it was behind: the rest of its segment, then what it lost */
        assert_int_equal(rc, STELE_ERETAINED);
        char want[160];
        snprintf(want, sizeof want,
                 "records %" PRIu64 "-%" PRIu64 " were deleted by retention before they were "
                 "read; the journal now starts at seq %" PRIu64,
                 next, newest - 1, newest);
        assert_string_equal(err.message, want);
        assert_int_equal(journal_reader_seek(r, 0, 0, 0, &err), STELE_ENOTFOUND);
        next = newest;
        while ((rc = journal_reader_next(r, &rec, &err)) == 0)
            assert_int_equal(rec.seq, next++);
    }
    assert_int_equal(rc, STELE_EAGAIN);
    assert_int_equal(next, journal_last_seq(j) + 1);
    journal_reader_close(r);
}

/* Hundreds of rounds, the reader stopped at every offset of the first segments. */
static void
test_reader_behind_retention_gets_eretained_never_corruption(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("retained-reader");
    journal_options_t o;
    jtest_options(&o, RACE_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    for (uint64_t round = 0; round < 300; round++) {
        append_visible(j, 1500); /* several segments of ~400 records */
        reader_round(dir, j, (round * 7) % 1200);
    }
    assert_int_equal(journal_close(j, &err), 0);
    jtest_rmtree(dir);
}

/* A segment missing above the oldest one is no retention: the reader reports corruption. */
static void
test_missing_segment_above_the_oldest_is_corruption(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("retained-hole");
    journal_options_t o;
    jtest_options(&o, RACE_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    append_visible(j, 2000);
    uint64_t segs[64];
    assert_true(list_segments(dir, segs, 64) >= 4);
    char path[1024];
    jtest_seg_path(path, sizeof path, dir, segs[2]);
    assert_int_equal(unlink(path), 0);
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    journal_record_t rec;
    int rc;
    while ((rc = journal_reader_next(r, &rec, &err)) == 0)
        ;
    assert_int_equal(rc, STELE_ECORRUPT);
    assert_non_null(strstr(err.message, "is committed but its segment is missing"));
    journal_reader_close(r);
    assert_int_equal(journal_close(j, &err), 0);
    jtest_rmtree(dir);
}

/* -- verify -------------------------------------------------------------------------------- */

/* What the hook does at record `at_seq` of verify's walk: retention of every segment
 * before the one starting at `cut`, files first, index entries after. */
typedef struct retention_hook {
    const char *dir;
    index_t *ix; /* writable, for the index entries */
    uint64_t at_seq;
    uint64_t cut;
    int trim_index;
    int fired;
} retention_hook_t;

static void
retention_hook(void *ctx, uint64_t seq)
{
    retention_hook_t *h = ctx;
    if (h->fired || seq < h->at_seq)
        return;
    h->fired = 1;
    uint64_t segs[256];
    size_t n = list_segments(h->dir, segs, 256);
    for (size_t i = 0; i + 1 < n && segs[i + 1] <= h->cut; i++) {
        char path[1024];
        jtest_seg_path(path, sizeof path, h->dir, segs[i]);
        assert_int_equal(unlink(path), 0);
    }
    if (h->trim_index)
        assert_int_equal(index_delete_before(h->ix, h->cut, NULL), 0);
}

/* A journal of ~12 segments, made by the engine so its index is whole. */
static char *
make_indexed_journal(uint64_t *last_seq)
{
    char *dir = jtest_tmpdir("retained-verify-src");
    stele_options_t o;
    fixture_options(&o);
    o.segment_bytes = RACE_SEGMENT_BYTES;
    o.max_record_bytes = 4096;
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open(dir, &o, &db, &err), 0);
    for (int i = 0; i < 6000; i++) {
        char ev[64];
        int n = snprintf(ev, sizeof ev, "{\"i\":%d}", i);
        stele_wait_t w = i % 50 == 49 ? STELE_WAIT_DURABLE : STELE_WAIT_NONE;
        assert_int_equal(stele_append_json(db, ev, (size_t)n, w, NULL, &err), 0);
    }
    *last_seq = stele_reached_seq(db, STELE_WAIT_DURABLE);
    assert_int_equal(stele_close(db, &err), 0);
    return dir;
}

/* Copies the regular files of directory `from` into `to` (made if missing), replacing
 * what `to` held; then the same for the `index` subdirectory when `sub` asks. */
static void
copy_files(const char *from, const char *to, int sub)
{
    mkdir(to, 0700);
    DIR *d = opendir(to);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_type == DT_REG)
            assert_int_equal(unlinkat(dirfd(d), e->d_name, 0), 0);
    closedir(d);
    d = opendir(from);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char src[1024], dst[1024];
        snprintf(src, sizeof src, "%s/%s", from, e->d_name);
        snprintf(dst, sizeof dst, "%s/%s", to, e->d_name);
        if (e->d_type == DT_DIR && sub && strcmp(e->d_name, "index") == 0)
            copy_files(src, dst, 0);
        if (e->d_type != DT_REG)
            continue;
        size_t len = 0;
        uint8_t *bytes = jtest_read_file(src, &len);
        FILE *f = fopen(dst, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(bytes, 1, len, f), len);
        fclose(f);
        free(bytes);
    }
    closedir(d);
}

/* Hundreds of rounds of verify while retention deletes segments at a chosen record of its
 * walk (behind it, at it, ahead of it), with and without the index entries trimmed yet:
 * verify always succeeds, checking the records from the oldest left to the last. */
static void
test_verify_beside_retention_never_reports_damage(void **state)
{
    (void)state;
    uint64_t last = 0;
    char *src = make_indexed_journal(&last);
    uint64_t segs[256];
    size_t n_segs = list_segments(src, segs, 256);
    assert_true(n_segs >= 8);
    char *work = jtest_tmpdir("retained-verify");
    for (int round = 0; round < 240; round++) {
        copy_files(src, work, 1);
        index_t *ix = NULL;
        stele_error_t err = {0};
        assert_int_equal(index_open(work, 1, 0600, &ix, &err), 0);
        retention_hook_t h = {.dir = work,
                              .ix = ix,
                              .at_seq = 1 + (uint64_t)round * 97 % (last - 1),
                              .cut = segs[1 + round % (n_segs - 2)],
                              .trim_index = round % 3 != 0};
        stele_verify_report_t rep;
        int rc = stele_verify_hooked(work, NULL, 0, 0, &rep, retention_hook, &h, &err);
        if (rc != 0)
            fail_msg("round %d: at seq %" PRIu64 ", cut %" PRIu64 ": %s", round, h.at_seq, h.cut,
                     err.message);
        assert_true(h.fired);
        assert_int_equal(rep.last_seq, last);
        assert_true(rep.first_seq == 1 || rep.first_seq >= h.cut);
        index_close(ix);
    }
    jtest_rmtree(work);
    jtest_rmtree(src);
}

/* Retention already ran but the index still names the deleted segments (it deletes them
 * first): verify checks what exists and says so. */
static void
test_verify_skips_index_entries_of_deleted_segments(void **state)
{
    (void)state;
    uint64_t last = 0;
    char *src = make_indexed_journal(&last);
    uint64_t segs[256];
    assert_true(list_segments(src, segs, 256) >= 8);
    retention_hook_t h = {.dir = src, .cut = segs[4]};
    retention_hook(&h, 0);
    stele_verify_report_t rep;
    stele_error_t err = {0};
    assert_int_equal(stele_verify(src, 0, 0, &rep, &err), 0);
    assert_int_equal(rep.first_seq, segs[4]);
    assert_int_equal(rep.last_seq, last);
    jtest_rmtree(src);
}

/* A segment missing above the oldest is damage, and verify says where. */
static void
test_verify_reports_a_hole_above_the_oldest_segment(void **state)
{
    (void)state;
    uint64_t last = 0;
    char *src = make_indexed_journal(&last);
    uint64_t segs[256];
    assert_true(list_segments(src, segs, 256) >= 8);
    char path[1024];
    jtest_seg_path(path, sizeof path, src, segs[3]);
    assert_int_equal(unlink(path), 0);
    stele_verify_report_t rep;
    stele_error_t err = {0};
    assert_int_equal(stele_verify(src, 0, 0, &rep, &err), STELE_ECORRUPT);
    assert_int_equal(rep.bad_seq, segs[3]);
    jtest_rmtree(src);
}

int
main(void)
{
    /* Hundreds of rounds of rolls and retention cost thousands of fsyncs; the races under
     * test are in the order of reads and deletions, not on the disk, so a memory file
     * system serves when there is one. */
    if (access("/dev/shm", W_OK) == 0 && getenv("TMPDIR") == NULL)
        setenv("TMPDIR", "/dev/shm", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_behind_retention_gets_eretained_never_corruption),
        cmocka_unit_test(test_missing_segment_above_the_oldest_is_corruption),
        cmocka_unit_test(test_verify_beside_retention_never_reports_damage),
        cmocka_unit_test(test_verify_skips_index_entries_of_deleted_segments),
        cmocka_unit_test(test_verify_reports_a_hole_above_the_oldest_segment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
