# tests/index.cmake: the LMDB index, cross-process readers, status, catch-up and verify.
stele_add_test(test_index SOURCES test_index.c LIBS stele)
stele_add_test(test_reader SOURCES test_reader.c support/index_fixture.c LIBS stele)
stele_add_test(test_verify SOURCES test_verify.c support/index_fixture.c LIBS stele)
stele_add_test(test_status SOURCES test_status.c support/index_fixture.c LIBS stele)
# Readers and verify beside retention: what it deleted is never damage (hooked interleavings).
stele_add_test(test_retention_races SOURCES test_retention_races.c support/jtest_util.c
               support/engine_fixture.c LIBS stele TIMEOUT 300)
