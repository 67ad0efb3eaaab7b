/*
 * config_parse.c: text to numbers for the knobs: plain integers, sizes with K, M, G, T
 * suffixes, durations with units, booleans, enum choices and octal file modes. Each parser
 * checks the text's form and overflow, never a knob's range (config.c does, from the
 * table). Pure functions: no state, any thread.
 */
#include "config_internal.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

bool
config_parse_u64(const char *text, const char **rest, uint64_t *out)
{
    const char *p = text;
    uint64_t v = 0;
    if (!isdigit((unsigned char)*p))
        return false;
    for (; isdigit((unsigned char)*p); p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *rest = p;
    *out = v;
    return true;
}

static bool
config_mul(uint64_t v, uint64_t m, uint64_t *out)
{
    if (m && v > UINT64_MAX / m)
        return false;
    *out = v * m;
    return true;
}

/* "64M", "4096", "1GiB" -> bytes. */
bool
config_parse_size(const char *text, uint64_t *out)
{
    const char *rest;
    uint64_t v;
    if (!config_parse_u64(text, &rest, &v))
        return false;
    uint64_t mult = 1;
    switch (toupper((unsigned char)*rest)) {
    case '\0':
        return (*out = v), true;
    case 'K':
        mult = KIB;
        break;
    case 'M':
        mult = MIB;
        break;
    case 'G':
        mult = GIB;
        break;
    case 'T':
        mult = 1024 * GIB;
        break;
    case 'B':
        return rest[1] == '\0' && ((*out = v), true);
    default:
        return false;
    }
    rest++;
    if (strcmp(rest, "") != 0 && strcasecmp(rest, "B") != 0 && strcasecmp(rest, "iB") != 0)
        return false;
    return config_mul(v, mult, out);
}

/* "250", "5ms", "2s" -> the knob's own unit (unit_ns nanoseconds); must be a whole number. */
bool
config_parse_duration(const char *text, uint64_t unit_ns, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t ns;
    } units[] = {{"ns", 1},
                 {"us", 1000},
                 {"ms", 1000000},
                 {"s", 1000000000},
                 {"m", 60ull * 1000000000},
                 {"h", 3600ull * 1000000000}};
    const char *rest;
    uint64_t v;
    if (!config_parse_u64(text, &rest, &v))
        return false;
    if (*rest == '\0')
        return (*out = v), true;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(rest, units[i].suffix) != 0)
            continue;
        uint64_t ns;
        if (!config_mul(v, units[i].ns, &ns)) {
            /* Too many nanoseconds: convert without passing through ns. */
            if (units[i].ns % unit_ns != 0)
                return false;
            return config_mul(v, units[i].ns / unit_ns, out);
        }
        if (ns % unit_ns != 0)
            return false;
        *out = ns / unit_ns;
        return true;
    }
    return false;
}

bool
config_parse_bool(const char *text, uint64_t *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(text, yes[i]) == 0)
            return (*out = 1), true;
        if (strcasecmp(text, no[i]) == 0)
            return (*out = 0), true;
    }
    return false;
}

/* Index of `text` among "a|b|c". */
bool
config_parse_enum(const char *text, const char *choices, uint64_t *out)
{
    size_t len = strlen(text);
    uint64_t index = 0;
    for (const char *p = choices; *p; index++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncasecmp(p, text, n) == 0)
            return (*out = index), true;
        p += n + (bar ? 1 : 0);
    }
    return false;
}

bool
config_parse_mode(const char *text, uint64_t *out)
{
    uint64_t v = 0;
    if (!*text)
        return false;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '7')
            return false;
        v = v * 8 + (uint64_t)(*p - '0');
        if (v > 07777)
            return false;
    }
    *out = v;
    return true;
}
