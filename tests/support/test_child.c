/*
 * test_child.c: forks children bound to the test process (test_child.h).
 *
 * Owns: nothing; no state. A killed test binary (ctest's timeout, a developer's kill) would
 * otherwise leave its servers and writers running, holding ports, journals and CPU.
 */
#include "test_child.h"

#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
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

int
test_run_as(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups, int (*fn)(void *),
            void *arg)
{
    pid_t pid = test_fork_bound();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (setgroups(n_groups, groups) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
            _exit(100);
        _exit(fn(arg));
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
