# The journal's unit tests (journal/). Each binary is one module's behaviour.
stele_add_test(test_journal SOURCES test_journal.c jtest_util.c LABELS journal)
stele_add_test(test_recover SOURCES test_recover.c jtest_util.c LABELS journal)
