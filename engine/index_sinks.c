/*
 * index_sinks.c: what the index keeps per sink and cannot rebuild from the segments: its
 * shipped checkpoint (checkpoints table) with the destination it belongs to, and its dead
 * letters, the records its remote rejected for good (dead table), with a count per sink in
 * the meta table. A dead letter's value starts with a NUL byte (text never does) so that
 * values written before the time was recorded (text only) still read.
 *
 * A checkpoint's value is the seq (u64 BE), then the destination's identity as text without
 * a NUL (ship_target.c: hosts or replica set, database, collection; never credentials), or
 * nothing for a checkpoint written before identities were kept. The identity ties the seq to
 * the collection that acknowledged it: a sink pointed elsewhere must not take it as its own.
 *
 * Each call is one transaction of its own (index_txn.c); a dead letter and its sink's count
 * change in the same one, and so do a sink's reset and its checkpoint.
 */
#include "index_lmdb.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "error.h"

/* A checkpoint's value: the seq, then the destination (at most INDEX_DESTINATION_MAX bytes). */
typedef struct index_checkpoint_value {
    uint8_t bytes[8 + INDEX_DESTINATION_MAX];
    size_t len;
} index_checkpoint_value_t;

static void
index_checkpoint_encode(index_checkpoint_value_t *v, uint64_t seq, const char *destination,
                        size_t destination_len)
{
    index_put_u64(v->bytes, seq);
    if (destination_len > INDEX_DESTINATION_MAX)
        destination_len = INDEX_DESTINATION_MAX;
    if (destination_len)
        memcpy(v->bytes + 8, destination, destination_len);
    v->len = 8 + destination_len;
}

/* Decodes a stored checkpoint: 0, or -1 when it is shorter than a seq. */
static int
index_checkpoint_decode(const MDB_val *v, uint64_t *seq, char *destination, size_t cap)
{
    if (v->mv_size < 8)
        return -1;
    *seq = index_get_u64(v->mv_data);
    if (destination && cap) {
        size_t len = v->mv_size - 8 < cap - 1 ? v->mv_size - 8 : cap - 1;
        memcpy(destination, (const uint8_t *)v->mv_data + 8, len);
        destination[len] = '\0';
    }
    return 0;
}

typedef struct index_checkpoint_arg {
    const char *sink;
    uint64_t seq;
    const char *destination; /* NULL: keep the stored one */
} index_checkpoint_arg_t;

static int
index_put_checkpoint_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    const index_checkpoint_arg_t *a = arg;
    MDB_val k = {strlen(a->sink), (void *)a->sink}, old;
    index_checkpoint_value_t v;
    const char *destination = a->destination;
    size_t destination_len = destination ? strlen(destination) : 0;
    if (!destination && mdb_get(txn, ix->checkpoints, &k, &old) == 0 && old.mv_size > 8) {
        destination = (const char *)old.mv_data + 8;
        destination_len = old.mv_size - 8;
    }
    index_checkpoint_encode(&v, a->seq, destination, destination_len);
    MDB_val val = {v.len, v.bytes};
    return mdb_put(txn, ix->checkpoints, &k, &val, 0);
}

/* The checks every checkpoint write makes. */
static int
index_check_checkpoint_args(index_t *ix, const char *sink, const char *destination,
                            stele_error_t *err)
{
    int rc = index_check_name("sink name", sink, INDEX_SINK_NAME_MAX, err);
    if (rc)
        return rc;
    if (!ix)
        return error_set_hinted(err, STELE_EINVAL, NULL, "checkpoint: no index");
    if (destination && strlen(destination) > INDEX_DESTINATION_MAX)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "sink %s: destination longer than %d bytes", sink,
                                INDEX_DESTINATION_MAX);
    return index_check_writable(ix, err);
}

int
index_put_checkpoint_at(index_t *ix, const char *sink, uint64_t seq, const char *destination,
                        stele_error_t *err)
{
    int rc = index_check_checkpoint_args(ix, sink, destination, err);
    if (rc)
        return rc;
    index_checkpoint_arg_t a = {sink, seq, destination};
    int mrc = index_write(ix, index_put_checkpoint_txn, &a);
    return mrc ? index_mdb_fail(err, mrc, ix, "write a checkpoint to") : 0;
}

int
index_put_checkpoint(index_t *ix, const char *sink, uint64_t seq, stele_error_t *err)
{
    return index_put_checkpoint_at(ix, sink, seq, NULL, err);
}

int
index_get_checkpoint_at(index_t *ix, const char *sink, uint64_t *seq, char *destination, size_t cap,
                        stele_error_t *err)
{
    int rc = index_check_name("sink name", sink, INDEX_SINK_NAME_MAX, err);
    if (rc || !ix || !seq)
        return rc ? rc
                  : error_set_hinted(err, STELE_EINVAL, NULL, "index_get_checkpoint: bad args");
    MDB_txn *txn = NULL;
    rc = index_read_begin(ix, &txn, err);
    if (rc)
        return rc;
    MDB_val k = {strlen(sink), (void *)sink}, v;
    int mrc = mdb_get(txn, ix->checkpoints, &k, &v);
    *seq = 0;
    if (destination && cap)
        destination[0] = '\0';
    if (mrc == 0 && index_checkpoint_decode(&v, seq, destination, cap) != 0)
        rc = error_set_hinted(err, STELE_ECORRUPT, NULL,
                              "index %s: malformed checkpoint for sink %s", ix->path, sink);
    else if (mrc != 0 && mrc != MDB_NOTFOUND)
        rc = index_mdb_fail(err, mrc, ix, "read a checkpoint from");
    index_read_end(ix, txn);
    return rc;
}

int
index_get_checkpoint(index_t *ix, const char *sink, uint64_t *seq, stele_error_t *err)
{
    return index_get_checkpoint_at(ix, sink, seq, NULL, 0, err);
}

int
index_list_checkpoints(index_t *ix, char (*names)[64], uint64_t *seqs, size_t max,
                       stele_error_t *err)
{
    if (!ix || (max && (!names || !seqs)))
        return error_set_hinted(err, STELE_EINVAL, NULL, "index_list_checkpoints: bad arguments");
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    int rc = index_read_begin(ix, &txn, err);
    if (rc)
        return rc;
    MDB_val k, v;
    size_t n = 0;
    int mrc = mdb_cursor_open(txn, ix->checkpoints, &cur);
    if (mrc == 0)
        mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    for (; mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (n < max) {
            size_t len = k.mv_size < 63 ? k.mv_size : 63;
            memcpy(names[n], k.mv_data, len);
            names[n][len] = '\0';
            if (index_checkpoint_decode(&v, &seqs[n], NULL, 0) != 0)
                seqs[n] = 0;
        }
        n++;
    }
    if (mrc != MDB_NOTFOUND)
        rc = index_mdb_fail(err, mrc, ix, "list checkpoints of");
    if (cur)
        mdb_cursor_close(cur);
    index_read_end(ix, txn);
    return rc ? rc : (int)n;
}

static size_t
index_dead_key(uint8_t *key, const char *sink, uint64_t seq)
{
    size_t len = strlen(sink);
    memcpy(key, sink, len);
    key[len] = 0;
    index_put_u64(key + len + 1, seq);
    return len + 9;
}

/* The value of a dead letter: NUL, the time it was rejected (unix ms, u64 BE), the reason. */
#define INDEX_DEAD_HEADER 9

/* Each sink's number of dead letters is kept in meta under this prefix + the sink's name,
 * updated in the transaction that adds or removes one, so that statistics need not walk the
 * list (a sink with a million rejected records would make every stele_stats() walk them).
 * An index written before the count existed has none: it is walked until its next change
 * stores the count. */
#define INDEX_DEAD_COUNT_PREFIX "dead-count:"

static size_t
index_dead_count_key(char *key, const char *sink)
{
    return (size_t)sprintf(key, "%s%s", INDEX_DEAD_COUNT_PREFIX, sink);
}

static int index_walk_dead_txn(index_t *ix, MDB_txn *txn, const char *sink, uint64_t from_seq,
                               uint64_t *seqs, index_dead_letter_t *letters, size_t max,
                               uint64_t *count);

/* The sink's count as stored, or walked when it was never stored (*was_stored 0). Returns
 * an LMDB code. */
static int
index_dead_count_txn(index_t *ix, MDB_txn *txn, const char *sink, uint64_t *count, int *was_stored)
{
    char key[sizeof INDEX_DEAD_COUNT_PREFIX + INDEX_SINK_NAME_MAX];
    MDB_val k = {index_dead_count_key(key, sink), key}, v;
    int mrc = mdb_get(txn, ix->meta, &k, &v);
    *was_stored = mrc == 0 && v.mv_size == 8;
    if (*was_stored) {
        *count = index_get_u64(v.mv_data);
        return 0;
    }
    if (mrc && mrc != MDB_NOTFOUND)
        return mrc;
    return index_walk_dead_txn(ix, txn, sink, 0, NULL, NULL, 0, count);
}

static int
index_put_dead_count_txn(index_t *ix, MDB_txn *txn, const char *sink, uint64_t count)
{
    char key[sizeof INDEX_DEAD_COUNT_PREFIX + INDEX_SINK_NAME_MAX];
    uint8_t vb[8];
    index_put_u64(vb, count);
    MDB_val k = {index_dead_count_key(key, sink), key}, v = {8, vb};
    return mdb_put(txn, ix->meta, &k, &v, 0);
}

/* Adds delta (+1/-1) to the sink's stored count, inside the caller's write transaction.
 * Returns an LMDB code. */
static int
index_add_dead_count_txn(index_t *ix, MDB_txn *txn, const char *sink, int delta)
{
    uint64_t count = 0;
    int was_stored = 0;
    int mrc = index_dead_count_txn(ix, txn, sink, &count, &was_stored);
    if (mrc)
        return mrc;
    /* A walked count already includes (or excludes) the change made in this transaction. */
    if (was_stored)
        count = delta < 0 ? (count > 0 ? count - 1 : 0) : count + 1;
    return index_put_dead_count_txn(ix, txn, sink, count);
}

/* A dead letter's key and value, and the sink whose count it changes. */
typedef struct index_dead_arg {
    const char *sink;
    MDB_val key;
    MDB_val value; /* unused by a delete */
} index_dead_arg_t;

static int
index_put_dead_letter_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    const index_dead_arg_t *a = arg;
    MDB_val k = a->key, v = a->value, old;
    int is_new = mdb_get(txn, ix->dead, &k, &old) == MDB_NOTFOUND;
    int mrc = mdb_put(txn, ix->dead, &k, &v, 0);
    if (mrc == 0 && is_new)
        mrc = index_add_dead_count_txn(ix, txn, a->sink, +1);
    return mrc;
}

static int
index_delete_dead_letter_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    const index_dead_arg_t *a = arg;
    MDB_val k = a->key;
    int mrc = mdb_del(txn, ix->dead, &k, NULL);
    return mrc ? mrc : index_add_dead_count_txn(ix, txn, a->sink, -1);
}

int
index_put_dead_letter(index_t *ix, const char *sink, uint64_t seq, const char *why,
                      stele_error_t *err)
{
    int rc = index_check_name("sink name", sink, INDEX_SINK_NAME_MAX, err);
    if (rc || !ix)
        return rc ? rc
                  : error_set_hinted(err, STELE_EINVAL, NULL, "index_put_dead_letter: no index");
    uint8_t kb[INDEX_SINK_NAME_MAX + 9];
    uint8_t vb[INDEX_DEAD_HEADER + INDEX_WHY_MAX];
    size_t why_len = why ? strlen(why) : 0;
    if (why_len > INDEX_WHY_MAX)
        why_len = INDEX_WHY_MAX;
    vb[0] = 0;
    index_put_u64(vb + 1, (uint64_t)clock_wall_ms());
    if (why_len)
        memcpy(vb + INDEX_DEAD_HEADER, why, why_len);
    rc = index_check_writable(ix, err);
    if (rc)
        return rc;
    index_dead_arg_t a = {
        sink, {index_dead_key(kb, sink, seq), kb}, {INDEX_DEAD_HEADER + why_len, vb}};
    int mrc = index_write(ix, index_put_dead_letter_txn, &a);
    return mrc ? index_mdb_fail(err, mrc, ix, "write a dead letter to") : 0;
}

/* Decodes a dead letter's value (either layout) into out. */
static void
index_decode_dead(uint64_t seq, const MDB_val *v, index_dead_letter_t *out)
{
    const uint8_t *p = v->mv_data;
    size_t len = v->mv_size;
    out->seq = seq;
    out->unix_ms = 0;
    if (len >= INDEX_DEAD_HEADER && p[0] == 0) {
        out->unix_ms = (int64_t)index_get_u64(p + 1);
        p += INDEX_DEAD_HEADER;
        len -= INDEX_DEAD_HEADER;
    }
    if (len > INDEX_WHY_MAX)
        len = INDEX_WHY_MAX;
    memcpy(out->why, p, len);
    out->why[len] = '\0';
}

int
index_delete_dead_letter(index_t *ix, const char *sink, uint64_t seq, stele_error_t *err)
{
    int rc = index_check_name("sink name", sink, INDEX_SINK_NAME_MAX, err);
    if (rc || !ix)
        return rc ? rc
                  : error_set_hinted(err, STELE_EINVAL, NULL, "index_delete_dead_letter: no ix");
    rc = index_check_writable(ix, err);
    if (rc)
        return rc;
    uint8_t kb[INDEX_SINK_NAME_MAX + 9];
    index_dead_arg_t a = {sink, {index_dead_key(kb, sink, seq), kb}, {0, NULL}};
    int mrc = index_write(ix, index_delete_dead_letter_txn, &a);
    if (mrc == MDB_NOTFOUND)
        return error_set_hinted(err, STELE_ENOTFOUND, NULL,
                                "sink %s has no dead letter at seq %" PRIu64, sink, seq);
    return mrc ? index_mdb_fail(err, mrc, ix, "delete a dead letter from") : 0;
}

/* Walks a sink's dead letters from from_seq inside txn, storing up to max of them in seqs
 * and/or letters (either may be NULL); returns the count walked (all of them when both are
 * NULL) in *count, and an LMDB code. */
static int
index_walk_dead_txn(index_t *ix, MDB_txn *txn, const char *sink, uint64_t from_seq, uint64_t *seqs,
                    index_dead_letter_t *letters, size_t max, uint64_t *count)
{
    uint8_t kb[INDEX_SINK_NAME_MAX + 9];
    size_t prefix_len = strlen(sink) + 1;
    int is_bounded = seqs || letters;
    MDB_cursor *cur = NULL;
    MDB_val k = {index_dead_key(kb, sink, from_seq), kb}, v;
    uint64_t n = 0;
    int mrc = mdb_cursor_open(txn, ix->dead, &cur);
    if (mrc == 0)
        mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    for (; mrc == 0; mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != prefix_len + 8 || memcmp(k.mv_data, kb, prefix_len) != 0)
            break;
        if (is_bounded && n == max)
            break;
        uint64_t seq = index_get_u64((const uint8_t *)k.mv_data + prefix_len);
        if (seqs)
            seqs[n] = seq;
        if (letters)
            index_decode_dead(seq, &v, &letters[n]);
        n++;
    }
    if (cur)
        mdb_cursor_close(cur);
    *count = n;
    return mrc == MDB_NOTFOUND ? 0 : mrc;
}

/* A read transaction for a sink's dead letters, after checking the sink's name. */
static int
index_begin_dead_read(index_t *ix, const char *sink, MDB_txn **txn, stele_error_t *err)
{
    int rc = index_check_name("sink name", sink, INDEX_SINK_NAME_MAX, err);
    if (rc || !ix)
        return rc ? rc : error_set_hinted(err, STELE_EINVAL, NULL, "dead letters: no index");
    return index_read_begin(ix, txn, err);
}

/* index_walk_dead_txn in a read transaction of its own, for up to max (> 0) letters;
 * returns how many it stored, or a negative code. */
static int
index_walk_dead(index_t *ix, const char *sink, uint64_t from_seq, uint64_t *seqs,
                index_dead_letter_t *letters, size_t max, stele_error_t *err)
{
    MDB_txn *txn = NULL;
    int rc = index_begin_dead_read(ix, sink, &txn, err);
    if (rc)
        return rc;
    uint64_t n = 0;
    int mrc = index_walk_dead_txn(ix, txn, sink, from_seq, seqs, letters, max, &n);
    index_read_end(ix, txn);
    return mrc ? index_mdb_fail(err, mrc, ix, "list dead letters of") : (int)n;
}

int
index_list_dead_letters(index_t *ix, const char *sink, uint64_t from_seq, uint64_t *seqs,
                        size_t max, stele_error_t *err)
{
    if (!seqs && max)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "index_list_dead_letters: no output array");
    return max ? index_walk_dead(ix, sink, from_seq, seqs, NULL, max, err) : 0;
}

int
index_read_dead_letters(index_t *ix, const char *sink, uint64_t from_seq, index_dead_letter_t *out,
                        size_t max, stele_error_t *err)
{
    if (!out && max)
        return error_set_hinted(err, STELE_EINVAL, NULL,
                                "index_read_dead_letters: no output array");
    return max ? index_walk_dead(ix, sink, from_seq, NULL, out, max, err) : 0;
}

int
index_count_dead_letters(index_t *ix, const char *sink, uint64_t *count, stele_error_t *err)
{
    if (!count)
        return error_set_hinted(err, STELE_EINVAL, NULL, "index_count_dead_letters: no output");
    MDB_txn *txn = NULL;
    int rc = index_begin_dead_read(ix, sink, &txn, err);
    if (rc)
        return rc;
    int was_stored = 0;
    int mrc = index_dead_count_txn(ix, txn, sink, count, &was_stored);
    index_read_end(ix, txn);
    return mrc ? index_mdb_fail(err, mrc, ix, "count dead letters of") : 0;
}

/* Deletes every dead letter of a sink and its count, inside the caller's write transaction;
 * *n_out receives how many there were. Returns an LMDB code. */
static int
index_drop_dead_letters_txn(index_t *ix, MDB_txn *txn, const char *sink, uint64_t *n_out)
{
    uint8_t kb[INDEX_SINK_NAME_MAX + 9];
    size_t prefix_len = strlen(sink) + 1;
    MDB_cursor *cur = NULL;
    MDB_val k = {index_dead_key(kb, sink, 0), kb}, v;
    *n_out = 0;
    int mrc = mdb_cursor_open(txn, ix->dead, &cur);
    if (mrc == 0)
        mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    while (mrc == 0 && k.mv_size == prefix_len + 8 && memcmp(k.mv_data, kb, prefix_len) == 0) {
        mrc = mdb_cursor_del(cur, 0);
        if (mrc == 0) {
            (*n_out)++;
            k = (MDB_val){prefix_len + 8, kb};
            mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
        }
    }
    if (cur)
        mdb_cursor_close(cur);
    if (mrc != 0 && mrc != MDB_NOTFOUND)
        return mrc;
    char key[sizeof INDEX_DEAD_COUNT_PREFIX + INDEX_SINK_NAME_MAX];
    MDB_val ck = {index_dead_count_key(key, sink), key};
    mrc = mdb_del(txn, ix->meta, &ck, NULL);
    return mrc == MDB_NOTFOUND ? 0 : mrc;
}

typedef struct index_reset_arg {
    index_checkpoint_arg_t checkpoint;
    uint64_t n_dropped; /* out */
} index_reset_arg_t;

static int
index_reset_sink_txn(index_t *ix, MDB_txn *txn, void *arg)
{
    index_reset_arg_t *a = arg;
    int mrc = index_drop_dead_letters_txn(ix, txn, a->checkpoint.sink, &a->n_dropped);
    return mrc ? mrc : index_put_checkpoint_txn(ix, txn, &a->checkpoint);
}

int
index_reset_sink(index_t *ix, const char *sink, const char *destination, uint64_t *n_dropped,
                 stele_error_t *err)
{
    int rc = index_check_checkpoint_args(ix, sink, destination, err);
    if (rc)
        return rc;
    index_reset_arg_t a = {{sink, 0, destination ? destination : ""}, 0};
    int mrc = index_write(ix, index_reset_sink_txn, &a);
    if (mrc)
        return index_mdb_fail(err, mrc, ix, "reset a sink in");
    if (n_dropped)
        *n_dropped = a.n_dropped;
    return 0;
}
