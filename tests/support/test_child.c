/*
 * test_child.c: forks children bound to the test process (test_child.h).
 *
 * Owns: nothing; no state. A killed test binary (ctest's timeout, a developer's kill) would
 * otherwise leave its servers and writers running, holding ports, journals and CPU.
 */
#include "test_child.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

pid_t
test_fork_bound(void)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent))
        _exit(127); /* the test is gone already, or the child could not be bound to it */
    return pid;
}
