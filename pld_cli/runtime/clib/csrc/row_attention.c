/* Attention for decode and verify passes on a CPU, each row as a pass over that row alone.

   pld's exactness needs each row of a verify pass to get what a one-position pass gives it; sdpa
   rounds a batch differently, so verify passes ran it once per row (30 layers x rows calls). Here
   every row's result is a function of its own query, its own number of visible slots and the
   cache alone: its slots are split into chunks of CHUNK (by position, never by the number of rows
   or threads), each chunk's softmax partial computed in one fixed order (simd.h's lanes and
   trees, so every variant gives the same bits), and the chunks combined in order. Rows and chunks
   run in parallel over OpenMP (torch's own runtime: same soname). */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "simd.h"

#define CHUNK 256 /* cache slots per task: a row's split depends on its own length only */
#define MAXD 256

static const float LANE[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

#define INLINE static inline __attribute__((always_inline))

/* The lane partials of q . key (q as `lanes` vectors): product and sum per lane, 16 lanes apart
   (vf_sum ends it). */
INLINE vf16 slot_lanes(const vf16* q, const float* key, int64_t lanes) {
  vf16 acc = vf_mul(q[0], vf_load(key));
  for (int64_t t = 1; t < lanes; t++) acc = vf_muladd(q[t], vf_load(key + 16 * t), acc);
  return acc;
}

/* One query row q [d] over slots [from, to) of keys/values [*, d]: the chunk's max score, sum of
   e^(score - max) and the e^(score - max)-weighted sum of values, out [d]. d a multiple of 16; a
   constant where inlined, so the lanes unroll and stay in registers. */
INLINE void chunk_of(const float* q, const float* k, const float* v, int64_t d, int64_t from,
                     int64_t to, float scale, float* m_out, float* s_out, float* out) {
  float score[CHUNK] __attribute__((aligned(64)));
  int64_t n = to - from, lanes = d / 16;
  vf16 qv[MAXD / 16], tops = vf_set1(-INFINITY);
  for (int64_t t = 0; t < lanes; t++) qv[t] = vf_load(q + 16 * t);
  for (int64_t j = 0; j < n; j += 16) { /* 16 slots' lane sums at once (simd.h: vf_sums16) */
    vf16 acc[16];
    if (j + 16 <= n)
      for (int64_t s = 0; s < 16; s++) acc[s] = slot_lanes(qv, k + (from + j + s) * d, lanes);
    else
      for (int64_t s = 0; s < 16; s++)
        acc[s] = j + s < n ? slot_lanes(qv, k + (from + j + s) * d, lanes) : vf_zero();
    vf16 scores = vf_mul(vf_sums16(acc), vf_set1(scale));
    vf_store_n(score + j, scores, n - j);
    vf16 past = vf_sub(vf_load(LANE), vf_set1((float)(n - j))); /* >= 0 past slot n */
    tops = vf_max(tops, vf_if_negative(past, scores, vf_set1(-INFINITY)));
  }
  float top = vf_max_all(tops);
  vf16 total = vf_zero();
  for (int64_t j = 0; j < n; j += 16) {
    vf16 e = vf_exp(vf_sub(vf_load_n(score + j, n - j), vf_set1(top)));
    vf_store_n(score + j, e, n - j);
    total = vf_add(total, vf_load_n(score + j, n - j)); /* lanes past n: 0 */
  }
  vf16 o[MAXD / 16];
  for (int64_t t = 0; t < lanes; t++) o[t] = vf_zero();
  for (int64_t j = 0; j < n; j++) {
    const float* vj = v + (from + j) * d;
    vf16 p = vf_set1(score[j]);
    for (int64_t t = 0; t < lanes; t++) o[t] = vf_muladd(p, vf_load(vj + 16 * t), o[t]);
  }
  for (int64_t t = 0; t < lanes; t++) vf_store(out + 16 * t, o[t]);
  *m_out = top;
  *s_out = vf_sum(total);
}

/* chunk_of, its head size a constant for the common ones. */
static void chunk(const float* q, const float* k, const float* v, int64_t d, int64_t from,
                  int64_t to, float scale, float* m_out, float* s_out, float* out) {
  if (d == 64)
    chunk_of(q, k, v, 64, from, to, scale, m_out, s_out, out);
  else if (d == 128)
    chunk_of(q, k, v, 128, from, to, scale, m_out, s_out, out);
  else
    chunk_of(q, k, v, d, from, to, scale, m_out, s_out, out);
}

/* Row i's output [d] from its chunks' partials p [chunks][d + 2], in chunk order. */
static void combine(const float* p, int64_t chunks, int64_t d, float* o) {
  float top = -INFINITY, total = 0;
  for (int64_t c = 0; c < chunks; c++) top = fmaxf(top, p[c * (d + 2)]);
  for (int64_t e = 0; e < d; e++) o[e] = 0;
  for (int64_t c = 0; c < chunks; c++) {
    float w = exp_scalar(p[c * (d + 2)] - top);
    total += w * p[c * (d + 2) + 1];
    for (int64_t e = 0; e < d; e++) o[e] += w * p[c * (d + 2) + 2 + e];
  }
  for (int64_t e = 0; e < d; e++) o[e] /= total;
}

/* Attention of query [heads, rows, d] over keys/values [kv_heads, stride, d]: row i sees slots
   [0, first + i), each row computed as a pass over that row alone computes it. out [heads, rows,
   d]. Returns 0, -1 where memory for the chunks' partials could not be had, -2 for sizes it does
   not take (d a multiple of 16 up to MAXD, heads a multiple of kv_heads, rows within stride). */
int attend_rows(const float* query, const float* keys, const float* values, int64_t heads,
                int64_t kv_heads, int64_t rows, int64_t d, int64_t stride, int64_t first,
                float scale, float* out) {
  if (d <= 0 || d % 16 || d > MAXD || kv_heads <= 0 || heads % kv_heads || rows <= 0 ||
      first <= 0 || first + rows - 1 > stride)
    return -2;
  int64_t last = first + rows - 1, most = (last + CHUNK - 1) / CHUNK, groups = heads / kv_heads;
  int64_t tasks = heads * rows * most;
  float* part = malloc(sizeof(float) * tasks * (d + 2));
  if (part == NULL) return -1;
  /* Tasks by head, then chunk, then row: a thread's consecutive tasks read the same chunk of
     slots, which stays in its cache while the rows of a long prompt go by (in row order, a
     prompt of 8192 read its cache anew for every row). Each task's arithmetic is the same in
     any order. */
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; t++) {
    int64_t i = t % rows, c = (t / rows) % most, h = t / (most * rows);
    int64_t seen = first + i, from = c * CHUNK, to = from + CHUNK < seen ? from + CHUNK : seen;
    float* p = part + ((h * rows + i) * most + c) * (d + 2);
    if (from >= seen) {
      p[0] = -INFINITY;
      p[1] = 0;
      continue;
    }
    const float *k = keys + (h / groups) * stride * d, *v = values + (h / groups) * stride * d;
    chunk(query + (h * rows + i) * d, k, v, d, from, to, scale, p, p + 1, p + 2);
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < heads * rows; r++) /* r: head r / rows, row r % rows */
    combine(part + r * most * (d + 2), (first + r % rows + CHUNK - 1) / CHUNK, d, out + r * d);
  free(part);
  return 0;
}
