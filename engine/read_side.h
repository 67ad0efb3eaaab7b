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
 * The index of `dir` opened read-only, or NULL when it must not or cannot be used. LMDB
 * forbids opening one environment twice in a process (closing either drops the other's
 * fcntl locks), so in the process that holds the journal for writing (jr says whether it
 * does) a reader does not open the index; it seeks by scanning instead. An index that cannot
 * be opened (missing, corrupt, directory not writable for LMDB's lock file) gives NULL too:
 * slower, never wrong. Close it with index_close (NULL is fine).
 */
index_t *read_side_open_index(const char *dir, journal_reader_t *jr);

/* Lists every segment into a fresh array (*out, which the caller frees with free(); NULL
 * on failure); returns the count or a negative code, described in err. */
int read_side_list_segments(journal_reader_t *jr, journal_segment_info_t **out, stele_error_t *err);

#endif /* STELE_ENGINE_READ_SIDE_H */
