"""One model's load in this process, as pld's CLI does it: the seconds of `load_model` (imports
apart), of `check_rows` within it, the peak RSS, and a hash of 32 greedy tokens (two loaders that
build the same weights give the same hash). For before/after tables: run it once per checkout.

    PYTHONPATH=CHECKOUT .venv/bin/python scripts/load_time.py [FILE.gguf]   # default model: none

Prints one JSON line.
"""

from __future__ import annotations

import hashlib
import json
import resource
import sys
import time

import torch

from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.native.quantized import quantize
from pld_cli.runtime.native.runtime import NativeRuntime


def timed(function, spent: list[float]):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    return wrapper


def main() -> None:
    checks: list[float] = []
    quantize.check_rows = timed(quantize.check_rows, checks)
    start = time.perf_counter()
    loaded = load_model(ModelSpec(sys.argv[1] if len(sys.argv) > 1 else None, device="cpu"))
    load_s = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tokens = []
    prompt = list(range(1000, 1040))
    for event in generate(
        NativeRuntime(loaded.model, 256), prompt, set(), DecodeConfig(max_new_tokens=32)
    ):
        tokens += event.emitted if isinstance(event, Pass) else []
    digest = hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:12]
    print(
        json.dumps(
            dict(
                load_s=round(load_s, 2),
                check_rows_s=round(sum(checks), 2),
                peak_rss_gb=round(rss / 1e9, 2),
                threads=torch.get_num_threads(),
                weights=loaded.weights,
                tokens=digest,
            )
        )
    )


if __name__ == "__main__":
    main()
