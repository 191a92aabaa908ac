"""`--quantize auto`: float weights where they fit this machine's memory, quantized where not.

Measured on the default model (README, "Quantized weights"): int8 makes a pass cheaper. In groups
(pld's kernel, where it is built) it kept every next-token choice of float32's on the samples, per
row (torch's kernel) it moved about 2% of them (int4 0.6%). Agreement on 1,280 positions is not
identity, so on a machine where float32 fits, auto keeps float32 and the output is the model's
own. A model whose float32 weights do not
fit the memory available now (a 7B model is 28 GB) is quantized to int8, or to int4 where int8 does
not fit either: a quantized model that runs beats one that cannot load. On a GPU the weights stay
as they are (quantized kernels run on a CPU only, for now).
"""

from __future__ import annotations

import os
from pathlib import Path

FIT = 0.75  # of the memory available: the rest for the KV cache, activations and the system
# float32; int8 in groups with a float32 scale and offset per 32 (int4's bfloat16 ones left out)
BYTES_PER_PARAMETER = {"none": 4.0, "int8": 1.25, "int4": 0.5}


def auto_quantize(parameters: int, available: int, device: str) -> str:
    """The quantization auto picks for a model of `parameters` weights, `available` bytes free."""
    if device != "cpu":
        return "none"
    for kind in ("none", "int8"):
        if parameters * BYTES_PER_PARAMETER[kind] <= FIT * available:
            return kind
    return "int4"


def available_memory() -> int:
    """Bytes of memory available now (MemAvailable on Linux), else the machine's physical memory."""
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
