#!/usr/bin/env python3
"""Model lifecycle on the real binary: explicit load/unload through the repository API, hot
reload under continuous load with zero failed requests, poll mode following the repository,
warm-up, and memory returning after many load/unload cycles.

Usage: test_lifecycle.py --binary build/rampart --repository examples/models
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Callable, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kserve_tensors as tensors  # noqa: E402
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402

SIMPLE = tensors.InferRequest([
    {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))},
    {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}])
MLP = tensors.InferRequest([{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 256],
                         "data": [0.01] * 256}])


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """Polls an observable condition (not a sleep standing in for synchronisation)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise E2eError(f"timed out waiting for {what}")
        time.sleep(0.05)


def index(client: e2e.Client) -> dict:
    reply = client.post_json("/v2/repository/index", {})
    check(reply.status == 200, f"index: {reply.status}")
    return {(entry["name"], entry.get("version", "")): entry for entry in reply.json()}


PENDING = "nv_inference_pending_request_count"


def scrape(server: e2e.Server) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics",
                                timeout=10) as reply:
        check(reply.status == 200, f"/metrics: {reply.status}")
        return reply.read().decode()


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise E2eError("no VmRSS")


def test_explicit_load_unload(binary: str, repository: str) -> str:
    server = e2e.Server(binary, repository, extra_args=[
        "--model-control-mode", "explicit", "--load-model", "simple"])
    try:
        server.start()
        client = server.client()
        check(client.infer("simple", SIMPLE).status == 200, "simple not loaded at start")
        check(client.infer("mlp_classifier", MLP).status == 404, "mlp loaded without asking")
        listed = index(client).get(("mlp_classifier", ""))
        check(listed == {"name": "mlp_classifier"},
              f"a model no load has tried is listed by name only, as Triton lists it: {listed!r}")
        check(client.request("POST", "/v2/repository/models/mlp_classifier/load").status == 200,
              "load mlp_classifier")
        check(client.infer("mlp_classifier", MLP).status == 200, "mlp after load")
        check(index(client)[("mlp_classifier", "1")]["state"] == "READY", "index state")
        exposition = scrape(server)
        for series in (PENDING, "nv_inference_request_success"):
            check(f'{series}{{model="mlp_classifier"' in exposition, f"mlp's {series}")
        missing = client.request("POST", "/v2/repository/models/nope/load")
        check(missing.status == 404, f"loading an unknown model: {missing.status}")
        # As Triton: unloading a model that is not loaded, or not in the repository, succeeds.
        for name in ("text_stats", "nope"):
            reply = client.request("POST", f"/v2/repository/models/{name}/unload")
            check(reply.status == 200 and reply.body == b"",
                  f"unloading {name}, which is not loaded: {reply!r}")
        check(index(client).get(("text_stats", "")) == {"name": "text_stats"},
              "an unload of a model never loaded must leave it listed by name only")
        check(client.request("POST", "/v2/repository/models/mlp_classifier/unload").status == 200,
              "unload")
        check(client.infer("mlp_classifier", MLP).status == 404, "mlp still served after unload")
        check(index(client)[("mlp_classifier", "")]["reason"] == "unloaded", "index after unload")
        # Its series go (as Triton drops an unloaded model's metrics) once the version has
        # finished what it held and been released.
        series = (PENDING, "nv_inference_request_success", "nv_inference_count")
        wait_for(lambda: not any(f'{name}{{model="mlp_classifier"' in scrape(server)
                                 for name in series), "mlp_classifier's series to go")
        exposition = scrape(server)
        for name in series:
            check(f'{name}{{model="simple"' in exposition,
                  f"the loaded model's {name} must be reported")
        # A config override: a bad one is refused and changes nothing.
        bad = client.request("POST", "/v2/repository/models/simple/load",
                             json.dumps({"parameters": {"config": json.dumps(
                                 {"backend": "pytorch", "max_batch_size": -3})}}).encode())
        check(bad.status == 400 and "max_batch_size" in bad.json()["error"], f"bad config: {bad!r}")
        check(client.infer("simple", SIMPLE).status == 200, "simple must keep serving")
        # The config as GET .../config writes it (64-bit integers as numbers, as Triton's) loads
        # back as an override, and so does protobuf's own form (them as strings).
        config = client.get("/v2/models/simple/config").json()
        check(config["input"][0]["dims"] == [16], f"dims as numbers: {config['input'][0]}")
        as_strings = json.loads(json.dumps(config))
        for tensor in as_strings["input"] + as_strings["output"]:
            tensor["dims"] = [str(dim) for dim in tensor["dims"]]
        for override in (config, as_strings):
            reply = client.request("POST", "/v2/repository/models/simple/load",
                                   json.dumps({"parameters": {"config": json.dumps(override)}})
                                   .encode())
            check(reply.status == 200, f"the config back as an override: {reply!r}")
        check(client.infer("simple", SIMPLE).status == 200, "simple after the overrides")
        # The ensemble over `simple` cannot run without it, and goes with it (as in Triton).
        load = client.request("POST", "/v2/repository/models/simple_ensemble/load")
        check(load.status == 200, f"load simple_ensemble: {load!r}")
        check(client.get("/v2/models/simple_ensemble/ready").status == 200, "ensemble ready")
        wrong = client.request("POST", "/v2/repository/models/simple/unload",
                               json.dumps({"parameters": {"unload_dependents": "yes"}}).encode())
        check(wrong.status == 400, f"a non-boolean unload_dependents: {wrong!r}")
        unload = client.request("POST", "/v2/repository/models/simple/unload",
                                json.dumps({"parameters": {"unload_dependents": False}}).encode())
        check(unload.status == 200, f"unload simple: {unload!r}")
        check(client.get("/v2/models/simple_ensemble/ready").status != 200,
              "the ensemble must be unloaded with its step model")
        check(index(client)[("simple_ensemble", "")]["reason"] == "unloaded",
              "index after unloading the ensemble's step model")
        client.close()
        return ("load, unload, unknown model 404, bad override refused while serving on, "
                "ensembles unloaded with their step model")
    finally:
        server.stop()
        server.cleanup()


def test_ensemble_brings_its_step_models(binary: str, repository: str) -> str:
    """As Triton: loading an ensemble in explicit mode loads the models it calls; unloading it
    with unload_dependents unloads those its load brought in, not those loaded on request."""
    server = e2e.Server(binary, repository, extra_args=["--model-control-mode", "explicit"])
    try:
        server.start()
        client = server.client()
        ready = lambda model: client.get(f"/v2/models/{model}/ready").status == 200  # noqa: E731
        check(not ready("simple"), "simple loaded without asking")
        load = client.request("POST", "/v2/repository/models/simple_ensemble/load")
        check(load.status == 200, f"load simple_ensemble: {load!r}")
        check(ready("simple") and ready("simple_ensemble"), "the ensemble's step model loaded")
        check(index(client)[("simple", "1")]["state"] == "READY", "index shows the step model")
        body = tensors.InferRequest([
            {"name": "A", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))},
            {"name": "B", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}])
        check(client.infer("simple_ensemble", body).status == 200, "ensemble infer")
        unload = client.request("POST", "/v2/repository/models/simple_ensemble/unload",
                                json.dumps({"parameters": {"unload_dependents": True}}).encode())
        check(unload.status == 200, f"unload with dependents: {unload!r}")
        check(not ready("simple_ensemble") and not ready("simple"),
              "unload_dependents must take the step model its load brought in")
        # A step model loaded on request stays.
        for model in ("simple", "simple_ensemble"):
            check(client.request("POST", f"/v2/repository/models/{model}/load").status == 200,
                  f"load {model}")
        client.request("POST", "/v2/repository/models/simple_ensemble/unload",
                       json.dumps({"parameters": {"unload_dependents": True}}).encode())
        check(ready("simple") and not ready("simple_ensemble"),
              "a step model loaded on request must stay")
        client.close()
        return "ensemble load brought simple; unload_dependents took it, not once requested"
    finally:
        server.stop()
        server.cleanup()


def test_hot_reload_without_failures(binary: str, repository: str) -> str:
    work = tempfile.mkdtemp(prefix="rampart-reload-")
    repository = e2e.copy_repository(repository, work)
    server = e2e.Server(binary, repository, extra_args=[
        "--model-control-mode", "explicit", "--load-model", "*"])
    try:
        server.start()
        stop = threading.Event()
        counts = {"ok": 0, "failed": 0}
        failures: List[str] = []
        lock = threading.Lock()

        def client_loop(model: str, request: tensors.InferRequest) -> None:
            client = server.client()
            try:
                while not stop.is_set():
                    reply = client.infer(model, request)
                    with lock:
                        if reply.status == 200:
                            counts["ok"] += 1
                        else:
                            counts["failed"] += 1
                            failures.append(f"{model}: {reply.status} {reply.body[:120]!r}")
            finally:
                client.close()

        threads = [threading.Thread(target=client_loop, args=args, daemon=True)
                   for args in (("simple", SIMPLE), ("simple", SIMPLE), ("mlp_classifier", MLP))]
        for thread in threads:
            thread.start()
        control = server.client()
        reloads = 0
        for delay_us in (100, 200, 300, 400, 500):
            # Each override changes the config, so every version is rebuilt, warmed and swapped.
            config = {"name": "mlp_classifier", "backend": "pytorch", "max_batch_size": 32,
                      "input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [256]}],
                      "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [10]}],
                      "dynamic_batching": {"max_queue_delay_microseconds": delay_us},
                      "model_warmup": [{"name": "zeros", "batch_size": 4, "inputs": {
                          "INPUT__0": {"data_type": "TYPE_FP32", "dims": [256],
                                       "zero_data": True}}}]}
            # simple's file changes instead, so it reloads from disk.
            model_file = os.path.join(repository, "simple", "1", "model.pt")
            os.utime(model_file, ns=(time.time_ns(), time.time_ns() + delay_us * 1000))
            for model, body in (("mlp_classifier", {"parameters": {"config": json.dumps(config)}}),
                                ("simple", None)):
                before = counts["ok"]
                reply = control.request("POST", f"/v2/repository/models/{model}/load",
                                        json.dumps(body).encode() if body else None)
                check(reply.status == 200, f"reload {model}: {reply!r}")
                reloads += 1
                wait_for(lambda: counts["ok"] > before + 20, "traffic after a reload")
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        control.close()
        check(counts["failed"] == 0, f"{counts['failed']} failed requests during reloads: "
                                     f"{failures[:3]}")
        loads = server.stderr_text().count("model 'simple' ready")
        check(loads == 6, f"simple loaded {loads} times, expected 1 + 5 reloads")
        return f"{reloads} reloads under load, {counts['ok']} requests, 0 failed"
    finally:
        server.stop()
        server.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def test_warmup_failure_keeps_serving(binary: str, repository: str) -> str:
    server = e2e.Server(binary, repository, extra_args=[
        "--model-control-mode", "explicit", "--load-model", "simple"])
    try:
        server.start()
        client = server.client()
        config = {"name": "simple", "platform": "pytorch_libtorch", "max_batch_size": 8,
                  "input": [{"name": "INPUT0", "data_type": "TYPE_INT32", "dims": [16]},
                            {"name": "INPUT1", "data_type": "TYPE_INT32", "dims": [16]}],
                  "output": [{"name": "OUTPUT0", "data_type": "TYPE_INT32", "dims": [16]},
                             {"name": "OUTPUT1", "data_type": "TYPE_INT32", "dims": [16]}],
                  "model_warmup": [{"name": "half", "batch_size": 1, "inputs": {
                      "INPUT0": {"data_type": "TYPE_INT32", "dims": [16], "random_data": True}}}]}
        reply = client.request("POST", "/v2/repository/models/simple/load",
                               json.dumps({"parameters": {"config": json.dumps(config)}}).encode())
        check(reply.status == 400 and "model_warmup 'half'" in reply.text(),
              f"a warm-up missing an input must fail the load: {reply!r}")
        check(client.infer("simple", SIMPLE).status == 200, "the old version must keep serving")
        # As Triton's index: the serving version as it was, no row for the failed reload.
        rows = [entry for entry in client.post_json("/v2/repository/index", {}).json()
                if entry["name"] == "simple"]
        check(rows == [{"name": "simple", "version": "1", "state": "READY", "reason": ""}],
              f"index after the failed reload: {rows}")
        check(client.get("/v2/health/ready").status == 200, "still ready")
        client.close()
        return "failed warm-up refused the reload; version 1 kept serving, index unchanged"
    finally:
        server.stop()
        server.cleanup()


def test_poll_mode(binary: str, repository: str) -> str:
    work = tempfile.mkdtemp(prefix="rampart-poll-")
    try:
        models = os.path.join(work, "models")
        os.makedirs(models)
        shutil.copytree(os.path.join(repository, "simple"), os.path.join(models, "simple"))
        server = e2e.Server(binary, models, extra_args=[
            "--model-control-mode", "poll", "--repository-poll-secs", "1"])
        try:
            server.start()
            client = server.client()
            check(client.infer("simple", SIMPLE).status == 200, "simple at start")
            # A new version appears: once its files have settled it is loaded (latest policy).
            shutil.copytree(os.path.join(models, "simple", "1"), os.path.join(models, "simple", "2"))
            wait_for(lambda: client.get("/v2/models/simple/versions/2/ready").status == 200,
                     "version 2 to load")
            # A new model appears.
            shutil.copytree(os.path.join(repository, "text_stats"),
                            os.path.join(models, "text_stats"))
            wait_for(lambda: client.get("/v2/models/text_stats/ready").status == 200,
                     "text_stats to load")
            # A model disappears.
            shutil.rmtree(os.path.join(models, "text_stats"))
            wait_for(lambda: client.get("/v2/models/text_stats/ready").status == 404,
                     "text_stats to unload")
            refused = client.request("POST", "/v2/repository/models/simple/unload")
            check(refused.status == 503,
                  f"the API must refuse unload in poll mode with 503, as Triton: {refused!r}")
            client.close()
            return "new version, new model and removed model followed; API refused"
        finally:
            server.stop()
            server.cleanup()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_no_leak_over_load_unload_cycles(binary: str, repository: str) -> str:
    server = e2e.Server(binary, repository, extra_args=[
        "--model-control-mode", "explicit", "--load-model", "simple"])
    cycles, warm = 200, 20
    try:
        server.start()
        client = server.client()
        baseline = None
        for cycle in range(cycles):
            check(client.request("POST", "/v2/repository/models/mlp_classifier/load").status == 200,
                  f"load {cycle}")
            check(client.infer("mlp_classifier", MLP).status == 200, f"infer {cycle}")
            check(client.request("POST", "/v2/repository/models/mlp_classifier/unload").status
                  == 200, f"unload {cycle}")
            if cycle + 1 == warm:
                baseline = rss_kib(server.process.pid)
        # Unloaded versions are released after their buffer window; let the last ones go.
        settled = [rss_kib(server.process.pid)]

        def settled_low() -> bool:
            settled.append(rss_kib(server.process.pid))
            return settled[-1] - baseline < 32 * 1024

        wait_for(settled_low, "resident memory to return near its level after 20 cycles", 10)
        client.close()
        return (f"{cycles} load/unload cycles: RSS {baseline // 1024} MiB after {warm}, "
                f"{settled[-1] // 1024} MiB at the end")
    finally:
        server.stop()
        server.cleanup()


def test_canary_promotes(binary: str, repository: str) -> str:
    work = tempfile.mkdtemp(prefix="rampart-canary-")
    try:
        models = os.path.join(work, "models")
        os.makedirs(models)
        simple = os.path.join(models, "simple")
        shutil.copytree(os.path.join(repository, "simple"), simple)
        shutil.copytree(os.path.join(simple, "1"), os.path.join(simple, "2"))
        with open(os.path.join(simple, "config.pbtxt"), "a") as config:
            config.write("\nversion_policy: { all { } }\n")
        server = e2e.Server(binary, models)
        try:
            server.start()
            client = server.client()
            policy = {"baseline": 1, "candidate": 2, "stages": [50, 100], "min_requests": 20,
                      "max_p99_ratio": 1000}
            started = client.post_json("/v2/models/simple/canary", policy)
            check(started.status == 200 and started.json()["weight_percent"] == 50,
                  f"start canary: {started!r}")
            versions = {}
            for _ in range(100):
                reply = client.infer("simple", SIMPLE)
                check(reply.status == 200, f"infer during canary: {reply!r}")
                version = reply.json()["model_version"]
                versions[version] = versions.get(version, 0) + 1
            status = client.get("/v2/models/simple/canary").json()
            check(status["state"] == "PROMOTED", f"canary status {status}")
            check(versions.get("1", 0) >= 20 and versions.get("2", 0) >= 40,
                  f"traffic split {versions}")
            bad = client.post_json("/v2/models/simple/canary", {"baseline": 1, "candidate": 7})
            check(bad.status == 404, f"canary to a missing version: {bad!r}")
            check(client.request("DELETE", "/v2/models/simple/canary").status == 200, "stop")
            check(client.get("/v2/models/simple/canary").status == 404, "status after stop")
            client.close()
            return f"50% -> 100% promoted; responses by version {versions}"
        finally:
            server.stop()
            server.cleanup()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--filter", default="")
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    for test in (test_explicit_load_unload, test_ensemble_brings_its_step_models,
                 test_hot_reload_without_failures,
                 test_warmup_failure_keeps_serving, test_poll_mode, test_canary_promotes,
                 test_no_leak_over_load_unload_cycles):
        name = test.__name__[5:]
        if args.filter and args.filter not in name:
            continue
        started = time.monotonic()
        try:
            tally.record(f"{name}: {test(args.binary, args.repository)}", None,
                         time.monotonic() - started)
        except (E2eError, OSError, ValueError, KeyError) as error:
            tally.record(name, repr(error))
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
