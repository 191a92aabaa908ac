/* The integer heart of grouped_int8.c, once per instruction set: for one group of 32 inputs and a
   block of up to 16 outputs, each row's exact u . X, where u are the weights' bytes and X the
   row's whole steps (|X| <= 32639). Each variant keeps X as its instructions take it; all give
   the same integers (below 2^31: 32 products of at most 255 * 32639).

   - AVX-512 VNNI: X as two signed base-256 digits h, l (X = 256 h + l); vpdpbusd multiplies
     unsigned bytes by signed bytes, four products per 32-bit lane, and 256 u.h + u.l = u.X.
   - AVX2: X as 16 bits; vpmaddwd multiplies 16-bit pairs (the bytes widened) into 32-bit sums.
   - plain C: the same products in a loop.

   A row's steps take 2 bytes per input either way: [groups][64 bytes]. */

#ifndef PLD_GROUP_DOTS_H
#define PLD_GROUP_DOTS_H

#include <stdint.h>
#include <string.h>

#define GROUP 32 /* inputs per scale */
#define BLOCK 16 /* outputs per block of the layout */

/* The plain loop over `width` outputs, lanes past it zero; inlined with a constant width where
   the block is whole, so the compiler can vectorize it. */
static inline __attribute__((always_inline)) void plain_dots_of(const uint8_t* w, int width,
                                                                const int16_t* X,
                                                                int32_t dots[BLOCK]) {
  int32_t sums[BLOCK] = {0};
  for (int k = 0; k < GROUP / 4; k++)
    for (int n = 0; n < width; n++)
      for (int j = 0; j < 4; j++) sums[n] += (int32_t)w[(k * width + n) * 4 + j] * X[4 * k + j];
  memcpy(dots, sums, sizeof sums);
}

/* Every variant's fallback: X as 16 bits (2 bytes per input) in `steps`, rows `stride` apart. */
static inline void plain_dots(const uint8_t* w, int width, const int8_t* steps, int64_t stride,
                              int rows, int32_t dots[][BLOCK]) {
  for (int i = 0; i < rows; i++) {
    int16_t X[GROUP];
    memcpy(X, steps + i * stride, sizeof X);
    if (width == BLOCK)
      plain_dots_of(w, BLOCK, X, dots[i]);
    else
      plain_dots_of(w, width, X, dots[i]);
  }
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)

#include <immintrin.h>

#define ROWS 4   /* rows per tile */
#define AHEAD 8  /* groups prefetched: faster one-row reads, docs/design-measurements.md */
#define VARIANT "avx512-vnni"

static inline void keep_steps(const int32_t* X, int8_t* out) {
  for (int e = 0; e < GROUP; e++) {
    int32_t high = (X[e] + 128) >> 8; /* arithmetic shift: floor */
    out[e] = (int8_t)high;
    out[GROUP + e] = (int8_t)(X[e] - 256 * high);
  }
}

static inline __attribute__((always_inline)) void group_dots(const uint8_t* w, int width, const int8_t* steps, int64_t stride,
                              int rows, int32_t dots[][BLOCK]) {
  __mmask16 lanes = width >= 16 ? 0xFFFF : (__mmask16)((1u << width) - 1);
  __m512i high[ROWS], low[ROWS];
  for (int i = 0; i < rows; i++) high[i] = low[i] = _mm512_setzero_si512();
  for (int line = 0; line < GROUP * BLOCK / 64; line++)
    _mm_prefetch((const char*)(w + AHEAD * GROUP * width + 64 * line), _MM_HINT_T0);
  for (int k = 0; k < GROUP / 4; k++) {
    __m512i wv = _mm512_maskz_loadu_epi32(lanes, w + k * 4 * width);
    for (int i = 0; i < rows; i++) {
      int32_t hi, lo; /* four digits each, as one lane to broadcast */
      memcpy(&hi, steps + i * stride + 4 * k, 4);
      memcpy(&lo, steps + i * stride + GROUP + 4 * k, 4);
      high[i] = _mm512_dpbusd_epi32(high[i], wv, _mm512_set1_epi32(hi));
      low[i] = _mm512_dpbusd_epi32(low[i], wv, _mm512_set1_epi32(lo));
    }
  }
  for (int i = 0; i < rows; i++)
    _mm512_storeu_si512(dots[i], _mm512_add_epi32(_mm512_slli_epi32(high[i], 8), low[i]));
}

#else

#define ROWS 2

static inline void keep_steps(const int32_t* X, int8_t* out) {
  int16_t narrow[GROUP];
  for (int e = 0; e < GROUP; e++) narrow[e] = (int16_t)X[e];
  memcpy(out, narrow, sizeof narrow);
}

#if defined(__AVX2__)

#include <immintrin.h>

#define VARIANT "avx2"

/* Eight outputs from the pair sums of outputs [0..3] (in a) and [4..7] (in b). */
static inline __m256i pair_sums(__m256i a, __m256i b) {
  return _mm256_permute4x64_epi64(_mm256_hadd_epi32(a, b), 0xD8);
}

static inline __attribute__((always_inline)) void group_dots(const uint8_t* w, int width, const int8_t* steps, int64_t stride,
                              int rows, int32_t dots[][BLOCK]) {
  if (width < BLOCK) return plain_dots(w, width, steps, stride, rows, dots);
  __m256i sums[ROWS][4];
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < 4; j++) sums[i][j] = _mm256_setzero_si256();
  for (int k = 0; k < GROUP / 4; k++) {
    __m256i wide[4]; /* four outputs' four inputs each, as 16 bits */
    for (int j = 0; j < 4; j++)
      wide[j] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(w + 64 * k + 16 * j)));
    for (int i = 0; i < rows; i++) {
      int64_t four; /* X of the four inputs, to broadcast */
      memcpy(&four, steps + i * stride + 8 * k, 8);
      __m256i x = _mm256_set1_epi64x(four);
      for (int j = 0; j < 4; j++)
        sums[i][j] = _mm256_add_epi32(sums[i][j], _mm256_madd_epi16(wide[j], x));
    }
  }
  for (int i = 0; i < rows; i++) {
    _mm256_storeu_si256((__m256i*)dots[i], pair_sums(sums[i][0], sums[i][1]));
    _mm256_storeu_si256((__m256i*)(dots[i] + 8), pair_sums(sums[i][2], sums[i][3]));
  }
}

#else

#define VARIANT "portable"

static inline __attribute__((always_inline)) void group_dots(const uint8_t* w, int width, const int8_t* steps, int64_t stride,
                              int rows, int32_t dots[][BLOCK]) {
  plain_dots(w, width, steps, stride, rows, dots);
}

#endif
#endif
#endif
