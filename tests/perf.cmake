# tests/perf.cmake: programs that measure rather than assert (tests/perf/). Their figures
# depend on the disk and on what else the machine runs, so they are run by hand; the two
# ctest entries below check only loose bounds that a busy machine still meets.

# The journal's figures in docs/journal.md: build/tests/perf_journal append|prealloc|recovery
add_executable(perf_journal perf/perf_journal.c)
target_link_libraries(perf_journal PRIVATE stele_journal stele_warnings)

# What the index buys a reader: build/tests/index_seek_bench [records] [seeks]
add_executable(index_seek_bench perf/index_seek_bench.c)
target_link_libraries(index_seek_bench PRIVATE stele_test_support stele)

# tail_latency: `stele tail -f` latency from an append in this process to the line printed by
# the child (figures in docs/cli.md). The ctest run is short and only checks that every line
# arrives, in order, with p99 under a loose bound (a shared CI machine is noisy).
add_executable(tail_latency perf/tail_latency.c)
target_link_libraries(tail_latency PRIVATE stele stele_warnings)
add_dependencies(tail_latency stele_cli)
add_test(NAME tail_latency COMMAND tail_latency $<TARGET_FILE:stele_cli> --events 200
         --max-ms 500)
set_tests_properties(tail_latency PROPERTIES TIMEOUT 300 LABELS cli)

# stele-ship-bench: the shipping figures of docs/benchmarks.md and docs/mongodb.md, against
# the MongoDB-compatible test server (tests/integration) or --uri.
add_executable(stele-ship-bench perf/ship_bench.c)
target_link_libraries(stele-ship-bench PRIVATE stele_ship_test_support)

if(STELE_TEST_LONG)
  # Ten million records wait while MongoDB is down, then a minute of catching up: every
  # phase's peak RSS under 64 MiB (docs/mongodb.md "Memory while MongoDB is down"; needs
  # ~1.4 GB of disk under $TMPDIR, deleted at the end).
  add_test(NAME ship_memory_10m COMMAND stele-ship-bench memory --records 10000000
           --seconds 20 --catch-up 60 --max-rss-kib 65536)
  set_tests_properties(ship_memory_10m PROPERTIES FIXTURES_REQUIRED mongo_server
                       LABELS "mongo;long" TIMEOUT 1800)
endif()
