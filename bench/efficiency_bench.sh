#!/usr/bin/env bash
# Serving efficiency: what the server spends beyond the model. The batching example
# `mlp_classifier` is served at 64 connections, one row per request, and the server's CPU time
# (every thread, from /proc) is set against the requests it answered: samples per server
# core-second. The baseline is the same model run offline through Rampart's backend at batch 32
# with the same intra-op budget, in the same run: samples per core-second of its CPU time. Their
# ratio is the share of the server's CPU that goes to the model; the rest is HTTP, decoding,
# batching and answering. CPU time, unlike throughput, is not spoiled by a busy machine's stalls.
#
# Two request bodies (KServe v2 JSON, and the binary tensor extension in both directions) under
# two layouts:
#   default  `rampart serve` with no flags but the ports;
#   tuned    --threads-per-instance 1, the instance thread on the last CPU and the HTTP I/O
#            threads on the others (--instance-cpus/--http-cpus), wrk beside the I/O threads and
#            the offline baseline on the instance's CPU. Needs 2 CPUs or more.
# wrk's own CPU is reported beside the server's. It reports; it does not assert.
#
# Usage: bench/efficiency_bench.sh --binary build/rampart --offline build/bench/torch_offline
#                                  --repository examples/models [--duration 10] [--rounds 3]
#                                  [--warmup 2] [--layouts "default tuned"] [--out FILE]
#                                  [--keep-workdir]
# See docs/benchmarks.md.
set -euo pipefail

bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly bench_dir
readonly bench_name="efficiency_bench"
# shellcheck source=bench/lib.sh
source "$bench_dir/lib.sh"
readonly model="mlp_classifier"
readonly connections=64
readonly offline_batch=32

binary=""
offline_bin=""
repository=""
duration=10
rounds=3
warmup=2
layouts="default tuned"
out_file=""
keep_workdir=0

usage() {
  sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
}

while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --offline) offline_bin="$2"; shift 2 ;;
    --repository) repository="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --layouts) layouts="$2"; shift 2 ;;
    --out) out_file="$2"; shift 2 ;;
    --keep-workdir) keep_workdir=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
require_executable "$binary" "--binary" "make build"
require_executable "$offline_bin" "--offline" "make build builds build/bench/torch_offline"
[ -d "$repository/$model" ] || die "--repository must hold $model"
require_tools wrk curl python3 taskset
binary="$(absolute_path "$binary")"
offline_bin="$(absolute_path "$offline_bin")"
repository="$(absolute_path "$repository")"

make_workdir "logs and request bodies"

# The request bodies: one row of 256 floats, as JSON and as a binary tensor (answer binary too).
python3 - "$workdir" <<'EOF'
import json, random, struct, sys
random.seed(7)
row = [round(random.uniform(-1, 1), 6) for _ in range(256)]
with open(f"{sys.argv[1]}/json.body", "w") as out:
    json.dump({"inputs": [{"name": "INPUT__0", "shape": [1, 256], "datatype": "FP32",
                           "data": row}]}, out, separators=(",", ":"))
header = json.dumps({"inputs": [{"name": "INPUT__0", "shape": [1, 256], "datatype": "FP32",
                                 "parameters": {"binary_data_size": 1024}}],
                     "outputs": [{"name": "OUTPUT__0", "parameters": {"binary_data": True}}]},
                    separators=(",", ":")).encode()
with open(f"{sys.argv[1]}/binary.body", "wb") as out:
    out.write(header + struct.pack("<256f", *row))
with open(f"{sys.argv[1]}/binary.header_length", "w") as out:
    out.write(str(len(header)))
EOF

# CPU seconds (user + system) of process $1 so far.
process_cpu_seconds() {
  local ticks
  ticks="$(sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }')"
  awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", t / hz }'
}

# run_load BODY SECONDS: wrk at 64 connections on the model; sets load_requests, load_rps,
# load_server_cpu, load_wrk_cpu (CPU seconds over the run) and load_p99_us.
run_load() {
  local body="$1" seconds="$2" raw="$workdir/wrk.$1.txt" before after header_length=""
  [ "$body" = binary ] && header_length="$(cat "$workdir/binary.header_length")"
  before="$(process_cpu_seconds "$rampart_pid")"
  # `times` in the inner shell prints its children's CPU: wrk's.
  RAMPART_BENCH_BODY_FILE="$workdir/$body.body" RAMPART_BENCH_HEADER_LENGTH="$header_length" \
    bash -c '"$@" >"$0" 2>&1; times' "$raw" "${wrk_prefix[@]}" wrk --latency -t 2 \
    -c "$connections" -d "${seconds}s" -s "$bench_dir/wrk_post_body.lua" \
    "http://127.0.0.1:$rampart_port/v2/models/$model/infer" >"$workdir/times.txt" ||
    { cat "$raw" >&2; die "wrk failed"; }
  after="$(process_cpu_seconds "$rampart_pid")"
  load_server_cpu="$(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.3f", a - b }')"
  load_wrk_cpu="$(awk 'NR == 2 { gsub(/[ms]/, " "); print $1 * 60 + $2 + $3 * 60 + $4 }' \
    "$workdir/times.txt")"
  load_requests="$(awk '/requests in/ { print $1 }' "$raw")"
  load_rps="$(awk '/^Requests\/sec:/ { print $2 }' "$raw")"
  load_p99_us="$(to_us "$(awk '$1 == "99%" { print $2 }' "$raw")")"
  local non2xx
  non2xx="$(awk '/Non-2xx/ { print $NF }' "$raw")"
  [ -z "$non2xx" ] || die "wrk saw $non2xx non-2xx answers ($body); see $raw"
}

# The intra-op threads the server gave the model's instance (its load line).
served_threads() {
  sed -nE "s/.*model '$model': ([0-9]+) intra-op thread\(s\) per instance.*/\1/p" \
    "$rampart_stderr" | tail -n 1
}

cpus="$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')"
last_cpu="${cpus##*,}"
other_cpus="${cpus%,*}"

declare -A result
summary=()
for layout in $layouts; do
  rampart_extra_args=()
  wrk_prefix=()
  offline_prefix=()
  case "$layout" in
    default) ;;
    tuned)
      [ "$other_cpus" != "$cpus" ] || { log "tuned layout skipped: one CPU"; continue; }
      rampart_extra_args=(--threads-per-instance 1 --instance-cpus "$last_cpu"
        --http-cpus "$other_cpus")
      wrk_prefix=(taskset -c "$other_cpus")
      offline_prefix=(taskset -c "$last_cpu")
      ;;
    *) die "unknown layout '$layout' (default, tuned)" ;;
  esac
  start_rampart "$binary" "$repository" 120
  threads="$(served_threads)"
  [ -n "$threads" ] || threads=1
  # The baseline with the served instance's budget, while the server idles.
  offline="$("${offline_prefix[@]}" "$offline_bin" --model-dir "$repository/$model" \
    --batch "$offline_batch" --seconds 5 --threads "$threads" 2>/dev/null)"
  offline_per_core="$(sed -n 's/^offline_samples_per_core_s=//p' <<<"$offline")"
  offline_rate="$(sed -n 's/^offline_samples_per_s=//p' <<<"$offline")"
  log "$layout: $threads intra-op thread(s); offline batch $offline_batch:" \
    "$offline_rate samples/s, $offline_per_core per core-second"
  for body in json binary; do
    run_load "$body" "$warmup"
    ratios=()
    for ((round = 1; round <= rounds; round++)); do
      run_load "$body" "$duration"
      per_core="$(awk -v r="$load_requests" -v c="$load_server_cpu" 'BEGIN { printf "%.0f", r / c }')"
      ratio="$(awk -v s="$per_core" -v o="$offline_per_core" 'BEGIN { printf "%.3f", s / o }')"
      ratios+=("$ratio")
      log "$layout $body round $round: $load_rps req/s, server $(awk -v c="$load_server_cpu" \
        -v d="$duration" 'BEGIN { printf "%.2f", c / d }') cores," \
        "$(awk -v c="$load_server_cpu" -v r="$load_requests" 'BEGIN { printf "%.1f", c * 1e6 / r }') µs/sample," \
        "wrk $(awk -v c="$load_wrk_cpu" -v d="$duration" 'BEGIN { printf "%.2f", c / d }') cores," \
        "p99 ${load_p99_us} µs, $per_core samples/server core-s, ratio $ratio"
      result[$layout.$body.rps.$round]="$load_rps"
      result[$layout.$body.server_us.$round]="$(awk -v c="$load_server_cpu" -v r="$load_requests" \
        'BEGIN { printf "%.1f", c * 1e6 / r }')"
    done
    median="$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END {
      print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
    summary+=("efficiency_${layout}_${body}=$median (rounds: ${ratios[*]}; offline $offline_per_core samples/core-s at $threads thread(s))")
  done
  stop_process "$rampart_pid" 10
  rampart_pid=""
done

echo "${bench_name}: served samples per server core-second / offline samples per core-second" \
  "(median of $rounds rounds, 64 connections, one row per request)"
printf '%s\n' "${summary[@]}"
if [ -n "$out_file" ]; then
  printf '%s\n' "${summary[@]}" >"$out_file"
fi
