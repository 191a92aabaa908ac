"""The loop share of summaries before and after the loop cut, on the same tokens.

Each summarize item is decoded once (pld's loop, greedy, the loop stop on); the share of tokens
inside a verbatim repeat of an earlier 24-token span is counted over everything generated (what
was delivered before the cut) and over what is delivered now (tasks/loops.py).

    python scripts/loop_share.py samples/summarize heldout/summarize [--max-new-tokens 512]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pld_cli.bench.corpus import load_corpora
from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Stop
from pld_cli.core.repetition import repeated_share
from pld_cli.engines.local import LocalEngine
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.tasks.kinds import kind_of
from pld_cli.tasks.loops import loop_cut
from pld_cli.tasks.pipeline import task_ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="+", type=Path)
    parser.add_argument("--max-new-tokens", type=int, default=512)
    parser.add_argument("--show", help="an item id whose delivered text to print")
    args = parser.parse_args()
    loaded = load_model(ModelSpec(device="cpu"))
    engine = LocalEngine(loaded)
    totals = {"generated": [0, 0], "delivered": [0, 0]}  # [tokens in repeats, tokens]
    print("| item | stop | generated | loop share | delivered | loop share |")
    print("|---|---|---:|---:|---:|---:|")
    for item in load_corpora(args.corpora):
        if item.task.kind != "summarize":
            continue
        config = DecodeConfig(max_new_tokens=args.max_new_tokens, stop_loops=True).for_task(
            kind_of(item.task.kind).stops_at_loops
        )
        tokens, stats = engine.decode(task_ids(engine, item.task, config), config)
        kept = loop_cut(tokens, loaded.tokenizer) if stats.stop == Stop.REPETITION else len(tokens)
        row = [item.id, str(stats.stop)]
        for name, part in (("generated", tokens), ("delivered", tokens[:kept])):
            share = repeated_share(part)
            totals[name][0] += round(share * len(part))
            totals[name][1] += len(part)
            row += [str(len(part)), f"{share:.1%}"]
        print("| " + " | ".join(row) + " |", flush=True)
        if item.id == args.show:
            print("\n" + loaded.tokenizer.decode(tokens[:kept], skip_special_tokens=True) + "\n")
    shares = [f"{n}: {r / t:.1%} of {t} tokens" for n, (r, t) in totals.items() if t]
    print("all items: " + "; ".join(shares))


if __name__ == "__main__":
    main()
