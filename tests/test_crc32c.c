/*
 * test_crc32c.c: CRC-32C against its standard check value and published vectors, the
 * hardware path against the table path on random buffers of every alignment, and
 * crc32c_extend composing. Randomised: prints its seed, honours STELE_TEST_SEED.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "crc32c.h"
#include "jtest_util.h"

static void
test_crc32c_matches_standard_check_values(void **state)
{
    (void)state;
    assert_int_equal(crc32c("123456789", 9), 0xe3069283u);
    assert_int_equal(crc32c_extend_portable(0, "123456789", 9), 0xe3069283u);
    assert_int_equal(crc32c("", 0), 0);
    /* RFC 3720 (iSCSI) B.4: 32 bytes of zeros and of 0xff. */
    uint8_t buf[32];
    memset(buf, 0, sizeof buf);
    assert_int_equal(crc32c(buf, sizeof buf), 0x8a9136aau);
    memset(buf, 0xff, sizeof buf);
    assert_int_equal(crc32c(buf, sizeof buf), 0x62a8ab43u);
    for (int i = 0; i < 32; i++)
        buf[i] = (uint8_t)i;
    assert_int_equal(crc32c(buf, sizeof buf), 0x46dd794eu);
}

static void
test_crc32c_hardware_and_table_agree_on_random_buffers(void **state)
{
    (void)state;
    uint64_t rng = jtest_seed("test_crc32c_hardware_and_table_agree_on_random_buffers");
    print_message("crc32c uses %s\n", crc32c_is_hardware() ? "sse4.2" : "the table");
    uint8_t buf[4096 + 16];
    for (int round = 0; round < 500; round++) {
        size_t len = jtest_rand(&rng) % 4096, skew = jtest_rand(&rng) % 16;
        for (size_t i = 0; i < len + skew; i++)
            buf[i] = (uint8_t)jtest_rand(&rng);
        assert_int_equal(crc32c(buf + skew, len), crc32c_extend_portable(0, buf + skew, len));
        size_t cut = len ? jtest_rand(&rng) % len : 0;
        assert_int_equal(crc32c_extend(crc32c(buf + skew, cut), buf + skew + cut, len - cut),
                         crc32c(buf + skew, len));
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_matches_standard_check_values),
        cmocka_unit_test(test_crc32c_hardware_and_table_agree_on_random_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
