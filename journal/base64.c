/*
 * base64.c: strict standard base64 over OpenSSL's block coder (base64.h). OpenSSL's
 * decoder is lenient (it skips whitespace and accepts padding anywhere and stray bits), so
 * the text is checked first and the result re-encoded and compared: a signed byte string
 * has exactly one accepted text. No state.
 */
#include "base64.h"

#include <string.h>

#include <openssl/evp.h>

/* Decoding works in chunks so a long text needs no allocation. A multiple of 4. */
#define BASE64_CHUNK_CHARS 512

size_t
base64_encode(const uint8_t *in, size_t len, char *out)
{
    /* EVP_EncodeBlock takes an int length: encode in pieces of whole 3-byte groups. */
    size_t written = 0;
    while (len > 0) {
        size_t piece = len > 3 * 4096 ? 3 * 4096 : len;
        written += (size_t)EVP_EncodeBlock((unsigned char *)out + written, in, (int)piece);
        in += piece;
        len -= piece;
    }
    out[written] = '\0';
    return written;
}

static int
is_base64_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

/* How many '=' end the text (0..2), or -1 if the characters are not base64's. */
static int
padding_of(const char *text, size_t len)
{
    if (len % 4 != 0)
        return -1;
    int pad = 0;
    while (pad < 2 && len > (size_t)pad && text[len - 1 - (size_t)pad] == '=')
        pad++;
    for (size_t i = 0; i < len - (size_t)pad; i++)
        if (!is_base64_char(text[i]))
            return -1;
    return pad;
}

long
base64_decode(const char *text, size_t len, uint8_t *out, size_t cap)
{
    int pad = padding_of(text, len);
    if (pad < 0)
        return -1;
    size_t n_bytes = len / 4 * 3 - (size_t)pad;
    if (n_bytes > cap)
        return -1;
    size_t done = 0;
    for (size_t at = 0; at < len; at += BASE64_CHUNK_CHARS) {
        size_t chars = len - at < BASE64_CHUNK_CHARS ? len - at : BASE64_CHUNK_CHARS;
        uint8_t bytes[BASE64_CHUNK_CHARS / 4 * 3];
        char again[BASE64_CHUNK_CHARS + 1];
        int got = EVP_DecodeBlock(bytes, (const unsigned char *)text + at, (int)chars);
        if (got < 0)
            return -1;
        /* The last chunk's padding decodes as zero bytes: drop them. */
        size_t keep = (size_t)got - (at + chars == len ? (size_t)pad : 0);
        /* Canonical: stray bits under the padding re-encode differently. */
        if (base64_encode(bytes, keep, again) != chars || memcmp(again, text + at, chars) != 0)
            return -1;
        memcpy(out + done, bytes, keep);
        done += keep;
    }
    return (long)done;
}
