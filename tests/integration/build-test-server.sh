#!/usr/bin/env bash
# tests/integration/build-test-server.sh: builds stele's MongoDB-compatible test server
# (FerretDB v1.24.2 with SQLite, embedded by ferretdb-server/main.go) from the Go module
# proxy, once. Prints the binary's path on stdout.
#
#   STELE_TEST_SERVER_BIN   where to put the binary
#                           (default: ${XDG_CACHE_HOME:-~/.cache}/stele/ferretdb-server)
#   --force                 rebuild even if the binary exists
#
# The tests look for the binary in STELE_TEST_SERVER_BIN, then at the default path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${STELE_TEST_SERVER_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/stele/ferretdb-server}"

if [ -x "$out" ] && [ "${1:-}" != "--force" ]; then
    echo "$out"
    exit 0
fi
command -v go >/dev/null 2>&1 || { echo "build-test-server: go not found; install Go (tools/setup.sh --test)" >&2; exit 1; }

# FerretDB v1.24.2 needs Go >= 1.24. An older local Go fetches a newer toolchain from the
# Go module proxy (GOTOOLCHAIN=auto), and only then.
export GOFLAGS=-mod=mod
gover=$(go env GOVERSION | sed 's/^go//')
major=${gover%%.*}; rest=${gover#*.}; minor=${rest%%.*}
go_bin=go
if [ "$major" -eq 1 ] && [ "$minor" -lt 21 ]; then
    # Too old to switch toolchains itself (Debian 12's golang-go is 1.19): fetch the
    # toolchain module from the Go module proxy and run it directly. Module zips keep no
    # file modes, so the executables get theirs back here.
    tc_mod="golang.org/toolchain@v0.0.1-go1.24.3.linux-$(go env GOARCH)"
    tc_dir=$(GOFLAGS=-modcacherw go mod download -json "$tc_mod" |
             sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    chmod +x "$tc_dir"/bin/* "$tc_dir"/pkg/tool/*/*
    go_bin="$tc_dir/bin/go"
    export GOTOOLCHAIN=local
elif [ "$major" -eq 1 ] && [ "$minor" -lt 24 ]; then
    export GOTOOLCHAIN=auto
fi

mkdir -p "$(dirname "$out")"
tmp="$out.tmp.$$"
( cd "$here/ferretdb-server" && CGO_ENABLED=0 "$go_bin" build -trimpath -o "$tmp" . )
mv -f "$tmp" "$out"
echo "$out"
