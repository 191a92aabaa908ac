"""What a pass costs on this machine and which kernel path runs it: measured, then chosen.

`costs`: the pass-cost table t(q), timed on the loaded model and cached per model and machine.
`paths`: a runtime's kernel paths per pass size, as the timing chose them.
"""
