/*
 * origin.c: the names and conversions of a record's origin (stele.h, stele_origin_t). Owns
 * the kind names that `stele tail`, the shipped documents' _stele.origin and the remote
 * reader share, so the three always agree. The origin itself is recorded by the engine
 * (stele.c for the writing process, serve_conn.c for a peer), never read from an event.
 * Pure functions; no state, no locks.
 */
#include "origin.h"

#include "format.h"

#include <stddef.h>
#include <string.h>

_Static_assert(STELE_ORIGIN_UNKNOWN == FRAME_ORIGIN_UNKNOWN, "origin kinds are the format's");
_Static_assert(STELE_ORIGIN_PROCESS == FRAME_ORIGIN_PROCESS, "origin kinds are the format's");
_Static_assert(STELE_ORIGIN_PEER == FRAME_ORIGIN_PEER, "origin kinds are the format's");

/* Indexed by kind. */
static const char *const origin_kind_names[] = {"unknown", "process", "peer"};
#define ORIGIN_N_KINDS (sizeof origin_kind_names / sizeof origin_kind_names[0])

const char *
stele_origin_kind_name(stele_origin_kind_t kind)
{
    return (unsigned)kind < ORIGIN_N_KINDS ? origin_kind_names[kind] : NULL;
}

stele_origin_t
origin_from_journal(const journal_origin_t *o)
{
    stele_origin_kind_t kind =
        o->kind < ORIGIN_N_KINDS ? (stele_origin_kind_t)o->kind : STELE_ORIGIN_UNKNOWN;
    return (stele_origin_t){.uid = o->uid, .gid = o->gid, .pid = o->pid, .kind = kind};
}

int
origin_kind_parse(const char *name, stele_origin_kind_t *out)
{
    for (size_t i = 0; i < ORIGIN_N_KINDS; i++) {
        if (strcmp(name, origin_kind_names[i]) == 0) {
            *out = (stele_origin_kind_t)i;
            return 0;
        }
    }
    return -1;
}

int
origin_equal(const stele_origin_t *a, const stele_origin_t *b)
{
    return a->kind == b->kind && a->uid == b->uid && a->gid == b->gid && a->pid == b->pid;
}
