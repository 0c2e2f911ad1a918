"""Helpers for the gateway's end-to-end tests: a temporary repository holding only the example
`text_embedding` model, a config file written from a dict, SSE streams read event by event, and
Prometheus text read into samples.

Standard library only.
"""

import http.client
import json
import os
import re
import shutil
import socket
import time
from typing import Dict, List, Optional, Tuple

from rampart_e2e import E2eError, check


def small_repository(source: str, destination_parent: str) -> str:
    """A repository with only the example text_embedding model (quick to load)."""
    destination = os.path.join(destination_parent, "models")
    os.makedirs(destination)
    shutil.copytree(os.path.join(source, "text_embedding"),
                    os.path.join(destination, "text_embedding"),
                    ignore=shutil.ignore_patterns("*.py", "*.md", "__pycache__"))
    return destination


def yaml_of(value, indent: int = 0) -> str:
    """A dict of dicts, lists and scalars as YAML (JSON scalars are valid YAML)."""
    pad = " " * indent
    lines: List[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:")
                lines.append(yaml_of(item, indent + 2))
            else:
                lines.append(f"{pad}{key}: {json.dumps(item)}")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = yaml_of(item, indent + 2).lstrip()
                lines.append(f"{pad}- {nested}")
            else:
                lines.append(f"{pad}- {json.dumps(item)}")
    else:
        lines.append(f"{pad}{json.dumps(value)}")
    return "\n".join(lines)


def write_config(path: str, gateway: dict) -> None:
    with open(path + ".tmp", "w") as out:
        out.write(yaml_of({"gateway": gateway}) + "\n")
    os.replace(path + ".tmp", path)


class Stream:
    """A POST whose answer is read as Server-Sent Events, line by line, with arrival times."""

    def __init__(self, port: int, path: str, document, headers: Optional[Dict[str, str]] = None,
                 timeout: float = 20.0) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        merged = {"content-type": "application/json"}
        merged.update(headers or {})
        self.started = time.monotonic()
        self.connection.request("POST", path, json.dumps(document).encode(), merged)
        self.response = self.connection.getresponse()
        self.status = self.response.status
        self.headers = {k.lower(): v for k, v in self.response.getheaders()}
        self.comments: List[float] = []  # arrival times of `:` lines
        self.events: List[Tuple[float, str]] = []  # (arrival time, data)

    def next_event(self) -> Optional[str]:
        """The next event's data, or None at the end of the stream."""
        data: List[str] = []
        while True:
            line = self.response.readline()
            if not line:
                return "\n".join(data) if data else None
            text = line.decode("utf-8").rstrip("\r\n")
            if text == "":
                if data:
                    joined = "\n".join(data)
                    self.events.append((time.monotonic(), joined))
                    return joined
                continue
            if text.startswith(":"):
                self.comments.append(time.monotonic())
            elif text.startswith("data:"):
                data.append(text[5:].lstrip(" "))

    def read_all(self) -> List[str]:
        """Every event to the end, as data strings."""
        while self.next_event() is not None:
            pass
        self.close()
        return [data for _, data in self.events]

    def body(self) -> bytes:
        payload = self.response.read()
        self.close()
        return payload

    def abort(self) -> None:
        """Closes the connection at once, as a client that goes away."""
        sock = self.connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.close()

    def close(self) -> None:
        self.connection.close()


def json_events(events: List[str]) -> List[dict]:
    """The JSON events of a stream (without [DONE])."""
    return [json.loads(data) for data in events if data != "[DONE]"]


def stream_text(events: List[str]) -> str:
    text = ""
    for event in json_events(events):
        for choice in event.get("choices", []):
            text += (choice.get("delta") or {}).get("content") or choice.get("text") or ""
    return text


def check_openai_error(response, status: int, param: Optional[str] = "",
                       code: Optional[str] = "") -> dict:
    """`response` is `status` with OpenAI's error body; param/code checked unless ''."""
    check(response.status == status, f"expected {status}, got {response!r}")
    check((response.header("content-type") or "").startswith("application/json"),
          f"error content type {response.header('content-type')}")
    body = response.json()
    check(isinstance(body, dict) and set(body) == {"error"}, f"not an OpenAI error: {body}")
    error = body["error"]
    check(set(error) >= {"message", "type", "param", "code"}, f"error fields: {error}")
    check(isinstance(error["message"], str) and error["message"], f"message: {error}")
    check(isinstance(error["type"], str) and error["type"], f"type: {error}")
    if param != "":
        check(error["param"] == param, f"param {error['param']!r}, expected {param!r}")
    if code != "":
        check(error["code"] == code, f"code {error['code']!r}, expected {code!r}")
    return error


SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def metric_samples(text: str) -> List[Tuple[str, Dict[str, str], float]]:
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        if match:
            labels = dict(LABEL.findall(match.group(3) or ""))
            samples.append((match.group(1), labels, float(match.group(4))))
    return samples


def metric_value(samples, name: str, **labels: str) -> Optional[float]:
    """The sum of `name`'s samples whose labels include `labels`; None when there is none."""
    total = None
    for sample_name, sample_labels, value in samples:
        if sample_name == name and all(sample_labels.get(k) == v for k, v in labels.items()):
            total = (total or 0.0) + value
    return total


def eventually(predicate, timeout_s: float, what: str, interval_s: float = 0.02):
    """Polls predicate() until it returns a true value (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise E2eError(f"not within {timeout_s:.1f} s: {what}")
        time.sleep(interval_s)
