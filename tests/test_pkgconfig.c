/*
 * test_pkgconfig.c: stele installs and links like any other library. The build tree is
 * installed with `cmake --install --prefix` into a temporary directory, and everything below
 * uses what was installed there exactly as it is (stele.pc is never edited):
 *  - examples/append.c is compiled with only `pkg-config --cflags --libs stele` (the command
 *    of its header comment), links libstele.so from that prefix (NEEDED libstele.so.0) and
 *    runs with the prefix's lib on the loader path, reporting the installed version;
 *  - libstele.so exports exactly the functions the installed stele.h declares (`nm -D`),
 *    has the soname libstele.so.0 and the usual chain of links to libstele.so.<version>;
 *  - with the shared library taken away, `pkg-config --static --cflags --libs stele` links
 *    the same program against the static archives, and it runs;
 *  - the systemd unit installed beside them runs the `stele` installed in the same prefix,
 *    and `systemd-analyze verify` accepts it (skipped, saying so, where that tool is
 *    missing; it reads the file offline, with or without systemd running).
 * In a sanitizer build the installed libraries are instrumented, so the program is compiled
 * with the same -fsanitize flags (STELE_TEST_APP_CFLAGS), as any program linking them must.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

#define CMD_BYTES 8192
/* Public functions stele.h may declare; far more than it does. */
#define MAX_NAMES 512

/* Runs a shell command; fails the test with the command and its status when it fails. */
static void
run_or_fail(const char *cmd)
{
    int status = system(cmd);
    if (status != 0)
        fail_msg("command failed (status %d): %s", status, cmd);
}

/* Runs a shell command and returns its standard output (malloc'd); fails the test when the
 * command fails. */
static char *
capture_or_fail(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        fwrite(buf, 1, n, out);
    int status = pclose(p);
    assert_int_equal(fclose(out), 0);
    if (status != 0)
        fail_msg("command failed (status %d): %s\noutput: %s", status, cmd, text);
    return text;
}

/* Installs the build tree into a fresh temporary prefix; returns the prefix (malloc'd). */
static char *
install_into_temp_prefix(const char *tag)
{
    char *prefix = test_tmpdir_new(tag);
    assert_non_null(prefix);
    char cmd[CMD_BYTES];
    snprintf(cmd, sizeof cmd, "'%s' --install '%s' --prefix '%s' >/dev/null", STELE_CMAKE_COMMAND,
             STELE_BUILD_DIR, prefix);
    run_or_fail(cmd);
    return prefix;
}

/* Compiles examples/append.c into prefix/append with `pkg-config <pc_flags> stele`, the .pc
 * found only through PKG_CONFIG_PATH=prefix/<libdir>/pkgconfig. */
static void
compile_example(const char *prefix, const char *pc_flags)
{
    char cmd[CMD_BYTES];
    snprintf(cmd, sizeof cmd,
             "PKG_CONFIG_PATH='%s/" STELE_INSTALL_LIBDIR "/pkgconfig' && export PKG_CONFIG_PATH && "
             "'%s' " STELE_TEST_APP_CFLAGS " -o '%s/append' '%s/examples/append.c' "
             "$(pkg-config %s stele)",
             prefix, STELE_C_COMPILER, prefix, STELE_SOURCE_DIR, pc_flags);
    run_or_fail(cmd);
}

/* Runs prefix/append on a fresh journal with prefix/<libdir> first on the loader path;
 * returns its output (malloc'd). */
static char *
run_example(const char *prefix)
{
    char cmd[CMD_BYTES];
    snprintf(cmd, sizeof cmd,
             "LD_LIBRARY_PATH='%s/" STELE_INSTALL_LIBDIR "' '%s/append' '%s/journal' 2>&1", prefix,
             prefix, prefix);
    return capture_or_fail(cmd);
}

static void
test_installed_pc_names_the_install_prefix(void **state)
{
    (void)state;
    char *prefix = install_into_temp_prefix("pkgconfig-pc");
    char cmd[CMD_BYTES];
    snprintf(cmd, sizeof cmd,
             "PKG_CONFIG_PATH='%s/" STELE_INSTALL_LIBDIR "/pkgconfig' pkg-config "
             "--variable=prefix stele",
             prefix);
    char *out = capture_or_fail(cmd);
    char expected[PATH_MAX + 2];
    snprintf(expected, sizeof expected, "%s\n", prefix);
    assert_string_equal(out, expected);
    free(out);
    snprintf(cmd, sizeof cmd,
             "PKG_CONFIG_PATH='%s/" STELE_INSTALL_LIBDIR
             "/pkgconfig' pkg-config --modversion stele",
             prefix);
    out = capture_or_fail(cmd);
    assert_string_equal(out, STELE_TEST_PROJECT_VERSION "\n");
    free(out);
    assert_int_equal(test_tmpdir_remove(prefix), 0);
}

static void
test_example_links_the_shared_library_with_plain_pkg_config_and_runs(void **state)
{
    (void)state;
    char *prefix = install_into_temp_prefix("pkgconfig-shared");
    compile_example(prefix, "--cflags --libs");
    char cmd[CMD_BYTES];
    snprintf(cmd, sizeof cmd, "readelf -d '%s/append'", prefix);
    char *dynamic = capture_or_fail(cmd);
    assert_non_null(strstr(dynamic, "[libstele.so." STELE_TEST_SOVERSION "]"));
    free(dynamic);
    /* The loader takes libstele.so.0 from the prefix, not from anywhere else. */
    snprintf(cmd, sizeof cmd, "LD_LIBRARY_PATH='%s/" STELE_INSTALL_LIBDIR "' ldd '%s/append'",
             prefix, prefix);
    char *ldd = capture_or_fail(cmd);
    char expected[PATH_MAX + 64];
    snprintf(expected, sizeof expected,
             "libstele.so." STELE_TEST_SOVERSION " => %s/" STELE_INSTALL_LIBDIR "/libstele.so.",
             prefix);
    if (!strstr(ldd, expected))
        fail_msg("ldd does not resolve libstele from the prefix:\n%s", ldd);
    free(ldd);
    char *out = run_example(prefix);
    assert_non_null(strstr(out, "stele " STELE_TEST_PROJECT_VERSION "\n"));
    assert_non_null(strstr(out, "rejected as STELE_EDOLLARKEY"));
    assert_non_null(strstr(out, "durable seq 4 (bson)"));
    free(out);
    assert_int_equal(test_tmpdir_remove(prefix), 0);
}

/* Reads the names of the functions the header at `path` declares, as cmake/exports.cmake
 * does: a line starting in column 0 that names stele_<name> before its first '('. */
static size_t
header_functions(const char *path, char names[][64], size_t max)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        if (!isalpha((unsigned char)line[0]) && line[0] != '_')
            continue;
        char *paren = strchr(line, '(');
        if (!paren)
            continue;
        *paren = '\0';
        char *name = strstr(line, "stele_");
        while (name && strstr(name + 1, "stele_"))
            name = strstr(name + 1, "stele_");
        if (!name || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(name))
            continue;
        assert_true(n < max);
        snprintf(names[n++], sizeof names[0], "%s", name);
    }
    fclose(f);
    return n;
}

static int
names_contain(char names[][64], size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

static void
test_shared_library_exports_only_the_header_functions(void **state)
{
    (void)state;
    char *prefix = install_into_temp_prefix("pkgconfig-nm");
    static char declared[MAX_NAMES][64], exported[MAX_NAMES][64];
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/include/stele.h", prefix);
    size_t n_declared = header_functions(path, declared, MAX_NAMES);
    assert_true(n_declared > 40); /* the parse found the header's declarations */
    assert_true(names_contain(declared, n_declared, "stele_open"));
    assert_true(names_contain(declared, n_declared, "stele_version"));

    char cmd[CMD_BYTES];
    snprintf(cmd, sizeof cmd,
             "nm -D --defined-only '%s/" STELE_INSTALL_LIBDIR "/libstele.so' | awk '{print $3}'",
             prefix);
    char *nm = capture_or_fail(cmd);
    size_t n_exported = 0;
    for (char *save = NULL, *sym = strtok_r(nm, "\n", &save); sym;
         sym = strtok_r(NULL, "\n", &save)) {
        if (strncmp(sym, "stele_", 6) != 0)
            fail_msg("libstele.so exports %s, which is not a stele_ function", sym);
        if (!names_contain(declared, n_declared, sym))
            fail_msg("libstele.so exports %s, which stele.h does not declare", sym);
        assert_true(n_exported < MAX_NAMES);
        snprintf(exported[n_exported++], sizeof exported[0], "%s", sym);
    }
    free(nm);
    for (size_t i = 0; i < n_declared; i++)
        if (!names_contain(exported, n_exported, declared[i]))
            fail_msg("stele.h declares %s, which libstele.so does not export", declared[i]);

    /* libstele.so -> libstele.so.0 -> libstele.so.<version>, whose soname is libstele.so.0. */
    snprintf(cmd, sizeof cmd,
             "cd '%s/" STELE_INSTALL_LIBDIR
             "' && readlink libstele.so libstele.so." STELE_TEST_SOVERSION
             " && readelf -d libstele.so." STELE_TEST_PROJECT_VERSION " | grep SONAME",
             prefix);
    char *links = capture_or_fail(cmd);
    assert_non_null(strstr(links, "libstele.so." STELE_TEST_SOVERSION
                                  "\nlibstele.so." STELE_TEST_PROJECT_VERSION "\n"));
    assert_non_null(strstr(links, "[libstele.so." STELE_TEST_SOVERSION "]"));
    free(links);
    assert_int_equal(test_tmpdir_remove(prefix), 0);
}

static void
test_example_links_the_static_libraries_with_pkg_config_static_and_runs(void **state)
{
    (void)state;
    char *prefix = install_into_temp_prefix("pkgconfig-static");
    /* Without the shared library, -lstele can only mean libstele.a. */
    char cmd[CMD_BYTES];
    snprintf(cmd, sizeof cmd, "rm -f '%s/" STELE_INSTALL_LIBDIR "'/libstele.so*", prefix);
    run_or_fail(cmd);
    compile_example(prefix, "--static --cflags --libs");
    snprintf(cmd, sizeof cmd, "readelf -d '%s/append'", prefix);
    char *dynamic = capture_or_fail(cmd);
    assert_null(strstr(dynamic, "libstele"));
    free(dynamic);
    char *out = run_example(prefix);
    assert_non_null(strstr(out, "durable seq 4 (bson)"));
    free(out);
    assert_int_equal(test_tmpdir_remove(prefix), 0);
}

static void
test_installed_systemd_unit_runs_the_installed_stele_and_verifies(void **state)
{
    (void)state;
    if (system("command -v systemd-analyze >/dev/null 2>&1") != 0) {
        print_message("systemd-analyze not found: the unit is not verified\n");
        skip();
    }
    char *prefix = install_into_temp_prefix("pkgconfig-unit");
    char cmd[CMD_BYTES];
    snprintf(cmd, sizeof cmd, "grep '^ExecStart=' '%s/" STELE_SYSTEMD_UNIT_DIR "/stele.service'",
             prefix);
    char *exec = capture_or_fail(cmd);
    char expected[PATH_MAX + 64];
    snprintf(expected, sizeof expected, "ExecStart=%s/" STELE_INSTALL_BINDIR "/stele serve ",
             prefix);
    if (strncmp(exec, expected, strlen(expected)) != 0)
        fail_msg("the unit runs another stele: %s", exec);
    free(exec);
    /* verify also checks that ExecStart's program exists and is executable. --man=no: the
     * man page of a temporary prefix is not where man looks. */
    snprintf(cmd, sizeof cmd,
             "systemd-analyze verify --man=no '%s/" STELE_SYSTEMD_UNIT_DIR "/stele.service' 2>&1",
             prefix);
    char *verify = capture_or_fail(cmd);
    /* It exits 0 on a setting it could not parse, after a warning: any word from it fails. */
    if (verify[0])
        fail_msg("systemd-analyze verify complains:\n%s", verify);
    free(verify);
    assert_int_equal(test_tmpdir_remove(prefix), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_installed_pc_names_the_install_prefix),
        cmocka_unit_test(test_example_links_the_shared_library_with_plain_pkg_config_and_runs),
        cmocka_unit_test(test_shared_library_exports_only_the_header_functions),
        cmocka_unit_test(test_example_links_the_static_libraries_with_pkg_config_static_and_runs),
        cmocka_unit_test(test_installed_systemd_unit_runs_the_installed_stele_and_verifies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
