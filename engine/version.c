/*
 * version.c: stele_version() and stele_version_number(), the version of the library a
 * program runs with. The numbers come from the build (the project's VERSION in
 * CMakeLists.txt); the static assertions below refuse to build a library whose stele.h
 * says another version, so the header's macros and the library's answers cannot drift.
 * Stateless.
 */
#include <stele.h>

#if !defined(STELE_PROJECT_VERSION) || !defined(STELE_PROJECT_VERSION_MAJOR) ||                    \
    !defined(STELE_PROJECT_VERSION_MINOR) || !defined(STELE_PROJECT_VERSION_PATCH)
#error "the build defines STELE_PROJECT_VERSION* (engine/CMakeLists.txt)"
#endif

_Static_assert(STELE_PROJECT_VERSION_MAJOR == STELE_VERSION_MAJOR &&
                   STELE_PROJECT_VERSION_MINOR == STELE_VERSION_MINOR &&
                   STELE_PROJECT_VERSION_PATCH == STELE_VERSION_PATCH,
               "stele.h's STELE_VERSION_* differ from the project version in CMakeLists.txt");
_Static_assert(sizeof STELE_PROJECT_VERSION == sizeof STELE_VERSION_STRING,
               "stele.h's STELE_VERSION_STRING differs from the project version");

const char *
stele_version(void)
{
    return STELE_PROJECT_VERSION;
}

int
stele_version_number(void)
{
    return STELE_PROJECT_VERSION_MAJOR * 1000000 + STELE_PROJECT_VERSION_MINOR * 1000 +
           STELE_PROJECT_VERSION_PATCH;
}
