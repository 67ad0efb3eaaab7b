/*
 * note.c: C2SP signed notes with Ed25519 keys (note.h): key names and ids, key strings,
 * signing and opening notes. Ed25519 and SHA-256 are OpenSSL's (EVP); the text rules
 * (UTF-8, control characters, name characters) are C2SP's and Go's note package's, so a
 * note one side accepts the other accepts too. No state; every OpenSSL object lives for
 * one call. Private seeds pass through stack buffers that are cleansed before returning.
 */
#include "note.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "base64.h"
#include "jerr.h"

/* A signature line starts with an em dash (U+2014) and a space. */
static const char sig_prefix[] = "\xe2\x80\x94 ";
#define SIG_PREFIX_BYTES 4
static const char signer_prefix[] = "PRIVATE+KEY+";
#define SIGNER_PREFIX_BYTES 12
/* A signature is the key id (4 bytes, big-endian) and the algorithm's signature. */
#define SIG_KEY_ID_BYTES 4
#define SIG_MIN_BYTES (SIG_KEY_ID_BYTES + 1)
/* The longest signature line note_open decodes: room for post-quantum signatures (about
 * 5 kB), which it does not verify but must parse to skip. */
#define SIG_MAX_DECODED_BYTES 8192
/* A key string's key: the type byte and 32 bytes, 44 base64 characters. */
#define KEY_FIELD_BYTES (1 + NOTE_KEY_BYTES)
#define KEY_FIELD_CHARS BASE64_ENCODED_LEN(KEY_FIELD_BYTES)

/* ---- text rules ---- */

/* The length (1-4) of the well-formed UTF-8 sequence at s[0, len) and its code point, or 0
 * (overlong forms, surrogates and code points above U+10FFFF are not well-formed). */
static size_t
utf8_next(const unsigned char *s, size_t len, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (n == 0 || n > len || s[0] > 0xf4)
        return 0;
    uint32_t v = s[0] & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min_of_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_of_len[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

/* Unicode White_Space, which Go's unicode.IsSpace tests and key names may not hold. */
static int
is_unicode_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
           cp == 0x205f || cp == 0x3000;
}

int
note_text_check(const char *text, size_t len, size_t *bad_at)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t n = utf8_next(s + i, len - i, &cp);
        if (n == 0 || (cp < 0x20 && cp != '\n')) {
            if (bad_at)
                *bad_at = i;
            return -1;
        }
        i += n;
    }
    return 0;
}

int
note_name_check(const char *name, size_t len, stele_error_t *err)
{
    if (len == 0)
        return jerr_set(err, STELE_EINVAL, NULL, "key name is empty");
    if (len > NOTE_NAME_MAX_BYTES)
        return jerr_set(err, STELE_EINVAL, NULL, "key name is %zu bytes; the limit is %d", len,
                        NOTE_NAME_MAX_BYTES);
    const unsigned char *s = (const unsigned char *)name;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t n = utf8_next(s + i, len - i, &cp);
        if (n == 0)
            return jerr_set(err, STELE_EINVAL, NULL, "key name is not UTF-8 at byte %zu", i);
        if (cp < 0x20 || cp == '+' || is_unicode_space(cp))
            return jerr_set(err, STELE_EINVAL, NULL,
                            "key name holds a space, '+' or control character at byte %zu", i);
        i += n;
    }
    return 0;
}

/* ---- keys ---- */

int
note_key_id(const char *name, const uint8_t public_key[NOTE_KEY_BYTES], uint32_t *key_id)
{
    size_t name_len = strlen(name);
    if (name_len > NOTE_NAME_MAX_BYTES)
        return -ENOMEM; /* callers check names first; never a silent truncation */
    uint8_t input[NOTE_NAME_MAX_BYTES + 2 + NOTE_KEY_BYTES];
    memcpy(input, name, name_len);
    input[name_len] = '\n';
    input[name_len + 1] = NOTE_ALG_ED25519;
    memcpy(input + name_len + 2, public_key, NOTE_KEY_BYTES);
    uint8_t digest[EVP_MAX_MD_SIZE];
    unsigned int digest_len = 0;
    if (EVP_Digest(input, name_len + 2 + NOTE_KEY_BYTES, digest, &digest_len, EVP_sha256(), NULL) !=
        1)
        return -ENOMEM;
    *key_id = (uint32_t)digest[0] << 24 | (uint32_t)digest[1] << 16 | (uint32_t)digest[2] << 8 |
              digest[3];
    return 0;
}

static int
ed25519_public_from_seed(const uint8_t seed[NOTE_KEY_BYTES], uint8_t public_key[NOTE_KEY_BYTES])
{
    EVP_PKEY *pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, NOTE_KEY_BYTES);
    size_t len = NOTE_KEY_BYTES;
    int ok =
        pkey && EVP_PKEY_get_raw_public_key(pkey, public_key, &len) == 1 && len == NOTE_KEY_BYTES;
    EVP_PKEY_free(pkey);
    return ok ? 0 : -ENOMEM;
}

static int
ed25519_sign(const uint8_t seed[NOTE_KEY_BYTES], const char *msg, size_t len,
             uint8_t sig[NOTE_SIG_BYTES])
{
    EVP_PKEY *pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, NOTE_KEY_BYTES);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    size_t sig_len = NOTE_SIG_BYTES;
    int ok = pkey && ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, pkey) == 1 &&
             EVP_DigestSign(ctx, sig, &sig_len, (const unsigned char *)msg, len) == 1 &&
             sig_len == NOTE_SIG_BYTES;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    return ok ? 0 : -ENOMEM;
}

/* 1 when sig is v's signature of msg, 0 when it is not, -ENOMEM. */
static int
ed25519_verify(const uint8_t public_key[NOTE_KEY_BYTES], const char *msg, size_t len,
               const uint8_t *sig, size_t sig_len)
{
    if (sig_len != NOTE_SIG_BYTES)
        return 0;
    EVP_PKEY *pkey =
        EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, public_key, NOTE_KEY_BYTES);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int rc = -ENOMEM;
    if (pkey && ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey) == 1)
        rc = EVP_DigestVerify(ctx, sig, sig_len, (const unsigned char *)msg, len) == 1;
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    return rc;
}

int
note_signer_from_seed(const char *name, const uint8_t seed[NOTE_KEY_BYTES], note_signer_t *out,
                      stele_error_t *err)
{
    size_t name_len = strlen(name);
    int rc = note_name_check(name, name_len, err);
    if (rc)
        return rc;
    note_signer_t s;
    memset(&s, 0, sizeof s);
    memcpy(s.verifier.name, name, name_len);
    memcpy(s.seed, seed, NOTE_KEY_BYTES);
    if (ed25519_public_from_seed(s.seed, s.verifier.public_key) ||
        note_key_id(s.verifier.name, s.verifier.public_key, &s.verifier.key_id)) {
        note_signer_wipe(&s);
        return jerr_set(err, -ENOMEM, NULL, "could not derive an Ed25519 key");
    }
    *out = s;
    note_signer_wipe(&s);
    return 0;
}

int
note_keygen(const char *name, note_signer_t *out, stele_error_t *err)
{
    uint8_t seed[NOTE_KEY_BYTES];
    if (RAND_priv_bytes(seed, sizeof seed) != 1)
        return jerr_set(err, -ENOMEM, NULL, "the random generator could not make a key");
    int rc = note_signer_from_seed(name, seed, out, err);
    OPENSSL_cleanse(seed, sizeof seed);
    return rc;
}

void
note_signer_wipe(note_signer_t *s)
{
    OPENSSL_cleanse(s, sizeof *s);
}

/* "<name>+<key id>+<base64(0x01 || key)>" into out. */
static size_t
key_string_format(const char *prefix, const char *name, uint32_t key_id,
                  const uint8_t key[NOTE_KEY_BYTES], char *out, size_t cap)
{
    uint8_t field[KEY_FIELD_BYTES];
    char field64[KEY_FIELD_CHARS + 1];
    field[0] = NOTE_ALG_ED25519;
    memcpy(field + 1, key, NOTE_KEY_BYTES);
    base64_encode(field, sizeof field, field64);
    int n = snprintf(out, cap, "%s%s+%08" PRIx32 "+%s", prefix, name, key_id, field64);
    OPENSSL_cleanse(field, sizeof field);
    OPENSSL_cleanse(field64, sizeof field64);
    if (n < 0 || (size_t)n >= cap) {
        if (cap)
            OPENSSL_cleanse(out, cap);
        return 0;
    }
    return (size_t)n;
}

size_t
note_verifier_format(const note_verifier_t *v, char *out, size_t cap)
{
    return key_string_format("", v->name, v->key_id, v->public_key, out, cap);
}

size_t
note_signer_format(const note_signer_t *s, char *out, size_t cap)
{
    return key_string_format(signer_prefix, s->verifier.name, s->verifier.key_id, s->seed, out,
                             cap);
}

static int
parse_hex_key_id(const char *text, size_t len, uint32_t *key_id)
{
    if (len != 8)
        return -1;
    uint32_t v = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        int digit = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
        if (digit < 0)
            return -1;
        v = v << 4 | (uint32_t)digit;
    }
    *key_id = v;
    return 0;
}

/* Splits "<name>+<key id>+<key>" (what: "verifier key" or "signer key" for messages) into
 * a checked name, the id and the 32-byte Ed25519 key (public key or seed). */
static int
key_string_parse(const char *what, const char *text, size_t len, char name[], uint32_t *key_id,
                 uint8_t key[NOTE_KEY_BYTES], stele_error_t *err)
{
    const char *plus1 = memchr(text, '+', len);
    const char *plus2 = plus1 ? memchr(plus1 + 1, '+', len - (size_t)(plus1 + 1 - text)) : NULL;
    if (!plus2)
        return jerr_set(err, STELE_EINVAL, NULL, "%s is not of the form name+keyid+key", what);
    size_t name_len = (size_t)(plus1 - text);
    stele_error_t name_err = {0};
    if (note_name_check(text, name_len, &name_err))
        return jerr_set(err, STELE_EINVAL, NULL, "%s: %s", what, name_err.message);
    if (parse_hex_key_id(plus1 + 1, (size_t)(plus2 - plus1 - 1), key_id))
        return jerr_set(err, STELE_EINVAL, NULL, "%s: key id is not 8 hex digits", what);
    const char *field64 = plus2 + 1;
    size_t field64_len = len - (size_t)(field64 - text);
    uint8_t field[KEY_FIELD_BYTES + 1];
    long got = base64_decode(field64, field64_len, field, sizeof field);
    if (got < 1) {
        OPENSSL_cleanse(field, sizeof field);
        return jerr_set(err, STELE_EINVAL, NULL, "%s: key is not base64 of %d bytes", what,
                        KEY_FIELD_BYTES);
    }
    uint8_t type = field[0];
    if (type != NOTE_ALG_ED25519 || got != KEY_FIELD_BYTES) {
        OPENSSL_cleanse(field, sizeof field);
        return jerr_set(err, STELE_EINVAL, NULL,
                        "%s: not an Ed25519 key (type byte 0x%02x, %ld key bytes; want 0x01, "
                        "32)",
                        what, type, got - 1);
    }
    memcpy(name, text, name_len);
    name[name_len] = '\0';
    memcpy(key, field + 1, NOTE_KEY_BYTES);
    OPENSSL_cleanse(field, sizeof field);
    return 0;
}

static int
key_id_mismatch(const char *what, uint32_t stated, uint32_t actual, stele_error_t *err)
{
    return jerr_set(err, STELE_EINVAL, NULL,
                    "%s: key id %08" PRIx32 " does not match its name and key (%08" PRIx32 ")",
                    what, stated, actual);
}

int
note_verifier_parse(const char *text, size_t len, note_verifier_t *out, stele_error_t *err)
{
    note_verifier_t v;
    memset(&v, 0, sizeof v);
    int rc = key_string_parse("verifier key", text, len, v.name, &v.key_id, v.public_key, err);
    if (rc)
        return rc;
    uint32_t actual = 0;
    if (note_key_id(v.name, v.public_key, &actual))
        return jerr_set(err, -ENOMEM, NULL, "could not hash a key");
    if (actual != v.key_id)
        return key_id_mismatch("verifier key", v.key_id, actual, err);
    *out = v;
    return 0;
}

int
note_signer_parse(const char *text, size_t len, note_signer_t *out, stele_error_t *err)
{
    if (len < SIGNER_PREFIX_BYTES || memcmp(text, signer_prefix, SIGNER_PREFIX_BYTES) != 0)
        return jerr_set(err, STELE_EINVAL, NULL, "signer key does not start with %s",
                        signer_prefix);
    note_signer_t s;
    memset(&s, 0, sizeof s);
    uint32_t stated = 0;
    int rc = key_string_parse("signer key", text + SIGNER_PREFIX_BYTES, len - SIGNER_PREFIX_BYTES,
                              s.verifier.name, &stated, s.seed, err);
    if (rc == 0 && ed25519_public_from_seed(s.seed, s.verifier.public_key) == 0 &&
        note_key_id(s.verifier.name, s.verifier.public_key, &s.verifier.key_id) == 0) {
        if (stated == s.verifier.key_id)
            *out = s;
        else
            rc = key_id_mismatch("signer key", stated, s.verifier.key_id, err);
    } else if (rc == 0) {
        rc = jerr_set(err, -ENOMEM, NULL, "could not derive an Ed25519 key");
    }
    note_signer_wipe(&s);
    return rc;
}

/* ---- signing ---- */

int
note_sign(const note_signer_t *s, const char *text, size_t text_len, char **note_out,
          size_t *note_len, stele_error_t *err)
{
    size_t bad_at = 0;
    if (text_len == 0 || text[text_len - 1] != '\n')
        return jerr_set(err, STELE_EINVAL, NULL, "note text does not end with a newline");
    if (note_text_check(text, text_len, &bad_at))
        return jerr_set(err, STELE_EINVAL, NULL,
                        "note text byte %zu is not UTF-8 or is a control character", bad_at);
    size_t name_len = strlen(s->verifier.name);
    size_t sig64_len = BASE64_ENCODED_LEN(SIG_KEY_ID_BYTES + NOTE_SIG_BYTES);
    size_t total = text_len + 1 + SIG_PREFIX_BYTES + name_len + 1 + sig64_len + 1;
    if (total > NOTE_MAX_BYTES)
        return jerr_set(err, STELE_EINVAL, NULL, "signed note would be %zu bytes; the limit is %d",
                        total, NOTE_MAX_BYTES);
    uint8_t sig[SIG_KEY_ID_BYTES + NOTE_SIG_BYTES];
    sig[0] = (uint8_t)(s->verifier.key_id >> 24);
    sig[1] = (uint8_t)(s->verifier.key_id >> 16);
    sig[2] = (uint8_t)(s->verifier.key_id >> 8);
    sig[3] = (uint8_t)s->verifier.key_id;
    char *note = malloc(total + 1);
    if (!note || ed25519_sign(s->seed, text, text_len, sig + SIG_KEY_ID_BYTES)) {
        free(note);
        return jerr_set(err, -ENOMEM, NULL, "could not sign a note");
    }
    char *p = note;
    memcpy(p, text, text_len);
    p += text_len;
    *p++ = '\n';
    memcpy(p, sig_prefix, SIG_PREFIX_BYTES);
    p += SIG_PREFIX_BYTES;
    memcpy(p, s->verifier.name, name_len);
    p += name_len;
    *p++ = ' ';
    p += base64_encode(sig, sizeof sig, p);
    *p++ = '\n';
    *p = '\0';
    *note_out = note;
    *note_len = total;
    return 0;
}

/* ---- opening ---- */

static int open_failed(stele_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
open_failed(stele_error_t *err, const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY, "signed note does not open: %s", why);
}

/* The one known key with this name and id: 1 found, 0 none, -1 two that differ. */
static int
known_key_find(const note_verifier_t *known, size_t n_known, const char *name, size_t name_len,
               uint32_t key_id, size_t *at)
{
    int found = 0;
    for (size_t i = 0; i < n_known; i++) {
        if (known[i].key_id != key_id || strlen(known[i].name) != name_len ||
            memcmp(known[i].name, name, name_len) != 0)
            continue;
        if (found && memcmp(known[i].public_key, known[*at].public_key, NOTE_KEY_BYTES) != 0)
            return -1;
        if (!found)
            *at = i;
        found = 1;
    }
    return found;
}

/* One signature line (without its newline): checks its form, and verifies it when a known
 * key made it. */
static int
open_signature_line(const char *line, size_t len, unsigned line_no, const char *text,
                    size_t text_len, const note_verifier_t *known, size_t n_known,
                    note_opened_t *out, stele_error_t *err)
{
    if (len < SIG_PREFIX_BYTES || memcmp(line, sig_prefix, SIG_PREFIX_BYTES) != 0)
        return open_failed(err, "signature line %u does not start with an em dash and a space",
                           line_no);
    line += SIG_PREFIX_BYTES;
    len -= SIG_PREFIX_BYTES;
    const char *space = memchr(line, ' ', len);
    size_t name_len = space ? (size_t)(space - line) : len;
    if (!space || note_name_check(line, name_len, NULL))
        return open_failed(err, "signature line %u has no valid key name and space", line_no);
    uint8_t sig[SIG_MAX_DECODED_BYTES];
    long got = base64_decode(space + 1, len - name_len - 1, sig, sizeof sig);
    if (got < SIG_MIN_BYTES)
        return open_failed(err, "signature line %u is not base64 of 5 bytes or more", line_no);
    uint32_t key_id =
        (uint32_t)sig[0] << 24 | (uint32_t)sig[1] << 16 | (uint32_t)sig[2] << 8 | sig[3];
    size_t at = 0;
    int found = known_key_find(known, n_known, line, name_len, key_id, &at);
    if (found < 0)
        return jerr_set(err, STELE_EINVAL, NULL, "two different verifier keys are %.*s+%08" PRIx32,
                        (int)name_len, line, key_id);
    if (found == 0) {
        out->n_unknown++;
        return 0;
    }
    int ok = ed25519_verify(known[at].public_key, text, text_len, sig + SIG_KEY_ID_BYTES,
                            (size_t)got - SIG_KEY_ID_BYTES);
    if (ok < 0)
        return jerr_set(err, -ENOMEM, NULL, "could not verify a signature");
    if (!ok)
        return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY,
                        "signed note does not open: invalid signature by key %s+%08" PRIx32,
                        known[at].name, key_id);
    if (out->n_verified++ == 0)
        out->signer = at;
    return 0;
}

/* The offset of the blank line before the signatures: the last "\n\n" (its second byte). */
static int
find_signature_block(const char *note, size_t len, size_t *text_len)
{
    for (size_t i = len; i-- > 1;)
        if (note[i] == '\n' && note[i - 1] == '\n') {
            *text_len = i;
            return 0;
        }
    return -1;
}

int
note_open(const char *note, size_t len, const note_verifier_t *known, size_t n_known,
          note_opened_t *out, stele_error_t *err)
{
    size_t bad_at = 0, text_len = 0;
    if (len > NOTE_MAX_BYTES)
        return open_failed(err, "it is %zu bytes, above the limit of %d", len, NOTE_MAX_BYTES);
    if (note_text_check(note, len, &bad_at))
        return open_failed(err, "byte %zu is not UTF-8 or is a control character", bad_at);
    if (find_signature_block(note, len, &text_len))
        return open_failed(err, "no blank line before the signatures");
    if (text_len + 1 == len)
        return open_failed(err, "no signature lines after the blank line");
    if (note[len - 1] != '\n')
        return open_failed(err, "the last signature line does not end with a newline");
    note_opened_t found = {.text_len = text_len};
    unsigned line_no = 0;
    for (size_t at = text_len + 1; at < len;) {
        const char *nl = memchr(note + at, '\n', len - at);
        if (++line_no > NOTE_MAX_SIGNATURES)
            return open_failed(err, "more than %d signature lines", NOTE_MAX_SIGNATURES);
        int rc = open_signature_line(note + at, (size_t)(nl - (note + at)), line_no, note, text_len,
                                     known, n_known, &found, err);
        if (rc)
            return rc;
        at = (size_t)(nl - note) + 1;
    }
    if (found.n_verified == 0)
        return open_failed(err, "no signature by a known key (%u by other keys)", found.n_unknown);
    *out = found;
    return 0;
}
