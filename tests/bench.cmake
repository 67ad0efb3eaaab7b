# tests/bench.cmake: stele-bench's tests. test_bench runs the built stele-bench and checks
# that what it reports is what the journal and the peers hold afterwards (not timed).
if(TARGET stele-bench)
  stele_add_test(test_bench
    SOURCES test_bench.c ${PROJECT_SOURCE_DIR}/bench/bench_hist.c
            ${PROJECT_SOURCE_DIR}/bench/bench_event.c ${PROJECT_SOURCE_DIR}/bench/bench_output.c
            ${PROJECT_SOURCE_DIR}/bench/bench_run.c ${PROJECT_SOURCE_DIR}/bench/bench_server.c
            ${PROJECT_SOURCE_DIR}/bench/bench_readback.c
    LIBS stele PkgConfig::BSON
    TIMEOUT 300
    LABELS bench)
  target_include_directories(test_bench PRIVATE ${PROJECT_SOURCE_DIR}/bench)
  target_compile_definitions(test_bench PRIVATE
    STELE_BENCH_EXE="$<TARGET_FILE:stele-bench>")
  add_dependencies(test_bench stele-bench)
  if(TARGET stele-hddfs)
    add_dependencies(test_bench stele-hddfs)
  endif()

  # docs/benchmarks.md quotes `stele-bench --table docs/bench/results.csv` byte for byte.
  add_test(NAME benchmarks_doc_tables
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/check-bench-tables.sh $<TARGET_FILE:stele-bench>)
  set_tests_properties(benchmarks_doc_tables PROPERTIES TIMEOUT 60 LABELS bench)
endif()

# The emulated disk's model (skipped without /dev/fuse and root).
if(TARGET stele-hddfs)
  stele_add_test(test_hddfs SOURCES test_hddfs.c TIMEOUT 300 LABELS bench)
  target_compile_definitions(test_hddfs PRIVATE STELE_HDDFS_EXE="$<TARGET_FILE:stele-hddfs>")
  add_dependencies(test_hddfs stele-hddfs)
endif()
