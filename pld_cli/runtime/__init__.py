"""A causal LM plus its KV cache, implementing core/runtime.py's `Runtime` protocol.

The runtimes, by what runs their passes:
- `native/`: pld's own forward over a cache it owns, with quantized weights in `native/quantized/`;
- `hf/`: transformers' forward (static or dynamic cache), its private API kept in `hf/compat/`;
- `clib/`: pld's C library, which both may call.
At this level: the runtime names (`names`), which one opens and why (`opening`), the model's context
(`context`), the kernels both forwards share (`kernels`), CUDA-graph capture (`graphs`), and the
pass-cost calibration that chooses a kernel path per pass size (`calibration/`).
"""
