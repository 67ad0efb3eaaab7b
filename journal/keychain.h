/*
 * keychain.h: the files of a signed journal's key chain (FORMAT.md section 11.4): KEYS in
 * the journal directory (the key statements, one meta frame each, appended and fsynced),
 * and the writer's signer key file with its side files (<key>.next during a rotation,
 * <key>.new while it is replaced). Writes go through the journal's I/O table, so fault
 * loops reach them; reading a signer key file checks its mode and owner (sigkey.h).
 * Whether a statement is signed by the right key is the verifier's business, not this
 * file's. No state.
 */
#ifndef STELE_JOURNAL_KEYCHAIN_H
#define STELE_JOURNAL_KEYCHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "io.h"
#include "meta.h"
#include "note.h"
#include "stele.h"

/* The suffix of the file holding the next epoch's key during a rotation. */
#define KEYCHAIN_NEXT_SUFFIX ".next"

/* One key statement of KEYS. */
typedef struct keychain_entry {
    uint8_t *payload; /* type byte and signed note, malloc'd */
    size_t payload_len;
    uint64_t tree_size;  /* the frame's seq */
    uint64_t offset;     /* of its frame in KEYS */
    meta_statement_t st; /* as its text says (not checked against any signature) */
} keychain_entry_t;

typedef struct keychain {
    keychain_entry_t *entries;
    size_t n;
    uint64_t valid_bytes; /* end of the last complete statement */
    uint64_t file_bytes;  /* the file's size: more than valid_bytes after a torn append */
    char why[128];        /* what ended the statements before file_bytes, if anything */
} keychain_t;

/*
 * Reads KEYS in the journal directory open as dir_fd: every complete key statement frame from
 * offset 0 on, until the end or the first bytes that are not one (a torn append, left in file_bytes
 * > valid_bytes). Returns 0; -ENOENT when there is no KEYS (err untouched); STELE_ECORRUPT when a
 * complete frame holds something else than a key statement (the message names its offset); -errno,
 * -ENOMEM. Free with keychain_free.
 */
int keychain_read(const journal_io_t *io, int dir_fd, keychain_t *kc, stele_error_t *err);
void keychain_free(keychain_t *kc);

/*
 * Writes a key statement frame (record_meta_build) at offset `at` of KEYS in the journal
 * directory open as dir_fd, creating the
 * file (mode file_mode) when `at` is 0, cutting off whatever follows, and makes it durable:
 * fsync of the file and, for a new file, of the directory. Returns 0 or -errno (err names
 * the call).
 */
int keychain_append(const journal_io_t *io, int dir_fd, unsigned file_mode, uint64_t at,
                    const uint8_t *frame, size_t frame_len, stele_error_t *err);

/* The path of a key file's side file: key_path + suffix, into out. Returns 0 or
 * -ENAMETOOLONG. */
int keychain_side_path(char *out, size_t cap, const char *key_path, const char *suffix);

/*
 * Writes the signer key s of epoch `epoch` into `path` (created exclusively, mode 0600,
 * synced with its directory; a leftover at path is removed first). Returns 0 or -errno.
 */
int keychain_write_key(const journal_io_t *io, const char *path, const note_signer_t *s,
                       uint64_t epoch, stele_error_t *err);

/*
 * Replaces the signer key file key_path with s of epoch `epoch` (sigkey_replace_signer's
 * order, through the I/O table): writes <key_path>.new, renames it over key_path, syncs the
 * directory, then overwrites the old key's bytes with zeros and syncs them. Returns 0 once
 * the new key is durable in place (a failure to scrub the old bytes is reported after
 * that), or -errno.
 */
int keychain_replace_key(const journal_io_t *io, const char *key_path, const note_signer_t *s,
                         uint64_t epoch, stele_error_t *err);

/* Removes `path` (missing is fine) and syncs its directory. Returns 0 or -errno. */
int keychain_remove(const journal_io_t *io, const char *path, stele_error_t *err);

#endif /* STELE_JOURNAL_KEYCHAIN_H */
