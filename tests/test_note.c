/*
 * test_note.c: journal/note.c, C2SP signed notes with Ed25519. The fixed vectors (key
 * strings, key id, the signed note's exact bytes) are what Go's golang.org/x/mod/sumdb/note
 * produces for the same seed and text (Ed25519 signatures are deterministic); tests/interop
 * checks the same agreement with random keys on every run. Then round trips, several
 * signers, and every malformed note and key string, each refused with its own message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "note.h"

/* Seed 01 02 ... 20 under the name "test/key", as Go formats the pair. */
static const char go_verifier[] = "test/key+2f1b099e+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk";
static const char go_signer[] =
    "PRIVATE+KEY+test/key+2f1b099e+AQECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g";
/* A text with an empty line inside: the last blank line separates the signatures. */
static const char go_text[] = "first line\n\nsecond paragraph\n";
static const char go_note[] =
    "first line\n\nsecond paragraph\n\n"
    "\xe2\x80\x94 test/key "
    "LxsJntUH8mCPQdZ2o0WRND+U+ES0IUVP0eaPQhocoOaAKT21S97dHMD6YifEo9zJ4dLtaIDod5+OVkrQaMMVvEd/"
    "2A4=\n";

static void
test_signer(note_signer_t *s)
{
    uint8_t seed[NOTE_KEY_BYTES];
    for (int i = 0; i < NOTE_KEY_BYTES; i++)
        seed[i] = (uint8_t)(i + 1);
    assert_int_equal(note_signer_from_seed("test/key", seed, s, NULL), 0);
}

static void
test_note_key_strings_match_go(void **state)
{
    (void)state;
    note_signer_t s;
    test_signer(&s);
    assert_int_equal(s.verifier.key_id, 0x2f1b099e);
    char text[NOTE_SIGNER_KEY_MAX_BYTES + 1];
    assert_int_equal(note_verifier_format(&s.verifier, text, sizeof text), strlen(go_verifier));
    assert_string_equal(text, go_verifier);
    assert_int_equal(note_signer_format(&s, text, sizeof text), strlen(go_signer));
    assert_string_equal(text, go_signer);
    /* Too little room: nothing half-written is returned. */
    assert_int_equal(note_verifier_format(&s.verifier, text, strlen(go_verifier)), 0);
    /* And back. */
    note_verifier_t v;
    assert_int_equal(note_verifier_parse(go_verifier, strlen(go_verifier), &v, NULL), 0);
    assert_memory_equal(&v, &s.verifier, sizeof v);
    note_signer_t parsed;
    assert_int_equal(note_signer_parse(go_signer, strlen(go_signer), &parsed, NULL), 0);
    assert_memory_equal(&parsed, &s, sizeof s);
    /* Go writes the id in lower case; upper case parses too. */
    char upper[] = "test/key+2F1B099E+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk";
    assert_int_equal(note_verifier_parse(upper, strlen(upper), &v, NULL), 0);
    note_signer_wipe(&s);
    note_signer_wipe(&parsed);
}

/* RFC 8032 section 7.1, test 1: the public key of a known secret key. */
static void
test_note_derives_rfc8032_public_key(void **state)
{
    (void)state;
    static const uint8_t secret[32] = {0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60,
                                       0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c, 0xc4,
                                       0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19,
                                       0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60};
    static const uint8_t public_key[32] = {0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7,
                                           0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a,
                                           0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25,
                                           0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a};
    note_signer_t s;
    assert_int_equal(note_signer_from_seed("rfc8032", secret, &s, NULL), 0);
    assert_memory_equal(s.verifier.public_key, public_key, 32);
    note_signer_wipe(&s);
    for (size_t i = 0; i < sizeof s; i++)
        assert_int_equal(((const uint8_t *)&s)[i], 0);
}

static void
test_note_signature_matches_go(void **state)
{
    (void)state;
    note_signer_t s;
    test_signer(&s);
    char *note = NULL;
    size_t len = 0;
    assert_int_equal(note_sign(&s, go_text, strlen(go_text), &note, &len, NULL), 0);
    assert_int_equal(len, strlen(go_note));
    assert_string_equal(note, go_note);
    note_opened_t opened;
    assert_int_equal(note_open(note, len, &s.verifier, 1, &opened, NULL), 0);
    assert_int_equal(opened.text_len, strlen(go_text));
    assert_int_equal(opened.n_verified, 1);
    assert_int_equal(opened.n_unknown, 0);
    assert_int_equal(opened.signer, 0);
    free(note);
    note_signer_wipe(&s);
}

/* text + "\n" + the signature lines of each note (all signed over the same text). */
static char *
join_signatures(const char *text, char *const *notes, size_t n_notes, size_t *len_out)
{
    size_t text_len = strlen(text), len = text_len + 1;
    for (size_t i = 0; i < n_notes; i++)
        len += strlen(notes[i]) - text_len - 1;
    char *out = malloc(len + 1);
    assert_non_null(out);
    memcpy(out, text, text_len);
    out[text_len] = '\n';
    size_t at = text_len + 1;
    for (size_t i = 0; i < n_notes; i++) {
        size_t n = strlen(notes[i]) - text_len - 1;
        memcpy(out + at, notes[i] + text_len + 1, n);
        at += n;
    }
    out[at] = '\0';
    *len_out = at;
    return out;
}

static void
test_note_round_trips_with_several_keys(void **state)
{
    (void)state;
    note_signer_t a, b, c;
    assert_int_equal(note_keygen("log.a", &a, NULL), 0);
    assert_int_equal(note_keygen("log.b", &b, NULL), 0);
    assert_int_equal(note_keygen("caf\xc3\xa9/log", &c, NULL), 0); /* UTF-8 names */
    assert_memory_not_equal(a.seed, b.seed, NOTE_KEY_BYTES);
    const char *texts[] = {"\n", "one line\n", "tabs\tare\tnot\tok\n", "\n\n\nblank lines\n\n",
                           "\xe2\x80\x94 a line that looks like a signature\n"};
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        const char *text = texts[t];
        char *na = NULL, *nb = NULL, *nc = NULL;
        size_t la, lb, lc;
        int rc = note_sign(&a, text, strlen(text), &na, &la, NULL);
        if (strchr(text, '\t')) { /* a control character: refused, nothing to open */
            assert_int_equal(rc, STELE_EINVAL);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(note_sign(&b, text, strlen(text), &nb, &lb, NULL), 0);
        assert_int_equal(note_sign(&c, text, strlen(text), &nc, &lc, NULL), 0);
        char *all[3] = {na, nb, nc};
        size_t len = 0;
        char *joined = join_signatures(text, all, 3, &len);
        note_opened_t o;
        /* Only b known: a's and c's signatures are ignored. */
        assert_int_equal(note_open(joined, len, &b.verifier, 1, &o, NULL), 0);
        assert_int_equal(o.n_verified, 1);
        assert_int_equal(o.n_unknown, 2);
        assert_int_equal(o.text_len, strlen(text));
        assert_memory_equal(joined, text, o.text_len);
        /* All known, listed in another order: signer is the first line's key. */
        note_verifier_t known[3] = {c.verifier, b.verifier, a.verifier};
        assert_int_equal(note_open(joined, len, known, 3, &o, NULL), 0);
        assert_int_equal(o.n_verified, 3);
        assert_int_equal(o.n_unknown, 0);
        assert_int_equal(o.signer, 2);
        /* A key listed twice is one key. */
        note_verifier_t twice[2] = {a.verifier, a.verifier};
        assert_int_equal(note_open(na, la, twice, 2, &o, NULL), 0);
        free(joined);
        free(na);
        free(nb);
        free(nc);
    }
    note_signer_wipe(&a);
    note_signer_wipe(&b);
    note_signer_wipe(&c);
}

static void
expect_open_fails(const char *note, size_t len, const note_verifier_t *known, size_t n_known,
                  int code, const char *message)
{
    stele_error_t err = {0};
    note_opened_t o, untouched;
    memset(&o, 0x5a, sizeof o);
    untouched = o;
    int rc = note_open(note, len, known, n_known, &o, &err);
    if (rc != code || !strstr(err.message, message))
        fail_msg("note \"%.*s\": rc %d \"%s\", want %d \"%s\"", (int)(len > 60 ? 60 : len), note,
                 rc, err.message, code, message);
    assert_memory_equal(&o, &untouched, sizeof o);
}

/* go_note with `from` replaced by `to` (first occurrence). */
static char *
edited(const char *from, const char *to, size_t *len_out)
{
    const char *at = strstr(go_note, from);
    assert_non_null(at);
    size_t head = (size_t)(at - go_note), tail = strlen(at + strlen(from));
    size_t len = head + strlen(to) + tail;
    char *out = malloc(len + 1);
    assert_non_null(out);
    memcpy(out, go_note, head);
    memcpy(out + head, to, strlen(to));
    memcpy(out + head + strlen(to), at + strlen(from), tail + 1);
    *len_out = len;
    return out;
}

static void
test_note_open_refuses_malformed_notes(void **state)
{
    (void)state;
    note_signer_t s;
    test_signer(&s);
    const note_verifier_t *v = &s.verifier;
    static const struct {
        const char *from, *to, *message;
    } cases[] = {
        {"first line", "first\x01line", "byte 5 is not UTF-8 or is a control character"},
        {"first line", "first\rline", "byte 5 is not UTF-8"},
        {"first line", "first\xff line", "byte 5 is not UTF-8"},
        {"first line", "first\xc0\xa0line", "byte 5 is not UTF-8"},         /* overlong */
        {"first line", "first\xed\xa0\x80line", "byte 5 is not UTF-8"},     /* surrogate */
        {"first line", "first\xf4\x90\x80\x80line", "byte 5 is not UTF-8"}, /* > U+10FFFF */
        {"first line", "first\xe2\x80line", "byte 5 is not UTF-8"},         /* cut short */
        /* Without its own blank line, the text's blank line splits: "second paragraph" is
         * read as a signature line. */
        {"paragraph\n\n", "paragraph\n", "signature line 1 does not start with an em dash"},
        {"\xe2\x80\x94 ", "- ", "signature line 1 does not start with an em dash and a space"},
        {"\xe2\x80\x94 ", "\xe2\x80\x94", "signature line 1 does not start with an em dash"},
        {"\xe2\x80\x94 ", "\xe2\x80\x94  ", "signature line 1 has no valid key name and space"},
        {"test/key ", "test/key", "signature line 1 has no valid key name and space"},
        {"test/key ", "test+key ", "signature line 1 has no valid key name and space"},
        {"test/key ", "test/key  ", "signature line 1 is not base64"},
        {"LxsJ", "Lx-J", "signature line 1 is not base64"},
        {"2A4=\n", "2A4\n", "signature line 1 is not base64"},
        {"2A4=\n", "2A4= \n", "signature line 1 is not base64"},
        {"2A4=\n", "2A4=", "the last signature line does not end with a newline"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = 0;
        char *note = edited(cases[i].from, cases[i].to, &len);
        expect_open_fails(note, len, v, 1, STELE_ECORRUPT, cases[i].message);
        free(note);
    }
    /* Shapes the table cannot make. */
    expect_open_fails("", 0, v, 1, STELE_ECORRUPT, "no blank line");
    static const char no_blank[] = "text\n\xe2\x80\x94 k AAAAAAAA\n";
    expect_open_fails(no_blank, strlen(no_blank), v, 1, STELE_ECORRUPT,
                      "no blank line before the signatures");
    expect_open_fails("text\n\n", 6, v, 1, STELE_ECORRUPT, "no signature lines");
    expect_open_fails("text\n\n\n", 7, v, 1, STELE_ECORRUPT, "no signature lines");
    static const char short_sig[] = "text\n\n\xe2\x80\x94 test/key AAAA\n"; /* 3 bytes */
    expect_open_fails(short_sig, strlen(short_sig), v, 1, STELE_ECORRUPT,
                      "is not base64 of 5 bytes or more");
    static const char blank_between[] = "text\n\n\xe2\x80\x94 k AAAAAAAA\n\n\xe2\x80\x94";
    expect_open_fails(blank_between, strlen(blank_between), v, 1, STELE_ECORRUPT,
                      "does not end with a newline");
    note_signer_wipe(&s);
}

static void
test_note_open_refuses_bad_and_unknown_signatures(void **state)
{
    (void)state;
    note_signer_t s, other;
    test_signer(&s);
    assert_int_equal(note_keygen("test/key", &other, NULL), 0); /* same name, other key */
    size_t len = strlen(go_note);
    /* Signed by a key we do not know (same name, another id): nothing verified. */
    expect_open_fails(go_note, len, &other.verifier, 1, STELE_ECORRUPT,
                      "no signature by a known key (1 by other keys)");
    expect_open_fails(go_note, len, NULL, 0, STELE_ECORRUPT, "no signature by a known key");
    /* Same id under another name: also another key. */
    note_verifier_t renamed = s.verifier;
    snprintf(renamed.name, sizeof renamed.name, "test/other");
    expect_open_fails(go_note, len, &renamed, 1, STELE_ECORRUPT, "no signature by a known key");
    /* A known key whose signature does not verify: any byte of the text or signature. */
    char note[sizeof go_note];
    memcpy(note, go_note, sizeof note);
    size_t sig_at = strlen(go_text) + 1 + 4 + strlen("test/key ") + 8; /* past the key id */
    for (size_t i = 0; i < len - 1; i++) {
        if (i >= strlen(go_text) && i < sig_at)
            continue; /* the blank line, dash, name and key id: other tests */
        if (note[i] == '=' || note[i] == '\n')
            continue;
        char saved = note[i];
        /* 'A' (all zero bits) keeps the last character's unused bits zero. */
        note[i] = saved == 'A' ? (i == len - 3 ? 'E' : 'B') : 'A';
        expect_open_fails(note, len, &s.verifier, 1, STELE_ECORRUPT,
                          "invalid signature by key test/key+2f1b099e");
        note[i] = saved;
    }
    /* A signature one byte short (4 + 63 bytes) by a known key. */
    static const char truncated[] = "first line\n\nsecond paragraph\n\n\xe2\x80\x94 test/key "
                                    "LxsJntUH8mCPQdZ2o0WRND+U+ES0IUVP0eaPQhocoOaAKT21S97dHMD6YifEo"
                                    "9zJ4dLtaIDod5+OVkrQaMMVvEd/\n";
    expect_open_fails(truncated, strlen(truncated), &s.verifier, 1, STELE_ECORRUPT,
                      "invalid signature");
    /* A bad signature by a known key fails the note even beside a good one. */
    char *good = NULL;
    size_t good_len = 0;
    assert_int_equal(note_sign(&other, go_text, strlen(go_text), &good, &good_len, NULL), 0);
    note_verifier_t both[2] = {other.verifier, s.verifier};
    memcpy(note, go_note, sizeof note);
    note[len - 10] ^= 1;
    char *two[2] = {good, note};
    size_t joined_len = 0;
    char *joined = join_signatures(go_text, two, 2, &joined_len);
    expect_open_fails(joined, joined_len, both, 2, STELE_ECORRUPT, "invalid signature");
    /* Two different known keys with one name and id: refused, not guessed between. */
    note_verifier_t clash[2] = {s.verifier, s.verifier};
    clash[1].public_key[0] ^= 1;
    expect_open_fails(go_note, len, clash, 2, STELE_EINVAL, "two different verifier keys");
    free(joined);
    free(good);
    note_signer_wipe(&s);
    note_signer_wipe(&other);
}

static void
test_note_open_refuses_oversized_notes(void **state)
{
    (void)state;
    note_signer_t s;
    test_signer(&s);
    /* One byte over the limit. */
    size_t big = NOTE_MAX_BYTES + 1;
    char *note = malloc(big);
    assert_non_null(note);
    memset(note, 'x', big);
    note[big - 1] = '\n';
    expect_open_fails(note, big, &s.verifier, 1, STELE_ECORRUPT,
                      "65537 bytes, above the limit of 65536");
    /* Too many signature lines, even if all are by keys we do not know. */
    const char line[] = "\xe2\x80\x94 k AAAAAAAA\n";
    size_t len = strlen(go_text) + 1;
    memcpy(note, go_text, strlen(go_text));
    note[len - 1] = '\n';
    for (int i = 0; i <= NOTE_MAX_SIGNATURES; i++) {
        memcpy(note + len, line, strlen(line));
        len += strlen(line);
    }
    expect_open_fails(note, len, &s.verifier, 1, STELE_ECORRUPT, "more than 100 signature lines");
    /* Exactly the limit is fine: 99 unknown and the real one. */
    len -= 2 * strlen(line);
    const char *real = go_note + strlen(go_text) + 1;
    memcpy(note + len, real, strlen(real));
    len += strlen(real);
    note_opened_t o;
    assert_int_equal(note_open(note, len, &s.verifier, 1, &o, NULL), 0);
    assert_int_equal(o.n_unknown, NOTE_MAX_SIGNATURES - 1);
    free(note);
    note_signer_wipe(&s);
}

static void
test_note_sign_refuses_bad_text(void **state)
{
    (void)state;
    note_signer_t s;
    test_signer(&s);
    char *note = (char *)0x1;
    size_t len = 99;
    stele_error_t err = {0};
    assert_int_equal(note_sign(&s, "", 0, &note, &len, &err), STELE_EINVAL);
    assert_non_null(strstr(err.message, "does not end with a newline"));
    assert_int_equal(note_sign(&s, "no newline", 10, &note, &len, &err), STELE_EINVAL);
    assert_non_null(strstr(err.message, "does not end with a newline"));
    assert_int_equal(note_sign(&s, "nul\0inside\n", 11, &note, &len, &err), STELE_EINVAL);
    assert_non_null(strstr(err.message, "byte 3 is not UTF-8 or is a control character"));
    assert_int_equal(note_sign(&s, "bad \xff\n", 6, &note, &len, &err), STELE_EINVAL);
    size_t big = NOTE_MAX_BYTES - 100;
    char *text = malloc(big);
    assert_non_null(text);
    memset(text, 'x', big);
    text[big - 1] = '\n';
    assert_int_equal(note_sign(&s, text, big, &note, &len, &err), STELE_EINVAL);
    assert_non_null(strstr(err.message, "the limit is 65536"));
    assert_ptr_equal(note, (char *)0x1);
    assert_int_equal(len, 99);
    /* The largest text that fits signs and opens. */
    size_t fits = NOTE_MAX_BYTES - 1 - 4 - strlen("test/key") - 1 - 92 - 1;
    assert_int_equal(note_sign(&s, text + big - fits, fits, &note, &len, &err), 0);
    assert_int_equal(len, NOTE_MAX_BYTES);
    note_opened_t o;
    assert_int_equal(note_open(note, len, &s.verifier, 1, &o, NULL), 0);
    free(note);
    free(text);
    note_signer_wipe(&s);
}

static void
test_note_names_follow_the_c2sp_rules(void **state)
{
    (void)state;
    static const char *const good[] = {"a", "example.org/log", "caf\xc3\xa9", "x\x7fy",
                                       "\xf0\x9f\x93\x9c"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_int_equal(note_name_check(good[i], strlen(good[i]), NULL), 0);
    static const struct {
        const char *name, *message;
    } bad[] = {
        {"", "key name is empty"},
        {"a+b", "'+'"},
        {"a b", "space"},
        {"a\tb", "space"},
        {"a\nb", "space"},
        {"a\x01", "control character at byte 1"},
        {"a\xc2\xa0", "at byte 1"},     /* no-break space */
        {"a\xc2\x85", "at byte 1"},     /* next line */
        {"a\xe2\x80\x83", "at byte 1"}, /* em space */
        {"a\xe2\x80\xa8", "at byte 1"}, /* line separator */
        {"a\xe3\x80\x80", "at byte 1"}, /* ideographic space */
        {"a\xe1\x9a\x80", "at byte 1"}, /* ogham space mark */
        {"a\xff", "not UTF-8 at byte 1"},
        {"a\xc0\xaf", "not UTF-8 at byte 1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        stele_error_t err = {0};
        assert_int_equal(note_name_check(bad[i].name, strlen(bad[i].name), &err), STELE_EINVAL);
        if (!strstr(err.message, bad[i].message))
            fail_msg("name %zu: \"%s\"", i, err.message);
    }
    char long_name[NOTE_NAME_MAX_BYTES + 2];
    memset(long_name, 'n', sizeof long_name);
    long_name[NOTE_NAME_MAX_BYTES + 1] = '\0';
    stele_error_t err = {0};
    assert_int_equal(note_name_check(long_name, NOTE_NAME_MAX_BYTES, NULL), 0);
    note_signer_t s;
    assert_int_equal(note_keygen(long_name, &s, &err), STELE_EINVAL);
    assert_non_null(strstr(err.message, "256 bytes; the limit is 255"));
    /* The longest name makes the longest key strings, which the buffers hold. */
    long_name[NOTE_NAME_MAX_BYTES] = '\0';
    assert_int_equal(note_keygen(long_name, &s, NULL), 0);
    char text[NOTE_SIGNER_KEY_MAX_BYTES + 1];
    assert_int_equal(note_signer_format(&s, text, sizeof text), NOTE_SIGNER_KEY_MAX_BYTES);
    assert_int_equal(note_verifier_format(&s.verifier, text, sizeof text),
                     NOTE_VERIFIER_KEY_MAX_BYTES);
    note_signer_wipe(&s);
}

static void
expect_key_refused(const char *text, int is_signer, const char *message)
{
    stele_error_t err = {0};
    note_signer_t s, s_before;
    note_verifier_t v, v_before;
    memset(&s, 0x33, sizeof s);
    memset(&v, 0x33, sizeof v);
    s_before = s;
    v_before = v;
    int rc = is_signer ? note_signer_parse(text, strlen(text), &s, &err)
                       : note_verifier_parse(text, strlen(text), &v, &err);
    if (rc != STELE_EINVAL || !strstr(err.message, message))
        fail_msg("key \"%s\": rc %d \"%s\", want \"%s\"", text, rc, err.message, message);
    assert_memory_equal(&s, &s_before, sizeof s);
    assert_memory_equal(&v, &v_before, sizeof v);
}

static void
test_note_key_strings_refuse_bad_input(void **state)
{
    (void)state;
    static const struct {
        const char *text, *message;
    } verifiers[] = {
        {"", "not of the form name+keyid+key"},
        {"test/key", "not of the form"},
        {"test/key+2f1b099e", "not of the form"},
        {"+2f1b099e+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk", "key name is empty"},
        {"test key+2f1b099e+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk", "space"},
        {"test/key+2f1b099+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk", "not 8 hex digits"},
        {"test/key+2f1b099e0+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk", "not 8 hex"},
        {"test/key+2f1b099g+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk", "not 8 hex"},
        {"test/key+2f1b099e+", "not base64 of 33 bytes"},
        {"test/key+2f1b099e+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZ", "not base64"},
        {"test/key+2f1b099e+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZl", "does not match"},
        {"test/key+2f1b099e+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk=", "not base64"},
        {"test/key+2f1b099e+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk\n", "not base64"},
        {"test/key+2f1b099e+Anm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk", "type byte 0x02"},
        {"test/key+2f1b099e+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJY=", "31 key bytes"},
        {"test/key+2f1b099e+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBA==", "30 key bytes"},
        {"test/key+2f1b099e+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZkAA==", "33 key bytes"},
        {"test/key+2f1b099f+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk",
         "key id 2f1b099f does not match its name and key (2f1b099e)"},
        {"test/kez+2f1b099e+AXm1Vi6P5lT5QHixEuipi6eQH4U65pW+1+DjkQutBJZk", "does not match"},
    };
    for (size_t i = 0; i < sizeof verifiers / sizeof verifiers[0]; i++)
        expect_key_refused(verifiers[i].text, 0, verifiers[i].message);
    static const struct {
        const char *text, *message;
    } signers[] = {
        {"", "does not start with PRIVATE+KEY+"},
        {"PRIVATE+KEY", "does not start with PRIVATE+KEY+"},
        {"private+key+test/key+2f1b099e+AQECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g",
         "does not start"},
        {go_verifier, "does not start with PRIVATE+KEY+"},
        {"PRIVATE+KEY+test/key+2f1b099e", "not of the form"},
        {"PRIVATE+KEY+test/key+2f1b099e+AQECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", "not base64"},
        {"PRIVATE+KEY+test/key+2f1b099e+AgECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g",
         "type byte 0x02"},
        {"PRIVATE+KEY+test/key+2f1b099e+AQECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8h",
         "signer key: key id 2f1b099e does not match"},
        /* Another seed under the same id: the id is checked against the derived key. */
        {"PRIVATE+KEY+test/key+2f1b099e+AQICAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g",
         "key id 2f1b099e does not match"},
    };
    for (size_t i = 0; i < sizeof signers / sizeof signers[0]; i++)
        expect_key_refused(signers[i].text, 1, signers[i].message);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_note_key_strings_match_go),
        cmocka_unit_test(test_note_derives_rfc8032_public_key),
        cmocka_unit_test(test_note_signature_matches_go),
        cmocka_unit_test(test_note_round_trips_with_several_keys),
        cmocka_unit_test(test_note_open_refuses_malformed_notes),
        cmocka_unit_test(test_note_open_refuses_bad_and_unknown_signatures),
        cmocka_unit_test(test_note_open_refuses_oversized_notes),
        cmocka_unit_test(test_note_sign_refuses_bad_text),
        cmocka_unit_test(test_note_names_follow_the_c2sp_rules),
        cmocka_unit_test(test_note_key_strings_refuse_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
