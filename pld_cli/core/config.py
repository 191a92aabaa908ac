"""What a decode is asked to do: the settings of the loop, with the one set of defaults that the
command line shows. Plain data (no torch), so `pld --help` reads them without loading anything."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 keeps every token
    seed: int | None = None  # None: fresh randomness on every run


@dataclass(frozen=True)
class DecodeConfig:
    max_new_tokens: int = 1024
    num_draft: int = 24  # k, the most draft tokens verified in one pass
    ngram_max: int = 3
    ngram_min: int = 1
    use_pld: bool = True
    draft: str = "adaptive"  # 'adaptive' | 'fixed'
    sampling: SamplingConfig = SamplingConfig()  # temperature 0: greedy
    repetition_penalty: float = 1.0  # transformers' semantics; 1 is off (core/repetition.py)
    stop_loops: bool = False  # end when the output repeats a span of its own (core/repetition.py)
    loop_span: int = 24  # tokens: about a sentence, longer than phrases a text rightly repeats

    @property
    def adaptive(self) -> bool:
        return self.use_pld and self.draft == "adaptive"

    def for_task(self, stops_at_loops: bool) -> DecodeConfig:
        """This config for a kind of task: the loop stop only where the kind takes it (a summary;
        code and edited text repeat legitimately)."""
        return dataclasses.replace(self, stop_loops=self.stop_loops and stops_at_loops)
