#!/usr/bin/env bash
# tools/test_under_load.sh — `make test-under-load`: the debug, ThreadSanitizer
# and offload test parts while the machine is kept busy, several times.
#
#   bash tools/test_under_load.sh [--runs N] [--load N] [PART...]
#
# Builds the trees first (unloaded), then starts the load: N CPU hogs
# (default: one per core), stress-ng's when it is installed (as root it is
# installed when missing), else busy shell loops; then runs the parts
# (default: test-debug test-tsan test-offload) --runs times (default 3),
# each run through tools/test_trees.sh with its logs in
# build/test-logs/under-load-RUN/, and stops the load.  Ends with one line per
# run and exits 1 if any run failed.
#
# Owns: the load and the repetition.  Must never: leave a hog running
# after it exits, or run a part differently from `make test`.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=3
load=$(nproc)
parts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift ;;
    --load) load=$2; shift ;;
    *) parts+=("$1") ;;
  esac
  shift
done
[ ${#parts[@]} -gt 0 ] || parts=(test-debug test-tsan test-offload)
make_cmd=${MAKE:-make}

# The trees are built before the load starts: the load is for the tests.
$make_cmd --no-print-directory debug tsan || exit 1

if ! command -v stress-ng >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] &&
  command -v apt-get >/dev/null 2>&1; then
  echo "test-under-load: installing stress-ng" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends stress-ng >/dev/null; } ||
    echo "test-under-load: no stress-ng; busy shell loops instead" >&2
fi

hogs=()
stop_load() {
  for pid in "${hogs[@]}"; do
    kill "$pid" 2>/dev/null
  done
  wait "${hogs[@]}" 2>/dev/null
  hogs=()
}
trap stop_load EXIT
trap 'exit 130' INT TERM
if command -v stress-ng >/dev/null 2>&1; then
  stress-ng --cpu "$load" --quiet &
  hogs+=($!)
  what="stress-ng --cpu $load"
else
  for _ in $(seq "$load"); do
    bash -c 'while :; do :; done' &
    hogs+=($!)
  done
  what="$load busy shell loops"
fi
echo "test-under-load: load: $what; parts: ${parts[*]}; $runs runs" >&2

verdicts=()
failed=0
for run in $(seq "$runs"); do
  echo "== test-under-load: run $run of $runs" >&2
  if bash tools/test_trees.sh --log-dir "build/test-logs/under-load-$run" "${parts[@]}"; then
    verdicts+=("run $run: passed")
  else
    verdicts+=("run $run: FAILED (build/test-logs/under-load-$run/)")
    failed=1
  fi
done
stop_load

echo
echo "== test-under-load ($what)"
for v in "${verdicts[@]}"; do
  echo "$v"
done
exit $failed
