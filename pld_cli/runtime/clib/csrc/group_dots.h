/* The integer heart of grouped.c, once per instruction set: for one group of `group` (16 or 32)
   inputs and a block of up to 16 outputs, each row's exact u . X, where u are the weights' bytes
   or nibbles (`bits` 8 or 4) and X the row's whole steps, one signed byte each (|X| <= 127). All
   variants give the same integers (below 2^31: 32 products of at most 255 * 127). `group` and
   `bits` are constants where the callers are inlined, so each layout gets its own unrolled loops.

   - AVX-512 VNNI: vpdpbusd multiplies unsigned bytes (u) by signed bytes (X), four products per
     32-bit lane, added into it: 64 products an instruction.
   - AVX-VNNI (Intel's AVX2 CPUs from Alder Lake on, and those with AVX-512 too): the same
     instruction on 256-bit registers, the 16 outputs in two halves.
   - AVX2: nibbles by vpmaddubsw (u x X in pairs into 16 bits, at most 2 * 15 * 127 each), a
     group's pairs added in 16 bits (at most 32 / 2 * 2 * 15 * 127 = 30480: never past 32767),
     then vpmaddwd by ones into each output's 32-bit lane; bytes by vpmaddwd on X widened to 16
     bits (vpmaddubsw's pairs of 255 * 127 would saturate).
   - plain C: the same products in a loop.

   Weights of a block of `width` outputs, per group: 8 bits, [group / 4][width][4 inputs] bytes
   (one 64-byte line: four inputs of 16 outputs); 4 bits, [group / 8][width][4] bytes whose low
   nibbles are inputs 0..3 of the eight and high nibbles inputs 4..7, so one line unpacks into the
   8-bit layout's two lines. A row's steps are [K] signed bytes, group after group. */

#ifndef PLD_GROUP_DOTS_H
#define PLD_GROUP_DOTS_H

#include <stdint.h>
#include <string.h>

#define MAX_GROUP 32 /* inputs per scale: 32 or 16 */
#define BLOCK 16     /* outputs per block of the layout */
#define ROWS 4      /* rows per tile: each variant keeps their sums in registers */

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
                                 const int8_t* X, int32_t dots[BLOCK]) {
  int32_t sums[BLOCK] = {0};
  for (int e = 0; e < group; e++)
    for (int n = 0; n < width; n++) sums[n] += weight_at(w, width, bits, e, n) * X[e];
  memcpy(dots, sums, sizeof sums);
}

/* Every variant's fallback: rows' steps `stride` bytes apart. */
ALWAYS_INLINE void plain_dots(const uint8_t* w, int width, int group, int bits,
                              const int8_t* steps, int64_t stride, int rows,
                              int32_t dots[][BLOCK]) {
  for (int i = 0; i < rows; i++) {
    if (width == BLOCK)
      plain_dots_of(w, BLOCK, group, bits, steps + i * stride, dots[i]);
    else
      plain_dots_of(w, width, group, bits, steps + i * stride, dots[i]);
  }
}

#define AHEAD 8 /* groups prefetched: faster one-row reads, docs/design-measurements.md */

/* Whole steps X (as floats, |X| <= 127) kept as signed bytes; returns their sum. */
ALWAYS_INLINE int32_t keep_steps(const float* X, int group, int8_t* out) {
  int32_t sum = 0;
  for (int e = 0; e < group; e++) {
    int32_t whole = (int32_t)X[e]; /* exact: X are whole */
    out[e] = (int8_t)whole;
    sum += whole;
  }
  return sum;
}

/* Four steps of a row (from `first`), as one 32-bit lane to broadcast. */
ALWAYS_INLINE int32_t four_steps(const int8_t* steps, int first) {
  int32_t four;
  memcpy(&four, steps + first, 4);
  return four;
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)

#include <immintrin.h>

#define VARIANT "avx512-vnni"

/* Four inputs (from `first`) of 16 outputs as bytes `wv`, into every row's sums. */
ALWAYS_INLINE void dot_four(__m512i wv, const int8_t* steps, int64_t stride, int rows, int first,
                            __m512i sums[ROWS]) {
  for (int i = 0; i < rows; i++)
    sums[i] = _mm512_dpbusd_epi32(sums[i], wv,
                                  _mm512_set1_epi32(four_steps(steps + i * stride, first)));
}

ALWAYS_INLINE void group_dots(const uint8_t* w, int width, int group, int bits,
                              const int8_t* steps, int64_t stride, int rows,
                              int32_t dots[][BLOCK]) {
  __mmask16 lanes = width >= 16 ? 0xFFFF : (__mmask16)((1u << width) - 1);
  __m512i sums[ROWS];
  for (int i = 0; i < rows; i++) sums[i] = _mm512_setzero_si512();
  const int line_bytes = group * BLOCK * bits / 8;
  for (int line = 0; line < line_bytes / 64; line++)
    _mm_prefetch((const char*)(w + AHEAD * group * width * bits / 8 + 64 * line), _MM_HINT_T0);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  for (int k = 0; k < group / 4; k += bits == 8 ? 1 : 2) {
    __m512i wv = _mm512_maskz_loadu_epi32(lanes, w + k * width * bits / 2);
    if (bits == 8) {
      dot_four(wv, steps, stride, rows, 4 * k, sums);
    } else {
      dot_four(_mm512_and_si512(wv, nibble), steps, stride, rows, 4 * k, sums);
      __m512i upper = _mm512_and_si512(_mm512_srli_epi16(wv, 4), nibble);
      dot_four(upper, steps, stride, rows, 4 * k + 4, sums);
    }
  }
  for (int i = 0; i < rows; i++) _mm512_storeu_si512(dots[i], sums[i]);
}

#elif defined(__AVXVNNI__)

#include <immintrin.h>

#define VARIANT "avx-vnni"

/* Four inputs (from `first`) of 16 outputs as bytes, in halves (outputs 0..7 in w[0], 8..15 in
   w[1]), into every row's sums, halves apart: sums[i][half]. */
ALWAYS_INLINE void dot_four(const __m256i w[2], const int8_t* steps, int64_t stride, int rows,
                            int first, __m256i sums[ROWS][2]) {
  for (int i = 0; i < rows; i++) {
    __m256i x = _mm256_set1_epi32(four_steps(steps + i * stride, first));
    for (int half = 0; half < 2; half++)
      sums[i][half] = _mm256_dpbusd_avx_epi32(sums[i][half], w[half], x);
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
  __m256i sums[ROWS][2];
  for (int i = 0; i < rows; i++) sums[i][0] = sums[i][1] = _mm256_setzero_si256();
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
      dot_four(wv, steps, stride, rows, 4 * k, sums);
    } else {
      __m256i low[2], upper[2];
      for (int half = 0; half < 2; half++) {
        low[half] = _mm256_and_si256(wv[half], nibble);
        upper[half] = _mm256_and_si256(_mm256_srli_epi16(wv[half], 4), nibble);
      }
      dot_four(low, steps, stride, rows, 4 * k, sums);
      dot_four(upper, steps, stride, rows, 4 * k + 4, sums);
    }
  }
  for (int i = 0; i < rows; i++)
    for (int half = 0; half < 2; half++)
      _mm256_storeu_si256((__m256i*)(dots[i] + 8 * half), sums[i][half]);
}

#elif defined(__AVX2__)

#include <immintrin.h>

#define VARIANT "avx2"

/* Nibbles: each line's eight inputs of 16 outputs (low nibbles inputs 0..3, high 4..7; outputs
   0..7 and 8..15 in halves) by vpmaddubsw into 16-bit pair sums, added over the group, then by
   vpmaddwd with ones into one 32-bit lane an output, in the outputs' order. */
ALWAYS_INLINE void nibble_dots(const uint8_t* w, int group, const int8_t* steps, int64_t stride,
                               int rows, int32_t dots[][BLOCK]) {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256i sums[ROWS][2];
  for (int i = 0; i < rows; i++) sums[i][0] = sums[i][1] = _mm256_setzero_si256();
  for (int line = 0; line < group / 8; line++) {
    __m256i low[2], upper[2];
    for (int half = 0; half < 2; half++) {
      __m256i both = _mm256_loadu_si256((const __m256i*)(w + 64 * line + 32 * half));
      low[half] = _mm256_and_si256(both, nibble);
      upper[half] = _mm256_and_si256(_mm256_srli_epi16(both, 4), nibble);
    }
    for (int i = 0; i < rows; i++) {
      const int8_t* row = steps + i * stride + 8 * line;
      __m256i x0 = _mm256_set1_epi32(four_steps(row, 0));
      __m256i x1 = _mm256_set1_epi32(four_steps(row, 4));
      for (int half = 0; half < 2; half++) {
        __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(low[half], x0),
                                         _mm256_maddubs_epi16(upper[half], x1));
        sums[i][half] = _mm256_add_epi16(sums[i][half], pairs);
      }
    }
  }
  const __m256i ones = _mm256_set1_epi16(1);
  for (int i = 0; i < rows; i++)
    for (int half = 0; half < 2; half++)
      _mm256_storeu_si256((__m256i*)(dots[i] + 8 * half), _mm256_madd_epi16(sums[i][half], ones));
}

/* Eight outputs from the pair sums of outputs [0..3] (in a) and [4..7] (in b). */
static inline __m256i pair_sums(__m256i a, __m256i b) {
  return _mm256_permute4x64_epi64(_mm256_hadd_epi32(a, b), 0xD8);
}

/* Bytes, two rows at a time (from row `first`): four inputs of 16 outputs as four vectors of 16
   bits, by vpmaddwd on the rows' four steps widened to 16 bits. */
ALWAYS_INLINE void byte_dots(const uint8_t* w, int group, const int8_t* steps, int64_t stride,
                             int rows, int32_t dots[][BLOCK]) {
  for (int first = 0; first < rows; first += 2) {
    const int pair = rows - first < 2 ? rows - first : 2;
    __m256i sums[2][4];
    for (int i = 0; i < pair; i++)
      for (int j = 0; j < 4; j++) sums[i][j] = _mm256_setzero_si256();
    for (int k = 0; k < group / 4; k++) {
      __m256i wide[4]; /* four outputs' four inputs each, as 16 bits */
      for (int j = 0; j < 4; j++)
        wide[j] = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(w + 64 * k + 16 * j)));
      for (int i = 0; i < pair; i++) {
        const int8_t* row = steps + (first + i) * stride + 4 * k;
        __m128i four = _mm_cvtepi8_epi16(_mm_cvtsi32_si128(four_steps(row, 0)));
        __m256i x = _mm256_broadcastq_epi64(four);
        for (int j = 0; j < 4; j++)
          sums[i][j] = _mm256_add_epi32(sums[i][j], _mm256_madd_epi16(wide[j], x));
      }
    }
    for (int i = 0; i < pair; i++) {
      _mm256_storeu_si256((__m256i*)dots[first + i], pair_sums(sums[i][0], sums[i][1]));
      _mm256_storeu_si256((__m256i*)(dots[first + i] + 8), pair_sums(sums[i][2], sums[i][3]));
    }
  }
}

ALWAYS_INLINE void group_dots(const uint8_t* w, int width, int group, int bits,
                              const int8_t* steps, int64_t stride, int rows,
                              int32_t dots[][BLOCK]) {
  if (width < BLOCK) return plain_dots(w, width, group, bits, steps, stride, rows, dots);
  for (int line = 0; line < group * BLOCK * bits / 8 / 64; line++)
    _mm_prefetch((const char*)(w + AHEAD * group * BLOCK * bits / 8 + 64 * line), _MM_HINT_T0);
  if (bits == 4) return nibble_dots(w, group, steps, stride, rows, dots);
  byte_dots(w, group, steps, stride, rows, dots);
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
