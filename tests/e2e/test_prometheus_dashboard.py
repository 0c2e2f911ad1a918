#!/usr/bin/env python3
"""The shipped Grafana dashboard against a real Prometheus scraping the real binary.

Starts `rampart serve` on the example repository (port 0) and Debian's `prometheus` on a free
loopback port with the shipped scrape config (deploy/prometheus/prometheus.yml, its target and
intervals rewritten: 1 s, this server's metrics port) and a temporary data folder. Once
Prometheus has scraped the idle models, it drives a bounded load (`simple` from one thread, so
that each request runs directly on the thread that read it, then the dynamically batching
`mlp_classifier` from four threads), waits until Prometheus has scraped the final counts, then evaluates every expression in deploy/grafana/rampart-dashboard.json
(panel targets and template-variable queries, Grafana's variables replaced by their "All"
values) through /api/v1/query.

Each expression must return data, finite for both loaded models. The histogram layout must
resolve tens of microseconds (first bound at most 25 µs, steps of at most 2.5). Each quantile
must lie at or below the bucket bound above the same quantile of the server's own timing of the
same requests (its Server-Timing headers: the same queue and compute_infer durations, and an
HTTP total that is longer than the histogram's end to end). `simple`'s p50 must read under
250 µs and its p99 under 1 ms whenever the server timed them at 2.5 times less than that; on a
host too busy for `simple` to be that fast the line says so instead of failing. (A layout whose
first bucket is 1 ms reads p50 = 0.5 ms and p99 = 0.99 ms for any fast model.)

Synchronisation is by polling the APIs under generous deadlines, never by fixed sleeps.

Usage: test_prometheus_dashboard.py --binary build/rampart --repository examples/models
           [--dashboard deploy/grafana/rampart-dashboard.json]
           [--scrape-config deploy/prometheus/prometheus.yml] [--prometheus prometheus]
"""

import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kserve_tensors as tensors  # noqa: E402
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB = "rampart"  # the job name in the shipped scrape config
SCRAPE_INTERVAL = "1s"
# A rate window that covers the whole test, so that every panel sees the load whenever it is
# evaluated (Grafana's $__rate_interval is a few scrape intervals; the expressions are the same).
RATE_WINDOW = "5m"
PROMETHEUS_START_TIMEOUT_S = 30.0
DATA_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0

SIMPLE = tensors.InferRequest([
    {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": list(range(16)),
     "binary": True},
    {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16, "binary": True}])
MLP = tensors.InferRequest([
    {"name": "INPUT__0", "datatype": "FP32", "shape": [1, 256],
     "data": [(i % 17) / 17.0 for i in range(256)], "binary": True}])
# model -> (request, client threads, requests per thread)
LOAD = {"simple": (SIMPLE, 1, 300), "mlp_classifier": (MLP, 4, 40)}
LOADED_MODELS = tuple(LOAD)

SIMPLE_P99_LIMIT_S = 0.001
SIMPLE_P50_LIMIT_S = 0.00025


# --------------------------------------------------------------------------------------------
# The dashboard's expressions


def dashboard_expressions(dashboard: Dict) -> Tuple[List[Tuple[str, str]], List[Tuple[str, str]]]:
    """(panel expressions, template-variable queries), each as (where, text)."""
    panels: List[Tuple[str, str]] = []

    def walk(panel_list: Sequence[Dict]) -> None:
        for panel in panel_list:
            for target in panel.get("targets", []):
                if target.get("expr"):
                    panels.append((f"panel {panel.get('title')!r} {target.get('refId')}",
                                   target["expr"]))
            walk(panel.get("panels", []))  # panels inside a collapsed row

    walk(dashboard.get("panels", []))
    variables = []
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable.get("query")
            text = query.get("query") if isinstance(query, dict) else query
            variables.append((f"variable ${variable['name']}", text or variable["definition"]))
    return panels, variables


def substitute(expression: str, dashboard: Dict) -> str:
    """Replaces Grafana's variables as Grafana would with every value selected ("All")."""
    text = expression.replace("$__rate_interval", RATE_WINDOW)
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            text = re.sub(rf"\$\{{?{variable['name']}\}}?(?!\w)",
                          variable.get("allValue") or ".*", text)
    unresolved = re.findall(r"\$\{?\w+", text)
    check(not unresolved, f"unresolved Grafana variables {unresolved} in {expression!r}")
    return text


# --------------------------------------------------------------------------------------------
# Prometheus


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape_config(shipped: str, target: str) -> str:
    """The shipped config with its target replaced and every interval and timeout set to 1 s."""
    text, targets = re.subn(r"(?m)^(\s*-\s*)localhost:8002\s*$", rf"\g<1>{target}", shipped)
    check(targets == 1, f"the shipped scrape config names localhost:8002 {targets} times, not once")
    text, intervals = re.subn(r"(?m)^(\s*scrape_(?:interval|timeout):\s*)\S+",
                              rf"\g<1>{SCRAPE_INTERVAL}", text)
    check(intervals >= 2, "the shipped scrape config sets no scrape interval")
    check(re.search(rf"(?m)^\s*-\s*job_name:\s*{JOB}\s*$", text) is not None,
          f"the shipped scrape config has no job {JOB!r}")
    return text


class Prometheus:
    """Debian's `prometheus` on 127.0.0.1:<free port>, with a temporary data folder."""

    def __init__(self, binary: str, config_text: str) -> None:
        self.binary = binary
        self.work_dir = tempfile.mkdtemp(prefix="rampart-prometheus-")
        self.config_path = os.path.join(self.work_dir, "prometheus.yml")
        with open(self.config_path, "w") as config:
            config.write(config_text)
        self.log_path = os.path.join(self.work_dir, "prometheus.log")
        self.process: Optional[subprocess.Popen] = None
        self.port = 0

    def start(self) -> None:
        # Another process may take the free port between the probe and the bind: try again.
        for attempt in range(3):
            self.port = free_port()
            with open(self.log_path, "wb") as log:
                self.process = subprocess.Popen(
                    [self.binary, f"--config.file={self.config_path}",
                     f"--storage.tsdb.path={os.path.join(self.work_dir, f'data{attempt}')}",
                     f"--web.listen-address=127.0.0.1:{self.port}"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + PROMETHEUS_START_TIMEOUT_S
            while self.process.poll() is None:
                try:
                    with urllib.request.urlopen(f"{self.url}/-/ready", timeout=5) as reply:
                        if reply.status == 200:
                            return
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise E2eError(f"prometheus not ready within {PROMETHEUS_START_TIMEOUT_S:.0f}"
                                   f" s\n{self.log_tail()}")
                time.sleep(0.05)
            if "address already in use" not in self.log_tail():
                break
        raise E2eError(f"prometheus exited with {self.process.returncode} at start\n"
                       f"{self.log_tail()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, expression: str) -> List[Dict]:
        """The instant vector `expression` evaluates to now (E2eError on an API error)."""
        address = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
        try:
            with urllib.request.urlopen(address, timeout=10) as reply:
                answer = json.loads(reply.read())
        except urllib.error.HTTPError as error:
            raise E2eError(f"query {expression!r}: HTTP {error.code} {error.read()[:500]!r}")
        check(answer.get("status") == "success", f"query {expression!r}: {answer}")
        data = answer["data"]
        check(data["resultType"] == "vector", f"query {expression!r}: {data['resultType']} result")
        return data["result"]

    def poll(self, expression: str, done, what: str) -> List[Dict]:
        """Queries until done(result) holds or DATA_TIMEOUT_S passes."""
        deadline = time.monotonic() + DATA_TIMEOUT_S
        while True:
            result = self.query(expression)
            if done(result):
                return result
            if self.process is not None and self.process.poll() is not None:
                raise E2eError(f"prometheus exited with {self.process.returncode}\n"
                               f"{self.log_tail()}")
            if time.monotonic() > deadline:
                raise E2eError(f"{what}: not within {DATA_TIMEOUT_S:.0f} s; {expression} -> "
                               f"{result}\n{self.targets()}\n{self.log_tail()}")
            time.sleep(0.1)

    def targets(self) -> str:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/targets", timeout=10) as reply:
                active = json.loads(reply.read())["data"]["activeTargets"]
            return "  targets: " + "; ".join(
                f"{t['scrapeUrl']} {t['health']} {t.get('lastError', '')}" for t in active)
        except (OSError, ValueError, KeyError) as error:
            return f"  targets: unreadable ({error!r})"

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path, "rb") as log:
                tail = log.read().decode("utf-8", "replace").splitlines()[-lines:]
        except OSError:
            tail = []
        return "  prometheus log (tail):\n" + "\n".join("    " + line for line in tail)

    def stop(self) -> None:
        """SIGTERM, then the exit code must be 0 within STOP_TIMEOUT_S."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise E2eError(f"prometheus did not exit within {STOP_TIMEOUT_S:.0f} s of SIGTERM")
        check(code == 0, f"prometheus exited with {code} after SIGTERM\n{self.log_tail()}")

    def cleanup(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.work_dir, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Load


# model -> Server-Timing entry (queue, compute_infer, total, ...) -> one value per request, in s
Timings = Dict[str, Dict[str, List[float]]]


def drive_load(server: e2e.Server) -> Timings:
    """Sends LOAD's requests, one model after the other (the batching model's executions would
    otherwise take the CPU from under `simple`'s, whose p99 is checked); every one must succeed.
    Returns each request's Server-Timing durations."""
    errors: List[str] = []
    timings: Timings = {model: {} for model in LOAD}
    lock = threading.Lock()

    def send(model: str, request: tensors.InferRequest, count: int) -> None:
        client = server.client()
        try:
            for _ in range(count):
                reply = client.infer(model, request)
                if reply.status != 200:
                    errors.append(f"{model}: {reply!r}")
                    return
                entries = re.findall(r"(\w+);dur=([0-9.]+)", reply.header("server-timing") or "")
                with lock:
                    for name, milliseconds in entries:
                        timings[model].setdefault(name, []).append(float(milliseconds) / 1e3)
        except OSError as error:
            errors.append(f"{model}: {error!r}")
        finally:
            client.close()

    for model, (request, thread_count, per_thread) in LOAD.items():
        threads = [threading.Thread(target=send, args=(model, request, per_thread))
                   for _ in range(thread_count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        check(not any(thread.is_alive() for thread in threads), f"{model}: load did not finish")
        check(not errors, f"infer failed: {errors[:3]}")
        sent = thread_count * per_thread
        check(len(timings[model].get("total", [])) == sent,
              f"{model}: {len(timings[model].get('total', []))} of {sent} answers had a "
              "Server-Timing total")
    return timings


# --------------------------------------------------------------------------------------------
# Checks


def by_model(result: List[Dict]) -> Dict[str, List[float]]:
    values: Dict[str, List[float]] = {}
    for series in result:
        values.setdefault(series["metric"].get("model", ""), []).append(float(series["value"][1]))
    return values


# The histogram each quantile panel reads -> the Server-Timing entry of the same request that
# bounds its observation from above: queue and compute_infer are the same durations (truncated to
# whole µs in the header); the HTTP total starts at the same moment (the request read) but also
# covers encoding the answer, so it is at least the request histogram's observation.
TIMING_ENTRY = {"request": "total", "queue": "queue", "compute_infer": "compute_infer"}
HEADER_RESOLUTION_S = 1e-6


def server_quantile(values: List[float], quantile: float) -> float:
    """Nearest rank: the observation whose bucket histogram_quantile interpolates in."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(quantile * len(ordered)) - 1)]


def check_panel(expression: str, result: List[Dict], timings: Timings,
                bounds: List[float]) -> str:
    """Data for every loaded model; a quantile must also lie within one bucket above the value
    the server itself reported for the same requests (Server-Timing)."""
    check(result, f"no data for {expression}")
    values = by_model(result)
    if "model" not in expression:  # host-wide panels
        check(all(math.isfinite(v) for series in values.values() for v in series),
              f"non-finite value in {result}")
        return ", ".join(f"{v:.6g}" for series in values.values() for v in series)
    for model in LOADED_MODELS:
        check(model in values, f"no series for {model} in {result}")
        check(all(math.isfinite(v) for v in values[model]),
              f"{model} has a non-finite value {values[model]} ({expression})")
    quantile = re.match(r"histogram_quantile\(([0-9.]+),.*rampart_inference_(\w+)_duration_seconds",
                        expression)
    if quantile is None:
        return ", ".join(f"{model} {values[model][0]:.6g}" for model in LOADED_MODELS)
    q, stage = float(quantile.group(1)), quantile.group(2)
    shown = []
    for model in LOADED_MODELS:
        reported = max(values[model])
        truth = server_quantile(timings[model][TIMING_ENTRY[stage]], q)
        bucket = next((b for b in bounds if b >= truth + HEADER_RESOLUTION_S), math.inf)
        check(reported <= bucket * (1 + 1e-9),
              f"{model}'s p{q * 100:g} reads {reported * 1e6:.1f} µs, but the server timed "
              f"{truth * 1e6:.0f} µs ({TIMING_ENTRY[stage]} in Server-Timing): it should lie "
              f"in a bucket at or below {bucket * 1e6:g} µs")
        shown.append(f"{model} {reported * 1e6:.1f} µs (server {truth * 1e6:.0f} µs)")
        if model == "simple" and stage == "request" and q in (0.5, 0.99):
            limit = SIMPLE_P99_LIMIT_S if q == 0.99 else SIMPLE_P50_LIMIT_S
            if truth + HEADER_RESOLUTION_S <= limit / 2.5:
                check(reported < limit, f"simple's p{q * 100:g} reads {reported * 1e6:.1f} µs, "
                                        f"not under {limit * 1e6:.0f} µs")
            else:  # the host was too busy for `simple` to be that fast: nothing to resolve
                shown.append(f"(host busy: not held to {limit * 1e6:.0f} µs)")
    return ", ".join(shown)


def check_variable(where: str, query: str, prometheus: Prometheus, dashboard: Dict) -> str:
    match = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", query)
    check(match is not None, f"{where}: {query!r} is not label_values(selector, label)")
    selector, label = substitute(match.group(1), dashboard), match.group(2)
    found = sorted({series["metric"].get(label, "") for series in prometheus.query(selector)})
    expected = [JOB] if label == "job" else list(LOADED_MODELS) if label == "model" else []
    missing = [value for value in expected if value not in found]
    check(found and not missing, f"{where}: {label} values {found} lack {missing} ({selector})")
    return f"{label} in {found}"


def run(args: argparse.Namespace) -> int:
    tally = e2e.Tally()
    prometheus_binary = shutil.which(args.prometheus)
    if prometheus_binary is None:
        tally.record("prometheus", f"the `{args.prometheus}` binary is not on PATH: install "
                     "Debian's `prometheus` package (tools/install_deps.sh does)")
        return tally.finish()
    with open(args.dashboard) as file:
        dashboard = json.load(file)
    panels, variables = dashboard_expressions(dashboard)
    check(panels, f"{args.dashboard} holds no panel expressions")
    with open(args.scrape_config) as file:
        shipped_config = file.read()

    server = e2e.Server(args.binary, args.repository)
    prometheus: Optional[Prometheus] = None
    try:
        server.start()
        check(server.metrics_port is not None, "no 'rampart: metrics listening' line")
        prometheus = Prometheus(prometheus_binary,
                                scrape_config(shipped_config, f"127.0.0.1:{server.metrics_port}"))
        started = time.monotonic()
        prometheus.start()
        # Scraped once before the load: the histograms' first samples are the idle zeros, so
        # rate() over the window counts the whole load.
        idle = 'rampart_inference_request_duration_seconds_count{model=~"simple|mlp_classifier"}'
        prometheus.poll(idle, lambda result: len(result) == len(LOADED_MODELS),
                        "first scrape of the idle models")
        tally.record(f"prometheus on port {prometheus.port} scraped the idle server", None,
                     time.monotonic() - started)

        started = time.monotonic()
        timings = drive_load(server)
        sent = {model: len(timing["total"]) for model, timing in timings.items()}
        for model, count in sent.items():
            prometheus.poll(f'sum(nv_inference_request_success{{job="{JOB}", model="{model}"}})',
                            lambda result, count=count: bool(result) and
                            float(result[0]["value"][1]) == count,
                            f"a scrape counting {count} {model} requests")
        tally.record(f"load {sent} scraped", None, time.monotonic() - started)

        le = prometheus.query('count by (le) (rampart_inference_request_duration_seconds_bucket'
                              '{model="simple"})')
        bounds = sorted(float(series["metric"]["le"]) for series in le)  # ends with +Inf
        finite = bounds[:-1]
        if finite and finite[0] <= 25e-6 and finite[-1] >= 1 and \
                all(upper <= 2.5 * lower for lower, upper in zip(finite, finite[1:])):
            tally.record(f"buckets: {len(finite)} from {finite[0] * 1e6:g} µs to "
                         f"{finite[-1]:g} s, then +Inf", None)
        else:
            tally.record("buckets", f"simple's bucket bounds {bounds} s do not go from at most "
                                    "25 µs to at least 1 s in steps of at most 2.5")

        for where, query in variables:
            started = time.monotonic()
            try:
                tally.record(f"{where}: {check_variable(where, query, prometheus, dashboard)}",
                             None, time.monotonic() - started)
            except (E2eError, OSError, ValueError, KeyError) as error:
                tally.record(where, str(error))
        for where, expression in panels:
            started = time.monotonic()
            try:
                query = substitute(expression, dashboard)
                shown = check_panel(query, prometheus.query(query), timings, bounds)
                tally.record(f"{where}: {shown}", None, time.monotonic() - started)
            except (E2eError, OSError, ValueError, KeyError) as error:
                tally.record(where, str(error))

        prometheus.stop()
        server.stop()
    except (E2eError, OSError) as error:
        tally.record("setup", str(error))
    finally:
        if prometheus is not None:
            prometheus.cleanup()
        server.cleanup()
    return tally.finish()


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--dashboard",
                        default=os.path.join(SOURCE_DIR, "deploy/grafana/rampart-dashboard.json"))
    parser.add_argument("--scrape-config",
                        default=os.path.join(SOURCE_DIR, "deploy/prometheus/prometheus.yml"))
    parser.add_argument("--prometheus", default="prometheus", help="binary name or path")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
