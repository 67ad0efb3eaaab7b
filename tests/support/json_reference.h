/*
 * json_reference.h: the reference stele's JSON reader (engine/json_bson.c) is held to:
 * libbson's JSON reader with the engine's rules around it, the way events were read before
 * stele had a reader of its own. The text rules (json_scan) first, then bson_init_from_json,
 * its failures classified into stele's codes, then the BSON walk of validate_bson (size,
 * empty, reserved, '.', repeated keys). For tests and fuzz targets only.
 */
#ifndef STELE_TEST_JSON_REFERENCE_H
#define STELE_TEST_JSON_REFERENCE_H

#include <bson/bson.h>
#include <stddef.h>

#include "validate.h"

/* Returns 0 with *out (initialised by the call) holding the event, to free with
 * bson_destroy(); or a stele code, with *out holding nothing. */
int json_reference_read(const char *json, size_t len, const validate_limits_t *lim, bson_t *out,
                        stele_error_t *err);

#endif /* STELE_TEST_JSON_REFERENCE_H */
