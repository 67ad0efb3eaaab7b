# tests/trust.cmake: the trust primitives of journal/ (Merkle tree, signed notes and
# checkpoints, key files), and their interoperability with Go's sumdb packages.
stele_add_test(test_merkle SOURCES test_merkle.c LABELS "journal;trust")
stele_add_test(test_base64 SOURCES test_base64.c LABELS "journal;trust")
stele_add_test(test_note SOURCES test_note.c LABELS "journal;trust")
stele_add_test(test_checkpoint SOURCES test_checkpoint.c LABELS "journal;trust")
stele_add_test(test_sigkey SOURCES test_sigkey.c LABELS "journal;trust")

# Go's sumdb/note and sumdb/tlog check what the C side writes, and the other way round. The
# test builds the Go checker through tests/interop/build-trust-interop.sh (cached; the first
# build fetches golang.org/x/mod from the Go module proxy) and skips (77) only without Go.
stele_add_test(test_trust_interop SOURCES test_trust_interop.c LABELS "trust;interop"
               TIMEOUT 900)
target_compile_definitions(test_trust_interop PRIVATE
  STELE_TRUST_INTEROP_BUILD="${CMAKE_CURRENT_SOURCE_DIR}/interop/build-trust-interop.sh")
set_tests_properties(test_trust_interop PROPERTIES SKIP_RETURN_CODE 77)

# FORMAT.md section 10's worked example, decoded from the document itself.
stele_add_test(test_trust_format SOURCES test_trust_format.c LABELS "journal;trust")
target_compile_definitions(test_trust_format PRIVATE
  STELE_FORMAT_MD="${PROJECT_SOURCE_DIR}/journal/FORMAT.md")

# A forger with root (tests/forger/forge.py, written from journal/FORMAT.md alone: python3 and
# its cryptography package, skipped without them) rewrites a signed journal in each way an
# attacker would; `stele verify --trust` must fail naming the right seq, and pass after
# legitimate retention (the test server), a clean restart and with an unsealed tail.
stele_add_test(test_trust_forger SOURCES test_trust_forger.c cli/cli_harness.c
               LIBS stele_ship_test_support TIMEOUT 600 LABELS "trust;cli")
target_include_directories(test_trust_forger PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/cli)
target_compile_definitions(test_trust_forger PRIVATE
  STELE_FORGER="${CMAKE_CURRENT_SOURCE_DIR}/forger/forge.py")
add_dependencies(test_trust_forger stele_cli)
set_tests_properties(test_trust_forger PROPERTIES SKIP_RETURN_CODE 77
  ENVIRONMENT "STELE_BIN=$<TARGET_FILE:stele_cli>" FIXTURES_REQUIRED mongo_server)
