/*
 * keyset.c: the repeated-key search of keyset.h. Owns the key stack and the hash table of
 * one validation call; no locks (single-threaded by contract).
 *
 * Invariants: the keys of every open object are contiguous on the stack, innermost object
 * last, so closing an object pops its keys. A hash entry is (serial, key index + 1); it can
 * match only while the object of that serial is open, because serials are never reused, so
 * entries left behind by closed objects need no cleanup: they are dropped or ignored at the
 * next growth of the table.
 */
#include "keyset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Smallest hash table; it doubles whenever it would become half full. */
#define KEYSET_MIN_SLOTS 64

void
keyset_init(keyset_t *ks)
{
    memset(ks, 0, offsetof(keyset_t, local));
    ks->keys = ks->local;
    ks->cap_keys = KEYSET_LOCAL_KEYS;
}

void
keyset_free(keyset_t *ks)
{
    if (ks->keys != ks->local)
        free(ks->keys);
    free(ks->slots);
    ks->keys = ks->local;
    ks->slots = NULL;
}

void
keyset_object_begin(keyset_t *ks, keyset_object_t *obj)
{
    obj->first = ks->n_keys;
    obj->serial = ++ks->next_serial;
    obj->is_hashed = false;
}

void
keyset_object_end(keyset_t *ks, const keyset_object_t *obj)
{
    ks->n_keys = obj->first;
}

/* A key's first 8 bytes, zero-padded (the buffer may end right after a short key). */
static uint64_t
keyset_head(const char *key, uint32_t len)
{
    uint64_t head = 0;
    for (uint32_t i = 0; i < len && i < sizeof head; i++)
        head |= (uint64_t)(unsigned char)key[i] << (8 * i);
    return head;
}

static int
keyset_push(keyset_t *ks, uint32_t off, uint32_t len, uint64_t head)
{
    if (ks->n_keys == ks->cap_keys) {
        size_t cap = ks->cap_keys * 2;
        keyset_key_t *grown = ks->keys == ks->local ? malloc(cap * sizeof *grown)
                                                    : realloc(ks->keys, cap * sizeof *grown);
        if (!grown)
            return -ENOMEM;
        if (ks->keys == ks->local)
            memcpy(grown, ks->local, sizeof ks->local);
        ks->keys = grown;
        ks->cap_keys = cap;
    }
    ks->keys[ks->n_keys++] = (keyset_key_t){.off = off, .len = len, .head = head};
    return 0;
}

static uint32_t
keyset_hash(uint32_t serial, const char *key, uint32_t len)
{
    uint32_t h = serial * 0x9E3779B1u;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 0x01000193u;
    return h ^ (h >> 15);
}

static bool
keyset_same(const keyset_t *ks, size_t index, const char *base, const char *key, uint32_t len,
            uint64_t head)
{
    const keyset_key_t *k = &ks->keys[index];
    return k->len == len && k->head == head &&
           (len <= sizeof head || memcmp(base + k->off + 8, key + 8, len - 8) == 0);
}

/* Puts entry (serial, index) in its bucket; the table has a free slot. */
static void
keyset_slot_put(keyset_t *ks, uint32_t serial, size_t index, const char *base)
{
    const keyset_key_t *k = &ks->keys[index];
    size_t mask = ks->n_slots - 1;
    size_t at = keyset_hash(serial, base + k->off, k->len) & mask;
    while (ks->slots[at])
        at = (at + 1) & mask;
    ks->slots[at] = (uint64_t)serial << 32 | (uint64_t)(index + 1);
    ks->n_used++;
}

/* Doubles the table. Entries of closed objects whose keys were popped are dropped; the
 * others are placed by the key now at their index (for a closed object's entry that is some
 * other key, which is harmless: its serial never matches again). */
static int
keyset_grow(keyset_t *ks, const char *base)
{
    size_t old_n = ks->n_slots;
    uint64_t *old = ks->slots;
    size_t n = old_n ? old_n * 2 : KEYSET_MIN_SLOTS;
    uint64_t *slots = calloc(n, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    ks->slots = slots;
    ks->n_slots = n;
    ks->n_used = 0;
    for (size_t i = 0; i < old_n; i++) {
        size_t index = (size_t)(old[i] & 0xffffffffu);
        if (index != 0 && index - 1 < ks->n_keys)
            keyset_slot_put(ks, (uint32_t)(old[i] >> 32), index - 1, base);
    }
    free(old);
    return 0;
}

static int
keyset_reserve_slot(keyset_t *ks, const char *base)
{
    if ((ks->n_used + 1) * 2 <= ks->n_slots)
        return 0;
    return keyset_grow(ks, base);
}

/* Moves an object that just reached KEYSET_LINEAR_MAX keys into the hash table. */
static int
keyset_object_hash(keyset_t *ks, keyset_object_t *obj, const char *base)
{
    for (size_t i = obj->first; i < ks->n_keys; i++) {
        int rc = keyset_reserve_slot(ks, base);
        if (rc)
            return rc;
        keyset_slot_put(ks, obj->serial, i, base);
    }
    obj->is_hashed = true;
    return 0;
}

static int
keyset_add_hashed(keyset_t *ks, keyset_object_t *obj, const char *base, uint32_t off, uint32_t len)
{
    int rc = keyset_reserve_slot(ks, base);
    if (rc)
        return rc;
    const char *key = base + off;
    uint64_t head = keyset_head(key, len);
    size_t mask = ks->n_slots - 1;
    size_t at = keyset_hash(obj->serial, key, len) & mask;
    for (; ks->slots[at]; at = (at + 1) & mask) {
        uint64_t slot = ks->slots[at];
        if ((uint32_t)(slot >> 32) == obj->serial &&
            keyset_same(ks, (size_t)(slot & 0xffffffffu) - 1, base, key, len, head))
            return 1;
    }
    if ((rc = keyset_push(ks, off, len, head)) != 0)
        return rc;
    ks->slots[at] = (uint64_t)obj->serial << 32 | (uint64_t)ks->n_keys;
    ks->n_used++;
    return 0;
}

int
keyset_add(keyset_t *ks, keyset_object_t *obj, const char *base, uint32_t off, uint32_t len)
{
    if (obj->is_hashed)
        return keyset_add_hashed(ks, obj, base, off, len);
    const char *key = base + off;
    uint64_t head = keyset_head(key, len);
    for (size_t i = obj->first; i < ks->n_keys; i++)
        if (keyset_same(ks, i, base, key, len, head))
            return 1;
    int rc = keyset_push(ks, off, len, head);
    if (rc == 0 && ks->n_keys - obj->first >= KEYSET_LINEAR_MAX)
        rc = keyset_object_hash(ks, obj, base);
    return rc;
}
