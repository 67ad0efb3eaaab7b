# cmake/exports.cmake: writes the linker version script of libstele.so, which exports the
# functions stele.h declares and hides everything else (the journal and engine internals,
# the statically linked helpers). Run as `cmake -DHEADER=stele.h -DOUTPUT=stele.map -P`.
#
# A declaration is a line of the header that starts in column 0 with its return type and
# names the function on that line (`int stele_open(...`, `const char *stele_strerror(...`):
# the header's layout, which clang-format keeps. Comment lines start with a space or '/'
# and macro lines with '#', so neither is read. tests/test_pkgconfig.c checks the library
# built with this list exports exactly the header's functions.
if(NOT HEADER OR NOT OUTPUT)
  message(FATAL_ERROR "usage: cmake -DHEADER=stele.h -DOUTPUT=stele.map -P exports.cmake")
endif()
file(STRINGS "${HEADER}" declarations REGEX "^[A-Za-z_][^(]*[ *]stele_[a-z0-9_]+[(]")
set(names "")
foreach(line IN LISTS declarations)
  string(REGEX MATCH "stele_[a-z0-9_]+[(]" name "${line}")
  string(REGEX REPLACE "[(]$" "" name "${name}")
  list(APPEND names "${name}")
endforeach()
list(REMOVE_DUPLICATES names)
list(SORT names)
list(LENGTH names n)
if(n EQUAL 0)
  message(FATAL_ERROR "no function declarations found in ${HEADER}")
endif()
set(text "/* Generated from stele.h by cmake/exports.cmake: the functions libstele.so exports. */\n{\n  global:\n")
foreach(name IN LISTS names)
  string(APPEND text "    ${name};\n")
endforeach()
string(APPEND text "  local:\n    *;\n};\n")
file(WRITE "${OUTPUT}" "${text}")
