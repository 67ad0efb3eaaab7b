# tests/index.cmake: the LMDB index, cross-process readers, status, catch-up and verify.
stele_add_test(test_index SOURCES test_index.c LIBS stele)
stele_add_test(test_reader SOURCES test_reader.c index_fixture.c LIBS stele)
stele_add_test(test_verify SOURCES test_verify.c index_fixture.c LIBS stele)
