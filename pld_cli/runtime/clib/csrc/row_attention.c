/* Attention for decode and verify passes on a CPU, each row as a pass over that row alone.

   pld's exactness needs each row of a verify pass to get what a one-position pass gives it; sdpa
   rounds a batch differently, so verify passes ran it once per row (30 layers x rows calls). Here
   every row's result is a function of its own query, its own number of visible slots and the
   cache alone: its slots are split into chunks of CHUNK (by position, never by the number of rows
   or threads), each chunk's softmax partial computed in one fixed order, and the chunks combined
   in order. Rows and chunks run in parallel over OpenMP (torch's own runtime: same soname).

   Built at run time with -march=native (../library.py); without AVX-512 it does not compile and pld
   keeps sdpa. */

#if !defined(__AVX512F__)
#error "needs AVX-512"
#endif

#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include <immintrin.h>

#include "vector_exp.h"

#define CHUNK 256 /* cache slots per task: a row's split depends on its own length only */
#define MAXD 256

/* One query row q [d] over slots [from, to) of keys/values [*, d]: the chunk's max score, sum of
   e^(score - max) and the e^(score - max)-weighted sum of values, out [d]. d a multiple of 16. */
static void chunk(const float* q, const float* k, const float* v, int64_t d, int64_t from, int64_t to,
                  float scale, float* m_out, float* s_out, float* out) {
  float score[CHUNK] __attribute__((aligned(64)));
  int64_t n = to - from, lanes = d / 16;
  float top = -INFINITY;
  for (int64_t j = 0; j < n; j++) {
    const float* kj = k + (from + j) * d;
    __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(q), _mm512_loadu_ps(kj));
    for (int64_t t = 1; t < lanes; t++) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * t), _mm512_loadu_ps(kj + 16 * t), acc);
    score[j] = _mm512_reduce_add_ps(acc) * scale;
    top = fmaxf(top, score[j]);
  }
  for (int64_t j = n; j < (n + 15) / 16 * 16; j++) score[j] = -INFINITY;
  __m512 total = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    __m512 e = exp16(_mm512_sub_ps(_mm512_load_ps(score + j), _mm512_set1_ps(top)));
    e = _mm512_maskz_mov_ps(n - j >= 16 ? 0xFFFF : (__mmask16)((1u << (n - j)) - 1), e);
    _mm512_store_ps(score + j, e);
    total = _mm512_add_ps(total, e);
  }
  __m512 o[MAXD / 16];
  for (int64_t t = 0; t < lanes; t++) o[t] = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j++) {
    const float* vj = v + (from + j) * d;
    __m512 p = _mm512_set1_ps(score[j]);
    for (int64_t t = 0; t < lanes; t++) o[t] = _mm512_fmadd_ps(p, _mm512_loadu_ps(vj + 16 * t), o[t]);
  }
  for (int64_t t = 0; t < lanes; t++) _mm512_storeu_ps(out + 16 * t, o[t]);
  *m_out = top; *s_out = _mm512_reduce_add_ps(total);
}

/* Attention of query [heads, rows, d] over keys/values [kv_heads, stride, d]: row i sees slots
   [0, first + i), each row computed as a pass over that row alone computes it. out [heads, rows, d].
   Returns 0, or -1 where memory for the chunks' partials could not be had. */
int attend_rows(const float* query, const float* keys, const float* values, int64_t heads,
                 int64_t kv_heads, int64_t rows, int64_t d, int64_t stride, int64_t first,
                 float scale, float* out) {
  int64_t last = first + rows - 1, most = (last + CHUNK - 1) / CHUNK, groups = heads / kv_heads;
  int64_t tasks = heads * rows * most;
  float* part = malloc(sizeof(float) * tasks * (d + 2));
  if (part == NULL) return -1;
  #pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; t++) {
    int64_t c = t % most, i = (t / most) % rows, h = t / (most * rows);
    int64_t seen = first + i, from = c * CHUNK, to = from + CHUNK < seen ? from + CHUNK : seen;
    float* p = part + t * (d + 2);
    if (from >= seen) { p[0] = -INFINITY; p[1] = 0; continue; }
    const float* kv = keys + (h / groups) * stride * d;
    chunk(query + (h * rows + i) * d, kv, values + (h / groups) * stride * d, d, from, to, scale, p, p + 1, p + 2);
  }
  for (int64_t h = 0; h < heads; h++)
    for (int64_t i = 0; i < rows; i++) {
      float* p = part + (h * rows + i) * most * (d + 2);
      int64_t chunks = (first + i + CHUNK - 1) / CHUNK;
      float top = -INFINITY, total = 0;
      for (int64_t c = 0; c < chunks; c++) top = fmaxf(top, p[c * (d + 2)]);
      float* o = out + (h * rows + i) * d;
      for (int64_t e = 0; e < d; e++) o[e] = 0;
      for (int64_t c = 0; c < chunks; c++) {
        float w = expf(p[c * (d + 2)] - top);
        total += w * p[c * (d + 2) + 1];
        for (int64_t e = 0; e < d; e++) o[e] += w * p[c * (d + 2) + 2 + e];
      }
      for (int64_t e = 0; e < d; e++) o[e] /= total;
    }
  free(part);
  return 0;
}
