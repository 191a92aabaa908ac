/* Sixteen float lanes, written once for three instruction sets: AVX-512 (one register), AVX2 (two
   halves) and plain C (an array), whichever the including variant is compiled for.

   pld's kernels give the same bits on every CPU, so each operation here is the IEEE operation per
   lane, one rounding each, the sums across lanes go in one fixed tree, and nothing depends on the
   vector width. There is no fused multiply-add: a CPU without one would need libm's fmaf (a call
   per lane), so a product and a sum are two roundings on every variant, and the variants are
   built with -ffp-contract=off, so the compiler fuses none either. */

#ifndef PLD_SIMD_H
#define PLD_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)

typedef __m512 vf16;
static inline __mmask16 vf_mask(int64_t n) { return n >= 16 ? 0xFFFF : (__mmask16)((1u << n) - 1); }
static inline vf16 vf_load(const float* p) { return _mm512_loadu_ps(p); }
static inline vf16 vf_load_n(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(vf_mask(n), p); }
static inline void vf_store(float* p, vf16 v) { _mm512_storeu_ps(p, v); }
static inline void vf_store_n(float* p, vf16 v, int64_t n) { _mm512_mask_storeu_ps(p, vf_mask(n), v); }
static inline vf16 vf_from_i32(const int32_t* p) { return _mm512_cvtepi32_ps(_mm512_loadu_si512(p)); }
static inline vf16 vf_from_i8_n(const int8_t* p, int64_t n) {
  int8_t lanes[16] = {0};
  if (n < 16) p = memcpy(lanes, p, n > 0 ? n : 0);
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p)));
}
static inline vf16 vf_set1(float x) { return _mm512_set1_ps(x); }
static inline vf16 vf_add(vf16 a, vf16 b) { return _mm512_add_ps(a, b); }
static inline vf16 vf_sub(vf16 a, vf16 b) { return _mm512_sub_ps(a, b); }
static inline vf16 vf_mul(vf16 a, vf16 b) { return _mm512_mul_ps(a, b); }
static inline vf16 vf_div(vf16 a, vf16 b) { return _mm512_div_ps(a, b); }
static inline vf16 vf_max(vf16 a, vf16 b) { return _mm512_max_ps(a, b); }
static inline vf16 vf_abs(vf16 a) { return _mm512_abs_ps(a); }
static inline vf16 vf_round(vf16 a) {
  return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
/* 2^n for whole n in [-126, 127], built from its exponent bits. */
static inline vf16 vf_pow2(vf16 n) {
  __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_castsi512_ps(bits);
}
/* Per lane: negative[i] < 0 ? a[i] : b[i]. */
static inline vf16 vf_if_negative(vf16 negative, vf16 a, vf16 b) {
  return _mm512_mask_mov_ps(b, _mm512_cmp_ps_mask(negative, _mm512_setzero_ps(), _CMP_LT_OQ), a);
}
/* The lanes in halves: lane i + lane i+8, then i + i+4, i + i+2, and 0 + 1 (as vf_sum below). */
static inline float vf_sum(vf16 v) {
  __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v),
                            _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}
static inline float vf_max_all(vf16 v) { return _mm512_reduce_max_ps(v); } /* exact in any order */
/* Lane j: vf_sum(v[j]), for 16 vectors at once by the same tree, transposed: each step adds the
   same lane pairs of two vectors with one shuffle each (halves, quarters, pairs, neighbours),
   leaving lane 4k + m with vector k + 4m, put back in order by one permutation. */
static inline vf16 vf_sums16(const vf16 v[16]) {
  vf16 s8[8], s4[4], s2[2];
  for (int p = 0; p < 8; p++) /* lanes 0..7: v[2p]'s i + i+8; 8..15: v[2p + 1]'s */
    s8[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44),
                          _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xEE));
  for (int r = 0; r < 4; r++) /* quarter k: v[4r + k]'s i + i+4 */
    s4[r] = _mm512_add_ps(_mm512_shuffle_f32x4(s8[2 * r], s8[2 * r + 1], 0x88),
                          _mm512_shuffle_f32x4(s8[2 * r], s8[2 * r + 1], 0xDD));
  for (int u = 0; u < 2; u++) { /* quarter k: v[8u + k]'s i + i+2, then v[8u + 4 + k]'s */
    __m512d a = _mm512_castps_pd(s4[2 * u]), b = _mm512_castps_pd(s4[2 * u + 1]);
    s2[u] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                          _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  vf16 sums = _mm512_add_ps(_mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_permutexvar_ps(_mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0),
                               sums);
}

#elif defined(__AVX2__)

typedef struct {
  __m256 lo, hi;
} vf16;
static inline __m256i vf_half_mask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline vf16 vf_load(const float* p) { return (vf16){_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
static inline vf16 vf_load_n(const float* p, int64_t n) {
  if (n >= 16) return vf_load(p);
  return (vf16){_mm256_maskload_ps(p, vf_half_mask(n)), _mm256_maskload_ps(p + 8, vf_half_mask(n - 8))};
}
static inline void vf_store(float* p, vf16 v) {
  _mm256_storeu_ps(p, v.lo);
  _mm256_storeu_ps(p + 8, v.hi);
}
static inline void vf_store_n(float* p, vf16 v, int64_t n) {
  if (n >= 16) return vf_store(p, v);
  _mm256_maskstore_ps(p, vf_half_mask(n), v.lo);
  _mm256_maskstore_ps(p + 8, vf_half_mask(n - 8), v.hi);
}
static inline vf16 vf_from_i32(const int32_t* p) {
  return (vf16){_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i*)p)),
                _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i*)(p + 8)))};
}
static inline vf16 vf_from_i8_n(const int8_t* p, int64_t n) {
  int8_t lanes[16] = {0};
  if (n < 16) p = memcpy(lanes, p, n > 0 ? n : 0);
  __m128i bytes = _mm_loadu_si128((const __m128i*)p);
  return (vf16){_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes)),
                _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8)))};
}
static inline vf16 vf_set1(float x) { return (vf16){_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
#define PLD_LANES2(name, op) \
  static inline vf16 name(vf16 a, vf16 b) { return (vf16){op(a.lo, b.lo), op(a.hi, b.hi)}; }
PLD_LANES2(vf_add, _mm256_add_ps)
PLD_LANES2(vf_sub, _mm256_sub_ps)
PLD_LANES2(vf_mul, _mm256_mul_ps)
PLD_LANES2(vf_div, _mm256_div_ps)
PLD_LANES2(vf_max, _mm256_max_ps)
static inline vf16 vf_abs(vf16 a) {
  __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  return (vf16){_mm256_and_ps(a.lo, magnitude), _mm256_and_ps(a.hi, magnitude)};
}
static inline vf16 vf_round(vf16 a) {
  const int nearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return (vf16){_mm256_round_ps(a.lo, nearest), _mm256_round_ps(a.hi, nearest)};
}
static inline __m256 vf_pow2_half(__m256 n) {
  __m256i bits = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_castsi256_ps(_mm256_slli_epi32(bits, 23));
}
static inline vf16 vf_pow2(vf16 n) { return (vf16){vf_pow2_half(n.lo), vf_pow2_half(n.hi)}; }
static inline vf16 vf_if_negative(vf16 negative, vf16 a, vf16 b) {
  __m256 zero = _mm256_setzero_ps();
  return (vf16){_mm256_blendv_ps(b.lo, a.lo, _mm256_cmp_ps(negative.lo, zero, _CMP_LT_OQ)),
                _mm256_blendv_ps(b.hi, a.hi, _mm256_cmp_ps(negative.hi, zero, _CMP_LT_OQ))};
}
static inline float vf_sum(vf16 v) {
  __m256 s8 = _mm256_add_ps(v.lo, v.hi);
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}
static inline float vf_max_all(vf16 v) {
  float lanes[16];
  vf_store(lanes, v);
  float top = lanes[0];
  for (int i = 1; i < 16; i++) top = fmaxf(top, lanes[i]);
  return top;
}

#else

typedef struct {
  float v[16];
} vf16;
#define PLD_EACH(body)                 \
  vf16 r;                              \
  for (int i = 0; i < 16; i++) body; \
  return r;
static inline vf16 vf_load_n(const float* p, int64_t n) { PLD_EACH(r.v[i] = i < n ? p[i] : 0.0f) }
static inline vf16 vf_load(const float* p) { return vf_load_n(p, 16); }
static inline void vf_store_n(float* p, vf16 v, int64_t n) {
  for (int i = 0; i < 16 && i < n; i++) p[i] = v.v[i];
}
static inline void vf_store(float* p, vf16 v) { vf_store_n(p, v, 16); }
static inline vf16 vf_from_i32(const int32_t* p) { PLD_EACH(r.v[i] = (float)p[i]) }
static inline vf16 vf_from_i8_n(const int8_t* p, int64_t n) { PLD_EACH(r.v[i] = i < n ? (float)p[i] : 0.0f) }
static inline vf16 vf_set1(float x) { PLD_EACH(r.v[i] = x) }
static inline vf16 vf_add(vf16 a, vf16 b) { PLD_EACH(r.v[i] = a.v[i] + b.v[i]) }
static inline vf16 vf_sub(vf16 a, vf16 b) { PLD_EACH(r.v[i] = a.v[i] - b.v[i]) }
static inline vf16 vf_mul(vf16 a, vf16 b) { PLD_EACH(r.v[i] = a.v[i] * b.v[i]) }
static inline vf16 vf_div(vf16 a, vf16 b) { PLD_EACH(r.v[i] = a.v[i] / b.v[i]) }
/* As the instructions: the second operand where either is NaN. */
static inline vf16 vf_max(vf16 a, vf16 b) { PLD_EACH(r.v[i] = a.v[i] > b.v[i] ? a.v[i] : b.v[i]) }
static inline vf16 vf_abs(vf16 a) { PLD_EACH(r.v[i] = fabsf(a.v[i])) }
/* To the nearest whole number, ties to even, for |a| < 2^22 (every use here): past 1.5 * 2^23 a
   float's step is 1, so the sum rounds as the instructions do, without a call to nearbyintf. */
static inline vf16 vf_round(vf16 a) { PLD_EACH(r.v[i] = (a.v[i] + 12582912.0f) - 12582912.0f) }
static inline vf16 vf_pow2(vf16 n) {
  vf16 r;
  for (int i = 0; i < 16; i++) {
    uint32_t bits = (uint32_t)((int32_t)n.v[i] + 127) << 23;
    memcpy(&r.v[i], &bits, 4);
  }
  return r;
}
static inline vf16 vf_if_negative(vf16 negative, vf16 a, vf16 b) {
  PLD_EACH(r.v[i] = negative.v[i] < 0 ? a.v[i] : b.v[i])
}
static inline float vf_sum(vf16 v) {
  float s8[8], s4[4], s2[2];
  for (int i = 0; i < 8; i++) s8[i] = v.v[i] + v.v[i + 8];
  for (int i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
  for (int i = 0; i < 2; i++) s2[i] = s4[i] + s4[i + 2];
  return s2[0] + s2[1];
}
static inline float vf_max_all(vf16 v) {
  float top = v.v[0];
  for (int i = 1; i < 16; i++) top = fmaxf(top, v.v[i]);
  return top;
}

#endif

static inline vf16 vf_zero(void) { return vf_set1(0.0f); }

#if !defined(__AVX512F__)
/* Lane j: vf_sum(v[j]) (AVX-512 has a transposed form above). */
static inline vf16 vf_sums16(const vf16 v[16]) {
  float sums[16];
  for (int j = 0; j < 16; j++) sums[j] = vf_sum(v[j]);
  return vf_load(sums);
}
#endif

/* a * b + c, rounded twice (the product, then the sum). */
static inline vf16 vf_muladd(vf16 a, vf16 b, vf16 c) { return vf_add(vf_mul(a, b), c); }

/* e^x for x <= 0, as Cephes' expf: x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial in r. */
static inline vf16 vf_exp(vf16 x) {
  x = vf_max(x, vf_set1(-87.0f));
  vf16 n = vf_round(vf_mul(x, vf_set1(1.44269504088896341f)));
  vf16 r = vf_sub(x, vf_mul(n, vf_set1(0.693359375f))); /* exact: the constant has 9 bits */
  r = vf_sub(r, vf_mul(n, vf_set1(-2.12194440e-4f)));
  vf16 p = vf_set1(1.9875691500E-4f);
  p = vf_muladd(p, r, vf_set1(1.3981999507E-3f));
  p = vf_muladd(p, r, vf_set1(8.3334519073E-3f));
  p = vf_muladd(p, r, vf_set1(4.1665795894E-2f));
  p = vf_muladd(p, r, vf_set1(1.6666665459E-1f));
  p = vf_muladd(p, r, vf_set1(5.0000001201E-1f));
  p = vf_muladd(p, vf_mul(r, r), vf_add(r, vf_set1(1.0f)));
  return vf_mul(p, vf_pow2(n));
}

/* e^x of one value, x <= 0, by the same steps (libm's expf differs between its own CPU paths). */
static inline float exp_scalar(float x) {
  float lanes[16];
  vf_store(lanes, vf_exp(vf_set1(x)));
  return lanes[0];
}

#endif
