#!/usr/bin/env bash
# The HTTP cost of a vector query: one Pinecone query (topK 10 over N clustered vectors of D
# dimensions, cosine, no filter) answered in-process (IndexBackend::Query on the bench's own
# threads) and over HTTP (POST /pinecone/indexes/bench/query to `rampart serve` on the same
# indexes folder, from as many keep-alive loopback connections, one blocking request at a time
# each), side by side.
#
# bench/index_query_probe loads the folder (through the durable catalog, as the server would) and
# writes the query body; Rampart is started on the folder; then the probe opens it read-only
# beside the server and, for 1 and 2 threads (connections), alternates in-process and HTTP rounds
# so that a busy phase of a shared machine weighs on both alike. Reports QPS and p50/p99 (medians
# over the rounds) and HTTP / in-process. It reports; it does not assert. On two cores the
# client's threads take cores from the server: read the ratio with it.
#
# Opening the folder (the server's start, the probe's) rebuilds the HNSW graph from the snapshot,
# which takes minutes at 100k vectors on two cores: --start-timeout defaults to 900.
#
# Usage: bench/pinecone_http_bench.sh --binary build/rampart --repository examples/models
#                                     --probe build/bench/index_query_probe
#                                     [--count 100000] [--dimension 128]
#                                     [--duration 5] [--rounds 3] [--out FILE]
#                                     [--start-timeout 900] [--keep-workdir]
# See docs/benchmarks.md.
set -euo pipefail

bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly bench_dir
readonly bench_name="pinecone_http_bench"
# shellcheck source=bench/lib.sh
source "$bench_dir/lib.sh"
readonly model="text_embedding"
# Load levels: name, threads (in-process) and connections (HTTP).
readonly levels=("c1 1" "c2 2")

probe=""
start_timeout=900
count=100000
dimension=128
while [ $# -gt 0 ]; do
  common_option "$@"
  if [ "$option_shift" -gt 0 ]; then shift "$option_shift"; continue; fi
  case "$1" in
    --probe) probe="${2:?--probe needs a value}"; shift 2 ;;
    --count) count="${2:?--count needs a value}"; shift 2 ;;
    --dimension) dimension="${2:?--dimension needs a value}"; shift 2 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
done
check_common_options
require_tools curl
check_rampart_options ""
require_executable "$probe" "--probe (index_query_probe)" "build it: make build"
[[ "$count" =~ ^[1-9][0-9]*$ ]] || die "--count must be a positive integer, got '$count'"
[[ "$dimension" =~ ^[1-9][0-9]*$ ]] || die "--dimension must be a positive integer"
make_workdir "logs, the indexes folder, the query body and the probe's output"

indexes="$workdir/indexes"
query_file="$workdir/query.json"
log "loading $count vectors of $dimension dimensions"
"$probe" load --indexes "$indexes" --index bench --count "$count" --dimension "$dimension" \
  --query-file "$query_file" >&2

cat >"$workdir/rampart.yaml" <<EOF2
knowledge:
  indexes_dir: $indexes
EOF2
rampart_extra_args=(--config "$workdir/rampart.yaml")
start_rampart "$binary" "$repository" "$start_timeout"
url="http://127.0.0.1:$rampart_port/pinecone/indexes/bench/query"
[ "$(http_status POST /dev/null "$url" --data-binary "@$query_file")" = 200 ] ||
  die "the query is not answered 200 over HTTP"

thread_counts="$(for level in "${levels[@]}"; do read -r _ t <<<"$level"; echo "$t"; done |
  paste -sd,)"
"$probe" query --indexes "$indexes" --index bench --query-file "$query_file" \
  --threads "$thread_counts" --rounds "$rounds" --seconds "$duration" --port "$rampart_port" \
  >"$workdir/probe.txt" || die "index_query_probe query failed (see $workdir/probe.txt)"

declare -A qps p50 p99
for level in "${levels[@]}"; do
  read -r name threads <<<"$level"
  for path in in-process http; do
    while read -r line; do
      log "$name: $line"
      qps[$path.$name]+=" $(sed -E 's/.*qps=([0-9]+).*/\1/' <<<"$line")"
      p50[$path.$name]+=" $(sed -E 's/.*p50_us=([0-9]+).*/\1/' <<<"$line")"
      p99[$path.$name]+=" $(sed -E 's/.*p99_us=([0-9]+).*/\1/' <<<"$line")"
    done < <(grep "^path=$path threads=$threads " "$workdir/probe.txt")
  done
done

# shellcheck disable=SC2086  # the lists split on purpose
{
  snippet_header pinecone_http_bench.sh
  echo "$(machine_line); $count vectors x $dimension dims (clustered, cosine), topK 10;" \
    "${rounds} rounds of ${duration} s"
  echo
  echo "| load | path | qps | p50 µs | p99 µs | HTTP / in-process |"
  echo "|---|---|---:|---:|---:|---:|"
  for level in "${levels[@]}"; do
    read -r name _ <<<"$level"
    in_process="$(median ${qps[in-process.$name]})"
    over_http="$(median ${qps[http.$name]})"
    echo "| $name | in-process | $(calc "$in_process" 0) | $(median ${p50[in-process.$name]}) |" \
      "$(median ${p99[in-process.$name]}) | - |"
    echo "| $name | HTTP | $(calc "$over_http" 0) | $(median ${p50[http.$name]}) |" \
      "$(median ${p99[http.$name]}) | $(ratio "$over_http" "$in_process") |"
  done
} | tee "${out_file:-/dev/null}"
