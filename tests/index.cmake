# tests/index.cmake: the LMDB index, cross-process readers, status, catch-up and verify.
stele_add_test(test_index SOURCES test_index.c LIBS stele)
stele_add_test(test_reader SOURCES test_reader.c index_fixture.c LIBS stele)
stele_add_test(test_verify SOURCES test_verify.c index_fixture.c LIBS stele)

# What the index buys a reader, measured by hand (not a test): build/tests/index_seek_bench
add_executable(index_seek_bench index_seek_bench.c)
target_link_libraries(index_seek_bench PRIVATE stele_test_support stele)
