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


class TextEmbedding(torch.nn.Module):
    """A tiny self-contained text embedding: hashed character features summed from a random
    table, then L2-normalised. One 64-float unit vector per string; no tokenizer files.

    TorchScript strings are UTF-8 bytes (len() counts bytes, list() yields one-byte strings and
    ord() gives the byte), so forward() reads the batch's bytes once and does the rest with
    tensor operations: it decodes UTF-8 into code points (a malformed sequence becomes some code
    point, never an error), folds fullwidth ASCII (U+FF01-FF5E) to ASCII and lower-cases A-Z,
    and then takes these features:
      - words (runs of letters and digits of any script but CJK): each character's trigram
        with its neighbours, a word boundary marked as 0 ("<ca", "cat", "at>" for "cat");
      - CJK characters (Han, kana, Hangul): each character, and each adjacent pair.
    Each feature hashes (FNV-1a over the code points, kept in 32 bits, and a final mix) to one
    of 4096 rows of the table; a string's rows are summed and normalised. A string without
    features (empty, or only spaces and punctuation) gets the table's extra row, normalised:
    every output row has unit length.
    """

    def __init__(self, buckets: int = 4096, dimensions: int = 64) -> None:
        super().__init__()
        self.buckets = buckets
        self.dimensions = dimensions
        # Row `buckets` is the featureless strings' vector.
        self.register_buffer("table", torch.randn(buckets + 1, dimensions))

    def _hash(self, kind: int, a: Tensor, b: Tensor, c: Tensor) -> Tensor:
        """The bucket of each feature (kind, a, b, c); code points are below 2**22 and the state
        below 2**32, so no product leaves int64."""
        state = ((a ^ (2166136261 ^ kind)) * 16777619) & 0xFFFFFFFF
        state = ((state ^ b) * 16777619) & 0xFFFFFFFF
        state = ((state ^ c) * 16777619) & 0xFFFFFFFF
        state = state ^ (state >> 15)
        state = (state * 16777619) & 0xFFFFFFFF
        state = state ^ (state >> 13)
        return state % self.buckets

    def forward(self, TEXT: List[str]) -> Tensor:
        if len(TEXT) == 0:
            return torch.zeros(0, self.dimensions)
        # The batch's bytes, each string followed by a 0 (a separator), and each byte's string.
        # list() splits a string in one pass; indexing it (`for byte in text`) copies the whole
        # string per byte in TorchScript, quadratic in its length.
        codes: List[int] = [0]
        owners: List[int] = [0]
        for index, text in enumerate(TEXT):
            codes.extend([ord(byte) for byte in list(text)])
            codes.append(0)
            owners.extend([index] * (len(text) + 1))
        byte = torch.tensor(codes, dtype=torch.int64)
        owner = torch.tensor(owners, dtype=torch.int64)

        # UTF-8 to code points. A character starts at every byte that is not a continuation
        # (10xxxxxx), and after every ASCII byte, so none spans a separator.
        previous = torch.cat([torch.zeros(1, dtype=torch.int64), byte[:-1]])
        start = ((byte & 0xC0) != 0x80) | (previous < 0x80)
        character = torch.cumsum(start.to(torch.int64), 0) - 1
        first = torch.nonzero(start).squeeze(1)
        length = torch.bincount(character, minlength=first.numel())
        # Payload bits of each byte, shifted by 6 per byte after it in its character.
        after = first[character] + length[character] - 1 - torch.arange(byte.numel())
        lead_mask = (0x7F - 0x60 * (byte >= 0xC0).long() - 0x10 * (byte >= 0xE0).long()
                     - 0x08 * (byte >= 0xF0).long())
        bits = torch.where(start, byte & lead_mask, byte & 0x3F)
        point = torch.zeros(first.numel(), dtype=torch.int64).index_add_(
            0, character, bits << (6 * torch.clamp(after, max=3)))
        point_owner = owner[first]

        fullwidth = (point >= 0xFF01) & (point <= 0xFF5E)
        point = torch.where(fullwidth, point - 0xFEE0, point)
        point = torch.where((point >= 65) & (point <= 90), point + 32, point)

        cjk = (((point >= 0x3040) & (point <= 0x30FF)) | ((point >= 0x3400) & (point <= 0x4DBF))
               | ((point >= 0x4E00) & (point <= 0x9FFF)) | ((point >= 0xAC00) & (point <= 0xD7AF))
               | ((point >= 0xF900) & (point <= 0xFAFF))
               | ((point >= 0x20000) & (point <= 0x3FFFF)))
        ascii_alphanumeric = (((point >= 48) & (point <= 57))
                              | ((point >= 97) & (point <= 122)))
        # ASCII other than letters and digits, Latin-1 symbols, general and CJK punctuation,
        # CJK compatibility forms and fullwidth and halfwidth forms left after the folding.
        separator = (((point < 0x80) & ~ascii_alphanumeric)
                     | ((point >= 0x80) & (point <= 0xBF))
                     | ((point >= 0x2000) & (point <= 0x206F))
                     | ((point >= 0x3000) & (point <= 0x303F))
                     | ((point >= 0xFE30) & (point <= 0xFE4F))
                     | ((point >= 0xFF00) & (point <= 0xFFEF)))
        word = ~(cjk | separator)

        # The first and last code points are separators, so every neighbour exists.
        marked = torch.where(word, point, torch.zeros_like(point))
        centre = torch.nonzero(word).squeeze(1)
        trigrams = self._hash(1, marked[centre - 1], marked[centre], marked[centre + 1])
        single = torch.nonzero(cjk).squeeze(1)
        unigrams = self._hash(2, point[single], torch.zeros_like(single),
                              torch.zeros_like(single))
        pair = torch.nonzero(cjk[:-1] & cjk[1:]).squeeze(1)
        bigrams = self._hash(3, point[pair], point[pair + 1], torch.zeros_like(pair))

        bucket = torch.cat([trigrams, unigrams, bigrams])
        feature_owner = point_owner[torch.cat([centre, single, pair])]
        total = torch.zeros(len(TEXT), self.dimensions).index_add_(
            0, feature_owner, self.table[bucket])
        featureless = torch.bincount(feature_owner, minlength=len(TEXT)) == 0
        total = torch.where(featureless.unsqueeze(1), self.table[self.buckets].unsqueeze(0), total)
        return torch.nn.functional.normalize(total, dim=1)


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


def _embedding_samples(module) -> List[Dict]:
    # Requests are [N, 1] (dims [1] with reshape []), the model sees a List[str] of N.
    texts = [
        ["Rampart serves TorchScript models"],
        ["The cat sat on the mat", "A cat sat on a mat", "Stock markets fell sharply today",
         "我喜欢机器学习", "我喜欢深度学习", "今天股市大跌", "", "ＦＵＬＬＷＩＤＴＨ, 全角！"],
    ]
    samples = []
    for batch in texts:
        sample = _sample(module, ["TEXT"], [batch], ["EMBEDDING"])
        sample["inputs"]["TEXT"]["shape"] = [len(batch), 1]
        samples.append(sample)
    return samples


# name -> (module factory, sample builder). Each model starts from torch.manual_seed(0), so its
# weights and samples do not depend on the other models.
_MODELS = [
    ("simple", Simple, _simple_samples),
    ("mlp_classifier", MlpClassifier, _mlp_samples),
    ("image_classifier", ImageClassifier, _image_samples),
    ("text_stats", TextStats, _text_samples),
    ("text_embedding", TextEmbedding, _embedding_samples),
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
