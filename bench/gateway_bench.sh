#!/usr/bin/env bash
# OpenAI gateway benchmark: what Rampart's gateway (/v1) adds to a call, against nginx as a
# plain reverse proxy, both in front of the same fake upstream, measured side by side in one run.
#
# The fake upstream is a private nginx answering POST /v1/chat/completions at once from memory
# with a canned chat.completion, or (for `Accept: text/event-stream`) a canned stream of
# chat.completion.chunk events (bench/gateway_upstream.conf.in). Three ways to reach it:
#   direct   the upstream itself (a): the baseline of the added latency;
#   rampart  `rampart serve --config <yaml>` with an empty model repository, routing the model
#            `bench` to the upstream (b);
#   nginx    a second private nginx as a reverse proxy: keep-alive upstream connections, HTTP/1.1,
#            proxy_buffering off (c; bench/gateway_proxy.conf.in).
# The three take turns in rounds (direct, rampart, nginx, direct, ...), so a slow phase of a
# shared machine weighs on all alike. Measured:
#   chat, 1 connection (bench/first_event_probe, one call after another): p50 and p99 latency;
#     added = b - a and c - a, each the median of the rounds' paired differences;
#   streamed chat, 1 connection (the same probe): time to the first event and to the whole
#     answer, p50 and p99; added as above;
#   chat, 64 connections (wrk -t2 -c64): requests/s (rampart/nginx, the median of the rounds'
#     paired ratios).
# For each, the proxy's CPU time per request (user + system of every thread, from /proc; the
# upstream's not included), which a busy machine spoils less than wall clock. (wrk is not used
# at 1 connection: it adds samples for every stall as if requests had queued behind it, which on
# a shared machine makes its p99 the stalls' rather than the proxies'.)
# Every line shows a ratio against nginx measured in the same run. It reports; it does not
# assert.
#
# Usage: bench/gateway_bench.sh --binary build/rampart --probe build/bench/first_event_probe
#                               [--duration 3] [--rounds 3] [--warmup 1] [--out FILE]
#                               [--nginx-workers auto] [--serve-args "FLAGS"] [--nginx PATH]
#                               [--keep-workdir]
# See docs/benchmarks.md.
set -euo pipefail

bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly bench_dir
readonly bench_name="gateway_bench"
# shellcheck source=bench/lib.sh
source "$bench_dir/lib.sh"
readonly chat_path="/v1/chat/completions"
readonly targets=(direct rampart nginx)

binary=""
probe=""
duration=3
rounds=3
warmup=1
out_file=""
nginx_workers="auto"
serve_args=""
nginx_bin=""
keep_workdir=0

usage() {
  sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
  cat <<'EOF'

Options:
  --binary PATH          Rampart binary (required)
  --probe PATH           bench/first_event_probe binary (required; built by make build)
  --duration SECONDS     measured run per target, measure and round (default 3)
  --rounds N             measured runs per target and measure, alternating (default 3)
  --warmup SECONDS       unmeasured run per target and measure, first (default 1)
  --out FILE             also write the results as a markdown snippet to FILE
  --nginx-workers N      worker_processes of both nginx servers (default auto = one per core)
  --serve-args "FLAGS"   more `rampart serve` flags (split into words on spaces)
  --nginx PATH           nginx binary (default: nginx on PATH, else /usr/sbin/nginx)
  --keep-workdir         keep the temp dir with configs, logs and raw wrk output
EOF
}

while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="${2:?--binary needs a value}"; shift 2 ;;
    --probe) probe="${2:?--probe needs a value}"; shift 2 ;;
    --duration) duration="${2:?--duration needs a value}"; shift 2 ;;
    --rounds) rounds="${2:?--rounds needs a value}"; shift 2 ;;
    --warmup) warmup="${2:?--warmup needs a value}"; shift 2 ;;
    --out) out_file="${2:?--out needs a value}"; shift 2 ;;
    --nginx-workers) nginx_workers="${2:?--nginx-workers needs a value}"; shift 2 ;;
    --serve-args) serve_args="${2?--serve-args needs a value}"; shift 2 ;;
    --nginx) nginx_bin="${2:?--nginx needs a value}"; shift 2 ;;
    --keep-workdir) keep_workdir=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done

[[ "$duration" =~ ^[1-9][0-9]*$ ]] || die "--duration must be a positive integer, got '$duration'"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer, got '$rounds'"
[[ "$warmup" =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer, got '$warmup'"
[[ "$nginx_workers" =~ ^(auto|[1-9][0-9]*)$ ]] || die "--nginx-workers must be auto or a count"

require_tools wrk curl python3
require_executable "$binary" "--binary" "make build"
require_executable "$probe" "--probe" "make build builds build/bench/first_event_probe"
binary="$(absolute_path "$binary")"
probe="$(absolute_path "$probe")"
if [ -z "$nginx_bin" ]; then
  nginx_bin="$(command -v nginx 2>/dev/null || true)"
  [ -n "$nginx_bin" ] || { [ -x /usr/sbin/nginx ] && nginx_bin=/usr/sbin/nginx; } || true
fi
if [ -z "$nginx_bin" ] || [ ! -x "$nginx_bin" ]; then
  die "nginx not found (install nginx-light: tools/install_deps.sh), or pass --nginx PATH"
fi

upstream_pid=""
proxy_pid=""
cleanup_pid_vars+=(upstream_pid proxy_pid)
make_workdir "configs, logs and raw wrk output"
# When run as root, nginx workers drop to an unprivileged user; they need to traverse the workdir.
chmod 755 "$workdir"

free_port() {
  python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# ---------------------------------------------------------------------------------------------
# Requests and the canned answers.

python3 - "$workdir" <<'EOF'
import json, sys
out = sys.argv[1]
compact = lambda value: json.dumps(value, separators=(",", ":"))
request = {"model": "bench", "messages": [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Say something short about latency."}],
    "max_tokens": 32, "temperature": 0}
open(f"{out}/chat.json", "w").write(compact(request))
open(f"{out}/chat_stream.json", "w").write(compact(dict(request, stream=True)))

created = 1764547200
words = ["Latency", " is", " the", " time", " a", " request", " waits", "."]
text = "".join(words)
usage = {"prompt_tokens": 24, "completion_tokens": len(words),
         "total_tokens": 24 + len(words)}
completion = {"id": "chatcmpl-bench", "object": "chat.completion", "created": created,
              "model": "bench", "system_fingerprint": "fp_bench",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                           "logprobs": None, "finish_reason": "stop"}],
              "usage": usage}
open(f"{out}/completion.json", "w").write(compact(completion))

def chunk(delta, finish=None, with_usage=False):
    value = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": created,
             "model": "bench", "system_fingerprint": "fp_bench",
             "choices": [{"index": 0, "delta": delta, "logprobs": None,
                          "finish_reason": finish}]}
    if with_usage:
        value["choices"] = []
        value["usage"] = usage
    return "data: " + compact(value) + "\n\n"
stream = chunk({"role": "assistant", "content": ""})
stream += "".join(chunk({"content": word}) for word in words)
stream += chunk({}, finish="stop") + chunk({}, with_usage=True) + "data: [DONE]\n\n"
open(f"{out}/stream.sse", "w").write(stream)
EOF

# render TEMPLATE OUT KEY=VALUE... ; a value starting with @ names a file whose text becomes an
# nginx single-quoted string's contents.
render() {
  python3 - "$@" <<'EOF' || die "could not render $1"
import sys
template, out, *pairs = sys.argv[1:]
text = open(template).read()
for pair in pairs:
    key, value = pair.split("=", 1)
    if value.startswith("@"):
        value = open(value[1:]).read()
        if "$" in value:
            sys.exit("%s contains '$', which nginx would expand as a variable" % value[1:])
        value = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    text = text.replace("@%s@" % key, value)
open(out, "w").write(text)
EOF
}

# start_nginx NAME: starts nginx on $workdir/NAME/nginx.conf; sets nginx_started_pid.
start_nginx() {
  local prefix="$workdir/$1"
  chmod 755 "$prefix"
  "$nginx_bin" -t -q -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" \
    2>"$prefix/test.log" || { cat "$prefix/test.log" >&2; die "nginx rejected the $1 config"; }
  "$nginx_bin" -p "$prefix" -c "$prefix/nginx.conf" -e "$prefix/error.log" \
    >"$prefix/stdout" 2>"$prefix/stderr" &
  nginx_started_pid=$!
}

# wait_for_200 URL WHAT PID: polls a non-streamed chat call until it answers 200.
wait_for_200() {
  local url="$1" what="$2" pid="$3" deadline=$((SECONDS + 10)) code
  while :; do
    code="$(http_status POST /dev/null "$url" -H 'Content-Type: application/json' \
      --data-binary "@$workdir/chat.json")"
    [ "$code" = 200 ] && return 0
    if ! is_running "$pid" || [ "$SECONDS" -ge "$deadline" ]; then
      die "$what did not answer POST $chat_path with 200 (last status $code)"
    fi
    sleep 0.1
  done
}

upstream_port="$(free_port)"
mkdir -p "$workdir/upstream"
render "$bench_dir/gateway_upstream.conf.in" "$workdir/upstream/nginx.conf" \
  "PREFIX=$workdir/upstream" "PORT=$upstream_port" "WORKERS=$nginx_workers" \
  "COMPLETION=@$workdir/completion.json" "STREAM=@$workdir/stream.sse"
start_nginx upstream
upstream_pid="$nginx_started_pid"
wait_for_200 "http://127.0.0.1:$upstream_port$chat_path" "the fake upstream" "$upstream_pid"

proxy_port="$(free_port)"
mkdir -p "$workdir/proxy"
render "$bench_dir/gateway_proxy.conf.in" "$workdir/proxy/nginx.conf" \
  "PREFIX=$workdir/proxy" "PORT=$proxy_port" "WORKERS=$nginx_workers" \
  "UPSTREAM_PORT=$upstream_port"
start_nginx proxy
proxy_pid="$nginx_started_pid"
wait_for_200 "http://127.0.0.1:$proxy_port$chat_path" "the nginx proxy" "$proxy_pid"
log "fake upstream on 127.0.0.1:$upstream_port, nginx proxy on 127.0.0.1:$proxy_port"

# Rampart: the gateway alone (an empty model repository), the model `bench` on the upstream.
mkdir -p "$workdir/models"
cat >"$workdir/rampart.yaml" <<EOF
gateway:
  upstreams:
    - name: fake
      url: http://127.0.0.1:$upstream_port/v1
  models:
    - name: bench
      endpoints:
        - {upstream: fake}
EOF
# shellcheck disable=SC2206  # split into words on purpose
rampart_extra_args=(--config "$workdir/rampart.yaml" $serve_args)
start_rampart "$binary" "$workdir/models" 30
wait_for_200 "http://127.0.0.1:$rampart_port$chat_path" "Rampart's gateway" "$rampart_pid"

target_port() {
  case "$1" in
    direct) echo "$upstream_port" ;;
    rampart) echo "$rampart_port" ;;
    nginx) echo "$proxy_port" ;;
  esac
}

# Every target answers both calls with the upstream's content: the same choices, and a stream
# of events ending in [DONE].
for target in "${targets[@]}"; do
  url="http://127.0.0.1:$(target_port "$target")$chat_path"
  code="$(http_status POST "$workdir/check.$target.json" "$url" \
    -H 'Content-Type: application/json' --data-binary "@$workdir/chat.json")"
  [ "$code" = 200 ] || die "$target answered the chat call with $code"
  code="$(http_status POST "$workdir/check.$target.sse" "$url" -H 'Accept: text/event-stream' \
    -H 'Content-Type: application/json' --data-binary "@$workdir/chat_stream.json")"
  [ "$code" = 200 ] || die "$target answered the streamed chat call with $code"
  python3 - "$workdir" "$target" <<'EOF' || die "$target's answers are not the upstream's"
import json, sys
out, target = sys.argv[1:]
expected = json.load(open(f"{out}/completion.json"))
got = json.load(open(f"{out}/check.{target}.json"))
if got.get("choices") != expected["choices"]:
    sys.exit(f"choices differ: {got.get('choices')}")
events = [line[6:] for line in open(f"{out}/check.{target}.sse").read().split("\n")
          if line.startswith("data: ")]
if not events or events[-1] != "[DONE]":
    sys.exit(f"the stream does not end in [DONE]: {events[-1:]}")
text = "".join((json.loads(e)["choices"] or [{}])[0].get("delta", {}).get("content") or ""
               for e in events[:-1])
if text != expected["choices"][0]["message"]["content"]:
    sys.exit(f"streamed text is {text!r}")
EOF
done
log "all three answer the chat and streamed chat calls with the upstream's content"

# ---------------------------------------------------------------------------------------------
# CPU time.

# CPU seconds (user + system, every thread) of the processes given, so far.
cpu_seconds() {
  local pid ticks=0
  for pid in "$@"; do
    ticks=$((ticks + $(sed 's/^.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }')))
  done
  awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", t / hz }'
}

# The pids of an nginx: its master and workers.
nginx_pids() { echo "$1" "$(ps -o pid= --ppid "$1" | tr '\n' ' ')"; }

# The processes doing a target's proxying work (none for direct).
proxy_pids() {
  case "$1" in
    direct) ;;
    rampart) echo "$rampart_pid" ;;
    nginx) nginx_pids "$proxy_pid" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# Measures.

declare -A runs result
# measure_wrk TARGET LEVEL THREADS CONNECTIONS SECONDS RECORD: one wrk run; when RECORD is 1,
# appends its figures to runs[TARGET.LEVEL.*].
measure_wrk() {
  local target="$1" level="$2" threads="$3" connections="$4" seconds="$5" record="$6"
  local url pids proxy_before upstream_before proxy_cpu upstream_cpu
  url="http://127.0.0.1:$(target_port "$target")$chat_path"
  read -r -a pids <<<"$(proxy_pids "$target")"
  local upstream
  read -r -a upstream <<<"$(nginx_pids "$upstream_pid")"
  proxy_before="$(cpu_seconds "${pids[@]}")"
  upstream_before="$(cpu_seconds "${upstream[@]}")"
  run_wrk "$target.$level.$record.$SECONDS" "$threads" "$connections" "$seconds" "$url" \
    "$workdir/chat.json"
  proxy_cpu="$(calc "$(cpu_seconds "${pids[@]}") - $proxy_before" 3)"
  upstream_cpu="$(calc "$(cpu_seconds "${upstream[@]}") - $upstream_before" 3)"
  [ "$record" -eq 1 ] || return 0
  runs[$target.$level.rps]+=" $wrk_rps"
  runs[$target.$level.p50]+=" $wrk_p50_us"
  runs[$target.$level.p99]+=" $wrk_p99_us"
  runs[$target.$level.cpu]+=" $(calc "$proxy_cpu * 1e6 / $wrk_requests" 1)"
  runs[$target.$level.upstream_cpu]+=" $(calc "$upstream_cpu * 1e6 / $wrk_requests" 1)"
  runs[$target.$level.errors]=$((${runs[$target.$level.errors]:-0} + wrk_errors))
}

# measure_probe TARGET KIND SECONDS RECORD: first_event_probe on chat calls, streamed when KIND
# is stream; when RECORD is 1, appends its figures to runs[TARGET.KIND.*].
measure_probe() {
  local target="$1" kind="$2" seconds="$3" record="$4" raw flags=() body="chat.json"
  local pids proxy_before proxy_cpu key value
  raw="$workdir/probe.$target.$kind.$record.$SECONDS.txt"
  [ "$kind" = chat ] || { flags=(--accept-sse); body="chat_stream.json"; }
  read -r -a pids <<<"$(proxy_pids "$target")"
  proxy_before="$(cpu_seconds "${pids[@]}")"
  "$probe" --port "$(target_port "$target")" --path "$chat_path" --body-file "$workdir/$body"     "${flags[@]}" --seconds "$seconds" --warmup-seconds 0.2 >"$raw" 2>&1 ||
    { cat "$raw" >&2; die "first_event_probe failed ($target, $kind)"; }
  proxy_cpu="$(calc "$(cpu_seconds "${pids[@]}") - $proxy_before" 3)"
  [ "$record" -eq 1 ] || return 0
  for key in first_byte_p50_us first_byte_p99_us whole_p50_us whole_p99_us requests errors \
    $([ "$kind" = chat ] || echo first_event_p50_us first_event_p99_us); do
    value="$(sed -n "s/^$key=//p" "$raw")"
    [ -n "$value" ] || { cat "$raw" >&2; die "first_event_probe printed no $key ($target)"; }
    if [ "$key" = errors ]; then
      [ "$value" -eq 0 ] || log "WARNING: $target: $value $kind calls were not answered 200"
      runs[$target.$kind.errors]=$((${runs[$target.$kind.errors]:-0} + value))
    else
      runs[$target.$kind.$key]+=" $value"
    fi
  done
  # The probe's warm-up requests are not in `requests`; CPU per request is over all of them.
  value="$(awk -v r="$(sed -n 's/^requests=//p' "$raw")" -v s="$seconds" \
    'BEGIN { printf "%.0f", r * (s + 0.2) / s }')"
  runs[$target.$kind.cpu]+=" $(calc "$proxy_cpu * 1e6 / $value" 1)"
}

# measure KIND TARGET SECONDS RECORD
measure() {
  case "$1" in
    chat | stream) measure_probe "$2" "$1" "$3" "$4" ;;
    c64) measure_wrk "$2" c64 2 64 "$3" "$4" ;;
  esac
}

for kind in chat stream c64; do
  if [ "$warmup" -gt 0 ]; then
    log "$kind: warm-up ${warmup}s per target"
    for target in "${targets[@]}"; do measure "$kind" "$target" "$warmup" 0; done
  fi
  for ((round = 1; round <= rounds; round++)); do
    log "$kind: round $round/$rounds, ${duration}s per target"
    for target in "${targets[@]}"; do measure "$kind" "$target" "$duration" 1; done
  done
done

# last_n LIST N: the Nth (1-based) word of a space-separated list.
nth() { awk -v n="$2" '{ print $n }' <<<"$1"; }

# paired KEY_A KEY_B OP: the median over the rounds of a OP b, each round's own pair.
paired() {
  local a="${runs[$1]}" b="${runs[$2]}" op="$3" values=() i
  for ((i = 1; i <= rounds; i++)); do
    if [ "$op" = "-" ]; then
      values+=("$(calc "$(nth "$a" "$i") - $(nth "$b" "$i")" 1)")
    else
      values+=("$(ratio "$(nth "$a" "$i")" "$(nth "$b" "$i")")")
    fi
  done
  median "${values[@]}"
}

# rounds_of KEY_A KEY_B OP: the rounds' values of a OP b, comma-separated.
rounds_of() {
  local a="${runs[$1]}" b="${runs[$2]}" op="$3" values=() i
  for ((i = 1; i <= rounds; i++)); do
    if [ "$op" = "-" ]; then
      values+=("$(calc "$(nth "$a" "$i") - $(nth "$b" "$i")" 0)")
    else
      values+=("$(ratio "$(nth "$a" "$i")" "$(nth "$b" "$i")")")
    fi
  done
  local joined
  joined="$(printf '%s, ' "${values[@]}")"
  echo "${joined%, }"
}

for key in "${!runs[@]}"; do
  # shellcheck disable=SC2086  # a space-separated list
  [[ "$key" == *.errors ]] && result[$key]="${runs[$key]}" || result[$key]="$(median ${runs[$key]})"
done
for kind in chat stream; do
  for key in whole_p50_us whole_p99_us first_byte_p50_us first_byte_p99_us first_event_p50_us \
    first_event_p99_us; do
    [ -n "${runs[direct.$kind.$key]:-}" ] || continue
    for target in rampart nginx; do
      result[$target.$kind.$key.added]="$(paired "$target.$kind.$key" "direct.$kind.$key" -)"
    done
  done
done
result[c64.ratio]="$(calc "$(paired rampart.c64.rps nginx.c64.rps /)" 2)"
result[c64.ratios]="$(rounds_of rampart.c64.rps nginx.c64.rps /)"
errors=0
for key in "${!result[@]}"; do
  [[ "$key" == *.errors ]] && errors=$((errors + result[$key]))
done

# ---------------------------------------------------------------------------------------------
# Report.

f0() { calc "$1" 0; }

# latency_row LABEL KEY: a latency line with the added times and their ratio.
latency_row() {
  printf '| %s | %s | %s | %s | %s | %s | **%s** (added) |\n' "$1" \
    "$(f0 "${result[direct.$2]}")" "$(f0 "${result[rampart.$2]}")" \
    "$(f0 "${result[nginx.$2]}")" "$(f0 "${result[rampart.$2.added]}")" \
    "$(f0 "${result[nginx.$2.added]}")" \
    "$(ratio "${result[rampart.$2.added]}" "${result[nginx.$2.added]}")"
}

# cpu_row LABEL KEY: the proxies' CPU per request and their ratio.
cpu_row() {
  printf '| %s | | %s | %s | | | **%s** |\n' "$1" "${result[rampart.$2]}" "${result[nginx.$2]}" \
    "$(ratio "${result[rampart.$2]}" "${result[nginx.$2]}")"
}

report() {
  echo "OpenAI gateway benchmark: POST $chat_path over loopback keep-alive connections to a fake"
  echo "upstream answering at once (a canned chat.completion, or a canned stream of" \
    "$(grep -c '^data:' "$workdir/stream.sse") events)"
  machine_line
  echo "runs: ${warmup}s warm-up, then $rounds rounds of ${duration}s per target and measure," \
    "the targets alternating; figures are medians over the rounds, added = the median of the" \
    "rounds' paired differences against direct;" \
    "nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///') worker_processes $nginx_workers" \
    "(upstream and proxy)${serve_args:+; serve flags: $serve_args}"
  echo
  echo "| measure | direct (a) | rampart (b) | nginx proxy (c) | rampart added (b - a)" \
    "| nginx added (c - a) | **rampart/nginx** |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  latency_row "chat, 1 conn: p50 (µs)" chat.whole_p50_us
  latency_row "chat, 1 conn: p99 (µs)" chat.whole_p99_us
  cpu_row "chat, 1 conn: proxy CPU µs/request" chat.cpu
  latency_row "streamed chat, 1 conn: first event p50 (µs)" stream.first_event_p50_us
  latency_row "streamed chat, 1 conn: first event p99 (µs)" stream.first_event_p99_us
  latency_row "streamed chat, 1 conn: whole p50 (µs)" stream.whole_p50_us
  latency_row "streamed chat, 1 conn: whole p99 (µs)" stream.whole_p99_us
  cpu_row "streamed chat, 1 conn: proxy CPU µs/request" stream.cpu
  printf '| chat, 64 conn: req/s | %s | %s | %s | | | **%s** |\n' \
    "$(f0 "${result[direct.c64.rps]}")" "$(f0 "${result[rampart.c64.rps]}")" \
    "$(f0 "${result[nginx.c64.rps]}")" "${result[c64.ratio]}"
  cpu_row "chat, 64 conn: proxy CPU µs/request" c64.cpu
  printf '| chat, 64 conn: upstream CPU µs/request | %s | %s | %s | | | %s |\n' \
    "${result[direct.c64.upstream_cpu]}" "${result[rampart.c64.upstream_cpu]}" \
    "${result[nginx.c64.upstream_cpu]}" \
    "$(ratio "${result[rampart.c64.upstream_cpu]}" "${result[nginx.c64.upstream_cpu]}")"
  echo
  echo "Per round: rampart/nginx req/s at 64 conn: ${result[c64.ratios]};" \
    "rampart added chat p99 at 1 conn (µs):" \
    "$(rounds_of rampart.chat.whole_p99_us direct.chat.whole_p99_us -)."
  echo "Proxy CPU: user + system time of the proxy's processes (Rampart; nginx's master and" \
    "workers), not the upstream's, per request answered."
  [ "$errors" -eq 0 ] || echo "ERRORS: $errors non-2xx answers or socket errors (see the log)."
  echo
  local p99_added="${result[rampart.chat.whole_p99_us.added]}" ratio_rps="${result[c64.ratio]}"
  echo "Goals: added p99 < 1000 µs: $(f0 "$p99_added") µs," \
    "$(awk -v v="$p99_added" 'BEGIN { print (v < 1000) ? "met" : "missed" }');" \
    "throughput >= 0.80 x nginx: $ratio_rps," \
    "$(awk -v v="$ratio_rps" 'BEGIN { print (v >= 0.8) ? "met" : "missed" }')."
}

summary() {
  local target
  for target in "${targets[@]}"; do
    echo "${target}_p50_us_c1=${result[$target.chat.whole_p50_us]}"
    echo "${target}_p99_us_c1=${result[$target.chat.whole_p99_us]}"
    echo "${target}_first_event_p50_us=${result[$target.stream.first_event_p50_us]}"
    echo "${target}_first_event_p99_us=${result[$target.stream.first_event_p99_us]}"
    echo "${target}_rps_c64=$(f0 "${result[$target.c64.rps]}")"
  done
  for target in rampart nginx; do
    echo "${target}_added_p50_us_c1=${result[$target.chat.whole_p50_us.added]}"
    echo "${target}_added_p99_us_c1=${result[$target.chat.whole_p99_us.added]}"
    echo "${target}_added_first_event_p50_us=${result[$target.stream.first_event_p50_us.added]}"
    echo "${target}_added_first_event_p99_us=${result[$target.stream.first_event_p99_us.added]}"
    echo "${target}_cpu_us_per_request_c1=${result[$target.chat.cpu]}"
    echo "${target}_cpu_us_per_request_stream_c1=${result[$target.stream.cpu]}"
    echo "${target}_cpu_us_per_request_c64=${result[$target.c64.cpu]}"
  done
  echo "ratio_throughput_c64=${result[c64.ratio]}"
  echo "ratio_throughput_rounds_c64=${result[c64.ratios]// /}"
  echo "ratio_cpu_per_request_c64=$(ratio "${result[rampart.c64.cpu]}" "${result[nginx.c64.cpu]}")"
  echo "errors=$errors"
}

echo
report
echo
echo "--- summary ---"
summary
if [ -n "$out_file" ]; then
  {
    snippet_header gateway_bench.sh
    report
  } >"$out_file"
  log "markdown written to $out_file"
fi
