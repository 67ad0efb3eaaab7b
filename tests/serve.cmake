# tests/serve.cmake: `stele serve` (cli/cmd_serve.c, cli/serve_*.c) and its client
# (engine/client.c). The tests exec the real `stele` binary (stele_cli) as the server; the
# daemon's sources also form a small library so unit tests and the fuzz target reach them.
set(STELE_SERVE_SOURCES
  ${PROJECT_SOURCE_DIR}/cli/args.c
  ${PROJECT_SOURCE_DIR}/cli/mongo_args.c
  ${PROJECT_SOURCE_DIR}/cli/report.c
  ${PROJECT_SOURCE_DIR}/cli/timearg.c
  ${PROJECT_SOURCE_DIR}/cli/cmd_serve.c
  ${PROJECT_SOURCE_DIR}/cli/serve_ack.c
  ${PROJECT_SOURCE_DIR}/cli/serve_frame.c
  ${PROJECT_SOURCE_DIR}/cli/serve_log.c
  ${PROJECT_SOURCE_DIR}/cli/serve_loop.c
  ${PROJECT_SOURCE_DIR}/cli/serve_request.c)
add_library(stele_serve_core STATIC ${STELE_SERVE_SOURCES})
target_include_directories(stele_serve_core PUBLIC ${PROJECT_SOURCE_DIR}/cli)
target_link_libraries(stele_serve_core PUBLIC stele stele_warnings PkgConfig::BSON
                      Threads::Threads)

set(STELE_SERVE_TEST_DEFS STELE_SERVE_BIN="$<TARGET_FILE:stele_cli>")
if(STELE_SANITIZE)
  # Sanitizer allocators keep freed memory in quarantine: RSS bounds are printed, not held.
  list(APPEND STELE_SERVE_TEST_DEFS STELE_TEST_SANITIZED=1)
endif()

stele_add_test(test_serve_request
  SOURCES test_serve_request.c support/serve_fixture.c fuzz/fuzz_serve_request.c
  LIBS stele_serve_core)
target_compile_definitions(test_serve_request PRIVATE ${STELE_SERVE_TEST_DEFS})

stele_add_test(test_serve
  SOURCES test_serve.c support/serve_fixture.c
  LIBS stele_serve_core
  TIMEOUT 600)
target_compile_definitions(test_serve PRIVATE ${STELE_SERVE_TEST_DEFS})
add_dependencies(test_serve stele_cli)

if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_load.c)
  # 10,000 connections and the server-vs-in-process throughput comparison (docs/protocol.md).
  stele_add_test(test_serve_load
    SOURCES test_serve_load.c support/serve_fixture.c
    LIBS stele_serve_core
    TIMEOUT 900
    LABELS load)
  target_compile_definitions(test_serve_load PRIVATE ${STELE_SERVE_TEST_DEFS})
  add_dependencies(test_serve_load stele_cli)
endif()

# libFuzzer target for the request framer and parser; its sources are compiled into it
# so coverage instrumentation reaches them.
if(STELE_BUILD_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_serve_request
    fuzz/fuzz_serve_request.c
    ${PROJECT_SOURCE_DIR}/cli/serve_frame.c
    ${PROJECT_SOURCE_DIR}/cli/serve_log.c
    ${PROJECT_SOURCE_DIR}/cli/serve_request.c)
  target_include_directories(fuzz_serve_request PRIVATE ${PROJECT_SOURCE_DIR}/cli)
  target_compile_definitions(fuzz_serve_request PRIVATE STELE_FUZZ_MAIN)
  target_compile_options(fuzz_serve_request PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_serve_request PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_serve_request PRIVATE stele stele_warnings PkgConfig::BSON)
  add_test(NAME fuzz_serve_request_smoke
           COMMAND fuzz_serve_request -runs=20000 -max_len=4096 -seed=1 -timeout=10)
  set_tests_properties(fuzz_serve_request_smoke PROPERTIES TIMEOUT 300 LABELS fuzz)
endif()
