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
import os
import shutil
import sys
import tempfile
from typing import List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "e2e"))
import npm_check  # noqa: E402
import rampart_e2e as e2e  # noqa: E402
from fake_openai_upstream import FakeUpstream  # noqa: E402
from gateway_harness import small_repository, write_config  # noqa: E402


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True, help="the example model repository")
    parser.add_argument("--work-dir", required=True, help="where npm installs the SDK")
    args = parser.parse_args(argv)
    work_dir = os.path.abspath(args.work_dir)
    installed = npm_check.install(HERE, work_dir, "openai")
    if installed != 0:
        return installed
    node = npm_check.find_node()
    if not node:
        return 1

    temp = tempfile.mkdtemp(prefix="rampart-openai-node-")
    answer = "hello from the fake upstream"
    try:
        with FakeUpstream("compat", ("upstream-assistant",), answer=answer) as fake:
            config = os.path.join(temp, "rampart.yaml")
            write_config(config, {
                "upstreams": [{"name": "fake", "url": fake.url}],
                "models": [{"name": "assistant",
                            "endpoints": [{"upstream": "fake", "model": "upstream-assistant"}]},
                           {"name": "text-embedding", "local_model": "text_embedding"}],
            })
            # The Vector Stores API, embedding with the local model.
            with open(config, "a") as out:
                out.write("knowledge:\n  vector_stores:\n    embedding_target: text-embedding\n")
            server = e2e.Server(args.binary, small_repository(args.repository, temp),
                                ["--config", config, "--data-dir", os.path.join(temp, "data")])
            status = npm_check.run_against(
                server, node, work_dir,
                {"RAMPART_BASE_URL": "http://127.0.0.1:{port}/v1", "CHAT_MODEL": "assistant",
                 "CHAT_ANSWER": answer, "EMBEDDING_MODEL": "text-embedding",
                 "VECTOR_STORES": "1"})
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    print("openai-node compatibility: " + ("passed" if status == 0 else "failed"), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
