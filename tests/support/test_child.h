/*
 * test_child.h: children a test starts (servers, writers, the stele command) that must not
 * outlive it, even when the test binary is killed.
 */
#ifndef STELE_TEST_CHILD_H
#define STELE_TEST_CHILD_H

#include <sys/types.h>

/* fork() for a child that must not outlive the test: the child gets SIGKILL when the
 * thread that forked it exits (PR_SET_PDEATHSIG), and exits at once (127) if that happened
 * before the request took effect. Fork from a thread that lives as long as the child. */
pid_t test_fork_bound(void);

#endif /* STELE_TEST_CHILD_H */
