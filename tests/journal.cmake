# The journal's unit tests (journal/). Each binary is one module's behaviour.
stele_add_test(test_journal SOURCES test_journal.c support/jtest_util.c LABELS journal)
stele_add_test(test_recover SOURCES test_recover.c support/jtest_util.c LABELS journal)
stele_add_test(test_format SOURCES test_format.c LABELS journal)
target_compile_definitions(test_format PRIVATE STELE_FORMAT_MD="${PROJECT_SOURCE_DIR}/journal/FORMAT.md")
stele_add_test(test_crc32c SOURCES test_crc32c.c support/jtest_util.c LABELS journal)
stele_add_test(test_sha256 SOURCES test_sha256.c LABELS journal)
stele_add_test(test_jreader SOURCES test_jreader.c support/jtest_util.c LABELS journal)
# The journal near a full disk: the next segment yields first (fault I/O table, no root).
stele_add_test(test_journal_space SOURCES test_journal_space.c support/jtest_util.c
               LABELS journal)
# Symbolic links and directories other users could change (the StrictModes-like checks).
stele_add_test(test_journal_dir_safety SOURCES test_journal_dir_safety.c support/jtest_util.c
               LIBS stele LABELS journal)
# A signed journal's key statements when one needs a roll: rotations and the open's
# completion of an interrupted one (crash I/O table), checked by stele_verify_trusted.
stele_add_test(test_journal_seal SOURCES test_journal_seal.c support/jtest_util.c
               LABELS "journal;trust")
