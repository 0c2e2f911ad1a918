#!/usr/bin/env bash
# Access control's cost on `simple` infer throughput: the same server with authentication (an API
# key on every request) and a 100-rule policy on, against access off (no `access:` section),
# measured side by side in the same run.
#
# wrk POSTs one fixed KServe v2 JSON infer request for `simple` over loopback keep-alive
# connections at 1 connection (1 wrk thread) and 64 connections (2 wrk threads). Both servers run
# for the whole benchmark and take turns in rounds (off, on, off, on, ...), so a slow phase of a
# shared machine weighs on both alike; each round gives one paired ratio on/off. The policy has
# 100 rules: 99 for other tenants, roles, actions and models (with conditions), and the one that
# permits the key's role to infer on `simple`. Reports throughput and p50/p99 latency (medians
# over the rounds) and the on/off throughput ratio (the median of the rounds'; goal >= 0.9). It
# reports; it does not assert.
#
# Usage: bench/access_bench.sh --binary build/rampart --repository examples/models
#                              [--duration 5] [--rounds 3] [--warmup 2] [--out FILE]
#                              [--start-timeout 120] [--keep-workdir]
# See docs/benchmarks.md.
set -euo pipefail

bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly bench_dir
readonly bench_name="access_bench"
# shellcheck source=bench/lib.sh
source "$bench_dir/lib.sh"
readonly model="simple"
readonly infer_path="/v2/models/${model}/infer"
# Load levels: name, wrk threads, connections.
readonly levels=("c1 1 1" "c64 2 64")

parse_common_options "$@"
check_common_options
require_tools wrk curl python3
check_rampart_options ""

off_pid=""
cleanup_pid_vars+=(off_pid)
make_workdir "logs, the policy, the store and raw wrk output"

request_file="$workdir/request.json"
write_simple_request "$request_file"

# The policy: 99 rules that do not decide this request (other tenants, roles, actions, models;
# some with conditions) and the one that does.
policy_file="$workdir/policy.yaml"
python3 - "$policy_file" <<'PY'
import sys
lines = ["roles:", "  - name: analyst"]
lines += [f"  - name: role{i}" for i in range(20)]
lines.append("rules:")
for i in range(99):
    kind = i % 4
    lines += [f"  - id: filler-{i}", "    effect: permit"]
    if kind == 0:
        lines += [f"    principal: {{tenant: tenant{i}, role: role{i % 20}}}",
                  "    action: [model:infer, model:read]"]
    elif kind == 1:
        lines += [f"    principal: {{role: role{i % 20}}}", "    action: model:infer",
                  f"    resource: {{type: model, name: \"model{i}-*\"}}",
                  "    when:", "      - principal.department == \"research\""]
    elif kind == 2:
        lines += ["    principal: {role: analyst}", f"    action: \"chat:*\"",
                  f"    resource: {{type: model, name: \"gpt-{i}\"}}"]
    else:
        lines += [f"    principal: {{tenant: tenant{i}}}", "    action: \"admin:*\"",
                  "    when:", "      - context.source_ip in [\"10.0.0.0/8\"]"]
lines += ["  - id: analysts-simple", "    effect: permit", "    principal: {role: analyst}",
          "    action: model:infer", "    resource: {type: model, name: simple}"]
with open(sys.argv[1], "w") as f:
    f.write("\n".join(lines) + "\n")
PY
rules="$(grep -c '^  - id:' "$policy_file")"

data_dir="$workdir/data"
on_config="$workdir/access.yaml"
cat >"$on_config" <<EOF2
access:
  data_dir: $data_dir
  policy_files: [$policy_file]
EOF2
"$binary" tenants create bench --data-dir "$data_dir" ||
  die "cannot create the tenant (see above)"
api_key="$("$binary" keys create --tenant bench --name wrk --role analyst --data-dir "$data_dir")"
[[ "$api_key" =~ ^rk_live_ ]] || die "rampart keys create printed '$api_key'"

# Access off first (its pid kept apart), then on.
rampart_extra_args=()
start_rampart "$binary" "$repository" "$start_timeout"
# shellcheck disable=SC2034  # read indirectly by lib.sh's cleanup (cleanup_pid_vars)
off_pid="$rampart_pid"
off_port="$rampart_port"
rampart_pid=""
rampart_extra_args=(--config "$on_config")
start_rampart "$binary" "$repository" "$start_timeout"
on_port="$rampart_port"

off_url="http://127.0.0.1:$off_port$infer_path"
on_url="http://127.0.0.1:$on_port$infer_path"
[ "$(http_status POST /dev/null "$on_url" -H 'Content-Type: application/json' \
  --data-binary "@$request_file")" = 401 ] ||
  die "the access-on server does not ask for credentials"
code="$(curl -s -o /dev/null -w '%{http_code}' -H "x-api-key: $api_key" \
  -H 'Content-Type: application/json' --data-binary "@$request_file" "$on_url")"
[ "$code" = 200 ] || die "the key is refused by the access-on server ($code)"

declare -A rps p50 p99 ratios
for level in "${levels[@]}"; do
  read -r name threads connections <<<"$level"
  if [ "$warmup" -gt 0 ]; then
    run_wrk "warm.off.$name" "$threads" "$connections" "$warmup" "$off_url" "$request_file"
    RAMPART_BENCH_API_KEY="$api_key" \
      run_wrk "warm.on.$name" "$threads" "$connections" "$warmup" "$on_url" "$request_file"
  fi
  for round in $(seq 1 "$rounds"); do
    run_wrk "off.$name.$round" "$threads" "$connections" "$duration" "$off_url" "$request_file"
    rps[off.$name]+=" $wrk_rps"; p50[off.$name]+=" $wrk_p50_us"; p99[off.$name]+=" $wrk_p99_us"
    off_rps="$wrk_rps"
    RAMPART_BENCH_API_KEY="$api_key" \
      run_wrk "on.$name.$round" "$threads" "$connections" "$duration" "$on_url" "$request_file"
    [ "$wrk_errors" -eq 0 ] || die "the access-on run had $wrk_errors errors (refused?)"
    rps[on.$name]+=" $wrk_rps"; p50[on.$name]+=" $wrk_p50_us"; p99[on.$name]+=" $wrk_p99_us"
    ratios[$name]+=" $(ratio "$wrk_rps" "$off_rps")"
    log "$name round $round: off $off_rps rps, on $wrk_rps rps"
  done
done

# shellcheck disable=SC2086  # the lists split on purpose
{
  snippet_header access_bench.sh
  echo "$(machine_line); $rules policy rules; ${rounds} rounds of ${duration} s"
  echo
  echo "| load | access | rps | p50 µs | p99 µs | on/off |"
  echo "|---|---|---:|---:|---:|---:|"
  for level in "${levels[@]}"; do
    read -r name _ _ <<<"$level"
    for mode in off on; do
      shown="-"
      [ "$mode" = on ] && shown="$(median ${ratios[$name]})"
      echo "| $name | $mode | $(calc "$(median ${rps[$mode.$name]})" 0) |" \
        "$(median ${p50[$mode.$name]}) | $(median ${p99[$mode.$name]}) | $shown |"
    done
  done
} | tee "${out_file:-/dev/null}"
