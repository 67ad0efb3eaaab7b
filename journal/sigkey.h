/*
 * sigkey.h: key files. A signer key file holds one signer key string (note.h,
 * "PRIVATE+KEY+...") and a newline, mode 0600, owned by the user who reads it; a verifier
 * key file holds one verifier key string and a newline (FORMAT.md, "Merkle tree and signed
 * checkpoints"). These functions never follow a symbolic link to a signer key, never
 * overwrite a key file in place, and leave no partly written file behind.
 *
 * Return codes: 0; -EEXIST (the file to create exists); STELE_EINVAL when a file is not a
 * key file of its kind (a symbolic link, not a regular file, wrong size, a signer key file
 * that group or others may access or that another user owns, a malformed key string; the
 * message names the file and the fault); -errno of a failed system call (message names the
 * file and the call); -ENOMEM.
 */
#ifndef STELE_JOURNAL_SIGKEY_H
#define STELE_JOURNAL_SIGKEY_H

#include "note.h"
#include "stele.h"

/* The largest key file read: a key string is at most NOTE_SIGNER_KEY_MAX_BYTES. */
#define SIGKEY_FILE_MAX_BYTES 1024

/* Creates `path` (O_EXCL, O_NOFOLLOW) with the key string and a newline, fsyncs it and its
 * directory. The signer file gets mode 0600, the verifier file 0644 (less with the umask).
 * On failure nothing is left at `path`. */
int sigkey_write_signer(const char *path, const note_signer_t *s, stele_error_t *err);
int sigkey_write_verifier(const char *path, const note_verifier_t *v, stele_error_t *err);

/* Reads and parses a key file (a trailing newline is optional). The signer file must not be
 * a symbolic link, must be a regular file owned by the effective user (or root) with no
 * permission for group or others. *out is untouched on error; a signer's seed passes only
 * through buffers wiped before returning. */
int sigkey_read_signer(const char *path, note_signer_t *out, stele_error_t *err);
int sigkey_read_verifier(const char *path, note_verifier_t *out, stele_error_t *err);

/* A journal writer's signer key file may hold a second line, "epoch <E>": the key epoch of
 * the key (FORMAT.md section 11.4). As sigkey_read_signer, with that epoch (0 when the line
 * is absent) in *epoch_out (may be NULL); a second line of another shape is STELE_EINVAL. */
int sigkey_read_signer_epoch(const char *path, note_signer_t *out, uint64_t *epoch_out,
                             stele_error_t *err);

/* The text of a signer key file of epoch `epoch` (key string, "\n", "epoch <E>", "\n") into
 * out. Returns its length, or 0 when cap is too small (SIGKEY_FILE_MAX_BYTES suffices).
 * Secret: wipe the buffer when done. */
size_t sigkey_format_signer(const note_signer_t *s, uint64_t epoch, char *out, size_t cap);

/*
 * Replaces the signer key file `path` with s, so that at every instant the file holds
 * either the old key or the new one: writes and fsyncs "<path>.new" (a leftover from an
 * interrupted replace is removed first), renames it over `path`, fsyncs the directory, and
 * then overwrites the old key's bytes with zeros and syncs them (on a file system that
 * writes in place, this destroys them; on a copy-on-write one, only the file's blocks are
 * released). Returns 0 once the new key is durable; an error before the rename leaves the
 * old key in place; an error while scrubbing the old key is reported after the new key is
 * durable.
 */
int sigkey_replace_signer(const char *path, const note_signer_t *s, stele_error_t *err);

#endif /* STELE_JOURNAL_SIGKEY_H */
