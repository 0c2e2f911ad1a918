#!/usr/bin/env python3
"""Runs the golden request/response cases in tests/e2e/cases/*.json against the real binary.

    run_cases.py --binary build/rampart --repository examples/models \
                 --expected-dir build/testdata/expected --cases tests/e2e/cases [--filter SUBSTRING]

The case format is documented in tests/e2e/README.md. Prints one line per case and ends with
"N passed, M failed"; the exit status is non-zero when anything failed.
"""

import argparse
import copy
import glob
import gzip
import json
import os
import re
import sys
import time
import zlib
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kserve_tensors as tensors  # noqa: E402
import rampart_e2e as e2e  # noqa: E402

DEFAULT_RTOL = 1e-4
DEFAULT_ATOL = 1e-6
JSON_FLOAT_RTOL = 1e-6


class CaseError(Exception):
    pass


# --------------------------------------------------------------------------------------------
# JSON matching: exact or subset, with $-matchers and float tolerance


def _type_name(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _is_matcher(value) -> bool:
    return isinstance(value, dict) and len(value) >= 1 and next(iter(value)).startswith("$")


def _match_operator(expected: Dict, actual, path: str, subset: bool) -> Optional[str]:
    operator = next(iter(expected))
    argument = expected[operator]
    if operator == "$any":
        return None
    if operator == "$type":
        kind = _type_name(actual)
        if argument == "number" and kind in ("integer", "number"):
            return None
        return None if kind == argument else f"{path}: {kind} {actual!r}, expected a {argument}"
    if operator == "$regex":
        if isinstance(actual, str) and re.search(argument, actual):
            return None
        return f"{path}: {actual!r} does not match /{argument}/"
    if operator == "$approx":
        rtol = expected.get("rtol", JSON_FLOAT_RTOL)
        atol = expected.get("atol", 0.0)
        if _type_name(actual) in ("integer", "number") and \
                abs(actual - argument) <= atol + rtol * abs(argument):
            return None
        return f"{path}: {actual!r}, expected about {argument!r}"
    if operator in ("$gte", "$gt", "$lte", "$lt"):
        if _type_name(actual) not in ("integer", "number"):
            return f"{path}: {actual!r} is not a number"
        ok = {"$gte": actual >= argument, "$gt": actual > argument,
              "$lte": actual <= argument, "$lt": actual < argument}[operator]
        return None if ok else f"{path}: {actual!r} is not {operator[1:]} {argument!r}"
    if operator == "$len":
        if isinstance(actual, (list, str, dict)) and len(actual) == argument:
            return None
        return f"{path}: length of {actual!r} is not {argument}"
    if operator == "$contains":
        if not isinstance(actual, list):
            return f"{path}: {actual!r} is not an array"
        for wanted in argument:
            if all(match(wanted, item, f"{path}[?]", subset=True) for item in actual):
                return f"{path}: no element matches {wanted!r} in {actual!r}"
        return None
    if operator == "$absent":
        return f"{path}: present ({actual!r}) but expected absent"
    raise CaseError(f"unknown matcher {operator} at {path}")


def match(expected, actual, path: str = "$", subset: bool = False) -> Optional[str]:
    """None when `actual` matches `expected`, else the first mismatch. In subset mode objects
    may hold extra keys; arrays always match element by element with equal lengths."""
    if _is_matcher(expected):
        return _match_operator(expected, actual, path, subset)
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: {_type_name(actual)} {actual!r}, expected an object"
        for key, wanted in expected.items():
            if _is_matcher(wanted) and next(iter(wanted)) == "$absent":
                if key in actual:
                    return f"{path}.{key}: present ({actual[key]!r}) but expected absent"
                continue
            if key not in actual:
                return f"{path}: key {key!r} missing (keys: {sorted(actual)})"
            error = match(wanted, actual[key], f"{path}.{key}", subset)
            if error:
                return error
        if not subset:
            extra = sorted(set(actual) - set(expected))
            if extra:
                return f"{path}: unexpected keys {extra}"
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: {_type_name(actual)} {actual!r}, expected an array"
        if len(expected) != len(actual):
            return f"{path}: {len(actual)} elements {actual!r}, expected {len(expected)}"
        for index, (wanted, got) in enumerate(zip(expected, actual)):
            error = match(wanted, got, f"{path}[{index}]", subset)
            if error:
                return error
        return None
    if isinstance(expected, float) and _type_name(actual) in ("integer", "number"):
        if abs(actual - expected) <= JSON_FLOAT_RTOL * abs(expected):
            return None
        return f"{path}: {actual!r}, expected {expected!r}"
    if _type_name(expected) != _type_name(actual) or expected != actual:
        return f"{path}: {actual!r}, expected {expected!r}"
    return None


# --------------------------------------------------------------------------------------------
# Building requests


class Context:
    def __init__(self, expected_dir: str) -> None:
        self.expected_dir = expected_dir
        self._references: Dict[str, Dict] = {}

    def reference_sample(self, spec: Dict) -> Dict:
        model = spec["model"]
        if model not in self._references:
            try:
                self._references[model] = tensors.load_reference(self.expected_dir, model)
            except OSError as error:
                raise CaseError(f"no reference for {model} in {self.expected_dir}: {error}")
        samples = self._references[model]["samples"]
        index = spec.get("sample", 0)
        if not 0 <= index < len(samples):
            raise CaseError(f"{model} has {len(samples)} reference samples, not {index + 1}")
        return copy.deepcopy(samples[index])


def _selected(selector, name: str) -> bool:
    if selector is True:
        return True
    if isinstance(selector, list):
        return name in selector
    return False


def build_infer(spec: Dict, context: Context) -> Tuple[bytes, Dict[str, str]]:
    """Returns (body, headers) for an "infer" request description."""
    inputs: List[Dict] = []
    if "reference" in spec:
        sample = context.reference_sample(spec["reference"])
        for name, tensor in sample["inputs"].items():
            inputs.append({"name": name, "datatype": tensor["datatype"],
                           "shape": tensor["shape"], "data": tensor["data"]})
    omitted = set(spec.get("omit_inputs", []))
    inputs = [tensor for tensor in inputs if tensor["name"] not in omitted]
    for name, patch in spec.get("override_inputs", {}).items():
        target = next((tensor for tensor in inputs if tensor["name"] == name), None)
        if target is None:
            raise CaseError(f"override_inputs: no input {name}")
        patch = dict(patch)
        drop = patch.pop("truncate_data", 0)
        target.update(patch)
        if drop:
            target["data"] = tensors.flatten(target["data"])[:-drop]
    for explicit in spec.get("inputs", []):
        inputs = [tensor for tensor in inputs if tensor["name"] != explicit["name"] or
                  explicit.get("duplicate")]
        inputs.append({key: value for key, value in explicit.items() if key != "duplicate"})

    layout = spec.get("layout", "flat")
    if layout not in ("flat", "nested"):
        raise CaseError(f"layout must be flat or nested, not {layout}")
    binary_inputs = spec.get("binary_inputs", False)
    for tensor in inputs:
        if _selected(binary_inputs, tensor["name"]):
            tensor["binary"] = True
        if layout == "nested" and "data" in tensor and not tensor.get("binary"):
            flat = tensors.flatten(tensor["data"])
            if len(flat) == tensors.element_count(tensor["shape"]):
                tensor["data"] = tensors.nest(flat, tensor["shape"])

    outputs = None
    if "outputs" in spec:
        outputs = [{"name": output} if isinstance(output, str) else output
                   for output in spec["outputs"]]
    request = tensors.InferRequest(inputs, outputs, request_id=spec.get("id"),
                               parameters=spec.get("parameters"),
                               extra_fields=spec.get("extra_fields"))
    body, header_length = request.encode()
    headers = {"Content-Type": "application/json"}
    if header_length is not None:
        headers["Content-Type"] = "application/octet-stream"
        headers["Inference-Header-Content-Length"] = str(header_length)

    override = spec.get("header_length")
    if override is not None:
        actual = header_length if header_length is not None else len(body)
        if override == "none":
            headers.pop("Inference-Header-Content-Length", None)
        elif isinstance(override, int):
            headers["Inference-Header-Content-Length"] = str(override)
        elif isinstance(override, str) and re.fullmatch(r"[+-]\d+", override):
            headers["Inference-Header-Content-Length"] = str(actual + int(override))
        elif isinstance(override, str) and override.startswith("="):
            headers["Inference-Header-Content-Length"] = override[1:]
        else:
            raise CaseError(f"bad header_length {override!r}")
    if spec.get("truncate_payload"):
        body = body[:-int(spec["truncate_payload"])]
    if spec.get("append_payload"):
        body = body + b"\0" * int(spec["append_payload"])
    return body, headers


def build_request(request: Dict, context: Context) -> Tuple[str, str, Optional[bytes], Dict]:
    bodies = [key for key in ("json", "text", "repeat", "infer") if key in request]
    if len(bodies) > 1:
        raise CaseError(f"request has several bodies: {bodies}")
    headers: Dict[str, str] = {}
    body: Optional[bytes] = None
    if "json" in request:
        body = json.dumps(request["json"]).encode()
        headers["Content-Type"] = "application/json"
    elif "text" in request:
        body = request["text"].encode("utf-8")
    elif "repeat" in request:
        body = request["repeat"]["text"].encode("utf-8") * int(request["repeat"]["count"])
    elif "infer" in request:
        body, headers = build_infer(request["infer"], context)
    compression = request.get("compress")
    if compression is not None:
        # As tritonclient's request_compression_algorithm sends a body.
        if compression == "gzip":
            body = gzip.compress(body)
        elif compression == "deflate":
            body = zlib.compress(body)
        else:
            raise CaseError(f"compress must be gzip or deflate, not {compression}")
        headers["Content-Encoding"] = compression
    headers.update(request.get("headers", {}))
    method = request.get("method", "POST" if body is not None else "GET")
    return method, request["path"], body, headers


# --------------------------------------------------------------------------------------------
# Checking responses


def _model_from_path(path: str) -> Tuple[Optional[str], Optional[str]]:
    match_ = re.match(r"^/v2/models/([^/]+)(?:/versions/([^/]+))?/infer$", path)
    return (match_.group(1), match_.group(2)) if match_ else (None, None)


def check_infer(expect: Dict, request: Dict, response: e2e.Response, context: Context) -> None:
    request_spec = request.get("infer", {})
    header, outputs = tensors.decode_infer_response(response)

    model, version = _model_from_path(request["path"])
    wanted_model = expect.get("model_name", model)
    if wanted_model is not None and header.get("model_name") != wanted_model:
        raise CaseError(f"model_name {header.get('model_name')!r}, expected {wanted_model!r}")
    wanted_version = expect.get("model_version", version or "1")
    if header.get("model_version") != wanted_version:
        raise CaseError(f"model_version {header.get('model_version')!r}, "
                        f"expected {wanted_version!r}")
    wanted_id = expect.get("id", request_spec.get("id"))
    if wanted_id is not None and header.get("id") != wanted_id:
        raise CaseError(f"id {header.get('id')!r}, expected {wanted_id!r} to be echoed")

    expected_values: Dict[str, Dict] = {}
    reference = expect.get("reference", request_spec.get("reference"))
    if reference is not None:
        expected_values.update(context.reference_sample(reference)["outputs"])
    expected_values.update(expect.get("values", {}))
    names = expect.get("outputs", list(expected_values))
    if sorted(outputs) != sorted(names):
        raise CaseError(f"outputs {sorted(outputs)}, expected exactly {sorted(names)}")

    binary = expect.get("binary", False)
    rtol = expect.get("rtol", DEFAULT_RTOL)
    atol = expect.get("atol", DEFAULT_ATOL)
    for name in names:
        got = outputs[name]
        if got["binary"] != _selected(binary, name):
            raise CaseError(f"output {name} came {'binary' if got['binary'] else 'as JSON'}, "
                            f"expected {'binary' if _selected(binary, name) else 'JSON'}")
        want = expected_values.get(name)
        if want is None:
            continue
        if got["datatype"] != want["datatype"]:
            raise CaseError(f"output {name} datatype {got['datatype']!r}, "
                            f"expected {want['datatype']!r}")
        if got["shape"] != want["shape"]:
            raise CaseError(f"output {name} shape {got['shape']!r}, expected {want['shape']!r}")
        difference = tensors.values_close(tensors.flatten(want["data"]), got["data"], want["datatype"],
                                      rtol, atol)
        if difference:
            raise CaseError(f"output {name}: {difference}")


def check_response(case: Dict, response: e2e.Response, context: Context) -> None:
    expect = case["expect"]
    if response.status != expect["status"]:
        raise CaseError(f"status {response.status}, expected {expect['status']}; "
                        f"body {response.body[:400]!r}")
    for name, wanted in expect.get("headers", {}).items():
        error = match(wanted, response.header(name), f"header {name}")
        if error:
            raise CaseError(error)
    if "body" in expect and response.text() != expect["body"]:
        raise CaseError(f"body {response.body[:400]!r}, expected {expect['body']!r}")
    parsed = None
    if any(key in expect for key in ("json", "json_subset", "error")):
        try:
            parsed = response.json()
        except ValueError as error:
            raise CaseError(f"body is not JSON ({error}): {response.body[:400]!r}")
    if "json" in expect:
        error = match(expect["json"], parsed)
        if error:
            raise CaseError(f"{error}; body {response.body[:400]!r}")
    if "json_subset" in expect:
        error = match(expect["json_subset"], parsed, subset=True)
        if error:
            raise CaseError(f"{error}; body {response.body[:400]!r}")
    if "error" in expect:
        if not (isinstance(parsed, dict) and list(parsed) == ["error"] and
                isinstance(parsed["error"], str) and parsed["error"]):
            raise CaseError(f'error body is not {{"error": "<message>"}}: {parsed!r}')
        wanted = expect["error"]
        if isinstance(wanted, str) and wanted.lower() not in parsed["error"].lower():
            raise CaseError(f"error {parsed['error']!r} does not mention {wanted!r}")
    if "infer" in expect:
        check_infer(expect["infer"], case["request"], response, context)


def check_still_serving(server: e2e.Server, context: Context) -> None:
    """After a rejected request: a fresh connection still gets health and a correct infer."""
    client = server.client(timeout=10)
    try:
        status = client.get("/v2/health/live").status
        if status != 200:
            raise CaseError(f"afterwards /v2/health/live answered {status}")
        probe = {"path": "/v2/models/simple/infer",
                 "infer": {"reference": {"model": "simple", "sample": 0}}}
        method, path, body, headers = build_request(probe, context)
        response = client.request(method, path, body, headers)
        if response.status != 200:
            raise CaseError(f"afterwards an infer on simple answered {response.status} "
                            f"{response.body[:200]!r}")
        check_infer({}, probe, response, context)
    except OSError as error:
        raise CaseError(f"server no longer serving afterwards: {error!r}")
    finally:
        client.close()


# --------------------------------------------------------------------------------------------
# Driver


class Servers:
    """Servers keyed by their extra arguments, started on first use and shared by cases."""

    def __init__(self, binary: str, repository: str) -> None:
        self.binary = binary
        self.repository = repository
        self.running: Dict[Tuple[str, ...], Tuple[e2e.Server, e2e.Client]] = {}
        self.failed: Dict[Tuple[str, ...], str] = {}

    def get(self, args: List[str]) -> Tuple[e2e.Server, e2e.Client]:
        key = tuple(args)
        if key in self.failed:
            raise CaseError(f"server{list(key)} failed to start (see above)")
        if key not in self.running:
            server = e2e.Server(self.binary, self.repository, extra_args=args)
            try:
                server.start()
            except e2e.E2eError as error:
                server.cleanup()
                self.failed[key] = str(error)
                raise CaseError(f"server{list(key)} failed to start: {error}")
            except BaseException:
                server.cleanup()
                raise
            self.running[key] = (server, server.client())
        return self.running[key]

    def stop_all(self, tally: e2e.Tally) -> None:
        for key, (server, client) in self.running.items():
            started = time.monotonic()
            client.close()
            name = f"shutdown::server{list(key)}"
            try:
                server.stop()
                summary = server.served_summary()
                if summary is None:
                    raise e2e.E2eError("no 'rampart: http served=<N> handle_ns_total=<T>' line "
                                       f"on stdout\n{server.describe()}")
                tally.record(f"{name} exit 0, served={summary[0]}", None,
                             time.monotonic() - started)
            except e2e.E2eError as error:
                tally.record(name, str(error))
            finally:
                server.cleanup()


def load_cases(cases_dir: str) -> List[Tuple[str, Dict, Dict]]:
    loaded = []
    for path in sorted(glob.glob(os.path.join(cases_dir, "*.json"))):
        with open(path) as case_file:
            try:
                document = json.load(case_file)
            except ValueError as error:
                raise SystemExit(f"{path}: not valid JSON: {error}")
        names = set()
        for case in document["cases"]:
            if case["name"] in names:
                raise SystemExit(f"{path}: duplicate case name {case['name']!r}")
            names.add(case["name"])
            loaded.append((os.path.basename(path)[:-len(".json")], document, case))
    return loaded


def run_case(case: Dict, document: Dict, servers: Servers, context: Context) -> None:
    args = case.get("server_args", document.get("server_args", []))
    server, client = servers.get(args)
    method, path, body, headers = build_request(case["request"], context)
    try:
        response = client.request(method, path, body, headers)
    except OSError as error:
        raise CaseError(f"{method} {path}: no response ({error!r})")
    check_response(case, response, context)
    check_alive = case.get("check_alive", case["expect"]["status"] >= 400)
    if check_alive:
        check_still_serving(server, context)


def main(argv: List[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--expected-dir", required=True)
    parser.add_argument("--cases", default=os.path.join(here, "cases"))
    parser.add_argument("--filter", default="", help="run only cases whose id contains this")
    args = parser.parse_args(argv)

    context = Context(os.path.abspath(args.expected_dir))
    servers = Servers(args.binary, args.repository)
    tally = e2e.Tally()
    try:
        for file_name, document, case in load_cases(args.cases):
            case_id = f"{file_name}::{case['name']}"
            if args.filter and args.filter not in case_id:
                continue
            started = time.monotonic()
            try:
                run_case(case, document, servers, context)
                tally.record(case_id, None, time.monotonic() - started)
            except (CaseError, e2e.E2eError) as error:
                tally.record(case_id, str(error))
    finally:
        servers.stop_all(tally)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
