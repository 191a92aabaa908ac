"""The grouped product's cost by row count, per variant of pld's C kernels, side by side in one
process (rounds alternate the variants, so machine noise falls on all alike): a Q4_K matrix
(nibbles in 32s, the K-quants' scale form) and a Q6_K one (bytes in 16s) of a 1.2B Llama's MLP
shape, and the machine's widest int8 peak measured beside them.

    python scripts/product_table.py [--outputs 8192] [--inputs 2048] [--rounds 7]
                                    [--variants avx2,portable] [--rows 1,4,16,64,256]

Prints a markdown table: ms per product, t(q) / t(1), and GMAC/s (q x outputs x inputs a second).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from random_blocks import factored_matrix  # noqa: E402

from pld_cli.bench.machine import cpu_name  # noqa: E402
from pld_cli.bench.prefill import peak  # noqa: E402
from pld_cli.runtime.clib import library  # noqa: E402

LAYOUTS = {"Q4_K": (32, 4), "Q6_K": (16, 8)}


def use(variant: str) -> None:
    os.environ["PLD_KERNELS"] = variant
    library._load.cache_clear()
    assert library.variant().value == variant, library.unavailable()


def best_of(product, x: torch.Tensor, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        product(x)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--outputs", type=int, default=8192)
    parser.add_argument("--inputs", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--variants", default="avx2")
    parser.add_argument("--rows", default="1,4,16,64,256")
    args = parser.parse_args()
    rows = [int(r) for r in args.rows.split(",")]
    variants = args.variants.split(",")
    matrices = {
        name: factored_matrix(args.outputs, args.inputs, group, bits)[1]
        for name, (group, bits) in LAYOUTS.items()
    }
    x = torch.randn(max(rows), args.inputs)
    times: dict[tuple, list[float]] = {}
    for _ in range(args.rounds):
        for variant in variants:
            use(variant)
            for name, matrix in matrices.items():
                for q in rows:
                    repeats = max(2, 64 // q)
                    took = best_of(matrix.product, x[:q], repeats)
                    times.setdefault((variant, name, q), []).append(took)
    print(f"CPU: {cpu_name()}, {torch.get_num_threads()} threads, {args.outputs}x{args.inputs}")
    use(variants[0])
    print(f"{variants[0]}'s widest int8 peak: {peak(True) / 1e9:.0f} GMAC/s")
    print("| variant | matrix | " + " | ".join(f"t({q}) ms" for q in rows) + " | GMAC/s at max |")
    print("|---|---|" + "---|" * (len(rows) + 1))
    for variant in variants:
        for name in matrices:
            med = [statistics.median(times[(variant, name, q)]) for q in rows]
            cells = [f"{1000 * t:.2f} ({t / med[0]:.1f}x)" for t in med]
            rate = rows[-1] * args.outputs * args.inputs / med[-1] / 1e9
            print(f"| {variant} | {name} | " + " | ".join(cells) + f" | {rate:.0f} |")


if __name__ == "__main__":
    main()
