"""t(q) of pld's runtimes side by side in one process, with the floor of streaming the weights once.

Every runtime holds the same random context; passes of each size run on each runtime in turn,
round after round, so machine noise falls on all of them alike. Prints a markdown table of median
milliseconds per pass and the floor (the model's weight bytes over the measured read bandwidth).

    python scripts/pass_table.py [--context 1024] [--rounds 7] [--dtypes float32,bfloat16]

With several dtypes the default model is loaded once per dtype and every runtime of each runs in
the same rounds (native only for the dtypes after the first, with --native-only-after-first).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.hf.dynamic import DynamicRuntime
from pld_cli.runtime.hf.static import StaticRuntime
from pld_cli.runtime.native.runtime import NativeRuntime

SIZES = (1, 2, 4, 8, 16, 32)


def read_bandwidth(mb: int = 512) -> float:
    """Bytes per second of the best of five reads (a sum) of a large buffer, written first: the
    pages of a buffer never written all map the kernel's one zero page, which reads from cache
    (an earlier copy from such a buffer measured 70-92 GB/s here, against 63 read from memory)."""
    buffer = torch.ones(mb * 2**20 // 4)
    best = min(timed(buffer.sum) for _ in range(5))
    return buffer.nbytes / best


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def runtimes(model, capacity: int, dtype: str, native_only: bool) -> dict[str, object]:
    plain, padded = NativeRuntime(model, capacity), NativeRuntime(model, capacity)
    padded.choose({q: "padded" for q in SIZES})
    named = {"native (plain linears)": plain, "native (padded linears)": padded}
    if not native_only:
        static, dynamic = StaticRuntime(model, capacity), DynamicRuntime(model)
        static_stock, dynamic_stock = StaticRuntime(model, capacity), DynamicRuntime(model)
        for runtime in (static, dynamic):
            runtime.choose({q: "cpu-kernels" for q in SIZES})
        named |= {
            "static + cpu-kernels": static,
            "static, stock": static_stock,
            "dynamic + cpu-kernels": dynamic,
            "dynamic, stock (transformers)": dynamic_stock,
        }
    return {f"{name}, {dtype}": runtime for name, runtime in named.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--native-only-after-first", action="store_true")
    args = parser.parse_args()
    named, weight_bytes = {}, {}
    for i, dtype in enumerate(args.dtypes.split(",")):
        model = load_model(ModelSpec(device="cpu", dtype=dtype)).model
        native_only = i > 0 and args.native_only_after_first
        named |= runtimes(model, args.context + max(SIZES) + 1, dtype, native_only)
        storages = {
            p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()
        }
        weight_bytes[dtype] = sum(storages.values())
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    context = torch.randint(0, vocab, (args.context,), generator=generator).tolist()
    for runtime in named.values():
        runtime.prefill(context)
    samples = {(name, q): [] for name in named for q in SIZES}
    for _ in range(args.rounds + 1):  # the first round warms up
        for q in SIZES:
            ids = torch.randint(0, vocab, (q,), generator=generator).tolist()
            for name, runtime in named.items():
                seconds = timed(lambda r=runtime, x=ids: r.forward(x).argmax(-1).tolist())
                samples[name, q].append(seconds)
                runtime.rollback(args.context)
    bandwidth = read_bandwidth()
    print(f"{torch.get_num_threads()} threads, context {args.context}, ms per pass (medians)")
    print("| runtime | " + " | ".join(f"q={q}" for q in SIZES) + " |")
    print("| --- |" + " --- |" * len(SIZES))
    for name in named:
        ms = [statistics.median(samples[name, q][1:]) * 1e3 for q in SIZES]
        print(f"| {name} | " + " | ".join(f"{m:.1f}" for m in ms) + " |")
    for dtype, size in weight_bytes.items():
        floor = size / bandwidth * 1e3
        print(
            f"| floor, {dtype} (weights / read bandwidth) | {floor:.1f} |" + " |" * (len(SIZES) - 1)
        )


if __name__ == "__main__":
    main()
