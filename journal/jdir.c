/*
 * jdir.c: opening the journal directory and checking who could change it (jdir.h).
 *
 * The check looks at what the open descriptor reaches, not at the path string: it walks up
 * from the directory through "..", so the chain examined is the one the kernel resolved,
 * whatever links the path went through. It reads metadata only (fstat, and O_PATH opens of
 * the ancestors, which need no read permission), directly rather than through the I/O
 * table: nothing it does can lose data, and a failure refuses the open. No state.
 */
#include "jdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jerr.h"
#include "journal.h"

/* A chain deeper than this is not a file system anyone runs a journal on; the walk stops
 * rather than loop on a file system whose ".." never reaches its root. */
#define JDIR_MAX_DEPTH 256
/* What the hints say about the escape hatch, in every form it takes. */
#define JDIR_HINT_OPTION "or set allow_unsafe_dir (--allow-unsafe-dir true)"
#define JDIR_GROUP_OTHER_WRITE (S_IWGRP | S_IWOTH)

/* "uid 1001 (alice)", or "uid 1001" for a uid without a name. */
static const char *
jdir_user_text(uid_t uid, char *buf, size_t cap)
{
    struct passwd pw, *found = NULL;
    char names[1024];
    if (getpwuid_r(uid, &pw, names, sizeof names, &found) == 0 && found)
        snprintf(buf, cap, "uid %u (%s)", (unsigned)uid, found->pw_name);
    else
        snprintf(buf, cap, "uid %u", (unsigned)uid);
    return buf;
}

int
jdir_uid_is_trusted(uid_t uid, uid_t journal_owner)
{
    return uid == 0 || uid == geteuid() || uid == journal_owner;
}

/* The path the kernel resolved for dir_fd, or `fallback` where /proc cannot say. */
static void
jdir_real_path(int dir_fd, const char *fallback, char *out, size_t cap)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", dir_fd);
    ssize_t n = readlink(link, out, cap - 1);
    if (n <= 0 || out[0] != '/') {
        snprintf(out, cap, "%s", fallback);
        return;
    }
    out[n] = '\0';
}

/* The ancestor `depth` levels above `real` ("/a/b/c", 1 gives "/a/b"). */
static void
jdir_ancestor_path(const char *real, int depth, char *out, size_t cap)
{
    snprintf(out, cap, "%s", real);
    for (int i = 0; i < depth; i++) {
        char *slash = strrchr(out, '/');
        if (!slash) { /* a relative path /proc could not resolve */
            snprintf(out, cap, "a directory above %.200s", real);
            return;
        }
        if (slash == out) {
            out[1] = '\0';
            return;
        }
        *slash = '\0';
    }
}

int
jdir_open(const journal_io_t *io, const char *path, int *fd_out, stele_error_t *err)
{
    int fd = io->open_dir(io->ctx, AT_FDCWD, path);
    if (fd >= 0) {
        *fd_out = fd;
        return 0;
    }
    if (fd != -ENOTDIR)
        return fd;
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode))
        return jerr_set(err, STELE_ENOTJOURNAL, NULL, "%s is not a directory", path);
    char target[PATH_MAX], hint[STELE_ERROR_HINT_BYTES];
    if (!realpath(path, target))
        snprintf(target, sizeof target, "a missing target");
    snprintf(hint, sizeof hint, "give the directory itself: %.120s", target);
    return jerr_set(err, STELE_EUNSAFE, hint,
                    "journal directory %s is a symbolic link; stele does not follow links to or "
                    "in a journal",
                    path);
}

int
journal_dir_open(const char *dir, int *fd_out, stele_error_t *err)
{
    return jdir_open(journal_io_posix(), dir, fd_out, err);
}

/* The directory itself: its owner (writers) and its mode. */
static int
jdir_check_self(const struct stat *st, const char *path, jdir_role_t role, stele_error_t *err)
{
    char who[96], me[96];
    if (role == JDIR_WRITER && st->st_uid != geteuid() && st->st_uid != 0)
        return jerr_set(err, STELE_EUNSAFE,
                        "run stele as the directory's owner, chown it, " JDIR_HINT_OPTION,
                        "journal directory %s is owned by %s, not by %s who runs stele, nor by "
                        "root: its owner could change the journal",
                        path, jdir_user_text(st->st_uid, who, sizeof who),
                        jdir_user_text(geteuid(), me, sizeof me));
    if (st->st_mode & JDIR_GROUP_OTHER_WRITE)
        return jerr_set(err, STELE_EUNSAFE, "chmod go-w the directory, " JDIR_HINT_OPTION,
                        "journal directory %s has mode %04o: %s can change the journal", path,
                        (unsigned)(st->st_mode & 07777),
                        (st->st_mode & S_IWOTH) ? "every user" : "its group");
    return 0;
}

/* One ancestor of the journal directory, `depth` levels up. A sticky directory others may
 * write is fine: there only an entry's owner can rename or remove it, and the entry below
 * (the journal directory, or an ancestor checked before this one) has a trusted owner. */
static int
jdir_check_parent(const struct stat *parent, uid_t owner, const char *real, int depth,
                  const char *path, stele_error_t *err)
{
    char where[PATH_MAX], who[96];
    int is_trusted = jdir_uid_is_trusted(parent->st_uid, owner);
    if (is_trusted && (!(parent->st_mode & JDIR_GROUP_OTHER_WRITE) || (parent->st_mode & S_ISVTX)))
        return 0;
    jdir_ancestor_path(real, depth, where, sizeof where);
    if (!is_trusted)
        return jerr_set(err, STELE_EUNSAFE,
                        "chown that directory to root or the journal's owner, move the "
                        "journal, " JDIR_HINT_OPTION,
                        "%s, which holds journal directory %s, is owned by %s, who could replace "
                        "the journal",
                        where, path, jdir_user_text(parent->st_uid, who, sizeof who));
    return jerr_set(err, STELE_EUNSAFE,
                    "chmod go-w (or +t) that directory, move the journal, " JDIR_HINT_OPTION,
                    "%s, which holds journal directory %s, has mode %04o: others could replace "
                    "the journal",
                    where, path, (unsigned)(parent->st_mode & 07777));
}

/* Walks from dir_fd up through ".." to the root, checking each ancestor of what dir_fd is
 * (`self`) for a journal owned by `owner`. */
static int
jdir_check_ancestors(int dir_fd, const struct stat *self, uid_t owner, const char *path,
                     stele_error_t *err)
{
    char real[PATH_MAX], ebuf[64];
    jdir_real_path(dir_fd, path, real, sizeof real);
    struct stat child = *self;
    int cur = dir_fd, rc = 0;
    for (int depth = 1; depth <= JDIR_MAX_DEPTH; depth++) {
        int parent = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        int saved = errno;
        if (cur != dir_fd)
            close(cur);
        struct stat st;
        if (parent < 0 || fstat(parent, &st) != 0) {
            rc = -(parent < 0 ? saved : errno);
            if (parent >= 0)
                close(parent);
            return jerr_set(err, rc, NULL, "could not examine the directories holding %s: %s", path,
                            jerr_errno_text(rc, ebuf, sizeof ebuf));
        }
        if (st.st_dev == child.st_dev && st.st_ino == child.st_ino) {
            close(parent); /* the root: its ".." is itself */
            return 0;
        }
        rc = jdir_check_parent(&st, owner, real, depth, path, err);
        if (rc) {
            close(parent);
            return rc;
        }
        child = st;
        cur = parent;
    }
    if (cur != dir_fd)
        close(cur);
    return jerr_set(err, -ELOOP, NULL, "%s is more than %d directories deep", path, JDIR_MAX_DEPTH);
}

int
jdir_check(int dir_fd, const char *path, jdir_role_t role, stele_error_t *err)
{
    struct stat st;
    char ebuf[64];
    if (fstat(dir_fd, &st) != 0) {
        int rc = -errno;
        return jerr_set(err, rc, NULL, "could not examine journal directory %s: %s", path,
                        jerr_errno_text(rc, ebuf, sizeof ebuf));
    }
    int rc = jdir_check_self(&st, path, role, err);
    return rc ? rc : jdir_check_ancestors(dir_fd, &st, st.st_uid, path, err);
}

/* The directory that holds `path`'s entry: "a/b" and "a/b/" give "a", "/b" gives "/", "b"
 * gives ".". */
static void
jdir_parent_path(const char *path, char *out, size_t cap)
{
    snprintf(out, cap, "%s", path);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash)
        snprintf(out, cap, ".");
    else if (slash == out)
        slash[1] = '\0';
    else
        *slash = '\0';
}

int
jdir_check_new(const char *path, stele_error_t *err)
{
    char parent[PATH_MAX], real[PATH_MAX];
    jdir_parent_path(path, parent, sizeof parent);
    int fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0; /* making the directory will fail, and say why */
    struct stat st;
    int rc = fstat(fd, &st) == 0 ? 0 : -errno;
    if (rc) {
        char ebuf[64];
        close(fd);
        return jerr_set(err, rc, NULL, "could not examine the directories holding %s: %s", path,
                        jerr_errno_text(rc, ebuf, sizeof ebuf));
    }
    jdir_real_path(fd, parent, real, sizeof real);
    rc = jdir_check_parent(&st, geteuid(), real, 0, path, err);
    if (!rc)
        rc = jdir_check_ancestors(fd, &st, geteuid(), path, err);
    close(fd);
    return rc;
}
