/*
 * fuzz_json_bson.c: libFuzzer target holding stele's JSON reader (engine/json_bson.c) to the
 * reference, libbson's JSON reader with the engine's rules around it
 * (tests/support/json_reference.c): for every input both accept with byte-identical BSON,
 * or both refuse with the same stele code. Anything else aborts with both verdicts.
 *
 * The first input byte picks the limits (max_depth 100, 10, 3 or 2; max_record_bytes
 * 16 MiB, 4096, 256 or 40), so the depth and size faults and their rank against the others
 * get covered; the rest is the JSON text. The reader also runs on a copy of the text in a
 * buffer of exactly its length, so ASan sees any read past the end.
 *
 * Seeds (STELE_FUZZ_MAKE_SEEDS=<corpus dir>): every event of tests/support/validate_cases.h, the
 * malformed ones and the good ones, each with the default and the small limits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_reference.h"
#include "validate.h"
#include "validate_cases.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint32_t fuzz_depths[] = {100, 10, 3, 2};
static const uint32_t fuzz_sizes[] = {16u << 20, 4096, 256, 40};

static void
fuzz_write_seed(const char *dir, const char *prefix, size_t i, uint8_t limits, const char *json)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-%03zu-%02x", dir, prefix, i, limits);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    if (fwrite(&limits, 1, 1, f) != 1 || fwrite(json, 1, strlen(json), f) != strlen(json) ||
        fclose(f) != 0) {
        perror(path);
        exit(1);
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
    static const uint8_t limits[] = {0x00, 0x05, 0x0a};
    for (size_t l = 0; l < sizeof limits; l++) {
        for (size_t i = 0; i < sizeof json_cases / sizeof json_cases[0]; i++)
            fuzz_write_seed(corpus, "case", i, limits[l], json_cases[i].json);
        for (size_t i = 0; i < sizeof json_good / sizeof json_good[0]; i++)
            fuzz_write_seed(corpus, "good", i, limits[l], json_good[i]);
    }
    return 0;
}

static void
fuzz_disagree(const char *text, size_t len, int rc, const stele_error_t *err, int ref_rc,
              const stele_error_t *ref_err, const char *what)
{
    fprintf(stderr, "json reader and reference disagree (%s) on %zu bytes: \"%.*s\"\n", what, len,
            (int)(len > 300 ? 300 : len), text);
    fprintf(stderr, "  stele:     %s %s\n", stele_errname(rc), err->message);
    fprintf(stderr, "  reference: %s %s\n", stele_errname(ref_rc), ref_err->message);
    abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    validate_limits_t lim = {.max_depth = fuzz_depths[data[0] & 3],
                             .max_record_bytes = fuzz_sizes[(data[0] >> 2) & 3]};
    size_t len = size - 1;
    char *text = malloc(len ? len : 1); /* exactly the text: no NUL after it */
    if (!text)
        return 0;
    memcpy(text, data + 1, len);
    stele_error_t err = {0}, ref_err = {0};
    validate_buf_t buf;
    validate_buf_init(&buf);
    int rc = validate_json(text, len, &lim, &buf, &err);
    bson_t ref;
    int ref_rc = json_reference_read(text, len, &lim, &ref, &ref_err);
    if (rc != ref_rc)
        fuzz_disagree(text, len, rc, &err, ref_rc, &ref_err, "verdict");
    if (rc == 0) {
        if (buf.len != ref.len || memcmp(buf.data, bson_get_data(&ref), buf.len) != 0)
            fuzz_disagree(text, len, rc, &err, ref_rc, &ref_err, "bytes");
        bson_destroy(&ref);
    } else if (err.code != rc || err.message[0] == '\0') {
        fuzz_disagree(text, len, rc, &err, ref_rc, &ref_err, "error not filled");
    }
    validate_buf_free(&buf);
    free(text);
    return 0;
}
