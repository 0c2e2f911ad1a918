#!/usr/bin/env python3
"""`make run` builds only what serving needs; `make test` still builds everything.

    python3 tests/e2e/test_make_targets.py --source-dir . --build-dir build

Reads the commands `make -n` would run (nothing is built) and asks Ninja for every input of the
targets `make run` builds: no test or benchmark source may be among them (`make run` used to
build every test target first, about 6 minutes on 2 cores). Needs a configured build directory.
Prints one line per check and ends with "N passed, M failed"; exits non-zero on failure.
"""

import argparse
import os
import shlex
import subprocess
import sys
import time
from typing import List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402


def build_command(source_dir: str, build_dir: str, goal: str) -> List[str]:
    """The `cmake --build` command `make <goal>` would run, as arguments."""
    result = subprocess.run(["make", "-n", "-C", source_dir, goal, f"BUILD_DIR={build_dir}"],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    check(result.returncode == 0, f"make -n {goal}: exit {result.returncode}\n{result.stderr}")
    # `make test` also builds the fuzz targets in their own directory; only BUILD_DIR's counts.
    builds = [args for args in (shlex.split(line) for line in result.stdout.splitlines()
                                if line.startswith("cmake --build"))
              if args[2:3] == [build_dir]]
    check(len(builds) == 1, f"make -n {goal}: {len(builds)} cmake --build lines:\n"
                            f"{result.stdout}")
    return builds[0]


def test_run_builds_only_serving(source_dir: str, build_dir: str) -> str:
    command = build_command(source_dir, build_dir, "run")
    check("--target" in command, f"make run builds every target: {' '.join(command)}")
    targets = command[command.index("--target") + 1:]
    check({"rampart", "example_models"} <= set(targets),
          f"make run does not build the server and the example models: {targets}")
    inputs = subprocess.run(["ninja", "-C", build_dir, "-t", "inputs"] + targets,
                            stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=60)
    check(inputs.returncode == 0, f"ninja -t inputs: {inputs.stderr}")
    needed = inputs.stdout.split()
    extra = [path for path in needed
             if "/tests/" in f"/{path}" or "/bench/" in f"/{path}"]
    check(not extra, f"make run builds test or benchmark files: {extra[:10]}")
    everything = subprocess.run(["ninja", "-C", build_dir, "-t", "inputs", "all"],
                                stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=60).stdout.split()
    return f"targets {' '.join(targets)}: {len(needed)} of {len(everything)} inputs of `all`"


def test_test_builds_everything(source_dir: str, build_dir: str) -> str:
    command = build_command(source_dir, build_dir, "test")
    check("--target" not in command, f"make test builds only some targets: {' '.join(command)}")
    return "make test builds every target"


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--build-dir", required=True, help="a configured (Ninja) build directory")
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    for test in (test_run_builds_only_serving, test_test_builds_everything):
        name = test.__name__[len("test_"):]
        started = time.monotonic()
        try:
            detail = test(os.path.abspath(args.source_dir), os.path.abspath(args.build_dir))
            tally.record(f"{name}: {detail}", None, time.monotonic() - started)
        except (E2eError, OSError, subprocess.TimeoutExpired) as error:
            tally.record(name, str(error))
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
