"""Shared helpers for Rampart's end-to-end tests: run the real binary, talk HTTP to it.

Standard library only, so the drivers run under any Python 3.9+.

    with Server(binary, repository) as server:      # port 0, waits for /v2/health/ready
        client = server.client()                    # one keep-alive connection
        response = client.request("GET", "/v2")
        response.status, response.json()
    # leaving the block sends SIGTERM and checks that the exit code is 0

Synchronisation is by events only: the server's "listening" line on stdout, then polling
/v2/health/ready under a bounded deadline. No fixed sleeps.
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

LISTENING_PATTERN = re.compile(r"^rampart: HTTP listening on ([0-9.]+):(\d+)$")
METRICS_PATTERN = re.compile(r"^rampart: metrics listening on ([0-9.]+):(\d+)$")
GRPC_PATTERN = re.compile(r"^rampart: gRPC listening on ([0-9.]+):(\d+)$")
SERVED_PATTERN = re.compile(r"^rampart: http served=(\d+) handle_ns_total=(\d+)$")

DEFAULT_START_TIMEOUT_S = 60.0
DEFAULT_STOP_TIMEOUT_S = 30.0


class E2eError(AssertionError):
    """A check against the server failed; the message says what was expected and what came."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise E2eError(message)


def thread_nice(pid: int, name: str) -> int:
    """The nice value of the thread of process `pid` whose name (comm) is `name`."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as comm:
            if comm.read().rstrip("\n") != name:
                continue
        with open(f"/proc/{pid}/task/{tid}/stat") as stat:
            # Fields after "pid (comm) ": nice is the 19th field of the line, the 17th here.
            return int(stat.read().rsplit(")", 1)[1].split()[16])
    raise E2eError(f"process {pid} has no thread named {name!r}")


def count_threads(pid: int, prefix: str) -> int:
    """How many threads of process `pid` have a name (comm) starting with `prefix`."""
    count = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as comm:
            count += comm.read().startswith(prefix)
    return count


# --------------------------------------------------------------------------------------------
# Server process


class Server:
    """One `rampart serve` process on 127.0.0.1 with an OS-chosen port.

    stdout is read by a thread (it carries the listening and the served lines); stderr goes
    to a file in a private temporary folder so that a chatty server can never block on a pipe.
    """

    def __init__(self, binary: str, repository: str, extra_args: Sequence[str] = (),
                 wait_for: str = "ready", start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
                 env: Optional[Dict[str, str]] = None) -> None:
        if wait_for not in ("ready", "live", "listening"):
            raise ValueError(f"wait_for must be ready, live or listening, not {wait_for}")
        self.binary = os.path.abspath(binary)
        self.repository = os.path.abspath(repository)
        self.extra_args = list(extra_args)
        self.wait_for = wait_for
        self.start_timeout_s = start_timeout_s
        self.env = env
        self.process: Optional[subprocess.Popen] = None
        self.host = "127.0.0.1"
        self.port: Optional[int] = None
        self.metrics_port: Optional[int] = None
        self.grpc_port: Optional[int] = None
        self.stdout_lines: List[str] = []
        self.exit_code: Optional[int] = None
        self._listening = threading.Event()
        self._stdout_closed = threading.Event()
        self._lock = threading.Lock()
        self._work_dir = tempfile.mkdtemp(prefix="rampart-e2e-")
        self.stderr_path = os.path.join(self._work_dir, "stderr.log")

    @property
    def command(self) -> List[str]:
        return [self.binary, "serve", "--model-repository", self.repository,
                "--http-port", "0", "--http-address", "127.0.0.1",
                "--grpc-port", "0", "--grpc-address", "127.0.0.1",
                "--metrics-port", "0", "--metrics-address", "127.0.0.1"] + self.extra_args

    def start(self) -> "Server":
        environment = dict(os.environ)
        if self.env:
            environment.update(self.env)
        self._stderr_file = open(self.stderr_path, "wb")
        try:
            self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL,
                                            stdout=subprocess.PIPE, stderr=self._stderr_file,
                                            env=environment)
        except OSError as error:
            self._stderr_file.close()
            raise E2eError(f"cannot run {self.binary}: {error}")
        threading.Thread(target=self._read_stdout, daemon=True).start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self._listening.wait(timeout=0.05):
            if self.process.poll() is not None and self._stdout_closed.is_set():
                raise E2eError(f"server exited with {self.process.returncode} before listening"
                               f"\n{self.describe()}")
            if time.monotonic() > deadline:
                self.kill()
                raise E2eError(f"server did not print its listening line within "
                               f"{self.start_timeout_s:.0f} s\n{self.describe()}")
        if self.wait_for != "listening":
            self.wait_until_healthy(self.wait_for, deadline)
        return self

    def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            with self._lock:
                self.stdout_lines.append(line)
            metrics = METRICS_PATTERN.match(line)
            if metrics:
                self.metrics_port = int(metrics.group(2))
            grpc_line = GRPC_PATTERN.match(line)
            if grpc_line:
                self.grpc_port = int(grpc_line.group(2))
            match = LISTENING_PATTERN.match(line)
            if match and not self._listening.is_set():
                self.host, self.port = match.group(1), int(match.group(2))
                self._listening.set()
        self._stdout_closed.set()

    def wait_until_healthy(self, what: str = "ready", deadline: Optional[float] = None) -> None:
        """Polls /v2/health/<what> until it answers 200 or the deadline passes."""
        if deadline is None:
            deadline = time.monotonic() + self.start_timeout_s
        last = "no answer"
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise E2eError(f"server exited with {self.process.returncode} while waiting "
                               f"for {what}\n{self.describe()}")
            try:
                status = self.client(timeout=5).request("GET", f"/v2/health/{what}").status
                if status == 200:
                    return
                last = f"status {status}"
            except OSError as error:
                last = repr(error)
            if time.monotonic() > deadline:
                raise E2eError(f"/v2/health/{what} not 200 before the deadline ({last})\n"
                               f"{self.describe()}")
            time.sleep(0.05)

    def client(self, timeout: float = 30.0) -> "Client":
        if self.port is None:
            raise E2eError("server is not listening")
        return Client(self.host, self.port, timeout=timeout)

    def send_signal(self, signal_number: int = signal.SIGTERM) -> None:
        assert self.process is not None
        self.process.send_signal(signal_number)

    def stop(self, expect_exit_code: Optional[int] = 0,
             timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> int:
        """Sends SIGTERM, waits for the exit and checks the exit code (None: any)."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.wait(expect_exit_code, timeout_s)

    def wait(self, expect_exit_code: Optional[int] = 0,
             timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> int:
        assert self.process is not None
        try:
            self.exit_code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise E2eError(f"server did not exit within {timeout_s:.0f} s of SIGTERM\n"
                           f"{self.describe()}")
        self._stdout_closed.wait(timeout=5)
        self._stderr_file.close()
        if expect_exit_code is not None and self.exit_code != expect_exit_code:
            raise E2eError(f"server exit code {self.exit_code}, expected {expect_exit_code}\n"
                           f"{self.describe()}")
        return self.exit_code

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def served_summary(self) -> Optional[Tuple[int, int]]:
        """(served, handle_ns_total) from the shutdown line, or None if it was not printed."""
        with self._lock:
            for line in self.stdout_lines:
                match = SERVED_PATTERN.match(line)
                if match:
                    return int(match.group(1)), int(match.group(2))
        return None

    def stderr_text(self) -> str:
        try:
            with open(self.stderr_path, "rb") as log:
                return log.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def describe(self, tail_lines: int = 30) -> str:
        with self._lock:
            stdout = "\n".join(self.stdout_lines[-tail_lines:])
        stderr = "\n".join(self.stderr_text().splitlines()[-tail_lines:])
        return (f"  command: {' '.join(self.command)}\n  stdout:\n{_indent(stdout)}\n"
                f"  stderr (tail):\n{_indent(stderr)}")

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self._work_dir, ignore_errors=True)

    def __enter__(self) -> "Server":
        try:
            return self.start()
        except BaseException:
            self.cleanup()
            raise

    def __exit__(self, exc_type, exc, traceback) -> None:
        try:
            if exc_type is None:
                self.stop()
        finally:
            self.cleanup()


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) or "    (empty)"


def copy_repository(source: str, destination_parent: str, name: str = "models") -> str:
    """Copies a model repository (configs and generated .pt files) into a temp folder."""
    destination = os.path.join(destination_parent, name)
    shutil.copytree(source, destination,
                    ignore=shutil.ignore_patterns("*.py", "*.md", ".gitignore", "__pycache__"))
    return destination


# --------------------------------------------------------------------------------------------
# HTTP client


class Response:
    def __init__(self, status: int, reason: str, headers: List[Tuple[str, str]],
                 body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.header_list = headers
        self.body = body

    def header(self, name: str) -> Optional[str]:
        lowered = name.lower()
        for key, value in self.header_list:
            if key.lower() == lowered:
                return value
        return None

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def __repr__(self) -> str:
        preview = self.body[:300]
        return f"<{self.status} {self.reason} {preview!r}{'...' if len(self.body) > 300 else ''}>"


class Client:
    """A keep-alive HTTP/1.1 connection. If the server closed an idle reused connection, the
    request is retried once on a fresh one (only then: a request is never sent twice after
    the server may have seen it)."""

    def __init__(self, host: str, port: int, timeout: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.connection: Optional[http.client.HTTPConnection] = None
        self.connections_opened = 0

    def _connect(self) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        connection.connect()
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.connections_opened += 1
        return connection

    def request(self, method: str, path: str, body: Optional[bytes] = None,
                headers: Optional[Dict[str, str]] = None) -> Response:
        headers = dict(headers or {})
        for attempt in (0, 1):
            reused = self.connection is not None and self.connection.sock is not None
            if not reused:
                self.close()
                self.connection = self._connect()
            try:
                self.connection.request(method, path, body=body, headers=headers)
                raw = self.connection.getresponse()
                payload = raw.read()
                response = Response(raw.status, raw.reason, raw.getheaders(), payload)
                if raw.will_close:
                    self.close()
                return response
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if not reused or attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def get(self, path: str) -> Response:
        return self.request("GET", path)

    def post_json(self, path: str, document) -> Response:
        return self.request("POST", path, json.dumps(document).encode(),
                            {"Content-Type": "application/json"})

    def infer(self, model: str, request: "InferRequest", version: Optional[str] = None,
              extra_headers: Optional[Dict[str, str]] = None) -> Response:
        path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
        body, header_length = request.encode()
        headers = {"Content-Type": "application/octet-stream" if header_length is not None
                   else "application/json"}
        if header_length is not None:
            headers["Inference-Header-Content-Length"] = str(header_length)
        headers.update(extra_headers or {})
        return self.request("POST", path, body, headers)

    @property
    def socket(self) -> Optional[socket.socket]:
        return self.connection.sock if self.connection is not None else None

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def raw_request(method: str, path: str, body: bytes = b"",
                headers: Optional[Dict[str, str]] = None, host: str = "127.0.0.1") -> bytes:
    """The bytes of an HTTP/1.1 request, for tests that drive a socket by hand."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    merged = dict(headers or {})
    if body or method == "POST":
        merged.setdefault("Content-Length", str(len(body)))
    lines += [f"{name}: {value}" for name, value in merged.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class ResponseReader:
    """Reads successive HTTP responses from a socket driven by hand; the buffer is shared, so
    pipelined responses that arrive together are not lost between reads."""

    class _KeepOpen:
        def __init__(self, file) -> None:
            self._file = file

        def __getattr__(self, name):
            return getattr(self._file, name)

        def close(self) -> None:
            pass

    def __init__(self, sock: socket.socket) -> None:
        self._file = sock.makefile("rb")

    def makefile(self, *args, **kwargs):
        return ResponseReader._KeepOpen(self._file)

    def read(self, method: str = "GET") -> Response:
        raw = http.client.HTTPResponse(self, method=method)  # type: ignore[arg-type]
        raw.begin()
        payload = raw.read()
        return Response(raw.status, raw.reason, raw.getheaders(), payload)


def tcp_queues(local_port: int, remote_port: int) -> Optional[Tuple[int, int]]:
    """(send queue, receive queue) in bytes of the loopback TCP socket local_port ->
    remote_port, from Linux's /proc/net/tcp; None if no such socket is listed."""
    wanted_local = f"0100007F:{local_port:04X}"
    wanted_remote = f"0100007F:{remote_port:04X}"
    try:
        with open("/proc/net/tcp") as table:
            next(table)
            for line in table:
                fields = line.split()
                if fields[1] == wanted_local and fields[2] == wanted_remote:
                    send_queue, receive_queue = fields[4].split(":")
                    return int(send_queue, 16), int(receive_queue, 16)
    except OSError:
        return None
    return None


def wait_until_server_has_read(sock: socket.socket, server_port: int,
                               timeout_s: float = 10.0) -> None:
    """Waits until every byte sent on `sock` has left the client and been read by the server
    process (its socket's receive queue is empty): the request is then in the server's hands."""
    client_port = sock.getsockname()[1]
    deadline = time.monotonic() + timeout_s
    while True:
        client_side = tcp_queues(client_port, server_port)
        server_side = tcp_queues(server_port, client_port)
        if client_side is not None and server_side is not None and \
                client_side[0] == 0 and server_side[1] == 0:
            return
        if time.monotonic() > deadline:
            raise E2eError(f"server did not read the request within {timeout_s:.0f} s "
                           f"(client queues {client_side}, server queues {server_side})")
        time.sleep(0.005)


class Tally:
    """Counts checks and prints one line each; `finish` prints "N passed, M failed"."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def record(self, name: str, error: Optional[str], seconds: float = 0.0) -> None:
        if error is None:
            self.passed += 1
            print(f"PASS {name} ({seconds * 1000:.0f} ms)", flush=True)
        else:
            self.failed += 1
            print(f"FAIL {name}: {error}", flush=True)

    def step(self, name: str, body) -> None:
        """Runs `body` as one check: PASS with the note it returns, or FAIL with its error."""
        try:
            note = body()
        except (E2eError, OSError, ValueError, KeyError) as error:
            self.failed += 1
            print(f"FAIL {name}: {error}", flush=True)
            return
        self.passed += 1
        print(f"PASS {name}: {note}", flush=True)

    def finish(self) -> int:
        print(f"{self.passed} passed, {self.failed} failed", flush=True)
        return 1 if self.failed else 0


# ---------------------------------------------------------------------------------------------
# Pieces of the access and audit drivers (test_access.py, test_audit.py).

# The KServe v2 JSON infer request for `simple` (INPUT0 and INPUT1 both 0..15).
SIMPLE_REQUEST = {"inputs": [{"name": name, "datatype": "INT32", "shape": [1, 16],
                              "data": list(range(16))} for name in ("INPUT0", "INPUT1")]}

# A policy: role `analyst` infers on and reads `simple` (and nothing else); anyone reads the server.
ANALYST_POLICY = """
roles:
  - name: analyst
rules:
  - id: analysts-simple
    effect: permit
    principal: {role: analyst}
    action: [model:infer, model:read]
    resource: {type: model, name: simple}
  - id: everyone-reads-the-server
    effect: permit
    action: server:read
"""


def infer_json(client: "Client", model: str, headers: Dict[str, str]) -> Response:
    """POSTs SIMPLE_REQUEST as JSON to `model`'s infer endpoint with `headers` added."""
    return client.request("POST", f"/v2/models/{model}/infer",
                          json.dumps(SIMPLE_REQUEST).encode(),
                          {"content-type": "application/json", **headers})


def grpc_call(grpc_call_binary: str, server: Server, method: str, request: Dict,
              metadata: Sequence[str] = ()) -> Dict:
    """Runs tests/grpc_call once against `server` (metadata as "key=value" pairs) and returns
    its last output line as JSON (`code` is the gRPC status); raises E2eError if it fails."""
    command = [grpc_call_binary, "--target", f"127.0.0.1:{server.grpc_port}", "--method",
               method]
    for pair in metadata:
        command += ["--metadata", pair]
    result = subprocess.run(command, input=json.dumps(request) + "\n", capture_output=True,
                            text=True, timeout=60)
    check(result.returncode == 0, f"grpc_call exited {result.returncode}: {result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


class DriverContext:
    """What a driver's tests share: its parsed arguments (`args.binary` at least), a private
    temp dir `work` (removed by run_tests) and the binary's CLI run with a timeout."""

    def __init__(self, args, prefix: str, command_timeout_s: float) -> None:
        self.args = args
        self.work = tempfile.mkdtemp(prefix=prefix)
        self.command_timeout_s = command_timeout_s

    def rampart(self, *arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.args.binary, *arguments], capture_output=True, text=True,
                              timeout=self.command_timeout_s)

    def write(self, name: str, text: str) -> str:
        """Writes `text` to `name` in the work dir; returns its path."""
        path = os.path.join(self.work, name)
        with open(path, "w") as file:
            file.write(text)
        return path


def run_tests(ctx: DriverContext, tests, errors: Tuple[type, ...] = (),
              name_filter: str = "") -> int:
    """Runs each (name, test) whose name contains `name_filter`, one PASS/FAIL line each (a test
    returns its summary; E2eError, OSError, ValueError, KeyError, a timeout and `errors` count
    as failures), removes ctx.work and returns the exit code."""
    tally = Tally()
    caught = (E2eError, OSError, ValueError, KeyError, subprocess.TimeoutExpired, *errors)
    try:
        for name, test in tests:
            if name_filter and name_filter not in name:
                continue
            started = time.monotonic()
            try:
                tally.record(f"{name}: {test(ctx)}", None, time.monotonic() - started)
            except caught as error:
                tally.record(name, repr(error))
    finally:
        shutil.rmtree(ctx.work, ignore_errors=True)
    return tally.finish()
