"""How many documents a batch holds: as many as -j asks where their caches fit, fewer (and why)
where they do not; none where the weights are float (not batch-invariant)."""

import pytest
from native_families import FAMILIES

from pld_cli.runtime.batch.opening import cache_bytes, open_batch
from pld_cli.runtime.clib import library
from pld_cli.runtime.native.quantized.quantize import quantize_model
from pld_cli.runtime.native.runtime import NativeRuntime

needs_kernel = pytest.mark.skipif(
    library.kernel("decode_rows") is None, reason=f"no C kernel: {library.unavailable()}"
)
GIB = 2**30


def test_float_weights_decode_one_document_at_a_time():
    batch, why = open_batch(NativeRuntime(FAMILIES["smollm2"]().eval(), 512), 4, 512, print)
    assert batch is None and "not batch-invariant" in why


@needs_kernel
def test_a_batch_holds_what_jobs_asks_or_what_fits():
    model = FAMILIES["smollm2"]().eval()
    quantize_model(model, "int8")
    runtime = NativeRuntime(model, 512)
    notes = []
    batch, why = open_batch(runtime, 4, 512, notes.append, memory=64 * GIB)
    assert (batch.regions, why) == (4, "") and "4 documents at once" in notes[0]
    region = cache_bytes(runtime, 512)
    batch, why = open_batch(runtime, 4, 512, notes.append, memory=5 * region)
    assert batch.regions == 2 and why.startswith("2 at once")
    assert batch.runtime.keys.shape[2] == 2 * batch.runtime.span
