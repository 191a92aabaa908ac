"""`--json`: one record per file, its stats (and the seed, when sampled), and one per call of a
long document."""

from __future__ import annotations

from pld_cli.core.config import SamplingConfig
from pld_cli.tasks.engine import Engine
from pld_cli.tasks.longdoc import Part
from pld_cli.tasks.result import Result


def as_json(
    result: Result,
    engine: Engine,
    plain: Result | None,
    parts: list[Part],
    file: str,
    sampling: SamplingConfig | None = None,
) -> dict:
    out = {
        "file": file,
        "text": result.text,
        "model": engine.name,
        "weights": engine.weights,
        "stats": result.stats.as_dict(),
        "stop": result.stats.stop,
    }
    if sampling is not None and sampling.temperature > 0:
        out["seed"] = sampling.seed  # --seed with it repeats the text
    if plain is not None:
        out["compare"] = {
            "plain": plain.stats.as_dict(),
            "speedup": round(result.speedup_over(plain), 3),
            "identical": plain.token_ids == result.token_ids,
        }
    if len(parts) > 1:
        out["chunks"] = [part_json(part) for part in parts]
        out["calls"] = len(parts)
    return out


def part_json(part: Part) -> dict:
    out = {
        "index": part.index,
        "round": part.round,
        "where": part.where,
        "chars": part.chars,
        "prompt_tokens": part.result.stats.prompt_tokens,
        "stats": part.result.stats.as_dict(),
        "stop": part.result.stats.stop,
    }
    if part.plain is not None:
        out["identical"] = part.plain.token_ids == part.result.token_ids
    return out
