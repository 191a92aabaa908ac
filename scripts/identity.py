"""Every `samples/` item through `pld --json --compare`, its text and whether pld equals greedy.

For checking that a change keeps pld's output: run it before and after, then compare the files.

    python scripts/identity.py out.json [--quantize none int8] [--max-new-tokens 64]

The pld package is the one `python -m pld_cli` imports (PYTHONPATH picks a checkout).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

INCOMPLETE = 3  # stopped at --max-new-tokens: the text is still shown
SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def items() -> list[dict]:
    out = []
    for corpus in ("edit", "summarize"):
        for line in (SAMPLES / corpus / "manifest.jsonl").read_text().splitlines():
            item = json.loads(line)
            item["path"] = str(SAMPLES / corpus / item["file"])
            out.append(item)
    return out


def run(item: dict, quantize: str, max_new_tokens: int) -> dict:
    command = [sys.executable, "-m", "pld_cli", item["task"], item["path"], "--json"]
    command += ["--compare", "--quantize", quantize, "--max-new-tokens", str(max_new_tokens)]
    if item["task"] == "edit":
        command += ["-i", item["instruction"]]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, INCOMPLETE):
        raise SystemExit(f"{item['id']}: {done.stderr.strip().splitlines()[-1]}")
    record = json.loads(done.stdout)
    stats = record["stats"]
    return {
        "text": record["text"],
        "identical": record["compare"]["identical"],
        "stop": record["stop"],
        "removed_tokens": stats.get("removed_tokens", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--quantize", nargs="+", default=["none", "int8"])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args()
    results = {q: {i["id"]: run(i, q, args.max_new_tokens) for i in items()} for q in args.quantize}
    args.output.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    for quantize, runs in results.items():
        same = sum(r["identical"] for r in runs.values())
        print(f"{quantize}: pld = greedy on {same}/{len(runs)}")


if __name__ == "__main__":
    main()
