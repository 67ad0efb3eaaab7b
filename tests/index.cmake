# tests/index.cmake: the LMDB index, cross-process readers, status, catch-up and verify.
stele_add_test(test_index SOURCES test_index.c LIBS stele)
stele_add_test(test_reader SOURCES test_reader.c support/index_fixture.c LIBS stele)
stele_add_test(test_verify SOURCES test_verify.c support/index_fixture.c LIBS stele)
stele_add_test(test_status SOURCES test_status.c support/index_fixture.c LIBS stele)
# Readers and verify beside retention: what it deleted is never damage (hooked interleavings).
stele_add_test(test_retention_races SOURCES test_retention_races.c support/jtest_util.c
               support/engine_fixture.c LIBS stele TIMEOUT 300)
# A monitoring user in the journal's group: status, Prometheus and dead letters through the
# writer's monitor snapshot (users made with useradd; skipped when not root).
stele_add_test(test_status_group SOURCES test_status_group.c support/jtest_util.c LIBS stele)
set_tests_properties(test_status_group PROPERTIES ENVIRONMENT "STELE_BIN=$<TARGET_FILE:stele_cli>")
