#!/usr/bin/env python3
"""The OpenAI gateway's life around its config, end to end, each case with a `rampart serve` of
its own in front of fake upstreams (fake_openai_upstream.py): the --upstream quick start (models
discovered, two upstreams of one model failing over), reloads (SIGHUP and POST
/v1/admin/reload; a bad config keeps the old table; changed upstream settings apply) and
`rampart gateway check` on a good and a bad config.

Standard library only. Usage:
  test_gateway_lifecycle.py --binary build/rampart --repository examples/models [--filter NAME]
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from fake_openai_upstream import FakeUpstream  # noqa: E402
from gateway_harness import (check_openai_error, eventually, small_repository,  # noqa: E402
                             write_config)
from rampart_e2e import check  # noqa: E402

CHAT = "/v1/chat/completions"
HELLO = [{"role": "user", "content": "Say hello"}]


class Lifecycle:
    def __init__(self, args, work: str, repository: str) -> None:
        self.args = args
        self.work = work
        self.repository = repository


def test_quick_start(ctx: Lifecycle) -> str:
    with FakeUpstream("qs-1", ("shared-model", "only-one")) as one, \
            FakeUpstream("qs-2", ("shared-model",)) as two:
        server = e2e.Server(ctx.args.binary, ctx.repository,
                            ["--upstream", one.url, "--upstream", two.url])
        try:
            server.start()
            client = server.client()
            ids = [m["id"] for m in client.get("/v1/models").json()["data"]]
            check({"shared-model", "only-one"} <= set(ids), f"models {ids}")
            body = {"model": "shared-model", "messages": HELLO}
            check(client.post_json(CHAT, body).status == 200, "shared-model not served")
            one.set_fault("status=503")
            for _ in range(4):
                response = client.post_json(CHAT, body)
                check(response.status == 200 and response.json()["upstream"] == "qs-2",
                      f"no failover to the second --upstream: {response!r}")
            check_openai_error(client.post_json(CHAT, {"model": "only-one", "messages": HELLO}),
                               503)
            client.close()
            server.stop()
        finally:
            server.cleanup()
    return f"discovered {sorted(ids)}; failed over to upstream-2"


def test_reload(ctx: Lifecycle) -> str:
    with FakeUpstream("r-1", ("alpha", "beta")) as fake:
        config = os.path.join(ctx.work, "reload.yaml")

        def write(models: List[str], bad: bool = False, first_byte_ms: int = 5000) -> None:
            gateway = {"upstreams": [{"name": "r", "url": fake.url,
                                      "first_byte_timeout_ms": first_byte_ms}],
                       "models": [{"name": n, "endpoints": [{"upstream": "nope" if bad else "r"}]}
                                  for n in models]}
            write_config(config, gateway)

        def ids(client) -> List[str]:
            return sorted(m["id"] for m in client.get("/v1/models").json()["data"])

        write(["alpha"])
        server = e2e.Server(ctx.args.binary, ctx.repository, ["--config", config])
        try:
            server.start()
            client = server.client()
            check(ids(client) == ["alpha"], f"models {ids(client)}")
            write(["alpha", "beta"])
            server.send_signal(signal.SIGHUP)
            eventually(lambda: ids(client) == ["alpha", "beta"], 5, "SIGHUP adds beta")
            check(client.post_json(CHAT, {"model": "beta", "messages": HELLO}).status == 200,
                  "beta not served after SIGHUP")
            write(["beta"])
            response = client.request("POST", "/v1/admin/reload")
            check(response.status == 200 and "model beta" in response.text(), f"{response!r}")
            check(ids(client) == ["beta"], f"after POST reload {ids(client)}")
            check_openai_error(client.post_json(CHAT, {"model": "alpha", "messages": HELLO}),
                               404, "model", "model_not_found")
            write(["alpha"], bad=True)
            response = client.request("POST", "/v1/admin/reload")
            error = check_openai_error(response, 400)
            check("nope" in error["message"], f"reload error {error['message']!r}")
            check(ids(client) == ["beta"], "a bad config replaced the routes")
            server.send_signal(signal.SIGHUP)
            eventually(lambda: "reload on SIGHUP failed" in server.stderr_text() +
                       "\n".join(server.stdout_lines), 5, "SIGHUP with a bad config logged")
            check(ids(client) == ["beta"], "a bad config replaced the routes on SIGHUP")
            check(client.post_json(CHAT, {"model": "beta", "messages": HELLO}).status == 200,
                  "beta not served after a bad reload")
            # An upstream's settings change with its name and URL kept: the new ones apply.
            slow = {"model": "beta", "messages": HELLO, "fake_fault": "delay_first_byte=1.5"}
            check(client.post_json(CHAT, slow).status == 200, "a 1.5 s answer within 5 s failed")
            write(["beta"], first_byte_ms=300)
            check(client.request("POST", "/v1/admin/reload").status == 200, "reload failed")
            started = time.monotonic()
            response = client.post_json(CHAT, slow)
            check(response.status == 504 and time.monotonic() - started < 1.4,
                  f"first_byte_timeout_ms 300 after a reload not applied: {response!r} after "
                  f"{time.monotonic() - started:.1f} s")
            client.close()
            server.stop()
        finally:
            server.cleanup()
    return "SIGHUP and POST reload applied; bad configs kept the old table"


def test_gateway_check(ctx: Lifecycle) -> str:
    good = os.path.join(ctx.work, "check-good.yaml")
    bad = os.path.join(ctx.work, "check-bad.yaml")
    write_config(good, {"upstreams": [{"name": "u", "url": "http://127.0.0.1:9/v1"}],
                        "models": [{"name": "m", "endpoints": [{"upstream": "u"}]}],
                        "routes": [{"name": "r", "match": {"keywords": ["x"]}, "target": "m"}]})
    write_config(bad, {"upstreams": [{"name": "u", "url": "http://127.0.0.1:9/v1"}],
                       "models": [{"name": "m", "endpoints": [{"upstream": "u"}]}],
                       "routes": [{"name": "r", "match": {"pattern": "(unclosed"},
                                   "target": "m"}]})
    ok = subprocess.run([ctx.args.binary, "gateway", "check", good], capture_output=True,
                        text=True, timeout=30)
    check(ok.returncode == 0 and "valid" in ok.stdout and "route r:" in ok.stdout,
          f"good config: {ok.returncode} {ok.stdout!r} {ok.stderr!r}")
    failed = subprocess.run([ctx.args.binary, "gateway", "check", bad], capture_output=True,
                            text=True, timeout=30)
    output = failed.stdout + failed.stderr
    check(failed.returncode != 0 and "pattern" in output, f"bad config: {failed.returncode} "
                                                          f"{output!r}")
    return f"good: exit 0; bad: exit {failed.returncode}"


TESTS: List[Tuple[str, Callable[[Lifecycle], str]]] = [
    ("--upstream quick start", test_quick_start),
    ("reload", test_reload),
    ("gateway check", test_gateway_check),
]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True, help="the example model repository")
    parser.add_argument("--filter", default="", help="run only tests whose name contains this")
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    work = tempfile.mkdtemp(prefix="rampart-gateway-lifecycle-")
    try:
        ctx = Lifecycle(args, work, small_repository(args.repository, work))
        for name, test in TESTS:
            if args.filter and args.filter not in name:
                continue
            started = time.monotonic()
            try:
                tally.record(f"{name}: {test(ctx)}", None, time.monotonic() - started)
            except Exception as error:  # noqa: BLE001 (one test failing must not stop the others)
                tally.record(name, f"{type(error).__name__}: {error}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
