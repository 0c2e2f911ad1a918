#!/usr/bin/env python3
"""gRPC on the real binary: the start-up lines, unary and streaming infer on the TorchScript
example models through bench/grpc_bench (a C++ gRPC client), the same statistics as HTTP, a clean
exit, --allow-grpc=false, and what Triton's clients meet (through tests/e2e/grpc_call, a
minimal JSON-driven client): names, error texts, parameters, stream flags, repository control.

Usage: test_grpc.py --binary build/rampart --grpc-bench build/bench/grpc_bench
                    --grpc-call build/tests/grpc_call --repository examples/models
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


def grpc_call(tool: str, server: e2e.Server, method: str, *requests: Dict) -> List[Dict]:
    """Calls `method` through tests/e2e/grpc_call with `requests` (protobuf JSON); returns the
    JSON lines it printed (a unary call's one, or a stream's answers then its end)."""
    command = [tool, "--target", f"127.0.0.1:{server.grpc_port}", "--method", method]
    result = subprocess.run(command, input="\n".join(json.dumps(r) for r in requests).encode(),
                            capture_output=True, timeout=60)
    check(result.returncode == 0, f"{' '.join(command)} exited {result.returncode}: "
                                  f"{result.stderr.decode()}")
    return [json.loads(line) for line in result.stdout.decode().splitlines() if line.strip()]


OK, NOT_FOUND, INVALID_ARGUMENT, UNIMPLEMENTED = 0, 5, 3, 12


def simple_infer(**extra) -> Dict:
    request = {"model_name": "simple", "id": "r1", "inputs": [
        {"name": name, "datatype": "INT32", "shape": [1, 16],
         "contents": {"int_contents": list(range(16))}} for name in ("INPUT0", "INPUT1")]}
    request.update(extra)
    return request


def test_triton_parity(server: e2e.Server, tool: str) -> str:
    """What Triton's gRPC clients meet: the server's name, an error message on every error,
    the parameters Triton ignores ignored, Triton's texts, triton_final_response on streams."""
    [metadata] = grpc_call(tool, server, "ServerMetadata", {})
    check(metadata["code"] == OK and metadata["response"]["name"] == "rampart",
          f"ServerMetadata: {metadata}")
    [unknown] = grpc_call(tool, server, "SystemSharedMemoryStatus")
    check(unknown["code"] == UNIMPLEMENTED and "SystemSharedMemoryStatus" in unknown["message"],
          f"an unimplemented method of Triton's service must say so: {unknown}")
    [ready] = grpc_call(tool, server, "ModelReady", {"name": "nope"})
    check(ready["code"] == NOT_FOUND and
          ready["message"] == "Request for unknown model: 'nope' is not found",
          f"ModelReady of an unknown model, as Triton: {ready}")
    [missing] = grpc_call(tool, server, "ModelInfer", dict(simple_infer(), model_name="nope"))
    check(missing["code"] == NOT_FOUND and
          missing["message"] == "Request for unknown model: 'nope' is not found",
          f"ModelInfer of an unknown model, as Triton: {missing}")
    ignored = simple_infer(parameters={
        "sequence_id": {"int64_param": 7}, "sequence_start": {"bool_param": True},
        "sequence_end": {"bool_param": True}, "my_setting": {"string_param": "x"}})
    ignored["inputs"][0]["parameters"] = {"custom": {"int64_param": 1}}
    [answer] = grpc_call(tool, server, "ModelInfer", ignored)
    check(answer["code"] == OK, f"sequence and custom parameters must be ignored: {answer}")
    [reserved] = grpc_call(tool, server, "ModelInfer", simple_infer(
        parameters={"triton_secret": {"bool_param": True}}))
    check(reserved["code"] == INVALID_ARGUMENT and "reserved for Triton usage" in
          reserved["message"], f"a triton_ key: {reserved}")
    short = simple_infer()
    short["inputs"].pop()
    [refused] = grpc_call(tool, server, "ModelInfer", short)
    check(refused["message"] == "expected 2 inputs but got 1 inputs for model 'simple'. Got "
          "input(s) ['INPUT0'], but missing required input(s) ['INPUT1']. Please provide all "
          "required input(s).", f"missing input, in Triton's words: {refused}")
    answers = grpc_call(tool, server, "ModelStreamInfer", simple_infer(), simple_infer(id="r2"))
    check(len(answers) == 3 and answers[2] == {"code": OK, "message": ""},
          f"stream: {answers}")
    for streamed in answers[:2]:
        parameters = streamed["response"]["infer_response"].get("parameters", {})
        check(parameters.get("triton_final_response") == {"bool_param": True},
              f"each stream answer must carry triton_final_response: {streamed}")
    return "name, UNIMPLEMENTED message, NOT_FOUND texts, parameters, triton_final_response"


def test_repository_parity(binary: str, repository: str, tool: str) -> str:
    """Explicit mode over gRPC: unloading what is not loaded succeeds, an ensemble's load brings
    its step model and unload_dependents takes it; --server-name names the server."""
    with e2e.Server(binary, repository, extra_args=[
            "--model-control-mode", "explicit", "--server-name", "triton"]) as server:
        [metadata] = grpc_call(tool, server, "ServerMetadata", {})
        check(metadata["response"]["name"] == "triton", f"--server-name: {metadata}")
        for name in ("simple", "no_such_model"):
            [unload] = grpc_call(tool, server, "RepositoryModelUnload", {"model_name": name})
            check(unload["code"] == OK, f"unloading {name}, not loaded: {unload}")
        [load] = grpc_call(tool, server, "RepositoryModelLoad", {"model_name": "simple_ensemble"})
        check(load["code"] == OK, f"load simple_ensemble: {load}")
        [ready] = grpc_call(tool, server, "ModelReady", {"name": "simple"})
        check(ready["code"] == OK and ready["response"].get("ready") is True,
              f"the ensemble's step model must be loaded with it: {ready}")
        [unload] = grpc_call(tool, server, "RepositoryModelUnload", {
            "model_name": "simple_ensemble",
            "parameters": {"unload_dependents": {"bool_param": True}}})
        check(unload["code"] == OK, f"unload with dependents: {unload}")
        [gone] = grpc_call(tool, server, "ModelReady", {"name": "simple"})
        check(gone["code"] == NOT_FOUND, f"unload_dependents must take simple along: {gone}")
    return "unload of what is not loaded OK, ensemble brought and took simple, name triton"


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
    parser.add_argument("--grpc-call", required=True)
    parser.add_argument("--repository", required=True)
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    server = e2e.Server(args.binary, args.repository)
    try:
        server.start()
        for name, test in (("startup_lines", lambda: test_startup_lines(server)),
                           ("infer", lambda: test_infer(server, args.grpc_bench)),
                           ("triton_parity", lambda: test_triton_parity(server, args.grpc_call))):
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
            ("repository_parity",
             lambda: test_repository_parity(args.binary, args.repository, args.grpc_call)),
            ("grpc_disabled", lambda: test_grpc_disabled(args.binary, args.repository))):
        started = time.monotonic()
        try:
            tally.record(f"{name}: {test()}", None, time.monotonic() - started)
        except (E2eError, OSError, ValueError, KeyError) as error:
            tally.record(name, repr(error))
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
