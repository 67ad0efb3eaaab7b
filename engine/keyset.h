/*
 * keyset.h: finding a key repeated inside one object of an event, at any depth, in one pass
 * over the event (JSON text or BSON), for the rule that an event must read the same to
 * every reader.
 *
 * The keys of the objects being read are kept as (offset, length) into a buffer of the
 * caller's (the BSON being written or read), so the buffer may move between calls. An object
 * with few keys is searched linearly; one that grows past KEYSET_LINEAR_MAX keys gets its
 * keys in a hash table, so an event with 100,000 keys in one object costs O(n), not O(n^2).
 * Single-threaded: one keyset belongs to one validation call.
 */
#ifndef STELE_ENGINE_KEYSET_H
#define STELE_ENGINE_KEYSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Below this many keys an object is searched linearly: cheaper than hashing every key of
 * the small objects most events are made of. */
#define KEYSET_LINEAR_MAX 16
/* Keys held without allocating: enough for the typical event's objects at once. */
#define KEYSET_LOCAL_KEYS 48

typedef struct keyset_key {
    uint32_t off; /* into the caller's buffer */
    uint32_t len;
    uint64_t head; /* the first 8 bytes (zero-padded): most keys compare on it alone */
} keyset_key_t;

/* One open object: where its keys start on the key stack. */
typedef struct keyset_object {
    size_t first;    /* index of its first key */
    uint32_t serial; /* tags its hash entries; never reused within one keyset */
    bool is_hashed;  /* its keys are in the hash table */
} keyset_object_t;

typedef struct keyset {
    keyset_key_t *keys; /* the keys of every open object, innermost last */
    size_t n_keys;
    size_t cap_keys;
    uint64_t *slots; /* hash table: (serial << 32 | key index + 1), 0 = empty */
    size_t n_slots;  /* a power of two, or 0 */
    size_t n_used;
    uint32_t next_serial;
    keyset_key_t local[KEYSET_LOCAL_KEYS];
} keyset_t;

void keyset_init(keyset_t *ks);
/* Frees what the keyset allocated; ks may be used again after keyset_init. */
void keyset_free(keyset_t *ks);

/* Opens an object nested in the ones open now. */
void keyset_object_begin(keyset_t *ks, keyset_object_t *obj);
/* Closes the innermost open object, which must be obj. */
void keyset_object_end(keyset_t *ks, const keyset_object_t *obj);

/*
 * Adds key base[off .. off+len) to the innermost open object obj. Returns 1 when obj already
 * has that key (nothing added), 0 when added, -ENOMEM. `base` is the caller's buffer as it is
 * now; the keys added before must still be at their offsets in it.
 */
int keyset_add(keyset_t *ks, keyset_object_t *obj, const char *base, uint32_t off, uint32_t len);

#endif /* STELE_ENGINE_KEYSET_H */
