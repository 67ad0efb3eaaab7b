# cmake/install_configure_file.cmake: the install-time half of stele_install_configured
# (install_configured.cmake). Runs inside `cmake --install`, where CMAKE_INSTALL_PREFIX is
# the prefix of this install (--prefix, or the configured one).
set(STELE_PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(kind BINDIR LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${STELE_${kind}}")
    set(STELE_FULL_${kind} "${STELE_${kind}}")
    set(STELE_PC_${kind} "${STELE_${kind}}")
  else()
    set(STELE_FULL_${kind} "${STELE_PREFIX}/${STELE_${kind}}")
    set(STELE_PC_${kind} "\${prefix}/${STELE_${kind}}")
  endif()
endforeach()
configure_file("${STELE_TEMPLATE}" "${STELE_OUTPUT}" @ONLY)
