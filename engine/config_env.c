/*
 * config_env.c: stele_options_load_env: every knob of the table from a STELE_<KNOB>
 * variable (STELE_SYNC=interval), checked exactly as stele_options_set checks it. A failed
 * load changes nothing in the caller's struct (config_finish). No state; it reads the
 * environment, which the caller must not change meanwhile.
 */
#include "config_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

int
stele_options_load_env(stele_options_t *opts, stele_error_t *err)
{
    if (!opts)
        return error_set(err, STELE_EINVAL, "stele_options_load_env: opts required");
    size_t n_knobs = 0;
    const stele_knob_t *knobs = stele_knobs(&n_knobs);
    stele_options_t scratch = *opts;
    int rc = 0;
    for (size_t i = 0; i < n_knobs && rc == 0; i++) {
        char var[64] = "STELE_";
        size_t n = strlen(var);
        for (const char *p = knobs[i].name; *p && n + 1 < sizeof var; p++)
            var[n++] = (char)toupper((unsigned char)*p);
        var[n] = '\0';
        const char *value = getenv(var);
        if (!value)
            continue;
        char where[96];
        snprintf(where, sizeof where, "environment variable %s", var);
        rc = config_set_one(&scratch, knobs[i].name, value, where, err);
    }
    return config_finish(opts, &scratch, rc);
}
