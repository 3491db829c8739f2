#!/usr/bin/env bash
# tests/fuzz/run_fuzzers.sh — runs the four libFuzzer binaries of the fuzz
# tree (ops and misuse, each against the default and the secure build), a
# harness's two binaries side by side (each keeps a core of two), each for a
# given time, and fails if any of them found something.  `make test-fuzz`
# runs it on a temporary copy of the seeds, `make fuzz-long` on a corpus
# kept under build/fuzz/corpus/.
#
#   run_fuzzers.sh --seconds N [--corpus DIR] [--build DIR]
#
# Each binary's corpus is DIR/<binary>/ (copied from tests/fuzz/corpus/<harness>/
# when missing; without --corpus, a temporary folder removed at the end), its
# log DIR/<binary>.log (printed when it fails), and what it finds is written
# under <build>/findings/<binary>/.
#
# Owns: the runs' options and the verdict.  Must never: write into
# tests/fuzz/corpus/ (the seeds), or stop at the first failure (every binary
# runs; the exit status is 1 if any failed).
set -u
cd "$(dirname "$0")/../.."

seconds=""
corpus_root=""
build=build/fuzz
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --corpus) corpus_root=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "usage: $0 --seconds N [--corpus DIR] [--build DIR]" >&2; exit 2 ;;
  esac
done
if [ -z "$seconds" ]; then
  echo "usage: $0 --seconds N [--corpus DIR] [--build DIR]" >&2
  exit 2
fi

temporary=""
if [ -z "$corpus_root" ]; then
  temporary=$(mktemp -d "${TMPDIR:-/tmp}/roost-fuzz.XXXXXX")
  corpus_root=$temporary
  trap 'rm -rf "$temporary"' EXIT
fi
mkdir -p "$corpus_root"

# One binary's run; its report goes to $corpus_root/$name.report, and its
# exit status says whether it passed.
run_one() {
  local name=$1 harness=$2
  local binary=$build/tests/fuzz/$name corpus=$corpus_root/$name
  local findings=$build/findings/$name log=$corpus_root/$name.log
  local report=$corpus_root/$name.report
  if [ ! -x "$binary" ]; then
    echo "FAIL $name: $binary not built (make fuzz)" >"$report"
    return 1
  fi
  if [ ! -d "$corpus" ]; then
    mkdir -p "$corpus"
    cp tests/fuzz/corpus/$harness/* "$corpus"/
  fi
  mkdir -p "$findings"
  local start status took rate runs
  start=$(date +%s)
  "$binary" -max_total_time="$seconds" -rss_limit_mb=4096 -timeout=60 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" >"$log" 2>&1
  status=$?
  took=$(($(date +%s) - start))
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  if [ "$status" -eq 0 ]; then
    {
      echo "ok   $name: ${runs:-?} inputs in ${took} s (${rate:-?} per second)"
      grep -E '^(ops|misuse)_fuzz \(' "$log" | sed 's/^/     /'
    } >"$report"
    return 0
  fi
  {
    echo "FAIL $name: exit status $status after ${took} s; the end of its log:"
    tail -n 60 "$log" | sed 's/^/     /'
    echo "     inputs it found: $findings/ (rerun one: $binary <file>)"
  } >"$report"
  return 1
}

failed=0
for harness in ops misuse; do
  pids=()
  for variant in default secure; do
    run_one "roost_${harness}_fuzz_${variant}" "$harness" &
    pids+=($!)
  done
  for i in 0 1; do
    wait "${pids[$i]}" || failed=1
  done
  for variant in default secure; do
    cat "$corpus_root/roost_${harness}_fuzz_${variant}.report"
  done
done
exit $failed
