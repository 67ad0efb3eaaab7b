/*
 * test_trust_interop.c: stele's trust formats against an implementation no one here wrote,
 * Go's golang.org/x/mod/sumdb/note and sumdb/tlog (the checker in tests/interop/trust,
 * built once and cached by tests/interop/build-trust-interop.sh).
 *
 * C to Go: for trees of 1 to 1000 leaves (one of them FORMAT.md's worked example), the C
 * side writes a verifier key file, a signed checkpoint, the leaves, its stored hashes and
 * inclusion and consistency proofs; Go opens the note, recomputes every stored hash at its
 * index, the tree hash, and checks and recomputes every proof. A tampered signature, stored
 * hash or proof makes the checker fail, so its "ok" means something.
 * Go to C: Go generates a key, signs a checkpoint and writes its own hashes and proofs; the
 * C side reads the key files, opens the note, verifies every proof, finds the same stored
 * hashes and proofs, and signs the same text to the same bytes.
 * Proof bundles: `stele prove`'s bundles of a journal signed over three key epochs are
 * checked by Go from the anchor alone (note.Open along the key chain, tlog.CheckRecord).
 *
 * Without Go every test skips and the binary exits 77 (ctest SKIP_RETURN_CODE).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base64.h"
#include "checkpoint.h"
#include "merkle.h"
#include "note.h"
#include "sigkey.h"
#include "test_child.h"
#include "stele.h"
#include "test_util.h"

#ifndef STELE_TRUST_INTEROP_BUILD
#error "STELE_TRUST_INTEROP_BUILD must name tests/interop/build-trust-interop.sh"
#endif

#define HB MERKLE_HASH_BYTES
#define EXIT_SKIP 77

typedef struct interop {
    char checker[PATH_MAX]; /* the Go checker; empty when it could not be had */
    int go_missing;
    char why[512];
} interop_t;

/* ---- running programs ---- */

/* Runs argv with stdout to out (cap bytes, NUL-terminated) and stderr appended to it.
 * Returns the exit status, or -1 when it did not run to an exit. */
static int
run_program(char *const argv[], char *out, size_t cap)
{
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);
    pid_t pid = test_fork_bound();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pipe_fds[1], STDOUT_FILENO);
        dup2(pipe_fds[1], STDERR_FILENO);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pipe_fds[1]);
    size_t len = 0;
    for (;;) {
        ssize_t n = read(pipe_fds[0], out + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == cap - 1) /* keep draining so the child never blocks */
            len = cap / 2;
    }
    out[len] = '\0';
    close(pipe_fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The checker's path from the build script (which builds it at most once per version). */
static void
interop_find_checker(interop_t *it)
{
    char *argv[] = {(char *)STELE_TRUST_INTEROP_BUILD, NULL};
    char out[8192];
    int rc = run_program(argv, out, sizeof out);
    char *last_line = out;
    for (char *nl = strchr(out, '\n'); nl && nl[1]; nl = strchr(nl + 1, '\n'))
        last_line = nl + 1;
    if (rc == 0) {
        snprintf(it->checker, sizeof it->checker, "%.*s", (int)strcspn(last_line, "\n"), last_line);
        return;
    }
    it->go_missing = rc == EXIT_SKIP;
    snprintf(it->why, sizeof it->why, "%s (exit %d): %.300s", STELE_TRUST_INTEROP_BUILD, rc, out);
}

static interop_t *
interop_ready(void **state)
{
    interop_t *it = *state;
    if (it->go_missing) {
        print_message("skipped: %s\n", it->why);
        skip();
    }
    if (!it->checker[0])
        fail_msg("the Go checker could not be built: %s", it->why);
    return it;
}

/* ---- files ---- */

static void
write_text(const char *dir, const char *name, const void *data, size_t len)
{
    char *path = test_path_join(dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
    free(path);
}

/* The whole file, NUL-terminated, malloc'd. */
static char *
read_text(const char *dir, const char *name, size_t *len_out)
{
    char *path = test_path_join(dir, name);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    char *buf = malloc((size_t)st.st_size + 1);
    assert_non_null(buf);
    assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
    buf[st.st_size] = '\0';
    close(fd);
    free(path);
    if (len_out)
        *len_out = (size_t)st.st_size;
    return buf;
}

typedef struct text_buf {
    char *data;
    size_t len, cap;
} text_buf_t;

static void text_append(text_buf_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
text_append(text_buf_t *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->data + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap * 2 + (size_t)n + 64;
        t->data = realloc(t->data, t->cap);
        assert_non_null(t->data);
    }
}

static void
text_append_hashes(text_buf_t *t, const uint8_t *hashes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char b64[BASE64_ENCODED_LEN(HB) + 1];
        base64_encode(hashes + i * HB, HB, b64);
        text_append(t, " %s", b64);
    }
}

/* ---- a tree the C side builds ---- */

typedef struct c_tree {
    merkle_hasher_t *h;
    uint64_t n_leaves;
    uint8_t **leaf;   /* leaf data */
    size_t *leaf_len; /* its length */
    uint8_t *stored;  /* stored hashes, HB each, in stored-index order */
    uint64_t n_stored;
    merkle_range_t range;
} c_tree_t;

static int
c_tree_read(void *ctx, unsigned level, uint64_t index, uint8_t out[HB], stele_error_t *err)
{
    const c_tree_t *t = ctx;
    uint64_t at = merkle_stored_index(level, index);
    if (at >= t->n_stored) {
        if (err)
            snprintf(err->message, sizeof err->message, "no stored hash %llu",
                     (unsigned long long)at);
        return STELE_ENOTFOUND;
    }
    memcpy(out, t->stored + at * HB, HB);
    return 0;
}

static void
c_tree_append(c_tree_t *t, const uint8_t *data, size_t len)
{
    t->leaf[t->n_leaves] = malloc(len ? len : 1);
    assert_non_null(t->leaf[t->n_leaves]);
    memcpy(t->leaf[t->n_leaves], data, len);
    t->leaf_len[t->n_leaves] = len;
    uint8_t leaf_hash[HB];
    struct iovec part = {(void *)data, len};
    assert_int_equal(merkle_hash_leaf(t->h, &part, 1, leaf_hash), 0);
    merkle_stored_t st;
    assert_int_equal(merkle_range_append(t->h, &t->range, leaf_hash, &st, NULL), 0);
    assert_int_equal(st.first_index, t->n_stored);
    memcpy(t->stored + t->n_stored * HB, st.hash, (size_t)st.count * HB);
    t->n_stored += st.count;
    t->n_leaves++;
}

static c_tree_t *
c_tree_new(uint64_t max_leaves)
{
    c_tree_t *t = calloc(1, sizeof *t);
    assert_non_null(t);
    t->h = merkle_hasher_new();
    t->leaf = calloc(max_leaves, sizeof *t->leaf);
    t->leaf_len = calloc(max_leaves, sizeof *t->leaf_len);
    t->stored = calloc(merkle_stored_count(max_leaves) + 1, HB);
    assert_true(t->h && t->leaf && t->leaf_len && t->stored);
    merkle_range_init(&t->range);
    return t;
}

static void
c_tree_free(c_tree_t *t)
{
    for (uint64_t i = 0; i < t->n_leaves; i++)
        free(t->leaf[i]);
    free(t->leaf);
    free(t->leaf_len);
    free(t->stored);
    merkle_hasher_free(t->h);
    free(t);
}

/* Leaf i: a few bytes that vary in length, the first one empty. */
static c_tree_t *
c_tree_of(uint64_t n_leaves)
{
    c_tree_t *t = c_tree_new(n_leaves);
    for (uint64_t i = 0; i < n_leaves; i++) {
        uint8_t data[64];
        size_t len = i == 0 ? 0 : (size_t)(i * 7 % 60) + 1;
        for (size_t k = 0; k < len; k++)
            data[k] = (uint8_t)(i * 31 + k * 17);
        c_tree_append(t, data, len);
    }
    return t;
}

static void
add_inclusion_line(c_tree_t *t, text_buf_t *out, uint64_t index, uint64_t size)
{
    uint8_t root[HB], proof[MERKLE_MAX_PROOF_HASHES * HB];
    size_t n = 0;
    merkle_store_t store = {c_tree_read, t};
    assert_int_equal(merkle_tree_hash(t->h, &store, size, root, NULL), 0);
    assert_int_equal(
        merkle_prove_inclusion(t->h, &store, index, size, proof, MERKLE_MAX_PROOF_HASHES, &n, NULL),
        0);
    text_append(out, "%llu %llu", (unsigned long long)index, (unsigned long long)size);
    text_append_hashes(out, root, 1);
    text_append_hashes(out, proof, n);
    text_append(out, "\n");
}

static void
add_consistency_line(c_tree_t *t, text_buf_t *out, uint64_t old_size, uint64_t new_size)
{
    uint8_t roots[2 * HB], proof[MERKLE_MAX_PROOF_HASHES * HB];
    size_t n = 0;
    merkle_store_t store = {c_tree_read, t};
    assert_int_equal(merkle_tree_hash(t->h, &store, old_size, roots, NULL), 0);
    assert_int_equal(merkle_tree_hash(t->h, &store, new_size, roots + HB, NULL), 0);
    assert_int_equal(merkle_prove_consistency(t->h, &store, old_size, new_size, proof,
                                              MERKLE_MAX_PROOF_HASHES, &n, NULL),
                     0);
    text_append(out, "%llu %llu", (unsigned long long)old_size, (unsigned long long)new_size);
    text_append_hashes(out, roots, 2);
    text_append_hashes(out, proof, n);
    text_append(out, "\n");
}

/* Every proof of a small tree; a spread of them in a large one. */
static void
write_proofs(c_tree_t *t, const char *dir)
{
    text_buf_t incl = {0}, cons = {0};
    uint64_t n = t->n_leaves;
    for (uint64_t size = 1; size <= n; size++) {
        int all = n <= 13 || size == n;
        for (uint64_t i = 0; all && i < size; i++)
            if (size <= 100 || i % 37 == 0 || i == size - 1)
                add_inclusion_line(t, &incl, i, size);
        for (uint64_t m = 0; m <= size; m++)
            if (n <= 13 || (size == n && (m <= 3 || m == n / 3 || m == n / 2 || m >= n - 1)))
                add_consistency_line(t, &cons, m, size);
    }
    write_text(dir, "inclusion", incl.data, incl.len);
    write_text(dir, "consistency", cons.data, cons.len);
    free(incl.data);
    free(cons.data);
}

/* Writes everything the Go checker reads for tree t, signed by s under `origin`. */
static void
write_c_side(c_tree_t *t, const note_signer_t *s, const char *origin, const char *dir)
{
    char *key_path = test_path_join(dir, "verifier.key");
    unlink(key_path);
    assert_int_equal(sigkey_write_verifier(key_path, &s->verifier, NULL), 0);
    free(key_path);
    checkpoint_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.origin, sizeof c.origin, "%s", origin);
    c.size = t->n_leaves;
    assert_int_equal(merkle_range_root(t->h, &t->range, c.root), 0);
    char text[CHECKPOINT_BASE_MAX_BYTES + 1], *note = NULL;
    size_t text_len = 0, note_len = 0;
    assert_int_equal(checkpoint_format(&c, text, sizeof text, &text_len, NULL), 0);
    assert_int_equal(note_sign(s, text, text_len, &note, &note_len, NULL), 0);
    write_text(dir, "checkpoint.note", note, note_len);
    free(note);
    text_buf_t leaves = {0};
    text_append(&leaves, "%s", "");
    for (uint64_t i = 0; i < t->n_leaves; i++) {
        for (size_t k = 0; k < t->leaf_len[i]; k++)
            text_append(&leaves, "%02x", t->leaf[i][k]);
        text_append(&leaves, "\n");
    }
    write_text(dir, "leaves", leaves.data, leaves.len);
    free(leaves.data);
    write_text(dir, "hashes", t->stored, t->n_stored * HB);
    write_proofs(t, dir);
}

static int
run_checker(const interop_t *it, const char *dir, char *out, size_t cap)
{
    char *argv[] = {(char *)it->checker, "check", (char *)dir, NULL};
    return run_program(argv, out, cap);
}

static void
test_interop_go_verifies_c_checkpoints_and_proofs(void **state)
{
    interop_t *it = interop_ready(state);
    static const uint64_t sizes[] = {1, 2, 4, 5, 7, 8, 9, 13, 64, 100, 1000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *dir = test_tmpdir_new("interop");
        assert_non_null(dir);
        note_signer_t s;
        assert_int_equal(note_keygen("stele/interop", &s, NULL), 0);
        c_tree_t *t = c_tree_of(sizes[i]);
        write_c_side(t, &s, "stele/interop", dir);
        char out[4096];
        int rc = run_checker(it, dir, out, sizeof out);
        if (rc != 0)
            fail_msg("Go refused the tree of %llu leaves (exit %d): %s",
                     (unsigned long long)sizes[i], rc, out);
        assert_non_null(strstr(out, "ok: stele/interop: checkpoint of"));
        print_message("%s", out);
        c_tree_free(t);
        note_signer_wipe(&s);
        test_tmpdir_remove(dir);
    }
}

/* FORMAT.md's worked example: key seed 32 x 0x22 named stele/host-a, leaves "a" "b" "c". */
static void
test_interop_go_verifies_the_worked_example(void **state)
{
    interop_t *it = interop_ready(state);
    char *dir = test_tmpdir_new("interop");
    uint8_t seed[NOTE_KEY_BYTES];
    memset(seed, 0x22, sizeof seed);
    note_signer_t s;
    assert_int_equal(note_signer_from_seed("stele/host-a", seed, &s, NULL), 0);
    c_tree_t *t = c_tree_new(3);
    c_tree_append(t, (const uint8_t *)"a", 1);
    c_tree_append(t, (const uint8_t *)"b", 1);
    c_tree_append(t, (const uint8_t *)"c", 1);
    write_c_side(t, &s, "stele/host-a", dir);
    char out[4096];
    int rc = run_checker(it, dir, out, sizeof out);
    if (rc != 0)
        fail_msg("Go refused the worked example (exit %d): %s", rc, out);
    /* The note Go accepted is byte for byte the one FORMAT.md shows (tests/test_trust_format.c
     * checks the document against the C side). */
    char *note = read_text(dir, "checkpoint.note", NULL);
    assert_non_null(strstr(note, "YssPulKxlRm8EFb0gVGd8hsUZNWWW3Lrw2NiRzDptnyDVeMlZEQ1KaB6bd3e"));
    free(note);
    c_tree_free(t);
    note_signer_wipe(&s);
    test_tmpdir_remove(dir);
}

/* Rewrites the C side of a 13-leaf tree, applies `tamper`, and expects the checker to fail
 * saying `message`. */
static void
expect_checker_fails(const interop_t *it, const char *dir, c_tree_t *t, const note_signer_t *s,
                     void (*tamper)(const char *dir), const char *message)
{
    write_c_side(t, s, "stele/interop", dir);
    char out[4096];
    assert_int_equal(run_checker(it, dir, out, sizeof out), 0);
    tamper(dir);
    int rc = run_checker(it, dir, out, sizeof out);
    if (rc == 0 || !strstr(out, message))
        fail_msg("the checker accepted a tampered file or said something else (exit %d): %s "
                 "(want \"%s\")",
                 rc, out, message);
}

/* Changes one byte of a file: to `a`, or to `b` where it is `a` already. */
static void
flip_in_file(const char *dir, const char *name, long from_end, char a, char b)
{
    size_t len = 0;
    char *data = read_text(dir, name, &len);
    size_t at = (size_t)((long)len + from_end);
    data[at] = data[at] == a ? b : a;
    write_text(dir, name, data, len);
    free(data);
}

static void
tamper_signature(const char *dir)
{
    flip_in_file(dir, "checkpoint.note", -10, 'A', 'B'); /* inside the signature's base64 */
}

static void
tamper_stored_hash(const char *dir)
{
    flip_in_file(dir, "hashes", -40, 'A', 'B'); /* a byte of the second-last stored hash */
}

static void
tamper_inclusion_proof(const char *dir)
{
    flip_in_file(dir, "inclusion", -10, 'A', 'B'); /* the last proof's last hash */
}

static void
tamper_consistency_proof(const char *dir)
{
    flip_in_file(dir, "consistency", -20, 'A', 'B');
}

static void
tamper_leaf(const char *dir)
{
    flip_in_file(dir, "leaves", -3, '0', '1'); /* the last leaf's data */
}

static void
test_interop_checker_refuses_tampered_files(void **state)
{
    interop_t *it = interop_ready(state);
    char *dir = test_tmpdir_new("interop");
    note_signer_t s;
    assert_int_equal(note_keygen("stele/interop", &s, NULL), 0);
    c_tree_t *t = c_tree_of(13);
    expect_checker_fails(it, dir, t, &s, tamper_signature, "invalid signature for key");
    expect_checker_fails(it, dir, t, &s, tamper_stored_hash, "differs");
    expect_checker_fails(it, dir, t, &s, tamper_inclusion_proof, "CheckRecord");
    expect_checker_fails(it, dir, t, &s, tamper_consistency_proof, "consistency");
    expect_checker_fails(it, dir, t, &s, tamper_leaf, "differs");
    c_tree_free(t);
    note_signer_wipe(&s);
    test_tmpdir_remove(dir);
}

/* ---- Go to C ---- */

/* Reads "N1 N2 HASH..." lines of a Go proof file; calls each() per line. */
static void
for_each_proof_line(const char *dir, const char *name, c_tree_t *t,
                    void (*each)(c_tree_t *t, const uint64_t n[2], const uint8_t *hashes,
                                 size_t n_hashes))
{
    char *text = read_text(dir, name, NULL);
    unsigned lines = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), lines++) {
        uint64_t n[2];
        uint8_t hashes[(MERKLE_MAX_PROOF_HASHES + 2) * HB];
        size_t n_hashes = 0;
        char *fsave = NULL;
        for (int k = 0; k < 2; k++)
            n[k] = strtoull(strtok_r(k ? NULL : line, " ", &fsave), NULL, 10);
        for (char *f = strtok_r(NULL, " ", &fsave); f; f = strtok_r(NULL, " ", &fsave)) {
            assert_true(n_hashes < MERKLE_MAX_PROOF_HASHES + 2);
            assert_int_equal(base64_decode(f, strlen(f), hashes + n_hashes * HB, HB), HB);
            n_hashes++;
        }
        each(t, n, hashes, n_hashes);
    }
    assert_true(lines > 0);
    free(text);
}

static void
check_go_inclusion(c_tree_t *t, const uint64_t n[2], const uint8_t *hashes, size_t n_hashes)
{
    uint8_t leaf_hash[HB], mine[MERKLE_MAX_PROOF_HASHES * HB];
    struct iovec part = {t->leaf[n[0]], t->leaf_len[n[0]]};
    assert_int_equal(merkle_hash_leaf(t->h, &part, 1, leaf_hash), 0);
    stele_error_t err = {0};
    int rc = merkle_verify_inclusion(t->h, n[0], n[1], leaf_hash, hashes + HB, n_hashes - 1, hashes,
                                     &err);
    if (rc)
        fail_msg("Go's proof of leaf %llu: %s", (unsigned long long)n[0], err.message);
    size_t n_mine = 0;
    merkle_store_t store = {c_tree_read, t};
    assert_int_equal(merkle_prove_inclusion(t->h, &store, n[0], n[1], mine, MERKLE_MAX_PROOF_HASHES,
                                            &n_mine, NULL),
                     0);
    assert_int_equal(n_mine, n_hashes - 1);
    assert_memory_equal(mine, hashes + HB, n_mine * HB);
}

static void
check_go_consistency(c_tree_t *t, const uint64_t n[2], const uint8_t *hashes, size_t n_hashes)
{
    stele_error_t err = {0};
    int rc = merkle_verify_consistency(t->h, n[0], n[1], hashes, hashes + HB, hashes + 2 * HB,
                                       n_hashes - 2, &err);
    if (rc)
        fail_msg("Go's proof from %llu: %s", (unsigned long long)n[0], err.message);
    uint8_t mine[MERKLE_MAX_PROOF_HASHES * HB];
    size_t n_mine = 0;
    merkle_store_t store = {c_tree_read, t};
    assert_int_equal(merkle_prove_consistency(t->h, &store, n[0], n[1], mine,
                                              MERKLE_MAX_PROOF_HASHES, &n_mine, NULL),
                     0);
    assert_int_equal(n_mine, n_hashes - 2);
    assert_memory_equal(mine, hashes + 2 * HB, n_mine * HB);
}

/* The leaves Go wrote, appended to a C tree. */
static c_tree_t *
c_tree_from_go(const char *dir, uint64_t n_leaves)
{
    c_tree_t *t = c_tree_new(n_leaves);
    char *text = read_text(dir, "leaves", NULL);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        uint8_t data[64];
        size_t len = strlen(line) / 2;
        assert_true(len <= sizeof data);
        for (size_t k = 0; k < len; k++) {
            unsigned byte;
            assert_int_equal(sscanf(line + 2 * k, "%2x", &byte), 1);
            data[k] = (uint8_t)byte;
        }
        c_tree_append(t, data, len);
    }
    free(text);
    assert_int_equal(t->n_leaves, n_leaves);
    return t;
}

static void
check_go_keys(const char *dir, note_signer_t *signer, note_verifier_t *verifier)
{
    char *path = test_path_join(dir, "signer.key");
    stele_error_t err = {0};
    if (sigkey_read_signer(path, signer, &err))
        fail_msg("Go's signer key file: %s", err.message);
    free(path);
    path = test_path_join(dir, "verifier.key");
    if (sigkey_read_verifier(path, verifier, &err))
        fail_msg("Go's verifier key file: %s", err.message);
    free(path);
    assert_memory_equal(&signer->verifier, verifier, sizeof *verifier);
    /* The C side formats both strings as Go did. */
    char *go_text = read_text(dir, "signer.key", NULL);
    char mine[NOTE_SIGNER_KEY_MAX_BYTES + 2];
    size_t len = note_signer_format(signer, mine, sizeof mine - 1);
    mine[len] = '\n';
    mine[len + 1] = '\0';
    assert_string_equal(mine, go_text);
    free(go_text);
    go_text = read_text(dir, "verifier.key", NULL);
    len = note_verifier_format(verifier, mine, sizeof mine - 1);
    mine[len] = '\n';
    mine[len + 1] = '\0';
    assert_string_equal(mine, go_text);
    free(go_text);
}

static void
test_interop_c_verifies_go_keys_notes_and_proofs(void **state)
{
    interop_t *it = interop_ready(state);
    const uint64_t size = 21;
    char *dir = test_tmpdir_new("interop");
    char *argv[] = {it->checker, "sign", dir, "go/interop", "21", NULL};
    char out[4096];
    int rc = run_program(argv, out, sizeof out);
    if (rc != 0)
        fail_msg("the Go checker could not sign (exit %d): %s", rc, out);
    note_signer_t signer;
    note_verifier_t verifier;
    check_go_keys(dir, &signer, &verifier);

    size_t note_len = 0;
    char *note = read_text(dir, "checkpoint.note", &note_len);
    note_opened_t opened;
    stele_error_t err = {0};
    if (note_open(note, note_len, &verifier, 1, &opened, &err))
        fail_msg("Go's signed checkpoint: %s", err.message);
    checkpoint_t c;
    assert_int_equal(checkpoint_parse(note, opened.text_len, &c, NULL), 0);
    assert_string_equal(c.origin, "go/interop");
    assert_int_equal(c.size, size);
    /* Ed25519 is deterministic: the C side signs Go's text to Go's bytes. */
    char *mine = NULL;
    size_t mine_len = 0;
    assert_int_equal(note_sign(&signer, note, opened.text_len, &mine, &mine_len, NULL), 0);
    assert_int_equal(mine_len, note_len);
    assert_memory_equal(mine, note, note_len);

    /* Go's leaves give the C side the same stored hashes, root and proofs. */
    c_tree_t *t = c_tree_from_go(dir, size);
    size_t go_hashes_len = 0;
    char *go_hashes = read_text(dir, "hashes", &go_hashes_len);
    assert_int_equal(go_hashes_len, t->n_stored * HB);
    assert_memory_equal(go_hashes, t->stored, go_hashes_len);
    uint8_t root[HB];
    assert_int_equal(merkle_range_root(t->h, &t->range, root), 0);
    assert_memory_equal(root, c.root, HB);
    for_each_proof_line(dir, "inclusion", t, check_go_inclusion);
    for_each_proof_line(dir, "consistency", t, check_go_consistency);

    c_tree_free(t);
    free(go_hashes);
    free(mine);
    free(note);
    note_signer_wipe(&signer);
    test_tmpdir_remove(dir);
}

/* ---- proof bundles of a signed journal ---- */

/* A signed journal of n records over three key epochs (one second each): a rotation at each
 * reopen past the epoch, checkpoints every 7 records. */
static void
make_signed_journal(const char *dir, const char *key, const char *pub, uint64_t n)
{
    stele_error_t err = {0};
    assert_int_equal(stele_keygen(key, pub, "interop/journal", &err), 0);
    char *journal = test_path_join(dir, "journal");
    for (int epoch = 0; epoch < 3; epoch++) {
        stele_options_t o;
        stele_options_init(&o);
        o.signing_key = key;
        o.checkpoint_records = 7;
        o.key_epoch_s = 1;
        o.segment_bytes = 64 * 1024;
        o.max_record_bytes = 4096;
        stele_t *db = NULL;
        if (stele_open(journal, &o, &db, &err))
            fail_msg("open a signed journal: %s", err.message);
        for (uint64_t i = 0; i < n / 3; i++) {
            char event[64];
            int len = snprintf(event, sizeof event, "{\"epoch\":%d,\"i\":%llu}", epoch,
                               (unsigned long long)i);
            assert_int_equal(stele_append_json(db, event, (size_t)len, STELE_WAIT_NONE, NULL, &err),
                             0);
        }
        assert_int_equal(stele_close(db, &err), 0);
        if (epoch < 2)
            sleep(1); /* the next open finds the key past its epoch and rotates */
    }
    free(journal);
}

/* stele prove's bundles of a journal signed over several key epochs, checked by Go's
 * sumdb/note (the key statements, one after the other from the anchor, then the checkpoint)
 * and sumdb/tlog (CheckRecord of the leaf data's hash); a bundle with one inclusion hash
 * changed is refused by Go as by stele_verify_proof. */
static void
test_interop_go_verifies_stele_proof_bundles(void **state)
{
    interop_t *it = interop_ready(state);
    char *dir = test_tmpdir_new("interop-proof");
    char *key = test_path_join(dir, "signer.key"), *pub = test_path_join(dir, "verifier.key");
    char *journal = test_path_join(dir, "journal");
    make_signed_journal(dir, key, pub, 300);
    const uint64_t seqs[] = {1, 100, 150, 299, 300};
    for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
        char *json = NULL;
        size_t len = 0;
        stele_error_t err = {0};
        if (stele_prove(journal, NULL, seqs[i], &json, &len, &err))
            fail_msg("prove seq %llu: %s", (unsigned long long)seqs[i], err.message);
        assert_int_equal(stele_verify_proof(json, len, pub, NULL, &err), 0);
        write_text(dir, "bundle.json", json, len);
        char *path = test_path_join(dir, "bundle.json");
        char *argv[] = {it->checker, "bundle", path, pub, NULL};
        char out[4096];
        int rc = run_program(argv, out, sizeof out);
        if (rc != 0)
            fail_msg("Go refused the bundle of seq %llu (exit %d): %s", (unsigned long long)seqs[i],
                     rc, out);
        if (seqs[i] == 300) /* signed in the third epoch: the chain's three statements */
            assert_non_null(strstr(out, "3 key statements"));
        /* One inclusion hash altered: both checkers refuse it. */
        char *hash = strstr(json, "\"inclusion\":[\"");
        assert_non_null(hash);
        hash += strlen("\"inclusion\":[\"");
        hash[0] = hash[0] == 'A' ? 'B' : 'A';
        write_text(dir, "bundle.json", json, len);
        assert_int_equal(stele_verify_proof(json, len, pub, NULL, &err), STELE_ECORRUPT);
        assert_int_not_equal(run_program(argv, out, sizeof out), 0);
        free(path);
        stele_json_free(json);
    }
    free(journal);
    free(key);
    free(pub);
    test_tmpdir_remove(dir);
}

int
main(void)
{
    interop_t it;
    memset(&it, 0, sizeof it);
    interop_find_checker(&it);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_interop_go_verifies_c_checkpoints_and_proofs, &it),
        cmocka_unit_test_prestate(test_interop_go_verifies_the_worked_example, &it),
        cmocka_unit_test_prestate(test_interop_checker_refuses_tampered_files, &it),
        cmocka_unit_test_prestate(test_interop_c_verifies_go_keys_notes_and_proofs, &it),
        cmocka_unit_test_prestate(test_interop_go_verifies_stele_proof_bundles, &it),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (it.go_missing) {
        fprintf(stderr, "skipped: %s\n", it.why);
        return EXIT_SKIP;
    }
    return rc;
}
