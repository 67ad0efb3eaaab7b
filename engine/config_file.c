/*
 * config_file.c: stele_options_load_file: an INI file ([journal] knobs, [sink NAME] keys)
 * read with inih, each setting checked exactly as stele_options_set checks it, errors
 * naming the file and line. The line reader settles what inih alone would get wrong (long
 * lines, indented keys, NUL bytes; see config_ini_read_line). A failed load changes nothing
 * in the caller's struct (config_finish). No state outside the call: thread-safe on
 * distinct structs.
 */
#include "config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "error.h"

/* One INI file as inih reads it: a line per call of config_ini_read_line(). */
typedef struct config_ini_file {
    FILE *fp;
    char *line; /* getline's buffer: the whole line, however long */
    size_t line_cap;
    int lineno;
    int bad_lineno; /* the line refused here (0: none); the parse stopped there */
    char bad_why[96];
    const char *bad_hint;
    int read_errno; /* a read failed (a directory: EISDIR); the parse stopped there */
} config_ini_file_t;

/* UTF-8 byte order mark, which some editors put at the start of a file. */
static const char config_bom[] = "\xEF\xBB\xBF";

/*
 * inih's line reader (fgets-like), which settles per line what inih itself would get wrong:
 *  - inih reads a line into a fixed buffer of `cap` bytes (INI_MAX_LINE, 200 in the usual
 *    builds) and parses the rest of a longer line as a line of its own: a long value was
 *    cut, or the tail of a long comment was taken as a setting. A line that does not fit is
 *    refused here, with its own number;
 *  - inih takes a line that starts with whitespace as the continuation of the previous
 *    key's value (Python's multi-line values) and hands it over as a new value of that key,
 *    so an indented key replaced the value above it. No knob has a multi-line value: the
 *    leading whitespace (and a BOM) is dropped and the line is read as it looks;
 *  - a NUL byte would end the line early for inih and hide the rest: refused.
 * Returns NULL at the end of the file or on a refusal (bad_lineno set) or read error.
 */
static char *
config_ini_read_line(char *out, int cap, void *stream)
{
    config_ini_file_t *f = stream;
    ssize_t n = getline(&f->line, &f->line_cap, f->fp);
    if (n < 0) {
        if (ferror(f->fp))
            f->read_errno = errno ? errno : EIO;
        return NULL;
    }
    f->lineno++;
    const char *text = f->line;
    size_t len = (size_t)n;
    if (memchr(text, '\0', len)) {
        f->bad_lineno = f->lineno;
        snprintf(f->bad_why, sizeof f->bad_why, "NUL byte in the line");
        f->bad_hint = "a config file is text: check how it was written";
        return NULL;
    }
    size_t start = 0;
    if (f->lineno == 1 && len >= 3 && memcmp(text, config_bom, 3) == 0)
        start = 3;
    while (start < len && isspace((unsigned char)text[start]))
        start++;
    while (len > start && isspace((unsigned char)text[len - 1]))
        len--;
    text += start;
    len -= start;
    if (cap < 1 || len >= (size_t)cap) {
        f->bad_lineno = f->lineno;
        snprintf(f->bad_why, sizeof f->bad_why, "line longer than %d bytes", cap - 1);
        f->bad_hint = "a longer value (such as a sink uri) can be given with "
                      "stele_options_set() or a command-line flag";
        return NULL;
    }
    memcpy(out, text, len);
    out[len] = '\0';
    return out;
}

typedef struct config_ini_ctx {
    stele_options_t *scratch;
    stele_error_t *err;
    int rc;
} config_ini_ctx_t;

static int
config_ini_handler(void *user, const char *section, const char *name, const char *value)
{
    config_ini_ctx_t *ctx = user;
    if (ctx->rc)
        return 1; /* keep the first error; inih reports the line of the first 0 */
    if (section[0] == '\0' || strcmp(section, "journal") == 0) {
        ctx->rc = config_set_one(ctx->scratch, name, value, "", ctx->err);
    } else if (strncmp(section, "sink ", 5) == 0 && section[5] != '\0') {
        ctx->rc = config_sink_set(ctx->scratch, section + 5, name, value, "", ctx->err);
    } else {
        ctx->rc = error_set(ctx->err, STELE_ECONFIG, "unknown section [%.64s]", section);
        error_set_hint(ctx->err, "sections are [journal] and [sink NAME]");
    }
    return ctx->rc == 0;
}

/* Runs inih over the open file; returns 0 or the error, with path and line. */
static int
config_ini_parse(config_ini_file_t *f, const char *path, stele_options_t *scratch,
                 stele_error_t *err)
{
    stele_error_t local;
    error_clear(&local);
    config_ini_ctx_t ctx = {.scratch = scratch, .err = &local, .rc = 0};
    int line = ini_parse_stream(config_ini_read_line, f, config_ini_handler, &ctx);
    if (line == -2)
        return error_set(err, -ENOMEM, "out of memory reading config file %s", path);
    if (line > 0) {
        /* inih's first error comes before a line refused by the reader, which stopped it */
        if (!ctx.rc)
            return error_set(err, STELE_ECONFIG,
                             "%s:%d: syntax error (expected key = value or [section])", path, line);
        return error_set_hinted(err, STELE_ECONFIG, local.hint, "%s:%d: %s", path, line,
                                local.message);
    }
    if (f->bad_lineno)
        return error_set_hinted(err, STELE_ECONFIG, f->bad_hint, "%s:%d: %s", path, f->bad_lineno,
                                f->bad_why);
    if (f->read_errno)
        return error_set(err, -f->read_errno, "could not read config file %s: %s", path,
                         stele_strerror(-f->read_errno));
    return 0;
}

int
stele_options_load_file(stele_options_t *opts, const char *path, stele_error_t *err)
{
    if (!opts || !path)
        return error_set(err, STELE_EINVAL, "stele_options_load_file: opts and path required");
    config_ini_file_t f = {.fp = fopen(path, "re")};
    if (!f.fp) {
        int e = errno ? errno : ENOENT;
        return error_set(err, -e, "could not open config file %s: %s", path, stele_strerror(-e));
    }
    stele_options_t scratch = *opts;
    int rc = config_ini_parse(&f, path, &scratch, err);
    free(f.line);
    fclose(f.fp);
    return config_finish(opts, &scratch, rc);
}
