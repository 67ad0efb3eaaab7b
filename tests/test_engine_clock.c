/*
 * test_engine_clock.c: the record clock (engine/stamp.c, docs/journal.md "Timestamps"):
 * records written after a wall clock that was set wrong is set right again carry the right
 * times, whichever way it was set, across reopens of the journal, and a time range finds
 * them; a step of the clock that holds is believed after STAMP_STEP_TRUST (10 minutes); a new
 * boot trusts its wall clock; timestamps never decrease.
 *
 * The clocks are injected (stele_open_with_hooks: wall time, boot time, boot id), never the
 * machine's: every reading below is exact, so the tests assert exact timestamps.
 */
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
#include <unistd.h>

#include <cmocka.h>

#include "engine_fixture.h"
#include "stamp.h"
#include "stele.h"
#include "stele_internal.h"
#include "test_util.h"

#define NS 1000000000ll
#define MINUTE (60 * NS)
#define DAY (86400 * NS)
#define YEAR (365 * DAY)
/* 2026-12-01T10:00:00Z */
#define T0 (1796119200ll * NS)

/* The injected clocks: each reading returns them as they are. */
typedef struct fake_clock {
    int64_t wall_ns;
    uint64_t boot_ns;
    uint8_t boot_id[16];
} fake_clock_t;

static void
fake_read(void *ctx, stamp_reading_t *out)
{
    const fake_clock_t *c = ctx;
    out->wall_ns = c->wall_ns;
    out->boot_ns = c->boot_ns;
    memcpy(out->boot_id, c->boot_id, 16);
}

/* Time passes: both clocks move by dt; the wall clock also by `set` (someone sets it). */
static void
tick(fake_clock_t *c, int64_t dt, int64_t set)
{
    c->boot_ns += (uint64_t)dt;
    c->wall_ns += dt + set;
}

static stele_t *
open_with(const char *dir, fake_clock_t *c)
{
    stele_options_t o;
    fixture_options(&o);
    stele_hooks_t hooks = {.clock = fake_read, .clock_ctx = c};
    stele_t *db = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_open_with_hooks(dir, &o, &hooks, &db, &err), 0);
    return db;
}

/* Appends one durable record and returns its timestamp as read back. */
static int64_t
append_one(stele_t *db, const char *dir)
{
    stele_error_t err = {0};
    uint64_t seq = 0;
    assert_int_equal(stele_append_json(db, "{\"a\":1}", 7, STELE_WAIT_DURABLE, &seq, &err), 0);
    stele_reader_t *r = NULL;
    assert_int_equal(stele_reader_open(dir, &r, &err), 0);
    assert_int_equal(stele_reader_seek_seq(r, seq, &err), 0);
    stele_record_t rec;
    assert_int_equal(stele_reader_next(r, &rec, 0, &err), 0);
    assert_int_equal(rec.seq, seq);
    int64_t ts = rec.ts_ns;
    stele_reader_close(r);
    return ts;
}

/* Opens, appends one record at the clock's current reading, closes: a `stele insert`. */
static int64_t
insert_once(const char *dir, fake_clock_t *c)
{
    stele_t *db = open_with(dir, c);
    int64_t ts = append_one(db, dir);
    stele_error_t err = {0};
    assert_int_equal(stele_close(db, &err), 0);
    return ts;
}

/* The seqs of the records with since_ns <= ts <= until_ns, as `tail --since --until` reads
 * them (a time seek, then records until one is past the end). */
static int
count_in_range(const char *dir, int64_t since_ns, int64_t until_ns)
{
    stele_reader_t *r = NULL;
    stele_error_t err = {0};
    assert_int_equal(stele_reader_open(dir, &r, &err), 0);
    assert_int_equal(stele_reader_seek_time(r, since_ns, &err), 0);
    int n = 0;
    stele_record_t rec;
    while (stele_reader_next(r, &rec, 0, &err) == 0 && rec.ts_ns <= until_ns)
        n++;
    stele_reader_close(r);
    return n;
}

static fake_clock_t
clock_at_t0(void)
{
    fake_clock_t c = {.wall_ns = T0, .boot_ns = 1000 * (uint64_t)NS};
    memset(c.boot_id, 0xb1, sizeof c.boot_id);
    return c;
}

/* The clock set ten years ahead for one insert, then set right: that insert and every later
 * one are stamped on the true timeline, and a day's range finds all six records. */
static void
test_forward_jump_for_one_insert_poisons_nothing(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("clock-forward");
    fake_clock_t c = clock_at_t0();
    assert_int_equal(insert_once(dir, &c), T0);
    tick(&c, NS, 10 * YEAR); /* set ahead */
    assert_int_equal(insert_once(dir, &c), T0 + NS);
    tick(&c, NS, -10 * YEAR); /* set right */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(insert_once(dir, &c), T0 + (2 + i) * NS);
        tick(&c, NS, 0);
    }
    assert_int_equal(count_in_range(dir, T0 - MINUTE, T0 + DAY), 6);
    assert_int_equal(count_in_range(dir, T0 + 2 * NS, T0 + 4 * NS), 3);
    test_tmpdir_remove(dir);
}

/* The clock set a year back for two inserts, then right: no record goes back in time or
 * stands still; all are on the true timeline. */
static void
test_backward_jump_keeps_the_true_timeline(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("clock-backward");
    fake_clock_t c = clock_at_t0();
    assert_int_equal(insert_once(dir, &c), T0);
    tick(&c, NS, -YEAR);
    assert_int_equal(insert_once(dir, &c), T0 + NS);
    tick(&c, NS, 0);
    assert_int_equal(insert_once(dir, &c), T0 + 2 * NS);
    tick(&c, NS, YEAR);
    assert_int_equal(insert_once(dir, &c), T0 + 3 * NS);
    assert_int_equal(count_in_range(dir, T0, T0 + 3 * NS), 4);
    test_tmpdir_remove(dir);
}

/* The same within one open journal (a long-running writer). */
static void
test_jumps_while_the_journal_is_open(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("clock-open");
    fake_clock_t c = clock_at_t0();
    stele_t *db = open_with(dir, &c);
    assert_int_equal(append_one(db, dir), T0);
    tick(&c, NS, 10 * YEAR);
    assert_int_equal(append_one(db, dir), T0 + NS);
    tick(&c, NS, -10 * YEAR - YEAR); /* past the truth, a year back */
    assert_int_equal(append_one(db, dir), T0 + 2 * NS);
    tick(&c, NS, YEAR);
    assert_int_equal(append_one(db, dir), T0 + 3 * NS);
    stele_error_t err = {0};
    assert_int_equal(stele_close(db, &err), 0);
    test_tmpdir_remove(dir);
}

/* A step that holds (NTP corrects a clock that was an hour behind) is believed after ten
 * minutes of boot time; a slowly slewed clock is followed at once. */
static void
test_a_step_that_holds_is_believed_after_ten_minutes(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("clock-hold");
    fake_clock_t c = clock_at_t0();
    assert_int_equal(insert_once(dir, &c), T0);
    tick(&c, NS, 60 * MINUTE);
    assert_int_equal(insert_once(dir, &c), T0 + NS);
    tick(&c, 5 * MINUTE, 0);
    assert_int_equal(insert_once(dir, &c), T0 + NS + 5 * MINUTE);
    tick(&c, 6 * MINUTE, 0);
    assert_int_equal(insert_once(dir, &c), c.wall_ns); /* held 11 minutes: believed */
    int64_t believed = c.wall_ns;
    tick(&c, 2 * MINUTE, 50 * 1000000ll); /* a 50 ms slew */
    assert_int_equal(insert_once(dir, &c), c.wall_ns);
    assert_true(c.wall_ns > believed);
    test_tmpdir_remove(dir);
}

/* A believed step back cannot take timestamps back (S2): they stand at the last one until
 * the clock passes it. */
static void
test_a_believed_step_back_never_decreases_timestamps(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("clock-s2");
    fake_clock_t c = clock_at_t0();
    assert_int_equal(insert_once(dir, &c), T0);
    tick(&c, NS, -60 * MINUTE);
    assert_int_equal(insert_once(dir, &c), T0 + NS);
    tick(&c, 11 * MINUTE, 0);
    assert_int_equal(insert_once(dir, &c), T0 + NS); /* believed: behind the last stamp */
    assert_true(c.wall_ns < T0 + NS);
    tick(&c, 60 * MINUTE, 0);
    assert_int_equal(insert_once(dir, &c), c.wall_ns); /* past it again */
    test_tmpdir_remove(dir);
}

/* A new boot has no boot time in common with the last one: its wall clock is trusted. */
static void
test_a_new_boot_trusts_its_wall_clock(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("clock-boot");
    fake_clock_t c = clock_at_t0();
    assert_int_equal(insert_once(dir, &c), T0);
    c.boot_ns = 5 * (uint64_t)NS; /* rebooted, two hours later */
    c.wall_ns = T0 + 120 * MINUTE;
    memset(c.boot_id, 0xb2, sizeof c.boot_id);
    assert_int_equal(insert_once(dir, &c), T0 + 120 * MINUTE);
    test_tmpdir_remove(dir);
}

/* A note in the LOCK page that a crash tore (or any garbage there) is no note: the wall
 * clock is trusted, nothing else. */
static void
test_a_torn_clock_note_is_ignored(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("clock-torn");
    fake_clock_t c = clock_at_t0();
    assert_int_equal(insert_once(dir, &c), T0);
    char *lock = test_path_join(dir, "LOCK");
    int fd = open(lock, O_WRONLY);
    assert_true(fd >= 0);
    uint8_t junk[56];
    memset(junk, 0x7f, sizeof junk);
    assert_int_equal(pwrite(fd, junk, sizeof junk, 40), (ssize_t)sizeof junk);
    close(fd);
    free(lock);
    tick(&c, NS, 10 * YEAR); /* with no note, the step cannot be seen: trusted */
    assert_int_equal(insert_once(dir, &c), c.wall_ns);
    test_tmpdir_remove(dir);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_jump_for_one_insert_poisons_nothing),
        cmocka_unit_test(test_backward_jump_keeps_the_true_timeline),
        cmocka_unit_test(test_jumps_while_the_journal_is_open),
        cmocka_unit_test(test_a_step_that_holds_is_believed_after_ten_minutes),
        cmocka_unit_test(test_a_believed_step_back_never_decreases_timestamps),
        cmocka_unit_test(test_a_new_boot_trusts_its_wall_clock),
        cmocka_unit_test(test_a_torn_clock_note_is_ignored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
