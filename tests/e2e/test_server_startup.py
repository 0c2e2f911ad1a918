#!/usr/bin/env python3
"""The real binary's command line and start-up: unknown flags, `--help` defaults, a missing
repository, ports in use, broken models failing alone, a model answering more outputs than its
config lists. Each check starts servers of its own.

    /usr/bin/python3 tests/e2e/test_server_startup.py --binary build/rampart \
        --repository examples/models --expected-dir build/testdata/expected [--filter NAME]

Prints one line per check and ends with "N passed, M failed"; exits non-zero on failure.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kserve_tensors as tensors  # noqa: E402
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402
from known_answers import (check_simple_response, infer_headers, mlp_row_request,  # noqa: E402
                           simple_request)


class Fixture:
    """What the checks share: the binary, the example repository and its references, a work
    directory."""

    def __init__(self, args: argparse.Namespace, work_dir: str) -> None:
        self.binary = args.binary
        self.repository = os.path.abspath(args.repository)
        self.expected_dir = os.path.abspath(args.expected_dir)
        self.work_dir = work_dir
        self.mlp = tensors.load_reference(self.expected_dir, "mlp_classifier")



def test_unknown_cli_flag(fixture: Fixture) -> str:
    command = [fixture.binary, "serve", "--model-repository", fixture.repository,
               "--http-port", "0", "--http-address", "127.0.0.1", "--grpc-port", "0",
               "--grpc-address", "127.0.0.1", "--no-such-flag"]
    try:
        result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                                timeout=30)
    except subprocess.TimeoutExpired:
        raise E2eError("`serve --no-such-flag` still running after 30 s")
    stderr = result.stderr.decode("utf-8", "replace")
    check(result.returncode != 0, f"`serve --no-such-flag` exited 0\nstderr: {stderr}")
    check("no-such-flag" in stderr,
          f"stderr does not name the unknown flag:\n{stderr.strip()[:500]}")
    check(b"HTTP listening" not in result.stdout, "it started listening anyway")
    return f"exit {result.returncode}: {stderr.strip().splitlines()[0][:120] if stderr else ''}"


# Flags whose default is empty (nothing to show): paths, lists, the repository itself.
FLAGS_WITHOUT_DEFAULT = {"--config", "--model-repository", "--load-model", "--http-ssl-cert",
                         "--http-ssl-key", "--http-ssl-root-cert", "--grpc-server-cert",
                         "--grpc-server-key", "--grpc-root-cert", "--instance-cpus",
                         "--http-cpus", "--upstream", "--upstream-api-key", "--master-key-file",
                         "--files-seal-key"}


def test_help_shows_every_default(fixture: Fixture) -> str:
    """`serve --help` shows each flag's default the same way, `TYPE=default`, booleans as
    `BOOLEAN=true|false` (some booleans showed `BOOLEAN=1`, others nothing)."""
    result = subprocess.run([fixture.binary, "serve", "--help"], stdin=subprocess.DEVNULL,
                            capture_output=True, timeout=30)
    check(result.returncode == 0, f"serve --help exited {result.returncode}")
    text = result.stdout.decode("utf-8", "replace")
    usage = {}
    for line in text.splitlines():
        match = re.match(r"^  (?:-h,)?(--[a-z0-9-]+)(?: (\S+))?", line)
        if match:
            usage[match.group(1)] = match.group(2) or ""
    check(len(usage) > 30, f"too few flags in --help:\n{text}")
    booleans = []
    for flag, column in usage.items():
        if flag == "--help":
            continue
        if column.startswith("BOOLEAN"):
            check(column in ("BOOLEAN=true", "BOOLEAN=false"),
                  f"{flag} shows {column!r}, expected BOOLEAN=true or BOOLEAN=false")
            booleans.append(flag)
        elif flag not in FLAGS_WITHOUT_DEFAULT:
            check("=" in column, f"{flag} shows no default: {column!r}")
    for flag in ("--allow-grpc", "--allow-metrics", "--access-log", "--metrics-summaries",
                 "--strict-readiness", "--http-sched-batch", "--http-ssl-mutual",
                 "--grpc-use-ssl", "--grpc-use-ssl-mutual"):
        check(flag in booleans, f"{flag} is not shown as a BOOLEAN with its default")
    check(usage["--allow-grpc"] == "BOOLEAN=true" and usage["--access-log"] == "BOOLEAN=false",
          f"wrong defaults: {usage['--allow-grpc']}, {usage['--access-log']}")
    return f"{len(usage) - 1} flags, {len(booleans)} booleans as BOOLEAN=true|false"


def test_missing_repository(fixture: Fixture) -> str:
    missing = os.path.join(fixture.work_dir, "no-such-repository")
    # Every port 0: the ports are checked first, and the default 8002 may be taken here.
    command = [fixture.binary, "serve", "--model-repository", missing,
               "--http-port", "0", "--http-address", "127.0.0.1", "--grpc-port", "0",
               "--grpc-address", "127.0.0.1", "--metrics-port", "0",
               "--metrics-address", "127.0.0.1"]
    try:
        result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                                timeout=30)
    except subprocess.TimeoutExpired:
        raise E2eError("server with a missing repository still running after 30 s")
    stderr = result.stderr.decode("utf-8", "replace")
    check(result.returncode != 0, f"exited 0 with a missing repository\nstderr: {stderr}")
    check("no-such-repository" in stderr,
          f"stderr does not name the missing repository:\n{stderr.strip()[:500]}")
    return f"exit {result.returncode}"


def test_ports_in_use(fixture: Fixture) -> str:
    """Each port held by this test is reported before any model loads, in one line naming its
    flag, and the exit code is 1 (it used to be found after every model had loaded)."""
    held = []
    try:
        for _ in range(3):
            holder = socket.socket()
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            held.append(holder)
        http, grpc, metrics = (holder.getsockname()[1] for holder in held)
        cases = [
            (["--http-port", str(http)], [f"--http-port {http}: address already in use"]),
            (["--grpc-port", str(grpc)], [f"--grpc-port {grpc}: address already in use"]),
            (["--metrics-port", str(metrics)],
             [f"--metrics-port {metrics}: address already in use"]),
            (["--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)],
             [f"--http-port {http}: address already in use",
              f"--grpc-port {grpc}: address already in use",
              f"--metrics-port {metrics}: address already in use"]),
        ]
        for ports, expected in cases:
            # Every listener on 0.0.0.0 (the defaults): the held 127.0.0.1 ports conflict too.
            command = [fixture.binary, "serve", "--model-repository", fixture.repository] + ports
            for flag in ("--http-port", "--grpc-port", "--metrics-port"):
                if flag not in ports:
                    command += [flag, "0"]
            try:
                result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                                        timeout=60)
            except subprocess.TimeoutExpired:
                raise E2eError(f"`{' '.join(ports)}` (in use) still running after 60 s")
            stderr = result.stderr.decode("utf-8", "replace")
            check(result.returncode == 1, f"{ports}: exit {result.returncode}, expected 1\n"
                                          f"stderr: {stderr[-800:]}")
            for line in expected:
                check(stderr.count(line) == 1, f"{ports}: stderr lacks {line!r} (once):\n"
                                               f"{stderr[-800:]}")
            check("ready: version" not in stderr and "loaded '" not in stderr,
                  f"{ports}: models loaded before the port was checked:\n{stderr[-800:]}")
            check("{" not in stderr, f"{ports}: an internal error blob:\n{stderr[-800:]}")
            check(len(stderr.strip().splitlines()) == len(expected),
                  f"{ports}: more than one line per port:\n{stderr}")
            check(b"listening" not in result.stdout, f"{ports}: it started listening anyway")
    finally:
        for holder in held:
            holder.close()
    return "each port in use: one line naming its flag, before loading, exit 1"


def test_broken_models(fixture: Fixture) -> str:
    """One model with a config that does not parse, one whose model.pt is garbage: the others
    load and serve, the broken ones are not ready. Stopped with SIGINT."""
    repository = e2e.copy_repository(fixture.repository, fixture.work_dir, "broken-repository")
    with open(os.path.join(repository, "image_classifier", "config.pbtxt"), "w") as config:
        config.write('name: "image_classifier"\nplatform: "pytorch_libtorch"\n'
                     'max_batch_size: eight\ninput [ { name: "image" \n')
    with open(os.path.join(repository, "mlp_classifier", "1", "model.pt"), "wb") as model:
        model.write(b"PK\x03\x04 this is not a TorchScript archive" * 10)

    server = e2e.Server(fixture.binary, repository, wait_for="live")
    notes = []
    try:
        server.start()
        client = server.client()
        for name in ("simple", "text_stats"):
            response = client.get(f"/v2/models/{name}/ready")
            check(response.status == 200, f"{name} ready: {response.status}")
        for name in ("image_classifier", "mlp_classifier"):
            response = client.get(f"/v2/models/{name}/ready")
            # As Triton: a model that failed to load is not found (404 with its text).
            check(response.status == 404 and "Request for unknown model" in response.text(),
                  f"broken {name} ready: {response!r}, expected 404")
            body, length = mlp_row_request(fixture.mlp, 0).encode()
            response = client.request("POST", f"/v2/models/{name}/infer", body,
                                      infer_headers(length))
            check(response.status in (404, 503),
                  f"infer on broken {name}: {response.status}, expected 503 (or Triton's 404)")
            error = response.json().get("error", "")
            check(bool(error), f"infer on broken {name}: no error message")
            notes.append(f"{name} infer {response.status}")
        check_simple_response(3, client.infer("simple", simple_request(3, batch=2)), batch=2)
        response = client.post_json("/v2/repository/index", {})
        check(response.status == 200, f"repository index: {response.status} {response.body!r}")
        states = {entry.get("name"): entry for entry in response.json()}
        for name in ("image_classifier", "mlp_classifier"):
            entry = states.get(name)
            check(entry is not None, f"repository index does not list {name}: {states}")
            check(entry.get("state") == "UNAVAILABLE",
                  f"index state of {name}: {entry.get('state')!r}, expected UNAVAILABLE")
            check(bool(entry.get("reason")), f"index entry for {name} has no reason")
        for name in ("simple", "text_stats"):
            check(states.get(name, {}).get("state") == "READY",
                  f"index state of {name}: {states.get(name)}")
        # Strict readiness (Triton's default): not ready while a model is unavailable.
        ready = client.get("/v2/health/ready").status
        check(ready == 400, f"server ready with broken models: {ready}, expected 400")
        check(client.get("/v2/health/live").status == 200, "server not live")
        notes.append(f"server ready={ready}")
        client.close()
        server.send_signal(signal.SIGINT)
        server.wait(expect_exit_code=0)
    finally:
        server.cleanup()
    # --strict-readiness=false: ready as long as it serves at all.
    lenient = e2e.Server(fixture.binary, repository, ["--strict-readiness=false"])
    try:
        lenient.start()  # waits for /v2/health/ready
        notes.append("ready with --strict-readiness=false")
        lenient.stop()
    finally:
        lenient.cleanup()
    return ", ".join(notes) + ", SIGINT exit 0"


def test_more_outputs_than_a_list_return(fixture: Fixture) -> str:
    """forward() -> List[Tensor] of 2, the config lists 3 outputs: only a run shows the list's
    length, so a model_warmup fails the load with the explanation; without one each request
    gets it."""
    import torch  # the e2e suite runs on Debian's python3-torch

    class Halves(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
            return [x, x / 2]

    repository = os.path.join(fixture.work_dir, "list-repository")
    os.makedirs(os.path.join(repository, "halves", "1"))
    torch.jit.script(Halves()).save(os.path.join(repository, "halves", "1", "model.pt"))
    config = ('backend: "pytorch"\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
              'output [ { name: "a" data_type: TYPE_FP32 dims: [ 2 ] },'
              ' { name: "b" data_type: TYPE_FP32 dims: [ 2 ] },'
              ' { name: "c" data_type: TYPE_FP32 dims: [ 2 ] } ]\n')
    warmup = ('model_warmup [ { name: "zeros" batch_size: 1 inputs { key: "x" value {'
              ' data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } } ]\n')
    explanation = ("forward() returned a list of 2 value(s) (List[Tensor]), but the config lists "
                   "3 output(s) (a, b, c) and output 'c' is value 2")
    config_path = os.path.join(repository, "halves", "config.pbtxt")
    with open(config_path, "w") as out:
        out.write(config + warmup)
    server = e2e.Server(fixture.binary, repository, wait_for="live")
    try:
        server.start()
        server.stop()
        check(f"model_warmup 'zeros': model 'halves': {explanation}" in server.stderr_text(),
              f"the load's error does not explain:\n{server.describe()}")
    finally:
        server.cleanup()
    with open(config_path, "w") as out:
        out.write(config)
    server = e2e.Server(fixture.binary, repository)
    try:
        server.start()
        client = server.client()
        body, length = tensors.InferRequest([{"name": "x", "datatype": "FP32", "shape": [2],
                                          "data": [1.0, 2.0]}]).encode()
        reply = client.request("POST", "/v2/models/halves/infer", body, infer_headers(length))
        check(reply.status >= 400 and explanation in reply.json().get("error", ""),
              f"request answered {reply.status} {reply.text()}")
        client.close()
        server.stop()
    finally:
        server.cleanup()
    return "the warm-up fails the load with the explanation; without one, each request gets it"


TESTS: List[Callable[[Fixture], str]] = [
    test_unknown_cli_flag,
    test_missing_repository,
    test_help_shows_every_default,
    test_ports_in_use,
    test_broken_models,
    test_more_outputs_than_a_list_return,
]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True,
                        help="example repository with generated model.pt files")
    parser.add_argument("--expected-dir", required=True,
                        help="reference samples written by examples/models/generate.py")
    parser.add_argument("--filter", default="", help="run only checks whose name contains it")
    args = parser.parse_args(argv)

    tally = e2e.Tally()
    work_dir = tempfile.mkdtemp(prefix="rampart-startup-")
    fixture = Fixture(args, work_dir)
    try:
        for test in TESTS:
            name = test.__name__[len("test_"):]
            if args.filter and args.filter not in name:
                continue
            started = time.monotonic()
            try:
                detail = test(fixture)
                tally.record(f"{name}: {detail}", None, time.monotonic() - started)
            except (E2eError, OSError) as error:
                tally.record(name, f"{error}" if isinstance(error, E2eError) else repr(error))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
