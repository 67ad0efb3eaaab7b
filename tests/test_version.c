/*
 * test_version.c: stele_version() and stele_version_number() report the project's version
 * (CMakeLists.txt), the same one stele.h's macros state, in both forms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>

#include <stele.h>

static void
test_version_is_the_project_version(void **state)
{
    (void)state;
    assert_non_null(stele_version());
    assert_string_equal(stele_version(), STELE_TEST_PROJECT_VERSION);
    assert_string_equal(stele_version(), STELE_VERSION_STRING);
}

static void
test_version_number_is_the_string_as_an_integer(void **state)
{
    (void)state;
    unsigned major = 0, minor = 0, patch = 0;
    assert_int_equal(sscanf(stele_version(), "%u.%u.%u", &major, &minor, &patch), 3);
    assert_int_equal(stele_version_number(), (int)(major * 1000000 + minor * 1000 + patch));
    assert_int_equal(stele_version_number(), STELE_VERSION_NUMBER);
    assert_int_equal(major, STELE_VERSION_MAJOR);
    assert_int_equal(minor, STELE_VERSION_MINOR);
    assert_int_equal(patch, STELE_VERSION_PATCH);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_is_the_project_version),
        cmocka_unit_test(test_version_number_is_the_string_as_an_integer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
