#!/usr/bin/env bash
# tests/interop/build-trust-interop.sh: builds the Go checker of stele's trust formats
# (tests/interop/trust: golang.org/x/mod's sumdb/note and sumdb/tlog, fetched through the Go
# module proxy), once per version of its sources. Prints the binary's path on stdout.
#
#   STELE_TRUST_INTEROP_DIR   where to keep the binary
#                             (default: ${XDG_CACHE_HOME:-~/.cache}/stele)
#
# Exits 77 when Go is not installed (the tests skip), 1 when the build fails.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/trust"
cache="${STELE_TRUST_INTEROP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/stele}"

# The binary's name carries a digest of its sources: an edited checker is rebuilt, and
# checkouts with different versions of it (worktrees, CI) do not replace each other's.
stamp=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)
out="$cache/trust-interop-$stamp"
if [ -x "$out" ]; then
    echo "$out"
    exit 0
fi
command -v go >/dev/null 2>&1 || {
    echo "build-trust-interop: go not found; install Go (tools/setup.sh --test)" >&2
    exit 77
}
# golang.org/x/mod v0.17.0 needs Go 1.18 (Debian 12 has 1.19); nothing newer is fetched.
gover=$(go env GOVERSION | sed 's/^go//')
major=${gover%%.*}; rest=${gover#*.}; minor=${rest%%.*}
if [ "$major" -eq 1 ] && [ "$minor" -lt 18 ]; then
    echo "build-trust-interop: Go $gover is older than 1.18" >&2
    exit 1
fi
export GOFLAGS=-mod=mod GOTOOLCHAIN=local

mkdir -p "$cache"
tmp="$out.tmp.$$"
( cd "$src" && CGO_ENABLED=0 go build -buildvcs=false -trimpath -o "$tmp" . )
mv -f "$tmp" "$out"
echo "$out"
