/* pld's C library, one translation unit: each file of variants/ includes this, compiled for its
   instruction set (setup.py), so every variant is the same source. */

#include "abi.c"
#include "decoder.c"
#include "gguf_unpack.c"
#include "grouped.c"
#include "peak.c"
#include "row_attention.c"
