"""`--quantize auto`: the weights as the model's file holds them, through pld's fastest exact path,
chosen from the file, the device and pld's build alone (never from the memory free at launch, so
the same command runs the same weights, and gives the same output, every time):

- a GGUF on a CPU runs its own blocks (pld's C kernels): each type maps onto a grouped layout that
  holds its weights bit for bit (loading/gguf_blocks.py), 4-bit types as nibbles, so these are the
  file's own weights, read from the mapped file with no float copy made;
- a float checkpoint runs as float, as it is, and so does everything on a GPU (the quantized
  kernels run on a CPU only, for now); `--quantize int8|int4` quantizes on request;
- without pld's C kernels (no C compiler at install) a GGUF runs float32, and the reason says so;
  so does `--runtime static|dynamic` (transformers' forward, which runs float weights only).

A model whose weights, so chosen, do not fit this machine's memory is refused before loading, with
the figure: a run that cannot load is not made to fit by changing its weights behind the user.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pld_cli.runtime.names import RuntimeName
from pld_cli.runtime.native.quantized.scheme import Scheme

GIB = 2**30
FIT = 0.9  # of the memory available: the rest for the KV cache, activations and the system
# float32; int8 in groups with a float32 scale and offset per 32; int4's bfloat16 ones per 32
# (a GGUF's own blocks: measured per tensor, loading/gguf_weights.py)
BYTES_PER_PARAMETER = {None: 4.0, Scheme.INT8: 1.25, Scheme.INT4: 0.625}


@dataclass(frozen=True)
class Choice:
    """The scheme the weights run in (None: float) and why, as --verbose and --json say it."""

    scheme: Scheme | None
    why: str


def auto_choice(
    gguf: bool,
    device: str,
    kernels: str | None,
    runtime: RuntimeName | None = None,
    blocks: str | None = None,
) -> Choice:
    """auto's choice for a model from a GGUF (else a float checkpoint) on `device`; `kernels`:
    why pld's C kernels are missing, None where they are here; `runtime`: the one asked for;
    `blocks`: why the GGUF's own blocks cannot run in them (gguf_weights.blocks_refusal)."""
    if runtime not in (None, RuntimeName.NATIVE):
        return Choice(None, f"--runtime {runtime} runs transformers' forward, on float weights")
    if not gguf:
        return Choice(None, "a float checkpoint runs as float (--quantize int8 or int4 on request)")
    if device != "cpu":
        return Choice(None, "on a GPU a GGUF runs dequantized (quantized kernels: CPU only)")
    if kernels is not None:
        return Choice(None, f"a GGUF runs float32 here: pld's C kernels are missing ({kernels})")
    if blocks is not None:
        return Choice(None, f"a GGUF runs float32 here: {blocks}")
    return Choice(Scheme.GGUF, "a GGUF runs its own blocks, each type exact (--quantize auto)")


def refusal(parameters: int, scheme: Scheme | None, dtype_bytes: int, available: int) -> str | None:
    """Why a model of `parameters` weights does not fit `available` bytes under `scheme`, with
    the figure and what would fit; None where it fits."""
    per = BYTES_PER_PARAMETER[scheme] if scheme is not None else dtype_bytes
    too_large = oversize(parameters * per, available)
    if too_large is None:
        return None
    smaller = [s for s in (Scheme.INT8, Scheme.INT4) if BYTES_PER_PARAMETER[s] < per]
    fitting = [s for s in smaller if parameters * BYTES_PER_PARAMETER[s] <= FIT * available]
    hint = f"; try --quantize {fitting[0]}" if fitting else "; no quantization pld has fits it"
    return too_large + hint


def oversize(needed: float, available: int) -> str | None:
    """The figure, where `needed` bytes of weights do not fit `available` bytes; else None."""
    if needed <= FIT * available:
        return None
    return f"needs ~{needed / GIB:.1f} GiB, {available / GIB:.1f} GiB available"


def available_memory() -> int:
    """Bytes of memory available now (MemAvailable on Linux), else the machine's physical memory."""
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
