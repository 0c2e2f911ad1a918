#!/usr/bin/env bash
# HTTP infer benchmark: Rampart vs an nginx baseline, measured side by side in the same run.
#
# wrk POSTs one fixed KServe v2 JSON infer request for the model `simple` over loopback keep-alive
# connections, at 1 connection (1 wrk thread) and 64 connections (2 wrk threads). The baseline is
# a private nginx answering the same POST with a static body byte-identical to Rampart's response.
# The two servers take turns in rounds (Rampart, nginx, Rampart, nginx, ...), so a slow phase of a
# shared machine weighs on both alike; each round gives one paired throughput ratio.
# Reports throughput, p50/p99 latency (medians over the rounds), Rampart/nginx ratios (the median
# of the rounds' ratios) and Rampart's internal per-request overhead (handle time minus backend
# compute_infer time). It reports; it does not assert.
#
# Usage: bench/http_bench.sh --binary build/rampart --repository examples/models
#                            [--duration 5] [--rounds 3] [--warmup 2] [--out FILE]
#                            [--nginx-workers auto] [--serve-args "FLAGS"]
#                            [--nginx PATH] [--start-timeout 120] [--nginx-only] [--keep-workdir]
# See docs/benchmarks.md.
set -euo pipefail

bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly bench_dir
readonly bench_name="http_bench"
# shellcheck source=bench/lib.sh
source "$bench_dir/lib.sh"
readonly model="simple"
readonly infer_path="/v2/models/${model}/infer"
# Load levels: name, wrk threads, connections.
readonly levels=("c1 1 1" "c64 2 64")

serve_args=""
nginx_workers="auto"
nginx_bin=""
nginx_only=0

usage() {
  sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
  cat <<'EOF'

Options:
  --binary PATH          Rampart binary (required unless --nginx-only)
  --repository DIR       model repository holding `simple` (required unless --nginx-only)
  --duration SECONDS     measured wrk run per server, load level and round (default 5)
  --rounds N             measured runs per server and load level, alternating (default 3)
  --warmup SECONDS       unmeasured wrk run per server and load level, first (default 2)
  --out FILE             also write the results as a markdown snippet to FILE
  --nginx-workers N      nginx worker_processes (default auto = one per core)
  --serve-args "FLAGS"   more `rampart serve` flags, e.g. "--http-sched-batch false"
                         (split into words on spaces)
  --nginx PATH           nginx binary (default: nginx on PATH, else /usr/sbin/nginx)
  --start-timeout SECS   how long Rampart may take to load and listen (default 120)
  --nginx-only           measure only the nginx half, with a synthetic response body
  --keep-workdir         keep the temp dir with logs and raw wrk output
EOF
}

while [ $# -gt 0 ]; do
  common_option "$@"
  if [ "$option_shift" -gt 0 ]; then shift "$option_shift"; continue; fi
  case "$1" in
    --nginx-workers) nginx_workers="${2:?--nginx-workers needs a value}"; shift 2 ;;
    --serve-args) serve_args="${2?--serve-args needs a value}"; shift 2 ;;
    --nginx) nginx_bin="${2:?--nginx needs a value}"; shift 2 ;;
    --nginx-only) nginx_only=1; shift ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

check_common_options
# shellcheck disable=SC2206  # split into words on purpose
rampart_extra_args=($serve_args)
[[ "$nginx_workers" =~ ^(auto|[1-9][0-9]*)$ ]] || die "--nginx-workers must be auto or a count"

# ---------------------------------------------------------------------------------------------
# Prerequisites.

require_tools wrk curl python3
if [ -z "$nginx_bin" ]; then
  nginx_bin="$(command -v nginx 2>/dev/null || true)"
  [ -n "$nginx_bin" ] || { [ -x /usr/sbin/nginx ] && nginx_bin=/usr/sbin/nginx; } || true
fi
if [ -z "$nginx_bin" ] || [ ! -x "$nginx_bin" ]; then
  die "nginx not found (install nginx-light: tools/install_deps.sh), or pass --nginx PATH"
fi

if [ "$nginx_only" -eq 0 ]; then
  check_rampart_options " (or use --nginx-only)"
fi

nginx_pid=""
cleanup_pid_vars+=(nginx_pid)
make_workdir "logs and raw wrk output"

free_port() {
  python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# ---------------------------------------------------------------------------------------------
# Request body: INPUT0 = 0..15, INPUT1 = all ones.

request_file="$workdir/request.json"
write_simple_request "$request_file"

# ---------------------------------------------------------------------------------------------
# Rampart.

# Stops Rampart with SIGTERM and sets served and handle_ns from its exit line
# `rampart: http served=N handle_ns_total=T` (both empty when the line is missing).
stop_rampart() {
  stop_process "$rampart_pid" 30
  rampart_pid=""
  local pattern='s/^rampart: http served=([0-9]+) handle_ns_total=([0-9]+).*/\1 \2/p'
  read -r served handle_ns <<<"$(sed -n -E "$pattern" "$rampart_stdout" | tail -n 1)"
}

# Prints the mean µs per request of model_stats[0].inference_stats compute_infer, queue and
# success (the whole request inside the core), each over the server's life, or nothing on failure.
model_stats_us() {
  local stats_file="$workdir/stats.$rampart_run.json"
  local stats_url="http://127.0.0.1:$rampart_port/v2/models/$model/stats"
  [ "$(http_status GET "$stats_file" "$stats_url")" = 200 ] || return 0
  python3 - "$stats_file" <<'EOF' 2>/dev/null || true
import json, sys
stats = json.load(open(sys.argv[1]))["model_stats"][0]["inference_stats"]
def mean_us(name):
    duration = stats.get(name, {})
    count = duration.get("count", 0)
    return "%.1f" % (duration["ns"] / count / 1000) if count else "nan"
if stats["compute_infer"]["count"]:
    print(mean_us("compute_infer"), mean_us("queue"), mean_us("success"))
EOF
}

# ---------------------------------------------------------------------------------------------
# The response body both servers send.

response_file="$workdir/response.json"
if [ "$nginx_only" -eq 0 ]; then
  start_rampart "$binary" "$repository" "$start_timeout"
  code="$(http_status POST "$response_file" "http://127.0.0.1:$rampart_port$infer_path" \
    -H 'Content-Type: application/json' --data-binary "@$request_file")"
  if [ "$code" != 200 ]; then
    echo "--- response body ---" >&2
    head -c 2000 "$response_file" >&2 2>/dev/null || true
    echo >&2
    die "Rampart answered POST $infer_path with HTTP $code, expected 200"
  fi
  python3 - "$response_file" <<'EOF' || die "Rampart's infer response is not the expected JSON"
import json, sys
response = json.load(open(sys.argv[1]))
names = sorted(output["name"] for output in response["outputs"])
if names != ["OUTPUT0", "OUTPUT1"]:
    sys.exit("outputs are %s, expected OUTPUT0 and OUTPUT1" % names)
EOF
else
  # What Rampart is expected to answer (OUTPUT0 = sum, OUTPUT1 = difference), for validating the
  # nginx half without a Rampart binary.
  python3 - "$response_file" <<'EOF'
import json, sys
input0, input1 = list(range(16)), [1] * 16
body = {"model_name": "simple", "model_version": "1", "outputs": [
    {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16],
     "data": [a + b for a, b in zip(input0, input1)]},
    {"name": "OUTPUT1", "datatype": "INT32", "shape": [1, 16],
     "data": [a - b for a, b in zip(input0, input1)]},
]}
with open(sys.argv[1], "w") as f:
    f.write(json.dumps(body, separators=(",", ":")))
EOF
fi
response_bytes="$(wc -c <"$response_file" | tr -d ' ')"
log "infer response body: $response_bytes bytes"

# ---------------------------------------------------------------------------------------------
# nginx baseline.

nginx_prefix="$workdir/nginx"
mkdir -p "$nginx_prefix"
# When run as root, nginx workers drop to an unprivileged user; they need to traverse the prefix.
chmod 755 "$workdir" "$nginx_prefix"
nginx_port="$(free_port)"
python3 - "$bench_dir/nginx_baseline.conf.in" "$nginx_prefix/nginx.conf" "$response_file" \
  "$nginx_prefix" "$nginx_port" "$nginx_workers" "$infer_path" <<'EOF' ||
import sys
template, conf, body_file, prefix, port, workers, path = sys.argv[1:]
body = open(body_file, "rb").read().decode("utf-8")
if "$" in body:
    sys.exit("the response body contains '$', which nginx would expand as a variable")
body = body.replace("\\", "\\\\").replace("'", "\\'")
text = open(template).read()
for key, value in (("PREFIX", prefix), ("PORT", port), ("WORKERS", workers),
                   ("INFER_PATH", path), ("BODY", body)):
    text = text.replace("@%s@" % key, value)
open(conf, "w").write(text)
EOF
  die "could not render the nginx config"

"$nginx_bin" -t -q -p "$nginx_prefix" -c "$nginx_prefix/nginx.conf" -e "$nginx_prefix/error.log" \
  2>"$workdir/nginx.test" || { cat "$workdir/nginx.test" >&2; die "nginx rejected its config"; }
log "starting nginx on 127.0.0.1:$nginx_port (worker_processes $nginx_workers)"
"$nginx_bin" -p "$nginx_prefix" -c "$nginx_prefix/nginx.conf" -e "$nginx_prefix/error.log" \
  >"$workdir/nginx.stdout" 2>"$workdir/nginx.stderr" &
nginx_pid=$!
nginx_body="$workdir/nginx_response.json"
deadline=$((SECONDS + 10))
while :; do
  code="$(http_status POST "$nginx_body" "http://127.0.0.1:$nginx_port$infer_path" \
    -H 'Content-Type: application/json' --data-binary "@$request_file")"
  [ "$code" = 200 ] && break
  if ! is_running "$nginx_pid" || [ "$SECONDS" -ge "$deadline" ]; then
    cat "$workdir/nginx.stderr" "$nginx_prefix/error.log" >&2 2>/dev/null || true
    die "nginx baseline did not answer POST $infer_path with 200 (last status $code)"
  fi
  sleep 0.1
done
cmp -s "$response_file" "$nginx_body" ||
  die "nginx body ($(wc -c <"$nginx_body") bytes) differs from Rampart's ($response_bytes bytes)"
log "nginx answers POST with 200 and the identical $response_bytes-byte body"

# ---------------------------------------------------------------------------------------------
# wrk.

servers=(nginx)
[ "$nginx_only" -eq 1 ] || servers=(rampart nginx)

# server_url SERVER: the infer URL of `rampart` or `nginx`.
server_url() {
  if [ "$1" = rampart ]; then
    echo "http://127.0.0.1:$rampart_port$infer_path"
  else
    echo "http://127.0.0.1:$nginx_port$infer_path"
  fi
}

declare -A result
for level in "${levels[@]}"; do
  read -r name threads connections <<<"$level"
  # A fresh Rampart per load level, so each level's exit counters cover only its own traffic.
  [ "$nginx_only" -eq 1 ] || [ -n "$rampart_pid" ] || start_rampart "$binary" "$repository" \
    "$start_timeout"
  if [ "$warmup" -gt 0 ]; then
    for server in "${servers[@]}"; do
      log "$server $name: warm-up ${warmup}s"
      run_wrk "$server.$name.warmup" "$threads" "$connections" "$warmup" "$(server_url "$server")" \
        "$request_file"
    done
  fi
  declare -A runs=()
  for ((round = 1; round <= rounds; round++)); do
    for server in "${servers[@]}"; do
      log "$server $name: round $round/$rounds, measuring ${duration}s (wrk -t$threads" \
        "-c$connections)"
      run_wrk "$server.$name.r$round" "$threads" "$connections" "$duration" \
        "$(server_url "$server")" "$request_file"
      runs[$server.rps]+=" $wrk_rps"
      runs[$server.p50]+=" $wrk_p50_us"
      runs[$server.p99]+=" $wrk_p99_us"
      runs[$server.errors]=$((${runs[$server.errors]:-0} + wrk_errors))
    done
    # This round's Rampart/nginx throughput ratio (nginx ran last).
    [ "$nginx_only" -eq 1 ] || runs[ratios]+=" $(ratio "${runs[rampart.rps]##* }" "$wrk_rps")"
  done
  for server in "${servers[@]}"; do
    for key in rps p50 p99; do
      # shellcheck disable=SC2086  # the runs are a space-separated list
      result[$server.$name.$key]="$(median ${runs[$server.$key]})"
    done
    result[$server.$name.errors]="${runs[$server.errors]}"
  done
  [ "$nginx_only" -eq 0 ] || continue

  # shellcheck disable=SC2086  # a space-separated list
  result[$name.ratio_rps]="$(calc "$(median ${runs[ratios]})" 2)"
  # shellcheck disable=SC2001
  result[$name.ratios]="$(sed 's/^ //; s/ /, /g' <<<"${runs[ratios]}")"

  read -r compute_us queue_us success_us <<<"$(model_stats_us)" || true
  stop_rampart

  # Overhead = handle time per request - backend compute_infer time per request, both over the
  # server's whole life (readiness checks, warm-up and measurement), since the handle counters
  # are only printed at exit. outside_us = handle - success: time spent in the HTTP front end
  # rather than in the core (queue + compute).
  result[rampart.$name.served]="${served:-n/a}"
  handle_us="nan"; overhead_us="nan"; outside_us="nan"
  if [ -n "${served:-}" ] && [ "$served" -gt 0 ]; then
    handle_us="$(calc "$handle_ns / $served / 1000" 1)"
  else
    log "WARNING: Rampart printed no 'rampart: http served=N handle_ns_total=T' line on SIGTERM"
  fi
  if [ -z "${compute_us:-}" ]; then
    log "WARNING: no compute_infer statistics from GET /v2/models/$model/stats"
    compute_us="nan"; queue_us="nan"; success_us="nan"
  fi
  if [ "$handle_us" != nan ] && [ "$compute_us" != nan ]; then
    overhead_us="$(calc "$handle_us - $compute_us" 1)"
  fi
  if [ "$handle_us" != nan ] && [ "$success_us" != nan ]; then
    outside_us="$(calc "$handle_us - $success_us" 1)"
  fi
  result[rampart.$name.handle_us]="$handle_us"
  result[rampart.$name.compute_us]="$compute_us"
  result[rampart.$name.queue_us]="$queue_us"
  result[rampart.$name.overhead_us]="$overhead_us"
  result[rampart.$name.outside_us]="$outside_us"
done

# ---------------------------------------------------------------------------------------------
# Report.

describe_level() {
  local threads connections
  read -r _ threads connections <<<"$1"
  echo "$connections conn / $threads wrk thread$([ "$threads" -gt 1 ] && echo s)"
}

report() {
  echo "HTTP infer benchmark: POST $infer_path, JSON, loopback keep-alive"
  machine_line
  echo "runs: ${warmup}s warm-up, then $rounds rounds of ${duration}s measured per server and" \
    "level, the servers alternating; req/s, p50 and p99 are medians over the rounds;" \
    "response body $response_bytes bytes;" \
    "nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///') worker_processes $nginx_workers" \
    "${serve_args:+; serve flags: $serve_args}"
  echo
  echo "| load | server | req/s | p50 (µs) | p99 (µs) |"
  echo "|---|---|---:|---:|---:|"
  local level name flag errors
  for level in "${levels[@]}"; do
    name="${level%% *}"
    for server in rampart nginx; do
      [ -n "${result[$server.$name.rps]:-}" ] || continue
      flag=""
      errors="${result[$server.$name.errors]}"
      [ "$errors" -eq 0 ] || flag=" ($errors errors)"
      printf '| %s | %s%s | %.0f | %s | %s |\n' "$(describe_level "$level")" "$server" "$flag" \
        "${result[$server.$name.rps]}" "${result[$server.$name.p50]}" "${result[$server.$name.p99]}"
    done
    if [ "$nginx_only" -eq 0 ]; then
      printf '| %s | **rampart/nginx** | **%s** | %s | %s |\n' "$(describe_level "$level")" \
        "${result[$name.ratio_rps]}" \
        "$(ratio "${result[rampart.$name.p50]}" "${result[nginx.$name.p50]}")" \
        "$(ratio "${result[rampart.$name.p99]}" "${result[nginx.$name.p99]}")"
    fi
  done
  if [ "$nginx_only" -eq 0 ]; then
    echo
    echo "rampart/nginx req/s is the median of the rounds' paired ratios:"
    for level in "${levels[@]}"; do
      name="${level%% *}"
      echo "$(describe_level "$level"): ${result[$name.ratios]}."
    done
    echo
    echo "Rampart per request, mean over each server's life: handle = handle_ns_total/served;"
    echo "queue, compute_infer, success from /stats; overhead = handle - compute_infer;"
    echo "outside core = handle - success."
    echo
    echo "| load | requests served | handle (µs) | queue (µs) | compute_infer (µs) |" \
      "overhead (µs) | outside core (µs) |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    for level in "${levels[@]}"; do
      name="${level%% *}"
      printf '| %s | %s | %s | %s | %s | **%s** | %s |\n' "$(describe_level "$level")" \
        "${result[rampart.$name.served]}" "${result[rampart.$name.handle_us]}" \
        "${result[rampart.$name.queue_us]}" "${result[rampart.$name.compute_us]}" \
        "${result[rampart.$name.overhead_us]}" "${result[rampart.$name.outside_us]}"
    done
    echo
    echo "Goals: throughput >= 0.70 x nginx; internal overhead < 50 µs."
  fi
}

summary() {
  local level name
  for level in "${levels[@]}"; do
    name="${level%% *}"
    if [ "$nginx_only" -eq 0 ]; then
      echo "rampart_rps_$name=$(calc "${result[rampart.$name.rps]}" 0)"
      echo "rampart_p50_us_$name=${result[rampart.$name.p50]}"
      echo "rampart_p99_us_$name=${result[rampart.$name.p99]}"
    fi
    echo "nginx_rps_$name=$(calc "${result[nginx.$name.rps]}" 0)"
    echo "nginx_p50_us_$name=${result[nginx.$name.p50]}"
    echo "nginx_p99_us_$name=${result[nginx.$name.p99]}"
    if [ "$nginx_only" -eq 0 ]; then
      echo "ratio_throughput_$name=${result[$name.ratio_rps]}"
      echo "ratio_throughput_rounds_$name=${result[$name.ratios]// /}"
      echo "ratio_p50_$name=$(ratio "${result[rampart.$name.p50]}" "${result[nginx.$name.p50]}")"
      echo "ratio_p99_$name=$(ratio "${result[rampart.$name.p99]}" "${result[nginx.$name.p99]}")"
      echo "overhead_us_$name=${result[rampart.$name.overhead_us]}"
      echo "outside_core_us_$name=${result[rampart.$name.outside_us]}"
      echo "errors_$name=$((${result[rampart.$name.errors]} + ${result[nginx.$name.errors]}))"
    else
      echo "errors_$name=${result[nginx.$name.errors]}"
    fi
  done
}

echo
report
echo
echo "--- summary ---"
summary
if [ -n "$out_file" ]; then
  {
    snippet_header http_bench.sh
    report
  } >"$out_file"
  log "markdown written to $out_file"
fi
