#!/usr/bin/env python3
"""`rampart policy test` and `rampart policy explain` on the real binary: their exit codes and output.

    python3 tests/e2e/test_policy_cli.py --binary build/rampart --data-dir tests/data/policy

test: 0 when every case of a table passes, 1 with each mismatch printed, 2 for an invalid table.
explain: the decision and the rules that made it, 2 for an invalid request. No server is started.
Prints one line per check and ends with "N passed, M failed"; exits non-zero on failure.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from typing import List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402

MISMATCH_TABLE = """policies: [{policy}]
cases:
  - name: passes
    principal: {{tenant: acme, name: root, roles: [admin]}}
    action: admin:reload
    resource: {{type: server, name: rampart}}
    context: {{source_ip: 127.0.0.1}}
    expect: allow
  - name: expects the wrong decision
    principal: {{tenant: acme, name: root, roles: [admin]}}
    action: admin:reload
    resource: {{type: server, name: rampart}}
    context: {{source_ip: 203.0.113.1}}
    expect: allow
"""


def run(binary: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, "policy", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


def test_golden_table_passes(binary: str, data_dir: str, work: str) -> str:
    table = os.path.join(data_dir, "golden.yaml")
    result = run(binary, "test", table)
    check(result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}")
    check(result.stdout.strip() == f"{table}: pass", f"output: {result.stdout!r}")
    return "exit 0"


def test_mismatch_exits_one(binary: str, data_dir: str, work: str) -> str:
    table = os.path.join(work, "mismatch.yaml")
    with open(table, "w") as out:
        out.write(MISMATCH_TABLE.format(policy=os.path.join(data_dir, "main.yaml")))
    result = run(binary, "test", table)
    check(result.returncode == 1, f"exit {result.returncode}\n{result.stdout}{result.stderr}")
    check(f"{table}:9: case 'expects the wrong decision': expected allow, got deny (denied by "
          "rule 'acme-office-networks')" in result.stdout, f"output: {result.stdout!r}")
    check("case 'passes'" not in result.stdout, f"a passing case reported: {result.stdout!r}")
    return "exit 1, the case named"


def test_invalid_table_exits_two(binary: str, data_dir: str, work: str) -> str:
    table = os.path.join(work, "invalid.yaml")
    with open(table, "w") as out:
        out.write("policies: [absent.yaml]\ncases: []\n")
    result = run(binary, "test", table)
    check(result.returncode == 2, f"exit {result.returncode}\n{result.stdout}{result.stderr}")
    check("absent.yaml: cannot open the policy file" in result.stderr,
          f"stderr: {result.stderr!r}")
    return "exit 2"


def test_explain(binary: str, data_dir: str, work: str) -> str:
    request = ("{principal: {tenant: acme, name: carol, roles: [analyst], "
               "attributes: {department: research}}, action: model:infer, "
               "resource: {type: model, name: simple}, context: {source_ip: 10.1.2.3}}")
    result = run(binary, "explain", "--policy", os.path.join(data_dir, "main.yaml"), request)
    check(result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}")
    lines = result.stdout.splitlines()
    check(lines[:3] == ["decision: deny", "reason: denied by rule 'clearance-required'",
                        "rules: clearance-required"], f"output: {result.stdout}")
    check(any(line.startswith("  forbid clearance-required (") and
              "principal.clearance is missing" in line for line in lines),
          f"no erroring rule with its reason: {result.stdout}")
    bad = run(binary, "explain", "--policy", os.path.join(data_dir, "main.yaml"), "{action: x}")
    check(bad.returncode == 2, f"invalid request: exit {bad.returncode}")
    return "the deciding forbid and why it erred"


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--data-dir", required=True, help="tests/data/policy")
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    with tempfile.TemporaryDirectory() as work:
        for test in (test_golden_table_passes, test_mismatch_exits_one,
                     test_invalid_table_exits_two, test_explain):
            name = test.__name__[len("test_"):]
            started = time.monotonic()
            try:
                detail = test(os.path.abspath(args.binary), os.path.abspath(args.data_dir), work)
                tally.record(f"{name}: {detail}", None, time.monotonic() - started)
            except (E2eError, OSError, subprocess.TimeoutExpired) as error:
                tally.record(name, str(error))
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
