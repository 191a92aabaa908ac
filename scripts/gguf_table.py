"""Issue 34's tables for one GGUF: pld (its own blocks) beside llama.cpp (llama-cpp-python, same
threads) on the same file, each in a fresh process: load time, peak RSS and disk written; the
per-pass cost t(q) for q = 1, 4, 16 against llama.cpp's time per token and per 16-token batch; and
the read-bandwidth floor (bytes a pass reads / this machine's copy speed, as pld's calibration
measures it, here).

    .venv/bin/python scripts/gguf_table.py FILE.gguf --llama-python /work/llama-venv/bin/python

Prints one markdown row per side and a JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

PLD_CHILD = r"""
import json, os, resource, statistics, sys, time
from pathlib import Path
import torch
torch.set_num_threads(int(sys.argv[2]))
from pld_cli.cache import cache_dir
def size(folder):
    files = Path(folder).rglob("*") if Path(folder).exists() else []
    return sum(f.stat().st_size for f in files if f.is_file())
before = size(cache_dir())
start = time.perf_counter()
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.native.model import native_weights
from pld_cli.runtime.native.quantized.quantize import weight_bytes
from pld_cli.runtime.native.runtime import NativeRuntime
loaded = load_model(ModelSpec(name=sys.argv[1], device="cpu"))
took = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
runtime = NativeRuntime(loaded.model, 256)
ids = list(range(1000, 1064))
runtime.prefill(ids)
costs = {}
for q in (1, 4, 16):
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        runtime.forward(ids[:q])
        times.append(time.perf_counter() - t0)
        runtime.rollback(64)
    costs[q] = statistics.median(times[2:])
from pld_cli.runtime.calibration.costs import copy_speed
bandwidth = copy_speed()
print(json.dumps(dict(load_s=took, rss=rss, disk=size(cache_dir()) - before, t=costs,
    pass_bytes=weight_bytes(native_weights(loaded.model)), bandwidth=bandwidth,
    weights=loaded.weights, runtime=runtime.name)))
"""

LLAMA_CHILD = r"""
import json, resource, statistics, sys, time
import llama_cpp
start = time.perf_counter()
model = llama_cpp.Llama(sys.argv[1], n_threads=int(sys.argv[2]), n_threads_batch=int(sys.argv[2]),
    n_ctx=512, n_batch=64, verbose=False)
took = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
ids = list(range(1000, 1064))
model.eval(ids)
def timed(tokens):
    times = []
    for _ in range(7):
        model.n_tokens = 64
        t0 = time.perf_counter()
        model.eval(tokens)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[2:])
print(json.dumps(dict(load_s=took, rss=rss, disk=0, tg=timed(ids[:1]), pp4=timed(ids[:4]),
    pp16=timed(ids[:16]))))
"""


def child(python: str, code: str, *args: str) -> dict:
    done = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{python} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf", type=Path)
    parser.add_argument("--llama-python", required=True)
    parser.add_argument("--threads", default="2")
    args = parser.parse_args()
    file_bytes = args.gguf.stat().st_size
    pld = child(sys.executable, PLD_CHILD, str(args.gguf), args.threads)
    llama = child(args.llama_python, LLAMA_CHILD, str(args.gguf), args.threads)
    floor = pld["pass_bytes"] / pld["bandwidth"]
    t = {int(q): v for q, v in pld["t"].items()}
    print(
        "| file | side | load s | peak RSS GB (x file) | disk GB | t(1) ms | t(4) ms | t(16) ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    gb = 1e9
    for side, r, one, four, sixteen in (
        ("pld", pld, t[1], t[4], t[16]),
        ("llama.cpp", llama, llama["tg"], llama["pp4"], llama["pp16"]),
    ):
        print(
            f"| {args.gguf.name} | {side} | {r['load_s']:.1f} | {r['rss'] / gb:.2f} "
            f"({r['rss'] / file_bytes:.2f}) | {r['disk'] / gb:.2f} | {1e3 * one:.1f} | "
            f"{1e3 * four:.1f} | {1e3 * sixteen:.1f} |"
        )
    print(
        f"pld reads {pld['pass_bytes'] / gb:.2f} GB a pass (file {file_bytes / gb:.2f} GB); "
        f"copy bandwidth {pld['bandwidth'] / gb:.1f} GB/s: floor {1e3 * floor:.1f} ms; "
        f"t(1) / llama.cpp tg = {t[1] / llama['tg']:.2f}; t(16) / t(1) = {t[16] / t[1]:.2f}"
    )
    print(json.dumps(dict(file=str(args.gguf), file_bytes=file_bytes, pld=pld, llama=llama)))


if __name__ == "__main__":
    main()
