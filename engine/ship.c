/*
 * ship.c: placeholder until the fan-out work lands: refuses every sink, so
 * configuring one fails loudly at open instead of silently not shipping.
 */
#include "ship.h"

#include <stdio.h>

int
shipper_start(const shipper_config_t *cfg, shipper_t **out, stele_error_t *err)
{
    (void)cfg;
    *out = NULL;
    if (err) {
        err->code = STELE_ENOSINK;
        snprintf(err->message, sizeof err->message, "shipping to MongoDB is not built yet");
        err->hint[0] = '\0';
    }
    return STELE_ENOSINK;
}

void
shipper_stop(shipper_t *s, int drain_timeout_ms)
{
    (void)s;
    (void)drain_timeout_ms;
}

uint64_t
shipper_shipped_seq(const shipper_t *s)
{
    (void)s;
    return 0;
}

void
shipper_stats(shipper_t *s, uint64_t committed_seq, stele_sink_stats_t *out)
{
    (void)s;
    (void)committed_seq;
    (void)out;
}
