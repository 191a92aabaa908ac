/* The decoder layers of a pass over int8 weights in groups, in one call.

   A one-position pass is bound by reading its int8 weights, but torch's forward around the
   kernels cost as much again (a hundred small operations per layer, each a dispatch; figures in
   docs/design-measurements.md). Here the whole pass is C: per layer the RMSNorm,
   the q/k/v product (grouped.c), bias, q/k norms (Qwen3), the rotation, the cache writes,
   attention (row_attention.c), the output product, the residual, and the gated SiLU MLP; after
   the last layer the final norm, so what leaves is the LM head's input and no float step between
   the embedding and the head runs in torch (whose sums take the order its kernels choose, per
   version and instruction set: nothing it promises).

   Every step computes each row from that row alone in a fixed order (the products and attention
   by construction, the norms and element-wise steps one row at a time), so a row of a verify
   pass gets the bits a pass over that row alone gives it: pld's output equals --no-pld's.
   Prefills run here too, so a prompt's rows are computed the same way whether it enters the cache
   in one pass or in slices beside other documents' rows (decoder.h's segments: each document its
   own positions and cache region, attending to its own region alone). */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "decoder.h"
#include "simd.h"
#include "spread.h"

/* The outputs of a matrix and the parts after it (decoder.h: `rest`); 0 where a part's inputs
   differ from the first's. */
static int64_t outputs_of(const Matrix* m) {
  int64_t N = 0;
  for (const Matrix* part = m; part; part = part->rest) {
    if (part->cols != m->cols) return 0;
    N += part->rows;
  }
  return N;
}

/* y [rows, N] = x [rows, K] @ W.T + bias, each part of W into its own columns of y. */
static int product(const Matrix* m, const float* x, int64_t rows, float* y) {
  const int64_t N = outputs_of(m);
  int64_t first = 0;
  for (const Matrix* part = m; part; part = part->rest) {
    int code = grouped_mm_into(x, rows, part, y + first, N);
    if (code != 0) return code;
    first += part->rows;
  }
  if (m->bias)
    for (int64_t i = 0; i < rows; i++)
      for (int64_t n = 0; n < N; n++) y[i * N + n] += m->bias[n];
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
  const vf16 one = vf_set1(1.0f);
  for (int64_t e = 0; e < n; e += 16) {
    vf16 g = vf_load_n(gate + e, n - e);
    vf16 small = vf_exp(vf_sub(vf_zero(), vf_abs(g)));
    vf16 below = vf_div(one, vf_add(one, small)); /* sigmoid(|g|) */
    vf16 sigmoid = vf_if_negative(g, vf_mul(small, below), below);
    vf_store_n(out + e, vf_mul(vf_mul(g, sigmoid), vf_load_n(up + e, n - e)), n - e);
  }
}

typedef struct {
  float *h, *qkv, *query, *attended, *merged, *y, *gate_up, *act;
} Scratch;

/* One segment's rows of q/k/v (in place: q/k norms, rotations at their positions) into its
   queries [heads, rows, d] and its cache region's slots. */
static void place(const Decoder* m, const Block* b, const Segment* g, float* qkv, float* keys,
                  float* values, float* query) {
  int64_t d = m->head_dim, width = (m->heads + 2 * m->kv_heads) * d;
#pragma omp parallel for schedule(static) if (g->rows >= SPREAD_ROWS)
  for (int64_t i = 0; i < g->rows; i++) {
    float* row = qkv + i * width;
    int64_t position = g->start + i;
    const float *cos = m->cos + position * d, *sin = m->sin + position * d;
    for (int64_t h = 0; h < m->heads + m->kv_heads; h++) {
      float* head = row + h * d;
      if (b->q_norm) rms_norm(head, d, h < m->heads ? b->q_norm : b->k_norm, m->eps, head);
      rotate(head, d, cos, sin);
    }
    for (int64_t h = 0; h < m->heads; h++)
      for (int64_t e = 0; e < d; e++) query[(h * g->rows + i) * d + e] = row[h * d + e];
    for (int64_t h = 0; h < m->kv_heads; h++)
      for (int64_t e = 0; e < d; e++) {
        int64_t slot = (h * m->slots + g->base + position) * d + e;
        keys[slot] = row[(m->heads + h) * d + e];
        values[slot] = row[(m->heads + m->kv_heads + h) * d + e];
      }
  }
}

/* Layer l's attention over the pass's q/k/v rows (s->qkv), segment after segment: each writes its
   keys and values into its own cache region and attends to that region alone. Leaves the heads'
   outputs in s->merged [rows, heads * d]. */
static int attention(const Decoder* m, int64_t l, const Block* b, const Segment* segments,
                     int64_t count, Scratch* s) {
  int64_t d = m->head_dim, width = (m->heads + 2 * m->kv_heads) * d;
  float* keys = m->keys + l * m->kv_heads * m->slots * d;
  float* values = m->values + l * m->kv_heads * m->slots * d;
  int64_t first = 0; /* the segment's first row in the pass */
  for (int64_t c = 0; c < count; c++) {
    const Segment* g = segments + c;
    float* query = s->query + first * m->heads * d; /* [heads, g->rows, d] */
    float* attended = s->attended + first * m->heads * d;
    place(m, b, g, s->qkv + first * width, keys, values, query);
    int code = attend_rows(query, keys + g->base * d, values + g->base * d, m->heads,
                           m->kv_heads, g->rows, d, m->slots, g->start + 1, m->scaling, attended);
    if (code != 0) return code;
#pragma omp parallel for schedule(static) if (g->rows >= SPREAD_ROWS)
    for (int64_t i = 0; i < g->rows; i++)
      for (int64_t h = 0; h < m->heads; h++)
        for (int64_t e = 0; e < d; e++)
          s->merged[((first + i) * m->heads + h) * d + e] = attended[(h * g->rows + i) * d + e];
    first += g->rows;
  }
  return 0;
}

/* Row i of x [rows, hidden] += y's row i, then its RMSNorm into h (the next step's input). */
static void add_and_norm(float* x, const float* y, int64_t i, int64_t hidden, const float* weight,
                         float eps, float* h) {
  float* row = x + i * hidden;
  if (y)
    for (int64_t e = 0; e < hidden; e++) row[e] = row[e] + y[i * hidden + e];
  if (weight) rms_norm(row, hidden, weight, eps, h + i * hidden);
}

/* The row-wise steps between products: (x += y), then h = norm(x), each row on its own (so on
   any core: the same bits). A pass of SPREAD_ROWS rows or more spreads them over the cores. */
static void rows_add_and_norm(float* x, const float* y, int64_t rows, int64_t hidden,
                              const float* weight, float eps, float* h) {
#pragma omp parallel for schedule(static) if (rows >= SPREAD_ROWS)
  for (int64_t i = 0; i < rows; i++) add_and_norm(x, y, i, hidden, weight, eps, h);
}

static int layer(const Decoder* m, int64_t l, float* x, int64_t rows, const Segment* segments,
                 int64_t count, Scratch* s) {
  const Block* b = m->blocks + l;
  int64_t hidden = m->hidden, inner = outputs_of(&b->gate_up) / 2;
  rows_add_and_norm(x, NULL, rows, hidden, b->attention_norm, m->eps, s->h);
  int code = product(&b->qkv, s->h, rows, s->qkv);
  if (code == 0) code = attention(m, l, b, segments, count, s);
  if (code == 0) code = product(&b->out, s->merged, rows, s->y);
  if (code != 0) return code;
  rows_add_and_norm(x, s->y, rows, hidden, b->mlp_norm, m->eps, s->h);
  code = product(&b->gate_up, s->h, rows, s->gate_up);
  if (code != 0) return code;
#pragma omp parallel for schedule(static) if (rows >= SPREAD_ROWS)
  for (int64_t i = 0; i < rows; i++) {
    const float* gate = s->gate_up + i * 2 * inner;
    gated_silu(gate, gate + inner, inner, s->act + i * inner);
  }
  code = product(&b->down, s->act, rows, s->y);
  if (code == 0) rows_add_and_norm(x, s->y, rows, hidden, NULL, m->eps, NULL);
  return code;
}

/* Whether every layer's matrices have the shapes the model's sizes give them (and the final norm
   is there). */
static int shapes_agree(const Decoder* m) {
  int64_t d = m->head_dim, attended = m->heads * d;
  int ok = m->layers > 0 && m->hidden > 0 && m->kv_heads > 0 && m->heads % m->kv_heads == 0 &&
           m->norm != NULL;
  for (int64_t l = 0; ok && l < m->layers; l++) {
    const Block* b = m->blocks + l;
    const int64_t gate_up = outputs_of(&b->gate_up);
    ok = outputs_of(&b->qkv) == attended + 2 * m->kv_heads * d && b->qkv.cols == m->hidden &&
         outputs_of(&b->out) == m->hidden && b->out.cols == attended &&
         b->gate_up.cols == m->hidden && gate_up % 2 == 0 && b->down.cols == gate_up / 2 &&
         outputs_of(&b->down) == m->hidden;
  }
  return ok;
}

/* Whether the segments have rows and lie in the cache, each within its own region's slots. */
static int64_t rows_of(const Decoder* m, const Segment* segments, int64_t count) {
  int64_t rows = 0;
  for (int64_t c = 0; c < count; c++) {
    const Segment* g = segments + c;
    if (g->rows <= 0 || g->start < 0 || g->base < 0 || g->base + g->start + g->rows > m->slots)
      return -1;
    rows += g->rows;
  }
  return count > 0 ? rows : -1;
}

/* Runs every layer over x [rows, hidden] in place, the rows of each segment in turn (decoder.h:
   each document's rows, positions and cache region), then the final norm over each row (in place:
   rms_norm reads a row's squares before it writes), leaving the LM head's input. Returns 0, -1
   where memory could not be had, -2 where the table's sizes disagree (with each other, the kernels
   or the cache). */
int decode_rows(const Decoder* m, float* x, const Segment* segments, int64_t count) {
  int64_t rows = rows_of(m, segments, count);
  if (rows <= 0 || !shapes_agree(m)) return -2;
  int64_t d = m->head_dim, inner = 0;
  for (int64_t l = 0; l < m->layers; l++) {
    int64_t its = outputs_of(&m->blocks[l].gate_up) / 2;
    inner = its > inner ? its : inner;
  }
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
  for (int64_t l = 0; l < m->layers && code == 0; l++)
    code = layer(m, l, x, rows, segments, count, &s);
  if (code == 0) rows_add_and_norm(x, NULL, rows, m->hidden, m->norm, m->eps, x);
  for (int k = 0; k < 8; k++) free(all[k]);
  return code;
}
