/*
 * checkpoint.h: the body of a C2SP tlog checkpoint (https://c2sp.org/tlog-checkpoint), the
 * text a signed note carries to state a Merkle tree head (FORMAT.md, "Merkle tree and
 * signed checkpoints"):
 *
 *     <origin>\n               the log's identity: non-empty, no control characters
 *     <tree size>\n            decimal, no leading zeros ("0" for the empty tree), fits a u64
 *     <base64 root hash>\n     the RFC 6962 root of the tree of that size: exactly 32 bytes
 *     [<extension line>\n]...  optional, opaque, each non-empty
 *
 * Parsing is strict: one checkpoint has one text. Signing and opening the note is note.h's
 * job. No state.
 */
#ifndef STELE_JOURNAL_CHECKPOINT_H
#define STELE_JOURNAL_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "merkle.h"
#include "stele.h"

#define CHECKPOINT_ORIGIN_MAX_BYTES 255
/* The text without extension lines: origin, 20 digits, 44 base64 characters, 3 newlines. */
#define CHECKPOINT_BASE_MAX_BYTES (CHECKPOINT_ORIGIN_MAX_BYTES + 20 + 44 + 3)

typedef struct checkpoint {
    char origin[CHECKPOINT_ORIGIN_MAX_BYTES + 1];
    uint64_t size;
    uint8_t root[MERKLE_HASH_BYTES];
    /* The extension lines, each ending in "\n", back to back; NULL or empty for none.
     * Borrowed: checkpoint_parse points them into the text it parsed. */
    const char *extensions;
    size_t extensions_len;
} checkpoint_t;

/*
 * Writes the checkpoint text (and a NUL) into out. Returns 0 with its length in *len_out;
 * STELE_EINVAL when the origin is empty, too long, not UTF-8 or holds a control character,
 * when an extension line is empty, unterminated or holds a control character, or when cap
 * is too small (CHECKPOINT_BASE_MAX_BYTES + extensions_len + 1 always suffices).
 */
int checkpoint_format(const checkpoint_t *c, char *out, size_t cap, size_t *len_out,
                      stele_error_t *err);

/*
 * Parses a checkpoint text text[0, len) (a signed note's text, final newline included).
 * Returns 0 with *out filled (its extensions point into text); STELE_ECORRUPT naming the
 * line and what is wrong (fewer than three lines, no final newline, an empty or over-long
 * origin, a size with a sign, leading zero or more than a u64, a root that is not the
 * canonical base64 of 32 bytes, an empty extension line, a control character or invalid
 * UTF-8), with *out untouched.
 */
int checkpoint_parse(const char *text, size_t len, checkpoint_t *out, stele_error_t *err);

/* A decimal u64 as the note formats write it: digits only, no leading zero, no overflow.
 * Returns 0, or -1 for anything else. */
int checkpoint_parse_u64(const char *s, size_t len, uint64_t *out);

#endif /* STELE_JOURNAL_CHECKPOINT_H */
