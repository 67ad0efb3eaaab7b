# tests/cli.cmake: the `stele` command end to end. The test binaries run the built `stele`
# (STELE_BIN) as child processes. tail_latency, the measuring tool for docs/cli.md, is in
# tests/perf.cmake.
set(STELE_CLI_TEST_SOURCES cli/cli_harness.c)

stele_add_test(test_cli SOURCES cli/test_cli.c ${STELE_CLI_TEST_SOURCES} LIBS stele
               TIMEOUT 600 LABELS cli)
stele_add_test(test_cli_bad_input SOURCES cli/test_cli_bad_input.c ${STELE_CLI_TEST_SOURCES}
               LIBS stele TIMEOUT 600 LABELS cli)
# MongoDB parts: against the FerretDB test server (tests/integration), or STELE_TEST_MONGO_URI.
stele_add_test(test_cli_mongo SOURCES cli/test_cli_mongo.c ${STELE_CLI_TEST_SOURCES}
               integration/mongo_server.c LIBS stele PkgConfig::MONGOC TIMEOUT 600 LABELS cli)
target_include_directories(test_cli_mongo PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/integration)

# The document -> record conversion of `tail --mongo` (engine/remote_reader.c), no server.
stele_add_test(test_remote_reader SOURCES test_remote_reader.c LIBS stele LABELS cli)
# stele_validate_json, which `stele insert` runs before sending a line to `stele serve`.
stele_add_test(test_validate_api SOURCES test_validate_api.c LIBS stele LABELS cli)

foreach(t test_cli test_cli_bad_input test_cli_mongo)
  add_dependencies(${t} stele_cli)
  set_tests_properties(${t} PROPERTIES ENVIRONMENT "STELE_BIN=$<TARGET_FILE:stele_cli>")
endforeach()
