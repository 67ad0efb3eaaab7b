# tests/cli.cmake: the `stele` command end to end. The test binaries run the built `stele`
# (STELE_BIN) as child processes; tail_latency is the measuring tool for docs/cli.md.
set(STELE_CLI_TEST_SOURCES cli/cli_harness.c)

stele_add_test(test_cli SOURCES cli/test_cli.c ${STELE_CLI_TEST_SOURCES} LIBS stele
               TIMEOUT 600 LABELS cli)
stele_add_test(test_cli_bad_input SOURCES cli/test_cli_bad_input.c ${STELE_CLI_TEST_SOURCES}
               LIBS stele TIMEOUT 600 LABELS cli)
foreach(t test_cli test_cli_bad_input)
  add_dependencies(${t} stele_cli)
  set_tests_properties(${t} PROPERTIES ENVIRONMENT "STELE_BIN=$<TARGET_FILE:stele_cli>")
endforeach()
