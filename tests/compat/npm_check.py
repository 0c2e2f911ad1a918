"""What the Node compatibility checks share: the pinned npm client installed into a work folder,
and check.mjs run against a started rampart.

Each check's run_check.py (openai-node/, pinecone-node/) starts its server its own way and hands
it here. Exit statuses: 0 passed, 1 failed, SKIP (77) only when npm cannot reach its registry
(the client cannot be installed on this machine; any other failure, a missing node included,
fails). Standard library only.
"""

import json
import os
import re
import shutil
import subprocess
from typing import Dict

import rampart_e2e as e2e

SKIP = 77
NPM_TIMEOUT_S = 300
NODE_TIMEOUT_S = 120
# npm's error codes for a registry it cannot reach (DNS, refused, unreachable, timeouts, proxy).
OFFLINE = re.compile(r"\b(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ENETUNREACH|EHOSTUNREACH|"
                     r"ETIMEDOUT|ESOCKETTIMEDOUT|ERR_SOCKET_TIMEOUT|network request to|"
                     r"request to \S+ failed)\b")


def pinned_version(check_dir: str, package: str) -> str:
    with open(os.path.join(check_dir, "package.json")) as manifest:
        return json.load(manifest)["dependencies"][package]


def installed_version(work_dir: str, package: str) -> str:
    try:
        with open(os.path.join(work_dir, "node_modules", *package.split("/"),
                               "package.json")) as manifest:
            return json.load(manifest)["version"]
    except (OSError, ValueError, KeyError):
        return ""


def install(check_dir: str, work_dir: str, package: str) -> int:
    """Copies check_dir's package.json and check.mjs into work_dir and installs `package` at the
    version package.json pins, unless it is there already: 0, SKIP or 1."""
    os.makedirs(work_dir, exist_ok=True)
    for name in ("package.json", "check.mjs"):
        shutil.copyfile(os.path.join(check_dir, name), os.path.join(work_dir, name))
    wanted = pinned_version(check_dir, package)
    if installed_version(work_dir, package) == wanted:
        return 0
    npm = shutil.which("npm")
    if npm is None:
        print("FAIL npm is not on the PATH (tools/install_deps.sh installs it)", flush=True)
        return 1
    print(f"installing {package} {wanted} with npm into {work_dir}", flush=True)
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
            print(f"SKIP npm cannot reach its registry, so {package} cannot be installed:\n"
                  + output[-1500:], flush=True)
            return SKIP
        print(f"FAIL npm install exited {result.returncode}:\n{output[-3000:]}", flush=True)
        return 1
    if installed_version(work_dir, package) != wanted:
        print(f"FAIL npm installed {package} {installed_version(work_dir, package)!r}, "
              f"not {wanted}", flush=True)
        return 1
    return 0


def find_node() -> str:
    """The node binary, or "" after saying why it is missing."""
    node = shutil.which("node")
    if node is None:
        print("FAIL node is not on the PATH (tools/install_deps.sh installs it)", flush=True)
        return ""
    return node


def run_against(server: "e2e.Server", node: str, work_dir: str,
                environment: Dict[str, str]) -> int:
    """Starts `server`, runs `node check.mjs` in work_dir with os.environ plus `environment`
    (whose values may hold "{port}", the server's port), stops the server: 0 or 1. The server's
    log is printed when the check fails; the server is cleaned up either way."""
    status = 1
    try:
        server.start()
        env = dict(os.environ, **{key: value.format(port=server.port)
                                  for key, value in environment.items()})
        try:
            result = subprocess.run([node, "check.mjs"], cwd=work_dir, env=env,
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
    return status
