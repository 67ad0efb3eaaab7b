#!/usr/bin/env bash
# tests/check-bench-tables.sh STELE_BENCH: fails when the tables of docs/benchmarks.md (between
# its "stele-bench --table" markers) are not exactly what `stele-bench --table` prints for
# docs/bench/results.csv, so the doc cannot drift from the file it quotes.
set -euo pipefail
cd "$(dirname "$0")/.."
bench=$1
doc=docs/benchmarks.md
begin='<!-- stele-bench --table docs/bench/results.csv -->'
end='<!-- end of stele-bench --table -->'
grep -qxF "$begin" "$doc" || { echo "$doc: no line '$begin'"; exit 1; }
grep -qxF "$end" "$doc" || { echo "$doc: no line '$end'"; exit 1; }
quoted=$(awk -v b="$begin" -v e="$end" '$0 == e { on = 0 } on { print } $0 == b { on = 1 }' "$doc")
printed=$("$bench" --table docs/bench/results.csv)
if [ "$quoted" != "$printed" ]; then
    echo "$doc differs from '$bench --table docs/bench/results.csv' (< doc, > printed):"
    diff <(printf '%s\n' "$quoted") <(printf '%s\n' "$printed") || true
    exit 1
fi
echo "docs/benchmarks.md quotes stele-bench --table docs/bench/results.csv exactly"
