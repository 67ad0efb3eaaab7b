/*
 * test_base64.c: journal/base64.c. The RFC 4648 vectors, round trips across the decoder's
 * chunk size, and every way a text is refused: one byte string has exactly one accepted
 * text (wrong length, padding inside, stray bits under the padding, whitespace, the URL
 * alphabet, too little room).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "base64.h"

static void
test_base64_rfc4648_vectors(void **state)
{
    (void)state;
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                        "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        char text[16];
        uint8_t back[16];
        size_t n = strlen(plain[i]);
        assert_int_equal(base64_encode((const uint8_t *)plain[i], n, text), strlen(coded[i]));
        assert_string_equal(text, coded[i]);
        assert_int_equal(BASE64_ENCODED_LEN(n), strlen(coded[i]));
        assert_int_equal(base64_decode(coded[i], strlen(coded[i]), back, sizeof back), (long)n);
        assert_memory_equal(back, plain[i], n);
    }
}

static void
test_base64_round_trips_every_length(void **state)
{
    (void)state;
    static uint8_t data[3000], back[3000];
    static char text[BASE64_ENCODED_LEN(3000) + 1];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 131 + 7);
    for (size_t n = 0; n <= sizeof data; n += n < 400 ? 1 : 97) {
        size_t len = base64_encode(data, n, text);
        assert_int_equal(len, BASE64_ENCODED_LEN(n));
        assert_int_equal(text[len], '\0');
        assert_int_equal(base64_decode(text, len, back, n), (long)n);
        assert_memory_equal(back, data, n);
        if (n > 0) /* one byte less room is refused */
            assert_int_equal(base64_decode(text, len, back, n - 1), -1);
    }
}

static void
test_base64_refuses_every_other_text(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "Zg=",      /* not a multiple of 4 */
        "Zg",       /* unpadded */
        "Zh==",     /* stray bits under the padding: "Zg==" is the one text of "f" */
        "Zm9=",     /* likewise for two bytes */
        "Z===",     /* three padding characters */
        "====",     /* padding only */
        "Zg==Zg==", /* padding in the middle */
        "Zm=v",     /* padding before data */
        " Zg=",     /* whitespace */
        "Zg\n=",    /* a newline */
        "Zm9v\n",   /* a trailing newline */
        "Zm-v",     /* URL alphabet */
        "Zm_v",     /* URL alphabet */
        "Zm9\x80",  /* not ASCII */
    };
    uint8_t out[16];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (base64_decode(bad[i], strlen(bad[i]), out, sizeof out) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
    /* A NUL inside the text is not base64 either. */
    assert_int_equal(base64_decode("Zm\0v", 4, out, sizeof out), -1);
    /* Stray bits in a long text's last chunk, and padding inside an earlier chunk. */
    static uint8_t data[1000];
    static char text[BASE64_ENCODED_LEN(1000) + 1];
    static uint8_t back[1000];
    size_t len = base64_encode(data, 1000, text); /* 1000 = 3 * 333 + 1: "AA==" at the end */
    assert_int_equal(base64_decode(text, len, back, sizeof back), 1000);
    text[len - 3] = 'B';
    assert_int_equal(base64_decode(text, len, back, sizeof back), -1);
    text[len - 3] = 'A';
    text[100] = '=';
    assert_int_equal(base64_decode(text, len, back, sizeof back), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64_rfc4648_vectors),
        cmocka_unit_test(test_base64_round_trips_every_length),
        cmocka_unit_test(test_base64_refuses_every_other_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
