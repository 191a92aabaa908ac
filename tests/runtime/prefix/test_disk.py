"""The disk cache of prompts: a prompt kept by one process is read bit for bit by the next; a file
of another identity is never used; a truncated, corrupt or foreign file is deleted with one
warning and never used; the files stay under the budget, the least recently used deleted."""

import os

import pytest
import torch

from pld_cli.runtime.prefix.disk import DiskPrefixes
from pld_cli.runtime.prefix.store import Prefix, as_tokens

IDENTITY = "model|weights|kernels=10|library=abc"


def prefix(ids: list[int], seed: int = 0) -> Prefix:
    generator = torch.Generator().manual_seed(seed)
    keys = torch.randn(2, 3, len(ids), 8, generator=generator)
    return Prefix(as_tokens(ids), keys, torch.randn(keys.shape, generator=generator))


@pytest.fixture
def warnings() -> list[str]:
    return []


def store(folder, warnings, identity=IDENTITY, budget=10**6) -> DiskPrefixes:
    return DiskPrefixes(folder, identity, budget, warnings.append)


def test_a_kept_prompt_is_read_back_bit_for_bit_by_another_store(tmp_path, warnings):
    kept = prefix([5, 6, 7, 8])
    store(tmp_path, warnings).keep(kept)
    count, got = store(tmp_path, warnings).match([5, 6, 7, 9, 9])
    assert count == 3 and got.tokens.tolist() == [5, 6, 7, 8]
    assert torch.equal(got.keys, kept.keys) and torch.equal(got.values, kept.values)
    assert not warnings


def test_another_identity_is_never_used(tmp_path, warnings):
    store(tmp_path, warnings).keep(prefix([5, 6, 7]))
    other = store(tmp_path, warnings, identity=IDENTITY.replace("kernels=10", "kernels=11"))
    assert other.match([5, 6, 7]) == (0, None) and other.wants([5, 6, 7])


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) - 5],  # truncated in the keys and values
        lambda data: data[:20],  # truncated in the header
        lambda data: data[:-1] + bytes([data[-1] ^ 1]),  # one bit of a value
        lambda data: b"something else entirely",
        lambda data: data.replace(b'"shape": [2, 3, 3, 8]', b'"shape": [2, 3, 9, 8]'),
    ],
)
def test_a_damaged_file_is_deleted_with_one_warning(tmp_path, warnings, damage):
    store(tmp_path, warnings).keep(prefix([5, 6, 7]))
    (path,) = tmp_path.glob("*.kv")
    path.write_bytes(damage(path.read_bytes()))
    assert store(tmp_path, warnings).match([5, 6, 7]) == (0, None)
    assert len(warnings) == 1 and "ignored" in warnings[0] and not path.exists()


def test_a_prompt_replaces_the_file_it_extends_and_old_files_go_first(tmp_path, warnings):
    one = prefix([1, 2, 3])  # keys and values of 3 positions: 1,152 bytes, and a header
    kept = store(tmp_path, warnings, budget=2500)  # room for two of 3 or 4 positions, not 3
    kept.keep(one)
    kept.keep(prefix([1, 2, 3, 4]))
    assert len(list(tmp_path.glob("*.kv"))) == 1 and not kept.wants([1, 2, 3])
    (first,) = tmp_path.glob("*.kv")
    os.utime(first, ns=(1, 1))  # the least recently used
    kept.keep(prefix([7, 8, 9]))
    assert not first.exists() and kept.match([7, 8, 9])[0] == 3
