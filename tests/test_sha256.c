/*
 * test_sha256.c: the reusable SHA-256 context (journal/sha256.h) against the FIPS 180-2
 * example digests, split updates against one update, and a context reused for many
 * digests giving each the digest a fresh one would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "sha256.h"

/* FIPS 180-2, appendix B.1, and the digest of the empty string. */
static const uint8_t digest_abc[SHA256_BYTES] = {
    0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
    0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
static const uint8_t digest_empty[SHA256_BYTES] = {
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55};

static void
digest_of(sha256_t *s, const char *text, uint8_t out[SHA256_BYTES])
{
    assert_int_equal(sha256_begin(s), 0);
    assert_int_equal(sha256_update(s, text, strlen(text)), 0);
    assert_int_equal(sha256_final(s, out), 0);
}

static void
test_sha256_matches_published_digests(void **state)
{
    (void)state;
    sha256_t s;
    uint8_t out[SHA256_BYTES];
    assert_int_equal(sha256_init(&s), 0);
    digest_of(&s, "abc", out);
    assert_memory_equal(out, digest_abc, SHA256_BYTES);
    digest_of(&s, "", out);
    assert_memory_equal(out, digest_empty, SHA256_BYTES);
    sha256_release(&s);
}

static void
test_sha256_split_updates_equal_one_update(void **state)
{
    (void)state;
    sha256_t s;
    uint8_t out[SHA256_BYTES];
    assert_int_equal(sha256_init(&s), 0);
    assert_int_equal(sha256_begin(&s), 0);
    assert_int_equal(sha256_update(&s, "a", 1), 0);
    assert_int_equal(sha256_update(&s, NULL, 0), 0);
    assert_int_equal(sha256_update(&s, "bc", 2), 0);
    assert_int_equal(sha256_final(&s, out), 0);
    assert_memory_equal(out, digest_abc, SHA256_BYTES);
    sha256_release(&s);
}

/* sha256_begin starts over even after a digest left unfinished. */
static void
test_sha256_begin_forgets_an_unfinished_digest(void **state)
{
    (void)state;
    sha256_t s;
    uint8_t out[SHA256_BYTES];
    assert_int_equal(sha256_init(&s), 0);
    assert_int_equal(sha256_begin(&s), 0);
    assert_int_equal(sha256_update(&s, "left unfinished", 15), 0);
    for (int i = 0; i < 3; i++) {
        digest_of(&s, "abc", out);
        assert_memory_equal(out, digest_abc, SHA256_BYTES);
    }
    sha256_release(&s);
    sha256_release(&s); /* released: a no-op */
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_matches_published_digests),
        cmocka_unit_test(test_sha256_split_updates_equal_one_update),
        cmocka_unit_test(test_sha256_begin_forgets_an_unfinished_digest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
