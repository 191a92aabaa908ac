/* x @ W.T for W as bytes in groups of 32 inputs with a float32 scale and offset each, with AVX-512
   VNNI: the weights are multiplied as bytes, never converted to float. A weight is
   scale * (u - 128) + offset for its byte u (offset 0: Q8_0's symmetric layout).

   vpdpbusd multiplies unsigned bytes by signed bytes, four products per 32-bit lane. The weights
   are stored as q + 128 (unsigned); each input row is split, per group of 32, into X = x / a
   rounded, |X| <= 32639, and X into two signed base-256 digits h and l (X = 256 h + l). A lane
   then sums (q + 128) h and (q + 128) l over its four inputs; 256 of the first plus the second,
   less 128 times the lane's sum of X, is the exact integer q . X of those four inputs (below
   2^24, so exact as a float too). Each lane is scaled by its group's weight scale times a and
   summed in float32, and the lanes of an output added in one fixed order at the end; to that
   goes each group's offset times a times the group's sum of X, summed in a fixed order too.

   So each output of each row is computed from that row and the weights alone, in an order that
   depends on neither the number of rows nor the threads: a verify pass gives each row what a
   one-position pass gives it. The input's rounding to 16 bits per group is 2^-15 of the group's
   largest value (bfloat16, which torch's int8 kernel takes, keeps 2^-8 of each value). */

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <immintrin.h>

#define GROUP 32
#define LIMIT 32639.0f /* 127 * 256 + 127: the largest |X| whose two digits fit a signed byte */
#define AHEAD 16       /* weight rows prefetched ahead of the tile being read */

/* Row x [K] as digits h, l [K]; per lane [K / 4]: the step a and -128 * the lane's sum of X (c);
   per group [K / 32]: a * the group's sum of X (t). K is a multiple of 32. */
static void split_row(const float* x, int64_t K, int8_t* h, int8_t* l, float* a, int32_t* c,
                      float* t) {
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t g = 0; g < K / GROUP; g++) {
    __m512 x0 = _mm512_loadu_ps(x + g * GROUP), x1 = _mm512_loadu_ps(x + g * GROUP + 16);
    float top = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    float step = top > 0 ? top / LIMIT : 1.0f;
    for (int half = 0; half < 2; half++) {
      __m512 v = _mm512_div_ps(half ? x1 : x0, _mm512_set1_ps(step));
      __m512i X = _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      __m512i hi = _mm512_srai_epi32(_mm512_add_epi32(X, _mm512_set1_epi32(128)), 8);
      __m512i lo = _mm512_sub_epi32(X, _mm512_slli_epi32(hi, 8));
      _mm_storeu_si128((__m128i*)(h + g * GROUP + 16 * half), _mm512_cvtepi32_epi8(hi));
      _mm_storeu_si128((__m128i*)(l + g * GROUP + 16 * half), _mm512_cvtepi32_epi8(lo));
    }
    for (int lane = 0; lane < GROUP / 4; lane++) a[g * GROUP / 4 + lane] = step;
  }
  for (int64_t b = 0; b < (K + 63) / 64; b++) {
    __mmask64 in = K - b * 64 >= 64 ? ~0ULL : (1ULL << (K - b * 64)) - 1;
    __m512i hb = _mm512_maskz_loadu_epi8(in, h + b * 64), lb = _mm512_maskz_loadu_epi8(in, l + b * 64);
    __m512i sum_h = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, hb);
    __m512i sum_l = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, lb);
    __m512i sum = _mm512_add_epi32(_mm512_slli_epi32(sum_h, 8), sum_l);
    __mmask16 lanes = (__mmask16)(K - b * 64 >= 64 ? 0xFFFF : (1u << ((K - b * 64) / 4)) - 1);
    _mm512_mask_storeu_epi32(c + b * 16, lanes, _mm512_mullo_epi32(sum, _mm512_set1_epi32(-128)));
    for (int g = 0; g < 2 && b * 64 + g * GROUP < K; g++) {
      __m512i group = _mm512_maskz_mov_epi32((__mmask16)(0xFF << (8 * g)), sum);
      t[2 * b + g] = a[(b * 64 + g * GROUP) / 4] * (float)_mm512_reduce_add_epi32(group);
    }
  }
}

/* Outputs [nb] (up to 4 weight rows from w) of rows [mb] (up to 4) of the split input. */
static inline __attribute__((always_inline)) void tile(
    const uint8_t* w, const float* s, const float* o, int64_t K, const int8_t* h, const int8_t* l,
    const float* a, const int32_t* c, const float* t, float* y, int64_t N, int nb, int mb) {
  const int64_t G = K / GROUP;
  __m512 acc[4][4];
  for (int i = 0; i < mb; i++)
    for (int j = 0; j < nb; j++) acc[i][j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < (K + 63) / 64; b++) {
    __mmask64 in = K - b * 64 >= 64 ? ~0ULL : (1ULL << (K - b * 64)) - 1;
    __mmask16 lanes = (__mmask16)(K - b * 64 >= 64 ? 0xFFFF : 0x00FF);
    __m512i wv[4];
    __m512 sv[4];
    for (int j = 0; j < nb; j++) {
      wv[j] = _mm512_maskz_loadu_epi8(in, w + j * K + b * 64);
      _mm_prefetch((const char*)(w + (j + AHEAD) * K + b * 64), _MM_HINT_T0);
      /* lanes 0-7 are the block's first group, 8-15 its second (none past K) */
      float second = lanes == 0xFFFF ? s[j * G + 2 * b + 1] : 0.0f;
      sv[j] = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(s[j * G + 2 * b]), _mm512_set1_ps(second));
    }
    for (int i = 0; i < mb; i++) {
      __m512i hv = _mm512_maskz_loadu_epi8(in, h + i * K + b * 64);
      __m512i lv = _mm512_maskz_loadu_epi8(in, l + i * K + b * 64);
      __m512i cv = _mm512_maskz_loadu_epi32(lanes, c + i * (K / 4) + b * 16);
      __m512 av = _mm512_maskz_loadu_ps(lanes, a + i * (K / 4) + b * 16);
      for (int j = 0; j < nb; j++) {
        __m512i high = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[j], hv);
        __m512i exact = _mm512_add_epi32(_mm512_slli_epi32(high, 8), _mm512_dpbusd_epi32(cv, wv[j], lv));
        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(av, sv[j]), acc[i][j]);
      }
    }
  }
  /* The offsets' part: each group's offset times a times the group's sum of X. */
  for (int i = 0; i < mb; i++)
    for (int j = 0; j < nb; j++) {
      __m512 part = _mm512_setzero_ps();
      for (int64_t g = 0; g < G; g += 16) {
        __mmask16 in = G - g >= 16 ? 0xFFFF : (__mmask16)((1u << (G - g)) - 1);
        __m512 tv = _mm512_maskz_loadu_ps(in, t + i * G + g), ov = _mm512_maskz_loadu_ps(in, o + j * G + g);
        part = _mm512_fmadd_ps(tv, ov, part);
      }
      y[i * N + j] = _mm512_reduce_add_ps(acc[i][j]) + _mm512_reduce_add_ps(part);
    }
}

#define TILE_ARGS const uint8_t *w, const float *s, const float *o, int64_t K, const int8_t *h, \
                  const int8_t *l, const float *a, const int32_t *c, const float *t, float *y, int64_t N
#define TILE_PASS w, s, o, K, h, l, a, c, t, y, N
static __attribute__((noinline)) void tile_4x1(TILE_ARGS) { tile(TILE_PASS, 4, 1); }
static __attribute__((noinline)) void tile_4x2(TILE_ARGS) { tile(TILE_PASS, 4, 2); }
static __attribute__((noinline)) void tile_4x3(TILE_ARGS) { tile(TILE_PASS, 4, 3); }
static __attribute__((noinline)) void tile_4x4(TILE_ARGS) { tile(TILE_PASS, 4, 4); }
static __attribute__((noinline)) void tile_any(TILE_ARGS, int nb, int mb) { tile(TILE_PASS, nb, mb); }

/* y [M, N] = x [M, K] @ W.T for W as bytes u [N, K] with scales and offsets [N, K / 32].
   Returns 0, or -1 where memory for the split input could not be had. */
int grouped_int8_mm(const float* x, int64_t M, const uint8_t* q, const float* scales,
                    const float* offsets, int64_t N, int64_t K, float* y) {
  if (M == 0) return 0;
  int64_t padded = (K + 63) / 64 * 64;
  int8_t* h = malloc(M * padded);
  int8_t* l = malloc(M * padded);
  float* a = malloc(sizeof(float) * M * padded / 4);
  int32_t* c = malloc(sizeof(int32_t) * M * padded / 4);
  float* t = malloc(sizeof(float) * M * padded / GROUP);
  int ok = h && l && a && c && t;
  if (ok) {
    for (int64_t m = 0; m < M; m++)
      split_row(x + m * K, K, h + m * K, l + m * K, a + m * (K / 4), c + m * (K / 4), t + m * (K / GROUP));
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n += 4) {
      int nb = N - n < 4 ? (int)(N - n) : 4;
      const uint8_t* w = q + n * K;
      const float *s = scales + n * (K / GROUP), *o = offsets + n * (K / GROUP);
      for (int64_t m = 0; m < M; m += 4) {
        int mb = M - m < 4 ? (int)(M - m) : 4;
        const int8_t *hm = h + m * K, *lm = l + m * K;
        const float* am = a + m * (K / 4);
        const int32_t* cm = c + m * (K / 4);
        const float* tm = t + m * (K / GROUP);
        float* ym = y + m * N + n;
        if (nb < 4) tile_any(w, s, o, K, hm, lm, am, cm, tm, ym, N, nb, mb);
        else if (mb == 4) tile_4x4(w, s, o, K, hm, lm, am, cm, tm, ym, N);
        else if (mb == 1) tile_4x1(w, s, o, K, hm, lm, am, cm, tm, ym, N);
        else if (mb == 2) tile_4x2(w, s, o, K, hm, lm, am, cm, tm, ym, N);
        else tile_4x3(w, s, o, K, hm, lm, am, cm, tm, ym, N);
      }
    }
  }
  free(h);
  free(l);
  free(a);
  free(c);
  free(t);
  return ok ? 0 : -1;
}

/* out [N, K] = W in float32, for prefills, which run float32's matmul over it. */
void grouped_int8_dequantize(const uint8_t* q, const float* scales, const float* offsets,
                             int64_t N, int64_t K, float* out) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; n++)
    for (int64_t g = 0; g < K / GROUP; g++) {
      __m512 s = _mm512_set1_ps(scales[n * (K / GROUP) + g]);
      __m512 o = _mm512_set1_ps(offsets[n * (K / GROUP) + g]);
      for (int half = 0; half < 2; half++) {
        int64_t at = n * K + g * GROUP + 16 * half;
        __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(q + at)));
        __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(u, _mm512_set1_epi32(128)));
        _mm512_storeu_ps(out + at, _mm512_fmadd_ps(v, s, o));
      }
    }
}

#endif
