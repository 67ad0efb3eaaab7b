/*
 * read_side.h: what the engine's read-only users of a journal (reader.c, status.c,
 * verify.c) share: whether they may use the index, and the journal's segment list.
 */
#ifndef STELE_ENGINE_READ_SIDE_H
#define STELE_ENGINE_READ_SIDE_H

#include "index.h"
#include "journal.h"
#include "stele.h"

/*
 * Opens a journal reader for one of the public read calls: as journal_reader_open (links are
 * refused), then the check that nobody but the journal's owner and root could change the
 * directory, unless opts->allow_unsafe_dir (opts NULL: defaults). Returns 0 with *out, or
 * the reader's codes, STELE_EUNSAFE.
 */
int read_side_open_journal(const char *dir, const stele_options_t *opts, journal_reader_t **out,
                           stele_error_t *err);

/*
 * The index of `dir` opened read-only, or NULL when it must not or cannot be used. LMDB
 * forbids opening one environment twice in a process (closing either drops the other's
 * fcntl locks), so in the process that holds the journal for writing (jr says whether it
 * does) a reader does not open the index; it seeks by scanning instead. An index that cannot
 * be opened (missing, corrupt, directory not writable for LMDB's lock file, owned by another user:
 * index_open refuses those) gives NULL too:
 * slower, never wrong. Close it with index_close (NULL is fine).
 */
index_t *read_side_open_index(const char *dir, journal_reader_t *jr);
/* As read_side_open_index, falling back to the writer's monitor snapshot (index.h,
 * INDEX_OPEN_SNAPSHOT) when the index refuses this reader or this process writes the
 * journal (the snapshot is a separate file, opened without LMDB's locks): for status, which
 * reads the
 * sinks' tables; not for verify, which checks the index's batch starts. */
index_t *read_side_open_index_or_snapshot(const char *dir, journal_reader_t *jr);

/* Lists every segment into a fresh array (*out, which the caller frees with free(); NULL
 * on failure); returns the count or a negative code, described in err. */
int read_side_list_segments(journal_reader_t *jr, journal_segment_info_t **out, stele_error_t *err);

#endif /* STELE_ENGINE_READ_SIDE_H */
