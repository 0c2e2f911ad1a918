"""KServe v2 tensors for the end-to-end tests: Python values to and from the JSON and binary
tensor forms, requests with the binary tensor extension, reference answers.

Standard library only, like rampart_e2e.
"""

import json
import os
import struct
from typing import Dict, List, Optional, Sequence, Tuple

from rampart_e2e import E2eError, Response


# datatype -> (struct format character, bytes per element); BYTES is length-prefixed.
_FIXED_SIZE = {
    "BOOL": ("?", 1), "UINT8": ("B", 1), "UINT16": ("H", 2), "UINT32": ("I", 4),
    "UINT64": ("Q", 8), "INT8": ("b", 1), "INT16": ("h", 2), "INT32": ("i", 4),
    "INT64": ("q", 8), "FP16": ("e", 2), "FP32": ("f", 4), "FP64": ("d", 8), "BF16": (None, 2),
}
FLOAT_DATATYPES = {"FP16", "FP32", "FP64", "BF16"}


def element_count(shape: Sequence[int]) -> int:
    count = 1
    for dimension in shape:
        count *= int(dimension)
    return count


def flatten(data) -> list:
    """Row-major flattening of nested lists (a scalar becomes a one-element list)."""
    if not isinstance(data, list):
        return [data]
    flat: list = []
    for item in data:
        flat.extend(flatten(item))
    return flat


def nest(flat: Sequence, shape: Sequence[int]):
    """Reshapes a flat row-major list into nested lists of `shape`."""
    if len(shape) == 0:
        return flat[0]
    if len(shape) == 1:
        return list(flat)
    stride = element_count(shape[1:])
    return [nest(flat[i * stride:(i + 1) * stride], shape[1:]) for i in range(int(shape[0]))]


def encode_tensor(datatype: str, flat: Sequence) -> bytes:
    """Raw little-endian bytes of a tensor, as the binary tensor extension carries it."""
    if datatype == "BYTES":
        out = bytearray()
        for element in flat:
            raw = element.encode("utf-8") if isinstance(element, str) else bytes(element)
            out += struct.pack("<I", len(raw)) + raw
        return bytes(out)
    if datatype == "BF16":
        return b"".join(struct.pack("<f", float(value))[2:] for value in flat)
    code, _ = _FIXED_SIZE[datatype]
    return struct.pack(f"<{len(flat)}{code}", *flat)


def decode_tensor(datatype: str, raw: bytes, shape: Optional[Sequence[int]] = None) -> list:
    """Inverse of encode_tensor; BYTES elements come back as str (bytes if not UTF-8)."""
    if datatype == "BYTES":
        values, offset = [], 0
        while offset < len(raw):
            if offset + 4 > len(raw):
                raise E2eError(f"BYTES tensor: truncated length prefix at offset {offset}")
            (length,) = struct.unpack_from("<I", raw, offset)
            offset += 4
            if offset + length > len(raw):
                raise E2eError(f"BYTES tensor: element of {length} bytes overruns the buffer")
            element = raw[offset:offset + length]
            offset += length
            try:
                values.append(element.decode("utf-8"))
            except UnicodeDecodeError:
                values.append(element)
        if shape is not None and len(values) != element_count(shape):
            raise E2eError(f"BYTES tensor has {len(values)} elements, shape {list(shape)}")
        return values
    code, size = _FIXED_SIZE[datatype]
    if len(raw) % size:
        raise E2eError(f"{datatype} tensor of {len(raw)} bytes is not a whole number of elements")
    count = len(raw) // size
    if shape is not None and count != element_count(shape):
        raise E2eError(f"{datatype} tensor has {count} elements, shape {list(shape)}")
    if datatype == "BF16":
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    return list(struct.unpack(f"<{count}{code}", raw))


class InferRequest:
    """Builds a KServe v2 infer body, JSON-only or with the binary tensor extension.

    inputs: list of dicts {name, datatype, shape, data (flat or nested), binary: bool,
    parameters?}. outputs: list of dicts {name, binary_data?: bool, parameters?} or None.
    """

    def __init__(self, inputs: List[Dict], outputs: Optional[List[Dict]] = None,
                 request_id: Optional[str] = None, parameters: Optional[Dict] = None,
                 extra_fields: Optional[Dict] = None) -> None:
        self.inputs = inputs
        self.outputs = outputs
        self.request_id = request_id
        self.parameters = parameters
        self.extra_fields = extra_fields or {}

    def header_and_payload(self) -> Tuple[Dict, bytes]:
        header: Dict = {}
        if self.request_id is not None:
            header["id"] = self.request_id
        if self.parameters is not None:
            header["parameters"] = self.parameters
        payload = bytearray()
        header["inputs"] = []
        for tensor in self.inputs:
            entry = {key: tensor[key] for key in ("name", "shape", "datatype") if key in tensor}
            parameters = dict(tensor.get("parameters") or {})
            if tensor.get("binary"):
                raw = encode_tensor(tensor["datatype"], flatten(tensor["data"]))
                parameters.setdefault("binary_data_size", len(raw))
                payload += raw
            elif "data" in tensor:
                entry["data"] = tensor["data"]
            if parameters:
                entry["parameters"] = parameters
            header["inputs"].append(entry)
        if self.outputs is not None:
            header["outputs"] = []
            for output in self.outputs:
                entry = {"name": output["name"]}
                parameters = dict(output.get("parameters") or {})
                if "binary_data" in output:
                    parameters["binary_data"] = output["binary_data"]
                if parameters:
                    entry["parameters"] = parameters
                header["outputs"].append(entry)
        header.update(self.extra_fields)
        return header, bytes(payload)

    def encode(self) -> Tuple[bytes, Optional[int]]:
        """(body, Inference-Header-Content-Length or None when no input is binary)."""
        header, payload = self.header_and_payload()
        header_bytes = json.dumps(header, separators=(",", ":")).encode()
        if not payload and not any(tensor.get("binary") for tensor in self.inputs):
            return header_bytes, None
        return header_bytes + payload, len(header_bytes)


def split_binary_response(response: Response) -> Tuple[Dict, bytes]:
    """Parses an infer response body into (JSON header, binary payload)."""
    header_length = response.header("Inference-Header-Content-Length")
    if header_length is None:
        return response.json(), b""
    try:
        length = int(header_length)
    except ValueError:
        raise E2eError(f"Inference-Header-Content-Length {header_length!r} is not a number")
    if not 0 <= length <= len(response.body):
        raise E2eError(f"Inference-Header-Content-Length {length} outside a body of "
                       f"{len(response.body)} bytes")
    return json.loads(response.body[:length].decode("utf-8")), response.body[length:]


def decode_infer_response(response: Response) -> Tuple[Dict, Dict[str, Dict]]:
    """(JSON header, {output name: {datatype, shape, data (flat), binary: bool}})."""
    header, payload = split_binary_response(response)
    outputs: Dict[str, Dict] = {}
    offset = 0
    for output in header.get("outputs", []):
        name = output.get("name")
        datatype = output.get("datatype")
        shape = output.get("shape")
        size = (output.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            if offset + size > len(payload):
                raise E2eError(f"output {name}: binary_data_size {size} overruns the "
                               f"{len(payload) - offset} payload bytes left")
            data = decode_tensor(datatype, payload[offset:offset + size], shape)
            offset += size
            binary = True
        else:
            if "data" not in output:
                raise E2eError(f"output {name} has neither data nor binary_data_size")
            data = flatten(output["data"])
            binary = False
        if name in outputs:
            raise E2eError(f"output {name} appears twice")
        outputs[name] = {"datatype": datatype, "shape": shape, "data": data, "binary": binary}
    if offset != len(payload):
        raise E2eError(f"{len(payload) - offset} binary payload bytes are not claimed by any "
                       f"output")
    return header, outputs


def values_close(expected, actual, datatype: str, rtol: float, atol: float) -> Optional[str]:
    """None when equal within tolerance, else a description of the first difference."""
    if len(expected) != len(actual):
        return f"{len(actual)} elements, expected {len(expected)}"
    for index, (want, got) in enumerate(zip(expected, actual)):
        if datatype in FLOAT_DATATYPES:
            if not isinstance(got, (int, float)) or isinstance(got, bool):
                return f"element {index}: {got!r} is not a number"
            if abs(got - want) > atol + rtol * abs(want):
                return f"element {index}: got {got!r}, expected {want!r}"
        elif datatype == "BOOL":
            if not isinstance(got, bool) or got != want:
                return f"element {index}: got {got!r}, expected {want!r}"
        elif datatype == "BYTES":
            if got != want:
                return f"element {index}: got {got!r}, expected {want!r}"
        elif not isinstance(got, int) or isinstance(got, bool) or got != want:
            return f"element {index}: got {got!r}, expected {want!r}"
    return None


def load_reference(expected_dir: str, model: str) -> Dict:
    with open(os.path.join(expected_dir, f"{model}.json")) as reference:
        return json.load(reference)
