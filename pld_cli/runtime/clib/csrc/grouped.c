/* x @ W.T for W as bytes or nibbles in groups of 32 or 16 inputs with a float32 scale and offset
   each: the weights are multiplied as integers, never converted to float. A weight is
   scale * u + offset for its byte or nibble u (Q8_0's symmetric layout: offset = -128 scale), so
   each GGUF block type maps onto one of the four layouts exactly (loading/gguf_blocks.py).

   Layout: outputs in blocks of 16, each block's groups in order, each group as group_dots.h lays
   it out (8 bits: [group / 4][16 outputs][4 inputs], one 64-byte line holding four consecutive
   inputs of 16 outputs; 4 bits: half that). Scales and offsets are [blocks][inputs / group][16
   outputs]. The last block holds the N % 16 outputs left, if any, in the same order with that
   width (so the arrays are [N, K * bits / 8] and [N, K / group] in size, nothing padded).

   A K-quant's scales may stay in the GGUF's own form (`Scales.sub_scales` set): a float32 factor
   per super-block of `super` groups (the file's d, or dmin, widened) times a small integer per
   group (its 6-bit sub-block scale or min), [blocks][groups / super][16] floats and [blocks]
   [groups][16] bytes, about a byte per group and output instead of eight. The kernel forms each
   group's scale and offset as that one float32 product, which the file's decoders also form (an
   11-bit float16 times a 6- or 8-bit integer: exact), so the bits are those of the stored form.

   Each input row is rounded, per group, to whole steps X = x / a with |X| <= 127 (a: the group's
   largest |x| / 127), one signed byte each, as llama.cpp rounds its activations for its 4- and
   8-bit types (docs/batching.md, "Inputs as bytes: taken", measures the choice against 16-bit
   steps). Over a group each output gets the exact integer u . X, however the instruction set
   computes it (group_dots.h: vpdpbusd, vpmaddubsw, vpmaddwd or plain C); then one conversion to
   float, one scale (the group's weight scales times a) and two multiply-adds per group and output (the offsets add offset times a
   times the group's sum of X), in simd.h's lane-wise operations. So each output of each row is
   computed from that row and the weights alone, group after group in order, with the same bits on
   every variant, whatever the number of rows or threads: a verify pass gives each row what a
   one-position pass gives it. */

#include <stdint.h>
#include <stdlib.h>

#include "decoder.h"
#include "group_dots.h"
#include "simd.h"
#include "spread.h"

#define LIMIT 127.0f /* the largest |X|: a signed byte */

/* Row x [K] as steps X (`steps` [K] signed bytes); per group [K / group]: the step a and a * the
   group's sum of X (t). */
static void split_row(const float* x, int64_t K, int group, int8_t* steps, float* a, float* t) {
  for (int64_t g = 0; g < K / group; g++) {
    vf16 x0 = vf_load(x + g * group);
    vf16 x1 = group == 32 ? vf_load(x + g * group + 16) : vf_zero();
    float top = vf_max_all(vf_max(vf_abs(x0), vf_abs(x1)));
    float step = top > 0 ? top / LIMIT : 1.0f;
    float whole[MAX_GROUP];
    vf_store(whole, vf_round(vf_div(x0, vf_set1(step))));
    vf_store(whole + 16, vf_round(vf_div(x1, vf_set1(step))));
    int32_t sum = keep_steps(whole, group, steps + g * group);
    a[g] = step;
    t[g] = step * (float)sum;
  }
}

/* Group g's scales and offsets for a block's `width` outputs: as stored, or (`factored`) each its
   super-block's factor times the group's byte. */
ALWAYS_INLINE void group_scales(Scales sc, int64_t g, int width, int group, int factored,
                                vf16* scale, vf16* offset) {
  if (!factored) {
    *scale = vf_load_n(sc.scales + g * width, width);
    *offset = vf_load_n(sc.offsets + g * width, width);
    return;
  }
  const int64_t f = g / (SUPER_VALUES / group); /* a shift: group is a constant here */
  *scale = vf_mul(vf_load_n(sc.scales + f * width, width), vf_from_i8_n(sc.sub_scales + g * width, width));
  *offset = vf_mul(vf_load_n(sc.offsets + f * width, width), vf_from_i8_n(sc.sub_offsets + g * width, width));
}

/* One block of `width` outputs (16, or fewer in the last block) for `rows` (up to ROWS) rows of
   the split input: y [rows, N] at the block's first output. `sc`: the block's scales (its own
   arrays, at the block's start). */
ALWAYS_INLINE void tile(const uint8_t* w, Scales sc, int64_t K, const int8_t* steps,
                        const float* a, const float* t, float* y, int64_t N, int width, int rows,
                        int group, int bits, int factored) {
  const int64_t G = K / group;
  vf16 acc[ROWS];
  for (int i = 0; i < rows; i++) acc[i] = vf_zero();
  for (int64_t g = 0; g < G; g++) {
    int32_t dots[ROWS][BLOCK] __attribute__((aligned(64)));
    group_dots(w + g * group * width * bits / 8, width, group, bits, steps + g * group, K, rows,
               dots);
    vf16 sv, ov;
    group_scales(sc, g, width, group, factored, &sv, &ov);
    for (int i = 0; i < rows; i++) {
      vf16 scale = vf_mul(sv, vf_set1(a[i * G + g]));
      acc[i] = vf_muladd(vf_from_i32(dots[i]), scale, acc[i]);
      acc[i] = vf_muladd(ov, vf_set1(t[i * G + g]), acc[i]);
    }
  }
  for (int i = 0; i < rows; i++) vf_store_n(y + i * N, acc[i], width);
}

#define TILE_ARGS                                                                     \
  const uint8_t *w, Scales sc, int64_t K, const int8_t *steps, const float *a, const float *t,  \
      float *y, int64_t N, int width
#define TILE_PASS w, sc, K, steps, a, t, y, N, width
typedef void (*Tile)(TILE_ARGS);

/* One copy per row count, layout and form of the scales, so each keeps its accumulators in
   registers and its loops unrolled; ROWS_OF(group, bits, f) lists them by row count. */
#define TILE(rows, group, bits, f)                                                        \
  static __attribute__((noinline)) void tile_##rows##_##group##_##bits##_##f(TILE_ARGS) { \
    tile(TILE_PASS, rows, group, bits, f);                                                \
  }
#define TILES(group, bits, f) \
  TILE(1, group, bits, f) TILE(2, group, bits, f) TILE(3, group, bits, f) TILE(4, group, bits, f)
#define ROWS_OF(group, bits, f)                                                               \
  {tile_1_##group##_##bits##_##f, tile_2_##group##_##bits##_##f, tile_3_##group##_##bits##_##f, \
   tile_4_##group##_##bits##_##f}
_Static_assert(ROWS == 4, "ROWS_OF lists a tile per row count up to ROWS");
#define LAYOUTS(f) TILES(32, 8, f) TILES(32, 4, f) TILES(16, 8, f) TILES(16, 4, f)
#define LAYOUT_ROWS(f) ROWS_OF(32, 8, f), ROWS_OF(32, 4, f), ROWS_OF(16, 8, f), ROWS_OF(16, 4, f)
LAYOUTS(0)
LAYOUTS(1)

/* The tiles of a layout and form of the scales, by row count - 1; NULL for a layout there is
   none of. */
static const Tile* tiles_of(int group, int bits, int factored) {
  static const Tile tiles[8][ROWS] = {LAYOUT_ROWS(0), LAYOUT_ROWS(1)};
  if ((group != 32 && group != 16) || (bits != 8 && bits != 4)) return NULL;
  return tiles[factored * 4 + (group == 16) * 2 + (bits == 4)];
}

/* The scales of output block b, for G groups: its part of each array. */
static Scales block_scales(Scales all, int64_t b, int64_t G) {
  const int64_t S = all.sub_scales ? all.super : 1;
  Scales block = {all.scales + b * (G / S) * BLOCK, all.offsets + b * (G / S) * BLOCK, NULL, NULL,
                  all.super};
  if (all.sub_scales) {
    block.sub_scales = all.sub_scales + b * G * BLOCK;
    block.sub_offsets = all.sub_offsets + b * G * BLOCK;
  }
  return block;
}

/* y [M, N] = x [M, K] @ W.T for W [N, K] as packed bytes or nibbles (above) in groups of `group`
   inputs with scales and offsets (its bias is not added: decoder.c's product adds it). Returns
   0, -1 where memory for the split input could not be had, -2 for a layout there is none of, K
   not a multiple of its group or, for the K-quants' form, of their super-blocks of SUPER_VALUES
   (`super` must be SUPER_VALUES / group). */
int grouped_mm(const float* x, int64_t M, const Matrix* w, float* y) {
  return grouped_mm_into(x, M, w, y, w->rows);
}

/* grouped_mm with y's rows `stride` floats apart (a part of a wider product's rows). */
int grouped_mm_into(const float* x, int64_t M, const Matrix* w, float* y, int64_t stride) {
  const uint8_t* q = w->values;
  const Scales scales = w->scales;
  const int64_t N = w->rows, K = w->cols, group = w->group, bits = w->bits;
  const int factored = scales.sub_scales != NULL;
  const Tile* tiles = tiles_of((int)group, (int)bits, factored);
  if (!tiles || K <= 0 || K % group != 0 || N <= 0 || M < 0 || stride < N) return -2;
  if (factored && (scales.super * group != SUPER_VALUES || K % SUPER_VALUES != 0)) return -2;
  if (M == 0) return 0;
  const int64_t G = K / group, blocks = (N + BLOCK - 1) / BLOCK;
  int8_t* steps = malloc(M * K);
  float* a = malloc(sizeof(float) * M * G);
  float* t = malloc(sizeof(float) * M * G);
  int ok = steps && a && t;
  if (ok) {
#pragma omp parallel for schedule(static) if (M >= SPREAD_ROWS)
    for (int64_t m = 0; m < M; m++) /* rows apart: each row's steps its own */
      split_row(x + m * K, K, (int)group, steps + m * K, a + m * G, t + m * G);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
      Scales sc = block_scales(scales, b, G);
      int width = N - b * BLOCK < BLOCK ? (int)(N - b * BLOCK) : BLOCK;
      for (int64_t m = 0; m < M; m += ROWS) {
        int rows = M - m < ROWS ? (int)(M - m) : ROWS;
        tiles[rows - 1](q + b * BLOCK * K * bits / 8, sc, K, steps + m * K, a + m * G,
                        t + m * G, y + m * stride + b * BLOCK, stride, width);
      }
    }
  }
  free(steps);
  free(a);
  free(t);
  return ok ? 0 : -1;
}
