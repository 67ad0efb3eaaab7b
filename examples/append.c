/*
 * append.c: the smallest complete use of stele's write API. Opens (or creates) a journal,
 * appends audit events given as JSON and as BSON, each acknowledged once it is durable,
 * and prints what the engine reports.
 *
 *   stele-example-append DIR          knobs from STELE_<KNOB> environment variables
 *
 * Build: cc append.c $(pkg-config --cflags --libs stele libbson-1.0)
 */
#include <bson/bson.h>
#include <stdio.h>
#include <string.h>

#include <stele.h>

static int
report(const char *what, int rc, const stele_error_t *err)
{
    fprintf(stderr, "%s: %s (%s)\n", what, err->message, stele_errname(rc));
    if (err->hint[0])
        fprintf(stderr, "hint: %s\n", err->hint);
    return 1;
}

int
main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    stele_options_t opts;
    stele_error_t err;
    stele_options_init(&opts);
    int rc = stele_options_load_env(&opts, &err);
    if (rc)
        return report("configuration", rc, &err);

    stele_t *db = NULL;
    rc = stele_open(argv[1], &opts, &db, &err);
    if (rc) {
        stele_options_release(&opts);
        return report("open", rc, &err);
    }

    static const char *const events[] = {
        "{\"actor\":\"alice\",\"action\":\"login\",\"outcome\":\"success\"}",
        ("{\"actor\":\"alice\",\"action\":\"update\",\"target\":\"invoice/42\","
         "\"change\":{\"field\":\"amount\",\"old\":10.5,\"new\":12.75}}"),
        "{\"actor\":\"mallory\",\"action\":\"login\",\"outcome\":\"denied\"}",
    };
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++) {
        uint64_t seq = 0;
        rc = stele_append_json(db, events[i], strlen(events[i]), STELE_WAIT_DURABLE, &seq, &err);
        if (rc) {
            stele_close(db, NULL);
            stele_options_release(&opts);
            return report("append", rc, &err);
        }
        printf("durable seq %llu\n", (unsigned long long)seq);
    }

    /* A rejected event changes nothing and says why. */
    const char *bad = "{\"$where\":\"1\"}";
    rc = stele_append_json(db, bad, strlen(bad), STELE_WAIT_DURABLE, NULL, &err);
    printf("rejected as %s: %s\n", stele_errname(rc), err.message);

    bson_t *doc = BCON_NEW("actor", BCON_UTF8("bob"), "action", BCON_UTF8("logout"), "when",
                           BCON_DATE_TIME(1700000000000));
    uint64_t seq = 0;
    rc = stele_append_bson(db, bson_get_data(doc), doc->len, STELE_WAIT_DURABLE, &seq, &err);
    bson_destroy(doc);
    if (rc) {
        stele_close(db, NULL);
        stele_options_release(&opts);
        return report("append", rc, &err);
    }
    printf("durable seq %llu (bson)\n", (unsigned long long)seq);

    stele_stats_t st;
    stele_stats(db, &st);
    printf("source %s: appended %llu, durable %llu, %llu batches, %llu syncs, p99 %llu us\n",
           st.source, (unsigned long long)st.appended_seq, (unsigned long long)st.durable_seq,
           (unsigned long long)st.batches, (unsigned long long)st.syncs,
           (unsigned long long)st.latency_p99_us);

    rc = stele_close(db, &err);
    stele_options_release(&opts);
    if (rc)
        return report("close", rc, &err);
    return 0;
}
