"""The machine a figure was measured on, in one line: a speed means little without its CPU or GPU.

A virtual machine's /proc/cpuinfo may name its CPU only as "AMD EPYC", which covers generations
with different instructions; so the name gets the family and model numbers, and the line the
cores this process may use, the memory, and the variant of pld's C kernels that runs
(runtime/clib/library.py).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

from pld_cli.runtime.clib import library

CPUINFO = Path("/proc/cpuinfo")


def describe(device: str) -> str:
    """One line naming the machine a run on `device` ("cpu", "cuda", "cuda:1") measures."""
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    cores = len(os.sched_getaffinity(0))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    line = f"{cpu_name()}, {cores} cores, {memory:.0f} GiB"
    kernels = library.variant()
    return f"{line}; pld's {kernels} kernels" if kernels else line


def cpu_name() -> str:
    """The CPU's model name, with its family and model numbers where /proc/cpuinfo has them."""
    fields = cpu_fields(CPUINFO.read_text() if CPUINFO.is_file() else "")
    name = fields.get("model name") or platform.processor() or "unknown CPU"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']} model {fields['model']})"
    return name


def cpu_fields(cpuinfo: str) -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo's text, by name."""
    fields: dict[str, str] = {}
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    return fields
