"""Requests with known answers for the end-to-end drivers: `simple` (sum and difference of two
INT32 [16] rows, computed here) and one-row `mlp_classifier` requests checked against the
reference samples that examples/models/generate.py wrote (`mlp`: what
rampart_e2e.load_reference returns for the model).

Standard library only, like rampart_e2e.
"""
from typing import Dict, Optional

import kserve_tensors as tensors
import rampart_e2e as e2e
from rampart_e2e import check


def infer_headers(header_length: Optional[int]) -> Dict[str, str]:
    if header_length is None:
        return {"Content-Type": "application/json"}
    return {"Content-Type": "application/octet-stream",
            "Inference-Header-Content-Length": str(header_length)}


def simple_request(seed: int, batch: int = 1) -> tensors.InferRequest:
    a = [(seed * 31 + i) % 1000 - 500 for i in range(16 * batch)]
    b = [(seed * 17 + 3 * i) % 700 - 350 for i in range(16 * batch)]
    return tensors.InferRequest([
        {"name": "INPUT0", "datatype": "INT32", "shape": [batch, 16], "data": a},
        {"name": "INPUT1", "datatype": "INT32", "shape": [batch, 16], "data": b,
         "binary": seed % 2 == 1},
    ], request_id=f"seed-{seed}")


def check_simple_response(seed: int, response: e2e.Response, batch: int = 1) -> None:
    check(response.status == 200, f"simple seed {seed}: status {response.status} "
                                  f"{response.body[:200]!r}")
    header, outputs = tensors.decode_infer_response(response)
    check(header.get("id") == f"seed-{seed}", f"simple seed {seed}: id {header.get('id')!r}")
    request = simple_request(seed, batch)
    a, b = request.inputs[0]["data"], request.inputs[1]["data"]
    want = {"OUTPUT0": [x + y for x, y in zip(a, b)], "OUTPUT1": [x - y for x, y in zip(a, b)]}
    for name, values in want.items():
        check(name in outputs, f"simple seed {seed}: no {name} in {sorted(outputs)}")
        check(outputs[name]["shape"] == [batch, 16],
              f"simple seed {seed}: {name} shape {outputs[name]['shape']}")
        check(outputs[name]["data"] == values, f"simple seed {seed}: {name} data differs "
                                               f"(got {outputs[name]['data'][:4]}...)")


def mlp_row_request(mlp: dict, row: int) -> tensors.InferRequest:
    sample = mlp["samples"][1]["inputs"]["INPUT__0"]
    width = sample["shape"][1]
    data = sample["data"][row * width:(row + 1) * width]
    return tensors.InferRequest([{"name": "INPUT__0", "datatype": "FP32", "shape": [1, width],
                              "data": data, "binary": row % 2 == 0}])


def check_mlp_row_response(mlp: dict, row: int, response: e2e.Response) -> None:
    check(response.status == 200, f"mlp row {row}: status {response.status} "
                                  f"{response.body[:200]!r}")
    reference = mlp["samples"][1]["outputs"]["OUTPUT__0"]
    width = reference["shape"][1]
    want = reference["data"][row * width:(row + 1) * width]
    _, outputs = tensors.decode_infer_response(response)
    got = outputs.get("OUTPUT__0")
    check(got is not None, f"mlp row {row}: no OUTPUT__0")
    check(got["shape"] == [1, width], f"mlp row {row}: shape {got['shape']}")
    difference = tensors.values_close(want, got["data"], "FP32", 1e-4, 1e-6)
    check(difference is None, f"mlp row {row}: {difference}")
