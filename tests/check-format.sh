#!/usr/bin/env bash
# tests/check-format.sh: fails when a tracked C file differs from what the repo's
# .clang-format makes of it. Pinned to clang-format 14 (Debian 12's), since other major
# versions format some constructs differently.
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [ -z "$cf" ]; then
    echo "clang-format not installed (tools/setup.sh --test installs it)"; exit 1
fi
major=$("$cf" --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [ "$major" != 14 ]; then
    echo "clang-format $major found; the check is pinned to 14"; exit 77
fi
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' -not -path './build*')
[ -n "$files" ] || { echo "no C files found"; exit 1; }
# shellcheck disable=SC2086
"$cf" --dry-run --Werror $files
echo "format check: $(echo "$files" | wc -w) files formatted"
