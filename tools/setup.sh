#!/usr/bin/env bash
# tools/setup.sh: installs stele's dependencies on Debian 12 and builds it.
#   tools/setup.sh           runtime + build dependencies, RelWithDebInfo build in build/
#   tools/setup.sh --test    also test dependencies (cmocka, clang for fuzzing, the
#                            MongoDB-compatible test server, the Go checker of the trust
#                            formats), build with tests
#   tools/setup.sh --peers   also the benchmark's peers (SQLite, PostgreSQL, Redis,
#                            RocksDB, and the JSON parsers simdjson, yajl, jansson), so
#                            `stele-bench --sweep` and the `-json` cells can run them
# Idempotent: installs only what is missing. Needs root (or sudo) for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."

with_tests=0
with_peers=0
for arg in "$@"; do
    case "$arg" in
    --test) with_tests=1 ;;
    --peers) with_peers=1 ;;
    *) echo "usage: tools/setup.sh [--test] [--peers]" >&2; exit 1 ;;
    esac
done

# Every dependency, by Debian package name (named in the README too).
build_pkgs="build-essential cmake pkg-config libbson-dev libmongoc-dev liblmdb-dev libssl-dev libinih-dev"
bench_pkgs="libfuse3-dev fuse3 gnuplot-nox"
peer_pkgs="libsqlite3-dev libpq-dev postgresql libhiredis-dev redis-server librocksdb-dev \
    libsimdjson-dev libyajl-dev libjansson-dev"
test_pkgs="libcmocka-dev clang clang-format golang-go ca-certificates git jq socat python3 python3-cryptography"

pkgs="$build_pkgs $bench_pkgs"
[ "$with_tests" = 1 ] && pkgs="$pkgs $test_pkgs"
[ "$with_peers" = 1 ] && pkgs="$pkgs $peer_pkgs"

missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# A machine that already has a Go toolchain does not need Debian's.
if command -v go >/dev/null 2>&1; then missing=$(echo "$missing" | sed 's/ golang-go//'); fi
if [ -n "${missing// /}" ]; then
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing
fi

tests_flag=OFF
fuzz_dir=""
if [ "$with_tests" = 1 ]; then
    tests_flag=ON
    # The libFuzzer targets need clang: they live in a second build tree, and the main
    # test suite runs them briefly through its fuzz_targets test.
    command -v clang >/dev/null 2>&1 && fuzz_dir="$PWD/build-fuzz"
fi
cmake -S . -B build -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTELE_WERROR=ON \
    -DSTELE_BUILD_TESTS="$tests_flag" -DSTELE_FUZZ_BUILD_DIR="$fuzz_dir" >/dev/null
cmake --build build -j "$(nproc)"

if [ -n "$fuzz_dir" ]; then
    cmake -S . -B "$fuzz_dir" -G "Unix Makefiles" -DCMAKE_C_COMPILER=clang \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTELE_WERROR=ON -DSTELE_BUILD_FUZZ=ON \
        -DSTELE_BUILD_BENCH=OFF -DSTELE_FUZZ_SECONDS=15 >/dev/null
    cmake --build "$fuzz_dir" -j "$(nproc)" --target fuzz_frame_decode fuzz_segment_read \
        fuzz_tail_recovery fuzz_protocol fuzz_json_bson
fi

if [ "$with_tests" = 1 ] && [ -x tests/integration/build-test-server.sh ]; then
    tests/integration/build-test-server.sh
fi
# The Go checker of the trust formats (tests/test_trust_interop), built once and cached.
if [ "$with_tests" = 1 ] && [ -x tests/interop/build-trust-interop.sh ]; then
    tests/interop/build-trust-interop.sh
fi
