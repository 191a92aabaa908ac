"""pld's C kernels, built when pld is installed: one library per instruction set, from the same
source (pld_cli/runtime/clib/csrc/variants/), each an optional extension, so a machine without a C
compiler (or without one for a variant's instructions) still installs pld and runs torch's path.
-ffp-contract=off keeps the float work as written, so every variant gives the same bits."""

import glob
import platform

from setuptools import Extension, setup

CSRC = "pld_cli/runtime/clib/csrc"
COMMON = ["-O3", "-ffp-contract=off", "-fopenmp", "-std=gnu11"]
X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
VARIANTS = {"portable": []}
if X86:
    VARIANTS["avx2"] = ["-mavx2"]
    VARIANTS["avx_vnni"] = ["-mavx2", "-mavxvnni"]
    VARIANTS["avx512_vnni"] = ["-mavx512f", "-mavx512bw", "-mavx512vnni", "-mavx2"]


def variant(name: str, flags: list[str]) -> Extension:
    return Extension(
        f"pld_cli.runtime.clib._{name}",
        sources=[f"{CSRC}/variants/{name}.c"],
        depends=sorted(glob.glob(f"{CSRC}/*.[ch]")),  # every part kernels.c includes
        extra_compile_args=COMMON + flags,
        extra_link_args=["-fopenmp"],
        libraries=["m"],
        optional=True,
    )


setup(ext_modules=[variant(name, flags) for name, flags in VARIANTS.items()])
