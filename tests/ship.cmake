# tests/ship.cmake: shipping to MongoDB.
# test_ship needs no server. The others need the MongoDB-compatible test server: the
# ship_test_server fixture builds it once (tests/integration/build-test-server.sh, cached
# under ~/.cache/stele or STELE_TEST_SERVER_BIN), or STELE_TEST_MONGO_URI names a server.
add_library(stele_ship_test_support STATIC
  integration/mongo_server.c
  integration/tcp_proxy.c
  integration/ship_fixture.c)
target_include_directories(stele_ship_test_support PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/integration
                           ${PROJECT_SOURCE_DIR}/engine)
target_link_libraries(stele_ship_test_support PUBLIC stele stele_warnings)

add_test(NAME ship_test_server COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/build-test-server.sh)
set_tests_properties(ship_test_server PROPERTIES FIXTURES_SETUP mongo_server TIMEOUT 900)

stele_add_test(test_ship SOURCES test_ship.c LIBS stele)
stele_add_test(test_ship_log SOURCES test_ship_log.c LIBS stele PkgConfig::MONGOC)
stele_add_test(test_ship_dead_letters SOURCES test_ship_dead_letters.c
               LIBS stele_ship_test_support)
stele_add_test(test_ship_mongo SOURCES test_ship_mongo.c LIBS stele_ship_test_support
               TIMEOUT 600)
stele_add_test(test_ship_faults SOURCES test_ship_faults.c LIBS stele_ship_test_support
               TIMEOUT 900)
stele_add_test(test_retention_mongo SOURCES test_retention_mongo.c LIBS stele_ship_test_support
               TIMEOUT 600)
stele_add_test(test_ship_collection SOURCES test_ship_collection.c LIBS stele_ship_test_support
               TIMEOUT 600)
# Twenty journals into one collection through a server restart and shipper kills (about a
# minute here).
stele_add_test(test_ship_fan_in SOURCES test_ship_fan_in.c LIBS stele_ship_test_support
               TIMEOUT 900)
set_tests_properties(test_ship_mongo test_ship_faults test_retention_mongo test_ship_collection
                     test_ship_fan_in PROPERTIES FIXTURES_REQUIRED mongo_server LABELS mongo)

# The full 100,000-record exactly-once run (about 110 s on FerretDB-SQLite here, so in the
# default suite).
add_test(NAME test_ship_100k COMMAND test_ship_mongo)
set_tests_properties(test_ship_100k PROPERTIES
  ENVIRONMENT "STELE_TEST_SHIP_RECORDS=100000;STELE_TEST_FILTER=*exactly_once*"
  FIXTURES_REQUIRED mongo_server LABELS mongo TIMEOUT 900)

if(STELE_SANITIZE STREQUAL "thread")
  set_tests_properties(test_ship_mongo test_ship_faults PROPERTIES ENVIRONMENT
    "TSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/tsan-mongoc.supp")
endif()

# `stele ship`'s dead-letter flags end to end (runs the built binary, like tests/cli.cmake).
stele_add_test(test_cli_dead_letters SOURCES cli/test_cli_dead_letters.c cli/cli_harness.c
               integration/mongo_server.c LIBS stele PkgConfig::MONGOC TIMEOUT 600)
target_include_directories(test_cli_dead_letters PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/integration
                           ${CMAKE_CURRENT_SOURCE_DIR}/cli)
target_compile_definitions(test_cli_dead_letters PRIVATE STELE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_dependencies(test_cli_dead_letters stele_cli)
set_tests_properties(test_cli_dead_letters PROPERTIES ENVIRONMENT
  "STELE_BIN=$<TARGET_FILE:stele_cli>" FIXTURES_REQUIRED mongo_server LABELS "mongo;cli")
