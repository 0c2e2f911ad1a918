#!/usr/bin/env bash
# Installs every Debian 12 package Rampart needs to build, test, run and benchmark.
# Idempotent: runs `apt-get update` only when something is missing. Needs root (or sudo).
set -euo pipefail

packages=(
  # toolchain
  g++ cmake ninja-build ccache pkg-config make git clang-format clang-tidy curl
  # serving core
  libboost-dev libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
  libsimdjson-dev rapidjson-dev libyaml-cpp-dev libspdlog-dev libfmt-dev libcli11-dev libssl-dev
  zlib1g-dev
  # gateway: RE2 for routing patterns (linear time on untrusted text)
  libre2-dev
  # PII guard: Hyperscan's multi-pattern scan (RE2 is its fallback)
  libhyperscan-dev
  # policy engine: ICU's time zones for time windows in conditions
  libicu-dev
  # LibTorch with a fast BLAS; python3-torch scripts the example/test TorchScript models
  libtorch-dev libopenblas0-pthread python3-torch python3-numpy
  # the store: SQLite embedded (and its shell for backups), libpq for a shared PostgreSQL, and
  # the PostgreSQL 15 server the store tests start in a temporary directory
  libsqlite3-dev sqlite3 libpq-dev postgresql
  # vector indexes: hnswlib's HNSW graphs (header-only)
  libhnswlib-dev
  # the knowledge hub's text: poppler's C++ interface for PDF text, the Snowball stemmers
  libpoppler-cpp-dev libstemmer-dev
  # nghttp2: HTTP/2 for the native gRPC transport (src/net/grpc_server.h)
  libnghttp2-dev
  # tcmalloc for the server (see CMakeLists.txt)
  libgoogle-perftools-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev nginx-light wrk prometheus
  # h2load: a C HTTP/2 load generator, bench/grpc_bench.sh's second gRPC unary driver
  nghttp2-client
  # the openssl CLI: tests/e2e/test_access.py makes its mTLS certificates with it
  openssl
  # fuzzing (make fuzz): clang with libFuzzer and the sanitizer runtimes
  clang libclang-rt-14-dev
)

# The openai Node SDK compatibility test (tests/compat/openai-node): Debian's Node.js and npm,
# unless a node is already on the PATH (a newer one installed some other way is kept).
if ! command -v node >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
