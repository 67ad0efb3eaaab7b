#!/bin/sh
# run-fuzz.sh TARGET SECONDS: runs a libFuzzer target briefly (ctest) on a fresh corpus that
# the target seeds itself (STELE_FUZZ_MAKE_SEEDS), so no binary corpus is committed.
set -eu
bin=$1
secs=$2
corpus=$(mktemp -d -t stele-corpus-XXXXXX)
trap 'rm -rf "$corpus"' EXIT
STELE_FUZZ_MAKE_SEEDS="$corpus" "$bin" -max_total_time="$secs" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 "$corpus"
