/*
 * origin.h: who appended a record (stele_origin_t), between the journal's origin block and
 * what readers, `stele tail` and the sinks show (origin.c).
 */
#ifndef STELE_ENGINE_ORIGIN_H
#define STELE_ENGINE_ORIGIN_H

#include "journal.h"
#include "stele.h"

/* The journal's origin block as the public struct (a kind the format does not name reads as
 * STELE_ORIGIN_UNKNOWN with its ids kept). */
stele_origin_t origin_from_journal(const journal_origin_t *o);

/* The kind named `name` ("unknown", "process", "peer") into *out. Returns 0, or -1 for any
 * other name. */
int origin_kind_parse(const char *name, stele_origin_kind_t *out);

/* 1 when a and b say the same: kind and the three ids. */
int origin_equal(const stele_origin_t *a, const stele_origin_t *b);

#endif /* STELE_ENGINE_ORIGIN_H */
