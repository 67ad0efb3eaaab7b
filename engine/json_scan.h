/*
 * json_scan.h: the rules of an event's JSON text that hold whatever its syntax, checked on
 * the raw text in one pass, in text order: the text is one object with nothing after it
 * (STELE_EEMPTY, STELE_ENOTOBJECT, STELE_EJSON), no string holds a raw control character
 * (STELE_EJSON), every string is UTF-8 without overlong forms, surrogates or code points past
 * U+10FFFF, written raw or as \u escapes (STELE_EUTF8),
 * no key holds \u0000 (STELE_EKEYNUL) or starts with '$' (STELE_EDOLLARKEY), nesting stays
 * within the limit (STELE_EDEPTH), numbers have no leading zero (STELE_EJSON) and fit int64
 * or a double (STELE_ENUMBER), and the only words are true, false and null (NaN and Infinity
 * are not JSON: STELE_EJSON).
 *
 * These rules outrank syntax errors: a text that breaks one of them is refused with its code
 * even when the JSON is also malformed further on (or earlier), so the verdict on a bad event
 * does not depend on which parser read it. json_bson.c runs the scan only once it has found
 * a fault (the scan is the cold path); the reference the transcoder is tested against runs
 * it before libbson's reader (tests/support/json_reference.c).
 * Pure functions: thread-safe.
 */
#ifndef STELE_ENGINE_JSON_SCAN_H
#define STELE_ENGINE_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stele.h"

/* Deepest nesting of a JSON event (the event itself is level 1): the most libbson's JSON
 * reader takes ("LEVELS_EXCEEDED" past it), kept so the transcoder accepts exactly what that
 * reader accepts. */
#define JSON_MAX_DEPTH 98

/*
 * Checks the rules above on `len` bytes of text, nesting limited to the smaller of max_depth
 * and JSON_MAX_DEPTH. Returns 0 when none is broken (the text may still be malformed JSON),
 * else the code of the first broken rule, with a message naming the byte (and the key path
 * for '$'-keys).
 */
int json_scan(const char *s, size_t len, uint32_t max_depth, stele_error_t *err);

/*
 * The number rules on the token s[start..end), a maximal run of json_is_number_char bytes
 * starting with '-' or a digit: no leading zero (STELE_EJSON), an integer fits int64 and a
 * number with a fraction or exponent a double without overflow or underflow to zero
 * (STELE_ENUMBER). Returns 0 or the code, with a message naming `start`.
 */
int json_scan_number(const char *s, size_t start, size_t end, stele_error_t *err);

/* The bytes a number token is made of: digits, '-', '+', '.', 'e', 'E'. */
bool json_is_number_char(char c);

/* The value (0 to 0xFFFF) of the four hex digits of a \u escape at s[at..at+4), either case;
 * -1 when s, which holds len bytes, has fewer than four there or one is not a hex digit. */
int json_hex4(const char *s, size_t len, size_t at);

/* JSON whitespace: space, tab, line feed, carriage return. */
bool json_is_space(char c);

/* Index of the first non-whitespace byte at or after i (len when none). */
size_t json_skip_space(const char *s, size_t len, size_t i);

/*
 * Length (1 to 4) of the well-formed UTF-8 sequence that starts at s, which holds n >= 1
 * bytes; 0 when the bytes there are not one (a stray continuation byte, 0xC0/0xC1 or 0xF5 and
 * up, an overlong form, a surrogate, a code point past U+10FFFF, or a cut sequence).
 */
size_t json_utf8_sequence(const unsigned char *s, size_t n);

#endif /* STELE_ENGINE_JSON_SCAN_H */
