/*
 * remote_reader.h: the inside of stele_remote_reader_* (<stele.h>) that its unit test needs:
 * turning one shipped MongoDB document back into the record it was shipped from.
 */
#ifndef STELE_ENGINE_REMOTE_READER_H
#define STELE_ENGINE_REMOTE_READER_H

#include <bson/bson.h>

#include "stele.h"

/*
 * Converts a shipped document (docs/mongodb.md) of `source` into *rec and *event:
 *   - seq from _id.seq (an integer >= 1), after checking that _id.src is `source`;
 *   - ts_ns from the metadata's ts_ns (int64), else from its ts (BSON date, ms);
 *   - hash and prev_hash from the metadata (32-byte binaries);
 *   - the event: every top-level field but _id, the metadata field and the sink's time field
 *     (time_field; NULL = STELE_TIME_FIELD_DEFAULT) when it holds a BSON date, in stored order,
 *     into *event, which must be initialised (bson_init) and is reinitialised here.
 * rec->bson points into *event. `where` names the collection in messages (no credentials).
 * Returns 0 or STELE_EINTEGRITY with a message naming the seq (when known) and what is
 * missing or wrong; *rec is then unspecified. Pure; thread-safe.
 */
int remote_doc_to_record(const bson_t *doc, const char *source, const char *time_field,
                         const char *where, bson_t *event, stele_record_t *rec, stele_error_t *err);

#endif /* STELE_ENGINE_REMOTE_READER_H */
