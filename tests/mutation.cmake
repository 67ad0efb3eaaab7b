# tests/mutation.cmake: the mutation check (tests/mutation/run.sh, the list in
# tests/mutation/mutations.txt): each mutation breaks a promise of docs/guarantees.md on
# purpose, and the test guarantees.md cites for it must fail. Slow (a build of a copy of the
# tree, then a rebuild and one test run per mutation), so never part of the default run:
#   cmake --build build --target mutation_check
# or, configured with -DSTELE_TEST_MUTATION=ON, a ctest entry labelled "mutation".
# The default run only checks that every snippet of the list is still in the tree once.
add_custom_target(mutation_check COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mutation/run.sh
                  USES_TERMINAL)
add_test(NAME mutation_list COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mutation/run.sh --check)
set_tests_properties(mutation_list PROPERTIES TIMEOUT 60)
option(STELE_TEST_MUTATION "register the mutation check with ctest (label mutation)" OFF)
if(STELE_TEST_MUTATION)
  add_test(NAME mutation_check COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mutation/run.sh)
  set_tests_properties(mutation_check PROPERTIES LABELS "mutation" TIMEOUT 21600)
endif()
