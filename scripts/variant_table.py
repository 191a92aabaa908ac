"""t(q) of the default model at int8 under each variant of pld's C kernels this CPU runs, side by
side in one process (rounds alternate the variants, so machine noise falls on all alike).

    python scripts/variant_table.py [--context 1024] [--rounds 9]

Prints a markdown table of median milliseconds per pass, and each variant over the best one.
"""

from __future__ import annotations

import argparse
import os
import statistics

import torch
from pass_table import timed

from pld_cli.bench.machine import cpu_name
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.clib import library
from pld_cli.runtime.native.runtime import NativeRuntime

SIZES = (1, 8)
PREFILL = 256


def use(variant: library.Variant) -> None:
    os.environ["PLD_KERNELS"] = variant.value
    library._load.cache_clear()
    assert library.variant() is variant


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    variants = library.runnable()
    loaded = load_model(ModelSpec(quantize="int8"))
    runtime = NativeRuntime(loaded.model, args.context + 64)
    ids = torch.randint(
        100, 40000, (args.context + 32,), generator=torch.Generator().manual_seed(0)
    )
    ids = ids.tolist()
    samples = {(v, q): [] for v in variants for q in (*SIZES, "prefill")}
    for _ in range(args.rounds):
        for variant in variants:
            use(variant)
            samples[variant, "prefill"].append(timed(lambda: runtime.prefill(ids[:PREFILL])))
            runtime.prefill(ids[: args.context])
            for q in SIZES:
                samples[variant, q].append(timed(lambda q=q: runtime.forward(ids[-q:])))
                runtime.rollback(args.context)
    ms = {key: statistics.median(times) * 1e3 for key, times in samples.items()}
    print(f"CPU: {cpu_name()}, {torch.get_num_threads()} threads; default model, int8 in groups;")
    print(f"context {args.context}; medians of {args.rounds} rounds, ms\n")
    columns = [f"t({q})" for q in SIZES] + [f"prefill {PREFILL} rows"]
    print("| variant | " + " | ".join(columns) + " | t(1) / best |")
    print("|---|" + "---|" * (len(columns) + 1))
    best = min(ms[v, 1] for v in variants)
    for v in variants:
        cells = [f"{ms[v, q]:.1f}" for q in (*SIZES, "prefill")]
        print(f"| {v} | " + " | ".join(cells) + f" | {ms[v, 1] / best:.2f} |")


if __name__ == "__main__":
    main()
