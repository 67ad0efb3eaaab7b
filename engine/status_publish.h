/*
 * status_publish.h: what a writer publishes in the index's meta table for `stele status` in
 * other processes (its settings, its sinks' counters), and how a reader reads it back.
 * Written by the engine only (settings at open, sink counters from the index writer
 * thread); values are short text so an LMDB dump stays readable. No URI or credential is
 * ever written: sink counters come from shipper_stats(), whose error text is scrubbed.
 */
#ifndef STELE_ENGINE_STATUS_PUBLISH_H
#define STELE_ENGINE_STATUS_PUBLISH_H

#include <stdint.h>

#include "index.h"
#include "stele.h"

/* Publishes the writer's settings (meta "writer.settings") and the names of its sinks
 * ("writer.sinks"), so status lists a sink that has no checkpoint yet; names that do not
 * fit the meta value are left out. */
int status_publish_put_settings(index_t *ix, const stele_options_t *opts, stele_error_t *err);
/* Fills the settings fields of *st; leaves them 0 when none was published. */
void status_publish_get_settings(index_t *ix, stele_status_t *st);

/* Copies up to max names (each < 64 bytes) into names; returns how many. */
size_t status_publish_get_sink_names(index_t *ix, char (*names)[64], size_t max);

/* Publishes one sink's counters (meta "sink.<name>.stats") and last error
 * ("sink.<name>.error"). */
int status_publish_put_sink(index_t *ix, const stele_sink_stats_t *s, stele_error_t *err);
/* Fills the published counters of sink st->sinks[i] (named already); 0s when none. */
void status_publish_get_sink(index_t *ix, stele_status_t *st, size_t i);

#endif /* STELE_ENGINE_STATUS_PUBLISH_H */
