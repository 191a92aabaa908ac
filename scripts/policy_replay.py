"""Estimate a drafting change in seconds: replay pld's loop against recorded greedy outputs.

Greedy output does not depend on the drafts, so once each item's greedy tokens are recorded, the
decode loop can be replayed with a scripted runtime (core/scripted.py) that "predicts" them: the
passes, draft lengths and acceptances are exactly those a real run would have, and t(q) turns them
into an *estimated* time. Speedups printed here are estimates (no drafting overhead, no timing
noise); `pld bench` measures.

    python scripts/policy_replay.py record samples/edit samples/summarize --out tokens.json
    python scripts/policy_replay.py replay tokens.json --costs costs.json --max-new-tokens 64

`--costs` is a JSON object {q: seconds} (one entry of ~/.cache/pld/pass-costs.json will do).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from pld_cli.bench.corpus import load_corpora
from pld_cli.core.config import DecodeConfig
from pld_cli.core.decode import Pass, generate
from pld_cli.core.scripted import ScriptedRuntime
from pld_cli.engines.local import decode_ids
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.calibration.costs import interpolate
from pld_cli.tasks.prompts import prompt_ids


def record(folders: list[Path], out: Path, max_new_tokens: int) -> None:
    loaded = load_model(ModelSpec(device="cpu", dtype="float32"))
    config = DecodeConfig(max_new_tokens=max_new_tokens, use_pld=False)
    recorded = {}
    for item in load_corpora(folders):
        ids = prompt_ids(loaded.tokenizer, item.task)
        tokens, _ = decode_ids(loaded, ids, config)
        recorded[f"{item.corpus}/{item.id}"] = {"prompt": ids, "output": tokens}
        print(item.corpus, item.id, len(ids), len(tokens), flush=True)
    out.write_text(json.dumps(recorded))


def replay_item(prompt: list[int], output: list[int], config: DecodeConfig, costs) -> tuple:
    """(estimated speedup over plain decoding, tokens per pass) for one recorded item."""
    sequence = prompt + output
    runtime = ScriptedRuntime(sequence, context_limit=len(sequence) + 64)
    seconds, passes = 0.0, 0
    # No EOS ids: config.max_new_tokens = len(output) ends the replay where the recording ended.
    for event in generate(runtime, prompt, set(), config, costs):
        if isinstance(event, Pass):
            seconds += costs[len(event.drafted) + 1]
            passes += 1
    return len(output) * costs[1] / seconds, len(output) / passes


def replay(recorded: Path, costs_file: Path, max_new_tokens: int, num_draft: int) -> None:
    measured = {int(q): s for q, s in json.loads(costs_file.read_text()).items() if q != "paths"}
    costs = interpolate(measured, num_draft + 1)
    by_corpus: dict[str, list[tuple]] = {}
    for key, item in json.loads(recorded.read_text()).items():
        output = item["output"][:max_new_tokens]
        config = DecodeConfig(max_new_tokens=len(output), num_draft=num_draft)
        speedup, per_pass = replay_item(item["prompt"], output, config, costs)
        by_corpus.setdefault(key.rsplit("/", 1)[0], []).append((speedup, per_pass))
        print(f"{key}: estimated {speedup:.2f}x, {per_pass:.2f} tokens/pass")
    for corpus, rows in by_corpus.items():
        speedups = [s for s, _ in rows]
        print(
            f"{corpus}: estimated speedup min {min(speedups):.2f}x, "
            f"mean {statistics.mean(speedups):.2f}x, "
            f"tokens/pass {statistics.mean(p for _, p in rows):.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="greedy outputs of the default model, CPU float32")
    rec.add_argument("folders", nargs="+", type=Path)
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--max-new-tokens", type=int, default=160)
    rep = commands.add_parser("replay", help="estimated speedups under t(q)")
    rep.add_argument("recorded", type=Path)
    rep.add_argument("--costs", type=Path, required=True)
    rep.add_argument("--max-new-tokens", type=int, default=64)
    rep.add_argument("--num-draft", type=int, default=DecodeConfig.num_draft)
    args = parser.parse_args()
    if args.command == "record":
        record(args.folders, args.out, args.max_new_tokens)
    else:
        replay(args.recorded, args.costs, args.max_new_tokens, args.num_draft)


if __name__ == "__main__":
    main()
