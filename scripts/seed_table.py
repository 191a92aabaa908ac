"""Seeded sampling, pld against --no-pld on the samples: identical tokens, and pld's speed.

Run i of N samples samples/ item i (summaries and edits in turn) with --seed i, once with drafting
(adaptive, the default) and once without, in alternating order, on the default model as pld runs it
without options; prints a row per run and the totals.

    python scripts/seed_table.py [--runs 20] [--temperature 0.7] [--max-new-tokens 96]

The pld package is the one `python` imports (PYTHONPATH picks a checkout).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
from pathlib import Path

from pld_cli.core.config import DecodeConfig, SamplingConfig
from pld_cli.engines.local import LocalEngine
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.tasks.pipeline import run_task
from pld_cli.tasks.prompts import Task, prompt_ids

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def tasks() -> list[tuple[str, Task]]:
    """Summaries and edits in turn: (id, task)."""
    corpora = []
    for corpus in ("summarize", "edit"):
        items = []
        for line in (SAMPLES / corpus / "manifest.jsonl").read_text().splitlines():
            item = json.loads(line)
            text = (SAMPLES / corpus / item["file"]).read_text()
            task = Task(item["task"], text, item.get("instruction", ""), item["file"])
            items.append((item["id"], task))
        corpora.append(items)
    return [pair for both in zip(*corpora, strict=False) for pair in both]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    args = parser.parse_args()
    engine = LocalEngine(load_model(ModelSpec(device="cpu")))
    config = DecodeConfig(max_new_tokens=args.max_new_tokens)
    items = tasks()
    longest = max(len(prompt_ids(engine.tokenizer, task)) for _, task in items)
    engine.prepare(longest + args.max_new_tokens, config, print, print)
    print(f"CPU: {cpu_name()}; weights: {engine.weights}; temperature {args.temperature}")
    header = f"{'run':>3} {'sample':<24} {'seed':>4} {'tokens':>6} {'pld tok/s':>9} "
    print(header + f"{'plain tok/s':>11} {'ratio':>6} {'kept/drafted':>12} identical")
    same, ratios, pld_total, plain_total = 0, [], [0, 0.0], [0, 0.0]
    for run in range(args.runs):
        name, task = items[run % len(items)]
        sampling = SamplingConfig(args.temperature, seed=run)
        pld_config = dataclasses.replace(config, sampling=sampling)
        plain_config = dataclasses.replace(pld_config, use_pld=False)
        order = [pld_config, plain_config] if run % 2 == 0 else [plain_config, pld_config]
        results = {c.use_pld: run_task(engine, task, c) for c in order}
        pld, plain = results[True], results[False]
        identical = pld.token_ids == plain.token_ids
        same += identical
        ratio = pld.stats.tokens_per_s / plain.stats.tokens_per_s
        ratios.append(ratio)
        for total, result in ((pld_total, pld), (plain_total, plain)):
            total[0] += result.stats.new_tokens
            total[1] += result.stats.decode_s
        kept = f"{pld.stats.accepted_tokens}/{pld.stats.drafted_tokens}"
        print(
            f"{run:>3} {name:<24} {run:>4} {len(pld.token_ids):>6} "
            f"{pld.stats.tokens_per_s:>9.1f} {plain.stats.tokens_per_s:>11.1f} {ratio:>6.2f} "
            f"{kept:>12} {'yes' if identical else 'NO'}"
        )
    pld_rate, plain_rate = pld_total[0] / pld_total[1], plain_total[0] / plain_total[1]
    print(
        f"identical: {same}/{args.runs}; tok/s over all runs: pld {pld_rate:.1f}, plain "
        f"{plain_rate:.1f} ({pld_rate / plain_rate:.2f}x); median per-run ratio "
        f"{statistics.median(ratios):.2f}"
    )


if __name__ == "__main__":
    main()
