#!/bin/sh
# tests/check-includes-selftest.sh: check-includes.sh must fail on each kind of violation.
# Copies the source directories to a temporary tree, plants one violation at a time, and
# expects check-includes.sh to pass on the clean copy and to fail on every planted one.
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
check="$src/tests/check-includes.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fresh_copy() {
    rm -rf "$work/tree"
    mkdir "$work/tree"
    for d in cli bench engine journal include examples; do
        [ -d "$src/$d" ] && cp -R "$src/$d" "$work/tree/$d"
    done
}

# plant FILE LINE WHAT: appends LINE to FILE in a fresh copy; the check must fail.
plant() {
    fresh_copy
    printf '%s\n' "$2" >>"$work/tree/$1"
    if sh "$check" "$work/tree" >/dev/null 2>&1; then
        echo "check-includes-selftest: not caught: $3 ($1: $2)" >&2
        failures=$((failures + 1))
    fi
}

fresh_copy
if ! sh "$check" "$work/tree" >/dev/null 2>&1; then
    echo "check-includes-selftest: the unchanged tree fails the check" >&2
    exit 1
fi

plant cli/cmd_tail.c '#include <bson/bson.h>' "libbson in cli/"
plant cli/cmd_tail.c '#include <mongoc/mongoc.h>' "libmongoc in cli/"
plant cli/cmd_status.c '#include "../engine/render.h"' "an engine header from cli/"
plant cli/cmd_status.c '#include "render.h"' "a header that is not in cli/"
plant cli/cmd_status.c '#include <lmdb.h>' "LMDB in cli/"
plant bench/bench_run.c '#include <bson/bson.h>' "libbson in a bench file not allowed it"
plant bench/bench_run.c '#include <sqlite3.h>' "a peer library outside its peer's file"
plant engine/stele.c '#include <lmdb.h>' "LMDB outside engine/index*.c"
plant engine/commit.c '#include <mongoc/mongoc.h>' "libmongoc outside the shipping files"
plant journal/segment.c '#include <bson/bson.h>' "libbson in journal/"
plant journal/segment.c '#include "../engine/commit.h"' "an engine header in journal/"
plant examples/append.c '#include <lmdb.h>' "LMDB in an example"
plant cli/CMakeLists.txt 'target_link_libraries(stele_cli PRIVATE PkgConfig::BSON)' \
    "cli linking libbson"

if [ "$failures" -ne 0 ]; then
    echo "check-includes-selftest: $failures planted violation(s) not caught" >&2
    exit 1
fi
echo "check-includes-selftest: every planted violation was caught"
