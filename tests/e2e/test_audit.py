#!/usr/bin/env python3
"""The audit log on the real binary (docs/audit.md): with `audit: {sync: true}`, a burst of
concurrent infer requests on `simple` with the server SIGKILLed mid-burst; every request whose
answer reached the client has its record (matched by x-request-id through `rampart audit
export`), and `rampart audit verify --data-dir` (the key from the data directory's
audit-signing-key.pem) exits 0; one record edited in the SQLite file makes verify exit 1 naming
it. A 401 and a 403 are recorded too, and gRPC infers (granted and refused).

Usage: test_audit.py --binary build/rampart --repository examples/models
                     --grpc-call build/tests/grpc_call
"""

import argparse
import json
import os
import re
import signal
import sqlite3
import sys
import threading
from typing import Callable, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import check  # noqa: E402



class Context(e2e.DriverContext):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args, "rampart-audit-", command_timeout_s=120)

    def master_key(self, name: str) -> str:
        path = os.path.join(self.work, name)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
            out.write(os.urandom(32))
        return path

    def export(self, data_dir: str) -> List[Dict]:
        exported = self.rampart("audit", "export", "--data-dir", data_dir)
        check(exported.returncode == 0, f"audit export: {exported.returncode} {exported.stderr}")
        return [json.loads(line) for line in exported.stdout.splitlines() if line.strip()]


def infer(client: e2e.Client, model: str, headers: Dict[str, str]) -> e2e.Response:
    return e2e.infer_json(client, model, headers)


def test_kill_mid_burst(ctx: Context) -> str:
    data_dir = os.path.join(ctx.work, "burst-data")
    key = ctx.master_key("burst.key")
    config = ctx.write("burst.yaml", f"keyring: {{master_key_file: {key}}}\n"
                                     "audit: {sync: true, checkpoint_every_records: 50}\n")
    server = e2e.Server(ctx.args.binary, ctx.args.repository,
                        ["--config", config, "--data-dir", data_dir])
    answered: List[str] = []
    lock = threading.Lock()
    started = threading.Event()
    stop = threading.Event()

    def client_loop(worker: int) -> None:
        try:
            client = server.client(timeout=10)
        except OSError:
            return
        number = 0
        while not stop.is_set():
            request_id = f"burst-{worker}-{number}"
            number += 1
            try:
                reply = infer(client, "simple", {"x-request-id": request_id})
            except (OSError, e2e.E2eError, ValueError):
                # http.client's errors derive from Exception; the kill ends the connection.
                return
            except Exception:  # noqa: BLE001 (RemoteDisconnected, BadStatusLine...)
                return
            if reply.status == 200:
                with lock:
                    answered.append(request_id)
                    if len(answered) >= 200:
                        started.set()

    try:
        server.start()
        threads = [threading.Thread(target=client_loop, args=(i,), daemon=True)
                   for i in range(8)]
        for thread in threads:
            thread.start()
        check(started.wait(timeout=60), f"the burst never reached 200 answers: {len(answered)}")
        server.process.send_signal(signal.SIGKILL)  # mid-burst: no flush, no final checkpoint
        server.wait(expect_exit_code=None)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        stop.set()
        server.cleanup()
    with lock:
        received = list(answered)
    records = ctx.export(data_dir)
    recorded = {record["request_id"] for record in records}
    missing = [request_id for request_id in received if request_id not in recorded]
    check(not missing, f"{len(missing)} of {len(received)} answered requests have no record "
                       f"(first {missing[:5]})")
    check(os.path.exists(os.path.join(data_dir, "audit-signing-key.pem")),
          "the server must write audit-signing-key.pem")
    verified = ctx.rampart("audit", "verify", "--data-dir", data_dir)
    check(verified.returncode == 0 and "audit log sound" in verified.stdout,
          f"verify after SIGKILL: {verified.returncode} {verified.stdout} {verified.stderr}")
    # Tamper: one record's content edited in place inside its batch's blob (the compact form of
    # version 3: a byte of its request id, stored as its length and its bytes), nothing
    # recomputed.
    victim_record = records[len(records) // 2]
    victim = victim_record["sequence"]
    request_id = victim_record["request_id"].encode()
    database = sqlite3.connect(os.path.join(data_dir, "rampart.db"))
    try:
        first, blob = database.execute(
            "SELECT first_sequence, records FROM audit_batches WHERE first_sequence <= ? "
            "ORDER BY first_sequence DESC LIMIT 1", (victim,)).fetchone()
        check(blob[:1] == b"\x03", f"the batch holding record {victim} is not version 3")
        at = blob.find(bytes([len(request_id)]) + request_id)
        check(0 < len(request_id) < 128 and at >= 0,
              f"record {victim}'s request id is not in its batch")
        changed = b"x" if request_id[:1] != b"x" else b"y"
        edited = blob[:at + 1] + changed + blob[at + 2:]
        database.execute("UPDATE audit_batches SET records = ? WHERE first_sequence = ?",
                         (edited, first))
        database.commit()
    finally:
        database.close()
    tampered = ctx.rampart("audit", "verify", "--data-dir", data_dir)
    check(tampered.returncode == 1 and f"record {victim}" in tampered.stderr,
          f"verify after editing record {victim}: {tampered.returncode} {tampered.stderr}")
    return (f"{len(received)} answered before SIGKILL, all {len(records)} records verified; "
            f"an edit of record {victim} found")


def test_refusals_recorded(ctx: Context) -> str:
    data_dir = os.path.join(ctx.work, "refusal-data")
    key = ctx.master_key("refusal.key")
    policy = ctx.write("policy.yaml", e2e.ANALYST_POLICY)
    config = ctx.write("refusal.yaml", f"""
keyring: {{master_key_file: {key}}}
audit: {{sync: true}}
access:
  policy_files: [{policy}]
""")
    created = ctx.rampart("tenants", "create", "acme", "--data-dir", data_dir)
    check(created.returncode == 0, f"tenants create: {created.stderr}")
    made = ctx.rampart("keys", "create", "--tenant", "acme", "--name", "ci", "--role", "analyst",
                       "--data-dir", data_dir)
    check(made.returncode == 0, f"keys create: {made.stderr}")
    api_key = made.stdout.strip()
    server = e2e.Server(ctx.args.binary, ctx.args.repository,
                        ["--config", config, "--data-dir", data_dir])
    try:
        server.start()
        client = server.client()
        denied = infer(client, "mlp_classifier", {"x-api-key": api_key,
                                                  "x-request-id": "audit-403"})
        check(denied.status == 403, f"analyst on mlp_classifier: {denied!r}")
        anonymous = infer(client, "simple", {"x-request-id": "audit-401"})
        check(anonymous.status == 401, f"no credentials: {anonymous!r}")
        granted = infer(client, "simple", {"x-api-key": api_key, "x-request-id": "audit-200"})
        check(granted.status == 200, f"analyst on simple: {granted!r}")
        client.close()
        # gRPC: an infer granted and one refused, each recorded under the id it carries.
        request = {"model_name": "simple", "id": "audit-grpc-200", "inputs": [
            {"name": name, "datatype": "INT32", "shape": [1, 16],
             "contents": {"int_contents": list(range(16))}} for name in ("INPUT0", "INPUT1")]}
        for model, request_id, code in (("simple", "audit-grpc-200", 0),
                                        ("mlp_classifier", "audit-grpc-403", 7)):
            answer = e2e.grpc_call(ctx.args.grpc_call, server, "ModelInfer",
                                   dict(request, model_name=model, id=request_id),
                                   (f"x-api-key={api_key}",))
            check(answer["code"] == code, f"gRPC {model}: {answer}")
        server.stop()
        server.stop()
    finally:
        server.cleanup()
    by_id = {record["request_id"]: record for record in ctx.export(data_dir)}
    for request_id, status in (("audit-403", 403), ("audit-401", 401), ("audit-200", 200),
                               ("audit-grpc-200", 200), ("audit-grpc-403", 403)):
        check(request_id in by_id and by_id[request_id]["status"] == status,
              f"{request_id}'s record: {by_id.get(request_id)}")
    check(by_id["audit-403"]["allowed"] is False and by_id["audit-403"]["tenant"] == "acme",
          f"the 403's record: {by_id['audit-403']}")
    verified = ctx.rampart("audit", "verify", "--data-dir", data_dir)
    check(verified.returncode == 0 and "records are not yet covered" not in verified.stdout,
          f"verify after a clean stop (a final checkpoint): {verified.stdout} {verified.stderr}")
    check(by_id["audit-grpc-403"]["api"] == "kserve_grpc" and
          by_id["audit-grpc-403"]["principal"] == "ci", f"gRPC 403: {by_id['audit-grpc-403']}")
    return "401, 403 and 200 over HTTP, 200 and 403 over gRPC recorded; a final checkpoint"


TESTS: List[Tuple[str, Callable[[Context], str]]] = [
    ("kill mid-burst", test_kill_mid_burst),
    ("refusals recorded", test_refusals_recorded),
]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--grpc-call", required=True)
    parser.add_argument("--filter", default="")
    args = parser.parse_args(argv)
    args.binary = os.path.abspath(args.binary)
    args.repository = os.path.abspath(args.repository)
    args.grpc_call = os.path.abspath(args.grpc_call)
    return e2e.run_tests(Context(args), TESTS, (sqlite3.Error,), args.filter)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
