#!/usr/bin/env bash
# Dynamic batching benchmark: the example model `mlp_classifier` served through its dynamic
# batcher, against the same TorchScript file served without one and against offline execution
# with no server, all measured in the same run.
#
# 1. Offline baseline: bench/torch_offline runs the model through Rampart's Torch backend at
#    batch 32 (the ceiling the batcher aims for) and at batch 1 (for reference), before the
#    server starts.
# 2. One Rampart serves a temp repository with `mlp_classifier` (the example's config and
#    model.pt) and `mlp_unbatched` (the same model.pt and config, minus dynamic_batching).
# 3. wrk POSTs one row (KServe v2 JSON, INPUT__0 FP32 [1,256]) to each model at 1, 8 and 64
#    connections; /v2/models/<model>/stats snapshots around each measured run give the run's
#    average batch size and mean batch compute time.
# 4. Goal rounds at 64 connections: offline batch 32 (server idle), then the batched model
#    served, back to back, --rounds times; served / offline is the median of the rounds' paired
#    ratios, so the machine's drift over minutes weighs on both sides alike. With --stall-probe,
#    each round ends with bench/stall_probe on every CPU (server idle): how often the machine
#    itself stalls a running thread for longer than the round's p99 bound leaves above its
#    median, and so roughly what share of requests no server could keep within the bound.
# Reports throughput (samples/s = req/s, one row per request), p50/p99 latency, served/offline
# and batched/unbatched ratios, and p99 against queue delay + 2 x batch compute time with the
# share of wrk's latency samples over that bound. It reports; it does not assert.
#
# Usage: bench/batching_bench.sh --binary build/rampart --offline build/bench/torch_offline
#                                --repository examples/models [--duration 10] [--warmup 2]
#                                [--offline-seconds 5] [--rounds 3] [--threads N]
#                                [--split-cpus] [--stall-probe PATH] [--probe-seconds 5]
#                                [--serve-args "FLAGS"] [--out FILE]
#                                [--start-timeout 120] [--keep-workdir]
# See docs/benchmarks.md.
set -euo pipefail

bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly bench_dir
readonly bench_name="batching_bench"
# shellcheck source=bench/lib.sh
source "$bench_dir/lib.sh"
readonly batched_model="mlp_classifier"
readonly unbatched_model="mlp_unbatched"
readonly offline_batch=32
# Load levels: name, wrk threads, connections.
readonly levels=("c1 1 1" "c8 2 8" "c64 2 64")
# The goals are stated for the highest load.
readonly goal_level="${levels[-1]%% *}"

binary=""
offline_bin=""
repository=""
duration=10
warmup=2
offline_seconds=5
rounds=3
thread_budget=0
split_cpus=0
probe_bin=""
probe_seconds=5
serve_args=""
out_file=""
start_timeout=120
keep_workdir=0

usage() {
  sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
  cat <<'EOF'

Options:
  --binary PATH            Rampart binary (required)
  --offline PATH           torch_offline binary, built with Rampart in build/bench (required)
  --repository DIR         model repository holding `mlp_classifier` (required)
  --duration SECONDS       measured wrk run per model and load level (default 10)
  --warmup SECONDS         unmeasured wrk run before each measured one (default 2)
  --offline-seconds SECS   measuring time of each offline run (default 5)
  --rounds N               goal rounds at 64 connections, each an offline batch-32 run and a
                           served run back to back (default 3)
  --threads N              intra-op thread budget of the served instance (--threads-per-instance)
                           and of the offline baseline alike (default 0: each one's default,
                           the machine's cores for this one-instance model)
  --split-cpus             with --threads N: the served instance thread runs on the last N of
                           this process's CPUs, the HTTP I/O threads and wrk on the others, and
                           the offline baseline on the instance's CPUs (Triton's host policy
                           does the same with `cpu-cores`); keeps the load generator off the
                           computing core
  --stall-probe PATH       stall_probe binary (built in build/bench): each goal round ends with
                           it, and the report gives the machine's own stalls beside the p99
  --probe-seconds SECS     probing time per round (default 5)
  --serve-args "FLAGS"     more `rampart serve` flags for the served side, e.g.
                           "--instance-cpus 1 --http-cpus 0" (split into words on spaces)
  --out FILE               also write the results as a markdown snippet to FILE
  --start-timeout SECS     how long Rampart may take to load and listen (default 120)
  --keep-workdir           keep the temp dir with the repository, logs and raw wrk output
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="${2:?--binary needs a value}"; shift 2 ;;
    --offline) offline_bin="${2:?--offline needs a value}"; shift 2 ;;
    --repository) repository="${2:?--repository needs a value}"; shift 2 ;;
    --duration) duration="${2:?--duration needs a value}"; shift 2 ;;
    --warmup) warmup="${2:?--warmup needs a value}"; shift 2 ;;
    --offline-seconds) offline_seconds="${2:?--offline-seconds needs a value}"; shift 2 ;;
    --rounds) rounds="${2:?--rounds needs a value}"; shift 2 ;;
    --threads) thread_budget="${2:?--threads needs a value}"; shift 2 ;;
    --split-cpus) split_cpus=1; shift ;;
    --stall-probe) probe_bin="${2:?--stall-probe needs a value}"; shift 2 ;;
    --probe-seconds) probe_seconds="${2:?--probe-seconds needs a value}"; shift 2 ;;
    --serve-args) serve_args="${2?--serve-args needs a value}"; shift 2 ;;
    --out) out_file="${2:?--out needs a value}"; shift 2 ;;
    --start-timeout) start_timeout="${2:?--start-timeout needs a value}"; shift 2 ;;
    --keep-workdir) keep_workdir=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

[[ "$duration" =~ ^[1-9][0-9]*$ ]] || die "--duration must be a positive integer, got '$duration'"
[[ "$warmup" =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer, got '$warmup'"
[[ "$offline_seconds" =~ ^[1-9][0-9]*$ ]] || die "--offline-seconds must be a positive integer"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer, got '$rounds'"
[[ "$probe_seconds" =~ ^[1-9][0-9]*$ ]] || die "--probe-seconds must be a positive integer"
[[ "$thread_budget" =~ ^[0-9]+$ ]] || die "--threads must be a non-negative integer"
offline_thread_args=()
if [ "$thread_budget" -gt 0 ]; then
  offline_thread_args=(--threads "$thread_budget")
  rampart_extra_args=(--threads-per-instance "$thread_budget")
fi
require_tools wrk curl python3
offline_prefix=()
placement=""
if [ "$split_cpus" -eq 1 ]; then
  # Prints "<instance CPUs> <the other CPUs>" as taskset lists, or fails with the reason.
  cpu_split="$(python3 - "$thread_budget" <<'EOF'
import os, sys
budget = int(sys.argv[1])
cpus = sorted(os.sched_getaffinity(0))
if not 0 < budget < len(cpus):
    sys.exit("--split-cpus needs --threads N with 0 < N < %d (this process's CPUs)" % len(cpus))
print(",".join(map(str, cpus[-budget:])), ",".join(map(str, cpus[:-budget])))
EOF
  )" || die "cannot split the CPUs"
  read -r instance_cpus front_cpus <<<"$cpu_split"
  require_tools taskset
  rampart_extra_args+=(--instance-cpus "$instance_cpus" --http-cpus "$front_cpus")
  wrk_prefix=(taskset -c "$front_cpus")
  offline_prefix=(taskset -c "$instance_cpus")
  placement="instance CPUs $instance_cpus; HTTP I/O and wrk CPUs $front_cpus"
fi
# shellcheck disable=SC2206  # split into words on purpose
rampart_extra_args+=($serve_args)
[[ "$start_timeout" =~ ^[1-9][0-9]*$ ]] || die "--start-timeout must be a positive integer"

# ---------------------------------------------------------------------------------------------
# Prerequisites (the tools are checked above, before --split-cpus needs python3).

require_executable "$binary" "Rampart binary (--binary)" "build it first: make build"
require_executable "$offline_bin" "offline baseline (--offline)" \
  "make build builds it as build/bench/torch_offline"
[ -n "$repository" ] || die "--repository is required"
[ -d "$repository" ] || die "model repository '$repository' does not exist"
source_model="$repository/$batched_model"
[ -f "$source_model/config.pbtxt" ] ||
  die "model repository '$repository' has no '$batched_model/config.pbtxt'"
# examples/models/generate.py writes the TorchScript files at build time.
[ -f "$source_model/1/model.pt" ] ||
  die "'$source_model/1/model.pt' is missing (make build generates the example models)"
binary="$(absolute_path "$binary")"
offline_bin="$(absolute_path "$offline_bin")"
if [ -n "$probe_bin" ]; then
  require_executable "$probe_bin" "stall probe (--stall-probe)" \
    "make build builds it as build/bench/stall_probe"
  probe_bin="$(absolute_path "$probe_bin")"
fi

offline_pid=""
probe_pid=""
cleanup_pid_vars+=(offline_pid probe_pid)
make_workdir "repository, logs and raw wrk output"

# ---------------------------------------------------------------------------------------------
# Temp repository: the batched model as shipped, and the same model without dynamic_batching.
# Prints the batching settings the bound and the report need: max_queue_delay_microseconds
# (Triton's default 0 when absent), max_batch_size and preferred_batch_size.

bench_repository="$workdir/repository"
for model in "$batched_model" "$unbatched_model"; do
  mkdir -p "$bench_repository/$model/1"
  cp "$source_model/1/model.pt" "$bench_repository/$model/1/model.pt"
done
cp "$source_model/config.pbtxt" "$bench_repository/$batched_model/config.pbtxt"
settings_file="$workdir/batching_settings"
python3 - "$source_model/config.pbtxt" "$bench_repository/$unbatched_model/config.pbtxt" \
  "$batched_model" "$unbatched_model" >"$settings_file" <<'EOF' ||
import re, sys
source, target, batched, unbatched = sys.argv[1:]
text = open(source).read()
block = re.compile(r"^[ \t]*dynamic_batching\s*\{[^{}]*\}[ \t]*\n?", re.M)
blocks = block.findall(text)
if len(blocks) != 1:
    sys.exit("%s: expected one dynamic_batching { ... } block, found %d" % (source, len(blocks)))
name = re.compile(r'^([ \t]*name\s*:\s*)"%s"' % re.escape(batched), re.M)
if len(name.findall(text)) != 1:
    sys.exit('%s: expected one top-level name: "%s"' % (source, batched))
delay = re.search(r"max_queue_delay_microseconds\s*:\s*(\d+)", blocks[0])
max_batch = re.search(r"^\s*max_batch_size\s*:\s*(\d+)", text, re.M)
preferred = re.findall(r"preferred_batch_size\s*:\s*\[([^\]]*)\]", blocks[0])
body = name.sub(r'\1"%s"' % unbatched, block.sub("", text))
# Drop the leading comment, which describes the batched model.
body = re.sub(r"\A(?:#[^\n]*\n)+", "", body)
with open(target, "w") as f:
    f.write("# %s without dynamic_batching, written by bench/batching_bench.sh\n" % batched + body)
print(delay.group(1) if delay else 0, max_batch.group(1) if max_batch else 0,
      ",".join(s.strip() for s in preferred[0].split(",")) if preferred else "none")
EOF
  die "cannot derive the $unbatched_model config from $source_model/config.pbtxt"
read -r queue_delay_us max_batch_size preferred_sizes <"$settings_file"
log "temp repository $bench_repository: $batched_model (max_queue_delay ${queue_delay_us} µs," \
  "preferred sizes $preferred_sizes, max_batch_size $max_batch_size) and $unbatched_model"

# ---------------------------------------------------------------------------------------------
# Offline baseline, before the server starts, so it has the cores to itself.

# number_in FILE KEY: KEY's number in FILE, the `key=value` lines a helper binary prints.
number_in() { sed -n -E "s/^$2=([0-9.]+)$/\1/p" "$1"; }

# run_offline BATCH: sets offline_rate, offline_ms and offline_threads.
run_offline() {
  local batch="$1" out="$workdir/offline.b$1.stdout" err="$workdir/offline.b$1.stderr" status
  log "offline: batch $batch for ${offline_seconds}s"
  # In the background so the trap can stop it; `wait` returns early on a signal.
  "${offline_prefix[@]}" "$offline_bin" --model-dir "$bench_repository/$batched_model" --batch "$batch" \
    --seconds "$offline_seconds" "${offline_thread_args[@]}" >"$out" 2>"$err" &
  offline_pid=$!
  wait "$offline_pid" && status=0 || status=$?
  offline_pid=""
  if [ "$status" -ne 0 ]; then
    tail -n 20 "$err" >&2 || true
    die "offline baseline exited with status $status (batch $batch)"
  fi
  offline_rate="$(number_in "$out" offline_samples_per_s)"
  offline_ms="$(number_in "$out" offline_batch_ms)"
  offline_threads="$(cat "$out" "$err" | sed -n -E 's/.*with ([0-9]+) intra-op thread.*/\1/p' |
    head -n 1)"
  if [ -z "$offline_rate" ] || [ -z "$offline_ms" ]; then
    cat "$out" >&2
    die "cannot parse the offline baseline's output (batch $batch)"
  fi
}

declare -A result
for batch in "$offline_batch" 1; do
  run_offline "$batch"
  result[offline.b$batch.rate]="$offline_rate"
  result[offline.b$batch.ms]="$offline_ms"
  result[offline.threads]="${offline_threads:-?}"
done

# ---------------------------------------------------------------------------------------------
# Server and request.

start_rampart "$binary" "$bench_repository" "$start_timeout"
server_threads="$(sed -n -E \
  "s/.*model '$batched_model' version [0-9]+: loaded .* with ([0-9]+) intra-op thread.*/\1/p" \
  "$rampart_stderr" | head -n 1)"
# The instance thread's nice value when the config asks for a priority (optimization.priority):
# "-10", or "0 (not applied)" when the process may not raise it or the instance computes on more
# than one thread (the server's log says which).
nice_line="s/.*model '$batched_model' version [0-9]+: instance threads"
instance_nice="$(sed -n -E -e "$nice_line at nice (-?[0-9]+).*/\1/p" \
  -e "$nice_line stay at nice (-?[0-9]+).*/\1 (not applied)/p" "$rampart_stderr" | head -n 1)"
base_url="http://127.0.0.1:$rampart_port/v2/models"

# One row of 256 fixed values, as JSON.
request_file="$workdir/request.json"
python3 - "$request_file" <<'EOF'
import json, math, sys
row = [round(math.sin(0.1 * i), 4) for i in range(256)]
body = {"inputs": [{"name": "INPUT__0", "shape": [1, 256], "datatype": "FP32", "data": row}]}
with open(sys.argv[1], "w") as f:
    f.write(json.dumps(body, separators=(",", ":")))
EOF
request_bytes="$(wc -c <"$request_file" | tr -d ' ')"

# Both models must answer 200 with OUTPUT__0 [1,10], and agree (they are the same file).
for model in "$batched_model" "$unbatched_model"; do
  code="$(http_status POST "$workdir/response.$model.json" "$base_url/$model/infer" \
    -H 'Content-Type: application/json' --data-binary "@$request_file")"
  if [ "$code" != 200 ]; then
    echo "--- response body ---" >&2
    head -c 2000 "$workdir/response.$model.json" >&2 2>/dev/null || true
    echo >&2
    die "Rampart answered POST /v2/models/$model/infer with HTTP $code, expected 200"
  fi
done
python3 - "$workdir/response.$batched_model.json" "$workdir/response.$unbatched_model.json" \
  <<'EOF' || die "the infer responses are not the expected JSON (see above)"
import json, sys
outputs = []
for path in sys.argv[1:]:
    response = json.load(open(path))
    output = [o for o in response["outputs"] if o["name"] == "OUTPUT__0"]
    if len(output) != 1 or output[0]["shape"] != [1, 10] or len(output[0]["data"]) != 10:
        sys.exit("%s: expected OUTPUT__0 with shape [1, 10], got %s" % (path, response))
    outputs.append(output[0]["data"])
if max(abs(a - b) for a, b in zip(*outputs)) > 1e-4:
    sys.exit("batched and unbatched models disagree: %s vs %s" % tuple(outputs))
EOF
log "both models answer POST with 200 and the same OUTPUT__0 [1,10]"

# ---------------------------------------------------------------------------------------------
# Statistics.

# fetch_stats MODEL FILE: saves GET /v2/models/MODEL/stats to FILE (empty on failure).
fetch_stats() {
  [ "$(http_status GET "$2" "$base_url/$1/stats")" = 200 ] || : >"$2"
}

# stats_delta BEFORE AFTER: prints `key value` lines for what happened between two snapshots:
# executions, inferences, avg_batch, batch_compute_us (compute_infer per execution, from
# batch_stats), queue_us (per request), failures, and sizes (the commonest batch sizes,
# `size x executions`, most frequent first).
stats_delta() {
  python3 - "$1" "$2" <<'EOF' 2>/dev/null || true
import json, sys
before, after = (json.load(open(path))["model_stats"][0] for path in sys.argv[1:])
def delta(key):
    return after[key] - before[key]
def duration(name):
    a, b = after["inference_stats"][name], before["inference_stats"][name]
    return a["count"] - b["count"], a["ns"] - b["ns"]
def by_size(stats):
    return {s["batch_size"]: s["compute_infer"] for s in stats.get("batch_stats", [])}
sizes_after, sizes_before = by_size(after), by_size(before)
executions_by_size, infer_count, infer_ns = {}, 0, 0
for size, infer in sizes_after.items():
    old = sizes_before.get(size, {"count": 0, "ns": 0})
    if infer["count"] > old["count"]:
        executions_by_size[size] = infer["count"] - old["count"]
        infer_count += infer["count"] - old["count"]
        infer_ns += infer["ns"] - old["ns"]
executions, inferences = delta("execution_count"), delta("inference_count")
queue_count, queue_ns = duration("queue")
fail_count, _ = duration("fail")
print("executions", executions)
print("inferences", inferences)
print("avg_batch", "%.2f" % (inferences / executions) if executions else "nan")
print("batch_compute_us", "%.0f" % (infer_ns / infer_count / 1e3) if infer_count else "nan")
print("queue_us", "%.0f" % (queue_ns / queue_count / 1e3) if queue_count else "nan")
print("failures", fail_count)
common = sorted(executions_by_size.items(), key=lambda item: (-item[1], -item[0]))[:3]
print("sizes", ",".join("%dx%d" % item for item in common) or "none")
EOF
}

# CPU use around each measured run, from /proc: `<server ticks> <busy ticks> <all ticks>`, where
# the server's are its user + system time and the others sum over every core (/proc/stat).
clock_ticks="$(getconf CLK_TCK)"
readonly clock_ticks
cpu_sample() {
  local server
  # Fields after "pid (comm) ": utime and stime are the 12th and 13th.
  server="$(sed 's/^.*) //' "/proc/$rampart_pid/stat" | awk '{ print $12 + $13 }')"
  awk -v server="$server" '$1 == "cpu" {
    total = 0; for (i = 2; i <= NF; i++) total += $i
    print server, total - $5 - $6, total; exit
  }' /proc/stat
}

# cpu_figures BEFORE AFTER REQUESTS: prints `<server cores> <server CPU µs per request>
# <cores busy>`, the cores averaged over the run.
cpu_figures() {
  awk -v b="$1" -v a="$2" -v requests="$3" -v hz="$clock_ticks" -v cores="$(nproc)" 'BEGIN {
    split(b, x, " "); split(a, y, " ")
    all = y[3] - x[3]; wall = all / hz / cores
    if (all <= 0 || wall <= 0 || requests <= 0) { print "nan nan nan"; exit }
    printf "%.2f %.0f %.2f\n", (y[1] - x[1]) / hz / wall, (y[1] - x[1]) / hz * 1e6 / requests,
      (y[2] - x[2]) / all * cores
  }'
}

# When wrk stops, the requests it had in flight are cancelled or finish inside the server a little
# later; a pause before each snapshot keeps them in the run they belong to.
readonly settle_seconds=1

# measure KIND LEVEL KEY: one warmed-up, measured wrk run against KIND's model (batched or
# unbatched) at LEVEL ("name threads connections"), its results stored as result[KEY.*]: rps,
# p50, p99, errors, server_cores, cpu_us, busy_cores and the /stats figures of stats_delta.
measure() {
  local kind="$1" level="$2" key="$3" name threads connections model url cpu_before cpu_after
  local server_cores cpu_us busy_cores got_stats failures stat value
  read -r name threads connections <<<"$level"
  if [ "$kind" = batched ]; then model="$batched_model"; else model="$unbatched_model"; fi
  url="$base_url/$model/infer"
  if [ "$warmup" -gt 0 ]; then
    log "$kind $name: warm-up ${warmup}s"
    run_wrk "$key.warmup" "$threads" "$connections" "$warmup" "$url" "$request_file"
  fi
  sleep "$settle_seconds"
  is_running "$rampart_pid" || die "Rampart exited during the warm-up (see $rampart_stderr)"
  fetch_stats "$model" "$workdir/stats.$key.before.json"
  log "$kind $name: measuring ${duration}s (wrk -t$threads -c$connections)"
  cpu_before="$(cpu_sample)"
  run_wrk "$key" "$threads" "$connections" "$duration" "$url" "$request_file"
  cpu_after="$(cpu_sample)"
  read -r server_cores cpu_us busy_cores \
    <<<"$(cpu_figures "$cpu_before" "$cpu_after" "$wrk_requests")"
  result[$key.server_cores]="$server_cores"
  result[$key.cpu_us]="$cpu_us"
  result[$key.busy_cores]="$busy_cores"
  sleep "$settle_seconds"
  fetch_stats "$model" "$workdir/stats.$key.after.json"
  is_running "$rampart_pid" || die "Rampart exited during the measured run (see $rampart_stderr)"
  result[$key.rps]="$wrk_rps"
  result[$key.p50]="$wrk_p50_us"
  result[$key.p99]="$wrk_p99_us"
  result[$key.errors]="$wrk_errors"
  result[$key.latency_file]="$wrk_latency_file"
  for stat in executions inferences avg_batch batch_compute_us queue_us failures sizes; do
    result[$key.$stat]="nan"
  done
  got_stats=0
  while read -r stat value; do
    [ -n "$stat" ] || continue
    result[$key.$stat]="$value"
    got_stats=1
  done <<<"$(stats_delta "$workdir/stats.$key.before.json" "$workdir/stats.$key.after.json")"
  [ "$got_stats" -eq 1 ] ||
    log "WARNING: no usable statistics from GET /v2/models/$model/stats around the $name run"
  # Up to one failure per connection is expected: the requests wrk abandons when it stops,
  # which the server drops as cancelled (the client hung up) and counts under `fail`.
  failures="${result[$key.failures]}"
  if [ "$failures" != nan ] && [ "$failures" -gt "$connections" ]; then
    log "WARNING: $kind $name: /stats counts $failures failed requests in the run, more than" \
      "the $connections that wrk abandons when it stops"
  elif [ "$failures" != nan ] && [ "$failures" -gt 0 ]; then
    log "$kind $name: $failures requests abandoned by wrk at the end, counted as failed by /stats"
  fi
}

# p99_bound KEY: sets result[KEY.bound] and result[KEY.bound_ok] from result[KEY.p99] and
# result[KEY.batch_compute_us]. A request waits at most the queue delay for its batch to fill,
# then at worst for the batch ahead of it and its own batch to execute. Also counts the samples
# slower than the bound in the run's latency histogram: result[KEY.over] and result[KEY.all],
# and result[KEY.over_pct], their share in percent (the p99 is within the bound when at most
# 1 % are over it, so this says by how much it is met or missed). wrk's histogram is corrected
# for coordinated omission (a stall adds samples for the requests it held up), as is its p99.
p99_bound() {
  local key="$1" compute_us="${result[$1.batch_compute_us]}"
  if [ "$compute_us" = nan ]; then
    result[$key.bound]="nan"
    result[$key.bound_ok]="nan"
    result[$key.over]="nan"
    result[$key.all]="nan"
    result[$key.over_pct]="nan"
    return
  fi
  result[$key.bound]="$(calc "$queue_delay_us + 2 * $compute_us" 0)"
  result[$key.bound_ok]="$(awk -v p="${result[$key.p99]}" -v b="${result[$key.bound]}" \
    'BEGIN { print (p == "nan") ? "nan" : (p + 0 <= b + 0) ? "yes" : "no" }')"
  read -r "result[$key.over]" "result[$key.all]" \
    <<<"$(latency_over "${result[$key.bound]}" "${result[$key.latency_file]}")"
  result[$key.over_pct]="$(percent "${result[$key.over]}" "${result[$key.all]}")"
}

# percent PART WHOLE: PART / WHOLE in percent with two decimals, or nan.
percent() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (b + 0 == 0 || a == "nan" || b == "nan") print "nan"; else printf "%.2f", 100 * a / b
  }'
}

# stall_figures KEY CONNECTIONS: runs the stall probe on every CPU (the server idle) and sets
# result[KEY.stalled_ms] (ms per second during which some CPU was stalled), result[KEY.max_stall]
# (µs), result[KEY.stalls_1ms] (stalls per second of 1 ms or more), result[KEY.slack] (the
# bound less the p50, µs), result[KEY.stalls_slack] (stalls per second at least that long) and
# result[KEY.stall_floor] (≈ % of requests over the bound from those stalls alone). A stall that
# long holds up every request in flight, CONNECTIONS of them in a closed loop, past the bound,
# whatever the server does; so stalls per second × CONNECTIONS / requests per second estimates
# the share no server could keep within it (an estimate: it counts requests, while wrk's
# histogram weighs a long stall by the requests it held up, and the machine stalls differently
# loaded than idle).
stall_figures() {
  local key="$1" connections="$2" slack out="$workdir/probe.$1.stdout" status
  local -a threshold=()
  slack="$(awk -v b="${result[$key.bound]}" -v p="${result[$key.p50]}" \
    'BEGIN { print (b == "nan" || p == "nan" || b - p < 1) ? "nan" : int(b - p) }')"
  result[$key.slack]="$slack"
  # The probe records gaps from 200 µs on; a smaller slack needs the smaller ones too.
  [ "$slack" = nan ] ||
    threshold=(--threshold-us "$slack" --min-gap-us "$((slack < 200 ? (slack < 10 ? 10 : slack) : 200))")
  log "stall probe: every CPU for ${probe_seconds}s${threshold:+ (counting stalls ≥ $slack µs)}"
  "$probe_bin" --seconds "$probe_seconds" "${threshold[@]}" >"$out" 2>"$workdir/probe.$key.stderr" &
  probe_pid=$!
  wait "$probe_pid" && status=0 || status=$?
  probe_pid=""
  [ "$status" -eq 0 ] || die "the stall probe exited with status $status (see $workdir)"
  result[$key.stalled_ms]="$(number_in "$out" stalled_ms_per_s)"
  result[$key.max_stall]="$(number_in "$out" max_stall_us)"
  result[$key.stalls_1ms]="$(number_in "$out" stalls_per_s_ge_1000us)"
  result[$key.stalls_slack]="$(number_in "$out" stalls_per_s_ge_threshold)"
  [ -n "${result[$key.stalls_slack]}" ] || result[$key.stalls_slack]="nan"
  result[$key.stall_floor]="$(awk -v r="${result[$key.stalls_slack]}" -v c="$connections" \
    -v rps="${result[$key.rps]}" 'BEGIN {
      if (r == "nan" || rps + 0 <= 0) { print "nan"; exit }
      v = 100 * r * c / rps; printf "%.2f", (v > 100) ? 100 : v
    }')"
}

# ---------------------------------------------------------------------------------------------
# Measurement, 1: per level, the batched model, then the unbatched one, on the same server.

for level in "${levels[@]}"; do
  name="${level%% *}"
  for kind in batched unbatched; do
    measure "$kind" "$level" "$kind.$name"
  done
  result[$name.ratio_unbatched]="$(ratio "${result[batched.$name.rps]}" \
    "${result[unbatched.$name.rps]}")"
  result[$name.ratio_offline]="$(ratio "${result[batched.$name.rps]}" \
    "${result[offline.b$offline_batch.rate]}")"
  p99_bound "batched.$name"
done

# ---------------------------------------------------------------------------------------------
# Measurement, 2: the goal rounds. The machine's speed drifts over minutes (by 10-20 % on a
# shared VM), so a served run and an offline run minutes apart can differ by that much for no
# reason of their own. Each round measures the batch-32 baseline and then the batched model at
# the goal level back to back, with the server idle during the former; the goals use the median
# of the rounds' paired ratios, and the p99 of each round against that round's bound.

readonly goal_level_spec="${levels[-1]}"
round_ratios=()
round_p99s=()
round_bounds=()
rounds_within=0
pooled_over=0
pooled_all=0
# For the pooled stall estimate: Σ stalls per second × connections, and Σ requests per second.
pooled_stalled_requests=0
pooled_rps=0
read -r _ _ goal_connections <<<"$goal_level_spec"
for round in $(seq "$rounds"); do
  run_offline "$offline_batch"
  result[round$round.offline]="$offline_rate"
  measure batched "$goal_level_spec" "round$round"
  p99_bound "round$round"
  result[round$round.ratio]="$(ratio "${result[round$round.rps]}" "$offline_rate")"
  round_ratios+=("${result[round$round.ratio]}")
  round_p99s+=("${result[round$round.p99]}")
  round_bounds+=("${result[round$round.bound]}")
  [ "${result[round$round.bound_ok]}" != yes ] || rounds_within=$((rounds_within + 1))
  if [ "${result[round$round.all]}" != nan ]; then
    pooled_over=$((pooled_over + ${result[round$round.over]}))
    pooled_all=$((pooled_all + ${result[round$round.all]}))
  fi
  if [ -n "$probe_bin" ]; then
    stall_figures "round$round" "$goal_connections"
    if [ "${result[round$round.stall_floor]}" != nan ]; then
      pooled_stalled_requests="$(calc "$pooled_stalled_requests + \
        ${result[round$round.stalls_slack]} * $goal_connections" 4)"
      pooled_rps="$(calc "$pooled_rps + ${result[round$round.rps]}" 1)"
    fi
  fi
  log "round $round: served ${result[round$round.rps]} / offline $offline_rate samples/s =" \
    "${result[round$round.ratio]}; p99 ${result[round$round.p99]} µs, bound" \
    "${result[round$round.bound]} µs (${result[round$round.over_pct]} % of samples over it)"
done
# Every round's requests against their own round's bound, together.
result[goal.over_pct]="$(percent "$pooled_over" "$pooled_all")"
result[goal.stall_floor]="$(percent "$pooled_stalled_requests" "$pooled_rps" |
  awk '{ print ($1 != "nan" && $1 + 0 > 100) ? "100.00" : $1 }')"
result[goal.ratio_offline]="$(calc "$(median "${round_ratios[@]}")" 2)"
result[goal.p99]="$(calc "$(median "${round_p99s[@]}")" 0)"
result[goal.bound]="$(calc "$(median "${round_bounds[@]}")" 0)"

# ---------------------------------------------------------------------------------------------
# Report.

describe_level() {
  local threads connections
  read -r _ threads connections <<<"$1"
  echo "$connections conn / $threads wrk thread$([ "$threads" -gt 1 ] && echo s)"
}

# goal_line WHAT VALUE TARGET: `WHAT: VALUE (goal >= TARGET): met|missed`.
goal_line() {
  local verdict
  verdict="$(awk -v v="$2" -v t="$3" \
    'BEGIN { print (v == "nan") ? "n/a" : (v + 0 >= t + 0) ? "met" : "missed" }')"
  echo "- $1: **$2** (goal ≥ $3): $verdict"
}

report() {
  local level name kind flag errors model
  echo "Dynamic batching benchmark: POST /v2/models/<model>/infer, one FP32 [1,256] row as JSON" \
    "($request_bytes bytes), loopback keep-alive"
  machine_line
  echo "runs: ${warmup}s warm-up + ${duration}s measured per model and level, one server;" \
    "$batched_model: preferred_batch_size [$preferred_sizes]," \
    "max_queue_delay_microseconds $queue_delay_us, max_batch_size $max_batch_size;" \
    "$unbatched_model: the same without dynamic_batching;" \
    "intra-op threads: server ${server_threads:-?}, offline ${result[offline.threads]}" \
    "${instance_nice:+; $batched_model instance thread at nice $instance_nice}" \
    "${placement:+; $placement}${serve_args:+; serve flags: $serve_args}"
  echo
  echo "Offline (bench/torch_offline, no server, ${offline_seconds}s each):" \
    "batch $offline_batch **$(calc "${result[offline.b$offline_batch.rate]}" 0) samples/s**" \
    "(${result[offline.b$offline_batch.ms]} ms per batch), batch 1" \
    "$(calc "${result[offline.b1.rate]}" 0) samples/s (${result[offline.b1.ms]} ms), both before" \
    "the server started; the goal rounds below measure batch $offline_batch again, each next to" \
    "its served run."
  echo
  echo "| load | model | samples/s | p50 (µs) | p99 (µs) | avg batch | batch compute (µs) |" \
    "queue (µs) | commonest sizes |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
  for level in "${levels[@]}"; do
    name="${level%% *}"
    for kind in batched unbatched; do
      if [ "$kind" = batched ]; then model="$batched_model"; else model="$unbatched_model"; fi
      flag=""
      errors="${result[$kind.$name.errors]}"
      [ "$errors" -eq 0 ] || flag=" ($errors errors)"
      printf '| %s | %s%s | %.0f | %s | %s | %s | %s | %s | %s |\n' "$(describe_level "$level")" \
        "$model" "$flag" "${result[$kind.$name.rps]}" "${result[$kind.$name.p50]}" \
        "${result[$kind.$name.p99]}" "${result[$kind.$name.avg_batch]}" \
        "${result[$kind.$name.batch_compute_us]}" "${result[$kind.$name.queue_us]}" \
        "$(sed 's/x/ × /g; s/,/, /g' <<<"${result[$kind.$name.sizes]}")"
    done
  done
  echo
  echo "avg batch = inference_count / execution_count; batch compute = compute_infer per" \
    "execution (batch_stats); queue = mean queue time per request; all from /stats deltas" \
    "around the measured run. commonest sizes: batch size × executions."
  echo
  echo "| load | model | server CPU (cores) | server CPU per request (µs) |" \
    "all $(nproc) cores busy (cores) |"
  echo "|---|---|---:|---:|---:|"
  for level in "${levels[@]}"; do
    name="${level%% *}"
    for kind in batched unbatched; do
      if [ "$kind" = batched ]; then model="$batched_model"; else model="$unbatched_model"; fi
      printf '| %s | %s | %s | %s | %s |\n' "$(describe_level "$level")" "$model" \
        "${result[$kind.$name.server_cores]}" "${result[$kind.$name.cpu_us]}" \
        "${result[$kind.$name.busy_cores]}"
    done
  done
  echo
  echo "Server CPU: the Rampart process's user + system time during the measured wrk run" \
    "(/proc/<pid>/stat); all cores busy: the whole machine (/proc/stat), wrk included."
  echo
  echo "| load | batched / offline b$offline_batch | batched / unbatched |" \
    "p99 bound (µs) | batched p99 ≤ bound | samples over the bound |"
  echo "|---|---:|---:|---:|---|---:|"
  for level in "${levels[@]}"; do
    name="${level%% *}"
    printf '| %s | **%s** | **%s** | %s | %s | %s %% |\n' "$(describe_level "$level")" \
      "${result[$name.ratio_offline]}" "${result[$name.ratio_unbatched]}" \
      "${result[batched.$name.bound]}" "${result[batched.$name.bound_ok]}" \
      "${result[batched.$name.over_pct]}"
  done
  echo
  echo "p99 bound = max_queue_delay ($queue_delay_us µs) + 2 × the run's mean batch compute;" \
    "samples over the bound: their share of wrk's latency histogram (corrected for" \
    "coordinated omission, as its p99 is), at most 1 % when the p99 is within it."
  echo "batched / offline here: against the batch-$offline_batch run before the server started."
  echo
  echo "Goal rounds at $goal_level ($(describe_level "$goal_level_spec")), each an offline" \
    "batch-$offline_batch run (${offline_seconds}s, server idle) and then $batched_model served" \
    "(${warmup}s warm-up + ${duration}s):"
  echo
  echo "| round | offline b$offline_batch (samples/s) | served (samples/s) | served / offline |" \
    "p50 (µs) | p99 (µs) | avg batch | batch compute (µs) | p99 bound (µs) | p99 ≤ bound |" \
    "over the bound |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
  for round in $(seq "$rounds"); do
    printf '| %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s | %s %% |\n' "$round" \
      "${result[round$round.offline]}" "${result[round$round.rps]}" \
      "${result[round$round.ratio]}" "${result[round$round.p50]}" "${result[round$round.p99]}" \
      "${result[round$round.avg_batch]}" "${result[round$round.batch_compute_us]}" \
      "${result[round$round.bound]}" "${result[round$round.bound_ok]}" \
      "${result[round$round.over_pct]}"
  done
  echo
  echo "Goals at $goal_level, reported, not asserted (served / offline: the median of the" \
    "rounds' ratios; batched / unbatched: the run above):"
  goal_line "served / offline batch $offline_batch" "${result[goal.ratio_offline]}" 0.8
  goal_line "batched / unbatched" "${result[$goal_level.ratio_unbatched]}" 5
  echo "- p99 ≤ queue delay + 2 × batch compute: within its round's bound in $rounds_within of" \
    "$rounds rounds (median p99 ${result[goal.p99]} µs, median bound ${result[goal.bound]} µs);" \
    "all rounds' requests together: **${result[goal.over_pct]} %** over their round's bound" \
    "(goal ≤ 1 %)"
  [ -n "$probe_bin" ] || return 0
  echo
  echo "The machine's own stalls, from bench/stall_probe on every CPU for ${probe_seconds}s at" \
    "the end of each round (server idle): a stall is a gap in a pinned thread's run of clock" \
    "reads, on any CPU (overlapping ones merged). One at least as long as the bound leaves" \
    "above the median holds every request in flight past the bound, whatever the server does:"
  echo
  echo "| round | stalled (ms per s) | longest (µs) | stalls ≥ 1 ms (per s) |" \
    "bound − p50 (µs) | stalls ≥ bound − p50 (per s) | ≈ requests over the bound from them |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
  for round in $(seq "$rounds"); do
    printf '| %s | %s | %s | %s | %s | %s | %s %% |\n' "$round" \
      "${result[round$round.stalled_ms]}" "${result[round$round.max_stall]}" \
      "${result[round$round.stalls_1ms]}" \
      "${result[round$round.slack]}" \
      "${result[round$round.stalls_slack]}" "${result[round$round.stall_floor]}"
  done
  echo
  echo "≈ requests over the bound = stalls per second × $goal_connections connections ÷" \
    "requests per second: **${result[goal.stall_floor]} %** over all rounds, against" \
    "${result[goal.over_pct]} % of wrk's samples measured over the bound. An estimate: the" \
    "machine may stall differently loaded than idle, and wrk weighs a long stall by the" \
    "requests it held up."
}

summary() {
  local level name
  echo "offline_samples_per_s_b$offline_batch=$(calc "${result[offline.b$offline_batch.rate]}" 0)"
  echo "offline_batch_ms_b$offline_batch=${result[offline.b$offline_batch.ms]}"
  echo "offline_samples_per_s_b1=$(calc "${result[offline.b1.rate]}" 0)"
  echo "offline_batch_ms_b1=${result[offline.b1.ms]}"
  echo "queue_delay_us=$queue_delay_us"
  for level in "${levels[@]}"; do
    name="${level%% *}"
    echo "batched_rps_$name=$(calc "${result[batched.$name.rps]}" 0)"
    echo "batched_p50_us_$name=${result[batched.$name.p50]}"
    echo "batched_p99_us_$name=${result[batched.$name.p99]}"
    echo "avg_batch_$name=${result[batched.$name.avg_batch]}"
    echo "batch_compute_us_$name=${result[batched.$name.batch_compute_us]}"
    echo "server_cores_$name=${result[batched.$name.server_cores]}"
    echo "server_cpu_us_per_request_$name=${result[batched.$name.cpu_us]}"
    echo "busy_cores_$name=${result[batched.$name.busy_cores]}"
    echo "unbatched_rps_$name=$(calc "${result[unbatched.$name.rps]}" 0)"
    echo "unbatched_p50_us_$name=${result[unbatched.$name.p50]}"
    echo "unbatched_p99_us_$name=${result[unbatched.$name.p99]}"
    echo "unbatched_server_cpu_us_per_request_$name=${result[unbatched.$name.cpu_us]}"
    echo "ratio_served_offline_$name=${result[$name.ratio_offline]}"
    echo "ratio_batched_unbatched_$name=${result[$name.ratio_unbatched]}"
    echo "p99_bound_us_$name=${result[batched.$name.bound]}"
    echo "p99_bound_ok_$name=${result[batched.$name.bound_ok]}"
    echo "over_bound_pct_$name=${result[batched.$name.over_pct]}"
    echo "errors_$name=$((${result[batched.$name.errors]} + ${result[unbatched.$name.errors]}))"
  done
  for round in $(seq "$rounds"); do
    echo "round${round}_offline_samples_per_s=$(calc "${result[round$round.offline]}" 0)"
    echo "round${round}_served_samples_per_s=$(calc "${result[round$round.rps]}" 0)"
    echo "round${round}_ratio_served_offline=${result[round$round.ratio]}"
    echo "round${round}_p99_us=${result[round$round.p99]}"
    echo "round${round}_p99_bound_us=${result[round$round.bound]}"
    echo "round${round}_over_bound_pct=${result[round$round.over_pct]}"
    [ -n "$probe_bin" ] || continue
    echo "round${round}_stalled_ms_per_s=${result[round$round.stalled_ms]}"
    echo "round${round}_max_stall_us=${result[round$round.max_stall]}"
    echo "round${round}_stalls_per_s_ge_1ms=${result[round$round.stalls_1ms]}"
    echo "round${round}_stalls_per_s_over_slack=${result[round$round.stalls_slack]}"
    echo "round${round}_stall_floor_pct=${result[round$round.stall_floor]}"
  done
  echo "goal_ratio_served_offline_$goal_level=${result[goal.ratio_offline]}"
  echo "goal_rounds_p99_within_bound_$goal_level=$rounds_within/$rounds"
  echo "goal_median_p99_us_$goal_level=${result[goal.p99]}"
  echo "goal_median_p99_bound_us_$goal_level=${result[goal.bound]}"
  echo "goal_pooled_over_bound_pct_$goal_level=${result[goal.over_pct]}"
  [ -z "$probe_bin" ] || echo "goal_stall_floor_pct_$goal_level=${result[goal.stall_floor]}"
}

stop_process "$rampart_pid" 30
rampart_pid=""

echo
report
echo
echo "--- summary ---"
summary
if [ -n "$out_file" ]; then
  {
    snippet_header batching_bench.sh
    report
  } >"$out_file"
  log "markdown written to $out_file"
fi
