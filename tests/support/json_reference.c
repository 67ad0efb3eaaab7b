/*
 * json_reference.c: the reference reader of json_reference.h. Owns no state.
 */
#include "json_reference.h"

#include <string.h>

#include "error.h"
#include "json_scan.h"

/* libbson's parse failures in stele's codes. A text whose strings break the UTF-8 rules, whose
 * numbers are out of range or that nests too deeply is refused by json_scan first; the rest
 * is malformed JSON. */
static int
reference_classify(const bson_error_t *berr, stele_error_t *err)
{
    if (strstr(berr->message, "UTF8") || strstr(berr->message, "INVALID_CODEPOINT"))
        return error_set(err, STELE_EUTF8, "invalid utf-8: %s", berr->message);
    if (strstr(berr->message, "out of range"))
        return error_set(err, STELE_ENUMBER, "number out of range: %s", berr->message);
    return error_set(err, STELE_EJSON, "malformed json: %s", berr->message);
}

int
json_reference_read(const char *json, size_t len, const validate_limits_t *lim, bson_t *out,
                    stele_error_t *err)
{
    if (!json || len == 0)
        return error_set(err, STELE_EEMPTY, "event is empty (0 bytes)");
    int rc = json_scan(json, len, lim->max_depth, err);
    if (rc)
        return rc;
    bson_error_t berr;
    if (!bson_init_from_json(out, json, (ssize_t)len, &berr)) /* frees *out when it fails */
        return reference_classify(&berr, err);
    rc = validate_bson(bson_get_data(out), out->len, lim, err);
    if (rc)
        bson_destroy(out);
    return rc;
}
