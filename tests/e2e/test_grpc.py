#!/usr/bin/env python3
"""gRPC on the real binary: the start-up lines, unary and streaming infer on the TorchScript
example models through bench/grpc_bench (a C++ gRPC client), the same statistics as HTTP, a clean
exit, and --allow-grpc=false.

Usage: test_grpc.py --binary build/rampart --grpc-bench build/bench/grpc_bench
                    --repository examples/models
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402

BENCH_LINE = re.compile(r"^rps=([0-9.]+) p50_us=([0-9.]+) p99_us=([0-9.]+) "
                        r"requests=(\d+) errors=(\d+)$", re.MULTILINE)


def run_bench(grpc_bench: str, server: e2e.Server, model: str, *extra: str) -> Dict[str, float]:
    command = [grpc_bench, "--target", f"127.0.0.1:{server.grpc_port}", "--model", model,
               "--concurrency", "4", "--duration", "1", "--warmup", "0", *extra]
    result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    output = result.stdout.decode() + result.stderr.decode()
    check(result.returncode == 0, f"{' '.join(command)} exited {result.returncode}:\n{output}")
    match = BENCH_LINE.search(output)
    check(match is not None, f"no result line from grpc_bench:\n{output}")
    return {"requests": int(match.group(4)), "errors": int(match.group(5))}


def inference_count(server: e2e.Server, model: str) -> int:
    client = server.client()
    try:
        reply = client.get(f"/v2/models/{model}/stats")
    finally:
        client.close()
    check(reply.status == 200, f"stats {reply.status}")
    return json.loads(reply.body)["model_stats"][0]["inference_count"]


def test_startup_lines(server: e2e.Server) -> str:
    with server._lock:
        lines = list(server.stdout_lines)
    grpc_lines = [i for i, line in enumerate(lines) if line.startswith("rampart: gRPC listening")]
    http_lines = [i for i, line in enumerate(lines) if line.startswith("rampart: HTTP listening")]
    check(len(grpc_lines) == 1 and len(http_lines) == 1, f"start-up lines: {lines}")
    check(grpc_lines[0] < http_lines[0], f"the HTTP line must come last: {lines}")
    check(server.grpc_port not in (None, 0, 8001), f"--grpc-port 0 chose {server.grpc_port}")
    return lines[grpc_lines[0]]


def test_infer(server: e2e.Server, grpc_bench: str) -> str:
    summary = []
    for model in ("simple", "mlp_classifier"):
        before = inference_count(server, model)
        unary = run_bench(grpc_bench, server, model)
        stream = run_bench(grpc_bench, server, model, "--stream")
        for name, result in (("unary", unary), ("stream", stream)):
            check(result["errors"] == 0, f"{model} {name}: {result['errors']} failed requests")
            check(result["requests"] > 0, f"{model} {name}: no request completed")
        # Same core as HTTP: the gRPC requests show in HTTP's statistics (plus the checked call
        # grpc_bench makes first, and those still running when its measurement ended).
        counted = inference_count(server, model) - before
        check(counted >= unary["requests"] + stream["requests"],
              f"{model}: stats counted {counted}, gRPC completed "
              f"{unary['requests'] + stream['requests']}")
        summary.append(f"{model} {unary['requests']} unary + {stream['requests']} streamed")
    return ", ".join(summary)


def test_drain_with_open_streams(binary: str, repository: str, grpc_bench: str) -> str:
    """SIGTERM while 8 streams are busy: they are answered and ended, and the server exits 0
    well within --exit-timeout-secs (an idle or busy stream must not hold the drain)."""
    with e2e.Server(binary, repository, extra_args=["--exit-timeout-secs", "30"]) as server:
        client = subprocess.Popen(
            [grpc_bench, "--target", f"127.0.0.1:{server.grpc_port}", "--model", "simple",
             "--concurrency", "8", "--duration", "60", "--warmup", "0", "--stream"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while inference_count(server, "simple") < 100:
                check(time.monotonic() < deadline, "the streams never got going")
                time.sleep(0.05)
            started = time.monotonic()
            server.stop(timeout_s=20)
            took = time.monotonic() - started
        finally:
            client.kill()
            client.wait()
        check(took < 10, f"exit took {took:.1f} s with streams open")
    return f"exit 0 in {took * 1000:.0f} ms with 8 busy streams"


def test_grpc_disabled(binary: str, repository: str) -> str:
    with e2e.Server(binary, repository, extra_args=["--allow-grpc", "false"]) as server:
        with server._lock:
            lines = list(server.stdout_lines)
        check(not any(line.startswith("rampart: gRPC") for line in lines),
              f"--allow-grpc false still serves gRPC: {lines}")
    return "no gRPC line, HTTP serves"


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--grpc-bench", required=True)
    parser.add_argument("--repository", required=True)
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    server = e2e.Server(args.binary, args.repository)
    try:
        server.start()
        for name, test in (("startup_lines", lambda: test_startup_lines(server)),
                           ("infer", lambda: test_infer(server, args.grpc_bench))):
            started = time.monotonic()
            try:
                tally.record(f"{name}: {test()}", None, time.monotonic() - started)
            except (E2eError, OSError, ValueError, KeyError, subprocess.TimeoutExpired) as error:
                tally.record(name, repr(error))
        server.stop()
        summary = server.served_summary()
        check(summary is not None, "no 'rampart: http served' line at exit")
    except E2eError as error:
        tally.record("server", str(error))
    finally:
        server.cleanup()
    for name, test in (
            ("drain_with_open_streams",
             lambda: test_drain_with_open_streams(args.binary, args.repository, args.grpc_bench)),
            ("grpc_disabled", lambda: test_grpc_disabled(args.binary, args.repository))):
        started = time.monotonic()
        try:
            tally.record(f"{name}: {test()}", None, time.monotonic() - started)
        except (E2eError, OSError, ValueError, KeyError) as error:
            tally.record(name, repr(error))
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
