/* x @ W.T for W as bytes in groups of 32 inputs with a float32 scale and offset each: the weights
   are multiplied as integers, never converted to float. A weight is scale * u + offset for its
   byte u (Q8_0's symmetric layout: offset = -128 scale).

   Layout: outputs in blocks of 16, each block's bytes as [inputs / 4][16 outputs][4 inputs], so
   one 64-byte line holds four consecutive inputs of 16 outputs. Scales and offsets are
   [blocks][inputs / 32][16 outputs]. The last block holds the N % 16 outputs left, if any, in the
   same order with that width (so the arrays are [N, K] and [N, K / 32] in size, nothing padded).

   Each input row is rounded, per group of 32, to whole steps X = x / a with |X| <= 32639 (a: the
   group's largest |x| / 32639). Over a group each output gets the exact integer u . X, however
   the instruction set computes it (group_dots.h: VNNI on two signed base-256 digits of X, AVX2
   and plain C on X as 16 bits); then one conversion to float, one scale (the group's weight
   scales times a) and two multiply-adds per group and output (the offsets add offset times a
   times the group's sum of X), in simd.h's lane-wise operations. So each output of each row is
   computed from that row and the weights alone, group after group in order, with the same bits on
   every variant, whatever the number of rows or threads: a verify pass gives each row what a
   one-position pass gives it. The input's rounding to 16 bits per group is 2^-15 of the group's
   largest value. */

#include <stdint.h>
#include <stdlib.h>

#include "group_dots.h"
#include "simd.h"

#define LIMIT 32639.0f /* 127 * 256 + 127: the largest |X| whose two digits fit a signed byte */

/* Row x [K] as steps X (stored as group_dots.h keeps them, `digits` [2 K] bytes); per group
   [K / 32]: the step a and a * the group's sum of X (t). */
static void split_row(const float* x, int64_t K, int8_t* digits, float* a, float* t) {
  for (int64_t g = 0; g < K / GROUP; g++) {
    vf16 x0 = vf_load(x + g * GROUP), x1 = vf_load(x + g * GROUP + 16);
    float top = vf_max_all(vf_max(vf_abs(x0), vf_abs(x1)));
    float step = top > 0 ? top / LIMIT : 1.0f;
    float steps[GROUP];
    vf_store(steps, vf_round(vf_div(x0, vf_set1(step))));
    vf_store(steps + 16, vf_round(vf_div(x1, vf_set1(step))));
    int32_t X[GROUP], sum = 0;
    for (int e = 0; e < GROUP; e++) sum += X[e] = (int32_t)steps[e];
    keep_steps(X, digits + 2 * g * GROUP);
    a[g] = step;
    t[g] = step * (float)sum;
  }
}

/* One block of `width` outputs (16, or fewer in the last block) for `rows` (up to ROWS) rows of
   the split input: y [rows, N] at the block's first output. */
static inline __attribute__((always_inline)) void tile(const uint8_t* w, const float* s,
                                                       const float* o, int64_t K,
                                                       const int8_t* digits, const float* a,
                                                       const float* t, float* y, int64_t N,
                                                       int width, int rows) {
  const int64_t G = K / GROUP;
  vf16 acc[ROWS];
  for (int i = 0; i < rows; i++) acc[i] = vf_zero();
  for (int64_t g = 0; g < G; g++) {
    int32_t dots[ROWS][BLOCK] __attribute__((aligned(64)));
    group_dots(w + g * GROUP * width, width, digits + 2 * g * GROUP, 2 * K, rows, dots);
    vf16 sv = vf_load_n(s + g * width, width), ov = vf_load_n(o + g * width, width);
    for (int i = 0; i < rows; i++) {
      vf16 scale = vf_mul(sv, vf_set1(a[i * G + g]));
      acc[i] = vf_muladd(vf_from_i32(dots[i]), scale, acc[i]);
      acc[i] = vf_muladd(ov, vf_set1(t[i * G + g]), acc[i]);
    }
  }
  for (int i = 0; i < rows; i++) vf_store_n(y + i * N, acc[i], width);
}

#define TILE_ARGS                                                                         \
  const uint8_t *w, const float *s, const float *o, int64_t K, const int8_t *digits, \
      const float *a, const float *t, float *y, int64_t N, int width
#define TILE_PASS w, s, o, K, digits, a, t, y, N, width
/* One copy per row count, so each keeps its accumulators in registers. */
static __attribute__((noinline)) void tile_1(TILE_ARGS) { tile(TILE_PASS, 1); }
static __attribute__((noinline)) void tile_2(TILE_ARGS) { tile(TILE_PASS, 2); }
#if ROWS == 4
static __attribute__((noinline)) void tile_3(TILE_ARGS) { tile(TILE_PASS, 3); }
static __attribute__((noinline)) void tile_4(TILE_ARGS) { tile(TILE_PASS, 4); }
#endif

static void tile_rows(int rows, TILE_ARGS) {
  if (rows == 1) return tile_1(TILE_PASS);
  if (rows == 2) return tile_2(TILE_PASS);
#if ROWS == 4
  if (rows == 3) return tile_3(TILE_PASS);
  tile_4(TILE_PASS);
#endif
}

/* y [M, N] = x [M, K] @ W.T for W as packed bytes (above) with scales and offsets. Returns 0, -1
   where memory for the split input could not be had, -2 for K not a multiple of 32. */
int grouped_int8_mm(const float* x, int64_t M, const uint8_t* q, const float* scales,
                    const float* offsets, int64_t N, int64_t K, float* y) {
  if (K <= 0 || K % GROUP != 0 || N <= 0 || M < 0) return -2;
  if (M == 0) return 0;
  const int64_t G = K / GROUP, blocks = (N + BLOCK - 1) / BLOCK;
  int8_t* digits = malloc(2 * M * K);
  float* a = malloc(sizeof(float) * M * G);
  float* t = malloc(sizeof(float) * M * G);
  int ok = digits && a && t;
  if (ok) {
    for (int64_t m = 0; m < M; m++) split_row(x + m * K, K, digits + 2 * m * K, a + m * G, t + m * G);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
      const uint8_t* w = q + b * BLOCK * K;
      const float *s = scales + b * G * BLOCK, *o = offsets + b * G * BLOCK;
      int width = N - b * BLOCK < BLOCK ? (int)(N - b * BLOCK) : BLOCK;
      for (int64_t m = 0; m < M; m += ROWS) {
        int rows = M - m < ROWS ? (int)(M - m) : ROWS;
        tile_rows(rows, w, s, o, K, digits + 2 * m * K, a + m * G, t + m * G, y + m * N + b * BLOCK,
                  N, width);
      }
    }
  }
  free(digits);
  free(a);
  free(t);
  return ok ? 0 : -1;
}
