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
#include "spread.h"

#define CHUNK 256 /* cache slots per task: a row's split depends on its own length only */
#define MAXD 256

static const float LANE[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

#define INLINE static inline __attribute__((always_inline))
#define BLOCK_ROWS 4 /* the most rows of a task: as many as keep their sums in registers */

/* Rows per task for head size d: consecutive rows share each slot's key and value while they
   are in the core's nearest cache (one row per task read them all from farther away). */
static int64_t block_rows(int64_t d) { return d == 64 ? 4 : d == 128 ? 2 : 1; }

/* The lane partials of q . key (q as `lanes` vectors): product and sum per lane, 16 lanes apart
   (vf_sum ends it). */
INLINE vf16 slot_lanes(const vf16* q, const float* key, int64_t lanes) {
  vf16 acc = vf_mul(q[0], vf_load(key));
  for (int64_t t = 1; t < lanes; t++) acc = vf_muladd(q[t], vf_load(key + 16 * t), acc);
  return acc;
}

/* Scores of `here` (up to 16) slots from `key` [here, d] into out, their max into top. */
INLINE void score_block(const vf16* q, const float* key, int64_t d, int64_t here, float scale,
                        float* out, vf16* top) {
  vf16 acc[16];
  if (here == 16) /* a whole block: no test per slot */
    for (int64_t s = 0; s < 16; s++) acc[s] = slot_lanes(q, key + s * d, d / 16);
  else
    for (int64_t s = 0; s < 16; s++) acc[s] = s < here ? slot_lanes(q, key + s * d, d / 16) : vf_zero();
  vf16 scores = vf_mul(vf_sums16(acc), vf_set1(scale)); /* simd.h: vf_sum of each slot */
  vf_store_n(out, scores, here);
  vf16 past = vf_sub(vf_load(LANE), vf_set1((float)here)); /* >= 0 past the last slot */
  *top = vf_max(*top, vf_if_negative(past, scores, vf_set1(-INFINITY)));
}

/* `count` consecutive query rows q [count, d] over the slots from `from` of keys/values [*, d],
   row r over n[r] of them (n ascending, 1..CHUNK): each row's max score, sum of e^(score - max)
   and the e^(score - max)-weighted sum of values into its partial p + r * stride ([max, sum,
   out [d]]). Each row's arithmetic is the one-row task's, in the same order; the rows only share
   the loads. d and count are constants where inlined, so the sums stay in registers. */
INLINE void chunk_of(const float* q, const float* k, const float* v, int64_t d, int64_t from,
                     const int64_t* n, int count, float scale, float* p, int64_t stride) {
  float score[BLOCK_ROWS][CHUNK] __attribute__((aligned(64)));
  int64_t lanes = d / 16, least = n[0], most = n[count - 1];
  vf16 qv[BLOCK_ROWS][MAXD / 16], tops[BLOCK_ROWS], total[BLOCK_ROWS], o[BLOCK_ROWS][MAXD / 16];
  for (int r = 0; r < count; r++) {
    tops[r] = vf_set1(-INFINITY);
    total[r] = vf_zero();
    for (int64_t t = 0; t < lanes; t++) qv[r][t] = vf_load(q + r * d + 16 * t), o[r][t] = vf_zero();
  }
  for (int64_t j = 0; j < most; j += 16) /* 16 slots' keys, then each row that sees them */
    for (int r = 0; r < count; r++)
      if (j < n[r])
        score_block(qv[r], k + (from + j) * d, d, n[r] - j < 16 ? n[r] - j : 16, scale,
                    score[r] + j, &tops[r]);
  for (int r = 0; r < count; r++) {
    float top = vf_max_all(tops[r]);
    for (int64_t j = 0; j < n[r]; j += 16) {
      vf16 e = vf_exp(vf_sub(vf_load_n(score[r] + j, n[r] - j), vf_set1(top)));
      vf_store_n(score[r] + j, e, n[r] - j);
      total[r] = vf_add(total[r], vf_load_n(score[r] + j, n[r] - j)); /* lanes past n: 0 */
    }
    p[r * stride] = top;
  }
  for (int64_t j = 0; j < least; j++) { /* slots every row sees: each value loaded once */
    vf16 vj[MAXD / 16];
    for (int64_t t = 0; t < lanes; t++) vj[t] = vf_load(v + (from + j) * d + 16 * t);
    for (int r = 0; r < count; r++) {
      vf16 w = vf_set1(score[r][j]);
      for (int64_t t = 0; t < lanes; t++) o[r][t] = vf_muladd(w, vj[t], o[r][t]);
    }
  }
  for (int r = 1; r < count; r++) /* the diagonal: slots only the later rows see */
    for (int64_t j = least; j < n[r]; j++) {
      vf16 w = vf_set1(score[r][j]);
      for (int64_t t = 0; t < lanes; t++)
        o[r][t] = vf_muladd(w, vf_load(v + (from + j) * d + 16 * t), o[r][t]);
    }
  for (int r = 0; r < count; r++) {
    p[r * stride + 1] = vf_sum(total[r]);
    for (int64_t t = 0; t < lanes; t++) vf_store(p + r * stride + 2 + 16 * t, o[r][t]);
  }
}

/* chunk_of with d and count constants for the head sizes block_rows groups. */
static void chunk(const float* q, const float* k, const float* v, int64_t d, int64_t from,
                  const int64_t* n, int count, float scale, float* p, int64_t stride) {
#define CHUNK_OF(dim, rows) chunk_of(q, k, v, dim, from, n, rows, scale, p, stride)
  if (d == 64 && count == 4) CHUNK_OF(64, 4);
  else if (d == 64 && count == 3) CHUNK_OF(64, 3);
  else if (d == 64 && count == 2) CHUNK_OF(64, 2);
  else if (d == 64) CHUNK_OF(64, 1);
  else if (d == 128 && count == 2) CHUNK_OF(128, 2);
  else if (d == 128) CHUNK_OF(128, 1);
  else CHUNK_OF(d, 1);
#undef CHUNK_OF
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
  int64_t per = block_rows(d), blocks = (rows + per - 1) / per, tasks = heads * blocks * most;
  float* part = malloc(sizeof(float) * heads * rows * most * (d + 2));
  if (part == NULL) return -1;
  /* Tasks by head, then chunk, then block of rows: a thread's consecutive tasks read the same
     chunk of slots, which stays in its cache while the rows of a long prompt go by (in row
     order, a prompt of 8192 read its cache anew for every row). Each row's arithmetic is the
     same in any order and in any block. */
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; t++) {
    int64_t b = t % blocks, c = (t / blocks) % most, h = t / (most * blocks), from = c * CHUNK;
    int64_t i = b * per, end = i + per < rows ? i + per : rows, n[BLOCK_ROWS];
    for (; i < end && first + i <= from; i++) { /* rows that see none of the chunk */
      float* p = part + ((h * rows + i) * most + c) * (d + 2);
      p[0] = -INFINITY;
      p[1] = 0;
    }
    if (i == end) continue;
    for (int64_t r = i; r < end; r++) n[r - i] = first + r - from < CHUNK ? first + r - from : CHUNK;
    const float *k = keys + (h / groups) * stride * d, *v = values + (h / groups) * stride * d;
    chunk(query + (h * rows + i) * d, k, v, d, from, n, (int)(end - i), scale,
          part + ((h * rows + i) * most + c) * (d + 2), most * (d + 2));
  }
#pragma omp parallel for schedule(static) if (rows >= SPREAD_ROWS)
  for (int64_t r = 0; r < heads * rows; r++) /* r: head r / rows, row r % rows */
    combine(part + r * most * (d + 2), (first + r % rows + CHUNK - 1) / CHUNK, d, out + r * d);
  free(part);
  return 0;
}
