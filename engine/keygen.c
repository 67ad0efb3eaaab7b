/*
 * keygen.c: stele_keygen(), a new signer key pair for a signed journal: the signer key file
 * (epoch 0, mode 0600, created exclusively) and the verifier key file, the trust anchor
 * (journal/sigkey.h, FORMAT.md sections 10.3 and 11.4). No state; nothing is left behind
 * when it fails.
 */
#include "stele.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "note.h"
#include "sigkey.h"

/* The key name when none is given: it names the key in every signature line. */
#define KEYGEN_DEFAULT_NAME "stele"

int
stele_keygen(const char *key_path, const char *pub_path, const char *name, stele_error_t *err)
{
    if (!key_path || !*key_path || !pub_path || !*pub_path)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "stele_keygen: the key file and the public key file are required");
    if (strcmp(key_path, pub_path) == 0)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "the key file and the public key file must differ (%s)", key_path);
    note_signer_t s;
    int rc = note_keygen(name ? name : KEYGEN_DEFAULT_NAME, &s, err);
    if (rc)
        return rc;
    rc = sigkey_write_signer(key_path, &s, err);
    if (rc == 0) {
        rc = sigkey_write_verifier(pub_path, &s.verifier, err);
        if (rc)
            unlink(key_path); /* a key without its anchor could sign what nobody can check */
    }
    note_signer_wipe(&s);
    return rc;
}
