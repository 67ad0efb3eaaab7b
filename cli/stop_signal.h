/*
 * stop_signal.h: the signals that ask a command to stop (SIGINT, SIGTERM, SIGHUP), taken
 * synchronously: they are blocked, and the command looks for one between steps or waits for
 * one beside its input (a signalfd it can poll), so no handler and no global flag is needed
 * and a stop never lands between an append and the print of its seq. A command that stopped
 * for a signal dies of it once its work is settled (stop_signal_reraise), so its parent sees
 * what stopped it.
 */
#ifndef STELE_CLI_STOP_SIGNAL_H
#define STELE_CLI_STOP_SIGNAL_H

#include <signal.h>

typedef struct stop_signal {
    sigset_t set; /* the stop signals */
    int fd;       /* a signalfd for them, -1 when none could be made */
} stop_signal_t;

/* Blocks the stop signals and makes the signalfd. Returns 0, or -errno (the signals are
 * then not blocked). */
int stop_signal_begin(stop_signal_t *s);

/* Closes the signalfd; the signals stay blocked until stop_signal_reraise or exit. */
void stop_signal_end(stop_signal_t *s);

/* The number of a pending stop signal, taken (not delivered again), or 0. Never blocks. */
int stop_signal_take(stop_signal_t *s);

/* Dies of signo as if it had not been blocked (default action), or returns when that
 * action does not end the process. */
void stop_signal_reraise(int signo);

#endif /* STELE_CLI_STOP_SIGNAL_H */
