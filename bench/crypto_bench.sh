#!/usr/bin/env bash
# Envelope AEAD throughput against `openssl speed -evp` for the same cipher, in the same run.
#
# Runs build/bench/crypto_bench (crypto::Seal/Open for 1 KiB and 1 MiB with both suites, and
# OpenSSL's raw EVP_EncryptUpdate loop on the same bytes in-process), then
# `openssl speed -evp aes-256-gcm` and `openssl speed -evp sm4-ctr` at 1 MiB, and prints each
# Seal/Open throughput with its ratio to the in-process raw cipher and to `openssl speed` (goal
# >= 0.9 at 1 MiB for AES-256-GCM). The SM4 suite is SM4-CTR plus an HMAC-SM3 pass over the
# ciphertext, so it is also compared with raw SM4-CTR + raw HMAC-SM3. It reports; it does not
# assert.
#
# Usage: bench/crypto_bench.sh [--binary build/bench/crypto_bench] [--min-time 1]
# See docs/benchmarks.md.
set -euo pipefail

bench_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly bench_dir
readonly bench_name="crypto_bench"
# shellcheck source=bench/lib.sh
source "$bench_dir/lib.sh"

binary="build/bench/crypto_bench"
min_time=1
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --min-time) min_time="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
require_executable "$binary" "--binary" "cmake --build build --target crypto_bench"
require_tools openssl python3

json="$(mktemp)"
trap 'rm -f "$json"' EXIT
log "crypto_bench (min time ${min_time}s per case)"
"$binary" --benchmark_min_time="$min_time" --benchmark_format=json >"$json"

# `openssl speed -evp CIPHER -bytes N` ends with a line "CIPHER  <thousands of bytes/s>k".
openssl_speed() {
  openssl speed -evp "$1" -bytes 1048576 -seconds 1 2>/dev/null |
    awk -v name="$1" 'tolower($1) == name { v = $NF; sub(/k$/, "", v); print v * 1000 }'
}
log "openssl speed -evp aes-256-gcm / sm4-ctr, 1 MiB blocks"
speed_gcm="$(openssl_speed aes-256-gcm)"
speed_sm4="$(openssl_speed sm4-ctr)"
if [ -z "$speed_gcm" ] || [ -z "$speed_sm4" ]; then die "could not read openssl speed's output"; fi

python3 - "$json" "$speed_gcm" "$speed_sm4" <<'PY'
import json, sys
runs = {b["name"]: b for b in json.load(open(sys.argv[1]))["benchmarks"]}
speed = {"aes_256_gcm": float(sys.argv[2]), "sm4_ctr_hmac_sm3": float(sys.argv[3])}
raw = {"aes_256_gcm": "BM_RawEvpCipher/aes_256_gcm", "sm4_ctr_hmac_sm3": "BM_RawEvpCipher/sm4_ctr"}
def rate(name):
    return runs[name]["bytes_per_second"] if name in runs else float("nan")
print(f"{'case':34} {'MB/s':>9} {'/raw EVP':>9} {'/openssl speed':>15} {'/raw CTR+HMAC':>14}")
for suite in ("aes_256_gcm", "sm4_ctr_hmac_sm3"):
    for size in (1024, 1048576):
        base = rate(f"{raw[suite]}/{size}")
        floor = rate(f"BM_RawSm4CtrThenHmacSm3/{size}") if suite.startswith("sm4") else None
        print(f"{'raw EVP ' + raw[suite].split('/')[1] + '/' + str(size):34} {base / 1e6:9.1f}")
        for op in ("Seal", "Open"):
            r = rate(f"BM_{op}/{suite}/{size}")
            line = f"{op + ' ' + suite + '/' + str(size):34} {r / 1e6:9.1f} {r / base:9.2f}"
            line += f" {r / speed[suite]:15.2f}" if size == 1048576 else f" {'':>15}"
            if floor is not None:
                line += f" {r / floor:14.2f}"
            print(line)
for suite, s in speed.items():
    print(f"openssl speed -evp {'aes-256-gcm' if suite.startswith('aes') else 'sm4-ctr'} 1 MiB: {s / 1e6:.1f} MB/s")
for name in ("BM_Sign/sm2_sm3", "BM_Verify/sm2_sm3", "BM_Sign/ed25519", "BM_Verify/ed25519"):
    if name in runs:
        b = runs[name]
        unit = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[b["time_unit"]]
        print(f"{name:34} {b['cpu_time'] * unit:9.1f} us/op")
PY
