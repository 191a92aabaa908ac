"""The machine line: a VM's bare CPU name gets its family and model; the kernels that ran."""

from __future__ import annotations

import pytest

from pld_cli.bench import machine
from pld_cli.runtime.clib import library

# Two processors of a 2-core VM whose model name says only "AMD EPYC".
CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
flags\t\t: fpu avx512f avx512_vnni

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
"""


@pytest.fixture
def epyc(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO)
    monkeypatch.setattr(machine, "CPUINFO", cpuinfo)


def test_the_first_processors_fields_by_name():
    fields = machine.cpu_fields(CPUINFO)
    assert (fields["processor"], fields["cpu family"], fields["model"]) == ("0", "25", "17")
    assert fields["model name"] == "AMD EPYC"


def test_a_bare_name_gets_its_family_and_model(epyc):
    assert machine.cpu_name() == "AMD EPYC (family 25 model 17)"


def test_the_line_names_the_cores_the_memory_and_the_kernels_that_run(epyc, monkeypatch):
    monkeypatch.setattr(library, "variant", lambda: library.Variant.AVX2)
    line = machine.describe("cpu")
    assert line.startswith("AMD EPYC (family 25 model 17), ")
    assert " cores, " in line and " GiB" in line and line.endswith("; pld's avx2 kernels")
    monkeypatch.setattr(library, "variant", lambda: None)
    assert "kernels" not in machine.describe("cpu")


def test_without_cpuinfo_the_platforms_name(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "CPUINFO", tmp_path / "absent")
    monkeypatch.setattr(machine.platform, "processor", lambda: "arm")
    assert machine.cpu_name() == "arm"
