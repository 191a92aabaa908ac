"""The default model's greedy decoding with drafting gives the same bits on every variant of pld's
C library this CPU runs: its tokens, the final-normed rows and the logits of every pass, the cache
and the rotary tables. Each variant decodes in a process of its own (PLD_KERNELS), whose torch
takes the matching vector width (ATEN_CPU_CAPABILITY), as on a CPU that had only those
instructions, so a step of torch's that follows the vector width would show. The rows are kept as
the LM head takes them: its product rounds its input to 16 bits per group, which would hide a
last-bit difference in the norm from the logits.

Run as a script, this file is that process: `python test_default_model_variants.py OUT`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from pld_cli.runtime.clib import library
from pld_cli.runtime.clib.library import Variant

RUNNABLE = library.runnable()
TORCH_WIDTH = {
    Variant.AVX512_VNNI: "avx512",
    Variant.AVX_VNNI: "avx2",
    Variant.AVX2: "avx2",
    Variant.PORTABLE: "default",
}
NEW_TOKENS = 24
SOURCE = "def area(width, height):\n    return width * height\n\n\ndef perimeter(w, h):\n"
SOURCE += "    return 2 * (w + h)\n"


def recorded(function, results: list, argument: bool = False):
    """function, keeping in `results` a copy of what each call returns (or, with `argument`,
    of its first argument)."""

    def call(*args):
        result = function(*args)
        results.append((args[0] if argument else result).clone())
        return result

    return call


def decode(out: str) -> None:
    """The subprocess: the default model (its GGUF blocks) decodes an edit greedily with drafting
    under this process's kernels, and everything a pass computes is saved to `out`."""
    from pld_cli.core.config import DecodeConfig
    from pld_cli.core.decode import Pass, generate
    from pld_cli.loading.models import ModelSpec, load_model
    from pld_cli.runtime.native.runtime import NativeRuntime
    from pld_cli.tasks.prompts import Task, prompt_ids

    loaded = load_model(ModelSpec(device="cpu"))  # as pld runs it without options
    task = Task("edit", SOURCE, "Rename `area` to `rect_area`.", "geo.py")
    ids = prompt_ids(loaded.tokenizer, task)
    runtime, normed, logits = NativeRuntime(loaded.model, 1024), [], []
    assert runtime.decoder is not None
    head = runtime.weights.head  # its input: the final-normed rows, wherever they were normed
    head.product = recorded(head.product, normed, argument=True)
    runtime.forward = recorded(runtime.forward, logits)
    tokens, rows = [], []
    for event in generate(runtime, ids, set(), DecodeConfig(max_new_tokens=NEW_TOKENS)):
        if isinstance(event, Pass):
            tokens += event.emitted
            rows.append(len(event.drafted) + 1)
    cache = [t[:, :, : runtime.length].clone() for t in (runtime.keys, runtime.values)]
    passes = dict(tokens=tokens, rows=rows, variant=str(library.variant()))
    tensors = dict(normed=normed, logits=logits, cache=cache, rope=[runtime.cos, runtime.sin])
    torch.save(passes | tensors, out)


@pytest.mark.slow
@pytest.mark.skipif(len(RUNNABLE) < 2, reason=f"variants run here: {RUNNABLE}")
def test_the_default_model_decodes_the_same_bits_on_every_variant(tmp_path):
    runs = {}
    for variant in RUNNABLE:  # at once, a thread each: a row's bits do not depend on threads
        width = TORCH_WIDTH[variant]
        env = os.environ | {"PLD_KERNELS": variant.value, "ATEN_CPU_CAPABILITY": width}
        env["OMP_NUM_THREADS"] = "1"
        out = tmp_path / f"{variant}.pt"
        runs[out] = subprocess.Popen([sys.executable, __file__, str(out)], env=env)
    assert all(run.wait(timeout=300) == 0 for run in runs.values())
    first, *others = (torch.load(out) for out in runs)
    assert len(first["tokens"]) == NEW_TOKENS and max(first["rows"]) > 1  # drafts verified
    assert first["variant"] == RUNNABLE[0].value
    for other in others:
        assert (other["tokens"], other["rows"]) == (first["tokens"], first["rows"])
        for name in ("normed", "logits", "cache", "rope"):
            assert len(other[name]) == len(first[name])
            for got, want in zip(other[name], first[name], strict=True):
                assert torch.equal(got, want), f"{other['variant']}: {name} differs"


if __name__ == "__main__":
    decode(sys.argv[1])
