/*
 * keychain.c: KEYS and the signer key files of a signed journal (keychain.h). Every write
 * goes through the journal's I/O table (fault loops number these calls too); key bytes pass
 * only through buffers wiped before they go out of scope. No state; the writer calls these
 * under its own lock (journal_seal.c), verify and prove read KEYS from any process.
 */
#include "keychain.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "format.h"
#include "jerr.h"
#include "record.h"
#include "sigkey.h"

#define KEYCHAIN_KEY_MODE 0600
#define KEYCHAIN_NEW_SUFFIX ".new"

static int
keychain_failed(stele_error_t *err, int rc, const char *what, const char *path)
{
    char ebuf[64];
    return jerr_set(err, rc, NULL, "could not %s %s: %s", what, path,
                    jerr_errno_text(rc, ebuf, sizeof ebuf));
}

/* A key file's directory, open, and its name in it: key files live outside the journal, and
 * are reached like the journal's own files, relative to a descriptor. */
typedef struct keychain_place {
    int dir_fd;
    char name[NAME_MAX + 1];
} keychain_place_t;

static int
keychain_place_open(const journal_io_t *io, const char *path, keychain_place_t *p)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    char dir[PATH_MAX];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (!*name || strlen(name) > NAME_MAX)
        return -ENAMETOOLONG;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->dir_fd = io->open_dir(io->ctx, AT_FDCWD, dir);
    return p->dir_fd < 0 ? p->dir_fd : 0;
}

static void
keychain_place_close(const journal_io_t *io, keychain_place_t *p)
{
    if (p->dir_fd >= 0)
        io->close(io->ctx, p->dir_fd);
    p->dir_fd = -1;
}

/* ---- KEYS ---- */

/* Reads the whole file open as fd into *buf. */
static int
keychain_slurp(const journal_io_t *io, int fd, uint8_t **buf, uint64_t *len)
{
    off_t size = 0;
    int rc = io->file_size(io->ctx, fd, &size);
    if (rc)
        return rc;
    *buf = malloc(size > 0 ? (size_t)size : 1);
    if (!*buf)
        return -ENOMEM;
    ssize_t got = io->pread(io->ctx, fd, *buf, (size_t)size, 0);
    if (got < 0) {
        free(*buf);
        *buf = NULL;
        return (int)got;
    }
    *len = (uint64_t)got;
    return 0;
}

/* Takes the complete statement frame at off into kc. Returns 1 when there is one, 0 at the
 * end of the statements (kc->why says why, unless the file ends there), or a negative code. */
static int
keychain_take(keychain_t *kc, const uint8_t *buf, uint64_t len, uint64_t off, stele_error_t *err)
{
    record_view_t v;
    record_status_t st = record_decode(2, buf + off, (size_t)(len - off), len - off, off, &v);
    if (st != RECORD_VALID) {
        snprintf(kc->why, sizeof kc->why, "offset %" PRIu64 ": %s", off, record_status_name(st));
        return 0;
    }
    if (!v.is_meta || v.payload[0] != META_TYPE_KEY || !(v.flags & FRAME_FLAG_BATCH_END))
        return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                        "KEYS offset %" PRIu64 ": not a key statement frame", off);
    keychain_entry_t e = {.payload_len = v.payload_len, .tree_size = v.seq, .offset = off};
    int rc = meta_read_unsigned(v.payload, v.payload_len, &e.st, err);
    if (rc)
        return rc;
    keychain_entry_t *grown = realloc(kc->entries, (kc->n + 1) * sizeof *grown);
    e.payload = malloc(v.payload_len);
    if (!grown || !e.payload) {
        if (grown)
            kc->entries = grown;
        free(e.payload);
        return jerr_set(err, -ENOMEM, NULL, "out of memory reading KEYS");
    }
    memcpy(e.payload, v.payload, v.payload_len);
    kc->entries = grown;
    kc->entries[kc->n++] = e;
    kc->valid_bytes = off + v.frame_bytes;
    return 1;
}

int
keychain_read(const journal_io_t *io, int dir_fd, keychain_t *kc, stele_error_t *err)
{
    memset(kc, 0, sizeof *kc);
    int fd = io->open_file(io->ctx, dir_fd, KEYS_NAME, JOURNAL_IO_READ, 0);
    if (fd == -ENOENT)
        return fd;
    if (fd < 0)
        return keychain_failed(err, fd, "open", KEYS_NAME);
    uint8_t *buf = NULL;
    int rc = keychain_slurp(io, fd, &buf, &kc->file_bytes);
    io->close(io->ctx, fd);
    if (rc)
        return keychain_failed(err, rc, "read", KEYS_NAME);
    for (uint64_t off = 0; off < kc->file_bytes && rc >= 0;) {
        rc = keychain_take(kc, buf, kc->file_bytes, off, err);
        if (rc <= 0)
            break;
        off = kc->valid_bytes;
    }
    free(buf);
    if (rc < 0) {
        keychain_free(kc);
        return rc;
    }
    return 0;
}

void
keychain_free(keychain_t *kc)
{
    if (!kc)
        return;
    for (size_t i = 0; i < kc->n; i++)
        free(kc->entries[i].payload);
    free(kc->entries);
    memset(kc, 0, sizeof *kc);
}

int
keychain_append(const journal_io_t *io, int dir_fd, unsigned file_mode, uint64_t at,
                const uint8_t *frame, size_t frame_len, stele_error_t *err)
{
    const char *path = KEYS_NAME;
    int rc = 0;
    int is_new = at == 0;
    int flags = JOURNAL_IO_WRITE | (is_new ? JOURNAL_IO_CREATE | JOURNAL_IO_EXCLUSIVE : 0);
    if (is_new && (rc = io->unlink(io->ctx, dir_fd, path)) != 0 && rc != -ENOENT)
        return keychain_failed(err, rc, "remove the empty", path);
    int fd = io->open_file(io->ctx, dir_fd, path, flags, (mode_t)file_mode);
    if (fd < 0)
        return keychain_failed(err, fd, is_new ? "create" : "open", path);
    const char *what = "truncate";
    rc = io->truncate(io->ctx, fd, (off_t)at);
    struct iovec iov = {.iov_base = (void *)frame, .iov_len = frame_len};
    if (!rc && (what = "write", rc = io->pwritev(io->ctx, fd, &iov, 1, (off_t)at)) == 0)
        what = "sync", rc = io->fsync(io->ctx, fd);
    int close_rc = io->close(io->ctx, fd);
    if (!rc && close_rc)
        what = "close", rc = close_rc;
    if (!rc && is_new)
        what = "sync the directory of", rc = io->sync_dir(io->ctx, dir_fd);
    return rc ? keychain_failed(err, rc, what, path) : 0;
}

/* ---- key files ---- */

int
keychain_side_path(char *out, size_t cap, const char *key_path, const char *suffix)
{
    int n = snprintf(out, cap, "%s%s", key_path, suffix);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Creates `name` in p's directory holding text, synced (the directory is the caller's).
 * Nothing is left there on failure. `path` names it in messages. */
static int
keychain_create_file(const journal_io_t *io, const keychain_place_t *p, const char *name,
                     const char *path, const char *text, size_t len, stele_error_t *err)
{
    int rc = io->unlink(io->ctx, p->dir_fd, name); /* a leftover of an interrupted write */
    if (rc && rc != -ENOENT)
        return keychain_failed(err, rc, "remove the leftover", path);
    int fd = io->open_file(io->ctx, p->dir_fd, name,
                           JOURNAL_IO_WRITE | JOURNAL_IO_CREATE | JOURNAL_IO_EXCLUSIVE,
                           KEYCHAIN_KEY_MODE);
    if (fd < 0)
        return keychain_failed(err, fd, "create key file", path);
    struct iovec iov = {.iov_base = (void *)text, .iov_len = len};
    const char *what = "write key file";
    rc = io->pwritev(io->ctx, fd, &iov, 1, 0);
    if (!rc)
        what = "sync key file", rc = io->fsync(io->ctx, fd);
    int close_rc = io->close(io->ctx, fd);
    if (!rc && close_rc)
        what = "close key file", rc = close_rc;
    if (rc) {
        io->unlink(io->ctx, p->dir_fd, name);
        return keychain_failed(err, rc, what, path);
    }
    return 0;
}

static int
keychain_sync_dir(const journal_io_t *io, const keychain_place_t *p, const char *path,
                  stele_error_t *err)
{
    int rc = io->sync_dir(io->ctx, p->dir_fd);
    return rc ? keychain_failed(err, rc, "sync the directory of", path) : 0;
}

int
keychain_write_key(const journal_io_t *io, const char *path, const note_signer_t *s, uint64_t epoch,
                   stele_error_t *err)
{
    keychain_place_t p;
    int rc = keychain_place_open(io, path, &p);
    if (rc)
        return keychain_failed(err, rc, "open the directory of", path);
    char text[SIGKEY_FILE_MAX_BYTES];
    size_t len = sigkey_format_signer(s, epoch, text, sizeof text);
    rc = len ? keychain_create_file(io, &p, p.name, path, text, len, err)
             : jerr_set(err, STELE_EINVAL, NULL, "signer key of %s does not format", path);
    OPENSSL_cleanse(text, sizeof text);
    if (!rc)
        rc = keychain_sync_dir(io, &p, path, err);
    keychain_place_close(io, &p);
    return rc;
}

/* Overwrites the file open as fd, to its end, with zeros, and syncs it. */
static int
keychain_scrub(const journal_io_t *io, int fd)
{
    off_t size = 0;
    int rc = io->file_size(io->ctx, fd, &size);
    if (rc || size <= 0)
        return rc;
    uint8_t zeros[SIGKEY_FILE_MAX_BYTES] = {0};
    size_t n = (size_t)size < sizeof zeros ? (size_t)size : sizeof zeros;
    struct iovec iov = {.iov_base = zeros, .iov_len = n};
    rc = io->pwritev(io->ctx, fd, &iov, 1, 0);
    return rc ? rc : io->fdatasync(io->ctx, fd);
}

/* The rename of <name>.new over name, with the old key's bytes scrubbed once it is durable. */
static int
keychain_swap_in(const journal_io_t *io, const keychain_place_t *p, const char *new_name,
                 const char *path, stele_error_t *err)
{
    /* Held open across the rename: the old key's bytes stay reachable to be scrubbed. */
    int old_fd = io->open_file(io->ctx, p->dir_fd, p->name, JOURNAL_IO_WRITE, 0);
    if (old_fd < 0 && old_fd != -ENOENT) {
        io->unlink(io->ctx, p->dir_fd, new_name);
        return keychain_failed(err, old_fd, "open key file", path);
    }
    int rc = io->rename(io->ctx, p->dir_fd, new_name, p->name);
    if (rc) {
        io->unlink(io->ctx, p->dir_fd, new_name);
        rc = keychain_failed(err, rc, "rename the new key over", path);
    } else if ((rc = keychain_sync_dir(io, p, path, err)) == 0 && old_fd >= 0 &&
               (rc = keychain_scrub(io, old_fd)) != 0) {
        rc = keychain_failed(err, rc, "scrub the replaced key file", path);
    }
    if (old_fd >= 0)
        io->close(io->ctx, old_fd);
    return rc;
}

int
keychain_replace_key(const journal_io_t *io, const char *key_path, const note_signer_t *s,
                     uint64_t epoch, stele_error_t *err)
{
    keychain_place_t p;
    int rc = keychain_place_open(io, key_path, &p);
    if (rc)
        return keychain_failed(err, rc, "open the directory of", key_path);
    char new_name[NAME_MAX + 1];
    if (snprintf(new_name, sizeof new_name, "%s%s", p.name, KEYCHAIN_NEW_SUFFIX) >=
        (int)sizeof new_name) {
        keychain_place_close(io, &p);
        return keychain_failed(err, -ENAMETOOLONG, "name", key_path);
    }
    char text[SIGKEY_FILE_MAX_BYTES];
    size_t len = sigkey_format_signer(s, epoch, text, sizeof text);
    rc = len ? keychain_create_file(io, &p, new_name, key_path, text, len, err)
             : jerr_set(err, STELE_EINVAL, NULL, "signer key of %s does not format", key_path);
    OPENSSL_cleanse(text, sizeof text);
    if (!rc)
        rc = keychain_swap_in(io, &p, new_name, key_path, err);
    keychain_place_close(io, &p);
    return rc;
}

int
keychain_remove(const journal_io_t *io, const char *path, stele_error_t *err)
{
    keychain_place_t p;
    int rc = keychain_place_open(io, path, &p);
    if (rc)
        return keychain_failed(err, rc, "open the directory of", path);
    rc = io->unlink(io->ctx, p.dir_fd, p.name);
    if (rc == -ENOENT)
        rc = 0;
    else if (rc)
        rc = keychain_failed(err, rc, "remove", path);
    else
        rc = keychain_sync_dir(io, &p, path, err);
    keychain_place_close(io, &p);
    return rc;
}
