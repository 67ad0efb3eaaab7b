/*
 * test_config.c: the knob table and its setters (engine/config*.c): stele_options_set, the
 * STELE_<KNOB> environment, INI files, and the whole-struct checks stele_open runs. Every
 * failure must name the knob, the value and what is accepted, and leave the options as
 * they were.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

typedef struct fixture {
    char dir[256];
    char path[300];
} fixture_t;

static int
setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    const char *tmp = getenv("TMPDIR");
    snprintf(f->dir, sizeof f->dir, "%s/stele-config-XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/stele.ini", f->dir);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture_t *f = *state;
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void
write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void
test_config_defaults_match_the_knob_table(void **state)
{
    (void)state;
    size_t n = 0;
    const stele_knob_t *knobs = stele_knobs(&n);
    assert_true(n >= 17);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(knobs[i].help);
        assert_non_null(knobs[i].value_text);
        assert_true(knobs[i].value_text[0] != '\0');
        /* every choice a usage line lists is taken */
        if (strchr(knobs[i].value_text, '|') != NULL) {
            char choices[64];
            snprintf(choices, sizeof choices, "%s", knobs[i].value_text);
            for (char *save = NULL, *c = strtok_r(choices, "|", &save); c != NULL;
                 c = strtok_r(NULL, "|", &save)) {
                stele_options_t o;
                stele_options_init(&o);
                if (stele_options_set(&o, knobs[i].name, c, NULL) != 0)
                    fail_msg("%s: listed value '%s' is refused", knobs[i].name, c);
                stele_options_release(&o);
            }
        }
        if (strcmp(knobs[i].name, "signing_key") == 0)
            continue; /* no key by default: no default text */
        if (knobs[i].default_text[0] == '\0') {
            /* only the source's default is worked out at open (the host name); a signing
             * key has none */
            if (strcmp(knobs[i].name, "signing_key") != 0)
                assert_string_equal(knobs[i].name, "source");
            continue;
        }
        stele_options_t defaults, parsed;
        stele_options_init(&defaults);
        stele_options_init(&parsed);
        stele_error_t err = {0};
        int rc = stele_options_set(&parsed, knobs[i].name, knobs[i].default_text, &err);
        if (rc != 0)
            fail_msg("default of %s does not parse: %s", knobs[i].name, err.message);
        parsed.owned = NULL;
        if (memcmp(&defaults, &parsed, sizeof defaults) != 0)
            fail_msg("default text of %s differs from stele_options_init", knobs[i].name);
        stele_options_release(&parsed);
    }
}

static void
test_config_set_parses_units_and_choices(void **state)
{
    (void)state;
    stele_options_t o;
    stele_options_init(&o);
    assert_int_equal(stele_options_set(&o, "commit_interval_us", "2ms", NULL), 0);
    assert_int_equal(o.commit_interval_us, 2000);
    assert_int_equal(stele_options_set(&o, "sync_interval_ms", "2s", NULL), 0);
    assert_int_equal(o.sync_interval_ms, 2000);
    assert_int_equal(stele_options_set(&o, "segment_bytes", "1G", NULL), 0);
    assert_true(o.segment_bytes == (1ull << 30));
    assert_int_equal(stele_options_set(&o, "max_queue_bytes", "512KiB", NULL), 0);
    assert_true(o.max_queue_bytes == 512 * 1024);
    assert_int_equal(stele_options_set(&o, "sync", "interval", NULL), 0);
    assert_int_equal(o.sync, STELE_SYNC_INTERVAL);
    assert_int_equal(stele_options_set(&o, "commit_policy", "FIXED", NULL), 0);
    assert_int_equal(o.commit_policy, STELE_COMMIT_FIXED);
    assert_int_equal(stele_options_set(&o, "on_full", "fail", NULL), 0);
    assert_int_equal(o.on_full, STELE_ON_FULL_FAIL);
    assert_int_equal(stele_options_set(&o, "create_if_missing", "no", NULL), 0);
    assert_int_equal(o.create_if_missing, 0);
    assert_int_equal(stele_options_set(&o, "file_mode", "0640", NULL), 0);
    assert_int_equal(o.file_mode, 0640);
    assert_int_equal(stele_options_set(&o, "retention_seconds", "2h", NULL), 0);
    assert_true(o.retention_seconds == 7200);
    assert_int_equal(stele_options_set(&o, "source", "host-1.example", NULL), 0);
    assert_string_equal(o.source, "host-1.example");
    stele_options_release(&o);
    assert_null(o.source);
}

static void
test_config_set_rejects_bad_values_and_changes_nothing(void **state)
{
    (void)state;
    static const struct {
        const char *name, *value, *accepts;
    } bad[] = {
        {"sync", "sometimes", "one of always,interval,never"},
        {"commit_interval_us", "1500ns", "whole number"},
        {"commit_interval_us", "11s", "0 to 10000000"},
        {"max_depth", "101", "1 to 100"},
        {"max_depth", "-1", "integer"},
        {"segment_bytes", "12X", "suffixes K, M, G, T"},
        {"segment_bytes", "99999999999999999999999", "size"},
        {"max_record_bytes", "17M", "bytes"},
        {"create_if_missing", "maybe", "true or false"},
        {"file_mode", "0999", "octal"},
        {"source", "has space", "letters"},
        {"sync_interval_ms", "0", "1 to"},
        /* libmongoc takes the write concern timeout as an int32 */
        {"sink.main.wtimeout_ms", "2147483648", "from 0 to 2147483647"},
        {"sink.main.wtimeout_ms", "4294967295", "from 0 to 2147483647"},
        {"sink.main.wtimeout_ms", "4294967296", "from 0 to 2147483647"},
        /* MongoDB's maxWriteBatchSize is 100,000 documents */
        {"sink.main.batch_docs", "0", "from 1 to 100000"},
        {"sink.main.batch_docs", "100001", "from 1 to 100000"},
        {"sink.main.batch_docs", "4294967295", "from 1 to 100000"},
        /* MongoDB's maxMessageSizeBytes; the shipper holds a whole batch in memory */
        {"sink.main.batch_bytes", "1023", "from 1024 to 48000000 bytes"},
        {"sink.main.batch_bytes", "1G", "from 1024 to 48000000 bytes"},
        /* delays longer than an hour */
        {"sink.main.linger_ms", "3600001", "from 0 to 3600000"},
        {"sink.main.linger_ms", "4294967295", "from 0 to 3600000"},
        {"sink.main.backoff_min_ms", "0", "from 1 to 3600000"},
        {"sink.main.backoff_max_ms", "0", "from 1 to 3600000"},
        {"sink.main.backoff_max_ms", "3600001", "from 1 to 3600000"},
        {"sink.main.on_destination_change", "ignore", "refuse or restart"},
        {"log_level", "loud", "debug,info,warn,error"},
        {"sink_drain_ms", "3600001", "0 to"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        stele_options_t o, before;
        stele_options_init(&o);
        before = o;
        stele_error_t err = {0};
        assert_int_equal(stele_options_set(&o, bad[i].name, bad[i].value, &err), STELE_ECONFIG);
        assert_int_equal(err.code, STELE_ECONFIG);
        const char *key = strrchr(bad[i].name, '.') ? strrchr(bad[i].name, '.') + 1 : bad[i].name;
        if (!strstr(err.message, key) || !strstr(err.message, bad[i].value) ||
            !strstr(err.message, bad[i].accepts))
            fail_msg("%s=%s: message \"%s\" lacks name, value or \"%s\"", bad[i].name, bad[i].value,
                     err.message, bad[i].accepts);
        assert_memory_equal(&o, &before, sizeof o);
        stele_options_release(&o);
    }
}

static void
test_config_set_rejects_unknown_knob_with_a_hint(void **state)
{
    (void)state;
    stele_options_t o;
    stele_options_init(&o);
    stele_error_t err = {0};
    assert_int_equal(stele_options_set(&o, "commit_intervall_us", "5", &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "unknown knob \"commit_intervall_us\""));
    assert_true(strlen(err.hint) > 0);
}

static void
test_config_set_configures_sinks_by_dotted_name(void **state)
{
    (void)state;
    stele_options_t o;
    stele_options_init(&o);
    assert_int_equal(stele_options_set(&o, "sink.main.uri", "mongodb://127.0.0.1:27017", NULL), 0);
    assert_int_equal(stele_options_set(&o, "sink.main.w", "majority", NULL), 0);
    assert_int_equal(stele_options_set(&o, "sink.backup.uri", "mongodb://127.0.0.1:27018", NULL),
                     0);
    assert_int_equal(stele_options_set(&o, "sink.backup.batch_bytes", "1M", NULL), 0);
    assert_int_equal(o.n_sinks, 2);
    assert_string_equal(o.sinks[0].name, "main");
    assert_int_equal(o.sinks[0].w, -1);
    assert_string_equal(o.sinks[1].uri, "mongodb://127.0.0.1:27018");
    assert_int_equal(o.sinks[1].batch_bytes, 1 << 20);
    assert_int_equal(o.sinks[1].linger_ms, 5);
    assert_int_equal(config_check(&o, NULL), 0);
    /* each range includes its ends */
    assert_int_equal(stele_options_set(&o, "sink.main.wtimeout_ms", "2147483647", NULL), 0);
    assert_int_equal(stele_options_set(&o, "sink.main.batch_docs", "100000", NULL), 0);
    assert_int_equal(stele_options_set(&o, "sink.main.batch_bytes", "48000000", NULL), 0);
    assert_int_equal(stele_options_set(&o, "sink.main.linger_ms", "0", NULL), 0);
    assert_int_equal(stele_options_set(&o, "sink.main.backoff_max_ms", "3600000", NULL), 0);
    assert_int_equal(o.sinks[0].wtimeout_ms, INT32_MAX);
    assert_int_equal(o.sinks[0].batch_docs, 100000);
    assert_int_equal(config_check(&o, NULL), 0);
    stele_options_release(&o);
}

static void
test_config_load_file_reads_journal_and_sink_sections(void **state)
{
    fixture_t *f = *state;
    write_file(f->path, "; stele config\n"
                        "sync = interval\n"
                        "[journal]\n"
                        "commit_interval_us = 500\n"
                        "max_journal_bytes = 1G\n"
                        "[sink primary]\n"
                        "uri = mongodb://127.0.0.1:27017/audit\n"
                        "collection = events\n"
                        "w = 1\n"
                        "journaled = false\n"
                        "on_destination_change = restart\n");
    stele_options_t o;
    stele_options_init(&o);
    stele_error_t err = {0};
    int rc = stele_options_load_file(&o, f->path, &err);
    if (rc)
        fail_msg("%s", err.message);
    assert_int_equal(o.sync, STELE_SYNC_INTERVAL);
    assert_int_equal(o.commit_interval_us, 500);
    assert_true(o.max_journal_bytes == (1ull << 30));
    assert_int_equal(o.n_sinks, 1);
    assert_string_equal(o.sinks[0].name, "primary");
    assert_string_equal(o.sinks[0].uri, "mongodb://127.0.0.1:27017/audit");
    assert_int_equal(o.sinks[0].w, 1);
    assert_int_equal(o.sinks[0].journaled, 0);
    assert_int_equal(o.sinks[0].on_destination_change, STELE_DESTINATION_RESTART);
    stele_options_release(&o);
}

/* A sink's collection shape: the time field, one index per `index` line (in order), the TTL
 * and the time-series choice; defaults when unset. */
static void
test_config_load_file_reads_a_sinks_time_field_indexes_and_ttl(void **state)
{
    fixture_t *f = *state;
    write_file(f->path, "[sink audit]\n"
                        "uri = mongodb://127.0.0.1:27017/audit\n"
                        "time_field = ts\n"
                        "index = actor:1, ts:-1\n"
                        "index = object.id:1,ts:-1\n"
                        "expire_after_s = 7776000\n"
                        "timeseries = yes\n"
                        "[sink plain]\n"
                        "uri = mongodb://127.0.0.1:27017/other\n");
    stele_options_t o;
    stele_options_init(&o);
    stele_error_t err = {0};
    int rc = stele_options_load_file(&o, f->path, &err);
    if (rc)
        fail_msg("%s", err.message);
    assert_string_equal(o.sinks[0].time_field, "ts");
    assert_string_equal(o.sinks[0].indexes, "actor:1, ts:-1;object.id:1,ts:-1");
    assert_int_equal(o.sinks[0].expire_after_s, 7776000);
    assert_int_equal(o.sinks[0].timeseries, 1);
    assert_string_equal(o.sinks[1].time_field, "_ts");
    assert_null(o.sinks[1].indexes);
    assert_int_equal(o.sinks[1].expire_after_s, 0);
    assert_int_equal(o.sinks[1].timeseries, 0);
    assert_int_equal(config_check(&o, NULL), 0);

    const char *cursor = o.sinks[0].indexes;
    config_index_t ix;
    assert_int_equal(config_index_next(&cursor, &ix, NULL), 1);
    assert_int_equal(ix.n_keys, 2);
    assert_string_equal(ix.keys[0].field, "actor");
    assert_int_equal(ix.keys[0].direction, 1);
    assert_string_equal(ix.keys[1].field, "ts");
    assert_int_equal(ix.keys[1].direction, -1);
    assert_int_equal(config_index_next(&cursor, &ix, NULL), 1);
    assert_string_equal(ix.keys[0].field, "object.id");
    assert_int_equal(config_index_next(&cursor, &ix, NULL), 0);
    stele_options_release(&o);
}

/* Each malformed shape value is refused where it is set, naming what it accepts, and leaves
 * the options as they were; a struct filled by hand is refused the same way at open. */
static void
test_config_refuses_a_bad_time_field_or_index(void **state)
{
    (void)state;
    static const struct {
        const char *key, *value, *says;
    } bad[] = {
        {"time_field", "a.b", "no '.'"},     {"time_field", "$t", "no '.'"},
        {"time_field", "_id", "not _id"},    {"time_field", "_stele", "not _id"},
        {"index", "actor", "field:1"},       {"index", "actor:2", "expected 1 or -1"},
        {"index", ":1", "field:1"},          {"index", "$a:1", "field:1"},
        {"index", "a..b:1", "field:1"},      {"index", "a:1;b:1", "one index per"},
        {"index", "", "empty value"},        {"timeseries", "maybe", "true or false"},
        {"expire_after_s", "-1", "integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        stele_options_t o;
        stele_options_init(&o);
        assert_int_equal(stele_options_set(&o, "sink.a.uri", "mongodb://127.0.0.1/", NULL), 0);
        assert_int_equal(stele_options_set(&o, "sink.a.index", "x:1", NULL), 0);
        char knob[64];
        snprintf(knob, sizeof knob, "sink.a.%s", bad[i].key);
        stele_error_t err = {0};
        assert_int_equal(stele_options_set(&o, knob, bad[i].value, &err), STELE_ECONFIG);
        if (!strstr(err.message, bad[i].says))
            fail_msg("%s = \"%s\": %s", bad[i].key, bad[i].value, err.message);
        assert_string_equal(o.sinks[0].time_field, "_ts");
        assert_string_equal(o.sinks[0].indexes, "x:1");
        assert_int_equal(o.sinks[0].timeseries, 0);
        stele_options_release(&o);
    }
    stele_sink_options_t sink;
    stele_sink_options_init(&sink);
    sink.uri = "mongodb://127.0.0.1/";
    stele_options_t o;
    stele_options_init(&o);
    o.sinks = &sink;
    o.n_sinks = 1;
    stele_error_t err = {0};
    sink.indexes = "actor:1;b:up";
    assert_int_equal(config_check(&o, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "sink default"));
    sink.indexes = NULL;
    sink.time_field = "a.b";
    assert_int_equal(config_check(&o, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "time_field"));
}

static void
test_config_load_file_names_file_and_line_and_changes_nothing(void **state)
{
    fixture_t *f = *state;
    static const struct {
        const char *text, *fragment;
    } bad[] = {
        {"sync = never\n\ncommit_interval_us = soon\n", ":3: invalid value \"soon\""},
        {"sync = never\n[sink a]\nuri = mongodb://x\nwtimeout = 5\n", ":4: unknown sink key"},
        {"[journal]\nsync = never\n[replication]\nx = 1\n", ":4: unknown section [replication]"},
        {"sync = never\nthis line is not ini\n", ":2: syntax error"},
        {"[journal]\nbogus = 1\n", ":2: unknown knob \"bogus\""},
        {"[sink a]\nuri = mongodb://x\nwtimeout_ms = 2147483648\n",
         ":3: invalid value \"2147483648\" for sink a wtimeout_ms: expected an integer from 0 to "
         "2147483647"},
        {"[sink a]\nuri = mongodb://x\nbatch_docs = 100001\n",
         ":3: invalid value \"100001\" for sink a batch_docs: expected an integer from 1 to "
         "100000"},
        {"[sink a]\nuri = mongodb://x\nbatch_docs = 0\n",
         ":3: invalid value \"0\" for sink a batch_docs: expected an integer from 1 to 100000"},
        {"[sink a]\nuri = mongodb://x\nlinger_ms = 4000000000\n",
         ":3: invalid value \"4000000000\" for sink a linger_ms"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(f->path, bad[i].text);
        stele_options_t o, before;
        stele_options_init(&o);
        assert_int_equal(stele_options_set(&o, "sync", "always", NULL), 0);
        before = o;
        stele_error_t err = {0};
        assert_int_equal(stele_options_load_file(&o, f->path, &err), STELE_ECONFIG);
        if (!strstr(err.message, f->path) || !strstr(err.message, bad[i].fragment))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.message, bad[i].fragment);
        assert_memory_equal(&o, &before, sizeof o);
        stele_options_release(&o);
    }
}

/* Writes `len` bytes (NULs included). */
static void
write_bytes(const char *path, const char *data, size_t len)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    fclose(fp);
}

/* The INI parser reads a line into a fixed buffer (200 bytes in the usual libinih builds)
 * and parses the rest of a longer line as a line of its own. A line of any length must be
 * either read whole or refused with its own line number, never cut in two: the tail of a
 * long comment must not become a setting, and a long value must not be truncated. */
static void
test_config_load_file_never_cuts_a_long_line_in_two(void **state)
{
    fixture_t *f = *state;
    char text[1200];
    for (size_t pad = 100; pad < 1000; pad++) {
        /* "; xxx...x sync = never": whatever the buffer size, some pad puts the cut right
         * before "sync". */
        memset(text, 'x', pad);
        text[0] = ';';
        text[1] = ' ';
        snprintf(text + pad, sizeof text - pad, "sync = never\n");
        write_file(f->path, text);
        stele_options_t o;
        stele_options_init(&o);
        stele_error_t err = {0};
        int rc = stele_options_load_file(&o, f->path, &err);
        if (rc == 0 && o.sync != STELE_SYNC_ALWAYS)
            fail_msg("a %zu-byte comment line changed sync", pad + 12);
        if (rc != 0 && (!strstr(err.message, ":1: ") || !strstr(err.message, "longer than")))
            fail_msg("a %zu-byte comment line: \"%s\"", pad + 12, err.message);
        stele_options_release(&o);
    }
    /* A sink uri of 230 bytes: refused on its own line, options unchanged. */
    char uri[240];
    memset(uri, 'h', sizeof uri);
    memcpy(uri, "mongodb://", 10);
    snprintf(uri + 230, sizeof uri - 230, "/audit");
    snprintf(text, sizeof text, "[sink a]\nuri = %s\ncollection = events\n", uri);
    write_file(f->path, text);
    stele_options_t o, before;
    stele_options_init(&o);
    before = o;
    stele_error_t err = {0};
    int rc = stele_options_load_file(&o, f->path, &err);
    if (rc == 0)
        assert_string_equal(o.sinks[0].uri, uri); /* read whole, or ... */
    else if (rc != STELE_ECONFIG || !strstr(err.message, ":2: line longer than"))
        fail_msg("a 236-byte uri line: %s \"%s\"", stele_errname(rc), err.message); /* refused */
    else
        assert_memory_equal(&o, &before, sizeof o);
    stele_options_release(&o);
}

/* inih reads a line that starts with whitespace as a continuation of the previous key's
 * value (Python's multi-line values), which made an indented key silently replace the value
 * above it, or refused an indented but otherwise valid file with a misleading message. No
 * knob has a multi-line value: an indented line is the line it looks like. */
static void
test_config_load_file_reads_indented_lines_as_written(void **state)
{
    fixture_t *f = *state;
    write_file(f->path, "\xEF\xBB\xBF; BOM, CRLF and indentation\r\n"
                        "[journal]\r\n"
                        "    sync = interval\r\n"
                        "    sync_interval_ms = 250\r\n"
                        "[sink main]\n"
                        "\turi = mongodb://127.0.0.1:27017/audit\n"
                        "\tcollection = events\n");
    stele_options_t o;
    stele_options_init(&o);
    stele_error_t err = {0};
    int rc = stele_options_load_file(&o, f->path, &err);
    if (rc)
        fail_msg("%s", err.message);
    assert_int_equal(o.sync, STELE_SYNC_INTERVAL);
    assert_int_equal(o.sync_interval_ms, 250);
    assert_int_equal(o.n_sinks, 1);
    assert_string_equal(o.sinks[0].uri, "mongodb://127.0.0.1:27017/audit");
    assert_string_equal(o.sinks[0].collection, "events");
    stele_options_release(&o);

    /* A stray indented word is an error of its own line, not a new value for sync. */
    write_file(f->path, "sync = always\n  never\n");
    stele_options_init(&o);
    stele_options_t before = o;
    rc = stele_options_load_file(&o, f->path, &err);
    if (rc != STELE_ECONFIG || !strstr(err.message, ":2: "))
        fail_msg("stray indented value: %s \"%s\", sync=%d", stele_errname(rc), err.message,
                 (int)o.sync);
    assert_memory_equal(&o, &before, sizeof o);
    stele_options_release(&o);
}

/* A refused line keeps the hint of what refused it: the setter's (unknown section, unknown
 * knob) or the line reader's (a NUL byte), beside the file and line. */
static void
test_config_load_file_keeps_the_hint_of_the_refused_line(void **state)
{
    fixture_t *f = *state;
    static const struct {
        const char *text;
        size_t len;
        const char *where, *hint;
    } cases[] = {
        {"sync = never\n[jornal]\nmax_depth = 5\n", 0, ":3: ", "[sink NAME]"},
        {"sink_count = 2\n", 0, ":1: ", "field names"},
        {"sync = never\n\0\n", 15, ":2: ", "check how it was written"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
        write_bytes(f->path, cases[i].text, len);
        stele_options_t o;
        stele_options_init(&o);
        stele_error_t err = {0};
        int rc = stele_options_load_file(&o, f->path, &err);
        if (rc != STELE_ECONFIG || !strstr(err.message, cases[i].where) ||
            !strstr(err.hint, cases[i].hint))
            fail_msg("case %zu: %s \"%s\" hint \"%s\"", i, stele_errname(rc), err.message,
                     err.hint);
        stele_options_release(&o);
    }
}

/* Text after a NUL byte would be ignored without a word, and a directory read as an empty
 * file: both are refused. */
static void
test_config_load_file_refuses_nul_bytes_and_directories(void **state)
{
    fixture_t *f = *state;
    static const char with_nul[] = "sync = never\0 ; and the rest\nmax_depth = 5\n";
    write_bytes(f->path, with_nul, sizeof with_nul - 1);
    stele_options_t o, before;
    stele_options_init(&o);
    before = o;
    stele_error_t err = {0};
    int rc = stele_options_load_file(&o, f->path, &err);
    if (rc != STELE_ECONFIG || !strstr(err.message, ":1: ") || !strstr(err.message, "NUL"))
        fail_msg("NUL byte: %s \"%s\"", stele_errname(rc), err.message);
    assert_memory_equal(&o, &before, sizeof o);

    rc = stele_options_load_file(&o, f->dir, &err);
    if (rc != -EISDIR || !strstr(err.message, f->dir) ||
        !strstr(err.message, stele_strerror(-EISDIR)))
        fail_msg("directory: %s \"%s\"", stele_errname(rc), err.message);
    assert_memory_equal(&o, &before, sizeof o);
    stele_options_release(&o);
}

static void
test_config_load_file_reports_a_missing_file(void **state)
{
    fixture_t *f = *state;
    stele_options_t o;
    stele_options_init(&o);
    stele_error_t err = {0};
    unlink(f->path);
    assert_int_equal(stele_options_load_file(&o, f->path, &err), -ENOENT);
    assert_non_null(strstr(err.message, f->path));
    assert_non_null(strstr(err.message, stele_strerror(-ENOENT)));
}

static void
test_config_load_env_reads_upper_case_knobs(void **state)
{
    (void)state;
    stele_options_t o;
    stele_options_init(&o);
    setenv("STELE_SYNC", "never", 1);
    setenv("STELE_MAX_QUEUE_BYTES", "8M", 1);
    assert_int_equal(stele_options_load_env(&o, NULL), 0);
    assert_int_equal(o.sync, STELE_SYNC_NEVER);
    assert_true(o.max_queue_bytes == 8u << 20);

    stele_options_t before = o;
    stele_error_t err = {0};
    setenv("STELE_ON_FULL", "explode", 1);
    assert_int_equal(stele_options_load_env(&o, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "STELE_ON_FULL"));
    assert_non_null(strstr(err.message, "explode"));
    assert_memory_equal(&o, &before, sizeof o);
    unsetenv("STELE_SYNC");
    unsetenv("STELE_MAX_QUEUE_BYTES");
    unsetenv("STELE_ON_FULL");
    stele_options_release(&o);
}

/* The engine compares retention_seconds with the clock as a signed count of seconds
 * (index_writer.c, the retention cut-off): a value above INT64_MAX turned negative there, and
 * 18446744073709551615 ("keep for ever") deleted every shipped segment at once. */
static void
test_config_retention_seconds_stays_within_int64(void **state)
{
    (void)state;
    stele_options_t o;
    stele_options_init(&o);
    assert_int_equal(stele_options_set(&o, "retention_seconds", "9223372036854775807", NULL), 0);
    assert_true(o.retention_seconds == INT64_MAX);
    static const char *const too_big[] = {"9223372036854775808", "18446744073709551615",
                                          "2562047788015216h"};
    for (size_t i = 0; i < sizeof too_big / sizeof too_big[0]; i++) {
        stele_options_t before = o;
        stele_error_t err = {0};
        if (stele_options_set(&o, "retention_seconds", too_big[i], &err) != STELE_ECONFIG)
            fail_msg("retention_seconds=%s was accepted", too_big[i]);
        assert_non_null(strstr(err.message, "9223372036854775807"));
        assert_memory_equal(&o, &before, sizeof o);
    }
    stele_options_release(&o);
    stele_options_init(&o);
    o.retention_seconds = UINT64_MAX;
    stele_error_t err = {0};
    assert_int_equal(config_check(&o, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "retention_seconds"));
}

/* Sets the uint32 sink field called `key`. */
static void
set_sink_u32(stele_sink_options_t *sink, const char *key, uint32_t value)
{
    static const struct {
        const char *key;
        size_t offset;
    } fields[] = {
        {"wtimeout_ms", offsetof(stele_sink_options_t, wtimeout_ms)},
        {"batch_docs", offsetof(stele_sink_options_t, batch_docs)},
        {"batch_bytes", offsetof(stele_sink_options_t, batch_bytes)},
        {"linger_ms", offsetof(stele_sink_options_t, linger_ms)},
        {"backoff_min_ms", offsetof(stele_sink_options_t, backoff_min_ms)},
        {"backoff_max_ms", offsetof(stele_sink_options_t, backoff_max_ms)},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (strcmp(fields[i].key, key) == 0) {
            memcpy((char *)sink + fields[i].offset, &value, sizeof value);
            return;
        }
    }
    fail_msg("no sink field %s", key);
}

static void
test_config_check_rejects_inconsistent_options(void **state)
{
    (void)state;
    stele_options_t o;
    stele_options_init(&o);
    assert_int_equal(config_check(&o, NULL), 0);
    stele_error_t err = {0};

    o.max_journal_bytes = o.segment_bytes;
    assert_int_equal(config_check(&o, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "max_journal_bytes"));
    stele_options_init(&o);

    o.sync = (stele_sync_t)7;
    assert_int_equal(config_check(&o, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "sync"));
    stele_options_init(&o);

    stele_sink_options_t sinks[2];
    stele_sink_options_init(&sinks[0]);
    stele_sink_options_init(&sinks[1]);
    sinks[0].uri = sinks[1].uri = "mongodb://127.0.0.1";
    o.sinks = sinks;
    o.n_sinks = 2;
    assert_int_equal(config_check(&o, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "two sinks are named default"));
}

/* Modes that let the group or everyone change the journal need allow_unsafe_dir, like a
 * directory found in that state (test_journal_dir_safety). */
static void
test_config_check_refuses_modes_others_could_write_unless_allowed(void **state)
{
    (void)state;
    static const struct {
        const char *knob, *value, *want;
    } rows[] = {
        {"file_mode", "0660", "file_mode 0660 lets the group"},
        {"file_mode", "0602", "file_mode 0602 lets every user"},
        {"dir_mode", "0770", "dir_mode 0770 lets the group"},
        {"dir_mode", "0777", "dir_mode 0777 lets every user"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        stele_options_t o;
        stele_options_init(&o);
        stele_error_t err = {0};
        assert_int_equal(stele_options_set(&o, rows[i].knob, rows[i].value, &err), 0);
        assert_int_equal(config_check(&o, &err), STELE_ECONFIG);
        assert_non_null(strstr(err.message, rows[i].want));
        assert_non_null(strstr(err.hint, "allow_unsafe_dir"));
        assert_int_equal(stele_options_set(&o, "allow_unsafe_dir", "true", &err), 0);
        assert_int_equal(config_check(&o, &err), 0);
    }
    stele_options_t o;
    stele_options_init(&o);
    o.file_mode = 0640;
    o.dir_mode = 0750;
    assert_int_equal(config_check(&o, NULL), 0);
}

/* What stele_open refuses in a sink filled by hand (config_check; the shipper runs the same
 * check): each out-of-range number, named with its sink, value and range. */
static void
test_config_check_rejects_out_of_range_sink_numbers(void **state)
{
    (void)state;
    static const struct {
        const char *key;
        int64_t value;
        const char *fragment;
    } bad[] = {
        {"wtimeout_ms", 2147483648,
         "sink main: invalid wtimeout_ms 2147483648: expected an "
         "integer from 0 to 2147483647"},
        {"wtimeout_ms", UINT32_MAX, "invalid wtimeout_ms 4294967295"},
        {"batch_docs", 0, "sink main: invalid batch_docs 0: expected an integer from 1 to 100000"},
        {"batch_docs", 100001, "invalid batch_docs 100001: expected an integer from 1 to 100000"},
        {"batch_docs", UINT32_MAX, "invalid batch_docs 4294967295"},
        {"batch_bytes", 1023, "invalid batch_bytes 1023: expected a size from 1024 to 48000000"},
        {"batch_bytes", UINT32_MAX, "invalid batch_bytes 4294967295"},
        {"linger_ms", 3600001, "invalid linger_ms 3600001: expected an integer from 0 to 3600000"},
        {"backoff_min_ms", 0, "invalid backoff_min_ms 0: expected an integer from 1 to 3600000"},
        {"backoff_max_ms", UINT32_MAX, "invalid backoff_max_ms 4294967295"},
        {"backoff_max_ms", 10, "backoff_max_ms (10) is below backoff_min_ms (50)"},
        {"w", 51, "sink main: invalid w 51: expected -1 (majority) or 0 to 50"},
        {"w", -2, "invalid w -2"},
        {"journaled", 2, "invalid journaled 2: expected 0 or 1"},
        {"on_destination_change", 2, "invalid on_destination_change 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        stele_sink_options_t sink;
        stele_sink_options_init(&sink);
        sink.name = "main";
        sink.uri = "mongodb://127.0.0.1";
        if (strcmp(bad[i].key, "w") == 0)
            sink.w = (int)bad[i].value;
        else if (strcmp(bad[i].key, "journaled") == 0)
            sink.journaled = (int)bad[i].value;
        else if (strcmp(bad[i].key, "on_destination_change") == 0)
            sink.on_destination_change = (stele_on_destination_change_t)bad[i].value;
        else
            set_sink_u32(&sink, bad[i].key, (uint32_t)bad[i].value);
        stele_options_t o;
        stele_options_init(&o);
        o.sinks = &sink;
        o.n_sinks = 1;
        stele_error_t err = {0};
        if (config_check(&o, &err) != STELE_ECONFIG || !strstr(err.message, bad[i].fragment))
            fail_msg("%s=%lld: \"%s\" lacks \"%s\"", bad[i].key, (long long)bad[i].value,
                     err.message, bad[i].fragment);
    }
}

/* A struct filled by hand with n_sinks but no sinks array: the refusal must say so, not
 * that there are too many sinks. */
static void
test_config_check_names_a_missing_sinks_array(void **state)
{
    (void)state;
    stele_options_t o;
    stele_options_init(&o);
    o.n_sinks = 1;
    stele_error_t err = {0};
    assert_int_equal(config_check(&o, &err), STELE_ECONFIG);
    if (!strstr(err.message, "n_sinks is 1 but sinks is NULL"))
        fail_msg("message: %s", err.message);
    o.n_sinks = STELE_MAX_SINKS + 1;
    assert_int_equal(config_check(&o, &err), STELE_ECONFIG);
    assert_non_null(strstr(err.message, "at most 16 sinks"));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults_match_the_knob_table),
        cmocka_unit_test(test_config_set_parses_units_and_choices),
        cmocka_unit_test(test_config_set_rejects_bad_values_and_changes_nothing),
        cmocka_unit_test(test_config_set_rejects_unknown_knob_with_a_hint),
        cmocka_unit_test(test_config_set_configures_sinks_by_dotted_name),
        cmocka_unit_test_setup_teardown(test_config_load_file_reads_journal_and_sink_sections,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_config_load_file_names_file_and_line_and_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_load_file_never_cuts_a_long_line_in_two, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_config_load_file_reads_indented_lines_as_written,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_load_file_refuses_nul_bytes_and_directories,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_load_file_keeps_the_hint_of_the_refused_line,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_load_file_reports_a_missing_file, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_config_load_file_reads_a_sinks_time_field_indexes_and_ttl, setup, teardown),
        cmocka_unit_test(test_config_refuses_a_bad_time_field_or_index),
        cmocka_unit_test(test_config_load_env_reads_upper_case_knobs),
        cmocka_unit_test(test_config_retention_seconds_stays_within_int64),
        cmocka_unit_test(test_config_check_rejects_inconsistent_options),
        cmocka_unit_test(test_config_check_refuses_modes_others_could_write_unless_allowed),
        cmocka_unit_test(test_config_check_names_a_missing_sinks_array),
        cmocka_unit_test(test_config_check_rejects_out_of_range_sink_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
