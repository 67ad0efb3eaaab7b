# cmake/install_configured.cmake: stele_install_configured(TEMPLATE DESTINATION), for files
# that name install paths (stele.pc, the systemd unit). They are written while installing,
# not while configuring, so `cmake --install build --prefix P` puts P in them, whatever
# prefix the build was configured with. The template sees, with @ONLY substitution:
#   @STELE_PREFIX@                       the install prefix (without DESTDIR)
#   @STELE_FULL_BINDIR@, _LIBDIR@, _INCLUDEDIR@   absolute install directories
#   @STELE_PC_LIBDIR@, @STELE_PC_INCLUDEDIR@      the same written as ${prefix}/... when
#                                        GNUInstallDirs gave a relative directory (pkg-config
#                                        style, so --define-variable=prefix=... works)
#   @PROJECT_VERSION@
# The written file lands in DESTINATION (relative to the prefix, or absolute) under the
# template's name without ".in", and is recorded in install_manifest.txt like any other.

function(stele_install_configured template destination)
  get_filename_component(name "${template}" NAME)
  string(REGEX REPLACE "[.]in$" "" name "${name}")
  set(output "${CMAKE_CURRENT_BINARY_DIR}/install-time/${name}")
  install(CODE "
    set(STELE_TEMPLATE \"${template}\")
    set(STELE_OUTPUT \"${output}\")
    set(STELE_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
    set(STELE_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
    set(STELE_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
    set(PROJECT_VERSION \"${PROJECT_VERSION}\")
    include(\"${PROJECT_SOURCE_DIR}/cmake/install_configure_file.cmake\")
  ")
  install(FILES "${output}" DESTINATION "${destination}")
endfunction()
