/*
 * sigkey.c: reading, creating and replacing key files (sigkey.h). Plain POSIX calls: key
 * files are not journal data, and the checks they need (O_NOFOLLOW, fstat of mode and
 * owner) are not in the journal's I/O table. No state. Buffers that held a signer key
 * string are wiped with OPENSSL_cleanse before they go out of scope.
 */
#include "sigkey.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "jerr.h"

#define SIGKEY_SIGNER_MODE 0600
#define SIGKEY_VERIFIER_MODE 0644
#define SIGKEY_NEW_SUFFIX ".new"

static int
sys_failed(stele_error_t *err, int neg_errno, const char *call, const char *path)
{
    char buf[128];
    return jerr_set(err, neg_errno, NULL, "could not %s key file %s: %s", call, path,
                    jerr_errno_text(neg_errno, buf, sizeof buf));
}

/* fsyncs the directory holding path, so a create or rename in it is durable. */
static int
sync_parent_dir(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else if (slash == path) {
        strcpy(dir, "/");
    } else {
        size_t len = (size_t)(slash - path);
        if (len >= sizeof dir)
            return -ENAMETOOLONG;
        memcpy(dir, path, len);
        dir[len] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) ? -errno : 0;
    close(fd);
    return rc;
}

static int
write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Creates path holding content[0, len), synced. Leaves nothing behind on failure. */
static int
create_file(const char *path, mode_t mode, const char *content, size_t len, int sync_dir,
            stele_error_t *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno == EEXIST)
        return jerr_set(err, -EEXIST, "choose another path, or move the existing file away",
                        "key file %s already exists", path);
    if (fd < 0)
        return sys_failed(err, -errno, "create", path);
    const char *call = "write";
    int rc = write_all(fd, content, len);
    if (rc == 0 && fsync(fd) != 0) {
        rc = -errno;
        call = "sync";
    }
    if (close(fd) != 0 && rc == 0) {
        rc = -errno;
        call = "close";
    }
    if (rc == 0 && sync_dir && (rc = sync_parent_dir(path)) != 0)
        call = "sync the directory of";
    if (rc) {
        unlink(path);
        return sys_failed(err, rc, call, path);
    }
    return 0;
}

int
sigkey_write_signer(const char *path, const note_signer_t *s, stele_error_t *err)
{
    char text[NOTE_SIGNER_KEY_MAX_BYTES + 2];
    size_t len = note_signer_format(s, text, sizeof text - 1);
    if (len == 0)
        return jerr_set(err, STELE_EINVAL, NULL, "signer key of %s does not format", path);
    text[len++] = '\n';
    int rc = create_file(path, SIGKEY_SIGNER_MODE, text, len, 1, err);
    OPENSSL_cleanse(text, sizeof text);
    return rc;
}

int
sigkey_write_verifier(const char *path, const note_verifier_t *v, stele_error_t *err)
{
    char text[NOTE_VERIFIER_KEY_MAX_BYTES + 2];
    size_t len = note_verifier_format(v, text, sizeof text - 1);
    if (len == 0)
        return jerr_set(err, STELE_EINVAL, NULL, "verifier key of %s does not format", path);
    text[len++] = '\n';
    return create_file(path, SIGKEY_VERIFIER_MODE, text, len, 1, err);
}

/* The checks fstat answers for a key file opened as fd. */
static int
check_key_file(int fd, const char *path, int is_signer, stele_error_t *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return sys_failed(err, -errno, "stat", path);
    if (!S_ISREG(st.st_mode))
        return jerr_set(err, STELE_EINVAL, NULL, "key file %s is not a regular file", path);
    if (st.st_size <= 0 || st.st_size > SIGKEY_FILE_MAX_BYTES)
        return jerr_set(err, STELE_EINVAL, NULL,
                        "key file %s is %lld bytes; a key file holds one key string (1 to %d "
                        "bytes)",
                        path, (long long)st.st_size, SIGKEY_FILE_MAX_BYTES);
    if (is_signer && (st.st_mode & 077))
        return jerr_set(err, STELE_EINVAL, "make it private: chmod 600 <file>",
                        "private key file %s is open to group or others (mode %04o)", path,
                        (unsigned)(st.st_mode & 07777));
    if (is_signer && st.st_uid != geteuid() && st.st_uid != 0)
        return jerr_set(err, STELE_EINVAL, NULL,
                        "private key file %s belongs to uid %u, not to this user (%u)", path,
                        (unsigned)st.st_uid, (unsigned)geteuid());
    return 0;
}

/* Reads the key file into buf (NUL-terminated, one trailing newline dropped). */
static int
read_key_file(const char *path, int is_signer, char *buf, size_t cap, size_t *len_out,
              stele_error_t *err)
{
    /* O_NONBLOCK: a FIFO in the key's place is refused by the checks, not waited on. */
    int fd =
        open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC | (is_signer ? O_NOFOLLOW : 0));
    if (fd < 0 && errno == ELOOP && is_signer)
        return jerr_set(err, STELE_EINVAL, "give the path of the key file itself",
                        "private key file %s is a symbolic link", path);
    if (fd < 0)
        return sys_failed(err, -errno, "open", path);
    int rc = check_key_file(fd, path, is_signer, err);
    size_t len = 0;
    while (rc == 0 && len < cap - 1) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = sys_failed(err, -errno, "read", path);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (rc)
        return rc;
    if (len > 0 && buf[len - 1] == '\n')
        len--;
    buf[len] = '\0';
    *len_out = len;
    return 0;
}

/* Prefixes a parse error with the file's path. */
static int
key_file_invalid(stele_error_t *err, const char *path, int rc, const stele_error_t *why)
{
    return jerr_set(err, rc, NULL, "key file %s: %s", path, why->message);
}

/* A signer key file's text: the key string, then optionally "\nepoch <E>" (FORMAT.md
 * section 11.4). Splits off the epoch line into *epoch (0 when absent). */
static int
split_epoch_line(const char *path, char *text, size_t *len, uint64_t *epoch, stele_error_t *err)
{
    *epoch = 0;
    char *nl = memchr(text, '\n', *len);
    if (!nl)
        return 0;
    const char *line = nl + 1;
    size_t line_len = *len - (size_t)(line - text);
    uint64_t v = 0;
    int ok = line_len > 6 && line_len <= 6 + 20 && memcmp(line, "epoch ", 6) == 0 &&
             (line_len == 7 || line[6] != '0');
    for (size_t i = 6; ok && i < line_len; i++) {
        ok = line[i] >= '0' && line[i] <= '9' && v <= (UINT64_MAX - (uint64_t)(line[i] - '0')) / 10;
        v = v * 10 + (uint64_t)(line[i] - '0');
    }
    if (!ok)
        return jerr_set(err, STELE_EINVAL, NULL, "key file %s: line 2 is not \"epoch <number>\"",
                        path);
    *epoch = v;
    *nl = '\0';
    *len = (size_t)(nl - text);
    return 0;
}

int
sigkey_read_signer_epoch(const char *path, note_signer_t *out, uint64_t *epoch_out,
                         stele_error_t *err)
{
    char text[SIGKEY_FILE_MAX_BYTES + 1];
    size_t len = 0;
    uint64_t epoch = 0;
    int rc = read_key_file(path, 1, text, sizeof text, &len, err);
    if (rc == 0)
        rc = split_epoch_line(path, text, &len, &epoch, err);
    if (rc == 0) {
        stele_error_t why = {0};
        note_signer_t s;
        rc = note_signer_parse(text, len, &s, &why);
        if (rc)
            key_file_invalid(err, path, rc, &why);
        else {
            *out = s;
            if (epoch_out)
                *epoch_out = epoch;
        }
        note_signer_wipe(&s);
    }
    OPENSSL_cleanse(text, sizeof text);
    return rc;
}

int
sigkey_read_signer(const char *path, note_signer_t *out, stele_error_t *err)
{
    return sigkey_read_signer_epoch(path, out, NULL, err);
}

size_t
sigkey_format_signer(const note_signer_t *s, uint64_t epoch, char *out, size_t cap)
{
    size_t len = note_signer_format(s, out, cap);
    if (len == 0)
        return 0;
    int n = snprintf(out + len, cap - len, "\nepoch %" PRIu64 "\n", epoch);
    if (n < 0 || (size_t)n >= cap - len) {
        OPENSSL_cleanse(out, cap);
        return 0;
    }
    return len + (size_t)n;
}

int
sigkey_read_verifier(const char *path, note_verifier_t *out, stele_error_t *err)
{
    char text[SIGKEY_FILE_MAX_BYTES + 1];
    size_t len = 0;
    int rc = read_key_file(path, 0, text, sizeof text, &len, err);
    if (rc == 0 && strncmp(text, "PRIVATE+KEY+", 12) == 0)
        rc = jerr_set(err, STELE_EINVAL, "give the public key file (keygen's --pub)",
                      "key file %s holds a private key where a public key is expected", path);
    if (rc == 0) {
        stele_error_t why = {0};
        rc = note_verifier_parse(text, len, out, &why);
        if (rc)
            key_file_invalid(err, path, rc, &why);
    }
    OPENSSL_cleanse(text, sizeof text);
    return rc;
}

/* Overwrites the file open as fd with zeros, to its end, and syncs it. */
static int
scrub_file(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    char zeros[SIGKEY_FILE_MAX_BYTES] = {0};
    for (off_t at = 0; at < st.st_size;) {
        size_t n =
            (size_t)(st.st_size - at) < sizeof zeros ? (size_t)(st.st_size - at) : sizeof zeros;
        ssize_t w = pwrite(fd, zeros, n, at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        at += w;
    }
    return fdatasync(fd) ? -errno : 0;
}

int
sigkey_replace_signer(const char *path, const note_signer_t *s, stele_error_t *err)
{
    char new_path[PATH_MAX];
    if (snprintf(new_path, sizeof new_path, "%s%s", path, SIGKEY_NEW_SUFFIX) >=
        (int)sizeof new_path)
        return sys_failed(err, -ENAMETOOLONG, "name", path);
    if (unlink(new_path) != 0 && errno != ENOENT)
        return sys_failed(err, -errno, "remove the leftover", new_path);
    char text[NOTE_SIGNER_KEY_MAX_BYTES + 2];
    size_t len = note_signer_format(s, text, sizeof text - 1);
    if (len == 0)
        return jerr_set(err, STELE_EINVAL, NULL, "signer key of %s does not format", path);
    text[len++] = '\n';
    int rc = create_file(new_path, SIGKEY_SIGNER_MODE, text, len, 0, err);
    OPENSSL_cleanse(text, sizeof text);
    if (rc)
        return rc;
    /* Held open across the rename: the old key's bytes stay reachable to be scrubbed. */
    int old_fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (old_fd < 0 && errno != ENOENT) {
        rc = sys_failed(err, -errno, "open", path);
    } else if (rename(new_path, path) != 0) {
        rc = sys_failed(err, -errno, "rename the new key over", path);
    } else if ((rc = sync_parent_dir(path)) != 0) {
        rc = sys_failed(err, rc, "sync the directory of", path);
    } else if (old_fd >= 0 && (rc = scrub_file(old_fd)) != 0) {
        rc = sys_failed(err, rc, "scrub the replaced", path);
    }
    if (old_fd >= 0)
        close(old_fd);
    if (rc && access(new_path, F_OK) == 0)
        unlink(new_path);
    return rc;
}
