#!/usr/bin/env bash
# The cost of metrics on the hot path: infer throughput on `simple` over HTTP keep-alive with
# Prometheus metrics (counters + histograms) on and with --allow-metrics=false, in the same
# run, alternating rounds so drift on the shared machine hits both alike. Prints the ratio
# on/off (goal >= 0.97).
#
#   bench/metrics_bench.sh --binary build/rampart --repository examples/models [--duration 5]
#                          [--rounds 3] [--connections 64]
set -euo pipefail
bench_name=metrics_bench
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"

binary="" repository="" duration=5 rounds=3 connections=64
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --repository) repository="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --connections) connections="$2"; shift 2 ;;
    *) die "unknown option $1" ;;
  esac
done
require_tools wrk curl
require_executable "$binary" "--binary" "run make build"
[ -d "$repository" ] || die "--repository '$repository' is not a folder"
binary="$(absolute_path "$binary")"
repository="$(absolute_path "$repository")"

make_workdir "logs"

body="$workdir/body.json"
zeros="$(printf '1,%.0s' $(seq 16))"
echo "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16],\"datatype\":\"INT32\",\"data\":[${zeros%,}]},{\"name\":\"INPUT1\",\"shape\":[1,16],\"datatype\":\"INT32\",\"data\":[${zeros%,}]}]}" >"$body"

declare -A total=([on]=0 [off]=0)
for ((round = 1; round <= rounds; round++)); do
  for mode in on off; do
    if [ "$mode" = on ]; then rampart_extra_args=(); else rampart_extra_args=(--allow-metrics false); fi
    start_rampart "$binary" "$repository" 120
    url="http://127.0.0.1:$rampart_port/v2/models/simple/infer"
    run_wrk "warmup.$mode.$round" 2 "$connections" 2 "$url" "$body"
    run_wrk "$mode.$round" 2 "$connections" "$duration" "$url" "$body"
    log "round $round metrics $mode: $wrk_rps req/s"
    total[$mode]="$(calc "${total[$mode]} + $wrk_rps" 1)"
    stop_process "$rampart_pid" 10
    rampart_pid=""
  done
done
on="$(calc "${total[on]} / $rounds" 0)"
off="$(calc "${total[off]} / $rounds" 0)"
echo "| metrics | req/s (mean of $rounds x ${duration}s, $connections connections) |"
echo "|---|---:|"
echo "| on | $on |"
echo "| off | $off |"
echo "metrics_on_rps=$on"
echo "metrics_off_rps=$off"
echo "ratio_metrics_on_off=$(ratio "$on" "$off")"
