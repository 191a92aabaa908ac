"""What pld adds to a server's stream: decode tok/s of the raw stream against the same stream read
through pld's server engine, on pld's own prompt ids for corpus folders, alternated per item.

    .venv/bin/python scripts/server_overhead.py URL FOLDER [FOLDER...] [--max-new-tokens N]
        [--repeat N]

The raw reader is a plain urllib loop over the `data:` lines; both count tokens the same way (all
of them over the time from the first chunk to the last) and must get the same tokens. Each item
runs raw then through pld, --repeat times; rates are medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

from pld_cli.bench.corpus import load_corpora
from pld_cli.core.config import DecodeConfig
from pld_cli.engines.server import open_engine
from pld_cli.tasks.prompts import prompt_ids


def raw_stream(url: str, model: str, ids: list[int], max_tokens: int) -> tuple[list[int], float]:
    body = {
        "model": model,
        "prompt": ids,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "return_token_ids": True,
    }
    request = urllib.request.Request(
        f"{url}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    tokens, first, last = [], None, None
    with urllib.request.urlopen(request) as response:
        for line in response:
            if not line.startswith(b"data: {"):
                continue
            choices = json.loads(line[6:])["choices"]
            if choices and choices[0].get("token_ids"):
                last = time.perf_counter()
                first = first or last
                tokens += choices[0]["token_ids"]
    return tokens, len(tokens) / (last - first) if last and last > first else 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    settings = SimpleNamespace(
        server=args.url, api_key=None, timeout=600.0, model=None, tokenizer=None, jobs=1
    )
    engine = open_engine(settings, print)
    config = DecodeConfig(max_new_tokens=args.max_new_tokens)
    ratios, same = [], 0
    print("| item | raw tok/s | through pld tok/s | pld / raw | same tokens |")
    print("| --- | --- | --- | --- | --- |")
    for item in load_corpora(args.folders):
        ids = prompt_ids(engine.tokenizer, item.task)
        raw_rates, rates = [], []
        for _ in range(args.repeat):
            raw_tokens, raw_rate = raw_stream(args.url, engine.name, ids, args.max_new_tokens)
            tokens, stats = engine.decode(ids, config)
            raw_rates.append(raw_rate)
            rates.append(stats.tokens_per_s)
        raw_rate, rate = statistics.median(raw_rates), statistics.median(rates)
        ratios.append(rate / raw_rate)
        same += tokens == raw_tokens
        print(
            f"| {item.corpus}/{item.id} | {raw_rate:.1f} | {rate:.1f} | "
            f"{ratios[-1]:.3f} | {'yes' if tokens == raw_tokens else 'NO'} |"
        )
    print(
        f"\nmedian pld / raw: {statistics.median(ratios):.3f}; geometric mean "
        f"{statistics.geometric_mean(ratios):.3f}; same tokens {same}/{len(ratios)}"
    )


if __name__ == "__main__":
    main()
