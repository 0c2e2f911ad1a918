#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (one folder of small files per target) and dictionaries.

    make_seeds.py --source-dir . --output-dir build-fuzz/seeds --protoc /usr/bin/protoc

Seeds come from what Rampart's tests already send: the request of every end-to-end golden case
(tests/e2e/cases/*.json, built by run_cases.py's own code), the example models' config.pbtxt
files, and a few hand-written inputs below for what those miss (chunked HTTP bodies, pipelining,
ragged batching, reshapes, ...). Reference samples, which the golden cases take from PyTorch, are
replaced by small made-up tensors of the same names and types: the decoders do not check values
against a model, and small seeds keep the fuzzers fast. gRPC requests are the same infer requests
as ModelInferRequest messages, serialized by protoc. Needs only the standard library and protoc.

Dictionaries (<output-dir>/<target>.dict, libFuzzer's format) hold the tokens the inputs are made
of: the KServe JSON keys and datatypes, HTTP methods and header fields, and every field and enum
name of the model config schema (read from model_config.proto).
"""

import argparse
import glob
import hashlib
import json
import os
import re
import struct
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

# Reference inputs per example model (tests/e2e/cases refer to them by model and sample index).
_REFERENCE_INPUTS = {
    "simple": [("INPUT0", "INT32", [1, 16]), ("INPUT1", "INT32", [1, 16])],
    "mlp_classifier": [("INPUT__0", "FP32", [1, 8])],
    "image_classifier": [("image", "FP32", [1, 3, 2, 2])],
    "text_stats": [("TEXT", "BYTES", [3])],
    "text_embedding": [("TEXT", "BYTES", [2, 1])],
}


def _made_up(datatype: str, count: int, sample: int) -> list:
    if datatype == "BYTES":
        return [f"text {sample}-{i}" for i in range(count)]
    if datatype == "BOOL":
        return [(i + sample) % 2 == 0 for i in range(count)]
    if datatype.startswith("FP"):
        return [0.25 * (i - sample) for i in range(count)]
    return [i + sample for i in range(count)]


def _load_e2e(source_dir: str):
    sys.path.insert(0, os.path.join(source_dir, "tests", "e2e"))
    import run_cases  # noqa: E402  (stdlib only; the server is never started)

    class SeedContext(run_cases.Context):
        def reference_sample(self, spec: Dict) -> Dict:
            sample = int(spec.get("sample", 0))
            inputs = {}
            for name, datatype, shape in _REFERENCE_INPUTS[spec["model"]]:
                count = 1
                for dim in shape:
                    count *= dim
                inputs[name] = {"datatype": datatype, "shape": list(shape),
                                "data": _made_up(datatype, count, sample)}
            return {"inputs": inputs}

    return run_cases, SeedContext("")


def e2e_requests(source_dir: str) -> List[Tuple[str, str, Optional[bytes], Dict[str, str]]]:
    """(method, path, body, headers) of every golden case that builds."""
    run_cases, context = _load_e2e(source_dir)
    requests = []
    for path in sorted(glob.glob(os.path.join(source_dir, "tests", "e2e", "cases", "*.json"))):
        with open(path) as f:
            document = json.load(f)
        for case in document["cases"]:
            try:
                requests.append(run_cases.build_request(case["request"], context))
            except (run_cases.CaseError, KeyError, ValueError, TypeError):
                continue
    return requests


# --------------------------------------------------------------------------------------------
# HTTP

_HAND_WRITTEN_HTTP = [
    b"GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"GET /v2 HTTP/1.0\r\n\r\n",
    b"HEAD /v2/models/simple HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    b"GET /v2/health/live HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
    b"GET /v2/health/ready HTTP/1.0\r\n\r\n",
    # Pipelined: three requests in one stream.
    b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n"
    b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    b"GET /metrics?name=rampart HTTP/1.1\r\nHost: x\r\n\r\n",
    # Chunked bodies, with an extension and trailers.
    b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
    b"Content-Type: application/json\r\n\r\n"
    b"5\r\n{\"inp\r\nb;ext=1\r\nuts\": []}  \r\n0\r\nX-Trailer: yes\r\n\r\n",
    b"POST /v2/repository/models/simple/load HTTP/1.1\r\nhost: x\r\ntransfer-encoding: gzip, chunked"
    b"\r\n\r\n0\r\n\r\n",
    # Expect: 100-continue, as curl sends large bodies.
    b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
    b"Content-Length: 11\r\n\r\n{\"inputs\":[",
    # Folded and odd headers, a long target, a body over the small body limit.
    b"GET /v2/models/%73imple/versions/1?x=1&y HTTP/1.1\r\nHost: x\r\nX-A:  spaced  \r\n"
    b"X-Empty:\r\nCookie: a=b\r\n\r\n",
    b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"x" * 100,
    b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
]


def http_stream(method: str, path: str, body: Optional[bytes], headers: Dict[str, str]) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n"
    for name, value in headers.items():
        head += f"{name}: {value}\r\n"
    if body is not None:
        head += f"Content-Length: {len(body)}\r\n"
    return head.encode("latin-1") + b"\r\n" + (body or b"")


# --------------------------------------------------------------------------------------------
# gRPC (ModelInferRequest in protobuf text format, serialized by protoc)

_CONTENTS_FIELD = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
    "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
    "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
    "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}

_FIXED_SIZE = {"BOOL": "?", "INT8": "b", "INT16": "h", "INT32": "i", "INT64": "q", "UINT8": "B",
               "UINT16": "H", "UINT32": "I", "UINT64": "Q", "FP16": "e", "FP32": "f",
               "FP64": "d"}


def _text_string(value) -> str:
    raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    out = ""
    for byte in raw:
        char = chr(byte)
        out += char if 0x20 <= byte < 0x7f and char not in "\"\\" else f"\\{byte:03o}"
    return f'"{out}"'


def _text_scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _text_string(value)
    return repr(value)


def _text_parameters(parameters: Dict) -> str:
    out = ""
    for key, value in parameters.items():
        if isinstance(value, bool):
            choice = f"bool_param: {'true' if value else 'false'}"
        elif isinstance(value, int):
            choice = f"int64_param: {value}"
        elif isinstance(value, float):
            choice = f"double_param: {value!r}"
        else:
            choice = f"string_param: {_text_string(str(value))}"
        out += f"parameters {{ key: {_text_string(key)} value {{ {choice} }} }}\n"
    return out


def _flatten(data) -> list:
    if isinstance(data, list):
        return [element for item in data for element in _flatten(item)]
    return [data]


def _raw_bytes(datatype: str, flat: list) -> bytes:
    if datatype == "BYTES":
        return b"".join(struct.pack("<I", len(raw)) + raw
                        for raw in (v.encode("utf-8") if isinstance(v, str) else bytes(v)
                                    for v in flat))
    return struct.pack(f"<{len(flat)}{_FIXED_SIZE[datatype]}", *flat)


def grpc_texts(path: str, body: bytes, headers: Dict[str, str]) -> List[str]:
    """The infer request as ModelInferRequest text: typed contents and raw contents."""
    match = re.fullmatch(r"/v2/models/([^/]+)(?:/versions/([^/]+))?/infer", path)
    if not match or "Content-Encoding" in headers:
        return []
    length = headers.get("Inference-Header-Content-Length")
    header_bytes = body[:int(length)] if length and length.isdigit() else body
    try:
        request = json.loads(header_bytes)
        common = f"model_name: {_text_string(match.group(1))}\n"
        if match.group(2):
            common += f"model_version: {_text_string(match.group(2))}\n"
        if "id" in request:
            common += f"id: {_text_string(str(request['id']))}\n"
        common += _text_parameters(request.get("parameters", {}))
        for output in request.get("outputs", []):
            common += (f"outputs {{ name: {_text_string(output['name'])} "
                       f"{_text_parameters(output.get('parameters', {}))}}}\n")
        typed, raw, raw_contents = common, common, []
        for tensor in request["inputs"]:
            head = (f"inputs {{ name: {_text_string(tensor['name'])} "
                    f"datatype: {_text_string(tensor['datatype'])} "
                    f"shape: [{', '.join(str(dim) for dim in tensor['shape'])}] ")
            flat = _flatten(tensor.get("data", []))
            field = _CONTENTS_FIELD.get(tensor["datatype"], "fp32_contents")
            values = ", ".join(_text_scalar(value) for value in flat)
            typed += head + (f"contents {{ {field}: [{values}] }} }}\n" if flat else "}\n")
            raw += head + "}\n"
            raw_contents.append(_raw_bytes(tensor["datatype"], flat))
        raw += "".join(f"raw_input_contents: {_text_string(data)}\n" for data in raw_contents)
        return [typed, raw]
    except (ValueError, KeyError, TypeError, AttributeError, struct.error):
        return []


_HAND_WRITTEN_GRPC = [
    'model_name: "simple" model_version: "1" id: "x"\n'
    'parameters { key: "priority" value { uint64_param: 1 } }\n'
    'parameters { key: "timeout" value { int64_param: 100 } }\n'
    'inputs { name: "INPUT0" datatype: "INT32" shape: [1, 2] contents { int_contents: [1, 2] } }\n'
    'inputs { name: "INPUT1" datatype: "INT8" shape: [2] contents { int_contents: [-1, 127] } }\n'
    'inputs { name: "B" datatype: "BOOL" shape: [2] contents { bool_contents: [true, false] } }\n'
    'inputs { name: "S" datatype: "BYTES" shape: [1] contents { bytes_contents: ["a"] } }\n'
    'outputs { name: "OUTPUT0" }\n',
    'model_name: "m" inputs { name: "H" datatype: "FP16" shape: [2] }\n'
    'raw_input_contents: "\\000\\074\\000\\100"\n',
    'model_name: "m" inputs { name: "E" datatype: "UINT16" shape: [0] }\n',
    'model_name: "m" inputs { name: "I" datatype: "INT32" shape: [1]\n'
    '  parameters { key: "shared_memory_region" value { string_param: "r" } } }\n',
    'model_name: "m" parameters { key: "sequence_id" value { int64_param: 7 } }\n',
]


def protoc_encode(protoc: str, source_dir: str, text: str) -> Optional[bytes]:
    result = subprocess.run(
        [protoc, f"--proto_path={os.path.join(source_dir, 'src')}",
         "--encode=inference.ModelInferRequest", "api/grpc_service.proto"],
        input=text.encode("utf-8"), capture_output=True, check=False)
    return result.stdout if result.returncode == 0 else None


# --------------------------------------------------------------------------------------------
# config.pbtxt

_HAND_WRITTEN_CONFIGS = [
    # Ragged batching with batch inputs and outputs, and a warm-up sample (tests/e2e's ragged
    # batching model).
    '''name: "ragged_sum"
backend: "pytorch"
max_batch_size: 16
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] },
         { name: "RUNNING" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "RUNNING" source_input: "INPUT" } ]
batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "INDEX" data_type: TYPE_FP32
  source_input: "INPUT" } ]
dynamic_batching { preferred_batch_size: [ 3 ] max_queue_delay_microseconds: 300000 }
model_warmup [ { name: "five" batch_size: 1
  inputs { key: "INPUT" value: { data_type: TYPE_FP32 dims: [ 5 ] zero_data: true } } } ]
''',
    # Reshapes, optional inputs, priority queues and version policies.
    '''name: "reshaped"
platform: "pytorch_libtorch"
max_batch_size: 4
version_policy: { specific: { versions: [ 1, 3 ] } }
input [ { name: "IN" data_type: TYPE_INT64 dims: [ 2, -1, 3 ] reshape: { shape: [ 6, -1 ] } },
        { name: "OPT" data_type: TYPE_BOOL dims: [ 1 ] optional: true } ]
output [ { name: "OUT" data_type: TYPE_STRING dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]
dynamic_batching {
  preferred_batch_size: [ 2, 4 ]
  max_queue_delay_microseconds: 100
  preserve_ordering: true
  priority_levels: 2
  default_priority_level: 1
  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 1000
    allow_timeout_override: true max_queue_size: 8 }
  priority_queue_policy { key: 2 value: { timeout_action: DELAY max_queue_size: 2 } }
}
instance_group [ { name: "cpus" count: 2 kind: KIND_CPU }, { count: 1 kind: KIND_CPU } ]
parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }
''',
    '''backend: "pytorch"
version_policy: { latest: { num_versions: 2 } }
input [ { name: "x" data_type: TYPE_FP16 dims: [ -1 ] } ]
output [ { name: "y" data_type: TYPE_BF16 dims: [ 1 ] label_filename: "labels.txt" } ]
optimization { priority: PRIORITY_MIN input_pinned_memory { enable: true } }
''',
    '''name: "all_versions" platform: "pytorch_libtorch" version_policy: { all: {} }
input { name: "a" data_type: TYPE_UINT8 dims: 1 } output { name: "b" data_type: TYPE_FP64 dims: 1 }
''',
]


# --------------------------------------------------------------------------------------------
# Dictionaries

_DATATYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
              "FP16", "FP32", "FP64", "BYTES", "BF16"]

_KSERVE_TOKENS = ['"inputs"', '"outputs"', '"name"', '"datatype"', '"shape"', '"data"',
                  '"parameters"', '"binary_data_size"', '"binary_data"', '"binary_data_output"',
                  '"priority"', '"timeout"', '"sequence_id"', '"sequence_start"',
                  '"sequence_end"', '"classification"', '"id"', "true", "false", "null",
                  "18446744073709551615", "-9223372036854775808", "1e308", "[[", "]]", "\\u0000"
                  ] + [f'"{datatype}"' for datatype in _DATATYPES]

_HTTP_TOKENS = ["GET ", "POST ", "HEAD ", "PUT ", "OPTIONS ", " HTTP/1.1\r\n", " HTTP/1.0\r\n",
                "\r\n", "\r\n\r\n", ": ", "Host: ", "Content-Length: ", "Content-Type: ",
                "Transfer-Encoding: chunked", "Transfer-Encoding: ", "Connection: close",
                "Connection: keep-alive", "Expect: 100-continue", "Content-Encoding: gzip",
                "Inference-Header-Content-Length: ", "0\r\n\r\n", ";ext=", "/v2/models/",
                "/infer", "/v2/health/ready", "?", "%", "18446744073709551616", "ffffffffffffffff"]

_GRPC_TOKENS = _DATATYPES + ["priority", "timeout", "sequence_id", "shared_memory_region",
                             "classification", "binary_data_output"]


def proto_tokens(proto_path: str) -> List[str]:
    """Field and enum value names of a .proto file, as text-format tokens."""
    with open(proto_path) as f:
        text = f.read()
    fields = re.findall(r"^\s*(?:repeated\s+)?(?:map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*\d+\s*;",
                        text, re.MULTILINE)
    values = re.findall(r"^\s*([A-Z][A-Z0-9_]+)\s*=\s*\d+\s*;", text, re.MULTILINE)
    tokens = sorted(set(field + ":" for field in fields) | set(field + " {" for field in fields)
                    | set(values))
    return tokens + ["[ ", " ]", "{ ", " }", '"', "key: ", "value: ", "-1", "#"]


def _write_dict(path: str, tokens: List[str]) -> None:
    with open(path, "w") as f:
        for token in tokens:
            escaped = "".join(chr(byte) if 0x20 <= byte < 0x7f and chr(byte) not in '"\\'
                              else f"\\x{byte:02X}" for byte in token.encode("utf-8"))
            f.write(f'"{escaped}"\n')


# --------------------------------------------------------------------------------------------


_HAND_WRITTEN_OPENAI = [
    (0, '{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,'
        '"stream_options":{"include_usage":false},"n":2,"tools":[]}'),
    (1, '{"model":"m","prompt":["a","b"],"max_tokens":5}'),
    (2, '{"model":"m","input":["x",[1,2]],"encoding_format":"base64","dimensions":8}'),
    (6, 'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
        'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\r\n\r\n: keep-alive\n\n'
        'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}\n\n'
        'data: [DONE]\n\n'),
    (9, '{"object":"error","message":"vllm says no"}'),
    (13, 'data: {"error":{"message":"overloaded"}}\n\n'),
]

_HAND_WRITTEN_PII = [
    "客户张三，身份证号11010519491231002X，手机+86 138-0013-8000，邮箱 zhang.san@example.com",
    "卡号 6222 0212 3456 7894，IBAN GB82 WEST 1234 5698 7654 32，SSN 078-05-1120",
    "统一社会信用代码 91350100M000100Y43 护照 E12345678 passport G12345678",
    "Authorization: Bearer abcDEF123456ghiJKL789 api_key=Zx8Qw2Lp9Rt6Yv3N",
    "see http://10.1.2.3:8080/admin and git.corp.example.com and /srv/secret/db.conf",
    "IPv6 fe80::1ff:fe23:4567:890a and 2001:db8::8a2e:370:7334, MAC 00:1A:2B:3C:4D:5E",
    "-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEA\n"
    "-----END PRIVATE KEY-----",
    "全角 １３８００１３８０００ 和 ＋８６－１３８－００１３－８０００",
    "order 110105194912310021 version 1.2.3.4.5 call +44 20 7946 0958",
]

_OPENAI_TOKENS = ['"model"', '"messages"', '"role"', '"content"', '"stream"', '"stream_options"',
                  '"include_usage"', '"n"', '"input"', '"encoding_format"', '"base64"',
                  '"dimensions"', '"prompt"', '"choices"', '"delta"', '"usage"', '"error"',
                  '"finish_reason"', '"tool_calls"', '"text"', '"type"', 'data: ', '[DONE]',
                  '\r\n', '\n\n']
_PII_TOKENS = ['身份证', '手机', '银行卡', '护照', 'passport', '+86', '0086', '@', 'Bearer ',
               'api_key=', 'password=', '-----BEGIN', 'PRIVATE KEY-----', 'http://10.', '::',
               'IBAN', 'GB82', '62', '4111', '1949', 'X', '－', '１', '＠']

_HAND_WRITTEN_HTML = [
    '<!DOCTYPE html><html><head><title>t</title><style>p{}</style><script>x="<p>"</script>'
    '</head><body><h1 class="a">Title &amp; more</h1><p>Para &#x4E2D;&#25991; &nbsp;<br>next'
    '</p><ul><li>one</li><li>two <b>b</b></li></ul><table><tr><th>k</th><td>v</td></tr>'
    '</table><pre>  code\n  x</pre><!-- c --><div a=\'x>y\'>tail</div></body></html>',
    '<h2>知识库</h2><p>用 Rampart 构建。</p><h3>安装</h3><li>第一步',
]
_HUB_TOKENS = ['# ', '## ', '```', '~~~', '- ', '1. ', '| ', '|---|', '> ', '===', '---', '**',
               '](', '<p>', '</p>', '<h1>', '<li>', '<tr>', '<td>', '<pre>', '<script>',
               '</script>', '<!--', '-->', '&amp;', '&#x', '%PDF-1.4', 'obj', 'endobj', 'stream',
               'endstream', 'xref', 'trailer', '/Type', '/Page', '/Contents', '(', ') Tj', 'BT',
               'ET', '\r\n', '\n\n', '。', '知识']


def _one_page_pdf(lines: List[str]) -> bytes:
    """A minimal PDF (as tests/unit/knowledge/hub/pdf_test.cc writes them): Helvetica lines."""
    content = "BT /F1 12 Tf 72 720 Td 14 TL\n" + "".join(f"({line}) Tj T*\n" for line in lines)
    content += "ET"
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font "
               "<< /F1 3 0 R >> >> /Contents 5 0 R >>",
               f"<< /Length {len(content)} >>\nstream\n{content}\nendstream"]
    pdf = "%PDF-1.4\n"
    offsets = []
    for index, body in enumerate(objects):
        offsets.append(len(pdf))
        pdf += f"{index + 1} 0 obj\n{body}\nendobj\n"
    xref = len(pdf)
    pdf += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n"
    pdf += "".join(f"{offset:010d} 00000 n \n" for offset in offsets)
    pdf += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    return pdf.encode()


def hub_text_seeds(source_dir: str) -> List[bytes]:
    """hub_text_fuzzer.cc: byte 0 picks the type (bits 0-1), the strategy (bit 2) and the chunk
    size (bits 3-7); the rest is the file. The repository's Markdown docs (their first 4 KiB),
    hand-written HTML, plain text and a one-page PDF."""
    seeds = []
    for index, path in enumerate(sorted(glob.glob(os.path.join(source_dir, "docs", "*.md")))):
        with open(path, "rb") as f:
            text = f.read(4096)
        seeds.append(bytes([1 | ((index % 2) << 2) | ((index * 5 % 32) << 3)]) + text)
        if index < 3:
            seeds.append(bytes([0 | (12 << 3)]) + text)
    for index, html in enumerate(_HAND_WRITTEN_HTML):
        seeds.append(bytes([2 | (index << 2) | (12 << 3)]) + html.encode())
    seeds.append(bytes([3 | (12 << 3)]) + _one_page_pdf(["Rampart serves models.", "Page text."]))
    seeds.append(bytes([0]) + "first\r\n\r\nsecond 中文。\x00".encode())
    return seeds


def _write(folder: str, seeds: List[bytes]) -> int:
    os.makedirs(folder, exist_ok=True)
    written = set()
    for seed in seeds:
        digest = hashlib.sha1(seed).hexdigest()
        if digest in written:
            continue
        written.add(digest)
        with open(os.path.join(folder, digest), "wb") as f:
            f.write(seed)
    return len(written)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--protoc", required=True)
    args = parser.parse_args(argv)

    requests = e2e_requests(args.source_dir)
    infer = [(path, body, headers) for _, path, body, headers in requests
             if path.endswith("/infer") and body is not None]

    seeds: Dict[str, List[bytes]] = {name: [] for name in (
        "kserve_json_fuzzer", "kserve_binary_fuzzer", "bytes_elements_fuzzer",
        "http_request_fuzzer", "model_config_fuzzer", "grpc_infer_fuzzer",
        "openai_request_fuzzer", "pii_detect_fuzzer", "hub_text_fuzzer")}

    for path, body, headers in infer:
        if "Content-Encoding" in headers:
            continue
        length = headers.get("Inference-Header-Content-Length")
        if length is None:
            seeds["kserve_json_fuzzer"].append(body)
        header_length = int(length) if length and length.isdigit() else len(body)
        seeds["kserve_binary_fuzzer"].append(struct.pack("<H", min(header_length, 0xffff)) + body)
        try:
            request = json.loads(body[:header_length])
            for tensor in request.get("inputs", []):
                if tensor.get("datatype") == "BYTES" and "data" in tensor:
                    seeds["bytes_elements_fuzzer"].append(_raw_bytes("BYTES",
                                                                     _flatten(tensor["data"])))
        except (ValueError, TypeError, AttributeError, struct.error):
            pass
        for text in grpc_texts(path, body, headers):
            encoded = protoc_encode(args.protoc, args.source_dir, text)
            if encoded is not None:
                seeds["grpc_infer_fuzzer"].append(encoded)
    seeds["bytes_elements_fuzzer"] += [b"", b"\0\0\0\0", b"\1\0\0\0a\2\0\0\0bc", b"\5\0\0\0ab",
                                       b"\1\0\0"]
    for text in _HAND_WRITTEN_GRPC:
        encoded = protoc_encode(args.protoc, args.source_dir, text)
        if encoded is None:
            sys.exit(f"protoc cannot encode a hand-written gRPC seed:\n{text}")
        seeds["grpc_infer_fuzzer"].append(encoded)

    # HTTP streams: two leading bytes choose how the stream is cut into reads (see
    # http_request_fuzzer.cc); most seeds come whole, some in small pieces.
    streams = [http_stream(*request) for request in requests] + _HAND_WRITTEN_HTTP
    for index, stream in enumerate(streams):
        if len(stream) <= 4096:
            seeds["http_request_fuzzer"].append(b"\0\0" + stream)
            if index % 4 == 0:
                seeds["http_request_fuzzer"].append(bytes([7, index & 0x7f]) + stream)

    for config in sorted(glob.glob(os.path.join(args.source_dir, "examples", "models", "*",
                                                "config.pbtxt"))):
        with open(config, "rb") as f:
            seeds["model_config_fuzzer"].append(f.read())
    seeds["model_config_fuzzer"] += [config.encode() for config in _HAND_WRITTEN_CONFIGS]

    # OpenAI requests and upstream answers (openai_request_fuzzer.cc: byte 0 picks the operation
    # and the stream's piece size).
    for first, text in _HAND_WRITTEN_OPENAI:
        seeds["openai_request_fuzzer"].append(bytes([first]) + text.encode())
    # PII texts (pii_detect_fuzzer.cc: byte 0 is the stream redactor's piece size).
    for index, text in enumerate(_HAND_WRITTEN_PII):
        seeds["pii_detect_fuzzer"].append(bytes([(index * 7) % 64]) + text.encode())
    seeds["hub_text_fuzzer"] = hub_text_seeds(args.source_dir)

    dictionaries = {
        "kserve_json_fuzzer": _KSERVE_TOKENS, "kserve_binary_fuzzer": _KSERVE_TOKENS,
        "http_request_fuzzer": _HTTP_TOKENS, "grpc_infer_fuzzer": _GRPC_TOKENS,
        "openai_request_fuzzer": _OPENAI_TOKENS, "pii_detect_fuzzer": _PII_TOKENS,
        "hub_text_fuzzer": _HUB_TOKENS,
        "model_config_fuzzer": proto_tokens(
            os.path.join(args.source_dir, "src", "model", "model_config.proto")),
    }
    os.makedirs(args.output_dir, exist_ok=True)
    for name, tokens in dictionaries.items():
        _write_dict(os.path.join(args.output_dir, f"{name}.dict"), tokens)

    for name, corpus in seeds.items():
        count = _write(os.path.join(args.output_dir, name), corpus)
        print(f"{name}: {count} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
