#!/bin/sh
# tests/check-includes.sh [ROOT]: the layering rules of the tree, checked on every #include
# (registered with CTest as check_includes), so they stay true:
#   1. cli/ and bench/ include only libc and system headers, <stele.h>, and headers of their
#      own directory ("x.h" next to the file). If a command needs more, the public API is
#      missing something: add it to include/stele.h. bench/ may also include the client
#      libraries of the peers it measures, each allowed below for the files that need it.
#   2. journal/ includes only libc and system headers, OpenSSL, the SSE4.2 intrinsics,
#      stele.h (the error codes) and its own headers: it knows nothing of LMDB or MongoDB.
#   3. lmdb.h is included only by engine/index*.c|h (the index owns every LMDB call).
#   4. libmongoc is included only by engine/ship*.c|h and engine/remote_reader.c|h.
#   5. cli/CMakeLists.txt links the stele library only (no libbson, libmongoc, LMDB).
# Rules 3 and 4 cover the production code (engine/, journal/, cli/, bench/, include/,
# examples/); tests/ may look at the index's LMDB and at a MongoDB server directly, to
# check what the library wrote. Prints each violation with its file and line; exit 1 if any.
set -eu

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# The checks run in pipelines (subshells): violations go to a file.
violations_log=$(mktemp)
trap 'rm -f "$violations_log"' EXIT

violation() {
    echo "check-includes: $*" >&2
    echo x >>"$violations_log"
}

# Headers of libc, POSIX and Linux, by name or directory.
is_system_header() {
    case "$1" in
    assert.h | complex.h | ctype.h | errno.h | fenv.h | float.h | inttypes.h | iso646.h | \
        limits.h | locale.h | math.h | setjmp.h | signal.h | stdalign.h | stdarg.h | \
        stdatomic.h | stdbool.h | stddef.h | stdint.h | stdio.h | stdlib.h | stdnoreturn.h | \
        string.h | tgmath.h | threads.h | time.h | uchar.h | wchar.h | wctype.h)
        return 0 ;;
    aio.h | cpio.h | dirent.h | dlfcn.h | fcntl.h | fnmatch.h | ftw.h | glob.h | grp.h | \
        iconv.h | langinfo.h | libgen.h | monetary.h | mqueue.h | netdb.h | nl_types.h | \
        poll.h | pthread.h | pwd.h | regex.h | sched.h | search.h | semaphore.h | spawn.h | \
        strings.h | syslog.h | tar.h | termios.h | unistd.h | utime.h | utmpx.h | wordexp.h)
        return 0 ;;
    getopt.h | endian.h | byteswap.h | err.h | execinfo.h | features.h | ifaddrs.h | \
        malloc.h | paths.h | sysexits.h | alloca.h)
        return 0 ;;
    sys/* | linux/* | arpa/* | netinet/* | net/*)
        return 0 ;;
    cstdint | cstring | new | vector) # C++'s, in bench's one C++ file
        return 0 ;;
    esac
    return 1
}

# Peer client libraries bench/ may include: "FILE HEADER", one per line, each with why.
#   sqlite3.h, libpq-fe.h, hiredis, rocksdb: the peer databases stele-bench measures.
#   lmdb.h: LMDB itself is a peer of the embedded comparison (bench_peer_embedded.c).
#   mongoc: MongoDB is a peer, written to directly (bench_peer_mongo.c).
#   fuse.h: the emulated 7200 rpm disk is a FUSE file system (stele_hddfs.c).
#   bson: --input bson builds BSON from the JSON events as an application holding BSON would
#     (bench_event.c); the libbson-json cell measures libbson's own JSON parser
#     (bench_parse.c); the result lines judge a UTF-8 sequence as libbson does
#     (bench_output.c). The public API writes stele's records, not the bench's results.
#   simdjson.h, yajl, jansson.h: the JSON parsers measured beside libbson's, each writing
#     libbson's BSON for the event (bench_json.h, bench_parse_*.c|cpp).
bench_allowed="
bench/bench_json.h bson/bson.h
bench/bench_parse_yajl.c yajl/yajl_parse.h
bench/bench_parse_jansson.c jansson.h
bench/bench_parse_simdjson.cpp simdjson.h
bench/bench_peer_embedded.c sqlite3.h
bench/bench_peer_embedded.c lmdb.h
bench/bench_peer_pg.c libpq-fe.h
bench/bench_peer_redis.c hiredis/hiredis.h
bench/bench_peer_rocksdb.c rocksdb/c.h
bench/bench_peer_mongo.c mongoc/mongoc.h
bench/stele_hddfs.c fuse.h
bench/bench_event.c bson/bson.h
bench/bench_parse.c bson/bson.h
bench/bench_output.c bson/bson.h
"

is_listed() { # LIST FILE HEADER
    printf '%s\n' "$1" | grep -qxF "$2 $3"
}

# "LINE<TAB>DELIM<TAB>NAME" for each #include of FILE (DELIM is < or ").
includes_of() {
    awk '/^[ \t]*#[ \t]*include[ \t]*[<"]/ {
        s = $0
        sub(/^[ \t]*#[ \t]*include[ \t]*/, "", s)
        delim = substr(s, 1, 1)
        s = substr(s, 2)
        sub(/[>"].*$/, "", s)
        printf "%d\t%s\t%s\n", NR, delim, s
    }' "$1"
}

sources_in() {
    for d in "$@"; do
        [ -d "$d" ] && find "$d" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) | sort
    done
}

# Rule 1 (KIND cli or bench) and rule 2 (KIND journal).
check_own_dir_only() { # FILE KIND
    file=$1
    dir=$(dirname "$file")
    includes_of "$file" | while IFS="$(printf '\t')" read -r line delim name; do
        if [ "$name" = stele.h ]; then
            continue
        elif [ "$delim" = '"' ]; then
            case "$name" in
            */*) violation "$file:$line: includes \"$name\", which is not a header of $dir/" ;;
            *) [ -f "$dir/$name" ] ||
                violation "$file:$line: includes \"$name\", which is not a header of $dir/" ;;
            esac
        elif is_system_header "$name"; then
            continue
        elif [ "$2" = bench ] && is_listed "$bench_allowed" "$file" "$name"; then
            continue
        elif [ "$2" = journal ] && { [ "${name%%/*}" = openssl ] || [ "$name" = nmmintrin.h ]; }; then
            continue
        else
            violation "$file:$line: includes <$name>; $dir/ may include only libc and system" \
                "headers, <stele.h> and its own headers"
        fi
    done
}

for f in $(sources_in cli); do check_own_dir_only "$f" cli; done
for f in $(sources_in bench); do check_own_dir_only "$f" bench; done
for f in $(sources_in journal); do check_own_dir_only "$f" journal; done

# Rules 3 and 4.
for f in $(sources_in engine journal cli bench include examples); do
    includes_of "$f" | while IFS="$(printf '\t')" read -r line delim name; do
        case "$name" in
        lmdb.h)
            case "$f" in
            engine/index*.c | engine/index*.h) ;;
            *) is_listed "$bench_allowed" "$f" "$name" ||
                violation "$f:$line: includes lmdb.h; only engine/index*.c may call LMDB" ;;
            esac ;;
        mongoc.h | mongoc/*)
            case "$f" in
            engine/ship*.c | engine/ship*.h | engine/remote_reader.c | engine/remote_reader.h) ;;
            *) is_listed "$bench_allowed" "$f" "$name" ||
                violation "$f:$line: includes <$name>; only engine/ship*.c and" \
                    "engine/remote_reader.c may call libmongoc" ;;
            esac ;;
        esac
    done
done

# Rule 5.
if [ -f cli/CMakeLists.txt ] && grep -n 'PkgConfig::\(BSON\|MONGOC\|LMDB\)' cli/CMakeLists.txt >&2; then
    violation "cli/CMakeLists.txt links a library other than stele (lines above)"
fi

n=$(wc -l <"$violations_log")
if [ "$n" -ne 0 ]; then
    echo "check-includes: $n violation(s) of the include rules (see the top of tests/check-includes.sh)" >&2
    exit 1
fi
echo "check-includes: include rules hold"
