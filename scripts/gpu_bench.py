"""GPU benchmark for the static and native runtimes and CUDA graphs, on one CUDA device.

1. Per-pass cost t(q) of an 8B-shaped random-weight Llama (bf16, 2,048 tokens of context) on each
   runtime (dynamic, static and native, each eager and with CUDA graphs), next to the floor of
   reading the weights once at the copy bandwidth measured here; graph-replayed logits checked
   against eager ones.
2. `pld bench` on the sample corpora with the default model on CUDA: transformers' generate()
   greedy and prompt lookup next to pld's greedy and pld (static+graphs, and on native), with
   --check (pld == --no-pld).

Usage: python scripts/gpu_bench.py [--model PATH_OR_GGUF] [--out DIR] [--skip-passes] [--skip-bench]
Writes passes.json, bench.json and a summary table (summary.md) into --out (default: $OUT or .).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from pld_cli.runtime.choice import attach_cuda_graphs
from pld_cli.runtime.dynamic import DynamicRuntime
from pld_cli.runtime.native import NativeRuntime
from pld_cli.runtime.native_graphs import capture as capture_native
from pld_cli.runtime.static import StaticRuntime

SIZES = (1, 2, 4, 8, 11, 16)
CONTEXT = 2048
LLAMA_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                max_position_embeddings=8192, rope_theta=500000.0)  # fmt: skip


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


def graph_agreement(runtime: StaticRuntime, vocab: int) -> dict[int, float]:
    """Max |graph - eager| logit difference per captured size, relative to the largest logit."""
    out = {}
    for q in (1, 4, 11, 16):
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


def passes(out: Path) -> dict:
    config = LlamaConfig(**LLAMA_8B)
    started = time.perf_counter()
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    bandwidth = copy_bandwidth("cuda")
    report = {"weight_bytes": weight_bytes, "copy_bytes_per_s": bandwidth,
              "floor_ms": weight_bytes / bandwidth * 1e3,
              "init_s": time.perf_counter() - started}  # fmt: skip
    print(f"weights {weight_bytes / 1e9:.2f} GB, copy {bandwidth / 1e12:.2f} TB/s, "
          f"floor {report['floor_ms']:.2f} ms", flush=True)  # fmt: skip
    notes: list[str] = []
    static_eager = StaticRuntime(model, CONTEXT + 64)
    static_graphs = StaticRuntime(model, CONTEXT + 64)
    attach_cuda_graphs(static_graphs, notes.append)
    native_eager = NativeRuntime(model, CONTEXT + 64)
    native_graphs = NativeRuntime(model, CONTEXT + 64)
    attach_cuda_graphs(native_graphs, notes.append, capture_native)
    runtimes = {"dynamic": DynamicRuntime(model), "static": static_eager,
                static_graphs.name: static_graphs, "native": native_eager,
                native_graphs.name: native_graphs}  # fmt: skip
    report["notes"] = notes
    report["ms"] = {}
    for name, runtime in runtimes.items():
        report["ms"][name] = pass_times(runtime, config.vocab_size)
        print(name, json.dumps({q: round(v, 2) for q, v in report["ms"][name].items()}), flush=True)
        if runtime not in (static_graphs, native_graphs):
            runtime.prefill([])  # frees nothing, but keeps the caches from interleaving
    if static_graphs.graphs is not None:
        report["graph_vs_eager_rel_diff"] = graph_agreement(static_graphs, config.vocab_size)
    (out / "passes.json").write_text(json.dumps(report, indent=1))
    return report


def bench(out: Path, model: str | None) -> None:
    command = [sys.executable, "-c", "from pld_cli.cli.app import main; main()",
               "bench", "samples/edit", "samples/summarize", "--device", "cuda",
               "--methods", "hf-greedy,hf-pld,greedy,pld,greedy@native,pld@native", "--check",
               "--max-new-tokens", "256",
               "--json", str(out / "bench.json"), "--verbose"]  # fmt: skip
    if model:
        command += ["-m", model]
    print(" ".join(command), flush=True)
    subprocess.run(command, check=False)


def summary(report: dict) -> str:
    lines = ["| runtime | " + " | ".join(f"{q} pos" for q in SIZES) + " |",
             "| --- |" + " --- |" * len(SIZES)]  # fmt: skip
    floor = report["floor_ms"]
    lines.append("| weights once (floor) | " + " | ".join(f"{floor:.2f}" for _ in SIZES) + " |")
    for name, times in report["ms"].items():
        lines.append(f"| {name} | " + " | ".join(f"{times[q]:.2f}" for q in SIZES) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="pld's -m for the bench (default: the embedded model)")
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--skip-passes", action="store_true")
    parser.add_argument("--skip-bench", action="store_true")
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
        bench(out, args.model)


if __name__ == "__main__":
    main()
