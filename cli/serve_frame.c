/*
 * serve_frame.c: splits a connection's byte stream into request lines. Pure (fuzzed with
 * the request parser). The caller keeps the unconsumed bytes; this module keeps only
 * whether it is inside an oversize line.
 *
 * Invariant that bounds memory: the caller never has to hold more than max_line_bytes of
 * one line, because as soon as max_line_bytes bytes without '\n' are seen the line is
 * reported as oversize and its bytes are consumed (discarded) from then on.
 */
#include "serve.h"

#include <string.h>

serve_frame_kind_t
serve_frame_next(serve_frame_t *fr, const char *data, size_t n, int is_eof, const char **line,
                 size_t *line_len, size_t *consumed)
{
    size_t skipped = 0;
    *line = NULL;
    *line_len = 0;
    *consumed = 0;
    const char *nl = n ? memchr(data, '\n', n) : NULL;
    if (fr->is_discarding) {
        if (!nl) {
            *consumed = n;
            return SERVE_FRAME_NEED_MORE;
        }
        /* The oversize line ends here: what follows is a fresh line. */
        fr->is_discarding = 0;
        skipped = (size_t)(nl - data) + 1;
        data += skipped;
        n -= skipped;
        nl = n ? memchr(data, '\n', n) : NULL;
    }
    size_t len = nl ? (size_t)(nl - data) : n;
    if (len > fr->max_line_bytes) {
        /* Report once; discard what we have and, without a '\n' yet, the rest to come. */
        *consumed = skipped + (nl ? len + 1 : n);
        fr->is_discarding = nl ? 0 : 1;
        return SERVE_FRAME_OVERSIZE;
    }
    if (!nl && !(is_eof && n > 0)) {
        *consumed = skipped;
        return SERVE_FRAME_NEED_MORE;
    }
    *line = data;
    *line_len = len;
    *consumed = skipped + (nl ? len + 1 : n);
    return SERVE_FRAME_LINE;
}
