# tests/serve.cmake: the server (engine/serve*.c, run as `stele serve`), its client
# (engine/serve_client.c) and the wire protocol they share (engine/protocol*.c). The server
# tests exec the real `stele` binary (stele_cli); the protocol test calls the module directly.
set(STELE_SERVE_TEST_DEFS STELE_SERVE_BIN="$<TARGET_FILE:stele_cli>")
if(STELE_SANITIZE)
  # Sanitizer allocators keep freed memory in quarantine: RSS bounds are printed, not held.
  list(APPEND STELE_SERVE_TEST_DEFS STELE_TEST_SANITIZED=1)
endif()

# The protocol's table tests, and the fuzz target's entry point replayed on random inputs.
stele_add_test(test_protocol
  SOURCES test_protocol.c support/serve_fixture.c fuzz/fuzz_protocol.c
  LIBS stele PkgConfig::BSON)
target_compile_definitions(test_protocol PRIVATE ${STELE_SERVE_TEST_DEFS})

# The ack threads on an in-process stele_t: what the loop acknowledges by itself.
stele_add_test(test_serve_ack SOURCES test_serve_ack.c LIBS stele TIMEOUT 120)

stele_add_test(test_serve
  SOURCES test_serve.c support/serve_fixture.c
  LIBS stele PkgConfig::BSON
  TIMEOUT 600)
target_compile_definitions(test_serve PRIVATE ${STELE_SERVE_TEST_DEFS})
add_dependencies(test_serve stele_cli)

# Connection caps, the idle timeout, the pid file and the socket's modes and links.
stele_add_test(test_serve_limits
  SOURCES test_serve_limits.c support/serve_fixture.c
  LIBS stele PkgConfig::BSON
  TIMEOUT 600)
target_compile_definitions(test_serve_limits PRIVATE ${STELE_SERVE_TEST_DEFS})
add_dependencies(test_serve_limits stele_cli)

if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/test_serve_load.c)
  # 10,000 connections and the server-vs-in-process throughput comparison (docs/protocol.md).
  stele_add_test(test_serve_load
    SOURCES test_serve_load.c support/serve_fixture.c
    LIBS stele PkgConfig::BSON
    TIMEOUT 900
    LABELS load)
  target_compile_definitions(test_serve_load PRIVATE ${STELE_SERVE_TEST_DEFS})
  add_dependencies(test_serve_load stele_cli)
endif()

# What serve records about each sender (SO_PEERCRED as the record's origin): two users through
# the socket (root only: the second is made with useradd and removed), `stele tail`, and
# MongoDB (the FerretDB test server) receiving, returning and comparing their uids.
stele_add_test(test_serve_origin
  SOURCES test_serve_origin.c support/serve_fixture.c cli/cli_harness.c
          integration/mongo_server.c
  LIBS stele PkgConfig::BSON PkgConfig::MONGOC
  TIMEOUT 600)
target_compile_definitions(test_serve_origin PRIVATE ${STELE_SERVE_TEST_DEFS})
target_include_directories(test_serve_origin PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/cli
                           ${CMAKE_CURRENT_SOURCE_DIR}/integration)
add_dependencies(test_serve_origin stele_cli)
set_tests_properties(test_serve_origin PROPERTIES
                     ENVIRONMENT "STELE_BIN=$<TARGET_FILE:stele_cli>")
# The HTTP endpoint of --metrics-listen (/metrics, /health), scraped over plain sockets; /health
# of a stopped sink against the FerretDB test server.
stele_add_test(test_serve_metrics
  SOURCES test_serve_metrics.c support/serve_fixture.c integration/mongo_server.c
  LIBS stele PkgConfig::BSON PkgConfig::MONGOC
  TIMEOUT 300)
target_include_directories(test_serve_metrics PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/integration)
set_tests_properties(test_serve_metrics PROPERTIES FIXTURES_REQUIRED mongo_server LABELS mongo)
target_compile_definitions(test_serve_metrics PRIVATE ${STELE_SERVE_TEST_DEFS})
add_dependencies(test_serve_metrics stele_cli)
