/*
 * chain.h: the hash chain (FORMAT.md, "Hash chain"), hash(0) = the journal's genesis value:
 *   version 1: hash(n) = SHA-256(hash(n-1) || seq LE u64 || ts_ns LE i64 || payload)
 *   version 2: hash(n) = SHA-256(hash(n-1) || leaf_hash(n)), the record's Merkle leaf hash
 */
#ifndef STELE_JOURNAL_CHAIN_H
#define STELE_JOURNAL_CHAIN_H

#include <stdint.h>

#include "format.h"

typedef struct chain_hasher chain_hasher_t;

/* A reusable SHA-256 context (one per thread). NULL when out of memory. */
chain_hasher_t *chain_hasher_new(void);
void chain_hasher_free(chain_hasher_t *h);

/* out = SHA-256(prev || seq || ts_ns || payload). Returns 0, or -ENOMEM if OpenSSL fails. */
int chain_hash(chain_hasher_t *h, const uint8_t prev[HASH_BYTES], uint64_t seq, int64_t ts_ns,
               const uint8_t *payload, uint32_t payload_len, uint8_t out[HASH_BYTES]);

/* Version 2: out = SHA-256(prev || leaf_hash). Returns 0, or -ENOMEM if OpenSSL fails. */
int chain_link(chain_hasher_t *h, const uint8_t prev[HASH_BYTES],
               const uint8_t leaf_hash[HASH_BYTES], uint8_t out[HASH_BYTES]);

#endif /* STELE_JOURNAL_CHAIN_H */
