/*
 * cmd_verify_proof.c: `stele verify-proof --trust PUB FILE`: checks a proof bundle from
 * `stele prove` (FILE, or - for stdin) with stele_verify_proof(), offline: nothing but the
 * bundle and the public key of epoch 0 is read. Exit 0 when the proof holds, 2 when it does
 * not (any altered or truncated bundle), 1 for usage errors (a public key file that is not
 * one included), 3 when FILE could not be read.
 */
#include "cmd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char verify_proof_usage[] =
    "usage: stele verify-proof --trust PUB FILE\n"
    "\n"
    "Checks the proof bundle in FILE (- for stdin), written by \"stele prove\", against the\n"
    "public key file PUB (stele keygen --pub). Exit 0 when it holds, 2 when it does not.\n"
    "\n"
    "      --trust PUB        the public key of the journal's first key epoch\n";

enum { OPT_TRUST = 1 };

static const struct option verify_proof_opts[] = {
    {"trust", required_argument, NULL, OPT_TRUST},
    {NULL, 0, NULL, 0},
};

/* The largest bundle read (stele_verify_proof refuses more). */
#define VERIFY_PROOF_MAX_BYTES ((size_t)64 << 20)

/* Reads all of f into *out (NUL-terminated). Returns 0 or -errno. */
static int
read_all(FILE *f, char **out, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || cap > VERIFY_PROOF_MAX_BYTES)
            break;
        char *grown = realloc(buf, cap * 2 + 1);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    if (!buf)
        return -ENOMEM;
    if (ferror(f)) {
        free(buf);
        return -EIO;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

static int
verify_proof_parse(cli_args_t *args, int argc, char **argv, const char **pub, const char **file)
{
    const char *arg;
    int c, first_operand = argc;
    while ((c = cli_args_next(args, argc, argv, &arg, &first_operand)) != -1) {
        if (c != OPT_TRUST)
            return CLI_EXIT_USAGE;
        *pub = arg;
    }
    if (args->want_help)
        return 0;
    if (!*pub)
        return cli_usage_error("verify-proof", "--trust PUB is required");
    if (first_operand + 1 != argc)
        return cli_usage_error("verify-proof", "give one proof FILE (or - for stdin)");
    *file = argv[first_operand];
    return 0;
}

/* Checks the bundle in `file` and says how it went. */
static int
verify_proof_run(const char *pub, const char *file)
{
    FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "rb");
    if (!f) {
        fprintf(stderr, "stele verify-proof: could not open %s: %s\n", file, strerror(errno));
        return CLI_EXIT_ENGINE;
    }
    char *bundle = NULL;
    size_t len = 0;
    int rc = read_all(f, &bundle, &len);
    if (f != stdin)
        fclose(f);
    if (rc) {
        fprintf(stderr, "stele verify-proof: could not read %s: %s\n", file, strerror(-rc));
        return CLI_EXIT_ENGINE;
    }
    while (len && (bundle[len - 1] == '\n' || bundle[len - 1] == '\r'))
        len--; /* the line prove printed */
    stele_proof_info_t info;
    stele_error_t err = {0};
    rc = stele_verify_proof(bundle, len, pub, &info, &err);
    free(bundle);
    if (rc == 0) {
        printf("ok: seq %" PRIu64 " is in the tree of %" PRIu64
               " records signed by key epoch %" PRIu64 "\n",
               info.seq, info.tree_size, info.key_epoch);
        return cli_stdout_done("verify-proof");
    }
    cli_report("verify-proof", rc, &err);
    return rc == STELE_ECORRUPT ? CLI_EXIT_INVALID : cli_exit_for(rc);
}

int
cmd_verify_proof(int argc, char **argv)
{
    cli_args_t args;
    if (cli_args_begin(&args, "verify-proof", verify_proof_usage, verify_proof_opts, "") != 0)
        return CLI_EXIT_ENGINE;
    const char *pub = NULL, *file = NULL;
    int code = verify_proof_parse(&args, argc, argv, &pub, &file);
    if (code == 0 && args.want_help)
        code = cli_print_help(&args);
    else if (code == 0)
        code = verify_proof_run(pub, file);
    cli_args_end(&args);
    return code;
}
