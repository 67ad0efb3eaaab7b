# tests/durability.cmake: the fault and crash I/O tables and the loops that use them to
# show the journal never loses a record acknowledged as durable (owned by the durability
# work; see tests/support/).

# Payloads in the ledger are BSON documents built with libbson.
target_link_libraries(stele_test_support PUBLIC PkgConfig::BSON)
if(STELE_TEST_LONG)
  # Long crash and power-loss loops unless STELE_TEST_LONG=0 is set in the environment.
  target_compile_definitions(stele_test_support PRIVATE STELE_TEST_LONG_DEFAULT)
endif()

stele_add_test(test_io_fault SOURCES test_io_fault.c LABELS durability)
stele_add_test(test_io_crash SOURCES test_io_crash.c LABELS durability)

# Fault loop: every I/O call of a create/append/roll/sync/delete/close/reopen workload
# failed in turn (EIO, ENOSPC, short write; once and forever). About 1,100 journal
# lifecycles, each a few hand-offs between the writer and the preparer thread: 15-40 s on a
# quiet machine, over 5 minutes with both CPUs kept busy (scheduling, not work), hence the
# timeout of the other loops.
stele_add_test(test_journal_faults SOURCES test_journal_faults.c LABELS durability
               TIMEOUT 3600)
# 1,400 simulated power losses (140,000 in long mode).
stele_add_test(test_journal_powerloss SOURCES test_journal_powerloss.c LABELS durability
               TIMEOUT 3600)

# The whole engine under kill -9 (200 kills; 10,000 in long mode) and simulated power loss.
stele_add_test(test_engine_crash SOURCES test_engine_crash.c LABELS durability TIMEOUT 3600)
