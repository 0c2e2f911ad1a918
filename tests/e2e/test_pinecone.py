#!/usr/bin/env python3
"""Rampart's Pinecone API on the real binary (docs/vector-indexes.md):

- a burst of concurrent upserts with the server SIGKILLed mid-burst: after a restart on the same
  indexes folder, every vector whose upsert was acknowledged (200) is there with its values and
  metadata, and the index counts at least that many (writes in flight at the kill may or may not
  have landed; none may be half there);
- a clean restart (SIGTERM) keeps the index, its namespaces and its records;
- an indexes folder that cannot be opened is a start-up error naming it.

Usage: test_pinecone.py --binary build/rampart --repository examples/models
"""

import argparse
import json
import os
import signal
import sys
import threading
import urllib.parse
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import check  # noqa: E402
from gateway_harness import small_repository  # noqa: E402

DIMENSION = 8
BATCH = 25
WORKERS = 8
ACKNOWLEDGED_BEFORE_KILL = 3000


class Context(e2e.DriverContext):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args, "rampart-pinecone-", command_timeout_s=60)
        self.repository = small_repository(args.repository, self.work)

    def config(self, name: str, indexes: str, extra: str = "") -> str:
        return self.write(name, f"knowledge:\n  indexes_dir: {json.dumps(indexes)}\n{extra}")

    def server(self, config: str) -> e2e.Server:
        return e2e.Server(self.args.binary, self.repository, ["--config", config])


def values_of(record_id: str) -> List[float]:
    """The values a test record carries, from its id (so any record can be checked alone)."""
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(record_id))
    return [float((seed * (k + 3)) % 1000) / 8.0 for k in range(DIMENSION)]


def post(client: e2e.Client, path: str, document) -> e2e.Response:
    return client.post_json(path, document)


def create_index(client: e2e.Client, name: str) -> None:
    created = post(client, "/pinecone/indexes",
                   {"name": name, "dimension": DIMENSION, "metric": "euclidean"})
    check(created.status == 201, f"create {name}: {created!r}")


def fetch(client: e2e.Client, index: str, ids: List[str], namespace: str = "") -> Dict:
    found: Dict = {}
    for start in range(0, len(ids), 100):
        query = urllib.parse.urlencode([("ids", i) for i in ids[start:start + 100]] +
                                       [("namespace", namespace)])
        answer = client.get(f"/pinecone/indexes/{index}/vectors/fetch?{query}")
        check(answer.status == 200, f"fetch: {answer!r}")
        found.update(answer.json()["vectors"])
    return found


def stats(client: e2e.Client, index: str) -> Dict:
    answer = client.get(f"/pinecone/indexes/{index}/describe_index_stats")
    check(answer.status == 200, f"stats: {answer!r}")
    return answer.json()


def test_kill_mid_upsert_burst(ctx: Context) -> str:
    indexes = os.path.join(ctx.work, "burst-indexes")
    # Snapshots are taken during the burst too, so recovery is a snapshot plus the log after it.
    config = ctx.config("burst.yaml", indexes, "  snapshot_every_records: 700\n")
    server = ctx.server(config)
    acknowledged: List[str] = []
    lock = threading.Lock()
    enough = threading.Event()
    stop = threading.Event()

    def upsert_loop(worker: int) -> None:
        try:
            client = server.client(timeout=10)
        except OSError:
            return
        batch_number = 0
        while not stop.is_set():
            ids = [f"w{worker}-b{batch_number}-{i}" for i in range(BATCH)]
            batch_number += 1
            body = {"vectors": [{"id": i, "values": values_of(i), "metadata": {"worker": worker}}
                                for i in ids]}
            try:
                answer = post(client, "/pinecone/indexes/burst/vectors/upsert", body)
            except Exception:  # noqa: BLE001 (the kill ends the connection, any way it may)
                return
            if answer.status != 200:
                return
            with lock:
                acknowledged.extend(ids)
                if len(acknowledged) >= ACKNOWLEDGED_BEFORE_KILL:
                    enough.set()

    try:
        server.start()
        create_index(server.client(), "burst")
        threads = [threading.Thread(target=upsert_loop, args=(i,), daemon=True)
                   for i in range(WORKERS)]
        for thread in threads:
            thread.start()
        check(enough.wait(timeout=120),
              f"the burst never reached {ACKNOWLEDGED_BEFORE_KILL} acknowledged vectors: "
              f"{len(acknowledged)}")
        server.send_signal(signal.SIGKILL)  # mid-burst: no snapshot, no clean close
        server.wait(expect_exit_code=None)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        stop.set()
        server.cleanup()
    with lock:
        kept = list(acknowledged)

    restarted = ctx.server(config)
    try:
        restarted.start()
        client = restarted.client()
        found = fetch(client, "burst", kept)
        missing = [i for i in kept if i not in found]
        check(not missing, f"{len(missing)} of {len(kept)} acknowledged vectors are gone after "
                           f"the restart (first {missing[:5]})")
        wrong = [i for i in kept
                 if found[i]["values"] != values_of(i) or "worker" not in found[i]["metadata"]]
        check(not wrong, f"{len(wrong)} vectors came back different (first {wrong[:3]})")
        total = stats(client, "burst")["totalVectorCount"]
        check(total >= len(kept), f"the index counts {total}, fewer than {len(kept)} acknowledged")
        check(total % BATCH == 0, f"{total} vectors: an upsert of {BATCH} is partly there")
        restarted.stop()
    finally:
        restarted.cleanup()
    return f"{len(kept)} acknowledged before SIGKILL, all back ({total} in the index)"


def test_clean_restart_keeps_everything(ctx: Context) -> str:
    indexes = os.path.join(ctx.work, "restart-indexes")
    config = ctx.config("restart.yaml", indexes)
    with ctx.server(config) as server:
        client = server.client()
        create_index(client, "kept")
        for namespace in ("", "second"):
            answer = post(client, "/pinecone/indexes/kept/vectors/upsert", {
                "namespace": namespace,
                "vectors": [{"id": f"{namespace}-{i}", "values": values_of(str(i)),
                             "metadata": {"n": i}} for i in range(50)]})
            check(answer.status == 200, f"upsert: {answer!r}")
        deleted = post(client, "/pinecone/indexes/kept/vectors/delete",
                       {"namespace": "second", "filter": {"n": {"$lt": 10}}})
        check(deleted.status == 200, f"delete: {deleted!r}")
    with ctx.server(config) as server:
        client = server.client()
        listed = client.get("/pinecone/indexes").json()
        check([index["name"] for index in listed["indexes"]] == ["kept"], f"indexes {listed}")
        namespaces = stats(client, "kept")["namespaces"]
        check(namespaces == {"__default__": {"vectorCount": 50}, "second": {"vectorCount": 40}},
              f"namespaces {namespaces}")
        query = post(client, "/pinecone/indexes/kept/query",
                     {"topK": 3, "id": "-7", "includeMetadata": True})
        check(query.status == 200 and query.json()["matches"][0]["id"] == "-7", f"query {query!r}")
    return "50 + 40 records in two namespaces after a restart"


def test_unopenable_folder_is_a_start_up_error(ctx: Context) -> str:
    blocker = ctx.write("not-a-folder", "a file where the indexes folder should be\n")
    server = ctx.server(ctx.config("bad.yaml", blocker))
    try:
        try:
            server.start()
        except e2e.E2eError:
            pass
        else:
            raise e2e.E2eError("the server started on an indexes folder that is a file")
        server.wait(expect_exit_code=1)
        text = server.stderr_text()
        check("knowledge:" in text and blocker in text, f"stderr: {text[-800:]}")
    finally:
        server.cleanup()
    return "exit 1 naming the folder"


TESTS = [
    ("kill mid upsert burst", test_kill_mid_upsert_burst),
    ("clean restart keeps everything", test_clean_restart_keeps_everything),
    ("unopenable folder", test_unopenable_folder_is_a_start_up_error),
]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--filter", default="")
    args = parser.parse_args(argv)
    args.binary = os.path.abspath(args.binary)
    args.repository = os.path.abspath(args.repository)
    return e2e.run_tests(Context(args), TESTS, (), args.filter)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
