/* pld's kernels for portable (flags in setup.py). */
#include "../kernels.c"
