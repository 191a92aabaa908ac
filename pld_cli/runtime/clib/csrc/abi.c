/* What the Python side checks before its first call (clib/library.py): the variant, the table
   layout of decoder.h, and which variants this CPU runs. */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "decoder.h"
#include "group_dots.h"

const char* pld_variant(void) { return VARIANT; }

/* The ABI version, then the size and every field offset of Scales, Matrix, Block, Decoder and Segment, in
   declaration order, into out [n]; returns how many values there are. */
int64_t pld_abi(int64_t* out, int64_t n) {
  const int64_t layout[] = {
      PLD_ABI_VERSION,
      sizeof(Scales),
      offsetof(Scales, scales),
      offsetof(Scales, offsets),
      offsetof(Scales, sub_scales),
      offsetof(Scales, sub_offsets),
      offsetof(Scales, super),
      sizeof(Matrix),
      offsetof(Matrix, values),
      offsetof(Matrix, scales),
      offsetof(Matrix, bias),
      offsetof(Matrix, rest),
      offsetof(Matrix, rows),
      offsetof(Matrix, cols),
      offsetof(Matrix, group),
      offsetof(Matrix, bits),
      sizeof(Block),
      offsetof(Block, attention_norm),
      offsetof(Block, q_norm),
      offsetof(Block, k_norm),
      offsetof(Block, mlp_norm),
      offsetof(Block, qkv),
      offsetof(Block, out),
      offsetof(Block, gate_up),
      offsetof(Block, down),
      sizeof(Decoder),
      offsetof(Decoder, layers),
      offsetof(Decoder, hidden),
      offsetof(Decoder, heads),
      offsetof(Decoder, kv_heads),
      offsetof(Decoder, head_dim),
      offsetof(Decoder, slots),
      offsetof(Decoder, eps),
      offsetof(Decoder, scaling),
      offsetof(Decoder, blocks),
      offsetof(Decoder, norm),
      offsetof(Decoder, keys),
      offsetof(Decoder, values),
      offsetof(Decoder, cos),
      offsetof(Decoder, sin),
      sizeof(Segment),
      offsetof(Segment, rows),
      offsetof(Segment, base),
      offsetof(Segment, start),
  };
  int64_t count = sizeof layout / sizeof layout[0];
  memcpy(out, layout, sizeof(int64_t) * (n < count ? n : count));
  return count;
}

/* Whether this CPU (and its operating system) runs a variant's instructions: asked of the
   portable library, whose own code uses none of them. */
int pld_cpu_runs(const char* variant) {
  if (strcmp(variant, "portable") == 0) return 1;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (strcmp(variant, "avx2") == 0)
    return __builtin_cpu_supports("avx2");
  if (strcmp(variant, "avx-vnni") == 0)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni");
  if (strcmp(variant, "avx512-vnni") == 0)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
#endif
  return 0;
}
