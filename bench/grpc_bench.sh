#!/usr/bin/env bash
# gRPC vs HTTP infer benchmark: the same Rampart, the same models and inputs, both protocols
# measured side by side in one run.
#
# For each model (`simple`, `mlp_classifier`) and load level (1 and 64 requests in flight), wrk
# POSTs the KServe v2 JSON request over keep-alive connections (1 connection with 1 wrk thread,
# 64 connections with 2), and bench/grpc_bench (build/bench/grpc_bench) sends the same inputs as
# raw_input_contents: unary ModelInfer calls multiplexed on one channel, then ModelStreamInfer
# with one stream per request in flight. A second unary driver, h2load (nghttp2's C load
# generator, one epoll loop like wrk), POSTs the same request as one pre-encoded gRPC message
# (grpc_bench --grpc-frame) on one connection with that many streams in flight; every h2load run
# is checked against the server's own count of successful `simple` inferences (h2load counts
# HTTP 2xx, and a gRPC error is a 200 with grpc-status in the trailers), and one sample answer's
# trailers are checked with curl. Reports throughput, p50/p99 latency, the server's CPU time per
# request (from /proc, so the load generators' own costs do not count), each client's own CPU
# time per request, and gRPC/HTTP ratios. It reports; it does not assert.
#
# Usage: bench/grpc_bench.sh --binary build/rampart --repository examples/models
#                            [--grpc-bench build/bench/grpc_bench] [--duration 10] [--warmup 2]
#                            [--out FILE] [--start-timeout 120] [--no-stream] [--keep-workdir]
#                            [--models "simple mlp_classifier"] [--grpc-thread-count N]
#                            [--no-h2load] [--grpc-cork-writes=false] [--grpc-engine core|native]
# See docs/benchmarks.md.
set -euo pipefail

bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly bench_dir
readonly bench_name="grpc_bench"
# shellcheck source=bench/lib.sh
source "$bench_dir/lib.sh"

# "s" for a count above one, for labels.
plural() { if [ "$1" -gt 1 ]; then echo s; fi; }
models=(simple mlp_classifier)
# Load levels: name, wrk threads, connections (= gRPC calls or streams in flight).
readonly levels=("c1 1 1" "c64 2 64")

binary=""
repository=""
grpc_bench=""
duration=10
warmup=2
out_file=""
start_timeout=120
streams=1
h2load_runs=1
keep_workdir=0

usage() {
  sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
}

while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="${2:?--binary needs a value}"; shift 2 ;;
    --repository) repository="${2:?--repository needs a value}"; shift 2 ;;
    --grpc-bench) grpc_bench="${2:?--grpc-bench needs a value}"; shift 2 ;;
    --duration) duration="${2:?--duration needs a value}"; shift 2 ;;
    --warmup) warmup="${2:?--warmup needs a value}"; shift 2 ;;
    --out) out_file="${2:?--out needs a value}"; shift 2 ;;
    --start-timeout) start_timeout="${2:?--start-timeout needs a value}"; shift 2 ;;
    --no-stream) streams=0; shift ;;
    --no-h2load) h2load_runs=0; shift ;;
    --models) read -r -a models <<<"${2:?--models needs a value}"; shift 2 ;;
    --grpc-thread-count)
      rampart_extra_args+=(--grpc-thread-count "${2:?--grpc-thread-count needs a value}")
      shift 2 ;;
    --grpc-cork-writes | --grpc-cork-writes=*) rampart_extra_args+=("$1"); shift ;;
    --grpc-engine)
      rampart_extra_args+=(--grpc-engine "${2:?--grpc-engine needs a value}")
      shift 2 ;;
    --keep-workdir) keep_workdir=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

readonly models
[ "${#models[@]}" -gt 0 ] || die "--models needs at least one model"
[[ "$duration" =~ ^[1-9][0-9]*$ ]] || die "--duration must be a positive integer, got '$duration'"
[[ "$warmup" =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer, got '$warmup'"
[[ "$start_timeout" =~ ^[1-9][0-9]*$ ]] || die "--start-timeout must be a positive integer"
require_tools wrk curl
[ "$h2load_runs" -eq 0 ] || require_tools h2load
require_executable "$binary" "Rampart binary" "build it first: make build"
[ -n "$grpc_bench" ] || grpc_bench="$(dirname "$binary")/bench/grpc_bench"
require_executable "$grpc_bench" "grpc_bench" "build it: cmake --build build --target grpc_bench"
[ -n "$repository" ] || die "--repository is required"
for model in "${models[@]}"; do
  [ -d "$repository/$model" ] || die "model repository '$repository' has no '$model' model"
done
binary="$(absolute_path "$binary")"
grpc_bench="$(absolute_path "$grpc_bench")"
repository="$(absolute_path "$repository")"

rampart_stop_grace=30
make_workdir "logs and raw output"

start_rampart "$binary" "$repository" "$start_timeout"
grpc_port="$(sed -n -E 's/^rampart: gRPC listening on .*:([0-9]+)$/\1/p' "$rampart_stdout" |
  head -n 1)"
[ -n "$grpc_port" ] || die "Rampart printed no 'rampart: gRPC listening on <addr>:<port>' line"
readonly grpc_target="127.0.0.1:$grpc_port"
log "gRPC on $grpc_target"
metrics_port="$(sed -n -E 's/^rampart: metrics listening on .*:([0-9]+)$/\1/p' "$rampart_stdout" |
  head -n 1)"
[ -n "$metrics_port" ] || die "Rampart printed no 'rampart: metrics listening on' line"
readonly metrics_url="http://127.0.0.1:$metrics_port/metrics"

clock_ticks="$(getconf CLK_TCK)"
# Rampart's user + system CPU time so far, in clock ticks.
server_ticks() { awk '{ print $14 + $15 }' "/proc/$rampart_pid/stat"; }
# The CPU time of a load generator: client_cpu COMMAND... runs COMMAND and writes its user +
# system CPU time in clock ticks (the waited-for child's, from /proc) to $client_ticks_file.
client_ticks_file="$workdir/client.ticks"
client_cpu() {
  # shellcheck disable=SC2016  # expanded by the inner shell
  bash -c '"$@"; status=$?; awk "{ print \$16 + \$17 }" /proc/$$/stat >"$0"; exit $status' \
    "$client_ticks_file" "$@"
}
# client_cpu_us REQUESTS: the last client_cpu run's CPU time per request, in µs.
client_cpu_us() { cpu_us_per_request 0 "$(cat "$client_ticks_file")" "$1"; }
# The server's count of successful inferences of model $1 (Prometheus, Triton's counter).
server_successes() {
  curl -sS --max-time 10 "$metrics_url" |
    awk -v m="model=\"$1\"" '/^nv_inference_request_success\{/ && index($0, m) { n += $NF }
      END { printf "%d", n }'
}
# cpu_us_per_request TICKS_BEFORE TICKS_AFTER REQUESTS
cpu_us_per_request() {
  awk -v a="$1" -v b="$2" -v n="$3" -v hz="$clock_ticks" \
    'BEGIN { if (n > 0) printf "%.1f", (b - a) * 1e6 / hz / n; else print "nan" }'
}

# run_grpc LABEL MODEL CONCURRENCY [--stream]: a warm-up run, then the measured one; sets
# grpc_rps, grpc_p50_us, grpc_p99_us, grpc_errors, grpc_cpu_us from it. Output is kept as
# $workdir/grpc.LABEL.txt.
run_grpc() {
  local label="$1" model="$2" concurrency="$3"
  shift 3
  local raw="$workdir/grpc.$label.txt"
  if [ "$warmup" -gt 0 ]; then
    "$grpc_bench" --target "$grpc_target" --model "$model" --concurrency "$concurrency" \
      --duration "$warmup" --warmup 0 "$@" >"$raw.warmup" 2>&1 ||
      { cat "$raw.warmup" >&2; die "grpc_bench failed ($label warm-up)"; }
  fi
  local before after
  before="$(server_ticks)"
  client_cpu "$grpc_bench" --target "$grpc_target" --model "$model" \
    --concurrency "$concurrency" --duration "$duration" --warmup 0 "$@" >"$raw" 2>&1 ||
    { cat "$raw" >&2; die "grpc_bench failed ($label)"; }
  after="$(server_ticks)"
  local line
  line="$(grep -E '^rps=' "$raw" | tail -n 1)"
  [ -n "$line" ] || { cat "$raw" >&2; die "cannot parse grpc_bench output ($label)"; }
  grpc_rps="$(sed -E 's/.*rps=([0-9.]+).*/\1/' <<<"$line")"
  grpc_p50_us="$(sed -E 's/.*p50_us=([0-9.]+).*/\1/' <<<"$line")"
  grpc_p99_us="$(sed -E 's/.*p99_us=([0-9.]+).*/\1/' <<<"$line")"
  grpc_errors="$(sed -E 's/.*errors=([0-9]+).*/\1/' <<<"$line")"
  local requests
  requests="$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$line")"
  grpc_cpu_us="$(cpu_us_per_request "$before" "$after" "$requests")"
  grpc_client_cpu_us="$(client_cpu_us "$requests")"
  [ "$grpc_errors" -eq 0 ] || log "WARNING: $label: $grpc_errors failed gRPC requests"
}

# h2load_command CONCURRENCY SECONDS FRAME LOG: sets h2load_cmd, h2load's command line for
# unary ModelInfer calls: one connection with CONCURRENCY streams in flight, each POSTing FRAME
# (one gRPC message), each request's latency logged to LOG.
h2load_command() {
  h2load_cmd=(h2load -c 1 -m "$1" -D "$2" -d "$3" -H 'content-type: application/grpc'
    -H 'te: trailers' --log-file="$4"
    "http://$grpc_target/inference.GRPCInferenceService/ModelInfer")
}

# run_h2load LABEL MODEL CONCURRENCY FRAME: as run_grpc, with h2load as the client; sets the
# same variables. A request counts when h2load saw a 2xx and the server counted that many
# successful inferences of MODEL during the run (dies otherwise: the answers were not real).
run_h2load() {
  local label="$1" model="$2" concurrency="$3" frame="$4"
  local raw="$workdir/h2load.$label.txt" requests_log="$workdir/h2load.$label.log"
  if [ "$warmup" -gt 0 ]; then
    h2load_command "$concurrency" "$warmup" "$frame" /dev/null
    "${h2load_cmd[@]}" >"$raw.warmup" 2>&1 ||
      { cat "$raw.warmup" >&2; die "h2load failed ($label warm-up)"; }
  fi
  h2load_command "$concurrency" "$duration" "$frame" "$requests_log"
  local before after successes_before successes
  successes_before="$(server_successes "$model")"
  before="$(server_ticks)"
  client_cpu "${h2load_cmd[@]}" >"$raw" 2>&1 || { cat "$raw" >&2; die "h2load failed ($label)"; }
  after="$(server_ticks)"
  successes=$(($(server_successes "$model") - successes_before))
  local requests seconds
  requests="$(awk '/^status codes:/ { print $3 }' "$raw")"
  seconds="$(awk '/^finished in/ { sub(/s,$/, "", $3); print $3 }' "$raw")"
  if [ -z "$requests" ] || [ -z "$seconds" ]; then
    cat "$raw" >&2
    die "cannot parse h2load ($label)"
  fi
  [ "$successes" -ge "$requests" ] ||
    die "h2load ($label) counted $requests 2xx answers but the server only $successes" \
      "successful inferences: gRPC errors in the trailers (raw output: $raw)"
  grpc_rps="$(calc "$requests / $seconds" 1)"
  grpc_errors="$(awk '/^requests:/ { print $10 + $12 + $14 }' "$raw")"
  grpc_errors=$((grpc_errors + $(awk '/^status codes:/ { print $5 + $7 + $9 }' "$raw")))
  read -r grpc_p50_us grpc_p99_us < <(awk '{ print $3 }' "$requests_log" | sort -n |
    awk '{ v[NR] = $1 } END {
      if (NR == 0) { print "nan nan"; exit }
      i = int(0.50 * NR) + 1; j = int(0.99 * NR) + 1; if (j > NR) j = NR
      printf "%.1f %.1f\n", v[i], v[j] }')
  grpc_cpu_us="$(cpu_us_per_request "$before" "$after" "$requests")"
  grpc_client_cpu_us="$(client_cpu_us "$requests")"
  rm -f "$requests_log"
  [ "$grpc_errors" -eq 0 ] || log "WARNING: $label: $grpc_errors failed h2load requests"
}

# check_grpc_frame FRAME: one ModelInfer call with FRAME through curl (HTTP/2 without TLS);
# dies unless its trailers say grpc-status 0 and the answer is one gRPC message.
check_grpc_frame() {
  local headers="$workdir/curl.headers" answer="$workdir/curl.answer"
  curl -sS --max-time 10 --http2-prior-knowledge -H 'content-type: application/grpc' \
    -H 'te: trailers' --data-binary "@$1" -D "$headers" -o "$answer" \
    "http://$grpc_target/inference.GRPCInferenceService/ModelInfer" ||
    die "curl could not POST the gRPC frame $1"
  grep -qiE '^grpc-status: 0\s*$' "$headers" ||
    die "the gRPC frame $1 was not answered grpc-status 0: $(tr -d '\r' <"$headers" | tr '\n' ' ')"
  local size length
  size="$(stat -c %s "$answer")"
  length="$(od -An -tu1 -j1 -N4 "$answer" | awk '{ print (($1 * 256 + $2) * 256 + $3) * 256 + $4 }')"
  [ "$size" -gt 5 ] || die "the answer to the gRPC frame $1 is empty"
  [ "$((length + 5))" -eq "$size" ] ||
    die "the answer to the gRPC frame $1 is not one gRPC message ($size bytes)"
}

declare -A result
for model in "${models[@]}"; do
  body="$workdir/$model.json"
  frame="$workdir/$model.grpc"
  "$grpc_bench" --target "$grpc_target" --model "$model" --http-body "$body" \
    --grpc-frame "$frame" || die "grpc_bench could not prepare the request for $model"
  [ "$h2load_runs" -eq 0 ] || check_grpc_frame "$frame"
  url="http://127.0.0.1:$rampart_port/v2/models/$model/infer"
  code="$(http_status POST "$workdir/$model.response" "$url" \
    -H 'Content-Type: application/json' --data-binary "@$body")"
  [ "$code" = 200 ] || die "POST $url answered $code (body: $(head -c 300 "$workdir/$model.response"))"

  for level in "${levels[@]}"; do
    read -r name threads connections <<<"$level"
    key="$model.$name"
    log "$key: HTTP (wrk -t$threads -c$connections), ${warmup}s warm-up + ${duration}s"
    [ "$warmup" -eq 0 ] ||
      run_wrk "$key.warmup" "$threads" "$connections" "$warmup" "$url" "$body"
    before="$(server_ticks)"
    wrk_prefix=(client_cpu)
    run_wrk "$key" "$threads" "$connections" "$duration" "$url" "$body"
    wrk_prefix=()
    result[$key.http.cpu]="$(cpu_us_per_request "$before" "$(server_ticks)" "$wrk_requests")"
    result[$key.http.client]="$(client_cpu_us "$wrk_requests")"
    result[$key.http.rps]="$wrk_rps"
    result[$key.http.p50]="$wrk_p50_us"
    result[$key.http.p99]="$wrk_p99_us"
    result[$key.http.errors]="$wrk_errors"

    log "$key: gRPC unary, $connections in flight on one channel"
    run_grpc "$key.unary" "$model" "$connections"
    result[$key.unary.rps]="$grpc_rps"
    result[$key.unary.p50]="$grpc_p50_us"
    result[$key.unary.p99]="$grpc_p99_us"
    result[$key.unary.errors]="$grpc_errors"
    result[$key.unary.cpu]="$grpc_cpu_us"
    result[$key.unary.client]="$grpc_client_cpu_us"

    if [ "$h2load_runs" -eq 1 ]; then
      log "$key: gRPC unary by h2load, $connections stream$(plural "$connections") on one connection"
      run_h2load "$key.h2load" "$model" "$connections" "$frame"
      result[$key.h2load.rps]="$grpc_rps"
      result[$key.h2load.p50]="$grpc_p50_us"
      result[$key.h2load.p99]="$grpc_p99_us"
      result[$key.h2load.errors]="$grpc_errors"
      result[$key.h2load.cpu]="$grpc_cpu_us"
      result[$key.h2load.client]="$grpc_client_cpu_us"
    fi

    if [ "$streams" -eq 1 ]; then
      log "$key: gRPC streaming, $connections stream$(plural "$connections"), one request each"
      run_grpc "$key.stream" "$model" "$connections" --stream
      result[$key.stream.rps]="$grpc_rps"
      result[$key.stream.p50]="$grpc_p50_us"
      result[$key.stream.p99]="$grpc_p99_us"
      result[$key.stream.errors]="$grpc_errors"
      result[$key.stream.cpu]="$grpc_cpu_us"
      result[$key.stream.client]="$grpc_client_cpu_us"
    fi
  done
done


report() {
  echo "gRPC vs HTTP infer benchmark: same server, same inputs (HTTP: JSON via wrk;" \
    "gRPC: raw_input_contents via grpc_bench, and unary calls also via h2load)"
  machine_line
  echo "runs: ${warmup}s warm-up + ${duration}s measured per protocol, model and level"
  echo
  echo "| model | in flight | protocol | req/s | p50 (µs) | p99 (µs) | server CPU (µs/req) |" \
    "client CPU (µs/req) |"
  echo "|---|---:|---|---:|---:|---:|---:|---:|"
  local model level name connections protocol label key errors
  for model in "${models[@]}"; do
    for level in "${levels[@]}"; do
      read -r name _ connections <<<"$level"
      key="$model.$name"
      for protocol in http unary h2load stream; do
        [ -n "${result[$key.$protocol.rps]:-}" ] || continue
        case "$protocol" in
          http) label="HTTP/1.1 JSON ($connections conn)" ;;
          unary) label="gRPC unary (1 channel)" ;;
          h2load) label="gRPC unary by h2load (1 conn)" ;;
          stream) label="gRPC stream ($connections stream$(plural "$connections"))" ;;
        esac
        errors="${result[$key.$protocol.errors]}"
        [ "$errors" -eq 0 ] || label="$label ($errors errors)"
        printf '| %s | %s | %s | %.0f | %s | %s | %s | %s |\n' "$model" "$connections" \
          "$label" "${result[$key.$protocol.rps]}" "${result[$key.$protocol.p50]}" \
          "${result[$key.$protocol.p99]}" "${result[$key.$protocol.cpu]}" \
          "${result[$key.$protocol.client]}"
      done
      for protocol in unary h2load stream; do
        [ -n "${result[$key.$protocol.rps]:-}" ] || continue
        printf '| %s | %s | **gRPC %s / HTTP** | **%s** | %s | %s | %s | %s |\n' "$model" \
          "$connections" "$protocol" \
          "$(ratio "${result[$key.$protocol.rps]}" "${result[$key.http.rps]}")" \
          "$(ratio "${result[$key.$protocol.p50]}" "${result[$key.http.p50]}")" \
          "$(ratio "${result[$key.$protocol.p99]}" "${result[$key.http.p99]}")" \
          "$(ratio "${result[$key.$protocol.cpu]}" "${result[$key.http.cpu]}")" \
          "$(ratio "${result[$key.$protocol.client]}" "${result[$key.http.client]}")"
      done
    done
  done
  echo
  echo "Ratios are gRPC / HTTP: throughput higher is better for gRPC; latency and server CPU"
  echo "lower is better. Server CPU = Rampart's user + system time during the measured run"
  echo "divided by the requests completed in it (clock-tick resolution); client CPU the same for"
  echo "the load generator's process (wrk, grpc_bench or h2load)."
}

summary() {
  local model level name key protocol
  for model in "${models[@]}"; do
    for level in "${levels[@]}"; do
      name="${level%% *}"
      key="$model.$name"
      for protocol in http unary h2load stream; do
        [ -n "${result[$key.$protocol.rps]:-}" ] || continue
        echo "${model}_${name}_${protocol}_rps=$(calc "${result[$key.$protocol.rps]}" 0)"
        echo "${model}_${name}_${protocol}_p50_us=${result[$key.$protocol.p50]}"
        echo "${model}_${name}_${protocol}_p99_us=${result[$key.$protocol.p99]}"
        echo "${model}_${name}_${protocol}_server_cpu_us=${result[$key.$protocol.cpu]}"
        echo "${model}_${name}_${protocol}_client_cpu_us=${result[$key.$protocol.client]}"
        [ "$protocol" = http ] && continue
        echo "${model}_${name}_ratio_${protocol}_http_rps=$(ratio "${result[$key.$protocol.rps]}" \
          "${result[$key.http.rps]}")"
      done
    done
  done
}

echo
report
echo
summary
if [ -n "$out_file" ]; then
  { snippet_header grpc_bench.sh; report; } >"$out_file"
  log "markdown written to $out_file"
fi
