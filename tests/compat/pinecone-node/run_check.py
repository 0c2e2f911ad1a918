#!/usr/bin/env python3
"""Runs check.mjs (the official Pinecone Node client) against `rampart serve`.

Installs the pinned client with `npm install --no-audit --no-fund` into --work-dir (in the build
folder) when it is missing or another version, starts rampart on port 0 with a temporary config
whose knowledge: section keeps its indexes in a temporary folder, then runs `node check.mjs`.

Exit status: 0 passed, 1 failed, 77 skipped (only when npm cannot reach its registry: the client
cannot be installed on this machine; any other failure, a missing node included, fails).
Standard library only. Usage:
  run_check.py --binary build/rampart --repository examples/models \
      --work-dir build/tests/compat/pinecone-node
"""

import argparse
import json
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
from gateway_harness import small_repository  # noqa: E402

PACKAGE = "@pinecone-database/pinecone"


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True, help="the example model repository")
    parser.add_argument("--work-dir", required=True, help="where npm installs the client")
    args = parser.parse_args(argv)
    work_dir = os.path.abspath(args.work_dir)
    installed = npm_check.install(HERE, work_dir, PACKAGE)
    if installed != 0:
        return installed
    node = npm_check.find_node()
    if not node:
        return 1

    temp = tempfile.mkdtemp(prefix="rampart-pinecone-node-")
    try:
        config = os.path.join(temp, "rampart.yaml")
        with open(config, "w") as out:
            out.write(f"knowledge:\n  indexes_dir: {json.dumps(os.path.join(temp, 'indexes'))}\n")
        server = e2e.Server(args.binary, small_repository(args.repository, temp),
                            ["--config", config])
        status = npm_check.run_against(
            server, node, work_dir,
            {"RAMPART_PINECONE_URL": "http://127.0.0.1:{port}/pinecone"})
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    print("pinecone-node compatibility: " + ("passed" if status == 0 else "failed"), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
