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
# The index when the disk is full: it falls behind, never the journal (index_fail_writes).
stele_add_test(test_engine_space SOURCES test_engine_space.c support/engine_fixture.c LIBS stele
               TIMEOUT 300)
# The record clock: wall-clock jumps stamp no record wrong (injected clocks).
stele_add_test(test_engine_clock SOURCES test_engine_clock.c support/engine_fixture.c LIBS stele
               TIMEOUT 120)
stele_add_test(test_stress SOURCES test_stress.c support/engine_fixture.c LIBS stele TIMEOUT 240)
# The example must run, not just compile: it appends into a fresh temporary journal.
add_test(NAME example_append
         COMMAND sh -c "d=$(mktemp -d) && $<TARGET_FILE:stele-example-append> \"$d/journal\"; rc=$?; rm -rf \"$d\"; [ $rc -eq 0 ] && echo example-exit-ok; exit $rc")
# PASS_REGULAR_EXPRESSION replaces the exit-code check, so the exit code is echoed too.
set_tests_properties(example_append PROPERTIES TIMEOUT 60
                     PASS_REGULAR_EXPRESSION "rejected as STELE_EDOLLARKEY.*example-exit-ok")
# An application links against the installed libraries with examples/append.c's command:
# the shared library with `pkg-config --libs stele`, the static ones with --static; the
# installed systemd unit runs the installed command. The test installs into temporary
# prefixes, so it needs every install directory relative to the prefix. Under a sanitizer
# the installed libraries are instrumented, so the program is built with the same flags.
set(STELE_TEST_APP_CFLAGS "")
if(STELE_SANITIZE STREQUAL "address")
  set(STELE_TEST_APP_CFLAGS "-fsanitize=address,undefined")
elseif(STELE_SANITIZE STREQUAL "thread")
  set(STELE_TEST_APP_CFLAGS "-fsanitize=thread")
endif()
set(STELE_TEST_INSTALL_DIRS_RELATIVE ON)
foreach(dir CMAKE_INSTALL_BINDIR CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR STELE_SYSTEMD_UNIT_DIR)
  if(IS_ABSOLUTE "${${dir}}")
    message(STATUS "test_pkgconfig left out: ${dir} is absolute, and its installs into "
                   "temporary prefixes would write there")
    set(STELE_TEST_INSTALL_DIRS_RELATIVE OFF)
  endif()
endforeach()
if(STELE_TEST_INSTALL_DIRS_RELATIVE)
  stele_add_test(test_pkgconfig SOURCES test_pkgconfig.c TIMEOUT 240)
  target_compile_definitions(test_pkgconfig PRIVATE
    STELE_CMAKE_COMMAND="${CMAKE_COMMAND}" STELE_BUILD_DIR="${PROJECT_BINARY_DIR}"
    STELE_SOURCE_DIR="${PROJECT_SOURCE_DIR}" STELE_C_COMPILER="${CMAKE_C_COMPILER}"
    STELE_INSTALL_LIBDIR="${CMAKE_INSTALL_LIBDIR}" STELE_INSTALL_BINDIR="${CMAKE_INSTALL_BINDIR}"
    STELE_SYSTEMD_UNIT_DIR="${STELE_SYSTEMD_UNIT_DIR}"
    STELE_TEST_APP_CFLAGS="${STELE_TEST_APP_CFLAGS}"
    STELE_TEST_PROJECT_VERSION="${PROJECT_VERSION}" STELE_TEST_SOVERSION="${STELE_SOVERSION}")
endif()
# stele_version() and the header's version macros.
stele_add_test(test_version SOURCES test_version.c LIBS stele TIMEOUT 60)
target_compile_definitions(test_version PRIVATE STELE_TEST_PROJECT_VERSION="${PROJECT_VERSION}")
