#!/usr/bin/env python3
"""docs/serving-your-model.md, run against the real binary: the page's script, config.pbtxt,
requests and config override, each answer compared with the output the page shows.

    /usr/bin/python3 tests/e2e/test_serving_your_model.py --binary build/rampart \
        --doc docs/serving-your-model.md [--filter NAME]

The page's code blocks are read in order (its script is the first `python` block, its config the
`protobuf` block, its override the `json` block; an `sh` block's output is the block after it),
/tmp/my-models becomes a temp folder and port 8000 the server's own. Needs torch (Debian's
/usr/bin/python3) to run the page's script. Prints one line per check and ends with
"N passed, M failed"; exits non-zero on failure.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Callable, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402

DOC_REPOSITORY = "/tmp/my-models"
MODEL = "weighted_sum"


class Page:
    """The page's fenced code blocks, in order, as (language, text)."""

    def __init__(self, path: str) -> None:
        with open(path, encoding="utf-8") as page:
            self.text = page.read()
        self.blocks: List[Tuple[str, str]] = re.findall(r"^```(\w*)\n(.*?)^```$", self.text,
                                                        flags=re.MULTILINE | re.DOTALL)

    def first(self, language: str) -> str:
        for block_language, text in self.blocks:
            if block_language == language:
                return text
        raise E2eError(f"the page has no ```{language} block")

    def requests(self, path_pattern: str) -> List[Tuple[str, str, str]]:
        """(path, body, expected output) of each `curl -X POST ... -d '<body>'` to a path
        matching `path_pattern`, with the output block that follows it."""
        found = []
        for index, (language, text) in enumerate(self.blocks):
            if language != "sh" or index + 1 >= len(self.blocks):
                continue
            for match in re.finditer(r"curl -s -X POST localhost:8000(\S+) -d '(.*?)'", text,
                                     flags=re.DOTALL):
                if re.fullmatch(path_pattern, match.group(1)):
                    found.append((match.group(1), match.group(2), self.blocks[index + 1][1]))
        return found

    def output_after(self, command: str) -> str:
        """The block after the first `sh` block that contains `command`."""
        for index, (language, text) in enumerate(self.blocks[:-1]):
            if language in ("sh", "") and command in text:
                return self.blocks[index + 1][1]
        raise E2eError(f"the page shows no command {command!r}")

    def log_reason(self, after: str) -> str:
        """The reason in the page's log line holding `after` ('failed to load: ...')."""
        for line in self.text.splitlines():
            if after in line:
                return line.split(after, 1)[1]
        raise E2eError(f"the page shows no log line with {after!r}")


class Fixture:
    def __init__(self, args: argparse.Namespace, work_dir: str) -> None:
        self.binary = args.binary
        self.page = Page(args.doc)
        self.work_dir = work_dir
        self.repository = os.path.join(work_dir, "my-models")
        self.config = self.page.first("protobuf")
        self.scripted = False

    def local(self, text: str) -> str:
        return text.replace(DOC_REPOSITORY, self.repository)

    def script_model(self) -> str:
        if not self.scripted:
            script = os.path.join(self.work_dir, "weighted_sum.py")
            with open(script, "w") as out:
                out.write(self.local(self.page.first("python")))
            result = subprocess.run([sys.executable, script], capture_output=True, text=True,
                                    timeout=120)
            check(result.returncode == 0, f"the page's script failed:\n{result.stderr}")
            self.scripted = True
            self.script_output = result.stdout
        self.write_config(self.config)
        return self.script_output

    def write_config(self, text: str) -> None:
        with open(os.path.join(self.repository, MODEL, "config.pbtxt"), "w") as out:
            out.write(text)

    def server(self, extra_args: List[str] = (), wait_for: str = "ready") -> e2e.Server:
        return e2e.Server(self.binary, self.repository, list(extra_args), wait_for=wait_for)


def body_and_status(output: str) -> Tuple[str, int]:
    """The page's output for a curl with `-w ' %{http_code}'` (or without: 200)."""
    text = output.strip()
    match = re.fullmatch(r"(.*?)\s+(\d{3})", text, flags=re.DOTALL)
    return (match.group(1), int(match.group(2))) if match else (text, 200)


def test_script_and_layout(fixture: Fixture) -> str:
    output = fixture.script_model()
    expected = fixture.page.output_after("/usr/bin/python3 /tmp/weighted_sum.py")
    check(fixture.local(output.strip()) == fixture.local(expected.strip()),
          f"the script printed {output!r}, the page shows {expected!r}")
    files = subprocess.run(f"find {fixture.repository} | sort", shell=True, capture_output=True,
                           text=True).stdout.strip()
    shown = fixture.page.output_after("find /tmp/my-models | sort").strip()
    check(files == fixture.local(shown), f"layout:\n{files}\nthe page shows:\n{shown}")
    return "the script's output and the repository layout are the page's"


def test_requests(fixture: Fixture) -> str:
    fixture.script_model()
    server = fixture.server()
    try:
        server.start()
        client = server.client()
        metadata = client.get(f"/v2/models/{MODEL}")
        shown = fixture.page.output_after(f"curl -s localhost:8000/v2/models/{MODEL}")
        check(metadata.text() in shown, f"metadata {metadata.text()} is not the page's {shown}")
        requests = fixture.page.requests(r"/v2/models/\w+/infer")
        check(len(requests) == 3, f"{len(requests)} infer requests on the page, expected 3")
        for path, body, output in requests:
            reply = client.request("POST", path, body.encode(),
                                   {"Content-Type": "application/json"})
            expected_body, expected_status = body_and_status(output)
            check(reply.status == expected_status and reply.text() == expected_body,
                  f"{path}: {reply.status} {reply.text()}\nthe page shows: {output}")
        client.close()
        server.stop()
    finally:
        server.cleanup()
    return f"metadata and {len(requests)} infer answers are the page's"


def test_misspelt_field(fixture: Fixture) -> str:
    fixture.script_model()
    weights = '{ name: "weights" data_type: TYPE_FP32 dims: [ 4 ] }'
    check(weights in fixture.config, "the page's config has no weights line to misspell")
    fixture.write_config(fixture.config.replace(weights, weights.replace("dims", "dimz")))
    server = fixture.server(wait_for="live")
    try:
        server.start()
        client = server.client()
        index = client.post_json("/v2/repository/index", {})
        shown = fixture.page.output_after("curl -s -X POST localhost:8000/v2/repository/index")
        check(index.text() == fixture.local(shown.strip()),
              f"index {index.text()}\nthe page shows {shown}")
        client.close()
        server.stop()
        reason = fixture.local(fixture.page.log_reason("failed to load: "))
        check(reason in server.stderr_text(), f"log lacks {reason!r}:\n{server.describe()}")
    finally:
        fixture.write_config(fixture.config)
        server.cleanup()
    return "the index and the log name file, line and field as the page shows"


def test_more_outputs_than_returned(fixture: Fixture) -> str:
    fixture.script_model()
    last = '{ name: "OUTPUT__1" data_type: TYPE_FP32 dims: [ 1 ] }'
    check(last in fixture.config, "the page's config has no OUTPUT__1 line")
    fixture.write_config(fixture.config.replace(
        last, last + ',\n  { name: "OUTPUT__2" data_type: TYPE_FP32 dims: [ 1 ] }'))
    server = fixture.server(wait_for="live")
    try:
        server.start()
        server.stop()
        shown = [line for line in fixture.page.text.splitlines()
                 if "failed to load: " in line and "OUTPUT__2" in line]
        check(len(shown) == 1, "the page shows no OUTPUT__2 load error")
        reason = fixture.local(shown[0].split("failed to load: ", 1)[1])
        check(reason in server.stderr_text(), f"log lacks {reason!r}:\n{server.describe()}")
    finally:
        fixture.write_config(fixture.config)
        server.cleanup()
    return "refused at load with the page's message"


def wrap_override(config_text: str) -> bytes:
    """What the page's python one-liner makes of an override file."""
    return json.dumps({"parameters": {"config": config_text}}).encode()


def test_config_override(fixture: Fixture) -> str:
    fixture.script_model()
    override = fixture.page.first("json")
    server = fixture.server(["--model-control-mode", "explicit"], wait_for="live")
    try:
        server.start()
        client = server.client()
        ready = client.get(f"/v2/models/{MODEL}/ready")
        index = client.post_json("/v2/repository/index", {}).text()
        shown = fixture.page.output_after(f"curl -s localhost:8000/v2/models/{MODEL}/ready")
        # curl -w '%{http_code}\n' prints the status right after the body.
        got = f"{ready.text()}{ready.status}\n{index}"
        check(got == shown.strip(), f"before loading: {got}\nthe page shows: {shown}")
        headers = {"Content-Type": "application/json"}
        path = f"/v2/repository/models/{MODEL}/load"
        loaded = client.request("POST", path, wrap_override(override), headers)
        check(loaded.status == 200, f"override load: {loaded.status} {loaded.text()}")
        config = client.get(f"/v2/models/{MODEL}/config").json()
        fields = " ".join(str(value) for value in (
            config["name"], config["backend"], config["platform"], config["max_batch_size"],
            config["instance_group"][0]["count"],
            config["dynamic_batching"]["max_queue_delay_microseconds"]))
        shown = fixture.page.output_after(f"curl -s localhost:8000/v2/models/{MODEL}/config")
        check(fields == shown.strip(), f"config {fields!r}, the page shows {shown!r}")
        # The page's misspelt override: its first "dims" becomes "dimz".
        typo = override.replace('"dims"', '"dimz"', 1)
        refused = client.request("POST", path, wrap_override(typo), headers)
        expected_body, expected_status = body_and_status(
            fixture.page.output_after("load-typo.json -w"))
        check(refused.status == expected_status and refused.text() == expected_body,
              f"misspelt override: {refused.status} {refused.text()}")
        check(client.get(f"/v2/models/{MODEL}/ready").status == 200,
              "the loaded version stopped serving after a refused override")
        back = client.request("POST", path, None, headers)
        check(back.status == 200, f"load without a body: {back.status} {back.text()}")
        config = client.get(f"/v2/models/{MODEL}/config").json()
        check(config["instance_group"][0]["count"] == 1, "config.pbtxt is not back in force")
        client.close()
        server.stop()
        check("1 old version(s) released" in server.stderr_text(), "no reload logged")
    finally:
        server.cleanup()
    return "partial override completed from the folder; typo refused; back to config.pbtxt"


TESTS: List[Callable[[Fixture], str]] = [
    test_script_and_layout,
    test_requests,
    test_misspelt_field,
    test_more_outputs_than_returned,
    test_config_override,
]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--doc", required=True, help="docs/serving-your-model.md")
    parser.add_argument("--filter", default="", help="run only checks whose name contains it")
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    work_dir = tempfile.mkdtemp(prefix="rampart-own-model-")
    try:
        fixture = Fixture(args, work_dir)
        for test in TESTS:
            name = test.__name__[len("test_"):]
            if args.filter and args.filter not in name:
                continue
            started = time.monotonic()
            try:
                tally.record(f"{name}: {test(fixture)}", None, time.monotonic() - started)
            except (E2eError, OSError, subprocess.TimeoutExpired) as error:
                tally.record(name, str(error))
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
