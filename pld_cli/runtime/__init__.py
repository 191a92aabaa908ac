"""A causal LM plus its KV cache, as the decode loop sees it: prefill, forward, rollback.

base.py holds the protocol; dynamic and static caches, CUDA-graph replay and the CPU kernels are
its implementations and accelerations; costs.py measures what a pass costs; choice.py picks one;
compat.py is the one place that touches transformers' internals.
"""
