#!/usr/bin/env python3
"""Writes the tiny TorchScript fixtures the torch backend's C++ unit tests load.

    identity.pt  forward(x: Tensor) -> Tensor                 returns x.clone()
    add_sub.pt   forward(a: Tensor, b: Tensor) -> (a + b, a - b)
    raises.pt    forward(x: Tensor) -> Tensor                 raises when x.sum() < 0, else x
    scale.pt     forward(x: Tensor) -> Tensor                 returns x * 2.0
    halves.pt    forward(x: Tensor) -> List[Tensor]           returns [x, x / 2]

None has parameters, so the files are deterministic; a file whose bytes would not change is left
untouched. Run with Debian's interpreter, which has torch:
    /usr/bin/python3 tests/data/make_fixtures.py --output-dir build/tests/data
"""

import argparse
import io
import os
import sys
from typing import List, Tuple

try:
    import torch
    from torch import Tensor
except ImportError:
    sys.exit(f"{os.path.basename(__file__)}: needs torch; run it with Debian's /usr/bin/python3 "
             f"(python3-torch), not {sys.executable}")


class Identity(torch.nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.clone()


class AddSub(torch.nn.Module):
    def forward(self, a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]:
        return a + b, a - b


class Raises(torch.nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        if bool(x.sum() < 0):
            raise RuntimeError("raises.pt: input sum is negative")
        return x


class Scale(torch.nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x * 2.0


class Halves(torch.nn.Module):
    def forward(self, x: Tensor) -> List[Tensor]:
        return [x, x / 2]


FIXTURES = {
    "identity.pt": Identity,
    "add_sub.pt": AddSub,
    "raises.pt": Raises,
    "scale.pt": Scale,
    "halves.pt": Halves,
}


def _write_if_changed(path: str, data: bytes) -> bool:
    try:
        with open(path, "rb") as existing:
            if existing.read() == data:
                return False
    except FileNotFoundError:
        pass
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "wb") as out:
        out.write(data)
    os.replace(temporary, path)
    return True


def make_fixtures(output_dir: str) -> List[str]:
    torch.manual_seed(0)
    os.makedirs(output_dir, exist_ok=True)
    written = []
    for file_name, factory in FIXTURES.items():
        buffer = io.BytesIO()
        torch.jit.save(torch.jit.script(factory().eval()), buffer)
        path = os.path.join(output_dir, file_name)
        _write_if_changed(path, buffer.getvalue())
        written.append(path)
    return written


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output-dir", required=True, help="folder to write the .pt files to")
    args = parser.parse_args(argv)
    make_fixtures(args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
