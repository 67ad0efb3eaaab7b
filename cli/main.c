/*
 * main.c: `stele COMMAND [options]`: finds the subcommand and hands it argv from the command
 * name on (so each command parses its own flags with getopt from argv[1]). Before that it
 * makes sure descriptors 0, 1 and 2 are taken (see hold_closed_standard_streams). Owns
 * nothing else: the flags, exit codes and helpers the commands share live in args.c,
 * report.c, timearg.c and mongo_args.c.
 */
#include "cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} cli_command_t;

static const cli_command_t commands[] = {
    {"insert", cmd_insert, "append events (arguments, or JSON Lines on stdin)"},
    {"tail", cmd_tail, "print records as JSON Lines; -f follows new ones"},
    {"status", cmd_status, "journal and sink positions (--json, --prometheus)"},
    {"verify", cmd_verify,
     "check CRCs, the hash chain, seqs and the index (--trust PUB: signatures)"},
    {"ship", cmd_ship, "run a MongoDB sink in the foreground"},
    {"serve", cmd_serve, "own the journal; take events from other processes on a socket"},
    {"keygen", cmd_keygen, "make a signing key pair (--key FILE --pub FILE)"},
    {"prove", cmd_prove, "print the proof that a record is in the signed journal (--seq N)"},
    {"verify-proof", cmd_verify_proof, "check a proof from \"stele prove\" (--trust PUB FILE)"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void
print_usage(FILE *out)
{
    fputs("usage: stele [--version] [--help] COMMAND [options]\n\ncommands:\n", out);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fputs("\n\"stele COMMAND --help\" shows a command's options; \"man stele\" the rest.\n"
          "Exit status: 0 ok, 1 usage error, 2 invalid input or failed check, 3 I/O or engine "
          "error.\n",
          out);
}

/*
 * A standard stream the caller closed (`stele insert >&-`, `<&-`, `2>&-`) must not leave its
 * number free: the journal's next open() would take it, and printf would write seqs into
 * the LOCK page, a message would land in a journal file, or insert would read the LOCK file
 * as its input. /dev/null opened the wrong way round keeps the number taken and fails every
 * read (stdin) or write (stdout, stderr) with EBADF, so the commands still see, and report,
 * a closed stream. Returns 0, or -1 when /dev/null cannot be opened.
 */
static int
hold_closed_standard_streams(void)
{
    for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        /* the lower numbers are taken by now, so open() returns fd */
        int held = open("/dev/null", fd == STDIN_FILENO ? O_WRONLY : O_RDONLY);
        if (held != fd) {
            if (held >= 0)
                close(held);
            return -1;
        }
    }
    return 0;
}

int
main(int argc, char **argv)
{
    if (hold_closed_standard_streams() != 0) {
        fprintf(stderr,
                "stele: could not open /dev/null in place of a closed standard stream: "
                "%s\n",
                strerror(errno));
        return CLI_EXIT_ENGINE;
    }
    /* Every command may die by a signal (tail -f | head, a kill): leave no counters file. */
    stele_forget_driver_counters();
    if (argc < 2) {
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("stele %s\n", stele_version());
        return cli_stdout_done(NULL);
    }
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 ||
        (strcmp(name, "help") == 0 && argc == 2)) {
        print_usage(stdout);
        return cli_stdout_done(NULL);
    }
    /* "stele help insert" is "stele insert --help" */
    if (strcmp(name, "help") == 0 && argc >= 3) {
        char help_flag[] = "--help";
        char *help_argv[] = {argv[2], help_flag, NULL};
        for (size_t i = 0; i < N_COMMANDS; i++) {
            if (strcmp(argv[2], commands[i].name) == 0)
                return commands[i].run(2, help_argv);
        }
        name = argv[2];
    } else {
        for (size_t i = 0; i < N_COMMANDS; i++) {
            if (strcmp(name, commands[i].name) == 0)
                return commands[i].run(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "stele: unknown command '%s'\nhint: see \"stele --help\"\n", name);
    return CLI_EXIT_USAGE;
}
