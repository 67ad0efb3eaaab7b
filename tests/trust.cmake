# tests/trust.cmake: the trust primitives of journal/ (Merkle tree, signed notes and
# checkpoints, key files), and their interoperability with Go's sumdb packages.
stele_add_test(test_merkle SOURCES test_merkle.c LABELS "journal;trust")
stele_add_test(test_base64 SOURCES test_base64.c LABELS "journal;trust")
stele_add_test(test_note SOURCES test_note.c LABELS "journal;trust")
stele_add_test(test_checkpoint SOURCES test_checkpoint.c LABELS "journal;trust")
stele_add_test(test_sigkey SOURCES test_sigkey.c LABELS "journal;trust")
