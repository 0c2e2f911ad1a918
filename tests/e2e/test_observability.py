#!/usr/bin/env python3
"""Observability of the real binary: exact Prometheus counters after a known sequence of
requests, histograms consistent with their _count and _sum, `promtool check metrics` on the
live exposition, W3C traceparent round trip, Server-Timing, the access log and /v2/logging.

Usage: test_observability.py --binary build/rampart --repository examples/models
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kserve_tensors as tensors  # noqa: E402
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402

SIMPLE = tensors.InferRequest([
    {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))},
    {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}])
SIMPLE_BATCH4 = tensors.InferRequest([
    {"name": "INPUT0", "datatype": "INT32", "shape": [4, 16], "data": list(range(64))},
    {"name": "INPUT1", "datatype": "INT32", "shape": [4, 16], "data": [1] * 64}])
TRITON_NAMES = re.compile(r"^nv_")
# The default histogram bounds (10 µs to 5 s in 1-2.5-5 steps), as exported in seconds.
DEFAULT_BUCKETS_SECONDS = [1e-05, 2.5e-05, 5e-05, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                           0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]


Sample = Tuple[str, Dict[str, str], float]


def parse_exposition(text: str) -> List[Sample]:
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        check(match is not None, f"unparsable exposition line {line!r}")
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(3) or ""))
        samples.append((match.group(1), labels, float(match.group(4))))
    return samples


def value(samples: List[Sample], name: str, **labels: str) -> float:
    found = [v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items())]
    check(len(found) == 1, f"{name}{labels}: {len(found)} samples")
    return found[0]


def scrape(server: e2e.Server) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as r:
        check(r.status == 200, f"/metrics status {r.status}")
        check(r.headers["Content-Type"].startswith("text/plain; version=0.0.4"),
              f"/metrics content type {r.headers['Content-Type']}")
        return r.read().decode()


def test_exact_counters(server: e2e.Server) -> str:
    client = server.client()
    try:
        for _ in range(3):
            check(client.infer("simple", SIMPLE).status == 200, "simple infer failed")
        check(client.infer("simple", SIMPLE_BATCH4).status == 200, "batch-4 infer failed")
        # A request the model rejects at validation never reaches the scheduler: not counted.
        bad = tensors.InferRequest([{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16],
                                 "data": [0.0] * 16}])
        check(client.infer("simple", bad).status == 400, "bad request not 400")
    finally:
        client.close()
    samples = parse_exposition(scrape(server))
    labels = {"model": "simple", "version": "1"}
    check(value(samples, "nv_inference_request_success", **labels) == 4, "success != 4")
    check(value(samples, "nv_inference_count", **labels) == 7, "inference_count != 3 + 4")
    check(value(samples, "nv_inference_exec_count", **labels) == 4, "exec_count != 4")
    for reason in ("REJECTED", "CANCELED", "BACKEND", "OTHER"):
        check(value(samples, "nv_inference_request_failure", reason=reason, **labels) == 0,
              f"failure {reason} != 0")
    check(value(samples, "nv_inference_pending_request_count", **labels) == 0, "pending != 0")
    check(value(samples, "nv_model_load_duration_secs", **labels) > 0, "no load duration")
    for stage in ("request", "queue", "compute_infer"):
        name = f"rampart_inference_{stage}_duration_seconds"
        buckets = sorted(((float(l["le"]), v) for n, l, v in samples
                          if n == name + "_bucket" and l.get("model") == "simple"),
                         key=lambda pair: pair[0])
        check([le for le, _ in buckets] == DEFAULT_BUCKETS_SECONDS + [float("inf")],
              f"{name} buckets {buckets}")
        counts = [count for _, count in buckets]
        check(counts == sorted(counts), f"{name} buckets not cumulative: {counts}")
        check(counts[-1] == value(samples, name + "_count", **labels) == 4,
              f"{name}: +Inf {counts[-1]} / _count disagree or != 4")
        check(value(samples, name + "_sum", **labels) > 0, f"{name}_sum is 0")
    request_us = value(samples, "nv_inference_request_duration_us", **labels)
    check(abs(request_us / 1e6 - value(samples, "rampart_inference_request_duration_seconds_sum",
                                       **labels)) < 1e-6, "counter and histogram sums disagree")
    return "success 4, inference_count 7, exec_count 4, histograms consistent"


def test_promtool(server: e2e.Server) -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        return "SKIPPED: promtool not installed"
    result = subprocess.run([promtool, "check", "metrics"], input=scrape(server).encode(),
                            capture_output=True, timeout=60)
    findings = (result.stdout + result.stderr).decode().strip().splitlines()
    check(result.returncode in (0, 3), f"promtool could not parse the exposition: {findings}")
    others = [line for line in findings if not TRITON_NAMES.match(line)]
    check(not others, f"promtool findings on Rampart's own metrics: {others}")
    return f"{len(findings)} lint findings, all on Triton's nv_* names"


def test_traceparent(server: e2e.Server) -> str:
    incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    body, length = SIMPLE.encode()
    headers = {"Content-Type": "application/json", "traceparent": incoming}
    if length is not None:
        headers["Inference-Header-Content-Length"] = str(length)
    client = server.client()
    try:
        continued = client.request("POST", "/v2/models/simple/infer", body, headers)
        started = client.infer("simple", SIMPLE)
        malformed = client.request("POST", "/v2/models/simple/infer", body,
                                   dict(headers, traceparent="00-zz-yy-01"))
    finally:
        client.close()
    reply = continued.header("traceparent") or ""
    check(re.fullmatch(r"00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01", reply) is not None,
          f"continued trace: {reply!r}")
    check(not reply.endswith("b7ad6b7169203331-01"), "the reply reused the caller's span id")
    fresh = started.header("traceparent") or ""
    check(re.fullmatch(r"00-[0-9a-f]{32}-[0-9a-f]{16}-01", fresh) is not None, f"new trace {fresh!r}")
    check(malformed.status == 200 and "0af7651916cd43dd" not in (malformed.header("traceparent") or ""),
          "a malformed traceparent must start a new trace")
    timing = continued.header("server-timing") or ""
    for stage in ("queue", "compute_input", "compute_infer", "compute_output", "total"):
        check(re.search(rf"\b{stage};dur=[0-9]+\.[0-9]{{3}}", timing) is not None,
              f"Server-Timing lacks {stage}: {timing!r}")
    return f"trace continued ({reply}), Server-Timing: {timing}"


def test_ensemble_timing(server: e2e.Server) -> str:
    request = tensors.InferRequest([
        {"name": "A", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))},
        {"name": "B", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}])
    client = server.client()
    try:
        reply = client.infer("simple_ensemble", request)
    finally:
        client.close()
    check(reply.status == 200, f"ensemble infer {reply.status} {reply.body[:200]!r}")
    timing = reply.header("server-timing") or ""
    millis = r"([0-9]+\.[0-9]{3})"  # Server-Timing durations: milliseconds, three decimals
    steps = re.findall(rf'step\.(\d)\.simple;dur={millis};desc="start {millis}"', timing)
    check(len(steps) == 3, f"expected 3 step entries in Server-Timing: {timing!r}")
    check(re.search(rf"alignment;dur={millis}", timing) is not None, f"no alignment: {timing!r}")
    # Step 1 (SUM, DIFF -> 2A, 2B) needs step 0's outputs: it cannot start before step 0 ends.
    start = {int(i): float(s) for i, _, s in steps}
    duration = {int(i): float(d) for i, d, _ in steps}
    check(start[1] >= start[0] + duration[0] - 0.001, f"step 1 started before step 0 ended: {timing}")
    samples = parse_exposition(scrape(server))
    count = value(samples, "rampart_ensemble_alignment_seconds_count", model="simple_ensemble",
                  version="1")
    check(count == 1, f"alignment histogram count {count}")
    return f"3 steps and alignment in Server-Timing; alignment histogram counted"


def test_logging_extension(server: e2e.Server) -> str:
    client = server.client()
    try:
        current = client.get("/v2/logging")
        check(current.status == 200, f"GET /v2/logging {current.status}")
        check(current.json()["log_verbose_level"] == 0, f"{current.json()}")
        changed = client.post_json("/v2/logging", {"log_verbose_level": 1, "log_format": "json"})
        check(changed.status == 200 and changed.json()["log_verbose_level"] == 1 and
              changed.json()["log_format"] == "json", f"POST /v2/logging: {changed.body!r}")
        wrong = client.post_json("/v2/logging", {"log_info": "yes"})
        check(wrong.status == 400, f"bad logging setting: {wrong.status}")
        unknown = client.post_json("/v2/logging", {"log_colour": True})
        check(unknown.status == 400, f"unknown logging setting: {unknown.status}")
        check(client.infer("simple", SIMPLE).status == 200, "infer after switching to json")
        check(client.post_json("/v2/logging", {"log_verbose_level": 0,
                                               "log_format": "default"}).status == 200,
              "switching back")
    finally:
        client.close()
    return "GET/POST /v2/logging change the level and format at run time"


def test_access_log(binary: str, repository: str) -> str:
    server = e2e.Server(binary, repository, extra_args=["--access-log", "--log-format", "json"])
    try:
        server.start()
        client = server.client()
        try:
            reply = client.request("POST", "/v2/models/simple/infer", SIMPLE.encode()[0],
                                   {"traceparent": "00-11111111111111111111111111111111-"
                                                   "2222222222222222-01"})
            check(reply.status == 200, f"infer {reply.status}")
        finally:
            client.close()
        server.stop()
        lines = [json.loads(line) for line in server.stderr_text().splitlines() if line.strip()]
        # The access line's message is a nested JSON object, not a string holding one.
        check(not any(isinstance(line.get("message"), str)
                      and line["message"].startswith('{"access"') for line in lines),
              f"an access line's message is an escaped string: {lines[-5:]}")
        access = [line["message"] for line in lines
                  if isinstance(line.get("message"), dict) and "access" in line["message"]]
        check(len(access) == 1, f"{len(access)} access lines in {lines[-5:]}")
        check(all(isinstance(line.get("message"), str) for line in lines
                  if line["message"] not in access), "another line's message is not a string")
        entry = access[0]
        check(entry["trace_id"] == "1" * 32 and entry["status"] == 200, f"access line {entry}")
        for key in ("queue_us", "compute_input_us", "compute_infer_us", "compute_output_us",
                    "total_us"):
            check(key in entry, f"access line lacks {key}: {entry}")
        return f"one JSON access line with the trace id: {entry['access']}"
    finally:
        server.cleanup()


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True)
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    server = e2e.Server(args.binary, args.repository)
    try:
        server.start()
        check(server.metrics_port is not None, "no 'rampart: metrics listening' line")
        for test in (test_exact_counters, test_promtool, test_traceparent, test_ensemble_timing,
                     test_logging_extension):
            started = time.monotonic()
            try:
                tally.record(f"{test.__name__[5:]}: {test(server)}", None,
                             time.monotonic() - started)
            except (E2eError, OSError, ValueError, KeyError) as error:
                tally.record(test.__name__[5:], repr(error))
        server.stop()
    except E2eError as error:
        tally.record("server", str(error))
    finally:
        server.cleanup()
    started = time.monotonic()
    try:
        tally.record(f"access_log: {test_access_log(args.binary, args.repository)}", None,
                     time.monotonic() - started)
    except (E2eError, OSError, ValueError, KeyError) as error:
        tally.record("access_log", repr(error))
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
