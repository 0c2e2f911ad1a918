#!/usr/bin/env python3
"""Server CPU per request of `simple` infer with the audit log off and batched, per thread group.

Starts one server per (binary, mode) -- mode `off` (no audit section) or `batched`
(`audit: {sync: false, max_delay_ms: 10}`), each with its own SQLite store -- then, round by
round, loads each alone with wrk (one fixed JSON body for `simple`, keep-alive) and reads every
server thread's utime+stime from /proc/PID/task/*/stat before and after. Reports, per server,
the CPU per request in µs: the whole server, the `audit-writer` thread, the model's threads
(inst-*, timer-*) and the rest (the HTTP I/O threads and the main thread), as medians over the
rounds with their spread. CPU per request is what the machine's other load spoils least (unlike
throughput), so it is the figure to compare two builds by: give `--binary` twice (label=path).

Usage: bench/audit_cpu_bench.py --binary after=build/rampart [--binary before=OTHER]
           --repository examples/models [--rounds 3] [--duration 4] [--connections 64]
It reports; it does not assert. See docs/benchmarks.md.
"""

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
REQUEST = {"inputs": [
    {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))},
    {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}]}
WRK_SCRIPT = """wrk.method = "POST"
wrk.body = '%s'
wrk.headers["Content-Type"] = "application/json"
"""


def thread_times(pid):
    """{tid: (name, cpu seconds)} for every thread of `pid`."""
    times = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        times[tid] = (name, (int(fields[11]) + int(fields[12])) * TICK_S)
    return times


def group(name):
    if name == "audit-writer":
        return "writer"
    if name.startswith("inst-") or name.startswith("timer-"):
        return "model"
    return "http"


class Server:
    def __init__(self, label, binary, mode, repository, workdir, master_key):
        self.label = f"{label}/{mode}"
        data = os.path.join(workdir, f"data-{label}-{mode}")
        args = [binary, "serve", "--model-repository", repository, "--data-dir", data,
                "--http-port", "0", "--http-address", "127.0.0.1", "--grpc-port", "0",
                "--metrics-port", "0"]
        if mode == "batched":
            config = os.path.join(workdir, f"{label}-{mode}.yaml")
            with open(config, "w") as f:
                f.write(f"keyring: {{master_key_file: {master_key}}}\n"
                        "audit: {sync: false, max_delay_ms: 10}\n")
            args += ["--config", config]
        self.stdout = open(os.path.join(workdir, f"{label}-{mode}.stdout"), "w+")
        self.process = subprocess.Popen(args, stdout=self.stdout, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while True:
            self.stdout.seek(0)
            found = re.search(r"^rampart: HTTP listening on 127\.0\.0\.1:(\d+)",
                              self.stdout.read(), re.M)
            if found:
                self.port = int(found.group(1))
                break
            if self.process.poll() is not None or time.time() > deadline:
                self.stdout.seek(0)
                sys.exit(f"{self.label} did not start:\n{self.stdout.read()[-2000:]}")
            time.sleep(0.1)
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v2/health/ready") as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.1)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def run_wrk(port, script, connections, threads, duration):
    out = subprocess.run(
        ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{duration}s", "-s", script,
         f"http://127.0.0.1:{port}/v2/models/simple/infer"],
        capture_output=True, text=True, check=True).stdout
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        sys.exit(f"wrk saw {errors.group(1)} non-2xx answers")
    return requests, float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def measure(server, script, args):
    before = thread_times(server.process.pid)
    requests, rps = run_wrk(server.port, script, args.connections, args.threads, args.duration)
    after = thread_times(server.process.pid)
    cpu = {"server": 0.0, "writer": 0.0, "model": 0.0, "http": 0.0}
    for tid, (name, seconds) in after.items():
        spent = seconds - before.get(tid, (name, 0.0))[1]
        cpu["server"] += spent
        cpu[group(name)] += spent
    return {"rps": rps, **{k: v * 1e6 / requests for k, v in cpu.items()}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", action="append", required=True, help="label=path")
    parser.add_argument("--repository", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=4)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--modes", default="off,batched")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="audit-cpu-bench-")
    master_key = os.path.join(workdir, "master.key")
    with open(os.open(master_key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
        f.write(os.urandom(32))
    script = os.path.join(workdir, "post.lua")
    with open(script, "w") as f:
        f.write(WRK_SCRIPT % json.dumps(REQUEST, separators=(",", ":")))
    servers = []
    try:
        for entry in args.binary:
            label, _, path = entry.partition("=")
            for mode in args.modes.split(","):
                servers.append(Server(label, os.path.abspath(path), mode,
                                      os.path.abspath(args.repository), workdir, master_key))
        for server in servers:  # warm up
            run_wrk(server.port, script, args.connections, args.threads, 1)
        results = {server.label: [] for server in servers}
        for round_number in range(args.rounds):
            for server in servers:
                result = measure(server, script, args)
                results[server.label].append(result)
                print(f"round {round_number + 1} {server.label}: " +
                      ", ".join(f"{k} {v:.1f}" for k, v in result.items()), file=sys.stderr)
        print(f"load average {os.getloadavg()[0]:.2f} at the end; c{args.connections}, "
              f"{args.rounds} rounds of {args.duration} s\n")
        print("| server | rps | server µs/req | audit-writer | HTTP + main | model |")
        print("|---|---:|---:|---:|---:|---:|")
        for label, runs in results.items():
            def cell(key, digits=1):
                values = [run[key] for run in runs]
                return (f"{statistics.median(values):.{digits}f} "
                        f"({min(values):.{digits}f}-{max(values):.{digits}f})")
            print(f"| {label} | {cell('rps', 0)} | {cell('server')} | {cell('writer')} | "
                  f"{cell('http')} | {cell('model')} |")
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
