# tests/index.cmake: the LMDB index, cross-process readers, status, catch-up and verify.
stele_add_test(test_index SOURCES test_index.c LIBS stele)
stele_add_test(test_reader SOURCES test_reader.c support/index_fixture.c LIBS stele)
stele_add_test(test_verify SOURCES test_verify.c support/index_fixture.c LIBS stele)
stele_add_test(test_status SOURCES test_status.c support/index_fixture.c LIBS stele)
