/*
 * test_ship_dead_letters.c: the dead-letter calls without a server: listing (none without
 * an index, paging, sink names), a re-ship that cannot reach MongoDB changes nothing, a
 * letter whose record retention removed stays listed as missing, discarding, and all of it
 * in a process that holds the journal open. The letters are put in the index directly, as
 * a shipper would have.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "mongo_server.h"
#include "ship_fixture.h"

/* A journal of 10 records whose index lists dead letters at `seqs` for sink "main"; the
 * index is closed afterwards, as in a process other than the writer. */
static void
journal_with_letters(ship_journal_t *sj, const uint64_t *seqs, size_t n)
{
    assert_int_equal(ship_journal_create(sj, "dead"), 0);
    assert_int_equal(ship_journal_append(sj, 10, 10, 8), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(index_put_dead_letter(sj->index, "main", seqs[i], "refused", NULL), 0);
    index_close(sj->index);
    sj->index = NULL;
}

/* A sink whose server is not there: a free port, short timeouts and backoff. */
static void
unreachable_sink(stele_sink_options_t *so, char *uri, size_t cap)
{
    snprintf(uri, cap, "mongodb://127.0.0.1:%d/?serverSelectionTimeoutMS=100",
             mongo_server_free_port());
    ship_sink_options(so, "main", uri, "dead");
    so->backoff_min_ms = 1;
    so->backoff_max_ms = 5;
}

static void
test_dead_letters_list_pages_by_seq_and_sink(void **state)
{
    (void)state;
    ship_journal_t sj;
    uint64_t seqs[] = {2, 4, 9};
    journal_with_letters(&sj, seqs, 3);
    stele_dead_letter_t dl[3];
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 2, NULL), 2);
    assert_int_equal(dl[0].seq, 2);
    assert_int_equal(dl[1].seq, 4);
    assert_string_equal(dl[1].reason, "refused");
    assert_true(dl[1].unix_ms > 0);
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 5, dl, 3, NULL), 1);
    assert_int_equal(dl[0].seq, 9);
    assert_int_equal(stele_dead_letters_list(sj.dir, NULL, 0, dl, 3, NULL), 0); /* "default" */
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, NULL, 0, NULL), 0);
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, NULL, 3, NULL), STELE_EINVAL);
    ship_journal_destroy(&sj, 0);
}

static void
test_dead_letters_of_a_journal_without_index_are_none(void **state)
{
    (void)state;
    ship_journal_t sj;
    journal_with_letters(&sj, NULL, 0);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/index", sj.dir);
    assert_int_equal(mongo_server_rm_rf(path), 0);
    stele_dead_letter_t dl[1];
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 1, NULL), 0);
    stele_sink_options_t so;
    char uri[128];
    unreachable_sink(&so, uri, sizeof uri);
    stele_dead_letter_report_t rep;
    assert_int_equal(stele_dead_letters_reship(sj.dir, &so, 0, &rep, NULL), 0);
    assert_int_equal(rep.n_tried, 0);
    assert_int_equal(stele_dead_letter_discard(sj.dir, "main", 3, NULL), STELE_ENOTFOUND);
    ship_journal_destroy(&sj, 0);
}

static void
test_dead_letter_reship_without_server_changes_nothing(void **state)
{
    (void)state;
    ship_journal_t sj;
    uint64_t seqs[] = {3, 7};
    journal_with_letters(&sj, seqs, 2);
    stele_dead_letter_t before[2], after[2];
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, before, 2, NULL), 2);
    stele_sink_options_t so;
    char uri[128];
    unreachable_sink(&so, uri, sizeof uri);
    stele_dead_letter_report_t rep;
    stele_error_t err = {0};
    assert_int_equal(stele_dead_letters_reship(sj.dir, &so, 0, &rep, &err), STELE_EREMOTE);
    assert_int_equal(rep.n_shipped + rep.n_rejected, 0);
    assert_non_null(strstr(err.message, "127.0.0.1"));
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, after, 2, NULL), 2);
    for (int i = 0; i < 2; i++) { /* reasons and times untouched */
        assert_int_equal(after[i].seq, before[i].seq);
        assert_int_equal(after[i].unix_ms, before[i].unix_ms);
        assert_string_equal(after[i].reason, before[i].reason);
    }
    ship_journal_destroy(&sj, 0);
}

static void
test_dead_letter_gone_from_journal_stays_listed_as_missing(void **state)
{
    (void)state;
    ship_journal_t sj;
    uint64_t seqs[] = {99}; /* past the journal's 10 records, as after retention */
    journal_with_letters(&sj, seqs, 1);
    stele_sink_options_t so;
    char uri[128];
    unreachable_sink(&so, uri, sizeof uri);
    stele_dead_letter_report_t rep;
    stele_error_t err = {0};
    assert_int_equal(stele_dead_letters_reship(sj.dir, &so, 99, &rep, &err), STELE_EREMOTE);
    assert_int_equal(rep.n_tried, 1);
    assert_int_equal(rep.n_missing, 1);
    assert_non_null(strstr(err.hint, "discard"));
    assert_int_equal(stele_dead_letters_reship(sj.dir, &so, 98, &rep, &err), STELE_ENOTFOUND);
    stele_dead_letter_t dl[1];
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 1, NULL), 1);
    assert_int_equal(stele_dead_letter_discard(sj.dir, "main", 99, NULL), 0);
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 1, NULL), 0);
    assert_int_equal(stele_dead_letter_discard(sj.dir, "main", 99, &err), STELE_ENOTFOUND);
    assert_non_null(strstr(err.message, "no dead letter at seq 99"));
    assert_int_equal(stele_dead_letter_discard(sj.dir, "main", 0, NULL), STELE_EINVAL);
    ship_journal_destroy(&sj, 0);
}

/* In the process that holds the journal (stele_open), the dead-letter calls use the index
 * environment that process already has open (one per index per process): listing and
 * discarding work, and what they did is what the next open sees. */
static void
test_dead_letter_calls_work_beside_an_open_journal(void **state)
{
    (void)state;
    ship_journal_t sj;
    uint64_t seqs[] = {3, 5};
    journal_with_letters(&sj, seqs, 2);
    stele_error_t err = {0};
    assert_int_equal(journal_close(sj.journal, &err), 0); /* the fixture's writer steps aside */
    sj.journal = NULL;
    stele_t *db = NULL;
    assert_int_equal(stele_open(sj.dir, NULL, &db, &err), 0);
    stele_dead_letter_t dl[3];
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 3, NULL), 2);
    assert_int_equal(stele_dead_letter_discard(sj.dir, "main", 3, NULL), 0);
    uint64_t seq = 0;
    assert_int_equal(stele_append_json(db, "{\"a\":1}", 7, STELE_WAIT_DURABLE, &seq, &err), 0);
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 3, NULL), 1);
    assert_int_equal(dl[0].seq, 5);
    assert_int_equal(stele_close(db, &err), 0);
    assert_int_equal(stele_dead_letters_list(sj.dir, "main", 0, dl, 3, NULL), 1);
    assert_int_equal(dl[0].seq, 5);
    ship_journal_destroy(&sj, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dead_letters_list_pages_by_seq_and_sink),
        cmocka_unit_test(test_dead_letters_of_a_journal_without_index_are_none),
        cmocka_unit_test(test_dead_letter_reship_without_server_changes_nothing),
        cmocka_unit_test(test_dead_letter_gone_from_journal_stays_listed_as_missing),
        cmocka_unit_test(test_dead_letter_calls_work_beside_an_open_journal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
