/*
 * append.c: the smallest complete use of stele's write API. Opens (or creates) a journal,
 * appends audit events given as JSON and as BSON, each acknowledged once it is durable,
 * and prints what the engine reports.
 *
 *   stele-example-append DIR          knobs from STELE_<KNOB> environment variables
 *
 * Build: cc append.c $(pkg-config --cflags --libs stele)
 */
#include <stdint.h>
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
    printf("stele %s\n", stele_version());
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

    /* A BSON document is bytes: a program that has its events as BSON (from libbson, a
     * driver, another service) hands them over as they are. This one is
     * {"actor": "bob", "action": "logout", "when": <UTC datetime 1700000000000 ms>}.
     * Each element: a type byte, the key (NUL-terminated), the value. The literal's own
     * closing NUL is the document's final 0x00. */
    static const char logout_bson[] = "\x35\0\0\0" /* document length: 53, little-endian */
                                      "\x02"       /* UTF-8 string: */
                                      "actor\0"    /* key */
                                      "\x04\0\0\0" /* length with its NUL */
                                      "bob\0"
                                      "\x02"
                                      "action\0"
                                      "\x07\0\0\0"
                                      "logout\0"
                                      "\x09" /* UTC datetime: */
                                      "when\0"
                                      "\x00\x68\xe5\xcf\x8b\x01\0\0"; /* int64 ms, LE */
    _Static_assert(sizeof logout_bson == 53, "the length in the document's first 4 bytes");
    uint64_t seq = 0;
    rc = stele_append_bson(db, (const uint8_t *)logout_bson, sizeof logout_bson, STELE_WAIT_DURABLE,
                           &seq, &err);
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
