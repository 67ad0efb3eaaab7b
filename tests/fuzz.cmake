# tests/fuzz.cmake: libFuzzer targets for frame decoding (record_decode), segment scanning by
# the reader, tail recovery at open, the serve wire protocol (engine/protocol*.c), and stele's
# JSON reader against libbson's. Built when clang is the compiler or with -DSTELE_BUILD_FUZZ=ON (then in a separate clang build dir:
#   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DSTELE_BUILD_FUZZ=ON).
# The sources under test are compiled into each target so libFuzzer's coverage sees them.
# Each target gets a short ctest run (STELE_FUZZ_SECONDS, default 20) from a generated corpus.
if(NOT (CMAKE_C_COMPILER_ID MATCHES "Clang" OR STELE_BUILD_FUZZ))
  return()
endif()
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "STELE_BUILD_FUZZ needs clang: add -DCMAKE_C_COMPILER=clang")
endif()
if(STELE_SANITIZE STREQUAL "thread")
  return() # libFuzzer does not combine with TSan
endif()

set(STELE_FUZZ_SECONDS 20 CACHE STRING "seconds each fuzz target runs under ctest")
get_target_property(fuzz_journal_sources stele_journal SOURCES)
get_target_property(fuzz_journal_dir stele_journal SOURCE_DIR)
# journal/ lists its sources by glob (absolute paths); a relative one is under its folder.
set(fuzz_journal_paths)
foreach(source IN LISTS fuzz_journal_sources)
  if(NOT IS_ABSOLUTE ${source})
    set(source ${fuzz_journal_dir}/${source})
  endif()
  list(APPEND fuzz_journal_paths ${source})
endforeach()

foreach(target fuzz_frame_decode fuzz_segment_read fuzz_tail_recovery)
  add_executable(${target} fuzz/${target}.c fuzz/fuzz_journal.c support/test_util.c
                           support/io_fault.c ${fuzz_journal_paths})
  target_include_directories(${target} PRIVATE ${fuzz_journal_dir} ${PROJECT_SOURCE_DIR}/include
                             ${CMAKE_CURRENT_SOURCE_DIR}/support ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
  set(fuzz_flags -fsanitize=fuzzer)
  if(STELE_SANITIZE STREQUAL "")
    list(APPEND fuzz_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  endif()
  target_compile_options(${target} PRIVATE ${fuzz_flags})
  target_link_options(${target} PRIVATE ${fuzz_flags})
  target_link_libraries(${target} PRIVATE stele_warnings PkgConfig::CRYPTO PkgConfig::BSON
                        Threads::Threads)
  add_test(NAME ${target} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run-fuzz.sh
                                  $<TARGET_FILE:${target}> ${STELE_FUZZ_SECONDS})
  set_tests_properties(${target} PROPERTIES TIMEOUT 300 LABELS fuzz)
endforeach()

# The serve protocol: its two source files compiled in, the rest of the library linked.
add_executable(fuzz_protocol fuzz/fuzz_protocol.c ${PROJECT_SOURCE_DIR}/engine/protocol.c
                             ${PROJECT_SOURCE_DIR}/engine/protocol_envelope.c)
target_include_directories(fuzz_protocol PRIVATE ${PROJECT_SOURCE_DIR}/engine)
target_compile_definitions(fuzz_protocol PRIVATE STELE_FUZZ_MAIN)
set(fuzz_flags -fsanitize=fuzzer)
if(STELE_SANITIZE STREQUAL "")
  list(APPEND fuzz_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
endif()
target_compile_options(fuzz_protocol PRIVATE ${fuzz_flags})
target_link_options(fuzz_protocol PRIVATE ${fuzz_flags})
target_link_libraries(fuzz_protocol PRIVATE stele stele_warnings PkgConfig::BSON)
add_test(NAME fuzz_protocol COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run-fuzz.sh
                                   $<TARGET_FILE:fuzz_protocol> ${STELE_FUZZ_SECONDS})
set_tests_properties(fuzz_protocol PROPERTIES TIMEOUT 300 LABELS fuzz)

# stele's JSON reader (engine/json_bson.c) against the reference (libbson's reader and the
# rules around it, tests/support/json_reference.c): same bytes or same refusal. The short run
# is in the suite; the long one runs with -DSTELE_FUZZ_SOAK_SECONDS=N and `ctest -L soak`
# (or tests/fuzz/run-fuzz.sh on the binary for any time).
set(STELE_FUZZ_SOAK_SECONDS 0 CACHE STRING "seconds of the long fuzz_json_bson run (0: none)")
set(fuzz_engine_dir ${PROJECT_SOURCE_DIR}/engine)
add_executable(fuzz_json_bson fuzz/fuzz_json_bson.c support/json_reference.c
                              ${fuzz_engine_dir}/json_bson.c ${fuzz_engine_dir}/json_scan.c
                              ${fuzz_engine_dir}/keyset.c ${fuzz_engine_dir}/validate.c)
target_include_directories(fuzz_json_bson PRIVATE ${fuzz_engine_dir}
                           ${CMAKE_CURRENT_SOURCE_DIR}/support)
target_compile_options(fuzz_json_bson PRIVATE ${fuzz_flags})
target_link_options(fuzz_json_bson PRIVATE ${fuzz_flags})
target_link_libraries(fuzz_json_bson PRIVATE stele stele_warnings PkgConfig::BSON)
add_test(NAME fuzz_json_bson COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run-fuzz.sh
                                     $<TARGET_FILE:fuzz_json_bson> ${STELE_FUZZ_SECONDS})
set_tests_properties(fuzz_json_bson PROPERTIES TIMEOUT 300 LABELS fuzz)
if(STELE_FUZZ_SOAK_SECONDS GREATER 0)
  add_test(NAME fuzz_json_bson_soak COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run-fuzz.sh
                                            $<TARGET_FILE:fuzz_json_bson> ${STELE_FUZZ_SOAK_SECONDS})
  math(EXPR soak_timeout "${STELE_FUZZ_SOAK_SECONDS} + 300")
  set_tests_properties(fuzz_json_bson_soak PROPERTIES TIMEOUT ${soak_timeout} LABELS soak)
endif()
