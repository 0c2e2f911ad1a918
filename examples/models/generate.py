#!/usr/bin/env python3
"""Scripts the example TorchScript models and writes PyTorch reference samples.

For each model folder in this repository (the `config.pbtxt` files are hand-written and
committed) this writes `<repository>/<model>/1/model.pt` and `<expected-dir>/<model>.json`:

    {"model": name,
     "samples": [{"inputs":  {NAME: {"datatype": "FP32", "shape": [...], "data": [flat]}},
                  "outputs": {NAME: {"datatype": ..., "shape": [...], "data": [flat]}}}]}

The reference outputs are computed by PyTorch itself, by running the saved TorchScript file
after loading it back, so they are what a correct server must return.

Deterministic (torch.manual_seed(0)) and idempotent: a file whose bytes would not change is
left untouched, so its modification time stays stable for repository polling.

Run with Debian's interpreter, which has torch:  /usr/bin/python3 examples/models/generate.py
"""

import argparse
import io
import json
import os
import sys
from typing import Dict, List, Tuple

try:
    import torch
    from torch import Tensor
except ImportError:
    sys.exit(f"{os.path.basename(__file__)}: needs torch; run it with Debian's /usr/bin/python3 "
             f"(python3-torch), not {sys.executable}")

# Wire datatype names of the torch dtypes the examples use.
_WIRE_DATATYPE = {
    torch.bool: "BOOL",
    torch.uint8: "UINT8",
    torch.int8: "INT8",
    torch.int16: "INT16",
    torch.int32: "INT32",
    torch.int64: "INT64",
    torch.float16: "FP16",
    torch.float32: "FP32",
    torch.float64: "FP64",
}


class Simple(torch.nn.Module):
    """Triton's classic `simple` model: sum and difference of two INT32 vectors."""

    def forward(self, INPUT0: Tensor, INPUT1: Tensor) -> Tuple[Tensor, Tensor]:
        return INPUT0 + INPUT1, INPUT0 - INPUT1


class MlpClassifier(torch.nn.Module):
    """256 -> 1024 -> 1024 -> 10 ReLU MLP with a softmax head."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(256, 1024),
            torch.nn.ReLU(),
            torch.nn.Linear(1024, 1024),
            torch.nn.ReLU(),
            torch.nn.Linear(1024, 10),
        )

    def forward(self, INPUT__0: Tensor) -> Tensor:
        return torch.softmax(self.layers(INPUT__0), dim=1)


class ImageClassifier(torch.nn.Module):
    """A small CNN over 3x32x32 images returning class probabilities."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, kernel_size=3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, kernel_size=3, padding=1),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
        )
        self.head = torch.nn.Linear(16 * 8 * 8, 10)

    def forward(self, image: Tensor) -> Tensor:
        features = torch.flatten(self.features(image), 1)
        return torch.softmax(self.head(features), dim=1)


class TextStats(torch.nn.Module):
    """BYTES in and out: the length and the upper-cased form of each string."""

    def forward(self, TEXT: List[str]) -> Tuple[Tensor, List[str]]:
        lengths = [len(text) for text in TEXT]
        upper = [text.upper() for text in TEXT]
        return torch.tensor(lengths, dtype=torch.int64), upper


def _quantized_normal(shape: List[int]) -> Tensor:
    """Normal noise rounded to multiples of 1/64: exact in FP32 and short in JSON."""
    return torch.round(torch.randn(shape) * 64.0) / 64.0


def _tensor_entry(value: Tensor) -> Dict:
    return {
        "datatype": _WIRE_DATATYPE[value.dtype],
        "shape": list(value.shape),
        "data": value.reshape(-1).tolist(),
    }


def _strings_entry(values: List[str]) -> Dict:
    return {"datatype": "BYTES", "shape": [len(values)], "data": list(values)}


def _entry(value) -> Dict:
    if isinstance(value, Tensor):
        return _tensor_entry(value)
    return _strings_entry(value)


def _sample(module, input_names: List[str], inputs: List, output_names: List[str]) -> Dict:
    with torch.no_grad():
        result = module(*inputs)
    if not isinstance(result, tuple):
        result = (result,)
    if len(result) != len(output_names):
        raise RuntimeError(f"model returned {len(result)} outputs, config has {len(output_names)}")
    return {
        "inputs": {name: _entry(value) for name, value in zip(input_names, inputs)},
        "outputs": {name: _entry(value) for name, value in zip(output_names, result)},
    }


def _simple_samples(module) -> List[Dict]:
    samples = []
    for batch in (1, 3):
        a = torch.randint(-100, 100, (batch, 16), dtype=torch.int32)
        b = torch.randint(-100, 100, (batch, 16), dtype=torch.int32)
        samples.append(_sample(module, ["INPUT0", "INPUT1"], [a, b], ["OUTPUT0", "OUTPUT1"]))
    return samples


def _mlp_samples(module) -> List[Dict]:
    return [
        _sample(module, ["INPUT__0"], [_quantized_normal([batch, 256])], ["OUTPUT__0"])
        for batch in (1, 4)
    ]


def _image_samples(module) -> List[Dict]:
    return [
        _sample(module, ["image"], [_quantized_normal([batch, 3, 32, 32])], ["probabilities__0"])
        for batch in (1, 2)
    ]


def _text_samples(module) -> List[Dict]:
    texts = [
        ["hello world"],
        ["Rampart serves TorchScript", "", "MiXeD case 123 !?"],
    ]
    return [_sample(module, ["TEXT"], [batch], ["LENGTH", "UPPER"]) for batch in texts]


# name -> (module factory, sample builder). Each model starts from torch.manual_seed(0), so its
# weights and samples do not depend on the other models.
_MODELS = [
    ("simple", Simple, _simple_samples),
    ("mlp_classifier", MlpClassifier, _mlp_samples),
    ("image_classifier", ImageClassifier, _image_samples),
    ("text_stats", TextStats, _text_samples),
]


def _write_if_changed(path: str, data: bytes) -> bool:
    """Writes `data` to `path` atomically unless the file already holds exactly those bytes."""
    try:
        with open(path, "rb") as existing:
            if existing.read() == data:
                return False
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "wb") as out:
        out.write(data)
    os.replace(temporary, path)
    return True


def _serialize(scripted) -> bytes:
    buffer = io.BytesIO()
    torch.jit.save(scripted, buffer)
    return buffer.getvalue()


def generate(repository: str, expected_dir: str, verbose: bool = True) -> None:
    torch.set_num_threads(1)  # bit-stable reference outputs whatever the machine
    for name, factory, build_samples in _MODELS:
        torch.manual_seed(0)
        if not os.path.isfile(os.path.join(repository, name, "config.pbtxt")):
            raise SystemExit(f"generate.py: {repository}/{name}/config.pbtxt is missing")
        module = factory().eval()
        scripted = torch.jit.script(module)
        model_bytes = _serialize(scripted)
        model_path = os.path.join(repository, name, "1", "model.pt")
        model_changed = _write_if_changed(model_path, model_bytes)

        # Reference outputs come from the saved file itself, loaded back as a server would.
        loaded = torch.jit.load(io.BytesIO(model_bytes)).eval()
        expected = {"model": name, "samples": build_samples(loaded)}
        expected_bytes = (json.dumps(expected, indent=1) + "\n").encode()
        expected_path = os.path.join(expected_dir, f"{name}.json")
        expected_changed = _write_if_changed(expected_path, expected_bytes)
        if verbose:
            state = "updated" if (model_changed or expected_changed) else "unchanged"
            print(f"generate.py: {name}: {state}")


def _reexec_with_fixed_hash_seed() -> None:
    """TorchScript writes a module's `__constants__` in Python set order, which follows the
    string hash seed; pin the seed so that the same model always serializes to the same bytes."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        environment = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                  environment)


def main(argv: List[str]) -> int:
    _reexec_with_fixed_hash_seed()
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repository", default=here,
                        help="model repository to fill (default: the folder of this script)")
    parser.add_argument("--expected-dir", required=True,
                        help="where to write <model>.json reference samples")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    generate(os.path.abspath(args.repository), os.path.abspath(args.expected_dir),
             verbose=not args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
