"""transformers' own forward as a runtime: on a static cache (`static`, CUDA graphs in `graphs`)
or a growing one (`dynamic`), with pld's CPU kernels swapped in where they pay (`cpu_kernels`).
Everything version-dependent or private of transformers is in `compat/`."""
