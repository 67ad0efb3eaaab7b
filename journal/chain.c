/*
 * chain.c: the hash chain of chain.h, both format versions. A hasher owns one SHA-256
 * context (sha256.h), so hashing a record allocates nothing. A hasher is used by one thread
 * at a time (the journal's writer, or one reader).
 */
#include "chain.h"

#include <stdlib.h>

#include "sha256.h"

_Static_assert(HASH_BYTES == SHA256_BYTES, "a chain hash is a SHA-256 digest");

struct chain_hasher {
    sha256_t sha;
};

chain_hasher_t *
chain_hasher_new(void)
{
    chain_hasher_t *h = malloc(sizeof *h);
    if (h && sha256_init(&h->sha) != 0) {
        free(h);
        return NULL;
    }
    return h;
}

void
chain_hasher_free(chain_hasher_t *h)
{
    if (!h)
        return;
    sha256_release(&h->sha);
    free(h);
}

int
chain_hash(chain_hasher_t *h, const uint8_t prev[HASH_BYTES], uint64_t seq, int64_t ts_ns,
           const uint8_t *payload, uint32_t payload_len, uint8_t out[HASH_BYTES])
{
    uint8_t fields[16];
    format_store_u64(fields, seq);
    format_store_i64(fields + 8, ts_ns);
    int rc = sha256_begin(&h->sha);
    rc = rc ? rc : sha256_update(&h->sha, prev, HASH_BYTES);
    rc = rc ? rc : sha256_update(&h->sha, fields, sizeof fields);
    rc = rc ? rc : sha256_update(&h->sha, payload, payload_len);
    return rc ? rc : sha256_final(&h->sha, out);
}

int
chain_link(chain_hasher_t *h, const uint8_t prev[HASH_BYTES], const uint8_t leaf_hash[HASH_BYTES],
           uint8_t out[HASH_BYTES])
{
    int rc = sha256_begin(&h->sha);
    rc = rc ? rc : sha256_update(&h->sha, prev, HASH_BYTES);
    rc = rc ? rc : sha256_update(&h->sha, leaf_hash, HASH_BYTES);
    return rc ? rc : sha256_final(&h->sha, out);
}
