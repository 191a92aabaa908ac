/* pld's kernels for avx_vnni (flags in setup.py). */
#include "../kernels.c"
