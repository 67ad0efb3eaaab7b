# tests/cli.cmake: the `stele` command end to end. The test binaries run the built `stele`
# (STELE_BIN) as child processes. tail_latency, the measuring tool for docs/cli.md, is in
# tests/perf.cmake.
set(STELE_CLI_TEST_SOURCES cli/cli_harness.c)

stele_add_test(test_cli SOURCES cli/test_cli.c ${STELE_CLI_TEST_SOURCES} LIBS stele
               TIMEOUT 600 LABELS cli)
# test_cli runs tests/cli/json_readback.py (python3; skipped without it).
target_compile_definitions(test_cli PRIVATE STELE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
stele_add_test(test_cli_bad_input SOURCES cli/test_cli_bad_input.c ${STELE_CLI_TEST_SOURCES}
               LIBS stele TIMEOUT 600 LABELS cli)
# MongoDB parts: against the FerretDB test server (tests/integration), or STELE_TEST_MONGO_URI.
stele_add_test(test_cli_mongo SOURCES cli/test_cli_mongo.c ${STELE_CLI_TEST_SOURCES}
               integration/mongo_server.c LIBS stele PkgConfig::MONGOC TIMEOUT 600 LABELS cli)
target_include_directories(test_cli_mongo PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/integration)
# verify --mongo --trust: a signed copy checked without its journal, intact and damaged.
stele_add_test(test_cli_mongo_trust SOURCES cli/test_cli_mongo_trust.c ${STELE_CLI_TEST_SOURCES}
               integration/mongo_server.c LIBS stele PkgConfig::MONGOC TIMEOUT 600 LABELS cli)
target_include_directories(test_cli_mongo_trust PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/integration)

# The document -> record conversion of `tail --mongo` (engine/remote_reader.c), no server.
stele_add_test(test_remote_reader SOURCES test_remote_reader.c LIBS stele LABELS cli)
# stele_validate_json, which `stele insert` runs before sending a line to `stele serve`.
stele_add_test(test_validate_api SOURCES test_validate_api.c LIBS stele LABELS cli)

foreach(t test_cli test_cli_bad_input test_cli_mongo test_cli_mongo_trust)
  add_dependencies(${t} stele_cli)
  set_tests_properties(${t} PROPERTIES ENVIRONMENT "STELE_BIN=$<TARGET_FILE:stele_cli>")
endforeach()

# The JSON every command prints (engine/render*.c): a table of every BSON type, malformed
# events, the three line shapes, and Python's json reading random events back
# (render_roundtrip.py; needs python3, skipped without it).
stele_add_test(test_render SOURCES test_render.c LIBS stele PkgConfig::BSON LABELS cli)
target_compile_definitions(test_render PRIVATE STELE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# stele_filter_*: the conditions of `stele tail --where` (engine/filter.c).
stele_add_test(test_filter SOURCES test_filter.c LIBS stele PkgConfig::BSON LABELS cli)
