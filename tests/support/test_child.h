/*
 * test_child.h: children a test starts (servers, writers, the stele command) that must not
 * outlive it, even when the test binary is killed.
 */
#ifndef STELE_TEST_CHILD_H
#define STELE_TEST_CHILD_H

#include <stddef.h>
#include <sys/types.h>

/* fork() for a child that must not outlive the test: the child gets SIGKILL when the
 * thread that forked it exits (PR_SET_PDEATHSIG), and exits at once (127) if that happened
 * before the request took effect. Fork from a thread that lives as long as the child. */
pid_t test_fork_bound(void);

/* Runs fn(arg) in a child (test_fork_bound) that takes the identity uid, gid and groups
 * first; returns fn's result, 100 when the identity could not be taken, -1 when the child
 * could not be made or did not exit. */
int test_run_as(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups, int (*fn)(void *),
                void *arg);

#endif /* STELE_TEST_CHILD_H */
