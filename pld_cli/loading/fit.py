"""`--quantize auto`: float weights where they fit this machine's memory, quantized where not.

int8 makes a pass cheaper and agreed closely with float32's next tokens on the samples
(docs/design-measurements.md), but agreement on a sample is not identity: where float32 fits, auto
keeps it and the output is the model's own. A model whose float32 weights do not fit the memory
available now is quantized to int8, or to int4 where int8 does not fit either: a quantized model
that runs beats one that cannot load. On a GPU the weights stay as they are (quantized kernels run
on a CPU only, for now).
"""

from __future__ import annotations

import os
from pathlib import Path

from pld_cli.runtime.native.quantized.scheme import Scheme

FIT = 0.75  # of the memory available: the rest for the KV cache, activations and the system
# float32; int8 in groups with a float32 scale and offset per 32 (int4's bfloat16 ones left out)
BYTES_PER_PARAMETER = {None: 4.0, Scheme.INT8: 1.25, Scheme.INT4: 0.5}


def auto_quantize(parameters: int, available: int, device: str) -> Scheme | None:
    """The scheme auto picks for a model of `parameters` weights, `available` bytes free (None:
    float weights)."""
    if device != "cpu":
        return None
    for scheme in (None, Scheme.INT8):
        if parameters * BYTES_PER_PARAMETER[scheme] <= FIT * available:
            return scheme
    return Scheme.INT4


def available_memory() -> int:
    """Bytes of memory available now (MemAvailable on Linux), else the machine's physical memory."""
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
