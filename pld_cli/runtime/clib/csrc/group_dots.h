/* The integer heart of grouped.c, once per instruction set: for one group of `group` (16 or 32)
   inputs and a block of up to 16 outputs, each row's exact u . X, where u are the weights' bytes
   or nibbles (`bits` 8 or 4) and X the row's whole steps (|X| <= 32639). Each variant keeps X as
   its instructions take it; all give the same integers (below 2^31: 32 products of at most
   255 * 32639). `group` and `bits` are constants where the callers are inlined, so each layout
   gets its own unrolled loops.

   - AVX-512 VNNI: X as two signed base-256 digits h, l (X = 256 h + l); vpdpbusd multiplies
     unsigned bytes by signed bytes, four products per 32-bit lane, and 256 u.h + u.l = u.X.
   - AVX-VNNI (Intel's AVX2 CPUs from Alder Lake on, and those with AVX-512 too): the same digits
     and the same instruction on 256-bit registers, the 16 outputs in two halves.
   - AVX2: X as 16 bits; vpmaddwd multiplies 16-bit pairs (the bytes widened) into 32-bit sums.
   - plain C: the same products in a loop.

   Weights of a block of `width` outputs, per group: 8 bits, [group / 4][width][4 inputs] bytes
   (one 64-byte line: four inputs of 16 outputs); 4 bits, [group / 8][width][4] bytes whose low
   nibbles are inputs 0..3 of the eight and high nibbles inputs 4..7, so one line unpacks into the
   8-bit layout's two lines. A row's steps take 2 bytes per input either way: [groups][2 group]. */

#ifndef PLD_GROUP_DOTS_H
#define PLD_GROUP_DOTS_H

#include <stdint.h>
#include <string.h>

#define MAX_GROUP 32 /* inputs per scale: 32 or 16 */
#define BLOCK 16     /* outputs per block of the layout */

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Weight byte (8 bits) or nibble (4 bits) of input e of output n in a group's block. */
ALWAYS_INLINE int weight_at(const uint8_t* w, int width, int bits, int e, int n) {
  if (bits == 8) return w[((e / 4) * width + n) * 4 + e % 4];
  uint8_t both = w[((e / 8) * width + n) * 4 + e % 4];
  return e % 8 < 4 ? both & 0x0F : both >> 4;
}

/* The plain loop over `width` outputs, lanes past it zero; inlined with a constant width where
   the block is whole, so the compiler can vectorize it. */
ALWAYS_INLINE void plain_dots_of(const uint8_t* w, int width, int group, int bits,
                                 const int16_t* X, int32_t dots[BLOCK]) {
  int32_t sums[BLOCK] = {0};
  for (int e = 0; e < group; e++)
    for (int n = 0; n < width; n++) sums[n] += weight_at(w, width, bits, e, n) * X[e];
  memcpy(dots, sums, sizeof sums);
}

/* Every variant's fallback: X as 16 bits (2 bytes per input) in `steps`, rows `stride` apart. */
ALWAYS_INLINE void plain_dots(const uint8_t* w, int width, int group, int bits,
                              const int8_t* steps, int64_t stride, int rows,
                              int32_t dots[][BLOCK]) {
  for (int i = 0; i < rows; i++) {
    int16_t X[MAX_GROUP];
    memcpy(X, steps + i * stride, 2 * group);
    if (width == BLOCK)
      plain_dots_of(w, BLOCK, group, bits, X, dots[i]);
    else
      plain_dots_of(w, width, group, bits, X, dots[i]);
  }
}

#define AHEAD 8 /* groups prefetched: faster one-row reads, docs/design-measurements.md */

/* The VNNI variants' steps: whole steps X (as floats) kept as their two digits (X = 256 h + l,
   each a signed byte), highs then lows; returns their sum. Plain C, AVX-VNNI's (AVX-512 has its
   own below, the same integers). */
ALWAYS_INLINE int32_t keep_digits(const float* X, int group, int8_t* out) {
  int32_t sum = 0;
  for (int e = 0; e < group; e++) {
    int32_t whole = (int32_t)X[e]; /* exact: X are whole */
    int32_t high = (whole + 128) >> 8;
    out[e] = (int8_t)high;
    out[group + e] = (int8_t)(whole - 256 * high);
    sum += whole;
  }
  return sum;
}

/* Four digits of a row (from `first`), as one 32-bit lane to broadcast. */
ALWAYS_INLINE int32_t four_digits(const int8_t* digits, int first) {
  int32_t four;
  memcpy(&four, digits + first, 4);
  return four;
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)

#include <immintrin.h>

#define ROWS 4 /* rows per tile */
#define VARIANT "avx512-vnni"

/* keep_digits in AVX-512: a prompt's every row is split once per product, and the plain loop,
   which the compiler left scalar, took a sixth of a 256-row product of the default model. */
ALWAYS_INLINE int32_t keep_steps(const float* X, int group, int8_t* out) {
  int32_t sum = 0;
  for (int e = 0; e < group; e += 16) {
    __m512i whole = _mm512_cvtps_epi32(_mm512_loadu_ps(X + e)); /* exact: X are whole */
    __m512i high = _mm512_srai_epi32(_mm512_add_epi32(whole, _mm512_set1_epi32(128)), 8);
    __m512i low = _mm512_sub_epi32(whole, _mm512_slli_epi32(high, 8));
    _mm_storeu_si128((__m128i*)(out + e), _mm512_cvtepi32_epi8(high));
    _mm_storeu_si128((__m128i*)(out + group + e), _mm512_cvtepi32_epi8(low));
    sum += _mm512_reduce_add_epi32(whole);
  }
  return sum;
}

/* Four inputs (from `first`) of 16 outputs as bytes `wv`, into every row's two digit sums. */
ALWAYS_INLINE void dot_four(__m512i wv, const int8_t* steps, int64_t stride, int group, int rows,
                            int first, __m512i high[ROWS], __m512i low[ROWS]) {
  for (int i = 0; i < rows; i++) {
    const int8_t* row = steps + i * stride;
    high[i] = _mm512_dpbusd_epi32(high[i], wv, _mm512_set1_epi32(four_digits(row, first)));
    low[i] = _mm512_dpbusd_epi32(low[i], wv, _mm512_set1_epi32(four_digits(row, group + first)));
  }
}

ALWAYS_INLINE void group_dots(const uint8_t* w, int width, int group, int bits,
                              const int8_t* steps, int64_t stride, int rows,
                              int32_t dots[][BLOCK]) {
  __mmask16 lanes = width >= 16 ? 0xFFFF : (__mmask16)((1u << width) - 1);
  __m512i high[ROWS], low[ROWS];
  for (int i = 0; i < rows; i++) high[i] = low[i] = _mm512_setzero_si512();
  const int line_bytes = group * BLOCK * bits / 8;
  for (int line = 0; line < line_bytes / 64; line++)
    _mm_prefetch((const char*)(w + AHEAD * group * width * bits / 8 + 64 * line), _MM_HINT_T0);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  for (int k = 0; k < group / 4; k += bits == 8 ? 1 : 2) {
    __m512i wv = _mm512_maskz_loadu_epi32(lanes, w + k * width * bits / 2);
    if (bits == 8) {
      dot_four(wv, steps, stride, group, rows, 4 * k, high, low);
    } else {
      dot_four(_mm512_and_si512(wv, nibble), steps, stride, group, rows, 4 * k, high, low);
      __m512i upper = _mm512_and_si512(_mm512_srli_epi16(wv, 4), nibble);
      dot_four(upper, steps, stride, group, rows, 4 * k + 4, high, low);
    }
  }
  for (int i = 0; i < rows; i++)
    _mm512_storeu_si512(dots[i], _mm512_add_epi32(_mm512_slli_epi32(high[i], 8), low[i]));
}

#elif defined(__AVXVNNI__)

#include <immintrin.h>

#define ROWS 2 /* rows per tile: 4 accumulators a row of the 16 ymm registers */
#define VARIANT "avx-vnni"
#define keep_steps keep_digits

/* Four inputs (from `first`) of 16 outputs as bytes, in halves (outputs 0..7 in w[0], 8..15 in
   w[1]), into every row's digit sums, halves apart: sums[i][digit][half]. */
ALWAYS_INLINE void dot_four(const __m256i w[2], const int8_t* steps, int64_t stride, int group,
                            int rows, int first, __m256i sums[ROWS][2][2]) {
  for (int i = 0; i < rows; i++) {
    const int8_t* row = steps + i * stride;
    __m256i hi = _mm256_set1_epi32(four_digits(row, first));
    __m256i lo = _mm256_set1_epi32(four_digits(row, group + first));
    for (int half = 0; half < 2; half++) {
      sums[i][0][half] = _mm256_dpbusd_avx_epi32(sums[i][0][half], w[half], hi);
      sums[i][1][half] = _mm256_dpbusd_avx_epi32(sums[i][1][half], w[half], lo);
    }
  }
}

/* Lanes n < width of a half (outputs 8 half + n), as a maskload's mask. */
ALWAYS_INLINE __m256i lanes_below(int width) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(width), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

ALWAYS_INLINE void group_dots(const uint8_t* w, int width, int group, int bits,
                              const int8_t* steps, int64_t stride, int rows,
                              int32_t dots[][BLOCK]) {
  const __m256i lanes[2] = {lanes_below(width), lanes_below(width - 8)};
  __m256i sums[ROWS][2][2];
  for (int i = 0; i < rows; i++)
    for (int d = 0; d < 4; d++) sums[i][d / 2][d % 2] = _mm256_setzero_si256();
  for (int line = 0; line < group * BLOCK * bits / 8 / 64; line++)
    _mm_prefetch((const char*)(w + AHEAD * group * width * bits / 8 + 64 * line), _MM_HINT_T0);
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  for (int k = 0; k < group / 4; k += bits == 8 ? 1 : 2) {
    const int* line = (const int*)(w + k * width * bits / 2); /* four bytes an output */
    __m256i wv[2];
    for (int half = 0; half < 2; half++)
      wv[half] = width == BLOCK ? _mm256_loadu_si256((const __m256i*)(line + 8 * half))
                                : _mm256_maskload_epi32(line + 8 * half, lanes[half]);
    if (bits == 8) {
      dot_four(wv, steps, stride, group, rows, 4 * k, sums);
    } else {
      __m256i low[2], upper[2];
      for (int half = 0; half < 2; half++) {
        low[half] = _mm256_and_si256(wv[half], nibble);
        upper[half] = _mm256_and_si256(_mm256_srli_epi16(wv[half], 4), nibble);
      }
      dot_four(low, steps, stride, group, rows, 4 * k, sums);
      dot_four(upper, steps, stride, group, rows, 4 * k + 4, sums);
    }
  }
  for (int i = 0; i < rows; i++)
    for (int half = 0; half < 2; half++) {
      __m256i whole = _mm256_add_epi32(_mm256_slli_epi32(sums[i][0][half], 8), sums[i][1][half]);
      _mm256_storeu_si256((__m256i*)(dots[i] + 8 * half), whole);
    }
}

#else

#define ROWS 2

/* Whole steps X (as floats) kept as 16 bits; returns their sum. */
ALWAYS_INLINE int32_t keep_steps(const float* X, int group, int8_t* out) {
  int16_t narrow[MAX_GROUP];
  int32_t sum = 0;
  for (int e = 0; e < group; e++) sum += narrow[e] = (int16_t)X[e];
  memcpy(out, narrow, 2 * group);
  return sum;
}

#if defined(__AVX2__)

#include <immintrin.h>

#define VARIANT "avx2"

/* Eight outputs from the pair sums of outputs [0..3] (in a) and [4..7] (in b). */
static inline __m256i pair_sums(__m256i a, __m256i b) {
  return _mm256_permute4x64_epi64(_mm256_hadd_epi32(a, b), 0xD8);
}

/* Four inputs (from `first`) of 16 outputs, as four vectors of 16 bits, into every row's sums. */
ALWAYS_INLINE void dot_four(const __m256i wide[4], const int8_t* steps, int64_t stride, int rows,
                            int first, __m256i sums[ROWS][4]) {
  for (int i = 0; i < rows; i++) {
    int64_t four; /* X of the four inputs, to broadcast */
    memcpy(&four, steps + i * stride + 2 * first, 8);
    __m256i x = _mm256_set1_epi64x(four);
    for (int j = 0; j < 4; j++)
      sums[i][j] = _mm256_add_epi32(sums[i][j], _mm256_madd_epi16(wide[j], x));
  }
}

ALWAYS_INLINE void group_dots(const uint8_t* w, int width, int group, int bits,
                              const int8_t* steps, int64_t stride, int rows,
                              int32_t dots[][BLOCK]) {
  if (width < BLOCK) return plain_dots(w, width, group, bits, steps, stride, rows, dots);
  __m256i sums[ROWS][4];
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < 4; j++) sums[i][j] = _mm256_setzero_si256();
  for (int k = 0; k < group / 4; k += bits == 8 ? 1 : 2) {
    __m256i wide[4], upper[4]; /* four outputs' four inputs each, as 16 bits */
    for (int j = 0; j < 4; j++)
      wide[j] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(w + 32 * bits * k / 4 + 16 * j)));
    if (bits == 4)
      for (int j = 0; j < 4; j++) {
        upper[j] = _mm256_srli_epi16(wide[j], 4);
        wide[j] = _mm256_and_si256(wide[j], _mm256_set1_epi16(0x0F));
      }
    dot_four(wide, steps, stride, rows, 4 * k, sums);
    if (bits == 4) dot_four(upper, steps, stride, rows, 4 * k + 4, sums);
  }
  for (int i = 0; i < rows; i++) {
    _mm256_storeu_si256((__m256i*)dots[i], pair_sums(sums[i][0], sums[i][1]));
    _mm256_storeu_si256((__m256i*)(dots[i] + 8), pair_sums(sums[i][2], sums[i][3]));
  }
}

#else

#define VARIANT "portable"

ALWAYS_INLINE void group_dots(const uint8_t* w, int width, int group, int bits,
                              const int8_t* steps, int64_t stride, int rows,
                              int32_t dots[][BLOCK]) {
  plain_dots(w, width, group, bits, steps, stride, rows, dots);
}

#endif
#endif
#endif
