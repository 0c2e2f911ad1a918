#!/usr/bin/env bash
# The audit log's cost on `simple` infer throughput: the same server with the audit log off (no
# `audit:` section), batched (`audit: {sync: false}`: records written within max_delay_ms) and
# sync (`audit: {sync: true}`: each answer waits for its record's group commit and fsync),
# measured side by side in the same run. No access control on any of them (each request is
# recorded with its digests; the audit record is what is measured).
#
# wrk POSTs one fixed KServe v2 JSON infer request for `simple` over loopback keep-alive
# connections at 1 connection (1 wrk thread) and 64 connections (2 wrk threads). The three
# servers run for the whole benchmark and take turns in rounds (off, batched, sync, off, ...), so
# a slow phase of a shared machine weighs on all alike; each round gives paired ratios
# batched/off and sync/off. Reports throughput and p50/p99 latency (medians over the rounds) and
# the ratios (medians of the rounds'; goal for batched >= 0.9). It reports; it does not assert.
# Each server's store is SQLite in the work directory (on the machine's disk: sync's figures are
# those of its fsync).
#
# Usage: bench/audit_infer_bench.sh --binary build/rampart --repository examples/models
#                                   [--duration 5] [--rounds 3] [--warmup 2] [--out FILE]
#                                   [--start-timeout 120] [--keep-workdir]
# See docs/benchmarks.md.
set -euo pipefail

bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly bench_dir
readonly bench_name="audit_infer_bench"
# shellcheck source=bench/lib.sh
source "$bench_dir/lib.sh"
readonly model="simple"
readonly infer_path="/v2/models/${model}/infer"
# Load levels: name, wrk threads, connections.
readonly levels=("c1 1 1" "c64 2 64")
readonly modes=(off batched sync)

parse_common_options "$@"
check_common_options
require_tools wrk curl python3
check_rampart_options ""

off_pid=""
batched_pid=""
cleanup_pid_vars+=(off_pid batched_pid)
make_workdir "logs, the configs, the stores and raw wrk output"

request_file="$workdir/request.json"
write_simple_request "$request_file"

master_key="$workdir/master.key"
(umask 077; head -c 32 /dev/urandom >"$master_key")
declare -A port
for mode in "${modes[@]}"; do
  rampart_extra_args=(--data-dir "$workdir/data-$mode")
  if [ "$mode" != off ]; then
    sync=false
    [ "$mode" = sync ] && sync=true
    cat >"$workdir/$mode.yaml" <<EOF2
keyring: {master_key_file: $master_key}
audit: {sync: $sync, max_delay_ms: 10}
EOF2
    rampart_extra_args+=(--config "$workdir/$mode.yaml")
  fi
  start_rampart "$binary" "$repository" "$start_timeout"
  port[$mode]="$rampart_port"
  # The last one started stays rampart_pid (stopped by lib.sh); the others are kept apart, in
  # the variables cleanup_pid_vars names (read indirectly by lib.sh's cleanup).
  # shellcheck disable=SC2034
  if [ "$mode" = off ]; then off_pid="$rampart_pid"; rampart_pid=""; fi
  # shellcheck disable=SC2034
  if [ "$mode" = batched ]; then batched_pid="$rampart_pid"; rampart_pid=""; fi
done

declare -A rps p50 p99 ratios
for level in "${levels[@]}"; do
  read -r name threads connections <<<"$level"
  for mode in "${modes[@]}"; do
    url="http://127.0.0.1:${port[$mode]}$infer_path"
    [ "$warmup" -gt 0 ] &&
      run_wrk "warm.$mode.$name" "$threads" "$connections" "$warmup" "$url" "$request_file"
  done
  for round in $(seq 1 "$rounds"); do
    declare -A this_round=()
    for mode in "${modes[@]}"; do
      url="http://127.0.0.1:${port[$mode]}$infer_path"
      run_wrk "$mode.$name.$round" "$threads" "$connections" "$duration" "$url" "$request_file"
      [ "$wrk_errors" -eq 0 ] || die "the $mode run had $wrk_errors errors"
      rps[$mode.$name]+=" $wrk_rps"; p50[$mode.$name]+=" $wrk_p50_us"
      p99[$mode.$name]+=" $wrk_p99_us"
      this_round[$mode]="$wrk_rps"
    done
    ratios[batched.$name]+=" $(ratio "${this_round[batched]}" "${this_round[off]}")"
    ratios[sync.$name]+=" $(ratio "${this_round[sync]}" "${this_round[off]}")"
    log "$name round $round: off ${this_round[off]} rps, batched ${this_round[batched]}," \
      "sync ${this_round[sync]}"
  done
done

# Every answered request has its record: the stores hold what wrk counted (a sanity check).
for mode in batched sync; do
  records="$("$binary" audit export --data-dir "$workdir/data-$mode" | wc -l)"
  log "$mode: $records records in the store while running"
done

# shellcheck disable=SC2086  # the lists split on purpose
{
  snippet_header audit_infer_bench.sh
  echo "$(machine_line); ${rounds} rounds of ${duration} s; SQLite store on local disk"
  echo
  echo "| load | audit | rps | p50 µs | p99 µs | vs off |"
  echo "|---|---|---:|---:|---:|---:|"
  for level in "${levels[@]}"; do
    read -r name _ _ <<<"$level"
    for mode in "${modes[@]}"; do
      shown="-"
      [ "$mode" != off ] && shown="$(median ${ratios[$mode.$name]})"
      echo "| $name | $mode | $(calc "$(median ${rps[$mode.$name]})" 0) |" \
        "$(median ${p50[$mode.$name]}) | $(median ${p99[$mode.$name]}) | $shown |"
    done
  done
} | tee "${out_file:-/dev/null}"
