#!/usr/bin/env bash
# tools/test_trees.sh — runs test parts one after another, each to its end
# whatever the others did, then prints one summary of them all.
#
#   bash tools/test_trees.sh [--log-dir DIR] PART...
#
# A PART is a Makefile target (test-debug, test-tsan, test-fuzz, ...): it is
# run with $MAKE (make when unset), its output shown as it comes and kept in
# DIR/PART.log (default build/test-logs/).  The summary gives, per part,
# passed or FAILED, its time, ctest's count line and the names of the tests
# that failed.  Exits 1 if any part failed, 0 otherwise.
#
# Owns: the order and the summary of `make test` and `make
# test-under-load`.  Must never: stop at the first failed part (a failure in
# one tree would hide the others), or change what a part runs.
set -uo pipefail
cd "$(dirname "$0")/.."

log_dir=build/test-logs
if [ "${1:-}" = --log-dir ]; then
  log_dir=$2
  shift 2
fi
if [ $# -eq 0 ]; then
  echo "usage: bash tools/test_trees.sh [--log-dir DIR] PART..." >&2
  exit 2
fi
mkdir -p "$log_dir"
make_cmd=${MAKE:-make}

names=()
results=()
failed=0
for part in "$@"; do
  log=$log_dir/$part.log
  start=$(date +%s)
  echo "== $part" >&2
  $make_cmd --no-print-directory "$part" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  seconds=$(($(date +%s) - start))
  time=$(printf '%dm%02ds' $((seconds / 60)) $((seconds % 60)))
  # ctest's count lines ("100% tests passed, 0 tests failed out of 176"),
  # one per ctest run of the part, and the tests it lists as failed.
  counts=$(grep -E '^[0-9]+% tests passed' "$log" | sed -E 's/^[0-9]+% tests passed, //' |
    paste -sd ';' - | sed 's/;/; /g')
  failures=$(sed -n '/^The following tests FAILED:/,/^[^[:space:]]/p' "$log" |
    grep -E '^[[:space:]]+[0-9]+ - ' | sed -E 's/^[[:space:]]+[0-9]+ - ([^ ]+).*/\1/' |
    paste -sd ' ' -)
  if [ "$status" -eq 0 ]; then
    verdict=passed
  else
    verdict=FAILED
    failed=1
  fi
  names+=("$part")
  line=$(printf '%-22s %-7s %8s' "$part" "$verdict" "$time")
  [ -n "$counts" ] && line+="  $counts"
  [ -n "$failures" ] && line+="  failed: $failures"
  [ "$status" -ne 0 ] && [ -z "$counts" ] && line+="  (exit $status before any test ran: see $log)"
  results+=("$line")
done

echo
echo "== summary (logs in $log_dir/)"
for line in "${results[@]}"; do
  echo "$line"
done
if [ "$failed" -ne 0 ]; then
  echo "== some parts FAILED"
  exit 1
fi
echo "== every part passed"
