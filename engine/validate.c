/*
 * validate.c: the rules of validate.h. Owns no state; runs in the appending thread.
 *
 * JSON text is read by json_bson.c, which checks every rule as it writes the BSON (and asks
 * json_scan.c for the verdict on a faulty text). BSON input is walked here: the key rules,
 * reserved keys, repeated and dotted keys, depth, size, and UTF-8 of every key and string.
 */
#include "validate.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h> /* SSIZE_MAX */

#include "config.h" /* config_check */
#include "error.h"
#include "json_bson.h"
#include "keyset.h"

/* Longest key path quoted in an error message; longer paths end in "...". */
#define VALIDATE_PATH_BYTES 160

/* -- the rules against ambiguous keys, shared with json_bson.c ---------------------------- */

/* " (byte N)" for JSON text, nothing for BSON (byte < 0). */
static void
validate_byte_suffix(char *buf, size_t cap, long byte)
{
    buf[0] = '\0';
    if (byte >= 0)
        snprintf(buf, cap, " (byte %ld)", byte);
}

int
validate_key_repeated(stele_error_t *err, const char *key, size_t key_len, const char *path,
                      long byte)
{
    char at[32];
    validate_byte_suffix(at, sizeof at, byte);
    return error_set_hinted(err, STELE_EAMBIGUOUS,
                            "readers could take either value: send each key once per object",
                            "duplicate key \"%.*s\" at %s%s", (int)key_len, key, path, at);
}

int
validate_key_dotted(stele_error_t *err, const char *key, size_t key_len, const char *parent_path,
                    long byte)
{
    char at[32];
    validate_byte_suffix(at, sizeof at, byte);
    return error_set_hinted(
        err, STELE_EAMBIGUOUS,
        "MongoDB refuses such keys and queries read them as paths: nest the field instead",
        "key \"%.*s\"%s%s contains '.'%s", (int)key_len, key, parent_path ? " under " : "",
        parent_path ? parent_path : "", at);
}

/* -- the document walk ------------------------------------------------------------------ */

typedef struct walk {
    const validate_limits_t *lim;
    bool check_strings; /* JSON input was already UTF-8 checked by libbson */
    const char *base;   /* the document's first byte: keys are kept as offsets from it */
    keyset_t keys;      /* the keys of the documents being walked, for repeats */
    size_t path_len;
    char path[VALIDATE_PATH_BYTES];
    stele_error_t *err;
} walk_t;

/* Formats "path.key" of the element the iterator is on, for messages. */
static const char *
walk_key_path(walk_t *w, const char *key, char *buf, size_t cap)
{
    if (w->path_len == 0)
        snprintf(buf, cap, "%s", key);
    else
        snprintf(buf, cap, "%s.%s", w->path, key);
    return buf;
}

static int
walk_fail(walk_t *w, int code, const char *key, const char *what)
{
    char path[VALIDATE_PATH_BYTES + 64];
    return error_set(w->err, code, "key \"%s\" %s", walk_key_path(w, key, path, sizeof path), what);
}

/* Plain ASCII (the common case for keys and most values) is checked here in one pass;
 * anything else goes to libbson's validator, which is exact but several times slower. */
static bool
walk_utf8_ok(const char *s, size_t len, bool allow_nul)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    uint64_t any_high = 0, any_nul = 0;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, sizeof w);
        any_high |= w & highs;
        any_nul |= (w - ones) & ~w & highs; /* non-zero iff some byte of w is zero */
    }
    for (; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        any_high |= ch & 0x80u;
        any_nul |= ch == 0;
    }
    if (!any_high && (allow_nul || !any_nul))
        return true;
    if (!bson_utf8_validate(s, len, allow_nul))
        return false;
    /* Allowing NUL, libbson also takes C0 80, the overlong U+0000 of "modified UTF-8"; no
     * other sequence it accepts holds a 0xC0 byte. */
    return !allow_nul || !memchr(s, 0xC0, len);
}

static int walk_document(walk_t *w, bson_iter_t *it, uint32_t depth);

/* Keys are short: a loop beats a call to memchr. */
static bool
walk_has_dot(const char *key, uint32_t key_len)
{
    for (uint32_t i = 0; i < key_len; i++)
        if (key[i] == '.')
            return true;
    return false;
}

bool
validate_key_is_reserved(const validate_limits_t *lim, const char *key, size_t key_len)
{
    static const char *const envelope[] = {STELE_ID_FIELD, STELE_META_FIELD,
                                           STELE_TIME_FIELD_DEFAULT};
    for (size_t i = 0; key_len > 0 && key[0] == '_' && i < sizeof envelope / sizeof envelope[0];
         i++)
        if (strlen(envelope[i]) == key_len && memcmp(key, envelope[i], key_len) == 0)
            return true;
    for (size_t i = 0; i < lim->n_time_fields; i++)
        if (strlen(lim->time_fields[i]) == key_len &&
            memcmp(key, lim->time_fields[i], key_len) == 0)
            return true;
    return false;
}

void
validate_limits_reserve_sinks(validate_limits_t *lim, const stele_options_t *opts)
{
    lim->n_time_fields = 0;
    for (size_t i = 0; i < opts->n_sinks && i < STELE_MAX_SINKS; i++)
        if (opts->sinks[i].time_field && opts->sinks[i].time_field[0])
            lim->time_fields[lim->n_time_fields++] = opts->sinks[i].time_field;
}

static int
walk_check_key(walk_t *w, const char *key, uint32_t key_len, uint32_t depth)
{
    if (!walk_utf8_ok(key, key_len, false)) {
        char path[VALIDATE_PATH_BYTES];
        snprintf(path, sizeof path, "%s", w->path_len ? w->path : "(top level)");
        return error_set(w->err, STELE_EUTF8, "invalid utf-8 in a key under %s", path);
    }
    if (key[0] == '$')
        return walk_fail(w, STELE_EDOLLARKEY, key, "starts with '$'");
    if (depth == 1 && validate_key_is_reserved(w->lim, key, key_len))
        return walk_fail(w, STELE_ERESERVEDKEY, key, "is reserved at the top level");
    if (walk_has_dot(key, key_len))
        return validate_key_dotted(w->err, key, key_len, w->path_len ? w->path : NULL, -1);
    return 0;
}

/* A key already seen in the document the iterator walks (obj). */
static int
walk_check_repeat(walk_t *w, keyset_object_t *obj, const char *key, uint32_t key_len)
{
    int rc = keyset_add(&w->keys, obj, w->base, (uint32_t)(key - w->base), key_len);
    if (rc == 1) {
        char path[VALIDATE_PATH_BYTES + 64];
        return validate_key_repeated(w->err, key, key_len, walk_key_path(w, key, path, sizeof path),
                                     -1);
    }
    if (rc < 0)
        return error_set(w->err, rc, "out of memory checking the keys of an event");
    return 0;
}

static int
walk_check_strings(walk_t *w, const bson_iter_t *it, const char *key)
{
    uint32_t len = 0;
    const char *s = NULL;
    const char *s2 = NULL;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8:
        s = bson_iter_utf8(it, &len);
        break;
    case BSON_TYPE_CODE:
        s = bson_iter_code(it, &len);
        break;
    case BSON_TYPE_SYMBOL:
        s = bson_iter_symbol(it, &len);
        break;
    case BSON_TYPE_CODEWSCOPE: {
        uint32_t scope_len;
        const uint8_t *scope;
        s = bson_iter_codewscope(it, &len, &scope_len, &scope);
        break;
    }
    case BSON_TYPE_REGEX:
        s = bson_iter_regex(it, &s2);
        len = (uint32_t)strlen(s);
        break;
    case BSON_TYPE_DBPOINTER: {
        const bson_oid_t *oid;
        bson_iter_dbpointer(it, &len, &s, &oid);
        break;
    }
    default:
        return 0;
    }
    /* Strings are length-prefixed in BSON, so an embedded NUL is legal data. */
    if (s && !walk_utf8_ok(s, len, true))
        return walk_fail(w, STELE_EUTF8, key, "has invalid utf-8 in its value");
    if (s2 && !walk_utf8_ok(s2, strlen(s2), false))
        return walk_fail(w, STELE_EUTF8, key, "has invalid utf-8 in its regex options");
    return 0;
}

static int
walk_child(walk_t *w, const bson_iter_t *it, const char *key, uint32_t depth)
{
    bson_iter_t child;
    if (depth + 1 > w->lim->max_depth) {
        char what[64];
        snprintf(what, sizeof what, "is nested deeper than %u levels", w->lim->max_depth);
        return walk_fail(w, STELE_EDEPTH, key, what);
    }
    if (!bson_iter_recurse(it, &child))
        return walk_fail(w, STELE_EBSON, key, "holds a malformed embedded document");
    /* The path is kept for messages only; memcpy keeps this cheap on the success path. */
    size_t saved = w->path_len;
    size_t key_len = strlen(key);
    size_t room = sizeof w->path - 1 - saved;
    size_t dot = saved ? 1 : 0;
    if (dot + key_len <= room) {
        if (dot)
            w->path[saved] = '.';
        memcpy(w->path + saved + dot, key, key_len);
        w->path_len = saved + dot + key_len;
    } else {
        w->path_len = sizeof w->path - 1;
    }
    w->path[w->path_len] = '\0';
    int rc = walk_document(w, &child, depth + 1);
    w->path_len = saved;
    w->path[saved] = '\0';
    return rc;
}

/* Array keys get the same checks: libbson makes them "0", "1", ..., and BSON input whose
 * array keys repeat or hold a '.' is refused rather than guessed at. */
static int
walk_elements(walk_t *w, bson_iter_t *it, uint32_t depth, keyset_object_t *obj)
{
    while (bson_iter_next(it)) {
        const char *key = bson_iter_key(it);
        uint32_t key_len = bson_iter_key_len(it);
        int rc = walk_check_key(w, key, key_len, depth);
        if (rc == 0)
            rc = walk_check_repeat(w, obj, key, key_len);
        if (rc)
            return rc;
        bson_type_t type = bson_iter_type(it);
        if (type == BSON_TYPE_DOCUMENT || type == BSON_TYPE_ARRAY)
            rc = walk_child(w, it, key, depth);
        else if (w->check_strings)
            rc = walk_check_strings(w, it, key);
        if (rc)
            return rc;
    }
    return 0;
}

static int
walk_document(walk_t *w, bson_iter_t *it, uint32_t depth)
{
    keyset_object_t obj;
    keyset_object_begin(&w->keys, &obj);
    int rc = walk_elements(w, it, depth, &obj);
    keyset_object_end(&w->keys, &obj);
    if (rc)
        return rc;
    if (it->err_off) {
        char path[VALIDATE_PATH_BYTES];
        snprintf(path, sizeof path, "%s", w->path_len ? w->path : "(top level)");
        return error_set(w->err, STELE_EBSON, "malformed bson element at byte %u of %s",
                         (unsigned)it->err_off, path);
    }
    return 0;
}

static int
validate_walk(const bson_t *doc, const validate_limits_t *lim, bool check_strings,
              stele_error_t *err)
{
    walk_t w = {.lim = lim, .check_strings = check_strings, .err = err};
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return error_set(err, STELE_EBSON, "malformed bson document");
    w.base = (const char *)bson_get_data(doc);
    keyset_init(&w.keys);
    int rc = walk_document(&w, &it, 1);
    keyset_free(&w.keys);
    return rc;
}

int
validate_bson(const uint8_t *doc, size_t len, const validate_limits_t *lim, stele_error_t *err)
{
    bson_t b;
    if (!doc || len == 0)
        return error_set(err, STELE_EEMPTY, "event is empty (0 bytes)");
    if (len > lim->max_record_bytes)
        return error_set(err, STELE_ETOOBIG, "event of %zu bytes exceeds max_record_bytes (%u)",
                         len, lim->max_record_bytes);
    if (len < 5)
        return error_set(err, STELE_EBSON, "bson of %zu bytes is shorter than the 5-byte minimum",
                         len);
    uint32_t declared =
        (uint32_t)doc[0] | (uint32_t)doc[1] << 8 | (uint32_t)doc[2] << 16 | (uint32_t)doc[3] << 24;
    if (declared != len)
        return error_set(err, STELE_EBSON,
                         "bson length field says %u bytes but %zu bytes were given", declared, len);
    if (doc[len - 1] != 0 || !bson_init_static(&b, doc, len))
        return error_set(err, STELE_EBSON, "bson document does not end with a NUL byte");
    if (len == 5)
        return error_set(err, STELE_EEMPTY, "event has no fields");
    return validate_walk(&b, lim, true, err);
}

/* -- JSON ----------------------------------------------------------------------------- */

void
validate_buf_init(validate_buf_t *b)
{
    b->data = b->local;
    b->len = 0;
    b->cap = sizeof b->local;
}

void
validate_buf_free(validate_buf_t *b)
{
    if (b->data != b->local)
        free(b->data);
    validate_buf_init(b);
}

int
validate_json(const char *json, size_t len, const validate_limits_t *lim, validate_buf_t *out,
              stele_error_t *err)
{
    out->len = 0;
    if (!json || len == 0)
        return error_set(err, STELE_EEMPTY, "event is empty (0 bytes)");
    if (len > SSIZE_MAX)
        return error_set(err, STELE_ETOOBIG, "json text of %zu bytes", len);
    return json_bson_transcode(json, len, lim, out, err);
}

/* -- the public validate-only call --------------------------------------------------------- */

int
stele_validate_json(const char *json, size_t len, const stele_options_t *opts, stele_error_t *err)
{
    stele_options_t defaults;
    if (opts == NULL) {
        stele_options_init(&defaults);
        opts = &defaults;
    }
    int rc = config_check(opts, err); /* what stele_open would refuse, refused the same way */
    if (rc)
        return rc;
    validate_limits_t limits = {.max_record_bytes = opts->max_record_bytes,
                                .max_depth = opts->max_depth};
    validate_limits_reserve_sinks(&limits, opts);
    validate_buf_t buf;
    validate_buf_init(&buf);
    rc = validate_json(json, len, &limits, &buf, err);
    validate_buf_free(&buf);
    return rc;
}
