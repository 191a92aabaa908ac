/* The machine's integer multiply-accumulate peak, against which a prefill's rate is read: every
   thread runs a register-only loop of one dot-product instruction on eight independent
   accumulators (no memory traffic, no dependency between them), the most the cores can issue.

   Two instructions per variant: the widest int8 product the instruction set has (`widest` = 1:
   vpdpbusd, 64 byte products, 32 on AVX-VNNI's 256-bit registers; AVX2's vpmaddubsw, 32, its
   16-bit sums added saturating), on which grouped.c's products of nibbles (and on VNNI, of bytes)
   run, and (0) the one AVX2's products of bytes run on: vpmaddwd, 16 (the VNNI variants: the
   same as 1). Returns the multiply-accumulates done, over all threads. */

#include <stdint.h>

#include "group_dots.h"

#define CHAINS 8

static volatile int64_t peak_sink; /* keeps the loop's results live */

int64_t pld_peak(int64_t rounds, int64_t widest) {
  int64_t total = 0;
#pragma omp parallel reduction(+ : total)
  {
    int64_t per = 0, kept = 0;
#if defined(__AVX512VNNI__)
    __m512i acc[CHAINS], a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_epi32(c);
    for (int64_t r = 0; r < rounds; r++)
      for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
    per = 64;
    for (int c = 0; c < CHAINS; c++) kept += _mm512_reduce_add_epi32(acc[c]);
#elif defined(__AVXVNNI__)
    __m256i acc[CHAINS], a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_epi32(c);
    for (int64_t r = 0; r < rounds; r++)
      for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_dpbusd_avx_epi32(acc[c], a, b);
    per = 32;
    for (int c = 0; c < CHAINS; c++) kept += _mm256_extract_epi32(acc[c], 0);
#elif defined(__AVX2__)
    __m256i acc[CHAINS], a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_epi32(c);
    for (int64_t r = 0; r < rounds; r++)
      for (int c = 0; c < CHAINS; c++)
        acc[c] = widest ? _mm256_adds_epi16(acc[c], _mm256_maddubs_epi16(a, b))
                        : _mm256_add_epi32(acc[c], _mm256_madd_epi16(a, b));
    per = widest ? 32 : 16;
    for (int c = 0; c < CHAINS; c++) kept += _mm256_extract_epi32(acc[c], 0);
#else
    int32_t acc[CHAINS][16] = {{0}};
    for (int64_t r = 0; r < rounds; r++)
      for (int c = 0; c < CHAINS; c++)
        for (int e = 0; e < 16; e++) acc[c][e] += (int32_t)(r + e) * (int32_t)(c - e);
    per = 16;
    for (int c = 0; c < CHAINS; c++) kept += acc[c][0] + acc[c][15];
    (void)widest;
#endif
    peak_sink = kept;
    total += rounds * CHAINS * per;
  }
  return total;
}
