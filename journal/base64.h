/*
 * base64.h: standard base64 (RFC 4648 section 4, with '=' padding), the encoding of keys,
 * signatures and root hashes in signed notes and checkpoints (FORMAT.md, "Merkle tree and
 * signed checkpoints"). Decoding is strict: one text per byte string.
 */
#ifndef STELE_JOURNAL_BASE64_H
#define STELE_JOURNAL_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Characters in the encoding of n bytes (no NUL). */
#define BASE64_ENCODED_LEN(n) (4 * (((n) + 2) / 3))

/* Writes the encoding of in[0, len) and a NUL into out (BASE64_ENCODED_LEN(len) + 1 bytes
 * of room). Returns the encoding's length. */
size_t base64_encode(const uint8_t *in, size_t len, char *out);

/*
 * Decodes text[0, len) into out (cap bytes of room). Accepts only the canonical encoding:
 * a multiple of 4 characters from the standard alphabet, '=' only as the padding at the
 * end, unused bits zero, no whitespace. Returns the decoded length, or -1 when the text is
 * not such an encoding or its bytes do not fit cap.
 */
long base64_decode(const char *text, size_t len, uint8_t *out, size_t cap);

#endif /* STELE_JOURNAL_BASE64_H */
