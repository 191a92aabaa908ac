"""GPU benchmark for the static and native runtimes and CUDA graphs, on one CUDA device.

1. Per-pass cost t(q) of an 8B-shaped random-weight Llama (bf16, 2,048 tokens of context) on each
   runtime (dynamic, static and native, each eager and with CUDA graphs), next to the floor of
   reading the weights once at the copy bandwidth measured here; graph-replayed logits checked
   against eager ones.
2. `pld bench` on the sample corpora with the default model on CUDA, in bfloat16 (transformers'
   generate() greedy and prompt lookup next to pld's greedy and pld on `auto` and on the static
   runtime) and in float32 (generate() greedy, pld's greedy and pld), each with --check
   (pld == --no-pld on the same runtime; in bfloat16 the differing items are counted).

Usage: python scripts/gpu_bench.py [--model PATH_OR_GGUF] [--out DIR] [--skip-passes] [--skip-bench]
Writes passes.json, summary.md, bench-bfloat16.json and bench-float32.json into --out (default: $OUT
or .).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from pld_cli.runtime.choice import attach_cuda_graphs
from transformers import LlamaConfig, LlamaForCausalLM

from pld_cli.runtime.hf.dynamic import DynamicRuntime
from pld_cli.runtime.hf.graphs import capture as capture_static
from pld_cli.runtime.hf.static import StaticRuntime
from pld_cli.runtime.native.graphs import capture as capture_native
from pld_cli.runtime.native.runtime import NativeRuntime

SIZES = (1, 2, 4, 8, 16, 32)
CONTEXT = 2048
LLAMA_8B = dict(
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=128256,
    max_position_embeddings=8192,
    rope_theta=500000.0,
)


def copy_bandwidth(device: str) -> float:
    """Bytes per second of a device-to-device copy (read + write), median of 10."""
    a = torch.empty(2 * 1024**3, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    times = []
    for _ in range(12):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        b.copy_(a)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * a.numel() / statistics.median(times[2:])


def pass_times(runtime, vocab: int, repeats: int = 20) -> dict[int, float]:
    """Median ms of a pass over q positions (forward + argmax read-back) at CONTEXT tokens."""
    generator = torch.Generator().manual_seed(0)
    runtime.prefill(torch.randint(0, vocab, (CONTEXT,), generator=generator).tolist())
    result = {}
    for q in SIZES:
        ids = torch.randint(0, vocab, (q,), generator=generator).tolist()
        samples = []
        for _ in range(repeats + 3):
            torch.cuda.synchronize()
            start = time.perf_counter()
            runtime.forward(ids).argmax(-1).tolist()
            samples.append(time.perf_counter() - start)
            runtime.rollback(CONTEXT)
        result[q] = statistics.median(samples[3:]) * 1e3
    return result


def graph_agreement(runtime: StaticRuntime | NativeRuntime, vocab: int) -> dict[int, float]:
    """Max |graph - eager| logit difference per pass size, relative to the largest logit."""
    out = {}
    for q in (1, 4, 11, 16, 32):
        ids = torch.randint(0, vocab, (q,)).tolist()
        start = runtime.length
        graph = runtime.forward(ids).float().clone()
        runtime.rollback(start)
        graphs, runtime.graphs = runtime.graphs, None
        eager = runtime.forward(ids).float()
        runtime.graphs = graphs
        runtime.rollback(start)
        out[q] = ((graph - eager).abs().max() / eager.abs().max()).item()
    return out


def runtimes(model, note) -> dict[str, Callable[[], object]]:
    """Each measured runtime, opened on demand; pld's own forward first (the figure that
    matters most, measured first in case a later one breaks or time runs out)."""

    def graphed(runtime, capture=capture_static):
        attach_cuda_graphs(runtime, note, capture)
        if runtime.graphs is None:
            raise RuntimeError("the capture failed (see notes)")
        return runtime

    return {
        "native, graphs": lambda: graphed(NativeRuntime(model, CONTEXT + 64), capture_native),
        "native": lambda: NativeRuntime(model, CONTEXT + 64),
        "static, graphs": lambda: graphed(StaticRuntime(model, CONTEXT + 64)),
        "static": lambda: StaticRuntime(model, CONTEXT + 64),
        "dynamic": lambda: DynamicRuntime(model),
    }


def passes(out: Path) -> dict:
    config = LlamaConfig(**LLAMA_8B)
    started = time.perf_counter()
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    bandwidth = copy_bandwidth("cuda")
    report = {
        "weight_bytes": weight_bytes,
        "copy_bytes_per_s": bandwidth,
        "floor_ms": weight_bytes / bandwidth * 1e3,
        "init_s": time.perf_counter() - started,
    }
    print(
        f"weights {weight_bytes / 1e9:.2f} GB, copy {bandwidth / 1e12:.2f} TB/s, "
        f"floor {report['floor_ms']:.2f} ms",
        flush=True,
    )
    report["notes"], report["errors"] = [], {}
    report["ms"], report["graph_vs_eager_rel_diff"] = {}, {}
    for name, open_runtime in runtimes(model, report["notes"].append).items():
        try:  # one runtime failing leaves the others' rows
            runtime = open_runtime()
            report["ms"][name] = pass_times(runtime, config.vocab_size)
            if getattr(runtime, "graphs", None) is not None:
                report["graph_vs_eager_rel_diff"][name] = graph_agreement(
                    runtime, config.vocab_size
                )
        except Exception as error:  # noqa: BLE001 - recorded in the report
            report["errors"][name] = f"{type(error).__name__}: {error}"
        print(name, report["ms"].get(name), report["errors"].get(name, ""), flush=True)
        runtime = None  # its cache goes before the next one's is made
        torch.cuda.empty_cache()
    (out / "passes.json").write_text(json.dumps(report, indent=1))
    return report


BENCH_METHODS = {
    "bfloat16": "hf-greedy,hf-pld,greedy,pld,greedy@static,pld@static",
    "float32": "hf-greedy,greedy,pld",
}


def bench(out: Path, model: str | None, max_new_tokens: int, timeout: float) -> None:
    for dtype, methods in BENCH_METHODS.items():
        command = [
            sys.executable,
            "-c",
            "from pld_cli.cli.app import main; main()",
            "bench",
            "samples/edit",
            "samples/summarize",
            "--device",
            "cuda",
            "--dtype",
            dtype,
            "--methods",
            methods,
            "--check",
            "--max-new-tokens",
            str(max_new_tokens),
            "-o",
            str(out / f"bench-{dtype}.json"),
            "--verbose",
        ]
        if model:
            command += ["-m", model]
        print(" ".join(command), flush=True)
        try:  # a run that overstays leaves the next one its time
            subprocess.run(command, check=False, timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"gpu_bench: the {dtype} bench passed {timeout} s", flush=True)


def summary(report: dict) -> str:
    lines = [
        "| runtime | " + " | ".join(f"{q} pos" for q in SIZES) + " |",
        "| --- |" + " --- |" * len(SIZES),
    ]
    floor = report["floor_ms"]
    lines.append("| floor: weights read once | " + " | ".join(f"{floor:.2f}" for _ in SIZES) + " |")
    for name, times in report["ms"].items():
        lines.append(f"| {name} | " + " | ".join(f"{times[q]:.2f}" for q in SIZES) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="pld's -m for the bench (default: the embedded model)")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--skip-passes", action="store_true")
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--bench-timeout", type=float, default=200, help="seconds per dtype")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_bench: no CUDA device")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.skip_passes:
        text = summary(passes(out))
        (out / "summary.md").write_text(text)
        print(text, flush=True)
        torch.cuda.empty_cache()
    if not args.skip_bench:
        bench(out, args.model, args.max_new_tokens, args.bench_timeout)


if __name__ == "__main__":
    main()
