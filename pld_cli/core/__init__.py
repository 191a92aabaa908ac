"""The idea itself, with no model library and no UI: copy drafts from an n-gram index, choose how
many to verify, verify them greedily or by speculative sampling, and count what happened.

Imports torch at most (never transformers, rich, typer or tqdm; tests/core/test_imports.py checks),
so it is tested with scripted runtimes, as vLLM tests its n-gram proposer.
"""
