"""How close pld's C kernels come to the float model they quantize: top-1 agreement and mean
KL(float || kernels) of the next-token distribution, teacher-forced over held-out text.

The float model is the same GGUF's weights dequantized to float32 and run by transformers
(`--quantize none`): only the kernels' rounding of the activations (and float32 order) differs,
so running this in two checkouts (PYTHONPATH) compares two activation precisions. The protocol
is llama-perplexity's: the text in chunks of --ctx tokens, each scored on its second half, so
its `--kl-divergence` figures on the same file stand beside these.

    python scripts/precision_table.py [FILE.gguf] [--ctx 512] [--positions 3000]

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import torch.nn.functional as F

from pld_cli.bench.machine import cpu_name
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.runtime.clib import library
from pld_cli.runtime.native.runtime import NativeRuntime

HELDOUT = Path(__file__).resolve().parent.parent / "heldout"


def heldout_text() -> str:
    files = sorted(p for p in HELDOUT.rglob("*") if p.is_file() and p.suffix != ".jsonl")
    return "\n\n".join(p.read_text() for p in files)


def chunks(ids: list[int], ctx: int, positions: int) -> list[list[int]]:
    count = min(len(ids) // ctx, -(-positions // (ctx // 2)))
    return [ids[i * ctx : (i + 1) * ctx] for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?", default=None)
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--positions", type=int, default=3000)
    args = parser.parse_args()
    kernels = load_model(ModelSpec(name=args.model, device="cpu"))
    plain = load_model(ModelSpec(name=args.model, device="cpu", quantize="none"))
    ids = kernels.tokenizer(heldout_text())["input_ids"]
    runtime = NativeRuntime(kernels.model, args.ctx + 1)
    agree, kl, scored = 0, 0.0, 0
    for chunk in chunks(ids, args.ctx, args.positions):
        runtime.rollback(0)
        got = runtime.forward(chunk)[args.ctx // 2 :].float()
        with torch.no_grad():
            want = plain.model(torch.tensor([chunk])).logits[0, args.ctx // 2 :].float()
        p, q = F.log_softmax(want, -1), F.log_softmax(got, -1)
        kl += float(F.kl_div(q, p, log_target=True, reduction="sum"))
        agree += int((want.argmax(-1) == got.argmax(-1)).sum())
        scored += len(got)
    print(
        json.dumps(
            {
                "cpu": cpu_name(),
                "variant": library.variant().value,
                "model": kernels.name,
                "positions": scored,
                "top1_agreement": round(agree / scored, 4),
                "mean_kl": round(kl / scored, 6),
            }
        )
    )


if __name__ == "__main__":
    main()
