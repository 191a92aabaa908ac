"""One prefill rate in this process, as `pld bench --concurrency` measures it (a 1,000-token
prompt of the sample corpora's prompts, median of 3, beside the C library's peak), for
before/after tables across checkouts: run it once per checkout, alternating.

    PYTHONPATH=CHECKOUT .venv/bin/python scripts/prefill_rate.py [MODEL]   # default model: none

Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pld_cli.bench import prefill
from pld_cli.bench.corpus import load_corpora
from pld_cli.core.config import DecodeConfig
from pld_cli.loading.models import ModelSpec, load_model
from pld_cli.tasks.prompts import prompt_ids

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def main() -> None:
    spec = ModelSpec(name=sys.argv[1] if len(sys.argv) > 1 else None)
    loaded = load_model(spec)
    items = load_corpora([SAMPLES / "edit", SAMPLES / "summarize"])
    prompts = [prompt_ids(loaded.tokenizer, item.task) for item in items]
    rate = prefill.measure(loaded, prompts, DecodeConfig())
    if rate is None:
        sys.exit("the model's runtime is not pld's own: its prefill is not measured")
    print(json.dumps(dict(checkout=prefill.__file__, **rate.as_dict())))


if __name__ == "__main__":
    main()
