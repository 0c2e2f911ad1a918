#!/usr/bin/env python3
"""The OpenAI gateway under /v1, end to end: the real `rampart serve` in front of fake upstreams
(fake_openai_upstream.py) that misbehave on demand.

Covers pass-through (JSON and streamed chat, unknown fields, model-name mapping, x-request-id,
Server-Timing, usage only when asked), failover by priority, weights, retries on 500/503/429,
passive ejection and health checks, routing by keyword, pattern and header with a fallback
chain, broken streams before and after the first token, keep-alive comments, callers that go
away, garbage and hanging upstreams, bad requests, /v1/models, local embeddings, metrics and a
canary that rolls back, all against one server. test_gateway_lifecycle.py covers what needs a
server of its own: the --upstream quick start, reloads and `rampart gateway check`.

Standard library only. Usage:
  test_gateway.py --binary build/rampart --repository examples/models [--filter NAME]
"""

import argparse
import base64
import json
import math
import os
import shutil
import socket
import struct
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from fake_openai_upstream import FakeUpstream  # noqa: E402
from gateway_harness import (Stream, check_openai_error, eventually, json_events,  # noqa: E402
                             metric_samples, metric_value, small_repository, stream_text,
                             write_config)
from rampart_e2e import E2eError, check  # noqa: E402

CHAT = "/v1/chat/completions"
HELLO = [{"role": "user", "content": "Say hello"}]
# Every garbage answer must end well within this (three attempts and their backoff included).
GARBAGE_DEADLINE_S = 5.0

# Fake upstreams by name; each serves the models listed (the upstream's own names).
FAKES: Dict[str, Tuple[str, ...]] = {
    "main": ("upstream-chat", "plain"),
    "prio-high": ("prio",), "prio-low": ("prio",),
    "w-three": ("weighted",), "w-one": ("weighted",),
    "retry": ("retry",),
    "eject-bad": ("eject",), "eject-good": ("eject",),
    "health-vllm": ("health",), "health-spare": ("health",),
    "keyword": ("routed",), "pattern": ("routed",), "header": ("routed",),
    "fallback-1": ("routed",), "fallback-2": ("routed",), "default": ("routed",),
    "slow": ("slow",), "hang": ("hang",), "deaf": ("deaf",),
    "stable": ("canary",), "candidate": ("canary",),
}


def gateway_config(fakes: Dict[str, FakeUpstream]) -> dict:
    def upstream(name: str, **extra) -> dict:
        entry = {"name": name, "url": fakes[name].url}
        entry.update(extra)
        return entry

    def model(name: str, *endpoints: dict) -> dict:
        return {"name": name, "endpoints": list(endpoints)}

    def ep(upstream_name: str, model_name: str, **extra) -> dict:
        entry = {"upstream": upstream_name, "model": model_name}
        entry.update(extra)
        return entry

    upstreams = []
    for name in FAKES:
        extra = {"first_byte_timeout_ms": 2000, "idle_timeout_ms": 2000}
        if name == "health-vllm":
            extra["engine"] = "vllm"
        if name in ("hang", "deaf"):
            extra["first_byte_timeout_ms"] = 300
        upstreams.append(upstream(name, **extra))
    return {
        "upstreams": upstreams,
        "models": [
            model("chat", ep("main", "upstream-chat")),
            model("plain", ep("main", "plain")),
            model("prio", ep("prio-high", "prio", priority=100),
                  ep("prio-low", "prio", priority=90)),
            model("weighted", ep("w-three", "weighted", weight=3),
                  ep("w-one", "weighted", weight=1)),
            model("retry", ep("retry", "retry")),
            model("eject", ep("eject-bad", "eject"), ep("eject-good", "eject")),
            model("health", ep("health-vllm", "health", priority=100),
                  ep("health-spare", "health", priority=90)),
            model("t-keyword", ep("keyword", "routed")),
            model("t-pattern", ep("pattern", "routed")),
            model("t-header", ep("header", "routed")),
            model("t-fallback-1", ep("fallback-1", "routed")),
            model("t-fallback-2", ep("fallback-2", "routed")),
            model("t-default", ep("default", "routed")),
            model("slow", ep("slow", "slow")),
            model("hang", ep("hang", "hang")),
            model("deaf", ep("deaf", "deaf")),
            model("stable", ep("stable", "canary")),
            model("candidate", ep("candidate", "canary")),
            {"name": "text-embedding", "local_model": "text_embedding"},
        ],
        "routes": [
            {"name": "embeddings", "match": {"models": ["text-embedding-3-small"]},
             "target": "text-embedding"},
            {"name": "keyword", "match": {"models": ["routed"], "keywords": ["URGENT", "asap"]},
             "target": "t-keyword"},
            {"name": "pattern", "match": {"models": ["routed"], "pattern": "order #[0-9]{3,}"},
             "target": "t-pattern"},
            {"name": "gold", "match": {"models": ["routed"], "headers": {"X-Tier": "gold"}},
             "target": "t-header", "fallbacks": ["t-fallback-1", "t-fallback-2"]},
            {"name": "routed-default", "match": {"models": ["routed"]}, "target": "t-default",
             "fallbacks": ["t-fallback-2"]},
            {"name": "canary", "match": {"models": ["canary"]}, "target": "stable",
             "fallbacks": ["stable"],
             "canary": {"target": "candidate", "stages": [50, 100], "min_requests": 4,
                        "max_error_rate": 0.0}},
        ],
        "health_check": {"interval_ms": 100, "timeout_ms": 1000, "unhealthy_threshold": 2,
                         "healthy_threshold": 1},
        "ejection": {"consecutive_failures": 3, "base_ejection_ms": 30000,
                     "max_ejection_ms": 60000},
        "retry": {"max_attempts": 3, "base_backoff_ms": 10, "max_backoff_ms": 50,
                  "max_retry_after_ms": 3000},
        "keep_alive_ms": 100,
        "max_n": 4,
        "max_response_bytes": 1048576,
    }


class Context:
    def __init__(self, args, work: str, repository: str) -> None:
        self.args = args
        self.work = work
        self.repository = repository
        self.fakes: Dict[str, FakeUpstream] = {}
        self.server: Optional[e2e.Server] = None
        self.config_path = os.path.join(work, "rampart.yaml")
        self.client: Optional[e2e.Client] = None

    def post(self, path: str, document, headers: Optional[Dict[str, str]] = None,
             client: Optional[e2e.Client] = None) -> e2e.Response:
        merged = {"Content-Type": "application/json"}
        merged.update(headers or {})
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        return (client or self.client).request("POST", path, body, merged)

    def chat(self, model: str, headers: Optional[Dict[str, str]] = None, **fields) -> e2e.Response:
        document = {"model": model, "messages": fields.pop("messages", HELLO)}
        document.update(fields)
        return self.post(CHAT, document, headers)

    def stream(self, model: str, headers: Optional[Dict[str, str]] = None, **fields) -> Stream:
        document = {"model": model, "messages": fields.pop("messages", HELLO), "stream": True}
        document.update(fields)
        return Stream(self.server.port, CHAT, document, headers)

    def metrics(self):
        connection = e2e.Client(self.server.host, self.server.metrics_port, timeout=10)
        try:
            response = connection.get("/metrics")
        finally:
            connection.close()
        check(response.status == 200, f"/metrics answered {response.status}")
        return metric_samples(response.text())


def answered_by(response: e2e.Response) -> str:
    check(response.status == 200, f"expected 200, got {response!r}")
    return response.json().get("upstream", "?")


# ------------------------------------------------------------------------------------------
# Pass-through

def test_chat_json(ctx: Context) -> str:
    response = ctx.chat("chat", headers={"x-request-id": "my-request-7"}, temperature=0.25,
                        vendor_extension={"nested": [1, 2, {"k": "v"}]}, seed=11)
    check(response.status == 200, f"{response!r}")
    body = response.json()
    check(body["object"] == "chat.completion", f"object {body.get('object')}")
    check(body["choices"][0]["message"]["content"] == "hello from main", f"{body}")
    check(response.header("x-request-id") == "my-request-7",
          f"x-request-id {response.header('x-request-id')}")
    timing = response.header("server-timing") or ""
    check("gateway;dur=" in timing and "upstream;dur=" in timing, f"Server-Timing {timing!r}")
    sent = ctx.fakes["main"].last_body(CHAT)
    check(sent["model"] == "upstream-chat", f"the upstream got model {sent['model']!r}")
    check(sent["vendor_extension"] == {"nested": [1, 2, {"k": "v"}]} and sent["seed"] == 11 and
          sent["temperature"] == 0.25, f"unknown fields not passed through: {sent}")
    check("stream_options" not in sent, f"a JSON call got stream_options: {sent}")
    upstream_id = ctx.fakes["main"].last_headers(CHAT).get("x-request-id")
    check(upstream_id == "my-request-7", f"the upstream got x-request-id {upstream_id!r}")
    generated = ctx.chat("plain")
    check(generated.status == 200, f"{generated!r}")
    generated_id = generated.header("x-request-id") or ""
    check(len(generated_id) >= 8, f"no generated x-request-id: {generated_id!r}")
    check(ctx.fakes["main"].last_body(CHAT) == {"model": "plain", "messages": HELLO},
          f"a body with nothing to rewrite changed: {ctx.fakes['main'].last_body(CHAT)}")
    return f"mapped to upstream-chat, generated id {generated_id}"


def test_chat_stream(ctx: Context) -> str:
    stream = ctx.stream("chat", headers={"x-request-id": "stream-1"}, fake_fault="tokens=6")
    check(stream.status == 200, f"stream answered {stream.status}")
    check(stream.headers.get("content-type", "").startswith("text/event-stream"),
          f"content type {stream.headers.get('content-type')}")
    check(stream.headers.get("x-request-id") == "stream-1", f"x-request-id {stream.headers}")
    check("gateway;dur=" in stream.headers.get("server-timing", ""), f"{stream.headers}")
    events = stream.read_all()
    check(events[-1] == "[DONE]", f"last event {events[-1]!r}")
    chunks = json_events(events)
    check(chunks[0]["choices"][0]["delta"].get("role") == "assistant", f"first {chunks[0]}")
    check(stream_text(events) == "w0 w1 w2 w3 w4 w5", f"text {stream_text(events)!r}")
    check(chunks[-1]["choices"][0]["finish_reason"] == "stop", f"last chunk {chunks[-1]}")
    check(all("usage" not in chunk or chunk["usage"] is None for chunk in chunks),
          "usage sent though not asked for")
    sent = ctx.fakes["main"].last_body(CHAT)
    check(sent.get("stream_options", {}).get("include_usage") is True,
          f"the gateway did not ask the upstream for usage: {sent}")
    asked = ctx.stream("chat", stream_options={"include_usage": True, "extra_option": 1})
    chunks = json_events(asked.read_all())
    usage = [chunk for chunk in chunks if chunk.get("usage")]
    check(len(usage) == 1 and usage[0]["choices"] == [], f"usage chunks {usage}")
    check(usage[0]["usage"]["total_tokens"] > 0, f"{usage}")
    check(ctx.fakes["main"].last_body(CHAT)["stream_options"] ==
          {"include_usage": True, "extra_option": 1}, "stream_options not passed as given")
    # A stream longer in all than max_response_bytes (1 MiB here), which bounds each event.
    long_stream = ctx.stream("chat", fake_fault="tokens=8000")
    events = long_stream.read_all()
    check(events[-1] == "[DONE]" and len(events) == 8003,
          f"a 1.7 MB stream ended after {len(events)} events with {events[-1][:200]!r}")
    completion = Stream(ctx.server.port, "/v1/completions",
                        {"model": "plain", "prompt": "Say", "stream": True})
    events = completion.read_all()
    check(events[-1] == "[DONE]" and stream_text(events) == "hello from main",
          f"completions stream {events}")
    return f"{len(events)} completion events, usage only when asked"


# ------------------------------------------------------------------------------------------
# Pools: priority, weights, retries, ejection, health checks

def test_priority_failover(ctx: Context) -> str:
    high, low = ctx.fakes["prio-high"], ctx.fakes["prio-low"]
    check(answered_by(ctx.chat("prio")) == "prio-high", "the higher priority group did not answer")
    high.set_fault("status=503")
    for _ in range(3):
        check(answered_by(ctx.chat("prio")) == "prio-low", "priority 90 did not take over")
    high.reset()
    return f"prio-high calls {high.count()}, prio-low {low.count()}"


def test_weights(ctx: Context) -> str:
    three, one = ctx.fakes["w-three"], ctx.fakes["w-one"]
    for _ in range(40):
        ctx.chat("weighted")
    check((three.count(), one.count()) == (30, 10),
          f"weights 3:1 split 40 calls {three.count()}:{one.count()}")
    return "40 calls split 30:10"


def test_retries(ctx: Context) -> str:
    fake = ctx.fakes["retry"]
    notes = []
    for status in (500, 503):
        fake.reset()
        fake.set_fault(f"status={status}", times=2)
        check(answered_by(ctx.chat("retry")) == "retry", f"no answer after two {status}s")
        check(fake.count() == 3, f"{status}: {fake.count()} calls, expected 3")
        notes.append(f"{status}x2 then 200")
    fake.reset()
    fake.set_fault("status=400", times=1)
    check_openai_error(ctx.chat("retry"), 400)
    check(fake.count() == 1, f"an upstream's 400 was retried: {fake.count()} calls")
    fake.reset()
    fake.set_fault("status=503", times=1)
    stream = ctx.stream("retry")
    events = stream.read_all()
    check(events[-1] == "[DONE]" and fake.count() == 2, f"stream after a 503: {events}")
    notes.append("400 not retried, stream retried after 503")
    fake.reset()
    fake.set_fault("status=503")
    response = ctx.chat("retry")
    check_openai_error(response, 503)
    check(fake.count() == 3, f"503 forever: {fake.count()} calls, expected max_attempts 3")
    fake.reset()
    fake.set_fault("status=429,retry_after=1", times=1)
    started = time.monotonic()
    check(answered_by(ctx.chat("retry")) == "retry", "no answer after a 429")
    waited = time.monotonic() - started
    check(fake.count() == 2 and waited >= 0.9, f"429: {fake.count()} calls after {waited:.2f} s")
    notes.append(f"429 Retry-After 1 s honoured ({waited:.2f} s)")
    fake.reset()
    # A 429 asking for longer than max_retry_after is not waited for: the caller gets 429.
    fake.set_fault("status=429,retry_after=30", times=1)
    started = time.monotonic()
    response = ctx.chat("retry")
    check_openai_error(response, 429)
    check(time.monotonic() - started < 2, "waited for a Retry-After past max_retry_after")
    check(response.header("retry-after") is not None, f"no Retry-After: {response.header_list}")
    fake.reset()
    return "; ".join(notes)


def test_passive_ejection(ctx: Context) -> str:
    bad, good = ctx.fakes["eject-bad"], ctx.fakes["eject-good"]
    bad.set_fault("status=500")
    for _ in range(8):
        check(answered_by(ctx.chat("eject")) == "eject-good", "a call failed despite a good peer")
    calls_when_ejected = bad.count()
    check(calls_when_ejected == 3, f"eject-bad got {calls_when_ejected} calls, expected 3")
    for _ in range(20):
        check(answered_by(ctx.chat("eject")) == "eject-good", "a call failed")
    check(bad.count() == calls_when_ejected, f"an ejected upstream got {bad.count()} calls")
    samples = ctx.metrics()
    check(metric_value(samples, "rampart_gateway_upstream_healthy", upstream="eject-bad") == 0,
          "rampart_gateway_upstream_healthy{upstream=eject-bad} is not 0")
    check(metric_value(samples, "rampart_gateway_ejections_total", upstream="eject-bad") == 1,
          "rampart_gateway_ejections_total{upstream=eject-bad} is not 1")
    return f"ejected after {calls_when_ejected} failures, then 0 of 20 calls"


def test_health_checks(ctx: Context) -> str:
    vllm, spare = ctx.fakes["health-vllm"], ctx.fakes["health-spare"]
    check(answered_by(ctx.chat("health")) == "health-vllm", "the healthy vllm did not answer")
    eventually(lambda: vllm.count("/health") >= 2, 5, "vllm's /health is polled")
    vllm.set_health(503)
    eventually(lambda: metric_value(ctx.metrics(), "rampart_gateway_upstream_healthy",
                                    upstream="health-vllm") == 0, 5,
               "health-vllm marked unhealthy after /health answers 503")
    before = vllm.count()
    for _ in range(5):
        check(answered_by(ctx.chat("health")) == "health-spare", "the spare did not answer")
    check(vllm.count() == before, "an upstream failing its health checks got calls")
    vllm.set_health(200)
    eventually(lambda: metric_value(ctx.metrics(), "rampart_gateway_upstream_healthy",
                                    upstream="health-vllm") == 1, 5, "health-vllm back")
    check(answered_by(ctx.chat("health")) == "health-vllm", "health-vllm did not come back")
    check(spare.count("/health") == 0, "an engine: openai upstream got health checks")
    return "503 on /health took it out, 200 brought it back"


# ------------------------------------------------------------------------------------------
# Routing and fallbacks

def test_routes(ctx: Context) -> str:
    def routed(text: str, headers: Optional[Dict[str, str]] = None) -> str:
        return answered_by(ctx.chat("routed", headers=headers,
                                    messages=[{"role": "system", "content": "urgent order #999"},
                                              {"role": "user", "content": text}]))

    check(routed("please answer ASAP") == "keyword", "keyword (case-insensitive) not routed")
    check(routed("where is order #12345?") == "pattern", "pattern not routed")
    check(routed("order #12") == "default", "a short order number matched the pattern")
    check(routed("hello", {"x-tier": "gold"}) == "header", "header rule not routed")
    check(routed("hello", {"x-tier": "silver"}) == "default", "silver matched the gold rule")
    check(routed("hello") == "default", "the catch-all rule did not answer")
    # The fallback chain: header -> fallback-1 -> fallback-2.
    ctx.fakes["header"].set_fault("status=500")
    ctx.fakes["fallback-1"].set_fault("status=502")
    check(routed("hello", {"x-tier": "gold"}) == "fallback-2", "the chain did not reach its end")
    check(ctx.fakes["header"].count() == 1 + 3 and ctx.fakes["fallback-1"].count() == 3,
          f"attempts {ctx.fakes['header'].count()} and {ctx.fakes['fallback-1'].count()}")
    ctx.fakes["header"].reset()
    ctx.fakes["fallback-1"].reset()
    # A stream broken before its first token falls back to the next model of the route.
    ctx.fakes["default"].reset()
    ctx.fakes["default"].set_fault("cut_after=1")
    stream = ctx.stream("routed")
    events = stream.read_all()
    check(events[-1] == "[DONE]", f"stream did not end with [DONE]: {events}")
    check(stream_text(events) == "hello from fallback-2", f"text {stream_text(events)!r}")
    roles = [c for c in json_events(events) if c["choices"][0]["delta"].get("role")]
    check(len(roles) == 1, f"{len(roles)} role chunks reached the caller")
    check(ctx.fakes["default"].count() == 3, f"default got {ctx.fakes['default'].count()} calls")
    ctx.fakes["default"].reset()
    return "keyword, pattern, header, catch-all; chain of 3; stream fell back before token 1"


def test_broken_stream_after_tokens(ctx: Context) -> str:
    notes = []
    for fault in ("cut_after=3", "error_event_after=3"):
        stream = ctx.stream("chat", fake_fault=fault + ",tokens=6")
        check(stream.status == 200, f"{fault}: status {stream.status}")
        events = stream.read_all()
        check(stream_text(events).startswith("w0 w1"), f"{fault}: no tokens before the break")
        check(events[-1] != "[DONE]", f"{fault}: a broken stream ended with [DONE]: {events}")
        last = json_events(events)[-1]
        check("error" in last and last["error"].get("message"), f"{fault}: last event {last}")
        notes.append(f"{fault}: {len(events)} events, error event last")
    return "; ".join(notes)


def test_keep_alive(ctx: Context) -> str:
    stream = ctx.stream("slow", fake_fault="delay_first_token=1.0")
    check(stream.status == 200, f"status {stream.status}")
    events = stream.read_all()
    first_data = stream.events[0][0]
    before = [t for t in stream.comments if t < first_data]
    check(len(before) >= 3, f"{len(before)} keep-alive comments in 1 s (keep_alive_ms 100)")
    check(events[-1] == "[DONE]" and stream_text(events) == "hello from slow", f"{events}")
    return f"{len(before)} keep-alive comments before the first token"


def test_client_disconnect(ctx: Context) -> str:
    fake = ctx.fakes["main"]
    notes = []
    for fault, reads in (("slow_forever=0.02", 3), ("delay_first_token=20", 0)):
        before = len(fake.closed_streams())
        stream = ctx.stream("chat", fake_fault=fault)
        check(stream.status == 200, f"status {stream.status}")
        for _ in range(reads):
            check(stream.next_event() is not None, "the stream ended early")
        if reads == 0:
            eventually(lambda: fake.count() and stream.response.readline(), 5, "a keep-alive")
        closed_at = time.monotonic()
        stream.abort()
        check(fake.wait_for(lambda f: len(f.closed_streams()) > before, 5),
              f"{fault}: the upstream's stream was not closed within 5 s of the caller leaving")
        latency = fake.closed_streams()[-1] - closed_at
        # Under the upstream's idle timeout (2 s): the caller leaving closed it, not a timeout.
        check(latency < 1.5, f"{fault}: upstream closed {latency:.2f} s after the caller")
        notes.append(f"{fault.split('=')[0]}: upstream closed after {latency * 1000:.0f} ms")
    # A caller of a whole (not streamed) answer that goes away while the upstream thinks.
    slow = ctx.fakes["slow"]
    before = len(slow.closed_streams())
    client = e2e.Client(ctx.server.host, ctx.server.port, timeout=10)
    client.connection = client._connect()
    client.connection.putrequest("POST", CHAT)
    body = json.dumps({"model": "slow", "messages": HELLO, "fake_fault": "hang"}).encode()
    client.connection.putheader("content-type", "application/json")
    client.connection.putheader("content-length", str(len(body)))
    client.connection.endheaders(body)
    check(slow.wait_for(lambda f: f.count() > 0 and f.last_body(CHAT).get("fake_fault") == "hang",
                        5), "the hanging call did not reach the upstream")
    closed_at = time.monotonic()
    client.connection.sock.shutdown(socket.SHUT_RDWR)
    client.close()
    check(slow.wait_for(lambda f: len(f.closed_streams()) > before, 5),
          "whole answer: the upstream's call was not closed within 5 s of the caller leaving")
    latency = slow.closed_streams()[-1] - closed_at
    check(latency < 1.5, f"whole answer: upstream closed {latency:.2f} s after the caller")
    notes.append(f"whole answer: upstream closed after {latency * 1000:.0f} ms")
    return "; ".join(notes)


# ------------------------------------------------------------------------------------------
# Garbage, hangs and bad requests

def test_garbage_answers(ctx: Context) -> str:
    notes = []
    cases = [("invalid_json", False), ("content_type=text/html", False), ("huge=20000000", False),
             ("invalid_json", True), ("content_type=text/plain", True), ("cut_after=0", False),
             ("huge=forever", False), ("huge=forever", True)]
    for fault, streamed in cases:
        started = time.monotonic()
        if streamed:
            stream = ctx.stream("chat", fake_fault=fault)
            status, body = stream.status, stream.body()
            response = e2e.Response(status, "", list(stream.headers.items()), body)
        else:
            response = ctx.chat("chat", fake_fault=fault)
        took = time.monotonic() - started
        check_openai_error(response, 502)
        check(took < GARBAGE_DEADLINE_S, f"{fault}: 502 after {took:.1f} s")
        notes.append(f"{fault}{' (stream)' if streamed else ''} {took * 1000:.0f} ms")
    for model, fault in (("hang", "hang"), ("deaf", None)):
        if fault is None:
            ctx.fakes[model].set_fault("stop_reading")
        started = time.monotonic()
        response = ctx.chat(model, fake_fault=fault) if fault else ctx.chat(model)
        took = time.monotonic() - started
        check_openai_error(response, 504)
        check(took < GARBAGE_DEADLINE_S, f"{model}: 504 after {took:.1f} s")
        notes.append(f"{model} 504 {took * 1000:.0f} ms")
    return ", ".join(notes)


def test_bad_requests(ctx: Context) -> str:
    cases = [
        (b"{not json", 400, None, None),
        (b"[1, 2]", 400, None, None),
        ({"messages": HELLO}, 400, "model", None),
        ({"model": 7, "messages": HELLO}, 400, "model", None),
        ({"model": "chat"}, 400, "messages", None),
        ({"model": "chat", "messages": "hello"}, 400, "messages", None),
        ({"model": "chat", "messages": []}, 400, "messages", None),
        ({"model": "chat", "messages": HELLO, "stream": "yes"}, 400, "stream", None),
        ({"model": "chat", "messages": HELLO, "n": 5}, 400, "n", None),
        ({"model": "chat", "messages": HELLO, "n": 0}, 400, "n", None),
        ({"model": "no-such-model", "messages": HELLO}, 404, "model", "model_not_found"),
    ]
    for document, status, param, code in cases:
        response = ctx.post(CHAT, document)
        check_openai_error(response, status, param, code)
    response = ctx.client.request("GET", CHAT)
    check_openai_error(response, 405)
    response = ctx.post("/v1/embeddings", {"model": "text-embedding", "input": "x", "stream": True})
    check_openai_error(response, 400, "stream")
    response = ctx.post("/v1/embeddings", {"model": "text-embedding", "input": 5})
    check_openai_error(response, 400, "input")
    response = ctx.post("/v1/embeddings", {"model": "text-embedding", "input": "x",
                                           "encoding_format": "int8"})
    check_openai_error(response, 400, "encoding_format")
    response = ctx.client.request("GET", "/v1/nothing-here")
    check_openai_error(response, 404)
    return f"{len(cases) + 5} bad requests answered in OpenAI's error shape"


# ------------------------------------------------------------------------------------------
# Models, local embeddings

def test_models(ctx: Context) -> str:
    response = ctx.client.get("/v1/models")
    check(response.status == 200, f"{response!r}")
    body = response.json()
    check(body["object"] == "list", f"{body}")
    ids = [entry["id"] for entry in body["data"]]
    for expected in ("chat", "prio", "text-embedding", "routed", "text-embedding-3-small"):
        check(expected in ids, f"{expected} not in /v1/models: {ids}")
    check(all(entry["object"] == "model" and isinstance(entry["created"], int) and
              entry["owned_by"] for entry in body["data"]), f"{body['data'][:2]}")
    one = ctx.client.get("/v1/models/chat")
    check(one.status == 200 and one.json()["id"] == "chat", f"{one!r}")
    check_openai_error(ctx.client.get("/v1/models/nope"), 404, "model", "model_not_found")
    return f"{len(ids)} models"


def test_local_embeddings(ctx: Context) -> str:
    texts = ["The cat sat on the mat", "我喜欢机器学习"]
    floats = ctx.post("/v1/embeddings", {"model": "text-embedding", "input": texts})
    check(floats.status == 200, f"{floats!r}")
    body = floats.json()
    check(body["object"] == "list" and len(body["data"]) == 2, f"{body}")
    check(body["model"] == "text-embedding" and body["usage"]["prompt_tokens"] > 0, f"{body}")
    vectors = [item["embedding"] for item in body["data"]]
    check([item["index"] for item in body["data"]] == [0, 1], "indices")
    for vector in vectors:
        check(len(vector) == 64, f"{len(vector)} dimensions")
        check(abs(math.sqrt(sum(v * v for v in vector)) - 1) < 1e-4, "not unit length")
    encoded = ctx.post("/v1/embeddings", {"model": "text-embedding-3-small", "input": texts[0],
                                          "encoding_format": "base64"})
    check(encoded.status == 200, f"{encoded!r}")
    raw = base64.b64decode(encoded.json()["data"][0]["embedding"])
    decoded = struct.unpack(f"<{len(raw) // 4}f", raw)
    check(len(decoded) == 64 and max(abs(a - b) for a, b in zip(decoded, vectors[0])) < 1e-6,
          "base64 differs from float")
    short = ctx.post("/v1/embeddings", {"model": "text-embedding", "input": texts[0],
                                        "dimensions": 16})
    check(short.status == 200, f"{short!r}")
    vector = short.json()["data"][0]["embedding"]
    check(len(vector) == 16 and abs(math.sqrt(sum(v * v for v in vector)) - 1) < 1e-4,
          f"dimensions 16: {len(vector)} values")
    upstream = ctx.post("/v1/embeddings", {"model": "plain", "input": ["a", "b"],
                                           "encoding_format": "base64", "dimensions": 4})
    check(upstream.status == 200, f"{upstream!r}")
    raw = base64.b64decode(upstream.json()["data"][1]["embedding"])
    check(len(raw) == 16, f"upstream base64 embedding of {len(raw)} bytes")
    check(ctx.fakes["main"].last_body("/v1/embeddings")["encoding_format"] == "base64",
          "encoding_format not passed to the upstream")
    too_many = ctx.post("/v1/embeddings", {"model": "text-embedding", "input": "x",
                                           "dimensions": 65})
    check_openai_error(too_many, 400)
    chat = ctx.chat("text-embedding")
    check_openai_error(chat, 400, "model")
    return "64 floats, base64 equal, dimensions 16 renormalised"


# ------------------------------------------------------------------------------------------
# Canary, metrics

def test_canary_rollback(ctx: Context) -> str:
    stable, candidate = ctx.fakes["stable"], ctx.fakes["candidate"]
    candidate.set_fault("status=500")
    for _ in range(6):
        check(answered_by(ctx.chat("canary")) == "stable", "a canary call was not answered")
    check(candidate.count() > 0, "the candidate got no traffic at 50 %")
    after = candidate.count()
    for _ in range(20):
        check(answered_by(ctx.chat("canary")) == "stable", "not answered by the baseline")
    check(candidate.count() == after,
          f"the candidate got {candidate.count() - after} calls after its rollback")
    check("canary 'route canary'" in ctx.server.stderr_text() + "\n".join(
        ctx.server.stdout_lines), "no rollback in the log")
    return f"candidate rolled back after {after} calls; baseline takes all"


def test_metrics(ctx: Context) -> str:
    samples = ctx.metrics()
    names = {name for name, _, _ in samples}
    for name in ("rampart_gateway_requests_total", "rampart_gateway_upstream_calls_total",
                 "rampart_gateway_time_to_first_token_seconds_bucket",
                 "rampart_gateway_upstream_healthy"):
        check(name in names, f"{name} missing from /metrics")
    ok = metric_value(samples, "rampart_gateway_requests_total", model="chat", code="200")
    check(ok and ok >= 3, f"requests_total for chat: {ok}")
    retried = metric_value(samples, "rampart_gateway_upstream_calls_total", upstream="retry",
                           outcome="http_500")
    check(retried and retried >= 2, f"upstream_calls_total retry/http_500: {retried}")
    return f"{len(names)} series names"


# ------------------------------------------------------------------------------------------
# Servers of their own: quick start, reloads, gateway check

TESTS: List[Tuple[str, Callable[[Context], str]]] = [
    ("chat json pass-through", test_chat_json),
    ("chat stream pass-through", test_chat_stream),
    ("priority failover", test_priority_failover),
    ("weights", test_weights),
    ("retries", test_retries),
    ("passive ejection", test_passive_ejection),
    ("health checks", test_health_checks),
    ("routes and fallbacks", test_routes),
    ("stream broken after tokens", test_broken_stream_after_tokens),
    ("keep-alive comments", test_keep_alive),
    ("caller disconnects", test_client_disconnect),
    ("garbage answers", test_garbage_answers),
    ("bad requests", test_bad_requests),
    ("models", test_models),
    ("local embeddings", test_local_embeddings),
    ("canary rollback", test_canary_rollback),
    ("metrics", test_metrics),
]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True, help="the example model repository")
    parser.add_argument("--filter", default="", help="run only tests whose name contains this")
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    work = tempfile.mkdtemp(prefix="rampart-gateway-")
    started = time.monotonic()
    ctx = Context(args, work, small_repository(args.repository, work))
    try:
        for name, models in FAKES.items():
            ctx.fakes[name] = FakeUpstream(name, models).start()
        write_config(ctx.config_path, gateway_config(ctx.fakes))
        ctx.server = e2e.Server(args.binary, ctx.repository, ["--config", ctx.config_path])
        ctx.server.start()
        ctx.client = ctx.server.client()
        for name, test in TESTS:
            if args.filter and args.filter not in name:
                continue
            test_started = time.monotonic()
            try:
                tally.record(f"{name}: {test(ctx)}", None, time.monotonic() - test_started)
            except Exception as error:  # noqa: BLE001 (one test failing must not stop the others)
                tally.record(name, f"{type(error).__name__}: {error}")
        ctx.client.close()
        ctx.server.stop()
    except (E2eError, OSError) as error:
        tally.record("server", str(error))
        if ctx.server is not None:
            print(ctx.server.describe(), flush=True)
    finally:
        if ctx.server is not None:
            ctx.server.cleanup()
        for fake in ctx.fakes.values():
            fake.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"gateway e2e took {time.monotonic() - started:.1f} s", flush=True)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
