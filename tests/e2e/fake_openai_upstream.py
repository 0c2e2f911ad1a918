#!/usr/bin/env python3
"""A fault-injecting fake OpenAI-compatible server for the gateway's end-to-end tests.

Standard library only. Multi-threaded (one thread per connection, HTTP/1.1 keep-alive), bound
to 127.0.0.1 on an OS-chosen port. It serves:

    GET  /v1/models, /v1/models/{id}     the ids given to it
    POST /v1/chat/completions            JSON, or SSE with `stream: true`
    POST /v1/completions                 JSON, or SSE with `stream: true`
    POST /v1/embeddings                  float or base64 (`encoding_format`), `dimensions`
    GET  /health                         200, or what set_health() says (vLLM's health check)
    POST /fake/control, GET /fake/stats  the control endpoint (for use from another process)

A stream is what vLLM sends: a role-only first chunk, one chunk per word of the answer, a
chunk with `finish_reason`, a usage chunk (empty `choices`) only when
`stream_options.include_usage` is true, then `data: [DONE]`; chunked transfer encoding.

Misbehaviours ("faults") are chosen per request, first found wins: the `x-fake-fault` header,
the body's `fake_fault` field (the gateway passes unknown fields through, so a test reaches the
upstream through it), then the server's default fault (set_fault() or POST /fake/control,
optionally for the next N requests only). A fault is `kind` or `kind=value`, then optional
`,key=value` pairs:

    status=503[,retry_after=1]   answer that status with an OpenAI error body
    delay_first_byte=0.5         wait that many seconds before the status line
    delay_first_token=0.5        stream: send the head and the role chunk, then wait
    cut_after=2                  stream: close the socket after that many chunks (no [DONE]);
                                 not streamed: send half the body, then close
    error_event_after=2          stream: after that many chunks an `error` event, then [DONE]
    invalid_json                 200 with a body that is not JSON (or events that are not)
    content_type=text/html       200 with that content type
    huge=20000000                200 whose body is that many bytes (declared up front);
                                 huge=forever: chunked, until the peer closes the connection
    hang                         read the request, never answer (until the peer closes the
                                 connection, recorded as closed_streams() are, or the server
                                 stops)
    slow_forever=0.05            stream: a token every that many seconds, forever, until the
                                 peer closes the connection (recorded: see closed_streams)
    stop_reading                 (default fault only) accept connections, never read them
    tokens=5                     not a fault: the answer has that many words

It counts requests per path (count()), keeps the last body and headers per path (last_body(),
last_headers()), and records when a peer closed a stream it was still writing
(closed_streams()). Run alone it prints `fake upstream listening on 127.0.0.1:PORT`.
"""

import argparse
import base64
import hashlib
import json
import select
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Tuple

Fault = Dict[str, str]


def parse_fault(spec: Optional[str]) -> Optional[Fault]:
    """`kind[=value][,key=value...]` -> {"kind": kind, "value": value, key: value...}."""
    if not spec:
        return None
    parts = [part.strip() for part in spec.split(",") if part.strip()]
    kind, _, value = parts[0].partition("=")
    fault = {"kind": kind, "value": value}
    for part in parts[1:]:
        key, _, item = part.partition("=")
        fault[key] = item
    return fault


def embedding_of(text: str, dimensions: int) -> List[float]:
    """A deterministic unit vector for `text`."""
    raw = b""
    counter = 0
    while len(raw) < dimensions * 4:
        raw += hashlib.sha256(f"{counter}:{text}".encode()).digest()
        counter += 1
    values = [(raw[4 * i] - 127.5) / 127.5 for i in range(dimensions)]
    norm = sum(value * value for value in values) ** 0.5 or 1.0
    return [value / norm for value in values]


class FakeUpstream:
    """One fake server. Use as a context manager or call start() and stop()."""

    def __init__(self, name: str = "fake", models: Tuple[str, ...] = ("fake-model",),
                 answer: str = "") -> None:
        self.name = name
        self.models = list(models)
        self.answer = answer or f"hello from {name}"
        self._lock = threading.Lock()
        self._counts: Dict[str, int] = {}
        self._last_body: Dict[str, bytes] = {}
        self._last_headers: Dict[str, Dict[str, str]] = {}
        self._closed_streams: List[float] = []
        self._default_fault: Optional[Fault] = None
        self._default_fault_times: Optional[int] = None
        self._health_status = 200
        self._stopping = threading.Event()
        self._changed = threading.Condition(self._lock)
        self._server: Optional[ThreadingHTTPServer] = None
        self.port = 0

    # ---------------------------------------------------------------- control (thread-safe)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def set_fault(self, spec: Optional[str], times: Optional[int] = None) -> None:
        """The fault of requests that name none (for the next `times` requests, or all)."""
        with self._lock:
            self._default_fault = parse_fault(spec)
            self._default_fault_times = times

    def set_health(self, status: int) -> None:
        with self._lock:
            self._health_status = status

    def count(self, path: str = "/v1/chat/completions") -> int:
        with self._lock:
            return self._counts.get(path, 0)

    def counts(self) -> Dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._last_body.clear()
            self._last_headers.clear()
            self._closed_streams.clear()
            self._default_fault = None
            self._default_fault_times = None
            self._health_status = 200

    def last_body(self, path: str = "/v1/chat/completions") -> Optional[dict]:
        with self._lock:
            body = self._last_body.get(path)
        return json.loads(body) if body is not None else None

    def last_headers(self, path: str = "/v1/chat/completions") -> Dict[str, str]:
        with self._lock:
            return dict(self._last_headers.get(path, {}))

    def closed_streams(self) -> List[float]:
        """time.monotonic() of each stream whose peer closed the connection mid-stream."""
        with self._lock:
            return list(self._closed_streams)

    def wait_for(self, predicate, timeout_s: float = 10.0) -> bool:
        """Waits until predicate(self) holds (re-checked on every request and event)."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._changed:
                self._changed.wait(min(left, 0.05))
        return True

    # ---------------------------------------------------------------- life

    def start(self) -> "FakeUpstream":
        fake = self

        class Handler(_Handler):
            upstream = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         name=f"fake-{self.name}", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeUpstream":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---------------------------------------------------------------- used by the handler

    def _record(self, path: str, body: bytes, headers: Dict[str, str]) -> None:
        with self._changed:
            self._counts[path] = self._counts.get(path, 0) + 1
            self._last_body[path] = body
            self._last_headers[path] = headers
            self._changed.notify_all()

    def _record_closed(self) -> None:
        with self._changed:
            self._closed_streams.append(time.monotonic())
            self._changed.notify_all()

    def _take_default_fault(self) -> Optional[Fault]:
        with self._lock:
            fault = self._default_fault
            if fault is not None and self._default_fault_times is not None:
                self._default_fault_times -= 1
                if self._default_fault_times <= 0:
                    self._default_fault = None
                    self._default_fault_times = None
            return fault

    def _peek_default_kind(self) -> Optional[str]:
        with self._lock:
            return self._default_fault["kind"] if self._default_fault else None

    def _health(self) -> int:
        with self._lock:
            return self._health_status


class _Handler(BaseHTTPRequestHandler):
    upstream: FakeUpstream  # set by a subclass per server
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:  # noqa: A002 (the base class's name)
        pass

    def setup(self) -> None:
        super().setup()
        # Head and body go out in separate writes: without this, Nagle's algorithm holds the
        # body until the peer's delayed ACK, 40 ms a call.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle(self) -> None:
        if self.upstream._peek_default_kind() == "stop_reading":
            # Never read: the peer's request sits in the socket until the server stops.
            self.upstream._stopping.wait()
            self.close_connection = True
            return
        try:
            super().handle()
        except (ConnectionError, socket.timeout, OSError):
            self.close_connection = True

    # ---------------------------------------------------------------- plumbing

    def _body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, status: int, body: bytes, content_type: str = "application/json",
              headers: Optional[Dict[str, str]] = None) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _send_json(self, status: int, document, headers: Optional[Dict[str, str]] = None) -> None:
        self._send(status, json.dumps(document).encode(), headers=headers)

    def _error(self, status: int, message: str, headers: Optional[Dict[str, str]] = None) -> None:
        kind = "rate_limit_error" if status == 429 else (
            "invalid_request_error" if status < 500 else "server_error")
        self._send_json(status, {"error": {"message": message, "type": kind, "param": None,
                                           "code": None}}, headers)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, document) -> None:
        payload = document if isinstance(document, str) else json.dumps(document)
        self._chunk(f"data: {payload}\n\n".encode())

    def _peer_closed(self, wait_s: float) -> bool:
        """Waits up to wait_s for the peer to close its side; True if it did."""
        readable, _, _ = select.select([self.connection], [], [], wait_s)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _cut(self) -> None:
        """Closes the connection at once, mid-answer (RST, so the peer cannot take it for an
        orderly end)."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()

    # ---------------------------------------------------------------- routes

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        fake = self.upstream
        path = self.path.split("?", 1)[0]
        fake._record(path, b"", {k.lower(): v for k, v in self.headers.items()})
        if path == "/health":
            status = fake._health()
            self._send(status, b"" if status == 200 else b"unhealthy", "text/plain")
        elif path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [
                {"id": model, "object": "model", "created": 1700000000, "owned_by": fake.name}
                for model in fake.models]})
        elif path.startswith("/v1/models/"):
            model = path[len("/v1/models/"):]
            if model in fake.models:
                self._send_json(200, {"id": model, "object": "model", "created": 1700000000,
                                      "owned_by": fake.name})
            else:
                self._error(404, f"The model `{model}` does not exist.")
        elif path == "/fake/stats":
            with fake._lock:
                stats = {"counts": dict(fake._counts), "closed_streams": len(fake._closed_streams),
                         "last_body": {p: b.decode("utf-8", "replace")
                                       for p, b in fake._last_body.items()}}
            self._send_json(200, stats)
        else:
            self._error(404, f"no route for GET {path}")

    def do_POST(self) -> None:  # noqa: N802
        fake = self.upstream
        path = self.path.split("?", 1)[0]
        raw = self._body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        if path == "/fake/control":
            control = json.loads(raw or b"{}")
            if "fault" in control:
                fake.set_fault(control["fault"], control.get("times"))
            if "health" in control:
                fake.set_health(int(control["health"]))
            if control.get("reset"):
                fake.reset()
            self._send_json(200, {"ok": True})
            return
        fake._record(path, raw, headers)
        try:
            body = json.loads(raw)
        except ValueError:
            self._error(400, "the body is not JSON")
            return
        if not isinstance(body, dict):
            self._error(400, "the body must be an object")
            return
        fault = parse_fault(headers.get("x-fake-fault")) or parse_fault(
            body.get("fake_fault") if isinstance(body.get("fake_fault"), str) else None)
        if fault is None:
            fault = fake._take_default_fault()
        if path not in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings"):
            self._error(404, f"no route for POST {path}")
            return
        model = body.get("model")
        if model not in fake.models:
            self._error(404, f"The model `{model}` does not exist.")
            return
        self._answer(path, body, fault or {"kind": "", "value": ""})

    def _answer(self, path: str, body: dict, fault: Fault) -> None:
        kind, value = fault["kind"], fault["value"]
        if kind == "hang":
            while not self.upstream._stopping.is_set():
                if self._peer_closed(0.05):
                    self.upstream._record_closed()
                    break
            self.close_connection = True
            return
        if kind == "delay_first_byte":
            time.sleep(float(value))
        if kind == "status":
            status = int(value)
            extra = {"retry-after": fault["retry_after"]} if "retry_after" in fault else {}
            self._error(status, f"{self.upstream.name} fails with {status} as told", extra)
            return
        if kind == "content_type":
            self._send(200, b"<html><body>not an API</body></html>", value or "text/html")
            return
        if kind == "huge" and value == "forever":
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            try:
                while not self.upstream._stopping.is_set():
                    self._chunk(b"[" * 65536)
            except OSError:
                pass
            self.close_connection = True
            return
        if kind == "huge":
            size = int(value or 20_000_000)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(size))
            self.end_headers()
            piece = b"[" * 65536
            sent = 0
            while sent < size and not self.upstream._stopping.is_set():
                part = piece[:min(len(piece), size - sent)]
                self.wfile.write(part)
                sent += len(part)
            self.close_connection = True
            return
        words: Optional[int] = None
        if "tokens" in fault or kind == "tokens":
            words = max(1, int(fault.get("tokens") or value))
        if path == "/v1/embeddings":
            self._embeddings(body, kind)
        elif body.get("stream"):
            self._stream(path, body, fault, words)
        else:
            self._whole(path, body, fault, words)

    def _text(self, body: dict, words: Optional[int]) -> List[str]:
        pieces = self.upstream.answer.split(" ")
        if words is not None:
            pieces = [f"w{i}" for i in range(words)]
        return [piece if i == 0 else " " + piece for i, piece in enumerate(pieces)]

    def _whole(self, path: str, body: dict, fault: Fault, words: Optional[int]) -> None:
        kind = fault["kind"]
        text = "".join(self._text(body, words))
        if kind == "invalid_json":
            self._send(200, b'{"id": "broken", "choices": [')
            return
        if path == "/v1/chat/completions":
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": "stop"}
            kind_name = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "finish_reason": "stop"}
            kind_name = "text_completion"
        document = {"id": f"cmpl-{self.upstream.name}", "object": kind_name,
                    "created": int(time.time()), "model": body.get("model"),
                    "choices": [choice], "upstream": self.upstream.name,
                    "usage": {"prompt_tokens": 7, "completion_tokens": len(text.split()),
                              "total_tokens": 7 + len(text.split())}}
        payload = json.dumps(document).encode()
        if kind == "cut_after":
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload[:len(payload) // 2])
            self.wfile.flush()
            self._cut()
            return
        self._send(200, payload)

    def _stream(self, path: str, body: dict, fault: Fault, words: Optional[int]) -> None:
        kind, value = fault["kind"], fault["value"]
        chat = path == "/v1/chat/completions"
        created = int(time.time())
        options = body.get("stream_options") or {}
        include_usage = isinstance(options, dict) and options.get("include_usage") is True

        def chunk(delta: Optional[dict] = None, text: Optional[str] = None,
                  finish: Optional[str] = None) -> dict:
            if chat:
                choice = {"index": 0, "delta": delta or {}, "logprobs": None,
                          "finish_reason": finish}
            else:
                choice = {"index": 0, "text": text or "", "logprobs": None,
                          "finish_reason": finish}
            return {"id": f"cmpl-{self.upstream.name}",
                    "object": "chat.completion.chunk" if chat else "text_completion",
                    "created": created, "model": body.get("model"), "choices": [choice]}

        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        self.wfile.flush()
        events: List = []
        if chat:
            events.append(chunk(delta={"role": "assistant", "content": ""}))
        pieces = self._text(body, words)
        for piece in pieces:
            events.append(chunk(delta={"content": piece}, text=piece))
        events.append(chunk(finish="stop"))
        if include_usage:
            events.append({"id": f"cmpl-{self.upstream.name}", "object": "chat.completion.chunk",
                           "created": created, "model": body.get("model"), "choices": [],
                           "usage": {"prompt_tokens": 7, "completion_tokens": len(pieces),
                                     "total_tokens": 7 + len(pieces)}})
        events.append("[DONE]")

        if kind == "slow_forever":
            interval = float(value or 0.05)
            self._event(events[0])
            index = 0
            while not self.upstream._stopping.is_set():
                if self._peer_closed(interval):
                    self.upstream._record_closed()
                    self.close_connection = True
                    return
                try:
                    self._event(chunk(delta={"content": f" t{index}"}, text=f" t{index}"))
                except OSError:
                    self.upstream._record_closed()
                    self.close_connection = True
                    return
                index += 1
            return
        for index, event in enumerate(events):
            if kind == "delay_first_token" and index == (1 if chat else 0):
                if self._peer_closed(float(value)):
                    self.upstream._record_closed()
                    self.close_connection = True
                    return
            if kind == "cut_after" and index == int(value):
                self._cut()
                return
            if kind == "error_event_after" and index == int(value):
                self._event({"error": {"message": f"{self.upstream.name} failed mid-stream",
                                       "type": "server_error", "code": 500}})
                self._event("[DONE]")
                break
            if kind == "invalid_json" and index == int(value or 0):
                self._chunk(b"data: {this is not json\n\n")
                self._event("[DONE]")
                break
            self._event(event)
        self._chunk(b"")

    def _embeddings(self, body: dict, kind: str) -> None:
        if kind == "invalid_json":
            self._send(200, b'{"data": [')
            return
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        dimensions = int(body.get("dimensions") or 8)
        encoding = body.get("encoding_format") or "float"
        data = []
        for index, text in enumerate(inputs or []):
            vector = embedding_of(str(text), dimensions)
            if encoding == "base64":
                embedding = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode()
            else:
                embedding = vector
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        self._send_json(200, {"object": "list", "data": data, "model": body.get("model"),
                              "usage": {"prompt_tokens": 3, "total_tokens": 3}})


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name", default="fake")
    parser.add_argument("--model", action="append", help="a model id it serves (repeatable)")
    parser.add_argument("--fault", help="a default fault for every request")
    args = parser.parse_args(argv)
    fake = FakeUpstream(args.name, tuple(args.model or ["fake-model"])).start()
    if args.fault:
        fake.set_fault(args.fault)
    print(f"fake upstream listening on 127.0.0.1:{fake.port}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
