/*
 * json_bson.h: stele's JSON reader, a strict single-pass JSON-to-BSON transcoder that
 * enforces every rule of validate.h as it goes and writes exactly the BSON libbson's JSON
 * reader writes for the same accepted text (same types, same bytes).
 * Pure function of its inputs: thread-safe.
 */
#ifndef STELE_ENGINE_JSON_BSON_H
#define STELE_ENGINE_JSON_BSON_H

#include <stddef.h>

#include "validate.h"

/*
 * Reads `len` bytes of JSON text into out (initialised by the caller with validate_buf_init;
 * its bytes are replaced). Returns 0 with out->data[0 .. out->len) a BSON document, or the
 * code of validate_json, with the message it gives; on failure out holds no document.
 */
int json_bson_transcode(const char *json, size_t len, const validate_limits_t *lim,
                        validate_buf_t *out, stele_error_t *err);

#endif /* STELE_ENGINE_JSON_BSON_H */
