"""A causal LM plus its KV cache, implementing core/runtime.py's `Runtime` protocol.

native, static and dynamic are the runtimes; kernels/cpu_kernels and the graph modules speed
their passes up; costs.py measures what a pass costs; opening.py picks which runtime runs; the
compat package holds transformers' private and version-dependent API.
"""
