# tests/trust.cmake: the trust primitives of journal/ (Merkle tree, signed notes and
# checkpoints, key files), and their interoperability with Go's sumdb packages.
stele_add_test(test_merkle SOURCES test_merkle.c LABELS "journal;trust")
