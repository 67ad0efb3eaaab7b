/*
 * fuzz_journal.c: the template journal the fuzz targets start every input from.
 *
 * libFuzzer's entry points take no context, so the template and the I/O table live in
 * process-wide statics, built once on first use and never changed afterwards (the targets
 * run inputs one at a time). The template is made with the real journal API: three
 * committed batches in one small segment; a copy of it gets a fourth batch whose bytes
 * become a valid "next batch" seed, so the fuzzer starts from frames that chain.
 */
#include "fuzz_journal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_fault.h"
#include "test_util.h"

/* Pads up to this many bytes in the template's payloads: a few hundred bytes per frame. */
enum { FUZZ_MAX_PAD_BYTES = 120 };

static fuzz_template_t template_state;
static int template_ready;
static io_fault_t *noop_sync_io;

static void
die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz setup: %s: %s\n", what, detail ? detail : "");
    abort();
}

const journal_io_t *
fuzz_io(void)
{
    if (!noop_sync_io) {
        noop_sync_io = io_fault_new(journal_io_posix(), 1);
        if (!noop_sync_io)
            die("io table", "out of memory");
    }
    return io_fault_io(noop_sync_io);
}

void
fuzz_remove_dir(char *dir)
{
    if (test_tmpdir_remove(dir) != 0)
        fprintf(stderr, "fuzz: could not remove a temporary journal\n");
}

static void
copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        die("open for copy", from);
    struct stat st;
    if (fstat(in, &st) != 0)
        die("stat for copy", from);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, st.st_mode & 07777);
    if (out < 0)
        die("create copy", to);
    uint8_t buf[16384];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0) {
        if (write(out, buf, (size_t)n) != n)
            die("write copy", to);
    }
    if (n < 0)
        die("read for copy", from);
    close(in);
    close(out);
}

static char *
copy_dir(const char *from_dir)
{
    char *dir = test_tmpdir_new("fuzz");
    if (!dir)
        die("mkdtemp", "");
    DIR *d = opendir(from_dir);
    if (!d)
        die("opendir", from_dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char *from = test_path_join(from_dir, de->d_name);
        struct stat st;
        if (from && lstat(from, &st) == 0 && S_ISREG(st.st_mode)) {
            char *to = test_path_join(dir, de->d_name);
            copy_file(from, to);
            free(to);
        }
        free(from);
    }
    closedir(d);
    return dir;
}

char *
fuzz_copy_template(const fuzz_template_t *t)
{
    return copy_dir(t->dir);
}

/* The file of segment `segment_seq`: the name starting with that number in decimal. */
static char *
find_segment(const char *dir, uint64_t segment_seq)
{
    DIR *d = opendir(dir);
    if (!d)
        die("opendir", dir);
    char *found = NULL;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char *end = NULL;
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        unsigned long long n = strtoull(de->d_name, &end, 10);
        if (n == segment_seq && !strstr(end, "tmp")) {
            free(found);
            found = strdup(de->d_name);
        }
    }
    closedir(d);
    if (!found)
        die("no segment file found in", dir);
    return found;
}

static uint8_t *
read_range(const char *path, uint64_t off, size_t len)
{
    uint8_t *buf = malloc(len ? len : 1);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (!buf || fd < 0 || pread(fd, buf, len, (off_t)off) != (ssize_t)len)
        die("read segment", path);
    close(fd);
    return buf;
}

void
fuzz_write_segment(const char *dir, const fuzz_template_t *t, uint64_t off, const uint8_t *data,
                   size_t len)
{
    if (off >= FUZZ_SEGMENT_BYTES)
        return;
    if (len > FUZZ_SEGMENT_BYTES - off)
        len = (size_t)(FUZZ_SEGMENT_BYTES - off);
    char *path = test_path_join(dir, t->segment_name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || pwrite(fd, data, len, (off_t)off) != (ssize_t)len)
        die("write segment", path);
    close(fd);
    free(path);
}

static void
fill_options(journal_options_t *opts)
{
    journal_options_init(opts);
    opts->io = fuzz_io();
    opts->source = "fuzz";
    opts->segment_bytes = FUZZ_SEGMENT_BYTES;
    opts->create_if_missing = 1;
    opts->zero_fill = 1;
}

/* Appends `batches` batches (of n_records[i] records) and closes cleanly. */
static void
write_batches(const char *dir, test_ledger_t *lg, test_rng_t *rng, const unsigned *n_records,
              int batches)
{
    journal_options_t opts;
    journal_t *j = NULL;
    journal_recovery_t rec;
    journal_batch_info_t info;
    stele_error_t err = {0};
    fill_options(&opts);
    if (journal_open(dir, &opts, &j, &rec, &err) != 0)
        die("journal_open", err.message);
    test_ledger_truncate(lg, rec.last_seq, rec.last_ts_ns);
    for (int b = 0; b < batches; b++) {
        if (test_ledger_append(lg, j, rng, n_records[b], &info, &err) != 0)
            die("append", err.message);
    }
    if (test_ledger_sync(lg, j, &err) != 0 || journal_close(j, &err) != 0)
        die("sync/close", err.message);
}

/* Offsets of the records in `dir` after `after_seq`: where the first one starts, where the
 * last one ends, the end of the first batch, and the last seq. */
typedef struct layout {
    uint64_t first_off, end_off, first_batch_end, last_seq, segment_seq;
} layout_t;

static void
scan_layout(const char *dir, uint64_t after_seq, layout_t *out)
{
    journal_reader_t *r = NULL;
    journal_record_t rec;
    stele_error_t err = {0};
    memset(out, 0, sizeof(*out));
    if (journal_reader_open(dir, fuzz_io(), &r, &err) != 0)
        die("reader_open", err.message);
    int rc = journal_reader_seek(r, after_seq + 1, 0, 0, &err);
    if (rc && rc != STELE_ENOTFOUND)
        die("reader_seek", err.message);
    while ((rc = journal_reader_next(r, &rec, &err)) == 0) {
        uint64_t end = rec.offset + rec.frame_bytes;
        if (!out->last_seq) {
            out->first_off = rec.offset;
            out->segment_seq = rec.segment_seq;
        }
        if (rec.is_batch_end && !out->first_batch_end)
            out->first_batch_end = end;
        out->end_off = end;
        out->last_seq = rec.seq;
    }
    if (rc != STELE_EAGAIN)
        die("reader_next", err.message);
    journal_reader_close(r);
}

static void
template_cleanup(void)
{
    fuzz_remove_dir(template_state.dir);
    free(template_state.segment_name);
    free(template_state.next_batch);
    free(template_state.first_batch);
    io_fault_free(noop_sync_io);
}

const fuzz_template_t *
fuzz_template_get(void)
{
    if (template_ready)
        return &template_state;
    fuzz_template_t *t = &template_state;
    test_ledger_t lg;
    test_rng_t rng;
    layout_t lay, next;
    static const unsigned first_batches[] = {2, 3, 1};
    static const unsigned next_batches[] = {2};

    test_ledger_init(&lg, FUZZ_MAX_PAD_BYTES);
    test_rng_init(&rng, 1);
    t->dir = test_tmpdir_new("fuzztpl");
    if (!t->dir)
        die("mkdtemp", "");
    write_batches(t->dir, &lg, &rng, first_batches, 3);
    scan_layout(t->dir, 0, &lay);
    t->segment_name = find_segment(t->dir, lay.segment_seq);
    t->data_off = lay.first_off;
    t->tail_off = lay.end_off;
    t->last_seq = lay.last_seq;
    char *seg = test_path_join(t->dir, t->segment_name);
    t->first_batch_len = (size_t)(lay.first_batch_end - lay.first_off);
    t->first_batch = read_range(seg, lay.first_off, t->first_batch_len);
    free(seg);

    char *copy = copy_dir(t->dir);
    write_batches(copy, &lg, &rng, next_batches, 1);
    scan_layout(copy, t->last_seq, &next);
    if (next.first_off != t->tail_off)
        die("next batch", "does not start at the template's tail");
    seg = test_path_join(copy, t->segment_name);
    t->next_batch_len = (size_t)(next.end_off - next.first_off);
    t->next_batch = read_range(seg, next.first_off, t->next_batch_len);
    free(seg);
    fuzz_remove_dir(copy);
    test_ledger_free(&lg);
    atexit(template_cleanup);
    template_ready = 1;
    return t;
}

void
fuzz_write_seed(const char *corpus_dir, const char *name, const uint8_t *bytes, size_t len)
{
    char *path = test_path_join(corpus_dir, name);
    FILE *f = path ? fopen(path, "wb") : NULL;
    if (!f || fwrite(bytes, 1, len, f) != len)
        die("write seed", name);
    fclose(f);
    free(path);
}
