"""The tokenizer of a model a server serves: pld builds its prompts and counts its tokens.

Found, in this order: `--tokenizer` (a folder or hub id); the model's path as the server reports
it (`root` in /v1/models: on this machine when the server runs here); the served name as a hub id
or folder. The context is the server's own (`max_model_len`, vLLM), else the tokenizer's.
"""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer, GenerationConfig

from pld_cli.errors import PldError
from pld_cli.loading.models import from_pretrained
from pld_cli.runtime.context import UNKNOWN

LARGEST_SANE_CONTEXT = 10_000_000  # tokenizers without a limit say 1e30


def served_tokenizer(
    name: str, entry: dict, choice: str | None
) -> tuple[object, frozenset[int], int]:
    """(tokenizer, EOS ids, context) of the served model `name`, its /v1/models `entry`."""
    root = entry.get("root")
    candidates = [choice] if choice else [c for c in (root, name) if isinstance(c, str) and c]
    tokenizer, source = None, None
    for candidate in dict.fromkeys(candidates):
        try:
            tokenizer, source = from_pretrained(AutoTokenizer, candidate), candidate
            break
        except PldError:
            continue
    if tokenizer is None:
        tried = ", ".join(candidates)
        raise PldError(
            f"cannot find the tokenizer of the served model {name} (tried {tried}); "
            "name a folder or hub id with --tokenizer"
        )
    context = entry.get("max_model_len")
    if not isinstance(context, int) or context <= 0:
        limit = getattr(tokenizer, "model_max_length", 0) or 0
        context = int(limit) if 0 < limit < LARGEST_SANE_CONTEXT else UNKNOWN
    return tokenizer, eos_ids(tokenizer, source), context


def eos_ids(tokenizer, source: str) -> frozenset[int]:
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    if Path(source).is_dir():
        try:
            found = GenerationConfig.from_pretrained(source).eos_token_id
        except OSError:
            found = None
        ids |= {found} if isinstance(found, int) else set(found or [])
    return frozenset(ids)
