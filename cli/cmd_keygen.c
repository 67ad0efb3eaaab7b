/*
 * cmd_keygen.c: `stele keygen --key FILE --pub FILE [--name NAME]`: a new signer key pair
 * through stele_keygen(): the private key file for the writer's signing_key (mode 0600,
 * refused when it exists) and the public key file, the trust anchor that `stele verify
 * --trust` and `stele verify-proof --trust` take. Exit 0, 1 for usage errors (a file that
 * exists included), 3 when a file could not be written.
 */
#include "cmd.h"

#include <errno.h>
#include <string.h>

static const char keygen_usage[] =
    "usage: stele keygen --key FILE --pub FILE [--name NAME]\n"
    "\n"
    "Makes a signing key pair: FILE for --key is the private key the writer signs with and\n"
    "evolves in place (option signing_key), mode 0600; FILE for --pub is the public key that\n"
    "verifiers trust. Neither file may exist.\n"
    "\n"
    "      --key FILE         the private key file to create\n"
    "      --pub FILE         the public key file to create\n"
    "      --name NAME        the key's name in signatures (default: stele)\n";

enum { OPT_KEY = 1, OPT_PUB, OPT_NAME };

static const struct option keygen_opts[] = {
    {"key", required_argument, NULL, OPT_KEY},
    {"pub", required_argument, NULL, OPT_PUB},
    {"name", required_argument, NULL, OPT_NAME},
    {NULL, 0, NULL, 0},
};

typedef struct keygen_query {
    const char *key_path, *pub_path, *name;
} keygen_query_t;

static int
keygen_parse(cli_args_t *args, int argc, char **argv, keygen_query_t *q)
{
    const char *arg;
    int c, first_operand = argc;
    while ((c = cli_args_next(args, argc, argv, &arg, &first_operand)) != -1) {
        if (c == OPT_KEY)
            q->key_path = arg;
        else if (c == OPT_PUB)
            q->pub_path = arg;
        else if (c == OPT_NAME)
            q->name = arg;
        else
            return CLI_EXIT_USAGE;
    }
    if (args->want_help)
        return 0;
    if (first_operand < argc)
        return cli_usage_error("keygen", "unexpected argument '%s'", argv[first_operand]);
    if (!q->key_path || !q->pub_path)
        return cli_usage_error("keygen", "--key FILE and --pub FILE are both required");
    return 0;
}

int
cmd_keygen(int argc, char **argv)
{
    cli_args_t args;
    if (cli_args_begin(&args, "keygen", keygen_usage, keygen_opts, "") != 0)
        return CLI_EXIT_ENGINE;
    keygen_query_t q = {0};
    int code = keygen_parse(&args, argc, argv, &q);
    if (code == 0 && args.want_help)
        code = cli_print_help(&args);
    else if (code == 0) {
        stele_error_t err = {0};
        int rc = stele_keygen(q.key_path, q.pub_path, q.name, &err);
        if (rc == 0) {
            printf("private key: %s\npublic key:  %s\n", q.key_path, q.pub_path);
            code = cli_stdout_done("keygen");
        } else {
            cli_report("keygen", rc, &err);
            code = rc == -EEXIST ? CLI_EXIT_USAGE : cli_exit_for(rc);
        }
    }
    cli_args_end(&args);
    return code;
}
