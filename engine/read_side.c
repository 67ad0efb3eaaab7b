/*
 * read_side.c: the helpers every read-only user of a journal in the engine shares
 * (read_side.h): opening the index only where LMDB allows it, and listing the segments while
 * a writer may add one. It keeps no state and takes no lock: each call works on the caller's
 * own journal reader, which belongs to one thread.
 */
#include "read_side.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "error.h"

int
read_side_open_journal(const char *dir, const stele_options_t *opts, journal_reader_t **out,
                       stele_error_t *err)
{
    *out = NULL;
    journal_reader_t *jr = NULL;
    int rc = journal_reader_open(dir, NULL, &jr, err);
    if (!rc && !(opts && opts->allow_unsafe_dir))
        rc = journal_reader_check_dir(jr, err);
    if (rc) {
        journal_reader_close(jr);
        return rc;
    }
    *out = jr;
    return 0;
}

index_t *
read_side_open_index(const char *dir, journal_reader_t *jr)
{
    journal_live_t live;
    journal_reader_live(jr, &live);
    if (live.writer_pid == (int)getpid())
        return NULL;
    index_t *ix = NULL;
    if (index_open(dir, 0, 0, &ix, NULL) != 0) /* refused or unusable: scan instead */
        return NULL;
    return ix;
}

index_t *
read_side_open_index_or_snapshot(const char *dir, journal_reader_t *jr)
{
    /* The snapshot is a file of its own, opened without LMDB's locks: even the writer's
     * process (serve's /metrics) may open it beside its index. */
    index_t *ix = read_side_open_index(dir, jr);
    if (!ix && index_open(dir, INDEX_OPEN_SNAPSHOT, 0, &ix, NULL) != 0)
        return NULL;
    return ix;
}

int
read_side_list_segments(journal_reader_t *jr, journal_segment_info_t **out, stele_error_t *err)
{
    *out = NULL;
    for (;;) {
        int n = journal_reader_segments(jr, NULL, 0, err);
        if (n <= 0)
            return n;
        journal_segment_info_t *segs = calloc((size_t)n, sizeof *segs);
        if (!segs)
            return error_set_hinted(err, -ENOMEM, NULL, "could not list %d segments", n);
        int got = journal_reader_segments(jr, segs, (size_t)n, err);
        if (got >= 0 && got <= n) {
            *out = segs;
            return got;
        }
        free(segs);
        if (got < 0)
            return got;
        /* A segment appeared between the two calls: list again. */
    }
}
