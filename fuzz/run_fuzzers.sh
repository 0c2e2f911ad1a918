#!/usr/bin/env bash
# Runs every fuzz target of a RAMPART_FUZZ build for a while, a few at a time, and fails when any
# finds a crash, leak, timeout or out-of-memory (see docs/fuzzing.md).
#
#   fuzz/run_fuzzers.sh --build-dir build-fuzz [--seconds 60] [--jobs 2] [--only NAME]...
#
# Each target starts from its seeds and dictionary (<build-dir>/seeds/NAME and NAME.dict, made by
# make_seeds.py) and the reproducers of past findings (fuzz/regressions/NAME, all replayed before
# fuzzing starts), and keeps what it learns in <build-dir>/corpus/NAME for the next run. A finding is written to
# <build-dir>/artifacts/NAME/; the log of each run is <build-dir>/logs/NAME.log.
set -euo pipefail

source_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir=""
seconds=60
jobs="$(nproc)"
timeout_s=10    # one input running longer than this is a finding
rss_limit_mb=2048
only=()

while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --only) only+=("$2"); shift 2 ;;
    *) echo "usage: $0 --build-dir DIR [--seconds N] [--jobs N] [--only NAME]..." >&2; exit 2 ;;
  esac
done
[ -n "$build_dir" ] || { echo "$0: --build-dir is required" >&2; exit 2; }
build_dir="$(cd "$build_dir" && pwd)"

targets=()
if [ ${#only[@]} -gt 0 ]; then
  targets=("${only[@]}")
else
  for binary in "$build_dir"/fuzz/*_fuzzer; do targets+=("$(basename "$binary")"); done
fi
[ ${#targets[@]} -gt 0 ] || { echo "$0: no fuzz targets in $build_dir/fuzz" >&2; exit 2; }
mkdir -p "$build_dir/logs"

run_one() {
  local name="$1"
  local corpus="$build_dir/corpus/$name" artifacts="$build_dir/artifacts/$name/"
  mkdir -p "$corpus" "$artifacts"
  local args=(-max_total_time="$seconds" -timeout="$timeout_s" -rss_limit_mb="$rss_limit_mb"
              -print_final_stats=1 -artifact_prefix="$artifacts")
  [ -f "$build_dir/seeds/$name.dict" ] && args+=(-dict="$build_dir/seeds/$name.dict")
  local inputs=("$corpus")
  for extra in "$build_dir/seeds/$name" "$source_dir/fuzz/regressions/$name"; do
    [ -d "$extra" ] && inputs+=("$extra")
  done
  "$build_dir/fuzz/$name" "${args[@]}" "${inputs[@]}" >"$build_dir/logs/$name.log" 2>&1
}

echo "fuzz: ${#targets[@]} targets, ${seconds}s each, $jobs at a time"
declare -A pids=()
declare -A status=()
for name in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_one "$name" &
  pids[$name]=$!
done
for name in "${targets[@]}"; do
  if wait "${pids[$name]}"; then status[$name]=0; else status[$name]=$?; fi
done

failed=0
for name in "${targets[@]}"; do
  log="$build_dir/logs/$name.log"
  executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  coverage="$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)"
  if [ "${status[$name]}" -eq 0 ]; then
    printf 'fuzz: %-24s ok    %12s runs  %8s/s  %s\n' "$name" "${executions:-?}" "${rate:-?}" \
      "${coverage:-}"
    continue
  fi
  failed=1
  printf 'fuzz: %-24s FAILED (exit %s); log %s\n' "$name" "${status[$name]}" "$log"
  { grep -E '^(==[0-9]+==|SUMMARY|fuzz check failed|.*runtime error|.*assertion)' "$log" || true; } |
    head -5 | sed 's/^/    /'
  { grep -o "Test unit written to .*" "$log" || true; } |
    sed 's/^Test unit written to /    reproducer: /'
done
if [ "$failed" -ne 0 ]; then
  echo "fuzz: a target failed. Replay a reproducer with: $build_dir/fuzz/NAME REPRODUCER"
  exit 1
fi
