#!/usr/bin/env python3
"""Runs check.mjs (the official openai Node SDK) against `rampart serve` and a fake upstream.

Installs the pinned SDK with `npm install --no-audit --no-fund` into --work-dir (in the build
folder) when it is missing or another version, starts tests/e2e/fake_openai_upstream.py and
rampart on port 0 with a temporary config, then runs `node check.mjs`.

Exit status: 0 passed, 1 failed, 77 skipped (only when npm cannot reach its registry: the SDK
cannot be installed on this machine; any other failure, a missing node included, fails).
Standard library only. Usage:
  run_check.py --binary build/rampart --repository examples/models \
      --work-dir build/tests/compat/openai-node
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "e2e"))
import rampart_e2e as e2e  # noqa: E402
from fake_openai_upstream import FakeUpstream  # noqa: E402
from gateway_harness import small_repository, write_config  # noqa: E402

SKIP = 77
NPM_TIMEOUT_S = 300
NODE_TIMEOUT_S = 120
# npm's error codes for a registry it cannot reach (DNS, refused, unreachable, timeouts, proxy).
OFFLINE = re.compile(r"\b(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ENETUNREACH|EHOSTUNREACH|"
                     r"ETIMEDOUT|ESOCKETTIMEDOUT|ERR_SOCKET_TIMEOUT|network request to|"
                     r"request to \S+ failed)\b")


def pinned_version() -> str:
    with open(os.path.join(HERE, "package.json")) as package:
        return json.load(package)["dependencies"]["openai"]


def installed_version(work_dir: str) -> str:
    try:
        with open(os.path.join(work_dir, "node_modules", "openai", "package.json")) as package:
            return json.load(package)["version"]
    except (OSError, ValueError, KeyError):
        return ""


def install(work_dir: str) -> int:
    """0 when the pinned SDK is there (installed now or before), SKIP or 1 otherwise."""
    os.makedirs(work_dir, exist_ok=True)
    for name in ("package.json", "check.mjs"):
        shutil.copyfile(os.path.join(HERE, name), os.path.join(work_dir, name))
    wanted = pinned_version()
    if installed_version(work_dir) == wanted:
        return 0
    npm = shutil.which("npm")
    if npm is None:
        print("FAIL npm is not on the PATH (tools/install_deps.sh installs it)", flush=True)
        return 1
    print(f"installing openai {wanted} with npm into {work_dir}", flush=True)
    try:
        result = subprocess.run([npm, "install", "--no-audit", "--no-fund"], cwd=work_dir,
                                capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"SKIP npm install took over {NPM_TIMEOUT_S} s: its registry is out of reach",
              flush=True)
        return SKIP
    output = result.stdout + result.stderr
    if result.returncode != 0:
        if OFFLINE.search(output):
            print("SKIP npm cannot reach its registry, so the openai SDK cannot be installed:\n"
                  + output[-1500:], flush=True)
            return SKIP
        print(f"FAIL npm install exited {result.returncode}:\n{output[-3000:]}", flush=True)
        return 1
    if installed_version(work_dir) != wanted:
        print(f"FAIL npm installed openai {installed_version(work_dir)!r}, not {wanted}",
              flush=True)
        return 1
    return 0


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True, help="the example model repository")
    parser.add_argument("--work-dir", required=True, help="where npm installs the SDK")
    args = parser.parse_args(argv)
    work_dir = os.path.abspath(args.work_dir)
    installed = install(work_dir)
    if installed != 0:
        return installed
    node = shutil.which("node")
    if node is None:
        print("FAIL node is not on the PATH (tools/install_deps.sh installs it)", flush=True)
        return 1

    temp = tempfile.mkdtemp(prefix="rampart-openai-node-")
    answer = "hello from the fake upstream"
    status = 1
    with FakeUpstream("compat", ("upstream-assistant",), answer=answer) as fake:
        config = os.path.join(temp, "rampart.yaml")
        write_config(config, {
            "upstreams": [{"name": "fake", "url": fake.url}],
            "models": [{"name": "assistant",
                        "endpoints": [{"upstream": "fake", "model": "upstream-assistant"}]},
                       {"name": "text-embedding", "local_model": "text_embedding"}],
        })
        server = e2e.Server(args.binary, small_repository(args.repository, temp),
                            ["--config", config, "--data-dir", os.path.join(temp, "data")])
        try:
            server.start()
            environment = dict(os.environ, RAMPART_BASE_URL=f"http://127.0.0.1:{server.port}/v1",
                               CHAT_MODEL="assistant", CHAT_ANSWER=answer,
                               EMBEDDING_MODEL="text-embedding")
            try:
                result = subprocess.run([node, "check.mjs"], cwd=work_dir, env=environment,
                                        timeout=NODE_TIMEOUT_S)
                status = 0 if result.returncode == 0 else 1
            except subprocess.TimeoutExpired:
                print(f"FAIL node check.mjs ran past {NODE_TIMEOUT_S} s", flush=True)
            server.stop()
        except e2e.E2eError as error:
            print(f"FAIL {error}", flush=True)
            status = 1
        finally:
            if status != 0:
                print(server.describe(), flush=True)
            server.cleanup()
            shutil.rmtree(temp, ignore_errors=True)
    print("openai-node compatibility: " + ("passed" if status == 0 else "failed"), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
