/*
 * test_jreader.c: the journal reader: only committed records (published with a live
 * writer, whole batches without one), across segment rolls, from another process while the
 * writer appends, waiting without busy polling, seeking with good and bad hints, and the
 * live positions and segment listing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "format.h"
#include "jtest_util.h"
#include "merkle.h"
#include "record.h"
#include "segment.h"
#include "test_child.h"

enum { SMALL_SEGMENT_BYTES = 16 * 1024 };

static journal_t *
open_writer(const char *dir)
{
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    return j;
}

static void
test_reader_returns_only_published_records_while_writer_lives(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("vis");
    journal_t *j = open_writer(dir);
    stele_error_t err = {0};
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    journal_record_t rec;
    assert_int_equal(journal_reader_next(r, &rec, &err), STELE_EAGAIN);
    assert_int_equal(jtest_append(j, 3, NULL, &err), 0);
    /* Written but not published: a crash could still take it back (sync=always). */
    assert_int_equal(journal_reader_next(r, &rec, &err), STELE_EAGAIN);
    journal_live_t live;
    journal_reader_live(r, &live);
    assert_int_equal(live.writer_pid, getpid());
    assert_int_equal(live.visible_seq, 0);
    assert_int_equal(journal_sync(j, &err), 0);
    journal_publish(j, 2, 3);
    journal_reader_live(r, &live);
    assert_int_equal(live.visible_seq, 2);
    assert_int_equal(live.durable_seq, 3);
    assert_int_equal(journal_reader_next(r, &rec, &err), 0);
    assert_int_equal(rec.seq, 1);
    assert_int_equal(journal_reader_next(r, &rec, &err), 0);
    assert_int_equal(rec.seq, 2);
    assert_int_equal(journal_reader_next(r, &rec, &err), STELE_EAGAIN);
    journal_publish(j, 3, 3);
    assert_int_equal(journal_reader_next(r, &rec, &err), 0);
    assert_int_equal(rec.seq, 3);
    assert_int_equal(rec.is_batch_end, 1);
    assert_int_equal(journal_close(j, &err), 0);
    /* No writer: the files decide, up to the last complete batch. */
    journal_reader_live(r, &live);
    assert_int_equal(live.writer_pid, 0);
    assert_int_equal(journal_reader_next(r, &rec, &err), STELE_EAGAIN);
    journal_reader_close(r);
    jtest_rmtree(dir);
}

static void
test_reader_without_writer_stops_before_torn_batch(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("torn");
    stele_error_t err = {0};
    journal_t *j = NULL;
    journal_batch_info_t info;
    /* A writer that syncs batch 1 (seqs 1-2), writes batch 2 (3-5) and dies before its
     * sync: the last published durable seq is 2. */
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);
    pid_t child = test_fork_bound();
    assert_true(child >= 0);
    if (child == 0) {
        journal_t *cj = open_writer(dir);
        int ok = jtest_append(cj, 2, NULL, &err) == 0 && journal_sync(cj, &err) == 0;
        journal_publish(cj, 2, 2);
        ok = ok && jtest_append(cj, 3, &info, &err) == 0;
        ok = ok && write(pipe_fds[1], &info, sizeof info) == (ssize_t)sizeof info;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(read(pipe_fds[0], &info, sizeof info), (ssize_t)sizeof info);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    /* Clear BATCH_END on seq 5 (CRC fixed): the second batch is incomplete on disk, as if
     * the write had been cut. */
    char seg[4200];
    jtest_seg_path(seg, sizeof seg, dir, 1);
    uint64_t off = info.offset + journal_frame_bytes(JTEST_VERSION, jtest_payload_len(3)) +
                   journal_frame_bytes(JTEST_VERSION, jtest_payload_len(4));
    size_t len = 0;
    uint8_t *file = jtest_read_file(seg, &len);
    uint8_t *frame = file + off;
    format_store_u32(frame + FRAME_OFF_FLAGS, 0);
    format_store_u32(frame + FRAME_OFF_CRC, record_crc(JTEST_VERSION, frame, jtest_payload_len(5)));
    jtest_poke(seg, off, frame, journal_frame_bytes(JTEST_VERSION, jtest_payload_len(5)));
    free(file);
    assert_int_equal(jtest_read_all(dir, 1, &err), 2);
    /* The next writer drops it; readers agree. */
    journal_recovery_t rec;
    journal_options_t o;
    jtest_options(&o, SMALL_SEGMENT_BYTES);
    assert_int_equal(journal_open(dir, &o, &j, &rec, &err), 0);
    assert_int_equal(rec.end, JOURNAL_END_TORN_BATCH);
    assert_int_equal(rec.last_seq, 2);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(jtest_read_all(dir, 1, &err), 2);
    jtest_rmtree(dir);
}

static void
test_reader_reports_damage_in_durable_records_of_newest_segment(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("dmg");
    journal_t *j = open_writer(dir);
    stele_error_t err = {0};
    journal_batch_info_t info;
    assert_int_equal(jtest_append(j, 2, NULL, &err), 0);
    assert_int_equal(jtest_append(j, 3, &info, &err), 0);
    assert_int_equal(journal_close(j, &err), 0); /* synced and published: all durable */
    char seg[4200];
    jtest_seg_path(seg, sizeof seg, dir, 1);
    uint64_t off5 = info.offset + journal_frame_bytes(JTEST_VERSION, jtest_payload_len(3)) +
                    journal_frame_bytes(JTEST_VERSION, jtest_payload_len(4));
    uint8_t byte = 0x5a;
    jtest_poke(seg, off5 + JTEST_HEADER_BYTES + 2, &byte, 1);
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    journal_record_t rec;
    for (uint64_t seq = 1; seq <= 4; seq++) {
        assert_int_equal(journal_reader_next(r, &rec, &err), 0);
        assert_int_equal(rec.seq, seq);
    }
    assert_int_equal(journal_reader_next(r, &rec, &err), STELE_ECORRUPT);
    char want[96];
    snprintf(want, sizeof want, "segment 00000000000000000001.seg offset %llu: bad crc",
             (unsigned long long)off5);
    assert_non_null(strstr(err.message, want));
    journal_reader_close(r);
    jtest_rmtree(dir);
}

/* A segment whose prev_hash does not continue the chain is reported, and the reader stays
 * where it was: asking again reports the same damage, not whatever lies at the old
 * offset in the new segment. */
static void
test_reader_reports_broken_segment_link_again_when_asked_again(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("link");
    journal_t *j = open_writer(dir);
    stele_error_t err = {0};
    journal_batch_info_t info;
    uint64_t second = 0;
    while (!second) {
        assert_int_equal(jtest_append(j, 3, &info, &err), 0);
        if (info.rolled)
            second = info.segment_seq;
    }
    assert_int_equal(jtest_append(j, 3, &info, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    char seg[4200];
    jtest_seg_path(seg, sizeof seg, dir, second);
    size_t len = 0;
    uint8_t *file = jtest_read_file(seg, &len);
    file[SEG_OFF_PREV_HASH] ^= 0x01;
    format_store_u32(file + SEG_OFF_CRC, crc32c(file, SEG_CRC_COVERED_BYTES));
    jtest_poke(seg, 0, file, SEG_HEADER_BYTES);
    free(file);
    char want[160];
    snprintf(want, sizeof want,
             "segment %020llu.seg offset 0: prev_hash does not match the previous segment's "
             "last record",
             (unsigned long long)second);
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    journal_record_t rec;
    for (uint64_t seq = 1; seq < second; seq++) {
        assert_int_equal(journal_reader_next(r, &rec, &err), 0);
        assert_int_equal(rec.seq, seq);
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        memset(&err, 0, sizeof err);
        int rc = journal_reader_next(r, &rec, &err);
        if (rc != STELE_ECORRUPT)
            fprintf(stderr, "attempt %d: %d (%s)\n", attempt, rc, err.message);
        assert_int_equal(rc, STELE_ECORRUPT);
        assert_string_equal(err.message, want);
    }
    journal_reader_close(r);
    jtest_rmtree(dir);
}

static double
cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

static double
wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
test_reader_wait_times_out_without_busy_polling(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("wait");
    journal_t *j = open_writer(dir);
    stele_error_t err = {0};
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    /* Live writer: a futex sleep. */
    double wall = wall_seconds(), cpu = cpu_seconds();
    assert_int_equal(journal_reader_wait(r, 0, 300), STELE_ETIMEDOUT);
    assert_true(wall_seconds() - wall >= 0.29);
    assert_true(cpu_seconds() - cpu < 0.1);
    assert_int_equal(jtest_append(j, 1, NULL, &err), 0);
    journal_publish(j, 1, 1);
    assert_int_equal(journal_reader_wait(r, 0, 1000), 0);
    assert_int_equal(journal_close(j, &err), 0);
    /* No writer: bounded re-checks of the files. */
    wall = wall_seconds();
    cpu = cpu_seconds();
    assert_int_equal(journal_reader_wait(r, 1, 300), STELE_ETIMEDOUT);
    assert_true(wall_seconds() - wall >= 0.29);
    assert_true(cpu_seconds() - cpu < 0.15);
    assert_int_equal(journal_reader_wait(r, 0, 0), 0);
    journal_reader_close(r);
    jtest_rmtree(dir);
}

/* The child: reads `total` records as they come, checking order, payloads and chain. */
static int
child_follow(const char *dir, uint64_t total)
{
    journal_reader_t *r = NULL;
    stele_error_t err = {0};
    int rc = journal_reader_open(dir, NULL, &r, &err);
    if (rc)
        return 10;
    uint64_t expect = 1;
    uint8_t prev[32], payload[512];
    journal_record_t rec;
    while (expect <= total) {
        rc = journal_reader_next(r, &rec, &err);
        if (rc == STELE_EAGAIN) {
            if (journal_reader_wait(r, expect - 1, 10000) != 0)
                return 11;
            continue;
        }
        if (rc) {
            fprintf(stderr, "child: %s\n", err.message);
            return 12;
        }
        jtest_payload(rec.seq, payload);
        if (rec.seq != expect || rec.payload_len != jtest_payload_len(rec.seq) ||
            memcmp(rec.payload, payload, rec.payload_len) != 0)
            return 13;
        if (expect > 1 && memcmp(rec.prev_hash, prev, 32) != 0)
            return 14;
        memcpy(prev, rec.hash, 32);
        expect++;
    }
    journal_reader_close(r);
    return 0;
}

static void
test_reader_in_another_process_follows_writer_across_rolls(void **state)
{
    (void)state;
    enum { TOTAL = 600 };
    char *dir = jtest_tmpdir("follow");
    journal_t *j = open_writer(dir);
    stele_error_t err = {0};
    pid_t child = test_fork_bound();
    assert_true(child >= 0);
    if (child == 0)
        _exit(child_follow(dir, TOTAL));
    uint64_t seed = jtest_seed("test_reader_in_another_process_follows_writer_across_rolls");
    int rolls = 0;
    while (journal_last_seq(j) < TOTAL) {
        uint64_t n = 1 + jtest_rand(&seed) % 7;
        if (journal_last_seq(j) + n > TOTAL)
            n = TOTAL - journal_last_seq(j);
        journal_batch_info_t info;
        assert_int_equal(jtest_append(j, n, &info, &err), 0);
        rolls += info.rolled;
        assert_int_equal(journal_sync(j, &err), 0);
        journal_publish(j, info.last_seq, info.last_seq);
        if (jtest_rand(&seed) % 8 == 0)
            usleep(1000);
    }
    assert_true(rolls >= 5);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(journal_close(j, &err), 0);
    jtest_rmtree(dir);
}

/* The state a power failure right after a roll leaves (see
 * test_roll_from_an_empty_newest_segment_replaces_it in test_journal.c): records 1..n_records
 * in segment 1, synced, and a newest segment n_records+1 with its header and no record, as
 * large as the small segments it was prepared with. */
static void
make_empty_newest_segment(const char *dir, uint64_t n_records)
{
    journal_t *j = open_writer(dir);
    stele_error_t err = {0};
    assert_int_equal(jtest_append(j, n_records, NULL, &err), 0);
    assert_int_equal(journal_sync(j, &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    journal_reader_t *r = NULL;
    journal_record_t rec;
    merkle_hasher_t *mh = merkle_hasher_new();
    merkle_range_t range; /* version 2's header carries the tree of the records before it */
    merkle_range_init(&range);
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    for (uint64_t seq = 1; seq <= n_records; seq++) {
        assert_int_equal(journal_reader_next(r, &rec, &err), 0);
        assert_int_equal(merkle_range_append(mh, &range, rec.leaf_hash, NULL, NULL), 0);
    }
    merkle_hasher_free(mh);
    assert_int_equal(rec.seq, n_records);
    char seg[4200];
    jtest_seg_path(seg, sizeof seg, dir, 1);
    size_t len = 0;
    uint8_t *page = jtest_read_file(seg, &len);
    segment_header_t h;
    segment_header_fault_t fault = {0};
    assert_int_equal(segment_header_decode(page, len, &h, &fault), 0);
    h.first_seq = n_records + 1;
    h.range = range;
    h.prev_ts_ns = rec.ts_ns;
    memcpy(h.prev_hash, rec.hash, HASH_BYTES);
    journal_reader_close(r);
    memset(page, 0, SMALL_SEGMENT_BYTES);
    segment_header_encode(&h, page);
    jtest_seg_path(seg, sizeof seg, dir, n_records + 1);
    FILE *f = fopen(seg, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(page, 1, SMALL_SEGMENT_BYTES, f), SMALL_SEGMENT_BYTES);
    assert_int_equal(fclose(f), 0);
    free(page);
}

/* Reads records from `expect` on until EAGAIN, checking each (as jtest_read_all does);
 * returns the seq after the last one read. */
static uint64_t
read_until_eagain(journal_reader_t *r, uint64_t expect)
{
    stele_error_t err = {0};
    uint8_t payload[512];
    journal_record_t rec;
    int rc;
    while ((rc = journal_reader_next(r, &rec, &err)) == 0) {
        assert_int_equal(rec.seq, expect);
        jtest_payload(rec.seq, payload);
        assert_int_equal(rec.payload_len, jtest_payload_len(rec.seq));
        assert_memory_equal(rec.payload, payload, rec.payload_len);
        expect++;
    }
    if (rc != STELE_EAGAIN)
        fail_msg("reader stopped before seq %llu: %s", (unsigned long long)expect, err.message);
    return expect;
}

/* A reader waiting at the end of an empty newest segment, which the writer's next roll
 * replaces with a new file of the same name: it must follow into the new file and return
 * every record once, in order, while the writer lives (reading on in the replaced file
 * would report "committed record missing") and after it is gone (not nothing, and no
 * records missing at the end of a sealed segment once a later roll has happened). */
static void
test_reader_follows_a_roll_that_replaces_an_empty_newest_segment(void **state)
{
    (void)state;
    enum { N_BEFORE = 6, N_BATCH = 120 };
    char *dir = jtest_tmpdir("replaced");
    make_empty_newest_segment(dir, N_BEFORE);
    stele_error_t err = {0};
    journal_reader_t *live_r = NULL, *late_r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &live_r, &err), 0);
    assert_int_equal(journal_reader_open(dir, NULL, &late_r, &err), 0);
    assert_int_equal(read_until_eagain(live_r, 1), N_BEFORE + 1);
    assert_int_equal(read_until_eagain(late_r, 1), N_BEFORE + 1);

    journal_options_t o;
    jtest_options(&o, 4 * SMALL_SEGMENT_BYTES);
    journal_t *j = NULL;
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    journal_batch_info_t info;
    uint64_t expect = N_BEFORE + 1;
    int rolls = 0;
    for (int b = 0; b < 4; b++) {
        assert_int_equal(jtest_append(j, N_BATCH, &info, &err), 0); /* the first one replaces */
        rolls += info.rolled;
        assert_int_equal(journal_sync(j, &err), 0);
        journal_publish(j, info.last_seq, info.last_seq);
        expect = read_until_eagain(live_r, expect);
        assert_int_equal(expect, info.last_seq + 1);
    }
    assert_true(rolls >= 2);
    assert_int_equal(journal_close(j, &err), 0);
    assert_int_equal(read_until_eagain(late_r, N_BEFORE + 1), expect);
    assert_int_equal(read_until_eagain(live_r, expect), expect);
    journal_reader_close(live_r);
    journal_reader_close(late_r);
    jtest_rmtree(dir);
}

static void
test_reader_seek_uses_good_hint_and_survives_bad_one(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("seek");
    journal_t *j = open_writer(dir);
    stele_error_t err = {0};
    journal_batch_info_t infos[40];
    for (int i = 0; i < 40; i++)
        assert_int_equal(jtest_append(j, 3, &infos[i], &err), 0);
    assert_int_equal(journal_close(j, &err), 0);
    journal_reader_t *r = NULL;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    journal_record_t want_prev, rec;
    /* Reference: seq 62's predecessor, read plainly. */
    assert_int_equal(journal_reader_seek(r, 61, 0, 0, &err), 0);
    assert_int_equal(journal_reader_next(r, &want_prev, &err), 0);
    assert_int_equal(want_prev.seq, 61);
    uint8_t prev_hash[32];
    memcpy(prev_hash, want_prev.hash, 32);
    const journal_batch_info_t *b = &infos[20]; /* seqs 61..63 */
    /* A hint at the batch start, seeking inside the batch. */
    assert_int_equal(journal_reader_seek(r, 62, b->segment_seq, b->offset, &err), 0);
    assert_int_equal(journal_reader_next(r, &rec, &err), 0);
    assert_int_equal(rec.seq, 62);
    assert_memory_equal(rec.prev_hash, prev_hash, 32);
    /* A hint exactly at the target still yields its true prev_hash. */
    assert_int_equal(journal_reader_seek(r, 61, b->segment_seq, b->offset, &err), 0);
    assert_int_equal(journal_reader_next(r, &rec, &err), 0);
    assert_int_equal(rec.seq, 61);
    assert_memory_equal(rec.hash, want_prev.hash, 32);
    /* Wrong hints: not a frame, another segment, past the end. */
    assert_int_equal(journal_reader_seek(r, 62, b->segment_seq, b->offset + 8, &err), 0);
    assert_int_equal(journal_reader_next(r, &rec, &err), 0);
    assert_int_equal(rec.seq, 62);
    assert_int_equal(journal_reader_seek(r, 62, 999, 4096, &err), 0);
    assert_int_equal(journal_reader_next(r, &rec, &err), 0);
    assert_int_equal(rec.seq, 62);
    assert_int_equal(journal_reader_seek(r, 62, b->segment_seq, 1u << 30, &err), 0);
    assert_int_equal(journal_reader_next(r, &rec, &err), 0);
    assert_int_equal(rec.seq, 62);
    assert_memory_equal(rec.prev_hash, prev_hash, 32);
    /* Past the end: nothing yet. */
    assert_int_equal(journal_reader_seek(r, 121, 0, 0, &err), 0);
    assert_int_equal(journal_reader_next(r, &rec, &err), STELE_EAGAIN);
    journal_segment_info_t segs[64];
    int n = journal_reader_segments(r, segs, 64, &err);
    assert_true(n >= 2);
    assert_int_equal(segs[0].first_seq, 1);
    assert_int_equal(segs[0].first_ts_ns, 1000);
    assert_true(segs[1].first_seq > 1);
    assert_int_equal(segs[1].first_ts_ns, (int64_t)segs[1].first_seq * 1000);
    assert_true(segs[0].disk_bytes >= SMALL_SEGMENT_BYTES);
    assert_string_equal(journal_reader_source(r), "test");
    assert_int_equal(journal_reader_format_version(r), FORMAT_VERSION);
    journal_reader_close(r);
    journal_reader_close(NULL);
    jtest_rmtree(dir);
}

/* Records larger than what the reader reads at a time (max_record_bytes allows them): the
 * reader must read on into such a frame, not report it as a bad length. */
enum { BIG_PAYLOAD_BYTES = 300 * 1024 };

static uint32_t
big_test_payload_len(uint64_t seq)
{
    return seq % 2 ? 100 : BIG_PAYLOAD_BYTES;
}

static void
read_big_records(const char *dir, uint64_t n)
{
    journal_reader_t *r = NULL;
    stele_error_t err = {0};
    journal_record_t rec;
    assert_int_equal(journal_reader_open(dir, NULL, &r, &err), 0);
    for (uint64_t seq = 1; seq <= n; seq++) {
        int rc = journal_reader_next(r, &rec, &err);
        if (rc)
            fprintf(stderr, "next: %d (%s)\n", rc, err.message);
        assert_int_equal(rc, 0);
        assert_int_equal(rec.seq, seq);
        assert_int_equal(rec.payload_len, big_test_payload_len(seq));
        assert_int_equal(rec.payload[0], (uint8_t)seq);
        assert_int_equal(rec.payload[rec.payload_len - 1], (uint8_t)seq);
    }
    assert_int_equal(journal_reader_next(r, &rec, &err), STELE_EAGAIN);
    journal_reader_close(r);
}

static void
test_reader_returns_records_larger_than_its_read_chunk(void **state)
{
    (void)state;
    char *dir = jtest_tmpdir("big");
    journal_options_t o;
    jtest_options(&o, 4u << 20);
    journal_t *j = NULL;
    stele_error_t err = {0};
    assert_int_equal(journal_open(dir, &o, &j, NULL, &err), 0);
    size_t cap = 2 * journal_frame_bytes(JTEST_VERSION, BIG_PAYLOAD_BYTES);
    uint8_t *batch = malloc(cap), *payload = malloc(BIG_PAYLOAD_BYTES);
    assert_non_null(batch);
    assert_non_null(payload);
    enum { BIG_BATCHES = 3, BIG_PER_BATCH = 2 };
    for (uint64_t seq = 1; seq <= BIG_BATCHES * BIG_PER_BATCH;) {
        size_t len = 0;
        for (int k = 0; k < BIG_PER_BATCH; k++, seq++) {
            memset(payload, (int)(uint8_t)seq, big_test_payload_len(seq));
            journal_frame_prepare(JTEST_VERSION, batch + len, seq, (int64_t)seq * 1000, NULL,
                                  payload, big_test_payload_len(seq));
            len += journal_frame_bytes(JTEST_VERSION, big_test_payload_len(seq));
        }
        assert_int_equal(journal_append_batch(j, batch, len, NULL, &err), 0);
    }
    assert_int_equal(journal_sync(j, &err), 0);
    journal_publish(j, journal_last_seq(j), journal_last_seq(j));
    read_big_records(dir, BIG_BATCHES * BIG_PER_BATCH); /* a live writer published them */
    assert_int_equal(journal_close(j, &err), 0);
    read_big_records(dir, BIG_BATCHES * BIG_PER_BATCH); /* whole batches on disk */
    free(payload);
    free(batch);
    jtest_rmtree(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_returns_only_published_records_while_writer_lives),
        cmocka_unit_test(test_reader_without_writer_stops_before_torn_batch),
        cmocka_unit_test(test_reader_reports_damage_in_durable_records_of_newest_segment),
        cmocka_unit_test(test_reader_reports_broken_segment_link_again_when_asked_again),
        cmocka_unit_test(test_reader_wait_times_out_without_busy_polling),
        cmocka_unit_test(test_reader_in_another_process_follows_writer_across_rolls),
        cmocka_unit_test(test_reader_follows_a_roll_that_replaces_an_empty_newest_segment),
        cmocka_unit_test(test_reader_seek_uses_good_hint_and_survives_bad_one),
        cmocka_unit_test(test_reader_returns_records_larger_than_its_read_chunk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
