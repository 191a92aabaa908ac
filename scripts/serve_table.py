"""Issue 49's table: edit requests against running OpenAI-compatible servers (pld serve, and
llama.cpp's server on the same GGUF for comparison), streamed, greedy, pld's own edit prompts.

    .venv/bin/python scripts/serve_table.py --pld URL [--plain URL] [--llama URL] [--items 4]

Per sample edit (samples/edit, the file in the prompt as pld edit sends it): pld serve without and
with the file as `prediction`, pld serve --no-pld (--plain: plain decoding, the same answer), and
llama.cpp's server (which takes no prediction), alternated,
--repeat times; decode tok/s = completion tokens / (last chunk - first chunk), medians. Then the
same requests one after another and all at once (the server's -j slots): every answer must be
the one it got alone. Then time to first token of a fresh request, twice (the second with the
model resident). Prints markdown tables and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import urllib.request
from pathlib import Path

from pld_cli.tasks.prompts import Task, messages

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "edit"


def stream(url: str, body: dict) -> dict:
    """One streamed chat completion: its text, token count, and first/last chunk times."""
    body = body | {"stream": True, "stream_options": {"include_usage": True}}
    request = urllib.request.Request(
        f"{url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    start, first, last, pieces, usage, chunks = time.perf_counter(), None, None, [], None, 0
    with urllib.request.urlopen(request, timeout=600) as reply:
        for line in reply:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: ") :])
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices", []):
                text = (choice.get("delta") or {}).get("content")
                if text:
                    now = time.perf_counter()
                    first, last, chunks = first or now, now, chunks + 1
                    pieces.append(text)
    tokens = usage["completion_tokens"] if usage else chunks  # llama.cpp: a token a chunk
    details = (usage or {}).get("completion_tokens_details") or {}
    return dict(
        text="".join(pieces),
        tokens=tokens,
        ttft=(first or time.perf_counter()) - start,
        decode_s=(last or start) - (first or start),
        accepted=details.get("accepted_prediction_tokens"),
        rejected=details.get("rejected_prediction_tokens"),
    )


def edit_requests(items: int, max_tokens: int) -> list[tuple[str, dict, str]]:
    """(sample id, request body, the file) for the first `items` sample edits."""
    rows = [json.loads(line) for line in (SAMPLES / "manifest.jsonl").read_text().splitlines()]
    out = []
    for row in rows[:items]:
        document = (SAMPLES / row["file"]).read_text()
        task = Task("edit", document, row["instruction"], row["file"])
        body = dict(messages=messages(task), max_tokens=max_tokens, temperature=0)
        out.append((row["id"], body, document))
    return out


def rate(result: dict) -> float:
    return (result["tokens"] - 1) / result["decode_s"] if result["decode_s"] > 0 else 0.0


def edits_table(args, requests) -> list[dict]:
    rows = []
    for name, body, document in requests:
        sides = {"pld": [], "pld + prediction": [], "plain": [], "llama.cpp": []}
        for _ in range(args.repeat):
            sides["pld"].append(stream(args.pld, body | {"model": args.model}))
            predicted = body | {"model": args.model}
            predicted["prediction"] = {"type": "content", "content": document}
            sides["pld + prediction"].append(stream(args.pld, predicted))
            if args.plain:
                sides["plain"].append(stream(args.plain, body | {"model": args.model}))
            if args.llama:
                sides["llama.cpp"].append(stream(args.llama, body))
        row = dict(item=name)
        for side, results in sides.items():
            if results:
                row[side] = statistics.median(rate(r) for r in results)
                row[f"{side} tokens"] = results[0]["tokens"]
        texts = {r["text"] for side in ("pld", "pld + prediction", "plain") for r in sides[side]}
        row["same with prediction"] = len(texts) == 1  # and as plain decoding, where measured
        row["llama.cpp same text"] = bool(sides["llama.cpp"]) and (
            sides["llama.cpp"][0]["text"] == sides["pld"][0]["text"]
        )
        row["kept/rejected"] = (
            sides["pld + prediction"][0]["accepted"],
            sides["pld + prediction"][0]["rejected"],
        )
        rows.append(row)
    return rows


def together_table(args, requests) -> dict:
    bodies = [body | {"model": args.model} for _, body, _ in requests]
    start = time.perf_counter()
    alone = [stream(args.pld, body) for body in bodies]
    one_by_one = time.perf_counter() - start
    results: list[dict | None] = [None] * len(bodies)

    def run(i: int) -> None:
        results[i] = stream(args.pld, bodies[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    at_once = time.perf_counter() - start
    same = sum(a["text"] == r["text"] for a, r in zip(alone, results, strict=True))
    return dict(
        requests=len(bodies),
        tokens=sum(r["tokens"] for r in alone),
        one_by_one_s=one_by_one,
        at_once_s=at_once,
        identical=same,
    )


def first_token_table(args) -> dict:
    body = dict(
        model=args.model,
        max_tokens=8,
        temperature=0,
        messages=[{"role": "user", "content": f"Say hello. ({time.time()})"}],
    )
    return dict(first=stream(args.pld, body)["ttft"], second=stream(args.pld, body)["ttft"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pld", required=True, help="pld serve's URL")
    parser.add_argument("--plain", help="pld serve --no-pld's URL")
    parser.add_argument("--llama", help="llama.cpp's server on the same GGUF")
    parser.add_argument("--model", default="SmolLM2-135M-Instruct")
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()
    ttft = first_token_table(args)
    edits = edits_table(args, edit_requests(args.items, args.max_tokens))
    together = together_table(args, edit_requests(args.concurrent, args.max_tokens))
    print(
        "| edit | tokens | plain tok/s | pld tok/s | + prediction tok/s | kept/rejected | same "
        "| + prediction / plain | llama.cpp tok/s | + prediction / llama.cpp |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in edits:
        plain, llama = row.get("plain", 0.0), row.get("llama.cpp", 0.0)
        over = [
            f"{row['pld + prediction'] / base:.2f}x" if base else "-" for base in (plain, llama)
        ]
        print(
            f"| {row['item']} | {row['pld tokens']} | {plain:.1f} | {row['pld']:.1f} | "
            f"{row['pld + prediction']:.1f} | {row['kept/rejected']} | "
            f"{row['same with prediction']} | {over[0]} | {llama:.1f} | {over[1]} |"
        )
    print(
        f"{together['requests']} requests, {together['tokens']} tokens: one after another "
        f"{together['one_by_one_s']:.1f} s, all at once {together['at_once_s']:.1f} s, "
        f"{together['identical']}/{together['requests']} identical to alone"
    )
    print(
        f"time to first token: a fresh request {ttft['first']:.3f} s, again {ttft['second']:.3f} s"
    )
    print(json.dumps(dict(edits=edits, together=together, ttft=ttft)))


if __name__ == "__main__":
    main()
