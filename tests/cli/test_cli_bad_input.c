/*
 * test_cli_bad_input.c: one table, one row per way to hand `stele` bad input, across every
 * command. Each row runs against a journal that already holds three records and asserts
 * the exact exit code, a substring of the message (what is wrong, and where), and that the
 * journal is unchanged afterwards (the output of `stele status --json` and `stele verify`
 * before and after are identical).
 *
 * Arguments starting with '@' are placeholders for paths made per test (see expand_arg).
 */
#include "cli_harness.h"

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

/* Longer than any line `stele insert` accepts with the default max_record_bytes (1 MiB). */
#define HUGE_LINE_BYTES (3u * 1024 * 1024)
#define BINARY_GARBAGE_BYTES 4096
#define DEEP_NESTING_LEVELS 300

typedef enum stdin_kind {
    IN_NONE,   /* /dev/null */
    IN_TEXT,   /* the row's text */
    IN_HUGE,   /* one line of HUGE_LINE_BYTES, then a valid line */
    IN_BINARY, /* random bytes (seeded) */
    IN_DEEP,   /* an object nested DEEP_NESTING_LEVELS deep */
    IN_NUL,    /* a valid object with a NUL byte inside the line */
} stdin_kind_t;

/* What a row does to the journal for its run. */
typedef enum journal_state {
    JOURNAL_AS_IS = 0,
    JOURNAL_READ_ONLY = 1,      /* files 0400, directory 0555 */
    JOURNAL_WORLD_WRITABLE = 2, /* directory 0777 */
    JOURNAL_GROUP_WRITABLE = 3, /* directory 0770 */
} journal_state_t;

typedef struct bad_input_case {
    const char *name;
    const char *args[16]; /* after "stele" */
    stdin_kind_t in;
    const char *text;
    const char *env;   /* one "NAME=value" or NULL */
    int journal_state; /* the journal for the run (then restored): journal_state_t */
    int want_exit;
    const char *want_err; /* substring of stderr */
} bad_input_case_t;

static const bad_input_case_t cases[] = {
    /* ---- insert: events ---- */
    {"malformed json line",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "{\"a\":\n",
     NULL,
     0,
     2,
     "stdin line 1: "},
    {"json array is not an object",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "[1,2]\n",
     NULL,
     0,
     2,
     "stdin line 1: "},
    {"json string is not an object",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "\"x\"\n",
     NULL,
     0,
     2,
     "stdin line 1: "},
    {"json number is not an object",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "42\n",
     NULL,
     0,
     2,
     "stdin line 1: "},
    {"empty line",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "\n{\"a\":1}\n",
     NULL,
     0,
     2,
     "stdin line 1: empty line"},
    {"blank line of spaces",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "  \t \n",
     NULL,
     0,
     2,
     "stdin line 1: empty line"},
    {"huge line",
     {"insert", "-d", "@J"},
     IN_HUGE,
     NULL,
     NULL,
     0,
     2,
     "stdin line 1: line longer than"},
    {"binary garbage", {"insert", "-d", "@J"}, IN_BINARY, NULL, NULL, 0, 2, "stdin line 1: "},
    {"invalid utf-8",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "{\"a\":\"\xff\xfe\"}\n",
     NULL,
     0,
     2,
     "stdin line 1: "},
    {"dollar key", {"insert", "-d", "@J"}, IN_TEXT, "{\"$set\":1}\n", NULL, 0, 2, "stdin line 1: "},
    {"nested dollar key",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "{\"a\":{\"$where\":1}}\n",
     NULL,
     0,
     2,
     "stdin line 1: "},
    {"repeated key",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "{\"actor\":\"alice\",\"actor\":\"mallory\"}\n",
     NULL,
     0,
     2,
     "stdin line 1: duplicate key \"actor\" at actor"},
    {"repeated nested key",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "{\"a\":[{\"k\":1,\"k\":2}]}\n",
     NULL,
     0,
     2,
     "duplicate key \"k\" at a.0.k"},
    {"dotted key",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "{\"ip.v4\":\"10.0.0.1\"}\n",
     NULL,
     0,
     2,
     "stdin line 1: key \"ip.v4\" contains '.'"},
    {"dotted key argument",
     {"insert", "-d", "@J", "{\"a\":{\"b.c\":1}}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     2,
     "argument 1: key \"b.c\" under a contains '.'"},
    {"nul byte in a line", {"insert", "-d", "@J"}, IN_NUL, NULL, NULL, 0, 2, "stdin line 1: "},
    {"trailing garbage after object",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "{\"a\":1} x\n",
     NULL,
     0,
     2,
     "stdin line 1: "},
    {"two objects on one line",
     {"insert", "-d", "@J"},
     IN_TEXT,
     "{\"a\":1}{\"b\":2}\n",
     NULL,
     0,
     2,
     "stdin line 1: "},
    {"nested too deeply", {"insert", "-d", "@J"}, IN_DEEP, NULL, NULL, 0, 2, "stdin line 1: "},
    {"bad event argument",
     {"insert", "-d", "@J", "nope"},
     IN_NONE,
     NULL,
     NULL,
     0,
     2,
     "argument 1: "},
    {"array argument then a good one",
     {"insert", "-d", "@J", "[1]", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     2,
     "argument 1: "},
    {"empty argument",
     {"insert", "-d", "@J", ""},
     IN_NONE,
     NULL,
     NULL,
     0,
     2,
     "argument 1: empty line"},
    /* ---- insert: flags and configuration ---- */
    {"insert unknown flag",
     {"insert", "-d", "@J", "--bogus"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "unknown option '--bogus'"},
    {"insert unknown short flag",
     {"insert", "-d", "@J", "-z"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "unknown option '-z'"},
    {"insert unknown short flag grouped after a long flag",
     {"insert", "-d", "@J", "--quiet", "-zq", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "unknown option '-z'"},
    {"insert value given to a flag that takes none",
     {"insert", "-d", "@J", "--quiet=yes", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "option '--quiet=yes' takes no value"},
    {"insert bad wait level",
     {"insert", "-d", "@J", "--wait", "forever"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--wait 'forever'"},
    {"insert wait without value",
     {"insert", "-d", "@J", "--wait"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "needs a value"},
    {"insert wait shipped without a sink",
     {"insert", "-d", "@J", "--wait", "shipped", "{}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "needs a sink"},
    {"bad knob flag value",
     {"insert", "-d", "@J", "--sync", "sometimes", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "sometimes"},
    {"bad numeric knob flag",
     {"insert", "-d", "@J", "--commit-interval-us", "soon", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "soon"},
    {"bad knob in the environment",
     {"insert", "-d", "@J", "{\"a\":1}"},
     IN_NONE,
     NULL,
     "STELE_SYNC=maybe",
     0,
     1,
     "maybe"},
    {"corrupt config file",
     {"insert", "-d", "@J", "--config", "@BADCONF", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "bad.ini"},
    {"config file with an unknown knob",
     {"insert", "-d", "@J", "--config", "@UNKNOWNCONF", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "frobnicate"},
    {"config file with a sink wtimeout_ms beyond int32",
     {"insert", "-d", "@J", "--config", "@SINKCONF", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "invalid value \"2147483648\" for sink a wtimeout_ms: expected an integer from 0 to "
     "2147483647"},
    {"missing config file",
     {"insert", "-d", "@J", "--config", "@MISSINGCONF", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "missing.ini"},
    {"empty dir flag",
     {"insert", "-d", "", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--dir needs a directory"},
    /* ---- insert: where the journal is ---- */
    {"insert into a non-journal dir",
     {"insert", "-d", "@NOTJ", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     3,
     "not-a-journal"},
    {"insert into a regular file",
     {"insert", "-d", "@FILE", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     3,
     "a-file"},
    {"insert into a read-only journal",
     {"insert", "-d", "@J", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     1,
     3,
     "ermission denied"},
    {"insert into a world-writable journal",
     {"insert", "-d", "@J", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     JOURNAL_WORLD_WRITABLE,
     3,
     "chmod go-w"},
    {"insert into a group-writable journal",
     {"insert", "-d", "@J", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     JOURNAL_GROUP_WRITABLE,
     3,
     "mode 0770: its group can change"},
    {"insert with a group-writable file mode",
     {"insert", "-d", "@J", "--file-mode", "0660", "{\"a\":1}"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "file_mode 0660 lets the group change"},
    {"tail of a world-writable journal",
     {"tail", "-d", "@J"},
     IN_NONE,
     NULL,
     NULL,
     JOURNAL_WORLD_WRITABLE,
     3,
     "allow-unsafe-dir"},
    {"status of a world-writable journal",
     {"status", "-d", "@J"},
     IN_NONE,
     NULL,
     NULL,
     JOURNAL_WORLD_WRITABLE,
     3,
     "every user can change the journal"},
    {"verify of a group-writable journal",
     {"verify", "-d", "@J"},
     IN_NONE,
     NULL,
     NULL,
     JOURNAL_GROUP_WRITABLE,
     3,
     "its group can change the journal"},
    /* ---- tail ---- */
    {"tail unknown flag",
     {"tail", "-d", "@J", "--bogus"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "unknown option '--bogus'"},
    {"tail bad count", {"tail", "-d", "@J", "-n", "ten"}, IN_NONE, NULL, NULL, 0, 1, "-n 'ten'"},
    {"tail unknown short flag grouped after a long value",
     {"tail", "-d", "@J", "--output=pretty", "-zf"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "unknown option '-z'"},
    {"tail negative count", {"tail", "-d", "@J", "-n", "-3"}, IN_NONE, NULL, NULL, 0, 1, "-n '-3'"},
    {"tail bad since",
     {"tail", "-d", "@J", "--since", "someday"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--since 'someday' is not a time"},
    {"tail bad until month",
     {"tail", "-d", "@J", "--until", "2026-13-01T00:00:00Z"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--until '2026-13-01T00:00:00Z' is not a time"},
    {"tail impossible date",
     {"tail", "-d", "@J", "--since", "2026-02-30T00:00:00Z"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "is not a time"},
    {"tail local time past midnight",
     {"tail", "-d", "@J", "--since", "2026-01-01T24:00:00"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "is not a time"},
    {"tail span with ago and a sign",
     {"tail", "-d", "@J", "--until", "-1h ago"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--until '-1h ago' is not a time"},
    {"tail unknown relative unit",
     {"tail", "-d", "@J", "--since", "10y"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--since '10y'"},
    {"tail until before since",
     {"tail", "-d", "@J", "--since", "2026-01-02T00:00:00Z", "--until", "2026-01-01T00:00:00Z"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--until is before --since"},
    {"tail from and since conflict",
     {"tail", "-d", "@J", "--from", "2", "--since", "1h"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--from and --since"},
    {"tail from zero",
     {"tail", "-d", "@J", "--from", "0"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--from '0'"},
    {"tail where without operator",
     {"tail", "-d", "@J", "--where", "actor"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--where 'actor' has no operator"},
    {"tail where without path",
     {"tail", "-d", "@J", "--where", "=x"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--where '=x' has no PATH"},
    {"tail where unknown operator",
     {"tail", "-d", "@J", "--where", "a=~x"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--where 'a=~x' has the unknown operator '=~'"},
    {"tail where bad regular expression",
     {"tail", "-d", "@J", "--where", "a~("},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--where 'a~(': '(' is not a regular expression"},
    {"tail where text for a number",
     {"tail", "-d", "@J", "--where", "code>high"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "'code>high': < <= > >= compare numbers"},
    {"tail where bad time",
     {"tail", "-d", "@J", "--where", "ts>someday"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "'ts>someday': 'someday' is not a time"},
    {"tail where empty key",
     {"tail", "-d", "@J", "--where", "a..b=1"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "'a..b=1' has an empty key"},
    {"tail bad output format",
     {"tail", "-d", "@J", "--output", "xml"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--output 'xml'"},
    {"tail bad mongo uri",
     {"tail", "-d", "@J", "--mongo", "http://127.0.0.1"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "is not a mongodb:// URI"},
    {"tail mongo unreachable server",
     {"tail", "-d", "@J", "--mongo", "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=200"},
     IN_NONE,
     NULL,
     NULL,
     0,
     3,
     "127.0.0.1:1/audit.events"},
    {"tail mongo without a source on a non-journal dir",
     {"tail", "-d", "@NOTJ", "--mongo", "mongodb://127.0.0.1:1"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--mongo needs --source NAME"},
    {"tail source without mongo",
     {"tail", "-d", "@J", "--source", "web-1"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--source needs --mongo"},
    {"tail mongo invalid uri options",
     {"tail", "-d", "@J", "--mongo", "mongodb://127.0.0.1:1/?replicaSet="},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "invalid mongodb uri"},
    {"tail stray argument",
     {"tail", "-d", "@J", "extra"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "unexpected argument 'extra'"},
    {"tail missing config file",
     {"tail", "-d", "@J", "--config", "@MISSINGCONF"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "missing.ini"},
    {"tail bad knob flag value",
     {"tail", "-d", "@J", "--sync", "sometimes"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "sometimes"},
    {"tail missing dir", {"tail", "-d", "@MISSING"}, IN_NONE, NULL, NULL, 0, 3, "nope-missing"},
    {"tail non-journal dir", {"tail", "-d", "@NOTJ"}, IN_NONE, NULL, NULL, 0, 3, "not-a-journal"},
    /* ---- status ---- */
    {"status conflicting formats",
     {"status", "-d", "@J", "--json", "--prometheus"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--json and --prometheus exclude each other"},
    {"status unknown flag",
     {"status", "-d", "@J", "--yaml"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "unknown option '--yaml'"},
    {"status bad knob in the environment",
     {"status", "-d", "@J", "--json"},
     IN_NONE,
     NULL,
     "STELE_SYNC=maybe",
     0,
     1,
     "maybe"},
    {"status corrupt config file",
     {"status", "-d", "@J", "--config", "@BADCONF"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "bad.ini"},
    {"status missing dir", {"status", "-d", "@MISSING"}, IN_NONE, NULL, NULL, 0, 3, "nope-missing"},
    {"status non-journal dir",
     {"status", "-d", "@NOTJ"},
     IN_NONE,
     NULL,
     NULL,
     0,
     3,
     "not-a-journal"},
    /* ---- verify ---- */
    {"verify range backwards",
     {"verify", "-d", "@J", "--from", "5", "--to", "2"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--to 2 is before --from 5"},
    {"verify bad seq",
     {"verify", "-d", "@J", "--to", "last"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--to 'last'"},
    {"verify bad mongo uri",
     {"verify", "-d", "@J", "--mongo", "localhost:27017"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "is not a mongodb:// URI"},
    {"verify config file with an unknown knob",
     {"verify", "-d", "@J", "--config", "@UNKNOWNCONF"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "frobnicate"},
    {"verify missing dir", {"verify", "-d", "@MISSING"}, IN_NONE, NULL, NULL, 0, 3, "nope-missing"},
    {"verify non-journal dir",
     {"verify", "-d", "@NOTJ"},
     IN_NONE,
     NULL,
     NULL,
     0,
     3,
     "not-a-journal"},
    /* ---- ship ---- */
    {"ship without uri",
     {"ship", "-d", "@J", "--once"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "--mongo URI is required"},
    {"ship bad uri",
     {"ship", "-d", "@J", "--mongo", "mongodb://"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "is not a mongodb:// URI"},
    {"ship dead letters of a missing dir",
     {"ship", "-d", "@MISSING", "--mongo", "mongodb://127.0.0.1:1", "--dead-letters"},
     IN_NONE,
     NULL,
     NULL,
     0,
     3,
     "nope-missing"},
    {"ship re-ship dead letters of a non-journal dir",
     {"ship", "-d", "@NOTJ", "--mongo", "mongodb://127.0.0.1:1", "--reship-dead-letters"},
     IN_NONE,
     NULL,
     NULL,
     0,
     3,
     "not-a-journal"},
    {"ship discard a dead letter of a missing dir",
     {"ship", "-d", "@MISSING", "--mongo", "mongodb://127.0.0.1:1", "--discard-dead-letter", "2"},
     IN_NONE,
     NULL,
     NULL,
     0,
     3,
     "nope-missing"},
    /* ---- the command itself ---- */
    {"unknown command", {"frobnicate"}, IN_NONE, NULL, NULL, 0, 1, "unknown command 'frobnicate'"},
    {"no command", {NULL}, IN_NONE, NULL, NULL, 0, 1, "usage: stele"},
    {"help for an unknown command",
     {"help", "nothing"},
     IN_NONE,
     NULL,
     NULL,
     0,
     1,
     "unknown command 'nothing'"},
};

typedef struct bad_fixture {
    char *root;
    char journal[4096], missing[4096], not_journal[4096], file[4096];
    char bad_conf[4096], unknown_conf[4096], missing_conf[4096], sink_conf[4096];
} bad_fixture_t;

static void
write_file(const char *path, const char *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
}

static const char *
expand_arg(const bad_fixture_t *f, const char *arg)
{
    if (arg[0] != '@')
        return arg;
    if (strcmp(arg, "@J") == 0)
        return f->journal;
    if (strcmp(arg, "@MISSING") == 0)
        return f->missing;
    if (strcmp(arg, "@NOTJ") == 0)
        return f->not_journal;
    if (strcmp(arg, "@FILE") == 0)
        return f->file;
    if (strcmp(arg, "@BADCONF") == 0)
        return f->bad_conf;
    if (strcmp(arg, "@UNKNOWNCONF") == 0)
        return f->unknown_conf;
    if (strcmp(arg, "@MISSINGCONF") == 0)
        return f->missing_conf;
    if (strcmp(arg, "@SINKCONF") == 0)
        return f->sink_conf;
    fail_msg("unknown placeholder %s", arg);
    return NULL;
}

static void
fixture_make(bad_fixture_t *f)
{
    f->root = harness_mkdtemp();
    snprintf(f->journal, sizeof f->journal, "%s/journal", f->root);
    snprintf(f->missing, sizeof f->missing, "%s/nope-missing", f->root);
    snprintf(f->not_journal, sizeof f->not_journal, "%s/not-a-journal", f->root);
    snprintf(f->file, sizeof f->file, "%s/a-file", f->root);
    snprintf(f->bad_conf, sizeof f->bad_conf, "%s/bad.ini", f->root);
    snprintf(f->unknown_conf, sizeof f->unknown_conf, "%s/unknown.ini", f->root);
    snprintf(f->missing_conf, sizeof f->missing_conf, "%s/missing.ini", f->root);
    snprintf(f->sink_conf, sizeof f->sink_conf, "%s/sink.ini", f->root);
    assert_int_equal(mkdir(f->not_journal, 0700), 0);
    char notes[4200];
    snprintf(notes, sizeof notes, "%s/notes.txt", f->not_journal);
    write_file(notes, "not a journal\n", 14);
    static const char bad_conf[] = "[journal\nsync = = always\n\x01\x02\xff garbage\n";
    write_file(f->file, "plain file\n", 11);
    write_file(f->bad_conf, bad_conf, sizeof bad_conf - 1);
    write_file(f->unknown_conf, "frobnicate = 1\n", 15);
    static const char sink_conf[] = "[sink a]\nuri = mongodb://127.0.0.1:1/audit\n"
                                    "wtimeout_ms = 2147483648\n";
    write_file(f->sink_conf, sink_conf, sizeof sink_conf - 1);

    harness_run_t seed = {.args = {"insert", "-d", f->journal},
                          .stdin_data = "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n"};
    harness_result_t r;
    harness_exec(&seed, &r);
    if (r.exit_code != 0)
        fail_msg("could not seed the journal: %s", r.err);
    harness_result_free(&r);
}

/* Builds the row's stdin; returns an owned buffer (or NULL for /dev/null). */
static char *
make_stdin(const bad_input_case_t *c, unsigned seed, size_t *len_out)
{
    char *buf = NULL;
    size_t len = 0;
    switch (c->in) {
    case IN_NONE:
        break;
    case IN_TEXT:
        len = strlen(c->text);
        buf = malloc(len + 1);
        memcpy(buf, c->text, len + 1);
        break;
    case IN_HUGE:
        len = HUGE_LINE_BYTES + 1 + 8;
        buf = malloc(len + 1);
        memset(buf, 'x', HUGE_LINE_BYTES);
        memcpy(buf + HUGE_LINE_BYTES, "\n{\"a\":1}\n", 10);
        break;
    case IN_BINARY:
        len = BINARY_GARBAGE_BYTES;
        buf = malloc(len + 1);
        srand(seed);
        for (size_t i = 0; i < len; i++)
            buf[i] = (char)(rand() & 0xff);
        buf[0] = '\x80'; /* never a valid first byte, whatever the seed */
        break;
    case IN_DEEP:
        len = DEEP_NESTING_LEVELS * 6 + DEEP_NESTING_LEVELS + 4;
        buf = calloc(1, len + 16);
        for (int i = 0; i < DEEP_NESTING_LEVELS; i++)
            strcat(buf, "{\"a\":");
        strcat(buf, "1");
        for (int i = 0; i < DEEP_NESTING_LEVELS; i++)
            strcat(buf, "}");
        strcat(buf, "\n");
        len = strlen(buf);
        break;
    case IN_NUL:
        len = 12;
        buf = malloc(len + 1);
        memcpy(buf, "{\"a\":\"b\0c\"}\n", 13);
        break;
    }
    assert_true(c->in == IN_NONE || buf != NULL);
    *len_out = len;
    return buf;
}

static void
set_journal_writable(const char *dir, int writable)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "chmod -R %s '%s'", writable ? "u+w" : "a-w", dir);
    assert_int_equal(system(cmd), 0);
}

/* Puts the journal in the row's state (is_for_run) or back. */
static void
set_journal_state(const char *dir, journal_state_t state, int is_for_run)
{
    if (state == JOURNAL_READ_ONLY)
        set_journal_writable(dir, !is_for_run);
    else if (state != JOURNAL_AS_IS)
        assert_int_equal(chmod(dir, !is_for_run                       ? 0700
                                    : state == JOURNAL_WORLD_WRITABLE ? 0777
                                                                      : 0770),
                         0);
}

/* Runs one row; prints what went wrong and returns 0 when the row fails. */
static int
run_case(const bad_fixture_t *f, const bad_input_case_t *c, unsigned seed)
{
    harness_run_t run = {.cwd = f->root};
    for (int i = 0; i < 15 && c->args[i] != NULL; i++)
        run.args[i] = expand_arg(f, c->args[i]);
    size_t in_len = 0;
    char *in = make_stdin(c, seed, &in_len);
    run.stdin_data = in;
    run.stdin_len = in_len;
    run.env[0] = c->env;
    run.drop_dac_override = c->journal_state == JOURNAL_READ_ONLY;

    char *before = harness_journal_snapshot(f->journal);
    set_journal_state(f->journal, (journal_state_t)c->journal_state, 1);
    harness_result_t r;
    harness_exec(&run, &r);
    set_journal_state(f->journal, (journal_state_t)c->journal_state, 0);
    char *after = harness_journal_snapshot(f->journal);

    int is_ok = 1;
    if (r.exit_code != c->want_exit || strstr(r.err, c->want_err) == NULL) {
        printf("FAIL %s: exit %d (want %d), stderr:\n%s(want a mention of \"%s\")\n", c->name,
               r.exit_code, c->want_exit, r.err, c->want_err);
        is_ok = 0;
    }
    if (strcmp(before, after) != 0) {
        printf("FAIL %s changed the journal:\nbefore: %s\nafter:  %s\n", c->name, before, after);
        is_ok = 0;
    }
    if (c->args[0] != NULL && strcmp(c->args[0], "insert") == 0 && r.out[0] != '\0') {
        printf("FAIL %s printed seqs: %s\n", c->name, r.out); /* a printed seq is a promise */
        is_ok = 0;
    }
    if (is_ok)
        printf("ok   %-40s exit %d: %.*s\n", c->name, r.exit_code, (int)strcspn(r.err, "\n"),
               r.err);
    harness_result_free(&r);
    free(before);
    free(after);
    free(in);
    return is_ok;
}

static void
test_every_bad_input_gets_its_exit_code_and_message_and_changes_nothing(void **state)
{
    (void)state;
    assert_true(sizeof cases / sizeof cases[0] >= 40);
    unsigned seed = harness_seed();
    bad_fixture_t f;
    fixture_make(&f);
    char *start = harness_journal_snapshot(f.journal);
    assert_non_null(strstr(start, "verify exit 0"));
    size_t n_failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        n_failed += !run_case(&f, &cases[i], seed);
    free(start);
    harness_rmtree(f.root);
    free(f.root);
    if (n_failed > 0)
        fail_msg("%zu of %zu bad-input rows failed (see FAIL lines above)", n_failed,
                 sizeof cases / sizeof cases[0]);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_bad_input_gets_its_exit_code_and_message_and_changes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
