/*
 * sha256.h: one reusable SHA-256 context over OpenSSL's EVP interface, the one the hash
 * chain (chain.c) and the Merkle tree (merkle.c) both hash through. The digest is bound
 * once at sha256_init; each sha256_begin then re-initialises without the provider lookup,
 * which makes hashing a small record about twice as fast and allocates nothing. A context is
 * used by one thread at a time.
 */
#ifndef STELE_JOURNAL_SHA256_H
#define STELE_JOURNAL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/types.h>

#define SHA256_BYTES 32

typedef struct sha256 {
    EVP_MD_CTX *ctx;
    EVP_MD *md;
} sha256_t;

/* Prepares *s. Returns 0, or -ENOMEM (then *s holds nothing to release). */
int sha256_init(sha256_t *s);
/* Frees what sha256_init took; a zeroed *s is a no-op. */
void sha256_release(sha256_t *s);

/* One digest: sha256_begin, any number of sha256_update (len 0 is allowed), sha256_final.
 * Each returns 0, or -ENOMEM when OpenSSL fails. */
int sha256_begin(sha256_t *s);
int sha256_update(sha256_t *s, const void *data, size_t len);
int sha256_final(sha256_t *s, uint8_t out[SHA256_BYTES]);

#endif /* STELE_JOURNAL_SHA256_H */
