/*
 * note.h: C2SP signed notes (https://c2sp.org/signed-note) with Ed25519 keys, in the text
 * forms of Go's golang.org/x/mod/sumdb/note (FORMAT.md, "Merkle tree and signed
 * checkpoints"):
 *
 *     verifier key   <name>+<key id, 8 hex digits>+<base64(0x01 || 32-byte public key)>
 *     signer key     PRIVATE+KEY+<name>+<key id>+<base64(0x01 || 32-byte seed)>
 *     key id         first 4 bytes, big-endian, of SHA-256(name || "\n" || 0x01 || public key)
 *     signed note    text (ending in "\n"), "\n", then one line per signature:
 *                    "\u2014 " name " " base64(key id as 4 bytes BE || 64-byte signature) "\n"
 *
 * A name is 1 to NOTE_NAME_MAX_BYTES bytes of UTF-8 without spaces (Unicode White_Space),
 * '+' or control characters. The signature covers the text, its final newline included.
 *
 * Keys are plain structs; a signer holds the private seed: wipe it with note_signer_wipe
 * when done. All functions are reentrant. Return codes: 0; STELE_EINVAL for a bad argument
 * or a malformed key string (the message says what is wrong); STELE_ECORRUPT when a signed
 * note does not open (malformed, too long, no signature by a known key, a bad signature);
 * -ENOMEM when OpenSSL or malloc fails.
 */
#ifndef STELE_JOURNAL_NOTE_H
#define STELE_JOURNAL_NOTE_H

#include <stddef.h>
#include <stdint.h>

#include "stele.h"

#define NOTE_KEY_BYTES 32 /* an Ed25519 public key, or the seed of a private one */
#define NOTE_SIG_BYTES 64
#define NOTE_ALG_ED25519 0x01 /* the signature type byte of signed-note Ed25519 keys */
#define NOTE_NAME_MAX_BYTES 255
/* Longest key strings: name, '+', 8 hex digits, '+', base64 of 33 bytes (44). */
#define NOTE_VERIFIER_KEY_MAX_BYTES (NOTE_NAME_MAX_BYTES + 1 + 8 + 1 + 44)
#define NOTE_SIGNER_KEY_MAX_BYTES (12 + NOTE_VERIFIER_KEY_MAX_BYTES) /* "PRIVATE+KEY+" */
/* The largest signed note note_open reads (checkpoints and key notes are far smaller), and
 * the most signature lines (Go's note package has the same limit; C2SP asks for 16). */
#define NOTE_MAX_BYTES 65536
#define NOTE_MAX_SIGNATURES 100

typedef struct note_verifier {
    char name[NOTE_NAME_MAX_BYTES + 1];
    uint32_t key_id;
    uint8_t public_key[NOTE_KEY_BYTES];
} note_verifier_t;

typedef struct note_signer {
    note_verifier_t verifier;     /* the public half */
    uint8_t seed[NOTE_KEY_BYTES]; /* the private key (RFC 8032 seed): secret */
} note_signer_t;

/* 0 when text[0, len) is what a signed note may hold: valid UTF-8 without control
 * characters other than "\n". Otherwise -1, and *bad_at (may be NULL) is the offset of the
 * first byte that is not. */
int note_text_check(const char *text, size_t len, size_t *bad_at);

/* 0 when name[0, len) is a valid key name, else STELE_EINVAL saying why. */
int note_name_check(const char *name, size_t len, stele_error_t *err);

/* The key id of an Ed25519 public key under a name. Returns 0 or -ENOMEM. */
int note_key_id(const char *name, const uint8_t public_key[NOTE_KEY_BYTES], uint32_t *key_id);

/* A new key pair under `name`, from OpenSSL's private random generator. Returns 0,
 * STELE_EINVAL (bad name), -ENOMEM (or when the generator fails). */
int note_keygen(const char *name, note_signer_t *out, stele_error_t *err);

/* The key pair of a given seed (deterministic: tests, worked examples). Same codes. */
int note_signer_from_seed(const char *name, const uint8_t seed[NOTE_KEY_BYTES], note_signer_t *out,
                          stele_error_t *err);

/* Overwrites the whole signer (seed included) with zeros, in a way the compiler keeps. */
void note_signer_wipe(note_signer_t *s);

/* Writes the key string and a NUL into out. Returns its length, or 0 when cap is too small
 * (NOTE_VERIFIER_KEY_MAX_BYTES + 1, NOTE_SIGNER_KEY_MAX_BYTES + 1 always suffice). The
 * signer string is secret: wipe the buffer when done. */
size_t note_verifier_format(const note_verifier_t *v, char *out, size_t cap);
size_t note_signer_format(const note_signer_t *s, char *out, size_t cap);

/*
 * Parses a key string text[0, len) (no newline). The key id must match the key; a signer's
 * public key is derived from its seed. Returns 0, or STELE_EINVAL naming the fault (shape,
 * name, key id, algorithm, key length, mismatching id) with *out untouched, or -ENOMEM.
 */
int note_verifier_parse(const char *text, size_t len, note_verifier_t *out, stele_error_t *err);
int note_signer_parse(const char *text, size_t len, note_signer_t *out, stele_error_t *err);

/*
 * Signs text[0, text_len) with s. The text must end with "\n" and be valid UTF-8 without
 * control characters other than newlines; the signed note must fit NOTE_MAX_BYTES. On
 * success *note_out is a malloc'd, NUL-terminated signed note (free() it) of *note_len
 * bytes. Returns 0, STELE_EINVAL (text), -ENOMEM.
 */
int note_sign(const note_signer_t *s, const char *text, size_t text_len, char **note_out,
              size_t *note_len, stele_error_t *err);

/* What note_open found. */
typedef struct note_opened {
    size_t text_len;     /* the text is the note's first text_len bytes, final "\n" included */
    size_t signer;       /* index in known[] of the first key whose signature verified */
    unsigned n_verified; /* signatures by known keys (all of them verified) */
    unsigned n_unknown;  /* signatures by other keys, ignored */
} note_opened_t;

/*
 * Opens a signed note note[0, len) against the verifier keys known[0, n_known): every
 * signature by a known key must verify and at least one must be there; signatures by other
 * keys (another name or key id) are ignored. Returns 0 with *out filled; STELE_ECORRUPT
 * when the note is longer than NOTE_MAX_BYTES, not valid UTF-8, holds a control character,
 * has no blank line before its signatures, has a signature line that is malformed (no em
 * dash, bad name, bad base64, fewer than 5 bytes) or too many of them, has no signature by
 * a known key, or has a signature by a known key that does not verify; STELE_EINVAL when
 * two different known keys share a name and key id; -ENOMEM.
 */
int note_open(const char *note, size_t len, const note_verifier_t *known, size_t n_known,
              note_opened_t *out, stele_error_t *err);

#endif /* STELE_JOURNAL_NOTE_H */
