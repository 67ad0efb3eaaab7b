/*
 * config.h: the knob table behind stele_options_set / load_file / load_env (<stele.h>) and
 * the checks stele_open runs on a whole options struct.
 */
#ifndef STELE_ENGINE_CONFIG_H
#define STELE_ENGINE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "stele.h"

/* Largest event: MongoDB's 16 MiB document limit less room for the shipped envelope
 * (_id with source and seq, the STELE_META_FIELD sub-document with ts and hashes). */
#define CONFIG_MAX_RECORD_LIMIT ((uint32_t)(16u << 20) - (16u << 10))
/* Source names appear in MongoDB _id values and file names: keep them short and plain. */
#define CONFIG_SOURCE_MAX 63

/*
 * Checks the relations between knobs that no single knob can check (segment large enough for
 * the largest record, quota large enough for two segments, sink names unique, ...).
 * Returns 0 or STELE_ECONFIG naming the knobs.
 */
int config_check(const stele_options_t *opts, stele_error_t *err);

#endif /* STELE_ENGINE_CONFIG_H */
