"""`pld bench`'s parts: corpora, the methods compared, running them, results, their view.

The command itself is the command line's (`cli/bench.py`); nothing here imports it.
"""
