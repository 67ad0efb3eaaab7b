/*
 * test_error.c: the error codes of <stele.h> (engine/error.c): every code has its own name
 * and text, -errno codes are described by the C library, and the helpers fill
 * stele_error_t the way every module relies on.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "error.h"

static const int all_codes[] = {
#define TEST_X_CODE(name, value, text) value,
    STELE_ERROR_LIST(TEST_X_CODE)
#undef TEST_X_CODE
};
#define N_CODES (sizeof all_codes / sizeof all_codes[0])

static void
test_error_every_code_has_a_distinct_name_and_text(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CODES; i++) {
        const char *name = stele_errname(all_codes[i]);
        const char *text = stele_strerror(all_codes[i]);
        assert_non_null(strstr(name, "STELE_"));
        assert_true(strlen(text) > 0);
        assert_string_not_equal(text, "unknown error");
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(all_codes[i], all_codes[j]);
            assert_string_not_equal(name, stele_errname(all_codes[j]));
            assert_string_not_equal(text, stele_strerror(all_codes[j]));
        }
    }
}

static void
test_error_stele_codes_stay_outside_the_errno_range(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CODES; i++)
        assert_true(all_codes[i] == 0 || all_codes[i] <= -1000);
}

static void
test_error_errno_codes_are_named_by_the_c_library(void **state)
{
    (void)state;
    assert_string_equal(stele_errname(-EIO), "EIO");
    assert_string_equal(stele_strerror(-EIO), "Input/output error");
    assert_string_equal(stele_errname(-ENOSPC), "ENOSPC");
    assert_string_equal(stele_strerror(-ENOSPC), strerror(ENOSPC));
}

static void
test_error_unknown_codes_get_static_text(void **state)
{
    (void)state;
    assert_string_equal(stele_strerror(-999), "unknown error");
    assert_string_equal(stele_strerror(12345), "unknown error");
    assert_string_equal(stele_errname(-1999), "STELE_EUNKNOWN");
}

static void
test_error_set_fills_code_and_message_and_clears_the_hint(void **state)
{
    (void)state;
    stele_error_t err;
    memset(&err, 'x', sizeof err);
    int rc = error_set(&err, STELE_ECORRUPT, "bad frame in %s at %d", "000000000001.seg", 64);
    assert_int_equal(rc, STELE_ECORRUPT);
    assert_int_equal(err.code, STELE_ECORRUPT);
    assert_string_equal(err.message, "bad frame in 000000000001.seg at 64");
    assert_string_equal(err.hint, "");
    error_set_hint(&err, "run \"stele verify\"");
    assert_string_equal(err.hint, "run \"stele verify\"");
}

static void
test_error_helpers_accept_a_null_error(void **state)
{
    (void)state;
    assert_int_equal(error_set(NULL, -EIO, "x"), -EIO);
    error_set_hint(NULL, "y");
    error_clear(NULL);
}

static void
test_error_set_truncates_long_messages(void **state)
{
    (void)state;
    char big[1000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    stele_error_t err;
    error_set(&err, STELE_EINVAL, "%s", big);
    assert_int_equal(strlen(err.message), STELE_ERROR_MESSAGE_BYTES - 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_every_code_has_a_distinct_name_and_text),
        cmocka_unit_test(test_error_stele_codes_stay_outside_the_errno_range),
        cmocka_unit_test(test_error_errno_codes_are_named_by_the_c_library),
        cmocka_unit_test(test_error_unknown_codes_get_static_text),
        cmocka_unit_test(test_error_set_fills_code_and_message_and_clears_the_hint),
        cmocka_unit_test(test_error_helpers_accept_a_null_error),
        cmocka_unit_test(test_error_set_truncates_long_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
