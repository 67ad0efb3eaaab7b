/*
 * stele.c: the public write API (<stele.h>): open/close, append, wait, flush, stats. Owns
 * the handle and the order in which its parts start and stop; the committer lives in
 * commit.c, the index writer in index_writer.c, validation in validate.c, shippers in
 * ship.c. Threads and locks are described in engine/README.md.
 *
 * Open order: read the index's newest batch start as a recovery hint (read-only, so a
 * directory that turns out not to be a journal is left untouched), open the journal (lock,
 * recovery), open the index for writing and bring it in line (index_catchup_at_open; one
 * that cannot be written, a full disk, is left behind for the index writer, never failing
 * the open), make
 * the index writer (so the committer can hand it batch starts), start the committer, the
 * index writer's thread and one shipper per sink, then let the index writer see the
 * shippers. Close runs it backwards after draining the queue and syncing.
 *
 * Locks:
 *   ship_mu/ship_cv: waiters for wait=shipped sleep on ship_cv; shippers' progress
 *          callbacks broadcast it. Shipped positions themselves are atomics in ship.c.
 *   The index writer's ix_mu is index_writer.c's; this file takes no other lock.
 * n_callers counts threads inside a public call so close frees nothing under them.
 */
#include "stele.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "commit.h"
#include "config.h"
#include "error.h"
#include "index.h"
#include "index_catchup.h"
#include "index_writer.h"
#include "journal.h"
#include "ship.h"
#include "status_publish.h"
#include "stele_internal.h"
#include "validate.h"

/* Largest batch the committer writes at once: big enough that a backlog is written with
 * few syscalls, small enough that one batch never holds up waiters for long. */
#define STELE_BATCH_BYTES_MAX ((size_t)4 << 20)
/* A wait=shipped caller looks at the shippers at least this often, even without progress. */
#define STELE_SHIP_POLL_MS 100

#define NS_PER_MS 1000000ull

struct stele {
    char *dir;
    char source[64];
    stele_hooks_t hooks; /* tests' seams (stele_internal.h); all zero in production */
    const journal_io_t *io;
    validate_limits_t limits;
    journal_origin_t own_origin; /* this process, the origin of what it appends itself */
    /* The sinks' time fields, which limits reserves in events (copies: opts are borrowed). */
    char time_fields[STELE_MAX_SINKS][CONFIG_TIME_FIELD_MAX + 1];
    journal_t *journal;
    index_t *index;
    commit_t *commit;
    index_writer_t *index_writer;
    char recovery_note[STELE_ERROR_MESSAGE_BYTES];

    _Atomic int is_closing;
    _Atomic int n_callers;

    /* -- shippers; the array is fixed after open -- */
    shipper_t *shippers[STELE_MAX_SINKS];
    size_t n_shippers;
    uint32_t sink_drain_ms; /* opts->sink_drain_ms */
    pthread_mutex_t ship_mu;
    pthread_cond_t ship_cv;
};

/* -- caller accounting ------------------------------------------------------------------ */

static int
stele_enter(stele_t *db, stele_error_t *err)
{
    atomic_fetch_add(&db->n_callers, 1);
    if (atomic_load(&db->is_closing)) {
        atomic_fetch_sub(&db->n_callers, 1);
        return error_set(err, STELE_ECLOSED, "journal %s is closing", db->dir);
    }
    return 0;
}

static void
stele_leave(stele_t *db)
{
    atomic_fetch_sub(&db->n_callers, 1);
}

/* -- shippers --------------------------------------------------------------------------- */

static void
stele_on_ship_progress(void *ctx, const char *sink_name, uint64_t shipped_seq)
{
    stele_t *db = ctx;
    (void)sink_name;
    (void)shipped_seq;
    /* The shipper stored shipped_seq before this call; taking and releasing ship_mu orders it
     * against a waiter's check, and the broadcast comes after the release so that the woken
     * waiters do not find the mutex held and sleep on it again. */
    pthread_mutex_lock(&db->ship_mu);
    pthread_mutex_unlock(&db->ship_mu);
    pthread_cond_broadcast(&db->ship_cv);
}

static uint64_t
stele_appended_for_ship(void *ctx)
{
    stele_t *db = ctx;
    return commit_appended_seq(db->commit);
}

/* The lowest seq every sink has shipped; 0 when there is none. For callers after
 * stele_open returned, when n_shippers no longer changes. */
static uint64_t
stele_min_shipped(stele_t *db)
{
    uint64_t min = UINT64_MAX;
    for (size_t i = 0; i < db->n_shippers; i++) {
        uint64_t s = shipper_shipped_seq(db->shippers[i]);
        if (s < min)
            min = s;
    }
    return db->n_shippers ? min : 0;
}

/* STELE_ESINKSTOPPED when a sink that has not shipped seq stopped for good: it will not
 * ship it before a restart, so waiting out the caller's timeout would only hide why. */
static int
stele_sink_stopped_before(stele_t *db, uint64_t seq, stele_error_t *err)
{
    for (size_t i = 0; i < db->n_shippers; i++)
        if (shipper_shipped_seq(db->shippers[i]) < seq && shipper_stopped(db->shippers[i], err))
            return STELE_ESINKSTOPPED;
    return 0;
}

static int
stele_no_sink_error(stele_error_t *err)
{
    return error_set_hinted(err, STELE_ENOSINK,
                            "add a [sink NAME] section with a uri, or wait for durable",
                            "wait=shipped needs a sink; none is configured");
}

static int
stele_wait_shipped(stele_t *db, uint64_t seq, int64_t timeout_ms, stele_error_t *err)
{
    if (db->n_shippers == 0)
        return stele_no_sink_error(err);
    uint64_t deadline = timeout_ms < 0 ? 0 : (uint64_t)clock_mono_ms() + (uint64_t)timeout_ms;
    int rc = 0;
    pthread_mutex_lock(&db->ship_mu);
    while (stele_min_shipped(db) < seq) {
        if ((rc = commit_halted(db->commit, err)) != 0)
            break;
        if ((rc = stele_sink_stopped_before(db, seq, err)) != 0)
            break;
        if (atomic_load(&db->is_closing)) {
            rc = error_set(err, STELE_ECLOSED, "journal closed before seq %llu was shipped",
                           (unsigned long long)seq);
            break;
        }
        /* Shippers report progress by callback; a bounded sleep also covers a shipper that
         * stopped for good (integrity alarm) without calling back. */
        uint64_t now = (uint64_t)clock_mono_ms();
        if (deadline && now >= deadline) {
            rc = error_set(err, STELE_ETIMEDOUT, "seq %llu not shipped within %lld ms",
                           (unsigned long long)seq, (long long)timeout_ms);
            break;
        }
        uint64_t wake = now + STELE_SHIP_POLL_MS;
        if (deadline && deadline < wake)
            wake = deadline;
        struct timespec ts = clock_timespec(clock_mono_ns() + (wake - now) * NS_PER_MS);
        pthread_cond_timedwait(&db->ship_cv, &db->ship_mu, &ts);
    }
    pthread_mutex_unlock(&db->ship_mu);
    return rc;
}

/* One shipper per sink. On failure the ones started are shippers[0, n_shippers), for the
 * caller to stop. */
static int
stele_start_shippers(stele_t *db, const stele_options_t *opts, stele_error_t *err)
{
    for (size_t i = 0; i < opts->n_sinks; i++) {
        shipper_config_t cfg = {.sink = &opts->sinks[i],
                                .journal_dir = db->dir,
                                .source = db->source,
                                .io = db->io,
                                .index = db->index,
                                .on_progress = stele_on_ship_progress,
                                .progress_ctx = db,
                                .appended_seq = stele_appended_for_ship,
                                .appended_ctx = db,
                                .log_level = opts->log_level};
        int rc = shipper_start(&cfg, &db->shippers[i], err);
        if (rc)
            return rc;
        db->n_shippers = i + 1;
    }
    /* Only once all started: the index writer may then publish their counters. */
    index_writer_set_shippers(db->index_writer, db->shippers, db->n_shippers);
    return 0;
}

/* -- open ------------------------------------------------------------------------------- */

/* The host name, reduced to what a source may contain. */
static void
stele_default_source(char *out, size_t cap)
{
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0')
        snprintf(host, sizeof host, "localhost");
    size_t n = 0;
    for (const char *p = host; *p && n + 1 < cap && n < CONFIG_SOURCE_MAX; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || strchr("._:-", ch);
        out[n++] = ok ? ch : '-';
    }
    out[n] = '\0';
}

/* The index's newest batch start, read without creating anything. */
static void
stele_recovery_hint(const char *dir, const stele_options_t *o, journal_options_t *jo)
{
    index_t *ix = NULL;
    index_batch_t last;
    if (index_open(dir, o->allow_unsafe_dir ? INDEX_OPEN_ALLOW_UNSAFE : 0, 0, &ix, NULL) != 0)
        return;
    if (index_last_batch(ix, &last, NULL) == 0) {
        jo->hint_seq = last.first_seq;
        jo->hint_segment_seq = last.segment_seq;
        jo->hint_offset = last.offset;
    }
    index_close(ix);
}

static size_t
stele_batch_bytes(const stele_options_t *o)
{
    size_t frame = journal_frame_bytes(FORMAT_VERSION, o->max_record_bytes);
    size_t batch = STELE_BATCH_BYTES_MAX;
    if (batch > o->segment_bytes / 2)
        batch = (size_t)(o->segment_bytes / 2);
    /* A signed journal keeps room in each segment for a batch's checkpoint and its own. */
    size_t signed_room = (size_t)o->segment_bytes - SEG_HEADER_BYTES - 2 * JOURNAL_META_FRAME_MAX;
    if (o->signing_key && batch > signed_room)
        batch = signed_room;
    return batch < frame ? frame : batch;
}

static void
stele_note_join(char *out, size_t cap, const char *a, const char *b)
{
    /* A note longer than the stats field is cut; the return value only says so. */
    int n =
        a[0] && b[0] ? snprintf(out, cap, "%s; %s", a, b) : snprintf(out, cap, "%s", a[0] ? a : b);
    if (n < 0)
        out[0] = '\0';
}

/* ship_cv's waits have monotonic deadlines (stele_wait_shipped). stele_free destroys
 * them. */
static void
stele_init_locks(stele_t *db)
{
    clock_cond_init(&db->ship_cv);
    pthread_mutex_init(&db->ship_mu, NULL);
}

/* A handle with its locks, its source name and the validation limits, nothing opened yet
 * (the parts opened later copy the options they need). NULL when out of memory. */
static stele_t *
stele_alloc(const char *dir, const stele_options_t *opts, const stele_hooks_t *hooks)
{
    stele_t *db = calloc(1, sizeof *db);
    if (!db || !(db->dir = strdup(dir))) {
        free(db);
        return NULL;
    }
    db->own_origin = (journal_origin_t){.uid = (uint32_t)getuid(),
                                        .gid = (uint32_t)getgid(),
                                        .pid = (uint32_t)getpid(),
                                        .kind = FRAME_ORIGIN_PROCESS};
    if (hooks)
        db->hooks = *hooks;
    db->io = db->hooks.io;
    db->limits.max_record_bytes = opts->max_record_bytes;
    db->limits.max_depth = opts->max_depth;
    db->sink_drain_ms = opts->sink_drain_ms;
    validate_limits_reserve_sinks(&db->limits, opts);
    for (size_t i = 0; i < db->limits.n_time_fields; i++) {
        snprintf(db->time_fields[i], sizeof db->time_fields[i], "%s", db->limits.time_fields[i]);
        db->limits.time_fields[i] = db->time_fields[i];
    }
    stele_init_locks(db);
    if (opts->source)
        snprintf(db->source, sizeof db->source, "%s", opts->source);
    else
        stele_default_source(db->source, sizeof db->source);
    return db;
}

/* The journal's options for this handle; db->source names a journal this open creates. */
static void
stele_journal_options(const stele_t *db, const stele_options_t *o, journal_options_t *jo)
{
    journal_options_init(jo);
    jo->io = db->io;
    jo->source = db->source;
    jo->segment_bytes = o->segment_bytes;
    jo->max_record_bytes = o->max_record_bytes;
    jo->file_mode = o->file_mode;
    jo->dir_mode = o->dir_mode;
    jo->create_if_missing = o->create_if_missing;
    jo->allow_unsafe_dir = o->allow_unsafe_dir;
    /* With sync=always, zero-filled segments make every commit an overwrite of written
     * blocks, so each fdatasync has no extent metadata to flush. Zero-filling costs a full
     * extra write of every segment (in the preparer thread, but it competes for the disk
     * and a core), which pays off only while the synced batches are small: the journal
     * decides per segment (JOURNAL_ZERO_FILL_SMALL_SYNCS). With interval/never the few
     * syncs absorb the extent conversion of fallocate'd space instead. */
    jo->zero_fill =
        o->sync == STELE_SYNC_ALWAYS ? JOURNAL_ZERO_FILL_SMALL_SYNCS : JOURNAL_ZERO_FILL_NEVER;
    /* With sync=always every batch is flushed at once, so the page cache only adds work:
     * a copy, then fdatasync's writeback walk, on the committing thread (journal/direct.h).
     * Unless a sink's shipper reads each record back right after its write: direct writes
     * send that read to the device and make the next write drop the page it cached
     * (docs/journal.md, "Direct writes"). */
    jo->direct_writes = o->sync == STELE_SYNC_ALWAYS && o->n_sinks == 0;
    jo->signing_key_path = o->signing_key;
    jo->checkpoint_records = o->checkpoint_records;
    jo->checkpoint_interval_ms = o->checkpoint_interval_ms;
    jo->key_epoch_s = o->key_epoch_s;
}

/* Opens the journal (lock, recovery) from the index's hint; *rec receives what recovery
 * found. An existing journal keeps the source name it was created with: db->source takes
 * it. */
static int
stele_open_journal(stele_t *db, const stele_options_t *o, journal_recovery_t *rec,
                   stele_error_t *err)
{
    journal_options_t jo;
    stele_journal_options(db, o, &jo);
    stele_recovery_hint(db->dir, o, &jo);
    memset(rec, 0, sizeof *rec);
    int rc = journal_open(db->dir, &jo, &db->journal, rec, err);
    if (rc)
        return rc;
    snprintf(db->source, sizeof db->source, "%s", journal_source(db->journal));
    return 0;
}

/* Opens the index for writing and brings it in line with the recovered journal; what
 * recovery and catch-up did is kept for stats. A catch-up that could not write the index
 * (a full disk) leaves it behind (*behind set), never the journal unopened: the index is a
 * cache, and the index writer catches it up later. */
static int
stele_open_index(stele_t *db, const stele_options_t *o, const journal_recovery_t *rec,
                 stele_error_t *behind, stele_error_t *err)
{
    /* The index's files follow the journal's: the configured mode (set on existing ones
     * too), else the mode the journal's own files have. */
    int flags = INDEX_OPEN_WRITE | (o->file_mode ? INDEX_OPEN_SET_MODES : 0) |
                (o->allow_unsafe_dir ? INDEX_OPEN_ALLOW_UNSAFE : 0);
    int rc = index_open(db->dir, flags, journal_file_mode(db->journal), &db->index, err);
    if (rc)
        return rc;
    if (db->hooks.index_failing_writes)
        index_fail_writes(db->index, db->hooks.index_failing_writes, db->hooks.index_failing_errno);
    /* The next segment's room, and as much again for what one index write (a catch-up's
     * batch of entries) adds between two looks at the free space. */
    index_keep_free(db->index, 2 * o->segment_bytes);
    char catch_note[STELE_ERROR_MESSAGE_BYTES] = "";
    int is_index_failure = 0;
    rc = index_catchup_at_open(db->index, db->dir, db->io, rec, catch_note, sizeof catch_note,
                               &is_index_failure, behind);
    if (rc && !is_index_failure)
        return error_copy(err, behind);
    if (rc && snprintf(catch_note, sizeof catch_note, "index left behind the journal: %s",
                       behind->message) < 0)
        catch_note[0] = '\0';
    else if (rc == 0)
        error_clear(behind);
    stele_note_join(db->recovery_note, sizeof db->recovery_note, rec->note, catch_note);
    /* For `stele status` in other processes; the index is a cache, so a failure to publish
     * only leaves status without the settings. */
    (void)status_publish_put_settings(db->index, o, NULL);
    /* ... and for those that cannot open the index (index_snapshot.c): ready before open
     * returns, so a reader started next (serve's /metrics) finds the settings. */
    (void)index_snapshot_write(db->index, NULL);
    return 0;
}

/* Makes the index writer, whose thread starts after the committer (it reads where the
 * journal ended), but which takes the committer's batch starts from the first batch. */
static int
stele_make_index_writer(stele_t *db, const stele_options_t *o, const stele_error_t *behind,
                        stele_error_t *err)
{
    index_writer_config_t cfg = {.index = db->index,
                                 .journal = db->journal,
                                 .dir = db->dir,
                                 .io = db->io,
                                 .retention_bytes = o->retention_bytes,
                                 .retention_seconds = o->retention_seconds,
                                 .behind = behind->code ? behind : NULL};
    return index_writer_create(&cfg, &db->index_writer, err);
}

/* Starts the committer after the journal's last record, handing batch starts to the index
 * writer (index_writer_on_batch). */
static int
stele_start_committer(stele_t *db, const stele_options_t *o, const journal_recovery_t *rec,
                      stele_error_t *err)
{
    commit_config_t cc = {.journal = db->journal,
                          .last_seq = rec->last_seq,
                          .last_ts_ns = rec->last_ts_ns,
                          .sync = o->sync,
                          .sync_interval_ms = o->sync_interval_ms,
                          .commit_interval_us = o->commit_interval_us,
                          .commit_policy = o->commit_policy,
                          .max_queue_bytes = o->max_queue_bytes,
                          .queue_timeout_ms = o->queue_timeout_ms,
                          .batch_bytes = stele_batch_bytes(o),
                          .max_journal_bytes = o->max_journal_bytes,
                          .segment_bytes = journal_segment_bytes(db->journal),
                          .on_full = o->on_full,
                          .on_batch = index_writer_on_batch,
                          .batch_ctx = db->index_writer,
                          .clock = db->hooks.clock,
                          .clock_ctx = db->hooks.clock_ctx};
    return commit_start(&cc, &db->commit, err);
}

static void stele_free(stele_t *db);

/* Undoes a failed open in close's order: stops whatever was started (shippers without a
 * drain: nothing was acknowledged to anyone), closes whatever was opened, frees the
 * handle. */
static void
stele_open_abandon(stele_t *db)
{
    atomic_store(&db->is_closing, 1);
    commit_stop(db->commit, NULL);
    index_writer_stop(db->index_writer);
    for (size_t i = 0; i < db->n_shippers; i++)
        shipper_stop(db->shippers[i], 0);
    commit_free(db->commit);
    journal_close(db->journal, NULL);
    index_close(db->index);
    stele_free(db);
}

int
stele_open_with_io(const char *dir, const stele_options_t *opts, const journal_io_t *io,
                   stele_t **out, stele_error_t *err)
{
    stele_hooks_t hooks = {.io = io};
    return stele_open_with_hooks(dir, opts, &hooks, out, err);
}

int
stele_open_with_hooks(const char *dir, const stele_options_t *opts_in, const stele_hooks_t *hooks,
                      stele_t **out, stele_error_t *err)
{
    stele_options_t defaults;
    if (out)
        *out = NULL;
    if (!out || !dir || !*dir)
        return error_set(err, STELE_EINVAL, "stele_open: dir and out are required");
    if (!opts_in) {
        stele_options_init(&defaults);
        opts_in = &defaults;
    }
    int rc = config_check(opts_in, err);
    if (rc)
        return rc;
    stele_t *db = stele_alloc(dir, opts_in, hooks);
    if (!db)
        return error_set(err, -ENOMEM, "out of memory opening %s", dir);

    journal_recovery_t rec;
    stele_error_t index_behind;
    error_clear(&index_behind);
    rc = stele_open_journal(db, opts_in, &rec, err);
    if (rc)
        goto fail;
    rc = stele_open_index(db, opts_in, &rec, &index_behind, err);
    if (rc)
        goto fail;
    rc = stele_make_index_writer(db, opts_in, &index_behind, err);
    if (rc)
        goto fail;
    rc = stele_start_committer(db, opts_in, &rec, err);
    if (rc)
        goto fail;
    rc = index_writer_start(db->index_writer, db->commit, err);
    if (rc)
        goto fail;
    rc = stele_start_shippers(db, opts_in, err);
    if (rc)
        goto fail;
    *out = db;
    return 0;

fail:
    stele_open_abandon(db);
    return rc;
}

int
stele_open(const char *dir, const stele_options_t *opts, stele_t **out, stele_error_t *err)
{
    return stele_open_with_io(dir, opts, NULL, out, err);
}

static void
stele_free(stele_t *db)
{
    index_writer_free(db->index_writer);
    pthread_mutex_destroy(&db->ship_mu);
    pthread_cond_destroy(&db->ship_cv);
    free(db->dir);
    free(db);
}

/* What runs degraded (stele_stats_t.warning) into out; "" when nothing. index_writer and
 * journal_rc may say nothing (NULL, 0): after close stopped them. */
static void
stele_warning(stele_t *db, int journal_rc, const char *journal_warning, char *out, size_t cap)
{
    char behind[STELE_ERROR_MESSAGE_BYTES] = "";
    char unprepared[STELE_ERROR_MESSAGE_BYTES] = "";
    if (db->index_writer)
        index_writer_behind(db->index_writer, behind, sizeof behind);
    if (journal_warning)
        snprintf(unprepared, sizeof unprepared, "%s", journal_warning);
    else if (journal_rc)
        snprintf(unprepared, sizeof unprepared, "could not prepare the next segment: %s",
                 stele_strerror(journal_rc));
    stele_note_join(out, cap, unprepared, behind);
}

index_t *
stele_index_for_tests(stele_t *db)
{
    return db ? db->index : NULL;
}

int
stele_close(stele_t *db, stele_error_t *err)
{
    if (!db)
        return 0;
    atomic_store(&db->is_closing, 1);
    stele_error_t first;
    error_clear(&first);
    int rc = commit_stop(db->commit, &first);

    pthread_mutex_lock(&db->ship_mu);
    pthread_cond_broadcast(&db->ship_cv);
    pthread_mutex_unlock(&db->ship_mu);
    /* Callers that entered before is_closing now return promptly (STELE_ECLOSED or their
     * level reached by the drain); nothing below may be freed under them. */
    while (atomic_load(&db->n_callers) > 0) {
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000};
        nanosleep(&pause, NULL);
    }
    /* The index writer reads shippers' positions for retention: stop it first. */
    index_writer_stop(db->index_writer);
    /* All drain at once: n sinks cost one drain, not n. */
    for (size_t i = 0; i < db->n_shippers; i++)
        shipper_request_stop(db->shippers[i], (int)db->sink_drain_ms);
    for (size_t i = 0; i < db->n_shippers; i++)
        shipper_stop(db->shippers[i], (int)db->sink_drain_ms);
    commit_free(db->commit);

    stele_error_t jerr;
    error_clear(&jerr);
    int jrc = journal_close(db->journal, &jerr);
    if (jrc && rc == 0) {
        rc = jrc;
        first = jerr;
    }
    if (rc == 0) {
        error_clear(&first);
        stele_warning(db, 0, jerr.message[0] ? jerr.message : NULL, first.message,
                      sizeof first.message);
        snprintf(first.hint, sizeof first.hint, "%s", jerr.hint);
    }
    index_close(db->index);
    stele_free(db);
    if (rc || first.message[0])
        error_copy(err, &first);
    return rc;
}

/* -- the write path --------------------------------------------------------------------- */

static int
stele_wait_level(stele_t *db, uint64_t seq, stele_wait_t level, int64_t timeout_ms,
                 stele_error_t *err)
{
    switch (level) {
    case STELE_WAIT_NONE:
        if (seq == 0 || seq > commit_appended_seq(db->commit))
            return error_set(err, STELE_EINVAL, "seq %llu was never appended",
                             (unsigned long long)seq);
        return 0;
    case STELE_WAIT_WRITTEN:
    case STELE_WAIT_DURABLE:
        return commit_wait(db->commit, seq, level, timeout_ms, err);
    case STELE_WAIT_SHIPPED:
        return stele_wait_shipped(db, seq, timeout_ms, err);
    }
    return error_set(err, STELE_EINVAL, "unknown wait level %d", (int)level);
}

static int
stele_check_append(stele_t *db, const void *data, stele_wait_t wait, stele_error_t *err)
{
    if (!db)
        return error_set(err, STELE_EINVAL, "stele_append: no handle");
    if (!data)
        return error_set(err, STELE_EEMPTY, "event is empty (NULL)");
    if ((unsigned)wait > STELE_WAIT_SHIPPED)
        return error_set(err, STELE_EINVAL, "unknown wait level %d", (int)wait);
    if (wait == STELE_WAIT_SHIPPED && db->n_shippers == 0)
        return stele_no_sink_error(err);
    return 0;
}

/* Queues an encoded event and waits; the caller has entered and marked itself active. */
static int
stele_append_encoded(stele_t *db, const uint8_t *bson, uint32_t len, const journal_origin_t *origin,
                     stele_wait_t wait, uint64_t *seq_out, stele_error_t *err)
{
    uint64_t seq = 0;
    int rc = commit_enqueue(db->commit, bson, len, origin, wait, &seq, err);
    if (rc)
        return rc;
    if (seq_out)
        *seq_out = seq;
    if (wait == STELE_WAIT_NONE)
        return 0;
    return stele_wait_level(db, seq, wait, -1, err);
}

int
stele_append_json_from(stele_t *db, const journal_origin_t *origin, const char *json, size_t len,
                       stele_wait_t wait, uint64_t *seq_out, stele_error_t *err)
{
    int rc = stele_check_append(db, json, wait, err);
    if (rc || (rc = stele_enter(db, err)) != 0)
        return rc;
    commit_writer_enter(db->commit);
    validate_buf_t buf;
    validate_buf_init(&buf);
    rc = validate_json(json, len, &db->limits, &buf, err);
    if (rc == 0)
        rc = stele_append_encoded(db, buf.data, (uint32_t)buf.len,
                                  origin ? origin : &db->own_origin, wait, seq_out, err);
    validate_buf_free(&buf);
    commit_writer_leave(db->commit);
    stele_leave(db);
    return rc;
}

int
stele_append_bson_from(stele_t *db, const journal_origin_t *origin, const uint8_t *bson, size_t len,
                       stele_wait_t wait, uint64_t *seq_out, stele_error_t *err)
{
    int rc = stele_check_append(db, bson, wait, err);
    if (rc || (rc = stele_enter(db, err)) != 0)
        return rc;
    commit_writer_enter(db->commit);
    rc = validate_bson(bson, len, &db->limits, err);
    if (rc == 0)
        rc = stele_append_encoded(db, bson, (uint32_t)len, origin ? origin : &db->own_origin, wait,
                                  seq_out, err);
    commit_writer_leave(db->commit);
    stele_leave(db);
    return rc;
}

int
stele_append_json(stele_t *db, const char *json, size_t len, stele_wait_t wait, uint64_t *seq_out,
                  stele_error_t *err)
{
    return stele_append_json_from(db, NULL, json, len, wait, seq_out, err);
}

int
stele_append_bson(stele_t *db, const uint8_t *bson, size_t len, stele_wait_t wait,
                  uint64_t *seq_out, stele_error_t *err)
{
    return stele_append_bson_from(db, NULL, bson, len, wait, seq_out, err);
}

int
stele_wait(stele_t *db, uint64_t seq, stele_wait_t level, int64_t timeout_ms, stele_error_t *err)
{
    if (!db)
        return error_set(err, STELE_EINVAL, "stele_wait: no handle");
    if (timeout_ms < -1)
        return error_set(err, STELE_EINVAL, "stele_wait: timeout_ms %lld (-1 waits for ever)",
                         (long long)timeout_ms);
    int rc = stele_enter(db, err);
    if (rc)
        return rc;
    commit_writer_enter(db->commit);
    if (seq == 0 || seq > commit_appended_seq(db->commit))
        rc = error_set(err, STELE_EINVAL, "seq %llu was never appended", (unsigned long long)seq);
    else
        rc = stele_wait_level(db, seq, level, timeout_ms, err);
    commit_writer_leave(db->commit);
    stele_leave(db);
    return rc;
}

uint64_t
stele_reached_seq(stele_t *db, stele_wait_t level)
{
    if (!db || stele_enter(db, NULL) != 0)
        return 0;
    uint64_t seq = 0;
    switch (level) {
    case STELE_WAIT_NONE:
        seq = commit_appended_seq(db->commit);
        break;
    case STELE_WAIT_WRITTEN:
        seq = commit_written_seq(db->commit);
        break;
    case STELE_WAIT_DURABLE:
        seq = commit_durable_seq(db->commit);
        break;
    case STELE_WAIT_SHIPPED:
        seq = db->n_shippers ? stele_min_shipped(db) : 0;
        break;
    }
    stele_leave(db);
    return seq;
}

int
stele_flush(stele_t *db, stele_error_t *err)
{
    if (!db)
        return error_set(err, STELE_EINVAL, "stele_flush: no handle");
    int rc = stele_enter(db, err);
    if (rc)
        return rc;
    rc = commit_flush(db->commit, err);
    stele_leave(db);
    return rc;
}

int
stele_stats(stele_t *db, stele_stats_t *out)
{
    if (!db || !out)
        return STELE_EINVAL;
    if (stele_enter(db, NULL))
        return STELE_ECLOSED;
    memset(out, 0, sizeof *out);
    snprintf(out->source, sizeof out->source, "%s", db->source);
    commit_stats(db->commit, out);
    journal_stats_t js;
    journal_stats(db->journal, &js);
    out->first_seq = js.first_seq;
    out->segments = js.segments;
    out->disk_bytes = js.disk_bytes;
    out->index_syncs = index_writer_syncs(db->index_writer);
    snprintf(out->recovery_note, sizeof out->recovery_note, "%s", db->recovery_note);
    stele_warning(db, js.prepare_rc, NULL, out->warning, sizeof out->warning);
    out->n_sinks = db->n_shippers;
    stele_leave(db);
    return 0;
}

int
stele_sink_stats(stele_t *db, size_t index, stele_sink_stats_t *out)
{
    if (!db || !out)
        return STELE_EINVAL;
    if (stele_enter(db, NULL))
        return STELE_ECLOSED;
    int rc = STELE_EINVAL;
    if (index < db->n_shippers) { /* fixed once stele_open returned */
        memset(out, 0, sizeof *out);
        shipper_stats(db->shippers[index], commit_written_seq(db->commit), out);
        rc = 0;
    }
    stele_leave(db);
    return rc;
}
