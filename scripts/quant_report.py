"""What --quantize costs and buys here: pass costs, prefill, agreement with float32, memory.

One process loads the default model as float32, bfloat16, int8 and int4 and times passes of q
positions on each native runtime, side by side round after round (so machine noise falls on all
alike), beside the floor (its weights' bytes at the measured read bandwidth), and a prefill of
--prefill rows. Quality: float32 greedy outputs of the first --items items of each
sample corpus (pld's output, equal to greedy), teacher-forced through each quantized model: top-1
agreement with float32 and the mean KL(float32 || quantized) of the next-token distribution; and
how many of the quantized models' own greedy outputs equal float32's. Memory: each quantization
loaded and decoded in a fresh process (peak RSS, and RSS after loading). Last, a 7B-shaped random
Llama, built on the meta device and quantized block by block (float32 never materializes whole):
t(1), t(8) and the floor of reading its weights once at the measured read bandwidth (as in
the pass table's floor column), each quantization in a fresh process.

    python scripts/quant_report.py [--items 10] [--rounds 7] [--schemes int8,int4] [--skip-big]
                                   [--passes-only]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from pass_table import SIZES, read_bandwidth, timed
from transformers import LlamaConfig, LlamaForCausalLM

from pld_cli.bench.corpus import load_corpora
from pld_cli.bench.machine import cpu_name
from pld_cli.core.config import DecodeConfig
from pld_cli.engines.local import decode_ids
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.calibration.costs import calibration_tokens
from pld_cli.runtime.names import RuntimeName
from pld_cli.runtime.native.quantized.quantize import quantize_model, weight_bytes
from pld_cli.runtime.native.runtime import NativeRuntime
from pld_cli.tasks.prompts import prompt_ids

SAMPLES = [Path(__file__).parent.parent / "samples" / name for name in ("edit", "summarize")]
LLAMA_7B = dict(
    vocab_size=32000,
    hidden_size=4096,
    intermediate_size=11008,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=32,
    max_position_embeddings=4096,
    tie_word_embeddings=False,
)


def table(title: str, columns: list[str], rows: dict[str, list[str]]) -> None:
    print(f"\n{title}\n\n| | " + " | ".join(columns) + " |")
    print("| --- |" + " --- |" * len(columns))
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |")


def rss_mb() -> tuple[float, float]:
    """(RSS now, peak RSS) in MB, of this process's own memory (getrusage's peak would carry
    the parent's across exec)."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def pass_costs(
    runtimes: dict[str, NativeRuntime], vocab: int, context: int, rounds: int, bandwidth: float
) -> None:
    tokens = calibration_tokens(vocab, context + max(SIZES))  # as the calibration's passes
    for runtime in runtimes.values():
        runtime.prefill(tokens[:context])
    samples = {(name, q): [] for name in runtimes for q in SIZES}
    for _ in range(rounds + 1):  # the first round warms up
        for q in SIZES:
            ids = tokens[context : context + q]
            for name, runtime in runtimes.items():
                seconds = timed(lambda r=runtime, x=ids: r.forward(x).argmax(-1).tolist())
                samples[name, q].append(seconds)
                runtime.rollback(context)
    rows = {
        name: [f"{statistics.median(samples[name, q][1:]) * 1e3:.1f}" for q in SIZES]
        + [f"{weight_bytes(runtime.weights) / bandwidth * 1e3:.1f}"]
        for name, runtime in runtimes.items()
    }
    columns = [f"q={q}" for q in SIZES] + ["floor"]
    table(f"ms per pass, {context} tokens of context (medians of {rounds})", columns, rows)


def prefill_table(runtimes: dict[str, NativeRuntime], vocab: int, rows: int, rounds: int) -> None:
    ids = torch.randint(0, vocab, (rows,), generator=torch.Generator().manual_seed(1)).tolist()
    samples = {name: [] for name in runtimes}
    for _ in range(rounds):
        for name, runtime in runtimes.items():
            samples[name].append(timed(lambda r=runtime: r.prefill(ids)))
    cells = {name: [f"{statistics.median(times) * 1e3:.0f}"] for name, times in samples.items()}
    table(f"prefill of {rows} rows, ms (medians of {rounds})", ["prefill"], cells)


def greedy_outputs(loaded, items: list, max_new: int) -> list[tuple[list[int], list[int]]]:
    config = DecodeConfig(max_new_tokens=max_new, draft="fixed")  # no calibration needed
    outputs = []
    for item in items:
        ids = prompt_ids(loaded.tokenizer, item.task)
        outputs.append((ids, decode_ids(loaded, ids, config, runtime_name=RuntimeName.NATIVE)[0]))
    return outputs


def teacher_forced(loaded, prompt: list[int], output: list[int]) -> torch.Tensor:
    """Log-probabilities [len(output), vocab] of each output token's position, in one pass."""
    runtime = loaded.runtimes.get(len(prompt) + len(output), RuntimeName.NATIVE)
    runtime.prefill([])
    return runtime.run(prompt + output[:-1], keep=len(output)).float().log_softmax(-1)


def quality(reference, models: dict, items: list, max_new: int) -> None:
    outputs = greedy_outputs(reference, items, max_new)
    rows = {}
    for scheme, loaded in models.items():
        agree = positions = 0
        kl = 0.0
        for prompt, output in outputs:
            p = teacher_forced(reference, prompt, output)
            q = teacher_forced(loaded, prompt, output)
            agree += int((p.argmax(-1) == q.argmax(-1)).sum())
            positions += len(output)
            kl += float(F.kl_div(q, p, log_target=True, reduction="sum"))
        own = greedy_outputs(loaded, items, max_new)
        same = sum(mine == theirs for (_, mine), (_, theirs) in zip(own, outputs, strict=True))
        rows[scheme] = [
            f"{agree / positions:.2%} ({agree}/{positions})",
            f"{kl / positions:.5f}",
            f"{same}/{len(outputs)}",
        ]
    columns = ["top-1 agreement with float32", "mean KL", "greedy outputs equal to float32's"]
    names = ", ".join(item.id for item in items)
    table(f"teacher-forced through float32 greedy ({max_new} new tokens; {names})", columns, rows)


def memory_row(scheme: str) -> None:
    """In a fresh process: load the default model at `scheme`, decode a little, print RSS (JSON)."""
    loaded = load_model(ModelSpec(device="cpu", quantize=scheme))
    after_load = rss_mb()[0]
    runtime = loaded.runtimes.get(1100, RuntimeName.NATIVE)
    runtime.prefill(list(range(1000)))
    for token in range(8):
        runtime.forward([token])
    print(json.dumps({"after_load": after_load, "peak": rss_mb()[1]}))


def memory(schemes: list[str]) -> None:
    rows = {}
    for scheme in schemes:
        command = [sys.executable, __file__, "--memory-of", scheme]
        result = json.loads(subprocess.run(command, capture_output=True, check=True).stdout)
        rows[scheme] = [f"{result['after_load']:.0f}", f"{result['peak']:.0f}"]
    table("default model, MB (fresh process each)", ["RSS after load", "peak RSS"], rows)


def random_weights(module: torch.nn.Module) -> None:
    """A meta module made real on the CPU with random weights (norms at 1)."""
    module.to_empty(device="cpu")
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(0, 0.02) if parameter.dim() == 2 else parameter.fill_(1.0)


def big_model(scheme: str, context: int, rounds: int) -> None:
    """A 7B-shaped random Llama at `scheme`, in this process: t(1), t(8), floor, peak RSS (JSON)."""
    config = LlamaConfig(**LLAMA_7B)
    with torch.device("meta"):
        model = LlamaForCausalLM(config).eval()
    model.model.rotary_emb = type(model.model.rotary_emb)(config=config)  # its tables, real
    weights = quantize_model(model, scheme, materialize=random_weights)
    runtime = NativeRuntime(model, context + 16)
    runtime.prefill(list(range(context)))
    times = {1: [], 8: []}
    for _ in range(rounds + 1):
        for q in times:
            times[q].append(timed(lambda n=q: runtime.forward(list(range(n))).argmax(-1).tolist()))
            runtime.rollback(context)
    floor = weight_bytes(weights) / read_bandwidth()
    result = {f"t{q}": statistics.median(times[q][1:]) for q in times}
    result.update(floor=floor, weights=weight_bytes(weights), peak=rss_mb()[1] * 2**20)
    print(json.dumps(result))


def big_models(schemes: list[str], context: int, rounds: int) -> None:
    rows = {}
    for scheme in schemes:
        command = [sys.executable, __file__, "--big-of", scheme, "--context", str(context)]
        command += ["--rounds", str(rounds)]
        r = json.loads(subprocess.run(command, capture_output=True, check=True).stdout)
        rows[scheme] = [f"{r['t1'] * 1e3:.0f}", f"{r['t8'] * 1e3:.0f}", f"{r['floor'] * 1e3:.0f}"]
        rows[scheme] += [f"{r['t1'] / r['floor']:.2f}", f"{r['weights'] / 2**30:.2f}"]
        rows[scheme] += [f"{r['peak'] / 2**30:.1f}"]
    columns = ["t(1) ms", "t(8) ms", "floor ms", "t(1) / floor", "weights GiB", "peak RSS GiB"]
    table(
        f"7B-shaped random Llama, {context} tokens of context (fresh process each)", columns, rows
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10, help="items per sample corpus")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--prefill", type=int, default=1000)
    parser.add_argument("--schemes", default="int8,int4")
    parser.add_argument("--skip-big", action="store_true")
    parser.add_argument("--passes-only", action="store_true", help="the t(q) and prefill tables")
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)
    parser.add_argument("--big-of", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_of:
        return memory_row(args.memory_of)
    if args.big_of:
        return big_model(args.big_of, args.context, args.rounds)
    schemes = args.schemes.split(",")
    threads = torch.get_num_threads()
    print(f"{cpu_name()}, {threads} threads, torch {torch.__version__}")
    loaded = {
        scheme: load_model(ModelSpec(device="cpu", quantize=scheme))
        for scheme in ["none", *schemes]
    }
    vocab = loaded["none"].model.config.vocab_size
    runtimes = {
        "float32" if scheme == "none" else scheme: NativeRuntime(m.model, args.context + 64)
        for scheme, m in loaded.items()
    }
    bf16 = load_model(ModelSpec(device="cpu", dtype="bfloat16", quantize="none"))
    runtimes["bfloat16"] = NativeRuntime(bf16.model, args.context + 64)
    padded = runtimes["float32, padded"] = NativeRuntime(loaded["none"].model, args.context + 64)
    padded.choose({q: "padded" for q in SIZES})
    pass_costs(runtimes, vocab, args.context, args.rounds, read_bandwidth())
    prefill_table(runtimes, vocab, args.prefill, 3)
    if args.passes_only:
        return
    items = [item for corpus in SAMPLES for item in load_corpora([corpus])[: args.items]]
    quality(loaded.pop("none"), loaded, items, args.max_new_tokens)
    memory(["none", *schemes])
    if not args.skip_big:
        big_models(schemes, 128, 3)


if __name__ == "__main__":
    main()
