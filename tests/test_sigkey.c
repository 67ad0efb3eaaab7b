/*
 * test_sigkey.c: journal/sigkey.c, key files. Round trips and modes; a create never
 * replaces or follows anything already at the path; a signer key file is refused when it is
 * a symbolic link, open to group or others, someone else's, of the wrong size or shape, or
 * not a regular file; a replace leaves either key at every step and scrubs the old one.
 * Each refusal names the file and changes nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sigkey.h"
#include "test_util.h"

typedef struct fixture {
    char *dir;
    char key[512], pub[512];
    note_signer_t signer;
} fixture_t;

static int
setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->dir = test_tmpdir_new("sigkey");
    assert_non_null(f->dir);
    snprintf(f->key, sizeof f->key, "%s/signing.key", f->dir);
    snprintf(f->pub, sizeof f->pub, "%s/signing.pub", f->dir);
    assert_int_equal(note_keygen("stele/test", &f->signer, NULL), 0);
    *state = f;
    return 0;
}

static int
teardown(void **state)
{
    fixture_t *f = *state;
    note_signer_wipe(&f->signer);
    test_tmpdir_remove(f->dir);
    free(f);
    return 0;
}

static void
write_file(const char *path, const char *content, size_t len, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static size_t
read_file(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, cap - 1);
    assert_true(n >= 0);
    buf[n] = '\0';
    close(fd);
    return (size_t)n;
}

static mode_t
mode_of(const char *path)
{
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

static void
expect_read_signer_fails(const char *path, int code, const char *message)
{
    stele_error_t err = {0};
    note_signer_t s, untouched;
    memset(&s, 0x66, sizeof s);
    untouched = s;
    int rc = sigkey_read_signer(path, &s, &err);
    if (rc != code || !strstr(err.message, message) || !strstr(err.message, path))
        fail_msg("read %s: rc %d \"%s\", want %d \"%s\"", path, rc, err.message, code, message);
    assert_memory_equal(&s, &untouched, sizeof s);
}

static void
test_sigkey_round_trips_both_key_files(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(sigkey_write_signer(f->key, &f->signer, NULL), 0);
    assert_int_equal(mode_of(f->key), 0600);
    char want[NOTE_SIGNER_KEY_MAX_BYTES + 2], got[SIGKEY_FILE_MAX_BYTES + 1];
    size_t len = note_signer_format(&f->signer, want, sizeof want);
    want[len] = '\n';
    want[len + 1] = '\0';
    read_file(f->key, got, sizeof got);
    assert_string_equal(got, want);
    note_signer_t back;
    assert_int_equal(sigkey_read_signer(f->key, &back, NULL), 0);
    assert_memory_equal(&back, &f->signer, sizeof back);
    note_signer_wipe(&back);

    mode_t mask = umask(022);
    umask(mask);
    assert_int_equal(sigkey_write_verifier(f->pub, &f->signer.verifier, NULL), 0);
    assert_int_equal(mode_of(f->pub), 0644 & ~mask);
    note_verifier_t v;
    assert_int_equal(sigkey_read_verifier(f->pub, &v, NULL), 0);
    assert_memory_equal(&v, &f->signer.verifier, sizeof v);

    /* The newline is optional; a mode tighter than 0600 is fine. */
    write_file(f->key, want, len, 0400);
    assert_int_equal(sigkey_read_signer(f->key, &back, NULL), 0);
    assert_memory_equal(&back, &f->signer, sizeof back);
    note_signer_wipe(&back);

    /* A later epoch's key file: the key string, then "epoch <E>". */
    char text[SIGKEY_FILE_MAX_BYTES + 1];
    size_t text_len = sigkey_format_signer(&f->signer, 17, text, sizeof text);
    assert_true(text_len > len);
    write_file(f->key, text, text_len, 0600);
    uint64_t epoch = 0;
    assert_int_equal(sigkey_read_signer_epoch(f->key, &back, &epoch, NULL), 0);
    assert_int_equal(epoch, 17);
    assert_memory_equal(&back, &f->signer, sizeof back);
    note_signer_wipe(&back);
}

static void
test_sigkey_create_never_replaces_or_follows(void **state)
{
    fixture_t *f = *state;
    char got[64];
    write_file(f->key, "old", 3, 0600);
    stele_error_t err = {0};
    assert_int_equal(sigkey_write_signer(f->key, &f->signer, &err), -EEXIST);
    assert_non_null(strstr(err.message, "already exists"));
    assert_non_null(strstr(err.message, f->key));
    read_file(f->key, got, sizeof got);
    assert_string_equal(got, "old");
    assert_int_equal(sigkey_write_verifier(f->key, &f->signer.verifier, &err), -EEXIST);

    /* A dangling symbolic link: its target is not created. */
    char link[600], target[600];
    snprintf(link, sizeof link, "%s/link.key", f->dir);
    snprintf(target, sizeof target, "%s/target", f->dir);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(sigkey_write_signer(link, &f->signer, &err), -EEXIST);
    assert_int_equal(access(target, F_OK), -1);
    /* Missing directory: the system's error, named. */
    char nowhere[600];
    snprintf(nowhere, sizeof nowhere, "%s/no/such.key", f->dir);
    assert_int_equal(sigkey_write_signer(nowhere, &f->signer, &err), -ENOENT);
    assert_non_null(strstr(err.message, "could not create key file"));
}

static void
test_sigkey_refuses_a_private_key_others_can_open(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(sigkey_write_signer(f->key, &f->signer, NULL), 0);
    static const mode_t open_modes[] = {0640, 0604, 0620, 0602, 0610, 0601, 0644, 0666};
    for (size_t i = 0; i < sizeof open_modes / sizeof open_modes[0]; i++) {
        assert_int_equal(chmod(f->key, open_modes[i]), 0);
        char message[64];
        snprintf(message, sizeof message, "is open to group or others (mode %04o)",
                 (unsigned)open_modes[i]);
        expect_read_signer_fails(f->key, STELE_EINVAL, message);
    }
    stele_error_t err = {0};
    note_signer_t s;
    assert_int_equal(sigkey_read_signer(f->key, &s, &err), STELE_EINVAL);
    assert_non_null(strstr(err.hint, "chmod 600"));
    /* A verifier key file may be world-readable. */
    assert_int_equal(sigkey_write_verifier(f->pub, &f->signer.verifier, NULL), 0);
    assert_int_equal(chmod(f->pub, 0644), 0);
    note_verifier_t v;
    assert_int_equal(sigkey_read_verifier(f->pub, &v, NULL), 0);
}

static void
test_sigkey_refuses_a_symlinked_private_key(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(sigkey_write_signer(f->key, &f->signer, NULL), 0);
    char link[600];
    snprintf(link, sizeof link, "%s/link.key", f->dir);
    assert_int_equal(symlink(f->key, link), 0);
    expect_read_signer_fails(link, STELE_EINVAL, "is a symbolic link");
}

static void
test_sigkey_refuses_wrong_size_and_shape(void **state)
{
    fixture_t *f = *state;
    char text[NOTE_SIGNER_KEY_MAX_BYTES + 8];
    size_t len = note_signer_format(&f->signer, text, sizeof text);
    write_file(f->key, "", 0, 0600);
    expect_read_signer_fails(f->key, STELE_EINVAL, "is 0 bytes; a key file holds one key string");
    static char big[SIGKEY_FILE_MAX_BYTES + 1];
    memset(big, 'A', sizeof big);
    write_file(f->key, big, sizeof big, 0600);
    expect_read_signer_fails(f->key, STELE_EINVAL, "is 1025 bytes");
    write_file(f->key, "hello\n", 6, 0600);
    expect_read_signer_fails(f->key, STELE_EINVAL, "signer key does not start with PRIVATE+KEY+");
    /* A second line that is not the epoch line: the key string is fine, so the message names
     * the line that is wrong and what belongs there. */
    memcpy(text + len, "\n\n", 2);
    write_file(f->key, text, len + 2, 0600);
    expect_read_signer_fails(f->key, STELE_EINVAL, "line 2 is not \"epoch <number>\"");
    memcpy(text + len, "\nx\n", 3);
    write_file(f->key, text, len + 3, 0600);
    expect_read_signer_fails(f->key, STELE_EINVAL, "line 2 is not \"epoch <number>\"");
    memcpy(text + len, "\nepoch 01\n", 10);
    write_file(f->key, text, len + 10, 0600);
    expect_read_signer_fails(f->key, STELE_EINVAL, "line 2 is not \"epoch <number>\"");
    memcpy(text + len, "\nepoch 1\nx", 10);
    write_file(f->key, text, len + 10, 0600);
    expect_read_signer_fails(f->key, STELE_EINVAL, "line 2 is not \"epoch <number>\"");
    /* A cut key string: it does not parse. */
    write_file(f->key, text, len - 1, 0600);
    expect_read_signer_fails(f->key, STELE_EINVAL, "not base64");
    /* A public key where a private one belongs, and the other way round. */
    char pub[NOTE_VERIFIER_KEY_MAX_BYTES + 1];
    size_t pub_len = note_verifier_format(&f->signer.verifier, pub, sizeof pub);
    write_file(f->key, pub, pub_len, 0600);
    expect_read_signer_fails(f->key, STELE_EINVAL, "does not start with PRIVATE+KEY+");
    write_file(f->pub, text, len, 0600);
    stele_error_t err = {0};
    note_verifier_t v;
    assert_int_equal(sigkey_read_verifier(f->pub, &v, &err), STELE_EINVAL);
    assert_non_null(strstr(err.message, "holds a private key where a public key is expected"));
    assert_null(strstr(err.message, "AQ")); /* no part of the key in the message */
    /* A directory, a FIFO (not waited on), a missing file. */
    expect_read_signer_fails(f->dir, STELE_EINVAL, "is not a regular file");
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/fifo", f->dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_read_signer_fails(fifo, STELE_EINVAL, "is not a regular file");
    assert_int_equal(sigkey_read_verifier(fifo, &v, &err), STELE_EINVAL);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/missing.key", f->dir);
    expect_read_signer_fails(missing, -ENOENT, "could not open key file");
}

static void
test_sigkey_refuses_someone_elses_private_key(void **state)
{
    fixture_t *f = *state;
    if (geteuid() != 0) {
        print_message("skipped: changing a file's owner needs root\n");
        skip();
    }
    assert_int_equal(sigkey_write_signer(f->key, &f->signer, NULL), 0);
    assert_int_equal(chown(f->key, 1, 1), 0);
    /* Even root refuses it (a key file owned by root is accepted for any user). */
    expect_read_signer_fails(f->key, STELE_EINVAL, "belongs to uid 1, not to this user (0)");
}

static void
test_sigkey_replace_swaps_atomically_and_scrubs_the_old_key(void **state)
{
    fixture_t *f = *state;
    assert_int_equal(sigkey_write_signer(f->key, &f->signer, NULL), 0);
    char old_text[SIGKEY_FILE_MAX_BYTES + 1];
    size_t old_len = read_file(f->key, old_text, sizeof old_text);
    /* A second name for the old inode shows what happens to its bytes. */
    char old_link[600], leftover[700], elsewhere[600];
    snprintf(old_link, sizeof old_link, "%s/old-inode", f->dir);
    assert_int_equal(link(f->key, old_link), 0);
    /* A leftover of an interrupted replace, even a symbolic link, is removed, not followed. */
    snprintf(leftover, sizeof leftover, "%s.new", f->key);
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", f->dir);
    write_file(elsewhere, "keep", 4, 0600);
    assert_int_equal(symlink(elsewhere, leftover), 0);

    note_signer_t next;
    assert_int_equal(note_keygen("stele/test", &next, NULL), 0);
    assert_int_equal(sigkey_replace_signer(f->key, &next, NULL), 0);
    note_signer_t back;
    assert_int_equal(sigkey_read_signer(f->key, &back, NULL), 0);
    assert_memory_equal(&back, &next, sizeof back);
    assert_int_equal(mode_of(f->key), 0600);
    assert_int_equal(access(leftover, F_OK), -1);
    char got[SIGKEY_FILE_MAX_BYTES + 1];
    read_file(elsewhere, got, sizeof got);
    assert_string_equal(got, "keep");
    /* The old inode keeps its size, and only zeros. */
    size_t scrubbed_len = read_file(old_link, got, sizeof got);
    assert_int_equal(scrubbed_len, old_len);
    for (size_t i = 0; i < scrubbed_len; i++)
        assert_int_equal(got[i], 0);
    note_signer_wipe(&back);
    note_signer_wipe(&next);
}

static void
test_sigkey_replace_refuses_a_symlink(void **state)
{
    fixture_t *f = *state;
    char target[600], link[600], leftover[700];
    snprintf(target, sizeof target, "%s/real.key", f->dir);
    snprintf(link, sizeof link, "%s/link.key", f->dir);
    snprintf(leftover, sizeof leftover, "%s.new", link);
    assert_int_equal(sigkey_write_signer(target, &f->signer, NULL), 0);
    assert_int_equal(symlink(target, link), 0);
    note_signer_t next;
    assert_int_equal(note_keygen("stele/test", &next, NULL), 0);
    stele_error_t err = {0};
    assert_int_equal(sigkey_replace_signer(link, &next, &err), -ELOOP);
    assert_non_null(strstr(err.message, link));
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(access(leftover, F_OK), -1);
    note_signer_t back;
    assert_int_equal(sigkey_read_signer(target, &back, NULL), 0);
    assert_memory_equal(&back, &f->signer, sizeof back);
    note_signer_wipe(&back);
    note_signer_wipe(&next);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sigkey_round_trips_both_key_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkey_create_never_replaces_or_follows, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sigkey_refuses_a_private_key_others_can_open, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sigkey_refuses_a_symlinked_private_key, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sigkey_refuses_wrong_size_and_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkey_refuses_someone_elses_private_key, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_sigkey_replace_swaps_atomically_and_scrubs_the_old_key,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkey_replace_refuses_a_symlink, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
