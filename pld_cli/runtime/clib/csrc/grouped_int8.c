/* x @ W.T for W as bytes in groups of 32 inputs with a float32 scale and offset each, with AVX-512
   VNNI: the weights are multiplied as bytes, never converted to float. A weight is
   scale * u + offset for its byte u (Q8_0's symmetric layout: offset = -128 scale).

   Layout: outputs in blocks of 16, each block's bytes as [inputs / 4][16 outputs][4 inputs], so
   one 64-byte load holds four consecutive inputs of 16 outputs, and vpdpbusd (unsigned bytes by
   signed bytes, four products summed per 32-bit lane) against four inputs broadcast adds them
   into 16 outputs at once. Scales and offsets are [blocks][inputs / 32][16 outputs]. The last
   block holds the N % 16 outputs left, if any, in the same order with that width (so the arrays
   are [N, K] and [N, K / 32] in size, nothing padded).

   Each input row is split, per group of 32, into X = x / a rounded, |X| <= 32639, and X into two
   signed base-256 digits h and l (X = 256 h + l). Over a group, eight loads and sixteen vpdpbusd
   give each of 16 outputs the exact integers u . h and u . l; 256 of the first plus the second
   is u . X exactly (below 2^29), and one conversion to float, one scale (the group's weight
   scales times a) and one multiply-add per group give all 16 outputs their part; the offsets add
   offset times a times the group's sum of X. The float work is per group and 16 outputs, not per
   four inputs.

   So each output of each row is computed from that row and the weights alone, group after group
   in order, whatever the number of rows or threads: a verify pass gives each row what a
   one-position pass gives it. The input's rounding to 16 bits per group is 2^-15 of the group's
   largest value (bfloat16, which torch's int8 kernel takes, keeps 2^-8 of each value). */

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>

#define GROUP 32
#define BLOCK 16       /* outputs per block */
#define LIMIT 32639.0f /* 127 * 256 + 127: the largest |X| whose two digits fit a signed byte */
#define ROWS 4         /* input rows per tile */
#define AHEAD 8        /* groups prefetched: faster one-row reads, docs/design-measurements.md */

/* Row x [K] as digits h, l [K]; per group [K / 32]: the step a and a * the group's sum of X (t). */
static void split_row(const float* x, int64_t K, int8_t* h, int8_t* l, float* a, float* t) {
  for (int64_t g = 0; g < K / GROUP; g++) {
    __m512 x0 = _mm512_loadu_ps(x + g * GROUP), x1 = _mm512_loadu_ps(x + g * GROUP + 16);
    float top = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    float step = top > 0 ? top / LIMIT : 1.0f;
    __m512i sum = _mm512_setzero_si512();
    for (int half = 0; half < 2; half++) {
      __m512 v = _mm512_div_ps(half ? x1 : x0, _mm512_set1_ps(step));
      __m512i X = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      __m512i hi = _mm512_srai_epi32(_mm512_add_epi32(X, _mm512_set1_epi32(128)), 8);
      __m512i lo = _mm512_sub_epi32(X, _mm512_slli_epi32(hi, 8));
      _mm_storeu_si128((__m128i*)(h + g * GROUP + 16 * half), _mm512_cvtepi32_epi8(hi));
      _mm_storeu_si128((__m128i*)(l + g * GROUP + 16 * half), _mm512_cvtepi32_epi8(lo));
      sum = _mm512_add_epi32(sum, X);
    }
    a[g] = step;
    t[g] = step * (float)_mm512_reduce_add_epi32(sum);
  }
}

/* One block of `width` outputs (16, or fewer in the last block; `lanes` masks them) for rows
   [mb] (up to ROWS) of the split input. */
static inline __attribute__((always_inline)) void tile(
    const uint8_t* w, const float* s, const float* o, int64_t K, const int8_t* h, const int8_t* l,
    const float* a, const float* t, float* y, int64_t N, __mmask16 lanes, int mb) {
  const int64_t G = K / GROUP, width = __builtin_popcount(lanes);
  __m512 acc[ROWS];
  for (int i = 0; i < mb; i++) acc[i] = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; g++) {
    __m512i high[ROWS], low[ROWS];
    for (int i = 0; i < mb; i++) high[i] = low[i] = _mm512_setzero_si512();
    const uint8_t* wg = w + g * GROUP * width;
    for (int line = 0; line < GROUP * BLOCK / 64; line++)
      _mm_prefetch((const char*)(wg + AHEAD * GROUP * width + 64 * line), _MM_HINT_T0);
    for (int k = 0; k < GROUP / 4; k++) {
      __m512i wv = _mm512_maskz_loadu_epi32(lanes, wg + k * 4 * width);
      for (int i = 0; i < mb; i++) {
        int32_t hi, lo; /* four digits each, as one lane to broadcast */
        memcpy(&hi, h + i * K + g * GROUP + 4 * k, 4);
        memcpy(&lo, l + i * K + g * GROUP + 4 * k, 4);
        high[i] = _mm512_dpbusd_epi32(high[i], wv, _mm512_set1_epi32(hi));
        low[i] = _mm512_dpbusd_epi32(low[i], wv, _mm512_set1_epi32(lo));
      }
    }
    __m512 sv = _mm512_maskz_loadu_ps(lanes, s + g * width);
    __m512 ov = _mm512_maskz_loadu_ps(lanes, o + g * width);
    for (int i = 0; i < mb; i++) {
      __m512i exact = _mm512_add_epi32(_mm512_slli_epi32(high[i], 8), low[i]);
      __m512 scale = _mm512_mul_ps(sv, _mm512_set1_ps(a[i * G + g]));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), scale, acc[i]);
      acc[i] = _mm512_fmadd_ps(ov, _mm512_set1_ps(t[i * G + g]), acc[i]);
    }
  }
  for (int i = 0; i < mb; i++) _mm512_mask_storeu_ps(y + i * N, lanes, acc[i]);
}

#define TILE_ARGS const uint8_t *w, const float *s, const float *o, int64_t K, const int8_t *h, \
                  const int8_t *l, const float *a, const float *t, float *y, int64_t N, __mmask16 lanes
#define TILE_PASS w, s, o, K, h, l, a, t, y, N, lanes
static __attribute__((noinline)) void tile_1(TILE_ARGS) { tile(TILE_PASS, 1); }
static __attribute__((noinline)) void tile_2(TILE_ARGS) { tile(TILE_PASS, 2); }
static __attribute__((noinline)) void tile_3(TILE_ARGS) { tile(TILE_PASS, 3); }
static __attribute__((noinline)) void tile_4(TILE_ARGS) { tile(TILE_PASS, 4); }

/* y [M, N] = x [M, K] @ W.T for W as packed bytes (above) with scales and offsets, K a multiple
   of 32. Returns 0, or -1 where memory for the split input could not be had. */
int grouped_int8_mm(const float* x, int64_t M, const uint8_t* q, const float* scales,
                    const float* offsets, int64_t N, int64_t K, float* y) {
  if (M == 0) return 0;
  const int64_t G = K / GROUP, blocks = (N + BLOCK - 1) / BLOCK;
  int8_t* h = malloc(M * K);
  int8_t* l = malloc(M * K);
  float* a = malloc(sizeof(float) * M * G);
  float* t = malloc(sizeof(float) * M * G);
  int ok = h && l && a && t;
  if (ok) {
    for (int64_t m = 0; m < M; m++) split_row(x + m * K, K, h + m * K, l + m * K, a + m * G, t + m * G);
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; b++) {
      const uint8_t* w = q + b * BLOCK * K;
      const float *s = scales + b * G * BLOCK, *o = offsets + b * G * BLOCK;
      int64_t real = N - b * BLOCK < BLOCK ? N - b * BLOCK : BLOCK;
      __mmask16 lanes = (__mmask16)((1u << real) - 1);
      for (int64_t m = 0; m < M; m += ROWS) {
        int mb = M - m < ROWS ? (int)(M - m) : ROWS;
        const int8_t *hm = h + m * K, *lm = l + m * K;
        const float *am = a + m * G, *tm = t + m * G;
        float* ym = y + m * N + b * BLOCK;
        if (mb == 4) tile_4(w, s, o, K, hm, lm, am, tm, ym, N, lanes);
        else if (mb == 1) tile_1(w, s, o, K, hm, lm, am, tm, ym, N, lanes);
        else if (mb == 2) tile_2(w, s, o, K, hm, lm, am, tm, ym, N, lanes);
        else tile_3(w, s, o, K, hm, lm, am, tm, ym, N, lanes);
      }
    }
  }
  free(h);
  free(l);
  free(a);
  free(t);
  return ok ? 0 : -1;
}

#endif
