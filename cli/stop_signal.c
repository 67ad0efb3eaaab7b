/*
 * stop_signal.c: stop signals taken synchronously (stop_signal.h). No state beyond the
 * caller's struct; the signal mask is the calling thread's (the CLI is single-threaded
 * except for the library's threads, which inherit the mask set before stele_open).
 */
#include "stop_signal.h"

#include <errno.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

int
stop_signal_begin(stop_signal_t *s)
{
    sigemptyset(&s->set);
    sigaddset(&s->set, SIGINT);
    sigaddset(&s->set, SIGTERM);
    sigaddset(&s->set, SIGHUP);
    s->fd = -1;
    if (sigprocmask(SIG_BLOCK, &s->set, NULL) != 0)
        return -errno;
    s->fd = signalfd(-1, &s->set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (s->fd < 0) {
        int rc = -errno;
        sigprocmask(SIG_UNBLOCK, &s->set, NULL);
        return rc;
    }
    return 0;
}

void
stop_signal_end(stop_signal_t *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

int
stop_signal_take(stop_signal_t *s)
{
    struct timespec zero = {0, 0};
    int signo = sigtimedwait(&s->set, NULL, &zero);
    return signo > 0 ? signo : 0;
}

void
stop_signal_reraise(int signo)
{
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signo);
    signal(signo, SIG_DFL);
    raise(signo); /* pending until unblocked below */
    sigprocmask(SIG_UNBLOCK, &one, NULL);
}
