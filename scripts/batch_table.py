"""Issue 35's tables in one run: the prefill rate beside this machine's int8 peak, and a corpus's
wall time (prefill included) through pld -j 1, 2, 4, 8 and, with --server, a server at 8 in flight;
each at 64 and 512 new tokens, each run's outputs compared with -j 1's document by document.

    .venv/bin/python scripts/batch_table.py samples/edit samples/summarize \
        [--server http://127.0.0.1:8000] [--json docs/bench-cpu-batch.json]

Prints markdown tables; the JSON holds every figure.
"""

from __future__ import annotations

import argparse
import json
import resource
from pathlib import Path

from pld_cli.bench import prefill, throughput
from pld_cli.bench.corpus import expand, load_corpora
from pld_cli.bench.machine import describe
from pld_cli.cli.options import Settings
from pld_cli.core.config import DecodeConfig
from pld_cli.engines.local import LocalEngine
from pld_cli.engines.server import open_engine as open_server
from pld_cli.loading.models import load_model
from pld_cli.tasks.kinds import kind_of
from pld_cli.tasks.longdoc import Splitter
from pld_cli.tasks.prompts import prompt_ids

JOBS = (1, 2, 4, 8)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--server")
    parser.add_argument("--tokens", default="64,512")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    loaded = load_model(Settings().model_spec(), lambda _: None)
    results = {"machine": describe("cpu"), "weights": loaded.weights, "runs": []}
    server = open_server(Settings(server=args.server), lambda _: None) if args.server else None
    for tokens in map(int, args.tokens.split(",")):
        config = DecodeConfig(max_new_tokens=tokens)
        local = LocalEngine(loaded)
        items = expand(load_corpora(args.corpora), Splitter(local, tokens, whole_rewrites=False))
        prompts = [prompt_ids(loaded.tokenizer, item.task) for item in items]
        configs = [config.for_task(kind_of(item.task.kind).stops_at_loops) for item in items]
        if "prefill" not in results:
            results["prefill"] = prefill.measure(loaded, prompts, config).as_dict()
            print(prefill_row(results["prefill"]), flush=True)
        positions = max(map(len, prompts)) + tokens
        first = None
        for jobs in JOBS:
            engine = LocalEngine(loaded, jobs)
            engine.prepare(positions, config, lambda _: None, lambda _: None)
            run, outputs = throughput.measure("pld", engine, prompts, configs, jobs, first)
            first = first or outputs
            record(results, tokens, run, jobs)
        if server is not None:
            run, _ = throughput.measure("server", server, prompts, configs, 8, first)
            record(results, tokens, run, 8)
    results["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    print(f"peak RSS of this process: {results['peak_rss_gib']} GiB")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def record(results: dict, tokens: int, run: throughput.Throughput, jobs: int) -> None:
    row = run.as_dict() | {"max_new_tokens": tokens, "jobs": jobs}
    results["runs"].append(row)
    base = next(r for r in results["runs"] if r["max_new_tokens"] == tokens)
    same = "-" if run.identical is None else f"{run.identical}/{run.documents}"
    print(
        f"| {tokens} | {run.method} -j {jobs} | {run.wall_s:.1f} s | {run.tokens_per_s:.1f} | "
        f"{base['wall_s'] / run.wall_s:.2f}x | {same} |",
        flush=True,
    )


def prefill_row(rate: dict) -> str:
    return (
        f"| prefill {rate['prompt_tokens']} tok | {rate['tokens_per_s']} tok/s | "
        f"{rate['gmac_per_s']} GMAC/s | {rate['fraction_of_widest']:.1%} of "
        f"{rate['peak_widest_gmac_per_s']} | {rate['fraction_of_kernel']:.1%} of "
        f"{rate['peak_kernel_gmac_per_s']} ({rate['variant']}) |"
    )


if __name__ == "__main__":
    main()
