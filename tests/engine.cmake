# tests/engine.cmake: the write path: errors, validation, knobs, group commit, the public API.
stele_add_test(test_error SOURCES test_error.c LIBS stele TIMEOUT 60)
stele_add_test(test_validate SOURCES test_validate.c LIBS stele TIMEOUT 60)
stele_add_test(test_config SOURCES test_config.c LIBS stele TIMEOUT 60)
stele_add_test(test_engine SOURCES test_engine.c engine_fixture.c LIBS stele TIMEOUT 120)
stele_add_test(test_stress SOURCES test_stress.c engine_fixture.c LIBS stele TIMEOUT 240)
