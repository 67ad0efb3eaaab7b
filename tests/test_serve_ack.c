/*
 * test_serve_ack.c: the server's ack threads (engine/serve_ack.c) driven directly on a
 * stele_t: a lone request the loop commits itself (serve_acks_reach_now) is recorded as
 * reached without the level's thread or its eventfd, and what the loop cannot commit by
 * itself (durable with sync=never, shipped) is left to the thread. Counts (eventfd wake-ups,
 * positions), not timings.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "serve.h"
#include "stele.h"
#include "test_util.h"

static const char event_json[] = "{\"actor\":\"alice\",\"action\":\"read\"}";

typedef struct fixture {
    char *dir;
    stele_t *db;
    int wake_fd;
    serve_acks_t *acks;
} fixture_t;

static void
open_with_sync(fixture_t *f, stele_sync_t sync)
{
    f->dir = test_tmpdir_new("serve-ack");
    stele_options_t o;
    stele_options_init(&o);
    o.sync = sync;
    stele_error_t err = {0};
    int rc = stele_open(f->dir, &o, &f->db, &err);
    if (rc)
        fail_msg("stele_open: %s", err.message);
    f->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    assert_true(f->wake_fd >= 0);
    assert_int_equal(serve_acks_start(f->db, f->wake_fd, sync == STELE_SYNC_NEVER, &f->acks), 0);
}

static void
close_fixture(fixture_t *f)
{
    serve_acks_stop(f->acks);
    close(f->wake_fd);
    assert_int_equal(stele_close(f->db, NULL), 0);
    test_tmpdir_remove(f->dir);
}

/* As the server's loop appends: without waiting. */
static uint64_t
append_unwaited(fixture_t *f)
{
    uint64_t seq = 0;
    stele_error_t err = {0};
    int rc = stele_append_json(f->db, event_json, strlen(event_json), STELE_WAIT_NONE, &seq, &err);
    if (rc)
        fail_msg("append: %s", err.message);
    return seq;
}

/* How many times the ack threads woke the loop since the last call (the eventfd's count). */
static uint64_t
loop_wakeups(fixture_t *f)
{
    uint64_t count = 0;
    if (read(f->wake_fd, &count, sizeof count) != (ssize_t)sizeof count)
        return 0;
    return count;
}

static void
test_serve_ack_loop_commits_a_lone_durable_request_itself(void **state)
{
    (void)state;
    fixture_t f;
    open_with_sync(&f, STELE_SYNC_ALWAYS);
    for (int i = 0; i < 20; i++) {
        uint64_t seq = append_unwaited(&f);
        assert_int_equal(serve_acks_reach_now(f.acks, STELE_WAIT_DURABLE, seq), 1);
        assert_true(stele_reached_seq(f.db, STELE_WAIT_DURABLE) >= seq);
        serve_ack_state_t st;
        serve_acks_snapshot(f.acks, &st);
        assert_int_equal(st.reached_seq[STELE_WAIT_DURABLE], seq);
    }
    assert_int_equal(loop_wakeups(&f), 0); /* the durable thread never had to wake the loop */
    close_fixture(&f);
}

static void
test_serve_ack_loop_commits_a_lone_written_request_with_sync_never(void **state)
{
    (void)state;
    fixture_t f;
    open_with_sync(&f, STELE_SYNC_NEVER);
    uint64_t seq = append_unwaited(&f);
    assert_int_equal(serve_acks_reach_now(f.acks, STELE_WAIT_WRITTEN, seq), 1);
    assert_true(stele_reached_seq(f.db, STELE_WAIT_WRITTEN) >= seq);
    assert_int_equal(loop_wakeups(&f), 0);
    close_fixture(&f);
}

/* With sync=never a durable request needs a flush, which is the durable thread's: the loop's
 * try leaves it alone (nothing flushed), and the thread then answers it. */
static void
test_serve_ack_durable_with_sync_never_is_left_to_the_thread(void **state)
{
    (void)state;
    fixture_t f;
    open_with_sync(&f, STELE_SYNC_NEVER);
    uint64_t seq = append_unwaited(&f);
    assert_int_equal(serve_acks_reach_now(f.acks, STELE_WAIT_DURABLE, seq), 0);
    assert_int_equal(serve_acks_reach_now(f.acks, STELE_WAIT_SHIPPED, seq), 0);
    assert_true(stele_reached_seq(f.db, STELE_WAIT_DURABLE) < seq);
    serve_acks_want(f.acks, STELE_WAIT_DURABLE, seq);
    serve_ack_state_t st = {0};
    /* Polled, not timed: a thread that never answers fails after a minute. */
    for (int i = 0; i < 600 && st.reached_seq[STELE_WAIT_DURABLE] < seq; i++) {
        struct pollfd p = {.fd = f.wake_fd, .events = POLLIN};
        poll(&p, 1, 100);
        serve_acks_snapshot(f.acks, &st);
    }
    assert_int_equal(st.reached_seq[STELE_WAIT_DURABLE], seq);
    assert_true(loop_wakeups(&f) >= 1);
    close_fixture(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_ack_loop_commits_a_lone_durable_request_itself),
        cmocka_unit_test(test_serve_ack_loop_commits_a_lone_written_request_with_sync_never),
        cmocka_unit_test(test_serve_ack_durable_with_sync_never_is_left_to_the_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
