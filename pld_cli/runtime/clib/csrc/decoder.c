/* The decoder layers of a decode or verify pass over int8 weights in groups, in one call.

   A one-position pass is bound by reading its int8 weights, but torch's forward around the
   kernels cost as much again (a hundred small operations per layer, each a dispatch; figures in
   docs/design-measurements.md). Here the whole pass is C: per layer the RMSNorm,
   the q/k/v product (grouped_int8.c), bias, q/k norms (Qwen3), the rotation, the cache writes,
   attention (row_attention.c), the output product, the residual, and the gated SiLU MLP.

   Every step computes each row from that row alone in a fixed order (the products and attention
   by construction, the norms and element-wise steps one row at a time), so a row of a verify
   pass gets the bits a pass over that row alone gives it: pld's output equals --no-pld's.
   Prefills of more than one position run the torch forward over the same kernel; they are the
   same for both. */

/* Built only where the int8 kernel is (grouped_int8.c): without it the library keeps the row
   attention and pld runs the torch forward. */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <immintrin.h>

#include "vector_exp.h"

int grouped_int8_mm(const float* x, int64_t M, const uint8_t* q, const float* scales,
                    const float* offsets, int64_t N, int64_t K, float* y);
int attend_rows(const float* query, const float* keys, const float* values, int64_t heads,
                 int64_t kv_heads, int64_t rows, int64_t d, int64_t stride, int64_t first,
                 float scale, float* out);

/* A GroupedInt8Matrix [rows, cols] (see grouped_int8.c) and its bias [rows] (NULL: none). */
typedef struct {
  const uint8_t* values;
  const float* scales;
  const float* offsets;
  const float* bias;
  int64_t rows, cols;
} Matrix;

typedef struct {
  const float* attention_norm; /* [hidden] */
  const float* q_norm;         /* [head_dim], NULL where the family has none (as k_norm) */
  const float* k_norm;
  const float* mlp_norm; /* [hidden] */
  Matrix qkv, out, gate_up, down;
} Block;

typedef struct {
  int64_t layers, hidden, heads, kv_heads, head_dim, slots;
  float eps, scaling;
  const Block* blocks;
  float* keys; /* [layers, kv_heads, slots, head_dim], as values */
  float* values;
  const float* cos; /* [positions, head_dim], as sin */
  const float* sin;
} Decoder;

/* y [rows, N] = x [rows, K] @ W.T + bias */
static int product(const Matrix* m, const float* x, int64_t rows, float* y) {
  if (grouped_int8_mm(x, rows, m->values, m->scales, m->offsets, m->rows, m->cols, y) != 0)
    return -1;
  if (m->bias)
    for (int64_t i = 0; i < rows; i++)
      for (int64_t n = 0; n < m->rows; n++) y[i * m->rows + n] += m->bias[n];
  return 0;
}

/* transformers' RMSNorm of one vector: x * (1 / sqrt(mean(x^2) + eps)), times the weight. */
static void rms_norm(const float* x, int64_t n, const float* weight, float eps, float* out) {
  float squares = 0;
  for (int64_t e = 0; e < n; e++) squares += x[e] * x[e];
  float scale = 1.0f / sqrtf(squares / (float)n + eps);
  for (int64_t e = 0; e < n; e++) out[e] = weight[e] * (x[e] * scale);
}

/* The rotary embedding of one head [d] in place, as transformers' rotate_half applies it. */
static void rotate(float* x, int64_t d, const float* cos, const float* sin) {
  int64_t half = d / 2;
  for (int64_t e = 0; e < half; e++) {
    float first = x[e], second = x[e + half];
    x[e] = first * cos[e] - second * sin[e];
    x[e + half] = second * cos[e + half] + first * sin[e + half];
  }
}

/* out [n] = silu(gate) * up, silu(g) = g sigmoid(g), through e = e^-|g| (no overflow): sigmoid(g)
   is 1 / (1 + e) for g >= 0 and e / (1 + e) below (no cancellation). */
static void gated_silu(const float* gate, const float* up, int64_t n, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t e = 0; e < n; e += 16) {
    __mmask16 in = n - e >= 16 ? 0xFFFF : (__mmask16)((1u << (n - e)) - 1);
    __m512 g = _mm512_maskz_loadu_ps(in, gate + e);
    __m512 small = exp16(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g)));
    __m512 below = _mm512_div_ps(one, _mm512_add_ps(one, small)); /* sigmoid(|g|) */
    __mmask16 negative = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ);
    __m512 sigmoid = _mm512_mask_mul_ps(below, negative, small, below);
    __m512 out16 = _mm512_mul_ps(_mm512_mul_ps(g, sigmoid), _mm512_maskz_loadu_ps(in, up + e));
    _mm512_mask_storeu_ps(out + e, in, out16);
  }
}

typedef struct {
  float *h, *qkv, *query, *attended, *merged, *y, *gate_up, *act;
} Scratch;

/* Layer l's attention over the normed rows h: writes their keys and values at slots
   start..start+rows-1 and leaves the heads' outputs in s->merged [rows, heads * d]. */
static int attention(const Decoder* m, int64_t l, const Block* b, int64_t rows, int64_t start,
                     Scratch* s) {
  int64_t d = m->head_dim, width = (m->heads + 2 * m->kv_heads) * d;
  float* keys = m->keys + l * m->kv_heads * m->slots * d;
  float* values = m->values + l * m->kv_heads * m->slots * d;
  for (int64_t i = 0; i < rows; i++) {
    float* row = s->qkv + i * width;
    const float *cos = m->cos + (start + i) * d, *sin = m->sin + (start + i) * d;
    for (int64_t h = 0; h < m->heads + m->kv_heads; h++) {
      float* head = row + h * d;
      if (b->q_norm) rms_norm(head, d, h < m->heads ? b->q_norm : b->k_norm, m->eps, head);
      rotate(head, d, cos, sin);
    }
    for (int64_t h = 0; h < m->heads; h++)
      for (int64_t e = 0; e < d; e++) s->query[(h * rows + i) * d + e] = row[h * d + e];
    for (int64_t g = 0; g < m->kv_heads; g++)
      for (int64_t e = 0; e < d; e++) {
        int64_t slot = (g * m->slots + start + i) * d + e;
        keys[slot] = row[(m->heads + g) * d + e];
        values[slot] = row[(m->heads + m->kv_heads + g) * d + e];
      }
  }
  if (attend_rows(s->query, keys, values, m->heads, m->kv_heads, rows, d, m->slots, start + 1,
                  m->scaling, s->attended) != 0)
    return -1;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t h = 0; h < m->heads; h++)
      for (int64_t e = 0; e < d; e++)
        s->merged[(i * m->heads + h) * d + e] = s->attended[(h * rows + i) * d + e];
  return 0;
}

static int layer(const Decoder* m, int64_t l, float* x, int64_t rows, int64_t start, Scratch* s) {
  const Block* b = m->blocks + l;
  int64_t hidden = m->hidden, inner = b->gate_up.rows / 2;
  for (int64_t i = 0; i < rows; i++)
    rms_norm(x + i * hidden, hidden, b->attention_norm, m->eps, s->h + i * hidden);
  if (product(&b->qkv, s->h, rows, s->qkv) != 0) return -1;
  if (attention(m, l, b, rows, start, s) != 0) return -1;
  if (product(&b->out, s->merged, rows, s->y) != 0) return -1;
  for (int64_t e = 0; e < rows * hidden; e++) x[e] = x[e] + s->y[e];
  for (int64_t i = 0; i < rows; i++)
    rms_norm(x + i * hidden, hidden, b->mlp_norm, m->eps, s->h + i * hidden);
  if (product(&b->gate_up, s->h, rows, s->gate_up) != 0) return -1;
  for (int64_t i = 0; i < rows; i++) {
    const float* gate = s->gate_up + i * 2 * inner;
    gated_silu(gate, gate + inner, inner, s->act + i * inner);
  }
  if (product(&b->down, s->act, rows, s->y) != 0) return -1;
  for (int64_t e = 0; e < rows * hidden; e++) x[e] = x[e] + s->y[e];
  return 0;
}

/* Runs every layer over x [rows, hidden] in place: rows at positions start..start+rows-1, row i
   attending to slots [0, start + i]. Returns 0, or -1 where memory could not be had. */
int decode_rows(const Decoder* m, float* x, int64_t rows, int64_t start) {
  int64_t d = m->head_dim, inner = 0;
  for (int64_t l = 0; l < m->layers; l++)
    inner = m->blocks[l].gate_up.rows / 2 > inner ? m->blocks[l].gate_up.rows / 2 : inner;
  int64_t width = (m->heads + 2 * m->kv_heads) * d, attended = m->heads * d;
  int64_t wide = m->hidden > attended ? m->hidden : attended;
  Scratch s = {
      malloc(sizeof(float) * rows * m->hidden), malloc(sizeof(float) * rows * width),
      malloc(sizeof(float) * rows * attended),  malloc(sizeof(float) * rows * attended),
      malloc(sizeof(float) * rows * attended),  malloc(sizeof(float) * rows * wide),
      malloc(sizeof(float) * rows * 2 * inner), malloc(sizeof(float) * rows * inner),
  };
  float* all[] = {s.h, s.qkv, s.query, s.attended, s.merged, s.y, s.gate_up, s.act};
  int code = 0;
  for (int k = 0; k < 8; k++) code |= all[k] == NULL ? -1 : 0;
  for (int64_t l = 0; l < m->layers && code == 0; l++) code = layer(m, l, x, rows, start, &s);
  for (int k = 0; k < 8; k++) free(all[k]);
  return code;
}

#endif
