#!/usr/bin/env python3
"""Connection handling, concurrency and shutdown behaviour of the real binary (its command line
and start-up failures: test_server_startup.py).

    /usr/bin/python3 tests/e2e/test_server_behaviour.py --binary build/rampart \
        --repository examples/models --expected-dir build/testdata/expected [--filter NAME]

Needs torch (Debian's /usr/bin/python3) only to script the `slow` model of the shutdown test.
Prints one line per check and ends with "N passed, M failed"; exits non-zero on failure.
"""

import argparse
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from typing import Callable, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kserve_tensors as tensors  # noqa: E402
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402
from known_answers import (check_mlp_row_response, check_simple_response,  # noqa: E402
                           infer_headers, mlp_row_request, simple_request)

CONCURRENT_CONNECTIONS = 64
INFERS_PER_CONNECTION = 4
SLOW_REQUEST_TARGET_S = 0.7


class Fixture:
    """What the checks share: arguments, references, a temp copy of the repository with an
    extra `slow` model, and one server on that copy."""

    def __init__(self, args: argparse.Namespace, work_dir: str) -> None:
        self.binary = args.binary
        self.repository = os.path.abspath(args.repository)
        self.expected_dir = os.path.abspath(args.expected_dir)
        self.work_dir = work_dir
        self.mlp = tensors.load_reference(self.expected_dir, "mlp_classifier")
        self._server: Optional[e2e.Server] = None
        self._slow_repository: Optional[str] = None
        self.slow_iterations = 0  # iterations of `slow` that take about SLOW_REQUEST_TARGET_S

    def slow_repository(self) -> str:
        if self._slow_repository is None:
            repository = e2e.copy_repository(self.repository, self.work_dir, "slow-repository")
            self.slow_iterations = _write_slow_model(repository)
            self._slow_repository = repository
        return self._slow_repository

    def server(self) -> e2e.Server:
        if self._server is None:
            server = e2e.Server(self.binary, self.slow_repository())
            try:
                server.start()
            except BaseException:
                server.cleanup()
                raise
            self._server = server
        return self._server

    def close(self) -> None:
        if self._server is not None:
            try:
                self._server.stop()
            finally:
                self._server.cleanup()


# --------------------------------------------------------------------------------------------
# Checks on the shared server


def test_keep_alive(fixture: Fixture) -> str:
    server = fixture.server()
    client = server.client()
    try:
        client.get("/v2/health/ready")
        first_socket = client.socket
        for index in range(150):
            kind = index % 3
            if kind == 0:
                response = client.infer("simple", simple_request(index))
                check_simple_response(index, response)
            elif kind == 1:
                response = client.get("/v2/models/simple")
                check(response.status == 200, f"metadata status {response.status}")
            else:
                response = client.get("/v2/health/live")
                check(response.status == 200 and response.body == b"",
                      f"live: {response!r}")
            check((response.header("Connection") or "").lower() != "close",
                  f"server closed the keep-alive connection after request {index}")
            check(client.socket is first_socket,
                  f"connection was replaced after request {index}")
        check(client.connections_opened == 1,
              f"{client.connections_opened} connections opened, expected 1")
        return "150 requests on 1 connection"
    finally:
        client.close()


def test_pipelined_requests(fixture: Fixture) -> str:
    server = fixture.server()
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        requests = []
        for seed in (1001, 1002, 1003):
            body, header_length = simple_request(seed).encode()
            requests.append(e2e.raw_request("POST", "/v2/models/simple/infer", body,
                                            infer_headers(header_length)))
        requests.append(e2e.raw_request("GET", "/v2/health/live"))
        sock.sendall(b"".join(requests))
        reader = e2e.ResponseReader(sock)
        for seed in (1001, 1002, 1003):
            check_simple_response(seed, reader.read("POST"))
        response = reader.read("GET")
        check(response.status == 200, f"pipelined live: {response!r}")
    return "4 pipelined requests answered in order"


def test_chunked_request_body(fixture: Fixture) -> str:
    """Clients that stream (Java, requests with a generator) send Transfer-Encoding: chunked."""
    server = fixture.server()
    body, header_length = simple_request(11).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 50]), body[i:i + 50])
                      for i in range(0, len(body), 50)) + b"0\r\n\r\n"
    headers = dict(infer_headers(header_length), **{"Transfer-Encoding": "chunked"})
    request = e2e.raw_request("POST", "/v2/models/simple/infer", b"", headers)
    request = request.replace(b"Content-Length: 0\r\n", b"")
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(request + chunks)
        check_simple_response(11, e2e.ResponseReader(sock).read("POST"))
    return f"{len(body)} bytes in {len(range(0, len(body), 50))} chunks"


def test_expect_100_continue(fixture: Fixture) -> str:
    """curl sends `Expect: 100-continue` with larger bodies and stalls a second without it."""
    server = fixture.server()
    body, header_length = simple_request(12, batch=8).encode()
    headers = dict(infer_headers(header_length), **{"Expect": "100-continue"})
    head = e2e.raw_request("POST", "/v2/models/simple/infer", body, headers)[:-len(body)]
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(head)
        sock.settimeout(2.0)
        try:
            interim = sock.recv(4096)
        except socket.timeout:
            raise E2eError("no '100 Continue' within 2 s of headers with Expect: 100-continue")
        check(interim.startswith(b"HTTP/1.1 100"), f"interim response {interim[:80]!r}")
        sock.settimeout(30)
        sock.sendall(body)
        check_simple_response(12, e2e.ResponseReader(sock).read("POST"), batch=8)
    return "100 Continue, then 200"


def test_concurrent_connections(fixture: Fixture) -> str:
    server = fixture.server()
    barrier = threading.Barrier(CONCURRENT_CONNECTIONS)
    errors: List[str] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        client = server.client(timeout=60)
        try:
            client.get("/v2/health/live")  # connect before the barrier
            barrier.wait(timeout=30)
            for round_ in range(INFERS_PER_CONNECTION):
                if (index + round_) % 2 == 0:
                    seed = index * 100 + round_
                    check_simple_response(seed, client.infer("simple", simple_request(seed)))
                else:
                    row = (index + round_) % 4
                    check_mlp_row_response(fixture.mlp, row,
                                           client.infer("mlp_classifier",
                                                        mlp_row_request(fixture.mlp, row)))
        except (E2eError, OSError, threading.BrokenBarrierError) as error:
            with lock:
                errors.append(f"connection {index}: {error!r}")
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(index,), daemon=True)
               for index in range(CONCURRENT_CONNECTIONS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    for thread in threads:
        thread.join(timeout=max(0.1, deadline - time.monotonic()))
    stuck = sum(thread.is_alive() for thread in threads)
    check(stuck == 0, f"{stuck} connections still waiting after 60 s")
    check(not errors, f"{len(errors)} connections failed; first: {errors[:3]}")
    return (f"{CONCURRENT_CONNECTIONS} connections x {INFERS_PER_CONNECTION} infers "
            f"(simple and mlp_classifier), all correct; {_mlp_batching(server)}")


def _mlp_batching(server: e2e.Server) -> str:
    """For information only (timing decides how much batching happens): how many backend
    executions served how many mlp_classifier requests."""
    client = server.client()
    try:
        response = client.get("/v2/models/mlp_classifier/stats")
        stats = response.json()["model_stats"][0]
        return (f"mlp_classifier: {stats['inference_stats']['success']['count']} requests in "
                f"{stats['execution_count']} executions")
    except (OSError, ValueError, KeyError, IndexError) as error:
        return f"mlp_classifier stats unavailable ({error!r})"
    finally:
        client.close()


def _check_still_serving(fixture: Fixture, what: str) -> None:
    server = fixture.server()
    check(server.process.poll() is None,
          f"server exited ({server.process.returncode}) after {what}\n{server.describe()}")
    client = server.client(timeout=10)
    try:
        check_simple_response(7, client.infer("simple", simple_request(7)))
    except OSError as error:
        raise E2eError(f"server not serving after {what}: {error!r}")
    finally:
        client.close()


def test_client_disconnects(fixture: Fixture) -> str:
    server = fixture.server()
    address = (server.host, server.port)
    body, header_length = simple_request(5, batch=8).encode()
    full = e2e.raw_request("POST", "/v2/models/simple/infer", body, infer_headers(header_length))

    # 1. Half of the request line and headers, then gone.
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(full[:20])
    # 2. Headers promise a body that never fully arrives.
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(full[:len(full) - len(body) // 2])
        e2e.wait_until_server_has_read(sock, server.port)
    # 3. A whole request, then a reset before the response can be written.
    for _ in range(10):
        sock = socket.create_connection(address, timeout=10)
        sock.sendall(full)
        e2e.wait_until_server_has_read(sock, server.port)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()
    # 4. A slower model's request (mlp_classifier, batched) abandoned the same way.
    for row in range(4):
        request_body, length = mlp_row_request(fixture.mlp, row).encode()
        sock = socket.create_connection(address, timeout=10)
        sock.sendall(e2e.raw_request("POST", "/v2/models/mlp_classifier/infer", request_body,
                                     infer_headers(length)))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()
    # 5. Resets while `slow` is executing, so that the response goes to a dead socket. The
    #    single instance runs requests in order: a final request's answer means all ran.
    for _ in range(3):
        sock = socket.create_connection(address, timeout=10)
        sock.sendall(slow_request_bytes(max(1, fixture.slow_iterations // 8)))
        e2e.wait_until_server_has_read(sock, server.port)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()
    with socket.create_connection(address, timeout=60) as sock:
        sock.sendall(slow_request_bytes(1))
        response = e2e.ResponseReader(sock).read("POST")
        check(response.status == 200, f"slow request after the resets: {response!r}")
    _check_still_serving(fixture, "clients disconnected mid-request")
    return ("partial headers, partial body, 17 resets before the response (3 while "
            "executing): still serving")


# --------------------------------------------------------------------------------------------
# Checks with servers of their own


def _write_slow_model(repository: str) -> int:
    """Adds a `slow` model (many 256x256 matmuls, count from its input) to `repository` and
    returns the iteration count that takes about SLOW_REQUEST_TARGET_S here."""
    try:
        import torch  # only the `slow` model needs torch
    except ImportError:
        raise E2eError(f"scripting the `slow` model needs torch; run this with Debian's "
                       f"/usr/bin/python3 (python3-torch), not {sys.executable}")

    class Slow(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(256, 256) / 16.0)

        def forward(self, ITERATIONS: torch.Tensor) -> torch.Tensor:
            state = self.weight
            for _ in range(int(ITERATIONS.sum())):
                state = torch.tanh(torch.mm(state, self.weight))
            # Exactly ITERATIONS as FP32, yet every matmul above is needed to compute it.
            return ITERATIONS.to(torch.float32) + 0.0 * state.sum()

    torch.manual_seed(0)
    scripted = torch.jit.script(Slow().eval())
    model_dir = os.path.join(repository, "slow", "1")
    os.makedirs(model_dir)
    scripted.save(os.path.join(model_dir, "model.pt"))
    with open(os.path.join(repository, "slow", "config.pbtxt"), "w") as config:
        config.write('name: "slow"\n'
                     'platform: "pytorch_libtorch"\n'
                     'max_batch_size: 0\n'
                     'input [\n  { name: "ITERATIONS" data_type: TYPE_INT64 dims: [ 1 ] }\n]\n'
                     'output [\n  { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1 ] }\n]\n'
                     'instance_group [ { count: 1 kind: KIND_CPU } ]\n')
    with torch.no_grad():
        probe = torch.tensor([20], dtype=torch.int64)
        scripted(probe)
        started = time.monotonic()
        scripted(probe)
        per_iteration = max((time.monotonic() - started) / 20, 1e-5)
    return max(5, min(20000, int(SLOW_REQUEST_TARGET_S / per_iteration)))


def slow_request_bytes(iterations: int) -> bytes:
    body, length = tensors.InferRequest([{"name": "ITERATIONS", "datatype": "INT64", "shape": [1],
                                      "data": [iterations], "binary": True}]).encode()
    return e2e.raw_request("POST", "/v2/models/slow/infer", body, infer_headers(length))


def test_sigterm_at_once(fixture: Fixture) -> str:
    """SIGTERM the moment the server says it listens, before its main thread waits for signals:
    still a clean exit 0. (Threads that libraries start before main() do not block the signal;
    delivered to one of them with the default action, it used to kill the process.)"""
    rounds = 3
    for _ in range(rounds):
        server = e2e.Server(fixture.binary, fixture.repository, wait_for="listening")
        try:
            server.start()
            server.stop(expect_exit_code=0)
        finally:
            server.cleanup()
    return f"{rounds} x exit 0"


def test_sigterm_drains_in_flight(fixture: Fixture) -> str:
    """Two slow requests are in the server's hands (one executing, one queued behind it on the
    single instance) when SIGTERM arrives: both complete correctly and the exit code is 0."""
    repository = fixture.slow_repository()
    iterations = fixture.slow_iterations
    server = e2e.Server(fixture.binary, repository, extra_args=["--exit-timeout-secs", "120"])
    try:
        server.start()
        sockets, readers = [], []
        for offset in range(2):
            sock = socket.create_connection((server.host, server.port), timeout=60)
            sock.sendall(slow_request_bytes(iterations + offset))
            sockets.append(sock)
            readers.append(e2e.ResponseReader(sock))
        for sock in sockets:
            e2e.wait_until_server_has_read(sock, server.port)
        signalled = time.monotonic()
        server.send_signal(signal.SIGTERM)
        for offset, reader in enumerate(readers):
            try:
                response = reader.read("POST")
            except (OSError, ValueError) as error:  # http.client errors are OSError/ValueError
                raise E2eError(f"in-flight request {offset} got no response after SIGTERM: "
                               f"{error!r}\n{server.describe()}")
            check(response.status == 200, f"in-flight request {offset}: status "
                                          f"{response.status} {response.body[:200]!r}")
            _, outputs = tensors.decode_infer_response(response)
            got = outputs.get("OUTPUT__0", {}).get("data")
            check(got == [float(iterations + offset)],
                  f"in-flight request {offset}: OUTPUT__0 {got}, expected "
                  f"[{float(iterations + offset)}]")
        drained_s = time.monotonic() - signalled
        for sock in sockets:
            sock.close()
        server.wait(expect_exit_code=0)
        summary = server.served_summary()
        check(summary is not None, f"no 'rampart: http served=<N> handle_ns_total=<T>' line on "
                                   f"stdout: {server.stdout_lines}")
        check(summary[0] >= 3, f"served={summary[0]}, expected at least 3 (readiness poll "
                               f"and two infers)")
        return (f"2 x {iterations} iterations drained {drained_s:.2f} s after SIGTERM, exit 0, "
                f"served={summary[0]}")
    finally:
        server.cleanup()


def test_dynamic_batching_under_load(fixture: Fixture) -> str:
    """mlp_classifier batches (preferred 32, 2 ms delay): concurrent clients must share
    executions, every answer must still be its own row's, and the counts must be exact."""
    # One intra-op thread, so that the config's optimization.priority applies (it does only to
    # instances computing on their own thread).
    server = e2e.Server(fixture.binary, fixture.repository,
                        extra_args=["--threads-per-instance", "1"])
    clients, rounds = 32, 6
    try:
        server.start()
        barrier = threading.Barrier(clients)
        errors: List[str] = []
        lock = threading.Lock()

        def worker(index: int) -> None:
            client = server.client(timeout=60)
            try:
                client.get("/v2/health/live")
                barrier.wait(timeout=30)
                for round_ in range(rounds):
                    row = (index + round_) % 4
                    check_mlp_row_response(fixture.mlp, row, client.infer(
                        "mlp_classifier", mlp_row_request(fixture.mlp, row)))
            except (E2eError, OSError, threading.BrokenBarrierError) as error:
                with lock:
                    errors.append(f"client {index}: {error!r}")
            finally:
                client.close()

        threads = [threading.Thread(target=worker, args=(i,), daemon=True)
                   for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        check(not errors, f"{len(errors)} clients failed; first: {errors[:3]}")
        client = server.client()
        stats = client.get("/v2/models/mlp_classifier/stats").json()["model_stats"][0]
        client.close()
        requests = clients * rounds
        check(stats["inference_stats"]["success"]["count"] == requests,
              f"success count {stats['inference_stats']['success']['count']} != {requests}")
        check(stats["inference_count"] == requests,
              f"inference_count {stats['inference_count']} != {requests}")
        sizes = {int(batch["batch_size"]): batch["compute_infer"]["count"]
                 for batch in stats["batch_stats"]}
        check(sum(size * count for size, count in sizes.items()) == requests,
              f"batch_stats {sizes} do not add up to {requests} items")
        check(max(sizes) > 1, f"no batch larger than 1 formed: batch_stats {sizes}")
        # The example config asks for optimization.priority PRIORITY_MAX: the instance thread
        # runs 10 below the process's nice value where the process may raise a priority, and
        # the log says why not where it may not.
        process_nice = os.getpriority(os.PRIO_PROCESS, server.process.pid)
        instance_nice = e2e.thread_nice(server.process.pid, "inst-mlp_classi")
        if instance_nice == max(process_nice - 10, -20):
            priority = f"instance thread at nice {instance_nice}"
        else:
            check(instance_nice == process_nice,
                  f"instance thread at nice {instance_nice}, process at {process_nice}")
            check("instance threads stay at nice" in server.stderr_text(),
                  "the instance thread kept the process's nice value and no warning says why")
            priority = f"instance thread at nice {instance_nice} (not permitted, warned)"
        # With no --http-thread-count, one HTTP I/O thread per CPU the server may run on (an
        # instance thread at a raised priority takes its core from them when it has a batch).
        io_threads = e2e.count_threads(server.process.pid, "http-io-")
        want = len(os.sched_getaffinity(server.process.pid)) or 1
        check(io_threads == want,
              f"{io_threads} HTTP I/O threads, expected {want} (one per CPU it may run on)")
        priority += f", {io_threads} HTTP I/O thread(s)"
        return (f"{requests} requests in {stats['execution_count']} executions, "
                f"largest batch {max(sizes)}; {priority}")
    finally:
        server.stop()
        server.cleanup()


def test_abandoned_request_never_runs(fixture: Fixture) -> str:
    """A request whose client hangs up while it waits behind a busy instance is dropped before
    it reaches the backend (Triton runs it anyway)."""
    repository = fixture.slow_repository()
    server = e2e.Server(fixture.binary, repository)
    try:
        server.start()
        busy = socket.create_connection((server.host, server.port), timeout=60)
        busy.sendall(slow_request_bytes(fixture.slow_iterations))
        e2e.wait_until_server_has_read(busy, server.port)
        abandoned = socket.create_connection((server.host, server.port), timeout=60)
        abandoned.sendall(slow_request_bytes(fixture.slow_iterations))
        e2e.wait_until_server_has_read(abandoned, server.port)
        abandoned.close()
        response = e2e.ResponseReader(busy).read("POST")
        check(response.status == 200, f"busy request: {response!r}")
        busy.close()
        client = server.client()
        try:
            after = client.infer("slow", tensors.InferRequest(
                [{"name": "ITERATIONS", "datatype": "INT64", "shape": [1], "data": [1]}]))
            check(after.status == 200, f"request after the abandoned one: {after!r}")
            stats = client.get("/v2/models/slow/stats").json()["model_stats"][0]
        finally:
            client.close()
        check(stats["execution_count"] == 2,
              f"execution_count {stats['execution_count']}: the abandoned request ran")
        check(stats["inference_stats"]["fail"]["count"] == 1,
              f"fail count {stats['inference_stats']['fail']['count']}, expected 1 (cancelled)")
        return "abandoned request dropped: 2 executions for 3 requests"
    finally:
        server.stop()
        server.cleanup()


# --------------------------------------------------------------------------------------------

TESTS: List[Callable[[Fixture], str]] = [
    test_keep_alive,
    test_pipelined_requests,
    test_chunked_request_body,
    test_expect_100_continue,
    test_concurrent_connections,
    test_dynamic_batching_under_load,
    test_abandoned_request_never_runs,
    test_client_disconnects,
    test_sigterm_at_once,
    test_sigterm_drains_in_flight,
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
    work_dir = tempfile.mkdtemp(prefix="rampart-behaviour-")
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
        started = time.monotonic()
        try:
            fixture.close()
            if fixture._server is not None:
                tally.record("shared server: SIGTERM exit 0", None, time.monotonic() - started)
        except E2eError as error:
            tally.record("shared server shutdown", str(error))
    finally:
        if fixture._server is not None:
            fixture._server.cleanup()
        shutil.rmtree(work_dir, ignore_errors=True)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
