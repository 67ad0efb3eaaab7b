/*
 * cmd_prove.c: `stele prove --seq N`: prints the proof bundle of record N (stele_prove(): the
 * record, its inclusion proof, the signed checkpoint and the key chain) as one JSON line,
 * for `stele verify-proof` or any RFC 9162 / C2SP checker, offline. Read-only, beside a
 * running writer. Exit 0, 1 for usage errors, 2 when the journal does not prove the record
 * (corrupt), 3 when it could not (no such record yet, not sealed yet, no index).
 */
#include "cmd.h"

#include <inttypes.h>
#include <string.h>

static const char prove_usage[] =
    "usage: stele prove --seq N [options]\n"
    "\n"
    "Prints a self-contained proof that record N is in the signed journal: the record, its\n"
    "inclusion proof, the signed checkpoint that seals it and the key chain, as one JSON\n"
    "line. Check it with \"stele verify-proof --trust PUB FILE\".\n"
    "\n"
    "      --seq N            the record to prove\n";

enum { OPT_SEQ = 1 };

static const struct option prove_opts[] = {
    {"seq", required_argument, NULL, OPT_SEQ},
    {NULL, 0, NULL, 0},
};

static int
prove_parse(cli_args_t *args, int argc, char **argv, uint64_t *seq)
{
    const char *arg;
    int c, first_operand = argc;
    while ((c = cli_args_next(args, argc, argv, &arg, &first_operand)) != -1) {
        if (c != OPT_SEQ)
            return CLI_EXIT_USAGE;
        if (cli_parse_u64(arg, seq) != 0 || *seq == 0)
            return cli_usage_error("prove", "--seq '%s' is not a seq (1 or more)", arg);
    }
    if (args->want_help)
        return 0;
    if (first_operand < argc)
        return cli_usage_error("prove", "unexpected argument '%s'", argv[first_operand]);
    if (*seq == 0)
        return cli_usage_error("prove", "--seq N is required");
    return 0;
}

int
cmd_prove(int argc, char **argv)
{
    cli_args_t args;
    if (cli_args_begin(&args, "prove", prove_usage, prove_opts, "") != 0)
        return CLI_EXIT_ENGINE;
    uint64_t seq = 0;
    stele_options_t opts; /* for allow_unsafe_dir */
    stele_options_init(&opts);
    int code = prove_parse(&args, argc, argv, &seq);
    if (code == 0 && args.want_help)
        code = cli_print_help(&args);
    else if (code == 0 && (code = cli_options_build(&args, &opts)) == 0) {
        stele_error_t err = {0};
        char *json = NULL;
        size_t len = 0;
        int rc = stele_prove(args.dir, &opts, seq, &json, &len, &err);
        if (rc == 0) {
            fwrite(json, 1, len, stdout);
            fputc('\n', stdout);
            stele_json_free(json);
            code = cli_stdout_done("prove");
        } else {
            cli_report("prove", rc, &err);
            code = rc == STELE_ECORRUPT ? CLI_EXIT_INVALID : CLI_EXIT_ENGINE;
        }
    }
    stele_options_release(&opts);
    cli_args_end(&args);
    return code;
}
