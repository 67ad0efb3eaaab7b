/*
 * meta.h: what a version 2 journal's meta frames say (FORMAT.md section 11): checkpoints
 * and key statements, each a C2SP tlog-checkpoint text (checkpoint.h) with stele's
 * extension lines, signed as a C2SP signed note (note.h):
 *
 *     stele/<source>/<genesis, 64 lowercase hex digits>   the origin: names the journal
 *     <tree size>                                          records 1 .. size
 *     <base64 root>                                        their Merkle tree's root
 *     epoch <E>                                            the key epoch that signs it
 *     time <ns since the Unix epoch>                       when it was taken
 *     reason <records|interval|roll|close|retention|start|rotate>
 *     first <seq>                                          retention only: the new first seq
 *     key <E'> <verifier key>                              start and rotate only
 *
 * Lines come in this order, each at most once; nothing else. A start statement names the
 * key that signs it (E' = E = 0), a rotation the next one (E' = E + 1). A meta frame's
 * payload is a type byte (META_TYPE_CHECKPOINT for the first five reasons, META_TYPE_KEY
 * for the last two) and the signed note. Pure functions, no state.
 */
#ifndef STELE_JOURNAL_META_H
#define STELE_JOURNAL_META_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"
#include "note.h"
#include "stele.h"

/* Why a checkpoint was taken (the `reason` line). */
typedef enum meta_reason {
    META_REASON_RECORDS = 0,   /* checkpoint_records records since the last one */
    META_REASON_INTERVAL = 1,  /* checkpoint_interval_ms since the last one (also when idle) */
    META_REASON_ROLL = 2,      /* the last frame of a segment before the next one */
    META_REASON_CLOSE = 3,     /* a clean close */
    META_REASON_RETENTION = 4, /* segments before `first` may be deleted */
    META_REASON_START = 5,     /* the key chain starts with this key (epoch 0) */
    META_REASON_ROTATE = 6,    /* the key of the next epoch */
} meta_reason_t;

/* The longest statement text (unsigned), signed note and meta frame payload stele writes
 * or reads. A text is about 250 bytes, a key statement 300 more; a signature line adds the
 * key name (at most 255 bytes) and 92 characters of base64. */
#define META_TEXT_MAX_BYTES 1024
#define META_NOTE_MAX_BYTES 2048
#define META_PAYLOAD_MAX_BYTES (1 + META_NOTE_MAX_BYTES)

typedef struct meta_statement {
    char origin[CHECKPOINT_ORIGIN_MAX_BYTES + 1];
    uint64_t size;
    uint8_t root[MERKLE_HASH_BYTES];
    uint64_t epoch;
    int64_t time_ns;
    meta_reason_t reason;
    uint64_t first_seq;  /* retention: the journal's first seq from now on; else 0 */
    uint64_t key_epoch;  /* start, rotate: the epoch of `key`; else 0 */
    note_verifier_t key; /* start, rotate: the key of that epoch */
} meta_statement_t;

/* "records", "interval", ... ; "?" for another value. Static storage. */
const char *meta_reason_name(meta_reason_t reason);

/* 1 for start and rotate, the reasons of a key statement. */
int meta_reason_is_key(meta_reason_t reason);

/* The meta frame type byte of a statement with this reason. */
uint8_t meta_type_of(meta_reason_t reason);

/* The origin line of the journal named `source` with genesis value `genesis`, NUL-terminated
 * into out. */
void meta_origin(char out[CHECKPOINT_ORIGIN_MAX_BYTES + 1], const char *source,
                 const uint8_t genesis[MERKLE_HASH_BYTES]);

/* Writes m's text (and a NUL) into out. Returns 0 with its length in *len_out, or
 * STELE_EINVAL (a field the reason does not allow, a bad origin, cap too small:
 * META_TEXT_MAX_BYTES always suffices). */
int meta_format(const meta_statement_t *m, char *out, size_t cap, size_t *len_out,
                stele_error_t *err);

/*
 * Parses a statement's text text[0, len) strictly: a checkpoint (checkpoint_parse) whose
 * extension lines are exactly those the reason asks for, in order, with canonical numbers.
 * Returns 0 with *out filled, or STELE_ECORRUPT naming what is wrong (*out untouched).
 */
int meta_parse(const char *text, size_t len, meta_statement_t *out, stele_error_t *err);

/* The length of a signed note's text: up to and including the newline before the last
 * blank line. 0 when there is no blank line (not a signed note). */
size_t meta_note_text_len(const char *note, size_t len);

/*
 * Formats m and signs it with s: *note_out is a malloc'd signed note (free() it) of
 * *note_len bytes. Returns 0, STELE_EINVAL, -ENOMEM.
 */
int meta_sign(const note_signer_t *s, const meta_statement_t *m, char **note_out, size_t *note_len,
              stele_error_t *err);

/*
 * Opens a meta frame's payload (type byte, then a signed note) with verifier v: the note must
 * carry v's valid signature (note_open), its text must parse (meta_parse), and the type byte
 * must be the one of its reason. Returns 0 with *out filled; STELE_ECORRUPT naming the fault.
 */
int meta_open(const uint8_t *payload, size_t len, const note_verifier_t *v, meta_statement_t *out,
              stele_error_t *err);

/* Parses a meta frame's payload without checking a signature (recovery reads the journal's
 * own key epochs this way). Same results as meta_open. */
int meta_read_unsigned(const uint8_t *payload, size_t len, meta_statement_t *out,
                       stele_error_t *err);

#endif /* STELE_JOURNAL_META_H */
