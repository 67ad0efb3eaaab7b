/*
 * cmd.h: the entry point of each `stele` subcommand. Each takes argv from the command name
 * on (argv[0] is "insert", ...) and returns the process exit status (enum cli_exit). Brings
 * in what every subcommand file uses: stdio, the shared flags (args.h), exit codes and
 * error lines (report.h), time values (timearg.h) and the MongoDB flags (mongo_args.h).
 */
#ifndef STELE_CLI_CMD_H
#define STELE_CLI_CMD_H

#include <stdio.h>

#include "args.h"
#include "mongo_args.h"
#include "report.h"
#include "timearg.h"

int cmd_insert(int argc, char **argv);
int cmd_tail(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_ship(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* the daemon: stele_serve_run() behind its flags */
int cmd_keygen(int argc, char **argv);
int cmd_prove(int argc, char **argv);
int cmd_verify_proof(int argc, char **argv);

#endif /* STELE_CLI_CMD_H */
