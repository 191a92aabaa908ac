/* pld's kernels for avx2 (flags in setup.py). */
#include "../kernels.c"
