/*
 * test_json_python.c: stele's JSON reader (engine/json_bson.c) against a reader no one here
 * wrote, Python's json module. tests/support/json_python_cases.py writes thousands of events by
 * hand from random values (random whitespace, escapes, surrogate pairs, numbers in every
 * JSON form), a third of them with one fault, and says for each what Python reads in it:
 * a canonical form of the value, or the fault. Each event goes through validate_json; an
 * accepted one's BSON is put in the same canonical form (types included: int32, int64 and
 * double are told apart, strings and keys compared byte for byte) and must equal Python's;
 * a refused one must carry the code of Python's fault.
 *
 * Seeded (STELE_TEST_SEED repeats a run); skipped when python3 is not on the PATH.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_util.h"
#include "validate.h"

/* Events per run: a few thousand, as many as take a second or two. */
#define PYTHON_EVENTS 4000
/* Longest line the script prints (hex of an event, then its canonical form). */
#define PYTHON_LINE_BYTES (64 * 1024)

typedef struct canon {
    char *s;
    size_t len, cap;
} canon_t;

static void canon_add(canon_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
canon_add(canon_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    if (c->len + (size_t)n + 1 > c->cap) {
        c->cap = (c->len + (size_t)n + 1) * 2;
        c->s = realloc(c->s, c->cap);
        assert_non_null(c->s);
    }
    va_start(ap, fmt);
    vsnprintf(c->s + c->len, c->cap - c->len, fmt, ap);
    va_end(ap);
    c->len += (size_t)n;
}

static void
canon_hex(canon_t *c, const void *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        canon_add(c, "%02x", ((const unsigned char *)bytes)[i]);
}

static void canon_document(canon_t *c, bson_iter_t *it, int is_array);

static void
canon_value(canon_t *c, bson_iter_t *it)
{
    bson_iter_t child;
    uint32_t len;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        assert_true(bson_iter_recurse(it, &child));
        canon_document(c, &child, bson_iter_type(it) == BSON_TYPE_ARRAY);
        break;
    case BSON_TYPE_UTF8: {
        const char *s = bson_iter_utf8(it, &len);
        canon_add(c, "s");
        canon_hex(c, s, len);
        break;
    }
    case BSON_TYPE_INT32:
        canon_add(c, "i32:%d", bson_iter_int32(it));
        break;
    case BSON_TYPE_INT64:
        canon_add(c, "i64:%lld", (long long)bson_iter_int64(it));
        break;
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        bits = BSON_UINT64_TO_LE(bits);
        canon_add(c, "d");
        canon_hex(c, &bits, sizeof bits);
        break;
    }
    case BSON_TYPE_BOOL:
        canon_add(c, "%s", bson_iter_bool(it) ? "t" : "f");
        break;
    case BSON_TYPE_NULL:
        canon_add(c, "n");
        break;
    default:
        fail_msg("unexpected bson type 0x%02x", bson_iter_type(it));
    }
}

static void
canon_document(canon_t *c, bson_iter_t *it, int is_array)
{
    canon_add(c, "%s", is_array ? "[" : "{");
    for (int n = 0; bson_iter_next(it); n++) {
        if (n)
            canon_add(c, ",");
        if (!is_array) {
            canon_hex(c, bson_iter_key(it), bson_iter_key_len(it));
            canon_add(c, ":");
        }
        canon_value(c, it);
    }
    canon_add(c, "%s", is_array ? "]" : "}");
}

/* The hex of an event back into its bytes; returns the length. */
static size_t
unhex(const char *hex, size_t hex_len, char *out)
{
    for (size_t i = 0; i + 1 < hex_len; i += 2) {
        unsigned byte;
        assert_int_equal(sscanf(hex + i, "%2x", &byte), 1);
        out[i / 2] = (char)byte;
    }
    return hex_len / 2;
}

/* One line of the script: the event through validate_json, against Python's verdict. */
static void
check_line(char *line, char *event, canon_t *c)
{
    line[strcspn(line, "\n")] = '\0';
    char *verdict = strchr(line, ' ');
    assert_non_null(verdict);
    *verdict++ = '\0';
    char *detail = strchr(verdict, ' ');
    assert_non_null(detail);
    *detail++ = '\0';
    size_t len = unhex(line, strlen(line), event);
    static const validate_limits_t lim = {.max_record_bytes = 1 << 20, .max_depth = 100};
    validate_buf_t buf;
    validate_buf_init(&buf);
    stele_error_t err = {0};
    int rc = validate_json(event, len, &lim, &buf, &err);
    if (strcmp(verdict, "ok") == 0) {
        if (rc != 0)
            fail_msg("python reads %.*s, stele refuses it: %s", (int)len, event, err.message);
        bson_t doc;
        bson_iter_t it;
        assert_true(bson_init_static(&doc, buf.data, buf.len) && bson_iter_init(&it, &doc));
        c->len = 0;
        canon_document(c, &it, 0);
        if (strcmp(c->s, detail) != 0)
            fail_msg("%.*s:\n  python %s\n  stele  %s", (int)len, event, detail, c->s);
    } else if (rc == 0 || strcmp(stele_errname(rc), detail) != 0) {
        fail_msg("%.*s: python finds %s, stele says %s %s", (int)len, event, detail,
                 stele_errname(rc), err.message);
    }
    validate_buf_free(&buf);
}

static void
test_json_reader_reads_what_python_reads(void **state)
{
    (void)state;
    if (system("python3 -c pass >/dev/null 2>&1") != 0)
        skip();
    uint64_t seed = test_seed("test_json_reader_reads_what_python_reads");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "python3 '%s' --seed %llu --count %d", STELE_JSON_PYTHON_SCRIPT,
             (unsigned long long)(seed % 1000000007u), PYTHON_EVENTS);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *line = malloc(PYTHON_LINE_BYTES), *event = malloc(PYTHON_LINE_BYTES);
    canon_t c = {0};
    assert_true(line && event);
    int n = 0, n_ok = 0;
    while (fgets(line, PYTHON_LINE_BYTES, p)) {
        n_ok += strstr(line, " ok ") != NULL;
        check_line(line, event, &c);
        n++;
    }
    assert_int_equal(pclose(p), 0);
    assert_int_equal(n, PYTHON_EVENTS);
    assert_true(n_ok > PYTHON_EVENTS / 2 && n_ok < PYTHON_EVENTS); /* both kinds, many */
    free(c.s);
    free(line);
    free(event);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_reader_reads_what_python_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
