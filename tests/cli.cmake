# tests/cli.cmake: the `stele` command end to end. The test binaries run the built `stele`
# (STELE_BIN) as child processes. tail_latency, the measuring tool for docs/cli.md, is in
# tests/perf.cmake.
set(STELE_CLI_TEST_SOURCES cli/cli_harness.c)

stele_add_test(test_cli SOURCES cli/test_cli.c ${STELE_CLI_TEST_SOURCES} LIBS stele
               TIMEOUT 600 LABELS cli)
# test_cli and test_cli_mongo run tests/cli/json_roundtrip.py (python3 and jq; skipped,
# saying so, without them) on tests/cli/roundtrip_events.jsonl.
target_compile_definitions(test_cli PRIVATE STELE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
stele_add_test(test_cli_bad_input SOURCES cli/test_cli_bad_input.c ${STELE_CLI_TEST_SOURCES}
               LIBS stele TIMEOUT 600 LABELS cli)
# insert near a full disk and when stopped by a signal (RLIMIT_FSIZE; with root also a small
# tmpfs and a loop-mounted ext4 image).
stele_add_test(test_cli_space SOURCES cli/test_cli_space.c ${STELE_CLI_TEST_SOURCES} LIBS stele
               TIMEOUT 600 LABELS cli)
# tail -f and verify beside retention (the test process writes the journal through journal.h).
stele_add_test(test_cli_retention SOURCES cli/test_cli_retention.c ${STELE_CLI_TEST_SOURCES}
               LIBS stele TIMEOUT 600 LABELS cli)
# MongoDB parts: against the FerretDB test server (tests/integration), or STELE_TEST_MONGO_URI.
stele_add_test(test_cli_mongo SOURCES cli/test_cli_mongo.c ${STELE_CLI_TEST_SOURCES}
               integration/mongo_server.c LIBS stele PkgConfig::MONGOC TIMEOUT 600 LABELS cli)
target_include_directories(test_cli_mongo PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/integration)
target_compile_definitions(test_cli_mongo PRIVATE STELE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

# The document -> record conversion of `tail --mongo` (engine/remote_reader.c), no server.
stele_add_test(test_remote_reader SOURCES test_remote_reader.c LIBS stele LABELS cli)
# stele_validate_json, which `stele insert` runs before sending a line to `stele serve`.
stele_add_test(test_validate_api SOURCES test_validate_api.c LIBS stele LABELS cli)

foreach(t test_cli test_cli_bad_input test_cli_mongo test_cli_space test_cli_retention)
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
# stele_time_parse: the --since/--until forms and ts conditions (engine/time_parse.c), with a
# fixed clock and time zone.
stele_add_test(test_time_parse SOURCES test_time_parse.c LIBS stele LABELS cli)
# Every option of every command in its --help, docs/cli.md and docs/stele.1, with the same
# values (python3; skipped, saying so, without it).
add_test(NAME options_documented
         COMMAND sh -c "command -v python3 >/dev/null || { echo 'python3 not found: not checked'; exit 77; }; exec python3 \"$0\" \"$1\" \"$2\""
                 ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_options_documented.py
                 $<TARGET_FILE:stele_cli> ${PROJECT_SOURCE_DIR})
set_tests_properties(options_documented PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS cli)
