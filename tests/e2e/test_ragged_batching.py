#!/usr/bin/env python3
"""Ragged batching on the real binary, with Triton's own example: a model whose INPUT [-1] has
allow_ragged_batch and which finds each request's part through the batch input INDEX
(BATCH_ACCUMULATED_ELEMENT_COUNT). Requests of 3, 4 and 5 elements must share one execution and
each get the sum of its own elements, and its running sums through a batch output scattered by
its shape (BATCH_SCATTER_WITH_INPUT_SHAPE); a lone request, a warm-up sample and a config
mistake are checked too.

Needs torch (the model is scripted here): run it with Debian's /usr/bin/python3.
Usage: test_ragged_batching.py --binary build/rampart
"""

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kserve_tensors as tensors  # noqa: E402
import rampart_e2e as e2e  # noqa: E402
from rampart_e2e import E2eError, check  # noqa: E402

import torch  # noqa: E402
from torch import Tensor  # noqa: E402


class RaggedSum(torch.nn.Module):
    """INPUT: every request's elements, one after another; INDEX: where each request's end.
    OUTPUT: each request's sum; RUNNING: the running sum within each request, per element."""

    def forward(self, INPUT: Tensor, INDEX: Tensor) -> Tuple[Tensor, Tensor]:  # noqa: N803
        totals = torch.cat([torch.zeros(1), torch.cumsum(INPUT, 0)])
        ends = INDEX.to(torch.int64)
        starts = torch.cat([torch.zeros(1, dtype=torch.int64), ends[:-1]])
        # Each element's request: the number of ends at or before its position.
        positions = torch.arange(INPUT.size(0))
        owner = torch.bucketize(positions, ends, right=True)
        running = totals[positions + 1] - totals[starts[owner]]
        return (totals[ends] - totals[starts]).unsqueeze(1), running


CONFIG = """
name: "ragged_sum"
backend: "pytorch"
max_batch_size: 16
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] },
         { name: "RUNNING" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "RUNNING" source_input: "INPUT" } ]
batch_input [ {
  kind: BATCH_ACCUMULATED_ELEMENT_COUNT
  target_name: "INDEX"
  data_type: TYPE_FP32
  source_input: "INPUT"
} ]
dynamic_batching { preferred_batch_size: [ 3 ] max_queue_delay_microseconds: 300000 }
model_warmup [ {
  name: "five"
  batch_size: 1
  inputs { key: "INPUT" value: { data_type: TYPE_FP32 dims: [ 5 ] zero_data: true } }
} ]
"""


def write_repository(root: str, config: str) -> str:
    models = os.path.join(root, "models")
    version = os.path.join(models, "ragged_sum", "1")
    os.makedirs(version)
    torch.jit.script(RaggedSum()).save(os.path.join(version, "model.pt"))
    with open(os.path.join(models, "ragged_sum", "config.pbtxt"), "w") as f:
        f.write(config)
    return models


def request(values: List[float]) -> tensors.InferRequest:
    return tensors.InferRequest([{"name": "INPUT", "datatype": "FP32", "shape": [1, len(values)],
                              "data": values}])


def answer(response: e2e.Response, values: List[float]) -> float:
    """The request's sum, after checking its running sums (scattered back by its shape)."""
    check(response.status == 200, f"infer answered {response.status}: {response.body[:300]!r}")
    outputs = {output["name"]: output for output in response.json()["outputs"]}
    total, running = outputs["OUTPUT"], outputs["RUNNING"]
    check(total["shape"] == [1, 1], f"OUTPUT {total}")
    check(running["shape"] == [1, len(values)], f"RUNNING shape {running['shape']}")
    expected = [sum(values[:i + 1]) for i in range(len(values))]
    check(running["data"] == expected, f"RUNNING {running['data']}, expected {expected}")
    return total["data"][0]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    args = parser.parse_args(argv)
    tally = e2e.Tally()
    work = tempfile.mkdtemp(prefix="rampart-ragged-")
    try:
        for name, test in (("ragged batch", ragged_batch), ("bad batch_input", bad_config)):
            started = time.monotonic()
            try:
                tally.record(f"{name}: {test(args.binary, work)}", None, time.monotonic() - started)
            except (E2eError, OSError) as error:
                tally.record(name, str(error))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tally.finish()


def ragged_batch(binary: str, work: str) -> str:
    models = write_repository(os.path.join(work, "good"), CONFIG)
    server = e2e.Server(binary, models)
    try:
        server.start()  # the warm-up sample (a batch of one, 5 elements) ran during the load
        rows = [[1.0, 2.0, 3.0], [10.0, 20.0, 30.0, 40.0], [0.5] * 5]
        sums: List[float] = [0.0] * len(rows)
        errors: List[str] = []
        barrier = threading.Barrier(len(rows))

        def worker(index: int) -> None:
            client = server.client(timeout=30)
            try:
                client.get("/v2/health/live")
                barrier.wait(timeout=30)
                sums[index] = answer(client.infer("ragged_sum", request(rows[index])), rows[index])
            except (E2eError, OSError, threading.BrokenBarrierError) as error:
                errors.append(f"request {index}: {error!r}")
            finally:
                client.close()

        threads = [threading.Thread(target=worker, args=(i,), daemon=True)
                   for i in range(len(rows))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        check(not errors, f"requests failed: {errors}")
        check(sums == [sum(row) for row in rows], f"sums {sums}, expected "
                                                  f"{[sum(row) for row in rows]}")
        client = server.client()
        # A lone request: flattened and indexed all the same (it waits out the queue delay).
        lone = answer(client.infer("ragged_sum", request([4.0, 5.0])), [4.0, 5.0])
        check(lone == 9.0, f"lone request: sum {lone}, expected 9")
        stats = client.get("/v2/models/ragged_sum/stats").json()["model_stats"][0]
        client.close()
        sizes = {int(batch["batch_size"]): batch["compute_infer"]["count"]
                 for batch in stats["batch_stats"]}
        check(sizes == {3: 1, 1: 1}, f"expected one batch of 3 and one of 1, batch_stats {sizes}")
        return ("3, 4 and 5 elements in one execution, each answered its own sum and running sums "
                "(a scattered batch output); a lone request too")
    finally:
        server.stop()
        server.cleanup()


def bad_config(binary: str, work: str) -> str:
    config = CONFIG.replace('source_input: "INPUT"', 'source_input: "TOKENS"')
    models = write_repository(os.path.join(work, "bad"), config)
    server = e2e.Server(binary, models, wait_for="live")  # never ready: its one model failed
    try:
        server.start()
        client = server.client()
        index = client.post_json("/v2/repository/index", {}).json()
        client.close()
        entry = next(e for e in index if e["name"] == "ragged_sum")
        check(entry["state"] == "UNAVAILABLE", f"index entry {entry}")
        check("source_input 'TOKENS' is not an input of the model" in entry["reason"],
              f"reason {entry['reason']!r}")
        return f"refused: {entry['reason']}"
    finally:
        server.stop()
        server.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
