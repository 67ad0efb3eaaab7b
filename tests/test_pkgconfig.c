/*
 * test_pkgconfig.c: an application builds against an installed stele the way
 * examples/append.c says it does, `cc append.c $(pkg-config --cflags --libs stele
 * libbson-1.0)`, and the program runs. stele is installed as static libraries only, so
 * stele.pc must hand every library they need (libmongoc, LMDB, libcrypto, inih, pthread) to a
 * plain `pkg-config --libs`, not only to `--static`.
 *
 * The build tree is installed into a temporary prefix (`cmake --install`), stele.pc's
 * prefix (set at configure time to the install prefix) is pointed there, and the example is
 * compiled with the command of its header comment and run on a fresh journal.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* Runs a shell command; fails the test with the command and its status when it fails. */
static void
run_or_fail(const char *cmd)
{
    int status = system(cmd);
    if (status != 0)
        fail_msg("command failed (status %d): %s", status, cmd);
}

/* Rewrites the first "prefix=" line of the .pc file at `path` to `prefix`. */
static void
set_pc_prefix(const char *path, const char *prefix)
{
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    text[n] = '\0';
    assert_true(strncmp(text, "prefix=", 7) == 0);
    const char *rest = strchr(text, '\n');
    assert_non_null(rest);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    fprintf(out, "prefix=%s%s", prefix, rest);
    assert_int_equal(fclose(out), 0);
}

static void
test_example_builds_with_plain_pkg_config_libs_and_runs(void **state)
{
    (void)state;
    char *dir = test_tmpdir_new("pkgconfig");
    assert_non_null(dir);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' --install '%s' --prefix '%s' >/dev/null", STELE_CMAKE_COMMAND,
             STELE_BUILD_DIR, dir);
    run_or_fail(cmd);
    char *pc = test_path_join(dir, STELE_INSTALL_LIBDIR "/pkgconfig/stele.pc");
    assert_non_null(pc);
    set_pc_prefix(pc, dir);
    /* The command of examples/append.c's header, with the test's compiler and paths. */
    snprintf(cmd, sizeof cmd,
             "PKG_CONFIG_PATH='%s/" STELE_INSTALL_LIBDIR "/pkgconfig' && export PKG_CONFIG_PATH && "
             "'%s' -o '%s/append' '%s/examples/append.c' "
             "$(pkg-config --cflags --libs stele libbson-1.0)",
             dir, STELE_C_COMPILER, dir, STELE_SOURCE_DIR);
    run_or_fail(cmd);
    snprintf(cmd, sizeof cmd, "'%s/append' '%s/journal' >/dev/null", dir, dir);
    run_or_fail(cmd);
    free(pc);
    assert_int_equal(test_tmpdir_remove(dir), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_builds_with_plain_pkg_config_libs_and_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
