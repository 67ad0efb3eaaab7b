# tests/engine.cmake: the write path: errors, validation, knobs, group commit, the public API.
stele_add_test(test_error SOURCES test_error.c LIBS stele TIMEOUT 60)
stele_add_test(test_log SOURCES test_log.c LIBS stele TIMEOUT 60)
stele_add_test(test_validate SOURCES test_validate.c support/json_reference.c LIBS stele
               TIMEOUT 60)
# stele's JSON reader against Python's json module (tests/support/json_python_cases.py).
stele_add_test(test_json_python SOURCES test_json_python.c LIBS stele TIMEOUT 120)
target_compile_definitions(test_json_python PRIVATE
  STELE_JSON_PYTHON_SCRIPT="${CMAKE_CURRENT_SOURCE_DIR}/support/json_python_cases.py")
stele_add_test(test_config SOURCES test_config.c LIBS stele TIMEOUT 60)
stele_add_test(test_commit SOURCES test_commit.c LIBS stele TIMEOUT 60)
stele_add_test(test_latency_hist SOURCES test_latency_hist.c LIBS stele TIMEOUT 60)
stele_add_test(test_seqwait SOURCES test_seqwait.c LIBS stele TIMEOUT 60)
stele_add_test(test_engine SOURCES test_engine.c support/engine_fixture.c LIBS stele TIMEOUT 120)
stele_add_test(test_stress SOURCES test_stress.c support/engine_fixture.c LIBS stele TIMEOUT 240)
# The example must run, not just compile: it appends into a fresh temporary journal.
add_test(NAME example_append
         COMMAND sh -c "d=$(mktemp -d) && $<TARGET_FILE:stele-example-append> \"$d/journal\"; rc=$?; rm -rf \"$d\"; [ $rc -eq 0 ] && echo example-exit-ok; exit $rc")
# PASS_REGULAR_EXPRESSION replaces the exit-code check, so the exit code is echoed too.
set_tests_properties(example_append PROPERTIES TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "rejected as STELE_EDOLLARKEY.*example-exit-ok")
# An application links against the installed libraries with examples/append.c's command.
stele_add_test(test_pkgconfig SOURCES test_pkgconfig.c TIMEOUT 120)
target_compile_definitions(test_pkgconfig PRIVATE
  STELE_CMAKE_COMMAND="${CMAKE_COMMAND}" STELE_BUILD_DIR="${PROJECT_BINARY_DIR}"
  STELE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" STELE_C_COMPILER="${CMAKE_C_COMPILER}"
  STELE_INSTALL_LIBDIR="${CMAKE_INSTALL_LIBDIR}")
# Who appended a record (stele_origin_t): the library writer, the engine-internal append serve
# uses, the tail line, the shipped document and its way back; no server needed.
stele_add_test(test_origin SOURCES test_origin.c support/index_fixture.c LIBS stele
               PkgConfig::BSON TIMEOUT 60)
