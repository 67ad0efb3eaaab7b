/*
 * sha256.h: one reusable SHA-256 context, the one the hash chain (chain.c) and the Merkle
 * tree (merkle.c) both hash through. It calls OpenSSL's SHA-256 functions directly rather
 * than through EVP: the records it hashes are small (a chain link is 64 bytes, a tree node
 * 65, a typical leaf a few hundred), and EVP's per-digest dispatch cost more than the
 * compression itself (see sha256.c). A context lives inside its owner, allocates nothing and
 * is used by one thread at a time.
 */
#ifndef STELE_JOURNAL_SHA256_H
#define STELE_JOURNAL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/sha.h>

#define SHA256_BYTES 32

typedef struct sha256 {
    SHA256_CTX ctx;
} sha256_t;

/* Prepares *s. Returns 0 (the signature keeps -ENOMEM for an implementation that allocates). */
int sha256_init(sha256_t *s);
/* Forgets *s; a zeroed *s is a no-op. */
void sha256_release(sha256_t *s);

/* One digest: sha256_begin, any number of sha256_update (len 0 is allowed), sha256_final.
 * Each returns 0, or -ENOMEM when OpenSSL fails. */
int sha256_begin(sha256_t *s);
int sha256_update(sha256_t *s, const void *data, size_t len);
int sha256_final(sha256_t *s, uint8_t out[SHA256_BYTES]);

#endif /* STELE_JOURNAL_SHA256_H */
