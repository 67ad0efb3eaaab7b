/*
 * test_checkpoint.c: journal/checkpoint.c, C2SP tlog-checkpoint bodies. Format and parse
 * round trips (with and without extension lines, the empty tree, the largest size), a
 * checkpoint through a signed note and back, and one case per strict-parsing rule: each
 * refused with its message and *out untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "note.h"

/* The root of the example tree of FORMAT.md (leaves "a", "b", "c"). */
static const char root64[] = "NmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=";
static const uint8_t root_bytes[32] = {
    0x36, 0x64, 0x2e, 0x73, 0xc2, 0x54, 0x0a, 0xb1, 0x21, 0xe3, 0xa6, 0xbf, 0x95, 0x45, 0xb0, 0xa2,
    0x49, 0x82, 0xcd, 0x83, 0x0e, 0xb1, 0x3d, 0x3c, 0xd1, 0x9d, 0xe3, 0xce, 0x6c, 0x02, 0x1e, 0xc1};

static checkpoint_t
example(void)
{
    checkpoint_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.origin, sizeof c.origin, "stele/host-a");
    c.size = 3;
    memcpy(c.root, root_bytes, 32);
    return c;
}

static void
test_checkpoint_formats_the_c2sp_text(void **state)
{
    (void)state;
    checkpoint_t c = example();
    char text[CHECKPOINT_BASE_MAX_BYTES + 64];
    size_t len = 0;
    assert_int_equal(checkpoint_format(&c, text, sizeof text, &len, NULL), 0);
    char want[128];
    snprintf(want, sizeof want, "stele/host-a\n3\n%s\n", root64);
    assert_string_equal(text, want);
    assert_int_equal(len, strlen(want));
    checkpoint_t back;
    assert_int_equal(checkpoint_parse(text, len, &back, NULL), 0);
    assert_string_equal(back.origin, "stele/host-a");
    assert_int_equal(back.size, 3);
    assert_memory_equal(back.root, root_bytes, 32);
    assert_null(back.extensions);
    assert_int_equal(back.extensions_len, 0);
    /* Extension lines pass through, and point into the parsed text. */
    c.extensions = "first-seq 1\ntime 1700000000\n";
    c.extensions_len = strlen(c.extensions);
    c.size = UINT64_MAX;
    assert_int_equal(checkpoint_format(&c, text, sizeof text, &len, NULL), 0);
    snprintf(want, sizeof want, "stele/host-a\n18446744073709551615\n%s\n%s", root64, c.extensions);
    assert_string_equal(text, want);
    assert_int_equal(checkpoint_parse(text, len, &back, NULL), 0);
    assert_int_equal(back.size, UINT64_MAX);
    assert_ptr_equal(back.extensions, text + len - c.extensions_len);
    assert_int_equal(back.extensions_len, c.extensions_len);
    /* The empty tree is size 0 with the empty tree's hash. */
    c = example();
    c.size = 0;
    merkle_empty_root(c.root);
    assert_int_equal(checkpoint_format(&c, text, sizeof text, &len, NULL), 0);
    assert_string_equal(text, "stele/host-a\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n");
    assert_int_equal(checkpoint_parse(text, len, &back, NULL), 0);
    assert_int_equal(back.size, 0);
}

static void
test_checkpoint_travels_in_a_signed_note(void **state)
{
    (void)state;
    note_signer_t s;
    assert_int_equal(note_keygen("stele/host-a", &s, NULL), 0);
    checkpoint_t c = example();
    char text[CHECKPOINT_BASE_MAX_BYTES + 1];
    size_t len = 0;
    assert_int_equal(checkpoint_format(&c, text, sizeof text, &len, NULL), 0);
    char *note = NULL;
    size_t note_len = 0;
    assert_int_equal(note_sign(&s, text, len, &note, &note_len, NULL), 0);
    note_opened_t o;
    assert_int_equal(note_open(note, note_len, &s.verifier, 1, &o, NULL), 0);
    checkpoint_t back;
    assert_int_equal(checkpoint_parse(note, o.text_len, &back, NULL), 0);
    assert_int_equal(back.size, 3);
    assert_memory_equal(back.root, c.root, 32);
    free(note);
    note_signer_wipe(&s);
}

static void
expect_parse_fails(const char *text, const char *message)
{
    stele_error_t err = {0};
    checkpoint_t c, untouched;
    memset(&c, 0x44, sizeof c);
    untouched = c;
    int rc = checkpoint_parse(text, strlen(text), &c, &err);
    if (rc != STELE_ECORRUPT || !strstr(err.message, message))
        fail_msg("checkpoint \"%s\": rc %d \"%s\", want \"%s\"", text, rc, err.message, message);
    assert_non_null(strstr(err.message, "checkpoint does not parse: "));
    assert_memory_equal(&c, &untouched, sizeof c);
}

static void
test_checkpoint_parse_is_strict(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "o\n0\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n",
        "o with spaces+plus\n10\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n",
        "o\n1\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\next\n",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        checkpoint_t c;
        assert_int_equal(checkpoint_parse(ok[i], strlen(ok[i]), &c, NULL), 0);
    }
    static const struct {
        const char *text, *message;
    } bad[] = {
        {"", "does not end with a newline"},
        {"o\n3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=", "does not end with a newline"},
        {"o\n3\n", "fewer than three lines"},
        {"o\n", "fewer than three lines"},
        {"\n3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "origin line is 0 bytes"},
        {"o\n03\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "size line"},
        {"o\n00\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "size line"},
        {"o\n-1\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "size line"},
        {"o\n+1\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "size line"},
        {"o\n 1\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "size line"},
        {"o\n1 \nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "size line"},
        {"o\n\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "size line"},
        {"o\n0x10\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "size line"},
        {"o\n1e3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "size line"},
        {"o\n18446744073709551616\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "size line"},
        {"o\n99999999999999999999\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "size line"},
        {"o\n3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE\n", "root line"},
        {"o\n3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsF=\n", "root line"}, /* stray bits */
        {"o\n3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=A\n", "root line"},
        {"o\n3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwC\n", "root line"},     /* 30 bytes */
        {"o\n3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsEA\n", "root line"}, /* 33 bytes */
        {"o\n3\nNmQuc8JUCrEh46a_lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "root line"}, /* URL alphabet */
        {"o\n3\n\n", "root line"},
        {"o\n3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n\n", "extension line 1 is empty"},
        {"o\n3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\na\n\nb\n",
         "extension line 2 is empty"},
        {"o\t\n3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "byte 1 is not UTF-8"},
        {"o\xff\n3\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\n", "byte 1 is not UTF-8"},
        {"o\r\n3\r\nNmQuc8JUCrEh46a/lUWwokmCzYMOsT080Z3jzmwCHsE=\r\n", "control character"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_parse_fails(bad[i].text, bad[i].message);
    char text[512];
    char origin[CHECKPOINT_ORIGIN_MAX_BYTES + 2];
    memset(origin, 'o', sizeof origin);
    origin[CHECKPOINT_ORIGIN_MAX_BYTES + 1] = '\0';
    snprintf(text, sizeof text, "%s\n3\n%s\n", origin, root64);
    expect_parse_fails(text, "origin line is 256 bytes; it must be 1 to 255");
    origin[CHECKPOINT_ORIGIN_MAX_BYTES] = '\0';
    snprintf(text, sizeof text, "%s\n3\n%s\n", origin, root64);
    checkpoint_t c;
    assert_int_equal(checkpoint_parse(text, strlen(text), &c, NULL), 0);
    assert_int_equal(strlen(c.origin), CHECKPOINT_ORIGIN_MAX_BYTES);
}

static void
expect_format_fails(const checkpoint_t *c, size_t cap, const char *message)
{
    char text[CHECKPOINT_BASE_MAX_BYTES + 64];
    size_t len = 99;
    stele_error_t err = {0};
    assert_true(cap <= sizeof text);
    int rc = checkpoint_format(c, text, cap, &len, &err);
    if (rc != STELE_EINVAL || !strstr(err.message, message))
        fail_msg("format: rc %d \"%s\", want \"%s\"", rc, err.message, message);
    assert_int_equal(len, 99);
}

static void
test_checkpoint_format_refuses_what_would_not_parse(void **state)
{
    (void)state;
    checkpoint_t c = example();
    c.origin[0] = '\0';
    expect_format_fails(&c, 200, "origin must be 1 to 255 bytes");
    c = example();
    snprintf(c.origin, sizeof c.origin, "two\nlines");
    expect_format_fails(&c, 200, "origin must be");
    snprintf(c.origin, sizeof c.origin, "tab\there");
    expect_format_fails(&c, 200, "origin must be");
    snprintf(c.origin, sizeof c.origin, "bad \xff");
    expect_format_fails(&c, 200, "origin must be");
    c = example();
    c.extensions = "no newline";
    c.extensions_len = strlen(c.extensions);
    expect_format_fails(&c, 200, "extension line 1 is empty, unterminated or not text");
    c.extensions = "one\n\n";
    c.extensions_len = strlen(c.extensions);
    expect_format_fails(&c, 200, "extension line 2");
    c.extensions = "ctrl\x01\n";
    c.extensions_len = strlen(c.extensions);
    expect_format_fails(&c, 200, "not text");
    c = example();
    expect_format_fails(&c, 60, "does not fit 60 bytes"); /* 12 + 1 + 1 + 1 + 44 + 1 = 60 */
    char text[64];
    size_t len = 0;
    assert_int_equal(checkpoint_format(&c, text, 61, &len, NULL), 0);
    assert_int_equal(len, 60);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_formats_the_c2sp_text),
        cmocka_unit_test(test_checkpoint_travels_in_a_signed_note),
        cmocka_unit_test(test_checkpoint_parse_is_strict),
        cmocka_unit_test(test_checkpoint_format_refuses_what_would_not_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
