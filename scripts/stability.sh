#!/usr/bin/env bash
# Stability on a healthy platform: runs the @nightly suite N times in a row against the
# embedded simulator and prints how many runs passed. Exits 1 if any run failed.
#
#   scripts/stability.sh        # 20 runs
#   scripts/stability.sh 3      # what CI runs
#
# Each run's reports stay under target/stability/<n>/ for a look at a failure.
set -uo pipefail
cd "$(dirname "$0")/.."

runs="${1:-20}"
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: scripts/stability.sh [RUNS]   (RUNS a positive integer, default 20)" >&2
    exit 2
fi

cargo build --quiet --bin wsgate || exit 2
out=target/stability
rm -rf "$out"
mkdir -p "$out"

passed=0
for n in $(seq 1 "$runs"); do
    start=$(date +%s)
    ./target/debug/wsgate run --tags @nightly --reports "$out/$n" >"$out/$n.log" 2>&1
    code=$?
    secs=$(( $(date +%s) - start ))
    summary=$(grep -E '^[0-9]+ scenarios: ' "$out/$n.log" | tail -1)
    if [ "$code" -eq 0 ]; then
        passed=$((passed + 1))
        echo "stability: run $n/$runs passed in ${secs} s (${summary})"
    else
        echo "stability: run $n/$runs FAILED with exit $code in ${secs} s (${summary:-no summary}); log: $out/$n.log"
    fi
done

echo "stability: $passed of $runs runs of the @nightly suite passed"
[ "$passed" -eq "$runs" ]
