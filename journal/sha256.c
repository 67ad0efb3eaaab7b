/*
 * sha256.c: the reusable SHA-256 context of sha256.h. Owns nothing but the SHA256_CTX inside
 * each sha256_t; no locks (one thread per context).
 *
 * Why not EVP: every EVP digest goes through the provider layer (an engine-table lookup, the
 * provider's init, a context cleanse at final), which for the ~3 digests of each appended
 * record cost about 3,000 instructions a record, more than the SHA-NI compression of its 9
 * blocks. OpenSSL's SHA256_Init/Update/Final are the functions its own default provider
 * calls, with the same CPU dispatch (SHA-NI, AVX2, ...), minus that layer. OpenSSL 3 marks
 * them deprecated in favour of EVP but still ships them; should a release drop them, the EVP
 * calls they replace go back here and nothing else changes.
 */
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_Init/Update/Final: see above */
#include "sha256.h"

#include <errno.h>
#include <string.h>

int
sha256_init(sha256_t *s)
{
    return sha256_begin(s);
}

void
sha256_release(sha256_t *s)
{
    memset(s, 0, sizeof *s);
}

int
sha256_begin(sha256_t *s)
{
    return SHA256_Init(&s->ctx) == 1 ? 0 : -ENOMEM;
}

int
sha256_update(sha256_t *s, const void *data, size_t len)
{
    if (len == 0)
        return 0;
    return SHA256_Update(&s->ctx, data, len) == 1 ? 0 : -ENOMEM;
}

int
sha256_final(sha256_t *s, uint8_t out[SHA256_BYTES])
{
    return SHA256_Final(out, &s->ctx) == 1 ? 0 : -ENOMEM;
}
