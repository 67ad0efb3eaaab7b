/*
 * test_filter.c: STELE_TEST_FILTER for every cmocka binary (stele_add_test links it in).
 * When the variable is set, cmocka runs only the tests whose names match it (a name, or a
 * pattern with * and ?), as tests/mutation/run.sh does to run the one test a mutation must
 * fail. Owns nothing; runs before main, so no binary has to ask for it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>

static void test_filter_from_environment(void) __attribute__((constructor));

static void
test_filter_from_environment(void)
{
    const char *filter = getenv("STELE_TEST_FILTER");
    if (filter && *filter)
        cmocka_set_test_filter(filter);
}
