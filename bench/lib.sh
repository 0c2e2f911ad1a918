# Shell helpers shared by the bench/*.sh scripts; source it, do not run it.
#
# The sourcing script sets `bench_name` (the prefix of its messages) before sourcing, and calls
# make_workdir (a private temp dir for logs and raw wrk output, and the exit trap) before
# start_rampart or run_wrk.
#
# Globals are this file's interface (inputs set by the sourcing script, results it reads), so
# checking this file alone cannot see their other half:
# shellcheck shell=bash disable=SC2034,SC2154

bench_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rampart_extra_args=()
readonly bench_lib_dir

die() {
  echo "${bench_name}: error: $*" >&2
  exit 1
}
log() { echo "${bench_name}: $*" >&2; }

# Dies naming the first tool in $@ that is not on PATH.
require_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 ||
      die "'$tool' not found on PATH (install it: tools/install_deps.sh installs wrk and curl)"
  done
}

# Dies unless $1 is an executable file; $2 names it in the message, $3 says how to get it.
require_executable() {
  local path="$1" what="$2" hint="$3"
  [ -n "$path" ] || die "$what is required"
  [ -e "$path" ] || die "$what '$path' does not exist ($hint)"
  if [ ! -f "$path" ] || [ ! -x "$path" ]; then die "$what '$path' is not an executable file"; fi
}

# Prints the absolute form of an existing path.
absolute_path() {
  if [ -d "$1" ]; then
    (cd "$1" && pwd)
  else
    echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
  fi
}

# True while the process exists and is not a zombie (kill -0 also succeeds on zombies).
is_running() {
  local state
  state="$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" || return 1
  [ -n "$state" ] && [ "$state" != "Z" ]
}

# Sends SIGTERM, waits up to $2 seconds, then SIGKILL; reaps the child.
stop_process() {
  local pid="$1" grace="$2" i
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    is_running "$pid" || break
    sleep 0.1
  done
  if is_running "$pid"; then
    log "process $pid ignored SIGTERM for ${grace}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

# Prints the HTTP status of a request; the body goes to $2 (or /dev/null).
http_status() {
  local method="$1" body_out="$2" url="$3"
  shift 3
  curl -sS --max-time 10 -o "$body_out" -w '%{http_code}' -X "$method" "$@" "$url" 2>/dev/null ||
    echo "000"
}

# ---------------------------------------------------------------------------------------------
# Options of the infer benchmarks on `simple` (access_bench, audit_infer_bench, http_bench).

# The defaults of the options every infer benchmark takes.
binary=""
repository=""
duration=5
rounds=3
warmup=2
out_file=""
start_timeout=120
keep_workdir=0

# Prints the sourcing script's header comment (from its second line to `set -euo`); a script
# with more to say defines its own usage after sourcing this file.
usage() {
  sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
}

# common_option ARG...: when $1 is one of the shared options (--binary, --repository,
# --duration, --rounds, --warmup, --out, --start-timeout, --keep-workdir, -h/--help), sets its
# variable and sets option_shift to the words it took (1 or 2); otherwise option_shift is 0.
# --help calls the sourcing script's `usage` and exits 0.
common_option() {
  option_shift=2
  case "$1" in
    --binary) binary="${2:?--binary needs a value}" ;;
    --repository) repository="${2:?--repository needs a value}" ;;
    --duration) duration="${2:?--duration needs a value}" ;;
    --rounds) rounds="${2:?--rounds needs a value}" ;;
    --warmup) warmup="${2:?--warmup needs a value}" ;;
    --out) out_file="${2:?--out needs a value}" ;;
    --start-timeout) start_timeout="${2:?--start-timeout needs a value}" ;;
    --keep-workdir) keep_workdir=1; option_shift=1 ;;
    -h | --help) usage; exit 0 ;;
    *) option_shift=0 ;;
  esac
}

# parse_common_options ARG...: the whole command line of a script that takes only the shared
# options; dies (after `usage`) on any other argument.
parse_common_options() {
  while [ $# -gt 0 ]; do
    common_option "$@"
    [ "$option_shift" -gt 0 ] || { usage >&2; die "unknown argument: $1"; }
    shift "$option_shift"
  done
}

# Dies unless --duration, --rounds, --warmup and --start-timeout hold sensible counts.
check_common_options() {
  [[ "$duration" =~ ^[1-9][0-9]*$ ]] ||
    die "--duration must be a positive integer, got '$duration'"
  [[ "$rounds" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer, got '$rounds'"
  [[ "$warmup" =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer, got '$warmup'"
  [[ "$start_timeout" =~ ^[1-9][0-9]*$ ]] || die "--start-timeout must be a positive integer"
}

# check_rampart_options [HINT]: dies unless --binary names an executable and --repository a
# directory holding the sourcing script's `model` (HINT is appended to the "is required"
# messages); then makes both absolute.
check_rampart_options() {
  local hint="${1:-}"
  [ -n "$binary" ] || die "--binary is required$hint"
  [ -n "$repository" ] || die "--repository is required$hint"
  require_executable "$binary" "Rampart binary" "build it first: make build"
  [ -d "$repository/$model" ] || die "model repository '$repository' has no '$model' model"
  binary="$(absolute_path "$binary")"
  repository="$(absolute_path "$repository")"
}

# write_simple_request FILE: writes the KServe v2 JSON infer request for `simple` the infer
# benchmarks POST (INPUT0 = 0..15, INPUT1 = all ones, INT32 [1, 16]).
write_simple_request() {
  python3 - "$1" <<'PY'
import json, sys
body = {"inputs": [
    {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))},
    {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}]}
with open(sys.argv[1], "w") as f:
    f.write(json.dumps(body, separators=(",", ":")))
PY
}

# ---------------------------------------------------------------------------------------------
# Work dir and exit.

# Names of variables holding pids the sourcing script started besides Rampart, stopped on exit
# (read then, so the pids may change meanwhile): e.g. cleanup_pid_vars+=(nginx_pid).
cleanup_pid_vars=()
# Seconds Rampart gets to drain on exit before SIGKILL.
rampart_stop_grace=10
workdir=""
workdir_contents=""

# make_workdir WHAT: creates `workdir` and traps the script's end (normal, error, INT, TERM):
# Rampart and every process in cleanup_pid_vars are stopped, and the workdir is removed unless
# the script's keep_workdir is 1 or the script failed; then "WHAT kept in <dir>" is logged.
make_workdir() {
  workdir_contents="$1"
  workdir="$(mktemp -d "${TMPDIR:-/tmp}/rampart_${bench_name}.XXXXXX")"
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

bench_cleanup() {
  local status=$? var
  trap - EXIT INT TERM
  for var in "${cleanup_pid_vars[@]}"; do stop_process "${!var}" 10; done
  stop_process "$rampart_pid" "$rampart_stop_grace"
  if [ "${keep_workdir:-0}" -eq 1 ] || [ "$status" -ne 0 ]; then
    log "$workdir_contents kept in $workdir"
  else
    rm -rf "$workdir"
  fi
  exit "$status"
}

# ---------------------------------------------------------------------------------------------
# Rampart.

rampart_pid=""
rampart_port=""
rampart_run=0
rampart_stdout=""
rampart_stderr=""

# start_rampart BINARY REPOSITORY START_TIMEOUT: starts `BINARY serve` on an ephemeral loopback
# port, waits for its `rampart: HTTP listening on 127.0.0.1:<port>` line and for
# /v2/health/ready. Extra `serve` flags may be set in the array rampart_extra_args. Sets
# rampart_pid, rampart_port, rampart_run, rampart_stdout, rampart_stderr.
start_rampart() {
  local binary="$1" repository="$2" start_timeout="$3"
  rampart_run=$((rampart_run + 1))
  rampart_stdout="$workdir/rampart.$rampart_run.stdout"
  rampart_stderr="$workdir/rampart.$rampart_run.stderr"
  log "starting Rampart ($binary serve, run $rampart_run)"
  "$binary" serve --model-repository "$repository" --http-port 0 --http-address 127.0.0.1 \
    --grpc-port 0 --grpc-address 127.0.0.1 --metrics-port 0 --metrics-address 127.0.0.1 \
    "${rampart_extra_args[@]}" >"$rampart_stdout" 2>"$rampart_stderr" &
  rampart_pid=$!

  local deadline=$((SECONDS + start_timeout)) line="" status
  while :; do
    line="$(grep -m1 -E '^rampart: HTTP listening on 127\.0\.0\.1:[0-9]+' "$rampart_stdout" ||
      true)"
    [ -n "$line" ] && break
    if ! is_running "$rampart_pid"; then
      wait "$rampart_pid" 2>/dev/null && status=0 || status=$?
      rampart_pid=""
      echo "--- Rampart stdout (tail) ---" >&2; tail -n 20 "$rampart_stdout" >&2 || true
      echo "--- Rampart stderr (tail) ---" >&2; tail -n 20 "$rampart_stderr" >&2 || true
      die "Rampart exited with status $status before listening (logs above)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "--- Rampart stderr (tail) ---" >&2; tail -n 20 "$rampart_stderr" >&2 || true
      die "Rampart did not print 'rampart: HTTP listening on 127.0.0.1:<port>' within" \
        "${start_timeout}s (still loading? stdout not flushed?)"
    fi
    sleep 0.1
  done
  rampart_port="$(sed -E 's/^rampart: HTTP listening on 127\.0\.0\.1:([0-9]+).*/\1/' <<<"$line")"

  deadline=$((SECONDS + 30))
  local ready_url="http://127.0.0.1:$rampart_port/v2/health/ready"
  until [ "$(http_status GET /dev/null "$ready_url")" = 200 ]; do
    is_running "$rampart_pid" || die "Rampart exited while waiting for /v2/health/ready"
    [ "$SECONDS" -lt "$deadline" ] ||
      die "Rampart listens on port $rampart_port but /v2/health/ready is not 200 after 30s"
    sleep 0.1
  done
  log "Rampart ready on 127.0.0.1:$rampart_port"
}

# ---------------------------------------------------------------------------------------------
# wrk.

# Converts a wrk duration ("36.00us", "1.33ms", "2.00s", "1.00m") to microseconds.
to_us() {
  awk -v t="$1" 'BEGIN {
    if (match(t, /^[0-9.]+/) == 0) { print "nan"; exit }
    v = substr(t, 1, RLENGTH); u = substr(t, RLENGTH + 1)
    m = (u == "us") ? 1 : (u == "ms") ? 1e3 : (u == "s") ? 1e6 : (u == "m") ? 6e7 : -1
    if (m < 0) print "nan"; else if (v * m >= 100) printf "%.0f", v * m; else printf "%.1f", v * m
  }'
}

# run_wrk LABEL THREADS CONNECTIONS SECONDS URL BODY_FILE: `wrk --latency` POSTing BODY_FILE as
# JSON; the raw output is kept as $workdir/wrk.LABEL.txt and the latency histogram as
# $workdir/wrk.LABEL.latency (wrk_post_body.lua). Sets wrk_rps, wrk_p50_us, wrk_p99_us,
# wrk_requests, wrk_errors (non-2xx responses plus socket errors, warned about when > 0) and
# wrk_latency_file. A command to run wrk under (e.g. `taskset -c 0`) may be set in the array
# wrk_prefix.
wrk_prefix=()
run_wrk() {
  local label="$1" threads="$2" connections="$3" seconds="$4" url="$5" body_file="$6"
  local raw="$workdir/wrk.$label.txt"
  wrk_latency_file="$workdir/wrk.$label.latency"
  RAMPART_BENCH_BODY_FILE="$body_file" RAMPART_BENCH_LATENCY_FILE="$wrk_latency_file" \
    "${wrk_prefix[@]}" wrk --latency --timeout 5s -t "$threads" -c "$connections" -d "${seconds}s" \
    -s "$bench_lib_dir/wrk_post_body.lua" "$url" >"$raw" 2>&1 ||
    { cat "$raw" >&2; die "wrk failed ($label)"; }
  wrk_rps="$(awk '/^Requests\/sec:/ { print $2 }' "$raw")"
  wrk_p50_us="$(to_us "$(awk '$1 == "50%" { print $2 }' "$raw")")"
  wrk_p99_us="$(to_us "$(awk '$1 == "99%" { print $2 }' "$raw")")"
  wrk_requests="$(awk '/requests in/ { print $1 }' "$raw")"
  wrk_errors="$(awk '/Non-2xx or 3xx responses:/ { n += $NF }
    /Socket errors:/ { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) n += $i }
    END { print n + 0 }' "$raw")"
  if [ -z "$wrk_rps" ] || [ -z "$wrk_requests" ]; then
    cat "$raw" >&2
    die "cannot parse wrk output ($label)"
  fi
  if [ "$wrk_errors" -gt 0 ]; then
    log "WARNING: $label: $wrk_errors non-2xx responses or socket errors (see below)"
    grep -E 'Non-2xx|Socket errors' "$raw" >&2 || true
  fi
}

# latency_over MICROSECONDS FILE: prints `<samples slower than MICROSECONDS> <all samples>` from a
# latency histogram written by run_wrk (wrk's, corrected for coordinated omission), or `nan nan`
# when the file is missing or empty.
latency_over() {
  awk -v limit="$1" '{ all += $2; if ($1 > limit) over += $2 }
    END { if (all > 0) print over + 0, all; else print "nan nan" }' "$2" 2>/dev/null ||
    echo "nan nan"
}

# ---------------------------------------------------------------------------------------------
# Arithmetic and report pieces.

# calc EXPRESSION [DECIMALS]: evaluates an awk expression; prints nan for NaN.
calc() { awk "BEGIN { v = $1; if (v != v) print \"nan\"; else printf \"%.${2:-2}f\", v }"; }

# median V...: the median of the numbers given (the mean of the middle two for an even count),
# or nan when there are none.
median() {
  printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) print "nan"
    else if (NR % 2) print v[(NR + 1) / 2]
    else print (v[NR / 2] + v[NR / 2 + 1]) / 2
  }'
}

# ratio A B: A / B with two decimals, or nan when either is nan or B is zero.
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (b + 0 == 0 || a == "nan" || b == "nan") print "nan"; else printf "%.2f", a / b
  }'
}

# One line describing the machine, for report headers.
machine_line() {
  local cpu
  cpu="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)"
  echo "machine: $(nproc) cores (${cpu:-unknown CPU}), $(uname -sr);" \
    "wrk and servers share the cores"
}

# The first line of a --out markdown snippet: which script, when, at which commit.
snippet_header() {
  echo "<!-- bench/$1, $(date -u +%Y-%m-%dT%H:%MZ)," \
    "commit $(git -C "$bench_lib_dir" rev-parse --short HEAD 2>/dev/null || echo unknown) -->"
}
