/*
 * cmd.h: the entry point of each `stele` subcommand. Each takes argv from the command name
 * on (argv[0] is "insert", ...) and returns the process exit status (enum cli_exit).
 */
#ifndef STELE_CLI_CMD_H
#define STELE_CLI_CMD_H

#include "common.h"

int cmd_insert(int argc, char **argv);
int cmd_tail(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_ship(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* cmd_serve.c: the daemon, see serve.h */

#endif /* STELE_CLI_CMD_H */
