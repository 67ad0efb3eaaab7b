/*
 * config_internal.h: the calls between the files behind config.h, not for the rest of the
 * engine: config.c (the knob table, defaults, setters, checks), config_parse.c (text to
 * numbers), config_env.c and config_file.c (the loaders). Only config*.c include it.
 */
#ifndef STELE_ENGINE_CONFIG_INTERNAL_H
#define STELE_ENGINE_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"

#define KIB ((uint64_t)1 << 10)
#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)

/* -- config_parse.c: each returns false for text that is not of its form or overflows ---- */

/* Leading decimal digits into *out; *rest points past them. */
bool config_parse_u64(const char *text, const char **rest, uint64_t *out);
/* "64M", "4096", "1GiB" -> bytes. */
bool config_parse_size(const char *text, uint64_t *out);
/* "250", "5ms", "2s" -> a count of unit_ns nanoseconds; must be a whole number of them. */
bool config_parse_duration(const char *text, uint64_t unit_ns, uint64_t *out);
/* true/false, yes/no, on/off, 1/0 (any case) -> 1 or 0. */
bool config_parse_bool(const char *text, uint64_t *out);
/* Index of `text` among `choices` ("a|b|c", any case). */
bool config_parse_enum(const char *text, const char *choices, uint64_t *out);
/* Octal digits up to 07777. */
bool config_parse_mode(const char *text, uint64_t *out);

/* -- config.c: what the loaders set knobs with ------------------------------------------- */

/* Sets knob `name`, or "sink.NAME.KEY", on scratch from text. `where` (may be "") prefixes
 * messages: the loader's variable, or "". Returns 0 or STELE_ECONFIG / -ENOMEM. */
int config_set_one(stele_options_t *scratch, const char *name, const char *value, const char *where,
                   stele_error_t *err);
/* Sets key `key` of the sink called sink_name (added with defaults when missing). */
int config_sink_set(stele_options_t *scratch, const char *sink_name, const char *key,
                    const char *value, const char *where, stele_error_t *err);
/* Records p (malloc'd) in the arena of opts, freed by stele_options_release; frees p and
 * returns NULL when out of memory. config_own_string does so with a copy of s. */
void *config_own(stele_options_t *opts, void *p);
const char *config_own_string(stele_options_t *opts, const char *s);
/* Ends a load worked on a copy of *opts: stores scratch into *opts when rc is 0, else
 * drops what only the scratch owns, so a failed load leaves *opts as it was. Returns rc. */
int config_finish(stele_options_t *opts, stele_options_t *scratch, int rc);

/* -- config_collection.c: the sink's time field, indexes, time-series ------------------- */

/* Sets time_field, index (appended to indexes) or timeseries of sink s; returns 1 when `key`
 * is none of them, else 0 or STELE_ECONFIG / -ENOMEM. */
int config_collection_set(stele_options_t *opts, stele_sink_options_t *s, const char *key,
                          const char *value, const char *where, stele_error_t *err);

#endif /* STELE_ENGINE_CONFIG_INTERNAL_H */
