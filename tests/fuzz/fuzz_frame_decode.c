/*
 * fuzz_frame_decode.c: libFuzzer target for record_decode (journal/record.h), the one
 * function that turns bytes read from a segment into a frame. The first input byte picks
 * the segment room left after the frame and the frame's file offset; the rest is the frame.
 * Whatever the bytes, decoding must not read past them (ASan), must return a known status,
 * and a frame it calls valid must satisfy the format's rules: magic, length within the
 * room and the buffer, CRC matching, zero padding; an all-zero frame is never valid.
 *
 * Seeds (STELE_FUZZ_MAKE_SEEDS=<corpus dir>): each frame of the template journal's first
 * batch and of a next batch, a torn half frame, and zeros.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "fuzz_journal.h"
#include "record.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
violation(const char *what)
{
    fprintf(stderr, "frame decode: %s\n", what);
    abort();
}

/* Writes each frame of a batch as a seed, with room for exactly that frame (mode 1). */
static void
seed_frames(const char *corpus, const char *prefix, const uint8_t *batch, size_t len)
{
    size_t off = 0;
    for (int i = 0; off + FRAME_HEADER_BYTES_V2 <= len; i++) {
        uint64_t frame_bytes = format_frame_bytes(
            FORMAT_VERSION, format_load_u32(batch + off + FRAME_OFF_PAYLOAD_LEN));
        if (frame_bytes > len - off)
            break;
        uint8_t *seed = malloc((size_t)frame_bytes + 1);
        if (!seed)
            abort();
        seed[0] = 1 | 2; /* the template's frames are the newest version's */
        memcpy(seed + 1, batch + off, (size_t)frame_bytes);
        char name[64];
        snprintf(name, sizeof(name), "%s-%d", prefix, i);
        fuzz_write_seed(corpus, name, seed, (size_t)frame_bytes + 1);
        if (i == 0) {
            snprintf(name, sizeof(name), "%s-torn", prefix);
            fuzz_write_seed(corpus, name, seed, (size_t)frame_bytes / 2 + 1);
        }
        free(seed);
        off += (size_t)frame_bytes;
    }
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *corpus = getenv("STELE_FUZZ_MAKE_SEEDS");
    if (!corpus || !*corpus)
        return 0;
    const fuzz_template_t *t = fuzz_template_get();
    seed_frames(corpus, "first-batch", t->first_batch, t->first_batch_len);
    seed_frames(corpus, "next-batch", t->next_batch, t->next_batch_len);
    uint8_t zeros[FRAME_HEADER_BYTES_V2 + 1] = {0};
    fuzz_write_seed(corpus, "zeros", zeros, sizeof(zeros));
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    const uint8_t *frame = data + 1;
    size_t avail = size - 1;
    /* mode bit 0: the segment ends right after the bytes; else 0..3 pages more room (bits
     * 2..3). Bit 1: a version 2 frame, else version 1. Bits 4..7: the frame's offset in its
     * file, past the header page. */
    uint32_t version = (mode & 2) ? 2 : 1;
    uint32_t header = format_frame_header_bytes(version);
    uint64_t room = (mode & 1) ? avail : avail + (uint64_t)((mode >> 2) & 3) * 4096;
    uint64_t file_off = SEG_HEADER_BYTES + (uint64_t)(mode >> 4) * FRAME_ALIGN;

    record_view_t v;
    memset(&v, 0, sizeof(v));
    record_status_t st = record_decode(version, frame, avail, room, file_off, &v);
    switch (st) {
    case RECORD_VALID:
        if (v.frame_bytes != format_frame_bytes(version, v.payload_len) || v.frame_bytes > avail ||
            v.frame_bytes > room)
            violation("valid frame larger than its buffer or room");
        if (v.payload_len == 0 || v.payload_len > FRAME_MAX_PAYLOAD)
            violation("valid frame with an impossible length");
        if (format_load_u32(frame + FRAME_OFF_MAGIC) != FRAME_MAGIC)
            violation("valid frame without the magic");
        if (format_load_u32(frame + FRAME_OFF_CRC) != record_crc(version, frame, v.payload_len))
            violation("valid frame whose CRC does not match");
        if (v.payload != frame + header || v.hash != frame + FRAME_OFF_HASH)
            violation("valid frame pointing outside itself");
        if (record_is_zero(frame, header))
            violation("an all-zero header validated");
        break;
    case RECORD_ZERO:
        if (!record_is_zero(frame, avail < header ? avail : header))
            violation("non-zero bytes called preallocated space");
        break;
    case RECORD_NEED_MORE:
        if (room <= avail)
            violation("asks for more bytes than the segment holds");
        break;
    case RECORD_TORN:
    case RECORD_BAD_LENGTH:
    case RECORD_BAD_CRC:
        break;
    default:
        violation("unknown status");
    }
    return 0;
}
