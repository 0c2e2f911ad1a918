#!/usr/bin/env python3
"""Overload on the real binary: each limit answers at once with its status and is counted.

    /usr/bin/python3 tests/e2e/test_overload.py --binary build/rampart \
        --repository examples/models

A model queue past its bound (503), open connections past --http-max-connections (503),
request bodies past --http-max-body-bytes-in-flight (503), a head that does not come within
--http-header-timeout-secs (408); the HTTP refusals in rampart_http_refused_total{reason}, the
queue's in nv_inference_request_failure{reason="REJECTED"}. Needs torch (Debian's
/usr/bin/python3) to script the `slow` model that keeps an instance busy.
Prints one line per check and ends with "N passed, M failed"; exits non-zero on failure.
"""

import argparse
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import urllib.request
from typing import Callable, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402
from test_server_behaviour import _write_slow_model, slow_request_bytes  # noqa: E402


def scrape(server: e2e.Server) -> str:
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def metric(text: str, name: str, *labels: str) -> float:
    """The value of the series of `name` whose labels hold each of `labels` (`reason="x"`), or 0
    if there is none."""
    for line in text.splitlines():
        if line.startswith(name + "{") and all(label in line for label in labels):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def read_answer(sock: socket.socket, method: str = "GET") -> e2e.Response:
    return e2e.ResponseReader(sock).read(method)


def with_server(repository: str, binary: str, args: List[str], body: Callable[[e2e.Server], str]
                ) -> str:
    server = e2e.Server(binary, repository, extra_args=args)
    try:
        server.start()
        return body(server)
    finally:
        server.stop()
        server.cleanup()


def wait_for_slow_model(server: e2e.Server, busy: int, pending: int,
                        timeout_s: float = 30.0) -> None:
    """Polls the metrics until the `slow` model has `busy` instances executing and `pending`
    requests queued."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = scrape(server)
        seen = (metric(text, "rampart_model_busy_instances", 'model="slow"'),
                metric(text, "nv_inference_pending_request_count", 'model="slow"'))
        if seen == (busy, pending):
            return
        if time.monotonic() > deadline:
            raise E2eError(f"slow model: (busy, pending) = {seen}, waited for {(busy, pending)}")
        time.sleep(0.005)


def test_model_queue_bound(binary: str, repository: str, iterations: int) -> str:
    """One request executing, one queued: the bound of 1 refuses the next at once."""
    def body(server: e2e.Server) -> str:
        # Each step waits until the server shows its effect: having read a request is not
        # enough (its instance thread may not have taken the first yet, or the second may not
        # have reached the queue), and on a loaded machine either gap can last milliseconds.
        busy = socket.create_connection((server.host, server.port), timeout=60)
        busy.sendall(slow_request_bytes(iterations))
        wait_for_slow_model(server, busy=1, pending=0)
        queued = socket.create_connection((server.host, server.port), timeout=60)
        queued.sendall(slow_request_bytes(1))
        wait_for_slow_model(server, busy=1, pending=1)
        refused = socket.create_connection((server.host, server.port), timeout=60)
        started = time.monotonic()
        refused.sendall(slow_request_bytes(1))
        answer = read_answer(refused, "POST")
        waited = time.monotonic() - started
        check(answer.status == 503, f"past the queue bound: {answer!r}")
        check(b"Exceeds maximum queue size" in answer.body, f"message: {answer.body!r}")
        # Answered without waiting for the busy instance (which takes about 0.7 s).
        check(waited < 0.5, f"the refusal took {waited:.2f} s")
        for sock in (busy, queued):
            check(read_answer(sock, "POST").status == 200, "a request inside the bound failed")
            sock.close()
        refused.close()
        rejected = metric(scrape(server), "nv_inference_request_failure", 'model="slow"',
                          'reason="REJECTED"')
        check(rejected == 1, f"nv_inference_request_failure REJECTED = {rejected}")
        return f"503 in {waited * 1000:.0f} ms, counted as REJECTED"
    return with_server(repository, binary, ["--default-max-queue-size", "1"], body)


def test_connection_limit(binary: str, repository: str) -> str:
    def body(server: e2e.Server) -> str:
        held = []
        for _ in range(2):
            sock = socket.create_connection((server.host, server.port), timeout=30)
            sock.sendall(e2e.raw_request("GET", "/v2/health/live"))
            check(read_answer(sock).status == 200, "a connection inside the limit")
            held.append(sock)
        third = socket.create_connection((server.host, server.port), timeout=30)
        answer = read_answer(third)
        check(answer.status == 503, f"past the connection limit: {answer!r}")
        check(answer.header("Retry-After") == "1", f"Retry-After: {answer!r}")
        third.close()
        counted = metric(scrape(server), "rampart_http_refused_total", 'reason="connections"')
        check(counted == 1, f"rampart_http_refused_total connections = {counted}")
        for sock in held:
            sock.close()
        return "the third connection got 503, counted"
    return with_server(repository, binary, ["--http-max-connections", "2"], body)


def test_bodies_in_flight(binary: str, repository: str) -> str:
    def body(server: e2e.Server) -> str:
        holding = socket.create_connection((server.host, server.port), timeout=30)
        holding.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: 900\r\n\r\n")
        e2e.wait_until_server_has_read(holding, server.port)
        # The second body would pass the 1000 bytes being read at once.
        other = socket.create_connection((server.host, server.port), timeout=30)
        other.sendall(e2e.raw_request("POST", "/v2/models/simple/infer", b"{" + b" " * 198 + b"}"))
        answer = read_answer(other, "POST")
        check(answer.status == 503, f"past the bodies in flight: {answer!r}")
        other.close()
        holding.close()
        counted = metric(scrape(server), "rampart_http_refused_total",
                         'reason="bodies_in_flight"')
        check(counted == 1, f"rampart_http_refused_total bodies_in_flight = {counted}")
        return "a body past the bytes in flight got 503, counted"
    return with_server(repository, binary, ["--http-max-body-bytes-in-flight", "1000"], body)


def test_slow_head(binary: str, repository: str) -> str:
    def body(server: e2e.Server) -> str:
        sock = socket.create_connection((server.host, server.port), timeout=30)
        started = time.monotonic()
        sock.sendall(b"GET /v2/health/live HTTP/1.1\r\n")  # and never the rest of the head
        answer = read_answer(sock)
        waited = time.monotonic() - started
        check(answer.status == 408, f"a head that never ends: {answer!r}")
        # Due 1 s after its first byte by the server's coarse clock (which may lag a few
        # milliseconds); deadlines are checked once a second.
        check(0.9 <= waited < 10, f"answered after {waited:.2f} s")
        sock.close()
        counted = metric(scrape(server), "rampart_http_refused_total", 'reason="header_timeout"')
        check(counted == 1, f"rampart_http_refused_total header_timeout = {counted}")
        return f"408 after {waited:.1f} s, counted"
    return with_server(repository, binary, ["--http-header-timeout-secs", "1"], body)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True)
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    work_dir = tempfile.mkdtemp(prefix="rampart-overload-")
    try:
        repository = e2e.copy_repository(os.path.abspath(args.repository), work_dir, "repository")
        iterations = _write_slow_model(repository)
        checks = [
            ("model queue bound", lambda: test_model_queue_bound(args.binary, repository,
                                                                  iterations)),
            ("connection limit", lambda: test_connection_limit(args.binary, repository)),
            ("bodies in flight", lambda: test_bodies_in_flight(args.binary, repository)),
            ("slow head", lambda: test_slow_head(args.binary, repository)),
        ]
        for name, run in checks:
            started = time.monotonic()
            try:
                tally.record(f"{name}: {run()}", None, time.monotonic() - started)
            except (E2eError, OSError) as error:
                tally.record(name, f"{error}" if isinstance(error, E2eError) else repr(error))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
