/*
 * jdir.h: the journal directory as a descriptor, and the check that nobody but its owner and
 * root can change it (FORMAT.md section 1, "Who may change a journal").
 *
 * Every file of a journal is reached relative to the descriptor jdir_open returns (io.h), so
 * the path is resolved once. jdir_check then asks, like OpenSSH's StrictModes, whether
 * anyone else could change what that descriptor reaches: write into the directory, or
 * replace it by renaming an entry in one of its ancestors.
 */
#ifndef STELE_JOURNAL_JDIR_H
#define STELE_JOURNAL_JDIR_H

#include <stddef.h>
#include <sys/types.h>

#include "io.h"
#include "stele.h"

/* Who opens the journal: the writer must also own it (or run as root over a root-owned
 * one); a reader may read another user's journal. */
typedef enum jdir_role {
    JDIR_WRITER = 0,
    JDIR_READER = 1,
} jdir_role_t;

/*
 * Opens `path` as a journal directory through io->open_dir. Returns 0 with *fd_out;
 * -ENOENT (err untouched: the caller may create it); STELE_EUNSAFE when `path` is a
 * symbolic link (the hint names its target); STELE_ENOTJOURNAL when it is not a directory;
 * another -errno.
 */
int jdir_open(const journal_io_t *io, const char *path, int *fd_out, stele_error_t *err);

/*
 * The rule: the directory is owned by the user running stele or by root (writers only), is
 * not writable by its group or others, and every ancestor up to / is owned by root, that
 * user or the directory's owner, and is not writable by its group or others unless it has
 * the sticky bit (then only an entry's owner can replace it, and the entry below it in the
 * chain is owned by one of those users).
 * `path` only names things in the message. Returns 0, STELE_EUNSAFE naming the path, the
 * owner or mode found and the fix, or -errno when the chain could not be examined.
 */
int jdir_check(int dir_fd, const char *path, jdir_role_t role, stele_error_t *err);

/* The same rule for a journal directory about to be made at `path` by this process: its
 * future parent and that one's ancestors. 0 too when the parent cannot be opened (making the
 * directory then fails and says why). */
int jdir_check_new(const char *path, stele_error_t *err);

/* 1 when uid may own what a journal run by this process trusts: root, the effective user,
 * or `journal_owner`. */
int jdir_uid_is_trusted(uid_t uid, uid_t journal_owner);

#endif /* STELE_JOURNAL_JDIR_H */
