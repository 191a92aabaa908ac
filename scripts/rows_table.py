"""Issue 54's table for one GGUF: what extra rows cost a pass, pld beside llama.cpp's own
`llama-bench` on the same file and threads. pld: t(q), one pass of q rows after a 64-token
prompt (median of 7), and a 512-token prefill's rate, per checkout (`--trees name=path`, each
run as PYTHONPATH in a fresh process, so two builds of the kernels compare side by side) and per
variant (`PLD_KERNELS`); rounds alternate them, so machine noise falls on all alike. llama.cpp:
t(1) = 1 / tg128, t(q) = q / pp(q), pp512.

    python scripts/rows_table.py FILE.gguf --llama-bench path/to/llama-bench \\
        [--trees new=.,old=../old] [--variants avx2] [--rounds 2] [--threads 2]

Prints a markdown table (medians over rounds) and a JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

PLD_CHILD = r"""
import json, statistics, sys, time
import torch
torch.set_num_threads(int(sys.argv[2]))
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.native.runtime import NativeRuntime
loaded = load_model(ModelSpec(name=sys.argv[1], device="cpu"))
runtime = NativeRuntime(loaded.model, 1024)
ids = [1000 + (i * 37) % 20000 for i in range(600)]
runtime.prefill(ids[:64])
t = {}
for q in (1, 4, 16):
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        runtime.forward(ids[64 : 64 + q])
        times.append(time.perf_counter() - t0)
        runtime.rollback(64)
    t[q] = statistics.median(times[1:])
times = []
for _ in range(3):
    t0 = time.perf_counter()
    runtime.prefill(ids[:512])
    times.append(time.perf_counter() - t0)
print(json.dumps(dict(t=t, pp512=512 / statistics.median(times), runtime=runtime.name)))
"""


def pld(python: str, tree: str, variant: str, gguf: Path, threads: str) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, PLD_KERNELS=variant, HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [python, "-c", PLD_CHILD, str(gguf), threads], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        sys.exit(f"pld in {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def llama_bench(tool: str, gguf: Path, threads: str) -> dict:
    done = subprocess.run(
        [tool, "-m", str(gguf), "-t", threads, "-p", "4,16,512", "-n", "128", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    rates = {(r["n_prompt"], r["n_gen"]): r["avg_ts"] for r in json.loads(done.stdout)}
    t = {1: 1 / rates[0, 128], 4: 4 / rates[4, 0], 16: 16 / rates[16, 0]}
    return dict(t=t, pp512=rates[512, 0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf", type=Path)
    parser.add_argument("--llama-bench", required=True)
    parser.add_argument("--trees", default=f"pld={Path(__file__).resolve().parent.parent}")
    parser.add_argument("--variants", default="avx2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", default="2")
    args = parser.parse_args()
    trees = dict(pair.split("=", 1) for pair in args.trees.split(","))
    runs: dict[str, list[dict]] = {}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            for variant in args.variants.split(","):
                side = f"pld {name} ({variant})"
                runs.setdefault(side, []).append(
                    pld(sys.executable, tree, variant, args.gguf, args.threads)
                )
        runs.setdefault("llama-bench", []).append(
            llama_bench(args.llama_bench, args.gguf, args.threads)
        )
    print(
        f"| {args.gguf.name}, {args.threads} threads | t(1) ms | t(4) ms | t(16) ms | pp512 tok/s |"
    )
    print("|---|---|---|---|---|")
    table = {}
    for side, results in runs.items():
        t = {
            q: statistics.median(r["t"][str(q)] if str(q) in r["t"] else r["t"][q] for r in results)
            for q in (1, 4, 16)
        }
        pp = statistics.median(r["pp512"] for r in results)
        table[side] = dict(t=t, pp512=pp)
        print(
            f"| {side} | {1e3 * t[1]:.1f} | {1e3 * t[4]:.1f} ({t[4] / t[1]:.1f}x) | "
            f"{1e3 * t[16]:.1f} ({t[16] / t[1]:.1f}x) | {pp:.0f} |"
        )
    print(json.dumps(dict(file=str(args.gguf), runs=runs, table=table)))


if __name__ == "__main__":
    main()
