/*
 * meta.c: stele's checkpoint and key statement texts (meta.h): formatting them, parsing them
 * strictly (one text per statement, as checkpoint.c does for the three lines it owns),
 * signing them, and opening a meta frame's payload. The line layout is FORMAT.md's section
 * 11. No state.
 */
#include "meta.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "jerr.h"

static const char *const meta_reason_names[] = {"records",   "interval", "roll",  "close",
                                                "retention", "start",    "rotate"};
#define META_N_REASONS (sizeof meta_reason_names / sizeof meta_reason_names[0])

/* Extension lines of one statement: epoch, time, reason, then first or key. */
#define META_MAX_LINES 4

const char *
meta_reason_name(meta_reason_t reason)
{
    return (unsigned)reason < META_N_REASONS ? meta_reason_names[reason] : "?";
}

int
meta_reason_is_key(meta_reason_t reason)
{
    return reason == META_REASON_START || reason == META_REASON_ROTATE;
}

uint8_t
meta_type_of(meta_reason_t reason)
{
    return meta_reason_is_key(reason) ? META_TYPE_KEY : META_TYPE_CHECKPOINT;
}

void
meta_origin(char out[CHECKPOINT_ORIGIN_MAX_BYTES + 1], const char *source,
            const uint8_t genesis[MERKLE_HASH_BYTES])
{
    static const char hex[] = "0123456789abcdef";
    char genesis_hex[2 * MERKLE_HASH_BYTES + 1];
    for (size_t i = 0; i < MERKLE_HASH_BYTES; i++) {
        genesis_hex[2 * i] = hex[genesis[i] >> 4];
        genesis_hex[2 * i + 1] = hex[genesis[i] & 15];
    }
    genesis_hex[2 * MERKLE_HASH_BYTES] = '\0';
    snprintf(out, CHECKPOINT_ORIGIN_MAX_BYTES + 1, "stele/%.64s/%s", source, genesis_hex);
}

/* The extension lines m's reason calls for, into ext. Returns their length, 0 on overflow. */
static size_t
meta_format_extensions(const meta_statement_t *m, char *ext, size_t cap)
{
    int n = snprintf(ext, cap, "epoch %" PRIu64 "\ntime %" PRId64 "\nreason %s\n", m->epoch,
                     m->time_ns, meta_reason_name(m->reason));
    if (n < 0 || (size_t)n >= cap)
        return 0;
    size_t len = (size_t)n;
    if (m->reason == META_REASON_RETENTION)
        n = snprintf(ext + len, cap - len, "first %" PRIu64 "\n", m->first_seq);
    else if (meta_reason_is_key(m->reason)) {
        char vkey[NOTE_VERIFIER_KEY_MAX_BYTES + 1];
        if (note_verifier_format(&m->key, vkey, sizeof vkey) == 0)
            return 0;
        n = snprintf(ext + len, cap - len, "key %" PRIu64 " %s\n", m->key_epoch, vkey);
    } else
        n = 0;
    if (n < 0 || (size_t)n >= cap - len)
        return 0;
    return len + (size_t)n;
}

int
meta_format(const meta_statement_t *m, char *out, size_t cap, size_t *len_out, stele_error_t *err)
{
    if ((unsigned)m->reason >= META_N_REASONS)
        return jerr_set(err, STELE_EINVAL, NULL, "unknown checkpoint reason %d", (int)m->reason);
    if ((m->reason == META_REASON_RETENTION) != (m->first_seq != 0))
        return jerr_set(err, STELE_EINVAL, NULL,
                        "a first seq belongs to retention checkpoints, and only to them");
    char ext[META_TEXT_MAX_BYTES];
    size_t ext_len = meta_format_extensions(m, ext, sizeof ext);
    if (ext_len == 0)
        return jerr_set(err, STELE_EINVAL, NULL, "checkpoint extension lines do not fit");
    checkpoint_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.origin, sizeof c.origin, "%s", m->origin);
    c.size = m->size;
    memcpy(c.root, m->root, MERKLE_HASH_BYTES);
    c.extensions = ext;
    c.extensions_len = ext_len;
    return checkpoint_format(&c, out, cap, len_out, err);
}

static int meta_bad(stele_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
meta_bad(stele_error_t *err, const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return jerr_set(err, STELE_ECORRUPT, JERR_HINT_VERIFY, "checkpoint does not parse: %s", why);
}

/* As checkpoint_parse_u64 (a canonical decimal), with an optional '-' (not before "0"), within an
 * i64. */
static int
meta_parse_i64(const char *s, size_t len, int64_t *out)
{
    int neg = len > 0 && s[0] == '-';
    uint64_t v = 0;
    if (checkpoint_parse_u64(s + neg, len - (size_t)neg, &v) ||
        v > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX) || (neg && v == 0))
        return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* The value of extension line `line` (length len) if it starts with "<name> ". */
static const char *
meta_line_value(const char *line, size_t len, const char *name, size_t *value_len)
{
    size_t name_len = strlen(name);
    if (len <= name_len + 1 || memcmp(line, name, name_len) != 0 || line[name_len] != ' ')
        return NULL;
    *value_len = len - name_len - 1;
    return line + name_len + 1;
}

static int
meta_parse_reason(const char *s, size_t len, meta_reason_t *out)
{
    for (size_t i = 0; i < META_N_REASONS; i++)
        if (strlen(meta_reason_names[i]) == len && memcmp(s, meta_reason_names[i], len) == 0) {
            *out = (meta_reason_t)i;
            return 0;
        }
    return -1;
}

/* "key <epoch> <verifier key>" */
static int
meta_parse_key(const char *s, size_t len, meta_statement_t *m, stele_error_t *err)
{
    const char *space = memchr(s, ' ', len);
    if (!space || checkpoint_parse_u64(s, (size_t)(space - s), &m->key_epoch))
        return meta_bad(err, "the key line is not \"key <epoch> <verifier key>\"");
    stele_error_t why = {0};
    if (note_verifier_parse(space + 1, len - (size_t)(space - s) - 1, &m->key, &why))
        return meta_bad(err, "the key line's verifier key: %.100s", why.message);
    return 0;
}

/* Splits the extension lines into lines[] (pointers and lengths); returns how many, or -1
 * when there are more than META_MAX_LINES. */
static int
meta_split_lines(const char *ext, size_t len, const char **lines, size_t *lens)
{
    int n = 0;
    for (size_t at = 0; at < len; n++) {
        const char *nl = memchr(ext + at, '\n', len - at);
        if (n == META_MAX_LINES || !nl)
            return -1;
        lines[n] = ext + at;
        lens[n] = (size_t)(nl - (ext + at));
        at = (size_t)(nl - ext) + 1;
    }
    return n;
}

/* The three lines every statement has: epoch, time, reason. */
static int
meta_parse_common(const char **lines, const size_t *lens, meta_statement_t *m, stele_error_t *err)
{
    const char *v;
    size_t vlen;
    if (!(v = meta_line_value(lines[0], lens[0], "epoch", &vlen)) ||
        checkpoint_parse_u64(v, vlen, &m->epoch))
        return meta_bad(err, "line 4 is not \"epoch <number>\"");
    if (!(v = meta_line_value(lines[1], lens[1], "time", &vlen)) ||
        meta_parse_i64(v, vlen, &m->time_ns))
        return meta_bad(err, "line 5 is not \"time <ns>\"");
    if (!(v = meta_line_value(lines[2], lens[2], "reason", &vlen)) ||
        meta_parse_reason(v, vlen, &m->reason))
        return meta_bad(err, "line 6 is not \"reason <known reason>\"");
    return 0;
}

int
meta_parse(const char *text, size_t len, meta_statement_t *out, stele_error_t *err)
{
    checkpoint_t c;
    int rc = checkpoint_parse(text, len, &c, err);
    if (rc)
        return rc;
    meta_statement_t m;
    memset(&m, 0, sizeof m);
    snprintf(m.origin, sizeof m.origin, "%s", c.origin);
    m.size = c.size;
    memcpy(m.root, c.root, MERKLE_HASH_BYTES);
    const char *lines[META_MAX_LINES];
    size_t lens[META_MAX_LINES];
    int n = meta_split_lines(c.extensions, c.extensions_len, lines, lens);
    if (n < 3)
        return meta_bad(err, "%s extension lines (stele's are epoch, time, reason and one more)",
                        n < 0 ? "too many" : "too few");
    rc = meta_parse_common(lines, lens, &m, err);
    if (rc)
        return rc;
    int wants_extra = m.reason == META_REASON_RETENTION || meta_reason_is_key(m.reason);
    if (n != 3 + wants_extra)
        return meta_bad(err, "a %s statement has %d extension lines, not %d",
                        meta_reason_name(m.reason), n, 3 + wants_extra);
    const char *v;
    size_t vlen;
    if (m.reason == META_REASON_RETENTION &&
        (!(v = meta_line_value(lines[3], lens[3], "first", &vlen)) ||
         checkpoint_parse_u64(v, vlen, &m.first_seq) || m.first_seq == 0))
        return meta_bad(err, "line 7 is not \"first <seq>\"");
    if (meta_reason_is_key(m.reason)) {
        if (!(v = meta_line_value(lines[3], lens[3], "key", &vlen)))
            return meta_bad(err, "line 7 is not \"key <epoch> <verifier key>\"");
        rc = meta_parse_key(v, vlen, &m, err);
        if (rc)
            return rc;
    }
    *out = m;
    return 0;
}

size_t
meta_note_text_len(const char *note, size_t len)
{
    for (size_t i = len; i-- > 1;)
        if (note[i] == '\n' && note[i - 1] == '\n')
            return i;
    return 0;
}

int
meta_sign(const note_signer_t *s, const meta_statement_t *m, char **note_out, size_t *note_len,
          stele_error_t *err)
{
    char text[META_TEXT_MAX_BYTES];
    size_t text_len = 0;
    int rc = meta_format(m, text, sizeof text, &text_len, err);
    if (rc)
        return rc;
    return note_sign(s, text, text_len, note_out, note_len, err);
}

/* The type byte and the note of a payload, and the statement its text says. */
static int
meta_read(const uint8_t *payload, size_t len, const note_verifier_t *v, meta_statement_t *out,
          stele_error_t *err)
{
    if (len < META_MIN_PAYLOAD || len > META_PAYLOAD_MAX_BYTES)
        return meta_bad(err, "a meta frame payload of %zu bytes", len);
    const char *note = (const char *)payload + 1;
    size_t note_len = len - 1, text_len = 0;
    int rc = 0;
    if (v) {
        note_opened_t opened;
        rc = note_open(note, note_len, v, 1, &opened, err);
        text_len = opened.text_len;
    } else {
        text_len = meta_note_text_len(note, note_len);
        if (text_len == 0)
            rc = meta_bad(err, "no blank line before signatures");
    }
    meta_statement_t m;
    if (!rc)
        rc = meta_parse(note, text_len, &m, err);
    if (!rc && payload[0] != meta_type_of(m.reason))
        rc = meta_bad(err, "a %s statement in a meta frame of type %u", meta_reason_name(m.reason),
                      payload[0]);
    if (!rc)
        *out = m;
    return rc;
}

int
meta_open(const uint8_t *payload, size_t len, const note_verifier_t *v, meta_statement_t *out,
          stele_error_t *err)
{
    if (!v)
        return jerr_set(err, STELE_EINVAL, NULL, "meta_open needs a verifier key");
    return meta_read(payload, len, v, out, err);
}

int
meta_read_unsigned(const uint8_t *payload, size_t len, meta_statement_t *out, stele_error_t *err)
{
    return meta_read(payload, len, NULL, out, err);
}
