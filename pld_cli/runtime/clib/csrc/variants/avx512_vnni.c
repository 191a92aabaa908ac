/* pld's kernels for avx512_vnni (flags in setup.py). */
#include "../kernels.c"
