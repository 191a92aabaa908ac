/* The tables decoder.c runs over, as the Python side (native/decoder.py) builds them; abi.c
   reports their layout, which the Python side checks before the first call. */

#ifndef PLD_DECODER_H
#define PLD_DECODER_H

#include <stdint.h>

#define PLD_ABI_VERSION 7 /* raised with any change of a signature or a table below */

#define SUPER_VALUES 256 /* inputs per factor in the K-quants' form: a K-quant's block */

/* A GroupedMatrix's scales and offsets (grouped.c): float32 per group, or (sub_scales set) a
   float32 factor per `super` groups (SUPER_VALUES inputs) times a signed byte per group, the
   GGUF's K-quant form. */
typedef struct {
  const float* scales;
  const float* offsets;
  const int8_t* sub_scales; /* NULL: scales and offsets are per group */
  const int8_t* sub_offsets;
  int64_t super;
} Scales;

/* A GroupedMatrix [rows, cols] (see grouped.c: `group` inputs per scale, `bits` per weight) and
   its bias (NULL: none); `rest`: NULL, or the matrix of the rows after these, over the same
   inputs (a fused q/k/v whose parts keep layouts of their own: Q4_K q and k, a Q6_K v), the
   bias then the whole's [rows of every part], on the first part. */
typedef struct Matrix {
  const uint8_t* values;
  Scales scales;
  const float* bias;
  const struct Matrix* rest;
  int64_t rows, cols, group, bits;
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
  const float* norm; /* [hidden]: the final norm, after the last layer */
  float* keys; /* [layers, kv_heads, slots, head_dim], as values */
  float* values;
  const float* cos; /* [positions, head_dim], as sin */
  const float* sin;
} Decoder;

/* One document's rows in a pass: `rows` consecutive rows of the pass at positions start..start +
   rows - 1, whose keys and values go to cache slots base + start.. (the document's own region of
   the cache begins at slot `base`), attending to that region's slots [base, base + start + i]. */
typedef struct {
  int64_t rows, base, start;
} Segment;

int grouped_mm(const float* x, int64_t M, const Matrix* w, float* y);
int grouped_mm_into(const float* x, int64_t M, const Matrix* w, float* y, int64_t stride);
int attend_rows(const float* query, const float* keys, const float* values, int64_t heads,
                int64_t kv_heads, int64_t rows, int64_t d, int64_t stride, int64_t first,
                float scale, float* out);
int decode_rows(const Decoder* m, float* x, const Segment* segments, int64_t count);

#endif
